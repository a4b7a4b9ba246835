//! VS Code's chat (GitHub Copilot Chat and other chat participants): one
//! file per session in `<User>/workspaceStorage/<hash>/chatSessions/` (the
//! window's folder is `{folder}` in `<hash>/workspace.json`) and in
//! `<User>/globalStorage/emptyWindowChatSessions/` (no folder), for the
//! `User` folders of Code, Code - Insiders and VSCodium on Linux and macOS
//! (and of a portable install, `$VSCODE_PORTABLE/user-data/User`).
//!
//! Evidence: no release can be run here, so the reader follows VS Code's
//! own source, microsoft/vscode `src/vs/workbench/contrib/chat/common/
//! model/objectMutationLog.ts` @ 047238f9 (the `.jsonl` log) and
//! `chatModel.ts` / `chatService.ts` (`ISerializableChatData` v3,
//! `IChatToolInvocationSerialized`, `IChatTerminalToolInvocationData`) @
//! 8c035459, and the fixture `fixtures/agents/vscode/source/` written from
//! them. Two generations:
//! - up to 1.108, `<sessionId>.json`: the whole `ISerializableChatData`
//!   `{version: 3, sessionId, creationDate, customTitle, requests[]}`;
//! - from 1.109, `<sessionId>.jsonl`: a mutation log. Line one is `{kind: 0,
//!   v: <the data>}`, then `{kind: 1, k: path, v}` sets a value, `{kind: 2,
//!   k: path, v?: [...], i?}` truncates the array at `i` and pushes `v`,
//!   `{kind: 3, k: path}` deletes; a set at the empty path is ignored, as
//!   VS Code's own reader does. The log is replayed to the same data.
//!
//! A request is `{requestId, message{text} | string, timestamp (ms),
//! response[], modelState{value, completedAt}}`. Response parts: markdown
//! as an `IMarkdownString` `{value}` with no `kind` (or `kind:
//! markdownContent` / `markdownVuln` with `content{value}`), `thinking`
//! (skipped), `toolInvocationSerialized` `{toolId, toolCallId,
//! invocationMessage, toolSpecificData?, resultDetails?}`; a terminal call's
//! `toolSpecificData` is `{kind: terminal, commandLine{original,
//! userEdited?, toolEdited?}, terminalCommandOutput?{text}}` (older:
//! `{command}`), other calls' `{kind: input, rawInput}`; `resultDetails`
//! is `{input, output[{value}], isError?}`. Other parts (references, edits,
//! progress) are not conversation. The user's text takes the request's
//! time; the response's, `modelState.completedAt` when it has one.
//! Files are re-read whole when they change.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "vscode";

/// The editors whose chat this reads (Cursor, Windsurf and Kiro keep their
/// own agents' history, read by their own sources).
const HOSTS: [&str; 3] = ["Code", "Code - Insiders", "VSCodium"];

/// The VS Code chat source.
pub struct VsCodeChat;

/// The `User` folders: a portable install's (`$VSCODE_PORTABLE/user-data`)
/// when set, then each editor's on Linux and macOS.
fn user_dirs(loc: &Locations) -> Vec<PathBuf> {
    let portable = loc.var("VSCODE_PORTABLE").map(|p| p.join("user-data/User"));
    portable
        .into_iter()
        .chain(
            HOSTS
                .iter()
                .flat_map(|h| loc.app_config_dirs(h))
                .map(|d| d.join("User")),
        )
        .collect()
}

fn is_session(p: &Path) -> bool {
    has_suffix(p, ".json") || has_suffix(p, ".jsonl")
}

impl Source for VsCodeChat {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["VSCODE_PORTABLE"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        user_dirs(loc)
            .into_iter()
            .flat_map(|u| {
                [
                    u.join("workspaceStorage"),
                    u.join("globalStorage/emptyWindowChatSessions"),
                ]
            })
            .collect()
    }

