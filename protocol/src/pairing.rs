//! Pairing codes and the pure half of the pairing handshake.
//!
//! Owns the one-line code `cairn pair` prints (`cairn1-<base32>`), its
//! parser, and the proofs both sides exchange on the `cairn-pair/1` ALPN.
//! Never generates secrets or reads the clock: the secret and the times
//! come in as arguments. Single use is the inviter's state, kept by the node.
//!
//! # Threat model
//!
//! The code travels over a channel the user trusts (their own screen,
//! clipboard or chat with themselves). It carries the inviter's key
//! fingerprint, so the joiner's TLS verifier pins the inviter's key: a man in
//! the middle cannot pose as the inviter without the inviter's private key.
//! The inviter cannot pin the joiner in advance; instead the joiner sends
//! [`PairRequest`] whose proof is a keyed blake3 MAC, under a key derived from
//! the code's one-time secret (16–32 random bytes, not guessable online), over
//! a transcript binding both TLS key fingerprints and the TLS exporter value
//! of this very connection. Someone without the code cannot produce it; a
//! proof observed (it never is: it travels inside TLS) or relayed cannot be
//! reused for another key or another connection. The inviter learns the
//! joiner's key only from this authenticated exchange and answers with its
//! own proof ([`PairAccept`]), so both sides confirm the shared secret.
//! The node must make the code single-use (the secret is forgotten after one
//! success or a few failures) and honour the expiry ([`PairingCode::check_fresh`]).
//! Whoever sees the code before it is used or expires can pair in the user's
//! place: treat it like a password and never log it. [`PairingCode`]'s
//! `Debug` output hides the secret for that reason.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::ids::{NodeId, SpkiFingerprint, base32_decode, base32_encode};
use crate::limits::MAX_PAIR_ADDRS;
use crate::message::{PairAccept, PairRequest};

/// Text every pairing code starts with (the `1` is the code format version).
pub const CODE_PREFIX: &str = "cairn1-";

/// Shortest accepted one-time secret, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// Longest accepted one-time secret, in bytes.
pub const MAX_SECRET_LEN: usize = 32;

const CODE_VERSION: u8 = 1;
const CHECKSUM_LEN: usize = 4;
const CHECKSUM_CONTEXT: &[u8] = b"cairn-pair-code-v1";
const PROOF_KEY_CONTEXT: &str = "cairn 2026-01 pairing v1 proof key";
const PROOF_TAG: &[u8] = b"cairn-pair-proof-v1";
/// Longest code text accepted before decoding (bounds work on hostile input).
const MAX_CODE_CHARS: usize = 512;
/// Address family byte of a host name entry (resolved by the joiner).
const FAMILY_HOST: u8 = 3;
/// Longest host name a code carries (four of them still fit in a code).
pub const MAX_HOST_LEN: usize = 48;

/// A pairing code or proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    /// Does not start with `cairn1-`.
    #[error("parse pairing code: it must start with `{CODE_PREFIX}`")]
    Prefix,
    /// Longer than any valid code.
    #[error("parse pairing code: {len} characters is too long for a pairing code")]
    TooLong {
        /// Characters given.
        len: usize,
    },
    /// A character outside the base32 alphabet.
    #[error("parse pairing code: invalid character at position {position}")]
    Character {
        /// Position in the text after the prefix.
        position: usize,
    },
    /// The checksum does not match: a typo, a truncated copy, or tampering.
    #[error("parse pairing code: checksum mismatch (copied incompletely or altered?)")]
    Checksum,
    /// The code ended early.
    #[error("parse pairing code: code is truncated")]
    Truncated,
    /// Extra bytes after a complete code.
    #[error("parse pairing code: {extra} unexpected trailing bytes")]
    Trailing {
        /// How many.
        extra: usize,
    },
    /// A code format this build does not know.
    #[error("parse pairing code: format version {version} is not supported; upgrade cairn")]
    Version {
        /// The version byte found.
        version: u8,
    },
    /// Address list empty or too long, or an unknown address family.
    #[error("parse pairing code: {count} dial addresses (need 1 to {MAX_PAIR_ADDRS})")]
    AddrCount {
        /// How many addresses.
        count: usize,
    },
    /// A host name that is empty, too long or not made of letters,
    /// digits, `-` and `.`.
    #[error("pairing code: {name:?} is not a usable host name")]
    HostName {
        /// The name (lossy when it was not UTF-8).
        name: String,
    },
    /// An address family byte other than 4, 6 or 3 (host name).
    #[error("parse pairing code: unknown address family {family}")]
    AddrFamily {
        /// The family byte found.
        family: u8,
    },
    /// The secret's length is outside 16..=32 bytes.
    #[error(
        "parse pairing code: secret of {len} bytes (need {MIN_SECRET_LEN} to {MAX_SECRET_LEN})"
    )]
    SecretLength {
        /// Its length.
        len: usize,
    },
    /// The code's validity ended.
    #[error(
        "use pairing code: it expired at unix time {expires_unix} (now {now_unix}); run `cairn pair` again"
    )]
    Expired {
        /// When it expired (Unix seconds).
        expires_unix: u64,
        /// The time it was checked at (Unix seconds).
        now_unix: u64,
    },
    /// A proof did not verify: wrong secret, or a different key or connection.
    #[error("verify pairing proof: the peer does not hold this pairing code")]
    BadProof,
    /// The node id a peer claims is not the one its TLS key gives.
    #[error(
        "verify pairing proof: claimed node id {claimed} does not match the TLS key ({actual})"
    )]
    NodeIdMismatch {
        /// What the message said.
        claimed: NodeId,
        /// What the TLS key gives.
        actual: NodeId,
    },
}

