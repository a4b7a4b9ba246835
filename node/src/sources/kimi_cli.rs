//! Kimi CLI (`kimi-cli`), MoonshotAI's Python coding agent; not the same
//! product as Kimi Code (`~/.kimi-code`, [`super::kimi`]).
//!
//! Sessions live in `${KIMI_SHARE_DIR:-~/.kimi}/sessions/<md5(workdir)>/<uuid>/` (the folder
//! is `<kaos>_<md5>` for a non-local workspace) holding `wire.jsonl`,
//! `context.jsonl` (and rotated `context_N.jsonl`) and `state.json`; a
//! sub-agent runs in `subagents/<agentId>/` beside them with files of the
//! same names, a session `<uuid>/<agentId>` whose parent is `<uuid>`. The
//! working folder is only in `~/.kimi/kimi.json` (`work_dirs[{path, kaos}]`),
//! found by recomputing the folder name from each path.
//!
//! `wire.jsonl` (read when present, as 1.51 writes it) is the append-only
//! log the UI replays: a `{type: metadata, protocol_version}` line, then
//! `{timestamp: float s, message{type, payload}}` lines: `TurnBegin` /
//! `SteerInput` (`user_input`, a string or parts), `ContentPart` (`text`;
//! `think` is skipped), `ToolCall` (`function{name, arguments}`),
//! `ToolResult` (`return_value{output, message, is_error}`). A sub-agent's
//! events echoed into its parent's wire (`SubagentEvent`) are skipped: its
//! own wire is read.
//!
//! `context.jsonl` is read only when no `wire.jsonl` is beside it (older
//! releases): OpenAI-shaped lines `{role, content, tool_calls,
//! tool_call_id}` with roles `user`, `assistant`, `tool` and bookkeeping
//! roles starting with `_` (skipped), and no timestamps. User lines that
//! Kimi itself treats as internal (text starting `<system>` or
//! `<system-reminder>`: the `<system>CHECKPOINT n</system>` markers,
//! D-Mails) are skipped in both files.

//!
//! The reader never writes, and reads nothing but these files and
//! `kimi.json` (never `config.toml`, which holds API keys).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{json_line, walk_stores};
use super::md5;
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "kimi-cli";

/// The Kimi CLI source.
pub struct KimiCli;

fn share_dir(loc: &Locations) -> PathBuf {
    loc.var_or("KIMI_SHARE_DIR", loc.home.join(".kimi"))
}

impl Source for KimiCli {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["KIMI_SHARE_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![share_dir(loc).join("sessions")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        // <workdir>/<session>/{wire,context*}.jsonl and
        // <workdir>/<session>/subagents/<agent>/{wire,context*}.jsonl.
        let mut found = walk_stores(
            &share_dir(loc).join("sessions"),
            4,
            &|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let depth_ok = match p.parent().and_then(Path::parent).and_then(Path::file_name) {
                    // .../subagents/<agent>/<file>
                    Some(n) if n == "subagents" => true,
                    // <workdir>/<session>/<file>: three levels under sessions/
                    _ => p
                        .ancestors()
                        .nth(3)
                        .and_then(Path::file_name)
                        .is_some_and(|n| n == "sessions"),
                };
                depth_ok
                    && (name == "wire.jsonl"
                        || (name.starts_with("context") && name.ends_with(".jsonl")))
            },
            Reader::Lines(context_parser),
        );
        let has_wire: std::collections::HashSet<PathBuf> = found
            .iter()
            .filter(|f| f.path.file_name().is_some_and(|n| n == "wire.jsonl"))
            .filter_map(|f| f.path.parent().map(Path::to_path_buf))
            .collect();
        found.retain_mut(|f| {
            if f.path.file_name().is_some_and(|n| n == "wire.jsonl") {
                f.reader = Reader::Lines(wire_parser);
                true
            } else {
                !f.path.parent().is_some_and(|d| has_wire.contains(d))
            }
        });
        found
    }
}

/// Who a session file belongs to: the session id, its parent for a
/// sub-agent, and the working folder `kimi.json` names for its folder.
#[derive(Debug, Clone, Default, PartialEq)]
struct Identity {
    session: String,
    parent: Option<String>,
    project: Option<String>,
}

impl Identity {
    /// A record of this session read at `offset`.
    fn record(&self, role: Role, text: String, offset: u64, time_ms: Option<i64>) -> Record {
        let mut r = Record::new(AGENT, &self.session, role, text);
        r.time_ms = time_ms;
        r.project = self.project.clone();
        r.parent_session = self.parent.clone();
        r.offset = offset;
        r
    }
}

fn name_of(p: Option<&Path>) -> Option<&str> {
    p.and_then(Path::file_name).and_then(|n| n.to_str())
}

