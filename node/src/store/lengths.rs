//! How long each record's text is, for ranking: one byte per record, in
//! blocks of [`BLOCK`] records by id (table `record_lengths`).
//!
//! Search scores a word's matches by BM25 with a term frequency of one,
//! which needs each match's length against the others'. FTS5's `bm25()`
//! reads every match's row of `fts_docsize`, and `records` is wider
//! still: a word matching thousands of records spread over a large
//! history cost one page read per match (4 µs each at 10 GB, in a fresh
//! process). Here a thousand records' lengths share a row of 1 KiB, so
//! the matches of a word share pages, and one query's words share them
//! too.
//!
//! A byte holds the length's class: the length in bytes of the record's
//! plain text on a scale of 10% steps (see [`class_of`]), which is finer
//! than ranking needs. Class 0 means "not known": a record stored before
//! the table existed and not yet backfilled, or a forgotten one. The
//! reader then asks `records`, so a missing byte costs speed, never a
//! different answer. A byte is written in the same transaction as its
//! record (see [`Pending`]) and never changes, since a record's text
//! never does.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreError, codec};

/// Records per row of `record_lengths`.
pub(crate) const BLOCK: i64 = 1024;

/// The ratio between the lengths of two neighbouring classes.
const STEP: f64 = 1.1;

/// The class of a text `len` bytes long: 1 for an empty one, then one
/// more for every 10% of length, up to 255 (about 2.6 · 10¹⁰ bytes, far
/// beyond what a record holds).
pub(crate) fn class_of(len: usize) -> u8 {
    let c = 1.0 + ((len as f64) + 1.0).ln() / STEP.ln();
    c.round().clamp(1.0, 255.0) as u8
}

/// The length a class stands for (the middle of its range, in bytes);
/// `None` for class 0, "not known".
pub(crate) fn length_of(class: u8) -> Option<f64> {
    // Worked out once: a search asks for thousands.
    static LENGTHS: std::sync::LazyLock<[f64; 256]> =
        std::sync::LazyLock::new(|| std::array::from_fn(|c| STEP.powf(c as f64 - 1.0) - 1.0));
    (class > 0).then(|| LENGTHS[usize::from(class)])
}

/// The block of record `id` and its byte within it.
fn place(id: i64) -> (i64, usize) {
    (id.div_euclid(BLOCK), id.rem_euclid(BLOCK) as usize)
}

/// Lengths of records inserted in the current transaction, written to
/// `record_lengths` by [`Pending::write`] before it commits.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    by_block: BTreeMap<i64, Vec<(usize, u8)>>,
}

impl Pending {
    /// Notes that record `id`'s plain text is `len` bytes long.
    pub(crate) fn add(&mut self, id: i64, len: usize) {
        let (block, at) = place(id);
        self.by_block
            .entry(block)
            .or_default()
            .push((at, class_of(len)));
    }

    /// Writes what was noted (one read and one write per block touched)
    /// and forgets it.
    pub(crate) fn write(&mut self, conn: &Connection) -> Result<(), StoreError> {
        for (block, bytes) in std::mem::take(&mut self.by_block) {
            patch(conn, block, true, |lens| {
                for (at, class) in bytes {
                    lens[at] = class;
                }
            })?;
        }
        Ok(())
    }
}

/// A row's bytes, or none for a value that is not a blob (a damaged row
/// then counts as all unknown: see the module's notes).
fn row_bytes(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(r.get_ref(0)?.as_blob().ok().map(<[u8]>::to_vec))
}

/// Changes a block's bytes through `edit` (a damaged block starts all
/// unknown). A block not stored yet is made, all unknown, only when
/// `create` says so.
fn patch(
    conn: &Connection,
    block: i64,
    create: bool,
    edit: impl FnOnce(&mut [u8]),
) -> Result<(), StoreError> {
    let stored: Option<Option<Vec<u8>>> = conn
        .prepare_cached("SELECT lens FROM record_lengths WHERE block = ?1")?
        .query_row([block], row_bytes)
        .optional()?;
    if stored.is_none() && !create {
        return Ok(());
    }
    let mut lens = stored.flatten().unwrap_or_default();
    lens.resize(BLOCK as usize, 0);
    edit(&mut lens);
    conn.prepare_cached("INSERT OR REPLACE INTO record_lengths(block, lens) VALUES (?1, ?2)")?
        .execute(params![block, lens])?;
    Ok(())
}

