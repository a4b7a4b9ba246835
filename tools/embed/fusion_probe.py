#!/usr/bin/env python3
"""Could fusion weigh the tiers better? A learned reranker, measured.

Reads two `cairn-bench recall --ranks` files of the recall set alone
(the default search and `--lexical`, both with `--limit 30`) and, per
question, the sessions either found or the table's meaning tier puts in
its first 30 (computed here as probe.py does). Each candidate session
gets features: its fused score relative to the first and its fused
rank's reciprocal, the same two for the lexical tier, its best message's
cosine, that relative to the best (to the fourth power, as fusion
weighs it) and its meaning rank's reciprocal, the question's soft
coverage by the session (each question token's best cosine with any of
the session's tokens, floored at 0.3, weighed by row length), and the
log of its message count. A linear softmax ranker over those is fitted
on the tune split (5-fold cross-validation gives the honest figure);
the holdout split is scored only with --holdout.

Prints R@1 by category: the fused ranking as it is, cross-validated,
and fitted on all of tune.

Usage:
  cairn-bench recall --set fixtures/recall --limit 30 --ranks F.tsv
  cairn-bench recall --set fixtures/recall --limit 30 --lexical --ranks L.tsv
  python tools/embed/fusion_probe.py DL_DIR F.tsv L.tsv [--holdout]
"""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import distill
from probe import MAX_TOKENS, SET, sessions
from teacher import tokenizer

TABLE = Path(__file__).resolve().parents[2] / "node" / "assets" / "embed" / "minilm-static.bin"
DEPTH = 30
SOFT_FLOOR = 0.3
KEYS = ["ALL", "semantic", "reworded", "but-sem", "date", "exact", "inflect", "paraphrase", "when", "why",
        "reword-lang", "reword-noun", "reword-symptom", "reword-whywhat"]


def read_ranks(path):
    """question id -> [(label, score)], best first."""
    out = {}
    for line in open(path):
        cols = line.rstrip("\n").split("\t")
        out[cols[0]] = [(c.rsplit(":", 1)[0], float(c.rsplit(":", 1)[1])) for c in cols[4:]]
    return out


def features(dl, fused, lexical):
    tok = tokenizer(dl)
    rows = np.asarray(distill.read_table(TABLE)[1], dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1)
    unit = rows / (norms[:, None] + 1e-12)
    sess = sessions()
    labels = list(sess)
    qs = [l.rstrip("\n").split("\t") for l in (SET / "questions.tsv").open()][1:]

    def embed(encs):
        v = np.stack([rows[e.ids[:MAX_TOKENS]].sum(axis=0) if e.ids else np.zeros(rows.shape[1]) for e in encs])
        return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)

    msgs = [(l, m) for l in labels for m in sess[l]]
    owner = np.array([labels.index(l) for l, _ in msgs])
    vecs = embed(tok.encode_batch([m for _, m in msgs], add_special_tokens=False))
    qenc = tok.encode_batch([q[4] for q in qs], add_special_tokens=False)
    qvecs = embed(qenc)
    words = {l: unit[sorted({i for e in tok.encode_batch(sess[l], add_special_tokens=False) for i in e.ids})]
             for l in labels}
    out = []
    for qi, q in enumerate(qs):
        best = np.full(len(labels), -1.0)
        np.maximum.at(best, owner, vecs @ qvecs[qi])
        order = np.argsort(-best)
        mrank = {labels[j]: r + 1 for r, j in enumerate(order)}
        f, x = fused[q[0]], lexical[q[0]]
        fr = {l: (i + 1, s) for i, (l, s) in enumerate(f)}
        xr = {l: (i + 1, s) for i, (l, s) in enumerate(x)}
        cands = sorted(({l for l, _ in f[:DEPTH]} | {l for l, _ in x[:DEPTH]}
                        | {labels[j] for j in order[:DEPTH]}) - {"-"})
        ids = qenc[qi].ids
        rel = lambda s, top: s / top if top > 0 else 0.0
        feats = []
        for c in cands:
            soft = 0.0
            if ids:
                m = np.clip(((unit[ids] @ words[c].T).max(axis=1) - SOFT_FLOOR) / (1 - SOFT_FLOOR), 0, 1)
                soft = float((norms[ids] * m).sum() / max(norms[ids].sum(), 1e-12))
            sim, top = best[labels.index(c)], best[order[0]]
            feats.append([
                rel(fr[c][1], f[0][1]) if c in fr else 0.0, 1 / fr[c][0] if c in fr else 0.0,
                rel(xr[c][1], x[0][1]) if c in xr else 0.0, 1 / xr[c][0] if c in xr else 0.0,
                sim, max(rel(sim, top), 0.0) ** 4, 1 / mrank[c], soft, np.log(len(sess[c])),
            ])
        want = cands.index(q[3]) if q[3] in cands else None
        out.append((q, np.nan_to_num(np.array(feats)), want))
    return out


def fit(items, lam=1e-3, iters=3000, lr=2.0):
    w = np.zeros(items[0][1].shape[1])
    w[0] = 1.0
    for _ in range(iters):
        g, n = lam * w, 0
        for _, x, want in items:
            if want is None:
                continue
            s = x @ w
            p = np.exp(s - s.max())
            g = g + x.T @ (p / p.sum()) - x[want]
            n += 1
        w = w - lr * g / max(n, 1)
    return w


def score(items, w):
    by = defaultdict(list)
    for q, x, want in items:
        hit = want is not None and int(np.argmax(x @ w)) == want
        cat = q[2]
        for k in ("ALL", cat, "reworded" if cat.startswith("reword") else
                  ("but-sem" if cat != "semantic" else None)):
            if k:
                by[k].append(hit)
    return " ".join(f"{k}={100 * np.mean(by[k]):.1f}" for k in KEYS if by[k])


def main():
    dl, fpath, lpath = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    items = features(dl, read_ranks(fpath), read_ranks(lpath))
    tune = [i for i in items if i[0][1] == "tune"]
    as_is = np.zeros(items[0][1].shape[1])
    as_is[0] = 1.0
    print("fused as it is  ", score(tune, as_is))
    idx = np.random.default_rng(1).permutation(len(tune))
    crossed = []
    for part in np.array_split(idx, 5):
        held = set(part.tolist())
        w = fit([tune[i] for i in idx if i not in held])
        # Each held-out question keeps one feature: its score under w.
        crossed += [(tune[i][0], (tune[i][1] @ w)[:, None], tune[i][2]) for i in part]
    print("cross-validated ", score(crossed, np.ones(1)))
    w = fit(tune)
    print("fitted on tune  ", score(tune, w), "weights", np.round(w, 2).tolist())
    if "--holdout" in sys.argv:
        hold = [i for i in items if i[0][1] == "holdout"]
        print("holdout as it is", score(hold, as_is))
        print("holdout, fitted ", score(hold, w))


if __name__ == "__main__":
    main()
