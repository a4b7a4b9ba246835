//! Mistral Vibe: `${VIBE_HOME:-~/.vibe}/logs/session/`, two generations.
//!
//! - v1: `session_<YYYYMMDD_HHMMSS>_<id8>.json`, one document rewritten whole
//!   (re-read when it changes): `{metadata{session_id, start_time,
//!   environment.working_directory}, messages[{role, content, tool_calls,
//!   tool_call_id}]}`.
//! - newer: `session_<ts>_<id>/messages.jsonl` (append-only, read from the
//!   last safe offset) beside `meta.json` (`session_id, parent_session_id,
//!   start_time, environment.working_directory, title`).
//!
//! Messages have no timestamps of their own: every record gets the session's
//! `start_time`. Roles `user`, `assistant` (with OpenAI `tool_calls`), `tool`;
//! `system` is skipped.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, json_line, parse_time, walk_files};
use super::{LineParser, Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "vibe";

/// The Mistral Vibe source.
pub struct Vibe;

fn session_dir(loc: &Locations) -> PathBuf {
    loc.var_or("VIBE_HOME", loc.home.join(".vibe"))
        .join("logs/session")
}

impl Source for Vibe {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// The running sessions' registry and the plugin cache.
    fn not_history(&self) -> &'static [&'static str] {
        &["active", "plugins"]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["VIBE_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![session_dir(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        walk_files(&session_dir(loc), 1, &|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let top = p.parent().and_then(|d| d.file_name()) == Some("session".as_ref());
            (top && name.starts_with("session_") && has_suffix(p, ".json"))
                || name == "messages.jsonl"
        })
        .into_iter()
        .map(|path| {
            let reader = if has_suffix(&path, ".jsonl") {
                Reader::Lines(new_parser)
            } else {
                Reader::Whole(parse_v1)
            };
            SourceFile::new(path, reader)
        })
        .collect()
    }
}

/// What a session says about itself.
#[derive(Clone, Default)]
struct Meta {
    id: String,
    parent: Option<String>,
    project: Option<String>,
    time: Option<i64>,
}

fn meta_of(v: &Value, fallback: &str) -> Meta {
    Meta {
        id: v
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or(fallback)
            .to_owned(),
        parent: v
            .get("parent_session_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        project: v
            .pointer("/environment/working_directory")
            .and_then(Value::as_str)
            .map(str::to_owned),
        time: v.get("start_time").and_then(parse_time),
    }
}

fn message(m: &Value, meta: &Meta, offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
    let mk = |role: Role, text: String| {
        let mut r = Record::new(AGENT, &meta.id, role, text);
        r.time_ms = meta.time;
        r.project = meta.project.clone();
        r.parent_session = meta.parent.clone();
        r.offset = offset;
        r
    };
    let content = m.get("content").unwrap_or(&Value::Null);
    match m.get("role").and_then(Value::as_str) {
        Some("user") => blocks::content(Role::User, content, &mk, out),
        Some("assistant") => {
            blocks::content(Role::Assistant, content, &mk, out);
            blocks::openai_tool_calls(m.get("tool_calls").unwrap_or(&Value::Null), &mk, out);
        }
        Some("tool") => blocks::push_output(&blocks::result_text(content), &mk, out),
        Some(_) => {}
        None => {
            return Err(ParseError::Shape {
                offset,
                what: "message without role",
            });
        }
    }
    Ok(())
}

/// Parses a v1 single-document session.
pub fn parse_v1(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let stem = file_stem(path);
    let meta = meta_of(doc.get("metadata").unwrap_or(&Value::Null), stem);
    for (i, m) in doc
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Err(e) = message(m, &meta, i as u64, &mut parsed.records) {
            parsed.errors.push(e);
        }
    }
    parsed
}

/// A line parser for a newer `messages.jsonl`, with `meta.json` read beside it.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let dir = path.parent();
    let fallback = dir
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let meta = dir
        .and_then(|d| std::fs::read(d.join("meta.json")).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map_or_else(
            || Meta {
                id: fallback.clone(),
                ..Meta::default()
            },
            |v| meta_of(&v, &fallback),
        );
    Box::new(LinesParser { meta })
}

struct LinesParser {
    meta: Meta,
}

impl LineParser for LinesParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        message(&v, &self.meta, offset, out)
    }
}
