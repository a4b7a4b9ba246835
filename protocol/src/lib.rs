//! Wire types and framing shared by cairn nodes.
//!
//! This crate owns the bytes on the wire and nothing else: it performs no
//! I/O, reads no clock and holds no randomness. The sync engine in
//! `cairn-node` converts its storage rows into these types by hand.
#![forbid(unsafe_code)]

/// Major protocol version; carried in the ALPN name once networking lands.
pub const PROTOCOL_MAJOR: u16 = 1;
