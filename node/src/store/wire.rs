//! Hand-written conversions between the store's row types and the wire
//! types of `cairn-protocol`. Lives in the store (which reads and writes
//! origin logs in wire form) so `store` never imports `sync`.
//!
//! Owns the two crossings of the trust boundary for record content: on the
//! way out a stored record is redacted again with the current rules (so
//! what leaves a machine is redacted whatever the settings were when it was
//! indexed; only its text is left as stored when those very rules made
//! every stored text, see `store::redacted_with`), and on the way in a received record is redacted again locally
//! (defence in depth). Either way, when redaction changes a hashed field the
//! content hash is recomputed, so the record stays self-verifying. No wire
//! trait is derived on a store type and no store row is sent as is. Never
//! touches the database or the network.

use cairn_protocol::{ForgetTarget, Hash32, LogStub, NodeId, StubKind, Tombstone, WireRecord};

use super::{LogKind, StoredRecord, TombstoneRow};
use crate::redact::Redactor;

/// `ForgetTarget` kinds as stored in `tombstones.target`.
const TARGET_SESSION: i64 = 1;
const TARGET_PROJECT: i64 = 2;
const TARGET_RECORD: i64 = 3;

/// The text form of a node id, as stored in `origin` columns.
pub fn node_text(id: &NodeId) -> String {
    id.to_string()
}

/// The stub kind a log slot of this kind travels as (`None`: not a stub).
pub fn stub_kind(kind: LogKind) -> Option<StubKind> {
    match kind {
        LogKind::Withheld => Some(StubKind::Withheld),
        LogKind::Forgotten => Some(StubKind::Forgotten),
        LogKind::Record | LogKind::Tombstone => None,
    }
}

/// The log slot kind a received stub is stored as.
pub fn stub_log_kind(kind: StubKind) -> LogKind {
    match kind {
        StubKind::Withheld => LogKind::Withheld,
        StubKind::Forgotten => LogKind::Forgotten,
    }
}

/// A stub for slot `seq` holding `hash`.
pub fn stub(seq: u64, hash: Hash32, kind: StubKind) -> LogStub {
    LogStub { seq, hash, kind }
}

/// A stored record as it leaves this node for slot `seq`: every field
/// redacted again with `redactor` (`redact::fields::redact_wire`), but
/// the text when `text_redacted` (those very rules made it, see
/// `store::redacted_with`), and the hash recomputed from what is sent
/// (equal to the stored hash when nothing changed), so the receiver's
/// `WireRecord::verify` holds whatever the rules did.
pub fn record_to_wire(
    seq: u64,
    row: StoredRecord,
    redactor: &Redactor,
    text_redacted: bool,
) -> WireRecord {
    let mut w = WireRecord {
        seq,
        hash: row.hash,
        agent: row.agent,
        session_id: row.session_id,
        parent_session: row.parent_session,
        project: row.project,
        role: row.role,
        time_ms: row.time_ms,
        text: row.text,
        files: row.files,
    };
    w.hash = w.content_hash();
    if text_redacted {
        crate::redact::fields::redact_wire_but_text(&mut w, redactor);
    } else {
        crate::redact::fields::redact_wire(&mut w, redactor);
    }
    w
}

/// A received (already verified) record redacted again with this node's
/// rules before it is stored, every field (ids included). Returns the
/// record to store, its hash (recomputed when redaction changed a field)
/// and whether anything was redacted.
pub fn record_from_wire(r: &WireRecord, redactor: &Redactor) -> (StoredRecord, bool) {
    let mut w = r.clone();
    let redacted = crate::redact::fields::redact_wire(&mut w, redactor);
    (
        StoredRecord {
            hash: w.hash,
            agent: w.agent,
            session_id: w.session_id,
            parent_session: w.parent_session,
            project: w.project,
            role: w.role,
            time_ms: w.time_ms,
            text: w.text,
            files: w.files,
        },
        redacted,
    )
}

/// A stored tombstone as it travels in its issuer's log at slot `seq`;
/// `None` when the row's origin or target columns are unusable (the slot is
/// then sent as a forgotten stub).
pub fn tombstone_to_wire(seq: u64, row: &TombstoneRow) -> Option<Tombstone> {
    let origin = row.origin.parse().ok()?;
    let target = target_from_row(row)?;
    let t = Tombstone::new(seq, origin, row.created_ms, target);
    // A row whose content no longer matches its id would fail the peer's
    // check and get this node dropped; send a stub instead.
    (t.id == row.id).then_some(t)
}

