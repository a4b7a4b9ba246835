//! GitHub Copilot CLI: `~/.copilot/session-state/<id>/events.jsonl`.
//!
//! Every line is an event `{type, data, id, timestamp, parentId}`:
//! `session.start` carries `data.sessionId` and `data.context.cwd` (the
//! indexer re-feeds line 1 when it resumes mid-file; the folder name is the
//! fallback id); `user.message` → user (`content`, never the
//! `transformedContent` with injected datetime/reminders); `assistant.message`
//! → assistant (tool-only messages have empty content and are skipped);
//! `tool.execution_start` → tool call; `tool.execution_complete` → tool
//! output (failures too). The bookkeeping pseudo-tools `report_intent` and
//! `task_complete` are skipped along with their results.
//!
//! Subagents (the `task` tool, 1.0.x) run inside the same file: between
//! `subagent.started` and `subagent.completed` (both naming the `task`
//! call's `toolCallId`) the child's prompt is a `user.message`, and its
//! turns, tool calls and answers carry `data.parentToolCallId`. They are
//! read as their own session, `<session id>-<toolCallId>`, whose parent is
//! the file's session.
//!
//! `$COPILOT_HOME` replaces `~/.copilot` as the whole folder (GitHub's
//! "Copilot CLI configuration directory" reference; the CLI's own source
//! is not public).
//!
//! The legacy single-document form (`~/.copilot/history-session-state/*.json`,
//! `{sessionId, startTime, timeline[]}`) is read whole; offsets there are the
//! entry's index in `timeline[]`.

use std::collections::{HashSet, VecDeque};
use std::path::Path;

use serde_json::Value;

use super::common::{
    TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, has_suffix, json_line, parse_time, walk_files,
};
use super::{LineParser, Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "copilot";
const PSEUDO_TOOLS: [&str; 2] = ["report_intent", "task_complete"];

/// The Copilot CLI source.
pub struct Copilot;

/// `$COPILOT_HOME`, else `~/.copilot`.
fn home(loc: &Locations) -> std::path::PathBuf {
    loc.var_or("COPILOT_HOME", loc.copilot_home.clone())
}

impl Source for Copilot {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["COPILOT_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        let h = home(loc);
        vec![h.join("session-state"), h.join("history-session-state")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let h = home(loc);
        let events = walk_files(&h.join("session-state"), 1, &|p| {
            p.file_name().is_some_and(|n| n == "events.jsonl")
        });
        let legacy = walk_files(&h.join("history-session-state"), 0, &|p| {
            has_suffix(p, ".json")
        });
        events
            .into_iter()
            .map(|path| SourceFile::new(path, Reader::Lines(new_parser)))
            .chain(
                legacy
                    .into_iter()
                    .map(|path| SourceFile::new(path, Reader::Whole(parse_legacy))),
            )
            .collect()
    }
}

/// A line parser for one `events.jsonl`.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    let folder = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    Box::new(EventsParser {
        session_id: folder.to_owned(),
        project: None,
        pseudo_calls: HashSet::new(),
        awaiting_prompt: VecDeque::new(),
    })
}

struct EventsParser {
    session_id: String,
    project: Option<String>,
    /// Tool call ids of pseudo-tools, whose completions are skipped too.
    pseudo_calls: HashSet<String>,
    /// Subagents started whose prompt (a `user.message`) has not come yet,
    /// by the `task` call's id, oldest first.
    awaiting_prompt: VecDeque<String>,
}

impl EventsParser {
    /// A record of this file's session, or of the subagent the `task`
    /// call `sub` started.
    fn record(
        &self,
        sub: Option<&str>,
        role: Role,
        text: String,
        time: Option<i64>,
        offset: u64,
    ) -> Record {
        let mut r = match sub {
            Some(call) => {
                let mut r = Record::new(AGENT, &format!("{}-{call}", self.session_id), role, text);
                r.parent_session = Some(self.session_id.clone());
                r
            }
            None => Record::new(AGENT, &self.session_id, role, text),
        };
        r.project = self.project.clone();
        r.time_ms = time;
        r.offset = offset;
        r
    }
}

