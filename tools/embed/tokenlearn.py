#!/usr/bin/env python3
"""Fit cairn's static token table to the teacher's sentence embeddings.

The model2vec "tokenlearn" idea, solved as a linear least-squares problem:
a text's vector at run time is the sum of its tokens' rows, normalised
(node/src/embed), so each row E[t] is fitted so that the mean of a
segment's rows reproduces the teacher's embedding of the whole segment:

    minimise  sum_s || mean_{t in s} E[t] - y_s ||^2
            + lam * sum_t || E[t] - y0_t ||^2

where y_s is the teacher's (all-MiniLM-L6-v2 int8, PyPI) unit embedding
of segment s (tools/embed/teacher.py) and y0_t its embedding of the token
alone, as `[CLS] t [SEP]`: what the table was before (tools/embed/distill.py),
and what a token seen in few segments stays close to. Both are projected
on the top DIM principal directions of the segments' embeddings (not
centred, so dot products between texts stay the teacher's). The normal
equations (A^T A + lam I) E = A^T Y + lam Y0 are solved by conjugate
gradients, all DIM columns at once, with A the segments x vocabulary
matrix of token shares. A seeded 5% of the segments is held out to report
how close the fitted table comes to the teacher on text it did not see.

Row scale carries the weight: common tokens, whose segments disagree,
end up short. Specials, unused slots and [UNK] stay zero. The table is
written in the format node/src/embed/table.rs reads (see distill.py).

Usage:
  python tools/embed/tokenlearn.py DL_DIR CORPUS.jsonl TEACHER_DIR OUT.bin [--lam 1.0]
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import scipy.sparse as sp

from distill import BATCH, FIRST_WORD, token_frequencies, MODEL_MEMBER, MODEL_SHA256, MODEL_WHEEL, member, write_table
from teacher import MAX_LEN, tokenizer

DIM = 256
SEED = 57
HELD_OUT = 0.05
ITERATIONS = 300


def single_tokens(dl: Path, n: int, cls: int, sep: int, cache: Path) -> np.ndarray:
    """The teacher's unit vector of each token alone (as distill.py)."""
    if cache.exists():
        return np.load(cache)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(
        member(dl / MODEL_WHEEL, MODEL_MEMBER, MODEL_SHA256), opts, providers=["CPUExecutionProvider"]
    )
    vecs = np.zeros((n, 384), dtype=np.float32)
    for start in range(0, n, BATCH):
        ids = np.arange(start, min(n, start + BATCH), dtype=np.int64)
        b = len(ids)
        input_ids = np.stack([np.full(b, cls), ids, np.full(b, sep)], axis=1).astype(np.int64)
        hidden = sess.run(
            None,
            {
                "input_ids": input_ids,
                "attention_mask": np.ones_like(input_ids),
                "token_type_ids": np.zeros_like(input_ids),
            },
        )[0]
        vecs[start : start + b] = hidden.mean(axis=1)
        print(f"\rsingle tokens {start + b}/{n}", end="", file=sys.stderr)
    print(file=sys.stderr)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    np.save(cache, vecs)
    return vecs


def load_teacher(dir_: Path):
    lines, embs = [], []
    for path in sorted(dir_.glob("shard-*.npz")):
        z = np.load(path)
        lines.append(z["line"])
        embs.append(z["emb"])
    return np.concatenate(lines), np.concatenate(embs)


def shares(encs, n_vocab: int, zero: np.ndarray) -> sp.csr_matrix:
    """Segments x vocabulary: each token's share of its segment."""
    rows, cols = [], []
    for r, e in enumerate(encs):
        ids = [i for i in e.ids if not zero[i]]
        rows.extend([r] * len(ids))
        cols.extend(ids)
    a = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(encs), n_vocab)
    )
    a.sum_duplicates()
    counts = np.asarray(a.sum(axis=1)).ravel()
    counts[counts == 0] = 1
    return sp.diags(1.0 / counts).astype(np.float32) @ a


