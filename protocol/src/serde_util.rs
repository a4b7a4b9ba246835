//! Serde helpers shared by the wire types: fixed-size byte strings and
//! length-bounded sequences.
//!
//! Owns how fixed byte arrays look in CBOR (a byte string, not an array of
//! integers) and the per-field element caps that keep decoding memory
//! proportional to the frame. Never allocates more than the cap allows.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;

/// `#[serde(with = "fixed_bytes")]` for `[u8; N]`: a CBOR byte string of exactly N bytes.
pub(crate) mod fixed_bytes {
    use super::*;

    pub(crate) fn serialize<S: Serializer, const N: usize>(
        v: &[u8; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        d.deserialize_bytes(FixedVisitor::<N>)
    }

    struct FixedVisitor<const N: usize>;

    impl<'de, const N: usize> Visitor<'de> for FixedVisitor<N> {
        type Value = [u8; N];

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a byte string of exactly {N} bytes")
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<[u8; N], E> {
            <[u8; N]>::try_from(v).map_err(|_| E::invalid_length(v.len(), &self))
        }

        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<[u8; N], E> {
            self.visit_bytes(&v)
        }
    }
}

/// Deserializes a sequence of at most `MAX` elements, failing as soon as
/// element `MAX + 1` appears and never pre-allocating past `MAX`.
pub(crate) fn bounded_vec<'de, D, T, const MAX: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(BoundedVisitor::<T, MAX>(PhantomData))
}

struct BoundedVisitor<T, const MAX: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for BoundedVisitor<T, MAX> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a sequence of at most {MAX} elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        if let Some(hint) = seq.size_hint()
            && hint > MAX
        {
            return Err(de::Error::invalid_length(hint, &self));
        }
        // Pre-allocate only a small amount; the frame cap bounds the rest.
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX).min(64));
        while let Some(v) = seq.next_element()? {
            if out.len() == MAX {
                return Err(de::Error::invalid_length(MAX + 1, &self));
            }
            out.push(v);
        }
        Ok(out)
    }
}

/// `#[serde(with = "short_bytes")]` for `Vec<u8>`: a CBOR
/// byte string of at most `MAX` bytes (longer ones fail while decoding).
pub(crate) mod short_bytes {
    use super::*;

    /// Longest byte string accepted.
    pub(crate) const MAX: usize = 256;

    pub(crate) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_bytes(ShortVisitor)
    }

    struct ShortVisitor;

    impl<'de> Visitor<'de> for ShortVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a byte string of at most {MAX} bytes")
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            if v.len() > MAX {
                return Err(E::invalid_length(v.len(), &self));
            }
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            self.visit_bytes(&v)
        }
    }
}

/// `#[serde(with = "hash_list")]` for `Vec<[u8; 32]>`: one CBOR byte string
/// of the hashes back to back, at most [`crate::MAX_BATCH_ENTRIES`] of them.
pub(crate) mod hash_list {
    use super::*;
    use crate::limits::MAX_BATCH_ENTRIES;

    pub(crate) fn serialize<S: Serializer>(v: &[[u8; 32]], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v.as_flattened())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[u8; 32]>, D::Error> {
        d.deserialize_bytes(ListVisitor)
    }

    struct ListVisitor;

    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Vec<[u8; 32]>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "a byte string of at most {MAX_BATCH_ENTRIES} 32-byte hashes"
            )
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<[u8; 32]>, E> {
            if !v.len().is_multiple_of(32) || v.len() / 32 > MAX_BATCH_ENTRIES {
                return Err(E::invalid_length(v.len(), &self));
            }
            Ok(v.chunks_exact(32)
                .map(|c| {
                    let mut h = [0u8; 32];
                    h.copy_from_slice(c);
                    h
                })
                .collect())
        }

        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<[u8; 32]>, E> {
            self.visit_bytes(&v)
        }
    }
}
