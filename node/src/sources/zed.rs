//! Zed's agent threads: the SQLite database `threads/threads.db` in Zed's
//! data folder (`$XDG_DATA_HOME/zed`, default `~/.local/share/zed`, or
//! `$FLATPAK_XDG_DATA_HOME/zed` under Flatpak; macOS `~/Library/Application
//! Support/Zed`), opened read-only.
//!
//! Evidence: no Zed can run here, so the reader follows Zed's own source,
//! zed-industries/zed `crates/agent/src/db.rs` @ 0642ec7e (the table and
//! `DbThread`), `crates/agent/src/thread.rs` (`Message`, `UserMessageContent`,
//! `AgentMessageContent`) and `crates/language_model` (`LanguageModelToolUse`,
//! `LanguageModelToolResult`), and the fixture `fixtures/agents/zed/source/`
//! written from them (the unit tests build the database from it). The table is `threads(id, summary, updated_at
//! RFC 3339, data_type 'zstd' | 'json', data BLOB)` plus the columns later
//! releases add (`parent_id`, `folder_paths`, `folder_paths_order`,
//! `created_at`). `data` is the thread's JSON, zstd-compressed since
//! `data_type` says so:
//! - version `0.3.0` (the current agent): `{title, messages[], updated_at,
//!   version}`, each message serde's externally tagged `{"User": {id,
//!   content[{"Text": s} | {"Mention": {uri, content}} | {"Image": ...}]}}`,
//!   `{"Agent": {content[{"Text": s} | {"Thinking": ...} | {"ToolUse": {id,
//!   name, input, raw_input}}], tool_results{<id>: {tool_use_id, tool_name,
//!   is_error, content, output}}}}` or `"Resume"`; a result's `content` is
//!   `{"Text": s}` or a list of them (or a plain string);
//! - the first agent's threads (no or another `version`): `{summary,
//!   updated_at, messages[{role, segments[{type: text | thinking, text}],
//!   tool_uses[{id, name, input}], tool_results[{tool_use_id, content,
//!   is_error}]}]}`.
//!
//! Messages carry no time: every record takes the row's `created_at`
//! (else `updated_at`), the records of the last message `updated_at`. The
//! project is the first of the row's `folder_paths` (newline-separated).
//! A sub-agent's thread names its parent in `parent_id`. A row is rewritten
//! whole as the thread grows: rows are re-read from an `updated_at`
//! watermark and unchanged turns dedupe by content hash.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::parse_time;
use super::db;
use super::{
    DbBatch, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile, Watermark,
};
use crate::record::{Record, Role};

const AGENT: &str = "zed";

/// The most one thread's JSON is inflated to: a corrupt or hostile row
/// cannot take all memory.
const MAX_INFLATED: u64 = 256 << 20;

/// The Zed source.
pub struct Zed;

/// Zed's data folders on Linux (Flatpak's when set, as Zed's
/// `paths::data_dir` does) and macOS.
fn data_dirs(loc: &Locations) -> Vec<PathBuf> {
    let linux = loc
        .var("FLATPAK_XDG_DATA_HOME")
        .map_or_else(|| loc.xdg_data_home.clone(), Path::to_path_buf);
    vec![linux.join("zed"), loc.app_support().join("Zed")]
}

impl Source for Zed {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["FLATPAK_XDG_DATA_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        data_dirs(loc)
            .into_iter()
            .map(|d| d.join("threads"))
            .collect()
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        self.roots(loc)
            .into_iter()
            .map(|d| d.join("threads.db"))
            .filter(|p| p.is_file())
            .map(|p| SourceFile::new(p, Reader::Database(read_db)))
            .collect()
    }
}

/// The thread's JSON from a row's `data`, as its `data_type` says.
fn thread_json(data_type: Option<&str>, data: &[u8]) -> Result<Value, &'static str> {
    let text = if data_type == Some("zstd") {
        let mut out = Vec::new();
        zstd::stream::read::Decoder::new(data)
            .and_then(|d| d.take(MAX_INFLATED + 1).read_to_end(&mut out))
            .map_err(|_| "thread data is not a complete zstd stream")?;
        if out.len() as u64 > MAX_INFLATED {
            return Err("thread data inflates past 256 MiB");
        }
        out
    } else {
        data.to_vec()
    };
    serde_json::from_slice(&text).map_err(|_| "thread data is not JSON")
}

