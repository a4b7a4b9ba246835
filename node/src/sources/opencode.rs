//! opencode: two unrelated SQLite stores share the name; both are read.
//!
//! (a) The current sst/anomalyco opencode (TypeScript) keeps every project's
//! sessions in `${XDG_DATA_HOME}/opencode/opencode.db` (a build of a
//! channel other than `latest`, `beta` and `prod` in `opencode-<channel>.db`
//! beside it; `$OPENCODE_DB` names another file, relative to that folder
//! unless absolute): tables
//! `session(id, project_id, parent_id, directory, title, time_created,
//! time_updated, ...)`, `message(id, session_id, time_created, time_updated,
//! data)` and `part(id, message_id, session_id, time_created, time_updated,
//! data)`, where `data` is the JSON of the message (`role`, `time.created`,
//! `path.cwd`) or part (`type` = `text` | `tool` | `reasoning` | `step-*` ...).
//! The column names are assumed from opencode's drizzle schema and the
//! export format; they are probed, and `time_updated`, `parent_id`,
//! `directory` and `part.session_id` may be missing.
//!
//! (b) The original Go opencode (later Charm Crush) keeps a project-local
//! `<project>/.opencode/opencode.db`: `sessions(id, parent_session_id, ...)`
//! and `messages(id, session_id, role, parts, created_at, updated_at)` with
//! `parts` a JSON array of `{type, data}` (`text`, `tool_call`,
//! `tool_result`, `finish`). Times are ISO strings in the oldest schema and
//! Unix seconds later. No working directory is stored, so the project is the
//! folder holding `.opencode/`. These are discovered under the project
//! roots, configured or found (`Locations::project_roots`).
//!
//! Watermark: the decimal Unix-ms of the newest message/part/session change
//! seen. A pass re-emits every session with a change newer than it (the
//! store dedupes unchanged records by content hash).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::common::{TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, parse_time, parse_time_str};
use super::{
    DbBatch, Locations, ParseError, Parsed, Reader, Source, SourceError, SourceFile, Watermark,
};
use crate::record::{Record, Role};

/// What opencode (and its forks, Kilo's CLI among them) keeps in its data
/// folder beside the database: logs, binaries, snapshots, credentials.
pub(crate) const DATA_FOLDER_EXTRAS: &[&str] = &[
    "log",
    "bin",
    "snapshot",
    "tool-output",
    "auth.json",
    "mcp-auth.json",
];

const AGENT: &str = "opencode";

/// The opencode source.
pub struct OpenCode;

impl Source for OpenCode {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// The data folder's logs, binaries and snapshots, when no database
    /// is there (with one, the database is checked when it is read).
    fn not_history(&self) -> &'static [&'static str] {
        DATA_FOLDER_EXTRAS
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = vec![loc.xdg_data_home.join("opencode")];
        v.extend(loc.project_roots().iter().map(|r| r.join(".opencode")));
        v
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["OPENCODE_DB"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let data = loc.xdg_data_home.join("opencode");
        let mut globals = channel_dbs(&data);
        if let Some(db) = loc.var("OPENCODE_DB") {
            // `:memory:` names no file; a relative name is in the data folder.
            globals.push(data.join(db));
        }
        let roots = loc.project_roots();
        let locals = roots.iter().map(|root| root.join(".opencode/opencode.db"));
        for path in globals.into_iter().chain(locals) {
            if path.is_file() && seen.insert(path.clone()) {
                out.push(SourceFile::new(path, Reader::Database(read_db)));
            }
        }
        out
    }
}

/// The databases in opencode's data folder: `opencode.db`, which releases
/// of the `latest`, `beta` and `prod` channels write, and
/// `opencode-<channel>.db`, which builds of any other channel write
/// (opencode's `packages/core` database path), sorted.
fn channel_dbs(data: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n == "opencode.db" || (n.starts_with("opencode-") && n.ends_with(".db"))
            })
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Reads an opencode database of either schema from a watermark.
pub fn read_db(path: &Path, watermark: &Watermark) -> Result<DbBatch, SourceError> {
    let conn = open_read_only(path)?;
    let since = watermark
        .as_deref()
        .and_then(|w| w.trim().parse::<i64>().ok());
    let sql_err = |source| SourceError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let tables = table_names(&conn).map_err(sql_err)?;
    let has = |t: &str| tables.contains(t);
    let batch = if has("session") && has("message") && has("part") {
        let (mut parsed, newest) = read_current(&conn, since).map_err(sql_err)?;
        if has("session_message") {
            let unread = v2_only_sessions(&conn, since).map_err(sql_err)?;
            parsed.errors.extend((0..unread).map(|_| ParseError::Shape {
                offset: 0,
                what: "session kept only in opencode's session_message table, not read",
            }));
        }
        (parsed, newest)
    } else if has("sessions") && has("messages") {
        read_legacy(&conn, since, legacy_project(path)).map_err(sql_err)?
    } else if let Some(e) = super::db::foreign_schema(
        path,
        &conn,
        &tables,
        "the session, message and part tables (or the older sessions and messages)",
    ) {
        return Err(e);
    } else {
        // Not migrated yet (no table at all): nothing to read.
        (Parsed::default(), None)
    };
    let (parsed, newest) = batch;
    let watermark = match (newest, since) {
        (Some(n), Some(s)) => Some(n.max(s).to_string()),
        (Some(n), None) => Some(n.to_string()),
        (None, _) => watermark.clone(),
    };
    Ok(DbBatch { parsed, watermark })
}

