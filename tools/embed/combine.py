#!/usr/bin/env python3
"""Two or more cairn tables over the same vocabulary, side by side.

Each table's rows are set to unit length (dropping the SIF weight they
carry), optionally scaled by a per-table weight, and concatenated; then
the distill.py recipe again: centring over the ordinary tokens, the top
--dim principal components, unit rows weighed by the SIF weight, int8
with one scale per row. So a token's row holds both teachers' views of
it, in the width of one.

Usage:
  python tools/embed/combine.py OUT.bin A.bin B.bin [--weights 1,1] [--dim 256]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from distill import DIM, pca_sif, write_table  # noqa: E402
from probe import read_table  # noqa: E402


def vocab_of(path: Path) -> list:
    b = path.read_bytes()
    n, vlen = int.from_bytes(b[12:16], "little"), int.from_bytes(b[20:24], "little")
    tokens = b[24 : 24 + vlen].decode("utf-8").split("\n")
    assert len(tokens) == n, path
    return tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("tables", type=Path, nargs="+")
    ap.add_argument("--weights", help="one weight per table, comma-separated (default 1 each)")
    ap.add_argument("--dim", type=int, default=DIM)
    a = ap.parse_args()
    weights = [float(w) for w in a.weights.split(",")] if a.weights else [1.0] * len(a.tables)
    assert len(weights) == len(a.tables)

    tokens = vocab_of(a.tables[0])
    parts = []
    for path, w in zip(a.tables, weights):
        if vocab_of(path) != tokens:
            sys.exit(f"{path}: another vocabulary than {a.tables[0]}")
        rows = read_table(path)
        rows = rows / (np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12)
        parts.append(rows * w)
    both = np.concatenate(parts, axis=1)
    real = np.linalg.norm(both, axis=1) > 0
    write_table(a.out, tokens, pca_sif(both, real, a.dim))


if __name__ == "__main__":
    main()
