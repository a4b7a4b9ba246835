//! Factory Droid: `~/.factory/sessions/<encoded cwd>/<uuid>.jsonl` (older
//! builds: `~/.factory/sessions/<uuid>.jsonl`), append-only JSONL read from
//! the last safe offset.
//!
//! Line 1 is `{type: session_start, id, title, cwd, callingSessionId?}`
//! (sub-agent sessions name their caller); then `{type: message, id,
//! timestamp, message{role, content[text|thinking|tool_use|tool_result|image]}}`.
//! The first user turn carries `<system-reminder>` blocks, which are dropped.
//! `<uuid>.settings.json` beside each file holds model and token totals (not read).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_line, parse_time, walk_stores};
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "factory";

/// The Factory Droid source.
pub struct Factory;

impl Source for Factory {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![loc.home.join(".factory/sessions")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        walk_stores(
            &loc.home.join(".factory/sessions"),
            1,
            &|p| has_suffix(p, ".jsonl"),
            Reader::Lines(new_parser),
        )
    }
}

/// A line parser for one Droid session.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let stem = file_stem(path);
    Box::new(DroidParser {
        session: stem.to_owned(),
        parent: None,
        project: None,
    })
}

struct DroidParser {
    session: String,
    parent: Option<String>,
    project: Option<String>,
}

/// Drops `<system-reminder>…</system-reminder>` blocks from user text.
fn strip_reminders(s: &str) -> String {
    let mut out = s.to_owned();
    while let Some(a) = out.find("<system-reminder>") {
        match out[a..].find("</system-reminder>") {
            Some(b) => out.replace_range(a..a + b + "</system-reminder>".len(), ""),
            None => out.truncate(a),
        }
    }
    out
}

impl LineParser for DroidParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        match v.get("type").and_then(Value::as_str) {
            Some("session_start") => {
                if let Some(id) = v.get("id").and_then(Value::as_str) {
                    self.session = id.to_owned();
                }
                self.project = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
                self.parent = v
                    .get("callingSessionId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            Some("message") => {
                let m = v.get("message").unwrap_or(&Value::Null);
                let time = v.get("timestamp").and_then(parse_time);
                let mk = |role: Role, text: String| {
                    let mut r = Record::new(AGENT, &self.session, role, text);
                    r.time_ms = time;
                    r.project = self.project.clone();
                    r.parent_session = self.parent.clone();
                    r.offset = offset;
                    r
                };
                let role = match m.get("role").and_then(Value::as_str) {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    _ => {
                        return Err(ParseError::Shape {
                            offset,
                            what: "message without a known role",
                        });
                    }
                };
                let mut content = m.get("content").cloned().unwrap_or(Value::Null);
                if role == Role::User {
                    match &mut content {
                        Value::String(s) => *s = strip_reminders(s),
                        Value::Array(items) => {
                            for b in items {
                                if let Some(Value::String(t)) = b.get_mut("text") {
                                    *t = strip_reminders(t);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                blocks::content(role, &content, &mk, out);
            }
            _ => {}
        }
        Ok(())
    }
}
