#!/usr/bin/env python3
"""The meaning tier alone on the recall set, for comparing tables fast.

For each table file given, embeds every user and assistant message of
fixtures/recall/*.txt as cairn does (WordPiece, first 256 tokens, the sum
of the rows, unit length), ranks the sessions by their best message's
cosine with each question and prints R@1 by category and split, and the
mean cosine of a question with its own session against the others'.
No fusion, no lexical tier: `cairn-bench recall --table` gives the real
figures. Reads the evaluation set only to evaluate; nothing is fitted
here.

Usage:
  python tools/embed/probe.py DL_DIR TABLE.bin...   (or `teacher`: the transformer)
"""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import distill
from teacher import tokenizer

SET = Path(__file__).resolve().parents[2] / "fixtures" / "recall"
MAX_TOKENS = 256


def read_table(path: Path):
    """The rows of a cairn table (`distill.read_table`)."""
    return distill.read_table(path)[1]


def sessions():
    out, label = defaultdict(list), None
    for f in sorted(SET.glob("*.txt")):
        for line in f.read_text().splitlines():
            if line.startswith("## "):
                label = line.split()[1]
            elif line[:2] in ("U:", "A:") and label:
                out[label].append(line[2:].strip())
    return out


def teacher_embed(dl: Path, texts: list) -> np.ndarray:
    """The transformer itself (`teacher` in place of a table file)."""
    import onnxruntime as ort

    from distill import MODEL_MEMBER, MODEL_SHA256, MODEL_WHEEL, member

    tok = tokenizer(dl)
    sess = ort.InferenceSession(member(dl / MODEL_WHEEL, MODEL_MEMBER, MODEL_SHA256), providers=["CPUExecutionProvider"])
    out = []
    for e in tok.encode_batch(texts):
        ids = np.array([e.ids], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})[0]
        v = h[0].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def main() -> None:
    tok = tokenizer(Path(sys.argv[1]))
    sess = sessions()
    labels = list(sess)
    msgs = [(l, m) for l in labels for m in sess[l]]
    qs = [l.rstrip("\n").split("\t") for l in (SET / "questions.tsv").open()][1:]
    menc = tok.encode_batch([m for _, m in msgs], add_special_tokens=False)
    qenc = tok.encode_batch([q[4] for q in qs], add_special_tokens=False)
    owner = np.array([labels.index(l) for l, _ in msgs])
    for path in sys.argv[2:]:
        if path == "teacher":
            m, q = teacher_embed(Path(sys.argv[1]), [x for _, x in msgs]), teacher_embed(Path(sys.argv[1]), [x[4] for x in qs])
        else:
            t = read_table(Path(path))

            def embed(encs):
                v = np.stack([t[e.ids[:MAX_TOKENS]].sum(axis=0) for e in encs])
                return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)

            m, q = embed(menc), embed(qenc)
        sims = q @ m.T
        best = np.full((len(qs), len(labels)), -2.0)
        for j in range(len(labels)):
            best[:, j] = sims[:, owner == j].max(axis=1)
        groups = defaultdict(list)
        own, other = [], []
        for i, (_, split, cat, want, _) in enumerate(qs):
            w = labels.index(want)
            rank = 1 + (best[i] > best[i, w]).sum()
            groups[(cat, split)].append(rank == 1)
            groups[("ALL", split)].append(rank == 1)
            own.append(best[i, w])
            other.append(np.delete(best[i], w).mean())
        print(f"{path}: own session {np.mean(own):.3f}, others {np.mean(other):.3f}")
        print("  " + "  ".join(f"{c}/{s[0]} {100 * np.mean(v):.0f}" for (c, s), v in sorted(groups.items())))


if __name__ == "__main__":
    main()
