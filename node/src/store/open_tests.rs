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

/// (free pages, file pages) of the database at `path`.
fn pages(path: &Path) -> (i64, i64) {
    let conn = Connection::open(path).expect("open");
    conn.query_row(
        "SELECT f.freelist_count, p.page_count FROM pragma_freelist_count() f, pragma_page_count() p",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("pages")
}

/// Writes `kib` KiB into a table of its own in `conn`'s database, then
/// drops it: its pages are free.
fn churn(conn: &Connection, kib: i64) {
    conn.execute_batch(&format!(
        "CREATE TABLE scratch(b);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {kib})
         INSERT INTO scratch SELECT randomblob(1024) FROM n;
         DROP TABLE scratch;"
    ))
    .expect("churn");
}

#[test]
fn many_free_pages_go_back_to_the_file_system_and_few_stay_for_reuse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    let store = Store::open(&path).expect("open");
    churn(&store.conn, 8 * 1024);
    let (free, total) = pages(&path);
    assert!(
        free >= TRIM_MIN_PAGES && free * 20 >= total,
        "{free} of {total}"
    );
    assert_eq!(store.trim_free_pages().expect("trim"), free as u64);
    let (free_after, total_after) = pages(&path);
    assert_eq!(free_after, 0);
    assert_eq!(total_after, total - free);
    // A few free pages stay for the next writes to take.
    churn(&store.conn, 1024);
    let (few, _) = pages(&path);
    assert!(few > 0 && few < TRIM_MIN_PAGES, "{few}");
    assert_eq!(store.trim_free_pages().expect("trim"), 0);
    assert_eq!(pages(&path).0, few);
    // A database made before incremental auto-vacuum keeps its pages.
    let old = dir.path().join("old.db");
    Connection::open(&old)
        .expect("create")
        .execute_batch("PRAGMA auto_vacuum = NONE; CREATE TABLE t(x);")
        .expect("old");
    let store = Store::open(&old).expect("open old");
    churn(&store.conn, 8 * 1024);
    let (free, _) = pages(&old);
    assert!(free >= TRIM_MIN_PAGES, "{free}");
    assert_eq!(store.trim_free_pages().expect("trim"), 0);
    assert_eq!(pages(&old).0, free);
}

#[test]
fn statements_are_not_compiled_again_when_their_bindings_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    {
        let mut store = Store::open(&path).expect("open");
        let mut ing = store.ingest("node-a").expect("ingest");
        for i in 0..5 {
            let r = crate::record::Record::new(
                "claude-code",
                &format!("s{i}"),
                crate::record::Role::User,
                format!("record {i}"),
            );
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
    }
    // A join by a bound row id (as a hit's details are read), a range by
    // session (as an answer is found) and a look-up through a partial index.
    let statements = [
        "SELECT r.ts, se.session_id, og.node FROM records r
         JOIN sessions se ON se.id = r.session
         JOIN origins og ON og.id = r.origin
         LEFT JOIN sources src ON src.id = r.source
         WHERE r.id = ?1",
        "SELECT id FROM records WHERE session = ?1 AND id > ?1 ORDER BY id LIMIT 1",
        "SELECT seq FROM logs WHERE rec = ?1",
    ];
    let writable = Store::open(&path).expect("open");
    let read_only = Store::open_read_only(&path).expect("open read-only");
    for store in [&writable, &read_only] {
        for sql in statements {
            let mut stmt = store.conn().prepare(sql).expect("prepare");
            for id in 1..=5i64 {
                let mut rows = stmt.query([id]).expect("query");
                while rows.next().expect("row").is_some() {}
            }
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "compiled again on a new binding: {sql}"
            );
        }
    }
}

#[test]
fn the_page_cache_reads_back_as_set_in_kib_or_in_pages() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(&dir.path().join("c.db")).expect("open");
    // SQLite's default.
    assert_eq!(store.cache_kib().expect("default"), 2000);
    store
        .set_cache_kib(Store::ONE_SEARCH_CACHE_KIB)
        .expect("set");
    assert_eq!(store.cache_kib().expect("set"), Store::ONE_SEARCH_CACHE_KIB);
    // Set in pages (a positive size): 100 pages of 8 KiB.
    store
        .conn()
        .execute_batch("PRAGMA cache_size = 100")
        .expect("pages");
    assert_eq!(store.cache_kib().expect("pages"), 800);
}

/// A database that cannot grow (SQLite's page limit stands in for a full
/// disk: the same `SQLITE_FULL`) fails the pass with [`StoreError::DiskFull`],
/// whose text says what to do once, and keeps what earlier commits stored.
#[test]
fn a_full_disk_is_named_and_loses_nothing_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    let mut store = Store::open(&path).expect("open");
    let record = |i: usize| {
        crate::record::Record::new(
            "claude-code",
            &format!("s{i}"),
            crate::record::Role::User,
            format!("record {i} {}", "words of a long turn ".repeat(200)),
        )
    };
    let mut ing = store.ingest("node-a").expect("ingest");
    for i in 0..3 {
        ing.insert(&record(i), None).expect("insert");
    }
    ing.commit().expect("commit");
    let used: i64 = store
        .conn()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("pages");
    store
        .conn()
        .pragma_update(None, "max_page_count", used + 4)
        .expect("limit");
    let failed = (|| -> Result<(), StoreError> {
        let mut ing = store.ingest("node-a")?;
        for i in 3..400 {
            ing.insert(&record(i), None)?;
        }
        ing.commit()
    })();
    let e = failed.expect_err("the database cannot grow");
    assert!(matches!(e, StoreError::DiskFull), "{e:?}");
    assert!(e.to_string().contains("free some space"), "{e}");
    drop(store);
    let store = Store::open(&path).expect("open again");
    let held: i64 = store
        .conn()
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .expect("count");
    assert_eq!(held, 3, "the committed records stay");
}

/// SQLite's check reads inside the full-text indexes as well: a segment
/// whose bytes changed while every page stays well formed (a blob
/// rewritten in place) is found, so `cairn doctor` names it.
#[test]
fn the_database_check_finds_damage_inside_a_full_text_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let mut ing = store.ingest("node-a").expect("ingest");
    for i in 0..200 {
        let text = format!(
            "heron {i} marsh kingfisher reeds {}",
            "egret tide ".repeat(i % 7)
        );
        let r = crate::record::Record::new("claude-code", "s1", crate::record::Role::User, text);
        ing.insert(&r, None).expect("insert");
    }
    ing.commit().expect("commit");
    assert_eq!(store.damage().expect("check"), Vec::<String>::new());
    // Every byte past each leaf's 4-byte header turned over.
    store
        .conn()
        .execute_batch(
            "UPDATE fts_data SET block = substr(block, 1, 4) || randomblob(length(block) - 4)
             WHERE id > 10 AND length(block) > 64",
        )
        .expect("damage");
    let found = store.damage().expect("check");
    assert!(found.iter().any(|f| f.contains("fts5")), "{found:?}");
}