/// A tombstone as stored: origin text, log position and target columns.
pub fn tombstone_to_row(t: &Tombstone, epoch: u64) -> TombstoneRow {
    let mut row = TombstoneRow {
        id: t.id,
        origin: node_text(&t.origin),
        epoch,
        seq: t.seq,
        created_ms: t.created_ms,
        target: 0,
        agent: None,
        session_id: None,
        project: None,
        hash: None,
    };
    match &t.target {
        ForgetTarget::Session { agent, session_id } => {
            row.target = TARGET_SESSION;
            row.agent = Some(agent.clone());
            row.session_id = Some(session_id.clone());
        }
        ForgetTarget::Project { project } => {
            row.target = TARGET_PROJECT;
            row.project = Some(project.clone());
        }
        ForgetTarget::Record { hash } => {
            row.target = TARGET_RECORD;
            row.hash = Some(*hash);
        }
    }
    row
}

/// The target a stored tombstone row names.
pub fn target_from_row(row: &TombstoneRow) -> Option<ForgetTarget> {
    match row.target {
        TARGET_SESSION => Some(ForgetTarget::Session {
            agent: row.agent.clone()?,
            session_id: row.session_id.clone()?,
        }),
        TARGET_PROJECT => Some(ForgetTarget::Project {
            project: row.project.clone()?,
        }),
        TARGET_RECORD => Some(ForgetTarget::Record { hash: row.hash? }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(text: &str) -> StoredRecord {
        StoredRecord {
            hash: [0; 32],
            agent: "claude-code".into(),
            session_id: "s1".into(),
            parent_session: None,
            project: Some("/work/p".into()),
            role: "user".into(),
            time_ms: Some(1_700_000_000_000),
            text: text.into(),
            files: vec!["src/main.rs".into()],
        }
    }

    #[test]
    fn outgoing_record_is_redacted_and_self_verifying() {
        let r = Redactor::new();
        let secret = "AKIAUJZDE8GXD6NCF10E";
        let w = record_to_wire(7, stored(&format!("the key is {secret} ok")), &r, false);
        assert_eq!(w.seq, 7);
        assert!(!w.text.contains(secret), "{}", w.text);
        assert!(w.text.contains("[REDACTED"), "{}", w.text);
        w.verify().expect("hash recomputed over the redacted text");
        let clean = record_to_wire(1, stored("nothing secret here"), &r, false);
        assert_eq!(clean.text, "nothing secret here");
        clean.verify().expect("verifies");
    }

    #[test]
    fn incoming_record_is_redacted_again_under_a_new_hash() {
        let r = Redactor::new();
        let mut w = record_to_wire(1, stored("fine"), &r, false);
        w.text = "leaked AKIAUJZDE8GXD6NCF10E here".into();
        w.hash = w.content_hash();
        let (row, redacted) = record_from_wire(&w, &r);
        assert!(redacted);
        assert!(!row.text.contains("AKIAUJZDE8GXD6NCF10E"));
        assert_ne!(row.hash, w.hash);
        let clean = record_to_wire(1, stored("fine"), &r, false);
        let (row, redacted) = record_from_wire(&clean, &r);
        assert!(!redacted);
        assert_eq!(row.hash, clean.hash);
    }

    #[test]
    fn tombstone_rows_round_trip() {
        let origin = NodeId([7; 20]);
        for target in [
            ForgetTarget::Session {
                agent: "codex".into(),
                session_id: "abc".into(),
            },
            ForgetTarget::Project {
                project: "/home/u/p".into(),
            },
            ForgetTarget::Record { hash: [9; 32] },
        ] {
            let t = Tombstone::new(4, origin, 1234, target);
            let row = tombstone_to_row(&t, 99);
            assert_eq!(row.epoch, 99);
            assert_eq!(tombstone_to_wire(4, &row), Some(t));
        }
        let mut bad = tombstone_to_row(
            &Tombstone::new(1, origin, 1, ForgetTarget::Record { hash: [1; 32] }),
            1,
        );
        bad.created_ms = 2;
        assert_eq!(tombstone_to_wire(1, &bad), None);
        bad.target = 42;
        assert_eq!(target_from_row(&bad), None);
    }

    #[test]
    fn node_ids_round_trip_as_text() {
        let id = NodeId([3; 20]);
        assert_eq!(node_text(&id).parse::<NodeId>(), Ok(id));
        assert!("testnode".parse::<NodeId>().is_err());
    }
}
