//! Code Puppy (`code-puppy` on PyPI, a pydantic-ai coding agent): one
//! JSON envelope per session in `~/.code_puppy/autosaves/<name>.json`
//! (autosaved after every run) and `~/.code_puppy/contexts/<name>.json`
//! (saved by hand), each with a `<name>_meta.json` sidecar. When
//! `XDG_CACHE_HOME` is set the autosaves are in
//! `$XDG_CACHE_HOME/code_puppy/autosaves`, and with `XDG_DATA_HOME` the
//! contexts in `$XDG_DATA_HOME/code_puppy/contexts` (Code Puppy uses an XDG
//! folder only when its variable is set, never by default).
//!
//! Evidence: what `code-puppy` 0.0.946 (PyPI) wrote, recorded in
//! `fixtures/agents/code-puppy/0.0.946/`, and its `config.py` and
//! `session_storage.py`. The envelope is `{format: 2, code_puppy, pydantic_ai,
//! encoding: "pydantic-ai-messages", messages[]}`, the messages pydantic-ai's
//! own JSON: `{kind: request | response, timestamp, parts[{part_kind, ...}]}`.
//! Request parts: `user-prompt` (`content`, a string or items), `tool-return`
//! (`tool_name`, `content`: any JSON, the shell's `{stdout, stderr,
//! exit_code, ...}`), `retry-prompt` (a tool's error sent back), and
//! `system-prompt` (skipped, as is the request's `instructions`). Response
//! parts: `text`, `tool-call` (`tool_name`, `args` as a JSON string or
//! object), `thinking` (skipped). Each part's `timestamp`, else its
//! message's, is the record's time. The sidecar's `scope_key` is the
//! working folder. The legacy pickle sessions (`<name>.pkl`) are not read:
//! a folder of only those is reported as found, not understood.
//!
//! The reader never writes, and never reads `puppy.cfg` or the model
//! files beside the sessions (API keys).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "code-puppy";

/// Sidecars that share the sessions' `.json` extension.
const SIDECARS: [&str; 2] = ["_meta.json", "_acp.json"];

/// The Code Puppy source.
pub struct CodePuppy;

/// The session folders: autosaves, then hand-saved contexts.
fn session_dirs(loc: &Locations) -> Vec<PathBuf> {
    let base = |var: &str| {
        loc.var(var)
            .map_or_else(|| loc.home.join(".code_puppy"), |d| d.join("code_puppy"))
    };
    vec![
        base("XDG_CACHE_HOME").join("autosaves"),
        base("XDG_DATA_HOME").join("contexts"),
    ]
}

impl Source for CodePuppy {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["XDG_CACHE_HOME", "XDG_DATA_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        session_dirs(loc)
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        session_dirs(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    0,
                    &|p| has_suffix(p, ".json") && !SIDECARS.iter().any(|s| has_suffix(p, s)),
                    Reader::Whole(parse),
                )
            })
            .collect()
    }
}