/// Opens a database strictly read-only, never creating it.
fn open_read_only(path: &Path) -> Result<Connection, SourceError> {
    if !path.is_file() {
        return Err(SourceError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "database not found"),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|source| SourceError::Sqlite {
        path: path.to_path_buf(),
        source,
    })?;
    conn.busy_timeout(Duration::from_secs(2))
        .map_err(|source| SourceError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(conn)
}

fn table_names(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

fn column_names(conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
    // `table` is one of our own constant names, never input.
    let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(1))?;
    rows.collect()
}

/// The SQL expression for the first of `candidates` the table has, else `NULL`.
fn col_or_null(cols: &HashSet<String>, candidates: &[&'static str]) -> &'static str {
    candidates
        .iter()
        .copied()
        .find(|c| cols.contains(*c))
        .unwrap_or("NULL")
}

/// A SQL value as text (TEXT or BLOB), if it is UTF-8.
fn value_text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    }
}

/// A SQL timestamp in any shape (integer s/ms, ISO text) as Unix ms.
fn value_time(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => super::common::epoch_to_ms(i),
        ValueRef::Real(f) => super::common::epoch_to_ms(f as i64),
        ValueRef::Text(b) | ValueRef::Blob(b) => {
            std::str::from_utf8(b).ok().and_then(parse_time_str)
        }
        ValueRef::Null => None,
    }
}

fn decode_json(bytes: &[u8], rowid: i64) -> Result<Value, ParseError> {
    serde_json::from_slice(bytes).map_err(|source| ParseError::Json {
        offset: row_offset(rowid),
        source,
    })
}

