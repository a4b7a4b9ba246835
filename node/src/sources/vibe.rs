//! Mistral Vibe: `${VIBE_HOME:-~/.vibe}/logs/session/`, three layouts.
//!
//! - unified (2.26 by default, the only one 3.x writes):
//!   `unified/<session-id>/`, a generation store read whole through its
//!   `CURRENT` pointer by [`unified`];
//! - v1: `session_<YYYYMMDD_HHMMSS>_<id8>.json`, one document rewritten whole
//!   (re-read when it changes): `{metadata{session_id, start_time,
//!   environment.working_directory}, messages[{role, content, tool_calls,
//!   tool_call_id}]}`.
//! - newer: `session_<ts>_<id>/messages.jsonl` (append-only, read from the
//!   last safe offset) beside `meta.json` (`session_id, parent_session_id,
//!   start_time, environment.working_directory, title`).
//!
//! In the two legacy layouts messages have no timestamps of their own: every
//! record gets the session's `start_time`. Roles `user`, `assistant` (with
//! OpenAI `tool_calls`), `tool`; `system` is skipped, and so is any message
//! marked `injected` (prompts the host added, not the user).

mod unified;

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{
    file_stem, has_suffix, json_document, json_line, parse_time, walk_files, walk_stores,
};
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

    fn env_vars(&self) -> &'static [&'static str] {
        &["VIBE_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![session_dir(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut found = walk_stores(
            &session_dir(loc).join("unified"),
            1,
            &|p| p.file_name().is_some_and(|n| n == "CURRENT"),
            Reader::Whole(unified::parse),
        );
        let legacy = walk_files(&session_dir(loc), 1, &|p| {
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
        });
        found.extend(legacy);
        found
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
    if m.get("injected").and_then(Value::as_bool) == Some(true) {
        return Ok(());
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::feed_lines;

    /// What 2.26.1 with `--legacy-harness` wrote (the committed recording):
    /// every record at the session's start time, host-injected lines skipped.
    #[test]
    fn legacy_messages_with_meta_beside_them() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../fixtures/agents/vibe/2.26.1-legacy/home/.vibe/logs/session/session_20261205_180155_c09b9b9a",
        );
        let path = dir.join("messages.jsonl");
        let mut bytes = std::fs::read(&path).expect("read recording");
        bytes.extend_from_slice(b"{\"role\": \"user\", \"content\": \"<reminder>\", \"injected\": true}\n{\"content\": \"no role\"}\n");
        let (recs, errs) = feed_lines(new_parser(&path).as_mut(), &bytes);
        assert_eq!(errs.len(), 1, "{errs:?}");
        let got: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[1], (Role::ToolCall, "bash: echo hello"));
        assert!(got[2].0 == Role::ToolOutput && got[2].1.contains("stdout: hello"));
        assert!(recs.iter().all(|r| {
            r.session_id == "c09b9b9a-80bc-da5b-fda2-74dff2af91e9"
                && r.time_ms == Some(1_796_493_715_059)
                && r.project.as_deref()
                    == Some("/home/dev/agent/home-vibe2legacy/code/proj-vibe2legacy")
        }));
    }
}
