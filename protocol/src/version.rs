//! Protocol versions, ALPN names and the version negotiation rule.
//!
//! The major version lives in the ALPN name, so peers with different majors
//! never get past the TLS handshake (the node turns `no_application_protocol`
//! into a readable error). Within a major, both peers send [`Hello`] first;
//! [`negotiate`] picks the highest minor both speak or explains, in words a
//! user can act on, why there is none. Pure: no I/O, no clock.

use crate::message::Hello;

/// Major protocol version. Changing it changes the ALPN names.
pub const PROTOCOL_MAJOR: u16 = 1;

/// Newest minor version this build speaks (1.1: batches carry their
/// origin's key and seals).
pub const PROTOCOL_MINOR: u16 = 1;

/// Oldest minor version this build still speaks. 1.0 batches are unsigned,
/// so a 1.0 peer is refused at the `Hello` exchange with a message telling
/// which side to upgrade.
pub const MIN_SUPPORTED_MINOR: u16 = 1;

/// ALPN for replication connections (carries [`PROTOCOL_MAJOR`]).
pub const ALPN_SYNC: &[u8] = b"cairn/1";

/// ALPN for pairing connections (carries [`PROTOCOL_MAJOR`]).
pub const ALPN_PAIR: &[u8] = b"cairn-pair/1";

/// Why two peers cannot talk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Different major versions (only possible if ALPN was bypassed).
    #[error(
        "negotiate protocol version: peer speaks cairn protocol {remote}.x, this node speaks {local}.x; upgrade the older node"
    )]
    MajorMismatch {
        /// Our major.
        local: u16,
        /// The peer's major.
        remote: u16,
    },
    /// The peer is older than the oldest minor we still speak.
    #[error(
        "negotiate protocol version: peer speaks up to {remote_max}, this node needs at least {local_min}; upgrade the peer"
    )]
    PeerTooOld {
        /// Our oldest minor as `major.minor`.
        local_min: VersionLabel,
        /// The peer's newest minor as `major.minor`.
        remote_max: VersionLabel,
    },
    /// We are older than the oldest minor the peer still speaks.
    #[error(
        "negotiate protocol version: peer needs at least {remote_min}, this node speaks up to {local_max}; upgrade this node"
    )]
    PeerTooNew {
        /// Our newest minor as `major.minor`.
        local_max: VersionLabel,
        /// The peer's oldest minor as `major.minor`.
        remote_min: VersionLabel,
    },
    /// A Hello whose range is empty (`min_minor > minor`).
    #[error("negotiate protocol version: {side} sent an empty minor range {min}..={max}")]
    EmptyRange {
        /// `"peer"` or `"this node"`.
        side: &'static str,
        /// The range's start.
        min: u16,
        /// The range's end.
        max: u16,
    },
}

/// A `major.minor` pair, displayed as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionLabel {
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

impl std::fmt::Display for VersionLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Picks the minor version for a session: the highest minor inside both
/// peers' `[min_minor, minor]` ranges. Symmetric: both peers compute the same
/// answer from the two Hellos, so no extra round trip is needed.
pub fn negotiate(local: &Hello, remote: &Hello) -> Result<u16, VersionError> {
    if local.major != remote.major {
        return Err(VersionError::MajorMismatch {
            local: local.major,
            remote: remote.major,
        });
    }
    for (side, h) in [("this node", local), ("peer", remote)] {
        if h.min_minor > h.minor {
            return Err(VersionError::EmptyRange {
                side,
                min: h.min_minor,
                max: h.minor,
            });
        }
    }
    let label = |minor| VersionLabel {
        major: local.major,
        minor,
    };
    let chosen = local.minor.min(remote.minor);
    if chosen < local.min_minor {
        return Err(VersionError::PeerTooOld {
            local_min: label(local.min_minor),
            remote_max: label(remote.minor),
        });
    }
    if chosen < remote.min_minor {
        return Err(VersionError::PeerTooNew {
            local_max: label(local.minor),
            remote_min: label(remote.min_minor),
        });
    }
    Ok(chosen)
}
