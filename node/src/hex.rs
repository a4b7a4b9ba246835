//! Lowercase hex for 32-byte values (key fingerprints, content hashes) at
//! the display and serde edges, through `data-encoding`, and the text serde
//! form of node ids. Inside the node
//! these values are bytes (`SpkiFingerprint`, `Hash32`); node ids have
//! their own text form (`NodeId`'s `Display`/`FromStr`).

use data_encoding::{HEXLOWER, HEXLOWER_PERMISSIVE};

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    HEXLOWER.encode(bytes)
}

/// Parses exactly 64 hex digits (either case) into 32 bytes.
pub fn decode32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    HEXLOWER_PERMISSIVE
        .decode_mut(s.as_bytes(), &mut out)
        .ok()
        .map(|_| out)
}

/// Serializes 32 bytes as lowercase hex (`#[serde(serialize_with)]`).
pub fn serialize<S: serde::Serializer>(bytes: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&encode(bytes))
}

/// 32 bytes as 64 hex digits in text formats (`#[serde(with)]`).
pub mod fixed32 {
    pub use crate::hex::serialize;

    /// Reads 64 hex digits.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
        crate::hex::decode32(&s).ok_or_else(|| serde::de::Error::custom("expected 64 hex digits"))
    }
}

/// A node id as its base32 text in text formats (`#[serde(with)]`); the
/// protocol's own serde form is bytes, for CBOR.
pub mod node_id_text {
    use cairn_protocol::NodeId;

    /// Writes the base32 text.
    pub fn serialize<S: serde::Serializer>(id: &NodeId, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(id)
    }

    /// Reads the base32 text.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<NodeId, D::Error> {
        let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let b: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        let h = encode(&b);
        assert_eq!(h.len(), 64);
        assert_eq!(h, h.to_lowercase());
        assert_eq!(decode32(&h), Some(b));
        assert_eq!(decode32(&h.to_uppercase()), Some(b));
        assert_eq!(encode(b"\x00\xff"), "00ff");
        assert_eq!(decode32("zz"), None);
        assert_eq!(decode32(&"g".repeat(64)), None);
        assert_eq!(decode32(&"a".repeat(66)), None);
    }
}
