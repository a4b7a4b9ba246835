//! Replication through the store API, exactly as a sync session drives it:
//! exchange watermarks, plan pulls with `cairn_protocol::plan_pulls`, serve
//! each pull from the sender's store, apply the batch on the receiver,
//! repeat until nothing is left to pull. No network: this checks the
//! database side (logs, watermarks, dedupe, forget, redaction, scope).

use std::path::Path;

use cairn_protocol::{
    Batch, ForgetTarget, LogEntry, NodeId, PlanLimits, Pull, WireRecord, plan_pulls,
};
use tempfile::TempDir;

use super::{ApplyError, ApplyRequest, Blame, Store, TrustError};
use crate::record::{Record, Role};
use crate::redact::Redactor;

const SECRET: &str = "AKIAUJZDE8GXD6NCF10E";

struct TestNode {
    _dir: TempDir,
    store: Store,
    id: NodeId,
    signer: std::sync::Arc<crate::seal::Signer>,
}

impl TestNode {
    fn new(byte: u8) -> TestNode {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open store");
        // A real identity key: batches of the own log leave sealed with it.
        let signer =
            crate::seal::Signer::new(&rcgen::KeyPair::generate().expect("key")).expect("signer");
        let id = signer.id();
        let signer = std::sync::Arc::new(signer);
        store.set_signer(signer.clone());
        store
            .ensure_log(&id.to_string(), 1_000 + i64::from(byte))
            .expect("own log");
        TestNode {
            _dir: dir,
            store,
            id,
            signer,
        }
    }

    fn origin(&self) -> String {
        self.id.to_string()
    }

    fn index(&mut self, records: &[Record]) -> u64 {
        let origin = self.origin();
        let mut ing = self.store.ingest(&origin).expect("ingest");
        for r in records {
            ing.insert(r, None).expect("insert");
        }
        let n = ing.inserted();
        ing.commit().expect("commit");
        n
    }

    fn count(&self, sql: &str) -> i64 {
        self.store
            .conn()
            .query_row(sql, [], |r| r.get(0))
            .expect("count query")
    }

    fn records(&self) -> i64 {
        self.count("SELECT count(*) FROM records")
    }

    /// Bytes of the database file and its WAL.
    fn file_bytes(&self) -> Vec<u8> {
        let path = self.store.path().to_path_buf();
        let mut bytes = std::fs::read(&path).expect("read db");
        let mut wal = path.into_os_string();
        wal.push("-wal");
        if let Ok(w) = std::fs::read(Path::new(&wal)) {
            bytes.extend(w);
        }
        bytes
    }
}

fn rec(session: &str, project: &str, i: usize, text: &str) -> Record {
    let mut r = Record::new("claude-code", session, Role::User, text);
    r.project = Some(project.to_owned());
    r.time_ms = Some(1_700_000_000_000 + i as i64);
    r.offset = i as u64;
    r
}

fn session(session: &str, project: &str, n: usize, word: &str) -> Vec<Record> {
    (0..n)
        .map(|i| {
            rec(
                session,
                project,
                i,
                &format!("{word} record {i} of {session}"),
            )
        })
        .collect()
}

#[derive(Debug, Default)]
struct Moved {
    batches: u64,
    records: u64,
    stored: u64,
    refused: u64,
    max_entries: usize,
}

/// One sync round `to` ← `from`, until nothing is left to pull (bounded).
fn pull_all(
    from: &TestNode,
    to: &mut TestNode,
    scope: Option<&[String]>,
    limits: PlanLimits,
) -> Moved {
    let redactor = Redactor::new();
    let mut moved = Moved::default();
    for _ in 0..10_000 {
        let pulls = plan_pulls(
            &to.store.watermarks().expect("local watermarks"),
            &from.store.watermarks().expect("remote watermarks"),
            &limits,
        );
        if pulls.is_empty() {
            return moved;
        }
        for pull in pulls {
            let batch = from
                .store
                .serve_pull(&pull, scope, &redactor)
                .expect("serve pull");
            let entries = batch.records.len() + batch.tombstones.len() + batch.stubs.len();
            moved.max_entries = moved.max_entries.max(entries);
            moved.records += batch.records.len() as u64;
            moved.batches += 1;
            let report = to
                .store
                .apply_batch(ApplyRequest::new(&pull, &batch, &redactor))
                .expect("apply batch");
            moved.stored += report.stored;
            moved.refused += report.refused;
        }
    }
    panic!("sync did not converge in 10,000 rounds");
}

fn all() -> PlanLimits {
    PlanLimits::default()
}

#[test]
fn line_topology_relays_with_origin_and_no_echo() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let mut c = TestNode::new(3);
    a.index(&session("s-a1", "/work/p", 20, "alpha"));
    a.index(&session("s-a2", "/work/q", 30, "beta"));
    b.index(&session("s-b1", "/work/p", 5, "gamma"));

    let ab = pull_all(&a, &mut b, None, all());
    assert_eq!(ab.stored, 50);
    let bc = pull_all(&b, &mut c, None, all());
    assert_eq!(bc.stored, 55, "C gets A's records through B, and B's");
    assert_eq!(c.records(), 55);
    let from_a = c.count(&format!(
        "SELECT count(*) FROM records r JOIN origins o ON o.id = r.origin WHERE o.node = '{}'",
        a.origin()
    ));
    assert_eq!(from_a, 50, "relayed records keep their origin");
    assert_eq!(c.store.watermark(&a.id, 1001).expect("wm"), 50);

    // Nothing echoes back: A pulls from C and B and gets only B's own records.
    let ca = pull_all(&c, &mut a, None, all());
    assert_eq!(ca.records, 5, "only B's log is new to A");
    let ba = pull_all(&b, &mut a, None, all());
    assert_eq!(ba.records, 0);
    assert_eq!(a.records(), 55);
    // A second round moves nothing anywhere.
    assert_eq!(pull_all(&a, &mut c, None, all()).batches, 0);
    assert_eq!(pull_all(&c, &mut b, None, all()).batches, 0);
    // Duplicated records never exist: one row per hash, as many slots as logs name it.
    assert_eq!(c.count("SELECT count(DISTINCT hash) FROM records"), 55);
    // Received records have their sessions' runs and columns entries, as
    // indexed ones do.
    for node in [&a, &b, &c] {
        let conn = node.store.conn();
        super::runs::tests::assert_true_to(conn, "received");
        assert_eq!(node.store.write_columns().expect("columns"), 55);
        super::columns_file::tests::assert_true_to(&node.store, "received");
    }
}

