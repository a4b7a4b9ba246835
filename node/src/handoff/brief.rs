//! The handoff brief: built from one session's stored (already redacted)
//! records, in the session's own order, into sections a person or another
//! agent can continue from, and rendered as text within a byte bound.
//!
//! Pure: no store, no clock, no paths of the machine it runs on. The same
//! records give the same brief on every machine that holds the session
//! (times are printed in UTC, positions are the session's record order, not
//! row ids). When the bound forces cuts, the brief says what it left out.

use std::collections::BTreeMap;

use serde::Serialize;

use super::extract::{self, Call};

/// The default bound of a brief, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 8 * 1024;
/// The smallest bound a brief is built for: below it the header and the
/// open ends alone would not fit.
pub const MIN_MAX_BYTES: usize = 1024;

/// Longest goal (the first request, condensed).
const GOAL_MAX: usize = 600;
/// Longest decision line.
const DECISION_MAX: usize = 300;
/// Longest command shown.
const COMMAND_MAX: usize = 160;
/// Longest error line.
const ERROR_MAX: usize = 240;
/// Longest last request.
const REQUEST_MAX: usize = 700;
/// Longest last reply.
const REPLY_MAX: usize = 1200;
/// Items kept per list before the byte bound is even looked at.
const LIST_MAX: usize = 40;

/// The session a brief is about (from the store's session row).
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// Agent id, e.g. `claude-code`.
    pub agent: String,
    /// The agent's own session id.
    pub session_id: String,
    /// The machine the session was recorded on.
    pub machine: String,
    /// The folder the agent ran in, as it recorded it.
    pub project: Option<String>,
    /// For a sub-agent: the session that spawned it.
    pub parent_session: Option<String>,
    /// First record, RFC 3339 UTC.
    pub started: Option<String>,
    /// Last record, RFC 3339 UTC.
    pub ended: Option<String>,
    /// Seconds from the first record to the last.
    pub duration_seconds: Option<i64>,
    /// Records the session holds.
    pub records: usize,
}

/// One record of the session, as the brief needs it.
#[derive(Debug, Clone)]
pub struct Turn<'a> {
    /// `user`, `assistant`, `tool_call`, `tool_output` or `note`.
    pub role: &'a str,
    /// Unix ms.
    pub time_ms: Option<i64>,
    /// The stored (redacted) text.
    pub text: &'a str,
    /// Files the record named.
    pub files: &'a [String],
}

/// A line quoted from the session, with its position (`cairn show --offset`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    /// Position of the record in the session (0-based).
    pub at: usize,
    /// The text, cut to its bound.
    pub text: String,
}

/// A file the session created, changed or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// The path as the agent gave it.
    pub path: String,
    /// `created`, `changed` or `deleted` (its last state in the session).
    pub action: &'static str,
    /// How many tool calls touched it.
    pub times: usize,
    /// Position of the last call that touched it.
    pub at: usize,
}

/// A command the session ran and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    /// Position of the call.
    pub at: usize,
    /// The command line.
    pub command: String,
    /// `ok`, `failed` or `unknown` (no output recorded).
    pub outcome: &'static str,
    /// For a failure: its last error line.
    pub error: Option<String>,
    /// For a failure: whether the same command later succeeded.
    pub resolved: bool,
}

/// What was left open when the session stopped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Open {
    /// The last thing the user asked.
    pub last_request: Option<Quote>,
    /// The agent's last answer.
    pub last_reply: Option<Quote>,
    /// Failed commands never followed by a success of the same command, and
    /// other tool calls whose output reports a failure.
    pub unresolved_errors: Vec<Command>,
}

/// The brief, as `cairn handoff --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Brief {
    /// The session.
    pub session: Header,
    /// The first request, condensed.
    pub goal: Option<Quote>,
    /// Lines stating decisions, in session order.
    pub decisions: Vec<Quote>,
    /// Files created, changed or deleted, in order of their last change.
    pub files: Vec<FileChange>,
    /// Commands run, in order.
    pub commands: Vec<Command>,
    /// What was left open.
    pub open: Open,
    /// Commands that read more of the session.
    pub more: Vec<String>,
    /// What was left out to fit `max_bytes` (empty when nothing was).
    pub omitted: Vec<String>,
    /// The bound the text was fitted to.
    pub max_bytes: usize,
    /// The rendered brief.
    pub text: String,
}