impl LineParser for EventsParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        let v = json_line(line, offset)?;
        let Some(kind) = v.get("type").and_then(Value::as_str) else {
            return Err(ParseError::Shape {
                offset,
                what: "event without type",
            });
        };
        let data = v.get("data").unwrap_or(&Value::Null);
        let time = v.get("timestamp").and_then(parse_time);
        let s = |k: &str| {
            data.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
        };
        // Events of a subagent's own turns name the `task` call.
        let sub = s("parentToolCallId");
        match kind {
            "subagent.started" => {
                if let Some(id) = s("toolCallId") {
                    self.awaiting_prompt.push_back(id.to_owned());
                }
            }
            "subagent.completed" | "subagent.failed" => {
                if let Some(id) = s("toolCallId") {
                    self.awaiting_prompt.retain(|c| c != id);
                }
            }
            "session.start" | "session.resume" => {
                if let Some(id) = s("sessionId") {
                    self.session_id = id.to_owned();
                }
                if let Some(cwd) = data.pointer("/context/cwd").and_then(Value::as_str)
                    && !cwd.is_empty()
                {
                    self.project = Some(cwd.to_owned());
                }
            }
            "user.message" => {
                // A started subagent's prompt comes first, before its turns.
                let child = match sub {
                    Some(c) => Some(c.to_owned()),
                    None => self.awaiting_prompt.pop_front(),
                };
                if let Some(text) = s("content") {
                    out.push(self.record(
                        child.as_deref(),
                        Role::User,
                        cap_text(text.trim(), TEXT_CAP),
                        time,
                        offset,
                    ));
                }
            }
            "assistant.message" => {
                if let Some(text) = s("content") {
                    let text = cap_text(text.trim(), TEXT_CAP);
                    out.push(self.record(sub, Role::Assistant, text, time, offset));
                }
            }
            "tool.execution_start" => {
                let name = s("toolName").unwrap_or("tool");
                if PSEUDO_TOOLS.contains(&name) {
                    if let Some(id) = s("toolCallId") {
                        self.pseudo_calls.insert(id.to_owned());
                    }
                    return Ok(());
                }
                let args = data.get("arguments").unwrap_or(&Value::Null);
                let (text, files) = describe_tool(name, args);
                let mut r = self.record(sub, Role::ToolCall, text, time, offset);
                r.files = files;
                out.push(r);
            }
            "tool.execution_complete" => {
                if s("toolCallId").is_some_and(|id| self.pseudo_calls.contains(id)) {
                    return Ok(());
                }
                let text = result_text(data);
                if !text.trim().is_empty() {
                    let text = cap_text(&text, TOOL_OUTPUT_CAP);
                    out.push(self.record(sub, Role::ToolOutput, text, time, offset));
                }
            }
            // system.message (system prompt), turn markers, model/mode
            // changes, task_complete, shutdown, unknown kinds.
            _ => {}
        }
        Ok(())
    }
}

/// Text of a completed tool: `result.content`, else an error message.
fn result_text(data: &Value) -> String {
    let from = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| Some(Value::Object(o.clone()).to_string())),
        Some(other) => Some(other.to_string()),
    };
    from(data.pointer("/result/content"))
        .or_else(|| from(data.get("error")))
        .unwrap_or_default()
}

/// A compact line for a tool call plus the files it names.
fn describe_tool(name: &str, args: &Value) -> (String, Vec<String>) {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let files: Vec<String> = s("path").map(str::to_owned).into_iter().collect();
    let mut text = match (s("command"), files.first()) {
        // str_replace_editor-style tools: `command` is the sub-command.
        (Some(cmd), Some(f)) => format!("{name} {cmd} {f}"),
        (Some(cmd), None) => format!("{name}: {cmd}"),
        (None, Some(f)) => format!("{name} {f}"),
        // The `task` tool: what the subagent is asked to do.
        (None, None) if s("prompt").is_some() => match s("description") {
            Some(d) => format!("{name}: {d}\n{}", s("prompt").unwrap_or_default()),
            None => format!("{name}: {}", s("prompt").unwrap_or_default()),
        },
        (None, None) => match s("query").or(s("pattern")).or(s("url")) {
            Some(q) => format!("{name}: {q}"),
            None if args.as_object().is_some_and(|o| !o.is_empty()) => format!("{name} {args}"),
            None => name.to_owned(),
        },
    };
    if let Some(new) = s("new_str").or(s("file_text")).or(s("content")) {
        text.push('\n');
        text.push_str(new);
    }
    (cap_text(&text, TEXT_CAP), files)
}