#[test]
fn triangle_stores_each_record_once() {
    let mut n = [TestNode::new(1), TestNode::new(2), TestNode::new(3)];
    for (i, node) in n.iter_mut().enumerate() {
        node.index(&session(&format!("s{i}"), "/p", 10, "tri"));
    }
    for _ in 0..2 {
        for (x, y) in [(0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2)] {
            let (from, to) = pair(&mut n, x, y);
            pull_all(from, to, None, all());
        }
    }
    for node in &n {
        assert_eq!(node.records(), 30);
        assert_eq!(node.count("SELECT count(*) FROM logs"), 30);
        assert_eq!(node.store.watermarks().expect("wm").len(), 3);
    }
}

fn pair(n: &mut [TestNode; 3], from: usize, to: usize) -> (&TestNode, &mut TestNode) {
    assert_ne!(from, to);
    let (lo, hi) = n.split_at_mut(from.max(to));
    if from < to {
        (&lo[from], &mut hi[0])
    } else {
        (&hi[0], &mut lo[to])
    }
}

#[test]
fn same_session_indexed_on_two_nodes_is_stored_once_on_a_third() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let mut c = TestNode::new(3);
    let s = session("shared", "/p", 12, "twice");
    a.index(&s);
    b.index(&s);
    pull_all(&a, &mut c, None, all());
    let second = pull_all(&b, &mut c, None, all());
    assert_eq!(second.records, 12);
    assert_eq!(second.stored, 0, "already stored through A's log");
    assert_eq!(c.records(), 12);
    // Both provenances: each record is named by A's and B's log.
    assert_eq!(c.count("SELECT count(*) FROM logs WHERE kind = 0"), 24);
    assert_eq!(c.count("SELECT count(*) FROM sessions"), 1);
    assert_eq!(c.count("SELECT records FROM sessions"), 12);
}

#[test]
fn catch_up_of_10k_records_in_bounded_batches() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let recs: Vec<Record> = (0..10_000)
        .map(|i| {
            rec(
                &format!("s{}", i / 100),
                "/big",
                i,
                &format!("record number {i} {}", "x".repeat(200)),
            )
        })
        .collect();
    assert_eq!(a.index(&recs), 10_000);
    let limits = PlanLimits {
        max_pulls: 2,
        max_records: 700,
        max_bytes: 64 * 1024,
    };
    let moved = pull_all(&a, &mut b, None, limits);
    assert_eq!(moved.stored, 10_000);
    assert!(moved.max_entries <= 700, "{}", moved.max_entries);
    assert!(moved.batches >= 10_000 / 700, "{} batches", moved.batches);
    assert_eq!(b.records(), 10_000);
    assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 10_000);
    // Byte budget: a full batch's entries stay within max_bytes.
    let (_, batch) = served_from_start(&a, 1000, 64 * 1024);
    let bytes: usize = batch
        .records
        .iter()
        .map(|r| LogEntry::Record(r.clone()).encoded_len())
        .sum();
    assert!(bytes <= 64 * 1024 && batch.more, "{bytes} bytes");
}

fn first_batch(a: &TestNode, to: &TestNode) -> (Pull, Batch) {
    let pull = plan_pulls(
        &to.store.watermarks().expect("wm"),
        &a.store.watermarks().expect("wm"),
        &all(),
    )
    .into_iter()
    .find(|p| p.origin == a.id)
    .expect("a pull for A's log");
    let batch = a
        .store
        .serve_pull(&pull, None, &Redactor::new())
        .expect("serve");
    (pull, batch)
}

/// A's log served from its start: at most `max_records` entries and
/// `max_bytes` bytes.
fn served_from_start(a: &TestNode, max_records: u32, max_bytes: u32) -> (Pull, Batch) {
    let pull = Pull {
        origin: a.id,
        epoch: 1001,
        after_seq: 0,
        max_records,
        max_bytes,
    };
    let batch = a
        .store
        .serve_pull(&pull, None, &Redactor::new())
        .expect("serve");
    (pull, batch)
}