fn row_offset(rowid: i64) -> u64 {
    u64::try_from(rowid).unwrap_or(0)
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

// ---------------------------------------------------------------------------
// (a) current opencode: session / message / part
// ---------------------------------------------------------------------------

struct SessionInfo {
    directory: Option<String>,
    parent: Option<String>,
}

/// Sessions changed since `since` whose turns are only in the
/// `session_message` table and not in `message`. Releases to date (1.18.33
/// recorded) create that table for a session runner still in the making
/// and leave it empty, writing every turn to `message`/`part`; its rows'
/// `data` shape is not settled, so it is not read, but a session kept
/// only there is counted as skipped, never silently missing.
fn v2_only_sessions(conn: &Connection, since: Option<i64>) -> rusqlite::Result<usize> {
    let n: i64 = conn.query_row(
        "SELECT count(DISTINCT sm.session_id) FROM session_message sm
         WHERE sm.time_updated > ?1
           AND NOT EXISTS (SELECT 1 FROM message m WHERE m.session_id = sm.session_id)",
        [since.unwrap_or(i64::MIN)],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as usize)
}

fn read_current(conn: &Connection, since: Option<i64>) -> rusqlite::Result<(Parsed, Option<i64>)> {
    let s_cols = column_names(conn, "session")?;
    let m_cols = column_names(conn, "message")?;
    let p_cols = column_names(conn, "part")?;
    let s_time = col_or_null(&s_cols, &["time_updated", "time_created"]);
    let m_time = col_or_null(&m_cols, &["time_updated", "time_created"]);
    let p_time = col_or_null(&p_cols, &["time_updated", "time_created"]);

    // Which sessions changed, and the newest change seen.
    let mut changed: HashMap<String, ()> = HashMap::new();
    let mut newest: Option<i64> = None;
    let mut note = |sid: Option<String>, t: Option<i64>| {
        if let Some(t) = t {
            newest = Some(newest.map_or(t, |n| n.max(t)));
        }
        let fresh = match (since, t) {
            (None, _) => true,
            (Some(s), Some(t)) => t > s,
            (Some(_), None) => false,
        };
        if let Some(sid) = sid.filter(|_| fresh) {
            changed.insert(sid, ());
        }
    };
    for (table, sid_col, time_col) in [("session", "id", s_time), ("message", "session_id", m_time)]
    {
        let mut stmt = conn.prepare(&format!("SELECT {sid_col}, {time_col} FROM {table}"))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            note(value_text(r.get_ref(0)?), value_time(r.get_ref(1)?));
        }
    }
    if p_cols.contains("session_id") {
        let mut stmt = conn.prepare(&format!("SELECT session_id, {p_time} FROM part"))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            note(value_text(r.get_ref(0)?), value_time(r.get_ref(1)?));
        }
    }

    // Session metadata.
    let mut infos: HashMap<String, SessionInfo> = HashMap::new();
    {
        let dir = col_or_null(&s_cols, &["directory"]);
        let parent = col_or_null(&s_cols, &["parent_id", "parent_session_id"]);
        let mut stmt = conn.prepare(&format!("SELECT id, {dir}, {parent} FROM session"))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            if let Some(id) = value_text(r.get_ref(0)?) {
                let info = SessionInfo {
                    directory: non_empty(value_text(r.get_ref(1)?).as_deref()),
                    parent: non_empty(value_text(r.get_ref(2)?).as_deref()),
                };
                infos.insert(id, info);
            }
        }
    }

    let mut sessions: Vec<String> = changed.into_keys().collect();
    sessions.sort();
    let mut parsed = Parsed::default();
    let m_order = col_or_null(&m_cols, &["time_created"]);
    let p_session_filter = if p_cols.contains("session_id") {
        "session_id = ?1"
    } else {
        "message_id IN (SELECT id FROM message WHERE session_id = ?1)"
    };
    for sid in sessions {
        let info = infos.get(&sid);
        // Parts of the session, grouped by message, in id order (ids are time-sortable).
        let mut parts: HashMap<String, Vec<(i64, Vec<u8>)>> = HashMap::new();
        {
            let mut stmt = conn.prepare(&format!(
                "SELECT rowid, message_id, data FROM part WHERE {p_session_filter} ORDER BY id"
            ))?;
            let mut rows = stmt.query([&sid])?;
            while let Some(r) = rows.next()? {
                let rowid: i64 = r.get(0)?;
                let Some(mid) = value_text(r.get_ref(1)?) else {
                    continue;
                };
                let data = match r.get_ref(2)? {
                    ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
                    _ => Vec::new(),
                };
                parts.entry(mid).or_default().push((rowid, data));
            }
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT rowid, id, data, {m_order} FROM message WHERE session_id = ?1 ORDER BY {m_order}, id"
        ))?;
        let mut rows = stmt.query([&sid])?;
        let mut project = info.and_then(|i| i.directory.clone());
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            let Some(mid) = value_text(r.get_ref(1)?) else {
                parsed.errors.push(ParseError::Shape {
                    offset: row_offset(rowid),
                    what: "message without id",
                });
                continue;
            };
            let msg = match r.get_ref(2)? {
                ValueRef::Text(b) | ValueRef::Blob(b) => decode_json(b, rowid),
                _ => Err(ParseError::Shape {
                    offset: row_offset(rowid),
                    what: "message without data",
                }),
            };
            let msg = match msg {
                Ok(v) => v,
                Err(e) => {
                    parsed.errors.push(e);
                    continue;
                }
            };
            let msg_time = msg
                .pointer("/time/created")
                .and_then(parse_time)
                .or_else(|| r.get_ref(3).ok().and_then(value_time));
            if project.is_none() {
                project = non_empty(msg.pointer("/path/cwd").and_then(Value::as_str));
            }
            let role = msg.get("role").and_then(Value::as_str).unwrap_or("");
            let speech = match role {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                _ => continue, // unknown message kinds are skipped silently
            };
            let base = |role: Role, text: String, time: Option<i64>, offset: i64| Record {
                agent: AGENT.to_owned(),
                session_id: sid.clone(),
                parent_session: info.and_then(|i| i.parent.clone()),
                project: project.clone(),
                role,
                time_ms: time,
                text,
                files: Vec::new(),
                offset: row_offset(offset),
            };
            for (prow, data) in parts.get(&mid).map(Vec::as_slice).unwrap_or(&[]) {
                let part = match decode_json(data, *prow) {
                    Ok(v) => v,
                    Err(e) => {
                        parsed.errors.push(e);
                        continue;
                    }
                };
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "text" => {
                        // Synthetic/ignored text is harness-injected context.
                        let injected = part.get("synthetic").and_then(Value::as_bool) == Some(true)
                            || part.get("ignored").and_then(Value::as_bool) == Some(true);
                        let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                        if injected || text.trim().is_empty() {
                            continue;
                        }
                        let time = part
                            .pointer("/time/start")
                            .and_then(parse_time)
                            .or(msg_time);
                        parsed
                            .records
                            .push(base(speech, cap_text(text, TEXT_CAP), time, *prow));
                    }
                    "tool" => {
                        let name = part.get("tool").and_then(Value::as_str).unwrap_or("tool");
                        let state = part.get("state").unwrap_or(&Value::Null);
                        let input = state.get("input").unwrap_or(&Value::Null);
                        let start = state
                            .pointer("/time/start")
                            .and_then(parse_time)
                            .or(msg_time);
                        let (text, files) = tool_call_text(name, input);
                        if !text.trim().is_empty() {
                            let mut rec = base(Role::ToolCall, text, start, *prow);
                            rec.files = files;
                            parsed.records.push(rec);
                        }
                        let output = match state.get("status").and_then(Value::as_str) {
                            Some("error") => state.get("error"),
                            _ => state.get("output"),
                        };
                        let output = output.map(value_as_text).unwrap_or_default();
                        if !output.trim().is_empty() {
                            let end = state.pointer("/time/end").and_then(parse_time).or(start);
                            parsed.records.push(base(
                                Role::ToolOutput,
                                cap_text(&output, TOOL_OUTPUT_CAP),
                                end,
                                *prow,
                            ));
                        }
                    }
                    // reasoning, step-start, step-finish, snapshot, patch, file,
                    // agent, compaction, and anything newer: not indexed.
                    _ => {}
                }
            }
        }
    }
    Ok((parsed, newest))
}

// ---------------------------------------------------------------------------
// (b) legacy Go opencode / Crush: sessions / messages(parts JSON)
// ---------------------------------------------------------------------------

/// The project root of a project-local `<root>/.opencode/opencode.db`
/// (or `<root>/.crush/crush.db`).
fn legacy_project(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let name = dir.file_name()?.to_str()?;
    if name != ".opencode" && name != ".crush" {
        return None;
    }
    let root: PathBuf = dir.parent()?.to_path_buf();
    root.to_str().map(str::to_owned)
}

struct LegacyRow {
    rowid: i64,
    session: String,
    role: String,
    parts: Option<Vec<u8>>,
    created: Option<i64>,
}