/// Serde's externally tagged enum: the single key and its value.
fn variant(v: &Value) -> Option<(&str, &Value)> {
    let o = v.as_object()?;
    (o.len() == 1).then(|| o.iter().next().map(|(k, v)| (k.as_str(), v)))?
}

/// A tool result's `content`: `{"Text": s}`, a list of parts, or a string.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(result_text)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => match variant(content) {
            Some(("Text", Value::String(s))) => s.clone(),
            _ => o
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        _ => String::new(),
    }
}

/// A `ToolUse` and, when the message holds it, its result.
fn tool_use(
    u: &Value,
    results: Option<&serde_json::Map<String, Value>>,
    mk: blocks::Make<'_>,
    out: &mut Vec<Record>,
) {
    let name = u.get("name").and_then(Value::as_str).unwrap_or("tool");
    let input = u
        .get("input")
        .filter(|i| !i.is_null())
        .or_else(|| u.get("raw_input"))
        .unwrap_or(&Value::Null);
    blocks::push_call(name, input, mk, out);
    let id = u.get("id").and_then(Value::as_str).unwrap_or_default();
    if let Some(r) = results.and_then(|r| r.get(id)) {
        let mut t = result_text(r.get("content").unwrap_or(&Value::Null));
        if r.get("is_error").and_then(Value::as_bool) == Some(true) {
            t = format!("[error] {t}");
        }
        blocks::push_output(&t, mk, out);
    }
}

/// Records of one current-generation message; false when its shape is unknown.
fn message_records(m: &Value, mk: blocks::Make<'_>, out: &mut Vec<Record>) -> bool {
    if m.as_str() == Some("Resume") {
        return true;
    }
    match variant(m) {
        Some(("User", u)) => {
            let mut text = Vec::new();
            for c in u
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match variant(c) {
                    Some(("Text", Value::String(s))) => text.push(s.as_str()),
                    Some(("Mention", v)) => {
                        if let Some(s) = v.get("content").and_then(Value::as_str) {
                            text.push(s);
                        }
                    }
                    _ => {}
                }
            }
            blocks::push_text(Role::User, &text.join("\n"), mk, out);
            true
        }
        Some(("Agent", a)) => {
            let results = a.get("tool_results").and_then(Value::as_object);
            let mut text: Vec<&str> = Vec::new();
            for c in a
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match variant(c) {
                    Some(("Text", Value::String(s))) => text.push(s),
                    Some(("ToolUse", u)) => {
                        // What was said before the call comes first.
                        blocks::push_text(Role::Assistant, &text.join("\n\n"), mk, out);
                        text.clear();
                        tool_use(u, results, mk, out);
                    }
                    _ => {}
                }
            }
            blocks::push_text(Role::Assistant, &text.join("\n\n"), mk, out);
            true
        }
        _ => false,
    }
}

/// Records of one first-agent message; false when its role is unknown.
fn legacy_records(m: &Value, mk: blocks::Make<'_>, out: &mut Vec<Record>) -> bool {
    let text: Vec<&str> = m
        .get("segments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|s| s.get("text").and_then(Value::as_str))
        .collect();
    match m.get("role").and_then(Value::as_str) {
        Some("user") => {
            for r in m
                .get("tool_results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                blocks::push_output(
                    &result_text(r.get("content").unwrap_or(&Value::Null)),
                    mk,
                    out,
                );
            }
            blocks::push_text(Role::User, &text.join("\n"), mk, out);
            true
        }
        Some("assistant") => {
            blocks::push_text(Role::Assistant, &text.join("\n\n"), mk, out);
            for u in m
                .get("tool_uses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = u.get("name").and_then(Value::as_str).unwrap_or("tool");
                blocks::push_call(name, u.get("input").unwrap_or(&Value::Null), mk, out);
            }
            for r in m
                .get("tool_results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                blocks::push_output(
                    &result_text(r.get("content").unwrap_or(&Value::Null)),
                    mk,
                    out,
                );
            }
            true
        }
        Some("system") => true,
        _ => false,
    }
}

