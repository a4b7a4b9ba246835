//! The JSON answers behind the page. Each handler runs its reads on the
//! blocking pool against the read-only store, through the same functions
//! the CLI's `search`, `show`, `status` and `peers` use.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::UiState;
use crate::clock::now_ms;
use crate::record::Role;
use crate::search::{self, SearchOptions};
use crate::store::{
    Origin, RecentFilter, SessionInfo, SessionLookup, SessionRecord, Store, StoreError,
};
use crate::sync::peers::PeerTable;

const DAY_MS: i64 = 86_400_000;

/// An answer that is not a success: a status and a readable reason.
pub(crate) struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

type ApiResult = Result<Json<serde_json::Value>, ApiError>;

/// Runs `f` with the store on the blocking pool.
async fn with_store<T: Send + 'static>(
    state: &Arc<UiState>,
    f: impl FnOnce(&UiState, &Store) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let store = state.store.lock().unwrap_or_else(|p| p.into_inner());
        f(&state, &store)
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// An empty form field means "not given".
fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn to_json(v: impl Serialize) -> ApiResult {
    serde_json::to_value(v)
        .map(Json)
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub(crate) async fn not_found() -> ApiError {
    ApiError(StatusCode::NOT_FOUND, "no such page".into())
}

/// `/api/overview`: who this node is and what it holds (as `cairn status`).
pub(crate) async fn overview(State(state): State<Arc<UiState>>) -> ApiResult {
    with_store(&state, |st, store| {
        let stats = store.stats()?;
        let origins = store.origins()?;
        let peers = PeerTable::load(&st.ctx.home)
            .map(|t| t.peers().len())
            .unwrap_or(0);
        let listen = crate::daemon::running_state(&st.ctx.home)
            .map(|s| s.listen_addr.to_string());
        to_json(json!({
            "node": {
                "name": st.ctx.node_name,
                "node_id": st.ctx.node_id,
                "short_id": crate::identity::short_id(&st.ctx.node_id),
            },
            "records": stats.records,
            "sessions": stats.sessions,
            "last_indexed_ms": stats.last_indexed_ms,
            "agents": stats.agents.keys().collect::<Vec<_>>(),
            "machines": origins.iter().filter(|o| o.records > 0).map(|o| &o.name).collect::<Vec<_>>(),
            "checked": st.ctx.checked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "peers": peers,
            "serving": listen,
            "now_ms": now_ms(),
        }))
    })
    .await
}

/// Search parameters, as the CLI's flags.
#[derive(Debug, Deserialize)]
pub(crate) struct SearchParams {
    q: Option<String>,
    agent: Option<String>,
    project: Option<String>,
    machine: Option<String>,
    since: Option<String>,
    /// Comma-separated roles.
    role: Option<String>,
    session: Option<String>,
    limit: Option<usize>,
}

fn parse_roles(s: Option<String>) -> Result<Vec<Role>, ApiError> {
    let mut roles = Vec::new();
    for part in s.iter().flat_map(|s| s.split(',')) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        match Role::parse(part) {
            Some(r) => roles.push(r),
            None => {
                return Err(bad(format!(
                    "unknown role {part:?}; use user, assistant, tool_call, tool_output or note"
                )));
            }
        }
    }
    Ok(roles)
}

fn parse_since(s: Option<String>, now: i64) -> Result<Option<i64>, ApiError> {
    match s {
        None => Ok(None),
        Some(s) => search::parse_since(&s, now).map(Some).ok_or_else(|| {
            bad(format!(
                "cannot read since {s:?}; use 90m, 36h, 7d, 2w, or a date like 2026-01-31"
            ))
        }),
    }
}