/// Formats Unix ms as RFC 3339 UTC (seconds).
fn rfc3339(ms: Option<i64>) -> Option<String> {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

impl Header {
    /// The header for a session, its times turned into UTC text.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        agent: &str,
        session_id: &str,
        machine: &str,
        project: Option<&str>,
        parent_session: Option<&str>,
        first_ms: Option<i64>,
        last_ms: Option<i64>,
        records: usize,
    ) -> Header {
        Header {
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            machine: machine.to_owned(),
            project: project.map(str::to_owned),
            parent_session: parent_session.map(str::to_owned),
            started: rfc3339(first_ms),
            ended: rfc3339(last_ms),
            duration_seconds: first_ms.zip(last_ms).map(|(a, b)| (b - a).max(0) / 1000),
            records,
        }
    }
}

/// Everything read from the records, before the byte bound.
struct Parts {
    goal: Option<Quote>,
    decisions: Vec<Quote>,
    files: Vec<FileChange>,
    commands: Vec<Command>,
    open: Open,
}

fn read_parts(turns: &[Turn<'_>]) -> Parts {
    let clean = |s: &str| crate::text::strip_terminal(s);
    let goal = turns
        .iter()
        .enumerate()
        .find(|(_, t)| t.role == "user" && !t.text.trim().is_empty())
        .map(|(i, t)| Quote {
            at: i,
            text: extract::cut(&extract::one_line(&clean(t.text)), GOAL_MAX),
        });
    // Decisions: stated by the agent, the user or a note; each once.
    let mut decisions: Vec<Quote> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, t) in turns.iter().enumerate() {
        if !matches!(t.role, "assistant" | "user" | "note") {
            continue;
        }
        for s in extract::decision_sentences_by(&clean(t.text), t.role == "user") {
            let line = extract::cut(&extract::one_line(&s), DECISION_MAX);
            if seen.insert(line.to_lowercase()) {
                decisions.push(Quote { at: i, text: line });
            }
        }
    }
    // Files and commands from the tool calls; a command's outcome from the
    // outputs that follow it up to the next call.
    let mut files: BTreeMap<String, FileChange> = BTreeMap::new();
    let mut commands: Vec<Command> = Vec::new();
    let mut tool_errors: Vec<Command> = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        if t.role != "tool_call" {
            continue;
        }
        let call = extract::classify_call(t.text, t.files);
        let shell = matches!(&call, Call::Shell(c) if !c.is_empty());
        match call {
            Call::Shell(cmd) if !cmd.is_empty() => {
                let outputs: Vec<&Turn<'_>> = turns[i + 1..]
                    .iter()
                    .take_while(|n| n.role == "tool_output")
                    .collect();
                let failed = outputs.iter().find_map(|o| extract::failure(o.text));
                let outcome = match (&failed, outputs.is_empty()) {
                    (Some(_), _) => "failed",
                    (None, true) => "unknown",
                    (None, false) => "ok",
                };
                commands.push(Command {
                    at: i,
                    command: extract::cut(&extract::one_line(&clean(&cmd)), COMMAND_MAX),
                    outcome,
                    error: failed.map(|e| extract::cut(&extract::one_line(&clean(&e)), ERROR_MAX)),
                    resolved: false,
                });
            }
            Call::Files {
                created,
                changed,
                deleted,
            } => {
                for (list, action) in [
                    (created, "created"),
                    (changed, "changed"),
                    (deleted, "deleted"),
                ] {
                    for p in list {
                        let p = clean(&p).trim().to_owned();
                        if p.is_empty() {
                            continue;
                        }
                        let e = files.entry(p.clone()).or_insert(FileChange {
                            path: p,
                            action,
                            times: 0,
                            at: i,
                        });
                        e.times += 1;
                        e.at = i;
                        // Created then edited is still a new file.
                        if !(e.action == "created" && action == "changed") {
                            e.action = action;
                        }
                    }
                }
            }
            _ => {}
        }
        if !shell {
            // Another tool that failed (an edit whose hook failed, a read of a
            // missing file): an open end, not a command.
            let outputs = turns[i + 1..]
                .iter()
                .take_while(|n| n.role == "tool_output");
            if let Some(e) = outputs.filter_map(|o| extract::failure(o.text)).next() {
                tool_errors.push(Command {
                    at: i,
                    command: extract::cut(
                        &extract::one_line(&clean(t.text.lines().next().unwrap_or(""))),
                        COMMAND_MAX,
                    ),
                    outcome: "failed",
                    error: Some(extract::cut(&extract::one_line(&clean(&e)), ERROR_MAX)),
                    resolved: false,
                });
            }
        }
    }
    // A failure is resolved when the same command later succeeded.
    for k in 0..commands.len() {
        if commands[k].outcome == "failed" {
            let later_ok = commands[k + 1..]
                .iter()
                .any(|c| c.outcome == "ok" && c.command == commands[k].command);
            commands[k].resolved = later_ok;
        }
    }
    let mut files: Vec<FileChange> = files.into_values().collect();
    files.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.path.cmp(&b.path)));
    let last_of = |role: &str, max: usize| {
        turns
            .iter()
            .enumerate()
            .rev()
            .find(|(_, t)| t.role == role && !t.text.trim().is_empty())
            .map(|(i, t)| Quote {
                at: i,
                text: extract::cut(clean(t.text).trim(), max),
            })
    };
    let open = Open {
        last_request: last_of("user", REQUEST_MAX),
        last_reply: last_of("assistant", REPLY_MAX),
        unresolved_errors: {
            let mut e: Vec<Command> = commands
                .iter()
                .filter(|c| c.outcome == "failed" && !c.resolved)
                .cloned()
                .chain(tool_errors)
                .collect();
            e.sort_by_key(|c| c.at);
            e
        },
    };
    Parts {
        goal,
        decisions,
        files,
        commands,
        open,
    }
}

