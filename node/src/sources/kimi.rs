//! Kimi Code, the first of Moonshot's two coding agents, which share a
//! name but not a format.
//!
//! **Kimi Code** (`kimi-code`): `${KIMI_CODE_HOME:-~/.kimi-code}/sessions/<workDirKey>/session_<uuid>/`
//! holding `state.json` (`title`, `workDir`, times) and
//! `agents/<agentId>/wire.jsonl`, an append-only wire log (protocol
//! 1.1–1.4) read from the last safe offset. User turns are
//! `context.append_message` with `origin.kind == "user"` (injected
//! reminders have another kind); the answer arrives as
//! `context.append_loop_event` events: `content.part` (`text`; `think` is
//! skipped), `tool.call` (`name`, `args`) and `tool.result`
//! (`result.output`). Every line has `time` in Unix ms. Sub-agents
//! (`agents/agent-*`) are sessions of their own whose parent is the main one.
//!
//! **Kimi CLI** (`kimi-cli`, `~/.kimi`) is a different format, read by
//! [`super::kimi_cli`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{json_line, parse_time, walk_stores};
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

/// The Kimi Code source.
pub struct KimiCode;

fn code_sessions(loc: &Locations) -> PathBuf {
    loc.var_or("KIMI_CODE_HOME", loc.home.join(".kimi-code"))
        .join("sessions")
}

impl Source for KimiCode {
    fn agent(&self) -> &'static str {
        "kimi-code"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["KIMI_CODE_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![code_sessions(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        walk_stores(
            &code_sessions(loc),
            4,
            &|p| p.file_name().is_some_and(|n| n == "wire.jsonl"),
            Reader::Lines(wire_parser),
        )
    }
}

/// A line parser for one Kimi Code `wire.jsonl`.
pub fn wire_parser(path: &Path) -> Box<dyn LineParser> {
    // .../session_<uuid>/agents/<agentId>/wire.jsonl
    let agent_dir = path.parent();
    let agent_id = agent_dir
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("main")
        .to_owned();
    let session_dir = agent_dir.and_then(Path::parent).and_then(Path::parent);
    let session = session_dir
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .map(|n| n.strip_prefix("session_").unwrap_or(n).to_owned())
        .unwrap_or_default();
    let project = session_dir
        .and_then(|d| std::fs::read(d.join("state.json")).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("workDir").and_then(Value::as_str).map(str::to_owned));
    let (session_id, parent) = if agent_id == "main" {
        (session, None)
    } else {
        (format!("{session}/{agent_id}"), Some(session))
    };
    Box::new(WireParser {
        session_id,
        parent,
        project,
    })
}

struct WireParser {
    session_id: String,
    parent: Option<String>,
    project: Option<String>,
}

impl LineParser for WireParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let time = v
            .get("time")
            .or_else(|| v.get("created_at"))
            .and_then(parse_time);
        let mk = |role: Role, text: String| {
            let mut r = Record::new("kimi-code", &self.session_id, role, text);
            r.time_ms = time;
            r.project = self.project.clone();
            r.parent_session = self.parent.clone();
            r.offset = offset;
            r
        };
        match v.get("type").and_then(Value::as_str) {
            Some("config.update") => {
                if let Some(cwd) = v.get("cwd").and_then(Value::as_str)
                    && self.project.is_none()
                {
                    self.project = Some(cwd.to_owned());
                }
            }
            Some("context.append_message") => {
                let m = v.get("message").unwrap_or(&Value::Null);
                let origin = m.pointer("/origin/kind").and_then(Value::as_str);
                if m.get("role").and_then(Value::as_str) == Some("user")
                    && matches!(origin, None | Some("user" | "system_trigger"))
                {
                    let c = m.get("content").unwrap_or(&Value::Null);
                    blocks::content(Role::User, c, &mk, out);
                }
            }
            Some("context.append_loop_event") => {
                let e = v.get("event").unwrap_or(&Value::Null);
                match e.get("type").and_then(Value::as_str) {
                    Some("content.part")
                        if e.pointer("/part/type").and_then(Value::as_str) == Some("text") =>
                    {
                        let t = e.pointer("/part/text").and_then(Value::as_str);
                        blocks::push_text(Role::Assistant, t.unwrap_or_default(), &mk, out);
                    }
                    Some("tool.call") => {
                        let name = e.get("name").and_then(Value::as_str).unwrap_or("tool");
                        blocks::push_call(name, e.get("args").unwrap_or(&Value::Null), &mk, out);
                    }
                    Some("tool.result") => {
                        let r = e.get("result").unwrap_or(&Value::Null);
                        blocks::push_output(&blocks::result_text(r), &mk, out);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::walk_files;
    use crate::sources::common::{feed_lines, has_suffix};

    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/kimi/agent-sessions"
    );

    #[test]
    fn real_wire_files_parse_without_errors() {
        let dir = Path::new(REAL);
        if !dir.is_dir() {
            eprintln!("skipping: {REAL} not present");
            return;
        }
        let files = walk_files(dir, 0, &|p| has_suffix(p, ".wire.jsonl"));
        assert_eq!(files.len(), 3, "{files:?}");
        let mut total = 0;
        for f in files {
            let bytes = std::fs::read(&f).expect("read");
            let mut p = wire_parser(&f);
            let (recs, errs) = feed_lines(p.as_mut(), &bytes);
            assert!(errs.is_empty(), "{}: {errs:?}", f.display());
            assert!(recs.iter().any(|r| r.role == Role::User), "{}", f.display());
            assert!(recs.iter().all(|r| r.time_ms.is_some()));
            total += recs.len();
        }
        assert!(total > 20);
    }
}
