//! A WordPiece tokenizer for the bert-base-uncased vocabulary the built-in
//! table was distilled with.
//!
//! It follows the BERT "basic" pre-tokenizer (clean control characters,
//! split CJK ideographs into single characters, lower-case, strip accents,
//! split on white space and punctuation) and then greedy longest-match-first
//! WordPiece with `##` continuations. Written here rather than taken from
//! the `tokenizers` crate: only this one model shape is needed, and that
//! crate brings a regex engine built from C (onig), rayon and a dozen more
//! crates to every build on a machine where CPU is the scarce resource
//! (see docs/embeddings.md). Punctuation is ASCII punctuation plus the
//! common Unicode punctuation blocks, which is what the vocabulary holds.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::table::Vocab;

/// Longest word (in characters) that is split; longer ones are `[UNK]`.
const MAX_WORD_CHARS: usize = 100;

/// Token ids of `text`, at most `max` of them, without `[CLS]`/`[SEP]`.
/// `unk` is the id of `[UNK]`.
pub fn tokenize(vocab: &Vocab<'_>, unk: u32, text: &str, max: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut piece = String::new();
    words(text, |word| {
        wordpiece(vocab, unk, word, &mut piece, &mut ids);
        ids.len() < max
    });
    ids.truncate(max);
    ids
}

/// Calls `each` with the words of `text` as the BERT basic pre-tokenizer
/// makes them (lower-cased, accents dropped; punctuation and CJK
/// ideographs each a word of their own), in order, until it returns false.
pub fn words(text: &str, mut each: impl FnMut(&str) -> bool) {
    let mut word = String::new();
    // A word ends: hand it over; false when `each` asks to stop.
    let mut flush = |word: &mut String| {
        let go_on = word.is_empty() || each(word);
        word.clear();
        go_on
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            if !flush(&mut word) {
                return;
            }
        } else if is_punctuation(c) || is_cjk(c) {
            if !flush(&mut word) {
                return;
            }
            word.push(c);
            if !flush(&mut word) {
                return;
            }
        } else if c.is_ascii() {
            // What the general case below gives for ASCII, without its
            // iterators: nearly every character of a history.
            word.push(c.to_ascii_lowercase());
        } else {
            // Lower-case, then drop accents (NFD, without combining marks).
            for l in c.to_lowercase() {
                for d in std::iter::once(l).nfd() {
                    if !is_combining_mark(d) {
                        word.push(d);
                    }
                }
            }
        }
    }
    flush(&mut word);
}

/// Every piece [`wordpiece`] may look up while splitting `word`: each
/// run of its characters, `##`-prefixed unless it starts the word (none
/// for a word too long to split).
pub fn pieces(word: &str, out: &mut impl FnMut(String)) {
    if word.chars().count() > MAX_WORD_CHARS {
        return;
    }
    let bounds: Vec<usize> = word
        .char_indices()
        .map(|(i, _)| i)
        .chain([word.len()])
        .collect();
    for (k, &start) in bounds.iter().enumerate() {
        for &end in &bounds[k + 1..] {
            let run = &word[start..end];
            out(match start {
                0 => run.to_owned(),
                _ => format!("##{run}"),
            });
        }
    }
}

