//! Searches answered by the running daemon.
//!
//! A `cairn search` is a fresh process: it opens the database, parses its
//! schema, reads every page it needs through the kernel and loads the
//! embedding vocabulary, each time. `cairn serve` keeps all of that warm,
//! so while it runs it also listens on a Unix socket in the node's data
//! folder ([`SOCKET_FILE`], mode 0600, in a folder that is 0700) and
//! answers searches there; the CLI asks it first and searches on its own
//! when the daemon cannot answer (none running, another database, busy,
//! any error). An answer is the page the CLI's own search would give: the
//! request carries every option, the CLI's clock and whether the meaning
//! tier is on, and the daemon runs the same `search::search_page` on a
//! read-only connection to the same database.
//!
//! Every request carries a random token the daemon writes to
//! [`TOKEN_FILE`] (0600) when it starts; a request without it is refused.
//! Frames are a 4-byte big-endian length and a CBOR body, bounded both
//! ways ([`MAX_REQUEST`], [`MAX_REPLY`]); one request per connection.

#[cfg(unix)]
pub mod client;
#[cfg(unix)]
pub mod server;

use serde::{Deserialize, Serialize};

use crate::record::Role;
use crate::search::{Page, SearchOptions};

/// The page the daemon serving `cfg`'s home answers for a search of its
/// database (`offset` into the sessions), or `None` when it gives none: no
/// socket (always, off Unix), a refusal, an error, a timeout. The caller
/// then searches on its own. Used by `cairn search` and the MCP server's
/// `search` tool once `daemon::is_serving` says a daemon runs.
pub fn served(
    cfg: &crate::config::Config,
    query: &str,
    opts: &SearchOptions,
    offset: usize,
) -> Option<Page> {
    #[cfg(not(unix))]
    {
        let _ = (cfg, query, opts, offset);
        None
    }
    #[cfg(unix)]
    match client::ask(&cfg.home, &cfg.db_path, query, opts, offset, cfg.semantic) {
        Ok(page) => {
            tracing::debug!("answered by the daemon");
            Some(page)
        }
        Err(e) => {
            tracing::debug!(error = %e, "searching here");
            None
        }
    }
}

/// The socket, in the node's data folder.
pub const SOCKET_FILE: &str = "search.sock";
/// The token a request must carry, in the node's data folder.
pub const TOKEN_FILE: &str = "search.token";
/// Largest request accepted, in bytes (a question is a few hundred).
pub const MAX_REQUEST: u32 = 64 * 1024;
/// Largest reply read, in bytes.
pub const MAX_REPLY: u32 = 64 << 20;
/// Largest token file read, in bytes.
pub const MAX_TOKEN: u64 = 256;

/// Problems with a frame or its body.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A frame longer than the side reading it accepts.
    #[error("a frame of {len} bytes is over the limit of {max}")]
    TooLong {
        /// The length the frame announced.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A body that is not the expected CBOR.
    #[error("a malformed frame: {0}")]
    Malformed(String),
    /// A role name that is not a role.
    #[error("unknown role {0:?}")]
    Role(String),
}

/// A search, as the CLI asks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The daemon's token, from [`TOKEN_FILE`].
    pub token: String,
    /// The database the asker would search: the daemon answers only for
    /// its own.
    pub db_path: std::path::PathBuf,
    /// The question, as typed.
    pub query: String,
    /// Sessions skipped before the page.
    pub offset: u64,
    /// Sessions on the page.
    pub limit: u64,
    /// Only this agent.
    pub agent: Option<String>,
    /// Only sessions whose project contains this.
    pub project: Option<String>,
    /// Only this machine.
    pub machine: Option<String>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
    /// Only records at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only these roles (all when empty).
    pub roles: Vec<String>,
    /// The asker's "now" (Unix ms).
    pub now_ms: i64,
    /// Whether the asker's configuration turns the meaning tier on.
    pub semantic: bool,
    /// Lexical tier only for this question.
    pub lexical_only: bool,
}

impl Request {
    /// The request for `query` with `opts` (its `semantic` embedder is
    /// not sent: `semantic` says whether the tier is on).
    pub fn new(
        token: String,
        db_path: std::path::PathBuf,
        query: &str,
        opts: &SearchOptions,
        offset: usize,
        semantic: bool,
    ) -> Request {
        Request {
            token,
            db_path,
            query: query.to_owned(),
            offset: offset as u64,
            limit: opts.limit as u64,
            agent: opts.agent.clone(),
            project: opts.project.clone(),
            machine: opts.machine.clone(),
            session: opts.session.clone(),
            since_ms: opts.since_ms,
            roles: opts.roles.iter().map(|r| r.as_str().to_owned()).collect(),
            now_ms: opts.now_ms,
            semantic,
            lexical_only: opts.lexical_only,
        }
    }

