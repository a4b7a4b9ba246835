//! Each record's time and decision mark, eight bytes a record in rows of
//! [`BLOCK`] records by id (table `record_times`), which search reads
//! without the record's row.
//!
//! A search filtered on the time could rule out the sessions that ended
//! before it (`search::screen`), but the records of the sessions that
//! did not still had their rows read one by one: at 10 GB a question
//! about the last two weeks read 8,000 rows, most of its 43 ms. The
//! ranker needs each candidate's time and decision mark too, and read
//! them with its role and session from `records`, whose rows hold the
//! text: at 10 GB that table is 2.4 GB, and a fresh process read two of
//! its pages per candidate (a leaf and an interior page no other
//! candidate shared). Here 256 records share a row of 2 KiB, a table of
//! a fiftieth of the size.
//!
//! A word ([`Stamp::word`]) holds, from its lowest bit: 1 (known), the
//! decision mark (`codec::DECISION`), whether the record is dated, then
//! its time in Unix ms (signed). 0 means "not known": a record stored
//! before the table existed and not yet backfilled, a forgotten one, a
//! time too far out to fit, or a damaged row. A reader then asks
//! `records`, so a missing word costs speed, never a different answer.
//! Words are written in the same transaction as their record
//! ([`Pending`]) and cleared whenever it is deleted ([`clear`]); a
//! record's time and flags never change.

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreError, codec};

/// Records per row of `record_times`.
pub(crate) const BLOCK: i64 = 256;

/// Bytes per record.
const WORD: usize = 8;

/// Bytes of a whole row.
const ROW: usize = BLOCK as usize * WORD;

/// What the table says of a record: its time (Unix ms; `None` for an
/// undated record) and whether it carries the decision mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) ts: Option<i64>,
    pub(crate) decision: bool,
}

const KNOWN: u64 = 1;
const DECISION: u64 = 1 << 1;
const DATED: u64 = 1 << 2;
/// The bits below the time.
const SHIFT: u32 = 3;

impl Stamp {
    /// The stamp of a record's `ts` and `flags` columns.
    pub(crate) fn of(ts: Option<i64>, flags: i64) -> Stamp {
        Stamp {
            ts,
            decision: flags & codec::DECISION != 0,
        }
    }

    /// Its word; 0 (not known) for a time too far from 1970 to fit in the
    /// word's 61 bits (about 36 million years either way).
    pub(crate) fn word(self) -> u64 {
        let mut w = KNOWN;
        if self.decision {
            w |= DECISION;
        }
        if let Some(ts) = self.ts {
            let fits = ts.checked_shl(SHIFT).is_some_and(|s| s >> SHIFT == ts);
            if !fits {
                return 0;
            }
            w |= DATED | ((ts << SHIFT) as u64);
        }
        w
    }

    /// The stamp a word holds; `None` for a word that says nothing (0), or
    /// one no writer makes (bits set beyond what it marks).
    pub(crate) fn from_word(w: u64) -> Option<Stamp> {
        if w & KNOWN == 0 {
            return None;
        }
        let dated = w & DATED != 0;
        if !dated && w >> SHIFT != 0 {
            return None;
        }
        Some(Stamp {
            ts: dated.then_some((w as i64) >> SHIFT),
            decision: w & DECISION != 0,
        })
    }
}

/// The block of record `id` and its place within it.
fn place(id: i64) -> (i64, usize) {
    super::blocks::place::<BLOCK>(id)
}

/// Word `at` of a row.
fn word_at(row: &[u8], at: usize) -> u64 {
    let mut b = [0u8; WORD];
    b.copy_from_slice(&row[at * WORD..(at + 1) * WORD]);
    u64::from_le_bytes(b)
}

/// Sets word `at` of a row.
fn set_word(row: &mut [u8], at: usize, w: u64) {
    row[at * WORD..(at + 1) * WORD].copy_from_slice(&w.to_le_bytes());
}

/// The stored row of `block`, all unknown when damaged; `None` without one.
fn stored(conn: &Connection, block: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT times FROM record_times WHERE block = ?1")?
        .query_row([block], |r| {
            Ok(match r.get_ref(0)?.as_blob() {
                Ok(b) if b.len() == ROW => b.to_vec(),
                _ => vec![0; ROW],
            })
        })
        .optional()
}

