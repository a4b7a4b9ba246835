//! A pass that defers the records' hash index (`store::hash_index`)
//! against everything else that writes records: the records stay unique
//! by hash, and the index is there again whenever no pass holds it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cairn_protocol::ForgetTarget;
use rusqlite::Connection;

use super::hash_index::{DEFERRED, present};
use super::{Ingest, Store};
use crate::record::{Record, Role};

fn rec(text: &str) -> Record {
    let mut r = Record::new("claude-code", "s1", Role::User, text);
    r.time_ms = Some(1_700_000_000_000);
    r
}

fn open(dir: &Path) -> (PathBuf, Store) {
    let path = dir.join("cairn.db");
    let store = Store::open(&path).expect("open");
    (path, store)
}

/// A pass on `store` that holds the index deferred.
fn deferring<'s>(store: &'s mut Store, origin: &str) -> Ingest<'s> {
    let mut pass = store.ingest(origin).expect("ingest");
    assert!(pass.defer_hash_index().expect("defer"));
    pass
}

/// What another connection sees: whether the index exists, whether the
/// note is there, and the records' texts (each hash once).
fn seen(path: &Path) -> (bool, bool, Vec<String>) {
    let conn = Connection::open(path).expect("reader");
    let noted: bool = conn
        .query_row(
            "SELECT EXISTS(SELECT 1 FROM meta WHERE key = ?1)",
            [DEFERRED],
            |r| r.get(0),
        )
        .expect("meta");
    let (all, distinct): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(DISTINCT hash) FROM records",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count");
    assert_eq!(all, distinct, "a hash stored twice");
    let store = Store::open(path).expect("open");
    let mut texts = Vec::new();
    let sessions: Vec<i64> = store
        .conn()
        .prepare("SELECT id FROM sessions")
        .expect("sessions")
        .query_map([], |r| r.get(0))
        .expect("sessions")
        .collect::<Result<_, _>>()
        .expect("sessions");
    for s in sessions {
        for r in store.session_records(s, 0, 1_000).expect("records") {
            texts.push(r.text);
        }
    }
    texts.sort();
    (present(&conn), noted, texts)
}

fn texts(t: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = t.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

#[test]
fn a_deferring_pass_keeps_records_unique_and_builds_the_index_at_its_end() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, mut store) = open(dir.path());
    let mut ing = store.ingest("origin").expect("ingest");
    for t in ["alpha", "beta"] {
        assert!(ing.insert(&rec(t), None).expect("insert"));
    }
    ing.commit().expect("commit");

    let mut ing = deferring(&mut store, "origin");
    // Against what was stored before the pass, and what it stored itself,
    // within a transaction and across its commits.
    assert!(!ing.insert(&rec("alpha"), None).expect("insert"));
    assert!(ing.insert(&rec("gamma"), None).expect("insert"));
    assert!(!ing.insert(&rec("gamma"), None).expect("insert"));
    ing.pause().expect("commit");
    let (index, noted, _) = seen(&path);
    assert!(!index && noted, "deferred between commits");
    ing.resume().expect("begin");
    assert!(ing.defers_hash_index());
    assert!(!ing.insert(&rec("gamma"), None).expect("insert"));
    assert!(!ing.insert(&rec("beta"), None).expect("insert"));
    assert!(ing.insert(&rec("delta"), None).expect("insert"));
    ing.pause().expect("commit");
    let (index, noted, _) = seen(&path);
    assert!(!index && noted, "still deferred after its second commit");
    ing.resume().expect("begin");
    assert!(ing.defers_hash_index());
    assert!(!ing.insert(&rec("delta"), None).expect("insert"));
    ing.commit().expect("commit");
    assert_eq!(
        seen(&path),
        (true, false, texts(&["alpha", "beta", "gamma", "delta"]))
    );
    // The index answers again.
    let mut ing = store.ingest("origin").expect("ingest");
    assert!(!ing.insert(&rec("delta"), None).expect("insert"));
    ing.commit().expect("commit");
}

