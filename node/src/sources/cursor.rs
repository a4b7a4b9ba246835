//! Cursor: the IDE's `state.vscdb` SQLite key-value stores and the Cursor
//! CLI's agent transcripts.
//!
//! IDE (`${cursor_config_dir}/User/{globalStorage,workspaceStorage/*}/state.vscdb`):
//! - newer builds: table `cursorDiskKV(key, value)` with `composerData:<id>`
//!   (`composerId`, `createdAt`, `lastUpdatedAt`, inline `conversation[]` in
//!   older builds or `fullConversationHeadersOnly[] {bubbleId}` in newer) and
//!   `bubbleId:<composer>:<bubble>` rows (`type` 1 = user, else assistant;
//!   `text`, fallback `rawText`; `createdAt`; `workspaceProjectDir`;
//!   `toolFormerData {name, params|rawArgs, result}` for tool calls);
//! - older builds: table `ItemTable(key, value)` with `composer.composerData`
//!   (`allComposers[]` with inline `conversation[]`) and
//!   `workbench.panel.aichat.view.aichat.chatdata` (`tabs[].bubbles[]`,
//!   `type` "user" / "ai"; bubbles carry no time, so their records have none).
//!
//! Values are TEXT or BLOB; both are decoded. A bubble without its own time
//! gets its composer's `createdAt`. The project is the first bubble's
//! `workspaceProjectDir`, else (per-workspace databases) the folder named by
//! the sibling `workspace.json`.
//!
//! Watermark: `"<ms>:<hash>"`, the newest composer `lastUpdatedAt`/`createdAt`
//! seen, and a hash of the ItemTable chat values. Composers updated after
//! `<ms>` are re-emitted whole; the ItemTable chats are re-emitted when their
//! hash changes (the store dedupes unchanged records by content hash).
//!
//! CLI (`~/.cursor/projects/<encoded cwd>/agent-transcripts/**/*.jsonl`):
//! lines `{role, message: {content}}`, content a string or blocks. The lines
//! have no timestamps, so every record gets the file's modification time.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;

use super::common::{
    TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, content_text, has_suffix, parse_time, walk_files,
};
use super::{
    DbBatch, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile, Watermark,
};
use crate::record::{Record, Role};

const AGENT: &str = "cursor";

const COMPOSER_KEY: &str = "composer.composerData";
const CHAT_KEY: &str = "workbench.panel.aichat.view.aichat.chatdata";

/// The cursor source.
pub struct Cursor;

impl Source for Cursor {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// The CLI's project folders; the IDE's `User` folder holds settings
    /// beside its databases, which are checked when they are read.
    fn history_dirs(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![loc.home.join(".cursor/projects")]
    }

    fn not_history(&self) -> &'static [&'static str] {
        &[
            "mcps",
            "terminals",
            "rules",
            "assets",
            "worker.log",
            "repo.json",
        ]
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![
            loc.cursor_config_dir.join("User"),
            loc.home.join(".cursor/projects"),
        ]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CURSOR_CONFIG_DIR"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut out = Vec::new();
        let user = loc.cursor_config_dir.join("User");
        let global = user.join("globalStorage/state.vscdb");
        if global.is_file() {
            out.push(SourceFile::new(global, Reader::Database(read_vscdb)));
        }
        for path in walk_files(&user.join("workspaceStorage"), 1, &|p| {
            p.file_name().and_then(|n| n.to_str()) == Some("state.vscdb")
        }) {
            out.push(SourceFile::new(path, Reader::Database(read_vscdb)));
        }
        let projects = loc.home.join(".cursor/projects");
        for path in walk_files(&projects, 6, &|p| {
            has_suffix(p, ".jsonl") && p.components().any(|c| c.as_os_str() == "agent-transcripts")
        }) {
            out.push(SourceFile::new(path, Reader::Whole(parse_transcript)));
        }
        out
    }
}

// ---------------------------------------------------------------------------
// IDE state.vscdb
// ---------------------------------------------------------------------------

