//! Claude Code: one JSON-lines transcript per session under
//! `${CLAUDE_CONFIG_DIR:-~/.claude}/projects/<mangled-cwd>/<sessionId>.jsonl`,
//! plus sub-agent transcripts in `<sessionId>/subagents/agent-*.jsonl`.
//!
//! Each conversation line carries `type` (`user`/`assistant`), `sessionId`,
//! `cwd`, `timestamp` and the raw Anthropic `message`. Bookkeeping lines
//! (`summary`, `file-history-snapshot`, `queue-operation`, `progress`,
//! `system`, and anything unknown) are skipped without error.
//!
//! Sessions and sub-agents:
//! - A file under `subagents/` is its own session: `session_id` is the file
//!   stem (`agent-a2898e3`), `parent_session` is the `sessionId` written in its
//!   lines (which is the parent's id).
//! - Old-style (1.0.x) sidechain lines interleaved in a main file
//!   (`isSidechain: true`, no separate file) are kept in the main session:
//!   nothing in the line names a separate session id for them.
//! - The 2.0.x "Warmup" sidechain exchange (a user line whose content is
//!   exactly `Warmup`, and the sidechain replies chained to it) is dropped.
//!
//! One API message is split over several lines sharing `message.id`;
//! consecutive assistant text blocks of one message are merged into one
//! record (offset of the first line).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use super::common::{
    TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, has_suffix, json_line, parse_time, walk_stores,
};
use super::{LineParser, Locations, ParseError, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "claude-code";

/// Largest number of pending tool-use ids remembered for output pairing.
const MAX_TOOL_NAMES: usize = 4096;

/// Cap for the compact JSON of an unknown tool's input.
const TOOL_INPUT_CAP: usize = 2 * 1024;

/// The claude-code source.
pub struct ClaudeCode;

impl Source for ClaudeCode {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// Beside a project's sessions: its auto-memory and the large tool
    /// results a session spills to files.
    fn not_history(&self) -> &'static [&'static str] {
        &["memory", "tool-results"]
    }

    fn roots(&self, loc: &Locations) -> Vec<std::path::PathBuf> {
        vec![loc.claude_dir.join("projects")]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CLAUDE_CONFIG_DIR"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let projects = loc.claude_dir.join("projects");
        let root = projects.as_os_str().as_encoded_bytes();
        let keep = |p: &Path| {
            if !has_suffix(p, ".jsonl") {
                return false;
            }
            // The walk joins names onto `projects`, so the folders below
            // it are the bytes after that prefix, split at the separator
            // (cheaper than comparing the paths component by component).
            let Some(rel) = p.as_os_str().as_encoded_bytes().strip_prefix(root) else {
                return false;
            };
            let sep = std::path::MAIN_SEPARATOR as u8;
            let mut parts = rel.split(|&b| b == sep).filter(|c| !c.is_empty());
            match (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) {
                // projects/<project>/<session>.jsonl
                (Some(_), Some(_), None, _, _) => true,
                // projects/<project>/<session>/subagents/<agent>.jsonl
                (Some(_), Some(_), Some(sub), Some(_), None) => sub == b"subagents",
                _ => false,
            }
        };
        walk_stores(&projects, 3, &keep, Reader::Lines(parser))
    }
}

/// Builds the line parser for one Claude Code transcript file.
pub fn parser(path: &Path) -> Box<dyn LineParser> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let is_subagent = path
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "subagents");
    Box::new(ClaudeParser {
        stem,
        is_subagent,
        ..ClaudeParser::default()
    })
}

/// An assistant text record being merged across lines of one API message.
struct Pending {
    message_id: String,
    record: Record,
}

#[derive(Default)]
struct ClaudeParser {
    /// File stem: the session id fallback, and the id of a sub-agent file.
    stem: String,
    /// True for files under `<session>/subagents/`.
    is_subagent: bool,
    /// Last `cwd` seen, for lines that lack one.
    last_cwd: Option<String>,
    /// tool_use id -> tool name, to prefix outputs.
    tool_names: HashMap<String, String>,
    /// uuids of the dropped "Warmup" sidechain exchange.
    warmup: HashSet<String>,
    pending: Option<Pending>,
}

