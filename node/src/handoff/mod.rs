//! Handing a session on: the brief another agent (or person) continues
//! from (`cairn handoff`, the MCP `handoff` tool and `continue-session`
//! prompt, the browse page's "copy handoff"), and how each coding agent's
//! command line takes a first prompt (`cairn resume`).
//!
//! The brief is built from the stored, already redacted records through the
//! store's own session reader, so it is the same on every machine holding
//! the session. This module reads; it never writes to the store, never
//! indexes, and never starts a process (the CLI does that).

pub mod brief;
pub mod extract;
pub mod launch;

pub use brief::{Brief, DEFAULT_MAX_BYTES, Header, MIN_MAX_BYTES, Turn, build};

use crate::store::{SessionInfo, SessionLookup, Store, StoreError};

/// Why no brief could be made.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// No stored session matches.
    #[error("no session id starts with {0:?}; `cairn search` shows ids")]
    NotFound(String),
    /// Several sessions match a prefix.
    #[error("{given:?} matches {count} sessions; give more of the id: {some}")]
    Ambiguous {
        /// What was given.
        given: String,
        /// How many match.
        count: usize,
        /// A few of them, as `agent:session_id`.
        some: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Finds the one session `given` names: a search hit's handle
/// (`agent:session_id`), a session id, or a unique prefix of one. An exact
/// id wins over longer ids it is a prefix of.
pub fn find_session(store: &Store, given: &str) -> Result<SessionInfo, HandoffError> {
    match store.find_session(given)? {
        SessionLookup::One(s) => Ok(*s),
        SessionLookup::None => Err(HandoffError::NotFound(given.trim().to_owned())),
        SessionLookup::Several { count, handles } => Err(HandoffError::Ambiguous {
            given: given.trim().to_owned(),
            count,
            some: handles.join(", "),
        }),
    }
}

/// The brief of a stored session, its text at most `max_bytes`.
pub fn session_brief(
    store: &Store,
    session: &SessionInfo,
    max_bytes: usize,
) -> Result<Brief, HandoffError> {
    // Every record, in the session's order (the store's transcript order).
    let records = store.session_records(session.row, 0, i64::MAX as usize)?;
    let turns: Vec<Turn<'_>> = records
        .iter()
        .map(|r| Turn {
            role: r.role.as_str(),
            time_ms: r.time_ms,
            text: &r.text,
            files: &r.files,
        })
        .collect();
    let header = Header::new(
        &session.agent,
        &session.session_id,
        &session.machine,
        session.project.as_deref(),
        session.parent_session.as_deref(),
        session.first_ms,
        session.last_ms,
        records.len(),
    );
    Ok(build(header, &turns, max_bytes))
}
