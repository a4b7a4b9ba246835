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
        && let Some(z) = compress(text.as_bytes())
        && z.len() + 16 < text.len()
    {
        return (Cow::Owned(z), true);
    }
    (Cow::Borrowed(text.as_bytes()), false)
}

thread_local! {
    /// One compression context per thread: making a zstd context per
    /// record costs more than compressing a short text.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Stored texts are at most [`crate::sources::common::TEXT_CAP`] plus an
/// elision marker; anything claiming to be far larger is damaged.
const MAX_PLAIN: u64 = 1 << 20;

thread_local! {
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn decompress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(bytes)
        .ok()
        .flatten()
        .filter(|n| *n <= MAX_PLAIN)
        .ok_or_else(|| std::io::Error::other("no usable frame size"))?;
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(std::io::Error::other)?;
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(bytes, size as usize),
            None => Err(std::io::Error::other("no decompressor")),
        }
    })
}

fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        slot.as_mut()?.compress(bytes).ok()
    })
}

/// Decodes a `text` column value. A value that cannot be decoded (a
/// damaged row) yields a marker instead of failing the whole query.
pub fn decode(bytes: &[u8], flags: i64) -> String {
    if flags & COMPRESSED != 0 {
        match decompress(bytes) {
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
