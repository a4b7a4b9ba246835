//! The messages of the sync and pairing protocols.
//!
//! Owns the message enum and its CBOR shape (serde, externally tagged, with
//! snake_case variant names and named fields; unknown fields are ignored so
//! a newer minor may add optional fields). Which messages are legal when is
//! documented in `docs/wire-format.md`. No I/O, no clock, no randomness:
//! nonces, instance ids and epochs are passed in.

use serde::{Deserialize, Serialize};

use crate::ids::NodeId;
use crate::limits::{MAX_BATCH_ENTRIES, MAX_FEATURES, MAX_WATERMARKS};
use crate::record::{LogStub, Tombstone, WireRecord};
use crate::seal::{MAX_SEALS, Seal};
use crate::serde_util::{bounded_vec, fixed_bytes, short_bytes};

/// One message: the body of one frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// First message on every connection, sent by both sides at once.
    Hello(Hello),
    /// "I will not talk to you", with a code and a readable reason; the
    /// sender closes the connection after it.
    Refuse {
        /// Machine-readable cause.
        code: RefuseCode,
        /// Human-readable explanation, shown to the user on the other side.
        reason: String,
    },
    /// What the sender holds: per origin log, the highest contiguous seq.
    Watermarks {
        /// At most [`MAX_WATERMARKS`] entries, one per `(origin, epoch)`.
        #[serde(deserialize_with = "bounded_vec::<_, _, MAX_WATERMARKS>")]
        entries: Vec<Watermark>,
        /// Human names the sender knows for origins it holds logs of, so a
        /// machine reached only through relays is shown by name. Cosmetic:
        /// a name a peer announces for itself in `Hello` wins. Omitted when
        /// empty, so older 1.0 peers (which ignore unknown fields) are
        /// unaffected.
        #[serde(
            default,
            skip_serializing_if = "Vec::is_empty",
            deserialize_with = "bounded_vec::<_, _, MAX_WATERMARKS>"
        )]
        names: Vec<OriginName>,
    },
    /// "Send me the entries of this log after this seq."
    Pull(Pull),
    /// Entries of one origin log, in seq order, answering a pull.
    Batch(Batch),
    /// Liveness probe; answered by [`Message::Pong`] with the same nonce.
    Ping {
        /// Echoed back.
        nonce: u64,
    },
    /// Answer to [`Message::Ping`].
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// Orderly close.
    Bye {
        /// Why, for the peer's log.
        reason: String,
    },
    /// Pairing (ALPN `cairn-pair/1`): the joiner proves it holds the code's secret.
    PairRequest(PairRequest),
    /// Pairing: the inviter proves it too, and the pair is made.
    PairAccept(PairAccept),
}

impl Message {
    /// The message's kind in snake_case, as its CBOR tag names it (for
    /// errors and logs; never its contents).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Refuse { .. } => "refuse",
            Message::Watermarks { .. } => "watermarks",
            Message::Pull(_) => "pull",
            Message::Batch(_) => "batch",
            Message::Ping { .. } => "ping",
            Message::Pong { .. } => "pong",
            Message::Bye { .. } => "bye",
            Message::PairRequest(_) => "pair_request",
            Message::PairAccept(_) => "pair_accept",
        }
    }
}

/// Why a peer refuses to talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefuseCode {
    /// No common protocol version.
    Incompatible,
    /// The peer's key is not paired with this node.
    NotPaired,
    /// Pairing failed: wrong or expired code, or proof mismatch.
    PairingFailed,
    /// Too many connections or work in progress; retry later.
    Busy,
    /// The peer violated the protocol (bad frame, bad batch).
    ProtocolViolation,
    /// A code this build does not know (sent by a newer peer).
    #[serde(other)]
    Other,
}

impl RefuseCode {
    /// Whether retrying later may succeed without anyone changing anything.
    pub fn is_retryable(self) -> bool {
        matches!(self, RefuseCode::Busy)
    }
}

/// The first message on every connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol major (must equal the peer's; also in the ALPN).
    pub major: u16,
    /// Newest minor this node speaks.
    pub minor: u16,
    /// Oldest minor this node still speaks.
    pub min_minor: u16,
    /// The sender's node id (must match its TLS key).
    pub node_id: NodeId,
    /// The sender's human-readable name (host name or configured name).
    pub node_name: String,
    /// Software name and version, e.g. `cairn 0.1.0`, for readable errors.
    pub software: String,
    /// Random per process start (passed in): tells restarts and clones apart.
    pub instance: u64,
    /// Optional features, at most [`MAX_FEATURES`]; unknown ones are ignored.
    #[serde(deserialize_with = "bounded_vec::<_, _, MAX_FEATURES>")]
    pub features: Vec<String>,
}