#[test]
fn a_bad_batch_is_rejected_whole_and_blames_the_peer() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    a.index(&session("s", "/p", 10, "tamper"));
    let (pull, good) = first_batch(&a, &b);
    let r = Redactor::new();

    let mut tampered = good.clone();
    tampered.records[4].text.push_str(" injected");
    let gap = {
        let mut g = good.clone();
        g.records.remove(5);
        g
    };
    let wrong_origin = Batch {
        origin: NodeId([9; 20]),
        ..good.clone()
    };
    let preparer = b.store.preparer(&r);
    for bad in [tampered, gap, wrong_origin] {
        // Checked here, or ahead by a preparer: of the good batch (its
        // check stands for no other), or of this very one.
        let aheads = [
            None,
            Some(preparer.prepare(good.clone())),
            Some(preparer.prepare(bad.clone())),
        ];
        for ahead in aheads {
            let err = b
                .store
                .apply_batch(ApplyRequest::new(&pull, &bad, &r).prepared(ahead))
                .expect_err("must be rejected");
            assert!(matches!(err, ApplyError::Peer(_)), "{err:?}");
            assert_eq!(err.blame(), Blame::Peer);
            assert_eq!(b.records(), 0, "nothing of a rejected batch is stored");
            assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 0);
        }
    }
    // A pull that went stale is this node's problem, not the peer's.
    let ahead = Pull {
        after_seq: 3,
        ..pull
    };
    let batch = a.store.serve_pull(&ahead, None, &r).expect("serve");
    let err = b
        .store
        .apply_batch(ApplyRequest::new(&ahead, &batch, &r))
        .expect_err("stale");
    assert!(
        matches!(
            err,
            ApplyError::Stale {
                watermark: 0,
                after_seq: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.blame(), Blame::Local);
    // Entries checked ahead leave the shape to check: a stale pull is
    // still found out.
    let err = b
        .store
        .apply_batch(
            ApplyRequest::new(&ahead, &batch, &r).prepared(Some(preparer.prepare(batch.clone()))),
        )
        .expect_err("stale");
    assert!(matches!(err, ApplyError::Stale { .. }), "{err:?}");
    b.store
        .apply_batch(
            ApplyRequest::new(&pull, &good, &r).prepared(Some(preparer.prepare(good.clone()))),
        )
        .expect("the good batch applies");
    assert_eq!(b.records(), 10);
}

/// A sender sends the text of its records as stored when the very rules
/// it serves with made every stored text (redacting it again would change
/// nothing); with other rules, or once text from other or unknown rules
/// is stored beside it, the text is redacted again on the way out.
#[test]
fn text_its_own_rules_made_goes_out_as_stored_until_other_rules_store_beside_it() {
    let mut a = TestNode::new(1);
    let b = TestNode::new(2);
    let r = Redactor::new();
    a.store.set_redaction_rules(&r);
    let mut recs = session("s", "/p", 3, "ticket ACME-123456 filed");
    for x in &mut recs {
        crate::redact::fields::redact_record(x, &r, &mut Default::default());
    }
    a.index(&recs);
    let (pull, batch) = first_batch(&a, &b);
    assert_eq!(batch.records.len(), 3);
    for w in &batch.records {
        // What went out is what redacting every field again gives.
        let mut again = w.clone();
        assert!(!crate::redact::fields::redact_wire(&mut again, &r));
        assert!(w.text.contains("ACME-123456"), "{}", w.text);
    }
    // A user's pattern is other rules: the text is redacted again.
    let custom = Redactor::with_extra_patterns(&["ACME-[0-9]{6}".to_owned()]).expect("pattern");
    assert_ne!(custom.rules_id(), r.rules_id());
    let other = a.store.serve_pull(&pull, None, &custom).expect("serve");
    assert_eq!(other.records.len(), 3);
    assert!(
        other
            .records
            .iter()
            .all(|w| !w.text.contains("ACME-123456"))
    );
    // The mark is trusted: a text stored past the rules (which no writer
    // naming them does) goes out as stored...
    a.index(&[rec("s", "/p", 9, &format!("planted {SECRET}"))]);
    let all = Pull {
        max_records: 100,
        ..pull
    };
    let served = |a: &TestNode| {
        a.store
            .serve_pull(&all, None, &r)
            .expect("serve")
            .records
            .iter()
            .any(|w| w.text.contains(SECRET))
    };
    assert!(served(&a));
    // ...until a writer that does not know its rules stores text beside
    // it: from then on every text is redacted again.
    let mut other_writer = Store::open(a.store.path()).expect("open");
    let mut ing = other_writer.ingest(&a.origin()).expect("ingest");
    ing.insert(&rec("t", "/p", 1, "from elsewhere"), None)
        .expect("insert");
    ing.commit().expect("commit");
    assert!(!served(&a));
}

#[test]
fn crash_before_commit_then_repull_stores_each_record_once() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    a.index(&session("s", "/p", 40, "crash"));
    let (pull, batch) = first_batch(&a, &b);
    let r = Redactor::new();
    let report = b
        .store
        .apply_batch_then_crash(&pull, &batch, &r)
        .expect("apply before the crash");
    assert_eq!(report.stored, 40);
    assert_eq!(b.records(), 0, "rolled back");
    assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 0);
    // The same range is simply asked for again.
    let moved = pull_all(&a, &mut b, None, all());
    assert_eq!(moved.stored, 40);
    // Applying the same batch again changes nothing.
    let again = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &batch, &r))
        .expect("replay");
    assert_eq!((again.stored, again.already_held), (0, 40));
    assert_eq!(b.records(), 40);
    assert_eq!(b.count("SELECT sum(records) FROM sessions"), 40);
    assert_eq!(b.count("SELECT count(*) FROM logs"), 40);
}

#[test]
fn forget_propagates_refuses_resurrection_and_leaves_no_bytes() {
    let word = "zebracornium";
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let mut c = TestNode::new(3);
    let doomed = session("doomed", "/p", 8, word);
    a.index(&doomed);
    a.index(&session("kept", "/p", 5, "harmless"));
    // B also has the transcript and indexed it itself (its own log names it).
    b.index(&doomed);
    pull_all(&a, &mut b, None, all());
    pull_all(&b, &mut c, None, all());
    assert_eq!(c.records(), 13);
    // Every node's columns files hold the doomed records before the forget.
    for node in [&a, &b, &c] {
        assert_eq!(node.store.write_columns().expect("columns"), 13);
        super::columns_file::tests::assert_true_to(&node.store, "before the forget");
    }

    let target = ForgetTarget::Session {
        agent: "claude-code".into(),
        session_id: "doomed".into(),
    };
    let report = a.store.forget(&[target], 2_000).expect("forget");
    assert_eq!(
        (report.tombstones, report.records, report.sessions),
        (1, 8, 1)
    );
    assert!(report.wal_truncated);
    assert_eq!(a.records(), 5);
    // Local re-indexing of the transcript still on disk is refused.
    assert_eq!(a.index(&doomed), 0);
    assert_eq!(a.records(), 5);

    // B has not heard of the forget yet: its own log still offers the session.
    let stale = pull_all(&b, &mut a, None, all());
    assert_eq!(stale.records, 8, "B's stale copies are offered");
    assert_eq!((stale.stored, stale.refused), (0, 8), "and refused");
    assert_eq!(a.records(), 5);

    // The tombstone reaches B directly and C through B.
    pull_all(&a, &mut b, None, all());
    pull_all(&b, &mut c, None, all());
    for (name, node) in [("A", &a), ("B", &b), ("C", &c)] {
        assert_eq!(node.records(), 5, "{name}");
        assert_eq!(node.count("SELECT count(*) FROM tombstones"), 1, "{name}");
        assert_eq!(
            node.count("SELECT count(*) FROM sessions WHERE session_id = 'doomed'"),
            0,
            "{name}"
        );
        let bytes = node.file_bytes();
        assert!(
            !bytes.windows(word.len()).any(|w| w == word.as_bytes()),
            "{name}'s database or WAL still holds the forgotten text"
        );
        let conn = node.store.conn();
        super::runs::tests::assert_true_to(conn, &format!("{name} after the forget"));
        super::columns_file::tests::assert_true_to(
            &node.store,
            &format!("{name} after the forget"),
        );
    }
    // A fresh node behind B never sees the session: B's slots are stubs now.
    let mut d = TestNode::new(4);
    let moved = pull_all(&b, &mut d, None, all());
    assert_eq!(d.records(), 5);
    assert_eq!(moved.stored, 5);
    assert_eq!(d.count("SELECT count(*) FROM tombstones"), 1);
}