/// Changes a block's row through `edit`; a block with no row yet is made,
/// all unknown, only when `create` says so.
fn patch(
    conn: &Connection,
    block: i64,
    create: bool,
    edit: impl FnOnce(&mut [u8]),
) -> Result<(), StoreError> {
    let mut row = match stored(conn, block)? {
        Some(row) => row,
        None if create => vec![0; ROW],
        None => return Ok(()),
    };
    edit(&mut row);
    conn.prepare_cached("INSERT OR REPLACE INTO record_times(block, times) VALUES (?1, ?2)")?
        .execute(params![block, row])?;
    Ok(())
}

/// Words of records inserted in the current transaction, written by
/// [`Pending::write`] before it commits.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The word of each record.
    noted: super::blocks::Noted<u64, BLOCK>,
}

impl Pending {
    /// Notes record `id`'s stamp.
    pub(crate) fn add(&mut self, id: i64, stamp: Stamp) {
        let w = stamp.word();
        if w == 0 {
            return;
        }
        self.noted.note(id, w);
    }

    /// Drops what was noted of record `id`.
    pub(crate) fn forget(&mut self, id: i64) {
        self.noted.forget(id);
    }

    /// Writes what was noted (one read and one write per block touched)
    /// and forgets it.
    pub(crate) fn write(&mut self, conn: &Connection) -> Result<(), StoreError> {
        for (block, words) in self.noted.take() {
            patch(conn, block, true, |row| {
                for (at, w) in words {
                    set_word(row, at, w);
                }
            })?;
        }
        Ok(())
    }
}

/// Makes the words of records `ids` unknown again (a forget leaves no
/// trace of a record).
pub(crate) fn clear(
    conn: &Connection,
    ids: impl IntoIterator<Item = i64>,
) -> Result<(), StoreError> {
    for (block, ats) in super::blocks::by_block::<BLOCK>(ids) {
        patch(conn, block, false, |row| {
            for at in ats {
                set_word(row, at, 0);
            }
        })?;
    }
    Ok(())
}

/// The `meta` row that marks the backfill as pending.
const PENDING: &str = "times_backfill";

/// Records per backfill transaction.
const BACKFILL_BATCH: i64 = 50_000;

/// Fills in the words of records stored before the table existed (v21),
/// resuming from the id saved in `meta.times_backfill`. Returns how many
/// records it filled in.
pub(crate) fn backfill(conn: &mut Connection) -> Result<u64, StoreError> {
    let mut filled = 0u64;
    super::backfill::in_batches(conn, PENDING, |tx, from| {
        let mut batch = Pending::default();
        let mut last = None;
        {
            let mut stmt = tx.prepare_cached(
                "SELECT id, ts, flags FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
            )?;
            let mut rows = stmt.query(params![from, BACKFILL_BATCH])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                batch.add(id, Stamp::of(r.get(1)?, r.get(2)?));
                filled += 1;
                last = Some(id);
            }
        }
        batch.write(tx)?;
        Ok(last)
    })?;
    Ok(filled)
}

/// Every record within `within` (ascending, disjoint ranges of ids) dated
/// at or after `since` (Unix ms), as ranges of ids handed to `add` in
/// ascending order; `None` while the stamps are being filled in or the
/// table is missing (the caller then reads the rows). Where a stamp is not
/// known, the records of that stretch are read from `records` (see
/// `blocks::wanted_within`).
pub(crate) fn dated_since(
    conn: &Connection,
    within: &[(i64, i64)],
    since: i64,
    add: impl FnMut(i64, i64),
) -> Result<Option<()>, StoreError> {
    if !super::backfill::done(conn, "record_times", PENDING)? {
        return Ok(None);
    }
    super::blocks::wanted_within::<BLOCK>(
        conn,
        within,
        super::blocks::Sides {
            blocks: "SELECT block, times FROM record_times WHERE block BETWEEN ?1 AND ?2 ORDER BY block",
            width: WORD,
            rows: "SELECT id, ts FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
        },
        |w| Stamp::from_word(word_at(w, 0)).map(|s| s.ts.is_some_and(|ts| ts >= since)),
        |r| Ok(r.get::<_, Option<i64>>(1)?.is_some_and(|ts| ts >= since)),
        add,
    )?;
    Ok(Some(()))
}

