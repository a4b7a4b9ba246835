//! Helpers shared by the parsers: timestamps in every shape agents write,
//! flattening JSON content into searchable text, bounded directory walks.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime};
use serde_json::Value;

use super::{ParseError, Parsed, Reader, SourceFile, Stat};

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

/// Decides which files a walk keeps, from their full path. Shared by the
/// two threads a large walk uses.
pub type Keep<'a> = &'a (dyn Fn(&Path) -> bool + Sync);

/// Lists files under `dir` (recursively, at most `max_depth` levels down)
/// for which `keep` is true, sorted for a stable order. A missing folder
/// yields nothing; a folder that exists but cannot be listed (no
/// permission, I/O error) is listed itself, whatever `keep` says, so the
/// indexer reports it (see [`folder_error`]) instead of skipping it
/// silently. Symlinked folders are not followed.
pub fn walk_files(dir: &Path, max_depth: usize, keep: Keep<'_>) -> Vec<PathBuf> {
    walk(dir, max_depth, keep)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// [`walk_files`] as stores read by `reader`, each with the size and mtime
/// the walk took: a stat by name relative to the folder being listed costs
/// the kernel less than one by full path, and the indexer need not stat
/// the file again.
pub fn walk_stores(
    dir: &Path,
    max_depth: usize,
    keep: Keep<'_>,
    reader: Reader,
) -> Vec<SourceFile> {
    walk(dir, max_depth, keep)
        .into_iter()
        .map(|(path, stat)| SourceFile { path, reader, stat })
        .collect()
}

/// A file a walk kept, with its size and mtime when they could be taken.
type Walked = (PathBuf, Option<Stat>);

/// The walk behind [`walk_files`]: depth first, each folder's entries in
/// name order (the order a sort of the whole paths by component gives).
/// The first folder with two or more subfolders is shared with a second
/// thread (its later subfolders, in order), since a stat per file is most
/// of the cost of a pass with nothing new.
fn walk(dir: &Path, max_depth: usize, keep: Keep<'_>) -> Vec<Walked> {
    let mut out = Vec::new();
    walk_dir(dir, max_depth, keep, true, &mut out);
    out
}

/// A folder that vanished (or is not a folder) while being walked: not an error.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

fn walk_dir(dir: &Path, depth_left: usize, keep: Keep<'_>, split: bool, out: &mut Vec<Walked>) {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(e) if gone(&e) => return,
        Err(_) => return out.push((dir.to_path_buf(), None)),
    };
    // `DirEntry::path` is the folder as given joined with the name.
    let mut entries: Vec<(PathBuf, std::fs::DirEntry)> = listing
        .filter_map(Result::ok)
        .map(|e| (e.path(), e))
        .collect();
    // One folder's paths share their prefix: comparing the bytes compares the names.
    entries.sort_unstable_by(|a, b| {
        a.0.as_os_str()
            .as_encoded_bytes()
            .cmp(b.0.as_os_str().as_encoded_bytes())
    });
    let is_dir = |e: &std::fs::DirEntry| e.file_type().is_ok_and(|t| t.is_dir());
    let dirs: Vec<usize> = if split && depth_left > 0 {
        (0..entries.len())
            .filter(|&i| is_dir(&entries[i].1))
            .collect()
    } else {
        Vec::new()
    };
    if dirs.len() < 2 {
        // A lone subfolder may still be the one to share.
        for (path, entry) in entries {
            visit(path, &entry, depth_left, keep, split, out);
        }
        return;
    }
    // The entries from the middle subfolder on go to the other thread,
    // whose results follow this thread's, so the order is kept.
    let (mine, theirs) = entries.split_at(dirs[dirs.len() / 2]);
    let theirs_walk = || {
        let mut v = Vec::new();
        for (path, entry) in theirs {
            visit(path.clone(), entry, depth_left, keep, false, &mut v);
        }
        v
    };
    std::thread::scope(|s| {
        let helper = std::thread::Builder::new()
            .name("cairn-walk".into())
            .spawn_scoped(s, theirs_walk);
        for (path, entry) in mine {
            visit(path.clone(), entry, depth_left, keep, false, out);
        }
        let mut rest = match helper {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            // No second thread to be had: walk them here.
            Err(_) => theirs_walk(),
        };
        out.append(&mut rest);
    });
}

