//! How record text is kept on disk: short text as is, longer text
//! zstd-compressed (tool outputs and code compress three- to fivefold).
//! `records.flags` bit [`COMPRESSED`] says which.

use std::borrow::Cow;

/// `records.flags` bit: the text is zstd-compressed.
pub const COMPRESSED: i64 = 1 << 1;
/// `records.flags` bit: the text uses decision language ("decided", "because", ...).
pub const DECISION: i64 = 1 << 0;

/// Texts shorter than this are stored as they are.
const MIN_COMPRESS: usize = 384;
/// zstd level: fast, and most of the gain.
const LEVEL: i32 = 6;

/// Encodes text for the `text` column; returns the bytes and whether they are compressed.
pub fn encode(text: &str) -> (Cow<'_, [u8]>, bool) {
    if text.len() >= MIN_COMPRESS
        && let Ok(z) = zstd::bulk::compress(text.as_bytes(), LEVEL)
        && z.len() + 16 < text.len()
    {
        return (Cow::Owned(z), true);
    }
    (Cow::Borrowed(text.as_bytes()), false)
}

/// Decodes a `text` column value. A value that cannot be decoded (a
/// damaged row) yields a marker instead of failing the whole query.
pub fn decode(bytes: &[u8], flags: i64) -> String {
    if flags & COMPRESSED != 0 {
        match zstd::decode_all(bytes) {
            Ok(plain) => String::from_utf8(plain)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            Err(_) => "[cairn: unreadable record text]".to_owned(),
        }
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_short_and_long() {
        for text in [
            "",
            "short",
            &"fn main() { println!(\"hi\"); }\n".repeat(100),
            &"日本語のテキスト".repeat(200),
        ] {
            let (bytes, z) = encode(text);
            assert_eq!(z, text.len() > 1000, "{}", text.len());
            let flags = if z { COMPRESSED } else { 0 };
            assert_eq!(decode(&bytes, flags), text);
        }
        assert!(decode(b"not zstd", COMPRESSED).contains("unreadable"));
    }
}
