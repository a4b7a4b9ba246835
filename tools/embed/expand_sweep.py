#!/usr/bin/env python3
"""Sweeps query expansion and relevance feedback on the recall set.

Runs `cairn-bench recall --json` once per combination of the settings
given (each `NAME=v1,v2,...`, the grid their product), with them in the
environment, and prints R@1 per group (tune / holdout) and the tune
categories that fall below the reference run (no variable set). The
bench reads these variables only when built with
`tools/embed/expand-hook.patch` applied (see docs/embeddings.md, "Query
expansion and relevance feedback"); the shipped search reads none.

  git apply tools/embed/expand-hook.patch
  cargo build --release -p cairn-bench --config profile.release.lto=false \\
      --config profile.release.codegen-units=16
  git apply -R tools/embed/expand-hook.patch
  python3 tools/embed/expand_sweep.py target/release/cairn-bench \\
      EXP_K=1,2,3 EXP_FLOOR=0.5,0.6 EXP_W=0.3,0.5 [--split tune]

`tools/embed/lexical-feedback-hook.patch` (LF_M, LF_T, LF_W) applies on
top of the expansion commits instead; RF_* (Rocchio) and EXP_* come with
`expand-hook.patch`, which applies to 111da1a.

`--split tune` prints the tune half only: settings are chosen on it, and
holdout is looked at once, for the settings chosen. Dev time only.
"""

import argparse
import itertools
import json
import os
import subprocess
import sys

GROUPS = ["semantic", "reworded", "reword-lang", "ALL-but-semantic", "ALL"]
CATEGORIES = [
    "date", "exact", "inflect", "paraphrase", "reword-lang", "reword-noun",
    "reword-symptom", "reword-whywhat", "semantic", "when", "why",
]


def run(bench: str, env: dict) -> dict:
    out = subprocess.run(
        ["nice", "-n", "19", bench, "recall", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    figures = json.loads(out[out.index("\n{") + 1 :])
    return {k: v["r_at_1"] * 100 for k, v in figures.items()}


def cell(r: dict, group: str, split: str | None) -> str:
    t, h = r.get(f"{group}/tune", float("nan")), r.get(f"{group}/holdout", float("nan"))
    return f"{t:.1f}" if split == "tune" else f"{t:.1f} / {h:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("grid", nargs="*", help="NAME=v1,v2,...")
    ap.add_argument("--split", choices=["tune", "both"], default="tune")
    a = ap.parse_intermixed_args()
    split = None if a.split == "both" else "tune"
    names = [g.split("=", 1)[0] for g in a.grid]
    values = [g.split("=", 1)[1].split(",") for g in a.grid]

    ref = run(a.bench, {})
    print("| settings | " + " | ".join(GROUPS) + " | tune categories lowered | raised |")
    print("|---" * (len(GROUPS) + 3) + "|")
    print("| reference | " + " | ".join(cell(ref, g, split) for g in GROUPS) + " | - | - |", flush=True)
    for combo in itertools.product(*values):
        env = dict(zip(names, combo))
        r = run(a.bench, env)
        lowered = [c for c in CATEGORIES if r.get(f"{c}/tune", 0) < ref.get(f"{c}/tune", 0) - 1e-9]
        raised = [c for c in CATEGORIES if r.get(f"{c}/tune", 0) > ref.get(f"{c}/tune", 0) + 1e-9]
        label = " ".join(f"{k}={v}" for k, v in env.items())
        row = " | ".join(cell(r, g, split) for g in GROUPS)
        print(f"| {label} | {row} | {', '.join(lowered) or '-'} | {', '.join(raised) or '-'} |", flush=True)
    _ = sys


if __name__ == "__main__":
    main()
