//! Signing and verifying origin seals (`cairn_protocol::seal`) with the
//! node's identity key.
//!
//! Owns the one place key material meets seals: [`Signer`] seals batches
//! of this node's own log with its identity key (ECDSA P-256, the key its
//! TLS certificate carries), and [`verify`] checks a batch's seals against
//! the origin key the batch carries. What is signed, and which seals a
//! batch needs, is `cairn_protocol::seal`'s; which keys are known for
//! which origins is the store's (`store::trust`). Never touches the
//! database or the network.

use cairn_protocol::{Batch, NodeId, SEAL_SIG_LEN, Seal, SealCheck, own_seal_message, p256_point};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, UnparsedPublicKey,
};

/// Why the identity key cannot seal.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The identity key is not a P-256 key ring accepts.
    #[error("the identity key cannot sign seals (it must be an ECDSA P-256 key): {0}")]
    Key(String),
}

/// Seals batches of this node's own log.
pub struct Signer {
    key: EcdsaKeyPair,
    spki: Vec<u8>,
    id: NodeId,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for this identity key pair.
    pub fn new(key: &rcgen::KeyPair) -> Result<Signer, SignerError> {
        let rng = SystemRandom::new();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &key.serialize_der(), &rng)
                .map_err(|e| SignerError::Key(e.to_string()))?;
        let spki = rcgen::PublicKeyData::subject_public_key_info(key);
        if p256_point(&spki).is_none() {
            return Err(SignerError::Key("not a P-256 public key".into()));
        }
        Ok(Signer {
            key: pair,
            id: NodeId::from_spki(&spki),
            spki,
            rng,
        })
    }

    /// The node id this signer seals for.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The public key (SubjectPublicKeyInfo DER) batches carry.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// Signs a seal message.
    pub fn sign(&self, message: &[u8]) -> [u8; SEAL_SIG_LEN] {
        let mut out = [0u8; SEAL_SIG_LEN];
        // Signing with a valid key and the system's random source does not
        // fail; if it ever did, the all-zero signature is refused by every
        // receiver (and the batch with it), never accepted.
        if let Ok(sig) = self.key.sign(&self.rng, message)
            && sig.as_ref().len() == SEAL_SIG_LEN
        {
            out.copy_from_slice(sig.as_ref());
        }
        out
    }

    /// Seals a batch of this node's own log for exactly its range and
    /// attaches this node's key. An empty batch is left as it is.
    pub fn seal_own(&self, batch: &mut Batch) {
        let Some(message) = own_seal_message(batch) else {
            return;
        };
        batch.seals = vec![Seal {
            first: batch.after_seq + 1,
            last: batch.last_seq,
            sig: self.sign(&message),
            before: Vec::new(),
            after: Vec::new(),
        }];
        batch.origin_key = self.spki.clone();
    }
}

/// Verifies every check against `spki` (a P-256 SubjectPublicKeyInfo);
/// `Err(index)` names the first signature that does not verify.
pub fn verify(spki: &[u8], checks: &[SealCheck]) -> Result<(), usize> {
    let Some(point) = p256_point(spki) else {
        return Err(0);
    };
    let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point);
    for (i, c) in checks.iter().enumerate() {
        key.verify(&c.message, &c.sig).map_err(|_| i)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_protocol::{LogStub, StubKind, seal_checks};

    fn batch(origin: NodeId) -> Batch {
        Batch {
            origin,
            epoch: 3,
            after_seq: 0,
            last_seq: 2,
            more: false,
            records: vec![],
            tombstones: vec![],
            stubs: (1..=2)
                .map(|seq| LogStub {
                    seq,
                    hash: [seq as u8; 32],
                    kind: StubKind::Withheld,
                })
                .collect(),
            origin_key: vec![],
            seals: vec![],
        }
    }

    #[test]
    fn own_seal_verifies_and_any_change_does_not() {
        let key = rcgen::KeyPair::generate().expect("key");
        let s = Signer::new(&key).expect("signer");
        assert_eq!(s.id(), crate::identity::node_id(s.spki()));
        let mut b = batch(s.id());
        s.seal_own(&mut b);
        let checks = seal_checks(&b).expect("sealed");
        assert_eq!(verify(&b.origin_key, &checks), Ok(()));
        // A relay altering an entry's hash breaks the seal.
        let mut altered = b.clone();
        altered.stubs[1].hash = [9; 32];
        let checks = seal_checks(&altered).expect("shape holds");
        assert_eq!(verify(&altered.origin_key, &checks), Err(0));
        // Another key cannot seal for this origin: its key hashes elsewhere,
        // and a signature by it does not verify with the origin's key.
        let other = Signer::new(&rcgen::KeyPair::generate().expect("key")).expect("signer");
        let mut forged = batch(s.id());
        other.seal_own(&mut forged);
        assert!(seal_checks(&forged).is_err(), "the key is not the origin's");
        forged.origin_key = s.spki().to_vec();
        let checks = seal_checks(&forged).expect("shape holds");
        assert_eq!(verify(&forged.origin_key, &checks), Err(0));
    }
}
