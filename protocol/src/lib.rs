//! Wire types and framing shared by cairn nodes.
//!
//! This crate owns the bytes on the wire and nothing else: it performs no
//! I/O, reads no clock and holds no randomness (times, nonces and secrets
//! are arguments). It never panics on any input. The sync engine in
//! `cairn-node` converts its storage rows into these types by hand; no
//! storage type derives a wire trait.
//!
//! - [`version`]: major/minor versions, ALPN names, [`negotiate`].
//! - [`frame`]: u32 length + CBOR framing, [`FrameDecoder`], the size cap.
//! - [`message`]: the [`Message`] enum.
//! - [`record`]: [`WireRecord`], tombstones, stubs, the canonical content hash.
//! - [`batch`]: building and checking batches.
//! - [`plan`]: watermark arithmetic and pull planning.
//! - [`conversation`]: one sync session's conversation as a pure state
//!   machine (events in, actions out, time passed in).
//! - [`seal`]: the origin's signatures over ranges of its log.
//! - [`pairing`]: the pairing code and proofs.
//! - [`limits`]: every size limit.
//!
//! The format is described in `docs/wire-format.md`.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs, clippy::print_stdout, clippy::print_stderr)]

pub mod batch;
pub mod conversation;
pub mod frame;
pub mod ids;
pub mod limits;
pub mod message;
pub mod pairing;
pub mod plan;
pub mod record;
pub mod seal;
mod serde_util;
pub mod version;

pub use batch::{
    BatchBuilder, BatchError, BuildError, LogEntry, Pushed, check_batch, check_batch_shape,
    check_entries, next_pull,
};
pub use conversation::{
    Action, ApplyResult, Conversation, ConversationConfig, ConversationError, Event, Finished,
};
pub use frame::{
    DecodeError, EncodeError, FrameDecoder, FrameError, decode_message, encode_frame,
    encode_message,
};
pub use ids::{NodeId, SpkiFingerprint, spki_fingerprint};
pub use limits::*;
pub use message::{
    Batch, Hello, Message, OriginName, PairAccept, PairRequest, Pull, RefuseCode, Watermark,
};
pub use pairing::{PairingCode, PairingError};
pub use plan::{Lag, PlanLimits, contiguous_max, lags, plan_pulls, plan_pulls_where, total_behind};
pub use record::{
    ForgetTarget, Hash32, HashInput, LogStub, RecordError, StubKind, Tombstone, WireRecord,
    record_content_hash,
};
pub use seal::{
    MAX_SEALS, SEAL_SIG_LEN, Seal, SealCheck, SealError, entry_hashes, own_seal_message,
    p256_point, seal_checks, seal_message,
};
pub use version::{
    ALPN_PAIR, ALPN_SYNC, MIN_SUPPORTED_MINOR, PROTOCOL_MAJOR, PROTOCOL_MINOR, VersionError,
    negotiate,
};
