//! The database schema and its migrations.
//!
//! Migrations are only ever appended: a released migration is never edited.
//! `PRAGMA user_version` holds the number of migrations applied.

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// Each entry upgrades the schema by one version.
pub(super) const MIGRATIONS: &[&str] = &[
    // v1: records, sessions, sources, nodes and the full-text index.
    r#"
    CREATE TABLE meta(
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE nodes(
        id   TEXT PRIMARY KEY,
        name TEXT NOT NULL
    );
    CREATE TABLE sources(
        id          INTEGER PRIMARY KEY,
        agent       TEXT NOT NULL,
        path        TEXT NOT NULL UNIQUE,
        kind        TEXT NOT NULL,
        size        INTEGER NOT NULL DEFAULT 0,
        mtime_ns    INTEGER NOT NULL DEFAULT 0,
        offset      INTEGER NOT NULL DEFAULT 0,
        head_hash   BLOB,
        tail_hash   BLOB,
        watermark   TEXT,
        skipped     INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        missing     INTEGER NOT NULL DEFAULT 0,
        indexed_ms  INTEGER
    );
    CREATE TABLE sessions(
        id             INTEGER PRIMARY KEY,
        agent          TEXT NOT NULL,
        session_id     TEXT NOT NULL,
        parent_session TEXT,
        project        TEXT,
        origin         TEXT NOT NULL,
        first_ms       INTEGER,
        last_ms        INTEGER,
        title          TEXT,
        records        INTEGER NOT NULL DEFAULT 0,
        UNIQUE(agent, session_id)
    );
    -- Small columns first so ranking reads them without touching the
    -- text's overflow pages. flags: bit 0 = decision language, bit 1 =
    -- text is zstd-compressed (see store::codec).
    CREATE TABLE records(
        id      INTEGER PRIMARY KEY,
        hash    BLOB NOT NULL UNIQUE,
        session INTEGER NOT NULL REFERENCES sessions(id),
        role    TEXT NOT NULL,
        ts      INTEGER,
        flags   INTEGER NOT NULL DEFAULT 0,
        origin  TEXT NOT NULL,
        source  INTEGER REFERENCES sources(id),
        offset  INTEGER,
        files   TEXT NOT NULL DEFAULT '',
        text    BLOB NOT NULL
    );
    CREATE INDEX records_session ON records(session, ts);
    CREATE INDEX records_source ON records(source);
    CREATE TABLE redactions(
        source INTEGER NOT NULL,
        kind   TEXT NOT NULL,
        count  INTEGER NOT NULL,
        PRIMARY KEY(source, kind)
    );
    CREATE VIRTUAL TABLE fts USING fts5(
        body, files,
        content = '',
        contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE fts_vocab USING fts5vocab('fts', 'row');
    "#,
    // v2: origin logs, watermarks and tombstones for peer sync. This
    // node's own log (its origin and epoch in `meta`) is created, and the
    // records already stored are appended to it, by `Store::ensure_log`.
    r#"
    -- One slot per (origin, epoch, seq), gap-free per log. kind: 0 record
    -- (hash = record hash; served as a stub when the record is no longer
    -- stored), 1 tombstone (hash = tombstone id), 2 stub withheld, 3 stub
    -- forgotten (hash = the record hash that was there).
    -- Node ids of every origin log held, numbered so each slot stores a
    -- small integer instead of the 32-character id.
    CREATE TABLE origins(
        id   INTEGER PRIMARY KEY,
        node TEXT NOT NULL UNIQUE
    );
    CREATE TABLE logs(
        origin INTEGER NOT NULL REFERENCES origins(id),
        epoch  INTEGER NOT NULL,
        seq    INTEGER NOT NULL,
        kind   INTEGER NOT NULL,
        hash   BLOB NOT NULL,
        PRIMARY KEY(origin, epoch, seq)
    ) WITHOUT ROWID;
    CREATE INDEX logs_hash ON logs(hash);
    -- Highest contiguous seq held per origin log, advanced in the same
    -- transaction as the slots it covers.
    CREATE TABLE watermarks(
        origin TEXT NOT NULL,
        epoch  INTEGER NOT NULL,
        seq    INTEGER NOT NULL,
        PRIMARY KEY(origin, epoch)
    ) WITHOUT ROWID;
    -- Forgets, from this node or any peer. target: 1 session (agent,
    -- session_id), 2 project (project), 3 record (hash). Never holds
    -- forgotten content.
    CREATE TABLE tombstones(
        id         BLOB PRIMARY KEY,
        origin     TEXT NOT NULL,
        epoch      INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        target     INTEGER NOT NULL,
        agent      TEXT,
        session_id TEXT,
        project    TEXT,
        hash       BLOB
    );
    CREATE INDEX tombstones_session ON tombstones(session_id, agent) WHERE session_id IS NOT NULL;
    CREATE INDEX tombstones_project ON tombstones(project) WHERE project IS NOT NULL;
    CREATE INDEX tombstones_hash ON tombstones(hash) WHERE hash IS NOT NULL;
    "#,
    // v3: a stemmed index of conversation (user, assistant, note), so
    // "signed" meets "sign" and "crashes" meets "crashing". Positions are
    // not kept (detail=none): it only answers single-word look-ups, which
    // keeps it small; phrases, identifiers and CJK stay on `fts`. Records
    // already stored are added by `fts::backfill_stems` (text may be
    // compressed, so this cannot be done in SQL); the meta row below marks
    // that work as pending.
    r#"
    CREATE VIRTUAL TABLE fts_stem USING fts5(
        body,
        content = '',
        contentless_delete = 1,
        detail = none,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO meta(key, value) VALUES ('fts_stem_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v4: meaning vectors of records (see store::vectors): one row per
    // record examined, int8 vector or NULL. Existing records are embedded
    // by the first vector pass after the upgrade.
    r#"
    CREATE TABLE vectors(
        id INTEGER PRIMARY KEY,
        v  BLOB
    );
    CREATE TRIGGER vectors_follow_records AFTER DELETE ON records BEGIN
        DELETE FROM vectors WHERE id = old.id;
    END;
    "#,
    // v5: full-text indexes buffer up to 16 MB of new entries before writing
    // a segment (the default is 1 MB): a large indexing pass then writes
    // fewer, larger segments and merges them far less often. The setting is
    // kept in each index's config table.
    r#"
    INSERT INTO fts(fts, rank) VALUES ('hashsize', 16777216);
    INSERT INTO fts_stem(fts_stem, rank) VALUES ('hashsize', 16777216);
    "#,
    // v6: slots are found by hash through an index on the hash's first 8
    // bytes instead of all 32 (one slot per record, so this index is about
    // as large as the records' own hash index was; 8 bytes tell apart
    // blake3 hashes all but never, and every look-up compares the whole
    // hash after it).
    r#"
    DROP INDEX logs_hash;
    CREATE INDEX logs_hash8 ON logs(substr(hash, 1, 8));
    "#,
    // v7: `records` rebuilt smaller, every id kept (the full-text and vector
    // rows are keyed by it):
    // - `origin` is the node's `origins` row, an integer instead of the
    //   32-character node id;
    // - the hash is found through an index on its first 8 bytes instead of a
    //   UNIQUE index on all 32 (which was as large as the hashes); every
    //   look-up compares the whole hash, and the one insert path
    //   (`store::insert`) checks for an existing hash before inserting;
    // - ids are AUTOINCREMENT: never reused, so the vector pass keeps a
    //   high-water mark (`meta.vectors_upto`) instead of a NULL row for every
    //   record it examined and found nothing to embed in.
    r#"
    INSERT OR IGNORE INTO origins(node) SELECT DISTINCT origin FROM records;
    CREATE TABLE records_v7(
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        hash    BLOB NOT NULL,
        session INTEGER NOT NULL REFERENCES sessions(id),
        role    TEXT NOT NULL,
        ts      INTEGER,
        flags   INTEGER NOT NULL DEFAULT 0,
        origin  INTEGER NOT NULL REFERENCES origins(id),
        source  INTEGER REFERENCES sources(id),
        offset  INTEGER,
        files   TEXT NOT NULL DEFAULT '',
        text    BLOB NOT NULL
    );
    INSERT INTO records_v7(id, hash, session, role, ts, flags, origin, source, offset, files, text)
        SELECT r.id, r.hash, r.session, r.role, r.ts, r.flags, o.id, r.source, r.offset, r.files, r.text
        FROM records r JOIN origins o ON o.node = r.origin
        ORDER BY r.id;
    DROP TABLE records;
    ALTER TABLE records_v7 RENAME TO records;
    CREATE INDEX records_hash8 ON records(substr(hash, 1, 8));
    CREATE INDEX records_session ON records(session, ts);
    CREATE INDEX records_source ON records(source);
    CREATE TRIGGER vectors_follow_records AFTER DELETE ON records BEGIN
        DELETE FROM vectors WHERE id = old.id;
    END;
    INSERT INTO meta(key, value) SELECT 'vectors_upto', COALESCE(max(id), 0) FROM vectors WHERE true
        ON CONFLICT(key) DO UPDATE SET value = excluded.value;
    DELETE FROM vectors WHERE v IS NULL;
    "#,
    // v8: smaller slots. Each (origin, epoch) log gets a small number in
    // `origin_logs`, and a record slot whose record is held names the
    // record's row id (`rec`, hash NULL) instead of its 32-byte hash; every
    // other slot (tombstone, stub, a record slot whose record is gone)
    // keeps its hash. Look-ups by record go through `logs_rec` (own-log
    // slots are appended in row-id order, so it grows at its right edge);
    // the few slots with a hash have `logs_unheld`. Deleting a record puts
    // its hash back into the slots that named it (trigger
    // `logs_follow_records`), so stubs and forgets stay exact; storing a
    // record again turns such slots back into `rec` (see `log::revive`).
    // Whatever rebuilds `records` must keep its ids and this trigger (v7's
    // AUTOINCREMENT ids are never reused, so `rec` never names another record).
    r#"
    DROP INDEX logs_hash8;
    ALTER TABLE logs RENAME TO logs_v6;
    CREATE TABLE origin_logs(
        id     INTEGER PRIMARY KEY,
        origin INTEGER NOT NULL REFERENCES origins(id),
        epoch  INTEGER NOT NULL,
        UNIQUE(origin, epoch)
    );
    INSERT INTO origin_logs(origin, epoch)
        SELECT DISTINCT origin, epoch FROM logs_v6 ORDER BY origin, epoch;
    CREATE TABLE logs(
        log  INTEGER NOT NULL REFERENCES origin_logs(id),
        seq  INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        rec  INTEGER,
        hash BLOB,
        PRIMARY KEY(log, seq)
    ) WITHOUT ROWID;
    INSERT INTO logs(log, seq, kind, rec, hash)
        SELECT g.id, l.seq, l.kind, r.id, CASE WHEN r.id IS NULL THEN l.hash END
        FROM logs_v6 l
        JOIN origin_logs g ON g.origin = l.origin AND g.epoch = l.epoch
        LEFT JOIN records r ON l.kind = 0 AND substr(r.hash, 1, 8) = substr(l.hash, 1, 8)
                              AND r.hash = l.hash
        ORDER BY g.id, l.seq;
    DROP TABLE logs_v6;
    CREATE INDEX logs_rec ON logs(rec) WHERE rec IS NOT NULL;
    CREATE INDEX logs_unheld ON logs(kind, substr(hash, 1, 8)) WHERE hash IS NOT NULL;
    CREATE TRIGGER logs_follow_records AFTER DELETE ON records BEGIN
        UPDATE logs SET hash = old.hash, rec = NULL WHERE rec = old.id;
    END;
    "#,
    // v9: the start of the history (the oldest session's first record),
    // which every search ranks recency against, found through an index
    // instead of a scan of every session (0.1 ms at 3,000 sessions, 2 ms
    // at 31,000).
    r#"
    CREATE INDEX sessions_first_ms ON sessions(first_ms);
    "#,
    // v10: the meaning vectors are copied into a flat file for search
    // (see store::vector_file), which `meta.vector_file` vouches for. A
    // vector deleted or changed takes that back; the next vector pass
    // writes the file anew.
    r#"
    CREATE TRIGGER vector_file_on_delete AFTER DELETE ON vectors BEGIN
        DELETE FROM meta WHERE key = 'vector_file';
    END;
    CREATE TRIGGER vector_file_on_update AFTER UPDATE ON vectors BEGIN
        DELETE FROM meta WHERE key = 'vector_file';
    END;
    "#,
    // v11: each vector is kept once. The file holds the vectors up to the
    // id its mark names and the table only those stored since (each vector
    // pass moves them); a record deleted while the file holds its vector is
    // noted in `vectors_gone` and its entry blanked by the next pass or
    // scrub. v10's file copied the table: without its mark, the first
    // pass writes the file anew from the table.
    r#"
    DROP TRIGGER vector_file_on_delete;
    DROP TRIGGER vector_file_on_update;
    DELETE FROM meta WHERE key = 'vector_file';
    CREATE TABLE vectors_gone(id INTEGER PRIMARY KEY);
    CREATE TRIGGER vectors_gone_with_records AFTER DELETE ON records
    WHEN EXISTS (SELECT 1 FROM meta WHERE key = 'vector_file') BEGIN
        INSERT OR IGNORE INTO vectors_gone(id) VALUES (old.id);
    END;
    "#,
    // v12: full-text segments are merged sixteen at a time instead of four:
    // each entry is rewritten by fewer merges on its way up (the merge work
    // per gigabyte grew by half from 1 to 10 GB of history), at the cost
    // of more, smaller segments for a query to read (18 instead of 8 at
    // 10 GB, no change in search times measured).
    r#"
    INSERT INTO fts(fts, rank) VALUES ('automerge', 16);
    INSERT INTO fts_stem(fts_stem, rank) VALUES ('automerge', 16);
    "#,
    // v13: each record's length for ranking, a byte a record in rows of
    // 1,024 (moved by v15 and v17, dropped by v24: the columns file).
    r#"
    CREATE TABLE IF NOT EXISTS record_lengths(
        block INTEGER PRIMARY KEY,
        lens  BLOB NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('lengths_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v14: which session each record belongs to, as runs of consecutive
    // record ids (see store::runs), so a search filtered on the session
    // rules candidates out without reading their rows. `runs::backfill`
    // works them out for the records already stored; the meta row marks
    // that work as pending.
    r#"
    CREATE TABLE IF NOT EXISTS record_runs(
        first   INTEGER PRIMARY KEY,
        last    INTEGER NOT NULL,
        session INTEGER NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('runs_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v15: each record's role beside its length (dropped by v24).
    r#"
    CREATE TABLE IF NOT EXISTS record_bytes(
        block INTEGER PRIMARY KEY,
        lens  BLOB NOT NULL,
        roles BLOB
    );
    INSERT OR IGNORE INTO record_bytes(block, lens) SELECT block, lens FROM record_lengths;
    DROP TABLE record_lengths;
    INSERT INTO meta(key, value) VALUES ('roles_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v16: the first record id of each block of 64 vector-file entries
    // (dropped by v28: read from the file).
    r#"
    CREATE TABLE IF NOT EXISTS vector_blocks(
        block INTEGER PRIMARY KEY,
        first INTEGER NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('vector_blocks_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v17: the lengths in a table of their own, apart from the roles
    // (both dropped by v24).
    r#"
    CREATE TABLE IF NOT EXISTS record_lens(
        block INTEGER PRIMARY KEY,
        lens  BLOB NOT NULL
    );
    INSERT OR IGNORE INTO record_lens(block, lens) SELECT block, lens FROM record_bytes;
    CREATE TABLE record_roles(
        block INTEGER PRIMARY KEY,
        lens  BLOB NOT NULL,
        roles BLOB
    );
    INSERT INTO record_roles(block, lens, roles) SELECT block, x'', roles FROM record_bytes;
    DROP TABLE record_bytes;
    ALTER TABLE record_roles RENAME TO record_bytes;
    "#,
    // v18: the runs of record ids packed a block at a time (dropped by
    // v24).
    r#"
    CREATE TABLE IF NOT EXISTS run_blocks(
        block INTEGER PRIMARY KEY,
        runs  BLOB NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('run_blocks_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v19: a generation of the `sources` rows, set to a new random value
    // by every change to what a survey describes of them (see
    // crate::store::survey), in the same transaction: a survey made at one
    // generation holds while the database is at it, whatever else was
    // written or checkpointed since. Random rather than counted, so a
    // database put back from a copy is at no generation it had before.
    // The writes to `sources` set it (`ingest::new_sources_gen`): triggers
    // would make every such write a statement with its own savepoint,
    // and FTS5 writes out its pending terms at each savepoint (a cold
    // index of 1 GB took 15% longer).
    r#"
    CREATE TABLE IF NOT EXISTS sources_gen(
        id  INTEGER PRIMARY KEY CHECK (id = 0),
        gen INTEGER NOT NULL
    );
    INSERT INTO sources_gen(id, gen) VALUES (0, random())
        ON CONFLICT(id) DO UPDATE SET gen = excluded.gen;
    "#,
    // v20: the triggers an earlier build of v19 set the generation with,
    // gone (see v19).
    r#"
    DROP TRIGGER IF EXISTS sources_gen_insert;
    DROP TRIGGER IF EXISTS sources_gen_update;
    DROP TRIGGER IF EXISTS sources_gen_delete;
    UPDATE sources_gen SET gen = random() WHERE id = 0;
    "#,
    // v21: each record's time and decision mark, eight bytes a record
    // (dropped by v24).
    r#"
    CREATE TABLE IF NOT EXISTS record_times(
        block INTEGER PRIMARY KEY,
        times BLOB NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('times_backfill', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v22: signed origins (store::trust). The origin seals received
    // with each batch, kept so this node can relay the entries with their
    // origin's signature; and the public key learned for each origin,
    // with the peer that vouched for it first.
    r#"
    CREATE TABLE IF NOT EXISTS log_seals(
        log   INTEGER NOT NULL,
        first INTEGER NOT NULL,
        last  INTEGER NOT NULL,
        sig   BLOB NOT NULL,
        PRIMARY KEY(log, first, last)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS origin_keys(
        origin     TEXT PRIMARY KEY,
        spki       BLOB NOT NULL,
        vouched_by TEXT,
        learned_ms INTEGER NOT NULL
    );
    "#,
    // v23: trust, continued (store::trust, store::upgrade_fields).
    // - `refused_origins`: the origins the user refused (`cairn peers
    //   --refuse-origin`), and when; their batches are refused from then on.
    // - `meta.fields_redacted = 0`: the session ids, parent ids, projects,
    //   titles and files stored before every field was redacted are
    //   redacted once at the next `Node::open` (which holds the rules).
    r#"
    CREATE TABLE IF NOT EXISTS refused_origins(
        origin     TEXT PRIMARY KEY,
        refused_ms INTEGER NOT NULL
    );
    INSERT INTO meta(key, value) VALUES ('fields_redacted', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v24: one home per record fact. The lengths, role bytes, times
    // and decision marks of v13–v21's side tables live in the columns
    // file (store::columns_file), which a reader backs with `records`
    // where it cannot say; the packed copy of `record_runs` earned too
    // little to keep. The tables and their pending backfills go.
    r#"
    DROP TABLE IF EXISTS record_lens;
    DROP TABLE IF EXISTS record_bytes;
    DROP TABLE IF EXISTS record_times;
    DROP TABLE IF EXISTS run_blocks;
    DELETE FROM meta WHERE key IN
        ('lengths_backfill', 'roles_backfill', 'times_backfill', 'run_blocks_backfill');
    "#,
    // v25: the projects a question names (`store::ranker`): their
    // distinct paths read by skipping through an index, not a scan of
    // every session.
    r#"
    CREATE INDEX IF NOT EXISTS sessions_project ON sessions(project);
    "#,
    // v26: the survey (store::survey) as one row of the database
    // instead of a file beside it: the configuration key it was made for,
    // the generation of the `sources` rows, the newest record and the
    // derived files' sizes and times it holds for, and its stores.
    r#"
    CREATE TABLE IF NOT EXISTS survey(
        id         INTEGER PRIMARY KEY CHECK (id = 0),
        key        BLOB NOT NULL,
        generation INTEGER NOT NULL,
        newest     INTEGER NOT NULL,
        derived    BLOB NOT NULL,
        body       BLOB NOT NULL
    );
    "#,
    // v27: a record in Chinese, Japanese or Korean enters the full-text
    // index with the English words of its character pairs after its text
    // (`text::index_form`); those stored before are indexed again by
    // `fts::reindex_cjk` (their text may be compressed).
    r#"
    INSERT INTO meta(key, value) VALUES ('cjk_reindex', '0')
        ON CONFLICT(key) DO UPDATE SET value = '0';
    "#,
    // v28: the first id of each block of the vector file is read from
    // the file's own checked entry (`vector_file::Scan::block_firsts`);
    // v16's copy of it in the database goes.
    r#"
    DROP TABLE IF EXISTS vector_blocks;
    DELETE FROM meta WHERE key = 'vector_blocks_backfill';
    "#,
    // v29: the sessions by the time of their newest record, so a search
    // filtered on the time alone reads the sessions that may hold a record
    // it allows from an index instead of every row (`Store::
    // allowed_session_runs`). The period query keeps its own index
    // (`store::period`).
    r#"
    CREATE INDEX IF NOT EXISTS sessions_last_ms ON sessions(last_ms);
    "#,
];

/// Whether the database has table `name` (one opened read-only before an
/// upgrade may lack the newer ones).
pub(super) fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
    )?
    .query_row([name], |r| r.get(0))
}

/// The version that rebuilt `records` (and `Store::open` compacts a
/// database upgraded past it).
pub(super) const REBUILT_RECORDS: u32 = 7;

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Brings the database up to [`SCHEMA_VERSION`], refusing a newer one.
///
/// Each step runs in an immediate (write-locked) transaction that re-reads
/// the version first, so two processes opening a fresh database at once
/// apply every migration exactly once: the second waits for the first and
/// then finds nothing left to do.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    loop {
        let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                found: current,
                supported: SCHEMA_VERSION,
            });
        }
        if current == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let locked: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if locked == current {
            tx.execute_batch(MIGRATIONS[current as usize])?;
            tx.pragma_update(None, "user_version", current + 1)?;
        }
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::params;

    /// Asserts that `conn`'s database is at this build's schema version.
    fn assert_current(conn: &Connection) {
        let v: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(v, SCHEMA_VERSION);
    }

    /// Every row `sql` returns, each as a tuple of its columns.
    fn all_rows<T>(conn: &Connection, sql: &str) -> Vec<T>
    where
        T: for<'a> TryFrom<&'a rusqlite::Row<'a>, Error = rusqlite::Error>,
    {
        let mut q = conn.prepare(sql).expect("prepare");
        q.query_map([], |r| T::try_from(r))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    #[test]
    fn v9_finds_the_history_start_through_an_index() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn).expect("migrate");
        let plan: Vec<String> = {
            let mut q = conn
                .prepare("EXPLAIN QUERY PLAN SELECT min(first_ms) FROM sessions")
                .expect("plan");
            q.query_map([], |r| r.get::<_, String>(3))
                .expect("rows")
                .collect::<Result<_, _>>()
                .expect("plan rows")
        };
        assert!(
            plan.iter().any(|p| p.contains("sessions_first_ms")),
            "{plan:?}"
        );
    }

    #[test]
    fn concurrent_migrations_on_a_fresh_file_apply_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("race.db");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut conn = Connection::open(&path).expect("open");
                    conn.busy_timeout(std::time::Duration::from_secs(10))
                        .expect("busy");
                    migrate(&mut conn)
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join").expect("migrate");
        }
        let conn = Connection::open(&path).expect("open");
        assert_current(&conn);
    }

    #[test]
    fn v5_sets_the_full_text_buffer_on_a_v4_database_and_keeps_its_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("v4.db");
        let mut conn = Connection::open(&path).expect("open");
        // A database as v4 left it, with an indexed row.
        for m in &MIGRATIONS[..4] {
            conn.execute_batch(m).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 4)
            .expect("version");
        conn.execute(
            "INSERT INTO fts(rowid, body, files) VALUES (7, 'kept words', '')",
            [],
        )
        .expect("row");
        migrate(&mut conn).expect("migrate");
        let hashsize = |t: &str| -> i64 {
            conn.query_row(
                &format!("SELECT v FROM {t}_config WHERE k = 'hashsize'"),
                [],
                |r| r.get(0),
            )
            .expect("config")
        };
        assert_eq!(
            (hashsize("fts"), hashsize("fts_stem")),
            (16 << 20, 16 << 20)
        );
        // And v12 merges sixteen segments at a time.
        let automerge = |t: &str| -> i64 {
            conn.query_row(
                &format!("SELECT v FROM {t}_config WHERE k = 'automerge'"),
                [],
                |r| r.get(0),
            )
            .expect("config")
        };
        assert_eq!((automerge("fts"), automerge("fts_stem")), (16, 16));
        let hit: i64 = conn
            .query_row("SELECT rowid FROM fts WHERE fts MATCH 'kept'", [], |r| {
                r.get(0)
            })
            .expect("match");
        assert_eq!(hit, 7);
        assert_current(&conn);
    }

    #[test]
    fn v7_rebuilds_records_keeping_ids_origins_and_vectors() {
        let mut conn = Connection::open_in_memory().expect("open");
        // A database as v6 left it, holding records of two origins, their
        // full-text rows and vectors (one examined without a vector).
        for m in &MIGRATIONS[..6] {
            conn.execute_batch(m).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 6)
            .expect("version");
        conn.execute_batch(
            "INSERT INTO origins(node) VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb');
             INSERT INTO sessions(id, agent, session_id, origin) VALUES (1, 'claude-code', 's1', 'x');
             INSERT INTO records(id, hash, session, role, ts, flags, origin, files, text) VALUES
                (3, x'0101010101010101aa', 1, 'user', 10, 1, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'a.rs', CAST('first words' AS BLOB)),
                (5, x'0101010101010101bb', 1, 'tool_output', 20, 0, 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb', '', CAST('second words' AS BLOB)),
                (9, x'0202020202020202cc', 1, 'mystery', NULL, 2, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', '', x'00ff');
             INSERT INTO fts(rowid, body, files) VALUES (3, 'first words', 'a.rs'), (5, 'second words', '');
             INSERT INTO vectors(id, v) VALUES (3, x'0102'), (5, NULL);",
        )
        .expect("rows");
        migrate(&mut conn).expect("migrate");
        type Row = (i64, Vec<u8>, String, String, i64, Vec<u8>);
        let rows: Vec<Row> = all_rows(
            &conn,
            "SELECT r.id, r.hash, r.role, o.node, r.flags, r.text
             FROM records r JOIN origins o ON o.id = r.origin ORDER BY r.id",
        );
        let a = "a".repeat(32);
        let b = "b".repeat(32);
        assert_eq!(
            rows,
            vec![
                (
                    3,
                    b"\x01\x01\x01\x01\x01\x01\x01\x01\xaa".to_vec(),
                    "user".into(),
                    a.clone(),
                    1,
                    b"first words".to_vec()
                ),
                (
                    5,
                    b"\x01\x01\x01\x01\x01\x01\x01\x01\xbb".to_vec(),
                    "tool_output".into(),
                    b.clone(),
                    0,
                    b"second words".to_vec()
                ),
                (
                    9,
                    b"\x02\x02\x02\x02\x02\x02\x02\x02\xcc".to_vec(),
                    "mystery".into(),
                    a,
                    2,
                    vec![0, 0xff]
                ),
            ]
        );
        // origin is stored as a small integer now.
        let kind: String = conn
            .query_row("SELECT typeof(origin) FROM records WHERE id = 3", [], |r| {
                r.get(0)
            })
            .expect("typeof");
        assert_eq!(kind, "integer");
        // Full-text rows still find their records.
        let hit: i64 = conn
            .query_row(
                "SELECT r.id FROM fts JOIN records r ON r.id = fts.rowid WHERE fts MATCH 'second'",
                [],
                |r| r.get(0),
            )
            .expect("match");
        assert_eq!(hit, 5);
        // The vector pass's high-water mark replaces the NULL rows.
        let (upto, rows): (String, i64) = conn
            .query_row(
                "SELECT (SELECT value FROM meta WHERE key = 'vectors_upto'), (SELECT count(*) FROM vectors)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("vectors");
        assert_eq!((upto.as_str(), rows), ("5", 1));
        // The vectors still follow their records, and ids are never reused.
        conn.execute("DELETE FROM records WHERE id IN (3, 9)", [])
            .expect("delete");
        let left: i64 = conn
            .query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))
            .expect("count");
        assert_eq!(left, 0);
        conn.execute(
            "INSERT INTO records(hash, session, role, origin, text) VALUES (x'03', 1, 'user', 1, 'new')",
            [],
        )
        .expect("insert");
        assert_eq!(conn.last_insert_rowid(), 10);
        // Hashes are no longer unique by constraint: the insert path checks.
        let indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' ORDER BY name")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("names");
        assert_eq!(
            indexes,
            ["records_hash8", "records_session", "records_source"]
        );
    }

    #[test]
    fn v7_record_look_ups_by_hash_use_the_short_index() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn).expect("migrate");
        // What `cairn forget` previews for a record by hash.
        let candidates = format!(
            "SELECT r.hash FROM ({}) d JOIN records r ON r.id = d.id
             JOIN sessions s ON s.id = r.session",
            super::super::forget::PURGE_BY_HASH
        );
        for sql in [
            super::super::log::RECORD_ID,
            super::super::forget::PURGE_BY_HASH,
            candidates.as_str(),
        ] {
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("explain");
            let nulls = vec![rusqlite::types::Value::Null; stmt.parameter_count()];
            let plan: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
                .expect("plan")
                .collect::<Result<_, _>>()
                .expect("rows");
            assert!(
                plan.iter().any(|p| p.contains("records_hash8")),
                "{sql}: {plan:?}"
            );
            assert!(
                !plan.iter().any(|p| p == "SCAN r" || p == "SCAN records"),
                "{sql}: {plan:?}"
            );
        }
    }

    /// The plan of `sql` (with every parameter NULL), one line per step.
    fn plan(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("explain");
        let nulls = vec![rusqlite::types::Value::Null; stmt.parameter_count()];
        stmt.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
            .expect("plan")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    #[test]
    fn v8_slot_look_ups_use_an_index_never_a_scan() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn).expect("migrate");
        // The trigger `logs_follow_records` runs this statement.
        let follow = "UPDATE logs SET hash = ?1, rec = NULL WHERE rec = ?2";
        for (sql, index) in [
            (super::super::log::BACKFILL, "logs_rec"),
            (super::super::log::OWN_LOG_HAS, "logs_rec"),
            (super::super::log::OWN_LOG_HAS, "logs_unheld"),
            (super::super::log::REVIVE, "logs_unheld"),
            (super::super::forget::MARK_FORGOTTEN, "logs_unheld"),
            (
                "SELECT EXISTS(SELECT 1 FROM logs WHERE kind = 0 AND hash IS NOT NULL)",
                "logs_unheld",
            ),
            (follow, "logs_rec"),
            (super::super::log::RECORD_ID, "records_hash8"),
            // Serving reads slots by key and each held record by row id.
            (super::super::log::SERVE_PULL, "PRIMARY KEY"),
        ] {
            let plan = plan(&conn, sql);
            assert!(plan.iter().any(|p| p.contains(index)), "{sql}: {plan:?}");
            assert!(
                !plan
                    .iter()
                    .any(|p| p.starts_with("SCAN l") || p == "SCAN records"),
                "{sql}: {plan:?}"
            );
        }
    }

    /// A slot as v8 stores it: (origin node, epoch, seq, kind, rec, hash).
    type Slot = (String, i64, i64, i64, Option<i64>, Option<Vec<u8>>);

    #[test]
    fn v8_turns_held_record_slots_into_row_ids_and_keeps_every_other_hash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut conn = Connection::open(dir.path().join("v7.db")).expect("open");
        for m in &MIGRATIONS[..7] {
            conn.execute_batch(m).expect("old migration");
        }
        conn.pragma_update(None, "user_version", 7)
            .expect("version");
        let h = |b: u8| vec![b; 32];
        conn.execute_batch(
            "INSERT INTO sessions(id, agent, session_id, origin) VALUES (1, 'a', 's', 'own');
             INSERT INTO origins(id, node) VALUES (1, 'own'), (2, 'peer');",
        )
        .expect("rows");
        for (id, hash) in [(1, h(1)), (2, h(2)), (5, h(5))] {
            conn.execute(
                "INSERT INTO records(id, hash, session, role, origin, text)
                 VALUES (?1, ?2, 1, 'user', 1, 'x')",
                params![id, hash],
            )
            .expect("record");
        }
        // (origin, epoch, seq, kind, hash): every kind, a record held under
        // two logs, a record slot whose record is gone, three logs.
        let slots = [
            (1, 100, 1, 0, h(1)),
            (1, 100, 2, 0, h(9)),
            (1, 100, 3, 1, h(0x71)),
            (1, 100, 4, 3, h(8)),
            (2, 200, 1, 0, h(1)),
            (2, 200, 2, 2, h(7)),
            (2, 200, 3, 0, h(2)),
            (2, 300, 1, 0, h(5)),
        ];
        for (origin, epoch, seq, kind, hash) in &slots {
            conn.execute(
                "INSERT INTO logs(origin, epoch, seq, kind, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![origin, epoch, seq, kind, hash],
            )
            .expect("slot");
        }
        migrate(&mut conn).expect("migrate");
        let rows = |conn: &Connection| -> Vec<Slot> {
            all_rows(
                conn,
                "SELECT o.node, g.epoch, l.seq, l.kind, l.rec, l.hash
                 FROM logs l JOIN origin_logs g ON g.id = l.log
                 JOIN origins o ON o.id = g.origin ORDER BY o.node, g.epoch, l.seq",
            )
        };
        let s = |o: &str, e, q, k, rec: Option<i64>, hash: Option<u8>| {
            (o.to_owned(), e, q, k, rec, hash.map(h))
        };
        assert_eq!(
            rows(&conn),
            vec![
                s("own", 100, 1, 0, Some(1), None),
                s("own", 100, 2, 0, None, Some(9)),
                s("own", 100, 3, 1, None, Some(0x71)),
                s("own", 100, 4, 3, None, Some(8)),
                s("peer", 200, 1, 0, Some(1), None),
                s("peer", 200, 2, 2, None, Some(7)),
                s("peer", 200, 3, 0, Some(2), None),
                s("peer", 300, 1, 0, Some(5), None),
            ]
        );
        // Deleting a record puts its hash back into every slot naming it.
        conn.execute("DELETE FROM records WHERE id = 1", [])
            .expect("delete");
        let after = rows(&conn);
        assert_eq!(after[0], s("own", 100, 1, 0, None, Some(1)));
        assert_eq!(after[4], s("peer", 200, 1, 0, None, Some(1)));
        assert_eq!(after[6], s("peer", 200, 3, 0, Some(2), None));
        // Stored again, it is named by row id again; other kinds stay.
        conn.execute(
            "INSERT INTO records(id, hash, session, role, origin, text)
             VALUES (10, ?1, 1, 'user', 1, 'x')",
            [h(1)],
        )
        .expect("again");
        super::super::log::revive(&conn, 10, &[1; 32]).expect("revive");
        let again = rows(&conn);
        assert_eq!(again[0], s("own", 100, 1, 0, Some(10), None));
        assert_eq!(again[4], s("peer", 200, 1, 0, Some(10), None));
        assert_eq!(again[3], s("own", 100, 4, 3, None, Some(8)));
        assert_current(&conn);
    }

    #[test]
    fn a_database_upgraded_past_the_records_rebuild_is_compacted_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("v6.db");
        {
            let mut conn = Connection::open(&path).expect("open");
            conn.pragma_update(None, "journal_mode", "WAL")
                .expect("wal");
            let tx = conn.transaction().expect("tx");
            for m in &MIGRATIONS[..6] {
                tx.execute_batch(m).expect("old migration");
            }
            tx.execute_batch(
                "INSERT INTO sessions(id, agent, session_id, origin) VALUES (1, 'claude-code', 's1', 'x');",
            )
            .expect("session");
            for i in 0..3000i64 {
                tx.execute(
                    "INSERT INTO records(hash, session, role, origin, text) VALUES (?1, 1, 'user', ?2, ?3)",
                    rusqlite::params![
                        i.to_le_bytes().to_vec(),
                        "a".repeat(32),
                        format!("words {i} ").repeat(60).into_bytes()
                    ],
                )
                .expect("record");
            }
            tx.pragma_update(None, "user_version", 6).expect("version");
            tx.commit().expect("commit");
        }
        // The front end is told before the one-time rewrite starts.
        static NOTICES: std::sync::Mutex<Vec<(std::path::PathBuf, u32, u32)>> =
            std::sync::Mutex::new(Vec::new());
        fn notice(db: &std::path::Path, from: u32, to: u32) {
            NOTICES
                .lock()
                .expect("notices")
                .push((db.to_path_buf(), from, to));
        }
        super::super::set_upgrade_notice(notice);
        let told = || -> Vec<(u32, u32)> {
            let all = NOTICES.lock().expect("notices");
            all.iter()
                .filter(|n| n.0 == path)
                .map(|n| (n.1, n.2))
                .collect()
        };
        let store = super::super::Store::open(&path).expect("upgrade");
        assert_eq!(told(), [(6, SCHEMA_VERSION)]);
        let (version, free, records): (u32, i64, i64) = store
            .conn()
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version),
                        (SELECT freelist_count FROM pragma_freelist_count),
                        (SELECT count(*) FROM records)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("state");
        assert_eq!((version, free, records), (SCHEMA_VERSION, 0, 3000));
        // Once: the next open has nothing to upgrade.
        drop(store);
        super::super::Store::open(&path).expect("reopen");
        assert_eq!(told(), [(6, SCHEMA_VERSION)]);
    }
}
