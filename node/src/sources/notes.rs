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
            vec![SourceFile {
                path: loc.notes_file.clone(),
                reader: Reader::Lines(|_| Box::new(NotesParser)),
            }]
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

/// Appends one note (text already redacted by the caller) to the notes file.
pub fn append(path: &Path, project: Option<&str>, text: &str, time_ms: i64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let line = serde_json::to_string(&NoteLine {
        time_ms,
        project: project.map(str::to_owned),
        text: text.to_owned(),
    })
    .map_err(std::io::Error::other)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // One write call per line so concurrent appenders do not interleave.
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_data()
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
}