    /// Only the chat folders: the rest of `workspaceStorage` belongs to
    /// every other extension.
    fn history_dirs(&self, loc: &Locations) -> Vec<PathBuf> {
        user_dirs(loc)
            .into_iter()
            .map(|u| u.join("globalStorage/emptyWindowChatSessions"))
            .collect()
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut found = Vec::new();
        for u in user_dirs(loc) {
            found.extend(walk_stores(
                &u.join("workspaceStorage"),
                2,
                &|p| {
                    is_session(p)
                        && p.parent()
                            .and_then(Path::file_name)
                            .is_some_and(|n| n == "chatSessions")
                },
                Reader::Whole(parse),
            ));
            found.extend(walk_stores(
                &u.join("globalStorage/emptyWindowChatSessions"),
                0,
                &is_session,
                Reader::Whole(parse),
            ));
        }
        found
    }
}

/// The folder a workspace's `workspace.json` names (`folder`, or the
/// `.code-workspace` file of a multi-root `workspace`), as a path.
fn workspace_folder(session: &Path) -> Option<String> {
    let chat_dir = session.parent()?;
    if chat_dir.file_name()? != "chatSessions" {
        return None;
    }
    let v: Value =
        serde_json::from_slice(&std::fs::read(chat_dir.parent()?.join("workspace.json")).ok()?)
            .ok()?;
    let uri = v
        .get("folder")
        .or_else(|| v.get("workspace"))
        .and_then(Value::as_str)?;
    let path = uri.strip_prefix("file://")?;
    Some(percent_decode(path))
}

/// `%xx` escapes of a file URI's path, decoded (invalid ones kept).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(hex) = std::str::from_utf8(&b[i + 1..i + 3])
            && let Ok(n) = u8::from_str_radix(hex, 16)
        {
            out.push(n);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value at `path` below `root`, created as objects where missing.
fn slot<'a>(root: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let mut cur = root;
    for seg in path {
        cur = match seg {
            Value::String(k) => {
                if !cur.is_object() {
                    return None;
                }
                cur.as_object_mut()?.entry(k.clone()).or_insert(Value::Null)
            }
            Value::Number(n) => {
                let i = usize::try_from(n.as_u64()?).ok()?;
                let arr = cur.as_array_mut()?;
                if i >= arr.len() {
                    arr.resize(i + 1, Value::Null);
                }
                &mut arr[i]
            }
            _ => return None,
        };
    }
    Some(cur)
}

/// Replays a `.jsonl` mutation log; `None` (and an error) when it has no
/// initial entry. Entries that do not apply are counted and skipped.
fn replay(bytes: &[u8], parsed: &mut Parsed) -> Option<Value> {
    let mut state: Option<Value> = None;
    let mut offset = 0u64;
    for line in bytes.split(|&b| b == b'\n') {
        let at = offset;
        offset += line.len() as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let entry: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(source) => {
                parsed.errors.push(ParseError::Json { offset: at, source });
                continue;
            }
        };
        let kind = entry.get("kind").and_then(Value::as_u64);
        if kind == Some(0) {
            state = Some(entry.get("v").cloned().unwrap_or(Value::Null));
            continue;
        }
        let path: &[Value] = entry
            .get("k")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let applied = match (state.as_mut(), kind) {
            (Some(_), Some(1 | 3)) if path.is_empty() => true,
            (Some(s), Some(1)) => slot(s, path)
                .map(|v| *v = entry.get("v").cloned().unwrap_or(Value::Null))
                .is_some(),
            (Some(s), Some(3)) => {
                let (last, parent) = path.split_last().expect("non-empty");
                match (slot(s, parent), last) {
                    (Some(Value::Object(o)), Value::String(k)) => {
                        o.remove(k);
                        true
                    }
                    (Some(Value::Array(a)), Value::Number(n)) => {
                        if let Some(v) = n.as_u64().and_then(|i| a.get_mut(i as usize)) {
                            *v = Value::Null;
                        }
                        true
                    }
                    _ => false,
                }
            }
            (Some(s), Some(2)) => match slot(s, path) {
                Some(v) => {
                    if !v.is_array() {
                        *v = Value::Array(Vec::new());
                    }
                    let arr = v.as_array_mut().expect("array");
                    if let Some(i) = entry.get("i").and_then(Value::as_u64) {
                        arr.truncate(i as usize);
                    }
                    if let Some(items) = entry.get("v").and_then(Value::as_array) {
                        arr.extend(items.iter().cloned());
                    }
                    true
                }
                None => false,
            },
            _ => false,
        };
        if !applied {
            parsed.errors.push(ParseError::Shape {
                offset: at,
                what: if state.is_none() {
                    "mutation before the log's initial entry"
                } else {
                    "mutation that does not apply"
                },
            });
        }
    }
    state
}

