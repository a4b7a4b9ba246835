//! Hermes agent (Nous Research): `${HERMES_HOME:-~/.hermes}/state.db`
//! (0.17+, also `profiles/<profile>/state.db`) and the JSONL session logs in
//! `sessions/`.
//!
//! - `state.db`: `messages(id, session_id, role, content, timestamp REAL)`,
//!   read from a message row-id watermark, and `sessions(id, cwd,
//!   parent_session_id)`: 0.19 records the working folder there (the
//!   project; older databases without it fall back to the profile's name)
//!   and a delegated session's parent.
//! - `sessions/<YYYYMMDD_HHMMSS_hex>.jsonl`: line 1 is `{role: session_meta,
//!   …}`, then `{role: user|assistant|tool, content, tool_calls,
//!   timestamp}`, read from the last safe offset. `session_<id>.json`
//!   snapshots and `sessions.json` repeat the same messages and are not read.
//!
//! Tool rows become tool outputs (the terminal tool's JSON result,
//! `{output, exit_code, error}`, as its output text plus a non-zero exit
//! code and the error); rows without content are skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks::{self, Make};
use super::common::{file_stem, has_suffix, json_line, parse_time, walk_files, walk_stores};
use super::db;
use super::{
    DbBatch, LineParser, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile,
    Watermark,
};
use crate::record::{Record, Role};

const AGENT: &str = "hermes";

/// The Hermes source.
pub struct Hermes;

fn home(loc: &Locations) -> PathBuf {
    loc.var_or("HERMES_HOME", loc.home.join(".hermes"))
}

impl Source for Hermes {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// The home also holds config, skills and memories; its `state.db`
    /// is checked when it is read.
    fn history_dirs(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![home(loc).join("sessions")]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["HERMES_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![home(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let h = home(loc);
        let mut out: Vec<SourceFile> = walk_stores(
            &h,
            2,
            &|p| p.file_name().is_some_and(|n| n == "state.db"),
            Reader::Database(read_db),
        );
        out.extend(
            walk_files(&h.join("sessions"), 0, &|p| has_suffix(p, ".jsonl"))
                .into_iter()
                .map(|path| SourceFile::new(path, Reader::Lines(new_parser))),
        );
        out
    }
}

fn message(role: &str, v: &Value, mk: Make<'_>, out: &mut Vec<Record>) {
    let content = v.get("content").unwrap_or(&Value::Null);
    match role {
        "user" => blocks::content(Role::User, content, mk, out),
        "assistant" => {
            blocks::content(Role::Assistant, content, mk, out);
            blocks::openai_tool_calls(v.get("tool_calls").unwrap_or(&Value::Null), mk, out);
        }
        "tool" => blocks::push_output(&tool_text(content), mk, out),
        _ => {}
    }
}

/// A tool row's text: the terminal tool's JSON result
/// (`{"output", "exit_code", "error"}`) as what it printed, then a non-zero
/// exit code and the error; anything else as it is.
fn tool_text(content: &Value) -> String {
    let parsed = content
        .as_str()
        .filter(|s| s.trim_start().starts_with('{'))
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let Some(obj) = parsed.as_ref().and_then(Value::as_object) else {
        return blocks::result_text(content);
    };
    let Some(output) = obj.get("output").and_then(Value::as_str) else {
        return blocks::result_text(content);
    };
    let mut text = output.to_owned();
    if let Some(code) = obj
        .get("exit_code")
        .and_then(Value::as_i64)
        .filter(|c| *c != 0)
    {
        text.push_str(&format!("\n(exit code {code})"));
    }
    if let Some(err) = obj
        .get("error")
        .and_then(Value::as_str)
        .filter(|e| !e.trim().is_empty())
    {
        text.push('\n');
        text.push_str(err);
    }
    text
}

/// Session id → (working folder, parent session id).
type SessionFacts = HashMap<String, (Option<String>, Option<String>)>;

/// Each session's working folder and parent, from `sessions` when it has
/// those columns.
fn session_facts(conn: &rusqlite::Connection) -> rusqlite::Result<SessionFacts> {
    let cols = db::columns(conn, "sessions")?;
    if !cols.contains("id") {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT id, {}, {} FROM sessions",
        db::col_or_null(&cols, "cwd"),
        db::col_or_null(&cols, "parent_session_id"),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next()? {
        let Some(id) = db::text(r.get_ref(0)?) else {
            continue;
        };
        let cwd = db::text(r.get_ref(1)?).filter(|c| !c.is_empty());
        let parent = db::text(r.get_ref(2)?).filter(|p| !p.is_empty());
        out.insert(id, (cwd, parent));
    }
    Ok(out)
}

/// Reads `state.db` from a message row-id watermark.
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = db::open_read_only(path)?;
    let since = db::watermark_i64(watermark).unwrap_or(0);
    // `profiles/<name>/state.db`: the profile names the project.
    let profile = path
        .parent()
        .filter(|d| d.parent().and_then(|p| p.file_name()) == Some("profiles".as_ref()))
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    let Some(t) = db::require_tables(path, &conn, &["messages"], "Hermes' messages table")? else {
        return Ok(DbBatch::nothing(watermark));
    };
    let run = || -> rusqlite::Result<DbBatch> {
        let facts = if t.contains("sessions") {
            session_facts(&conn)?
        } else {
            HashMap::new()
        };
        let cols = db::columns(&conn, "messages")?;
        let id = if cols.contains("id") { "id" } else { "rowid" };
        let sql = format!(
            "SELECT {id}, session_id, role, content, {}, {} FROM messages WHERE {id} > ?1 ORDER BY {id}",
            db::col_or_null(&cols, "timestamp"),
            db::col_or_null(&cols, "tool_calls"),
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([since])?;
        let mut parsed = Parsed::default();
        let mut last = since;
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            last = last.max(rowid);
            let session = db::text(r.get_ref(1)?).unwrap_or_default();
            let role = db::text(r.get_ref(2)?).unwrap_or_default();
            let Some(content) = db::text(r.get_ref(3)?) else {
                continue;
            };
            let time = db::time(r.get_ref(4)?);
            let calls = db::text(r.get_ref(5)?)
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .unwrap_or(Value::Null);
            let v = serde_json::json!({"content": content, "tool_calls": calls});
            let (cwd, parent) = facts.get(&session).cloned().unwrap_or_default();
            let mk = |role: Role, text: String| {
                let mut rec = Record::new(AGENT, &session, role, text);
                rec.time_ms = time;
                rec.project = cwd.clone().or_else(|| profile.clone());
                rec.parent_session = parent.clone();
                rec.offset = rowid as u64;
                rec
            };
            message(&role, &v, &mk, &mut parsed.records);
        }
        Ok(DbBatch {
            parsed,
            watermark: Some(last.to_string()),
        })
    };
    run().map_err(|e| db::sql_err(path, e))
}

/// A line parser for one JSONL session log.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let stem = file_stem(path);
    Box::new(HermesLines {
        session: stem.to_owned(),
    })
}

