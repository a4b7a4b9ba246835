//! Origin seals: what makes a batch of an origin's log unforgeable by the
//! peers that relay it.
//!
//! A *seal* is the origin's signature over one contiguous range of its own
//! log: `first..=last` and the hash of every entry in it (a record's
//! content hash, a tombstone's id, a stub's hash — the same hash a record
//! and the stub standing for it share, so a relay may withhold a record
//! without breaking the seal). The origin seals each batch it serves, for
//! exactly the batch's range. A relay keeps the seals it received and
//! forwards them; when a batch it serves starts or ends inside a sealed
//! range, the hashes of the range's entries outside the batch travel with
//! the seal (`before`, `after`), so the receiver can recompute what was
//! signed without holding them.
//!
//! The signature is ECDSA P-256 with SHA-256 in its fixed 64-byte form,
//! by the node's identity key (the key its TLS certificate carries): the
//! node id is a hash of that key's SubjectPublicKeyInfo, so a key proves
//! itself to be its origin's, and a batch carries its origin's key.
//!
//! This module owns the seal's wire shape, the exact bytes signed, and the
//! check that a batch's seals cover its range; it never signs and never
//! verifies a signature (no key material, no randomness): the node does
//! that with the messages [`seal_checks`] hands it.

use serde::{Deserialize, Serialize};

use crate::ids::NodeId;
use crate::limits::MAX_BATCH_ENTRIES;
use crate::message::Batch;
use crate::record::Hash32;
use crate::serde_util::{fixed_bytes, hash_list};

/// Length of a seal's signature (ECDSA P-256, fixed `r ‖ s` form).
pub const SEAL_SIG_LEN: usize = 64;

/// Most seals one batch may carry.
pub const MAX_SEALS: usize = 16;

/// Length of the message a seal signs.
pub const SEAL_MESSAGE_LEN: usize = SEAL_TAG.len() + 20 + 8 + 8 + 8 + 32;

const SEAL_TAG: &[u8; 13] = b"cairn-seal-v1";

/// The DER of a P-256 SubjectPublicKeyInfo up to its 65-byte uncompressed
/// point (algorithm id-ecPublicKey, curve prime256v1): the only key type a
/// node's identity has.
pub const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The origin's signature over `first..=last` of its log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// First seq of the sealed range.
    pub first: u64,
    /// Last seq of the sealed range.
    pub last: u64,
    /// ECDSA P-256 signature over [`seal_message`].
    #[serde(with = "fixed_bytes")]
    pub sig: [u8; SEAL_SIG_LEN],
    /// Hashes of the sealed entries before the batch (`first..=after_seq`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "hash_list")]
    pub before: Vec<Hash32>,
    /// Hashes of the sealed entries after the batch (`last_seq+1..=last`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "hash_list")]
    pub after: Vec<Hash32>,
}

/// Why a batch's seals do not prove its entries. The sender is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Entries without the origin's key.
    #[error("check seals: the batch carries no key for its origin")]
    MissingKey,
    /// A key that is not a P-256 SubjectPublicKeyInfo.
    #[error("check seals: the origin key is not a P-256 public key")]
    UnsupportedKey,
    /// A key whose hash is another node's id.
    #[error("check seals: the key does not belong to origin {origin}")]
    KeyMismatch {
        /// The batch's origin.
        origin: NodeId,
    },
    /// Entries not covered by any seal.
    #[error("check seals: seq {seq} is not sealed by the origin")]
    Unsealed {
        /// The first uncovered seq.
        seq: u64,
    },
    /// Seals that overlap, leave gaps, or carry the wrong number of outside hashes.
    #[error("check seals: seal {index} does not line up with the batch")]
    Misaligned {
        /// Which seal.
        index: usize,
    },
}

/// One signature to verify: the message the origin must have signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealCheck {
    /// The exact bytes signed.
    pub message: [u8; SEAL_MESSAGE_LEN],
    /// The signature to check against the origin's key.
    pub sig: [u8; SEAL_SIG_LEN],
}