/// An `IMarkdownString` or plain string as text.
fn markdown(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("value").and_then(Value::as_str),
        _ => None,
    }
}

/// A tool invocation's call (name, arguments) and output text.
fn invocation(part: &Value) -> (String, Value, String) {
    let name = part
        .get("toolId")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_owned();
    let data = part.get("toolSpecificData").unwrap_or(&Value::Null);
    let (args, mut output) = match data.get("kind").and_then(Value::as_str) {
        Some("terminal") => {
            let line = data.get("commandLine").unwrap_or(&Value::Null);
            let cmd = ["userEdited", "toolEdited", "original"]
                .iter()
                .find_map(|k| line.get(k).and_then(Value::as_str))
                .or_else(|| data.get("command").and_then(Value::as_str))
                .unwrap_or("");
            let out = data
                .pointer("/terminalCommandOutput/text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            (serde_json::json!({ "command": cmd }), out)
        }
        Some("input") => (
            data.get("rawInput").cloned().unwrap_or(Value::Null),
            String::new(),
        ),
        _ => {
            let msg = part
                .get("invocationMessage")
                .and_then(markdown)
                .unwrap_or("");
            (Value::String(msg.to_owned()), String::new())
        }
    };
    if output.trim().is_empty()
        && let Some(details) = part.get("resultDetails")
    {
        output = match details.get("output") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|o| o.get("value").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        if details.get("isError").and_then(Value::as_bool) == Some(true) && !output.is_empty() {
            output = format!("[error] {output}");
        }
    }
    (name, args, output)
}

/// Parses one session file, either generation.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let doc = if has_suffix(path, ".jsonl") {
        replay(bytes, &mut parsed)
    } else {
        json_document(bytes, &mut parsed)
    };
    let Some(doc) = doc else {
        if parsed.errors.is_empty() {
            parsed.errors.push(ParseError::Shape {
                offset: 0,
                what: "mutation log without an initial entry",
            });
        }
        return parsed;
    };
    let Some(requests) = doc.get("requests").and_then(Value::as_array) else {
        parsed.errors.push(ParseError::Shape {
            offset: 0,
            what: "chat session without requests",
        });
        return parsed;
    };
    let id = doc
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or(file_stem(path))
        .to_owned();
    let project = workspace_folder(path);
    let created = doc.get("creationDate").and_then(parse_time);
    for (i, req) in requests.iter().enumerate() {
        let asked = req.get("timestamp").and_then(parse_time).or(created);
        let answered = req
            .pointer("/modelState/completedAt")
            .and_then(parse_time)
            .or(asked);
        let mk_at = |time: Option<i64>| {
            let project = project.clone();
            let id = id.clone();
            move |role: Role, text: String| {
                let mut r = Record::new(AGENT, &id, role, text);
                r.time_ms = time;
                r.project = project.clone();
                r.offset = i as u64;
                r
            }
        };
        let ask = mk_at(asked);
        let answer = mk_at(answered);
        let out = &mut parsed.records;
        let message = req.get("message").unwrap_or(&Value::Null);
        let text = match message {
            Value::String(s) => s.as_str(),
            _ => message.get("text").and_then(Value::as_str).unwrap_or(""),
        };
        blocks::push_text(Role::User, text, &ask, out);
        let mut said = String::new();
        for part in req
            .get("response")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = part.get("kind").and_then(Value::as_str);
            let piece = match kind {
                None => part.get("value").and_then(Value::as_str),
                Some("markdownContent" | "markdownVuln") => part
                    .get("content")
                    .and_then(markdown)
                    .or_else(|| part.get("value").and_then(markdown)),
                _ => None,
            };
            if let Some(p) = piece {
                said.push_str(p);
                continue;
            }
            if kind == Some("toolInvocationSerialized") {
                // What was said before the call comes first.
                blocks::push_text(Role::Assistant, &said, &ask, out);
                said.clear();
                let (name, args, output) = invocation(part);
                blocks::push_call(&name, &args, &ask, out);
                blocks::push_output(&output, &ask, out);
            }
        }
        blocks::push_text(Role::Assistant, &said, &answer, out);
    }
    parsed
}

#[cfg(test)]
#[path = "vscode_chat_tests.rs"]
mod tests;