/// Greedy longest-match-first split of one word into vocabulary pieces.
fn wordpiece(vocab: &Vocab<'_>, unk: u32, word: &str, piece: &mut String, ids: &mut Vec<u32>) {
    if word.chars().count() > MAX_WORD_CHARS {
        ids.push(unk);
        return;
    }
    let before = ids.len();
    let mut start = 0;
    while start < word.len() {
        let mut end = word.len();
        let mut found = None;
        while end > start {
            piece.clear();
            if start > 0 {
                piece.push_str("##");
            }
            piece.push_str(&word[start..end]);
            if let Some(&id) = vocab.get(piece.as_str()) {
                found = Some(id);
                break;
            }
            // Step back one character.
            end = word[..end]
                .char_indices()
                .next_back()
                .map_or(start, |(i, _)| i);
        }
        match found {
            Some(id) => {
                ids.push(id);
                start = end;
            }
            None => {
                ids.truncate(before);
                ids.push(unk);
                return;
            }
        }
    }
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0x00A1..=0x00BF | 0x2010..=0x2027 | 0x2030..=0x205E | 0x3001..=0x3003
            | 0x3008..=0x3011 | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40
            | 0xFF5B..=0xFF65)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab<'static> {
        [
            "[UNK]", "un", "##aff", "##able", "hyper", "pin", "##ned", ",", ".", "cafe", "缓",
            "存", "a",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| (*t, i as u32))
        .collect()
    }

    #[test]
    fn splits_words_into_longest_pieces() {
        let v = vocab();
        assert_eq!(tokenize(&v, 0, "Unaffable", 10), vec![1, 2, 3]);
        assert_eq!(tokenize(&v, 0, "PINNED hyper.", 10), vec![5, 6, 4, 8]);
        // Accents are stripped after lower-casing.
        assert_eq!(tokenize(&v, 0, "Café", 10), vec![9]);
        // A word with an unknown piece is one [UNK], not a partial split.
        assert_eq!(tokenize(&v, 0, "unaffxyz a", 10), vec![0, 12]);
        // CJK ideographs stand alone; control characters vanish.
        assert_eq!(tokenize(&v, 0, "缓存\u{7}", 10), vec![10, 11]);
    }

    #[test]
    fn the_pieces_of_a_word_hold_every_look_up_of_its_split() {
        let all = |w: &str| {
            let mut v = Vec::new();
            pieces(w, &mut |p| v.push(p));
            v
        };
        assert_eq!(all("abc"), ["a", "ab", "abc", "##b", "##bc", "##c"]);
        assert_eq!(all("缓"), ["缓"]);
        assert!(all(&"a".repeat(MAX_WORD_CHARS + 1)).is_empty());
        // Splitting with only those pieces known splits as with all of
        // them: every look-up was among them.
        let v = vocab();
        for text in [
            "Unaffable",
            "PINNED hyper.",
            "Café",
            "unaffxyz a",
            "缓存\u{7}",
        ] {
            let mut wanted = Vec::new();
            words(text, |w| {
                pieces(w, &mut |p| wanted.push(p));
                true
            });
            let small: Vocab<'_> = v
                .iter()
                .filter(|(t, _)| wanted.iter().any(|w| w == *t))
                .map(|(t, id)| (*t, *id))
                .collect();
            assert_eq!(
                tokenize(&small, 0, text, 10),
                tokenize(&v, 0, text, 10),
                "{text}"
            );
        }
    }

    #[test]
    fn ascii_characters_are_lower_cased_as_the_general_case_does() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            let mut general = String::new();
            for l in c.to_lowercase() {
                general.extend(std::iter::once(l).nfd().filter(|d| !is_combining_mark(*d)));
            }
            let mut got = Vec::new();
            words(&format!("x{c}y"), |w| {
                got.push(w.to_owned());
                true
            });
            let split = c.is_whitespace()
                || is_punctuation(c)
                || c == '\0'
                || (c.is_control() && !c.is_whitespace());
            if !split {
                assert_eq!(got, vec![format!("x{general}y")], "{b:#x}");
            }
        }
    }

    #[test]
    fn stops_at_the_token_budget_and_never_panics() {
        let v = vocab();
        assert_eq!(tokenize(&v, 0, "a a a a a", 3), vec![12, 12, 12]);
        assert_eq!(tokenize(&v, 0, &"a".repeat(500), 4), vec![0]);
        for s in ["", "\u{0}\u{fffd}", "ǅ̀̀ x", "🙂🙂", "\u{10FFFF}"] {
            let _ = tokenize(&v, 0, s, 8);
        }
    }
}