/// The bytes a seal signs: the tag `cairn-seal-v1`, the origin's 20 bytes,
/// epoch, first and last seq (u64 little-endian each), then blake3 over
/// the range's entry hashes back to back, in seq order.
pub fn seal_message<'a>(
    origin: &NodeId,
    epoch: u64,
    first: u64,
    last: u64,
    hashes: impl IntoIterator<Item = &'a Hash32>,
) -> [u8; SEAL_MESSAGE_LEN] {
    let mut h = blake3::Hasher::new();
    for x in hashes {
        h.update(x);
    }
    let mut m = [0u8; SEAL_MESSAGE_LEN];
    let mut at = 0;
    for part in [
        &SEAL_TAG[..],
        origin.as_bytes(),
        &epoch.to_le_bytes(),
        &first.to_le_bytes(),
        &last.to_le_bytes(),
        h.finalize().as_bytes(),
    ] {
        m[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    m
}

/// The 65-byte uncompressed point of a P-256 SubjectPublicKeyInfo, or
/// `None` for any other key.
pub fn p256_point(spki: &[u8]) -> Option<&[u8]> {
    let point = spki.strip_prefix(&P256_SPKI_PREFIX[..])?;
    (point.len() == 65 && point[0] == 4).then_some(point)
}

/// Every entry hash of a (checked) batch in seq order: a record's content
/// hash, a tombstone's id, a stub's hash.
pub fn entry_hashes(batch: &Batch) -> Vec<(u64, Hash32)> {
    let mut out: Vec<(u64, Hash32)> =
        Vec::with_capacity(batch.records.len() + batch.tombstones.len() + batch.stubs.len());
    out.extend(batch.records.iter().map(|r| (r.seq, r.hash)));
    out.extend(batch.tombstones.iter().map(|t| (t.seq, t.id)));
    out.extend(batch.stubs.iter().map(|s| (s.seq, s.hash)));
    out.sort_unstable_by_key(|e| e.0);
    out
}

/// The message an origin signs to seal exactly this batch of its own log
/// (`after_seq+1..=last_seq`); `None` for an empty batch.
pub fn own_seal_message(batch: &Batch) -> Option<[u8; SEAL_MESSAGE_LEN]> {
    if batch.last_seq <= batch.after_seq {
        return None;
    }
    let hashes = entry_hashes(batch);
    Some(seal_message(
        &batch.origin,
        batch.epoch,
        batch.after_seq + 1,
        batch.last_seq,
        hashes.iter().map(|e| &e.1),
    ))
}

/// Checks that a batch (already through [`crate::check_batch`]) carries its
/// origin's key and seals that cover `after_seq+1..=last_seq` exactly once,
/// each with the right number of outside hashes, and returns the
/// signatures the receiver must verify with [`p256_point`] of the key. An
/// empty batch needs no seal.
pub fn seal_checks(batch: &Batch) -> Result<Vec<SealCheck>, SealError> {
    if batch.last_seq <= batch.after_seq {
        return Ok(Vec::new());
    }
    if batch.origin_key.is_empty() {
        return Err(SealError::MissingKey);
    }
    if p256_point(&batch.origin_key).is_none() {
        return Err(SealError::UnsupportedKey);
    }
    if NodeId::from_spki(&batch.origin_key) != batch.origin {
        return Err(SealError::KeyMismatch {
            origin: batch.origin,
        });
    }
    let entries = entry_hashes(batch);
    let start = batch.after_seq + 1;
    let mut next = start;
    let mut out = Vec::with_capacity(batch.seals.len());
    for (index, s) in batch.seals.iter().enumerate() {
        let bad = SealError::Misaligned { index };
        if next > batch.last_seq {
            return Err(bad);
        }
        if s.first > s.last || s.last - s.first >= MAX_BATCH_ENTRIES as u64 {
            return Err(bad);
        }
        let before_len = if index == 0 {
            if s.first > start || s.last < start {
                return Err(SealError::Unsealed { seq: start });
            }
            start - s.first
        } else {
            if s.first != next {
                return Err(bad);
            }
            0
        };
        let after_len = s.last.saturating_sub(batch.last_seq);
        if s.before.len() as u64 != before_len || s.after.len() as u64 != after_len {
            return Err(bad);
        }
        let from = (next - start) as usize;
        let to = (s.last.min(batch.last_seq) - start + 1) as usize;
        let inside = entries.get(from..to).ok_or(bad)?;
        let message = seal_message(
            &batch.origin,
            batch.epoch,
            s.first,
            s.last,
            s.before
                .iter()
                .chain(inside.iter().map(|e| &e.1))
                .chain(s.after.iter()),
        );
        out.push(SealCheck {
            message,
            sig: s.sig,
        });
        next = s.last.saturating_add(1);
    }
    if next <= batch.last_seq {
        return Err(SealError::Unsealed { seq: next });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LogStub;
    use crate::record::StubKind;

    fn key() -> Vec<u8> {
        let mut k = P256_SPKI_PREFIX.to_vec();
        k.push(4);
        k.extend([7u8; 64]);
        k
    }

    fn batch(after: u64, last: u64) -> Batch {
        let k = key();
        Batch {
            origin: NodeId::from_spki(&k),
            epoch: 5,
            after_seq: after,
            last_seq: last,
            more: false,
            records: Vec::new(),
            tombstones: Vec::new(),
            stubs: (after + 1..=last)
                .map(|seq| LogStub {
                    seq,
                    hash: [seq as u8; 32],
                    kind: StubKind::Withheld,
                })
                .collect(),
            origin_key: k,
            seals: Vec::new(),
        }
    }

    fn seal(first: u64, last: u64, before: Vec<Hash32>, after: Vec<Hash32>) -> Seal {
        Seal {
            first,
            last,
            sig: [1; SEAL_SIG_LEN],
            before,
            after,
        }
    }

    #[test]
    fn own_seal_is_the_one_check_of_an_exact_batch() {
        let mut b = batch(3, 6);
        b.seals.push(seal(4, 6, vec![], vec![]));
        let checks = seal_checks(&b).expect("sealed");
        assert_eq!(checks.len(), 1);
        assert_eq!(Some(checks[0].message), own_seal_message(&b));
    }

    #[test]
    fn relayed_seals_with_outside_hashes_recompute_the_origins_message() {
        // The origin sealed 1..=4 and 5..=8; a relay serves 3..=6.
        let all = batch(0, 8);
        let whole: Vec<_> = entry_hashes(&all).into_iter().map(|e| e.1).collect();
        let m1 = seal_message(&all.origin, 5, 1, 4, whole[0..4].iter());
        let m2 = seal_message(&all.origin, 5, 5, 8, whole[4..8].iter());
        let mut b = batch(2, 6);
        b.seals.push(seal(1, 4, whole[0..2].to_vec(), vec![]));
        b.seals.push(seal(5, 8, vec![], whole[6..8].to_vec()));
        let checks = seal_checks(&b).expect("sealed");
        assert_eq!(
            checks.iter().map(|c| c.message).collect::<Vec<_>>(),
            [m1, m2]
        );
    }

    #[test]
    fn gaps_overlaps_and_foreign_keys_are_refused() {
        let mut b = batch(0, 4);
        assert_eq!(seal_checks(&b), Err(SealError::Unsealed { seq: 1 }));
        b.seals.push(seal(1, 2, vec![], vec![]));
        assert_eq!(seal_checks(&b), Err(SealError::Unsealed { seq: 3 }));
        b.seals.push(seal(2, 4, vec![], vec![]));
        assert_eq!(seal_checks(&b), Err(SealError::Misaligned { index: 1 }));
        b.seals[1] = seal(3, 5, vec![], vec![]);
        // One hash after the batch is missing.
        assert_eq!(seal_checks(&b), Err(SealError::Misaligned { index: 1 }));
        b.seals[1] = seal(3, 4, vec![], vec![]);
        assert!(seal_checks(&b).is_ok());
        let mut other = b.clone();
        other.origin = NodeId([9; 20]);
        assert_eq!(
            seal_checks(&other),
            Err(SealError::KeyMismatch {
                origin: other.origin
            })
        );
        let mut keyless = b.clone();
        keyless.origin_key.clear();
        assert_eq!(seal_checks(&keyless), Err(SealError::MissingKey));
        let mut rsa = b.clone();
        rsa.origin_key[3] ^= 1;
        assert_eq!(seal_checks(&rsa), Err(SealError::UnsupportedKey));
        // An empty batch needs no seal.
        assert_eq!(seal_checks(&batch(4, 4)), Ok(Vec::new()));
    }

    #[test]
    fn message_binds_every_field() {
        let o = NodeId([1; 20]);
        let h = [[2u8; 32]];
        let base = seal_message(&o, 1, 1, 1, h.iter());
        assert_ne!(base, seal_message(&NodeId([3; 20]), 1, 1, 1, h.iter()));
        assert_ne!(base, seal_message(&o, 2, 1, 1, h.iter()));
        assert_ne!(base, seal_message(&o, 1, 2, 2, h.iter()));
        assert_ne!(base, seal_message(&o, 1, 1, 1, [[3u8; 32]].iter()));
    }
}
