//! Continue (continue.dev): `${CONTINUE_GLOBAL_DIR:-~/.continue}/sessions/<id>.json`,
//! one JSON document per session, rewritten whole (re-read when it changes).
//!
//! The document is `{sessionId, title, workspaceDirectory (file:// URI),
//! history[{message{role, content: string | parts[], toolCalls?}, contextItems,
//! toolCallStates?}]}` with no timestamps; the sessions index `sessions.json`
//! beside it gives `dateCreated` (ms, as a string), used as every record's
//! time. Roles `user`, `assistant`, `tool` (output) and `thinking` (skipped).
//! The CLI (`cn`, 1.5) keeps a tool's output not in a `tool` message but in
//! the assistant item's `toolCallStates[{toolCallId, status, output[{content}]}]`,
//! read as tool output right after the calls.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "continue";

/// The Continue source.
pub struct Continue;

fn sessions_dir(loc: &Locations) -> PathBuf {
    loc.var_or("CONTINUE_GLOBAL_DIR", loc.home.join(".continue"))
        .join("sessions")
}

impl Source for Continue {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CONTINUE_GLOBAL_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![sessions_dir(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        walk_stores(
            &sessions_dir(loc),
            0,
            &|p| has_suffix(p, ".json") && !p.ends_with("sessions.json"),
            Reader::Whole(parse),
        )
    }
}

/// The session's creation time from the index beside it.
fn created(path: &Path, id: &str) -> Option<i64> {
    let index = std::fs::read(path.parent()?.join("sessions.json")).ok()?;
    let v: Value = serde_json::from_slice(&index).ok()?;
    v.as_array()?
        .iter()
        .find(|e| e.get("sessionId").and_then(Value::as_str) == Some(id))
        .and_then(|e| e.get("dateCreated"))
        .and_then(parse_time)
}

/// The outputs the CLI keeps beside an assistant item's tool calls:
/// `toolCallStates[].output[].content`, one record per call.
fn tool_call_outputs(item: &Value, mk: blocks::Make<'_>, out: &mut Vec<Record>) {
    for state in item
        .get("toolCallStates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = state
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("content").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        blocks::push_output(&text, mk, out);
    }
}

/// Parses one Continue session document.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let stem = file_stem(path);
    let id = doc
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or(stem)
        .to_owned();
    let project = doc
        .get("workspaceDirectory")
        .and_then(Value::as_str)
        .map(|w| w.strip_prefix("file://").unwrap_or(w).to_owned())
        .filter(|w| !w.is_empty());
    let time = created(path, &id);
    for (i, item) in doc
        .get("history")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let m = item.get("message").unwrap_or(&Value::Null);
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &id, role, text);
            r.time_ms = time;
            r.project = project.clone();
            r.offset = i as u64;
            r
        };
        let content = m.get("content").unwrap_or(&Value::Null);
        match m.get("role").and_then(Value::as_str) {
            Some("user") => blocks::content(Role::User, content, &mk, &mut parsed.records),
            Some("assistant") => {
                blocks::content(Role::Assistant, content, &mk, &mut parsed.records);
                blocks::openai_tool_calls(
                    m.get("toolCalls").unwrap_or(&Value::Null),
                    &mk,
                    &mut parsed.records,
                );
                tool_call_outputs(item, &mk, &mut parsed.records);
            }
            Some("tool") => {
                blocks::push_output(&blocks::result_text(content), &mk, &mut parsed.records)
            }
            Some(_) => {}
            None => parsed.errors.push(ParseError::Shape {
                offset: i as u64,
                what: "history item without a message role",
            }),
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(p: &Parsed) -> Vec<(Role, &str)> {
        p.records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect()
    }

    /// The CLI's shape: the output lives in the assistant item's
    /// `toolCallStates`, not in a `tool` message.
    #[test]
    fn tool_output_from_tool_call_states() {
        let doc = serde_json::json!({
            "sessionId": "s1",
            "workspaceDirectory": "/p",
            "history": [
                {"message": {"role": "user", "content": "run it"}, "contextItems": []},
                {"message": {"role": "assistant", "content": "", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}
                ]}, "toolCallStates": [
                    {"toolCallId": "c1", "status": "done", "output": [
                        {"content": "a.txt\n", "name": "Tool Result"},
                        {"content": "b.txt", "name": "Tool Result"}
                    ]},
                    {"toolCallId": "c2", "status": "errored", "output": "not a list"},
                    {"toolCallId": "c3", "status": "done", "output": [{"content": 7}]}
                ]},
                {"message": {"role": "assistant", "content": "done"}}
            ]
        });
        let p = parse(Path::new("/x/s1.json"), doc.to_string().as_bytes());
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            roles(&p),
            vec![
                (Role::User, "run it"),
                (Role::ToolCall, "Bash: ls"),
                (Role::ToolOutput, "a.txt\n\nb.txt"),
                (Role::Assistant, "done"),
            ]
        );
        assert!(p.records.iter().all(|r| r.project.as_deref() == Some("/p")));
    }

    #[test]
    fn malformed_documents_are_counted_not_fatal() {
        let p = parse(Path::new("/x/s.json"), b"{\"history\": [");
        assert!(p.records.is_empty());
        assert_eq!(p.errors.len(), 1);
        let p = parse(
            Path::new("/x/s.json"),
            br#"{"history": [{"message": {"content": "x"}}, {"message": {"role": "user", "content": "ok"}}]}"#,
        );
        assert_eq!(p.errors.len(), 1);
        assert_eq!(roles(&p), vec![(Role::User, "ok")]);
    }
}
