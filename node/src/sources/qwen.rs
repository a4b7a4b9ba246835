//! Qwen Code (a Gemini CLI fork): `~/.qwen/projects/<encoded cwd>/chats/<id>.jsonl`,
//! append-only, read from the last safe offset.
//!
//! Each line is `{uuid, parentUuid, sessionId, timestamp, type, cwd,
//! message{role: user|model, parts[]}}`; `type` is `user`, `assistant`,
//! `tool_result` or `system` (telemetry and slash commands, skipped). Parts
//! are Gemini's: `{text}` (skipped when `thought: true`),
//! `{functionCall{name, args}}` and `{functionResponse{name, response}}`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_line, parse_time, walk_stores};
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "qwen";

/// The Qwen Code source.
pub struct Qwen;

impl Source for Qwen {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![loc.home.join(".qwen/projects")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let root = loc.home.join(".qwen/projects");
        walk_stores(
            &root,
            3,
            &|p| {
                has_suffix(p, ".jsonl")
                    && p.parent()
                        .and_then(|d| d.file_name())
                        .is_some_and(|n| n == "chats")
            },
            Reader::Lines(new_parser),
        )
    }
}

/// A line parser for one Qwen Code chat file.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let stem = file_stem(path);
    Box::new(QwenParser {
        fallback: stem.to_owned(),
    })
}

struct QwenParser {
    fallback: String,
}

impl LineParser for QwenParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        if !matches!(kind, "user" | "assistant" | "tool_result") {
            return Ok(());
        }
        let session = v
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or(&self.fallback)
            .to_owned();
        let time = v.get("timestamp").and_then(parse_time);
        let project = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &session, role, text);
            r.time_ms = time;
            r.project = project.clone();
            r.offset = offset;
            r
        };
        let role = match v.pointer("/message/role").and_then(Value::as_str) {
            Some("user") if kind == "user" => Role::User,
            _ => Role::Assistant,
        };
        let mut text = String::new();
        for part in v
            .pointer("/message/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(call) = part.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str).unwrap_or("tool");
                blocks::push_call(name, call.get("args").unwrap_or(&Value::Null), &mk, out);
            } else if let Some(resp) = part.get("functionResponse") {
                let r = resp.get("response").unwrap_or(&Value::Null);
                blocks::push_output(&blocks::result_text(r), &mk, out);
            } else if let Some(t) = part.get("text").and_then(Value::as_str)
                && part.get("thought").and_then(Value::as_bool) != Some(true)
            {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(t);
            }
        }
        blocks::push_text(role, &text, &mk, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::feed_lines;

    #[test]
    fn thoughts_and_telemetry_are_skipped() {
        let mut p = new_parser(Path::new("/x/chats/abc.jsonl"));
        let text = concat!(
            "{\"type\":\"system\",\"subtype\":\"ui_telemetry\",\"sessionId\":\"s1\"}\n",
            "{\"type\":\"user\",\"sessionId\":\"s1\",\"timestamp\":\"2025-11-01T00:00:00Z\",\"cwd\":\"/p\",\"message\":{\"role\":\"user\",\"parts\":[{\"text\":\"hello\"}]}}\n",
            "{\"type\":\"assistant\",\"sessionId\":\"s1\",\"message\":{\"role\":\"model\",\"parts\":[{\"text\":\"hmm\",\"thought\":true},{\"text\":\"answer\"},{\"functionCall\":{\"name\":\"run_shell_command\",\"args\":{\"command\":\"ls\"}}}]}}\n",
            "{\"type\":\"tool_result\",\"sessionId\":\"s1\",\"message\":{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"name\":\"run_shell_command\",\"response\":{\"output\":\"a.txt\"}}}]}}\n",
            "not json\n",
        );
        let (recs, errs) = feed_lines(p.as_mut(), text.as_bytes());
        assert_eq!(errs.len(), 1);
        let got: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "hello"),
                (Role::ToolCall, "run_shell_command: ls"),
                (Role::Assistant, "answer"),
                (Role::ToolOutput, "a.txt"),
            ]
        );
        assert_eq!(recs[0].project.as_deref(), Some("/p"));
    }
}