/// Reads a Cursor `state.vscdb` (either layout) from a watermark.
pub fn read_vscdb(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let sql_err = |source| SourceError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_file() {
        return Err(SourceError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "database not found"),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(sql_err)?;
    conn.busy_timeout(Duration::from_secs(2)).map_err(sql_err)?;

    let (since_ms, since_hash) = match watermark.as_deref().and_then(|w| w.split_once(':')) {
        Some((ms, hash)) => (ms.parse::<i64>().ok(), hash.to_owned()),
        None => (None, String::new()),
    };
    let tables: HashSet<String> = {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(sql_err)?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(sql_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(sql_err)?
    };
    if !tables.contains("cursorDiskKV")
        && !tables.contains("ItemTable")
        && let Some(e) =
            super::db::foreign_schema(path, &conn, &tables, "the ItemTable or cursorDiskKV tables")
    {
        return Err(e);
    }
    let ws_project = workspace_project(path);
    let mut parsed = Parsed::default();
    let mut newest = since_ms;
    if tables.contains("cursorDiskKV") {
        let n =
            read_disk_kv(&conn, since_ms, ws_project.as_deref(), &mut parsed).map_err(sql_err)?;
        newest = newest.max(n);
    }
    let mut hash = since_hash.clone();
    if tables.contains("ItemTable") {
        hash = read_item_table(&conn, &since_hash, ws_project.as_deref(), &mut parsed)
            .map_err(sql_err)?;
    }
    let ms = newest.map(|n| n.to_string()).unwrap_or_default();
    Ok(DbBatch {
        parsed,
        watermark: Some(format!("{ms}:{hash}")),
    })
}

fn row_offset(rowid: i64) -> u64 {
    u64::try_from(rowid).unwrap_or(0)
}

/// Decodes a TEXT or BLOB value as JSON. `Ok(None)` for NULL / empty values.
fn value_json(v: ValueRef<'_>, rowid: i64) -> Result<Option<Value>, ParseError> {
    let bytes = match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
        _ => return Ok(None),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|source| ParseError::Json {
            offset: row_offset(rowid),
            source,
        })
}

fn read_disk_kv(
    conn: &Connection,
    since: Option<i64>,
    ws_project: Option<&str>,
    parsed: &mut Parsed,
) -> rusqlite::Result<Option<i64>> {
    let mut newest: Option<i64> = None;
    let mut stmt = conn.prepare(
        "SELECT rowid, key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%' ORDER BY rowid",
    )?;
    let mut bubble_stmt = conn.prepare("SELECT rowid, value FROM cursorDiskKV WHERE key = ?1")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let rowid: i64 = r.get(0)?;
        let key: String = r.get::<_, Option<String>>(1)?.unwrap_or_default();
        let composer = match value_json(r.get_ref(2)?, rowid) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                parsed.errors.push(e);
                continue;
            }
        };
        let updated = composer
            .get("lastUpdatedAt")
            .and_then(parse_time)
            .or_else(|| composer.get("createdAt").and_then(parse_time));
        if let Some(u) = updated {
            newest = Some(newest.map_or(u, |n| n.max(u)));
        }
        let fresh = match (since, updated) {
            (None, _) => true,
            (Some(s), Some(u)) => u > s,
            (Some(_), None) => false,
        };
        if !fresh {
            continue;
        }
        let cid = composer
            .get("composerId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| key.strip_prefix("composerData:").map(str::to_owned))
            .unwrap_or_default();
        if cid.is_empty() {
            continue;
        }
        // (bubble, offset) in conversation order.
        let mut bubbles: Vec<(Value, i64)> = Vec::new();
        match composer.get("conversation").and_then(Value::as_array) {
            Some(inline) if !inline.is_empty() => {
                bubbles.extend(inline.iter().map(|b| (b.clone(), rowid)));
            }
            _ => {
                let headers = composer
                    .get("fullConversationHeadersOnly")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                for h in headers {
                    let Some(bid) = h.get("bubbleId").and_then(Value::as_str) else {
                        continue;
                    };
                    let row = bubble_stmt
                        .query_row([format!("bubbleId:{cid}:{bid}")], |br| {
                            let id: i64 = br.get(0)?;
                            Ok((id, value_json(br.get_ref(1)?, id)))
                        })
                        .optional()?;
                    match row {
                        Some((id, Ok(Some(b)))) => bubbles.push((b, id)),
                        Some((_, Err(e))) => parsed.errors.push(e),
                        _ => {} // missing or NULL bubble rows: nothing to index
                    }
                }
            }
        }
        let fallback_time = composer.get("createdAt").and_then(parse_time);
        emit_bubbles(&cid, &bubbles, fallback_time, ws_project, parsed);
    }
    Ok(newest)
}

