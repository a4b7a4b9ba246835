//! pi (pi-coding-agent): `~/.pi/agent/sessions/**/*.jsonl`, append-only.
//! `$PI_CODING_AGENT_DIR` replaces `~/.pi/agent` (badlogic/pi-mono
//! `packages/coding-agent/src/config.ts` at 406a8762a37a: `getAgentDir`,
//! `getSessionsDir`).
//!
//! The first line is a `{type:"session", id, cwd, ...}` header (the early
//! format and v3 differ only in extra fields). `message` lines hold
//! `message.role` `user` / `assistant` / `toolResult`: text blocks become
//! records, `thinking` blocks are skipped, assistant `toolCall` blocks become
//! tool calls, and `toolResult` messages become (capped) tool outputs.
//! `model_change`, `thinking_level_change`, `compaction` and unknown lines
//! are skipped. Times prefer the message's own Unix-ms `timestamp`, then the
//! line's ISO `timestamp`.

use std::path::Path;

use serde_json::Value;

use super::common::{
    TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, content_text, has_suffix, json_line, parse_time,
    walk_stores,
};
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "pi";

/// The pi source.
pub struct Pi;

/// `$PI_CODING_AGENT_DIR/sessions`, else `~/.pi/agent/sessions`.
fn sessions_dir(loc: &Locations) -> std::path::PathBuf {
    loc.var_or("PI_CODING_AGENT_DIR", loc.pi_home.join("agent"))
        .join("sessions")
}

impl Source for Pi {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["PI_CODING_AGENT_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![sessions_dir(loc)]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let root = sessions_dir(loc);
        walk_stores(
            &root,
            4,
            &|p| has_suffix(p, ".jsonl"),
            Reader::Lines(new_parser),
        )
    }
}

/// A line parser for one pi session file.
pub fn new_parser(path: &Path) -> Box<dyn LineParser> {
    // `<timestamp>_<uuid>.jsonl`: the uuid is the session id until the header says otherwise.
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let fallback = stem.rsplit_once('_').map_or(stem, |(_, id)| id);
    Box::new(PiParser {
        session_id: fallback.to_owned(),
        project: None,
    })
}

struct PiParser {
    session_id: String,
    project: Option<String>,
}

impl PiParser {
    fn record(&self, role: Role, text: String, time: Option<i64>, offset: u64) -> Record {
        let mut r = Record::new(AGENT, &self.session_id, role, text);
        r.project = self.project.clone();
        r.time_ms = time;
        r.offset = offset;
        r
    }
}

impl LineParser for PiParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        let v = json_line(line, offset)?;
        let Some(obj) = v.as_object() else {
            return Err(ParseError::Shape {
                offset,
                what: "line is not an object",
            });
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("session") => {
                if let Some(id) = obj
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.session_id = id.to_owned();
                }
                if let Some(cwd) = obj
                    .get("cwd")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.project = Some(cwd.to_owned());
                }
            }
            Some("message") => {
                let Some(msg) = obj.get("message").and_then(Value::as_object) else {
                    return Err(ParseError::Shape {
                        offset,
                        what: "message line without message",
                    });
                };
                let time = msg
                    .get("timestamp")
                    .and_then(parse_time)
                    .or_else(|| obj.get("timestamp").and_then(parse_time));
                let content = msg.get("content").unwrap_or(&Value::Null);
                match msg.get("role").and_then(Value::as_str) {
                    Some("user") => {
                        let text = content_text(content);
                        let text = text.trim();
                        if !text.is_empty() {
                            out.push(self.record(
                                Role::User,
                                cap_text(text, TEXT_CAP),
                                time,
                                offset,
                            ));
                        }
                    }
                    Some("assistant") => {
                        let text = content_text(content);
                        let text = text.trim();
                        if !text.is_empty() {
                            let r = self.record(
                                Role::Assistant,
                                cap_text(text, TEXT_CAP),
                                time,
                                offset,
                            );
                            out.push(r);
                        }
                        for block in content.as_array().into_iter().flatten() {
                            if block.get("type").and_then(Value::as_str) != Some("toolCall") {
                                continue;
                            }
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
                            let args = block.get("arguments").unwrap_or(&Value::Null);
                            let (text, files) = describe_tool(name, args);
                            let mut r = self.record(Role::ToolCall, text, time, offset);
                            r.files = files;
                            out.push(r);
                        }
                    }
                    Some("toolResult") => {
                        let text = content_text(content);
                        if !text.trim().is_empty() {
                            let text = cap_text(&text, TOOL_OUTPUT_CAP);
                            out.push(self.record(Role::ToolOutput, text, time, offset));
                        }
                    }
                    Some(_) => {}
                    None => {
                        return Err(ParseError::Shape {
                            offset,
                            what: "message without role",
                        });
                    }
                }
            }
            // model_change, thinking_level_change, compaction, custom, ...
            _ => {}
        }
        Ok(())
    }
}

