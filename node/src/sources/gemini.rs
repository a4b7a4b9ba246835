//! Gemini CLI: `~/.gemini/tmp/<project>/chats/*.json` and `*.jsonl`.
//!
//! Two generations share the folder:
//!
//! - `*.json`: one JSON document (`sessionId`, `startTime`, `messages[]`)
//!   rewritten in place on every update.
//! - `*.jsonl`: a replayable log. A header line (`sessionId`, `projectHash`,
//!   ...), message lines where the same message `id` can appear several
//!   times (the **last** occurrence wins), `{"$set": {...}}` metadata patches
//!   and `{"$rewindTo": "<id>"}`, which drops that message and everything
//!   after it (everything when the id is unknown). Because of last-wins and
//!   rewinds, both are read with [`Reader::Whole`] and re-parsed when they
//!   change.
//!
//! From the CLI's own reader (google-gemini/gemini-cli
//! `packages/core/src/services/chatRecordingService.ts` and
//! `context/chatCompressionService.ts` at 5411f113cafa):
//!
//! - `{"$set": {"messages": [...]}}` is a checkpoint of the whole history
//!   (written after masking or compression). The CLI rebuilds from it;
//!   cairn, a memory, updates the messages it names in place and keeps the
//!   ones it no longer names (compressed out of the model's context, but
//!   said). A message new in a checkpoint goes before the next one it
//!   already knew.
//! - Compression puts a summary turn (`role: user`, the model's own
//!   `<state_snapshot>`) and a canned model reply ("Got it. Thanks for the
//!   additional context!") first: the summary is indexed as the assistant's
//!   words, prefixed `[compression summary]`, the reply is dropped.
//! - A subagent's log is `chats/<parent session id>/<session id>.jsonl`
//!   with `kind: "subagent"` in its header: its records name the parent.
//!
//! The files carry no working directory. The project is taken from a
//! `.project_root` file in the `<project>` folder, else from
//! `~/.gemini/projects.json` (path → slug), else left empty.
//!
//! Offsets: for `.jsonl` files the byte offset of the line holding the
//! winning copy of the message; for `.json` documents (which have no lines)
//! the message's index in `messages[]`.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::common::{TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, has_suffix, parse_time, walk_files};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "gemini";

/// The Gemini CLI source.
pub struct Gemini;

impl Source for Gemini {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// Per project beside `chats/`: the prompt log, shell history and
    /// checkpoints; `bin/` holds the CLI's own ripgrep.
    fn not_history(&self) -> &'static [&'static str] {
        &["bin", "logs.json", "shell_history", "checkpoints"]
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![loc.gemini_home.join(".gemini/tmp")]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["GEMINI_CLI_HOME"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let root = loc.gemini_home.join(".gemini/tmp");
        let files = walk_files(&root, 5, &|p| {
            (has_suffix(p, ".json") || has_suffix(p, ".jsonl")) && under_chats(&root, p)
        });
        // A legacy `.json` session resumed by a newer CLI is rewritten as
        // `.jsonl`; index only the `.jsonl` copy.
        let mut jsonl_ids = HashSet::new();
        let mut jsonl_stems = HashSet::new();
        for f in files.iter().filter(|f| has_suffix(f, ".jsonl")) {
            jsonl_stems.insert(f.with_extension(""));
            if let Some(id) = sniff_session_id(f) {
                jsonl_ids.insert(id);
            }
        }
        files
            .into_iter()
            .filter(|f| {
                if has_suffix(f, ".jsonl") {
                    return true;
                }
                if jsonl_stems.contains(&f.with_extension("")) {
                    return false;
                }
                !sniff_session_id(f).is_some_and(|id| jsonl_ids.contains(&id))
            })
            .map(|path| SourceFile::new(path, Reader::Whole(parse)))
            .collect()
    }
}

/// True when `p` lies in a `chats` folder somewhere below `root`.
fn under_chats(root: &Path, p: &Path) -> bool {
    p.strip_prefix(root).is_ok_and(|rel| {
        rel.parent()
            .is_some_and(|d| d.components().any(|c| c.as_os_str() == "chats"))
    })
}