/// Makes the lengths of records `ids` unknown again (a forget leaves no
/// trace of a record, its length included): one read and write per row
/// touched.
pub(crate) fn clear(
    conn: &Connection,
    ids: impl IntoIterator<Item = i64>,
) -> Result<(), StoreError> {
    let mut by_block: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for id in ids {
        let (block, at) = place(id);
        by_block.entry(block).or_default().push(at);
    }
    for (block, ats) in by_block {
        patch(conn, block, false, |lens| {
            for at in ats {
                lens[at] = 0;
            }
        })?;
    }
    Ok(())
}

/// The plain text's length of a stored `text` value, from its bytes and
/// the row's `flags`, without decompressing it (a zstd frame states its
/// size). `None` for a value that cannot say.
fn plain_len(text: &[u8], flags: i64) -> Option<usize> {
    match flags & codec::ENCODING {
        0 => Some(text.len()),
        _ => zstd::zstd_safe::get_frame_content_size(text)
            .ok()
            .flatten()
            .map(|n| n as usize),
    }
}

/// [`plain_len`] of a `text` column's value (older databases hold some
/// as SQL text, newer ones as blobs).
fn stored_len(text: rusqlite::types::ValueRef<'_>, flags: i64) -> Option<usize> {
    use rusqlite::types::ValueRef;
    match text {
        ValueRef::Blob(b) | ValueRef::Text(b) => plain_len(b, flags),
        _ => None,
    }
}

/// Records per backfill transaction.
const BACKFILL_BATCH: i64 = 50_000;

/// Fills in the lengths of records stored before `record_lengths`
/// existed, resuming from the id saved in `meta.lengths_backfill` (see
/// `store::backfill`). Returns how many records it filled in.
pub(crate) fn backfill(conn: &mut Connection) -> Result<u64, StoreError> {
    let mut filled = 0u64;
    super::backfill::in_batches(conn, "lengths_backfill", |tx, from| {
        let mut batch = Pending::default();
        let mut last = None;
        {
            let mut stmt = tx.prepare_cached(
                "SELECT id, flags, text FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
            )?;
            let mut rows = stmt.query(params![from, BACKFILL_BATCH])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                if let Some(len) = stored_len(r.get_ref(2)?, r.get(1)?) {
                    batch.add(id, len);
                    filled += 1;
                }
                last = Some(id);
            }
        }
        batch.write(tx)?;
        Ok(last)
    })?;
    Ok(filled)
}

/// Blocks whose lengths [`Reader::typical`] averages: the newest 65,536
/// records.
const TYPICAL_BLOCKS: i64 = 64;

/// Reads record lengths for one search, each block once.
pub(crate) struct Reader<'c> {
    conn: &'c Connection,
    /// A block's row; `None` on a database too old to have the table
    /// (opened read-only).
    block: Option<rusqlite::CachedStatement<'c>>,
    /// The blocks read so far (`None`: no row).
    blocks: rustc_hash::FxHashMap<i64, Option<Vec<u8>>>,
    /// [`Reader::typical`], once read.
    typical: Option<Option<f64>>,
}

impl<'c> Reader<'c> {
    /// A reader of `conn`'s lengths.
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<Self> {
        let has_table = conn
            .prepare_cached(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'record_lengths'",
            )?
            .query_row([], |r| r.get::<_, i64>(0))?
            > 0;
        let block = match has_table {
            true => Some(conn.prepare_cached("SELECT lens FROM record_lengths WHERE block = ?1")?),
            false => None,
        };
        Ok(Reader {
            conn,
            block,
            blocks: Default::default(),
            typical: None,
        })
    }