/// The identity of `.../sessions/<workdir>/<uuid>/<file>` or
/// `.../sessions/<workdir>/<uuid>/subagents/<agent>/<file>`.
fn identity(path: &Path) -> Identity {
    let dir = path.parent();
    let sub = dir
        .and_then(Path::parent)
        .filter(|d| d.file_name().is_some_and(|n| n == "subagents"));
    let (session_dir, agent) = match sub {
        Some(subagents) => (subagents.parent(), name_of(dir)),
        None => (dir, None),
    };
    let session = name_of(session_dir).unwrap_or_default().to_owned();
    let workdir = session_dir.and_then(Path::parent);
    let project = workdir.and_then(|w| {
        let key = name_of(Some(w))?;
        let share = w.parent()?.parent()?;
        work_dir_for(&std::fs::read(share.join("kimi.json")).ok()?, key)
    });
    match agent {
        Some(a) => Identity {
            session: format!("{session}/{a}"),
            parent: Some(session),
            project,
        },
        None => Identity {
            session,
            parent: None,
            project,
        },
    }
}

/// The working folder whose session folder is named `key` in a
/// `kimi.json`: `md5(path)`, or `<kaos>_<md5(path)>` for a workspace that
/// is not on the local machine.
fn work_dir_for(kimi_json: &[u8], key: &str) -> Option<String> {
    let v: Value = serde_json::from_slice(kimi_json).ok()?;
    v.get("work_dirs")?.as_array()?.iter().find_map(|wd| {
        let path = wd.get("path")?.as_str()?;
        let digest = md5::hex(path.as_bytes());
        let kaos = wd.get("kaos").and_then(Value::as_str).unwrap_or("local");
        let name = if kaos == "local" {
            digest
        } else {
            format!("{kaos}_{digest}")
        };
        (name == key).then(|| path.to_owned())
    })
}

/// Whether a user message's text is one Kimi writes for itself (a
/// `<system>CHECKPOINT n</system>` marker, a D-Mail, a reminder), not
/// something the user typed: its own test is the first text part's prefix.
fn is_internal(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<system>") || t.starts_with("<system-reminder>")
}

/// The first text of a message's content: a string, or the first part with text.
fn first_text(content: &Value) -> Option<&str> {
    match content {
        Value::String(s) => Some(s),
        Value::Array(parts) => parts.iter().find_map(|p| p.get("text")?.as_str()),
        _ => None,
    }
}

/// Float seconds (the wire's `timestamp`) as Unix ms.
fn seconds_to_ms(v: &Value) -> Option<i64> {
    let s = v.as_f64()?;
    (s.is_finite() && s > 978_307_200.0).then_some((s * 1000.0) as i64)
}

/// A line parser for one Kimi CLI `wire.jsonl`.
pub fn wire_parser(path: &Path) -> Box<dyn LineParser> {
    Box::new(WireParser { id: identity(path) })
}

struct WireParser {
    id: Identity,
}

