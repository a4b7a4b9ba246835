//! Shannon entropy and charset checks for "high-entropy value in a
//! secret-shaped position" detection.
//!
//! These checks only ever run on a single candidate value (the right-hand
//! side of an assignment whose key looks secret-ish), never on whole texts.

/// Minimum length (bytes) for a value to be judged on entropy alone.
pub(crate) const MIN_LEN: usize = 16;

/// Entropy threshold (bits per byte) for values drawn from a hex alphabet.
/// Random hex tops out at 4.0; a random 32-char hex string measures ~3.6-3.9.
pub(crate) const HEX_THRESHOLD: f64 = 3.0;

/// Entropy threshold (bits per byte) for values drawn from base62/base64
/// alphabets. A random 16-char base62 string measures ~3.7-4.0, while
/// repetitive or word-like strings of the same length stay well below.
pub(crate) const B64_THRESHOLD: f64 = 3.3;

/// Shannon entropy of `s` in bits per byte (0.0 for the empty string).
pub(crate) fn shannon(s: &str) -> f64 {
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return 0.0;
    }
    let mut freq = [0u32; 256];
    for &b in bytes {
        freq[usize::from(b)] += 1;
    }
    let n = bytes.len() as f64;
    freq.iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// True for characters that appear in tokens, keys and base64 blobs.
fn is_secret_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~')
}

/// True when `s` is all hex digits.
pub(crate) fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// True when `s` has the 8-4-4-4-12 hex shape of a UUID.
pub(crate) fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A value that is long, drawn from a token alphabet, mixes letters and
/// digits, is not a UUID, and has entropy above the threshold for its
/// alphabet.
pub(crate) fn is_high_entropy(s: &str) -> bool {
    if s.len() < MIN_LEN || !s.bytes().all(is_secret_char) || is_uuid(s) {
        return false;
    }
    let has_digit = s.bytes().any(|b| b.is_ascii_digit());
    let has_alpha = s.bytes().any(|b| b.is_ascii_alphabetic());
    if !has_digit || !has_alpha {
        return false;
    }
    let threshold = if is_hex(s) {
        HEX_THRESHOLD
    } else {
        B64_THRESHOLD
    };
    shannon(s) >= threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shannon_values() {
        assert_eq!(shannon(""), 0.0);
        assert_eq!(shannon("aaaa"), 0.0);
        assert!((shannon("ab") - 1.0).abs() < 1e-9);
        assert!((shannon("abcd") - 2.0).abs() < 1e-9);
    }

    #[test]
    fn high_entropy_table() {
        let rows: &[(&str, bool)] = &[
            ("OV4qBkdfQ1y3GQsMpSscDlkr", true),
            ("9f8a7c6b5d4e3f2a1b0c9d8e7f6a5b4c", true),
            ("El2hpChYgCfrL1spNxnyVmihA+2O76UMFxFkM+R5", true),
            // too short
            ("a1b2c3d4", false),
            // no digits: words
            ("configuration_value", false),
            // no letters
            ("12345678901234567890", false),
            // repetitive
            ("aaaaaaaa11111111", false),
            // UUID
            ("550e8400-e29b-41d4-a716-446655440000", false),
            // spaces are not token characters
            ("this is 1 sentence ok", false),
        ];
        for (input, expected) in rows {
            assert_eq!(is_high_entropy(input), *expected, "{input}");
        }
    }

    #[test]
    fn uuid_and_hex() {
        assert!(is_uuid("550e8400-e29b-41d4-a716-446655440000"));
        assert!(!is_uuid("550e8400e29b41d4a716446655440000"));
        assert!(is_hex("deadBEEF01"));
        assert!(!is_hex("xyz"));
        assert!(!is_hex(""));
    }
}