/// Blocks a [`Reader`] keeps (2 KiB each): 8 MiB at most, however many a
/// search reads.
const KEPT_BLOCKS: usize = 4096;

/// Reads stamps for one search, each block once while it is kept.
pub(crate) struct Reader<'c> {
    /// A block's row; `None` on a database too old to have the table
    /// (opened read-only).
    row: Option<rusqlite::CachedStatement<'c>>,
    /// Blocks read; `None` for one with no row.
    kept: rustc_hash::FxHashMap<i64, Option<Box<[u8]>>>,
}

impl<'c> Reader<'c> {
    /// A reader of `conn`'s stamps.
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<Self> {
        let row = match super::schema::has_table(conn, "record_times")? {
            true => Some(conn.prepare_cached("SELECT times FROM record_times WHERE block = ?1")?),
            false => None,
        };
        Ok(Reader {
            row,
            kept: Default::default(),
        })
    }

    /// Record `id`'s stamp; `None` when not known (the caller reads the
    /// record's row instead).
    pub(crate) fn stamp(&mut self, id: i64) -> rusqlite::Result<Option<Stamp>> {
        let (block, at) = place(id);
        let Some(stmt) = &mut self.row else {
            return Ok(None);
        };
        if !self.kept.contains_key(&block) {
            if self.kept.len() >= KEPT_BLOCKS {
                // Bounded: a search that reads more starts afresh.
                self.kept.clear();
            }
            let row = stmt
                .query_row([block], |r| {
                    Ok(match r.get_ref(0)?.as_blob() {
                        Ok(b) if b.len() == ROW => Some(Box::from(b)),
                        _ => None,
                    })
                })
                .optional()?
                .flatten();
            self.kept.insert(block, row);
        }
        Ok(match self.kept.get(&block) {
            Some(Some(row)) => Stamp::from_word(word_at(row, at)),
            _ => None,
        })
    }
}

/// Every record's known stamp, by id.
#[cfg(test)]
pub(crate) fn held(conn: &Connection) -> Vec<(i64, Stamp)> {
    let mut stmt = conn
        .prepare("SELECT block, times FROM record_times ORDER BY block")
        .expect("times");
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .expect("rows");
    let mut out = Vec::new();
    for row in rows {
        let (block, bytes) = row.expect("row");
        if bytes.len() != ROW {
            continue;
        }
        for at in 0..BLOCK as usize {
            if let Some(s) = Stamp::from_word(word_at(&bytes, at)) {
                out.push((block * BLOCK + at as i64, s));
            }
        }
    }
    out
}

