//! Runs validated tool requests against a [`Node`] and renders compact,
//! fenced text answers within a byte budget.
//!
//! Every piece of recalled text passes through [`sanitize::recalled`] and is
//! fenced with [`sanitize::wrap`]. Only `remember` writes; nothing here
//! starts an indexing pass for a read.

use std::collections::BTreeMap;

use serde::Serialize;

use super::sanitize::{self, truncate};
use super::tools::{SearchRequest, SessionRequest};
use crate::node::{Node, NodeError};
use crate::search::{Hit, SearchOptions};
use crate::store::{SessionInfo, SessionLookup, Store, StoreError};

/// Byte budget of a `search` answer.
pub const SEARCH_BUDGET: usize = 6 * 1024;
/// Byte budget of a `session` answer.
pub const SESSION_BUDGET: usize = 16 * 1024;
/// Longest snippet shown per hit.
const SNIPPET_MAX: usize = 400;
/// Longest single record shown by `session`.
const RECORD_MAX: usize = 3000;

/// A tool that ran but could not answer; the text is shown to the agent.
#[derive(Debug, thiserror::Error)]
pub enum ToolFailure {
    /// The node failed (database locked too long, corrupt, ...).
    #[error(transparent)]
    Node(#[from] NodeError),
    /// No session matches the handle, or several do.
    #[error("{0}")]
    NotFound(String),
    /// The answer could not be rendered.
    #[error("failed to render the answer: {0}")]
    Render(#[from] serde_json::Error),
}

impl From<StoreError> for ToolFailure {
    fn from(e: StoreError) -> Self {
        ToolFailure::Node(NodeError::Store(e))
    }
}

/// The handle of a session: `agent:session_id`.
pub fn handle(agent: &str, session_id: &str) -> String {
    format!("{agent}:{session_id}")
}

fn when(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

fn hit_time(h: &Hit) -> String {
    h.time
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

/// One line of metadata, cleaned (paths and names come from files too).
fn meta(parts: &[&str]) -> String {
    sanitize::recalled(&parts.join(" · ")).replace('\n', " ")
}

/// Where the server's own client works: the folder it started the server
/// in and when. The conversation that asks a question is being written
/// while it asks, so its newest words (the question itself) match best;
/// `search` leaves that conversation's sessions out ([`asking_sessions`]).
#[derive(Debug, Clone)]
pub struct Asking {
    /// The server's working directory (agents start it in the project).
    pub cwd: String,
    /// When the server started, Unix ms.
    pub since_ms: i64,
    /// The agent the client is, when its name says ([`agent_of_client`]):
    /// only that agent's sessions can be the one asking.
    pub agent: Option<&'static str>,
    /// The conversations named to the server ([`named_by_client`],
    /// [`named_in_call`]), the call's first: the one of the client's agent
    /// asks, even when another of the same agent is at work in the same
    /// folder.
    pub named: Vec<Named>,
}

/// A conversation a client names: its agent and session id, and whether
/// the call itself named it (exact) or the server's start did (stale once
/// the user clears the conversation: it goes on under another id).
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// The agent whose session it is.
    pub agent: &'static str,
    /// The agent's id of the session.
    pub id: String,
    /// Named by the tool call rather than at the server's start.
    pub by_call: bool,
}

/// The environment variables in which agents name their conversation to
/// the MCP servers they start, as the releases checked do: Claude Code
/// 2.1.337 and GitHub Copilot CLI 1.0.102 (Gemini CLI, Codex, opencode,
/// Qwen Code, Cline, cn, Kimi CLI, Vibe, OpenHands and droid name none).
const NAMED_IN_ENV: [(&str, &str); 2] = [
    ("CLAUDE_CODE_SESSION_ID", "claude-code"),
    ("COPILOT_AGENT_SESSION_ID", "copilot"),
];

/// The conversations named in the environment the server started with
/// (an agent started from another's shell inherits that one's too).
pub fn named_by_client(env: impl Fn(&str) -> Option<String>) -> Vec<Named> {
    NAMED_IN_ENV
        .iter()
        .filter_map(|(var, agent)| {
            let id = env(var)?.trim().to_owned();
            (!id.is_empty()).then_some(Named {
                agent,
                id,
                by_call: false,
            })
        })
        .collect()
}

/// Who makes a tool call, as far as the call says: the client's agent
/// (by the name it gives in its handshake or, in the stateless protocol
/// without one, in each request's `_meta`) and the conversation the call
/// names, if any ([`named_in_call`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caller {
    /// The client's agent ([`agent_of_client`]).
    pub agent: Option<&'static str>,
    /// The conversation the call names.
    pub named: Option<Named>,
}

impl Caller {
    /// The caller of a request from a client named `client` (its
    /// handshake's name, else its `_meta`'s), the request carrying `meta`.
    pub fn of(client: Option<&str>, meta: &serde_json::Map<String, serde_json::Value>) -> Caller {
        let agent = client.and_then(agent_of_client);
        Caller {
            agent,
            named: named_in_call(agent, meta),
        }
    }
}

/// The conversation a tool call names in its `_meta`: Codex 0.171.0 sends
/// its session's id (`sessionId`, and `session_id` in
/// `x-codex-turn-metadata`), droid 0.225.2 its session's in
/// `assemblySessionId`. Claude Code 2.1.337 sends only the id of the tool
/// use, which its transcript holds only after the call began.
pub fn named_in_call(
    agent: Option<&'static str>,
    meta: &serde_json::Map<String, serde_json::Value>,
) -> Option<Named> {
    let agent = agent?;
    let id = match agent {
        "codex" => meta
            .get("sessionId")
            .or_else(|| meta.get("x-codex-turn-metadata")?.get("session_id")),
        "factory" => meta.get("assemblySessionId"),
        _ => None,
    }?;
    let id = id.as_str()?.trim();
    (!id.is_empty()).then(|| Named {
        agent,
        id: id.to_owned(),
        by_call: true,
    })
}

/// The agent id of an MCP client, by the name it gives in its handshake
/// (or `_meta`), as the releases checked send it (Claude Code 2.1.197 and
/// 2.1.337, Gemini CLI 0.61.0, Codex 0.171.0, opencode 1.18.33, Cline CLI
/// 3.0.65, cn 1.5.47, Qwen Code 0.15.10, Copilot CLI 1.0.102, droid
/// 0.225.2, Kilo CLI 7.7.7). `None` for any other name: Python SDK clients
/// (Kimi CLI, Vibe) send "mcp", OpenHands "fastmcp".
pub fn agent_of_client(name: &str) -> Option<&'static str> {
    Some(match name {
        "claude-code" => "claude-code",
        "gemini-cli-mcp-client" => "gemini",
        "codex-mcp-client" => "codex",
        "opencode" => "opencode",
        "@cline/core" => "cline",
        "continue-cli-client" => "continue",
        "copilot-cli" => "copilot",
        "factory-cli" => "factory",
        "kilo" => "kilo",
        n if n.starts_with("qwen-cli-mcp-client") => "qwen",
        _ => return None,
    })
}

/// Slack before the server's start: a client may start its servers a
/// little after its conversation's first line.
const ASKING_SLACK_MS: i64 = 60_000;

/// Sessions written to since the server started looked at, at most: the
/// asking conversation's, its sub-agents' (each in a session of its own)
/// and those of other conversations at work at the same time.
const ASKING_SESSIONS: i64 = 64;

/// The sessions of the conversation that is asking. That one is this
/// machine's session written to since the server started (of the client's
/// agent, when known): the one the client named, or else the one written
/// to last whose project is the server's folder. When both are found and
/// differ, the named one asks unless the server's start named it and it
/// had ended before the folder's began (the user cleared the conversation
/// and started anew under another id). With it come the conversation it is a
/// sub-agent of, and that conversation's other sub-agents written to
/// since. Empty when no session fits.
pub fn asking_sessions(
    store: &Store,
    machine: &str,
    asking: &Asking,
) -> Result<Vec<SessionInfo>, StoreError> {
    let cwd = asking.cwd.trim_end_matches('/');
    // This machine's sessions written since the start, newest first.
    let since = asking.since_ms - ASKING_SLACK_MS;
    let mut recent: Vec<SessionInfo> = store
        .sessions_written_since(since, ASKING_SESSIONS)?
        .into_iter()
        .filter(|s| s.machine == machine && asking.agent.is_none_or(|a| s.agent == a))
        .collect();
    let in_folder = recent
        .iter()
        .position(|s| !cwd.is_empty() && s.project.as_deref() == Some(cwd));
    // Only a name of the client's own agent: another agent started from
    // that one's shell inherits its name.
    let name = asking.named.iter().find(|n| asking.agent == Some(n.agent));
    let named = name.and_then(|n| recent.iter().position(|s| s.session_id == n.id));
    let by_call = name.is_some_and(|n| n.by_call);
    let at = match (named, in_folder) {
        (Some(n), Some(f)) if !by_call => {
            let ended_before = match (recent[n].last_ms, recent[f].first_ms) {
                (Some(ended), Some(began)) => ended < began,
                _ => false,
            };
            if ended_before { f } else { n }
        }
        (Some(at), _) | (None, Some(at)) => at,
        (None, None) => return Ok(Vec::new()),
    };
    let asker = recent.remove(at);
    let root = asker
        .parent_session
        .clone()
        .unwrap_or(asker.session_id.clone());
    let agent = asker.agent.clone();
    let mut out = vec![asker];
    out.extend(recent.into_iter().filter(|s| {
        s.agent == agent
            && (s.session_id == root || s.parent_session.as_deref() == Some(root.as_str()))
    }));
    Ok(out)
}

/// Runs `search` and renders at most [`SEARCH_BUDGET`] bytes, leaving out
/// the sessions of the conversation that asks (see [`Asking`]).
pub fn search(
    node: &Node,
    req: &SearchRequest,
    now_ms: i64,
    asking: Option<&Asking>,
) -> Result<String, ToolFailure> {
    let asker = match asking {
        Some(a) => asking_sessions(node.store(), &node.config().node_name, a)?,
        None => Vec::new(),
    };
    tracing::debug!(
        client = ?asking.and_then(|a| a.agent),
        named = ?asking.map(|a| &a.named),
        asking = ?asker.iter().map(|s| &s.session_id).collect::<Vec<_>>(),
        "the asking conversation"
    );
    let opts = SearchOptions {
        // More, so that leaving the asking sessions out keeps the limit.
        limit: req.limit + asker.len(),
        agent: req.agent.clone(),
        project: req.project.clone(),
        machine: req.machine.clone(),
        since_ms: req.since_ms,
        roles: req.role.into_iter().collect(),
        session: None,
        now_ms,
        semantic: None, // filled in by `Node::search`
        lexical_only: false,
    };
    // A running daemon answers from its warm connection (the vectors held
    // in memory): the hits this process would find itself.
    let served = match crate::daemon::is_serving(&node.config().home) {
        true => crate::daemon::search_socket::served(node.config(), &req.query, &opts, 0),
        false => None,
    };
    let mut hits = match served {
        Some(page) => page.hits,
        None => node.search(&req.query, &opts)?,
    };
    let asks = |h: &Hit| {
        asker
            .iter()
            .any(|s| h.agent == s.agent && h.session_id == s.session_id)
    };
    let own: Vec<String> = hits
        .iter()
        .filter(|h| asks(h))
        .map(|h| sanitize::recalled(&handle(&h.agent, &h.session_id)).replace('\n', " "))
        .collect();
    hits.retain(|h| !asks(h));
    let left_out = match own.len() {
        0 => String::new(),
        1 => format!(
            "\nThis conversation's own session ({}) matched too and is left out.",
            own[0]
        ),
        _ => format!(
            "\nThis conversation's own sessions ({}) matched too and are left out.",
            own.join(", ")
        ),
    };
    hits.truncate(req.limit);
    if hits.is_empty() {
        return Ok(format!(
            "No matches for {:?}. Try fewer or other words, or drop filters.{left_out}",
            sanitize::recalled(&req.query)
        ));
    }
    let budget = SEARCH_BUDGET - sanitize::wrap_overhead();
    let mut body = String::new();
    let mut shown = 0;
    for (i, h) in hits.iter().enumerate() {
        let entry = render_hit(node.store(), i + 1, h)?;
        if body.len() + entry.len() > budget && shown > 0 {
            break;
        }
        body.push_str(&truncate(&entry, budget));
        shown += 1;
    }
    let mut out = format!(
        "{} of {} hits for {:?}. Read more with the `session` tool: {{\"handle\": <handle>, \"offset\": <at>}}.\n",
        shown,
        hits.len(),
        sanitize::recalled(&req.query)
    );
    out.push_str(&sanitize::wrap(&body));
    if shown < hits.len() {
        out.push_str(&format!(
            "\n{} more hits left out to save space: narrow the query or add filters.",
            hits.len() - shown
        ));
    }
    out.push_str(&left_out);
    Ok(out)
}

fn render_hit(store: &Store, n: usize, h: &Hit) -> Result<String, ToolFailure> {
    let (at, total) = record_position(store, h.record_id)?;
    let matches = if h.matches > 1 {
        format!("{} matches", h.matches)
    } else {
        "1 match".to_owned()
    };
    let mut s = format!(
        "{n}. {}\n   handle: {}  at: {at} of {total}\n",
        meta(&[
            &h.agent,
            h.project.as_deref().unwrap_or("-"),
            &h.machine,
            &hit_time(h),
            &h.role,
            &matches,
        ]),
        sanitize::recalled(&handle(&h.agent, &h.session_id)),
    );
    if let Some(t) = &h.title {
        s.push_str(&format!(
            "   title: {}\n",
            truncate(&sanitize::recalled(t).replace('\n', " "), 160)
        ));
    }
    s.push_str(&format!(
        "   {}\n",
        truncate(&sanitize::recalled(&h.snippet), SNIPPET_MAX)
    ));
    // The hit is the user's own words (often the question): show the reply.
    if let Some(answer) = &h.answer_snippet {
        s.push_str(&format!(
            "   {}: {}\n",
            h.answer_role.as_deref().unwrap_or("answer"),
            truncate(&sanitize::recalled(answer), SNIPPET_MAX)
        ));
    }
    Ok(s)
}

/// Where a record sits in its session's time order (0-based), and the session's size.
fn record_position(store: &Store, record_id: i64) -> Result<(usize, usize), ToolFailure> {
    let ids = store.session_order_of(record_id)?;
    let at = ids.iter().position(|&id| id == record_id).unwrap_or(0);
    Ok((at, ids.len()))
}

/// Finds the one session a handle, id or id prefix names.
pub fn resolve(store: &Store, handle_or_id: &str) -> Result<SessionInfo, ToolFailure> {
    match store.find_session(handle_or_id)? {
        SessionLookup::One(s) => Ok(*s),
        SessionLookup::None => Err(ToolFailure::NotFound(format!(
            "no session matches {:?}; use a `handle` from a `search` hit",
            sanitize::recalled(handle_or_id)
        ))),
        SessionLookup::Several { count, handles } => {
            Err(ToolFailure::NotFound(sanitize::recalled(&format!(
                "{handle_or_id:?} matches {count} sessions; pass one handle: {}",
                handles.join(", ")
            ))))
        }
    }
}

/// Runs `session` and renders at most [`SESSION_BUDGET`] bytes.
pub fn session(node: &Node, req: &SessionRequest) -> Result<String, ToolFailure> {
    let store = node.store();
    let s = resolve(store, &req.handle)?;
    let records = store.session_records(s.row, req.offset, req.limit)?;
    let mut out = format!(
        "session {}\n{}\n",
        sanitize::recalled(&handle(&s.agent, &s.session_id)),
        meta(&[
            s.project.as_deref().unwrap_or("-"),
            &s.machine,
            &format!("{} → {}", when(s.first_ms), when(s.last_ms)),
            &format!("{} records", s.records),
        ])
    );
    if let Some(p) = &s.parent_session {
        out.push_str(&format!(
            "sub-agent of {}\n",
            sanitize::recalled(p).replace('\n', " ")
        ));
    }
    if records.is_empty() {
        out.push_str(&format!(
            "no records at offset {} (the session has {}).",
            req.offset, s.records
        ));
        return Ok(out);
    }
    let budget = SESSION_BUDGET - sanitize::wrap_overhead() - out.len() - 200;
    let mut body = String::new();
    let mut shown = 0;
    for (i, r) in records.iter().enumerate() {
        let mut entry = format!(
            "── [{}] {} · {}\n{}\n",
            req.offset + i,
            r.role,
            when(r.time_ms),
            truncate(&sanitize::recalled(&r.text), RECORD_MAX)
        );
        if !r.files.is_empty() {
            entry.push_str(&format!(
                "   files: {}\n",
                sanitize::recalled(&r.files.join(", ")).replace('\n', " ")
            ));
        }
        if body.len() + entry.len() > budget && shown > 0 {
            break;
        }
        body.push_str(&truncate(&entry, budget));
        shown += 1;
    }
    out.push_str(&sanitize::wrap(&body));
    let next = req.offset + shown;
    if (next as u64) < s.records {
        out.push_str(&format!(
            "\nshown records {}..{} of {}; continue with offset {next}.",
            req.offset,
            next.saturating_sub(1),
            s.records
        ));
    } else {
        out.push_str("\nend of session.");
    }
    Ok(out)
}

/// Runs `remember`: stores the note (redacted) and indexes it.
pub fn remember(
    node: &mut Node,
    text: &str,
    project: Option<&str>,
    now_ms: i64,
) -> Result<String, ToolFailure> {
    // A note never carries recalled text along with it.
    let text = sanitize::strip_recalled(text);
    let text = sanitize::clean(&text);
    let counts = node.remember(&text, project, now_ms)?;
    let mut out = match project {
        Some(p) => format!(
            "Stored the note for project {}.",
            sanitize::recalled(p).replace('\n', " ")
        ),
        None => "Stored the note (no project: it applies everywhere).".to_owned(),
    };
    if !counts.is_empty() {
        let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{k}:{n}")).collect();
        out.push_str(&format!(
            " Secrets were removed before storing: {}.",
            kinds.join(" ")
        ));
    }
    Ok(out)
}

/// What `status` reports.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    /// This machine's name.
    pub machine: String,
    /// This node's short id.
    pub node_id: String,
    /// Sessions held.
    pub sessions: u64,
    /// Records held.
    pub records: u64,
    /// Sessions and records per agent.
    pub agents: BTreeMap<String, AgentLine>,
    /// Newest indexing pass, RFC 3339 UTC.
    pub last_indexed: Option<String>,
    /// Seconds since the newest indexing pass.
    pub index_age_seconds: Option<i64>,
    /// This server answers from the index as it is; `cairn index` or the daemon refreshes it.
    pub refresh: &'static str,
    /// Paired machines (none until sync is set up).
    pub peers: Vec<PeerLine>,
}

