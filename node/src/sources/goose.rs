//! Goose (Block): SQLite `sessions.db` (1.10+) and legacy JSONL sessions.
//!
//! Both live in `<data>/sessions/`, where `<data>` is `$GOOSE_PATH_ROOT/data`
//! when set, else `$XDG_DATA_HOME/goose` (macOS builds also use
//! `~/Library/Application Support/Block.goose`).
//!
//! - `sessions.db`: `sessions(id, working_dir, session_type, ...)` joined to
//!   `messages(id AUTOINCREMENT, session_id, role, content_json,
//!   created_timestamp)`. Read from a row-id watermark (messages only ever
//!   append). `content_json` is a block array: `text`, `toolRequest`
//!   (`toolCall.value{name, arguments}`), `toolResponse`
//!   (`toolResult.value[]` text blocks); thinking and images are skipped.
//! - Legacy `<YYYYMMDD_HHMMSS>.jsonl` (before 1.10): a metadata first line
//!   (`working_dir`, `description`), then one message per line
//!   (`role`, `created` Unix s, `content[]`). Read from the last safe offset.
//!   Legacy files linger after the migration; both are read (the same text
//!   in the same session id dedupes by content hash).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks::{self, Make};
use super::common::{file_stem, has_suffix, json_line, parse_time, walk_files};
use super::db;
use super::{
    DbBatch, LineParser, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile,
    Watermark,
};
use crate::record::{Record, Role};

const AGENT: &str = "goose";

/// The Goose source.
pub struct Goose;

fn session_dirs(loc: &Locations) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(root) = loc.var("GOOSE_PATH_ROOT") {
        v.push(root.join("data/sessions"));
    }
    v.push(loc.xdg_data_home.join("goose/sessions"));
    v.push(loc.app_support().join("Block.goose/sessions"));
    v
}

impl Source for Goose {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["GOOSE_PATH_ROOT"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        session_dirs(loc)
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut out = Vec::new();
        for dir in session_dirs(loc) {
            let db = dir.join("sessions.db");
            if db.is_file() {
                out.push(SourceFile::new(db, Reader::Database(read_db)));
            }
            for path in walk_files(&dir, 0, &|p| has_suffix(p, ".jsonl")) {
                out.push(SourceFile::new(path, Reader::Lines(new_parser)));
            }
        }
        out
    }
}

/// Records from one Goose message's content blocks.
fn message_records(role: &str, content: &Value, mk: Make<'_>, out: &mut Vec<Record>) {
    let role = if role == "user" {
        Role::User
    } else {
        Role::Assistant
    };
    let mut text = String::new();
    for b in content.as_array().into_iter().flatten() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    text.push_str(t);
                }
            }
            Some("toolRequest") => {
                let call = b.pointer("/toolCall/value").unwrap_or(&Value::Null);
                let name = call.get("name").and_then(Value::as_str).unwrap_or("tool");
                let args = call.get("arguments").unwrap_or(&Value::Null);
                blocks::push_call(name, args, mk, out);
            }
            Some("toolResponse") => {
                // A failed call is `{status: "error", error: "<message>"}`
                // (block/goose `conversation/tool_result_serde.rs` at
                // 05132966065f), not a `value`: its message is the output.
                let result = b.get("toolResult").unwrap_or(&Value::Null);
                let output = match result.get("error").and_then(Value::as_str) {
                    Some(e) if result.get("status").and_then(Value::as_str) == Some("error") => {
                        format!("[error] {e}")
                    }
                    _ => blocks::result_text(result.get("value").unwrap_or(&Value::Null)),
                };
                blocks::push_output(&output, mk, out);
            }
            _ => {}
        }
    }
    if let Value::String(s) = content {
        text.push_str(s);
    }
    blocks::push_text(role, &text, mk, out);
}

/// Reads `sessions.db` from a message row-id watermark.
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = db::open_read_only(path)?;
    let since = db::watermark_i64(watermark).unwrap_or(0);
    let Some(_) = db::require_tables(
        path,
        &conn,
        &["sessions", "messages"],
        "goose's sessions and messages tables",
    )?
    else {
        return Ok(DbBatch::nothing(watermark));
    };
    let run = || -> rusqlite::Result<DbBatch> {
        let m = db::columns(&conn, "messages")?;
        let s = db::columns(&conn, "sessions")?;
        let sql = format!(
            "SELECT m.id, m.session_id, m.role, m.content_json, {}, {}, s.{} \
             FROM messages m LEFT JOIN sessions s ON s.id = m.session_id \
             WHERE m.id > ?1 ORDER BY m.id",
            if m.contains("created_timestamp") {
                "m.created_timestamp"
            } else {
                "NULL"
            },
            if m.contains("timestamp") {
                "m.timestamp"
            } else {
                "NULL"
            },
            db::col_or_null(&s, "working_dir"),
        )
        .replace("s.NULL", "NULL");
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([since])?;
        let mut parsed = Parsed::default();
        let mut last = since;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            last = last.max(id);
            let session: String = db::text(r.get_ref(1)?).unwrap_or_default();
            let role = db::text(r.get_ref(2)?).unwrap_or_default();
            let time = db::time(r.get_ref(4)?).or(db::time(r.get_ref(5)?));
            let project = db::text(r.get_ref(6)?).filter(|s| !s.is_empty());
            let Some(raw) = db::text(r.get_ref(3)?) else {
                continue;
            };
            let content: Value = match serde_json::from_str(&raw) {
                Ok(v) => v,
                Err(source) => {
                    parsed.errors.push(ParseError::Json {
                        offset: id as u64,
                        source,
                    });
                    continue;
                }
            };
            let mk = |role: Role, text: String| {
                let mut rec = Record::new(AGENT, &session, role, text);
                rec.time_ms = time;
                rec.project = project.clone();
                rec.offset = id as u64;
                rec
            };
            message_records(&role, &content, &mk, &mut parsed.records);
        }
        Ok(DbBatch {
            parsed,
            watermark: Some(last.to_string()),
        })
    };
    run().map_err(|e| db::sql_err(path, e))
}

