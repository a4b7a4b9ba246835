//! OpenHands: one JSON file per event, each written once.
//!
//! CLI v1: `${OPENHANDS_CONVERSATIONS_DIR:-~/.openhands/conversations}/<id>/events/event-<n>-<uuid>.json`
//! beside `base_state.json` (`workspace.working_dir` is the project).
//! V0: `~/.openhands/sessions/<id>/events/<n>.json`. Every event file is a
//! store of its own, read once (events are never rewritten).
//!
//! v1 events: `{id, timestamp, source: user|agent|environment, kind}`;
//! `MessageEvent` carries `llm_message{role, content[{type: text, text}]}`,
//! `ActionEvent` a `tool_name` and `action` (its `command`/`path`),
//! `ObservationEvent` an `observation{content[], command, exit_code}`.
//! V0 events: `{source, message, action|observation, args, content}`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "openhands";

/// The OpenHands source.
pub struct OpenHands;

fn conversations(loc: &Locations) -> PathBuf {
    loc.var_or(
        "OPENHANDS_CONVERSATIONS_DIR",
        loc.home.join(".openhands/conversations"),
    )
}

impl Source for OpenHands {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["OPENHANDS_CONVERSATIONS_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![conversations(loc), loc.home.join(".openhands/sessions")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        self.roots(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    2,
                    &|p| {
                        has_suffix(p, ".json")
                            && p.parent().and_then(|e| e.file_name()) == Some("events".as_ref())
                    },
                    Reader::Whole(parse_event),
                )
            })
            .collect()
    }
}

/// Parses one event file.
pub fn parse_event(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(v) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let conv = path.parent().and_then(Path::parent);
    let session = conv
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let project = conv
        .and_then(|d| std::fs::read(d.join("base_state.json")).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|s| {
            s.pointer("/workspace/working_dir")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    let time = v.get("timestamp").and_then(parse_time);
    let mk = |role: Role, text: String| {
        let mut r = Record::new(AGENT, &session, role, text);
        r.time_ms = time;
        r.project = project.clone();
        r
    };
    let out = &mut parsed.records;
    let source = v.get("source").and_then(Value::as_str).unwrap_or_default();
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if let Some(m) = v.get("llm_message") {
        let role = if m.get("role").and_then(Value::as_str) == Some("user") {
            Role::User
        } else {
            Role::Assistant
        };
        blocks::content(role, m.get("content").unwrap_or(&Value::Null), &mk, out);
    } else if kind == "ActionEvent" || v.get("action").is_some_and(Value::is_string) {
        let name = v
            .get("tool_name")
            .or_else(|| v.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("action");
        let args = v
            .get("action")
            .filter(|a| a.is_object())
            .or_else(|| v.get("args"))
            .unwrap_or(&Value::Null);
        if name == "message" {
            let text = args
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = if source == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            blocks::push_text(role, text, &mk, out);
        } else {
            blocks::push_call(name, args, &mk, out);
        }
    } else if kind == "ObservationEvent" || v.get("observation").is_some() {
        let obs = v.get("observation").unwrap_or(&Value::Null);
        let text = match obs {
            Value::Object(_) => blocks::result_text(obs.get("content").unwrap_or(obs)),
            _ => v
                .get("content")
                .map(blocks::result_text)
                .unwrap_or_default(),
        };
        blocks::push_output(&text, &mk, out);
    } else if let Some(text) = v.get("message").and_then(Value::as_str) {
        let role = if source == "user" {
            Role::User
        } else {
            Role::Assistant
        };
        blocks::push_text(role, text, &mk, out);
    }
    parsed
}
