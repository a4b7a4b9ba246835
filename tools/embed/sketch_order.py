#!/usr/bin/env python3
"""Which order of a question's sketch candidates keeps its true nearest
vectors among the few scored exactly (docs/embeddings.md, "Scoring the
candidates' sketches against the query itself").

Reads a node's vector file and sketch file (store::vector_file and
store::sketch: a 32-byte header; then entries of an 8-byte id, a 4-byte
inverse length and the vector as offset-binary bytes; the sketch file's
header is followed by the mean vector, one f32 per dimension). Takes
random records' own vectors as queries, each leaving itself out, and
prints, for each way of ordering the pool of the entries nearest by
Hamming distance, the share of the exact top 200 (and of its first 20)
found among the first R of the pool.

    pip install numpy
    python3 tools/embed/sketch_order.py ~/.local/share/cairn 60 8000

Offline only: it reads the files whole into memory (about 1.5 GB for a
10 GB history's 1.15 million vectors) and nothing in cairn runs it.
"""

import sys
from pathlib import Path

import numpy as np

HEADER = 32
TOP = 200
SCORED = [2000, 3000, 4000, 5000, 6000, 8000]


def load(data: Path, dim: int):
    raw = np.fromfile(data / "cairn.db-vectors", dtype=np.uint8, offset=HEADER)
    size = 12 + dim
    count = raw.size // size
    raw = raw[: count * size].reshape(count, size)
    inverse = raw[:, 8:12].copy().view(np.float32).ravel()
    values = (raw[:, 12:] ^ 0x80).view(np.int8).astype(np.float32)
    vectors = values * inverse[:, None]
    sketch = np.fromfile(data / "cairn.db-sketch", dtype=np.uint8, offset=HEADER)
    mean = sketch[: 4 * dim].view(np.float32)
    signs = np.where(vectors > mean, 1.0, -1.0).astype(np.float32)
    blank = inverse == 0
    signs[blank] = 0.0
    return vectors, signs, mean, blank


def main() -> None:
    data = Path(sys.argv[1]).expanduser()
    queries = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    pool_size = int(sys.argv[3]) if len(sys.argv) > 3 else 8000
    dim = 256
    vectors, signs, mean, blank = load(data, dim)
    rng = np.random.default_rng(7)
    chosen = rng.choice(np.nonzero(~blank)[0], size=queries, replace=False)
    orders = ("hamming", "asymmetric", "asymmetric, uncentred")
    kept = {(o, r): [] for o in orders for r in SCORED}
    kept20 = {(o, r): [] for o in orders for r in SCORED}
    for at in chosen:
        q = vectors[at] / np.linalg.norm(vectors[at])
        exact = vectors @ q
        exact[at] = -9.0
        exact[blank] = -9.0
        top = np.argpartition(-exact, TOP)[:TOP]
        top = top[np.argsort(-exact[top])]
        want, want20 = set(top.tolist()), set(top[:20].tolist())
        q_signs = np.where(q > mean, 1.0, -1.0).astype(np.float32)
        hamming = -(signs @ q_signs)
        hamming[at] = np.inf
        hamming[blank] = np.inf
        pool = np.argpartition(hamming, pool_size)[:pool_size]
        keys = {
            "hamming": hamming[pool],
            "asymmetric": -(signs[pool] @ (q - mean)),
            "asymmetric, uncentred": -(signs[pool] @ q),
        }
        for o in orders:
            ranked = pool[np.argsort(keys[o], kind="stable")]
            for r in SCORED:
                got = set(ranked[:r].tolist())
                kept[(o, r)].append(len(got & want) / TOP)
                kept20[(o, r)].append(len(got & want20) / 20)
    print(f"{len(vectors)} vectors, {queries} queries, pool {pool_size}")
    for o in orders:
        cells = [
            f"{r}: {100 * np.mean(kept[(o, r)]):.1f}% ({100 * np.mean(kept20[(o, r)]):.1f}%)"
            for r in SCORED
            if r <= pool_size
        ]
        print(f"{o:22} " + "  ".join(cells))


if __name__ == "__main__":
    main()
