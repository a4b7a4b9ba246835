//! gptme (Erik Bjäreholt's terminal agent): one folder per conversation
//! in `<logs>/<conversation>/`, the conversation in `conversation.jsonl`.
//! `<logs>` is `$GPTME_LOGS_HOME`, else `<data>/logs` where `<data>` is
//! `$XDG_DATA_HOME/gptme` (Linux default `~/.local/share/gptme`) or
//! `~/Library/Application Support/gptme` on macOS. The folder's name
//! (`2026-12-05-singing-sleepy-seal`) is the conversation's id.
//!
//! Evidence: what `gptme` 0.35.1 (PyPI) wrote, recorded in
//! `fixtures/agents/gptme/0.35.1/`, and its `dirs.py` and `tools/base.py`.
//! Each line is a message `{role: system | user | assistant, content:
//! string, timestamp (ISO 8601, naive local time: read as UTC), pinned?,
//! hide?, call_id?, files?, metadata?}`. The system prompt and context
//! gptme injects are `hide: true` (skipped); a visible system message is
//! what a tool printed (`call_id` names its call). Tool calls are in the
//! assistant's text: `@tool(call_id): {json}` lines (the `tool` format),
//! or fenced blocks whose language is a tool (`shell`, `ipython`, `save`,
//! ...; the default `markdown` format). User messages starting `<system>`
//! are gptme's own auto-replies, not the user's words, and are skipped.
//! The project is the `workspace` symlink beside the log, else the
//! `**Working Directory:**` line of the system prompt.
//!
//! The file is appended to, but `/undo`, `/edit` and `/backtrack` rewrite
//! it: it is re-read whole when it changes. The folder's `config.toml`
//! may hold API keys in `[env]` and is never read; nor are `events.jsonl`
//! (the same messages again) or the other files beside it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "gptme";

/// The conversation file in each log folder.
const LOG_FILE: &str = "conversation.jsonl";

/// Fenced-block languages that are gptme tools in its `markdown` format.
const BLOCK_TOOLS: &[&str] = &[
    "shell", "ipython", "python", "save", "append", "patch", "tmux", "gh", "browser", "read",
];

/// The gptme source.
pub struct Gptme;

/// The log folders: the override's, else the Linux and macOS defaults.
fn logs_dirs(loc: &Locations) -> Vec<PathBuf> {
    match loc.var("GPTME_LOGS_HOME") {
        Some(d) => vec![d.to_path_buf()],
        None => vec![
            loc.xdg_data_home.join("gptme/logs"),
            loc.app_support().join("gptme/logs"),
        ],
    }
}

impl Source for Gptme {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["GPTME_LOGS_HOME"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        logs_dirs(loc)
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        logs_dirs(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    1,
                    &|p| {
                        p.file_name().is_some_and(|n| n == LOG_FILE)
                            && p.parent().and_then(Path::parent) == Some(d.as_path())
                    },
                    Reader::Whole(parse),
                )
            })
            .collect()
    }
}

/// The working folder of a conversation: the `workspace` symlink gptme
/// puts beside the log, else the system prompt's `**Working Directory:**`.
fn project(path: &Path, lines: &[Value]) -> Option<String> {
    if let Some(target) = path
        .parent()
        .and_then(|d| std::fs::read_link(d.join("workspace")).ok())
        .filter(|t| t.is_absolute())
    {
        return Some(target.to_string_lossy().into_owned());
    }
    const LABEL: &str = "**Working Directory:**";
    lines
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .find_map(|c| {
            c.lines()
                .find_map(|l| l.trim().strip_prefix(LABEL))
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty())
        })
}

