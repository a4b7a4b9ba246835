#!/usr/bin/env python3
"""Pasted-passage probe: does a line pasted from a history find a session
that says it?

Samples lines of 6-16 words from the messages of a `gencorpus.py` corpus
(only lines whose words are all English words, so that the generator's
invented words, which are unique and make any look-up easy, stay out),
asks each unquoted with `cairn search --no-refresh`, and counts the
questions whose first session says it word for word (one of those the
quoted line finds, or, for a line said in more sessions than a search
ranks, the quoted line asked within that session). A line no record says
as a phrase is left out.

Usage (HOME and CAIRN_HOME of a home that indexed the corpus):
  python3 tools/bench/paste_probe.py CORPUS_DIR CAIRN_BIN [--n 80] [--seed 11]
Words: node/assets/embed/neighbours.txt (every word it names).
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import time
from pathlib import Path

WORDS = Path(__file__).resolve().parents[2] / "node" / "assets" / "embed" / "neighbours.txt"


def texts(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("text", "content", "output") and isinstance(v, str):
                yield v
            else:
                yield from texts(v)
    elif isinstance(o, list):
        for v in o:
            yield from texts(v)


def sample(root: str, n: int, seed: int) -> list:
    words = set(WORDS.read_text().split("\n", 1)[1].split())
    rng = random.Random(seed)
    files = sorted(str(p) for p in Path(root).rglob("*.jsonl"))
    out, tries = [], 0
    while len(out) < n and tries < 100 * n:
        tries += 1
        lines = Path(rng.choice(files)).read_text(errors="replace").splitlines()
        try:
            item = json.loads(rng.choice(lines))
        except ValueError:
            continue
        found = [
            line.strip()
            for t in texts(item)
            for line in t.splitlines()
            if 6 <= len(line.split()) <= 16
            and '"' not in line
            and all(w.lower() in words for w in re.findall(r"[A-Za-z]+", line))
        ]
        if found:
            out.append(rng.choice(found))
    return out


def search(binary: str, q: str, n: int, session: str = ""):
    t = time.perf_counter()
    only = ["--session", session] if session else []
    r = subprocess.run([binary, "search", "--no-refresh", "--json", "-n", str(n), *only, "--", q],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):  # 1: nothing found
        raise SystemExit(f"cairn search failed: {r.stderr.strip()}")
    return [h["session_id"] for h in json.loads(r.stdout)["hits"]], (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("cairn")
    ap.add_argument("--n", type=int, default=80)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    found = asked = 0
    times, missed = [], []
    for q in sample(a.corpus, a.n, a.seed):
        saying, _ = search(a.cairn, f'"{q}"', 500)
        if not saying:
            continue
        top, ms = search(a.cairn, q, 1)
        asked += 1
        times.append(ms)
        # The quoted search ranks a bounded number of matches, so a line
        # many sessions say is checked in the first session itself.
        if top and (top[0] in saying or search(a.cairn, f'"{q}"', 1, top[0])[0]):
            found += 1
        else:
            missed.append(q)
    print(f"{found}/{asked} pasted lines find a session that says them first "
          f"(median {statistics.median(times):.1f} ms a question, process included)")
    for q in missed:
        print("  missed:", q[:100])


if __name__ == "__main__":
    main()