/// Per-agent totals.
#[derive(Debug, Serialize)]
pub struct AgentLine {
    /// Sessions.
    pub sessions: u64,
    /// Records.
    pub records: u64,
}

/// One peer (reserved: sync is not set up yet).
#[derive(Debug, Serialize)]
pub struct PeerLine {
    /// Peer machine name.
    pub machine: String,
    /// Last successful sync, RFC 3339 UTC.
    pub last_sync: Option<String>,
    /// Records received from it so far.
    pub records_received: u64,
}

/// The paired machines, from the peer table (none when it cannot be read).
fn peer_lines(node: &Node) -> Vec<PeerLine> {
    let Ok(table) = crate::sync::peers::PeerTable::load(&node.config().home) else {
        return Vec::new();
    };
    table
        .peers()
        .iter()
        .map(|p| PeerLine {
            machine: crate::mcp::sanitize::clean(&p.name).into_owned(),
            last_sync: p
                .last_sync_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            records_received: p.records_received,
        })
        .collect()
}

/// Runs `status`.
pub fn status(node: &Node, now_ms: i64) -> Result<String, ToolFailure> {
    let st = node.stats()?;
    let report = StatusReport {
        machine: node.config().node_name.clone(),
        node_id: node.identity().short_id(),
        sessions: st.sessions,
        records: st.records,
        agents: st
            .agents
            .iter()
            .map(|(a, c)| {
                (
                    a.clone(),
                    AgentLine {
                        sessions: c.sessions,
                        records: c.records,
                    },
                )
            })
            .collect(),
        last_indexed: st
            .last_indexed_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        index_age_seconds: st.last_indexed_ms.map(|t| (now_ms - t).max(0) / 1000),
        refresh: "answers from the index as it is; `cairn index` (or the daemon) reads new history",
        peers: peer_lines(node),
    };
    Ok(serde_json::to_string_pretty(&report)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Env};
    use crate::record::{Record, Role};
    use crate::sync::peers::{Peer, PeerTable};

    #[test]
    fn the_asking_sessions_are_the_client_s_newest_in_the_folder_and_its_tree() {
        const START: i64 = 1_800_000_000_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        // (machine, session, parent, project, last record time)
        let sessions = [
            ("laptop", "earlier", None, "/src/app", START - 3_600_000),
            (
                "laptop",
                "agent-old",
                Some("earlier"),
                "/src/app",
                START + 5_000,
            ),
            ("laptop", "resumed", None, "/src/app", START + 10_000),
            (
                "laptop",
                "agent-b2",
                Some("main"),
                "/src/app",
                START + 15_000,
            ),
            ("laptop", "main", None, "/src/app", START + 20_000),
            (
                "laptop",
                "agent-a1",
                Some("main"),
                "/src/app",
                START + 25_000,
            ),
            ("laptop", "below", None, "/src/app/web", START + 30_000),
            ("desk", "elsewhere", None, "/src/app", START + 40_000),
        ];
        for (origin, name) in [("n-laptop", "laptop"), ("n-desk", "desk")] {
            store.upsert_node(origin, name).expect("node");
            let mut ing = store.ingest(origin).expect("ingest");
            for (_, sid, parent, project, t) in sessions.iter().filter(|s| s.0 == name) {
                let mut r = Record::new("claude-code", sid, Role::User, "a question");
                r.parent_session = parent.map(str::to_owned);
                r.project = Some((*project).to_owned());
                r.time_ms = Some(*t);
                ing.insert(&r, None).expect("insert");
            }
            ing.commit().expect("commit");
        }
        // Codex at work in the same folder, written to last.
        let mut ing = store.ingest("n-laptop").expect("ingest");
        let mut r = Record::new("codex", "codex-live", Role::User, "a question");
        r.project = Some("/src/app".to_owned());
        r.time_ms = Some(START + 50_000);
        ing.insert(&r, None).expect("insert");
        ing.commit().expect("commit");
        let pick_as = |agent: Option<&'static str>, cwd: &str, since_ms: i64| -> Vec<String> {
            let asking = Asking {
                cwd: cwd.to_owned(),
                since_ms,
                agent,
                named: Vec::new(),
            };
            let found = asking_sessions(&store, "laptop", &asking).expect("read");
            found.into_iter().map(|s| s.session_id).collect()
        };
        let pick = |cwd: &str, since_ms: i64| pick_as(Some("claude-code"), cwd, since_ms);
        // The client's agent picks among the folder's sessions; a client
        // that does not say takes the newest of any agent.
        assert_eq!(pick_as(None, "/src/app", START), ["codex-live"]);
        assert_eq!(pick_as(Some("codex"), "/src/app", START), ["codex-live"]);
        assert!(pick_as(Some("gemini"), "/src/app", START).is_empty());
        // The folder's newest of this machine (a sub-agent), then the
        // conversation it works for and that one's other sub-agent; not
        // the subfolder's, the other machine's or another conversation's.
        assert_eq!(pick("/src/app", START), ["agent-a1", "main", "agent-b2"]);
        assert_eq!(pick("/src/app/", START), ["agent-a1", "main", "agent-b2"]);
        assert_eq!(pick("/src/app/web", START), ["below"]);
        // Nothing written since the start (slack included): nobody asks.
        assert!(pick("/src/app", START + 3_600_000).is_empty());
        assert!(pick("/src", START).is_empty());
        assert!(pick("", START).is_empty());
        // A minute's slack before the start, and not more.
        assert_eq!(pick("/src/app/web", START + 80_000), ["below"]);
        assert_eq!(pick("/src/app", START + 80_000), ["agent-a1", "main"]);
    }

    #[test]
    fn the_conversation_the_client_names_asks_unless_it_ended_first() {
        const START: i64 = 1_800_000_000_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        store.upsert_node("n-laptop", "laptop").expect("node");
        // (session, parent, project, first and last record times)
        let sessions = [
            ("cleared", None, "/src/lib", START + 1_000, START + 5_000),
            ("mine", None, "/src/app", START + 2_000, START + 30_000),
            (
                "agent-m1",
                Some("mine"),
                "/src/app",
                START + 31_000,
                START + 32_000,
            ),
            ("other", None, "/src/app", START + 5_000, START + 40_000),
            ("elsewhere", None, "/src/lib", START + 6_000, START + 20_000),
            (
                "old",
                None,
                "/src/app",
                START - 7_200_000,
                START - 3_600_000,
            ),
        ];
        let mut ing = store.ingest("n-laptop").expect("ingest");
        for (sid, parent, project, first, last) in sessions {
            for t in [first, last] {
                let mut r = Record::new("claude-code", sid, Role::User, format!("said at {t}"));
                r.parent_session = parent.map(str::to_owned);
                r.project = Some(project.to_owned());
                r.time_ms = Some(t);
                ing.insert(&r, None).expect("insert");
            }
        }
        ing.commit().expect("commit");
        let pick_named = |agent: Option<&'static str>, cwd: &str, named: Option<&str>, by_call| {
            let asking = Asking {
                cwd: cwd.to_owned(),
                since_ms: START,
                agent,
                named: named
                    .map(|id| Named {
                        agent: "claude-code",
                        id: id.to_owned(),
                        by_call,
                    })
                    .into_iter()
                    .collect(),
            };
            let found = asking_sessions(&store, "laptop", &asking).expect("read");
            found.into_iter().map(|s| s.session_id).collect::<Vec<_>>()
        };
        let pick_as = |agent, cwd: &str, named| pick_named(agent, cwd, named, false);
        let pick = |cwd: &str, named| pick_as(Some("claude-code"), cwd, named);
        // Unnamed, the folder's newest asks: here another conversation.
        assert_eq!(pick("/src/app", None), ["other"]);
        // Named, the client's own, with its sub-agent, though another
        // conversation in the folder was written to later.
        assert_eq!(pick("/src/app", Some("mine")), ["mine", "agent-m1"]);
        // Named from another folder, or with the server started outside
        // any project.
        assert_eq!(pick("/src/lib", Some("mine")), ["mine", "agent-m1"]);
        assert_eq!(pick("/home/me", Some("mine")), ["mine", "agent-m1"]);
        assert_eq!(pick("", Some("mine")), ["mine", "agent-m1"]);
        // The named conversation ended before the folder's newest began:
        // cleared and started anew, so the newest asks.
        assert_eq!(pick("/src/lib", Some("cleared")), ["elsewhere"]);
        // Named by the call itself, it asks all the same: such a name is
        // never stale (its newest lines may come after the call).
        let by_call = pick_named(Some("claude-code"), "/src/lib", Some("cleared"), true);
        assert_eq!(by_call, ["cleared"]);
        // A name not written to since the start, or unknown: the folder's.
        assert_eq!(pick("/src/app", Some("old")), ["other"]);
        assert_eq!(pick("/src/app", Some("nobody")), ["other"]);
        assert!(pick("/home/me", Some("old")).is_empty());
        // A client that is not Claude Code (started from its shell, so
        // with its name in the environment) does not take the name.
        assert_eq!(pick_as(None, "/src/app", Some("mine")), ["other"]);
        assert_eq!(
            pick_as(Some("codex"), "/src/app", Some("mine")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn codex_and_droid_name_their_session_in_each_call() {
        // The `_meta` of a search Codex 0.171.0 sent (trimmed).
        let meta = serde_json::json!({
            "callId": "call_4eb56a3cb58f40f6b4ce",
            "x-codex-turn-metadata": {"session_id": "01a25341-da33-71e3-93e7-dfec6170b92e",
                "thread_id": "01a25341-da33-71e3-93e7-dfec6170b92e", "codex_version": "0.171.0"},
            "threadId": "01a25341-da33-71e3-93e7-dfec6170b92e",
            "sessionId": "01a25341-da33-71e3-93e7-dfec6170b92e",
            "progressToken": 2});
        let meta = meta.as_object().expect("object");
        let named = Some(Named {
            agent: "codex",
            id: "01a25341-da33-71e3-93e7-dfec6170b92e".to_owned(),
            by_call: true,
        });
        let caller = Caller::of(Some("codex-mcp-client"), meta);
        assert_eq!(
            caller,
            Caller {
                agent: Some("codex"),
                named: named.clone()
            }
        );
        // The turn metadata alone names it too.
        let mut turn = meta.clone();
        turn.remove("sessionId");
        assert_eq!(named_in_call(Some("codex"), &turn), named);
        // Another client's `sessionId` is no Codex session; nor is an empty one.
        assert_eq!(Caller::of(Some("opencode"), meta).named, None);
        assert_eq!(Caller::of(None, meta), Caller::default());
        // droid 0.225.2's `_meta`.
        let droid = serde_json::json!({"assemblySessionId": "abfcca11-0fc3-4bb3-a1a1-e20c2ea6c6f6",
            "caller": "AGENT"});
        let droid = Caller::of(Some("factory-cli"), droid.as_object().expect("object"));
        assert_eq!(droid.agent, Some("factory"));
        assert_eq!(
            droid.named.map(|n| (n.agent, n.id, n.by_call)),
            Some((
                "factory",
                "abfcca11-0fc3-4bb3-a1a1-e20c2ea6c6f6".to_owned(),
                true
            ))
        );
        let empty = serde_json::json!({"sessionId": " "});
        assert_eq!(
            named_in_call(Some("codex"), empty.as_object().expect("object")),
            None
        );
    }

    #[test]
    fn claude_code_and_copilot_name_their_conversation_to_their_servers() {
        let named = |agent, id: &str| Named {
            agent,
            id: id.to_owned(),
            by_call: false,
        };
        fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k| vars.iter().find(|v| v.0 == k).map(|v| v.1.to_owned())
        }
        // As Claude Code 2.1.337 and Copilot CLI 1.0.102 set them.
        for (var, agent, id) in [
            (
                "CLAUDE_CODE_SESSION_ID",
                "claude-code",
                "17b78e52-d3c2-413b-8766-602e00c4c39d",
            ),
            (
                "COPILOT_AGENT_SESSION_ID",
                "copilot",
                "cde576a3-23ae-4bfd-9513-49e20fac8cd9",
            ),
        ] {
            assert_eq!(named_by_client(env(&[(var, id)])), [named(agent, id)]);
        }
        // Copilot started from Claude Code's shell: both, each for its agent.
        let both = [
            ("CLAUDE_CODE_SESSION_ID", "17b78e52"),
            ("COPILOT_AGENT_SESSION_ID", "cde576a3"),
        ];
        assert_eq!(
            named_by_client(env(&both)),
            [
                named("claude-code", "17b78e52"),
                named("copilot", "cde576a3")
            ]
        );
        assert!(named_by_client(env(&[("CLAUDE_CODE_SESSION_ID", "  ")])).is_empty());
        assert!(named_by_client(|_| None).is_empty());
    }

    #[test]
    fn clients_are_known_by_the_names_their_releases_send() {
        let named = [
            ("claude-code", Some("claude-code")),
            ("gemini-cli-mcp-client", Some("gemini")),
            ("codex-mcp-client", Some("codex")),
            ("opencode", Some("opencode")),
            ("@cline/core", Some("cline")),
            ("continue-cli-client", Some("continue")),
            ("copilot-cli", Some("copilot")),
            ("factory-cli", Some("factory")),
            ("kilo", Some("kilo")),
            ("qwen-cli-mcp-client-cairn", Some("qwen")),
            ("mcp", None),
            ("", None),
        ];
        for (name, agent) in named {
            assert_eq!(agent_of_client(name), agent, "{name}");
        }
        // Each id is one cairn reads sessions of.
        let known: Vec<&str> = crate::sources::registry()
            .iter()
            .map(|s| s.agent())
            .collect();
        for (_, agent) in named {
            assert!(agent.is_none_or(|a| known.contains(&a)), "{agent:?}");
        }
    }

    #[test]
    fn status_lists_paired_machines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env {
            home: Some(dir.path().to_path_buf()),
            hostname: Some("laptop".into()),
            ..Env::default()
        };
        let node = Node::open(Config::resolve(&env, None).expect("config")).expect("open");
        let none: serde_json::Value =
            serde_json::from_str(&status(&node, 0).expect("status")).expect("json");
        assert_eq!(none["peers"], serde_json::json!([]));
        let mut peer = Peer::new(&[7; 32], "desk\u{1b}[2Jtop", Vec::new(), 1_700_000_000_000);
        peer.last_sync_ms = Some(1_700_000_000_000);
        peer.records_received = 42;
        PeerTable::modify(&node.config().home, |t| {
            t.upsert(peer);
            Ok(())
        })
        .expect("peer table");
        let st: serde_json::Value =
            serde_json::from_str(&status(&node, 0).expect("status")).expect("json");
        let peers = st["peers"].as_array().expect("peers");
        assert_eq!(peers.len(), 1, "{st}");
        assert_eq!(peers[0]["records_received"], 42);
        assert_eq!(peers[0]["last_sync"], "2023-11-14T22:13:20Z");
        let name = peers[0]["machine"].as_str().expect("name");
        assert!(
            name.starts_with("desk") && !name.contains('\u{1b}'),
            "{name}"
        );
    }
}
