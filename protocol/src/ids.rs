//! Node identities as they appear on the wire.
//!
//! Owns the byte form of a node id and of a key fingerprint and their text
//! form. A fingerprint is the blake3 hash of a node's SubjectPublicKeyInfo
//! DER (what TLS presents); the node id is its first 20 bytes, printed as
//! 32 characters of lowercase unpadded RFC 4648 base32 — exactly what
//! `cairn_node::identity::node_id` prints. Never touches keys or certificates.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Length of a node id in bytes.
pub const NODE_ID_LEN: usize = 20;

/// The blake3 hash of a node's SubjectPublicKeyInfo DER (32 bytes).
pub type SpkiFingerprint = [u8; 32];

/// The blake3 fingerprint of a SubjectPublicKeyInfo DER, as TLS presents it.
pub fn spki_fingerprint(spki_der: &[u8]) -> SpkiFingerprint {
    *blake3::hash(spki_der).as_bytes()
}

/// A node id: the first 20 bytes of the node's [`SpkiFingerprint`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub [u8; NODE_ID_LEN]);

impl NodeId {
    /// The id of the node whose key has this fingerprint.
    pub fn from_fingerprint(fp: &SpkiFingerprint) -> NodeId {
        let mut id = [0u8; NODE_ID_LEN];
        id.copy_from_slice(&fp[..NODE_ID_LEN]);
        NodeId(id)
    }

    /// The id of the node presenting this SubjectPublicKeyInfo DER.
    pub fn from_spki(spki_der: &[u8]) -> NodeId {
        NodeId::from_fingerprint(&spki_fingerprint(spki_der))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; NODE_ID_LEN] {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base32_encode(&self.0))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
}

/// Why a node id string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIdError {
    /// Not 32 base32 characters.
    #[error("parse node id: expected 32 base32 characters, got {len}")]
    Length {
        /// Characters given.
        len: usize,
    },
    /// A character outside `a-z2-7`.
    #[error("parse node id: invalid base32 character at position {position}")]
    Character {
        /// Byte position of the first bad character.
        position: usize,
    },
}

impl FromStr for NodeId {
    type Err = NodeIdError;

    fn from_str(s: &str) -> Result<NodeId, NodeIdError> {
        if s.len() != 32 {
            return Err(NodeIdError::Length { len: s.len() });
        }
        let bytes = base32_decode(s).map_err(|position| NodeIdError::Character { position })?;
        let id = <[u8; NODE_ID_LEN]>::try_from(bytes.as_slice())
            .map_err(|_| NodeIdError::Length { len: s.len() })?;
        Ok(NodeId(id))
    }
}

impl Serialize for NodeId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::serde_util::fixed_bytes::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeId, D::Error> {
        crate::serde_util::fixed_bytes::deserialize(d).map(NodeId)
    }
}

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// RFC 4648 base32, lowercase, no padding (the node's id alphabet).
pub(crate) fn base32_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
        acc &= 0xff;
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

/// Decodes lowercase or uppercase unpadded base32; `Err(position)` names the
/// first invalid character. Trailing bits that do not fill a byte are dropped.
pub(crate) fn base32_decode(s: &str) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(s.len() * 5 / 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in s.bytes().enumerate() {
        let v = match c {
            b'a'..=b'z' => c - b'a',
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return Err(i),
        };
        acc = ((acc << 5) | u32::from(v)) & 0xfff;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_matches_rfc4648_vectors() {
        for (raw, enc) in [
            (&b""[..], ""),
            (b"f", "my"),
            (b"fo", "mzxq"),
            (b"foo", "mzxw6"),
            (b"foob", "mzxw6yq"),
            (b"fooba", "mzxw6ytb"),
            (b"foobar", "mzxw6ytboi"),
        ] {
            assert_eq!(base32_encode(raw), enc);
            assert_eq!(base32_decode(enc).as_deref(), Ok(raw));
            assert_eq!(base32_decode(&enc.to_uppercase()).as_deref(), Ok(raw));
        }
        assert_eq!(base32_decode("mz1"), Err(2));
    }

    #[test]
    fn node_id_text_round_trip_and_errors() {
        let id = NodeId::from_spki(b"some spki der");
        let s = id.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(s.parse::<NodeId>(), Ok(id));
        assert_eq!("abc".parse::<NodeId>(), Err(NodeIdError::Length { len: 3 }));
        let bad = format!("{}!", &s[..31]);
        assert_eq!(
            bad.parse::<NodeId>(),
            Err(NodeIdError::Character { position: 31 })
        );
    }

    #[test]
    fn node_id_is_fingerprint_prefix() {
        let fp = spki_fingerprint(b"key");
        assert_eq!(NodeId::from_fingerprint(&fp).0[..], fp[..20]);
    }
}