fn read_item_table(
    conn: &Connection,
    since_hash: &str,
    ws_project: Option<&str>,
    parsed: &mut Parsed,
) -> rusqlite::Result<String> {
    let mut stmt =
        conn.prepare("SELECT rowid, key, value FROM ItemTable WHERE key IN (?1, ?2) ORDER BY key")?;
    let mut rows = stmt.query([COMPOSER_KEY, CHAT_KEY])?;
    let mut hasher = blake3::Hasher::new();
    let mut found: Vec<(i64, String, Result<Option<Value>, ParseError>)> = Vec::new();
    while let Some(r) = rows.next()? {
        let rowid: i64 = r.get(0)?;
        let key: String = r.get::<_, Option<String>>(1)?.unwrap_or_default();
        let v = r.get_ref(2)?;
        if let ValueRef::Text(b) | ValueRef::Blob(b) = v {
            hasher.update(key.as_bytes());
            hasher.update(&(b.len() as u64).to_le_bytes());
            hasher.update(b);
        }
        found.push((rowid, key, value_json(v, rowid)));
    }
    let hash = hasher.finalize().to_hex()[..16].to_owned();
    if found.is_empty() || hash == since_hash {
        return Ok(hash);
    }
    for (rowid, key, value) in found {
        let value = match value {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                parsed.errors.push(e);
                continue;
            }
        };
        if key == COMPOSER_KEY {
            let composers = value
                .get("allComposers")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for c in composers {
                let Some(cid) = c.get("composerId").and_then(Value::as_str) else {
                    continue;
                };
                let bubbles: Vec<(Value, i64)> = c
                    .get("conversation")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|b| (b.clone(), rowid)).collect())
                    .unwrap_or_default();
                let fallback = c.get("createdAt").and_then(parse_time);
                emit_bubbles(cid, &bubbles, fallback, ws_project, parsed);
            }
        } else {
            let tabs = value
                .get("tabs")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for t in tabs {
                let Some(tid) = t.get("tabId").and_then(Value::as_str) else {
                    continue;
                };
                let bubbles: Vec<(Value, i64)> = t
                    .get("bubbles")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|b| (b.clone(), rowid)).collect())
                    .unwrap_or_default();
                // Chat-panel bubbles carry no time; `lastSendTime` moves as
                // the tab grows, so it is not used (records would re-hash).
                emit_bubbles(tid, &bubbles, None, ws_project, parsed);
            }
        }
    }
    Ok(hash)
}

/// Turns one conversation's bubbles into records.
fn emit_bubbles(
    session: &str,
    bubbles: &[(Value, i64)],
    fallback_time: Option<i64>,
    ws_project: Option<&str>,
    parsed: &mut Parsed,
) {
    let project = bubbles
        .iter()
        .find_map(|(b, _)| {
            b.get("workspaceProjectDir")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
        })
        .or(ws_project)
        .map(str::to_owned);
    for (b, offset) in bubbles {
        let role = match b.get("type") {
            Some(Value::Number(n)) if n.as_i64() == Some(1) => Role::User,
            Some(Value::Number(_)) => Role::Assistant,
            Some(Value::String(s)) if s == "user" || s == "1" => Role::User,
            Some(Value::String(_)) => Role::Assistant,
            _ => continue,
        };
        let time = b
            .get("createdAt")
            .and_then(parse_time)
            .or_else(|| {
                b.pointer("/timingInfo/clientStartTime")
                    .and_then(parse_time)
            })
            .or(fallback_time);
        let rec = |role: Role, text: String, files: Vec<String>| Record {
            agent: AGENT.to_owned(),
            session_id: session.to_owned(),
            parent_session: None,
            project: project.clone(),
            role,
            time_ms: time,
            text,
            files,
            offset: row_offset(*offset),
        };
        let text = [b.get("text"), b.get("rawText")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|s| !s.trim().is_empty());
        if let Some(text) = text {
            parsed
                .records
                .push(rec(role, cap_text(text, TEXT_CAP), Vec::new()));
        }
        if let Some(tool) = b.get("toolFormerData").filter(|t| t.is_object()) {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("tool");
            let args = [tool.get("params"), tool.get("rawArgs")]
                .into_iter()
                .flatten()
                .find(|v| !v.is_null())
                .map(|v| match v {
                    Value::String(s) => {
                        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                    }
                    other => other.clone(),
                })
                .unwrap_or(Value::Null);
            let (line, files) = tool_call_text(name, &args);
            parsed.records.push(rec(Role::ToolCall, line, files));
            let result = match tool.get("result") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            if !result.trim().is_empty() {
                parsed.records.push(rec(
                    Role::ToolOutput,
                    cap_text(&result, TOOL_OUTPUT_CAP),
                    Vec::new(),
                ));
            }
        }
    }
}

