//! Kiro CLI (formerly Amazon Q Developer CLI): the chat database
//! `data.sqlite3` in `$XDG_DATA_HOME/kiro-cli/` (macOS `~/Library/Application
//! Support/kiro-cli/`); Amazon Q CLI's `amazon-q/` folder holds the same
//! database and is read too.
//!
//! Evidence, aws/amazon-q-developer-cli: the table is
//! `conversations_v2(key = working folder, conversation_id, value JSON,
//! created_at ms, updated_at ms)` (`database/sqlite_migrations/
//! 008_multiple_conversations_per_path.sql` @ 33494e8f); `value` is a
//! serialized `ConversationState` whose `history[]` holds `{user, assistant,
//! request_metadata}` entries (`cli/chat/conversation.rs` @ 00158528,
//! `cli/chat/message.rs` @ 01e5e3dc). Enums are serde's external tagging:
//! `user.content` is `{Prompt{prompt}}`, `{CancelledToolUses{prompt,
//! tool_use_results}}` or `{ToolUseResults{tool_use_results}}`, each result's
//! `content[]` is `{Text: s}` or `{Json: v}`; `assistant` is `{Response{
//! content}}` or `{ToolUse{content, tool_uses[{id, name, args}]}}`. A user
//! message carries `timestamp` (RFC 3339) and
//! `env_context.env_state.current_working_directory`.
//!
//! A row is rewritten whole as the conversation grows: rows are re-read from
//! an `updated_at` watermark and the unchanged turns dedupe by content hash.
//! The database also holds `auth_kv` (credentials), which is never read. The
//! newest CLI's `~/.kiro/sessions/cli/` JSONL is not read (no public
//! evidence of its shape yet): it is a history folder, so what lies there is
//! reported as found, not understood.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks::{self, Make};
use super::common::parse_time;
use super::db;
use super::{
    DbBatch, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile, Watermark,
};
use crate::record::{Record, Role};

const AGENT: &str = "kiro";

/// The database's file name in each data folder.
const DB_FILE: &str = "data.sqlite3";

/// The Kiro CLI source.
pub struct Kiro;

/// The CLI's data folders: Kiro's, then Amazon Q's, on Linux and macOS.
fn data_dirs(loc: &Locations) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for name in ["kiro-cli", "amazon-q"] {
        v.push(loc.xdg_data_home.join(name));
        v.push(loc.app_support().join(name));
    }
    v
}

impl Source for Kiro {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = data_dirs(loc);
        v.push(loc.home.join(".kiro/sessions"));
        v
    }

    /// The data folders (their database is checked when it is read) and
    /// the newest CLI's session folder, which no reader reads yet.
    fn history_dirs(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = data_dirs(loc);
        v.push(loc.home.join(".kiro/sessions/cli"));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        data_dirs(loc)
            .into_iter()
            .map(|d| d.join(DB_FILE))
            .filter(|p| p.is_file())
            .map(|p| SourceFile::new(p, Reader::Database(read_db)))
            .collect()
    }
}