    /// The search options it stands for, the embedder left for the
    /// answering side to choose.
    pub fn options(&self) -> Result<SearchOptions, WireError> {
        let mut roles = Vec::new();
        for r in &self.roles {
            roles.push(Role::parse(r).ok_or_else(|| WireError::Role(r.clone()))?);
        }
        Ok(SearchOptions {
            limit: usize::try_from(self.limit).unwrap_or(usize::MAX),
            agent: self.agent.clone(),
            project: self.project.clone(),
            machine: self.machine.clone(),
            since_ms: self.since_ms,
            roles,
            session: self.session.clone(),
            now_ms: self.now_ms,
            semantic: None,
            lexical_only: self.lexical_only,
        })
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// The page of hits.
    Page(Page),
    /// Not answered (a wrong token, another database, too busy): the
    /// asker searches on its own.
    Refused(String),
    /// The search failed.
    Failed(String),
}

/// `value` as one frame: its CBOR body's length (4 bytes, big-endian),
/// then the body.
pub fn frame<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let mut body = vec![0u8; 4];
    ciborium::into_writer(value, &mut body).map_err(|e| WireError::Malformed(e.to_string()))?;
    let len = u32::try_from(body.len() - 4).map_err(|_| WireError::TooLong {
        len: u32::MAX,
        max: u32::MAX,
    })?;
    body[..4].copy_from_slice(&len.to_be_bytes());
    Ok(body)
}

/// The body length a frame's header announces, if within `max`.
pub fn body_len(header: [u8; 4], max: u32) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(header);
    if len > max {
        return Err(WireError::TooLong { len, max });
    }
    Ok(len as usize)
}

/// Decodes a frame's body.
pub fn unframe<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    ciborium::from_reader(body).map_err(|e| WireError::Malformed(e.to_string()))
}

/// Whether two tokens are equal, in time that does not depend on where
/// they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::Hit;

    fn request() -> Request {
        let opts = SearchOptions {
            limit: 7,
            agent: Some("codex".into()),
            project: None,
            machine: Some("laptop".into()),
            since_ms: Some(1_700_000_000_000),
            roles: vec![Role::User, Role::Assistant],
            session: Some("ab12".into()),
            now_ms: 1_764_547_200_000,
            semantic: None,
            lexical_only: true,
        };
        Request::new(
            "t0k3n".into(),
            "/home/u/.local/share/cairn/cairn.db".into(),
            "why did we pin hyper?",
            &opts,
            20,
            true,
        )
    }

    #[test]
    fn a_request_and_a_page_cross_the_wire_unchanged() {
        let req = request();
        let bytes = frame(&req).expect("frame");
        let len = body_len(bytes[..4].try_into().expect("header"), MAX_REQUEST).expect("len");
        assert_eq!(len, bytes.len() - 4);
        let back: Request = unframe(&bytes[4..]).expect("unframe");
        assert_eq!(back, req);
        let opts = back.options().expect("options");
        assert_eq!(opts.limit, 7);
        assert_eq!(opts.roles, vec![Role::User, Role::Assistant]);
        assert_eq!(opts.since_ms, Some(1_700_000_000_000));
        assert!(opts.lexical_only && opts.semantic.is_none());

        let hit = Hit {
            session_id: "s".into(),
            agent: "claude".into(),
            project: Some("/p".into()),
            machine: "m".into(),
            role: "user".into(),
            time: None,
            score: 0.123_45,
            snippet: "pinned hyper to 0.14".into(),
            source: None,
            offset: Some(42),
            matches: 3,
            title: Some("t".into()),
            record_id: 9,
            answer_snippet: Some("because".into()),
            answer_role: Some("assistant".into()),
            answer_record_id: Some(10),
            answer_time: Some("2025-01-01T00:00:00Z".into()),
        };
        let page = Page {
            hits: vec![hit],
            total: 5,
            offset: 0,
            words: vec!["hyper".into()],
        };
        let bytes = frame(&Reply::Page(page.clone())).expect("frame");
        let Reply::Page(back) = unframe(&bytes[4..]).expect("unframe") else {
            panic!("not a page");
        };
        // The JSON the CLI prints is the same, to the last digit.
        assert_eq!(
            serde_json::to_string(&back).expect("json"),
            serde_json::to_string(&page).expect("json")
        );
    }

    #[test]
    fn bad_frames_are_refused_not_trusted() {
        assert!(matches!(
            body_len((MAX_REQUEST + 1).to_be_bytes(), MAX_REQUEST),
            Err(WireError::TooLong { .. })
        ));
        assert!(matches!(
            unframe::<Request>(b"\xff\x00garbage"),
            Err(WireError::Malformed(_))
        ));
        let mut req = request();
        req.roles.push("root".into());
        assert!(matches!(req.options(), Err(WireError::Role(_))));
    }

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("", "a"));
    }
}
