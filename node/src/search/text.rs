//! Text normalisation shared by indexing and querying.
//!
//! SQLite's `unicode61` tokenizer splits on spaces and punctuation, which
//! leaves a run of Chinese or Japanese characters as one giant token. Before
//! text enters the FTS index, [`index_form`] puts a space between CJK
//! characters so each becomes a token; queries get the same treatment and
//! search CJK runs as phrases, which matches any substring of two or more
//! characters in order.

use std::borrow::Cow;

/// True for characters written without spaces between words (Han, kana, Hangul syllables).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9F    // Halfwidth Katakana
        | 0x20000..=0x2FA1F) // Extensions B-F, compatibility supplement
}

/// The text as the FTS index sees it: CJK characters separated by spaces.
pub fn index_form(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_cjk) {
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
    Cow::Owned(out)
}

/// Splits text into lowercase tokens the way the index does (alphanumeric
/// runs, with each CJK character its own token).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_is_spaced_and_ascii_borrowed() {
        assert!(matches!(index_form("plain text"), Cow::Borrowed(_)));
        assert_eq!(index_form("用缓存"), " 用  缓  存 ");
        assert_eq!(tokens("为什么用 Redis?"), ["为", "什", "么", "用", "redis"]);
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
