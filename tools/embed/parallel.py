#!/usr/bin/env python3
"""Collect English / other-language sentence pairs from registry packages.

Software ships its own translations: gettext catalogues in Python wheels
(Django, Sphinx, Wagtail, Apache Superset, JupyterLab's language packs)
and TypeScript's compiler messages in its npm package. Each catalogue entry is an English message and a translator's
rendering of it, mostly about software (errors, files, databases,
commits, servers), which is what cairn's histories talk about. These
pairs teach the meaning table's non-English tokens where their English
meaning lies (tools/embed/crosslingual.py).

Inputs (checked by sha256; fetch them with the commands in
docs/embeddings.md, "Regenerating it"):
  django 5.2.19, sphinx 9.0.4, wagtail 8.0.1, apache-superset 6.1.0,
  jupyterlab-language-pack-*-4.5.post3 (PyPI wheels) and
  typescript-5.7.3.tgz (npm); see INPUTS

Output: JSON lines {"lang", "en", "xx", "src"}, placeholders and markup
removed, one line per distinct (lang, en, xx).

Usage:
  python tools/embed/parallel.py DL_DIR OUT.jsonl
"""

import gettext
import hashlib
import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

# Each input and its sha256; all under BSD-2, BSD-3 or Apache-2.0.
JUPYTER = "jupyterlab_language_pack_{}-4.5.post3-py2.py3-none-any.whl"
INPUTS = {
    "django-5.2.19-py3-none-any.whl": "5965d974a5218a2b68a11dd1276434707f23886525c23f0598eccedaf4f4ca00",
    "sphinx-9.0.4-py3-none-any.whl": "5bebc595a5e943ea248b99c13814c1c5e10b3ece718976824ffa7959ff95fffb",
    "typescript-5.7.3.tgz": "80cfca1254bab8e81d639178e42d6406d856fba6e34cad60d1ab50ee6e5f7ebb",
    "apache_superset-6.1.0-py3-none-any.whl": "4b5886b2d6389a32df790aeae2532ad72529bce1af93b6edf2d1b2a8bf658748",
    "wagtail-8.0.1-py3-none-any.whl": "1e6ad5c7891a54efce1400e168298b5a2cc343b642cee89c31bf5ec30c98b26c",
}
INPUTS.update(
    {
        JUPYTER.format("de_de"): "b716b56f7e0c884f42152d5e36c253ea0f32ca41f99097d842d3934f4a4bc7fb",
        JUPYTER.format("es_es"): "8b315de006bc48d5798988cff6141f00694e411265011ea21570b4f459070381",
        JUPYTER.format("fr_fr"): "9f6ce9d4e64b367ff084a2313af29d6ad8a02d1d08000f3e6c53e2856fa9a11f",
        JUPYTER.format("it_it"): "7c1454449f44d635e96245af3905626f205761d304bc9537e0c77aa46634ea6a",
        JUPYTER.format("ja_jp"): "f3fe9d9228f79fa5b289bb271564e106b75c21be79e7874a658ad2aa50901299",
        JUPYTER.format("ko_kr"): "a7ca15848e6fc47ecf35e83a791e2ae9dd26bbfdbc8503567593f908f86c51f4",
        JUPYTER.format("pl_pl"): "907b0e8acb6bc62c4e320e4edf35b2227e7a2980d3d024943b60f64b7f7eef6d",
        JUPYTER.format("pt_br"): "15bad442fd7180d05f99f89b452cf493a3f6ec51454f81d3a5531954e39439b6",
        JUPYTER.format("ru_ru"): "d294daf163b0df9bdd14012b574ff311f1f4a166524b38469e90e26eb2c380f6",
        JUPYTER.format("zh_cn"): "47cdb0c41c6b066e795c867786c9c29fde527e2bf15aa6b3e9b2bab9929304b5",
        JUPYTER.format("zh_tw"): "cd791451ba7aba37a75af20189cb307adab139c338a32d0c54b38967e6849787",
    }
)

# The languages kept, by the first part of a catalogue's locale name.
LANGS = {"de", "es", "fr", "it", "ja", "ko", "pl", "pt", "ru", "zh"}


def lang_of(locale: str):
    code = locale.replace("-", "_").split("_")[0].lower()
    return code if code in LANGS else None


PLACEHOLDER = re.compile(r"%\([^)]*\)[-#0 +]*\d*(?:\.\d+)?[sdifrx]|%[-#0 +]*\d*(?:\.\d+)?[sdifrx%]|\{[^{}]*\}|<[^<>]*>|&\w+;")


def clean(s: str) -> str:
    s = PLACEHOLDER.sub(" ", s)
    s = s.replace("_", " ").replace("&", "")
    return " ".join(s.split())


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def catalogue_pairs(name: str, data: bytes):
    """(english, translation) pairs of one .mo file."""
    try:
        cat = gettext.GNUTranslations(io.BytesIO(data))._catalog
    except Exception as e:  # a damaged catalogue is reported, not fatal
        print(f"skipped {name}: {e}", file=sys.stderr)
        return
    for k, v in cat.items():
        if isinstance(k, tuple):  # plural forms: (msgid, n) → take form 0 only
            if k[1] != 0:
                continue
            k = k[0]
        if not k or not v:
            continue
        if "\x04" in k:  # msgctxt
            k = k.split("\x04", 1)[1]
        yield k, v


def wheel_pairs(path: Path):
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            m = re.search(r"/(?:locale|translations)/([^/]+)/LC_MESSAGES/[^/]+\.mo$", name)
            if m and lang_of(m.group(1)):
                for en, xx in catalogue_pairs(name, z.read(name)):
                    yield lang_of(m.group(1)), en, xx


DIAG = re.compile(r'diag\(\d+, [^,]*, "([^"]+)", "((?:[^"\\]|\\.)*)"')


def typescript_pairs(path: Path):
    with tarfile.open(path) as t:
        js = t.extractfile("package/lib/typescript.js").read().decode()
        english = {k: json.loads(f'"{v}"') for k, v in DIAG.findall(js)}
        for member in t.getmembers():
            m = re.fullmatch(r"package/lib/([^/]+)/diagnosticMessages\.generated\.json", member.name)
            if m and lang_of(m.group(1)):
                for k, xx in json.loads(t.extractfile(member).read()).items():
                    if k in english:
                        yield lang_of(m.group(1)), english[k], xx


def main() -> None:
    dl, out = Path(sys.argv[1]), Path(sys.argv[2])
    seen, rows = set(), []
    for name, want in INPUTS.items():
        path = dl / name
        got = sha256(path.read_bytes())
        if want and got != want:
            sys.exit(f"{name}: sha256 {got}, expected {want}")
        print(f"{name} sha256 {got}", file=sys.stderr)
        pairs = typescript_pairs(path) if name.endswith(".tgz") else wheel_pairs(path)
        src = name.split("-")[0]
        for lang, en, xx in pairs:
            en, xx = clean(en), clean(xx)
            if len(en) < 3 or len(xx) < 2 or en == xx:
                continue
            key = (lang, en, xx)
            if key in seen:
                continue
            seen.add(key)
            rows.append({"lang": lang, "en": en, "xx": xx, "src": src})
    with out.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    by = {}
    for r in rows:
        by[r["lang"]] = by.get(r["lang"], 0) + 1
    print(f"{len(rows)} pairs: {dict(sorted(by.items()))}", file=sys.stderr)


if __name__ == "__main__":
    main()
