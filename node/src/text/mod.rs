//! Text rules shared by the store and search, below both: how text is
//! tokenised for the FTS index ([`index_form`], [`tokens`], [`spaced_tokens`],
//! [`light_stem`]), made safe for a terminal ([`strip_terminal`]), and
//! whether it reads like a decision ([`is_decision`], stored as a flag and
//! boosted by ranking).
//!
//! SQLite's `unicode61` tokenizer splits on spaces and punctuation, which
//! leaves a run of Chinese or Japanese characters as one giant token. Before
//! text enters the FTS index, [`index_form`] puts a space between CJK
//! characters so each becomes a token; queries get the same treatment and
//! search CJK runs as phrases, which matches any substring of two or more
//! characters in order. It also ends such text with the English words of
//! its character pairs ([`translation`]), so English questions find it.

use std::borrow::Cow;

mod decision;
mod spelling;
mod translation;

pub use decision::is_decision;
pub use spelling::other_spelling;
pub use translation::{english_of_cjk, sorted_lookup, translations_of};

/// True for characters written without spaces between words (Han, kana, Hangul syllables).
pub fn is_cjk(c: char) -> bool {
    is_han(c)
        || is_hiragana(c)
        || matches!(c as u32,
            0x30A0..=0x30FF      // Katakana
            | 0xAC00..=0xD7AF    // Hangul syllables
            | 0xFF66..=0xFF9F) // Halfwidth Katakana
}

/// True for Han ideographs (Chinese characters, Japanese kanji).
pub fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B-F, compatibility supplement
}

/// True for hiragana, the script Japanese grammar is written in.
pub fn is_hiragana(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x309F)
}

/// Whether `text` may hold a CJK character. Every one is at U+3040 or
/// above, so its UTF-8 form starts with a byte of 0xE3 or more; text with
/// no such byte (ASCII, Latin, Cyrillic, Greek...) holds none. A byte scan
/// over fixed-size blocks (which the compiler turns into vector code), in
/// place of decoding every character of every record the index stores.
fn may_hold_cjk(text: &str) -> bool {
    text.as_bytes()
        .chunks(64)
        .any(|block| block.iter().fold(0, |m, &b| m.max(b)) >= 0xE3)
}

/// The text as the FTS index sees it: CJK characters separated by
/// spaces, and after the text, on a line of their own, the English words
/// of its CJK character pairs ([`english_of_cjk`]), so that an English
/// question finds a record written in Chinese or Japanese. Only the index
/// holds them: the stored text, its snippets and its meaning vector are
/// the record's own.
pub fn index_form(text: &str) -> Cow<'_, str> {
    if !may_hold_cjk(text) || !text.chars().any(is_cjk) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    let english = english_of_cjk(text);
    if !english.is_empty() {
        out.push('\n');
        out.push_str(&english);
    }
    Cow::Owned(out)
}

/// Calls `each` with the lowercase tokens of `text` the way the index
/// splits it (alphanumeric runs, with each CJK character its own token),
/// in order.
fn each_token(text: &str, mut each: impl FnMut(&str)) {
    let mut cur = String::new();
    let mut one = [0u8; 4];
    for c in text.chars() {
        // ASCII, most of any history, takes the short way: for it the
        // general rules below give exactly this.
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                cur.push(c.to_ascii_lowercase());
            } else if !cur.is_empty() {
                each(&cur);
                cur.clear();
            }
        } else if is_cjk(c) {
            if !cur.is_empty() {
                each(&cur);
                cur.clear();
            }
            each(c.encode_utf8(&mut one));
        } else if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            each(&cur);
            cur.clear();
        }
    }
    if !cur.is_empty() {
        each(&cur);
    }
}

/// Splits text into lowercase tokens the way the index does (alphanumeric
/// runs, with each CJK character its own token).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_token(text, |t| out.push(t.to_owned()));
    out
}

/// The tokens of `text` with one space between and one at each end, in
/// one string, so that a run of tokens is a substring of it.
pub fn spaced_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    each_token(text, |t| {
        out.push_str(t);
        out.push(' ');
    });
    out
}