    /// The average length of the newest records (those of the last
    /// [`TYPICAL_BLOCKS`] blocks, so the cost is the same at any size of
    /// history), which BM25 measures each match's length against; `None`
    /// when no length is known.
    pub(crate) fn typical(&mut self) -> rusqlite::Result<Option<f64>> {
        if let Some(t) = self.typical {
            return Ok(t);
        }
        let mut sum = 0.0;
        let mut n = 0u64;
        if self.block.is_some() {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT lens FROM record_lengths ORDER BY block DESC LIMIT ?1")?;
            let mut rows = stmt.query([TYPICAL_BLOCKS])?;
            while let Some(r) = rows.next()? {
                for len in row_bytes(r)?
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|c| length_of(*c))
                {
                    sum += len;
                    n += 1;
                }
            }
        }
        let t = (n > 0).then(|| sum / n as f64);
        self.typical = Some(t);
        Ok(t)
    }

    /// The length (bytes of plain text, to 10%) of record `id`, from its
    /// block, else from the record itself; `None` if there is no such
    /// record.
    pub(crate) fn length(&mut self, id: i64) -> rusqlite::Result<Option<f64>> {
        let (block, at) = place(id);
        if let Some(stmt) = &mut self.block {
            let lens = match self.blocks.entry(block) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(stmt.query_row([block], row_bytes).optional()?.flatten())
                }
            };
            let known = lens
                .as_ref()
                .and_then(|lens| lens.get(at))
                .and_then(|c| length_of(*c));
            if known.is_some() {
                return Ok(known);
            }
        }
        let len = self
            .conn
            .prepare_cached("SELECT flags, text FROM records WHERE id = ?1")?
            .query_row([id], |r| Ok(stored_len(r.get_ref(1)?, r.get(0)?)))
            .optional()?
            .flatten();
        Ok(len.and_then(|n| length_of(class_of(n))))
    }
}

/// Every known length: (record id, class), by id.
#[cfg(test)]
pub(crate) fn held(conn: &Connection) -> Vec<(i64, u8)> {
    let mut stmt = conn
        .prepare("SELECT block, lens FROM record_lengths ORDER BY block")
        .expect("lengths");
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .expect("rows");
    let mut out = Vec::new();
    for row in rows {
        let (block, lens) = row.expect("row");
        for (at, c) in lens.iter().enumerate() {
            if *c > 0 {
                out.push((block * BLOCK + at as i64, *c));
            }
        }
    }
    out
}

