//! Continue (continue.dev): `${CONTINUE_GLOBAL_DIR:-~/.continue}/sessions/<id>.json`,
//! one JSON document per session, rewritten whole (re-read when it changes).
//!
//! The document is `{sessionId, title, workspaceDirectory (file:// URI),
//! history[{message{role, content: string | parts[], toolCalls?}, contextItems}]}`
//! with no timestamps; the sessions index `sessions.json` beside it gives
//! `dateCreated` (ms, as a string), used as every record's time. Roles
//! `user`, `assistant`, `tool` (output) and `thinking` (skipped).

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
