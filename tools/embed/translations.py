#!/usr/bin/env python3
"""Word translations into English for the lexical tier, from the
translated software messages `parallel.py` collects.

A question asked in German, Russian or Chinese shares no word with an
English session. For each word of another language (and each pair of
neighbouring CJK characters, the lexical tier's unit for text without
spaces) this finds the English words that appear in the same catalogue
entries far more often than chance, by the Dice coefficient over
entries: 2·both / (entries with the word + entries with the English
word). Counts are gathered per Snowball stem on both sides (so
"Fehler", "Fehlers" and "Fehlermeldung"'s stem vote together), then
every form of the word seen in the messages is listed with its stem's
translations; an English stem is given as its most frequent form.

Each word keeps its strongest English word. Left out: words that are
also English (an ASCII word the meaning table's vocabulary or the
English text of `--english` holds, or that English messages use three
times: "import", "llama", "vue"), English stop words, a best
translation weaker than MIN_DICE, and pairs seen together in fewer
than MIN_COUNT entries. Nothing here reads the recall set.

Output (`node/assets/embed/translations.txt`): a header naming the
pairs file's sha256 and the settings, then `word english english…`
lines sorted by word (UTF-8 byte order), the layout `search::expand`
reads by binary search (one English word per line today).

Usage:
  python tools/embed/translations.py PAIRS.jsonl TABLE.bin OUT.txt [--english CORPUS.jsonl]

`--english` takes `corpus.py`'s output (WordNet's words and glosses, the
real coding histories), the words of English a developer writes.
"""

import argparse
import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import snowballstemmer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from combine import vocab_of  # noqa: E402

MIN_DICE = 0.3
PER_WORD = 1
MIN_COUNT = 3
# English messages longer than this many content words say too much to
# tie any one word to another.
MOST_WORDS = 30

SNOWBALL = {"de": "german", "es": "spanish", "fr": "french", "it": "italian", "pt": "portuguese", "ru": "russian"}
# The lexical tier's stop words (`search::query::STOPWORDS`) and a few
# more that software messages are full of: never counted.
STOP = set(
    """a about after all also an and any are as at be been being but by can could did do does for from had
    happened has have he her him his how i if in into is it its just me my of on or our she should so some
    than that the their them then there these they this those to us very was we were what when where which
    while who why will with would you your not no please may must cannot can't don't""".split()
)
# English function words that are counted, so that a word of another
# language whose best translation is one of them ("под" -> under,
# "andere" -> other, "каждого" -> each) is known for a function word
# itself and gets no line.
FUNCTION = set(
    """under over between each every only more most other another such same both few own again once here
    through during without within against among across above below out off per""".split()
)
WORD = re.compile(r"[^\W_]+", re.U)


def is_cjk(c: str) -> bool:
    """`text::is_cjk`: Han, kana, Hangul syllables."""
    o = ord(c)
    return (
        0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xF900 <= o <= 0xFAFF
        or 0x20000 <= o <= 0x2FA1F
        or 0x3040 <= o <= 0x30FF
        or 0xAC00 <= o <= 0xD7AF
        or 0xFF66 <= o <= 0xFF9F
    )


def foreign_words(text: str):
    """(form, key) of each word as the lexical tier splits it
    (`text::tokens`, lowercase): a word of three or more letters, or two
    neighbouring CJK characters. Digits are left out."""
    for run in WORD.findall(text.lower()):
        plain = "".join(" " + c + " " if is_cjk(c) else c for c in run).split()
        cjk = []
        for t in plain + [" "]:
            if len(t) == 1 and is_cjk(t):
                cjk.append(t)
                continue
            for i in range(len(cjk) - 1):
                yield cjk[i] + cjk[i + 1]
            cjk = []
            if len(t) >= 3 and t.isalpha():
                yield t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", type=Path, help="parallel.py's output")
    ap.add_argument("table", type=Path, help="the built-in table (for its English vocabulary)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--english", type=Path, help="corpus.py's output: more English text whose words are never translated")
    a = ap.parse_args()

    english_vocab = {t for t in vocab_of(a.table) if t.isascii() and t.isalpha()}
    en_stem = snowballstemmer.stemmer("english")
    stemmers = {lang: snowballstemmer.stemmer(name) for lang, name in SNOWBALL.items()}
    forms = defaultdict(Counter)  # English stem -> its forms
    english_seen = Counter()  # English words as written
    foreign_forms = defaultdict(set)  # (lang, key) -> forms
    both, n_en, n_xx = Counter(), Counter(), Counter()
    if a.english:
        for line in a.english.read_text().splitlines():
            for w in WORD.findall(json.loads(line)["text"].lower()):
                if w.isascii() and w.isalpha():
                    english_vocab.add(w)
    raw = a.pairs.read_bytes()
    for line in raw.decode().splitlines():
        p = json.loads(line)
        en = set()
        for w in WORD.findall(p["en"].lower()):
            if w.isascii() and w.isalpha():
                english_seen[w] += 1
                if len(w) >= 3 and w not in STOP:
                    s = en_stem.stemWord(w)
                    forms[s][w] += 1
                    en.add(s)
        stem = stemmers.get(p["lang"])
        xx = set()
        for form in foreign_words(p["xx"]):
            key = (p["lang"], stem.stemWord(form) if stem and not is_cjk(form[0]) else form)
            foreign_forms[key].add(form)
            xx.add(key)
        if not en or not xx or len(en) > MOST_WORDS:
            continue
        for e in en:
            n_en[(p["lang"], e)] += 1
        for x in xx:
            n_xx[x] += 1
            for e in en:
                both[(x, e)] += 1

    best = defaultdict(list)
    for (x, e), c in both.items():
        if c >= MIN_COUNT:
            best[x].append((2 * c / (n_xx[x] + n_en[(x[0], e)]), e))
    listed = defaultdict(dict)  # form -> English word -> best Dice
    for x, cands in best.items():
        cands.sort(key=lambda de: (-de[0], de[1]))
        keep = [(d, forms[e].most_common(1)[0][0]) for d, e in cands[:PER_WORD] if d >= MIN_DICE]
        if any(word in FUNCTION for _, word in keep):
            continue
        for form in foreign_forms[x]:
            if form.isascii() and (form in english_vocab or english_seen[form] >= MIN_COUNT):
                continue
            for d, word in keep:
                if word != form and listed[form].get(word, 0) < d:
                    listed[form][word] = d
    lines = []
    for form in sorted(listed, key=lambda f: f.encode()):
        words = sorted(listed[form].items(), key=lambda wd: (-wd[1], wd[0]))[:PER_WORD]
        lines.append(form + " " + " ".join(w for w, _ in words))
    digest = hashlib.sha256(raw).hexdigest()
    english = hashlib.sha256(a.english.read_bytes()).hexdigest() if a.english else "none"
    head = f"# cairn translations v1 pairs {digest} english {english} dice {MIN_DICE} per-word {PER_WORD} min-count {MIN_COUNT}"
    a.out.write_text(head + "\n" + "\n".join(lines) + "\n")
    print(f"{len(lines)} words translated", file=sys.stderr)


if __name__ == "__main__":
    main()
