//! Records, tombstones and stubs as they travel in a [`Batch`](crate::Batch),
//! and the one definition of a record's content hash.
//!
//! Owns the canonical hash encoding (`cairn-record-v1`) that
//! `cairn_node::record::Record::content_hash` must agree with, the
//! receiver-side checks that a record matches its hash and that a tombstone
//! matches its id, and the rule for which records a tombstone covers. These
//! are wire types only: the node converts its storage rows to and from them
//! by hand. Never reads a clock: creation times are passed in.

use serde::{Deserialize, Serialize};

use crate::ids::NodeId;
use crate::limits::MAX_FILES_PER_RECORD;
use crate::serde_util::{bounded_vec, fixed_bytes};

/// A blake3 content hash.
pub type Hash32 = [u8; 32];

/// The fields of a record that its content hash covers, borrowed.
///
/// Where the record was read from, its project and its parent session are
/// deliberately outside the hash, so the same session indexed on two
/// machines hashes the same.
#[derive(Debug, Clone, Copy)]
pub struct HashInput<'a> {
    /// Agent id, e.g. `claude-code`.
    pub agent: &'a str,
    /// The agent's own session id.
    pub session_id: &'a str,
    /// The role's stable lowercase name (`user`, `assistant`, `tool_call`, ...).
    pub role: &'a str,
    /// Unix milliseconds, if known.
    pub time_ms: Option<i64>,
    /// The (redacted) text.
    pub text: &'a str,
    /// Files the record touched, in order.
    pub files: &'a [String],
}

/// The canonical `cairn-record-v1` content hash.
///
/// Encoding: the ASCII tag `cairn-record-v1`, then for each of agent,
/// session id, role name, time (8 bytes little-endian, or empty when
/// unknown) and text a u64 little-endian byte length followed by the bytes;
/// then the number of files as u64 little-endian and each file as a
/// length-prefixed field. Changing this is a format change.
pub fn record_content_hash(input: &HashInput<'_>) -> Hash32 {
    let mut h = blake3::Hasher::new();
    h.update(b"cairn-record-v1");
    let field = |h: &mut blake3::Hasher, bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&mut h, input.agent.as_bytes());
    field(&mut h, input.session_id.as_bytes());
    field(&mut h, input.role.as_bytes());
    match input.time_ms {
        Some(t) => field(&mut h, &t.to_le_bytes()),
        None => field(&mut h, b""),
    }
    field(&mut h, input.text.as_bytes());
    h.update(&(input.files.len() as u64).to_le_bytes());
    for f in input.files {
        field(&mut h, f.as_bytes());
    }
    *h.finalize().as_bytes()
}

/// One record in its origin's log, as sent in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRecord {
    /// Position in the origin's log (1-based, gap-free).
    pub seq: u64,
    /// The record's content hash; receivers check it with [`WireRecord::verify`].
    #[serde(with = "fixed_bytes")]
    pub hash: Hash32,
    /// Agent id, e.g. `claude-code`.
    pub agent: String,
    /// The agent's own session id.
    pub session_id: String,
    /// For a sub-agent session: the session that spawned it.
    #[serde(default)]
    pub parent_session: Option<String>,
    /// The working directory the agent ran in.
    #[serde(default)]
    pub project: Option<String>,
    /// The role's stable lowercase name. A string, so a role added by a newer
    /// node still relays through an older one.
    pub role: String,
    /// Unix milliseconds UTC, if known.
    #[serde(default)]
    pub time_ms: Option<i64>,
    /// The redacted text.
    pub text: String,
    /// Files touched, at most [`MAX_FILES_PER_RECORD`].
    #[serde(deserialize_with = "bounded_vec::<_, _, MAX_FILES_PER_RECORD>")]
    pub files: Vec<String>,
}

/// A record, tombstone or batch that failed a receiver-side check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record's content does not hash to the hash it carries.
    #[error("verify record {seq}: content hash does not match the hash it carries")]
    HashMismatch {
        /// The record's log position.
        seq: u64,
        /// The hash the record carried.
        claimed: Hash32,
        /// The hash of its content.
        actual: Hash32,
    },
    /// A tombstone whose id does not match its content.
    #[error("verify tombstone {seq}: id does not match its content")]
    TombstoneIdMismatch {
        /// The tombstone's log position.
        seq: u64,
    },
}