/// Parses a legacy single-document session (`timeline[]`).
pub fn parse_legacy(path: &Path, bytes: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    let doc: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(source) => {
            out.errors.push(ParseError::Json { offset: 0, source });
            return out;
        }
    };
    let Some(timeline) = doc.get("timeline").and_then(Value::as_array) else {
        out.errors.push(ParseError::Shape {
            offset: 0,
            what: "legacy session without timeline",
        });
        return out;
    };
    let session_id = doc
        .get("sessionId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| path.file_stem().and_then(|s| s.to_str()))
        .unwrap_or_default()
        .to_owned();
    for (i, entry) in timeline.iter().enumerate() {
        let time = entry.get("timestamp").and_then(parse_time);
        let mut push = |role: Role, text: String, files: Vec<String>| {
            let mut r = Record::new(AGENT, &session_id, role, text);
            r.time_ms = time;
            r.files = files;
            r.offset = i as u64;
            out.records.push(r);
        };
        let text = entry
            .get("text")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty());
        match entry.get("type").and_then(Value::as_str) {
            Some("user") => {
                if let Some(t) = text {
                    push(Role::User, cap_text(t, TEXT_CAP), Vec::new());
                }
            }
            Some("copilot") => {
                if let Some(t) = text {
                    push(Role::Assistant, cap_text(t, TEXT_CAP), Vec::new());
                }
            }
            Some("tool_call_completed") => {
                let name = entry.get("name").and_then(Value::as_str).unwrap_or("tool");
                if PSEUDO_TOOLS.contains(&name) {
                    continue;
                }
                let args = entry.get("arguments").unwrap_or(&Value::Null);
                let (call, files) = describe_tool(name, args);
                push(Role::ToolCall, call, files);
                let log = match entry.pointer("/result/log") {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                if !log.trim().is_empty() {
                    push(
                        Role::ToolOutput,
                        cap_text(&log, TOOL_OUTPUT_CAP),
                        Vec::new(),
                    );
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copilot_home_moves_the_whole_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let moved = dir.path().join("cp");
        let s = moved.join("session-state/3f1c");
        std::fs::create_dir_all(&s).expect("mkdir");
        std::fs::write(s.join("events.jsonl"), "{}\n").expect("write");
        std::fs::create_dir_all(moved.join("history-session-state")).expect("mkdir");
        std::fs::write(moved.join("history-session-state/old.json"), "{}").expect("write");
        let mut loc = Locations::under_home(&dir.path().join("home"));
        assert!(Copilot.discover(&loc).is_empty());
        loc.vars.insert("COPILOT_HOME".into(), moved.clone());
        let found: Vec<std::path::PathBuf> =
            Copilot.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(
            found,
            [
                s.join("events.jsonl"),
                moved.join("history-session-state/old.json")
            ]
        );
        assert_eq!(Copilot.roots(&loc)[0], moved.join("session-state"));
    }

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");
    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/copilot-cli"
    );
    const EVENTS: &str = ".copilot/session-state/e0a1b2c3-d4e5-4f60-8172-93a4b5c6d7e8/events.jsonl";

    /// Feeds complete lines the way the indexer does; a torn tail is not fed.
    fn feed(path: &Path, bytes: &[u8]) -> (Vec<Record>, Vec<ParseError>) {
        crate::sources::common::feed_lines(new_parser(path).as_mut(), bytes)
    }

    #[test]
    fn discovers_events_and_legacy() {
        let loc = Locations::under_home(Path::new(FIXTURES));
        let found = Copilot.discover(&loc);
        let kinds: Vec<(String, String)> = found
            .iter()
            .map(|f| {
                (
                    f.path.file_name().unwrap().to_string_lossy().into_owned(),
                    format!("{:?}", f.reader),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("events.jsonl".to_owned(), "Lines".to_owned()),
                ("events.jsonl".to_owned(), "Lines".to_owned()),
                (
                    "5f6e7d8c-0b1a-4c2d-9e3f-a4b5c6d7e8f9.json".to_owned(),
                    "Whole".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn events_fixture() {
        let path = Path::new(FIXTURES).join(EVENTS);
        let bytes = std::fs::read(&path).unwrap();
        let (r, errs) = feed(&path, &bytes);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(matches!(errs[0], ParseError::Json { .. }));
        assert!(r.iter().all(|r| r.agent == "copilot"
            && r.session_id == "e0a1b2c3-d4e5-4f60-8172-93a4b5c6d7e8"
            && r.project.as_deref() == Some("/home/dev/gateway")));
        let got: Vec<(Role, &str)> = r.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got[0],
            (
                Role::User,
                "set the rate limiter window, we had an outage yesterday"
            )
        );
        assert_eq!(
            got[1],
            (Role::ToolCall, "bash: grep -rn RATE_WINDOW config/")
        );
        assert_eq!(got[2].0, Role::ToolOutput);
        assert!(
            got[2]
                .1
                .contains("xoxb-839548620579-8682828807290-XZjljENUhJduRHHJEYXg4Jdp")
        );
        assert_eq!(got[3].0, Role::ToolCall);
        assert!(
            got[3]
                .1
                .starts_with("edit /home/dev/gateway/config/limits.toml\n")
        );
        assert_eq!(r[3].files, vec!["/home/dev/gateway/config/limits.toml"]);
        assert_eq!(got[4].0, Role::ToolOutput);
        assert!(
            got[4]
                .1
                .contains("Authorization: Bearer rwZbqcabUGJmGEp7CgQ0PBQFI14zGtSnovm14TUO")
        );
        assert_eq!(
            got[5],
            (
                Role::Assistant,
                "Done: rate limiter window set to 90 seconds after the incident."
            )
        );
        assert_eq!(r.len(), 6);
        // ISO Z and ISO-with-offset timestamps.
        assert_eq!(r[0].time_ms, Some(1_762_419_600_000));
        assert_eq!(r[5].time_ms, Some(1_762_419_660_000));
        // transformedContent, pseudo-tools, system prompt and torn line are absent.
        for bad in [
            "current_datetime",
            "Adjusting limits",
            "You are Copilot",
            "torn",
        ] {
            assert!(!r.iter().any(|r| r.text.contains(bad)), "{bad}");
        }
    }

    /// Copilot CLI 1.0.102 with a subagent (`tools/realagents/scenario.sh
    /// --subagent copilot`): the child's events sit in the parent's file.
    #[test]
    fn recorded_subagent_is_its_own_session() {
        let parent = "c71d9b92-277f-4e5d-a0ea-08a1e3010cf2";
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "../fixtures/agents/copilot/1.0.102-subagent/home/.copilot/session-state/{parent}/events.jsonl"
        ));
        let (recs, errors) = feed(&path, &std::fs::read(&path).unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        let child = format!("{parent}-call_ddc78fba24694893aef4");
        let got: Vec<(&str, Option<&str>, Role, &str)> = recs
            .iter()
            .map(|r| {
                (
                    r.session_id.as_str(),
                    r.parent_session.as_deref(),
                    r.role,
                    r.text.as_str(),
                )
            })
            .collect();
        let task = "Run the shell command `echo from-subagent` and report exactly what it printed.";
        let answer = "The command printed from-subagent.";
        assert_eq!(
            got,
            [
                (
                    parent,
                    None,
                    Role::User,
                    "Ask a subagent to run `echo from-subagent` with the shell and report, then \
                     tell me what we decided about the platypus build."
                ),
                (
                    parent,
                    None,
                    Role::ToolCall,
                    &*format!("task: Run echo from-subagent\n{task}")
                ),
                (child.as_str(), Some(parent), Role::User, task),
                (
                    child.as_str(),
                    Some(parent),
                    Role::ToolCall,
                    "bash: echo from-subagent"
                ),
                (
                    child.as_str(),
                    Some(parent),
                    Role::ToolOutput,
                    "from-subagent\n<shellId: 0 completed with exit code 0>"
                ),
                (child.as_str(), Some(parent), Role::Assistant, answer),
                (parent, None, Role::ToolOutput, answer),
                (
                    parent,
                    None,
                    Role::Assistant,
                    "The subagent reported from-subagent. Decision: the platypus build runs \
                     nightly because the daytime runners are saturated."
                ),
            ]
        );
    }

    #[test]
    fn empty_session_falls_back_to_folder_id() {
        let path = Path::new(FIXTURES)
            .join(".copilot/session-state/f1f2f3f4-0000-4000-8000-00000000abcd/events.jsonl");
        let (r, errs) = feed(&path, &std::fs::read(&path).unwrap());
        assert!(r.is_empty() && errs.is_empty());
        let mut p = new_parser(&path);
        let mut out = Vec::new();
        p.line(
            br#"{"type":"user.message","data":{"content":"hi"}}"#,
            0,
            &mut out,
        )
        .unwrap();
        assert_eq!(out[0].session_id, "f1f2f3f4-0000-4000-8000-00000000abcd");
        assert!(p.line(br#"{"data":{}}"#, 0, &mut out).is_err());
    }

    #[test]
    fn legacy_fixture() {
        let path = Path::new(FIXTURES)
            .join(".copilot/history-session-state/5f6e7d8c-0b1a-4c2d-9e3f-a4b5c6d7e8f9.json");
        let p = parse_legacy(&path, &std::fs::read(&path).unwrap());
        assert!(p.errors.is_empty());
        let got: Vec<(Role, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "which port does the gateway health check use?"),
                (
                    Role::ToolCall,
                    "str_replace_editor view /home/dev/gateway/health.go"
                ),
                (Role::ToolOutput, "const healthPort = 8081"),
                (Role::Assistant, "The health check listens on port 8081."),
            ]
        );
        assert!(
            p.records
                .iter()
                .all(|r| r.session_id == "5f6e7d8c-0b1a-4c2d-9e3f-a4b5c6d7e8f9")
        );
        assert_eq!(p.records[1].files, vec!["/home/dev/gateway/health.go"]);
    }

    #[test]
    fn real_files() {
        let root = Path::new(REAL);
        if !root.exists() {
            eprintln!("skipping: {} not found", root.display());
            return;
        }
        let f = root.join("VibeCodingTracker/events.jsonl");
        let (r, errs) = feed(&f, &std::fs::read(&f).unwrap());
        assert!(errs.is_empty(), "{errs:?}");
        assert!(
            r.iter()
                .all(|r| r.session_id == "96ef38f0-9d09-45c3-8124-6448c36090ed"
                    && r.project.as_deref() == Some("/home/wei/repo/VibeCodingTracker")
                    && !r.text.is_empty()
                    && r.time_ms.is_some())
        );
        let users: Vec<&Record> = r.iter().filter(|r| r.role == Role::User).collect();
        assert_eq!(users.len(), 1); // the second user.message has empty content
        assert!(users[0].text.starts_with("請不要修改任何代碼"));
        assert!(!users[0].text.contains("current_datetime"));
        assert_eq!(r.iter().filter(|r| r.role == Role::Assistant).count(), 1);
        // 11 executions, one report_intent and one task_complete among them.
        assert_eq!(r.iter().filter(|r| r.role == Role::ToolCall).count(), 9);
        assert_eq!(r.iter().filter(|r| r.role == Role::ToolOutput).count(), 9);
        assert!(r.iter().any(|r| r.role == Role::ToolCall
            && r.files == vec!["/home/wei/repo/VibeCodingTracker/Cargo.toml".to_owned()]));

        let f = root.join("VibeCodingTracker/legacy-session.json");
        let p = parse_legacy(&f, &std::fs::read(&f).unwrap());
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert!(!p.records.is_empty());
        assert!(
            p.records
                .iter()
                .all(|r| r.session_id == "0b2a81da-02cf-4cbb-ae14-07c597b84f4e")
        );
        assert!(
            p.records
                .iter()
                .any(|r| r.role == Role::User && r.text.contains("Vibe Code Tracker"))
        );
        assert!(p.records.iter().any(|r| {
            r.role == Role::Assistant
                && r.text
                    .contains("I'll help you update the project description")
        }));
        assert_eq!(
            p.records
                .iter()
                .filter(|r| r.role == Role::ToolCall)
                .count(),
            15
        );
    }

    #[test]
    fn every_truncation_never_panics() {
        // No-panic property: every prefix of every fixture line is fed.
        let path = Path::new(FIXTURES).join(EVENTS);
        let bytes = std::fs::read(&path).unwrap();
        for line in bytes.split(|&b| b == b'\n') {
            for n in 0..=line.len() {
                let mut p = new_parser(&path);
                let _ = p.line(&line[..n], 0, &mut Vec::new());
            }
        }
        let legacy = Path::new(FIXTURES)
            .join(".copilot/history-session-state/5f6e7d8c-0b1a-4c2d-9e3f-a4b5c6d7e8f9.json");
        let bytes = std::fs::read(&legacy).unwrap();
        for n in 0..bytes.len() {
            let _ = parse_legacy(&legacy, &bytes[..n]);
        }
    }

    proptest::proptest! {
        // No-panic property: arbitrary bytes only yield Ok or Err.
        #[test]
        fn arbitrary_lines_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let mut p = new_parser(Path::new("x/events.jsonl"));
            let _ = p.line(&bytes, 0, &mut Vec::new());
            let _ = parse_legacy(Path::new("x.json"), &bytes);
        }
    }
}
