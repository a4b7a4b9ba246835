//! Opening a store while another process writes to it.
//!
//! A daemon applying a catch-up takes the write lock for one batch after
//! another; SQLite's busy wait is not fair, so a command that needs the
//! lock to open can lose every race and fail after [`BUSY_TIMEOUT`]. An
//! up-to-date database must open, and answer reads, without it.

use super::*;

/// Holds the write lock of `path` (as a daemon mid-apply does) until dropped.
struct Writer(Connection);

impl Writer {
    fn hold(path: &Path) -> Writer {
        let conn = Connection::open(path).expect("writer connection");
        conn.execute_batch(
            "BEGIN IMMEDIATE;
             INSERT INTO meta(key, value) VALUES ('held', '1');",
        )
        .expect("take the write lock");
        Writer(conn)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}

#[test]
fn an_up_to_date_store_opens_and_reads_while_another_connection_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    {
        let mut store = Store::open(&path).expect("first open");
        store.upsert_node("node-a", "alpha").expect("name");
        store.ensure_log("node-a", 1_767_225_600_000).expect("log");
    }
    let _writer = Writer::hold(&path);
    // Everything `Node::open` and a read-only command do, with the lock taken.
    let mut store = Store::open(&path).expect("open while another connection writes");
    store
        .upsert_node("node-a", "alpha")
        .expect("unchanged name");
    store
        .ensure_log("node-a", 1_767_225_600_000)
        .expect("existing log");
    store.stats().expect("stats");
    assert_eq!(
        store.meta("held").expect("meta"),
        None,
        "uncommitted write unseen"
    );
}

#[test]
fn a_consistent_read_is_refused_when_another_connection_commits_during_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    let store = Store::open(&path).expect("open");
    let other = Connection::open(&path).expect("second connection");
    // Nobody else writes: the read stands.
    let quiet = store.read_consistent(|s| s.source_stamps()).expect("read");
    assert_eq!(quiet.map(|v| v.len()), Some(0));
    // A commit by another connection while it reads: what it looked at
    // outside the database may not match, so it gets nothing.
    let raced = store
        .read_consistent(|s| {
            other
                .execute("INSERT INTO meta(key, value) VALUES ('raced', '1')", [])
                .expect("other commits");
            s.source_stamps()
        })
        .expect("read");
    assert!(raced.is_none());
    // Its own reads afterwards stand again.
    assert!(store.read_consistent(|_| Ok(())).expect("read").is_some());
}