/// Text safe to print on a terminal and to hand to scripts: escape
/// sequences (CSI, OSC, and any other ESC-introduced sequence) removed,
/// other control characters except newline and tab turned into spaces, and
/// bidirectional overrides dropped.
pub fn strip_terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                // CSI: parameters and intermediates up to a final byte.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC / DCS / APC / PM / SOS: up to BEL or ESC \.
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\n' | '\t' => out.push(c),
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A rough English stem for showing where a stemmed match is: common
/// endings removed ("pinned" → "pin", "crashes" → "crash", "signing" →
/// "sign"). Matching itself uses SQLite's Porter tokenizer; this only finds
/// the place to highlight, as a prefix.
pub fn light_stem(word: &str) -> String {
    let w = word.to_lowercase();
    let n = w.chars().count();
    for suffix in [
        "ations", "ation", "ments", "ment", "ingly", "ings", "ing", "edly", "ies", "ied", "es",
        "ed", "ly", "er", "s",
    ] {
        if suffix == "s" && (w.ends_with("ss") || w.ends_with("us") || w.ends_with("is")) {
            continue;
        }
        if let Some(stem) = w.strip_suffix(suffix)
            && stem.chars().count() >= 3
            && n > suffix.len() + 2
        {
            let mut stem = stem.to_owned();
            // "pinned" → "pinn" → "pin"; "stopping" → "stop".
            let b = stem.as_bytes();
            if b.len() >= 4 && b[b.len() - 1] == b[b.len() - 2] && !b"lsz".contains(&b[b.len() - 1])
            {
                stem.pop();
            }
            return stem;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_scan_misses_no_cjk_character() {
        // The first code point with a 0xE3 lead byte is U+3000, below every
        // CJK range; the last one without is U+2FFF.
        assert!(!may_hold_cjk("\u{2fff}"));
        assert!(may_hold_cjk("\u{3000}"));
        for c in ['\u{3040}', '\u{4e00}', '\u{ac00}', '\u{ff66}', '\u{20000}'] {
            assert!(is_cjk(c) && may_hold_cjk(&c.to_string()), "{c}");
        }
        // Every CJK character below U+10000 and a sample above it.
        let all = (0x3000u32..0x1_0000)
            .chain((0x2_0000..0x2_FA20).step_by(97))
            .filter_map(char::from_u32)
            .filter(|&c| is_cjk(c));
        for c in all {
            assert!(may_hold_cjk(&format!("ascii before {c}")), "{c}");
        }
    }

    #[test]
    fn terminal_sequences_are_stripped() {
        assert_eq!(strip_terminal("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(strip_terminal("x\u{1b}]0;title\u{7}y"), "xy");
        assert_eq!(strip_terminal("x\u{1b}]8;;http://e\u{1b}\\y"), "xy");
        assert_eq!(strip_terminal("a\u{8}b\u{202e}c\nd"), "a bc\nd");
        assert_eq!(strip_terminal("plain 文字"), "plain 文字");
    }

    #[test]
    fn light_stems() {
        assert_eq!(light_stem("pinned"), "pin");
        assert_eq!(light_stem("signed"), "sign");
        assert_eq!(light_stem("crashes"), "crash");
        assert_eq!(light_stem("crashing"), "crash");
        assert_eq!(light_stem("painting"), "paint");
        assert_eq!(light_stem("sql"), "sql");
        assert_eq!(light_stem("class"), "class");
    }

    #[test]
    fn cjk_is_spaced_and_ascii_borrowed() {
        assert!(matches!(index_form("plain text"), Cow::Borrowed(_)));
        // Text past U+3000 that is not CJK stays as it is, and CJK after a
        // long run of other text (past the first scanned block) is found.
        for kept in ["\u{2fff} ok", "emoji 🙂 and ⟨brackets⟩", "Ж ж ё"] {
            assert!(matches!(index_form(kept), Cow::Borrowed(_)), "{kept}");
        }
        let late = format!("{}缓", "x".repeat(200));
        assert_eq!(index_form(&late), format!("{} 缓 ", "x".repeat(200)));
        // A pair with a translation adds its English word after the text.
        assert_eq!(index_form("用缓存"), " 用  缓  存 \ncache");
        assert_eq!(index_form("缓"), " 缓 ");
        assert_eq!(tokens("为什么用 Redis?"), ["为", "什", "么", "用", "redis"]);
    }

    #[test]
    fn ascii_takes_the_short_way_to_the_same_tokens() {
        // The rule for every character, as written before ASCII had a
        // path of its own.
        fn general(text: &str) -> Vec<String> {
            let (mut out, mut cur) = (Vec::new(), String::new());
            for c in text.chars() {
                if is_cjk(c) {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    out.push(c.to_string());
                } else if c.is_alphanumeric() {
                    cur.extend(c.to_lowercase());
                } else if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            if !cur.is_empty() {
                out.push(cur);
            }
            out
        }
        let mut all_ascii = String::new();
        for b in 0u8..128 {
            all_ascii.push(char::from(b));
            all_ascii.push_str("aZ9");
        }
        for text in [
            all_ascii.as_str(),
            "Self.WIDTH * self.height_2 -> ÀÉÎ straße İstanbul ΣΑΣ",
            "把 .Python-Version 改成 3.10，ＡＢＣ１２３ ｶﾀｶﾅ",
            "tab\there\r\nnul\0end ✓ ok",
        ] {
            assert_eq!(tokens(text), general(text), "{text}");
        }
    }

    #[test]
    fn tokens_split_punctuation() {
        assert_eq!(
            tokens("foo::bar src/main.rs"),
            ["foo", "bar", "src", "main", "rs"]
        );
        assert_eq!(tokens("Почему КЭШ"), ["почему", "кэш"]);
    }
}
