//! Helpers shared by the parsers: timestamps in every shape agents write,
//! flattening JSON content into searchable text; the bounded directory
//! walks live in [`super::walk`] and are re-exported here.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime};
use serde_json::Value;

pub use super::walk::{Keep, folder_error, walk_files, walk_stores};
use super::{ParseError, Parsed};

/// Largest text kept for one tool output, in bytes; the head and the tail are
/// kept and the middle elided, so error messages at the end stay searchable.
pub const TOOL_OUTPUT_CAP: usize = 2 * 1024;

/// Largest text kept for any other record, in bytes.
pub const TEXT_CAP: usize = 64 * 1024;

/// Parses a timestamp in any shape agents write it: RFC 3339 / ISO 8601
/// strings (UTC or with offset, with or without fractions), numbers or
/// numeric strings in Unix seconds or milliseconds. Returns Unix ms UTC.
pub fn parse_time(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .and_then(epoch_to_ms),
        Value::String(s) => parse_time_str(s),
        _ => None,
    }
}

/// [`parse_time`] for a string.
pub fn parse_time_str(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.timestamp_millis());
    }
    if let Ok(n) = s.parse::<i64>() {
        return epoch_to_ms(n);
    }
    if let Ok(f) = s.parse::<f64>() {
        return epoch_to_ms(f as i64);
    }
    // Naive forms are taken as UTC: "2025-10-31 18:36:16", "2025-10-31T18:36:16.123".
    for fmt in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(dt.and_utc().timestamp_millis());
        }
    }
    None
}

/// Interprets an integer as Unix seconds or milliseconds (or microseconds)
/// by magnitude. Values before 2001 in seconds are rejected as implausible.
pub fn epoch_to_ms(n: i64) -> Option<i64> {
    const SECS_2001: i64 = 978_307_200;
    const MS_2001: i64 = SECS_2001 * 1000;
    const US_2001: i64 = MS_2001 * 1000;
    if n >= US_2001 {
        Some(n / 1000)
    } else if n >= MS_2001 {
        Some(n)
    } else if (SECS_2001..MS_2001 / 100).contains(&n) {
        Some(n * 1000)
    } else {
        None
    }
}

/// Decodes one JSON line, mapping failures to [`ParseError`].
pub fn json_line(line: &[u8], offset: u64) -> Result<Value, ParseError> {
    serde_json::from_slice(line).map_err(|source| ParseError::Json { offset, source })
}

/// A file's name without its extension, or "" when it has none (or it is not
/// UTF-8): the session id of stores that name files after their sessions.
pub fn file_stem(path: &Path) -> &str {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
}

/// Parses a whole-file JSON document; a malformed one is recorded in
/// `parsed.errors` (at offset 0) and gives `None`.
pub fn json_document(bytes: &[u8], parsed: &mut Parsed) -> Option<Value> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Some(v),
        Err(source) => {
            parsed.errors.push(ParseError::Json { offset: 0, source });
            None
        }
    }
}

