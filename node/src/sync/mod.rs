//! Peer-to-peer sync (in progress): conversions between stored records and
//! wire types, TLS identities with pinned peer keys, the QUIC endpoint, the
//! pairing exchange and the peer table.
//!
//! Only this module knows about quinn and rustls. The bytes on the wire are
//! defined in `cairn-protocol`; the database side (origin logs, watermarks,
//! applying batches, tombstones) lives in `crate::store`.

pub mod convert;
pub mod daemon;
pub mod endpoint;
pub mod instance;
pub mod pairing;
pub mod peers;
pub mod session;
pub mod tls;