/// Reads the `sessionId` from the first few KB of a session file (it is the
/// first key of both the JSON document and the JSONL header).
fn sniff_session_id(path: &Path) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    let mut f = std::fs::File::open(path).ok()?;
    let n = f.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    let at = head.find("\"sessionId\"")? + "\"sessionId\"".len();
    let rest = head[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let id = &rest[..end];
    (!id.is_empty()).then(|| id.to_owned())
}

/// Parses one Gemini session file (`.json` document or `.jsonl` log).
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let project = project_for(path);
    let (session, mut out) = if has_suffix(path, ".jsonl") {
        parse_jsonl(bytes)
    } else {
        parse_json(bytes)
    };
    let Some((session, messages, subagent)) = session else {
        return out;
    };
    let fallback = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let session_id = session.unwrap_or_else(|| fallback.to_owned());
    // A subagent's log lies in a folder named for its parent session.
    let parent = path
        .parent()
        .filter(|d| subagent && d.file_name() != Some("chats".as_ref()))
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    let first = out.records.len();
    for (msg, offset) in messages {
        emit_message(
            &msg,
            offset,
            &session_id,
            project.as_deref(),
            &mut out.records,
        );
    }
    for r in &mut out.records[first..] {
        r.parent_session = parent.clone();
    }
    out
}

/// The session id, its messages with their offsets, and whether it is a subagent's.
type Session = (Option<String>, Vec<(Value, u64)>, bool);

fn parse_json(bytes: &[u8]) -> (Option<Session>, Parsed) {
    let mut out = Parsed::default();
    let doc: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(source) => {
            out.errors.push(ParseError::Json { offset: 0, source });
            return (None, out);
        }
    };
    let Some(obj) = doc.as_object() else {
        out.errors.push(ParseError::Shape {
            offset: 0,
            what: "session document is not an object",
        });
        return (None, out);
    };
    let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
        out.errors.push(ParseError::Shape {
            offset: 0,
            what: "session document without messages",
        });
        return (None, out);
    };
    let session = str_field(obj, "sessionId");
    let subagent = obj.get("kind").and_then(Value::as_str) == Some("subagent");
    let msgs = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.clone(), i as u64))
        .collect();
    (Some((session, msgs, subagent)), out)
}

fn parse_jsonl(bytes: &[u8]) -> (Option<Session>, Parsed) {
    let mut out = Parsed::default();
    let mut session: Option<String> = None;
    let mut subagent = false;
    // Messages in order, with the offset of the line holding the winning copy.
    let mut order: Vec<(Option<String>, Value, u64)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut offset = 0u64;
    let mut rest = bytes;
    while !rest.is_empty() {
        let (line, complete, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], true, &rest[i + 1..]),
            None => (rest, false, &rest[rest.len()..]),
        };
        let line_offset = offset;
        offset += (line.len() + usize::from(complete)) as u64;
        rest = next;
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_slice(trimmed) {
            Ok(v) => v,
            // A torn last line is a write in progress: the file is re-parsed
            // when it changes, so it is neither a record nor an error.
            Err(_) if !complete => continue,
            Err(source) => {
                out.errors.push(ParseError::Json {
                    offset: line_offset,
                    source,
                });
                continue;
            }
        };
        let Some(obj) = v.as_object() else {
            out.errors.push(ParseError::Shape {
                offset: line_offset,
                what: "line is not an object",
            });
            continue;
        };
        if let Some(set) = obj.get("$set") {
            if let Some(id) = set.as_object().and_then(|s| str_field(s, "sessionId")) {
                session = Some(id);
            }
            if let Some(messages) = set.get("messages").and_then(Value::as_array) {
                checkpoint(messages, line_offset, &mut order, &mut index);
            }
            continue;
        }
        if let Some(target) = obj.get("$rewindTo") {
            // To an id never seen (or compressed away before this log was
            // resumed): the CLI clears everything, and so does cairn.
            let pos = target
                .as_str()
                .and_then(|t| index.get(t).copied())
                .unwrap_or(0);
            order.truncate(pos);
            index.retain(|_, i| *i < pos);
            continue;
        }
        if obj.contains_key("type") || obj.contains_key("id") {
            let id = str_field(obj, "id");
            match id.as_ref().and_then(|id| index.get(id).copied()) {
                Some(i) => order[i] = (id, v, line_offset),
                None => {
                    if let Some(id) = &id {
                        index.insert(id.clone(), order.len());
                    }
                    order.push((id, v, line_offset));
                }
            }
            continue;
        }
        if session.is_none() {
            session = str_field(obj, "sessionId");
        }
        if obj.get("kind").and_then(Value::as_str) == Some("subagent") {
            subagent = true;
        }
        // Other bookkeeping lines are skipped silently.
    }
    let msgs = order.into_iter().map(|(_, v, o)| (v, o)).collect();
    (Some((session, msgs, subagent)), out)
}