/// Identity and placement shared by every record of one line.
struct LineCtx {
    session_id: String,
    parent: Option<String>,
    project: Option<String>,
    time_ms: Option<i64>,
    offset: u64,
}

impl LineCtx {
    fn record(&self, role: Role, text: String) -> Record {
        let mut r = Record::new(AGENT, &self.session_id, role, text);
        r.parent_session = self.parent.clone();
        r.project = self.project.clone();
        r.time_ms = self.time_ms;
        r.offset = self.offset;
        r
    }
}

impl LineParser for ClaudeParser {
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let v = json_line(line, offset)?;
        let Some(obj) = v.as_object() else {
            self.flush(out);
            return Err(ParseError::Shape {
                offset,
                what: "line is not a JSON object",
            });
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "user" && kind != "assistant" {
            // Bookkeeping (summary, file-history-snapshot, queue-operation,
            // progress, system) or a type we do not know: not conversation.
            // Progress/system lines sit between blocks of one API message, so
            // they do not end a pending merge.
            return Ok(());
        }
        let Some(message) = obj.get("message").filter(|m| m.is_object()) else {
            self.flush(out);
            return Err(ParseError::Shape {
                offset,
                what: "conversation line without message object",
            });
        };

        let uuid = obj.get("uuid").and_then(Value::as_str);
        let sidechain = obj.get("isSidechain").and_then(Value::as_bool) == Some(true);
        if sidechain && !self.is_subagent {
            let parent_uuid = obj.get("parentUuid").and_then(Value::as_str);
            let is_warmup_prompt = kind == "user"
                && message
                    .get("content")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    == Some("Warmup");
            let in_warmup = parent_uuid.is_some_and(|p| self.warmup.contains(p));
            if is_warmup_prompt || in_warmup {
                if let Some(u) = uuid {
                    self.warmup.insert(u.to_owned());
                }
                return Ok(());
            }
        }
        if obj.get("isMeta").and_then(Value::as_bool) == Some(true) {
            // Slash-command expansions and injected context.
            return Ok(());
        }

        let line_session = obj
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let (session_id, parent) = if self.is_subagent {
            let id = if self.stem.is_empty() {
                obj.get("agentId")
                    .and_then(Value::as_str)
                    .map(|a| format!("agent-{a}"))
                    .unwrap_or_default()
            } else {
                self.stem.clone()
            };
            (id, line_session.map(str::to_owned))
        } else {
            (line_session.unwrap_or(&self.stem).to_owned(), None)
        };
        if let Some(cwd) = obj
            .get("cwd")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            self.last_cwd = Some(cwd.to_owned());
        }
        let ctx = LineCtx {
            session_id,
            parent,
            project: self.last_cwd.clone(),
            time_ms: obj.get("timestamp").and_then(parse_time),
            offset,
        };

        if kind == "assistant" {
            self.assistant(message, &ctx, out);
        } else {
            self.flush(out);
            self.user(message, &ctx, out);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Record>) {
        self.flush(out);
    }
}

impl ClaudeParser {
    fn flush(&mut self, out: &mut Vec<Record>) {
        if let Some(p) = self.pending.take() {
            let mut r = p.record;
            r.text = cap_text(&r.text, TEXT_CAP);
            out.push(r);
        }
    }