/// Everything a joiner needs to pair: where to dial, whom to expect, and the
/// one-time secret. Fields are validated on construction.
#[derive(Clone, PartialEq, Eq)]
pub struct PairingCode {
    addrs: Vec<SocketAddr>,
    hosts: Vec<(String, u16)>,
    inviter: SpkiFingerprint,
    secret: Vec<u8>,
    expires_unix: u64,
}

impl fmt::Debug for PairingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PairingCode")
            .field("addrs", &self.addrs)
            .field("hosts", &self.hosts)
            .field("inviter", &NodeId::from_fingerprint(&self.inviter))
            .field(
                "secret",
                &format_args!("<{} bytes hidden>", self.secret.len()),
            )
            .field("expires_unix", &self.expires_unix)
            .finish()
    }
}

impl PairingCode {
    /// A code for these addresses (1 to 4; IPv6 scope ids are not carried),
    /// the inviter's key fingerprint, a fresh random secret (16 to 32 bytes)
    /// and an expiry in Unix seconds.
    pub fn new(
        addrs: Vec<SocketAddr>,
        inviter: SpkiFingerprint,
        secret: &[u8],
        expires_unix: u64,
    ) -> Result<PairingCode, PairingError> {
        if addrs.is_empty() || addrs.len() > MAX_PAIR_ADDRS {
            return Err(PairingError::AddrCount { count: addrs.len() });
        }
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&secret.len()) {
            return Err(PairingError::SecretLength { len: secret.len() });
        }
        Ok(PairingCode {
            addrs,
            hosts: Vec::new(),
            inviter,
            secret: secret.to_vec(),
            expires_unix,
        })
    }

    /// The same code with host names to dial as well (`name`, port),
    /// resolved by the joiner when it dials; addresses and names together
    /// are at most four. `addrs` may then be empty.
    pub fn with_hosts(
        addrs: Vec<SocketAddr>,
        hosts: Vec<(String, u16)>,
        inviter: SpkiFingerprint,
        secret: &[u8],
        expires_unix: u64,
    ) -> Result<PairingCode, PairingError> {
        let count = addrs.len() + hosts.len();
        if count == 0 || count > MAX_PAIR_ADDRS {
            return Err(PairingError::AddrCount { count });
        }
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&secret.len()) {
            return Err(PairingError::SecretLength { len: secret.len() });
        }
        for (h, _) in &hosts {
            check_host(h)?;
        }
        Ok(PairingCode {
            addrs,
            hosts,
            inviter,
            secret: secret.to_vec(),
            expires_unix,
        })
    }

    /// Addresses to dial, in the inviter's order of preference.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Host names to resolve and dial (`name`, port).
    pub fn hosts(&self) -> &[(String, u16)] {
        &self.hosts
    }

    /// The inviter's key fingerprint: the joiner pins it in TLS.
    pub fn inviter_fingerprint(&self) -> &SpkiFingerprint {
        &self.inviter
    }

    /// The inviter's node id.
    pub fn inviter_node_id(&self) -> NodeId {
        NodeId::from_fingerprint(&self.inviter)
    }

    /// The one-time secret. Never log it.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// When the code stops working (Unix seconds).
    pub fn expires_unix(&self) -> u64 {
        self.expires_unix
    }

    /// Fails once `now_unix` has reached the expiry.
    pub fn check_fresh(&self, now_unix: u64) -> Result<(), PairingError> {
        if now_unix >= self.expires_unix {
            Err(PairingError::Expired {
                expires_unix: self.expires_unix,
                now_unix,
            })
        } else {
            Ok(())
        }
    }

    /// The one-line text: `cairn1-` and lowercase base32 of the binary form.
    pub fn encode(&self) -> String {
        let mut b = Vec::with_capacity(128);
        b.push(CODE_VERSION);
        b.push((self.addrs.len() + self.hosts.len()) as u8);
        for (h, port) in &self.hosts {
            b.push(FAMILY_HOST);
            b.push(h.len() as u8);
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(&port.to_be_bytes());
        }
        for a in &self.addrs {
            match a.ip() {
                IpAddr::V4(ip) => {
                    b.push(4);
                    b.extend_from_slice(&ip.octets());
                }
                IpAddr::V6(ip) => {
                    b.push(6);
                    b.extend_from_slice(&ip.octets());
                }
            }
            b.extend_from_slice(&a.port().to_be_bytes());
        }
        b.extend_from_slice(&self.inviter);
        b.push(self.secret.len() as u8);
        b.extend_from_slice(&self.secret);
        b.extend_from_slice(&self.expires_unix.to_be_bytes());
        let sum = checksum(&b);
        b.extend_from_slice(&sum);
        format!("{CODE_PREFIX}{}", base32_encode(&b))
    }

    /// Parses a code, tolerating surrounding whitespace and upper case.
    /// Does not check expiry: see [`PairingCode::parse_at`].
    pub fn parse(text: &str) -> Result<PairingCode, PairingError> {
        let text = text.trim();
        if text.len() > MAX_CODE_CHARS {
            return Err(PairingError::TooLong { len: text.len() });
        }
        let Some(body) = text
            .get(..CODE_PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(CODE_PREFIX))
            .and_then(|_| text.get(CODE_PREFIX.len()..))
        else {
            return Err(PairingError::Prefix);
        };
        let bytes = base32_decode(body).map_err(|position| PairingError::Character { position })?;
        // Base32's last character may carry unused bits; a code that does not
        // re-encode to itself was altered even if its checksum still matches.
        if !base32_encode(&bytes).eq_ignore_ascii_case(body) {
            return Err(PairingError::Checksum);
        }
        let Some((payload, sum)) = bytes.split_last_chunk::<CHECKSUM_LEN>() else {
            return Err(PairingError::Truncated);
        };
        if checksum(payload) != *sum {
            return Err(PairingError::Checksum);
        }
        let mut r = Reader(payload);
        let version = r.u8()?;
        if version != CODE_VERSION {
            return Err(PairingError::Version { version });
        }
        let count = usize::from(r.u8()?);
        if count == 0 || count > MAX_PAIR_ADDRS {
            return Err(PairingError::AddrCount { count });
        }
        let mut addrs = Vec::with_capacity(count);
        let mut hosts = Vec::new();
        for _ in 0..count {
            let ip = match r.u8()? {
                4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>()?)),
                6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)),
                FAMILY_HOST => {
                    let len = usize::from(r.u8()?);
                    let raw = r.take(len)?;
                    let name = String::from_utf8_lossy(raw).into_owned();
                    check_host(&name)?;
                    let port = u16::from_be_bytes(r.array::<2>()?);
                    hosts.push((name, port));
                    continue;
                }
                family => return Err(PairingError::AddrFamily { family }),
            };
            let port = u16::from_be_bytes(r.array::<2>()?);
            addrs.push(SocketAddr::new(ip, port));
        }
        let inviter = r.array::<32>()?;
        let len = usize::from(r.u8()?);
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&len) {
            return Err(PairingError::SecretLength { len });
        }
        let secret = r.take(len)?.to_vec();
        let expires_unix = u64::from_be_bytes(r.array::<8>()?);
        if !r.0.is_empty() {
            return Err(PairingError::Trailing { extra: r.0.len() });
        }
        Ok(PairingCode {
            addrs,
            hosts,
            inviter,
            secret,
            expires_unix,
        })
    }

    /// [`PairingCode::parse`], then [`PairingCode::check_fresh`].
    pub fn parse_at(text: &str, now_unix: u64) -> Result<PairingCode, PairingError> {
        let code = PairingCode::parse(text)?;
        code.check_fresh(now_unix)?;
        Ok(code)
    }
}

