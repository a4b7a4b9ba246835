//! OpenClaw (formerly Clawdbot): pi-format JSONL per session, append-only.
//!
//! `${OPENCLAW_STATE_DIR:-~/.openclaw}/agents/<agentId>/sessions/<id>.jsonl`
//! (older installs: `~/.clawdbot/agents/…`). Beside them sit `sessions.json`
//! (an index), `<id>.checkpoint.<uuid>.jsonl` snapshots and
//! `.deleted`/`.reset`/`.bak` archives, none of which are read. The format is
//! pi v3 (header with `cwd`, `message` lines with `user`/`assistant`/
//! `toolResult`), so the reader is [`super::pi::new_parser`]; a session whose
//! header has no `cwd` gets no project.
//!
//! Releases from 2026.9 keep the transcripts in SQLite instead:
//! `agents/<agentId>/agent/openclaw-agent.sqlite`, table
//! `transcript_events(session_id, seq, event_json, event_zstd, …)`, one row
//! per pi event (`event_json`, or the same text zstd-compressed in
//! `event_zstd`). It is read from a row-id watermark, each session's events
//! in `seq` order through pi's parser; a session already partly read gets
//! its header (`seq` 0, with the `cwd`) fed again first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;

use super::common::walk_stores;
use super::db;
use super::{
    DbBatch, LineParser, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile,
    Watermark,
};

/// The OpenClaw source.
pub struct OpenClaw;

fn state_dirs(loc: &Locations) -> Vec<PathBuf> {
    vec![
        loc.var_or("OPENCLAW_STATE_DIR", loc.home.join(".openclaw")),
        loc.home.join(".clawdbot"),
    ]
}

/// A live session transcript: `<id>.jsonl`, not a checkpoint or an archive.
fn is_session(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let in_sessions = p
        .parent()
        .and_then(|d| d.file_name())
        .is_some_and(|n| n == "sessions");
    in_sessions && name.ends_with(".jsonl") && !name.contains(".checkpoint.")
}

impl Source for OpenClaw {
    fn agent(&self) -> &'static str {
        "openclaw"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["OPENCLAW_STATE_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        state_dirs(loc)
            .into_iter()
            .map(|d| d.join("agents"))
            .collect()
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let roots = self.roots(loc);
        let mut out: Vec<SourceFile> = roots
            .iter()
            .flat_map(|d| walk_stores(d, 2, &is_session, Reader::Lines(super::pi::new_parser)))
            .collect();
        for d in &roots {
            out.extend(walk_stores(
                d,
                2,
                &|p| p.file_name().is_some_and(|n| n == DB_NAME),
                Reader::Database(read_db),
            ));
        }
        out
    }
}

/// The per-agent transcript database of 2026.9 and later.
const DB_NAME: &str = "openclaw-agent.sqlite";

/// An event's text: `event_json`, else `event_zstd` decompressed.
fn event_text(json: ValueRef<'_>, zstd: ValueRef<'_>) -> Option<Vec<u8>> {
    match (json, zstd) {
        (ValueRef::Text(b), _) => Some(b.to_vec()),
        (_, ValueRef::Blob(z)) => zstd::decode_all(z).ok(),
        _ => None,
    }
}