    fn assistant(&mut self, message: &Value, ctx: &LineCtx, out: &mut Vec<Record>) {
        let message_id = message.get("id").and_then(Value::as_str).unwrap_or("");
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.message_id != message_id || message_id.is_empty())
        {
            self.flush(out);
        }
        let blocks: Vec<&Value> = match message.get("content") {
            Some(Value::String(s)) => {
                self.push_assistant_text(message_id, s, ctx);
                return;
            }
            Some(Value::Array(a)) => a.iter().collect(),
            _ => return,
        };
        for block in blocks {
            let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        self.push_assistant_text(message_id, t, ctx);
                    }
                }
                "tool_use" | "server_tool_use" => {
                    // A tool call ends a run of text blocks: keep source order.
                    self.flush(out);
                    let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
                    if let Some(id) = block.get("id").and_then(Value::as_str) {
                        if self.tool_names.len() >= MAX_TOOL_NAMES {
                            self.tool_names.clear();
                        }
                        self.tool_names.insert(id.to_owned(), name.to_owned());
                    }
                    let input = block.get("input").unwrap_or(&Value::Null);
                    let (text, files) = tool_call_text(name, input);
                    if !text.trim().is_empty() {
                        let mut r = ctx.record(Role::ToolCall, text);
                        r.files = files;
                        out.push(r);
                    }
                }
                // thinking, redacted_thinking, images and unknown blocks.
                _ => {}
            }
        }
    }

    fn push_assistant_text(&mut self, message_id: &str, text: &str, ctx: &LineCtx) {
        let text = text.trim();
        if text.is_empty() || text == "(no content)" {
            return;
        }
        match &mut self.pending {
            Some(p) if !message_id.is_empty() && p.message_id == message_id => {
                p.record.text.push_str("\n\n");
                p.record.text.push_str(text);
            }
            _ => {
                self.pending = Some(Pending {
                    message_id: message_id.to_owned(),
                    record: ctx.record(Role::Assistant, text.to_owned()),
                });
            }
        }
    }

    fn user(&mut self, message: &Value, ctx: &LineCtx, out: &mut Vec<Record>) {
        match message.get("content") {
            Some(Value::String(s)) => {
                if let Some(t) = task_notification(s) {
                    out.push(ctx.record(Role::ToolOutput, cap_text(&t, TOOL_OUTPUT_CAP)));
                } else if let Some(t) = clean_user_text(s) {
                    out.push(ctx.record(Role::User, cap_text(&t, TEXT_CAP)));
                }
            }
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str).unwrap_or("") {
                        "text" => {
                            let t = block.get("text").and_then(Value::as_str).unwrap_or("");
                            if let Some(t) = clean_user_text(t) {
                                out.push(ctx.record(Role::User, cap_text(&t, TEXT_CAP)));
                            }
                        }
                        "tool_result" => {
                            if let Some(r) = self.tool_result(block, ctx) {
                                out.push(r);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn tool_result(&mut self, block: &Value, ctx: &LineCtx) -> Option<Record> {
        let body = match block.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Array(_)) => super::common::content_text(v),
            _ => String::new(),
        };
        let body = body.trim_end();
        if body.trim().is_empty() {
            return None;
        }
        let name = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .and_then(|id| self.tool_names.remove(id));
        let error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let body = cap_text(body, TOOL_OUTPUT_CAP);
        let text = match (name, error) {
            (Some(n), false) => format!("{n}: {body}"),
            (Some(n), true) => format!("{n} (error): {body}"),
            (None, false) => body,
            (None, true) => format!("(error): {body}"),
        };
        Some(ctx.record(Role::ToolOutput, text))
    }
}

/// Harness-written elements removed from user text, content included.
const HARNESS_TAGS: [&str; 7] = [
    "system-reminder",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "bash-stdout",
    "bash-stderr",
    "command-message",
];

/// Turns a typed user text into what is worth indexing, or `None` to drop it.
fn clean_user_text(s: &str) -> Option<String> {
    let trimmed = s.trim();
    if trimmed.starts_with("[Request interrupted by user") {
        return None;
    }
    if trimmed.starts_with("Caveat: The messages below were generated by the user") {
        return None;
    }
    // Slash-command echo: keep the command and its arguments.
    if let Some(name) = element(trimmed, "command-name") {
        let args = element(trimmed, "command-args").unwrap_or("");
        let cmd = format!("{} {}", name.trim(), args.trim());
        let cmd = cmd.trim();
        return (!cmd.is_empty()).then(|| cmd.to_owned());
    }
    // `!` shell mode: the typed command.
    if let Some(cmd) = element(trimmed, "bash-input") {
        let cmd = cmd.trim();
        return (!cmd.is_empty()).then(|| format!("! {cmd}"));
    }
    let mut text = trimmed.to_owned();
    for tag in HARNESS_TAGS {
        text = strip_element(&text, tag);
    }
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// What a `<task-notification>` says, when `s` is one: the harness
/// (2.1.3xx) hands a background subagent's or command's result to the model
/// as a user line (`origin.kind: "task-notification"`), not typed by the
/// user. Its summary and result are the tool's output.
fn task_notification(s: &str) -> Option<String> {
    let s = s.trim_start();
    if !s.starts_with("<task-notification>") {
        return None;
    }
    let body = element(s, "task-notification")?;
    let text = [element(body, "summary"), element(body, "result")]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty() {
        element(body, "status").map(|st| format!("task {}", st.trim()))
    } else {
        Some(text)
    }
}

/// The content of the first `<tag>…</tag>` in `s`.
fn element<'a>(s: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = s.find(&open)? + open.len();
    let len = s[start..].find(&close)?;
    Some(&s[start..start + len])
}

/// `s` without any `<tag>…</tag>` element (an unclosed one runs to the end).
fn strip_element(s: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(&open) {
        out.push_str(&rest[..i]);
        let after = &rest[i + open.len()..];
        match after.find(&close) {
            Some(j) => rest = &after[j + close.len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The compact text of a tool call and the files it touched.
fn tool_call_text(name: &str, input: &Value) -> (String, Vec<String>) {
    let mut files = Vec::new();
    for key in ["file_path", "notebook_path", "path"] {
        if let Some(p) = str_field(input, key)
            && !files.iter().any(|f| f == p)
        {
            files.push(p.to_owned());
        }
    }
    let file = str_field(input, "file_path")
        .or_else(|| str_field(input, "notebook_path"))
        .or_else(|| str_field(input, "path"))
        .unwrap_or("");
    let with_body = |head: String, body: &str| {
        if body.trim().is_empty() {
            head
        } else {
            cap_text(&format!("{head}\n{body}"), TEXT_CAP)
        }
    };
    let text = match name {
        "Bash" => format!("Bash: {}", str_field(input, "command").unwrap_or("")),
        "Read" => format!("Read {file}"),
        "Edit" => with_body(
            format!("Edit {file}"),
            str_field(input, "new_string").unwrap_or(""),
        ),
        "MultiEdit" => {
            let bodies: Vec<&str> = input
                .get("edits")
                .and_then(Value::as_array)
                .map(|edits| {
                    edits
                        .iter()
                        .filter_map(|e| str_field(e, "new_string"))
                        .collect()
                })
                .unwrap_or_default();
            with_body(format!("MultiEdit {file}"), &bodies.join("\n\n"))
        }
        "Write" => with_body(
            format!("Write {file}"),
            str_field(input, "content").unwrap_or(""),
        ),
        "NotebookEdit" => with_body(
            format!("NotebookEdit {file}"),
            str_field(input, "new_source").unwrap_or(""),
        ),
        "Grep" => {
            let pattern = str_field(input, "pattern").unwrap_or("");
            match str_field(input, "path") {
                Some(p) => format!("Grep {pattern} in {p}"),
                None => format!("Grep {pattern}"),
            }
        }
        "Glob" => format!("Glob {}", str_field(input, "pattern").unwrap_or("")),
        "Task" | "Agent" => with_body(
            format!("{name}: {}", str_field(input, "description").unwrap_or("")),
            str_field(input, "prompt").unwrap_or(""),
        ),
        "WebSearch" => format!("WebSearch: {}", str_field(input, "query").unwrap_or("")),
        "WebFetch" => format!("WebFetch: {}", str_field(input, "url").unwrap_or("")),
        _ => {
            let json = serde_json::to_string(input).unwrap_or_default();
            format!("{name}: {}", cap_text(&json, TOOL_INPUT_CAP))
        }
    };
    (text, files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::common::walk_files;
    use std::path::PathBuf;

    /// Feeds `bytes` to a parser the way the indexer does: complete lines
    /// only (a torn last line without newline is not passed), then `finish`.
    fn run(path: &Path, bytes: &[u8]) -> (Vec<Record>, Vec<ParseError>, usize) {
        let mut p = parser(path);
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let mut pos = 0usize;
        let mut consumed = 0usize;
        while let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n') {
            let line = &bytes[pos..pos + nl];
            if let Err(e) = p.line(line, pos as u64, &mut out) {
                errors.push(e);
            }
            pos += nl + 1;
            consumed = pos;
        }
        p.finish(&mut out);
        (out, errors, consumed)
    }

    fn fixtures() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home"))
    }

    const MAIN: &str = ".claude/projects/-home-dev-acme/6f1c2a9e-4b7d-4e1a-9c3b-2d5e8f7a1b01.jsonl";
    const SUB: &str = ".claude/projects/-home-dev-acme/6f1c2a9e-4b7d-4e1a-9c3b-2d5e8f7a1b01/subagents/agent-b41c9d2.jsonl";
    const OLD: &str =
        ".claude/projects/-home-dev-widgets/d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44.jsonl";
    const EMPTY: &str =
        ".claude/projects/-home-dev-empty/0c9d8e7f-1a2b-4c3d-9e8f-7a6b5c4d3e21.jsonl";

    fn parse_fixture(rel: &str) -> (Vec<Record>, Vec<ParseError>, usize, usize) {
        let path = fixtures().join(rel);
        let bytes = std::fs::read(&path).unwrap();
        let (r, e, consumed) = run(&path, &bytes);
        (r, e, consumed, bytes.len())
    }

    #[test]
    fn discovers_main_and_subagent_files() {
        let loc = Locations::under_home(&fixtures());
        let found: Vec<String> = ClaudeCode
            .discover(&loc)
            .into_iter()
            .map(|f| {
                f.path
                    .strip_prefix(fixtures())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let mut want = vec![MAIN, SUB, EMPTY, OLD];
        want.sort();
        let mut found = found;
        found.sort();
        assert_eq!(found, want);
        // A missing folder is simply not discovered.
        let none = Locations::under_home(Path::new("/nonexistent/cairn-test-home"));
        assert!(ClaudeCode.discover(&none).is_empty());
    }

    #[test]
    fn main_session_fixture() {
        let (recs, errors, consumed, len) = parse_fixture(MAIN);
        // One deliberately broken line.
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(matches!(errors[0], ParseError::Json { .. }));
        // The torn last line is not consumed.
        assert!(consumed < len);
        let sid = "6f1c2a9e-4b7d-4e1a-9c3b-2d5e8f7a1b01";
        for r in &recs {
            assert_eq!(r.agent, "claude-code");
            assert_eq!(r.session_id, sid);
            assert_eq!(r.parent_session, None);
            assert_eq!(r.project.as_deref(), Some("/home/dev/acme"));
            assert!(!r.text.trim().is_empty());
            assert!(!r.text.contains("Warmup"));
            assert!(!r.text.contains("system-reminder"));
            assert!(!r.text.contains("Caveat"));
            assert!(!r.text.contains("Request interrupted"));
            assert!(!r.text.contains("torn-line-marker"));
        }
        let got: Vec<(Role, &str)> = recs.iter().map(|r| (r.role, r.text.as_str())).collect();
        let want: Vec<(Role, &str)> = vec![
            (
                Role::User,
                "The proxy build fails again. My token ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8 still works for the registry. Why does hyper 1.0 break behind the corporate proxy?",
            ),
            (
                Role::Assistant,
                "Let me check the lockfile first.\n\nThen I will look at the proxy settings.",
            ),
            (Role::ToolCall, "Bash: cargo tree -i hyper"),
            (
                Role::ToolOutput,
                "Bash: hyper v1.0.1\nAWS_ACCESS_KEY_ID=AKIAUJZDE8GXD6NCF10E\naws_secret_access_key = El2hpChYgCfrL1spNxnyVmihA+2O76UMFxFkM+R5",
            ),
            (
                Role::ToolCall,
                "Edit /home/dev/acme/Cargo.toml\nhyper = \"0.14\" # pinned: 1.0 broke the corporate proxy",
            ),
            (
                Role::ToolOutput,
                "Edit: The file /home/dev/acme/Cargo.toml has been updated.",
            ),
            (
                Role::Assistant,
                "Decision: we pinned hyper to 0.14 because hyper 1.0 broke the corporate proxy. 我们暂时不升级 hyper，直到代理支持 HTTP/2。",
            ),
            (Role::User, "/review src/net.rs"),
            (Role::User, "Please also note the proxy host in the README."),
            (Role::ToolCall, "Grep proxy_host in /home/dev/acme/src"),
            (Role::ToolOutput, "Grep (error): No matches found"),
        ];
        assert_eq!(got, want);
        // Times: ISO with Z, ISO with an offset, and Unix ms all normalize.
        assert_eq!(recs[0].time_ms, Some(1_762_160_400_000)); // 2025-11-03T09:00:00Z
        assert_eq!(recs[1].time_ms, Some(1_762_160_405_000)); // 10:00:05+01:00
        assert_eq!(recs[6].time_ms, Some(1_762_160_460_000)); // epoch ms
        // The merged assistant record keeps the first line's offset.
        let bytes = std::fs::read(fixtures().join(MAIN)).unwrap();
        let first_text = String::from_utf8_lossy(&bytes[recs[1].offset as usize..]);
        assert!(first_text.contains("Let me check the lockfile first."));
        // Edit and Grep carry their files.
        assert_eq!(recs[4].files, vec!["/home/dev/acme/Cargo.toml".to_owned()]);
        assert_eq!(recs[9].files, vec!["/home/dev/acme/src".to_owned()]);
        assert!(recs[2].files.is_empty());
    }

    #[test]
    fn subagent_fixture() {
        let (recs, errors, _, _) = parse_fixture(SUB);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(!recs.is_empty());
        for r in &recs {
            assert_eq!(r.session_id, "agent-b41c9d2");
            assert_eq!(
                r.parent_session.as_deref(),
                Some("6f1c2a9e-4b7d-4e1a-9c3b-2d5e8f7a1b01")
            );
            assert_eq!(r.project.as_deref(), Some("/home/dev/acme"));
        }
        assert_eq!(recs[0].role, Role::User);
        assert!(
            recs[0]
                .text
                .starts_with("Find out why billing_spec is flaky")
        );
        assert_eq!(recs[1].text, "Read /home/dev/acme/spec/billing_spec.rb");
        assert_eq!(
            recs[1].files,
            vec!["/home/dev/acme/spec/billing_spec.rb".to_owned()]
        );
        assert_eq!(recs[2].role, Role::ToolOutput);
        assert!(recs[2].text.starts_with("Read:      1→describe Billing do"));
        let last = recs.last().unwrap();
        assert_eq!(last.role, Role::Assistant);
        assert!(
            last.text.contains(
                "the flaky test in billing_spec was caused by a timezone-dependent fixture"
            )
        );
        assert!(
            last.text
                .contains("Тест падает только после полуночи по UTC.")
        );
    }

    /// Claude Code 2.1.332 run with a subagent (`tools/realagents/scenario.sh
    /// --subagent claude`): `-p` launches the Agent tool in the background,
    /// and its result comes back as a `<task-notification>` user line.
    #[test]
    fn recorded_background_subagent() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../fixtures/agents/claude-code/2.1.332-subagent/home/.claude/projects/\
             -home-dev-agent-home-claude-subagent-code-proj-claude-subagent",
        );
        let parent_id = "a98dbe2f-00b7-4bef-bd24-ba82d64bcf9f";
        let main = base.join(format!("{parent_id}.jsonl"));
        let (recs, errors, _) = run(&main, &std::fs::read(&main).unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        let roles: Vec<Role> = recs.iter().map(|r| r.role).collect();
        use Role::*;
        assert_eq!(
            roles,
            [User, ToolCall, ToolOutput, Assistant, ToolOutput, Assistant]
        );
        assert_eq!(
            recs[4].text,
            "Agent \"Run echo from-subagent\" finished\nThe command printed from-subagent."
        );
        assert!(recs.iter().all(|r| !r.text.contains("<task-notification>")));
        assert!(recs.iter().all(|r| r.parent_session.is_none()));

        let child = base.join(format!(
            "{parent_id}/subagents/agent-ac261e2093b5047c3.jsonl"
        ));
        let (recs, errors, _) = run(&child, &std::fs::read(&child).unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(recs.len(), 4);
        for r in &recs {
            assert_eq!(r.session_id, "agent-ac261e2093b5047c3");
            assert_eq!(r.parent_session.as_deref(), Some(parent_id));
        }
        assert_eq!(recs[2].text, "Bash: from-subagent");
    }

    #[test]
    fn task_notification_is_tool_output() {
        let n = "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n\
                 <summary>Background command \"sleep\" completed</summary>\n</task-notification>";
        assert_eq!(
            task_notification(n).as_deref(),
            Some("Background command \"sleep\" completed")
        );
        assert_eq!(
            task_notification("<task-notification><status>killed</status></task-notification>")
                .as_deref(),
            Some("task killed")
        );
        let quoted = "what does <task-notification><summary>x</summary></task-notification> mean?";
        assert_eq!(task_notification(quoted), None);
    }

    #[test]
    fn old_style_inline_sidechain_fixture() {
        let (recs, errors, _, _) = parse_fixture(OLD);
        assert!(errors.is_empty(), "{errors:?}");
        let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
        assert!(
            recs.iter()
                .all(|r| r.session_id == sid && r.parent_session.is_none())
        );
        let texts: Vec<&str> = recs.iter().map(|r| r.text.as_str()).collect();
        // The Task call, the inline sidechain prompt and answer are all kept in the main session.
        assert!(texts.contains(
            &"Task: Compare Postgres drivers\nCompare tokio-postgres and sqlx for our CI setup."
        ));
        assert!(texts.contains(&"Compare tokio-postgres and sqlx for our CI setup."));
        assert!(texts.iter().any(|t| {
            t.contains("we chose tokio-postgres over sqlx because sqlx offline mode broke CI")
        }));
        let multi = recs
            .iter()
            .find(|r| r.text.starts_with("MultiEdit"))
            .unwrap();
        assert_eq!(multi.files, vec!["/home/dev/widgets/src/db.rs".to_owned()]);
        assert_eq!(
            multi.text,
            "MultiEdit /home/dev/widgets/src/db.rs\nuse tokio_postgres::Client;\n\npool: Pool<Client>,"
        );
        // The sidechain line has its own cwd; the record keeps it.
        assert!(
            recs.iter()
                .any(|r| r.project.as_deref() == Some("/home/dev/widgets/sub"))
        );
        // Unknown tools fall back to compact JSON.
        assert!(texts.contains(
            &"TodoWrite: {\"todos\":[{\"content\":\"switch driver\",\"status\":\"pending\"}]}"
        ));
    }

    #[test]
    fn empty_session_fixture_yields_nothing() {
        let (recs, errors, _, _) = parse_fixture(EMPTY);
        assert!(recs.is_empty());
        assert!(errors.is_empty());
    }

    #[test]
    fn session_id_falls_back_to_file_stem_and_shapes_are_checked() {
        let path = Path::new("/x/projects/-p/abc-stem.jsonl");
        let input =
            b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi there\"}}\n\
[1,2]\n\
{\"type\":\"assistant\"}\n\
{\"type\":\"brand-new-type\",\"x\":1}\n";
        let (recs, errors, _) = run(path, input);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].session_id, "abc-stem");
        assert_eq!(recs[0].project, None);
        assert_eq!(recs[0].time_ms, None);
        assert_eq!(errors.len(), 2);
        assert!(errors.iter().all(|e| matches!(e, ParseError::Shape { .. })));
    }

    #[test]
    fn user_text_cleanup() {
        assert_eq!(
            clean_user_text("[Request interrupted by user for tool use]"),
            None
        );
        assert_eq!(
            clean_user_text("<command-message>init is analyzing…</command-message>\n<command-name>/init</command-name>").as_deref(),
            Some("/init")
        );
        assert_eq!(
            clean_user_text("<local-command-stdout>(no content)</local-command-stdout>"),
            None
        );
        assert_eq!(
            clean_user_text("fix it<system-reminder>be nice</system-reminder> now").as_deref(),
            Some("fix it now")
        );
        assert_eq!(
            clean_user_text("<bash-input>open index.html</bash-input>").as_deref(),
            Some("! open index.html")
        );
        assert_eq!(clean_user_text("<system-reminder>unclosed"), None);
    }

    /// Proves only that no input makes the parser panic (the one kind of test
    /// allowed to assert nothing else): every truncation of every fixture
    /// line, and random bytes.
    #[test]
    fn truncations_never_panic() {
        for rel in [MAIN, SUB, OLD] {
            let bytes = std::fs::read(fixtures().join(rel)).unwrap();
            let mut p = parser(&fixtures().join(rel));
            let mut out = Vec::new();
            for line in bytes.split(|&b| b == b'\n') {
                for cut in 0..=line.len() {
                    let _ = p.line(&line[..cut], 0, &mut out);
                }
            }
            p.finish(&mut out);
        }
    }

    proptest::proptest! {
        /// No-panic property: arbitrary bytes and arbitrary JSON-ish lines.
        #[test]
        fn random_bytes_never_panic(lines in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..200), 0..8)) {
            let mut p = parser(Path::new("/h/.claude/projects/p/s/subagents/agent-x.jsonl"));
            let mut out = Vec::new();
            for l in &lines {
                let _ = p.line(l, 0, &mut out);
            }
            p.finish(&mut out);
        }

        /// No-panic property over structurally plausible lines with random values.
        #[test]
        fn random_shapes_never_panic(kind in "(user|assistant|summary|x)", content in ".{0,40}", name in "(Bash|Edit|MultiEdit|Task|Zzz)", side in proptest::bool::ANY) {
            let lines = [
                serde_json::json!({"type": kind, "isSidechain": side, "message": {"id": "m", "content": content}}),
                serde_json::json!({"type": kind, "message": {"id": "m", "content": [{"type":"tool_use","id":"t","name": name, "input": {"edits": [{"new_string": content}], "file_path": 3}}]}}),
                serde_json::json!({"type": "user", "message": {"content": [{"type":"tool_result","tool_use_id":"t","content": [{"type":"text","text": content}]}]}}),
                serde_json::json!({"type": "user", "message": {"content": [{"type":"tool_result","tool_use_id": 5, "content": {"x": content}}]}}),
            ];
            let mut p = parser(Path::new("/h/.claude/projects/p/s.jsonl"));
            let mut out = Vec::new();
            for l in &lines {
                let _ = p.line(l.to_string().as_bytes(), 0, &mut out);
            }
            p.finish(&mut out);
        }
    }

    #[test]
    fn real_histories() {
        let dir = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/real-histories/claude-code"
        ));
        if !dir.is_dir() {
            eprintln!("skipping: {} not found", dir.display());
            return;
        }
        let files = walk_files(dir, 4, &|p: &Path| has_suffix(p, ".jsonl"));
        assert_eq!(files.len(), 13, "{files:?}");
        // One known message per file (a distinctive substring of its text).
        let spot: &[(&str, &str)] = &[
            (
                "test_conversation_claude_code.jsonl",
                "toolchain不用保留吧?",
            ),
            (
                "claude-code-pomodoro-timer.jsonl",
                "add a Pause/Resume feature",
            ),
            ("1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", "/init"),
            (
                "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
                "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください",
            ),
            (
                "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
                "Thanks! Please update CLAUDE.md for current changes",
            ),
            (
                "claude-session.jsonl",
                "How many files did you list? Just give me a number.",
            ),
            (
                "claude-turn1.jsonl",
                "List files in the current directory using the Bash tool. Just run: ls -1",
            ),
            (
                "agent-a2898e3.jsonl",
                "Very thorough exploration. I need to understand:",
            ),
            (
                "agent-acompact-e1f845.jsonl",
                "Your task is to create a detailed summary of the conversation so far",
            ),
            (
                "agent-aa84377.jsonl",
                "Read and summarize the following files for implementing single-session bootstrap sync",
            ),
            ("short.jsonl", "mix phx.server doesnt seem to start"),
            ("subagent.jsonl", "create the beads"),
            ("tool_heavy.jsonl", "start phoenix in background"),
        ];
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let (recs, errors, _) = run(path, &bytes);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!recs.is_empty(), "{name}: no records");
            assert!(errors.is_empty(), "{name}: {errors:?}");
            for r in &recs {
                assert!(!r.session_id.is_empty(), "{name}");
                assert!(
                    r.project.as_deref().is_some_and(|p| !p.is_empty()),
                    "{name}"
                );
                assert!(r.time_ms.is_some(), "{name}");
                assert!(!r.text.trim().is_empty(), "{name}");
            }
            let in_subagents = path.parent().unwrap().ends_with("subagents");
            if in_subagents {
                let stem = path.file_stem().unwrap().to_string_lossy();
                assert!(
                    recs.iter()
                        .all(|r| r.session_id == stem && r.parent_session.is_some()),
                    "{name}"
                );
            }
            let (_, needle) = spot.iter().find(|(f, _)| *f == name).unwrap();
            assert!(
                recs.iter().any(|r| r.text.contains(needle)),
                "{name}: spot-check {needle:?} missing"
            );
            // Warmup exchange dropped; harness text gone.
            assert!(!recs.iter().any(|r| r.text == "Warmup"), "{name}");
            assert!(
                !recs
                    .iter()
                    .any(|r| r.role == Role::User && r.text.starts_with("[Request interrupted")),
                "{name}"
            );
        }
    }
}