/// Counts of what the bound left out, by section.
#[derive(Default)]
struct Cuts {
    decisions: usize,
    files: usize,
    ok_commands: usize,
    failed_commands: usize,
    errors: usize,
    shortened: Vec<&'static str>,
}

impl Cuts {
    fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let n =
            |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        if self.decisions > 0 {
            out.push(n(self.decisions, "earlier decision", "earlier decisions"));
        }
        if self.files > 0 {
            out.push(n(self.files, "earlier file", "earlier files"));
        }
        if self.ok_commands > 0 {
            out.push(n(
                self.ok_commands,
                "command that succeeded",
                "commands that succeeded",
            ));
        }
        if self.failed_commands > 0 {
            out.push(n(
                self.failed_commands,
                "resolved failure",
                "resolved failures",
            ));
        }
        if self.errors > 0 {
            out.push(n(
                self.errors,
                "earlier unresolved error",
                "earlier unresolved errors",
            ));
        }
        for s in &self.shortened {
            out.push(format!("the rest of the {s}"));
        }
        out
    }
}

/// Builds the brief for a session from its records in session order, its
/// text at most `max_bytes` (at least [`MIN_MAX_BYTES`]).
pub fn build(header: Header, turns: &[Turn<'_>], max_bytes: usize) -> Brief {
    let max_bytes = max_bytes.max(MIN_MAX_BYTES);
    let mut p = read_parts(turns);
    let mut cuts = Cuts::default();
    // Long lists keep their newest items.
    let trim = |n: usize| n.saturating_sub(LIST_MAX);
    cuts.decisions += trim(p.decisions.len());
    p.decisions.drain(..trim(p.decisions.len()));
    cuts.files += trim(p.files.len());
    p.files.drain(..trim(p.files.len()));
    cuts.errors += trim(p.open.unresolved_errors.len());
    p.open
        .unresolved_errors
        .drain(..trim(p.open.unresolved_errors.len()));
    // Commands: failures are kept before successes.
    while p.commands.len() > LIST_MAX {
        let i = p
            .commands
            .iter()
            .position(|c| c.outcome != "failed")
            .unwrap_or(0);
        let c = p.commands.remove(i);
        count_command(&mut cuts, &c);
    }
    let more = more_commands(&header, &p);
    let mut brief = Brief {
        session: header,
        goal: p.goal,
        decisions: p.decisions,
        files: p.files,
        commands: p.commands,
        open: p.open,
        more,
        omitted: Vec::new(),
        max_bytes,
        text: String::new(),
    };
    loop {
        brief.omitted = cuts.lines();
        brief.text = render(&brief);
        if brief.text.len() <= max_bytes || !cut_one(&mut brief, &mut cuts) {
            break;
        }
    }
    if brief.text.len() > max_bytes {
        // Only the fixed parts are left and still too long: cut the body
        // of the text, keeping its pointers and the note of what was left out.
        brief.omitted.push("the end of the open ends".to_owned());
        let full = render(&brief);
        let tail_at = full.find(READ_MORE).unwrap_or(full.len());
        let tail = &full[tail_at..];
        let body = extract::cut(&full[..tail_at], max_bytes.saturating_sub(tail.len() + 1));
        brief.text = format!("{body}\n{tail}");
        if brief.text.len() > max_bytes {
            brief.text = extract::cut(&brief.text, max_bytes);
        }
    }
    brief
}

fn count_command(cuts: &mut Cuts, c: &Command) {
    if c.outcome == "failed" {
        cuts.failed_commands += 1;
    } else {
        cuts.ok_commands += 1;
    }
}

/// Drops or shortens one thing, least useful first; false when nothing is
/// left to drop.
fn cut_one(b: &mut Brief, cuts: &mut Cuts) -> bool {
    // Commands that succeeded, oldest first.
    if let Some(i) = b.commands.iter().position(|c| c.outcome != "failed") {
        let c = b.commands.remove(i);
        count_command(cuts, &c);
        return true;
    }
    // Failures that were resolved later.
    if let Some(i) = b.commands.iter().position(|c| c.resolved) {
        let c = b.commands.remove(i);
        count_command(cuts, &c);
        return true;
    }
    // The unresolved failures also stand in the open ends: list them once.
    if !b.commands.is_empty() && !b.open.unresolved_errors.is_empty() {
        let listed = b.commands.iter().filter(|c| !c.resolved).count();
        for c in std::mem::take(&mut b.commands) {
            count_command(cuts, &c);
        }
        cuts.failed_commands = cuts.failed_commands.saturating_sub(listed);
        return true;
    }
    if b.files.len() > 8 {
        b.files.remove(0);
        cuts.files += 1;
        return true;
    }
    if b.decisions.len() > 5 {
        b.decisions.remove(0);
        cuts.decisions += 1;
        return true;
    }
    if b.open.unresolved_errors.len() > 3 {
        b.open.unresolved_errors.remove(0);
        cuts.errors += 1;
        return true;
    }
    if shorten(b, cuts, [400, 250, 250]) {
        return true;
    }
    if !b.files.is_empty() {
        b.files.remove(0);
        cuts.files += 1;
        return true;
    }
    if b.decisions.len() > 1 {
        b.decisions.remove(0);
        cuts.decisions += 1;
        return true;
    }
    if b.open.unresolved_errors.len() > 1 {
        b.open.unresolved_errors.remove(0);
        cuts.errors += 1;
        return true;
    }
    shorten(b, cuts, [160, 120, 160])
}

/// Shortens the first of the last reply, the goal and the last request
/// that is longer than its bound in `to`.
fn shorten(b: &mut Brief, cuts: &mut Cuts, to: [usize; 3]) -> bool {
    for ((name, q), to) in [
        ("last reply", &mut b.open.last_reply),
        ("goal", &mut b.goal),
        ("last request", &mut b.open.last_request),
    ]
    .into_iter()
    .zip(to)
    {
        if let Some(q) = q
            && q.text.len() > to + 8
        {
            q.text = extract::cut(&q.text, to);
            if !cuts.shortened.contains(&name) {
                cuts.shortened.push(name);
            }
            return true;
        }
    }
    false
}

/// `cairn show` commands that read more: the whole session, and the
/// places of the last request and the first unresolved failure.
fn more_commands(h: &Header, p: &Parts) -> Vec<String> {
    let id = &h.session_id;
    let mut out = vec![format!("cairn show {id}")];
    let around = |at: usize| at.saturating_sub(5);
    if let Some(q) = &p.open.last_request
        && q.at > 0
    {
        out.push(format!("cairn show {id} --offset {}", around(q.at)));
    }
    if let Some(c) = p.open.unresolved_errors.first() {
        let cmd = format!("cairn show {id} --offset {}", around(c.at));
        if !out.contains(&cmd) {
            out.push(cmd);
        }
    }
    out
}

fn duration(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        s => format!("{} days", s / 86_400),
    }
}

