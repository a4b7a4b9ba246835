#!/usr/bin/env python3
"""Collect the training text for tools/embed/tokenlearn.py.

Training text only: nothing from here is shipped, only the token table
fitted on the teacher's embeddings of it. Sources (all usable by the team):

  - WordNet 3.0 glosses and example sentences, from Debian's
    `wordnet-base` package (`apt-get download wordnet-base`; WordNet
    licence, see NOTICE): general English, one synset's words with their
    definition;
  - the coding-agent session files in ../shared/real-histories/ (copied
    from public repositories, see its SOURCES.md) and the recorded
    sessions in fixtures/agents/: what people and agents say while
    coding.

Never read: fixtures/recall/ (the evaluation set) and the benchmark
corpus generator's word lists (../shared/bench/); the tool refuses a
source path under either.

Output: one JSON object per line, {"src": ..., "text": ...}, shuffled
with a fixed seed so that any prefix is a mix of the sources. The
sha256 of every input file is printed to stderr.

Usage:
  python tools/embed/corpus.py WORDNET_DIR OUT.jsonl SOURCE_DIR...
"""

import hashlib
import json
import random
import re
import sqlite3
import sys
from pathlib import Path

SEED = 57
# At most this many segments from one session file, so a few long files
# do not make up most of the corpus.
PER_FILE = 1500
MAX_WORDS = 48
MIN_WORDS = 3
FORBIDDEN = ("fixtures/recall", "shared/bench")
TEXT_EXT = {".md", ".txt"}
JSON_EXT = {".json", ".jsonl"}
DB_EXT = {".db", ".sqlite"}

WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wordnet(dir_: Path, out: list) -> None:
    for pos in ("noun", "verb", "adj", "adv"):
        path = dir_ / f"data.{pos}"
        print(f"{path}: sha256 {sha(path)}", file=sys.stderr)
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue
            head, gloss = line.split("|", 1)
            f = head.split()
            n = int(f[3], 16)
            lemmas = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
            lemmas = [re.sub(r"\(.*\)$", "", w) for w in lemmas]
            parts = [p.strip() for p in gloss.strip().split(";")]
            defs = [p for p in parts if p and not p.startswith('"')]
            examples = [p.strip('"') for p in parts if p.startswith('"')]
            if defs:
                out.append(("wordnet", f"{', '.join(dict.fromkeys(lemmas))}: {'; '.join(defs)}"))
            for e in examples:
                out.append(("wordnet", e))


def strings(value, acc: list) -> None:
    """Every string inside a JSON value; a string that is JSON is opened."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "{[" and len(s) > 2:
            try:
                strings(json.loads(s), acc)
                return
            except ValueError:
                pass
        acc.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            strings(v, acc)
    elif isinstance(value, list):
        for v in value:
            strings(v, acc)


def texts_of(path: Path) -> list:
    ext = path.suffix.lower()
    acc: list = []
    if ext in TEXT_EXT:
        acc.append(path.read_text(errors="replace"))
    elif ext in JSON_EXT:
        raw = path.read_text(errors="replace")
        try:
            strings(json.loads(raw), acc)
        except ValueError:
            for line in raw.splitlines():
                try:
                    strings(json.loads(line), acc)
                except ValueError:
                    continue
    elif ext in DB_EXT:
        try:
            # immutable: no -wal/-shm files are made beside a database read here.
            db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            for (table,) in db.execute("select name from sqlite_master where type='table'"):
                for row in db.execute(f'select * from "{table}"'):
                    for cell in row:
                        if isinstance(cell, bytes):
                            cell = cell.decode("utf-8", "replace")
                        if isinstance(cell, str):
                            strings(cell, acc)
            db.close()
        except sqlite3.Error as e:
            print(f"skipped {path}: {e}", file=sys.stderr)
    return acc


def prose(line: str) -> bool:
    """A line people wrote, not code, paths, ids or tables of numbers."""
    tokens = line.split()
    if len(tokens) < MIN_WORDS:
        return False
    words = [t for t in tokens if WORD.fullmatch(t.strip(".,:;!?()\"'`*"))]
    return len(words) >= MIN_WORDS and len(words) >= 0.6 * len(tokens)


def segments(text: str):
    for para in re.split(r"\n\s*\n|\n", text):
        para = " ".join(para.split())
        if not prose(para):
            continue
        words = para.split()
        for i in range(0, len(words), MAX_WORDS):
            seg = " ".join(words[i : i + MAX_WORDS])
            if prose(seg):
                yield seg


def main() -> None:
    wn, out = Path(sys.argv[1]), Path(sys.argv[2])
    items: list = []
    wordnet(wn, items)
    for root in map(Path, sys.argv[3:]):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            full = str(path.resolve())
            if any(f in full for f in FORBIDDEN):
                sys.exit(f"refusing {path}: the evaluation set and bench lists are not training text")
            if path.suffix.lower() not in TEXT_EXT | JSON_EXT | DB_EXT:
                continue
            print(f"{path}: sha256 {sha(path)}", file=sys.stderr)
            got = []
            for t in texts_of(path):
                got.extend(segments(t))
            items.extend(("sessions", s) for s in got[:PER_FILE])
    seen = set()
    unique = []
    for src, text in items:
        key = text.lower()
        if key not in seen:
            seen.add(key)
            unique.append((src, text))
    random.Random(SEED).shuffle(unique)
    with out.open("w") as f:
        for src, text in unique:
            f.write(json.dumps({"src": src, "text": text}, ensure_ascii=False) + "\n")
    by = {}
    for src, _ in unique:
        by[src] = by.get(src, 0) + 1
    print(f"wrote {out}: {len(unique)} segments {by}, sha256 {sha(out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
