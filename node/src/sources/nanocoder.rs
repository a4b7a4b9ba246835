//! Nanocoder (the Nano Collective's terminal coding agent): one JSON
//! document per session in `<data>/sessions/<uuid>.json`, rewritten whole
//! at each autosave (re-read when it changes), beside a `sessions.json`
//! index of the same metadata (bookkeeping, not read). `<data>` is
//! `$NANOCODER_DATA_DIR`, else `$XDG_DATA_HOME/nanocoder` (Linux default
//! `~/.local/share/nanocoder`), or `~/Library/Application Support/nanocoder`
//! on macOS. A `sessions.directory` in the user's `agents.config.json`
//! moves the folder; cairn does not read that config.
//!
//! Evidence: what `@nanocollective/nanocoder` 1.30.0 (npm) wrote, recorded
//! in `fixtures/agents/nanocoder/1.30.0/`, and its `session-manager.js`.
//! The document is `{id, title, createdAt, lastAccessedAt (ISO 8601),
//! messageCount, provider, model, workingDirectory, messages[]}`; messages
//! are OpenAI-shaped `{role: user | assistant | system | tool, content:
//! string, tool_calls?[{id, function{name, arguments: object}}],
//! tool_call_id?, name?, reasoning?, images?}`. Messages carry no time:
//! every record takes the session's `createdAt`, except those of the last
//! message, which was saved at `lastAccessedAt`. System messages and
//! reasoning are not conversation and are skipped.
//!
//! The reader never writes, and never reads the config folder (API keys).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "nanocoder";

/// The Nanocoder source.
pub struct Nanocoder;

/// The session folders: the override's, else the Linux and macOS defaults.
fn sessions_dirs(loc: &Locations) -> Vec<PathBuf> {
    match loc.var("NANOCODER_DATA_DIR") {
        Some(d) => vec![d.join("sessions")],
        None => vec![
            loc.xdg_data_home.join("nanocoder/sessions"),
            loc.app_support().join("nanocoder/sessions"),
        ],
    }
}

impl Source for Nanocoder {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["NANOCODER_DATA_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        sessions_dirs(loc)
    }

    fn not_history(&self) -> &'static [&'static str] {
        &["sessions.json"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        sessions_dirs(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    0,
                    &|p| has_suffix(p, ".json") && !p.ends_with("sessions.json"),
                    Reader::Whole(parse),
                )
            })
            .collect()
    }
}

/// Parses one session document.
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
    let id = doc
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(file_stem(path))
        .to_owned();
    let project = doc
        .get("workingDirectory")
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty())
        .map(str::to_owned);
    let created = doc.get("createdAt").and_then(parse_time);
    let saved = doc.get("lastAccessedAt").and_then(parse_time).or(created);
    let last = messages.len().saturating_sub(1);
    for (i, m) in messages.iter().enumerate() {
        let time = if i == last { saved } else { created };
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &id, role, text);
            r.time_ms = time;
            r.project = project.clone();
            r.offset = i as u64;
            r
        };
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        match m.get("role").and_then(Value::as_str) {
            Some("user") => blocks::push_text(Role::User, content, &mk, &mut parsed.records),
            Some("assistant") => {
                blocks::push_text(Role::Assistant, content, &mk, &mut parsed.records);
                if let Some(calls) = m.get("tool_calls") {
                    blocks::openai_tool_calls(calls, &mk, &mut parsed.records);
                }
            }
            Some("tool") => blocks::push_output(content, &mk, &mut parsed.records),
            Some("system") => {}
            _ => parsed.errors.push(ParseError::Shape {
                offset: i as u64,
                what: "message without a known role",
            }),
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDED: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/agents/nanocoder/1.30.0/home/.local/share/nanocoder/sessions"
    );

    #[test]
    fn reads_the_recorded_session_exactly() {
        let path = Path::new(RECORDED).join("b6047734-3840-4fca-89e2-fbf9ca6ad2c9.json");
        let parsed = parse(&path, &std::fs::read(&path).expect("fixture"));
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let got: Vec<(Role, &str, Option<i64>)> = parsed
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str(), r.time_ms))
            .collect();
        // 2026-12-05T21:32:07.287Z, and the last save 21:32:08.304Z.
        let (t0, t1) = (1_796_506_327_287, 1_796_506_328_304);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0].0, Role::User);
        assert!(got[0].1.starts_with("Run the shell command `echo hello`"));
        assert_eq!(
            got[1],
            (Role::ToolCall, "execute_bash: echo hello", Some(t0))
        );
        assert_eq!(
            got[2],
            (Role::ToolOutput, "EXIT_CODE: 0\nhello\n", Some(t0))
        );
        assert_eq!(got[3].0, Role::Assistant);
        assert!(got[3].1.contains("quokka library to 2.3"));
        assert_eq!((got[0].2, got[3].2), (Some(t0), Some(t1)));
        let r = &parsed.records[0];
        assert_eq!(r.agent, "nanocoder");
        assert_eq!(r.session_id, "b6047734-3840-4fca-89e2-fbf9ca6ad2c9");
        assert_eq!(
            r.project.as_deref(),
            Some("/home/dev/agent/home-nanocoder/code/proj-nanocoder")
        );
    }

    #[test]
    fn discovers_sessions_but_not_the_index_and_honours_the_override() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(tmp.path());
        let d = loc.xdg_data_home.join("nanocoder/sessions");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("sessions.json"), "[]").expect("write");
        std::fs::write(d.join("a.json"), "{}").expect("write");
        let found: Vec<PathBuf> = Nanocoder
            .discover(&loc)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(found, [d.join("a.json")]);
        let other = tmp.path().join("elsewhere");
        std::fs::create_dir_all(other.join("sessions")).expect("mkdir");
        std::fs::write(other.join("sessions/b.json"), "{}").expect("write");
        loc.vars.insert("NANOCODER_DATA_DIR".into(), other.clone());
        let found: Vec<PathBuf> = Nanocoder
            .discover(&loc)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(found, [other.join("sessions/b.json")]);
    }

    #[test]
    fn bad_documents_and_unknown_roles_are_counted_not_fatal() {
        let p = Path::new("/s/x.json");
        assert_eq!(parse(p, b"{not json").errors.len(), 1);
        assert_eq!(parse(p, br#"{"id": "x"}"#).errors.len(), 1);
        let doc = br#"{"id": "x", "createdAt": "2026-01-01T00:00:00Z", "messages": [
            {"role": "system", "content": "you are"},
            {"role": "critic", "content": "?"},
            {"role": "tool", "content": "ok"}]}"#;
        let parsed = parse(p, doc);
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.records.len(), 1);
        assert_eq!(parsed.records[0].role, Role::ToolOutput);
        assert_eq!(parsed.records[0].time_ms, Some(1_767_225_600_000));
        assert_eq!(parsed.records[0].project, None);
    }
}