/// One row as it comes out of the table.
struct Row<'a> {
    rowid: i64,
    id: &'a str,
    parent: Option<&'a str>,
    folder: Option<&'a str>,
    created: Option<i64>,
    updated: Option<i64>,
}

/// Records of one thread.
fn thread_records(row: &Row<'_>, thread: &Value, parsed: &mut Parsed) {
    let offset = u64::try_from(row.rowid).unwrap_or(0);
    let Some(messages) = thread.get("messages").and_then(Value::as_array) else {
        parsed.errors.push(ParseError::Shape {
            offset,
            what: "thread without messages",
        });
        return;
    };
    let current = thread.get("version").and_then(Value::as_str) == Some("0.3.0")
        || messages
            .iter()
            .any(|m| variant(m).is_some() || m.is_string());
    let last = messages.len().saturating_sub(1);
    for (i, m) in messages.iter().enumerate() {
        let time = if i == last {
            row.updated
        } else {
            row.created.or(row.updated)
        };
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, row.id, role, text);
            r.time_ms = time;
            r.project = row.folder.map(str::to_owned);
            r.parent_session = row.parent.map(str::to_owned);
            r.offset = offset;
            r
        };
        let known = if current {
            message_records(m, &mk, &mut parsed.records)
        } else {
            legacy_records(m, &mk, &mut parsed.records)
        };
        if !known {
            parsed.errors.push(ParseError::Shape {
                offset,
                what: "thread message of an unknown shape",
            });
        }
    }
}

/// Reads the threads updated after the watermark (the newest `updated_at`
/// seen, as Zed writes it: RFC 3339 in UTC, which sorts as text).
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = db::open_read_only(path)?;
    let Some(_) = db::require_tables(path, &conn, &["threads"], "Zed's threads table")? else {
        return Ok(DbBatch::nothing(watermark));
    };
    let cols = db::columns(&conn, "threads").map_err(|e| db::sql_err(path, e))?;
    let since = watermark.clone().unwrap_or_default();
    let run = || -> rusqlite::Result<DbBatch> {
        let sql = format!(
            "SELECT rowid, id, data_type, data, updated_at, {}, {}, {} FROM threads \
             WHERE updated_at > ?1 ORDER BY updated_at, rowid",
            db::col_or_null(&cols, "parent_id"),
            db::col_or_null(&cols, "folder_paths"),
            db::col_or_null(&cols, "created_at"),
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([&since])?;
        let mut parsed = Parsed::default();
        let mut newest = since.clone();
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            let id = db::text(r.get_ref(1)?).unwrap_or_default();
            let data_type = db::text(r.get_ref(2)?);
            let updated_text = db::text(r.get_ref(4)?).unwrap_or_default();
            if updated_text > newest {
                newest.clone_from(&updated_text);
            }
            let data = match r.get_ref(3)? {
                rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => b,
                _ => &[],
            };
            let thread = match thread_json(data_type.as_deref(), data) {
                Ok(v) => v,
                Err(what) => {
                    parsed.errors.push(ParseError::Shape {
                        offset: u64::try_from(rowid).unwrap_or(0),
                        what,
                    });
                    continue;
                }
            };
            let parent = db::text(r.get_ref(5)?);
            let folders = db::text(r.get_ref(6)?);
            let created = db::text(r.get_ref(7)?);
            let row = Row {
                rowid,
                id: &id,
                parent: parent.as_deref().filter(|p| !p.is_empty()),
                folder: folders
                    .as_deref()
                    .and_then(|f| f.lines().find(|l| !l.trim().is_empty())),
                created: created.as_deref().and_then(|c| parse_time(&Value::from(c))),
                updated: parse_time(&Value::from(updated_text.as_str())),
            };
            thread_records(&row, &thread, &mut parsed);
        }
        Ok(DbBatch {
            parsed,
            watermark: (!newest.is_empty())
                .then_some(newest)
                .or_else(|| watermark.clone()),
        })
    };
    run().map_err(|e| db::sql_err(path, e))
}

#[cfg(test)]
#[path = "zed_tests.rs"]
mod tests;