/// Splits an assistant message into its prose and its tool calls (name,
/// arguments): `@tool(id): {json}` lines, and fenced blocks of tools.
fn split_calls(content: &str) -> (String, Vec<(String, Value)>) {
    let mut prose = Vec::new();
    let mut calls = Vec::new();
    let mut lines = content.split('\n').peekable();
    let mut rest_of_call = String::new();
    while let Some(line) = lines.next() {
        if let Some((name, json)) = at_call(line) {
            // The JSON may span several lines: take lines until it parses.
            rest_of_call.clear();
            rest_of_call.push_str(json);
            loop {
                let mut de = serde_json::Deserializer::from_str(&rest_of_call).into_iter::<Value>();
                if let Some(Ok(v)) = de.next() {
                    let tail = rest_of_call[de.byte_offset()..].trim().to_owned();
                    calls.push((name.to_owned(), v));
                    if !tail.is_empty() {
                        prose.push(tail);
                    }
                    break;
                }
                match lines.next() {
                    Some(l) => {
                        rest_of_call.push('\n');
                        rest_of_call.push_str(l);
                    }
                    None => {
                        // Never closed: kept as text, not lost.
                        prose.push(format!("{line}{}", &rest_of_call[json.len()..]));
                        break;
                    }
                }
            }
            continue;
        }
        let fence = line.trim_start();
        let ticks = fence.len() - fence.trim_start_matches('`').len();
        let info = fence[ticks..].trim();
        let lang = info.split_whitespace().next().unwrap_or("");
        if ticks >= 3 && BLOCK_TOOLS.contains(&lang) {
            let close = "`".repeat(ticks);
            let mut body = Vec::new();
            let mut closed = false;
            for l in lines.by_ref() {
                if l.trim() == close {
                    closed = true;
                    break;
                }
                body.push(l);
            }
            let body = body.join("\n");
            let arg = info[lang.len()..].trim();
            let args = match lang {
                "shell" => serde_json::json!({ "command": body }),
                "save" | "append" | "patch" | "read" => serde_json::json!({ "path": arg }),
                _ => Value::String(body.clone()),
            };
            if closed {
                calls.push((lang.to_owned(), args));
            } else {
                prose.push(line.to_owned());
                prose.push(body);
            }
            continue;
        }
        prose.push(line.to_owned());
    }
    (prose.join("\n"), calls)
}

/// `@name(call_id): {...` at the start of a line: the name and the JSON's start.
fn at_call(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('@')?;
    let open = rest.find('(')?;
    let name = &rest[..open];
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let close = rest[open..].find("):")? + open;
    let id = &rest[open + 1..close];
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_alphanumeric() || "_-:.".contains(c))
    {
        return None;
    }
    let json = rest[close + 2..].trim_start();
    json.starts_with('{').then_some((name, json))
}