/// For a `workspaceStorage/<hash>/state.vscdb`: the folder its sibling
/// `workspace.json` names (`{"folder": "file:///path"}` or `{"workspace": ...}`).
fn workspace_project(db: &Path) -> Option<String> {
    let bytes = std::fs::read(db.parent()?.join("workspace.json")).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let uri = v
        .get("folder")
        .or_else(|| v.get("workspace"))
        .and_then(Value::as_str)?;
    file_uri_path(uri)
}

/// `file:///home/dev/my%20app` → `/home/dev/my app`; `file:///c%3A/x` → `c:/x`.
fn file_uri_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(h) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(h);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    let mut path = String::from_utf8_lossy(&out).into_owned();
    // Windows drive paths: "/c:/Users/..." → "c:/Users/...".
    let b = path.as_bytes();
    if b.len() >= 3 && b[0] == b'/' && b[1].is_ascii_alphabetic() && b[2] == b':' {
        path.remove(0);
    }
    (!path.is_empty()).then_some(path)
}

/// A compact line for a tool call and the files it touched.
fn tool_call_text(name: &str, args: &Value) -> (String, Vec<String>) {
    let field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .filter(|s| !s.trim().is_empty())
    };
    let file = field(&[
        "target_file",
        "targetFile",
        "relativeWorkspacePath",
        "file_path",
        "filePath",
        "path",
    ]);
    let files: Vec<String> = file.map(|f| vec![f.to_owned()]).unwrap_or_default();
    let mut text = if let Some(cmd) = field(&["command", "cmd"]) {
        format!("{name}: {cmd}")
    } else if let Some(f) = file {
        format!("{name} {f}")
    } else if let Some(q) = field(&["query", "pattern", "glob_pattern", "url", "prompt"]) {
        format!("{name}: {q}")
    } else {
        match args {
            Value::Null => name.to_owned(),
            Value::Object(o) if o.is_empty() => name.to_owned(),
            Value::String(s) => format!("{name}: {s}"),
            other => format!("{name}: {other}"),
        }
    };
    if let Some(body) = field(&[
        "code_edit",
        "contents",
        "content",
        "new_string",
        "newString",
    ]) {
        text.push('\n');
        text.push_str(body);
    }
    (cap_text(&text, TEXT_CAP), files)
}

// ---------------------------------------------------------------------------
// CLI agent transcripts
// ---------------------------------------------------------------------------

