#!/usr/bin/env python3
"""Sweeps the fusion constants for a table on the recall set's tune split.

Runs `cairn-bench recall --json [--table FILE]` once per combination of
similarity floor x meaning strength x vector weight, and prints, for
each, R@1 on the tune and holdout splits of the groups docs/embeddings.md
reports. The winner is chosen on the tune split only: the best ALL/tune,
among the combinations that lower no tune category below the reference
(today's table at today's constants); ties go to the later in the grid.

The bench reads the constants from the environment only when it was
built with `sweep-hook.patch` applied (SWEEP_FLOOR, SWEEP_MSTR,
SWEEP_WEIGHT, SWEEP_LSTR, SWEEP_K, SWEEP_SESSION); the shipped search
keeps its constants and reads no environment. So:

  git apply tools/embed/sweep-hook.patch
  cargo build --release -p cairn-bench --config profile.release.lto=false \\
      --config profile.release.codegen-units=16
  git apply -R tools/embed/sweep-hook.patch
  python3 tools/embed/sweep.py target/release/cairn-bench [--table T.bin] \\
      [--floor 0.2,0.3,0.4] [--strength 1,2,4,8] [--weight 0.4,0.6,0.8,1.0]

Dev time only; reads the evaluation set only to evaluate.
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


def run(bench: str, table: str | None, env: dict) -> dict:
    cmd = [bench, "recall", "--json"] + (["--table", table] if table else [])
    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    figures = json.loads(out[out.index("\n{") + 1 :])
    return {k: v["r_at_1"] * 100 for k, v in figures.items()}


def cell(r: dict, group: str) -> str:
    t, h = r.get(f"{group}/tune"), r.get(f"{group}/holdout")
    if group == "ALL":
        t, h = r.get("ALL/tune"), r.get("ALL/holdout")
    return f"{t:.1f} / {h:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--table")
    ap.add_argument("--floor", default="0.2,0.3,0.4")
    ap.add_argument("--strength", default="1,2,4,8")
    ap.add_argument("--weight", default="0.4,0.6,0.8,1.0")
    ap.add_argument("--extra", default="", help="more VAR=value pairs for every run, comma-separated")
    a = ap.parse_args()
    extra = dict(kv.split("=", 1) for kv in a.extra.split(",") if kv)

    ref = run(a.bench, None, {})
    print("reference (built-in table, shipped constants):", cell(ref, "ALL"), file=sys.stderr)
    print("| floor / strength / weight | " + " | ".join(GROUPS) + " | lowered tune categories |")
    print("|---" * (len(GROUPS) + 2) + "|")
    best = None
    grid = itertools.product(a.floor.split(","), a.strength.split(","), a.weight.split(","))
    for floor, strength, weight in grid:
        env = {"SWEEP_FLOOR": floor, "SWEEP_MSTR": strength, "SWEEP_WEIGHT": weight, **extra}
        r = run(a.bench, a.table, env)
        lowered = [c for c in CATEGORIES if r.get(f"{c}/tune", 0) < ref.get(f"{c}/tune", 0) - 1e-9]
        row = " | ".join(cell(r, g) for g in GROUPS)
        print(f"| {floor} / {strength} / {weight} | {row} | {', '.join(lowered) or '-'} |", flush=True)
        if not lowered and (best is None or r["ALL/tune"] >= best[1]["ALL/tune"]):
            best = ((floor, strength, weight), r)
    if best:
        print(f"best on tune, no category lowered: {'/'.join(best[0])}: ALL {cell(best[1], 'ALL')}", file=sys.stderr)
    else:
        print("every combination lowers a tune category", file=sys.stderr)


if __name__ == "__main__":
    main()
