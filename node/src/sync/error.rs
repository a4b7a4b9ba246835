//! Why a sync session, a dial or a probe failed, and whom to blame.

use std::net::SocketAddr;
use std::time::Duration;

use cairn_protocol::NodeId;

use super::endpoint::{Blame, EndpointError, SessionError};
use super::peers::PeersError;
use crate::node::NodeError;
use crate::store::{self, ApplyError};

/// Failures of a sync session.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The stream or the Hello exchange failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Dialing failed.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The peer sent a message that is not legal at this point.
    #[error("peer {peer} sent {got} where {expected} was expected")]
    Unexpected {
        /// The peer.
        peer: NodeId,
        /// What was legal.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// The peer sent a batch that answers no pull of ours.
    #[error("peer {peer} sent an unasked-for batch of {origin}'s log after seq {after_seq}")]
    UnaskedBatch {
        /// The peer.
        peer: NodeId,
        /// The batch's log.
        origin: NodeId,
        /// Where it starts.
        after_seq: u64,
    },
    /// A received batch was not applied.
    #[error("apply a batch from {peer}")]
    Apply {
        /// The peer.
        peer: NodeId,
        /// Why.
        #[source]
        source: ApplyError,
    },
    /// This node's store failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The peer table could not be read or written.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// The session ran past its bounds.
    #[error("session with {peer} exceeded {messages} messages or {after:?}")]
    TooLong {
        /// The peer.
        peer: NodeId,
        /// The message bound.
        messages: u64,
        /// The time bound.
        after: Duration,
    },
    /// A database task panicked.
    #[error("the database task failed")]
    Task,
    /// The peer table entry is malformed.
    #[error("peer table entry {name:?} has no valid key fingerprint")]
    BadPeer {
        /// The entry's name.
        name: String,
    },
    /// No known address of the peer answered.
    #[error("could not reach {name} at {}", list_addrs(tried))]
    Unreachable {
        /// The peer's name.
        name: String,
        /// The addresses dialed.
        tried: Vec<SocketAddr>,
        /// The last failure, if any address was tried.
        #[source]
        last: Option<Box<EndpointError>>,
    },
    /// The peer answered but refused this node's key, or a machine with
    /// another key than the pinned one answered at one of the peer's
    /// addresses (`stranger`: another machine took over the address, or
    /// the peer was set up again with a new key).
    #[error("{}", refused_text(name, addr, *stranger))]
    Refused {
        /// The peer's name.
        name: String,
        /// The address that answered.
        addr: SocketAddr,
        /// Whether what answered showed another key than the peer's
        /// (rather than the peer refusing this node's).
        stranger: bool,
        /// What the handshake or the closed connection said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What [`SyncError::Refused`] says.
fn refused_text(name: &str, addr: &SocketAddr, stranger: bool) -> String {
    match stranger {
        false => format!("{name} refused the connection at {addr} (not paired there any more?)"),
        true => format!(
            "{name} is not at {addr}: a machine with another key answered there \
             ({name} moved, or was set up again with a new key?)"
        ),
    }
}

/// `a, b and c` (at most five, then `and N more`), or `no known address`.
fn list_addrs(addrs: &[SocketAddr]) -> String {
    if addrs.is_empty() {
        return "no known address".to_owned();
    }
    let shown: Vec<String> = addrs.iter().take(5).map(ToString::to_string).collect();
    let more = addrs.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

impl SyncError {
    /// Whether the peer misbehaved (drop it, do not retry at once) or the
    /// network or this node failed (retry with backoff).
    pub fn blame(&self) -> Blame {
        match self {
            SyncError::Session(e) => e.blame(),
            SyncError::Unexpected { .. } | SyncError::UnaskedBatch { .. } => Blame::Peer,
            SyncError::Apply { source, .. } => match source.blame() {
                store::Blame::Peer => Blame::Peer,
                store::Blame::Local => Blame::Transient,
            },
            SyncError::Endpoint(e) if e.is_auth_failure() => Blame::Peer,
            SyncError::Refused { .. } => Blame::Peer,
            _ => Blame::Transient,
        }
    }
}
