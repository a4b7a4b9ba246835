//! Finding the one session a person or an agent names: a search hit's
//! handle (`agent:session_id`), a whole session id, or a unique prefix of
//! one. `cairn show`, `cairn handoff`/`resume`, the MCP tools and the
//! browse page all ask here, so a name means the same session everywhere.
//!
//! Only reads; what to print for "none" or "several" is the caller's.

use super::{SessionInfo, Store, StoreError};

/// How many sessions a lookup reads before calling a name ambiguous.
const LOOKUP_LIMIT: usize = 50;

/// What a name matched.
#[derive(Debug)]
pub enum SessionLookup {
    /// Exactly one session (or the one whose whole id is the name).
    One(Box<SessionInfo>),
    /// No session.
    None,
    /// Several sessions: how many were read (at most the lookup limit)
    /// and the handles of the newest few.
    Several { count: usize, handles: Vec<String> },
}

/// A session's handle as search hits print it.
pub fn handle_of(s: &SessionInfo) -> String {
    format!("{}:{}", s.agent, s.session_id)
}

impl Store {
    /// The session `given` names. A handle `agent:id` is tried first
    /// (the part after the colon as an id or prefix among that agent's
    /// sessions); then the whole text as an id or prefix. An exact id
    /// wins over longer ids it is a prefix of.
    pub fn find_session(&self, given: &str) -> Result<SessionLookup, StoreError> {
        let given = given.trim();
        if given.is_empty() {
            return Ok(SessionLookup::None);
        }
        if let Some((agent, id)) = given.split_once(':')
            && !agent.is_empty()
            && !id.is_empty()
        {
            let found: Vec<SessionInfo> = self
                .find_sessions(id, LOOKUP_LIMIT)?
                .into_iter()
                .filter(|s| s.agent == agent)
                .collect();
            let picked = pick(found, id);
            if !matches!(picked, SessionLookup::None) {
                return Ok(picked);
            }
        }
        Ok(pick(self.find_sessions(given, LOOKUP_LIMIT)?, given))
    }
}

fn pick(mut found: Vec<SessionInfo>, id: &str) -> SessionLookup {
    if let Some(i) = found.iter().position(|s| s.session_id == id) {
        return SessionLookup::One(Box::new(found.swap_remove(i)));
    }
    match found.len() {
        0 => SessionLookup::None,
        1 => SessionLookup::One(Box::new(found.remove(0))),
        n => SessionLookup::Several {
            count: n,
            handles: found.iter().take(5).map(handle_of).collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, Role};

    fn store_with(sessions: &[(&str, &str)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for (n, (agent, id)) in sessions.iter().enumerate() {
            let mut r = Record::new(agent, id, Role::User, format!("words {n}"));
            r.time_ms = Some(1_764_547_200_000 + n as i64);
            assert!(ing.insert(&r, None).expect("insert"));
        }
        ing.commit().expect("commit");
        (dir, store)
    }

    fn name(l: SessionLookup) -> String {
        match l {
            SessionLookup::One(s) => handle_of(&s),
            SessionLookup::None => "none".into(),
            SessionLookup::Several { count, handles } => format!("{count}: {}", handles.join(",")),
        }
    }

    #[test]
    fn a_handle_an_id_and_a_prefix_name_the_same_session() {
        let (_d, store) = store_with(&[
            ("codex", "abc123"),
            ("claude-code", "abc1234"),
            ("claude-code", "zzz9"),
            ("gemini", "proj:with:colons"),
        ]);
        let find = |g: &str| name(store.find_session(g).expect("lookup"));
        // An exact id wins over a longer id it is a prefix of.
        assert_eq!(find("abc123"), "codex:abc123");
        assert_eq!(find("abc1234"), "claude-code:abc1234");
        // A handle narrows to its agent, then prefixes still work.
        assert_eq!(find("claude-code:abc"), "claude-code:abc1234");
        assert_eq!(find("codex:abc"), "codex:abc123");
        assert_eq!(find("zz"), "claude-code:zzz9");
        assert_eq!(find("  zzz9 \n"), "claude-code:zzz9");
        // An id holding colons is found whole when no agent prefix fits.
        assert_eq!(find("proj:with:colons"), "gemini:proj:with:colons");
        assert_eq!(find("gemini:proj:with"), "gemini:proj:with:colons");
        // Several, none, and names that are not ids.
        assert_eq!(find("abc"), "2: claude-code:abc1234,codex:abc123");
        assert_eq!(find("codex:zzz"), "none");
        assert_eq!(find("nope"), "none");
        assert_eq!(find(""), "none");
        assert_eq!(find("%"), "none", "LIKE wildcards are taken literally");
    }
}