#[test]
fn a_secret_reaching_apply_is_redacted_before_storage() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    // Stored on A without going through the indexer's redaction (an old
    // database, or weaker rules at the time): the way out redacts it.
    a.index(&[rec("s", "/p", 0, &format!("the key is {SECRET} keep it"))]);
    let (pull, batch) = first_batch(&a, &b);
    assert!(
        !batch.records[0].text.contains(SECRET),
        "redacted on the way out"
    );
    batch.records[0]
        .verify()
        .expect("self-verifying after redaction");

    // A peer that sends it unredacted anyway (its origin signed it so):
    // B redacts before storing.
    let mut raw = batch.clone();
    let w: &mut WireRecord = &mut raw.records[0];
    w.text = format!("the key is {SECRET} keep it");
    w.hash = w.content_hash();
    a.signer.seal_own(&mut raw);
    let report = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &raw, &Redactor::new()))
        .expect("apply");
    assert_eq!((report.stored, report.redacted), (1, 1));
    b.store.truncate_wal().expect("checkpoint");
    let bytes = b.file_bytes();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    // B holds the redacted copy; what A signed was not that, so B relays
    // the slot as a stub of A's hash, never content A did not sign.
    let mut c = TestNode::new(3);
    let moved = pull_all(&b, &mut c, None, all());
    assert_eq!((moved.stored, c.records()), (0, 0));
    assert_eq!(c.count("SELECT count(*) FROM logs WHERE kind = 2"), 1);
}

/// Every planted kind (`fixtures/planted-kinds.json`) sent unredacted by a
/// peer, in records longer than the tool-output cap and in every other
/// field (session id, parent session id, project, files): B stores none
/// of it, neither in the database bytes nor in any decoded text or
/// column.
#[test]
fn every_planted_kind_received_from_a_peer_is_redacted_before_storage() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/planted-kinds.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p).expect("read planted-kinds.json")).expect("json");
    let kinds = v["kinds"].as_array().expect("kinds");
    let padding = "step ok: compiled a module\n".repeat(120);
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let placeholders: Vec<Record> = (0..kinds.len())
        .map(|i| rec("s", "/p", i, &format!("placeholder {i}")))
        .collect();
    a.index(&placeholders);
    let (pull, mut batch) = first_batch(&a, &b);
    assert_eq!(batch.records.len(), kinds.len());
    for (i, (w, k)) in batch.records.iter_mut().zip(kinds).enumerate() {
        let text = k["text"].as_str().expect("text");
        w.text = format!("{padding}{text}\n{padding}");
        w.session_id = format!("s{i}-{text}");
        w.parent_session = Some(format!("p{i} {text}"));
        w.project = Some(format!("/home/dev/{text}/app"));
        w.files = vec![format!("/home/dev/app/{text}.rs")];
        w.hash = w.content_hash();
    }
    a.signer.seal_own(&mut batch);
    let report = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()))
        .expect("apply");
    assert_eq!(report.stored as usize, kinds.len());
    b.store.truncate_wal().expect("checkpoint");
    let bytes = b.file_bytes();
    let mut stmt = b
        .store
        .conn()
        .prepare("SELECT text, flags FROM records")
        .expect("prepare");
    let texts: Vec<String> = stmt
        .query_map([], |r| {
            Ok(super::codec::decode(
                b.store.conn(),
                &r.get::<_, Vec<u8>>(0)?,
                r.get::<_, i64>(1)?,
            ))
        })
        .expect("query")
        .map(|t| t.expect("row"))
        .collect();
    let mut stmt = b
        .store
        .conn()
        .prepare(
            "SELECT s.session_id || ' ' || coalesce(s.parent_session, '') || ' '
                    || coalesce(s.project, '') || ' ' || r.files
             FROM records r JOIN sessions s ON s.id = r.session",
        )
        .expect("prepare");
    let columns: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|t| t.expect("row"))
        .collect();
    assert_eq!(columns.len(), kinds.len());
    // Every record its own session still: the redacted ids stay distinct.
    let sessions: i64 = b
        .store
        .conn()
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .expect("count");
    assert_eq!(sessions as usize, kinds.len());
    let mut leaked = Vec::new();
    for k in kinds {
        for s in k["secrets"].as_array().expect("secrets") {
            let s = s.as_str().expect("secret");
            if bytes.windows(s.len()).any(|w| w == s.as_bytes())
                || texts.iter().any(|t| t.contains(s))
                || columns.iter().any(|t| t.contains(s))
            {
                leaked.push(format!("{}: {s}", k["kind"]));
            }
        }
    }
    assert!(leaked.is_empty(), "received secrets stored: {leaked:#?}");
}

#[test]
fn scope_withholds_out_of_scope_projects_as_stubs() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    a.index(&session("w", "/work/acme", 6, "worky"));
    a.index(&session("p", "/home/me/diary", 4, "private"));
    a.index(&session("w2", "/work/acme/sub", 2, "nested"));
    a.index(&session("x", "/work/acmeco", 3, "lookalike"));
    let scope = vec!["/work/acme/".to_owned()];
    let moved = pull_all(&a, &mut b, Some(&scope), all());
    assert_eq!(moved.stored, 8);
    assert_eq!(b.records(), 8);
    assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 15);
    assert_eq!(b.count("SELECT count(*) FROM logs WHERE kind = 2"), 7);
    let bytes = b.file_bytes();
    for leaked in ["private", "lookalike", "/home/me/diary"] {
        assert!(
            !bytes.windows(leaked.len()).any(|w| w == leaked.as_bytes()),
            "{leaked}"
        );
    }
    // A project forget outside the scope travels as a stub too.
    a.store
        .forget(
            &[ForgetTarget::Project {
                project: "/home/me/diary".into(),
            }],
            5,
        )
        .expect("forget");
    pull_all(&a, &mut b, Some(&scope), all());
    assert_eq!(b.count("SELECT count(*) FROM tombstones"), 0);
    assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 16);
}