fn day_minute(rfc: &Option<String>) -> String {
    rfc.as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "time unknown".to_owned())
}

/// The heading of the pointers, which close the brief.
const READ_MORE: &str = "\n## Read more\n";

/// The brief as text (Markdown).
fn render(b: &Brief) -> String {
    let h = &b.session;
    let mut s = format!("# Handoff: {} session {}\n", h.agent, h.session_id);
    s.push_str(&format!(
        "Agent: {} · machine: {} · project: {}\n",
        h.agent,
        h.machine,
        h.project.as_deref().unwrap_or("none recorded")
    ));
    if let Some(p) = &h.parent_session {
        s.push_str(&format!("Sub-agent of session {p}\n"));
    }
    let span = match (&h.started, &h.ended, h.duration_seconds) {
        (Some(_), Some(_), Some(d)) => format!(
            "{} → {} UTC ({})",
            day_minute(&h.started),
            day_minute(&h.ended),
            duration(d)
        ),
        _ => "time unknown".to_owned(),
    };
    s.push_str(&format!("When: {span} · {} records\n", h.records));
    s.push_str("\n## Goal\n");
    match &b.goal {
        Some(g) => s.push_str(&format!("{} [{}]\n", g.text, g.at)),
        None => s.push_str("(no request recorded)\n"),
    }
    s.push_str("\n## Decisions\n");
    if b.decisions.is_empty() {
        s.push_str("(none stated in so many words)\n");
    }
    for d in &b.decisions {
        s.push_str(&format!("- {} [{}]\n", d.text, d.at));
    }
    if !b.files.is_empty() {
        s.push_str("\n## Files created or changed\n");
        for f in &b.files {
            let times = if f.times > 1 {
                format!(" ({}×)", f.times)
            } else {
                String::new()
            };
            s.push_str(&format!("- {} {}{times} [{}]\n", f.action, f.path, f.at));
        }
    }
    if !b.commands.is_empty() {
        s.push_str("\n## Commands run\n");
        for c in &b.commands {
            match (&c.error, c.resolved) {
                (Some(e), false) => {
                    s.push_str(&format!("- FAILED `{}` [{}]: {e}\n", c.command, c.at))
                }
                (Some(e), true) => s.push_str(&format!(
                    "- failed, later passed: `{}` [{}]: {e}\n",
                    c.command, c.at
                )),
                (None, _) => s.push_str(&format!("- {} `{}` [{}]\n", c.outcome, c.command, c.at)),
            }
        }
    }
    s.push_str("\n## Left open\n");
    if let Some(q) = &b.open.last_request {
        let unanswered = b.open.last_reply.as_ref().is_none_or(|r| r.at < q.at);
        s.push_str(&format!(
            "Last request [{}]{}:\n{}\n",
            q.at,
            if unanswered {
                ", no reply after it"
            } else {
                ""
            },
            quote_block(&q.text)
        ));
    }
    if let Some(q) = &b.open.last_reply {
        s.push_str(&format!(
            "Last reply [{}]:\n{}\n",
            q.at,
            quote_block(&q.text)
        ));
    }
    if b.open.unresolved_errors.is_empty() {
        s.push_str("Unresolved errors: none seen.\n");
    } else {
        s.push_str("Unresolved errors:\n");
        for c in &b.open.unresolved_errors {
            s.push_str(&format!(
                "- `{}` [{}]: {}\n",
                c.command,
                c.at,
                c.error.as_deref().unwrap_or("failed")
            ));
        }
    }
    s.push_str(READ_MORE);
    s.push_str("[N] is a record's place: `cairn show ID --offset N` starts there.\n");
    for m in &b.more {
        s.push_str(&format!("- {m}\n"));
    }
    if !b.omitted.is_empty() {
        s.push_str(&format!(
            "\nLeft out to fit {} bytes: {}.\n",
            b.max_bytes,
            b.omitted.join(", ")
        ));
    }
    s
}