impl Hello {
    /// A Hello for this build's version range.
    pub fn current(node_id: NodeId, node_name: &str, software: &str, instance: u64) -> Hello {
        Hello {
            major: crate::PROTOCOL_MAJOR,
            minor: crate::PROTOCOL_MINOR,
            min_minor: crate::MIN_SUPPORTED_MINOR,
            node_id,
            node_name: node_name.to_owned(),
            software: software.to_owned(),
            instance,
            features: Vec::new(),
        }
    }
}

/// A node's human name as another node knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OriginName {
    /// The node.
    pub origin: NodeId,
    /// Its name (receivers trim and clean it before showing it).
    pub name: String,
}

/// How much of one origin log a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Watermark {
    /// The node that authored the log.
    pub origin: NodeId,
    /// The log's epoch (chosen when the origin's database was created).
    pub epoch: u64,
    /// Highest seq held with every seq below it also held; 0 = nothing.
    pub seq: u64,
}

/// A request for the entries of one origin log after `after_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pull {
    /// The log's author.
    pub origin: NodeId,
    /// The log's epoch.
    pub epoch: u64,
    /// Send entries with seq > this (the puller's watermark).
    pub after_seq: u64,
    /// At most this many entries (≤ [`MAX_BATCH_ENTRIES`]).
    pub max_records: u32,
    /// At most about this many encoded bytes of entries (≤ [`crate::MAX_BATCH_BYTES`]).
    pub max_bytes: u32,
}

/// The answer to a [`Pull`]: every seq in `after_seq + 1 ..= last_seq`
/// appears exactly once across `records`, `tombstones` and `stubs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The log's author.
    pub origin: NodeId,
    /// The log's epoch.
    pub epoch: u64,
    /// Echo of the pull's `after_seq`.
    pub after_seq: u64,
    /// The last seq this batch covers (= `after_seq` when empty).
    pub last_seq: u64,
    /// The sender holds entries past `last_seq`: pull again.
    pub more: bool,
    /// Records, ascending by seq.
    #[serde(deserialize_with = "bounded_vec::<_, _, MAX_BATCH_ENTRIES>")]
    pub records: Vec<WireRecord>,
    /// Forgets issued by the origin, ascending by seq.
    #[serde(default, deserialize_with = "bounded_vec::<_, _, MAX_BATCH_ENTRIES>")]
    pub tombstones: Vec<Tombstone>,
    /// Slots sent without content, ascending by seq.
    #[serde(default, deserialize_with = "bounded_vec::<_, _, MAX_BATCH_ENTRIES>")]
    pub stubs: Vec<LogStub>,
    /// The origin's public key (its SubjectPublicKeyInfo DER, whose hash is
    /// the origin's node id): the sender vouches for it. Needed whenever the
    /// batch has entries (protocol 1.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "short_bytes")]
    pub origin_key: Vec<u8>,
    /// The origin's seals covering every entry (see [`crate::seal`]).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "bounded_vec::<_, _, MAX_SEALS>"
    )]
    pub seals: Vec<Seal>,
}

/// Pairing: the joiner's proof that it holds the code's secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairRequest {
    /// [`crate::pairing::proof`] with role [`crate::pairing::Role::Joiner`].
    #[serde(with = "fixed_bytes")]
    pub secret_proof: [u8; 32],
    /// The joiner's node id (must match its TLS key).
    pub joiner_node_id: NodeId,
    /// The joiner's human-readable name.
    pub joiner_name: String,
    /// The port the joiner's `cairn serve` listens on, if one runs: the
    /// inviter dials it at the address this connection came from. Omitted
    /// when unknown (older 1.0 peers ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joiner_serve_port: Option<u16>,
}

/// Pairing: the inviter's answering proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairAccept {
    /// [`crate::pairing::proof`] with role [`crate::pairing::Role::Inviter`].
    #[serde(with = "fixed_bytes")]
    pub secret_proof: [u8; 32],
    /// The inviter's node id (must match its TLS key).
    pub inviter_node_id: NodeId,
    /// The inviter's human-readable name.
    pub inviter_name: String,
    /// The port the inviter's `cairn serve` listens on, if one runs (the
    /// pairing port in the code is closed once pairing ends). Omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inviter_serve_port: Option<u16>,
}
