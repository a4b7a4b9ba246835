//! The record content hash: fixed vectors that `cairn_node::record::Record::content_hash`
//! must produce too (checked against the node's implementation when this
//! was written; the node's test should assert the same two hex strings),
//! and record/tombstone verification.

use cairn_protocol::{
    ForgetTarget, HashInput, NodeId, RecordError, Tombstone, record_content_hash,
};

use crate::samples::record;

fn hex(h: &[u8; 32]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Shared vector 1: every field set, non-ASCII text, two files.
pub const VECTOR_FULL: &str = "659d1ef113c15dd6fbb564124573a2e5e6f3cfa8b05fe7892a9d698ed4b3ade5";
/// Shared vector 2: empty strings, no time, no files.
pub const VECTOR_EMPTY: &str = "e22c23ae430ded26bc4b8af144c7625d1bae888b0d15cf18e7ecaee7e6ee5239";

#[test]
fn hash_agrees_with_the_node_vectors() {
    let files = vec!["src/lib.rs".to_owned(), "Cargo.toml".to_owned()];
    let full = HashInput {
        agent: "claude-code",
        session_id: "s-1",
        role: "tool_call",
        time_ms: Some(1_767_225_600_123),
        text: "Edit src/lib.rs\nпривет 你好",
        files: &files,
    };
    assert_eq!(hex(&record_content_hash(&full)), VECTOR_FULL);
    let empty = HashInput {
        agent: "codex",
        session_id: "",
        role: "user",
        time_ms: None,
        text: "",
        files: &[],
    };
    assert_eq!(hex(&record_content_hash(&empty)), VECTOR_EMPTY);
}

#[test]
fn hash_covers_content_but_not_location_project_or_parent() {
    let a = record(1, "pin hyper to 0.14");
    let mut b = a.clone();
    b.seq = 99;
    b.project = Some("/elsewhere".into());
    b.parent_session = Some("p".into());
    assert_eq!(a.content_hash(), b.content_hash());
    for change in [
        |r: &mut cairn_protocol::WireRecord| r.text.push('!'),
        |r: &mut cairn_protocol::WireRecord| r.agent.push('x'),
        |r: &mut cairn_protocol::WireRecord| r.session_id.push('x'),
        |r: &mut cairn_protocol::WireRecord| r.role = "assistant".into(),
        |r: &mut cairn_protocol::WireRecord| r.time_ms = None,
        |r: &mut cairn_protocol::WireRecord| r.files.push(String::new()),
    ] {
        let mut c = a.clone();
        change(&mut c);
        assert_ne!(a.content_hash(), c.content_hash());
    }
    // Field boundaries matter.
    let mut c = record(1, "y");
    c.session_id = "s-1x".into();
    let d = record(1, "xy");
    assert_ne!(c.content_hash(), d.content_hash());
}

#[test]
fn verify_rejects_a_record_whose_content_changed() {
    let r = record(5, "the real text");
    r.verify().unwrap();
    let mut forged = r.clone();
    forged.text = "injected text".into();
    assert!(matches!(
        forged.verify(),
        Err(RecordError::HashMismatch { seq: 5, claimed, actual })
            if claimed == r.hash && actual == forged.content_hash()
    ));
}

#[test]
fn tombstone_ids_verify_and_detect_tampering() {
    let t = Tombstone::new(
        3,
        NodeId([1; 20]),
        1_000,
        ForgetTarget::Project {
            project: "/home/dev/acme".into(),
        },
    );
    t.verify().unwrap();
    let mut moved = t.clone();
    moved.seq = 4; // the id does not depend on the log slot
    moved.verify().unwrap();
    for tamper in [
        |t: &mut Tombstone| t.created_ms += 1,
        |t: &mut Tombstone| t.origin = NodeId([2; 20]),
        |t: &mut Tombstone| {
            t.target = ForgetTarget::Project {
                project: "/home/dev/other".into(),
            }
        },
    ] {
        let mut bad = t.clone();
        tamper(&mut bad);
        assert!(matches!(
            bad.verify(),
            Err(RecordError::TombstoneIdMismatch { seq: 3 })
        ));
    }
    // Different target kinds with the same bytes do not collide.
    let s = ForgetTarget::Project {
        project: "x".into(),
    };
    let r = ForgetTarget::Session {
        agent: "x".into(),
        session_id: String::new(),
    };
    assert_ne!(
        Tombstone::compute_id(&NodeId([1; 20]), 0, &s),
        Tombstone::compute_id(&NodeId([1; 20]), 0, &r)
    );
}

#[test]
fn forget_targets_cover_the_right_records() {
    let r = record(1, "text");
    let session = ForgetTarget::Session {
        agent: "claude-code".into(),
        session_id: "s-1".into(),
    };
    let other_session = ForgetTarget::Session {
        agent: "codex".into(),
        session_id: "s-1".into(),
    };
    let project = ForgetTarget::Project {
        project: "/home/dev/acme".into(),
    };
    let prefix_only = ForgetTarget::Project {
        project: "/home/dev".into(),
    };
    let by_hash = ForgetTarget::Record { hash: r.hash };
    assert!(session.covers(&r));
    assert!(!other_session.covers(&r));
    assert!(project.covers(&r));
    assert!(!prefix_only.covers(&r));
    assert!(by_hash.covers(&r));
    assert!(!ForgetTarget::Record { hash: [0; 32] }.covers(&r));
    let mut no_project = r.clone();
    no_project.project = None;
    assert!(!project.covers(&no_project));
}