/// Reads `openclaw-agent.sqlite` from a `transcript_events` row-id watermark.
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = db::open_read_only(path)?;
    let since = db::watermark_i64(watermark).unwrap_or(0);
    let Some(_) = db::require_tables(
        path,
        &conn,
        &["transcript_events"],
        "OpenClaw's transcript_events table",
    )?
    else {
        return Ok(DbBatch::nothing(watermark));
    };
    let run = || -> rusqlite::Result<DbBatch> {
        let mut stmt = conn.prepare(
            "SELECT rowid, session_id, seq, event_json, event_zstd FROM transcript_events \
             WHERE rowid > ?1 ORDER BY session_id, seq",
        )?;
        let mut header = conn.prepare(
            "SELECT event_json, event_zstd FROM transcript_events \
             WHERE session_id = ?1 AND seq = 0 AND rowid <= ?2",
        )?;
        let mut parsers: HashMap<String, Box<dyn LineParser>> = HashMap::new();
        let mut parsed = Parsed::default();
        let mut last = since;
        let mut rows = stmt.query([since])?;
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            last = last.max(rowid);
            let offset = rowid.max(0) as u64;
            let Some(session) = db::text(r.get_ref(1)?) else {
                parsed.errors.push(ParseError::Shape {
                    offset,
                    what: "transcript event without session",
                });
                continue;
            };
            let parser = match parsers.get_mut(&session) {
                Some(p) => p,
                None => {
                    let mut p = super::pi::new_parser(Path::new(&format!("{session}.jsonl")));
                    // Resuming mid-session: its header again, for the cwd.
                    if r.get::<_, i64>(2)? > 0 {
                        let mut h = header.query(rusqlite::params![session, since])?;
                        if let Some(hr) = h.next()?
                            && let Some(line) = event_text(hr.get_ref(0)?, hr.get_ref(1)?)
                        {
                            let mut ignored = Vec::new();
                            let _ = p.line(&line, 0, &mut ignored);
                        }
                    }
                    parsers.entry(session.clone()).or_insert(p)
                }
            };
            let Some(line) = event_text(r.get_ref(3)?, r.get_ref(4)?) else {
                parsed.errors.push(ParseError::Shape {
                    offset,
                    what: "transcript event without readable text",
                });
                continue;
            };
            if let Err(e) = parser.line(&line, offset, &mut parsed.records) {
                parsed.errors.push(e);
            }
        }
        for p in parsers.values_mut() {
            p.finish(&mut parsed.records);
        }
        Ok(DbBatch {
            parsed,
            watermark: Some(last.to_string()),
        })
    };
    run().map_err(|e| db::sql_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Role;

    /// OpenClaw 2026.9.6's own database (`tools/realagents/scenario.sh
    /// openclaw`): two turns, a failing call, transcripts in SQLite.
    #[test]
    fn recorded_transcript_database() {
        let home = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/agents/openclaw/2026.9.6-turns/home");
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join(".openclaw/agents/main/agent").join(DB_NAME);
        std::fs::create_dir_all(db.parent().unwrap()).expect("mkdir");
        // A copy: SQLite leaves `-shm`/`-wal` files beside a WAL database.
        std::fs::copy(home.join(".openclaw/agents/main/agent").join(DB_NAME), &db).expect("copy");
        let found = OpenClaw.discover(&Locations::under_home(dir.path()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, db);

        let batch = read_db(&db, &None).expect("read");
        assert!(batch.parsed.errors.is_empty(), "{:?}", batch.parsed.errors);
        let recs = &batch.parsed.records;
        let roles: Vec<Role> = recs.iter().map(|r| r.role).collect();
        use Role::*;
        assert_eq!(
            roles,
            [
                User, ToolCall, ToolOutput, Assistant, User, ToolCall, ToolOutput, Assistant
            ]
        );
        let sid = "f80d44b4-0ffc-43c3-aa1c-19d45d646a86";
        for r in recs {
            assert_eq!(r.session_id, sid);
            assert_eq!(
                r.project.as_deref(),
                Some("/home/dev/agent/home-openclaw-turns/code/proj-openclaw-turns")
            );
        }
        assert_eq!(batch.watermark.as_deref(), Some("15"));

        // From the watermark after the first turn: the second, with its
        // session's project from the header read again.
        let rest = read_db(&db, &Some("9".into())).expect("read");
        let rest = rest.parsed.records;
        assert_eq!(rest.len(), 4);
        assert_eq!(rest[0].role, User);
        assert_eq!(rest[0].project, recs[0].project);
        assert_eq!(rest[0].session_id, sid);
    }

    #[test]
    fn skips_checkpoints_archives_and_the_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = dir.path().join(".openclaw/agents/main/sessions");
        std::fs::create_dir_all(&s).expect("mkdir");
        for f in [
            "a.jsonl",
            "a.checkpoint.1234.jsonl",
            "b.jsonl.deleted",
            "c.jsonl.bak",
            "sessions.json",
        ] {
            std::fs::write(s.join(f), b"{}\n").expect("write");
        }
        let found = OpenClaw.discover(&Locations::under_home(dir.path()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].path.ends_with("a.jsonl"));
        let mut loc = Locations::under_home(Path::new("/nonexistent"));
        loc.vars
            .insert("OPENCLAW_STATE_DIR".into(), dir.path().join(".openclaw"));
        assert_eq!(OpenClaw.discover(&loc).len(), 1);
    }
}