/// Flattens message content into text: a plain string, or an array of blocks
/// whose `text` (or string `content`) fields are joined with blank lines.
/// Blocks of other kinds (images, thinking, tool calls) are skipped.
pub fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let mut out = String::new();
            for item in items {
                let piece = match item {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => {
                        let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
                        if matches!(kind, "text" | "input_text" | "output_text") {
                            o.get("text").and_then(Value::as_str)
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                if let Some(p) = piece.filter(|p| !p.trim().is_empty()) {
                    if !out.is_empty() {
                        out.push_str("\n\n");
                    }
                    out.push_str(p);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Truncates `s` to about `cap` bytes on char boundaries, keeping the head
/// and the tail with an elision marker between. A text over the cap is
/// redacted whole first (with the indexer's redactor, see
/// [`crate::redact::scope`]), so the cut only ever shortens redacted text:
/// no key loses its BEGIN line to the elided middle, no token is split.
pub fn cap_text(s: &str, cap: usize) -> String {
    if s.len() <= cap {
        return s.to_owned();
    }
    let redacted = crate::redact::scope::redact_whole(s);
    let s = redacted.as_ref();
    if s.len() <= cap {
        return s.to_owned();
    }
    let head_len = floor_char_boundary(s, cap * 3 / 4);
    let tail_start = ceil_char_boundary(s, s.len() - cap / 4);
    let elided = tail_start - head_len;
    format!(
        "{}\n[… {elided} bytes elided …]\n{}",
        &s[..head_len],
        &s[tail_start..]
    )
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// True when the path's file name ends with `suffix`.
pub fn has_suffix(path: &Path, suffix: &str) -> bool {
    file_name(path).is_some_and(|n| n.ends_with(suffix))
}

/// The path's file name when it is UTF-8: what `Path::file_name` and
/// `to_str` give. On Unix it is read from the bytes after the last `/` (a
/// walk asks for one per file it lists), and only through
/// `Path::file_name` when those bytes are empty, `.` or `..`.
pub fn file_name(path: &Path) -> Option<&str> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
        if !matches!(last, b"" | b"." | b"..") {
            return std::str::from_utf8(last).ok();
        }
    }
    path.file_name().and_then(|n| n.to_str())
}

/// Feeds every complete line of `bytes` to `parser` the way the indexer
/// does (a torn tail is not fed), then `finish`; for parser tests.
#[cfg(test)]
pub(crate) fn feed_lines(
    parser: &mut dyn super::LineParser,
    bytes: &[u8],
) -> (Vec<crate::record::Record>, Vec<ParseError>) {
    let (mut recs, mut errs) = (Vec::new(), Vec::new());
    let mut off = 0usize;
    while let Some(i) = bytes[off..].iter().position(|&b| b == b'\n') {
        if let Err(e) = parser.line(&bytes[off..off + i], off as u64, &mut recs) {
            errs.push(e);
        }
        off += i + 1;
    }
    parser.finish(&mut recs);
    (recs, errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The file name read from the bytes is the one `Path::file_name` gives.
    #[cfg(unix)]
    #[test]
    fn file_names_are_those_of_path_file_name() {
        use std::os::unix::ffi::OsStrExt;
        let paths: [&[u8]; 16] = [
            b"/a/b/c.jsonl",
            b"c.jsonl",
            b"/a/b/",
            b"/a/b//",
            b"/a/b/.",
            b"/a/b/..",
            b"/",
            b"",
            b".",
            b"..",
            b"a/./b",
            b"/a/b/.hidden",
            b"/a/\xff.jsonl",
            b"/a/\xff/ok.jsonl",
            b"/a/caf\xc3\xa9.jsonl",
            b"//x",
        ];
        for p in paths {
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(p));
            let want = path.file_name().and_then(|n| n.to_str());
            assert_eq!(super::file_name(path), want, "{path:?}");
        }
        assert!(super::has_suffix(
            std::path::Path::new("/a/s.jsonl"),
            ".jsonl"
        ));
        assert!(!super::has_suffix(
            std::path::Path::new("/a.jsonl/"),
            ".txt"
        ));
    }

    #[test]
    fn times_in_every_shape() {
        let want = 1_761_935_776_000; // 2025-10-31T18:36:16Z
        assert_eq!(parse_time(&json!("2025-10-31T18:36:16Z")), Some(want));
        assert_eq!(parse_time(&json!("2025-10-31T18:36:16.000Z")), Some(want));
        assert_eq!(parse_time(&json!("2025-10-31T20:36:16+02:00")), Some(want));
        assert_eq!(parse_time(&json!(1_761_935_776)), Some(want));
        assert_eq!(parse_time(&json!(1_761_935_776_000_i64)), Some(want));
        assert_eq!(parse_time(&json!("1761935776")), Some(want));
        assert_eq!(parse_time(&json!("2025-10-31 18:36:16")), Some(want));
        assert_eq!(parse_time(&json!(1_761_935_776.5)), Some(want));
        assert_eq!(parse_time(&json!("yesterday")), None);
        assert_eq!(parse_time(&json!(42)), None);
        assert_eq!(parse_time(&json!(null)), None);
    }

    #[test]
    fn content_flattens_blocks() {
        let v = json!([{"type":"text","text":"a"},{"type":"image"},{"type":"thinking","thinking":"x"},"b"]);
        assert_eq!(content_text(&v), "a\n\nb");
        assert_eq!(content_text(&json!("plain")), "plain");
        assert_eq!(content_text(&json!(7)), "");
    }

    #[test]
    fn cap_redacts_before_cutting() {
        // A key whose BEGIN line falls in the elided middle, plain and
        // JSON-escaped: nothing of it is left after the cut.
        let body: Vec<String> = (0..50)
            .map(|i| {
                format!("{i:02}Zq81mNs02bXcMIIEowIBAAKCAQEAq7BFUKxXvPZcH4mR2sJhT9wLQ3nYeV6gKp8f")
            })
            .collect();
        let key = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            body.join("\n")
        );
        let lines: Vec<String> = (0..400).map(|i| format!("line {i}")).collect();
        let output = format!("{}\n{key}\n{}", lines.join("\n"), lines[..60].join("\n"));
        for text in [
            output.clone(),
            serde_json::to_string(&output).expect("json"),
        ] {
            let cut = cap_text(&text, TOOL_OUTPUT_CAP);
            assert!(
                cut.len() < text.len() && cut.contains("bytes elided"),
                "{cut}"
            );
            assert!(!cut.contains("Zq81mNs02bXc"), "{cut}");
            assert!(!cut.contains("-----END"), "{cut}");
        }
        // A token straddling the cut point is not split.
        let token = "ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8";
        let text = format!("{}{token}{}", "x ".repeat(765), " b".repeat(600));
        let cut = cap_text(&text, TOOL_OUTPUT_CAP);
        assert!(!cut.contains("ghp_sMe") && !cut.contains("Ze1f8"), "{cut}");
    }

    #[test]
    fn cap_keeps_head_and_tail_on_char_boundaries() {
        let s = "é".repeat(1000);
        let c = cap_text(&s, 101);
        assert!(c.len() < 200);
        assert!(c.starts_with('é') && c.ends_with('é'));
        assert_eq!(cap_text("short", 10), "short");
    }
}