/// What [`held`] should be: every record's stamp, from its row.
#[cfg(test)]
pub(crate) fn expected(conn: &Connection) -> Vec<(i64, Stamp)> {
    let mut stmt = conn
        .prepare("SELECT id, ts, flags FROM records ORDER BY id")
        .expect("records");
    stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, Stamp::of(r.get(1)?, r.get(2)?)))
    })
    .expect("rows")
    .map(|r| r.expect("row"))
    .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::Role;

    #[test]
    fn words_give_back_the_stamp_they_were_made_from() {
        let times = [
            None,
            Some(0),
            Some(1),
            Some(-1),
            Some(1_767_225_600_123),
            Some(-62_135_596_800_000),
            Some((1 << 60) - 1),
            Some(-(1 << 60)),
        ];
        for ts in times {
            for decision in [false, true] {
                let s = Stamp { ts, decision };
                let w = s.word();
                assert_ne!(w, 0, "{s:?}");
                assert_eq!(Stamp::from_word(w), Some(s), "{s:?} → {w:#x}");
            }
        }
        // Too far out to fit: not known, so read from the row.
        for ts in [1 << 60, -(1 << 60) - 1, i64::MAX, i64::MIN] {
            assert_eq!(Stamp::of(Some(ts), 0).word(), 0, "{ts}");
        }
        assert_eq!(Stamp::from_word(0), None);
        // An undated word with time bits set is none a writer makes.
        assert_eq!(Stamp::from_word(KNOWN | (5 << SHIFT)), None);
        assert_eq!(
            Stamp::of(Some(7), codec::DECISION | codec::COMPRESSED),
            Stamp {
                ts: Some(7),
                decision: true
            }
        );
    }

    /// A Claude Code record of `session` with `role`, time `ts` and `text`.
    pub(crate) fn record(
        session: &str,
        role: Role,
        ts: Option<i64>,
        text: &str,
    ) -> crate::record::Record {
        let mut r = crate::record::Record::new("claude-code", session, role, text);
        r.time_ms = ts;
        r
    }

    /// The `i`th of a run of records in seven sessions, undated ones, old
    /// ones and decisions among them, in the first `roles` roles in turn.
    pub(crate) fn varied(i: i64, roles: usize) -> crate::record::Record {
        let ts = match i % 5 {
            0 => None,
            1 => Some(-86_400_000 * i),
            _ => Some(1_767_225_600_000 + 61_000 * i),
        };
        let text = match i % 4 {
            0 => format!("we decided to pin hyper to 0.14, note {i}"),
            _ => format!("the queue worker retries the job, line {i}"),
        };
        record(
            &format!("s{}", i % 7),
            Role::ALL[i as usize % roles],
            ts,
            &text,
        )
    }

    /// Stores three lines of one file (`/tmp/x.jsonl`) through `ing`;
    /// returns the file's source id and the hashes a rewrite keeps (the
    /// first line's), for `retain_source_records` to delete the other two.
    pub(crate) fn three_lines_of_a_file(
        ing: &mut crate::store::Ingest<'_>,
    ) -> (i64, std::collections::HashSet<[u8; 32]>) {
        let src = ing
            .source("claude-code", "/tmp/x.jsonl", "lines")
            .expect("source");
        for i in 0..3 {
            let r = record(
                "rewritten",
                Role::User,
                Some(5_000 + i),
                &format!("line {i}"),
            );
            ing.insert(&r, Some(src.id)).expect("insert");
        }
        let keep = [record("rewritten", Role::User, Some(5_000), "line 0").content_hash()]
            .into_iter()
            .collect();
        (src.id, keep)
    }

    /// Asserts that a fresh reader gives every record of `want` its stamp
    /// where `known` says the table knows it, and nothing elsewhere.
    fn reads_as(conn: &Connection, want: &[(i64, Stamp)], known: impl Fn(i64) -> bool, what: &str) {
        let mut reader = Reader::new(conn).expect("reader");
        for (id, s) in want {
            let got = reader.stamp(*id).expect("stamp");
            assert_eq!(got, known(*id).then_some(*s), "{what}: record {id}");
        }
    }

    /// Asserts that [`dated_since`] finds, for several times and ranges of
    /// ids, the records their rows date at or after the time, in ascending
    /// ranges.
    fn dates_what_the_rows_hold(conn: &Connection, what: &str) {
        let rows = expected(conn);
        let top = rows.last().map_or(0, |r| r.0);
        // Stretches that start and end inside blocks, touch, span block
        // boundaries and the end of the records.
        let within = [
            vec![(1, top + 100)],
            vec![(3, 40), (41, 41), (200, 700), (1_000, top + 10)],
        ];
        let times = [i64::MIN, 0, 1_767_225_600_000 + 61_000 * 700, i64::MAX];
        for within in &within {
            for since in times {
                let mut got: Vec<i64> = Vec::new();
                let done = dated_since(conn, within, since, |first, last| {
                    assert!(first <= last, "{what}: {first}..={last}");
                    assert!(got.last().is_none_or(|&l| l < first), "{what}: order");
                    got.extend(first..=last);
                })
                .expect("dated since");
                assert_eq!(done, Some(()), "{what}");
                let want: Vec<i64> = rows
                    .iter()
                    .filter(|r| within.iter().any(|w| w.0 <= r.0 && r.0 <= w.1))
                    .filter(|r| r.1.ts.is_some_and(|ts| ts >= since))
                    .map(|r| r.0)
                    .collect();
                assert_eq!(got, want, "{what}: since {since} within {within:?}");
            }
        }
    }

    #[test]
    fn stamps_follow_inserts_backfills_and_deletes() {
        use crate::store::Store;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let mut store = Store::open(&path).expect("open");
        let origin = cairn_protocol::NodeId([7; 20]).to_string();
        store.ensure_log(&origin, 1_000).expect("own log");
        let mut ing = store.ingest(&origin).expect("ingest");
        for i in 0..1_300i64 {
            ing.insert(&varied(i, 4), None).expect("insert");
        }
        ing.commit().expect("commit");
        let conn = store.conn();
        let want = expected(conn);
        assert_eq!(want.len(), 1_300);
        assert!(want.iter().any(|w| w.1.decision), "decisions");
        assert!(want.iter().any(|w| !w.1.decision), "others");
        assert!(want.iter().any(|w| w.1.ts.is_none()), "undated");
        assert_eq!(held(conn), want, "written with their records");
        reads_as(conn, &want, |_| true, "written");
        dates_what_the_rows_hold(conn, "written");
        // An id past the last record: nothing.
        let top = want.last().expect("records").0;
        assert_eq!(
            Reader::new(conn).expect("r").stamp(top + 1).expect("s"),
            None
        );

        // A missing block and a damaged one read as unknown; a later write
        // into the damaged one starts it afresh.
        conn.execute_batch(
            "DELETE FROM record_times WHERE block = 1;
             UPDATE record_times SET times = x'0102' WHERE block = 2;",
        )
        .expect("damage");
        let block = |id: i64| id.div_euclid(BLOCK);
        reads_as(conn, &want, |id| !matches!(block(id), 1 | 2), "damaged");
        dates_what_the_rows_hold(conn, "damaged");
        clear(conn, [2 * BLOCK]).expect("clear into a damaged row");
        let row: Vec<u8> = conn
            .query_row("SELECT times FROM record_times WHERE block = 2", [], |r| {
                r.get(0)
            })
            .expect("row");
        assert_eq!(row, vec![0; ROW]);

        // A database from before the table: backfilled when opened.
        conn.execute_batch(
            "DELETE FROM record_times;
             INSERT INTO meta(key, value) VALUES ('times_backfill', '0');",
        )
        .expect("older");
        reads_as(conn, &want, |_| false, "before the backfill");
        let pending = dated_since(conn, &[(1, 100)], 0, |_, _| {}).expect("pending");
        assert_eq!(pending, None, "while the stamps are filled in");
        drop(store);
        let mut store = Store::open(&path).expect("reopen");
        assert_eq!(held(store.conn()), want, "backfilled");
        let pending: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM meta WHERE key = 'times_backfill'",
                [],
                |r| r.get(0),
            )
            .expect("marker");
        assert_eq!(pending, 0, "done");

        // A forgotten record leaves no word behind.
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let report = store.forget(&[target], 2_000).expect("forget");
        assert!(report.records > 150);
        let left = expected(store.conn());
        assert_eq!(left.len(), 1_300 - report.records as usize);
        assert_eq!(held(store.conn()), left, "forgotten");
        dates_what_the_rows_hold(store.conn(), "forgotten");

        // Nor does one a rewritten file no longer holds, including one
        // deleted in the transaction that stored it.
        {
            let mut ing = store.ingest(&origin).expect("ingest");
            let (src, keep) = three_lines_of_a_file(&mut ing);
            assert_eq!(ing.retain_source_records(src, &keep).expect("retain"), 2);
            ing.commit().expect("commit");
        }
        let left = expected(store.conn());
        assert_eq!(held(store.conn()), left, "a rewrite");

        // A database from before the table, opened read-only (so never
        // migrated): nothing is known, and nothing fails.
        store
            .conn()
            .execute_batch("DROP TABLE record_times;")
            .expect("drop the table");
        reads_as(store.conn(), &left, |_| false, "no table");
    }

    #[test]
    fn a_reader_past_its_bound_still_reads_every_stamp() {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(
            "CREATE TABLE record_times(block INTEGER PRIMARY KEY, times BLOB NOT NULL);",
        )
        .expect("table");
        let mut p = Pending::default();
        let ids: Vec<i64> = (0..(KEPT_BLOCKS as i64 + 10))
            .map(|b| b * BLOCK + b % 7)
            .collect();
        for &id in &ids {
            p.add(id, Stamp::of(Some(id * 3), id % 2));
        }
        p.write(&conn).expect("write");
        let mut reader = Reader::new(&conn).expect("reader");
        // Twice over, the second time after the first blocks were let go.
        for _ in 0..2 {
            for &id in &ids {
                assert_eq!(
                    reader.stamp(id).expect("stamp"),
                    Some(Stamp::of(Some(id * 3), id % 2)),
                    "{id}"
                );
                assert_eq!(reader.stamp(id + 1).expect("stamp"), None, "{id} + 1");
            }
        }
        assert!(reader.kept.len() <= KEPT_BLOCKS);
    }
}