fn read_legacy(
    conn: &Connection,
    since: Option<i64>,
    project: Option<String>,
) -> rusqlite::Result<(Parsed, Option<i64>)> {
    let s_cols = column_names(conn, "sessions")?;
    let m_cols = column_names(conn, "messages")?;
    let mut parents: HashMap<String, String> = HashMap::new();
    if s_cols.contains("parent_session_id") {
        let mut stmt = conn.prepare("SELECT id, parent_session_id FROM sessions")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            if let (Some(id), Some(p)) = (value_text(r.get_ref(0)?), value_text(r.get_ref(1)?))
                && !p.is_empty()
            {
                parents.insert(id, p);
            }
        }
    }
    let created = col_or_null(&m_cols, &["created_at"]);
    let updated = col_or_null(&m_cols, &["updated_at", "finished_at", "created_at"]);
    let role_col = col_or_null(&m_cols, &["role"]);
    let parts_col = col_or_null(&m_cols, &["parts"]);
    let mut stmt = conn.prepare(&format!(
        "SELECT rowid, session_id, {role_col}, {parts_col}, {created}, {updated} FROM messages"
    ))?;
    let mut rows = stmt.query([])?;
    let mut all: Vec<LegacyRow> = Vec::new();
    let mut changed: HashSet<String> = HashSet::new();
    let mut newest: Option<i64> = None;
    while let Some(r) = rows.next()? {
        let rowid: i64 = r.get(0)?;
        let Some(session) = value_text(r.get_ref(1)?) else {
            continue;
        };
        let created = value_time(r.get_ref(4)?);
        let touched = value_time(r.get_ref(5)?).or(created);
        if let Some(t) = touched {
            newest = Some(newest.map_or(t, |n| n.max(t)));
        }
        if match (since, touched) {
            (None, _) => true,
            (Some(s), Some(t)) => t > s,
            (Some(_), None) => false,
        } {
            changed.insert(session.clone());
        }
        let parts = match r.get_ref(3)? {
            ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
            _ => None,
        };
        all.push(LegacyRow {
            rowid,
            session,
            role: value_text(r.get_ref(2)?).unwrap_or_default(),
            parts,
            created,
        });
    }
    all.retain(|m| changed.contains(&m.session));
    all.sort_by(|a, b| (&a.session, a.created, a.rowid).cmp(&(&b.session, b.created, b.rowid)));

    let mut parsed = Parsed::default();
    for m in &all {
        let Some(bytes) = &m.parts else {
            parsed.errors.push(ParseError::Shape {
                offset: row_offset(m.rowid),
                what: "message without parts",
            });
            continue;
        };
        let parts = match decode_json(bytes, m.rowid) {
            Ok(Value::Array(a)) => a,
            Ok(_) => {
                parsed.errors.push(ParseError::Shape {
                    offset: row_offset(m.rowid),
                    what: "parts is not an array",
                });
                continue;
            }
            Err(e) => {
                parsed.errors.push(e);
                continue;
            }
        };
        let speech = match m.role.as_str() {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        };
        let rec = |role: Role, text: String, files: Vec<String>| Record {
            agent: AGENT.to_owned(),
            session_id: m.session.clone(),
            parent_session: parents.get(&m.session).cloned(),
            project: project.clone(),
            role,
            time_ms: m.created,
            text,
            files,
            offset: row_offset(m.rowid),
        };
        for part in &parts {
            let data = part.get("data").unwrap_or(&Value::Null);
            match part.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => {
                    let text = data.get("text").and_then(Value::as_str).unwrap_or("");
                    if let Some(role) = speech
                        && !text.trim().is_empty()
                    {
                        parsed
                            .records
                            .push(rec(role, cap_text(text, TEXT_CAP), Vec::new()));
                    }
                }
                "tool_call" => {
                    let name = data.get("name").and_then(Value::as_str).unwrap_or("tool");
                    // `input` is a JSON document stored as a string.
                    let input = match data.get("input") {
                        Some(Value::String(s)) => {
                            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                        }
                        Some(v) => v.clone(),
                        None => Value::Null,
                    };
                    let (text, files) = tool_call_text(name, &input);
                    if !text.trim().is_empty() {
                        parsed.records.push(rec(Role::ToolCall, text, files));
                    }
                }
                "tool_result" => {
                    let out = data.get("content").map(value_as_text).unwrap_or_default();
                    if !out.trim().is_empty() {
                        parsed.records.push(rec(
                            Role::ToolOutput,
                            cap_text(&out, TOOL_OUTPUT_CAP),
                            Vec::new(),
                        ));
                    }
                }
                "shell_command" => {
                    // Crush's bang mode: the user ran `command` in the TUI
                    // (charmbracelet/crush internal/message content.go and
                    // message.go at 37f36e93824e: ShellCommand{command,
                    // output, exit_code}, part type "shell_command").
                    let command = data.get("command").and_then(Value::as_str).unwrap_or("");
                    if !command.trim().is_empty() {
                        let (text, files) =
                            tool_call_text("bash", &serde_json::json!({ "command": command }));
                        parsed.records.push(rec(Role::ToolCall, text, files));
                    }
                    let output = data.get("output").and_then(Value::as_str).unwrap_or("");
                    let code = data.get("exit_code").and_then(Value::as_i64).unwrap_or(0);
                    let output = match code {
                        0 => output.to_owned(),
                        c => format!("[exit {c}] {output}"),
                    };
                    if !output.trim().is_empty() {
                        parsed.records.push(rec(
                            Role::ToolOutput,
                            cap_text(&output, TOOL_OUTPUT_CAP),
                            Vec::new(),
                        ));
                    }
                }
                // finish, reasoning, binary, image_url, unknown: skipped.
                _ => {}
            }
        }
    }
    Ok((parsed, newest))
}