/// The working folder the sidecar `<name>_meta.json` names.
fn scope(path: &Path) -> Option<String> {
    let meta = path.with_file_name(format!("{}_meta.json", file_stem(path)));
    let v: Value = serde_json::from_slice(&std::fs::read(meta).ok()?).ok()?;
    v.get("scope_key")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A tool's return value as text: a string as it is, a shell result as
/// what it printed (and its error), other JSON by its text fields or whole.
fn return_text(v: &Value) -> String {
    if let Some(out) = v.get("stdout").and_then(Value::as_str) {
        let err = v.get("stderr").and_then(Value::as_str).unwrap_or("");
        let failed = v.get("error").and_then(Value::as_str).unwrap_or("");
        return [out, err, failed]
            .iter()
            .filter(|s| !s.trim().is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Object(_) | Value::Array(_) => {
            let t = blocks::result_text(v);
            if t.trim().is_empty() {
                v.to_string()
            } else {
                t
            }
        }
        other => other.to_string(),
    }
}

/// The text of a `user-prompt` part: a string, or text items among images
/// and files.
fn prompt_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().or_else(|| i.get("content")?.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Parses one session envelope.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let Some(messages) = doc.get("messages").and_then(Value::as_array) else {
        parsed.errors.push(ParseError::Shape {
            offset: 0,
            what: "session without messages",
        });
        return parsed;
    };
    let session = file_stem(path).to_owned();
    let project = scope(path);
    for (i, m) in messages.iter().enumerate() {
        let offset = i as u64;
        let kind = m.get("kind").and_then(Value::as_str);
        let Some(parts) = m.get("parts").and_then(Value::as_array) else {
            parsed.errors.push(ParseError::Shape {
                offset,
                what: "message without parts",
            });
            continue;
        };
        if !matches!(kind, Some("request" | "response")) {
            parsed.errors.push(ParseError::Shape {
                offset,
                what: "message neither request nor response",
            });
            continue;
        }
        let message_time = m.get("timestamp").and_then(parse_time);
        let mut text = String::new();
        let mut text_time = None;
        for p in parts {
            let time = p.get("timestamp").and_then(parse_time).or(message_time);
            let mk = |role: Role, text: String| {
                let mut r = Record::new(AGENT, &session, role, text);
                r.time_ms = time;
                r.project = project.clone();
                r.offset = offset;
                r
            };
            let out = &mut parsed.records;
            match p.get("part_kind").and_then(Value::as_str).unwrap_or("") {
                "user-prompt" => {
                    let t = prompt_text(p.get("content").unwrap_or(&Value::Null));
                    blocks::push_text(Role::User, &t, &mk, out);
                }
                "tool-return" | "builtin-tool-return" => {
                    let t = return_text(p.get("content").unwrap_or(&Value::Null));
                    blocks::push_output(&t, &mk, out);
                }
                "retry-prompt" => {
                    let t = return_text(p.get("content").unwrap_or(&Value::Null));
                    blocks::push_output(&format!("[retry] {t}"), &mk, out);
                }
                "text" => {
                    // A response's text parts are one answer, kept after its calls.
                    if let Some(t) = p.get("content").and_then(Value::as_str) {
                        if !text.is_empty() {
                            text.push_str("\n\n");
                        }
                        text.push_str(t);
                        text_time = text_time.or(time);
                    }
                }
                "tool-call" | "builtin-tool-call" => {
                    let name = p.get("tool_name").and_then(Value::as_str).unwrap_or("tool");
                    blocks::push_call(name, p.get("args").unwrap_or(&Value::Null), &mk, out);
                }
                _ => {}
            }
        }
        let mk = |role: Role, t: String| {
            let mut r = Record::new(AGENT, &session, role, t);
            r.time_ms = text_time.or(message_time);
            r.project = project.clone();
            r.offset = offset;
            r
        };
        blocks::push_text(Role::Assistant, &text, &mk, &mut parsed.records);
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDED: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/agents/code-puppy/0.0.946/home/.code_puppy/autosaves"
    );

    #[test]
    fn reads_the_recorded_session_exactly() {
        let loc = Locations::under_home(
            Path::new(RECORDED)
                .parent()
                .and_then(Path::parent)
                .expect("home"),
        );
        let found = CodePuppy.discover(&loc);
        assert_eq!(found.len(), 1, "{found:?}");
        let path = &found[0].path;
        let parsed = parse(path, &std::fs::read(path).expect("fixture"));
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let got: Vec<(Role, &str, Option<i64>)> = parsed
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str(), r.time_ms))
            .collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0].0, Role::User);
        assert!(got[0].1.starts_with("Run the shell command `echo hello`"));
        assert_eq!(got[1].0, Role::ToolCall);
        assert_eq!(got[1].1, "shell: echo hello");
        assert_eq!(got[2].0, Role::ToolOutput);
        assert_eq!(got[2].1, "hello");
        assert_eq!(got[3].0, Role::Assistant);
        assert!(got[3].1.contains("quokka library to 2.3"));
        let times: Vec<i64> = got.iter().filter_map(|g| g.2).collect();
        assert_eq!(times.len(), 4);
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        let r = &parsed.records[0];
        assert_eq!(r.agent, "code-puppy");
        assert_eq!(r.session_id, file_stem(path));
        assert_eq!(
            r.project.as_deref(),
            Some("/home/dev/agent/home-puppy/code/proj-puppy")
        );
    }

    #[test]
    fn retries_failed_calls_and_odd_messages() {
        let doc = br#"{"format": 2, "messages": [
            {"kind": "request", "timestamp": "2026-01-01T00:00:00Z", "parts": [
                {"part_kind": "system-prompt", "content": "you are"},
                {"part_kind": "user-prompt", "content": ["look at", {"kind": "image-url", "url": "x"}]}]},
            {"kind": "response", "timestamp": "2026-01-01T00:00:01Z", "parts": [
                {"part_kind": "thinking", "content": "hmm"},
                {"part_kind": "text", "content": "Reading it."},
                {"part_kind": "tool-call", "tool_name": "read_file", "args": {"file_path": "a.rs"}}]},
            {"kind": "request", "parts": [
                {"part_kind": "retry-prompt", "tool_name": "read_file", "content": "no such file"},
                {"part_kind": "tool-return", "tool_name": "shell", "content": {"stdout": "", "stderr": "boom", "exit_code": 1}}]},
            {"kind": "future", "parts": []},
            {"kind": "response"}]}"#;
        let parsed = parse(Path::new("/a/s1.json"), doc);
        assert_eq!(parsed.errors.len(), 2, "{:?}", parsed.errors);
        let got: Vec<(Role, &str)> = parsed
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Role::User, "look at"),
                (Role::ToolCall, "read_file a.rs"),
                (Role::Assistant, "Reading it."),
                (Role::ToolOutput, "[retry] no such file"),
                (Role::ToolOutput, "boom"),
            ]
        );
        assert_eq!(parsed.records[0].session_id, "s1");
        assert_eq!(parsed.records[2].time_ms, Some(1_767_225_601_000));
        // No time on the part or the message: none.
        assert_eq!(parsed.records[3].time_ms, None);
        assert_eq!(parse(Path::new("/a/s.json"), b"[1,").errors.len(), 1);
    }

    #[test]
    fn discovers_sessions_not_sidecars_and_honours_xdg() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(tmp.path());
        let auto = tmp.path().join(".code_puppy/autosaves");
        std::fs::create_dir_all(&auto).expect("mkdir");
        for f in ["a.json", "a_meta.json", "b.pkl"] {
            std::fs::write(auto.join(f), "{}").expect("write");
        }
        let found: Vec<PathBuf> = CodePuppy
            .discover(&loc)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(found, [auto.join("a.json")]);
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(cache.join("code_puppy/autosaves")).expect("mkdir");
        std::fs::write(cache.join("code_puppy/autosaves/c.json"), "{}").expect("write");
        loc.vars.insert("XDG_CACHE_HOME".into(), cache.clone());
        let found: Vec<PathBuf> = CodePuppy
            .discover(&loc)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(found, [cache.join("code_puppy/autosaves/c.json")]);
    }
}