/// Serde's externally tagged enum: the single key of an object and its value.
fn variant(v: &Value) -> Option<(&str, &Value)> {
    let o = v.as_object()?;
    if o.len() != 1 {
        return None;
    }
    o.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// A `{Json: v}` result block: the shell tool's `{exit_status, stdout,
/// stderr}` as its output, other shapes by their text fields or whole.
fn json_result(v: &Value) -> String {
    if let Some(out) = v.get("stdout").and_then(Value::as_str) {
        let err = v.get("stderr").and_then(Value::as_str).unwrap_or("");
        return [out, err]
            .iter()
            .filter(|s| !s.trim().is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
    }
    let text = blocks::result_text(v);
    if text.trim().is_empty() && !v.is_null() {
        v.to_string()
    } else {
        text
    }
}

/// The text of one tool result's `content[]` blocks.
fn result_text(result: &Value) -> String {
    let mut parts = Vec::new();
    for b in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match variant(b) {
            Some(("Text", Value::String(s))) => parts.push(s.clone()),
            Some(("Json", v)) => parts.push(json_result(v)),
            _ => {}
        }
    }
    let text = parts.join("\n");
    if result.get("status").and_then(Value::as_str) == Some("Error") && !text.is_empty() {
        format!("[error] {text}")
    } else {
        text
    }
}

/// Records of one `history[]` entry; false when it has neither a user nor
/// an assistant message of a known shape.
fn entry_records(
    entry: &Value,
    user_mk: Make<'_>,
    asst_mk: Make<'_>,
    out: &mut Vec<Record>,
) -> bool {
    let mut known = false;
    let user = entry.get("user").unwrap_or(&Value::Null);
    if let Some((kind, body)) = user.get("content").and_then(variant)
        && matches!(kind, "Prompt" | "CancelledToolUses" | "ToolUseResults")
    {
        known = true;
        let results = body.get("tool_use_results").and_then(Value::as_array);
        for r in results.into_iter().flatten() {
            blocks::push_output(&result_text(r), user_mk, out);
        }
        let prompt = body.get("prompt").and_then(Value::as_str).unwrap_or("");
        blocks::push_text(Role::User, prompt, user_mk, out);
    }
    if let Some((kind, body)) = entry.get("assistant").and_then(variant)
        && matches!(kind, "Response" | "ToolUse")
    {
        known = true;
        let text = body.get("content").and_then(Value::as_str).unwrap_or("");
        blocks::push_text(Role::Assistant, text, asst_mk, out);
        let uses = body.get("tool_uses").and_then(Value::as_array);
        for u in uses.into_iter().flatten() {
            let name = u.get("name").and_then(Value::as_str).unwrap_or("tool");
            blocks::push_call(name, u.get("args").unwrap_or(&Value::Null), asst_mk, out);
        }
    }
    known
}

/// Records of one conversation row's `value`.
fn conversation_records(
    session: &str,
    key: Option<&str>,
    value: &Value,
    row_time: Option<i64>,
    rowid: i64,
    parsed: &mut Parsed,
) {
    let offset = u64::try_from(rowid).unwrap_or(0);
    let Some(history) = value.get("history").and_then(Value::as_array) else {
        parsed.errors.push(ParseError::Shape {
            offset,
            what: "conversation without history",
        });
        return;
    };
    for entry in history {
        let user = entry.get("user").unwrap_or(&Value::Null);
        let meta = entry.get("request_metadata").unwrap_or(&Value::Null);
        let started = user
            .get("timestamp")
            .and_then(parse_time)
            .or_else(|| meta.get("request_start_timestamp_ms").and_then(parse_time));
        let ended = meta
            .get("stream_end_timestamp_ms")
            .and_then(parse_time)
            .or(started);
        let project = user
            .pointer("/env_context/env_state/current_working_directory")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or(key)
            .map(str::to_owned);
        let mk_at = |time: Option<i64>| {
            let project = project.clone();
            move |role: Role, text: String| {
                let mut rec = Record::new(AGENT, session, role, text);
                rec.time_ms = time.or(row_time);
                rec.project = project.clone();
                rec.offset = offset;
                rec
            }
        };
        let user_mk = mk_at(started);
        let asst_mk = mk_at(ended);
        if !entry_records(entry, &user_mk, &asst_mk, &mut parsed.records) {
            parsed.errors.push(ParseError::Shape {
                offset,
                what: "history entry without a known user or assistant message",
            });
        }
    }
}

/// Reads `data.sqlite3`'s conversations updated after the watermark (the
/// newest `updated_at`, in ms).
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = db::open_read_only(path)?;
    let since = db::watermark_i64(watermark).unwrap_or(i64::MIN);
    let Some(_) = db::require_tables(
        path,
        &conn,
        &["conversations_v2"],
        "Kiro's conversations_v2 table",
    )?
    else {
        return Ok(DbBatch::nothing(watermark));
    };
    let run = || -> rusqlite::Result<DbBatch> {
        let mut stmt = conn.prepare(
            "SELECT rowid, key, conversation_id, value, updated_at FROM conversations_v2 \
             WHERE updated_at > ?1 ORDER BY updated_at, rowid",
        )?;
        let mut rows = stmt.query([since])?;
        let mut parsed = Parsed::default();
        let mut newest = since;
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            let key = db::text(r.get_ref(1)?);
            let session = db::text(r.get_ref(2)?).unwrap_or_default();
            let updated = r.get::<_, Option<i64>>(4).ok().flatten();
            if let Some(u) = updated {
                newest = newest.max(u);
            }
            let Some(value) = db::text(r.get_ref(3)?) else {
                continue;
            };
            let value: Value = match serde_json::from_str(&value) {
                Ok(v) => v,
                Err(source) => {
                    parsed.errors.push(ParseError::Json {
                        offset: u64::try_from(rowid).unwrap_or(0),
                        source,
                    });
                    continue;
                }
            };
            let row_time = updated.and_then(|u| parse_time(&Value::from(u)));
            conversation_records(
                &session,
                key.as_deref(),
                &value,
                row_time,
                rowid,
                &mut parsed,
            );
        }
        Ok(DbBatch {
            parsed,
            watermark: (newest > i64::MIN)
                .then(|| newest.to_string())
                .or_else(|| watermark.clone()),
        })
    };
    run().map_err(|e| db::sql_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures")).join(rel)
    }

    const DB: &str = "home/.local/share/kiro-cli/data.sqlite3";

    fn from_sql(dir: &Path, extra: &str) -> PathBuf {
        let out = dir.join(DB_FILE);
        let script = std::fs::read_to_string(fixture("sql/kiro.sql")).unwrap();
        let conn = Connection::open(&out).unwrap();
        conn.execute_batch(&script).unwrap();
        conn.execute_batch(extra).unwrap();
        out
    }

    #[test]
    fn reads_prompts_answers_tool_calls_and_outputs() {
        let batch = read_db(&fixture(DB), &None).unwrap();
        let recs = &batch.parsed.records;
        assert!(batch.parsed.errors.is_empty(), "{:?}", batch.parsed.errors);
        let roles: Vec<Role> = recs.iter().map(|r| r.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::ToolCall,
                Role::ToolOutput,
                Role::Assistant,
                Role::User,
                Role::Assistant,
            ]
        );
        let first = &recs[0];
        assert_eq!(first.agent, "kiro");
        assert_eq!(first.session_id, "b3f1c2d4-8e9a-4b7c-9d1e-2f3a4b5c6d7e");
        assert_eq!(first.project.as_deref(), Some("/home/dev/ledger"));
        // user.timestamp, RFC 3339 with its offset.
        assert_eq!(first.time_ms, Some(1_764_590_400_250));
        assert!(first.text.contains("nightly ledger export"));
        // The assistant's time is the end of its stream.
        assert_eq!(recs[1].time_ms, Some(1_764_590_409_000));
        assert_eq!(recs[2].text, "execute_bash: crontab -l");
        assert!(recs[3].text.contains("0 2 * * *"), "{}", recs[3].text);
        assert!(recs[4].text.contains("02:30 UTC"), "{}", recs[4].text);
        // The second conversation, keyed by its folder only.
        assert_eq!(recs[5].session_id, "c9d8e7f6-1a2b-4c3d-8e9f-0a1b2c3d4e5f");
        assert_eq!(recs[5].project.as_deref(), Some("/home/dev/notes"));
        assert_eq!(batch.watermark.as_deref(), Some("1764594000000"));
    }

    #[test]
    fn nothing_new_since_the_watermark_and_updates_are_reread() {
        let dir = tempfile::tempdir().unwrap();
        let db = from_sql(dir.path(), "");
        let first = read_db(&db, &None).unwrap();
        let again = read_db(&db, &first.watermark).unwrap();
        assert!(again.parsed.records.is_empty());
        assert_eq!(again.watermark, first.watermark);
        // The agent rewrites a row as its conversation grows.
        let grown = r#"{"conversation_id":"c9d8e7f6-1a2b-4c3d-8e9f-0a1b2c3d4e5f","history":[
            {"user":{"additional_context":"","env_context":{"env_state":null},"content":{"Prompt":{"prompt":"and tags?"}},"timestamp":null,"images":null},
             "assistant":{"Response":{"message_id":"m9","content":"Tags stay in front matter."}},"request_metadata":null}]}"#;
        let conn = Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE conversations_v2 SET value = ?1, updated_at = 1764600000000 WHERE key = '/home/dev/notes'",
            [grown],
        )
        .unwrap();
        let more = read_db(&db, &first.watermark).unwrap();
        let texts: Vec<&str> = more
            .parsed
            .records
            .iter()
            .map(|r| r.text.as_str())
            .collect();
        assert_eq!(texts, ["and tags?", "Tags stay in front matter."]);
        // No time in the entry: the row's update time.
        assert_eq!(more.parsed.records[0].time_ms, Some(1_764_600_000_000));
        assert_eq!(more.watermark.as_deref(), Some("1764600000000"));
    }

    #[test]
    fn malformed_rows_and_entries_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = from_sql(
            dir.path(),
            r#"INSERT INTO conversations_v2 VALUES ('/x', 'bad-json', '{"history": [', 1, 1764595000000);
               INSERT INTO conversations_v2 VALUES ('/y', 'no-history', '{"conversation_id": "no-history"}', 1, 1764595000001);
               INSERT INTO conversations_v2 VALUES ('/z', 'odd-entry', '{"history": [{"user": {"content": {"Future": {}}}, "assistant": {"Later": {}}}]}', 1, 1764595000002);"#,
        );
        let batch = read_db(&db, &None).unwrap();
        assert_eq!(batch.parsed.records.len(), 7);
        assert_eq!(batch.parsed.errors.len(), 3, "{:?}", batch.parsed.errors);
        assert!(matches!(batch.parsed.errors[0], ParseError::Json { .. }));
    }

    #[test]
    fn credentials_table_alone_is_not_understood_and_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DB_FILE);
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT); INSERT INTO auth_kv VALUES ('token', 'secret-value');")
            .unwrap();
        let err = read_db(&db, &None).expect_err("foreign schema");
        assert!(matches!(err, SourceError::NotUnderstood { .. }), "{err}");
        assert!(!err.to_string().contains("secret-value"));
    }

    #[test]
    fn fixture_matches_its_sql() {
        let dir = tempfile::tempdir().unwrap();
        let out = from_sql(dir.path(), "");
        let a = read_db(&fixture(DB), &None).unwrap();
        let b = read_db(&out, &None).unwrap();
        assert_eq!(a.parsed.records, b.parsed.records);
        assert_eq!(a.watermark, b.watermark);
    }

    #[test]
    fn discovers_kiro_and_amazon_q_databases() {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations::under_home(dir.path());
        assert!(Kiro.discover(&loc).is_empty());
        for d in ["kiro-cli", "amazon-q"] {
            let p = loc.xdg_data_home.join(d);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(DB_FILE), b"").unwrap();
        }
        assert_eq!(Kiro.discover(&loc).len(), 2);
    }
}