/// A compact line for a tool call plus the files it names.
fn describe_tool(name: &str, args: &Value) -> (String, Vec<String>) {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let files: Vec<String> = s("path")
        .or(s("file_path"))
        .map(str::to_owned)
        .into_iter()
        .collect();
    let mut text = if let Some(cmd) = s("command") {
        format!("{name}: {cmd}")
    } else if let Some(f) = files.first() {
        format!("{name} {f}")
    } else if args.as_object().is_some_and(|o| !o.is_empty()) {
        format!("{name} {args}")
    } else {
        name.to_owned()
    };
    if let Some(new) = s("newText").or(s("content")) {
        text.push('\n');
        text.push_str(new);
    }
    (cap_text(&text, TEXT_CAP), files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_coding_agent_dir_moves_the_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = dir.path().join("pi-agent");
        let d = agent.join("sessions/--work-app--");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("s.jsonl"), "{}\n").expect("write");
        let mut loc = Locations::under_home(&dir.path().join("home"));
        assert!(Pi.discover(&loc).is_empty());
        loc.vars.insert("PI_CODING_AGENT_DIR".into(), agent.clone());
        let found: Vec<std::path::PathBuf> =
            Pi.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(found, [d.join("s.jsonl")]);
        assert_eq!(Pi.roots(&loc), [agent.join("sessions")]);
    }
    use crate::sources::common::walk_files;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");
    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/pi"
    );
    const SESSION: &str = ".pi/agent/sessions/--home-dev-tzparse--/2025-11-20T09-00-00-000Z_5d0c8e2a-4b7f-4f1e-9c3d-2a1b0e9f8d76.jsonl";

    /// Feeds complete lines the way the indexer does; a torn tail is not fed.
    fn feed(path: &Path, bytes: &[u8]) -> (Vec<Record>, Vec<ParseError>) {
        crate::sources::common::feed_lines(new_parser(path).as_mut(), bytes)
    }

    #[test]
    fn discovers_session_files() {
        let loc = Locations::under_home(Path::new(FIXTURES));
        let found = Pi.discover(&loc);
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|f| matches!(f.reader, Reader::Lines(_))));
    }

    #[test]
    fn fixture_session() {
        let path = Path::new(FIXTURES).join(SESSION);
        let bytes = std::fs::read(&path).unwrap();
        let (r, errs) = feed(&path, &bytes);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(matches!(errs[0], ParseError::Json { .. }));
        assert!(r.iter().all(|r| r.agent == "pi"
            && r.session_id == "5d0c8e2a-4b7f-4f1e-9c3d-2a1b0e9f8d76"
            && r.project.as_deref() == Some("/home/dev/tzparse")));
        let got: Vec<(Role, &str)> = r.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got[0],
            (Role::User, "why does test_parse_dates fail only in CI?")
        );
        assert_eq!(
            got[1],
            (Role::ToolCall, "bash: cargo test -p tzparse parse_dates")
        );
        assert_eq!(r[1].files, Vec::<String>::new());
        assert_eq!(got[2].0, Role::ToolOutput);
        assert!(got[2].1.contains("sk_live_mrcXgGCJbW56eCuNGMGmSrCG"));
        assert_eq!(
            got[3],
            (
                Role::Assistant,
                "Found it: the flaky test was caused by a timezone assumption in the parser; it used Local instead of UTC."
            )
        );
        assert_eq!(got[4].0, Role::ToolCall);
        assert!(got[4].1.starts_with("edit src/parse.rs\n"));
        assert!(got[4].1.contains("Utc.from_utc_datetime"));
        assert_eq!(r[4].files, vec!["src/parse.rs"]);
        assert_eq!(
            got[5],
            (
                Role::ToolOutput,
                "Successfully replaced text in src/parse.rs."
            )
        );
        assert_eq!(got[6].0, Role::User);
        assert!(
            got[6]
                .1
                .contains("eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9")
        );
        assert_eq!(r.len(), 7);
        // Inner ms timestamp wins over the line's ISO one; ISO is the fallback.
        assert_eq!(r[0].time_ms, Some(1_763_629_201_544));
        assert_eq!(r[6].time_ms, Some(1_763_629_320_000));
        // Thinking, the aborted empty reply and the torn line leave no trace.
        assert!(!r.iter().any(|r| r.text.contains("Maybe DST")));
        assert!(!r.iter().any(|r| r.text.contains("torn")));
        // Offsets are line starts.
        for rec in &r {
            assert!(rec.offset == 0 || bytes[rec.offset as usize - 1] == b'\n');
        }
    }

    #[test]
    fn empty_session_has_no_records() {
        let path = Path::new(FIXTURES)
            .join(".pi/agent/sessions/--home-dev-tzparse--/2025-11-21T10-00-00-000Z_9a8b7c6d-0000-4000-8000-000000000001.jsonl");
        let (r, errs) = feed(&path, &std::fs::read(&path).unwrap());
        assert!(r.is_empty() && errs.is_empty());
    }

    #[test]
    fn resumed_parser_learns_identity_from_header() {
        let path = Path::new("/x/2025-01-01T00-00-00-000Z_fallback-id.jsonl");
        let mut p = new_parser(path);
        let mut sink = Vec::new();
        let msg = br#"{"type":"message","message":{"role":"user","content":"hi"}}"#;
        p.line(msg, 5, &mut sink).unwrap();
        assert_eq!(sink[0].session_id, "fallback-id");
        p.line(
            br#"{"type":"session","id":"real","cwd":"/home/dev/a"}"#,
            0,
            &mut Vec::new(),
        )
        .unwrap();
        let mut out = Vec::new();
        p.line(msg, 99, &mut out).unwrap();
        assert_eq!(out[0].session_id, "real");
        assert_eq!(out[0].project.as_deref(), Some("/home/dev/a"));
        assert!(p.line(b"[]", 1, &mut out).is_err());
        assert!(
            p.line(br#"{"type":"message","message":{}}"#, 1, &mut out)
                .is_err()
        );
    }

    #[test]
    fn real_files() {
        let root = Path::new(REAL);
        if !root.exists() {
            eprintln!("skipping: {} not found", root.display());
            return;
        }
        let files = walk_files(root, 3, &|p| has_suffix(p, ".jsonl"));
        assert_eq!(files.len(), 2);
        let spot = [
            (
                "small.jsonl",
                "019e19b4-eb48-746a-aa6b-8dfcfa37954b",
                "/tmp/as-agent-fixture/project",
                "Read hello.py and summarize",
            ),
            (
                "large-session.jsonl",
                "d703a1a9-1b7b-4fb1-b512-c9738b1fe617",
                "/Users/badlogic/workspaces/pi-mono",
                "we still need to port over user-message-selector.ts",
            ),
        ];
        for f in &files {
            let name = f.file_name().unwrap().to_str().unwrap();
            let (r, errs) = feed(f, &std::fs::read(f).unwrap());
            assert!(errs.is_empty(), "{name}: {errs:?}");
            assert!(!r.is_empty());
            let (_, id, cwd, needle) = spot.iter().find(|s| s.0 == name).unwrap();
            assert!(
                r.iter()
                    .all(|r| r.session_id == *id && r.project.as_deref() == Some(*cwd))
            );
            assert!(r.iter().all(|r| !r.text.is_empty() && r.time_ms.is_some()));
            assert!(
                r.iter()
                    .any(|r| r.role == Role::User && r.text.contains(needle)),
                "{name}"
            );
        }
        let f = root.join("pi-mono/large-session.jsonl");
        let (r, _) = feed(&f, &std::fs::read(&f).unwrap());
        let calls = r.iter().filter(|r| r.role == Role::ToolCall).count();
        let outputs = r.iter().filter(|r| r.role == Role::ToolOutput).count();
        assert_eq!(calls, 391);
        assert!(outputs > 300);
        assert!(r.iter().any(|r| r.role == Role::ToolCall
            && r.files == vec!["packages/coding-agent/docs/theme.md".to_owned()]));
    }

    #[test]
    fn every_truncation_never_panics() {
        // No-panic property: every prefix of every fixture line is fed.
        let path = Path::new(FIXTURES).join(SESSION);
        let bytes = std::fs::read(&path).unwrap();
        for line in bytes.split(|&b| b == b'\n') {
            for n in 0..=line.len() {
                let mut p = new_parser(&path);
                let _ = p.line(&line[..n], 0, &mut Vec::new());
            }
        }
    }

    proptest::proptest! {
        // No-panic property: arbitrary bytes as a line only return Ok or Err.
        #[test]
        fn arbitrary_lines_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let mut p = new_parser(Path::new("s.jsonl"));
            let _ = p.line(&bytes, 0, &mut Vec::new());
        }
    }
}