/// `/api/search`: `{"hits": [...]}` exactly as `cairn search --json`, plus
/// the words to highlight.
pub(crate) async fn search(
    State(state): State<Arc<UiState>>,
    Query(p): Query<SearchParams>,
) -> ApiResult {
    let now = now_ms();
    let query = given(&p.q).unwrap_or_default();
    let opts = SearchOptions {
        limit: p.limit.unwrap_or(20).clamp(1, 1000),
        agent: given(&p.agent),
        project: given(&p.project),
        machine: given(&p.machine),
        since_ms: parse_since(given(&p.since), now)?,
        roles: parse_roles(given(&p.role))?,
        session: given(&p.session),
        now_ms: now,
        semantic: state.ctx.semantic.then(crate::embed::builtin),
        lexical_only: false,
    };
    with_store(&state, move |_, store| {
        let q = search::Query::parse(&query);
        let page = search::search_page(store, &q, &opts, 0)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let words = page.highlight_words(&q);
        to_json(json!({ "hits": page.hits, "words": words }))
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(crate) struct SessionParams {
    id: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
    q: Option<String>,
}

#[derive(Serialize)]
struct SessionPage {
    session: SessionInfo,
    records: Vec<SessionRecord>,
    /// Index of the first record of this page in the session.
    offset: usize,
    limit: usize,
    /// Records in the session.
    total: usize,
    /// Indexes (in `records`) of the records matching `q`.
    matched: Vec<usize>,
    /// Index (in `records`) of the best match, to scroll to.
    focus: Option<usize>,
    /// Words to highlight.
    words: Vec<String>,
    /// Source files of this page that exist on this machine.
    local_sources: Vec<String>,
}

/// Resolves a session handle, id or unique prefix the way `cairn show` does.
fn resolve_session(store: &Store, id: &str) -> Result<SessionInfo, ApiError> {
    match store.find_session(id)? {
        SessionLookup::One(s) => Ok(*s),
        SessionLookup::None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no session id starts with {id:?}"),
        )),
        SessionLookup::Several { count, .. } => Err(ApiError(
            StatusCode::CONFLICT,
            format!("{id:?} matches {count} sessions; give more of the id"),
        )),
    }
}

/// `/api/session`: one page of a transcript, as `cairn show --json` with
/// the same offset and limit, plus which records match `q`.
pub(crate) async fn session(
    State(state): State<Arc<UiState>>,
    Query(p): Query<SessionParams>,
) -> ApiResult {
    let id = given(&p.id).ok_or_else(|| bad("give a session id"))?;
    let query = given(&p.q).unwrap_or_default();
    let limit = p.limit.unwrap_or(200).clamp(1, 1000);
    let offset = p.offset;
    with_store(&state, move |_, store| {
        let session = resolve_session(store, &id)?;
        let ids = store.session_record_ids(session.row)?;
        let q = search::Query::parse(&query);
        let matched: HashSet<i64> = store
            .session_matches(session.row, &q.to_fts())?
            .into_iter()
            .collect();
        let best = if q.is_empty() {
            None
        } else {
            let opts = SearchOptions {
                limit: 1,
                session: Some(session.session_id.clone()),
                now_ms: now_ms(),
                ..SearchOptions::default()
            };
            search::search(store, &q, &opts)
                .ok()
                .and_then(|h| h.first().map(|h| h.record_id))
                .or_else(|| ids.iter().copied().find(|i| matched.contains(i)))
        };
        let best_pos = best.and_then(|b| ids.iter().position(|&i| i == b));
        let offset = offset.unwrap_or_else(|| best_pos.map_or(0, |p| p / limit * limit));
        let records = store.session_records(session.row, offset, limit)?;
        let page_ids = ids.get(offset..).unwrap_or_default();
        let page_ids = &page_ids[..records.len().min(page_ids.len())];
        let matched_idx: Vec<usize> = page_ids
            .iter()
            .enumerate()
            .filter(|(_, id)| matched.contains(id))
            .map(|(i, _)| i)
            .collect();
        let focus = best_pos
            .and_then(|p| p.checked_sub(offset))
            .filter(|&i| i < records.len())
            .or_else(|| matched_idx.first().copied());
        let mut local: Vec<String> = records
            .iter()
            .filter_map(|r| r.source.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .filter(|p| std::path::Path::new(p).exists())
            .collect();
        local.sort();
        to_json(SessionPage {
            session,
            records,
            offset,
            limit,
            total: ids.len(),
            matched: matched_idx,
            focus,
            words: q.highlight_words(),
            local_sources: local,
        })
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(crate) struct RecentParams {
    agent: Option<String>,
    project: Option<String>,
    machine: Option<String>,
    since: Option<String>,
    before: Option<i64>,
    limit: Option<usize>,
}

/// `/api/recent`: sessions, most recently active first.
pub(crate) async fn recent(
    State(state): State<Arc<UiState>>,
    Query(p): Query<RecentParams>,
) -> ApiResult {
    let f = RecentFilter {
        agent: given(&p.agent),
        project: given(&p.project),
        machine: given(&p.machine),
        since_ms: parse_since(given(&p.since), now_ms())?,
        before_ms: p.before,
        limit: p.limit.unwrap_or(200).clamp(1, 1000),
    };
    with_store(&state, move |_, store| {
        let sessions = store.recent_sessions(&f)?;
        to_json(json!({ "sessions": sessions }))
    })
    .await
}

#[derive(Serialize)]
struct MachineView {
    node_id: String,
    short_id: String,
    name: String,
    /// `self`, `peer` or `relayed` (records reached us through a peer).
    relation: &'static str,
    addresses: Vec<String>,
    last_addr: Option<String>,
    paired_at_ms: Option<i64>,
    last_seen_ms: Option<i64>,
    last_sync_ms: Option<i64>,
    records_received: Option<u64>,
    behind: Option<u64>,
    scope: Option<Vec<String>>,
    /// Records stored here that this machine indexed first.
    records: u64,
    last_record_ms: Option<i64>,
}

/// `/api/machines`: this node, its peers (as `cairn peers --json`) and
/// every relayed origin.
pub(crate) async fn machines(State(state): State<Arc<UiState>>) -> ApiResult {
    with_store(&state, |st, store| {
        let origins = store.origins()?;
        let origin = |id: &str| origins.iter().find(|o| o.node_id == id);
        let (table, peers_error) = match PeerTable::load(&st.ctx.home) {
            Ok(t) => (t.peers().to_vec(), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let mut out = Vec::new();
        let me = origin(&st.ctx.node_id);
        out.push(MachineView {
            node_id: st.ctx.node_id.clone(),
            short_id: crate::identity::short_id(&st.ctx.node_id),
            name: st.ctx.node_name.clone(),
            relation: "self",
            addresses: crate::daemon::running_state(&st.ctx.home)
                .map(|s| vec![s.listen_addr.to_string()])
                .unwrap_or_default(),
            last_addr: None,
            paired_at_ms: None,
            last_seen_ms: None,
            last_sync_ms: None,
            records_received: None,
            behind: None,
            scope: None,
            records: me.map_or(0, |o| o.records),
            last_record_ms: me.and_then(|o| o.last_ms),
        });
        for p in &table {
            let id = p.node_id.to_string();
            let o = origin(&id);
            out.push(MachineView {
                node_id: id.clone(),
                short_id: p.short_id(),
                name: p.name.clone(),
                relation: "peer",
                addresses: p.addresses.iter().map(ToString::to_string).collect(),
                last_addr: p.last_addr.map(|a| a.to_string()),
                paired_at_ms: Some(p.paired_at_ms),
                last_seen_ms: p.last_seen_ms,
                last_sync_ms: p.last_sync_ms,
                records_received: Some(p.records_received),
                behind: crate::sync::session::behind(store, &id),
                scope: p.scope.clone(),
                records: o.map_or(0, |o| o.records),
                last_record_ms: o.and_then(|o| o.last_ms),
            });
        }
        let known: HashSet<&str> = out.iter().map(|m| m.node_id.as_str()).collect();
        let relayed: Vec<&Origin> = origins
            .iter()
            .filter(|o| !known.contains(o.node_id.as_str()))
            .collect();
        let relayed: Vec<MachineView> = relayed
            .into_iter()
            .map(|o| MachineView {
                node_id: o.node_id.clone(),
                short_id: crate::identity::short_id(&o.node_id),
                name: o.name.clone(),
                relation: "relayed",
                addresses: Vec::new(),
                last_addr: None,
                paired_at_ms: None,
                last_seen_ms: None,
                last_sync_ms: None,
                records_received: None,
                behind: None,
                scope: None,
                records: o.records,
                last_record_ms: o.last_ms,
            })
            .collect();
        out.extend(relayed);
        to_json(json!({ "machines": out, "peers_error": peers_error, "now_ms": now_ms() }))
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(crate) struct ActivityParams {
    days: Option<i64>,
    /// Minutes east of UTC of the viewer's time zone.
    tz: Option<i64>,
}

/// `/api/activity`: records per day per agent and per machine, top projects.
pub(crate) async fn activity(
    State(state): State<Arc<UiState>>,
    Query(p): Query<ActivityParams>,
) -> ApiResult {
    let days = p.days.unwrap_or(30).clamp(1, 366);
    let offset_ms = p.tz.unwrap_or(0).clamp(-16 * 60, 16 * 60) * 60_000;
    let today = (now_ms() + offset_ms).div_euclid(DAY_MS);
    let first = today - days + 1;
    let since_ms = first * DAY_MS - offset_ms;
    with_store(&state, move |_, store| {
        let a = store.activity(since_ms, offset_ms, 10)?;
        to_json(json!({
            "first_day": first,
            "today": today,
            "by_agent": a.by_agent,
            "by_machine": a.by_machine,
            "top_projects": a.top_projects,
        }))
    })
    .await
}

/// `/api/handoff`: a session's handoff brief (as `cairn handoff --json`)
/// and the command that resumes it, for the session view's "copy handoff".
pub(crate) async fn handoff(
    State(state): State<Arc<UiState>>,
    Query(p): Query<SessionParams>,
) -> ApiResult {
    let id = given(&p.id).ok_or_else(|| bad("give a session id"))?;
    with_store(&state, move |_, store| {
        let session = resolve_session(store, &id)?;
        let brief =
            crate::handoff::session_brief(store, &session, crate::handoff::DEFAULT_MAX_BYTES)
                .map_err(|e| match e {
                    crate::handoff::HandoffError::Store(s) => ApiError::from(s),
                    other => ApiError(StatusCode::NOT_FOUND, other.to_string()),
                })?;
        let resume = format!(
            "cairn resume {}",
            crate::handoff::launch::shell_quote(&session.session_id)
        );
        to_json(json!({ "brief": brief, "resume": resume }))
    })
    .await
}
