//! Notes: durable facts stored with `cairn remember`, kept by the node in
//! its own append-only JSONL file (primary data, indexed like any session).
//! Each line: `{"time_ms": .., "project": "..", "text": ".."}`. Notes are
//! grouped into one session per project (`notes:<project>` or `notes:global`).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::common::json_line;
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

/// The notes source.
pub struct Notes;

/// Agent id of notes.
pub const AGENT: &str = "notes";

#[derive(Debug, Serialize, Deserialize)]
struct NoteLine {
    time_ms: i64,
    #[serde(default)]
    project: Option<String>,
    text: String,
}

impl Source for Notes {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![loc.notes_file.clone()]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        if loc.notes_file.is_file() {
            vec![SourceFile::new(
                loc.notes_file.clone(),
                Reader::Lines(|_| Box::new(NotesParser)),
            )]
        } else {
            Vec::new()
        }
    }
}

struct NotesParser;

impl LineParser for NotesParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let note: NoteLine =
            serde_json::from_value(v).map_err(|source| ParseError::Json { offset, source })?;
        let session = format!("notes:{}", note.project.as_deref().unwrap_or("global"));
        let mut r = Record::new(AGENT, &session, Role::Note, note.text);
        r.project = note.project;
        r.time_ms = Some(note.time_ms);
        r.offset = offset;
        out.push(r);
        Ok(())
    }
}

/// The lock that serialises appending to and rewriting the notes file
/// (a rewrite replaces the file, so an append must not land in the old one).
fn lock_path(path: &Path) -> std::path::PathBuf {
    path.with_extension("lock")
}

fn lock(path: &Path) -> std::io::Result<crate::lock::FileLock> {
    crate::lock::FileLock::acquire(&lock_path(path)).map_err(std::io::Error::other)
}

/// Appends one note (text already redacted by the caller) to the notes file.
pub fn append(path: &Path, project: Option<&str>, text: &str, time_ms: i64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::home::ensure(dir)?;
    }
    let _lock = lock(path)?;
    let line = serde_json::to_string(&NoteLine {
        time_ms,
        project: project.map(str::to_owned),
        text: text.to_owned(),
    })
    .map_err(std::io::Error::other)?;
    let mut f = crate::home::private_file()
        .create(true)
        .append(true)
        .open(path)?;
    // One write call per line so concurrent appenders do not interleave.
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_data()
}

/// Rewrites the notes file without the notes for which `drop` is true
/// (each given as the record the indexer would make of it). Lines that do
/// not parse are kept. The new file replaces the old one atomically
/// (written aside, synced, renamed), under the same lock as [`append`].
/// Returns how many lines were removed; the file is untouched when none is.
pub fn rewrite_without(
    path: &Path,
    mut drop: impl FnMut(Record) -> bool,
) -> std::io::Result<usize> {
    let _lock = lock(path)?;
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut kept = Vec::with_capacity(bytes.len());
    let mut removed = 0usize;
    let mut offset = 0u64;
    // A line that does not parse (a torn last line included) is kept as it is.
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let mut out = Vec::new();
        let gone =
            NotesParser.line(body, offset, &mut out).is_ok() && out.pop().is_some_and(&mut drop);
        offset += line.len() as u64;
        if gone {
            removed += 1;
        } else {
            kept.push(line);
        }
    }
    if removed == 0 {
        return Ok(0);
    }
    crate::home::write_private_atomic(path, &kept.concat())?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_notes_parse_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("notes.jsonl");
        append(
            &p,
            Some("/home/dev/shop"),
            "use port 8443 for staging",
            1_700_000_000_000,
        )
        .expect("append");
        append(&p, None, "global fact", 1_700_000_000_001).expect("append");
        let bytes = std::fs::read(&p).expect("read");
        let mut parser = NotesParser;
        let mut out = Vec::new();
        let mut off = 0u64;
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            parser.line(line, off, &mut out).expect("parse");
            off += line.len() as u64 + 1;
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].session_id, "notes:/home/dev/shop");
        assert_eq!(out[0].role, Role::Note);
        assert_eq!(out[1].session_id, "notes:global");
        assert!(parser.line(b"{not json", 0, &mut out).is_err());
    }

    #[test]
    fn rewrite_drops_chosen_notes_and_keeps_the_rest_byte_for_byte() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("notes.jsonl");
        append(&p, Some("/a"), "keep one", 1).expect("append");
        append(&p, Some("/b"), "forget me", 2).expect("append");
        append(&p, Some("/b"), "forget me", 2).expect("append a duplicate");
        append(&p, None, "keep two", 3).expect("append");
        let mut raw = std::fs::read(&p).expect("read");
        raw.extend_from_slice(b"{not json}\n{\"time_ms\":4,\"text\":\"torn");
        std::fs::write(&p, &raw).expect("write");
        let before = String::from_utf8(raw).expect("utf8");

        assert_eq!(rewrite_without(&p, |_| false).expect("noop"), 0);
        assert_eq!(std::fs::read_to_string(&p).expect("read"), before);

        let mut seen = 0;
        let n = rewrite_without(&p, |r| {
            seen += 1;
            r.project.as_deref() == Some("/b")
        })
        .expect("rewrite");
        assert_eq!(n, 2);
        assert_eq!(seen, 4, "every parsable line is offered");
        let after = std::fs::read_to_string(&p).expect("read");
        assert!(!after.contains("forget me"), "{after}");
        let want: String = before
            .split_inclusive('\n')
            .filter(|l| !l.contains("forget me"))
            .collect();
        assert_eq!(after, want);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