#[test]
fn records_from_before_the_log_are_backfilled_once() {
    let dir = tempfile::tempdir().expect("dir");
    let mut store = Store::open(&dir.path().join("c.db")).expect("open");
    let origin = NodeId([5; 20]).to_string();
    {
        let mut ing = store.ingest(&origin).expect("ingest");
        for r in session("old", "/p", 7, "legacy") {
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
    }
    let log = store.ensure_log(&origin, 42).expect("log");
    assert_eq!(log.epoch, 42);
    assert_eq!(store.watermark(&NodeId([5; 20]), 42).expect("wm"), 7);
    assert_eq!(
        store.ensure_log(&origin, 99).expect("again"),
        log,
        "epoch is kept"
    );
    let mut ing = store.ingest(&origin).expect("ingest");
    ing.insert(&rec("new", "/p", 1, "fresh"), None)
        .expect("insert");
    ing.commit().expect("commit");
    assert_eq!(store.watermark(&NodeId([5; 20]), 42).expect("wm"), 8);
}

#[test]
fn a_record_deleted_by_a_rewrite_keeps_its_slot_as_a_stub() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let origin = a.origin();
    {
        let mut ing = a.store.ingest(&origin).expect("ingest");
        let src = ing
            .source("claude-code", "/tmp/x.jsonl", "lines")
            .expect("source");
        for r in session("s", "/p", 3, "rewrite") {
            ing.insert(&r, Some(src.id)).expect("insert");
        }
        let keep = [session("s", "/p", 3, "rewrite")[0].content_hash()]
            .into_iter()
            .collect();
        assert_eq!(ing.retain_source_records(src.id, &keep).expect("retain"), 2);
        ing.commit().expect("commit");
    }
    let moved = pull_all(&a, &mut b, None, all());
    assert_eq!(moved.stored, 1);
    assert_eq!(b.store.watermark(&a.id, 1001).expect("wm"), 3, "no gap");
}

/// Every slot of A's log, as a fresh peer would receive it:
/// (seq, record hash or stub hash, stub kind if a stub).
fn served(a: &TestNode) -> Vec<(u64, [u8; 32], Option<cairn_protocol::StubKind>)> {
    let (_, batch) = served_from_start(a, 1000, 1 << 20);
    let mut out: Vec<_> = batch
        .records
        .iter()
        .map(|r| (r.seq, r.hash, None))
        .collect();
    out.extend(batch.tombstones.iter().map(|t| (t.seq, t.id, None)));
    out.extend(batch.stubs.iter().map(|s| (s.seq, s.hash, Some(s.kind))));
    out.sort_by_key(|e| e.0);
    out
}

#[test]
fn a_record_stored_again_is_served_again_from_its_old_slot() {
    use cairn_protocol::StubKind::{Forgotten, Withheld};
    let mut a = TestNode::new(1);
    let origin = a.origin();
    let recs = session("s", "/p", 3, "again");
    let h: Vec<[u8; 32]> = recs.iter().map(Record::content_hash).collect();
    {
        let mut ing = a.store.ingest(&origin).expect("ingest");
        let src = ing
            .source("claude-code", "/tmp/x.jsonl", "lines")
            .expect("source");
        for r in &recs {
            ing.insert(r, Some(src.id)).expect("insert");
        }
        let keep = [h[0]].into_iter().collect();
        assert_eq!(ing.retain_source_records(src.id, &keep).expect("retain"), 2);
        // Stored again in the same transaction: its old slot names it
        // again, and the own log names it once more.
        assert!(ing.insert(&recs[1], Some(src.id)).expect("again"));
        ing.commit().expect("commit");
    }
    assert_eq!(
        served(&a),
        vec![
            (1, h[0], None),
            (2, h[1], None),
            (3, h[2], Some(Withheld)),
            (4, h[1], None)
        ]
    );
    // In a later transaction the third comes back too: its old slot
    // names it again and the own log appends it (slot 5).
    a.index(&recs[2..]);
    assert_eq!(
        served(&a),
        vec![
            (1, h[0], None),
            (2, h[1], None),
            (3, h[2], None),
            (4, h[1], None),
            (5, h[2], None)
        ]
    );
    // Forgotten: every slot that named a record names its hash as a forgotten stub.
    a.store
        .forget(
            &[ForgetTarget::Session {
                agent: "claude-code".into(),
                session_id: "s".into(),
            }],
            7,
        )
        .expect("forget");
    let after = served(&a);
    assert_eq!(after.len(), 6);
    assert_eq!(
        after[..5],
        [
            (1, h[0], Some(Forgotten)),
            (2, h[1], Some(Forgotten)),
            (3, h[2], Some(Forgotten)),
            (4, h[1], Some(Forgotten)),
            (5, h[2], Some(Forgotten)),
        ]
    );
    assert_eq!(
        a.count("SELECT count(*) FROM logs WHERE rec IS NOT NULL"),
        0
    );
    // Indexed again, the forgotten records stay out (the tombstone covers them).
    assert_eq!(a.index(&recs), 0);
}

fn limits(max_records: u32) -> PlanLimits {
    PlanLimits {
        max_records,
        ..PlanLimits::default()
    }
}

/// Every seal a relay serves verifies, whatever ranges the receiver and
/// the relay hold: a receiver half-way into one of the relay's seals gets
/// the sealed hashes before its batch, a small pull the ones after.
#[test]
fn relayed_seals_cover_any_range_with_the_hashes_outside_it() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let mut c = TestNode::new(3);
    let mut d = TestNode::new(4);
    a.index(&session("s", "/p", 10, "relayed"));
    // B holds A's log in seals of four; C holds its first three from A.
    pull_all(&a, &mut b, None, limits(4));
    let first = plan_pulls(
        &c.store.watermarks().expect("wm"),
        &a.store.watermarks().expect("wm"),
        &limits(3),
    )
    .into_iter()
    .find(|p| p.origin == a.id)
    .expect("a pull");
    let batch = a
        .store
        .serve_pull(&first, None, &Redactor::new())
        .expect("serve");
    c.store
        .apply_batch(ApplyRequest::new(&first, &batch, &Redactor::new()))
        .expect("apply");
    assert_eq!(c.store.watermark(&a.id, first.epoch).expect("wm"), 3);
    // C pulls the rest from B: the first seal B sends starts before C's
    // watermark and carries the hashes of 1..=3.
    let pull = Pull {
        after_seq: 3,
        ..first
    };
    let relayed = b
        .store
        .serve_pull(&pull, None, &Redactor::new())
        .expect("relay");
    assert_eq!(relayed.seals[0].first, 1);
    assert_eq!(relayed.seals[0].before.len(), 3);
    assert_eq!(relayed.origin_key, a.signer.spki());
    let moved = pull_all(&b, &mut c, None, all());
    assert_eq!(c.records(), 10, "{moved:?}");
    // D pulls from C two at a time: batches end inside C's seals and carry
    // the hashes after them.
    let moved = pull_all(&c, &mut d, None, limits(2));
    assert_eq!((d.records(), moved.max_entries), (10, 2));
    let p = Pull {
        after_seq: 0,
        max_records: 2,
        ..first
    };
    let tail = c
        .store
        .serve_pull(&p, None, &Redactor::new())
        .expect("serve");
    assert!(
        tail.seals.last().is_some_and(|s| !s.after.is_empty()),
        "{:?}",
        tail.seals
    );
}