/// A line parser for one legacy JSONL session.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let id = file_stem(path).to_owned();
    Box::new(LegacyParser {
        session: id,
        project: None,
    })
}

struct LegacyParser {
    session: String,
    project: Option<String>,
}

impl LineParser for LegacyParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let Some(role) = v.get("role").and_then(Value::as_str) else {
            // The metadata line.
            if let Some(dir) = v.get("working_dir").and_then(Value::as_str) {
                self.project = Some(dir.to_owned()).filter(|s| !s.is_empty());
            }
            return Ok(());
        };
        let time = v.get("created").and_then(parse_time);
        let mk = |r: Role, text: String| {
            let mut rec = Record::new(AGENT, &self.session, r, text);
            rec.time_ms = time;
            rec.project = self.project.clone();
            rec.offset = offset;
            rec
        };
        message_records(role, v.get("content").unwrap_or(&Value::Null), &mk, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::feed_lines;

    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/goose/jwp23-dotfiles/sessions.db"
    );
    const HOME: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");

    #[test]
    fn fixture_database_and_watermark() {
        let loc = Locations::under_home(Path::new(HOME));
        let found = Goose.discover(&loc);
        let db = found
            .iter()
            .find(|f| matches!(f.reader, Reader::Database(_)))
            .expect("sessions.db");
        let b = read_db(&db.path, &None).expect("read");
        assert_eq!(b.parsed.errors.len(), 1, "{:?}", b.parsed.errors);
        let roles: Vec<Role> = b.parsed.records.iter().map(|r| r.role).collect();
        assert!(roles.contains(&Role::ToolCall) && roles.contains(&Role::ToolOutput));
        assert!(b.parsed.records.iter().all(|r| r.project.is_some()));
        let again = read_db(&db.path, &b.watermark).expect("read");
        assert!(again.parsed.records.is_empty());
    }

    #[test]
    fn legacy_jsonl_takes_the_working_dir_from_the_header() {
        let mut p = new_parser(Path::new("/x/20250101_120000.jsonl"));
        let text = concat!(
            "{\"working_dir\":\"/home/dev/x\",\"description\":\"d\"}\n",
            "{\"role\":\"user\",\"created\":1735732800,\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}\n",
            "{\"role\":\"assistant\",\"created\":1735732801,\"content\":[{\"type\":\"toolRequest\",\"id\":\"1\",\"toolCall\":{\"status\":\"success\",\"value\":{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}}}]}\n",
        );
        let (recs, errs) = feed_lines(p.as_mut(), text.as_bytes());
        assert!(errs.is_empty());
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].session_id, "20250101_120000");
        assert_eq!(recs[0].project.as_deref(), Some("/home/dev/x"));
        assert_eq!(recs[1].text, "shell: ls");
    }

    /// A failed tool call's result is `{status: "error", error}`: read as
    /// its output, beside a successful one's `value`.
    #[test]
    fn failed_tool_results_are_read_as_tool_output() {
        let mut p = new_parser(Path::new("/x/20250101_120000.jsonl"));
        let text = concat!(
            "{\"working_dir\":\"/home/dev/x\"}\n",
            "{\"role\":\"user\",\"created\":1735732802,\"content\":[{\"type\":\"toolResponse\",\"id\":\"1\",\"toolResult\":{\"status\":\"error\",\"error\":\"-32603: command not found: cargo-nextest\"}}]}\n",
            "{\"role\":\"user\",\"created\":1735732803,\"content\":[{\"type\":\"toolResponse\",\"id\":\"2\",\"toolResult\":{\"status\":\"success\",\"value\":[{\"type\":\"text\",\"text\":\"ok: 3 tests\"}]}}]}\n",
        );
        let (recs, errs) = feed_lines(p.as_mut(), text.as_bytes());
        assert!(errs.is_empty(), "{errs:?}");
        let got: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    Role::ToolOutput,
                    "[error] -32603: command not found: cargo-nextest"
                ),
                (Role::ToolOutput, "ok: 3 tests"),
            ]
        );
    }

    #[test]
    fn real_database_reads_without_errors() {
        let path = Path::new(REAL);
        if !path.is_file() {
            eprintln!("skipping: {REAL} not present");
            return;
        }
        let b = read_db(path, &None).expect("read");
        assert!(b.parsed.errors.is_empty(), "{:?}", b.parsed.errors);
    }
}