def solve(a: sp.csr_matrix, y: np.ndarray, y0: np.ndarray, lam: float) -> np.ndarray:
    """Conjugate gradients on (A^T A + lam I) E = A^T Y + lam Y0, Jacobi
    preconditioned, every column at once."""
    at = a.T.tocsr()
    diag = np.asarray(a.multiply(a).sum(axis=0)).ravel() + lam
    op = lambda e: at @ (a @ e) + lam * e  # noqa: E731
    b = at @ y + lam * y0
    e = y0.copy()
    r = b - op(e)
    z = r / diag[:, None]
    p = z.copy()
    rz = (r * z).sum(axis=0)
    b_norm = np.linalg.norm(b, axis=0) + 1e-12
    for it in range(ITERATIONS):
        ap = op(p)
        alpha = rz / ((p * ap).sum(axis=0) + 1e-30)
        e += alpha * p
        r -= alpha * ap
        rel = (np.linalg.norm(r, axis=0) / b_norm).max()
        if rel < 1e-4:
            break
        z = r / diag[:, None]
        rz_new = (r * z).sum(axis=0)
        p = z + (rz_new / (rz + 1e-30)) * p
        rz = rz_new
    print(f"CG: {it + 1} iterations, worst relative residual {rel:.1e}", file=sys.stderr)
    return e


def cosines(a: sp.csr_matrix, e: np.ndarray, y: np.ndarray) -> np.ndarray:
    pred = a @ e
    pred /= np.linalg.norm(pred, axis=1, keepdims=True) + 1e-12
    return (pred * (y / (np.linalg.norm(y, axis=1, keepdims=True) + 1e-12))).sum(axis=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("teacher", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--centre", action="store_true", help="subtract the segments' mean embedding")
    ap.add_argument("--sif", type=float, default=0.0, help="then weigh rows by a / (a + p), this a")
    a = ap.parse_args()

    tok = tokenizer(a.dl)
    vocab = tok.get_vocab(with_added_tokens=True)
    n = len(vocab)
    tokens = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    assert all(t is not None and "\n" not in t for t in tokens)
    ids = np.arange(n)
    # Specials, unused slots and [UNK] carry nothing (the [UNK] row must
    # stay zero: a text of unknown pieces only has no vector).
    zero = ids < 999
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    assert FIRST_WORD > 999

    v = single_tokens(a.dl, n, cls, sep, a.teacher / "single-tokens.npy")
    lines, emb = load_teacher(a.teacher)
    corpus = [json.loads(l)["text"] for l in a.corpus.open()]
    print(f"{len(lines)} segments with teacher embeddings", file=sys.stderr)

    # The top DIM directions of the segments' (uncentred) embeddings.
    second = (emb.T @ emb) / len(emb)
    val, vec = np.linalg.eigh(second)
    w = vec[:, np.argsort(val)[::-1][:DIM]]
    kept = np.sort(val)[::-1][:DIM].sum() / val.sum()
    print(f"{DIM} directions keep {kept:.1%} of the segments' energy", file=sys.stderr)
    y = emb @ w
    y0 = v @ w
    if a.centre:
        mean = y.mean(axis=0)
        y -= mean
        y0 -= mean
    y0[zero] = 0.0

    rng = np.random.default_rng(SEED)
    held = rng.random(len(lines)) < HELD_OUT
    encs = tok.encode_batch([corpus[i] for i in lines], add_special_tokens=False)
    a_all = shares(encs, n, zero)
    a_fit, a_held = a_all[~held], a_all[held]
    seen = np.asarray((a_fit > 0).sum(axis=0)).ravel()
    print(f"tokens seen: {(seen > 0).sum()} of {n}, 5+ times: {(seen >= 5).sum()}", file=sys.stderr)

    before = cosines(a_held, y0, y[held])
    print(f"held-out cosine with the teacher, single-token table: {before.mean():.3f}", file=sys.stderr)
    e = solve(a_fit, y[~held], y0, a.lam)
    e[zero] = 0.0
    if a.sif > 0:
        e *= (a.sif / (a.sif + token_frequencies(n)))[:, None]
    after = cosines(a_held, e, y[held])
    fit = cosines(a_fit, e, y[~held])
    print(
        f"lam {a.lam}: held-out cosine {after.mean():.3f} (fit {fit.mean():.3f})",
        file=sys.stderr,
    )
    write_table(a.out, tokens, e.astype(np.float32))


if __name__ == "__main__":
    main()