/// What a receiver refuses before storing anything: its own origin, a key
/// other than the one it knows, a seal that does not match the entries.
#[test]
fn own_origin_changed_keys_and_broken_seals_are_refused_whole() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let c = TestNode::new(3);
    a.index(&session("s", "/p", 4, "guarded"));
    b.index(&session("t", "/q", 2, "mine"));
    let (pull, batch) = first_batch(&a, &b);
    let before = b.records();
    // A seal over other entries.
    let mut altered = batch.clone();
    altered.records[1].text = "changed".into();
    altered.records[1].hash = altered.records[1].content_hash();
    let e = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &altered, &Redactor::new()))
        .expect_err("altered");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::BadSignature { .. })),
        "{e}"
    );
    assert_eq!(e.blame(), Blame::Peer);
    // B's own log, even sealed with B's real key, is only ever B's to write.
    let (own_pull, mut own) = first_batch(&b, &a);
    own.records[0].text = "planted in B's name".into();
    own.records[0].hash = own.records[0].content_hash();
    b.signer.seal_own(&mut own);
    let e = b
        .store
        .apply_batch(ApplyRequest::new(&own_pull, &own, &Redactor::new()))
        .expect_err("own origin");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::OwnOrigin { .. })),
        "{e}"
    );
    // The genuine batch goes in, and A's key is now known.
    b.store
        .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()))
        .expect("genuine");
    assert_eq!(b.records(), before + 4);
    // A different key recorded for A (a second key for a known origin)
    // refuses A's next batches.
    a.index(&session("s2", "/p", 1, "later"));
    b.store
        .conn()
        .execute(
            "UPDATE origin_keys SET spki = ?1 WHERE origin = ?2",
            rusqlite::params![c.signer.spki(), a.id.to_string()],
        )
        .expect("swap key");
    let (pull, batch) = first_batch(&a, &b);
    let e = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()))
        .expect_err("changed key");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::KeyChanged { .. })),
        "{e}"
    );
    assert_eq!(b.records(), before + 4);
}

/// A forget whose target holds a secret (a hostile or differently-ruled
/// issuer; an honest node forgets the redacted ids it stored) is refused
/// with its whole batch, sealed or not, so the secret is neither stored
/// nor relayed; a clean forget from the same origin still goes through.
#[test]
fn a_forget_naming_a_secret_is_refused_with_its_batch() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    a.index(&session("plain", "/p", 3, "harmless"));
    pull_all(&a, &mut b, None, all());
    assert_eq!(b.records(), 3);
    let token = "ghp_R3c0rdedAgentS3cretQuokka2026xYz1234";
    let raw = ForgetTarget::Session {
        agent: "claude-code".into(),
        session_id: format!("deploy-{token}"),
    };
    a.store.forget(&[raw], 3_000).expect("forget");
    let (pull, batch) = first_batch(&a, &b);
    assert_eq!(batch.tombstones.len(), 1, "{batch:?}");
    let e = b
        .store
        .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()))
        .expect_err("a secret in a forget");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::SecretInForget { .. })),
        "{e}"
    );
    assert_eq!(e.blame(), Blame::Peer);
    assert!(
        !b.file_bytes()
            .windows(token.len())
            .any(|w| w == token.as_bytes())
    );
    assert_eq!(b.count("SELECT count(*) FROM tombstones"), 0);
    assert_eq!(b.records(), 3);

    // A forget of the session as stored (its id clean) is taken.
    let mut c = TestNode::new(3);
    let mut d = TestNode::new(4);
    c.index(&session("plain", "/p", 3, "harmless"));
    pull_all(&c, &mut d, None, all());
    let clean = ForgetTarget::Session {
        agent: "claude-code".into(),
        session_id: "plain".into(),
    };
    c.store.forget(&[clean], 3_000).expect("forget");
    pull_all(&c, &mut d, None, all());
    assert_eq!(d.count("SELECT count(*) FROM tombstones"), 1);
    assert_eq!(d.records(), 0);
}

/// Every vector in the `vectors` table, by record id, and the vector
/// pass's mark.
fn vectors(n: &TestNode) -> (Vec<(i64, Vec<u8>)>, i64) {
    let conn = n.store.conn();
    let rows = conn
        .prepare("SELECT id, v FROM vectors ORDER BY id")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let upto = n.count(
        "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vectors_upto'), 0)",
    );
    (rows, upto)
}

#[test]
fn received_records_bring_the_vectors_a_vector_pass_would_compute() {
    let mut a = TestNode::new(1);
    // More than one chunk of prepared records (64): each vector follows
    // its own record across them.
    let mut recs = session("s1", "/p", 150, "heron");
    for (i, r) in recs.iter_mut().enumerate() {
        if i % 3 == 0 {
            // Tool output gets no vector.
            r.role = Role::ToolOutput;
        }
    }
    assert_eq!(a.index(&recs), 150);
    let e = crate::embed::builtin();
    let apply = |to: &mut TestNode, embedder| {
        let (pull, batch) = first_batch(&a, to);
        let report = to
            .store
            .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()).embedding(embedder))
            .expect("apply");
        assert_eq!(report.stored, 150);
    };
    // With the embedder: stored with the batch, every record examined.
    let mut b = TestNode::new(2);
    apply(&mut b, Some(e));
    let (with, upto) = vectors(&b);
    assert_eq!(upto, b.count("SELECT max(id) FROM records"));
    assert!(!b.store.vectors_pending().expect("pending"));
    // Without: a vector pass afterwards computes the very same ones.
    let mut c = TestNode::new(3);
    apply(&mut c, None);
    assert_eq!(vectors(&c).0, vec![]);
    assert!(c.store.vectors_pending().expect("pending"));
    c.store.embed_pending(e).expect("embed");
    assert_eq!(vectors(&c), (with.clone(), upto));
    assert_eq!(with.len(), 150 - 50, "user records only");
    // A record of its own still waiting for its vector: the batch leaves
    // its records to the vector pass too, which then examines them all.
    let mut d = TestNode::new(4);
    d.index(&session("own", "/q", 1, "egret"));
    apply(&mut d, Some(e));
    assert_eq!(vectors(&d), (vec![], 0));
    d.store.embed_pending(e).expect("embed");
    let (all, upto) = vectors(&d);
    assert_eq!((all.len(), upto), (1 + with.len(), 151));
}