/// Parses a Cursor CLI `agent-transcripts/**/<id>.jsonl` file.
///
/// The lines carry no timestamps: every record gets the file's modification
/// time. An unterminated last line that does not decode is being written and
/// is left alone (not an error); other undecodable lines are counted.
pub fn parse_transcript(path: &Path, bytes: &[u8]) -> Parsed {
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok());
    let session = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let project = transcript_project(path);
    let mut parsed = Parsed::default();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let (line, next, terminated) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(n) => (&bytes[offset..offset + n], offset + n + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        let at = offset as u64;
        offset = next;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) if !terminated => break, // torn last line
            Err(source) => {
                parsed.errors.push(ParseError::Json { offset: at, source });
                continue;
            }
        };
        let role = v
            .get("role")
            .or_else(|| v.pointer("/message/role"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let content = v
            .pointer("/message/content")
            .or_else(|| v.get("content"))
            .unwrap_or(&Value::Null);
        let rec = |role: Role, text: String, files: Vec<String>| Record {
            agent: AGENT.to_owned(),
            session_id: session.clone(),
            parent_session: None,
            project: project.clone(),
            role,
            time_ms: mtime,
            text,
            files,
            offset: at,
        };
        match role {
            "user" => {
                let text = unwrap_user_query(&content_text(content));
                if !text.is_empty() {
                    parsed
                        .records
                        .push(rec(Role::User, cap_text(&text, TEXT_CAP), Vec::new()));
                }
                push_tool_results(content, &rec, &mut parsed.records);
            }
            "assistant" => {
                let text = content_text(content);
                if !text.trim().is_empty() {
                    parsed.records.push(rec(
                        Role::Assistant,
                        cap_text(&text, TEXT_CAP),
                        Vec::new(),
                    ));
                }
                for block in content.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                        let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
                        let input = block.get("input").unwrap_or(&Value::Null);
                        let (line, files) = tool_call_text(name, input);
                        parsed.records.push(rec(Role::ToolCall, line, files));
                    }
                }
            }
            "tool" => {
                let text = content_text(content);
                if !text.trim().is_empty() {
                    parsed.records.push(rec(
                        Role::ToolOutput,
                        cap_text(&text, TOOL_OUTPUT_CAP),
                        Vec::new(),
                    ));
                }
            }
            _ => {} // unknown line kinds are skipped silently
        }
    }
    parsed
}

fn push_tool_results(
    content: &Value,
    rec: &dyn Fn(Role, String, Vec<String>) -> Record,
    out: &mut Vec<Record>,
) {
    for block in content.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
            let text = match block.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => content_text(v),
                None => String::new(),
            };
            if !text.trim().is_empty() {
                out.push(rec(
                    Role::ToolOutput,
                    cap_text(&text, TOOL_OUTPUT_CAP),
                    Vec::new(),
                ));
            }
        }
    }
}

/// Cursor wraps what the user typed in `<user_query>…</user_query>`.
fn unwrap_user_query(text: &str) -> String {
    let t = text.trim();
    match t
        .strip_prefix("<user_query>")
        .and_then(|r| r.strip_suffix("</user_query>"))
    {
        Some(inner) => inner.trim().to_owned(),
        None => t.to_owned(),
    }
}