// ---------------------------------------------------------------------------
// Tool calls
// ---------------------------------------------------------------------------

/// A JSON value as text: strings as they are, anything else compact JSON.
fn value_as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A compact line for a tool call (`Bash: cargo test`, `Edit src/lib.rs` plus
/// the new text), and the files it touched.
fn tool_call_text(name: &str, input: &Value) -> (String, Vec<String>) {
    let title = capitalized(name);
    let field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .filter(|s| !s.trim().is_empty())
    };
    let file = field(&["filePath", "file_path", "path"]);
    let files: Vec<String> = file.map(|f| vec![f.to_owned()]).unwrap_or_default();
    let mut text = if let Some(cmd) = field(&["command", "cmd"]) {
        format!("{title}: {cmd}")
    } else if let Some(f) = file {
        match field(&["pattern", "query"]) {
            Some(p) => format!("{title} {f}: {p}"),
            None => format!("{title} {f}"),
        }
    } else if let Some(p) = field(&["pattern", "query", "url", "prompt", "description"]) {
        format!("{title}: {p}")
    } else {
        match input {
            Value::Null => title.clone(),
            Value::Object(o) if o.is_empty() => title.clone(),
            Value::String(s) => format!("{title}: {s}"),
            other => format!("{title}: {other}"),
        }
    };
    if let Some(body) = field(&[
        "newString",
        "new_string",
        "content",
        "patchText",
        "patch_text",
    ]) {
        text.push('\n');
        text.push_str(body);
    }
    (cap_text(&text, TEXT_CAP), files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures")).join(rel)
    }

    fn read_all(path: &Path) -> DbBatch {
        read_db(path, &None).expect("read db")
    }

    const CURRENT_DB: &str = "home/.local/share/opencode/opencode.db";
    const LEGACY_DB: &str = "home/dev/ledger/.opencode/opencode.db";

    #[test]
    fn current_schema_fixture() {
        let batch = read_all(&fixture(CURRENT_DB));
        let recs = &batch.parsed.records;
        // One message row has torn JSON: counted once, its orphan part is never read.
        assert_eq!(batch.parsed.errors.len(), 1, "{:?}", batch.parsed.errors);
        assert!(matches!(batch.parsed.errors[0], ParseError::Json { .. }));
        assert_eq!(batch.watermark.as_deref(), Some("1761935800000"));
        let summary: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(summary.len(), 11, "{summary:#?}");
        for r in recs {
            assert_eq!(r.agent, "opencode");
            assert_eq!(r.session_id, "ses_5a1f0c2e8ffeQm3kZr7TyUcW1x");
            assert_eq!(r.project.as_deref(), Some("/home/dev/acme-api"));
            assert!(!r.text.contains("chain of thought"));
            assert!(!r.text.contains("Called the Read tool"));
            assert!(!r.text.contains("orphan part"));
        }
        assert_eq!(recs[0].role, Role::User);
        assert!(recs[0].text.contains("API_KEY=OV4qBkdfQ1y3GQsMpSscDlkr"));
        assert_eq!(recs[0].time_ms, Some(1_761_935_776_000));
        assert_eq!(recs[1].role, Role::ToolCall);
        assert_eq!(recs[1].text, "Read /home/dev/acme-api/src/config.rs");
        assert_eq!(recs[1].files, vec!["/home/dev/acme-api/src/config.rs"]);
        assert_eq!(recs[1].time_ms, Some(1_761_935_781_000));
        assert_eq!(recs[2].role, Role::ToolOutput);
        assert!(recs[2].text.contains("serde_env::from_env"));
        assert_eq!(recs[3].text, "Bash: cat .npmrc");
        assert!(recs[3].files.is_empty());
        assert!(
            recs[4]
                .text
                .contains("npm_IZEG8pSH4487q7J58m1CiAhzCueQpBenQtYh")
        );
        assert!(
            recs[5]
                .text
                .starts_with("Edit /home/dev/acme-api/src/config.rs\nFigment::new()")
        );
        assert_eq!(recs[5].files, vec!["/home/dev/acme-api/src/config.rs"]);
        assert_eq!(recs[6].text, "Edit applied successfully.");
        assert_eq!(recs[7].text, "Bash: cargo test -p acme-config");
        assert_eq!(recs[8].role, Role::ToolOutput);
        assert!(recs[8].text.contains("undeclared crate `figment`"));
        assert_eq!(recs[8].time_ms, Some(1_761_935_785_000));
        assert_eq!(recs[9].role, Role::Assistant);
        assert!(recs[9].text.contains(
            "we moved the config loader to figment because serde-env mangled nested keys"
        ));
        assert!(recs[9].text.contains("配置加载器改用 figment"));
        // ISO string time in the message JSON; the text part has no own time.
        assert_eq!(recs[9].time_ms, Some(1_761_935_780_000));
        assert_eq!(recs[10].role, Role::User);
        assert_eq!(
            recs[10].text,
            "Add figment to Cargo.toml and rerun the tests."
        );
        // Unix seconds in the message JSON.
        assert_eq!(recs[10].time_ms, Some(1_761_935_790_000));
        assert!(recs.iter().all(|r| r.offset > 0));
    }

    #[test]
    fn current_schema_watermark_skips_unchanged() {
        let path = fixture(CURRENT_DB);
        let first = read_all(&path);
        let again = read_db(&path, &first.watermark).expect("read");
        assert!(again.parsed.records.is_empty());
        assert!(again.parsed.errors.is_empty());
        assert_eq!(again.watermark, first.watermark);
        // A watermark just before the last user turn re-emits the whole session.
        let partial = read_db(&path, &Some("1761935789000".into())).expect("read");
        assert_eq!(partial.parsed.records.len(), first.parsed.records.len());
        // A garbage watermark means "from the start".
        let junk = read_db(&path, &Some("not a number".into())).expect("read");
        assert_eq!(junk.parsed.records.len(), first.parsed.records.len());
    }

    #[test]
    fn legacy_schema_fixture() {
        let path = fixture(LEGACY_DB);
        let batch = read_all(&path);
        // The sub-agent session's only message has undecodable parts.
        assert_eq!(batch.parsed.errors.len(), 1, "{:?}", batch.parsed.errors);
        let recs = &batch.parsed.records;
        let want_project = fixture("home/dev/ledger");
        let want_project = want_project.to_str().unwrap();
        let summary: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(summary.len(), 5, "{summary:#?}");
        for r in recs {
            assert_eq!(r.session_id, "3d0c9a52-7b1e-4f0a-9c39-5e2a8d6f1b47");
            assert_eq!(r.project.as_deref(), Some(want_project));
            assert_eq!(r.parent_session, None);
            assert!(!r.text.contains("hidden"));
        }
        assert_eq!(recs[0].role, Role::User);
        assert!(
            recs[0]
                .text
                .starts_with("Почему итоги в отчёте расходятся на копейку?")
        );
        assert_eq!(recs[0].time_ms, Some(1_751_116_165_000));
        assert_eq!(recs[1].role, Role::Assistant);
        assert_eq!(recs[2].role, Role::ToolCall);
        assert_eq!(recs[2].text, "View /home/dev/ledger/src/money.go");
        assert_eq!(recs[2].files, vec!["/home/dev/ledger/src/money.go"]);
        assert_eq!(recs[3].role, Role::ToolOutput);
        assert!(recs[3].text.contains("math.Round"));
        assert!(recs[4].text.contains(
            "ledger amounts are stored as integer cents because float64 rounding lost a cent per month"
        ));
        assert_eq!(batch.watermark.as_deref(), Some("1751116200000"));
        let again = read_db(&path, &batch.watermark).expect("read");
        assert!(again.parsed.records.is_empty());
    }

    /// The committed .db fixtures are generated from the committed .sql scripts:
    /// rebuilding them must parse identically.
    #[test]
    fn fixtures_match_their_sql() {
        let dir = tempfile::tempdir().unwrap();
        for (sql, db, rel_dir) in [
            ("sql/opencode.sql", CURRENT_DB, "x"),
            ("sql/opencode-legacy.sql", LEGACY_DB, "ledger/.opencode"),
        ] {
            let script = std::fs::read_to_string(fixture(sql)).unwrap();
            let out_dir = dir.path().join(rel_dir);
            std::fs::create_dir_all(&out_dir).unwrap();
            let out = out_dir.join("opencode.db");
            Connection::open(&out)
                .unwrap()
                .execute_batch(&script)
                .unwrap();
            let a = read_all(&fixture(db));
            let b = read_all(&out);
            let strip = |rs: &[Record]| {
                rs.iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r.project = None;
                        r
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(&a.parsed.records), strip(&b.parsed.records), "{sql}");
            assert_eq!(a.parsed.errors.len(), b.parsed.errors.len());
            assert_eq!(a.watermark, b.watermark);
        }
    }

    /// Crush's bang-mode `shell_command` parts: the command as a tool call,
    /// its output (with a failing exit code) as tool output.
    #[test]
    fn crush_shell_command_parts_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let crush = dir.path().join("app/.crush");
        std::fs::create_dir_all(&crush).unwrap();
        let db = crush.join("crush.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE sessions(id TEXT, parent_session_id TEXT);
             CREATE TABLE messages(id TEXT, session_id TEXT, role TEXT, parts TEXT,
                                   created_at INTEGER, updated_at INTEGER);
             INSERT INTO sessions VALUES ('s1', NULL);",
        )
        .unwrap();
        let parts = serde_json::json!([
            {"type": "text", "data": {"text": "why is the build red?"}},
            {"type": "shell_command", "data": {"command": "cargo nextest run", "output": "error: no such command: nextest", "exit_code": 101}},
            {"type": "shell_command", "data": {"command": "git status --short", "output": " M src/lib.rs", "exit_code": 0}},
            {"type": "finish", "data": {"reason": "stop", "time": 1761935776}}
        ]);
        conn.execute(
            "INSERT INTO messages VALUES ('m1', 's1', 'user', ?1, 1761935776, 1761935776)",
            [parts.to_string()],
        )
        .unwrap();
        drop(conn);
        let b = read_db(&db, &None).unwrap();
        assert!(b.parsed.errors.is_empty(), "{:?}", b.parsed.errors);
        let got: Vec<(Role, &str)> = b
            .parsed
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Role::User, "why is the build red?"),
                (Role::ToolCall, "Bash: cargo nextest run"),
                (
                    Role::ToolOutput,
                    "[exit 101] error: no such command: nextest"
                ),
                (Role::ToolCall, "Bash: git status --short"),
                (Role::ToolOutput, " M src/lib.rs"),
            ]
        );
        assert!(b.parsed.records.iter().all(|r| r.session_id == "s1"));
    }

    /// A session whose turns are only in `session_message` is counted as
    /// skipped, once per pass that sees it change; the recorded 1.18.33
    /// database (table present, empty) reads with no such count.
    #[test]
    fn sessions_only_in_session_message_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE session(id TEXT, directory TEXT, time_updated INTEGER);
             CREATE TABLE message(id TEXT, session_id TEXT, time_created INTEGER, data BLOB);
             CREATE TABLE part(id TEXT, message_id TEXT, session_id TEXT, data BLOB);
             CREATE TABLE session_message(id TEXT, session_id TEXT, type TEXT, seq INTEGER,
                                          time_created INTEGER, time_updated INTEGER, data TEXT);
             INSERT INTO session VALUES ('s1', '/w', 1000), ('s2', '/w', 1000);
             INSERT INTO message VALUES ('m1', 's1', 1000, '{\"role\":\"user\"}');
             INSERT INTO part VALUES ('p1', 'm1', 's1', '{\"type\":\"text\",\"text\":\"hi\"}');
             INSERT INTO session_message VALUES ('x1', 's2', 'user', 1, 2000, 2000, '{}'),
                                                ('x2', 's2', 'assistant', 2, 2001, 2001, '{}'),
                                                ('x3', 's1', 'user', 1, 2000, 2000, '{}');",
        )
        .unwrap();
        drop(conn);
        let b = read_db(&db, &None).unwrap();
        assert_eq!(b.parsed.errors.len(), 1, "{:?}", b.parsed.errors);
        assert!(b.parsed.records.iter().any(|r| r.text == "hi"));
        let again = read_db(&db, &Some("5000".into())).unwrap();
        assert!(again.parsed.errors.is_empty(), "{:?}", again.parsed.errors);
        let real = std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/real-histories/recorded/opencode-1.18.33/.local/share/opencode/opencode.db"
        ));
        if !real.is_file() {
            eprintln!(
                "SKIPPED the recorded opencode 1.18.33 part: {} absent",
                real.display()
            );
            return;
        }
        let b = read_db(real, &None).unwrap();
        assert!(b.parsed.errors.is_empty(), "{:?}", b.parsed.errors);
        assert!(!b.parsed.records.is_empty());
    }

    #[test]
    fn missing_and_foreign_databases() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("opencode.db");
        assert!(matches!(
            read_db(&missing, &None),
            Err(SourceError::Io { .. })
        ));
        assert!(!missing.exists(), "reading must never create the database");
        let foreign = dir.path().join("foreign.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        // A schema of other tables is reported, never read as nothing.
        match read_db(&foreign, &Some("5".into())) {
            Err(SourceError::NotUnderstood { what, .. }) => {
                assert!(what.contains("its tables: t"), "{what}")
            }
            other => panic!("{other:?}"),
        }
        // One the agent has not migrated yet (no table) is just empty.
        let fresh = dir.path().join("fresh.db");
        Connection::open(&fresh)
            .unwrap()
            .execute_batch("PRAGMA user_version = 0;")
            .unwrap();
        std::fs::write(&fresh, b"").unwrap();
        let b = read_db(&fresh, &Some("5".into())).unwrap();
        assert!(b.parsed.records.is_empty());
        assert_eq!(b.watermark.as_deref(), Some("5"));
        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, b"this is not a database at all, just bytes").unwrap();
        assert!(matches!(
            read_db(&garbage, &None),
            Err(SourceError::Sqlite { .. })
        ));
    }

    #[test]
    fn discovery() {
        let home = fixture("home");
        let mut loc = Locations::under_home(&home);
        loc.aider_roots = vec![home.join("dev/ledger"), home.join("dev/nowhere")];
        let found = OpenCode.discover(&loc);
        let paths: Vec<_> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(paths, vec![fixture(CURRENT_DB), fixture(LEGACY_DB)]);
        assert!(
            found
                .iter()
                .all(|f| matches!(f.reader, Reader::Database(_)))
        );
        let empty = Locations::under_home(Path::new("/nonexistent/cairn-home"));
        assert!(OpenCode.discover(&empty).is_empty());
    }

    #[test]
    fn tool_call_lines() {
        let (t, f) = tool_call_text("bash", &serde_json::json!({"command": "cargo test -p foo"}));
        assert_eq!((t.as_str(), f.len()), ("Bash: cargo test -p foo", 0));
        let (t, f) = tool_call_text(
            "write",
            &serde_json::json!({"filePath": "src/lib.rs", "content": "fn x() {}"}),
        );
        assert_eq!(t, "Write src/lib.rs\nfn x() {}");
        assert_eq!(f, vec!["src/lib.rs"]);
        let (t, _) = tool_call_text("glob", &serde_json::json!({"pattern": "**/*.ts"}));
        assert_eq!(t, "Glob: **/*.ts");
        let (t, _) = tool_call_text("todoread", &serde_json::json!({}));
        assert_eq!(t, "Todoread");
    }

    #[test]
    fn real_histories() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/real-histories");
        if !Path::new(root).is_dir() {
            eprintln!("skipping: {root} not found");
            return;
        }
        // (file, a message known to be in it)
        let cases = [
            (
                "opencode/go-opencode-legacy/kashifkhan0771-utils.opencode.db",
                "conversion",
            ),
            (
                "opencode/go-opencode-legacy/navicore-flag-rs.opencode.db",
                "Please analyze this codebase and create a OpenCode.md file",
            ),
            (
                "opencode/go-opencode-legacy/tuist-Noora.opencode.db",
                "We're moving our CLI design system to a monorepo",
            ),
            ("crush/dbos-transact-golang/crush.db", "CRUSH.md"),
        ];
        for (rel, known) in cases {
            let path = Path::new(root).join(rel);
            let batch = read_db(&path, &None).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let recs = &batch.parsed.records;
            assert!(!recs.is_empty(), "{rel}: no records");
            assert!(
                batch.parsed.errors.is_empty(),
                "{rel}: {:?}",
                batch.parsed.errors
            );
            assert!(
                recs.iter()
                    .all(|r| !r.session_id.is_empty() && !r.text.is_empty())
            );
            assert!(
                recs.iter().any(|r| r.text.contains(known)),
                "{rel}: {known:?} not found"
            );
            assert!(
                recs.iter()
                    .any(|r| r.role == Role::ToolCall && !r.files.is_empty())
            );
            assert!(recs.iter().any(|r| r.role == Role::ToolOutput));
            assert!(
                recs.iter().all(|r| r.time_ms.is_some()),
                "{rel}: missing times"
            );
            assert!(batch.watermark.is_some());
            // Nothing new since the watermark.
            let again = read_db(&path, &batch.watermark).unwrap();
            assert!(again.parsed.records.is_empty(), "{rel}");
        }
        // Sub-agent sessions carry their parent.
        let flag = read_db(
            &Path::new(root).join("opencode/go-opencode-legacy/navicore-flag-rs.opencode.db"),
            &None,
        )
        .unwrap();
        assert!(flag.parsed.records.iter().any(|r| {
            r.session_id.starts_with("toolu_")
                && r.parent_session.as_deref() == Some("411b21fc-ba1e-46e7-9bb4-c313dee34321")
        }));
        // The export-format JSON files are not a store this reader reads; they
        // only document the message/part JSON shapes used in the fixture.
    }

    proptest! {
        // No-panic property: any bytes in a message's or part's `data`
        // column (or in a legacy `parts` column) are read without panicking;
        // this test asserts nothing but that.
        #[test]
        fn arbitrary_row_json_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200),
                                           text in ".{0,80}") {
            let dir = tempfile::tempdir().unwrap();
            let cur = dir.path().join("cur.db");
            let conn = Connection::open(&cur).unwrap();
            conn.execute_batch(
                "CREATE TABLE session(id TEXT, directory TEXT, time_updated INTEGER);
                 CREATE TABLE message(id TEXT, session_id TEXT, time_created INTEGER, data BLOB);
                 CREATE TABLE part(id TEXT, message_id TEXT, session_id TEXT, data BLOB);
                 INSERT INTO session VALUES ('s', NULL, 1761935776000);",
            ).unwrap();
            let msg = format!("{{\"role\":\"assistant\",\"time\":{{\"created\":{}}}}}", text.len());
            conn.execute("INSERT INTO message VALUES ('m', 's', 1, ?1)", [&msg]).unwrap();
            conn.execute("INSERT INTO message VALUES ('m2', 's', 2, ?1)", [&data]).unwrap();
            let part = serde_json::json!({"type": "tool", "tool": text, "state": {"input": text, "output": text}}).to_string();
            conn.execute("INSERT INTO part VALUES ('p1', 'm', 's', ?1)", [&part]).unwrap();
            conn.execute("INSERT INTO part VALUES ('p2', 'm', 's', ?1)", [&data]).unwrap();
            drop(conn);
            let _ = read_db(&cur, &None);

            let leg_dir = dir.path().join(".opencode");
            std::fs::create_dir_all(&leg_dir).unwrap();
            let leg = leg_dir.join("opencode.db");
            let conn = Connection::open(&leg).unwrap();
            conn.execute_batch(
                "CREATE TABLE sessions(id TEXT);
                 CREATE TABLE messages(id TEXT, session_id TEXT, role TEXT, parts BLOB, created_at TEXT);",
            ).unwrap();
            conn.execute("INSERT INTO messages VALUES ('a', 's', 'assistant', ?1, ?2)", (&data, &text)).unwrap();
            let parts = serde_json::json!([{"type": "tool_call", "data": {"name": text, "input": text}},
                                           {"type": "text", "data": text}]).to_string();
            conn.execute("INSERT INTO messages VALUES ('b', 's', 'user', ?1, '2025-01-01')", [&parts]).unwrap();
            drop(conn);
            let _ = read_db(&leg, &None);
        }
    }

    #[test]
    fn channel_databases_and_opencode_db_are_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let data = home.join(".local/share/opencode");
        std::fs::create_dir_all(&data).expect("mkdir");
        for f in [
            "opencode.db",
            "opencode.db-wal",
            "opencode-dev.db",
            "opencode-dev.db-shm",
            "other.db",
        ] {
            std::fs::write(data.join(f), b"").expect("write");
        }
        let elsewhere = home.join("mine.db");
        std::fs::write(&elsewhere, b"").expect("write");
        let mut loc = Locations::under_home(home);
        let paths = |loc: &Locations| -> Vec<PathBuf> {
            OpenCode.discover(loc).into_iter().map(|f| f.path).collect()
        };
        assert_eq!(
            paths(&loc),
            [data.join("opencode-dev.db"), data.join("opencode.db")]
        );
        loc.vars.insert("OPENCODE_DB".into(), elsewhere.clone());
        assert_eq!(paths(&loc).last(), Some(&elsewhere));
        loc.vars
            .insert("OPENCODE_DB".into(), PathBuf::from(":memory:"));
        assert_eq!(paths(&loc).len(), 2);
    }
}
