#!/usr/bin/env python3
"""Teach the meaning table's non-English tokens their English meaning.

cairn's table (node/assets/embed/minilm-static.bin) was distilled from an
English model, so the rows of Cyrillic, CJK, kana and Hangul pieces say
little: a question in Russian about an English session, or in English
about a Chinese one, finds it only by shared identifiers. Given pairs of
an English message and its translation (tools/embed/parallel.py), this
refits only those rows, keeping every other row as it is, so that the
sum of a translation's token rows points where the sum of the English
message's rows points:

    minimise  sum_p || (sum_{t in x_p} E[t] - y_p) / |y_p| ||^2
            + lam * sum_{t learnt} || E[t] - E0[t] ||^2

where y_p is the sum of the table's rows for the English message and
the learnt rows E[t] start from (and are pulled towards) the table's
E0[t]. Rows of tokens outside the learnt set enter the sum as they are.
The normal equations are sparse and symmetric; they are solved once
for all dimensions. Tokens are the runtime's (BERT basic
pre-tokenization, lower case, accents dropped, greedy WordPiece).

Tokens for other scripts are first added to the vocabulary: `--new N`
trains a WordPiece vocabulary of N on the translations and appends its
tokens that hold a non-Latin letter (the trainer breaks ties in hash
order, so two runs may differ in a few rare tokens); `--added-from T`
takes them from table T instead, which makes a rerun give the same
file. A token is learnt when it holds a letter outside Latin (after
accents are dropped) and occurs in at least --min-count translations;
English rows, digits, punctuation and Latin pieces never change, and
no added token can match inside a Latin word, so English text embeds
exactly as before. `--sif a` then weighs each learnt row by
a / (a + p), p its share of the translations' tokens.

Usage:
  python tools/embed/crosslingual.py TABLE.bin PAIRS.jsonl OUT.bin \
      (--new 8000 | --added-from SHIPPED.bin) [--lam 1] [--sif 1e-3]
"""

import argparse
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spl
from tokenizers import BertWordPieceTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from combine import vocab_of  # noqa: E402
from distill import write_table  # noqa: E402
from probe import read_table  # noqa: E402

MAX_TOKENS = 256


def non_latin(token: str) -> bool:
    for c in token.removeprefix("##"):
        if c.isalpha() and not unicodedata.name(c, "").startswith("LATIN"):
            return True
    return False


def new_tokens(have: set, texts: list, size: int) -> list:
    """Non-Latin WordPiece tokens a vocabulary of `size` trained on `texts`
    holds that `have` does not, in the trainer's order."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=size, min_frequency=2, special_tokens=["[UNK]"], show_progress=False)
    t.train_from_iterator([x for x in texts if any(non_latin(c) for c in x)], trainer)
    vocab = sorted(t.get_vocab().items(), key=lambda kv: kv[1])
    return [w for w, _ in vocab if w not in have and non_latin(w)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("table", type=Path)
    ap.add_argument("pairs", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--added-from", type=Path, help="take the added tokens from this table (the rows past TABLE's) instead of training them")
    ap.add_argument("--sif", type=float, default=0.0, help="after the fit, weigh each learnt row by a / (a + p), p its share of the translations' tokens")
    ap.add_argument("--langs", default="")
    ap.add_argument("--new", type=int, default=0, help="train a WordPiece vocabulary of this size on the translations and append its non-Latin tokens")
    a = ap.parse_args()

    tokens = vocab_of(a.table)
    rows0 = read_table(a.table).astype(np.float64)
    pairs = [json.loads(l) for l in a.pairs.open()]
    if a.langs:
        keep = set(a.langs.split(","))
        pairs = [p for p in pairs if p["lang"] in keep]
    added = []
    if a.added_from:
        added = vocab_of(a.added_from)[len(tokens) :]
    elif a.new:
        added = new_tokens(set(tokens), [p["xx"] for p in pairs], a.new)
    if added:
        tokens = tokens + added
        rows0 = np.vstack([rows0, np.zeros((len(added), rows0.shape[1]))])
        print(f"{len(added)} non-Latin tokens added", file=sys.stderr)
    tok = BertWordPieceTokenizer(
        {t: i for i, t in reversed(list(enumerate(tokens)))},
        unk_token="[UNK]",
        lowercase=True,
        strip_accents=True,
        handle_chinese_chars=True,
        clean_text=True,
    )
    en = tok.encode_batch([p["en"] for p in pairs], add_special_tokens=False)
    xx = tok.encode_batch([p["xx"] for p in pairs], add_special_tokens=False)
    unk = tokens.index("[UNK]")

    learnable = np.array([non_latin(t) for t in tokens])
    seen = Counter()
    for e in xx:
        seen.update(set(e.ids))
    learnt = [t for t in range(len(tokens)) if learnable[t] and seen[t] >= a.min_count and t != unk]
    col = {t: j for j, t in enumerate(learnt)}
    print(f"{len(pairs)} pairs; {len(learnt)} rows learnt of {int(learnable.sum())} non-Latin", file=sys.stderr)

    r, c, v, targets = [], [], [], []
    for e, x in zip(en, xx):
        eids, xids = e.ids[:MAX_TOKENS], x.ids[:MAX_TOKENS]
        y = rows0[eids].sum(axis=0)
        norm = np.linalg.norm(y)
        cols = Counter(col[t] for t in xids if t in col)
        if norm < 1e-6 or not cols:
            continue
        fixed = rows0[[t for t in xids if t not in col]].sum(axis=0) if len(cols) < len(xids) else 0.0
        i = len(targets)
        for j, n in cols.items():
            r.append(i)
            c.append(j)
            v.append(n / norm)
        targets.append((y - fixed) / norm)
    A = sp.csr_matrix((v, (r, c)), shape=(len(targets), len(learnt)))
    B = np.stack(targets)
    X0 = rows0[learnt]
    M = (A.T @ A + a.lam * sp.identity(len(learnt))).tocsc()
    rhs = A.T @ B + a.lam * X0
    X = spl.splu(M).solve(rhs)
    fit_before = np.linalg.norm(A @ X0 - B) / np.linalg.norm(B)
    fit_after = np.linalg.norm(A @ X - B) / np.linalg.norm(B)
    print(f"{len(targets)} equations; relative residual {fit_before:.3f} -> {fit_after:.3f}", file=sys.stderr)

    if a.sif:
        counts = Counter()
        for x in xx:
            counts.update(x.ids)
        total = sum(counts.values())
        p = np.array([counts[t] / total for t in learnt])
        X *= (a.sif / (a.sif + p))[:, None]
    rows = rows0.copy()
    rows[learnt] = X
    write_table(a.out, tokens, rows.astype(np.float32))


if __name__ == "__main__":
    main()