/// Messages in replay order (id, message, offset of its line).
type Order = Vec<(Option<String>, Value, u64)>;

/// Applies a `$set.messages` checkpoint (see the module docs): each
/// message it names replaces the known copy in place; a new one goes
/// before the next message the checkpoint names that was known, or last.
fn checkpoint(
    messages: &[Value],
    offset: u64,
    order: &mut Order,
    index: &mut HashMap<String, usize>,
) {
    let mut pending: Vec<(Option<String>, Value, u64)> = Vec::new();
    for m in messages {
        if !m.is_object() {
            continue;
        }
        let id = m.as_object().and_then(|o| str_field(o, "id"));
        match id.as_ref().and_then(|id| index.get(id).copied()) {
            Some(i) => {
                order[i] = (id, m.clone(), offset);
                if !pending.is_empty() {
                    order.splice(i..i, pending.drain(..));
                    reindex(order, index);
                }
            }
            None => pending.push((id, m.clone(), offset)),
        }
    }
    if !pending.is_empty() {
        order.append(&mut pending);
        reindex(order, index);
    }
}

/// Rebuilds the id → position map after messages were inserted.
fn reindex(order: &Order, index: &mut HashMap<String, usize>) {
    index.clear();
    for (i, (id, _, _)) in order.iter().enumerate() {
        if let Some(id) = id {
            index.insert(id.clone(), i);
        }
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Text of a Gemini content value: a string, or a Part list whose `text`
/// parts (minus `thought: true` parts) are joined with blank lines.
fn parts_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let mut out = String::new();
            for item in items {
                let piece = match item {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) if o.get("thought").and_then(Value::as_bool) != Some(true) => {
                        o.get("text").and_then(Value::as_str)
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
        Value::Object(o) => o
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

fn emit_message(
    msg: &Value,
    offset: u64,
    session_id: &str,
    project: Option<&str>,
    out: &mut Vec<Record>,
) {
    let Some(obj) = msg.as_object() else { return };
    let time = obj.get("timestamp").and_then(parse_time);
    let make = |role: Role, text: String, files: Vec<String>, time: Option<i64>| {
        let mut r = Record::new(AGENT, session_id, role, text);
        r.project = project.map(str::to_owned);
        r.time_ms = time;
        r.files = files;
        r.offset = offset;
        r
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or_default() {
        "user" if is_compression_summary(obj) => {
            let text = obj.get("content").map(parts_text).unwrap_or_default();
            let text = format!("[compression summary] {}", text.trim());
            out.push(make(
                Role::Assistant,
                cap_text(&text, TEXT_CAP),
                Vec::new(),
                time,
            ));
        }
        "gemini" | "model" if is_compression_ack(obj) => {}
        // The environment block the CLI puts first (date, OS, folders) is
        // the harness's, not the user's words.
        "user" if is_session_context(obj) => {}
        "user" => {
            // `displayContent` is what the user typed (`/init`) when `content`
            // holds the expanded harness prompt; a display made only of
            // function responses marks an injected "please continue" turn.
            let text = match obj.get("displayContent") {
                Some(d) => parts_text(d),
                None => obj.get("content").map(parts_text).unwrap_or_default(),
            };
            let text = text.trim();
            if !text.is_empty() {
                out.push(make(Role::User, cap_text(text, TEXT_CAP), Vec::new(), time));
            }
        }
        "gemini" | "model" => {
            let text = obj.get("content").map(parts_text).unwrap_or_default();
            let text = text.trim();
            if !text.is_empty() {
                out.push(make(
                    Role::Assistant,
                    cap_text(text, TEXT_CAP),
                    Vec::new(),
                    time,
                ));
            }
            let calls = obj.get("toolCalls").and_then(Value::as_array);
            for call in calls.into_iter().flatten() {
                let Some(c) = call.as_object() else { continue };
                let name = c.get("name").and_then(Value::as_str).unwrap_or("tool");
                let args = c.get("args").unwrap_or(&Value::Null);
                let ctime = c.get("timestamp").and_then(parse_time).or(time);
                let (text, files) = describe_tool(name, args);
                out.push(make(Role::ToolCall, text, files, ctime));
                let output = tool_output(c);
                if !output.trim().is_empty() {
                    out.push(make(
                        Role::ToolOutput,
                        cap_text(&output, TOOL_OUTPUT_CAP),
                        Vec::new(),
                        ctime,
                    ));
                }
            }
        }
        // `info`, `error`, `warning` and unknown kinds are not conversation.
        _ => {}
    }
}

/// A compact line for a tool call plus the files it names.
/// The summary turn compression puts first: a user-role message holding
/// the model's `<state_snapshot>` (after its scratchpad, if any).
fn is_compression_summary(obj: &Map<String, Value>) -> bool {
    obj.get("content")
        .map(parts_text)
        .is_some_and(|t| t.contains("<state_snapshot>"))
}

/// The CLI's own first turn (0.61: the first message of the first
/// `$set.messages` checkpoint): a user-role message that is one
/// `<session_context>…</session_context>` block.
fn is_session_context(obj: &Map<String, Value>) -> bool {
    obj.get("content").map(parts_text).is_some_and(|t| {
        let t = t.trim();
        t.starts_with("<session_context>") && t.ends_with("</session_context>")
    })
}

/// The canned reply compression puts after its summary.
fn is_compression_ack(obj: &Map<String, Value>) -> bool {
    obj.get("content")
        .map(parts_text)
        .is_some_and(|t| t.trim() == "Got it. Thanks for the additional context!")
}

fn describe_tool(name: &str, args: &Value) -> (String, Vec<String>) {
    let mut files = Vec::new();
    for key in [
        "file_path",
        "absolute_path",
        "path",
        "dir_path",
        "notebook_path",
    ] {
        if let Some(f) = args
            .get(key)
            .and_then(Value::as_str)
            .filter(|f| !f.is_empty())
        {
            files.push(f.to_owned());
        }
    }
    for key in ["paths", "file_paths", "absolute_paths"] {
        for f in args
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(f) = f.as_str().filter(|f| !f.is_empty()) {
                files.push(f.to_owned());
            }
        }
    }
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let mut text = if let Some(cmd) = s("command") {
        format!("{name}: {cmd}")
    } else if let Some(f) = files.first() {
        format!("{name} {f}")
    } else if let Some(q) = s("pattern").or(s("query")).or(s("url")).or(s("prompt")) {
        format!("{name}: {q}")
    } else if args.as_object().is_some_and(|o| !o.is_empty()) {
        format!("{name} {args}")
    } else {
        name.to_owned()
    };
    if let Some(new) = s("new_string").or(s("content")) {
        text.push('\n');
        text.push_str(new);
    }
    (cap_text(&text, TEXT_CAP), files)
}

/// The text a tool returned: every `functionResponse.response.output` (or
/// `error`), else the display string.
fn tool_output(call: &Map<String, Value>) -> String {
    let mut out = String::new();
    for item in call
        .get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(resp) = item.pointer("/functionResponse/response") else {
            continue;
        };
        let piece = match resp.get("output").or_else(|| resp.get("error")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => continue,
            Some(other) => other.to_string(),
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&piece);
    }
    if out.is_empty()
        && let Some(d) = call.get("resultDisplay").and_then(Value::as_str)
    {
        out.push_str(d);
    }
    out
}

/// The project folder of a session file in `.gemini/tmp/<project>/chats/...`.
fn project_for(path: &Path) -> Option<String> {
    let project_dir = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?
        .parent()?;
    if let Ok(root) = std::fs::read_to_string(project_dir.join(".project_root")) {
        let root = root.trim();
        if !root.is_empty() {
            return Some(root.to_owned());
        }
    }
    let slug = project_dir.file_name()?.to_str()?;
    let registry: PathBuf = project_dir.parent()?.parent()?.join("projects.json");
    let bytes = std::fs::read(registry).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let map = v
        .get("projects")
        .and_then(Value::as_object)
        .or_else(|| v.as_object())?;
    map.iter().find_map(|(path, entry)| {
        let entry_slug = match entry {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => ["slug", "id", "name"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str)),
            _ => None,
        };
        (entry_slug == Some(slug)).then(|| path.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");
    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/gemini-cli"
    );

    fn fixture(rel: &str) -> (PathBuf, Parsed) {
        let path = Path::new(FIXTURES).join(rel);
        let bytes = std::fs::read(&path).unwrap();
        let parsed = parse(&path, &bytes);
        (path, parsed)
    }

    fn texts(p: &Parsed, role: Role) -> Vec<&str> {
        p.records
            .iter()
            .filter(|r| r.role == role)
            .map(|r| r.text.as_str())
            .collect()
    }

    #[test]
    fn discovers_sessions_and_prefers_jsonl() {
        let loc = Locations::under_home(Path::new(FIXTURES));
        let found: Vec<String> = Gemini
            .discover(&loc)
            .iter()
            .map(|f| {
                assert!(matches!(f.reader, Reader::Whole(_)));
                f.path.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(
            found,
            vec![
                "session-2025-11-02T09-15-1f0c2a7e.json",
                "session-2025-11-03T10-00-7b9e4d21.jsonl",
                "session-2025-11-05T08-00-c3d4e5f6.json",
            ]
        );
        // The .json twin of the .jsonl session and logs.json are not sessions.
        assert!(!found.iter().any(|f| f.contains("logs")));
    }

    #[test]
    fn json_document_session() {
        let (_, p) =
            fixture(".gemini/tmp/acme-search/chats/session-2025-11-02T09-15-1f0c2a7e.json");
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let r = &p.records;
        assert!(r.iter().all(|r| r.agent == "gemini"
            && r.session_id == "1f0c2a7e-5b1d-4c3e-9a8f-0d6e2b7c4a11"
            && r.project.as_deref() == Some("/home/dev/acme-search")));
        let roles: Vec<Role> = r.iter().map(|r| r.role).collect();
        assert_eq!(
            roles,
            vec![
                Role::User,
                Role::Assistant,
                Role::ToolCall,
                Role::ToolOutput,
                Role::ToolCall,
                Role::ToolOutput,
                Role::User,
                Role::Assistant,
            ]
        );
        assert!(
            r[0].text
                .contains("AIzakpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBL")
        );
        assert_eq!(r[0].time_ms, Some(1_762_074_900_000)); // 2025-11-02T09:15:00Z
        assert_eq!(r[0].offset, 0);
        assert!(
            r[1].text
                .contains("we chose tantivy over meilisearch because it embeds without a server")
        );
        // Thoughts never become records.
        assert!(!r.iter().any(|r| r.text.contains("Weighing search engines")));
        assert_eq!(r[2].text, "run_shell_command: cargo add tantivy@0.22");
        assert!(r[2].files.is_empty());
        assert!(r[3].text.contains("Adding tantivy v0.22.0"));
        assert!(
            r[4].text
                .starts_with("write_file /home/dev/acme-search/src/index.rs\n")
        );
        assert!(r[4].text.contains("pub fn open_index"));
        assert_eq!(r[4].files, vec!["/home/dev/acme-search/src/index.rs"]);
        assert_eq!(r[4].time_ms, Some(1_762_074_930_500));
        assert!(
            r[6].text
                .contains("我们选择了 tantivy，因为它不需要单独的服务器。")
        );
        // Part-list assistant content: the thought part is dropped.
        assert_eq!(r[7].text, "对，tantivy 直接嵌入进程，不需要服务器。");
    }

    #[test]
    fn jsonl_replay_last_wins_set_and_rewind() {
        let (_, p) = fixture(".gemini/tmp/ledger/chats/session-2025-11-03T10-00-7b9e4d21.jsonl");
        // One undecodable complete line; the torn last line is not an error.
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert!(matches!(p.errors[0], ParseError::Json { .. }));
        let r = &p.records;
        assert!(
            r.iter()
                .all(|r| r.session_id == "7b9e4d21-0c1f-4e55-8d2a-3f6b9a1c2e77"
                    && r.project.as_deref() == Some("/home/dev/ledger"))
        );
        let got: Vec<(Role, &str)> = r.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "/init"),
                (Role::User, "why is the nightly export slow?"),
                (
                    Role::Assistant,
                    "we capped the export batch at 500 rows because the ledger API times out above that"
                ),
                (Role::ToolCall, "read_file /home/dev/ledger/export.py"),
                (Role::ToolOutput, "BATCH_SIZE = 500"),
                (Role::User, "thanks, ship it"),
            ]
        );
        // Mixed timestamp shapes: ISO Z, ISO with offset, Unix ms.
        assert_eq!(r[0].time_ms, Some(1_762_164_000_000));
        assert_eq!(r[1].time_ms, Some(1_762_164_010_000));
        assert_eq!(r[2].time_ms, Some(1_762_164_020_000));
        assert_eq!(r[5].time_ms, Some(1_762_164_100_000));
        assert_eq!(r[3].files, vec!["/home/dev/ledger/export.py"]);
        // The rewound draft and the torn line never surface.
        assert!(!r.iter().any(|r| r.text.contains("drop the index")));
        assert!(!r.iter().any(|r| r.text.contains("torn")));
        assert!(texts(&p, Role::Assistant).len() == 1);
        // The winning copy's line offset is kept.
        let bytes = std::fs::read(
            Path::new(FIXTURES)
                .join(".gemini/tmp/ledger/chats/session-2025-11-03T10-00-7b9e4d21.jsonl"),
        )
        .unwrap();
        let at = r[2].offset as usize;
        assert!(bytes[at..].starts_with(b"{\"id\":\"m3\""));
        assert!(
            String::from_utf8_lossy(&bytes[at..])
                .lines()
                .next()
                .unwrap()
                .contains("toolCalls")
        );
    }

    /// Writes a `.jsonl` session under `<tmp>/<project>/chats/<sub>`.
    fn write_log(dir: &Path, sub: &str, name: &str, lines: &[Value]) -> PathBuf {
        let d = dir.join("tmp/proj/chats").join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(name);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn msg(id: &str, kind: &str, text: &str) -> Value {
        serde_json::json!({"id": id, "timestamp": "2026-11-20T10:00:00Z", "type": kind,
                           "content": [{"text": text}]})
    }

    fn read(p: &Path) -> Parsed {
        parse(p, &std::fs::read(p).unwrap())
    }

    /// A `$set.messages` checkpoint (compression): the messages it names are
    /// updated in place, those it drops are kept, the summary is indexed as
    /// the assistant's and the canned reply dropped; a rewind to an id never
    /// seen clears everything, as the CLI does.
    /// Gemini CLI 0.61 opens a session with a `$set.messages` checkpoint
    /// holding its own environment block as a user turn: not the user's
    /// words, so not read; a user turn that only mentions the tag is.
    #[test]
    fn the_clis_session_context_turn_is_not_read_as_the_users() {
        let dir = tempfile::tempdir().unwrap();
        let header = serde_json::json!({"sessionId": "s-ctx", "projectHash": "h", "kind": "main"});
        let p = write_log(
            dir.path(),
            "",
            "session-ctx.jsonl",
            &[
                header,
                serde_json::json!({"$set": {"messages": [
                    msg("c0", "user", "<session_context>\nToday's date is Saturday.\nMy operating system is: linux\n</session_context>"),
                ]}}),
                msg(
                    "u1",
                    "user",
                    "why does <session_context> show up in the prompt?",
                ),
                msg("g1", "gemini", "the CLI adds it"),
            ],
        );
        let got: Vec<(Role, String)> = read(&p)
            .records
            .into_iter()
            .map(|r| (r.role, r.text))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Role::User,
                    "why does <session_context> show up in the prompt?".to_owned()
                ),
                (Role::Assistant, "the CLI adds it".to_owned()),
            ]
        );
    }

    #[test]
    fn checkpoints_compression_and_rewinds_replay_like_the_cli() {
        let dir = tempfile::tempdir().unwrap();
        let header = serde_json::json!({"sessionId": "s-main", "projectHash": "h", "kind": "main"});
        let p = write_log(
            dir.path(),
            "",
            "session-a.jsonl",
            &[
                header.clone(),
                msg("u1", "user", "where do the heron logs go?"),
                msg("g1", "gemini", "to /var/log/heron"),
                msg("u2", "user", "rotate them weekly"),
                msg("g2", "gemini", "done: weekly rotation"),
                serde_json::json!({"$set": {"lastUpdated": "2026-11-20T10:05:00Z", "messages": [
                    msg("c1", "user", "scratchpad...\n<state_snapshot>heron logs rotate weekly</state_snapshot>"),
                    msg("c2", "gemini", "Got it. Thanks for the additional context!"),
                    msg("u2", "user", "rotate them weekly, keep 4"),
                    msg("g2", "gemini", "done: weekly rotation"),
                ]}}),
                msg("u3", "user", "and compress them"),
            ],
        );
        let got: Vec<(Role, String)> = read(&p)
            .records
            .into_iter()
            .map(|r| (r.role, r.text))
            .collect();
        let want: Vec<(Role, String)> = [
            (Role::User, "where do the heron logs go?"),
            (Role::Assistant, "to /var/log/heron"),
            (Role::Assistant, "[compression summary] scratchpad...\n<state_snapshot>heron logs rotate weekly</state_snapshot>"),
            (Role::User, "rotate them weekly, keep 4"),
            (Role::Assistant, "done: weekly rotation"),
            (Role::User, "and compress them"),
        ]
        .into_iter()
        .map(|(r, t)| (r, t.to_owned()))
        .collect();
        assert_eq!(got, want);

        let p = write_log(
            dir.path(),
            "",
            "session-b.jsonl",
            &[
                header,
                msg("u1", "user", "first try"),
                serde_json::json!({"$rewindTo": "never-seen"}),
                msg("u9", "user", "second try"),
            ],
        );
        let got: Vec<String> = read(&p).records.into_iter().map(|r| r.text).collect();
        assert_eq!(got, ["second try"]);
    }

    /// A subagent's log, `chats/<parent>/<id>.jsonl` with `kind: subagent`,
    /// is found and its records name the parent session.
    #[test]
    fn subagent_logs_name_their_parent() {
        let dir = tempfile::tempdir().unwrap();
        let parent = "8d1f2c3b-aaaa-4bbb-8ccc-123456789abc";
        write_log(
            dir.path(),
            parent,
            "sub-77.jsonl",
            &[
                serde_json::json!({"sessionId": "sub-77", "projectHash": "h", "kind": "subagent"}),
                msg("s1", "user", "list the heron config files"),
                msg("s2", "gemini", "heron.toml and heron.local.toml"),
            ],
        );
        let mut loc = Locations::under_home(dir.path());
        loc.gemini_home = dir.path().to_path_buf();
        std::fs::create_dir_all(dir.path().join(".gemini")).unwrap();
        std::fs::rename(dir.path().join("tmp"), dir.path().join(".gemini/tmp")).unwrap();
        let moved = dir
            .path()
            .join(".gemini/tmp/proj/chats")
            .join(parent)
            .join("sub-77.jsonl");
        let found: Vec<PathBuf> = Gemini.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(found, std::slice::from_ref(&moved));
        let recs = read(&moved).records;
        assert_eq!(recs.len(), 2);
        assert!(
            recs.iter()
                .all(|r| r.session_id == "sub-77" && r.parent_session.as_deref() == Some(parent))
        );
    }

    #[test]
    fn empty_session_yields_nothing() {
        let (_, p) = fixture(".gemini/tmp/ledger/chats/session-2025-11-05T08-00-c3d4e5f6.json");
        assert!(p.errors.is_empty());
        assert!(p.records.is_empty());
    }

    #[test]
    fn broken_documents_are_errors_not_panics() {
        let p = parse(Path::new("x.json"), b"{\"sessionId\":\"a\",\"messages\":[");
        assert_eq!(p.errors.len(), 1);
        let p = parse(Path::new("x.json"), b"[1,2]");
        assert_eq!(p.errors.len(), 1);
        let p = parse(Path::new("x.json"), b"{\"sessionId\":\"a\"}");
        assert_eq!(p.errors.len(), 1);
        let p = parse(Path::new("x.jsonl"), b"");
        assert!(p.errors.is_empty() && p.records.is_empty());
    }

    #[test]
    fn real_files() {
        let root = Path::new(REAL);
        if !root.exists() {
            eprintln!("skipping: {} not found", root.display());
            return;
        }
        let files = walk_files(root, 3, &|p| {
            has_suffix(p, ".json") || has_suffix(p, ".jsonl")
        });
        assert_eq!(files.len(), 5);
        // One known message from each file.
        let spot = [
            (
                "test_conversation_gemini.json",
                "2d9ea14f-1e4e-44f6-8bf5-7a7819cb1cd9",
                "Vibe Code Tracker",
            ),
            (
                "test_conversation_gemini.jsonl",
                "0ab84937-9fe7-4284-986a-33c832af0b6a",
                "uv run",
            ),
            (
                "gemini-cli-pomodoro-timer.json",
                "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce",
                "Pomodoro",
            ),
            (
                "control_pro.json",
                "b36c9e17-99f8-4acf-b1b3-cef1081a98f6",
                "hello",
            ),
            (
                "control_pro_run4_abandoned.json",
                "95ee2bc8-b4a1-47fb-8db8-b0cfe91bee88",
                "please read the task.md file",
            ),
        ];
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            let p = parse(f, &bytes);
            let name = f.file_name().unwrap().to_str().unwrap();
            assert!(p.errors.is_empty(), "{name}: {:?}", p.errors);
            assert!(!p.records.is_empty(), "{name}");
            let (_, id, needle) = spot.iter().find(|s| s.0 == name).unwrap();
            assert!(p.records.iter().all(|r| r.session_id == *id), "{name}");
            // No cwd in these files and no projects.json next to them.
            assert!(p.records.iter().all(|r| r.project.is_none()));
            assert!(p.records.iter().all(|r| !r.text.is_empty()));
            assert!(
                p.records
                    .iter()
                    .any(|r| matches!(r.role, Role::User | Role::Assistant)
                        && r.text.contains(needle)),
                "{name}: {needle}"
            );
        }
        // JSONL specifics: the /init expansion is replaced by what was typed,
        // repeated ids are collapsed, `info` lines are skipped.
        let f = root.join("VibeCodingTracker/test_conversation_gemini.jsonl");
        let p = parse(&f, &std::fs::read(&f).unwrap());
        assert_eq!(texts(&p, Role::User)[0], "/init");
        assert!(
            !p.records
                .iter()
                .any(|r| r.text.contains("Request cancelled"))
        );
        assert!(
            !p.records
                .iter()
                .any(|r| r.text.contains("You are an AI agent that brings"))
        );
        let calls = texts(&p, Role::ToolCall);
        assert_eq!(
            calls
                .iter()
                .filter(|t| t.starts_with("read_file src/discordbot/cli.py"))
                .count(),
            1
        );
        // Tool files from arguments in the pomodoro session.
        let f = root.join("ai-sessions/gemini-cli-pomodoro-timer.json");
        let p = parse(&f, &std::fs::read(&f).unwrap());
        assert!(p.records.iter().any(|r| r.role == Role::ToolCall
            && r.files == vec!["/Users/yoavfarhi/dev/pomodoro/gemini/index.html".to_owned()]));
    }

    proptest::proptest! {
        // No-panic properties: these assert only that parsing returns.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse(Path::new("a.jsonl"), &bytes);
            let _ = parse(Path::new("a.json"), &bytes);
        }
    }

    #[test]
    fn every_truncation_of_fixtures_never_panics() {
        // No-panic property over all prefixes of real-shaped input.
        for rel in [
            ".gemini/tmp/ledger/chats/session-2025-11-03T10-00-7b9e4d21.jsonl",
            ".gemini/tmp/acme-search/chats/session-2025-11-02T09-15-1f0c2a7e.json",
        ] {
            let path = Path::new(FIXTURES).join(rel);
            let bytes = std::fs::read(&path).unwrap();
            for n in 0..bytes.len() {
                let _ = parse(&path, &bytes[..n]);
            }
        }
    }
}