/// What [`held`] should be: every record's class, from its decoded text.
#[cfg(test)]
pub(crate) fn expected(conn: &Connection) -> Vec<(i64, u8)> {
    let mut stmt = conn
        .prepare("SELECT id, flags, text FROM records ORDER BY id")
        .expect("records");
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .expect("rows");
    rows.map(|row| {
        let (id, flags, text) = row.expect("row");
        (id, class_of(codec::decode(conn, &text, flags).len()))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_with_length_and_stand_for_it_within_a_step() {
        assert_eq!(class_of(0), 1);
        assert_eq!(length_of(0), None);
        let mut last = 0;
        for len in [1usize, 10, 100, 1_000, 10_000, 100_000, 10_000_000] {
            let c = class_of(len);
            assert!(c > last, "{len}: class {c} after {last}");
            last = c;
            let back = length_of(c).expect("known");
            let ratio = (back + 1.0) / (len as f64 + 1.0);
            assert!((0.95..=1.05).contains(&ratio), "{len} → {c} → {back}");
        }
        assert_eq!(class_of(usize::MAX), 255);
    }

    /// A reader of `conn`, checked to give each of `want`'s records the
    /// length of its class.
    fn reads_as<'c>(conn: &'c Connection, want: &[(i64, u8)]) -> Reader<'c> {
        let mut reader = Reader::new(conn).expect("reader");
        for (id, class) in want {
            assert_eq!(reader.length(*id).expect("length"), length_of(*class));
        }
        reader
    }

    fn record(session: &str, text: &str) -> crate::record::Record {
        crate::record::Record::new("claude-code", session, crate::record::Role::Assistant, text)
    }

    #[test]
    fn lengths_follow_inserts_backfill_and_forgets() {
        use crate::store::Store;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let mut store = Store::open(&path).expect("open");
        let origin = cairn_protocol::NodeId([7; 20]).to_string();
        store.ensure_log(&origin, 1_000).expect("own log");
        // Short texts stay plain; long ones are compressed, whose length
        // comes from the frame.
        let long = "the queue worker retries the payment job ".repeat(40);
        let mut ing = store.ingest(&origin).expect("ingest");
        for i in 0..1_500 {
            let text = match i % 3 {
                0 => format!("short {i}"),
                1 => format!("{long} {i}"),
                _ => format!("a middling record about the cache, number {i}"),
            };
            ing.insert(&record(&format!("s{}", i % 7), &text), None)
                .expect("insert");
        }
        ing.commit().expect("commit");
        let conn = store.conn();
        let compressed: i64 = conn
            .query_row(
                "SELECT count(*) FROM records WHERE flags & ?1 != 0",
                [codec::ENCODING],
                |r| r.get(0),
            )
            .expect("count");
        assert!(compressed >= 400, "{compressed} compressed");
        let want = expected(conn);
        assert_eq!(want.len(), 1_500);
        assert_eq!(held(conn), want, "written with their records");
        let mut reader = reads_as(conn, &want);

        let all: Vec<f64> = want.iter().filter_map(|(_, c)| length_of(*c)).collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let typical = reader.typical().expect("typical").expect("known");
        assert!((typical - mean).abs() < 1e-6, "{typical} vs {mean}");
        drop(reader);

        // Unknown bytes are read from the records instead, to the same value.
        conn.execute("DELETE FROM record_lengths WHERE block = 1", [])
            .expect("drop a block");
        drop(reads_as(conn, &want));

        // A damaged row (not a blob) counts as unknown, read from the
        // records too, and a later write starts it afresh.
        conn.execute("UPDATE record_lengths SET lens = 7 WHERE block = 0", [])
            .expect("damage a row");
        let mut reader = reads_as(conn, &want);
        // (Block 1 was dropped above, block 0 is damaged: none is known.)
        assert_eq!(reader.typical().expect("typical"), None);
        drop(reader);
        clear(conn, [want[0].0]).expect("clear into a damaged row");
        let rewritten: Vec<u8> = conn
            .query_row("SELECT lens FROM record_lengths WHERE block = 0", [], |r| {
                r.get(0)
            })
            .expect("row");
        assert_eq!(rewritten, vec![0; BLOCK as usize]);

        // A database from before the table: backfilled when opened.
        conn.execute_batch(
            "DELETE FROM record_lengths;
             INSERT INTO meta(key, value) VALUES ('lengths_backfill', '0');",
        )
        .expect("older");
        drop(store);
        let mut store = Store::open(&path).expect("reopen");
        assert_eq!(held(store.conn()), want, "backfilled");
        let marker: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM meta WHERE key = 'lengths_backfill'",
                [],
                |r| r.get(0),
            )
            .expect("marker");
        assert_eq!(marker, 0, "done");

        // A forgotten record leaves no length behind.
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let report = store.forget(&[target], 2_000).expect("forget");
        assert!(report.records > 200);
        let left = expected(store.conn());
        assert_eq!(left.len(), 1_500 - report.records as usize);
        assert_eq!(held(store.conn()), left);

        // A database from before the table, opened read-only (so never
        // migrated): every length comes from the records.
        store
            .conn()
            .execute("DROP TABLE record_lengths", [])
            .expect("drop the table");
        let mut reader = reads_as(store.conn(), &left);
        assert_eq!(reader.typical().expect("typical"), None);
    }

    #[test]
    fn places_split_ids_into_blocks() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(1023), (0, 1023));
        assert_eq!(place(1024), (1, 0));
        assert_eq!(place(5_000_001), (4882, 5_000_001 - 4882 * 1024));
    }
}