impl LineParser for WireParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        if v.get("type").and_then(Value::as_str) == Some("metadata") {
            return Ok(());
        }
        let Some(msg) = v.get("message").filter(|m| m.is_object()) else {
            return Err(ParseError::Shape {
                offset,
                what: "wire line without a message",
            });
        };
        let time = v.get("timestamp").and_then(seconds_to_ms);
        let id = &self.id;
        let mk = |role: Role, text: String| id.record(role, text, offset, time);
        let payload = msg.get("payload").unwrap_or(&Value::Null);
        match msg.get("type").and_then(Value::as_str) {
            Some("TurnBegin" | "SteerInput") => {
                let input = payload.get("user_input").unwrap_or(&Value::Null);
                if !first_text(input).is_some_and(is_internal) {
                    blocks::content(Role::User, input, &mk, out);
                }
            }
            Some("ContentPart") if payload.get("type").and_then(Value::as_str) == Some("text") => {
                let text = payload
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                blocks::push_text(Role::Assistant, text, &mk, out);
            }
            Some("ToolCall") => {
                let f = payload.get("function").unwrap_or(payload);
                let name = f.get("name").and_then(Value::as_str).unwrap_or("tool");
                blocks::push_call(name, f.get("arguments").unwrap_or(&Value::Null), &mk, out);
            }
            Some("ToolResult") => {
                let rv = payload.get("return_value").unwrap_or(&Value::Null);
                let mut text = blocks::result_text(rv.get("output").unwrap_or(&Value::Null));
                if text.trim().is_empty()
                    && rv.get("is_error").and_then(Value::as_bool) == Some(true)
                {
                    text = blocks::result_text(rv.get("message").unwrap_or(&Value::Null));
                }
                blocks::push_output(&text, &mk, out);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A line parser for one Kimi CLI `context*.jsonl` (no `wire.jsonl` beside it).
pub fn context_parser(path: &Path) -> Box<dyn LineParser> {
    Box::new(ContextParser { id: identity(path) })
}

struct ContextParser {
    id: Identity,
}

impl LineParser for ContextParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        let v = json_line(line, offset)?;
        let id = &self.id;
        let mk = |role: Role, text: String| id.record(role, text, offset, None);
        let content = v.get("content").unwrap_or(&Value::Null);
        match v.get("role").and_then(Value::as_str) {
            Some("user") => {
                if !first_text(content).is_some_and(is_internal) {
                    blocks::content(Role::User, content, &mk, out);
                }
            }
            Some("assistant") => {
                blocks::content(Role::Assistant, content, &mk, out);
                blocks::openai_tool_calls(v.get("tool_calls").unwrap_or(&Value::Null), &mk, out);
            }
            Some("tool") => blocks::push_output(&blocks::result_text(content), &mk, out),
            Some(_) => {}
            None => {
                return Err(ParseError::Shape {
                    offset,
                    what: "context line without role",
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::feed_lines;

    fn got(recs: &[Record]) -> Vec<(Role, &str)> {
        recs.iter().map(|r| (r.role, r.text.as_str())).collect()
    }

    /// A share dir with `kimi.json` naming `/w/proj` (local) and `/w/far`
    /// (over ssh), a session with a wire and a context, a sub-agent, and a
    /// context-only session.
    fn share() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = dir.path().join(".kimi");
        let local = md5::hex(b"/w/proj");
        let far = format!("ssh_{}", md5::hex(b"/w/far"));
        std::fs::create_dir_all(k.join(format!("sessions/{local}/s1/subagents/a0")))
            .expect("mkdir");
        std::fs::create_dir_all(k.join(format!("sessions/{far}/s2"))).expect("mkdir");
        std::fs::write(
            k.join("kimi.json"),
            r#"{"work_dirs": [{"path": "/w/proj", "kaos": "local"}, {"path": "/w/far", "kaos": "ssh"}]}"#,
        )
        .expect("write");
        for f in [
            "s1/wire.jsonl",
            "s1/context.jsonl",
            "s1/context_1.jsonl",
            "s1/subagents/a0/wire.jsonl",
            "s1/subagents/a0/context.jsonl",
        ] {
            std::fs::write(k.join(format!("sessions/{local}/{f}")), "").expect("write");
        }
        std::fs::write(k.join(format!("sessions/{far}/s2/context.jsonl")), "").expect("write");
        dir
    }

    #[test]
    fn wire_is_read_instead_of_context_and_sub_agents_are_reached() {
        let dir = share();
        let loc = Locations::under_home(dir.path());
        let mut found: Vec<(String, &str)> = KimiCli
            .discover(&loc)
            .iter()
            .map(|f| {
                let p = f.path.strip_prefix(dir.path().join(".kimi/sessions")).expect("under");
                let rest: Vec<_> = p.components().skip(1).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                // What the reader chosen for the file makes of a wire line.
                let Reader::Lines(new) = f.reader else { panic!("not a line reader") };
                let line = br#"{"timestamp": 1796493701.5, "message": {"type": "TurnBegin", "payload": {"user_input": "hi"}}}"#;
                let mut recs = Vec::new();
                let kind = match new(&f.path).line(line, 0, &mut recs) {
                    Ok(()) if recs.len() == 1 => "wire",
                    _ => "context",
                };
                (rest.join("/"), kind)
            })
            .collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                ("s1/subagents/a0/wire.jsonl".to_owned(), "wire"),
                ("s1/wire.jsonl".to_owned(), "wire"),
                ("s2/context.jsonl".to_owned(), "context"),
            ]
        );
    }

    #[test]
    fn project_comes_from_kimi_json_and_sub_agents_name_their_parent() {
        let dir = share();
        let s = dir.path().join(".kimi/sessions");
        let local = s.join(md5::hex(b"/w/proj"));
        assert_eq!(
            identity(&local.join("s1/wire.jsonl")),
            Identity {
                session: "s1".into(),
                parent: None,
                project: Some("/w/proj".into())
            }
        );
        assert_eq!(
            identity(&local.join("s1/subagents/a0/wire.jsonl")),
            Identity {
                session: "s1/a0".into(),
                parent: Some("s1".into()),
                project: Some("/w/proj".into())
            }
        );
        let far = s.join(format!("ssh_{}", md5::hex(b"/w/far")));
        assert_eq!(
            identity(&far.join("s2/context.jsonl")).project.as_deref(),
            Some("/w/far")
        );
        // A folder no work dir hashes to has no project, and no kimi.json is no error.
        assert_eq!(identity(&s.join("0000/s3/wire.jsonl")).project, None);
        assert_eq!(
            identity(Path::new("/nowhere/sessions/x/s4/wire.jsonl")).session,
            "s4"
        );
        assert_eq!(work_dir_for(b"not json", "x"), None);
        assert_eq!(
            work_dir_for(br#"{"work_dirs": [{"kaos": "local"}, 7]}"#, "x"),
            None
        );
    }

    #[test]
    fn wire_lines_become_timed_records_without_internal_turns() {
        let text = concat!(
            "{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n",
            "{\"timestamp\": 1796493701.3393974, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": \"run it\"}}}\n",
            "{\"timestamp\": 1796493701.34, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": [{\"type\": \"text\", \"text\": \"<system>CHECKPOINT 1</system>\"}]}}}\n",
            "{\"timestamp\": 1796493701.5, \"message\": {\"type\": \"ContentPart\", \"payload\": {\"type\": \"think\", \"think\": \"hmm\"}}}\n",
            "{\"timestamp\": 1796493701.7066636, \"message\": {\"type\": \"ToolCall\", \"payload\": {\"type\": \"function\", \"id\": \"c1\", \"function\": {\"name\": \"Shell\", \"arguments\": \"{\\\"command\\\": \\\"echo hello\\\"}\"}}}}\n",
            "{\"timestamp\": 1796493701.72, \"message\": {\"type\": \"ToolResult\", \"payload\": {\"tool_call_id\": \"c1\", \"return_value\": {\"is_error\": false, \"output\": \"hello\\n\", \"message\": \"ok\"}}}}\n",
            "{\"timestamp\": 1796493701.73, \"message\": {\"type\": \"ToolResult\", \"payload\": {\"tool_call_id\": \"c2\", \"return_value\": {\"is_error\": true, \"output\": \"\", \"message\": \"denied\"}}}}\n",
            "{\"timestamp\": 1796493701.7352362, \"message\": {\"type\": \"ContentPart\", \"payload\": {\"type\": \"text\", \"text\": \"done\"}}}\n",
            "{\"timestamp\": 1796493701.74, \"message\": {\"type\": \"SubagentEvent\", \"payload\": {\"event\": {\"type\": \"ContentPart\", \"payload\": {\"type\": \"text\", \"text\": \"echo\"}}}}}\n",
            "not json\n",
            "{\"timestamp\": 1}\n",
        );
        let mut p = wire_parser(Path::new("/k/sessions/w/s1/wire.jsonl"));
        let (recs, errs) = feed_lines(p.as_mut(), text.as_bytes());
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(
            got(&recs),
            vec![
                (Role::User, "run it"),
                (Role::ToolCall, "Shell: echo hello"),
                (Role::ToolOutput, "hello\n"),
                (Role::ToolOutput, "denied"),
                (Role::Assistant, "done"),
            ]
        );
        assert_eq!(recs[0].time_ms, Some(1_796_493_701_339));
        assert_eq!(recs[1].time_ms, Some(1_796_493_701_706));
        assert!(recs.iter().all(|r| r.session_id == "s1"));
    }

    #[test]
    fn context_lines_skip_bookkeeping_roles_and_checkpoints() {
        let mut p = context_parser(Path::new("/k/sessions/abc/0f0e/context.jsonl"));
        let text = concat!(
            "{\"role\":\"_system_prompt\",\"content\":\"sys\"}\n",
            "{\"role\":\"_checkpoint\",\"id\":0}\n",
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"<system>CHECKPOINT 0</system>\"}]}\n",
            "{\"role\":\"user\",\"content\":\"fix it\"}\n",
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"Shell\",\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}}]}\n",
            "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":\"a.txt\"}\n",
            "{\"role\":\"user\",\"content\":\"<system-reminder>be brief</system-reminder>\"}\n",
            "{\"role\":\"_usage\",\"token_count\":5}\n",
            "{\"content\":\"no role\"}\n",
        );
        let (recs, errs) = feed_lines(p.as_mut(), text.as_bytes());
        assert_eq!(errs.len(), 1);
        assert_eq!(
            got(&recs),
            vec![
                (Role::User, "fix it"),
                (Role::Assistant, "ok"),
                (Role::ToolCall, "Shell: ls"),
                (Role::ToolOutput, "a.txt"),
            ]
        );
        assert_eq!(recs[0].session_id, "0f0e");
        assert!(recs.iter().all(|r| r.time_ms.is_none()));
    }
}
