//! Every size limit of the wire format, in one place.
//!
//! The frame cap is checked before any allocation; the element caps bound
//! how much memory decoding one frame can take (a CBOR empty string is one
//! byte on the wire but a 24-byte `String` in memory, so sequences must be
//! capped, not just frames). The node takes its read and batch sizes from
//! here.

/// Largest frame body in bytes (the 4-byte length prefix not included).
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// Bytes of a frame header (u32 big-endian body length).
pub const FRAME_HEADER_LEN: usize = 4;

/// Most log entries (records + tombstones + stubs) one batch may carry, and
/// the largest `max_records` a [`Pull`](crate::Pull) may ask for.
pub const MAX_BATCH_ENTRIES: usize = 1000;

/// The largest `max_bytes` a pull may ask for: the encoded size of a batch's
/// entries. Leaves room under [`MAX_FRAME`] for the batch envelope.
pub const MAX_BATCH_BYTES: usize = MAX_FRAME - 64 * 1024;

/// Most files one record may name.
pub const MAX_FILES_PER_RECORD: usize = 256;

/// Most watermark entries in one [`Message::Watermarks`](crate::Message::Watermarks).
pub const MAX_WATERMARKS: usize = 4096;

/// Most feature strings in a [`Hello`](crate::Hello).
pub const MAX_FEATURES: usize = 32;

/// Most dial addresses in a pairing code.
pub const MAX_PAIR_ADDRS: usize = 4;