fn quote_block(text: &str) -> String {
    text.lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(records: usize) -> Header {
        Header::new(
            "claude-code",
            "s-1",
            "laptop",
            Some("/home/dev/acme"),
            None,
            Some(1_762_160_100_000),
            Some(1_762_166_520_000),
            records,
        )
    }

    fn turn<'a>(role: &'a str, text: &'a str) -> Turn<'a> {
        Turn {
            role,
            time_ms: None,
            text,
            files: &[],
        }
    }

    #[test]
    fn a_brief_holds_goal_decisions_files_commands_and_open_ends() {
        let files = ["src/q.rs".to_owned()];
        let turns = vec![
            turn(
                "user",
                "Move the job queue off Redis.\nIt keeps dropping jobs.",
            ),
            turn(
                "assistant",
                "Looking. We decided to use SQLite because Redis is one more server.",
            ),
            Turn {
                files: &files,
                ..turn("tool_call", "Write src/q.rs\npub struct Q;")
            },
            turn("tool_call", "Bash: cargo test"),
            turn(
                "tool_output",
                "Bash (error): error[E0433]: failed to resolve\nerror: could not compile",
            ),
            turn("tool_call", "Bash: cargo test"),
            turn("tool_output", "Bash: test result: ok. 3 passed; 0 failed"),
            turn("tool_call", "Bash: psql -c 'select 1'"),
            turn(
                "tool_output",
                "Bash (error): psql: error: connection refused",
            ),
            turn("user", "Now wire the worker to it."),
            turn("assistant", "I will wire it after the database is up."),
        ];
        let b = build(header(turns.len()), &turns, DEFAULT_MAX_BYTES);
        assert_eq!(
            b.goal.as_ref().map(|g| g.text.as_str()),
            Some("Move the job queue off Redis. It keeps dropping jobs.")
        );
        assert_eq!(b.decisions.len(), 1);
        assert!(b.decisions[0].text.contains("use SQLite because"));
        assert_eq!(
            b.files,
            vec![FileChange {
                path: "src/q.rs".into(),
                action: "created",
                times: 1,
                at: 2
            }]
        );
        let outcomes: Vec<(&str, bool)> =
            b.commands.iter().map(|c| (c.outcome, c.resolved)).collect();
        assert_eq!(
            outcomes,
            [("failed", true), ("ok", false), ("failed", false)]
        );
        assert_eq!(b.open.unresolved_errors.len(), 1);
        assert_eq!(
            b.open.unresolved_errors[0].error.as_deref(),
            Some("Bash (error): psql: error: connection refused")
        );
        assert_eq!(b.open.last_request.as_ref().map(|q| q.at), Some(9));
        assert_eq!(b.open.last_reply.as_ref().map(|q| q.at), Some(10));
        assert!(b.omitted.is_empty());
        for want in [
            "project: /home/dev/acme",
            "2025-11-03 08:55 → 2025-11-03 10:42 UTC (1 h 47 min)",
            "created src/q.rs [2]",
            "FAILED `psql -c 'select 1'` [7]",
            "Last request [9]:\n> Now wire the worker to it.",
            "cairn show s-1 --offset 4",
        ] {
            assert!(b.text.contains(want), "{want:?} missing from:\n{}", b.text);
        }
        // The same records give the same brief.
        assert_eq!(
            build(header(turns.len()), &turns, DEFAULT_MAX_BYTES).text,
            b.text
        );
    }

    #[test]
    fn the_bound_is_kept_and_cuts_are_said() {
        let long: Vec<String> = (0..300)
            .map(|i| format!("We chose option {i} because the number {i} is the best one of all of them, really."))
            .collect();
        let cmds: Vec<String> = (0..200)
            .map(|i| format!("Bash: echo step {i} 😀"))
            .collect();
        let mut turns = vec![turn("user", "Do the long task — 长任务。")];
        for (d, c) in long.iter().zip(cmds.iter().cycle()) {
            turns.push(turn("assistant", d));
            turns.push(turn("tool_call", c));
            turns.push(turn("tool_output", "ok"));
        }
        for max in [MIN_MAX_BYTES, 2000, DEFAULT_MAX_BYTES, 20_000] {
            let b = build(header(turns.len()), &turns, max);
            assert!(b.text.len() <= max, "{max}: {}", b.text.len());
            assert!(!b.omitted.is_empty(), "{max}");
            assert!(b.text.contains("Left out to fit"), "{max}");
            assert!(b.text.contains("earlier decisions"), "{max}");
            // The newest decision survives every bound.
            assert!(b.text.contains("option 299 "), "{max}:\n{}", b.text);
        }
    }

    #[test]
    fn fixed_parts_over_the_bound_are_cut_keeping_pointers_and_the_note() {
        let long = "word ".repeat(400);
        let errs: Vec<String> = (0..4)
            .map(|i| format!("Bash: make target-{i}-{}", "x".repeat(150)))
            .collect();
        let mut turns = vec![turn("user", &long), turn("assistant", &long)];
        for e in &errs {
            turns.push(turn("tool_call", e));
            turns.push(turn(
                "tool_output",
                "error: it broke [REDACTED:github-token] again and again",
            ));
        }
        turns.push(turn("user", &long));
        let b = build(header(turns.len()), &turns, MIN_MAX_BYTES);
        assert!(b.text.len() <= MIN_MAX_BYTES, "{}", b.text.len());
        assert!(b.text.contains(READ_MORE), "{}", b.text);
        assert!(b.text.contains("Left out to fit 1024 bytes"), "{}", b.text);
        // No half marker anywhere.
        assert_eq!(
            b.text.matches("[REDACTED").count(),
            b.text.matches("[REDACTED:github-token]").count()
        );
    }

    #[test]
    fn a_session_in_another_language_is_briefed_in_its_own_words() {
        // Russian, Japanese and German sessions: the goal, the decisions and
        // the open ends are quoted as written, never translated or mangled.
        let cases = [
            (
                "Перенеси очередь задач из Redis в SQLite.",
                "Мы решили оставить SQLite, потому что Redis теряет задачи.",
                "Теперь подключи воркер.",
            ),
            (
                "ジョブキューを Redis から SQLite に移してください。",
                "Redis はジョブを落とすので、SQLite を使うことにしました。",
                "次にワーカーをつないでください。",
            ),
            (
                "Zieh die Job-Queue von Redis auf SQLite um.",
                "Wir haben SQLite gewählt, weil Redis Jobs verliert.",
                "Jetzt den Worker anschließen.",
            ),
        ];
        for (goal, decision, last) in cases {
            let turns = vec![
                turn("user", goal),
                turn("assistant", decision),
                turn("user", last),
            ];
            let b = build(header(turns.len()), &turns, DEFAULT_MAX_BYTES);
            assert_eq!(b.goal.as_ref().map(|g| g.text.as_str()), Some(goal));
            assert!(
                b.decisions.iter().any(|d| d.text == decision),
                "{decision}: {:?}",
                b.decisions
            );
            assert_eq!(
                b.open.last_request.as_ref().map(|q| q.text.as_str()),
                Some(last)
            );
            assert!(
                b.text.contains(goal) && b.text.contains(decision),
                "{}",
                b.text
            );
        }
        // A long session in Japanese cut to the smallest bound keeps whole
        // characters and says what it left out.
        let long = "決定：キャッシュは 64 MB のままにする。".repeat(200);
        let turns = vec![turn("user", &long), turn("assistant", &long)];
        let b = build(header(turns.len()), &turns, MIN_MAX_BYTES);
        assert!(b.text.len() <= MIN_MAX_BYTES, "{}", b.text.len());
        assert!(b.text.contains("Left out to fit"), "{}", b.text);
        assert!(!b.text.contains('\u{fffd}'), "a character was split");
        assert!(b.text.contains("キャッシュ"), "{}", b.text);
    }

    #[test]
    fn an_empty_session_still_gives_a_brief() {
        let b = build(header(0), &[], DEFAULT_MAX_BYTES);
        assert!(b.text.contains("(no request recorded)"));
        assert!(b.text.contains("Unresolved errors: none seen."));
        assert!(b.omitted.is_empty());
    }
}