fn visit(
    path: PathBuf,
    entry: &std::fs::DirEntry,
    depth_left: usize,
    keep: Keep<'_>,
    split: bool,
    out: &mut Vec<Walked>,
) {
    // The type comes with the listing; only a symlink costs a stat by path.
    let Ok(ft) = entry.file_type() else { return };
    if ft.is_dir() {
        if depth_left > 0 {
            walk_dir(&path, depth_left - 1, keep, split, out);
        }
    } else if ft.is_file() {
        if keep(&path) {
            // Relative to the open folder (a statx on its descriptor).
            match entry.metadata() {
                Ok(m) => out.push((path, Some(Stat::of(&m)))),
                Err(e) if gone(&e) => {}
                Err(_) => out.push((path, None)),
            }
        }
    } else if ft.is_symlink()
        && let Ok(m) = std::fs::metadata(&path)
        && m.is_file()
        && keep(&path)
    {
        out.push((path, Some(Stat::of(&m))));
    }
}

/// Why a discovered folder (see [`walk_files`]) cannot be read, or `None`
/// when `path` is not a folder or can be listed now.
pub fn folder_error(path: &Path) -> Option<String> {
    if !path.is_dir() {
        return None;
    }
    std::fs::read_dir(path)
        .err()
        .map(|e| format!("cannot list folder {}: {e}", path.display()))
}

/// True when the path's file name ends with `suffix`.
pub fn has_suffix(path: &Path, suffix: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(suffix))
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

    #[test]
    fn walk_lists_in_path_order_with_the_stats_of_each_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        // Names around '/' in byte order ('-' and '.' sort before it), and
        // enough subfolders that the walk is shared with a second thread.
        let files = [
            "a.jsonl",
            "a/x.jsonl",
            "a-b/x.jsonl",
            "a.d/y.jsonl",
            "b/c/deep.jsonl",
            "b/c/d/too_deep.jsonl",
            "b/z.jsonl",
            "c/1.jsonl",
            "c/2.txt",
            "d/e/f.jsonl",
            "z.jsonl",
        ];
        for (i, f) in files.iter().enumerate() {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x".repeat(i + 1)).expect("write");
        }
        std::fs::create_dir_all(root.join("empty")).expect("mkdir");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("z.jsonl"), root.join("link.jsonl")).expect("symlink");
        let keep = |p: &Path| has_suffix(p, ".jsonl");
        let found = walk_stores(&root, 2, &keep, Reader::Whole(|_, _| Parsed::default()));
        let mut want: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.ends_with(".jsonl") && f.matches('/').count() <= 2)
            .map(|f| root.join(f))
            .collect();
        if cfg!(unix) {
            want.push(root.join("link.jsonl"));
        }
        want.sort();
        let paths: Vec<PathBuf> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(paths, want);
        for f in &found {
            let m = std::fs::metadata(&f.path).expect("stat");
            assert_eq!(f.stat, Some(Stat::of(&m)), "{}", f.path.display());
        }
        assert_eq!(walk_files(&root, 2, &keep), want);
        // Files directly in the folder only, and nothing for a missing folder.
        let top = walk_files(&root, 0, &keep);
        assert_eq!(top.len(), if cfg!(unix) { 3 } else { 2 }, "{top:?}");
        assert!(walk_files(&dir.path().join("nowhere"), 3, &keep).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn walk_lists_a_folder_it_cannot_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let locked = dir.path().join("a/locked");
        std::fs::create_dir_all(&locked).expect("mkdir");
        std::fs::write(locked.join("s.jsonl"), "x").expect("write");
        std::fs::create_dir_all(dir.path().join("b")).expect("mkdir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        if std::fs::read_dir(&locked).is_ok() {
            // Running as root: permissions do not apply.
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            return;
        }
        let found = walk_files(dir.path(), 3, &|p: &Path| has_suffix(p, ".jsonl"));
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(found, [locked]);
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