/// The records as stored, by hash: session, role, time, flags, text
/// bytes, whether `origin` is their origin (else the receiver's own), files.
type RecordRow = (
    Vec<u8>,
    String,
    Vec<u8>,
    Option<i64>,
    i64,
    Vec<u8>,
    bool,
    String,
);

fn stored_rows(n: &TestNode, origin: &TestNode) -> Vec<RecordRow> {
    n.store
        .conn()
        .prepare(
            "SELECT r.hash, s.session_id, CAST(r.role AS BLOB), r.ts, r.flags, r.text, o.node = ?1,
                    r.files
             FROM records r JOIN sessions s ON s.id = r.session JOIN origins o ON o.id = r.origin
             ORDER BY r.hash",
        )
        .expect("prepare")
        .query_map([origin.origin()], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// The slots `n` holds of `log_origin`'s log: (seq, kind, record hash).
fn slots(n: &TestNode, log_origin: &TestNode) -> Vec<(i64, i64, Vec<u8>)> {
    n.store
        .conn()
        .prepare(
            "SELECT l.seq, l.kind, COALESCE(l.hash, r.hash) FROM logs l
             JOIN origin_logs g ON g.id = l.log JOIN origins o ON o.id = g.origin
             LEFT JOIN records r ON r.id = l.rec
             WHERE o.node = ?1 ORDER BY l.seq",
        )
        .expect("prepare")
        .query_map([log_origin.origin()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// Pulls A's whole log into `to` in batches of `max_records`, each
/// applied within `catch_up`; after each, `check` sees the receiver.
fn pull_catching_up(
    a: &TestNode,
    to: &mut TestNode,
    max_records: u32,
    catch_up: &mut super::CatchUp,
    mut check: impl FnMut(&mut TestNode, &super::CatchUp),
) -> u64 {
    let redactor = Redactor::new();
    let mut stored = 0;
    let mut batches = 0u32;
    loop {
        let pull = Pull {
            origin: a.id,
            epoch: 1001,
            after_seq: to.store.watermark(&a.id, 1001).expect("wm"),
            max_records,
            max_bytes: 1 << 20,
        };
        let batch = a.store.serve_pull(&pull, None, &redactor).expect("serve");
        // Prepared ahead, as a session does while the batch before is
        // stored; every other batch also with another batch's records,
        // which must not be used for it.
        batches += 1;
        let ahead = if batches.is_multiple_of(2) {
            to.store.preparer(&redactor).prepare(batch.clone())
        } else {
            // Another text under the same seqs and hashes.
            let mut other = batch.clone();
            if let Some(r) = other.records.first_mut() {
                r.text.push_str(" and more");
            }
            to.store.preparer(&redactor).prepare(other)
        };
        let report = to
            .store
            .apply_batch(
                ApplyRequest::new(&pull, &batch, &redactor)
                    .catching_up(Some(catch_up))
                    .prepared(Some(ahead)),
            )
            .expect("apply");
        stored += report.stored;
        check(to, catch_up);
        if !batch.more {
            return stored;
        }
    }
}

fn index_present(n: &TestNode) -> bool {
    super::hash_index::present(n.store.conn())
}

fn deferral_noted(n: &TestNode) -> bool {
    n.count("SELECT count(*) FROM meta WHERE key = 'records_hash8_deferred'") == 1
}

#[test]
fn a_large_catch_up_stores_what_batch_by_batch_does_and_builds_the_index_once() {
    let mut a = TestNode::new(1);
    let mut recs = session("s1", "/p", 300, "heron");
    recs.extend(session("s2", "/q", 200, "egret"));
    // A secret this node's rules take out again on receipt.
    recs[7].text = format!("the key is {SECRET}");
    assert_eq!(a.index(&recs), 500);
    // Both receivers already hold some of A's records (duplicates, a
    // second provenance) and one of their own.
    let mut plain = TestNode::new(2);
    let mut bulk = TestNode::new(3);
    for n in [&mut plain, &mut bulk] {
        n.index(&recs[100..120]);
        n.index(&session("own", "/r", 1, "ibis"));
    }
    let moved = pull_all(&a, &mut plain, None, limits(70));

    let mut c = bulk
        .store
        .begin_catch_up(a.id, 1001, super::CATCH_UP_MIN, 1)
        .expect("begin")
        .expect("large enough");
    assert!(c.defers_hash_index() && !index_present(&bulk) && deferral_noted(&bulk));
    let mut batches = 0;
    let stored = pull_catching_up(&a, &mut bulk, 70, &mut c, |n, c| {
        batches += 1;
        assert!(c.defers_hash_index(), "batch {batches}");
        assert!(!index_present(n) && deferral_noted(n), "batch {batches}");
    });
    assert_eq!(batches, 8);
    bulk.store.end_catch_up(c).expect("end");
    assert!(index_present(&bulk) && !deferral_noted(&bulk));

    assert_eq!((stored, moved.stored), (480, 480));
    let rows = stored_rows(&bulk, &a);
    // Compared whole only when they differ: the rows are long.
    assert!(rows == stored_rows(&plain, &a), "stored rows differ");
    assert_eq!(rows.iter().filter(|r| r.6).count(), 480);
    assert_eq!(slots(&bulk, &a), slots(&plain, &a));
    assert_eq!(slots(&bulk, &a).len(), 500);
    for n in [&bulk, &plain] {
        assert_eq!(n.store.watermark(&a.id, 1001).expect("wm"), 500);
    }
    assert!(
        bulk.file_bytes()
            .windows(SECRET.len())
            .all(|w| w != SECRET.as_bytes())
    );
    // Record 7 carried the secret instead of its word.
    for (word, hits) in [("heron", 299), ("egret", 200)] {
        let sql = format!("SELECT count(*) FROM fts WHERE fts MATCH '{word}'");
        assert_eq!(
            (bulk.count(&sql), plain.count(&sql)),
            (hits, hits),
            "{word}"
        );
    }
    // Served onward alike: the same slots, hashes and stubs.
    let pull = Pull {
        origin: a.id,
        epoch: 1001,
        after_seq: 0,
        max_records: 1000,
        max_bytes: 1 << 20,
    };
    let serve = |n: &TestNode| {
        n.store
            .serve_pull(&pull, None, &Redactor::new())
            .expect("serve")
    };
    let (x, y) = (serve(&bulk), serve(&plain));
    assert_eq!((x.records, x.stubs), (y.records, y.stubs));
    // And applied again, nothing is stored twice.
    assert_eq!(pull_all(&a, &mut bulk, None, all()).stored, 0);
    assert_eq!(
        bulk.count("SELECT count(DISTINCT hash) FROM records"),
        bulk.records()
    );
}

#[test]
fn a_catch_up_gives_the_index_up_to_another_writer_and_a_killed_one_leaves_it_to_the_next() {
    let mut a = TestNode::new(1);
    let recs = session("s1", "/p", 300, "heron");
    assert_eq!(a.index(&recs), 300);

    // Another writer builds the index between two batches: the catch-up
    // looks hashes up through it from then on.
    let mut b = TestNode::new(2);
    let mut c = b
        .store
        .begin_catch_up(a.id, 1001, super::CATCH_UP_MIN, 1)
        .expect("begin")
        .expect("large enough");
    let mut batches = 0;
    let stored = pull_catching_up(&a, &mut b, 100, &mut c, |n, c| {
        batches += 1;
        if batches == 1 {
            assert!(c.defers_hash_index());
            // A's next batch holds this record: a duplicate, found by hash.
            assert_eq!(n.index(&recs[150..151]), 1);
            assert!(index_present(n) && !deferral_noted(n));
        } else {
            assert!(!c.defers_hash_index(), "batch {batches}");
        }
    });
    b.store.end_catch_up(c).expect("end");
    assert_eq!(stored, 299);
    assert_eq!(b.records(), 300);
    assert_eq!(b.count("SELECT count(DISTINCT hash) FROM records"), 300);
    assert_eq!(slots(&b, &a).len(), 300);

    // A process killed during a catch-up leaves the note: the next batch,
    // applied without it, builds the index before looking anything up.
    let mut k = TestNode::new(3);
    let mut c = k
        .store
        .begin_catch_up(a.id, 1001, super::CATCH_UP_MIN, 1)
        .expect("begin")
        .expect("large enough");
    let (pull, batch) = served_from_start(&a, 100, 1 << 20);
    k.store
        .apply_batch(ApplyRequest::new(&pull, &batch, &Redactor::new()).catching_up(Some(&mut c)))
        .expect("apply");
    drop(c);
    assert!(!index_present(&k) && deferral_noted(&k));
    let moved = pull_all(&a, &mut k, None, limits(100));
    assert_eq!(moved.stored, 200);
    assert!(index_present(&k) && !deferral_noted(&k));
    assert_eq!(k.count("SELECT count(DISTINCT hash) FROM records"), 300);

    // A catch-up checkpoints the write-ahead log less often, and its end
    // puts SQLite's own interval back.
    let mut m = TestNode::new(4);
    let checkpoint = |n: &TestNode| n.count("PRAGMA wal_autocheckpoint");
    assert_eq!(checkpoint(&m), 1_000);
    let c = m
        .store
        .begin_catch_up(a.id, 1001, super::CATCH_UP_MIN, 1)
        .expect("begin")
        .expect("large enough");
    assert_eq!(checkpoint(&m), 16_384);
    assert_eq!(m.count("PRAGMA journal_size_limit"), 8 << 20);
    m.store.end_catch_up(c).expect("end");
    assert_eq!(checkpoint(&m), 1_000);

    // Too few coming: no bulk path.
    assert!(
        k.store
            .begin_catch_up(a.id, 1001, super::CATCH_UP_MIN - 1, 1)
            .expect("begin")
            .is_none()
    );
}

/// The trust check runs before the write lock; what another connection
/// changes in between (the user refusing the origin, another batch
/// teaching a first key for it) is judged again inside the transaction.
#[test]
fn an_origin_refused_or_keyed_between_check_and_store_is_refused() {
    let mut a = TestNode::new(1);
    let mut b = TestNode::new(2);
    let c = TestNode::new(3);
    a.index(&session("s", "/p", 4, "raced"));
    let (pull, batch) = first_batch(&a, &b);
    let before = b.records();
    let path = b.store.path().to_path_buf();
    // Refused by `cairn peers --refuse-origin` in another process.
    let e = b
        .store
        .apply_batch_with_change_between(&pull, &batch, &Redactor::new(), || {
            let mut other = Store::open(&path).expect("second connection");
            other.refuse_origin(&a.id, 5).expect("refuse");
        })
        .expect_err("refused meanwhile");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::RefusedOrigin { .. })),
        "{e}"
    );
    assert_eq!(b.records(), before, "nothing of the batch stored");
    assert_eq!(b.store.watermarks().expect("wm").len(), 1, "only B's own");
    // A first key for A learned from another batch meanwhile (another
    // peer relaying A's log with a different key).
    b.store.allow_origin(&a.id).expect("allow");
    let e = b
        .store
        .apply_batch_with_change_between(&pull, &batch, &Redactor::new(), || {
            let other = Store::open(&path).expect("second connection");
            other
                .conn()
                .execute(
                    "INSERT INTO origin_keys(origin, spki, learned_ms) VALUES (?1, ?2, 0)",
                    rusqlite::params![a.id.to_string(), c.signer.spki()],
                )
                .expect("key learned meanwhile");
        })
        .expect_err("another key meanwhile");
    assert!(
        matches!(e, ApplyError::Refused(TrustError::KeyChanged { .. })),
        "{e}"
    );
    assert_eq!(b.records(), before);
}