#[test]
fn a_writer_between_the_passs_commits_builds_the_index_and_the_pass_then_uses_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, mut a) = open(dir.path());
    let mut pass = deferring(&mut a, "origin");
    assert!(pass.insert(&rec("x"), None).expect("insert"));
    pass.pause().expect("commit");

    // Another pass, on its own connection: it will not take the index from
    // under the first, but builds it and looks records up through it.
    let mut b = Store::open(&path).expect("open");
    let mut other = b.ingest("origin").expect("ingest");
    assert!(!other.defer_hash_index().expect("defer"));
    assert!(!other.insert(&rec("x"), None).expect("insert"));
    assert!(other.insert(&rec("y"), None).expect("insert"));
    other.commit().expect("commit");
    let (index, noted, _) = seen(&path);
    assert!(index && !noted);

    pass.resume().expect("begin");
    assert!(!pass.defers_hash_index(), "the index serves again");
    assert!(!pass.insert(&rec("y"), None).expect("insert"));
    assert!(pass.insert(&rec("z"), None).expect("insert"));
    pass.commit().expect("commit");
    assert_eq!(seen(&path), (true, false, texts(&["x", "y", "z"])));
}

#[test]
fn a_forget_during_the_pass_builds_the_index_and_its_record_stays_forgotten() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, mut a) = open(dir.path());
    let origin = cairn_protocol::NodeId([7; 20]).to_string();
    a.ensure_log(&origin, 1_000).expect("log");
    let x = rec("forget me");
    let mut pass = deferring(&mut a, &origin);
    assert!(pass.insert(&x, None).expect("insert"));
    assert!(pass.insert(&rec("keep me"), None).expect("insert"));
    pass.pause().expect("commit");

    let mut b = Store::open(&path).expect("open");
    let report = b
        .forget(
            &[ForgetTarget::Record {
                hash: x.content_hash(),
            }],
            2_000,
        )
        .expect("forget");
    assert_eq!(report.records, 1);
    let (index, noted, kept) = seen(&path);
    assert!(index && !noted);
    assert_eq!(kept, texts(&["keep me"]));

    pass.resume().expect("begin");
    assert!(!pass.defers_hash_index());
    assert!(!pass.insert(&x, None).expect("insert"), "forgotten");
    pass.commit().expect("commit");
    assert_eq!(seen(&path), (true, false, texts(&["keep me"])));
}

#[test]
fn a_pass_killed_while_deferring_leaves_the_index_to_the_next_writer() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, mut a) = open(dir.path());
    {
        let mut pass = deferring(&mut a, "origin");
        assert!(pass.insert(&rec("kept"), None).expect("insert"));
        pass.pause().expect("commit");
        pass.resume().expect("begin");
        assert!(pass.insert(&rec("lost"), None).expect("insert"));
        // Dropped without a commit: its open transaction rolls back, as
        // when the process dies.
    }
    drop(a);
    let (index, noted, stored) = seen(&path);
    assert!(!index && noted);
    assert_eq!(stored, texts(&["kept"]));

    let mut c = Store::open(&path).expect("open");
    let mut next = c.ingest("origin").expect("ingest");
    assert!(!next.insert(&rec("kept"), None).expect("insert"));
    assert!(next.insert(&rec("lost"), None).expect("insert"));
    next.commit().expect("commit");
    assert_eq!(seen(&path), (true, false, texts(&["kept", "lost"])));

    // After a failed pass the indexer builds it at once.
    {
        let mut pass = deferring(&mut c, "origin");
        pass.pause().expect("commit");
    }
    assert!(!seen(&path).0);
    assert!(c.ensure_hash_index().expect("ensure"));
    assert!(!c.ensure_hash_index().expect("ensure"), "once");
    assert_eq!(seen(&path), (true, false, texts(&["kept", "lost"])));
}

#[test]
fn a_record_removed_during_the_pass_is_stored_again_when_read_again() {
    // A rewritten file: its vanished records go, and one that comes back
    // is new again, though the map still names its old row.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, mut store) = open(dir.path());
    let mut pass = deferring(&mut store, "origin");
    let src = pass
        .source("claude-code", "/s1.jsonl", "lines")
        .expect("source")
        .id;
    assert!(pass.insert(&rec("one"), Some(src)).expect("insert"));
    assert!(pass.insert(&rec("two"), Some(src)).expect("insert"));
    let keep: HashSet<[u8; 32]> = [rec("two").content_hash()].into_iter().collect();
    assert_eq!(pass.retain_source_records(src, &keep).expect("retain"), 1);
    assert!(!pass.insert(&rec("two"), Some(src)).expect("insert"));
    assert!(pass.insert(&rec("one"), Some(src)).expect("insert"));
    pass.commit().expect("commit");
    assert_eq!(seen(&path), (true, false, texts(&["one", "two"])));
}