impl WireRecord {
    /// The fields the content hash covers.
    pub fn hash_input(&self) -> HashInput<'_> {
        HashInput {
            agent: &self.agent,
            session_id: &self.session_id,
            role: &self.role,
            time_ms: self.time_ms,
            text: &self.text,
            files: &self.files,
        }
    }

    /// Recomputes the content hash from the fields (ignores `self.hash`).
    pub fn content_hash(&self) -> Hash32 {
        record_content_hash(&self.hash_input())
    }

    /// Rejects a record whose content does not match the hash it carries.
    pub fn verify(&self) -> Result<(), RecordError> {
        let actual = self.content_hash();
        // blake3::Hash compares in constant time.
        if blake3::Hash::from(actual) == blake3::Hash::from(self.hash) {
            Ok(())
        } else {
            Err(RecordError::HashMismatch {
                seq: self.seq,
                claimed: self.hash,
                actual,
            })
        }
    }
}

/// What a tombstone forgets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgetTarget {
    /// Every record of one agent session.
    Session {
        /// Agent id.
        agent: String,
        /// The agent's session id.
        session_id: String,
    },
    /// Every record whose project is exactly this path.
    Project {
        /// The project path as recorded.
        project: String,
    },
    /// One record, by content hash (a query forget becomes one of these per match).
    Record {
        /// The record's content hash.
        #[serde(with = "fixed_bytes")]
        hash: Hash32,
    },
}

impl ForgetTarget {
    /// Whether this target covers the record: such a record must be purged,
    /// and refused if offered again.
    pub fn covers(&self, r: &WireRecord) -> bool {
        match self {
            ForgetTarget::Session { agent, session_id } => {
                r.agent == *agent && r.session_id == *session_id
            }
            ForgetTarget::Project { project } => r.project.as_deref() == Some(project.as_str()),
            ForgetTarget::Record { hash } => r.hash == *hash,
        }
    }
}

/// A forget, as an entry in its issuer's log. It names what to forget,
/// never the forgotten content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Position in the issuer's log (the issuer is the batch's origin).
    pub seq: u64,
    /// `blake3` of the tombstone's canonical content; see [`Tombstone::compute_id`].
    #[serde(with = "fixed_bytes")]
    pub id: Hash32,
    /// The node that issued the forget.
    pub origin: NodeId,
    /// When it was issued, Unix milliseconds (passed in by the caller).
    pub created_ms: i64,
    /// What it forgets.
    pub target: ForgetTarget,
}

impl Tombstone {
    /// A tombstone with its id computed.
    pub fn new(seq: u64, origin: NodeId, created_ms: i64, target: ForgetTarget) -> Tombstone {
        let id = Tombstone::compute_id(&origin, created_ms, &target);
        Tombstone {
            seq,
            id,
            origin,
            created_ms,
            target,
        }
    }

    /// The canonical id: blake3 over `cairn-tombstone-v1`, the origin's 20
    /// bytes, `created_ms` (i64 little-endian) and the target (a kind byte,
    /// then length-prefixed fields). Independent of `seq`, so the same forget
    /// has the same id wherever it is logged.
    pub fn compute_id(origin: &NodeId, created_ms: i64, target: &ForgetTarget) -> Hash32 {
        let mut h = blake3::Hasher::new();
        h.update(b"cairn-tombstone-v1");
        h.update(origin.as_bytes());
        h.update(&created_ms.to_le_bytes());
        let field = |h: &mut blake3::Hasher, bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        match target {
            ForgetTarget::Session { agent, session_id } => {
                h.update(&[1]);
                field(&mut h, agent.as_bytes());
                field(&mut h, session_id.as_bytes());
            }
            ForgetTarget::Project { project } => {
                h.update(&[2]);
                field(&mut h, project.as_bytes());
            }
            ForgetTarget::Record { hash } => {
                h.update(&[3]);
                field(&mut h, hash);
            }
        }
        *h.finalize().as_bytes()
    }

    /// Rejects a tombstone whose id does not match its content.
    pub fn verify(&self) -> Result<(), RecordError> {
        let actual = Tombstone::compute_id(&self.origin, self.created_ms, &self.target);
        if blake3::Hash::from(actual) == blake3::Hash::from(self.id) {
            Ok(())
        } else {
            Err(RecordError::TombstoneIdMismatch { seq: self.seq })
        }
    }
}

/// Why a log slot travels as a stub instead of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StubKind {
    /// The record was forgotten; the slot stays so the log stays gap-free.
    Forgotten,
    /// The record is outside what the sender shares with this peer (scope).
    Withheld,
}

/// A log slot sent without its content: keeps the log contiguous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogStub {
    /// Position in the origin's log.
    pub seq: u64,
    /// Content hash of the record that was there.
    #[serde(with = "fixed_bytes")]
    pub hash: Hash32,
    /// Why the content is absent.
    pub kind: StubKind,
}
