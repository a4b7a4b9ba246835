//! Peer-to-peer sync: TLS identities with pinned peer keys, the QUIC
//! endpoint, the pairing exchange, the peer table, sync sessions, LAN
//! discovery and the sync service a daemon runs (`service`; the daemon
//! itself is `crate::daemon`, which this module never imports).
//! A session's rules are the pure state machine `cairn_protocol::Conversation`;
//! `session` is its driver (stream I/O, store calls, the timer).
//!
//! Only this module knows about quinn and rustls. The bytes on the wire are
//! defined in `cairn-protocol`; the database side (origin logs, watermarks,
//! applying batches, tombstones, and the conversion of stored rows to and
//! from wire types in `store::wire`) lives in `crate::store`.
//!
//! The module root holds the few things several submodules share (the
//! default port, how a peer-supplied name is cleaned, the runtime for
//! callers that are not async). `service`, `facade` and `origins` (what
//! the daemon and the command line call) sit on top and nothing else in
//! `sync` uses them; `session`, `pairing`, `links` and `dial` build on
//! `endpoint` and `peers`; `tls`, `peers` and `scheduler` use no sibling.

pub mod dial;
pub mod discovery;
pub mod endpoint;
pub mod error;
pub mod facade;
pub mod links;
pub mod origins;
pub mod pairing;
pub mod peers;
pub mod quota;
pub mod scheduler;
pub mod service;
pub mod session;
pub mod tls;

/// The UDP port `cairn serve` and `cairn pair` listen on by default.
pub const DEFAULT_PORT: u16 = 7878;

/// Longest peer name kept.
const MAX_NAME_CHARS: usize = 64;

/// A peer-supplied name, made safe to store and print: no control
/// characters, at most 64 characters, never empty.
pub(crate) fn clean_name(name: &str) -> String {
    let s: String = name
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let s = s.trim();
    if s.is_empty() {
        "unnamed".to_owned()
    } else {
        s.to_owned()
    }
}

/// A tokio runtime for callers that are not async (the CLI): single
/// threaded, with the I/O and timer drivers QUIC needs.
pub fn runtime() -> Result<tokio::runtime::Runtime, std::io::Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name("lap\x1b[31mtop\n"), "lap[31mtop");
        assert_eq!(clean_name("   "), "unnamed");
        assert_eq!(clean_name(&"x".repeat(500)).len(), MAX_NAME_CHARS);
    }
}