struct HermesLines {
    session: String,
}

impl LineParser for HermesLines {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let Some(role) = v.get("role").and_then(Value::as_str) else {
            return Err(ParseError::Shape {
                offset,
                what: "line without role",
            });
        };
        let time = v.get("timestamp").and_then(parse_time);
        let mk = |r: Role, text: String| {
            let mut rec = Record::new(AGENT, &self.session, r, text);
            rec.time_ms = time;
            rec.offset = offset;
            rec
        };
        message(role, &v, &mk, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hermes 0.19.0's own `state.db` (`tools/realagents/more.sh hermes`).
    #[test]
    fn recorded_state_db() {
        let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/agents/hermes/0.19.0/home/.hermes/state.db");
        // A copy: SQLite leaves `-shm`/`-wal` files beside a WAL database.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        std::fs::copy(&recorded, &path).expect("copy");
        let batch = read_db(&path, &None).expect("read");
        let recs = batch.parsed.records;
        let roles: Vec<Role> = recs.iter().map(|r| r.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::ToolCall,
                Role::ToolOutput,
                Role::Assistant
            ]
        );
        for r in &recs {
            assert_eq!(r.session_id, "20261205_215155_203cd3");
            assert_eq!(
                r.project.as_deref(),
                Some("/home/dev/agent/home-hermes/code/proj-hermes")
            );
            assert_eq!(r.parent_session, None);
        }
        // `timestamp REAL` seconds, kept to the millisecond.
        assert_eq!(recs[0].time_ms, Some(1796507577580));
        assert_eq!(recs[2].text, "hello");
        assert_eq!(batch.watermark.as_deref(), Some("4"));
    }

    #[test]
    fn terminal_results_read_as_output() {
        let ok = Value::String(r#"{"output": "hello", "exit_code": 0, "error": null}"#.into());
        assert_eq!(tool_text(&ok), "hello");
        let failed = Value::String(
            r#"{"output": "ls: cannot access 'x'", "exit_code": 2, "error": "failed"}"#.into(),
        );
        assert_eq!(
            tool_text(&failed),
            "ls: cannot access 'x'\n(exit code 2)\nfailed"
        );
        let other = Value::String(r#"{"files": ["a"]}"#.into());
        assert_eq!(tool_text(&other), r#"{"files": ["a"]}"#);
        assert_eq!(tool_text(&Value::String("plain".into())), "plain");
    }
}