/// A guess: the transcript folder `~/.cursor/projects/<name>/agent-transcripts`
/// names the working directory with its separators turned into `-` and the
/// leading one dropped (`home-dev-acme` → `/home/dev/acme`). Nothing in the
/// transcript records the real path, and dashes inside folder names are
/// indistinguishable from separators, so this is a last resort.
fn transcript_project(path: &Path) -> Option<String> {
    let mut dir = path.parent()?;
    while dir.file_name()? != "agent-transcripts" {
        dir = dir.parent()?;
    }
    let name = dir.parent()?.file_name()?.to_str()?;
    if name.is_empty() {
        return None;
    }
    Some(format!("/{}", name.replace('-', "/")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures")).join(rel)
    }

    const GLOBAL_DB: &str = "home/.config/Cursor/User/globalStorage/state.vscdb";
    const TRANSCRIPT: &str = "home/.cursor/projects/home-dev-acme/agent-transcripts/7d3c2a10-5b8e-4f61-9a0c-2e4f1b6d8c93.jsonl";
    const NEW_COMPOSER: &str = "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c";
    const OLD_COMPOSER: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f2a3b4c5d";

    #[test]
    fn disk_kv_fixture() {
        let batch = read_vscdb(&fixture(GLOBAL_DB), &None).unwrap();
        // Bubble ...004 has torn JSON.
        assert_eq!(batch.parsed.errors.len(), 1, "{:?}", batch.parsed.errors);
        let recs = &batch.parsed.records;
        let summary: Vec<(&str, Role, &str)> = recs
            .iter()
            .map(|r| (r.session_id.as_str(), r.role, r.text.as_str()))
            .collect();
        assert_eq!(recs.len(), 7, "{summary:#?}");
        for r in &recs[..5] {
            assert_eq!(r.session_id, NEW_COMPOSER);
            assert_eq!(r.project.as_deref(), Some("/home/dev/acme"));
            assert!(!r.text.contains("hidden reasoning"));
        }
        assert_eq!(recs[0].role, Role::User);
        assert!(
            recs[0]
                .text
                .contains("hf_5Xj8TPQxjq4i9DoV8gz4FkQ1okTBGzvAmw")
        );
        assert_eq!(recs[0].time_ms, Some(1_762_000_000_000)); // ISO string
        assert_eq!(recs[1].role, Role::Assistant); // BLOB value, rawText fallback
        assert!(recs[1].text.contains(
            "the dashboard uses server-sent events instead of websockets for the corporate proxy"
        ));
        assert_eq!(recs[1].time_ms, Some(1_762_000_060_000));
        assert_eq!(recs[2].role, Role::ToolCall);
        assert_eq!(recs[2].text, "run_terminal_cmd: git remote -v");
        assert_eq!(recs[3].role, Role::ToolOutput);
        assert!(recs[3].text.contains("glpat-OlUcR64cXQLioDnkHIfx"));
        assert_eq!(recs[4].role, Role::Assistant);
        assert!(recs[4].text.contains("EventSource"));
        // The older inline composer: no project, composer time.
        for r in &recs[5..] {
            assert_eq!(r.session_id, OLD_COMPOSER);
            assert_eq!(r.project, None);
            assert_eq!(r.time_ms, Some(1_730_000_000_000));
        }
        assert_eq!(recs[5].role, Role::User);
        assert!(recs[5].text.starts_with("Почему тесты падают только в CI?"));
        assert_eq!(recs[6].role, Role::Assistant);
        assert!(recs[6].text.starts_with("CI runs with TZ=UTC"));
        // The empty composer and the NULL composer yield nothing.
        assert!(!recs.iter().any(|r| r.session_id.starts_with("11111111")));

        // The watermark holds the newest composer update; nothing new since.
        let wm = batch.watermark.clone().unwrap();
        assert!(wm.starts_with("1762000400000:"), "{wm}");
        let again = read_vscdb(&fixture(GLOBAL_DB), &batch.watermark).unwrap();
        assert!(again.parsed.records.is_empty());
        assert_eq!(again.watermark, batch.watermark);
        // Only composers updated after the watermark are re-read.
        let part = read_vscdb(&fixture(GLOBAL_DB), &Some("1762000000000:".into())).unwrap();
        assert!(
            part.parsed
                .records
                .iter()
                .all(|r| r.session_id == NEW_COMPOSER)
        );
        assert_eq!(part.parsed.records.len(), 5);
    }

    #[test]
    fn fixture_matches_its_sql() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("state.vscdb");
        let script = std::fs::read_to_string(fixture("sql/cursor-state.sql")).unwrap();
        Connection::open(&out)
            .unwrap()
            .execute_batch(&script)
            .unwrap();
        let a = read_vscdb(&fixture(GLOBAL_DB), &None).unwrap();
        let b = read_vscdb(&out, &None).unwrap();
        assert_eq!(a.parsed.records, b.parsed.records);
        assert_eq!(a.parsed.errors.len(), b.parsed.errors.len());
        assert_eq!(a.watermark, b.watermark);
    }

    /// The older ItemTable layout in a per-workspace database, with the
    /// project taken from the sibling workspace.json.
    #[test]
    fn item_table_workspace_db() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir
            .path()
            .join("User/workspaceStorage/f87f6e0b2cf1ae8645cc0c5ffaa99529");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(
            ws.join("workspace.json"),
            r#"{"folder":"file:///home/dev/my%20shop"}"#,
        )
        .unwrap();
        let db = ws.join("state.vscdb");
        let composers = serde_json::json!({"allComposers": [{"composerId": "comp-1", "createdAt": 1731784818255_i64,
            "conversation": [{"type": 1, "bubbleId": "a", "text": "make the sidebar collapsible"},
                             {"type": 2, "bubbleId": "b", "text": "Done: the sidebar collapses below 768 px."}]}]});
        let chat = serde_json::json!({"tabs": [{"tabId": "tab-1", "lastSendTime": 1731818231743_i64,
            "bubbles": [{"type": "user", "id": "u", "text": "why is the footer unknown?"},
                        {"type": "ai", "id": "v", "text": "", "rawText": "Import IonFooter in the page module."}]}]});
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ItemTable VALUES (?1, ?2)",
            (COMPOSER_KEY, composers.to_string()),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ItemTable VALUES (?1, ?2)",
            (CHAT_KEY, chat.to_string().into_bytes()),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO ItemTable VALUES ('aiService.prompts', '[{\"text\":\"x\"}]')",
            [],
        )
        .unwrap();
        drop(conn);

        let loc = Locations {
            cursor_config_dir: dir.path().to_path_buf(),
            ..Locations::default()
        };
        let found = Cursor.discover(&loc);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, db);

        let batch = read_vscdb(&db, &None).unwrap();
        assert!(batch.parsed.errors.is_empty());
        let got: Vec<(&str, Role, &str, Option<i64>)> = batch
            .parsed
            .records
            .iter()
            .map(|r| (r.session_id.as_str(), r.role, r.text.as_str(), r.time_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "comp-1",
                    Role::User,
                    "make the sidebar collapsible",
                    Some(1731784818255)
                ),
                (
                    "comp-1",
                    Role::Assistant,
                    "Done: the sidebar collapses below 768 px.",
                    Some(1731784818255)
                ),
                ("tab-1", Role::User, "why is the footer unknown?", None),
                (
                    "tab-1",
                    Role::Assistant,
                    "Import IonFooter in the page module.",
                    None
                ),
            ]
        );
        assert!(
            batch
                .parsed
                .records
                .iter()
                .all(|r| r.project.as_deref() == Some("/home/dev/my shop"))
        );
        // Unchanged values: nothing re-emitted.
        let again = read_vscdb(&db, &batch.watermark).unwrap();
        assert!(again.parsed.records.is_empty());
    }

    #[test]
    fn transcript_fixture() {
        let path = fixture(TRANSCRIPT);
        let bytes = std::fs::read(&path).unwrap();
        let parsed = parse_transcript(&path, &bytes);
        assert_eq!(parsed.errors.len(), 1, "{:?}", parsed.errors);
        let bad_at = bytes.windows(7).position(|w| w == b"{oops}}").unwrap();
        let line_start = bytes[..bad_at].iter().rposition(|&b| b == b'\n').unwrap() + 1;
        assert!(
            matches!(parsed.errors[0], ParseError::Json { offset, .. } if offset == line_start as u64)
        );
        let recs = &parsed.records;
        let mtime = std::fs::metadata(&path)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let got: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(got.len(), 4, "{got:#?}");
        for r in recs {
            assert_eq!(r.session_id, "7d3c2a10-5b8e-4f61-9a0c-2e4f1b6d8c93");
            assert_eq!(r.project.as_deref(), Some("/home/dev/acme"));
            assert_eq!(r.time_ms, Some(mtime));
            assert!(
                !r.text.contains("retry log now inclu"),
                "torn line consumed"
            );
        }
        assert_eq!(
            got[0],
            (
                Role::User,
                "The payment webhook keeps hammering the bank API while it is down. How many retries do we allow?"
            )
        );
        assert_eq!(recs[0].offset, 0);
        assert_eq!(got[1].0, Role::Assistant);
        assert!(
            got[1]
                .1
                .contains("the retry budget for the payment webhook is five attempts")
        );
        assert_eq!(got[2].0, Role::ToolCall);
        assert!(got[2].1.starts_with(
            "Shell: curl -s -H 'Authorization: Bearer rwZbqcabUGJmGEp7CgQ0PBQFI14zGtSnovm14TUO'"
        ));
        assert_eq!(
            got[3],
            (Role::User, "Keep five; log each attempt with the event id.")
        );
    }

    #[test]
    fn discovery_in_fixture_home() {
        let home = fixture("home");
        let loc = Locations::under_home(&home);
        let found = Cursor.discover(&loc);
        let paths: Vec<_> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(paths, vec![fixture(GLOBAL_DB), fixture(TRANSCRIPT)]);
        assert!(matches!(found[0].reader, Reader::Database(_)));
        assert!(matches!(found[1].reader, Reader::Whole(_)));
        assert!(
            Cursor
                .discover(&Locations::under_home(Path::new("/nonexistent/h")))
                .is_empty()
        );
    }

    #[test]
    fn missing_database_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.vscdb");
        assert!(matches!(read_vscdb(&p, &None), Err(SourceError::Io { .. })));
        assert!(!p.exists());
    }

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri_path("file:///home/dev/a%20b").as_deref(),
            Some("/home/dev/a b")
        );
        assert_eq!(
            file_uri_path("file:///c%3A/Users/x").as_deref(),
            Some("c:/Users/x")
        );
        assert_eq!(file_uri_path("vscode-remote://ssh/x"), None);
        assert_eq!(
            file_uri_path("file:///bad%zzpath").as_deref(),
            Some("/bad%zzpath")
        );
    }

    #[test]
    fn real_histories() {
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/real-histories/cursor"
        );
        if !Path::new(root).is_dir() {
            eprintln!("skipping: {root} not found");
            return;
        }
        // The only raw store is the 2024 per-workspace database (ItemTable
        // layout); the datasette JSON export next to it is not a Cursor file.
        let path = Path::new(root).join("cursor-history/workspaceStorage-state.vscdb");
        let batch = read_vscdb(&path, &None).unwrap();
        assert!(batch.parsed.errors.is_empty(), "{:?}", batch.parsed.errors);
        let recs = &batch.parsed.records;
        assert!(recs.len() > 50, "{}", recs.len());
        assert!(
            recs.iter()
                .all(|r| !r.session_id.is_empty() && !r.text.trim().is_empty())
        );
        // No workspace.json was collected next to it: no project.
        assert!(recs.iter().all(|r| r.project.is_none()));
        // Composer bubbles (time from the composer) and chat-panel bubbles.
        assert!(recs.iter().any(|r| {
            r.session_id == "090e988a-b2e3-4fcc-84e0-62a9401ae6ea"
                && r.role == Role::User
                && r.text
                    .starts_with("add the following elements to the sidebar")
                && r.time_ms == Some(1731784818255)
        }));
        assert!(
            recs.iter()
                .any(|r| r.session_id == "2aa483d1-573c-4039-ae4e-7415e28d2605"
                    && r.role == Role::Assistant
                    && r.text.starts_with("I'll help you modify the sidebar"))
        );
        let again = read_vscdb(&path, &batch.watermark).unwrap();
        assert!(again.parsed.records.is_empty());
    }

    proptest! {
        // No-panic property: every truncation of every fixture transcript
        // line, and arbitrary bytes, parse without panicking. Asserts nothing else.
        #[test]
        fn transcript_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_transcript(Path::new("/nonexistent/agent-transcripts/x.jsonl"), &data);
        }

        // No-panic property for database values: arbitrary bytes as a
        // composer, a bubble and an ItemTable value.
        #[test]
        fn db_values_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("state.vscdb");
            let conn = Connection::open(&db).unwrap();
            conn.execute_batch("CREATE TABLE ItemTable (key TEXT, value BLOB);
                                CREATE TABLE cursorDiskKV (key TEXT, value BLOB);").unwrap();
            let comp = r#"{"composerId":"c","fullConversationHeadersOnly":[{"bubbleId":"b"}]}"#;
            conn.execute("INSERT INTO cursorDiskKV VALUES ('composerData:c', ?1)", [comp]).unwrap();
            conn.execute("INSERT INTO cursorDiskKV VALUES ('bubbleId:c:b', ?1)", [&data]).unwrap();
            conn.execute("INSERT INTO cursorDiskKV VALUES ('composerData:d', ?1)", [&data]).unwrap();
            conn.execute("INSERT INTO ItemTable VALUES (?1, ?2)", (CHAT_KEY, &data)).unwrap();
            drop(conn);
            let _ = read_vscdb(&db, &None);
        }
    }

    #[test]
    fn truncated_transcript_lines_never_panic() {
        // No-panic loop (asserts only that nothing panics, plus that a
        // truncated final line is never an error): every prefix of the fixture.
        let bytes = std::fs::read(fixture(TRANSCRIPT)).unwrap();
        for end in 0..=bytes.len() {
            let p = parse_transcript(Path::new("/x/agent-transcripts/t.jsonl"), &bytes[..end]);
            assert!(p.errors.len() <= 1);
        }
    }
}