/// Parses one `conversation.jsonl`.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let session = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut lines = Vec::new();
    let mut offset = 0u64;
    for line in bytes.split(|&b| b == b'\n') {
        let at = offset;
        offset += line.len() as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => lines.push((at, v)),
            Err(source) => parsed.errors.push(ParseError::Json { offset: at, source }),
        }
    }
    let values: Vec<Value> = lines.iter().map(|(_, v)| v.clone()).collect();
    let project = project(path, &values);
    for (at, m) in &lines {
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &session, role, text);
            r.time_ms = m.get("timestamp").and_then(parse_time);
            r.project = project.clone();
            r.offset = *at;
            r
        };
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        let hidden = m.get("hide").and_then(Value::as_bool).unwrap_or(false);
        match m.get("role").and_then(Value::as_str) {
            Some("user") if content.trim_start().starts_with("<system>") => {}
            Some("user") => blocks::push_text(Role::User, content, &mk, &mut parsed.records),
            Some("assistant") => {
                let (prose, calls) = split_calls(content);
                blocks::push_text(Role::Assistant, &prose, &mk, &mut parsed.records);
                for (name, args) in calls {
                    blocks::push_call(&name, &args, &mk, &mut parsed.records);
                }
            }
            Some("system") if hidden => {}
            Some("system") => blocks::push_output(content, &mk, &mut parsed.records),
            _ => parsed.errors.push(ParseError::Shape {
                offset: *at,
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
        "/../fixtures/agents/gptme/0.35.1/home/.local/share/gptme/logs"
    );

    fn recorded() -> PathBuf {
        let dir = std::fs::read_dir(RECORDED)
            .expect("fixture")
            .next()
            .expect("one conversation")
            .expect("entry")
            .path();
        dir.join(LOG_FILE)
    }

    #[test]
    fn reads_the_recorded_conversation_exactly() {
        let path = recorded();
        let parsed = parse(&path, &std::fs::read(&path).expect("fixture"));
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let got: Vec<(Role, &str, Option<i64>)> = parsed
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str(), r.time_ms))
            .collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0].0, Role::User);
        assert!(got[0].1.starts_with("Run the shell command `echo hello`"));
        // 2026-12-05T21:51:33.750702 (naive, the recorder's UTC).
        assert_eq!(
            got[1],
            (Role::ToolCall, "shell: echo hello", Some(1_796_507_493_750))
        );
        assert_eq!(
            got[2],
            (
                Role::ToolOutput,
                "Ran allowlisted command: `echo hello`\n\n`hello`\n\n",
                Some(1_796_507_494_406)
            )
        );
        assert_eq!(got[3].0, Role::Assistant);
        assert!(got[3].1.contains("quokka library to 2.3"));
        let r = &parsed.records[0];
        assert_eq!(r.agent, "gptme");
        assert_eq!(
            Some(r.session_id.as_str()),
            path.parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
        );
        assert_eq!(
            r.project.as_deref(),
            Some("/home/dev/agent/home-gptme/code/proj-gptme")
        );
    }

    #[test]
    fn markdown_blocks_and_multiline_calls_are_tool_calls() {
        let (prose, calls) = split_calls(
            "Let me look.\n```shell\nls -la\n```\nand save:\n```save src/a.rs\nfn a() {}\n```\n\
             @patch(call_1): {\n  \"path\": \"b.rs\"\n}\ndone",
        );
        assert_eq!(prose, "Let me look.\nand save:\ndone");
        let got: Vec<String> = calls
            .iter()
            .map(|(n, a)| blocks::tool_call(n, a).0)
            .collect();
        assert_eq!(got, ["shell: ls -la", "save src/a.rs", "patch b.rs"]);
        // A fence of another language, and an unclosed call, stay text.
        let (prose, calls) = split_calls("```rust\nfn x() {}\n```\n@shell(c): {\"command\": ");
        assert!(calls.is_empty());
        assert_eq!(prose, "```rust\nfn x() {}\n```\n@shell(c): {\"command\": ");
    }

    #[test]
    fn workspace_link_hidden_messages_auto_replies_and_bad_lines() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("logs/2026-01-01-a-b-c");
        std::fs::create_dir_all(&dir).expect("mkdir");
        #[cfg(unix)]
        std::os::unix::fs::symlink("/work/app", dir.join("workspace")).expect("link");
        let log = dir.join(LOG_FILE);
        let body = b"{\"role\":\"system\",\"content\":\"**Working Directory:** /elsewhere\",\"hide\":true}\n\
{\"role\":\"user\",\"content\":\"hi\",\"timestamp\":\"2026-01-01T00:00:00\"}\n\
not json\n\
{\"role\":\"user\",\"content\":\"<system>No tool call detected</system>\"}\n\
{\"role\":\"critic\",\"content\":\"?\"}\n";
        let parsed = parse(&log, body);
        assert_eq!(parsed.errors.len(), 2, "{:?}", parsed.errors);
        assert_eq!(parsed.records.len(), 1);
        let r = &parsed.records[0];
        assert_eq!((r.role, r.text.as_str()), (Role::User, "hi"));
        assert_eq!(r.session_id, "2026-01-01-a-b-c");
        assert_eq!(r.time_ms, Some(1_767_225_600_000));
        #[cfg(unix)]
        assert_eq!(r.project.as_deref(), Some("/work/app"));
    }

    #[test]
    fn discovers_conversations_and_honours_the_override() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(tmp.path());
        let logs = loc.xdg_data_home.join("gptme/logs");
        for d in ["2026-01-01-a", "2026-01-02-b"] {
            std::fs::create_dir_all(logs.join(d)).expect("mkdir");
            std::fs::write(logs.join(d).join(LOG_FILE), "").expect("write");
            std::fs::write(logs.join(d).join("events.jsonl"), "").expect("write");
        }
        assert_eq!(Gptme.discover(&loc).len(), 2);
        let other = tmp.path().join("other");
        std::fs::create_dir_all(other.join("c")).expect("mkdir");
        std::fs::write(other.join("c").join(LOG_FILE), "").expect("write");
        loc.vars.insert("GPTME_LOGS_HOME".into(), other.clone());
        let found: Vec<PathBuf> = Gptme.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(found, [other.join("c").join(LOG_FILE)]);
    }
}