/// Accepts a DNS host name: 1 to [`MAX_HOST_LEN`] bytes of ASCII letters,
/// digits, `-` and `.`, with no empty label and no label starting or
/// ending with `-`.
pub fn check_host(name: &str) -> Result<(), PairingError> {
    let bad = || PairingError::HostName {
        name: name.chars().take(MAX_HOST_LEN + 1).collect(),
    };
    if name.is_empty() || name.len() > MAX_HOST_LEN {
        return Err(bad());
    }
    for label in name.strip_suffix('.').unwrap_or(name).split('.') {
        if label.is_empty()
            || label.len() > 63
            || label.starts_with('-')
            || label.ends_with('-')
            || !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(bad());
        }
    }
    Ok(())
}

fn checksum(payload: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut h = blake3::Hasher::new();
    h.update(CHECKSUM_CONTEXT);
    h.update(payload);
    let mut out = [0u8; CHECKSUM_LEN];
    out.copy_from_slice(&h.finalize().as_bytes()[..CHECKSUM_LEN]);
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PairingError> {
        if self.0.len() < n {
            return Err(PairingError::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, PairingError> {
        Ok(self.array::<1>()?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PairingError> {
        let s = self.take(N)?;
        <[u8; N]>::try_from(s).map_err(|_| PairingError::Truncated)
    }
}

/// Which side of the pairing a proof comes from (the two proofs differ, so
/// one cannot be reflected back as the other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The node that ran `cairn pair` and printed the code.
    Inviter,
    /// The node that ran `cairn pair <code>`.
    Joiner,
}

/// What a pairing proof binds: both TLS keys and this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transcript {
    /// blake3 of the inviter's SubjectPublicKeyInfo, as presented in TLS.
    pub inviter: SpkiFingerprint,
    /// blake3 of the joiner's SubjectPublicKeyInfo, as presented in TLS.
    pub joiner: SpkiFingerprint,
    /// 32 bytes of TLS keying material exported from this connection
    /// (RFC 5705/8446 exporter, label `EXPORTER-cairn-pair`, no context).
    pub channel_binding: [u8; 32],
}

/// The proof `role` sends: blake3 keyed hash, under a key derived from the
/// secret, of the role and the transcript.
pub fn proof(secret: &[u8], role: Role, t: &Transcript) -> [u8; 32] {
    let key = blake3::derive_key(PROOF_KEY_CONTEXT, secret);
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(PROOF_TAG);
    h.update(&[match role {
        Role::Inviter => 1,
        Role::Joiner => 2,
    }]);
    h.update(&t.inviter);
    h.update(&t.joiner);
    h.update(&t.channel_binding);
    *h.finalize().as_bytes()
}

/// Checks a proof in constant time.
pub fn verify_proof(
    secret: &[u8],
    role: Role,
    t: &Transcript,
    candidate: &[u8; 32],
) -> Result<(), PairingError> {
    let expected = blake3::Hash::from(proof(secret, role, t));
    if expected == blake3::Hash::from(*candidate) {
        Ok(())
    } else {
        Err(PairingError::BadProof)
    }
}

/// The joiner's request for this transcript.
pub fn pair_request(secret: &[u8], t: &Transcript, joiner_name: &str) -> PairRequest {
    PairRequest {
        secret_proof: proof(secret, Role::Joiner, t),
        joiner_node_id: NodeId::from_fingerprint(&t.joiner),
        joiner_name: joiner_name.to_owned(),
        joiner_serve_port: None,
    }
}

/// The inviter's answer for this transcript.
pub fn pair_accept(secret: &[u8], t: &Transcript, inviter_name: &str) -> PairAccept {
    PairAccept {
        secret_proof: proof(secret, Role::Inviter, t),
        inviter_node_id: NodeId::from_fingerprint(&t.inviter),
        inviter_name: inviter_name.to_owned(),
        inviter_serve_port: None,
    }
}

/// Inviter side: accepts a request only if its node id matches the joiner's
/// TLS key and its proof matches the secret; returns the joiner's id to pin.
pub fn verify_pair_request(
    secret: &[u8],
    t: &Transcript,
    req: &PairRequest,
) -> Result<NodeId, PairingError> {
    let actual = NodeId::from_fingerprint(&t.joiner);
    if req.joiner_node_id != actual {
        return Err(PairingError::NodeIdMismatch {
            claimed: req.joiner_node_id,
            actual,
        });
    }
    verify_proof(secret, Role::Joiner, t, &req.secret_proof)?;
    Ok(actual)
}

/// Joiner side: accepts the inviter's answer only if it proves the secret too.
pub fn verify_pair_accept(
    secret: &[u8],
    t: &Transcript,
    acc: &PairAccept,
) -> Result<NodeId, PairingError> {
    let actual = NodeId::from_fingerprint(&t.inviter);
    if acc.inviter_node_id != actual {
        return Err(PairingError::NodeIdMismatch {
            claimed: acc.inviter_node_id,
            actual,
        });
    }
    verify_proof(secret, Role::Inviter, t, &acc.secret_proof)?;
    Ok(actual)
}
