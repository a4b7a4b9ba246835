//! Qwen Code (a Gemini CLI fork): `~/.qwen/projects/<encoded cwd>/chats/<id>.jsonl`,
//! append-only, read from the last safe offset.
//!
//! Where (QwenLM/qwen-code `packages/core/src/config/storage.ts` at
//! 013e660f5799): the global folder is `$QWEN_HOME` (resolved against the
//! working folder when relative) or `~/.qwen`; session data goes under
//! the runtime folder, `$QWEN_RUNTIME_DIR` or else the global one
//! (`getRuntimeBaseDir`, `getProjectDir`). Both are looked in, so sessions
//! written before the runtime folder was moved are still read.
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

    fn env_vars(&self) -> &'static [&'static str] {
        &["QWEN_HOME", "QWEN_RUNTIME_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let global = loc.var_or("QWEN_HOME", loc.home.join(".qwen"));
        let mut v = vec![global.join("projects")];
        if let Some(runtime) = loc.var("QWEN_RUNTIME_DIR") {
            v.insert(0, runtime.join("projects"));
        }
        v.dedup();
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        self.roots(loc)
            .iter()
            .flat_map(|root| {
                walk_stores(
                    root,
                    3,
                    &|p| {
                        has_suffix(p, ".jsonl")
                            && p.parent()
                                .and_then(|d| d.file_name())
                                .is_some_and(|n| n == "chats")
                    },
                    Reader::Lines(new_parser),
                )
            })
            .collect()
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

    /// `QWEN_RUNTIME_DIR` moves the sessions; `QWEN_HOME` moves the global
    /// folder, where sessions live when no runtime folder is set.
    #[test]
    fn qwen_home_and_runtime_dir_move_the_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let chat = |base: &Path, id: &str| {
            let d = base.join("projects/-work-app/chats");
            std::fs::create_dir_all(&d).expect("mkdir");
            let p = d.join(format!("{id}.jsonl"));
            std::fs::write(&p, "{}\n").expect("write");
            p
        };
        let home = dir.path().join("home");
        let default = chat(&home.join(".qwen"), "a");
        let qhome = chat(&dir.path().join("qhome"), "b");
        let runtime = chat(&dir.path().join("rt"), "c");
        let found = |loc: &Locations| -> Vec<PathBuf> {
            Qwen.discover(loc).into_iter().map(|f| f.path).collect()
        };
        let mut loc = Locations::under_home(&home);
        assert_eq!(found(&loc), [default]);
        loc.vars
            .insert("QWEN_HOME".into(), dir.path().join("qhome"));
        assert_eq!(found(&loc), std::slice::from_ref(&qhome));
        loc.vars
            .insert("QWEN_RUNTIME_DIR".into(), dir.path().join("rt"));
        assert_eq!(found(&loc), [runtime, qhome]);
        assert!(crate::sources::env_vars().contains(&"QWEN_RUNTIME_DIR"));
    }
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
