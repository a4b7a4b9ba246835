//! Writing the full-text indexes: `fts` (exact words, every record) and
//! `fts_stem` (English word stems, conversation only). Every insert and
//! delete of a record goes through here so the two stay in step.

use rusqlite::{Connection, OptionalExtension, Statement, params};

use super::insert::stemmed_role;
use super::{StoreError, codec};
use crate::text::index_form;

/// Adds stored records to the indexes, with its two statements prepared
/// once for a run of inserts.
pub(crate) struct Inserts<'c> {
    body: Statement<'c>,
    stem: Statement<'c>,
}

impl<'c> Inserts<'c> {
    /// Prepares the statements on `conn`.
    pub(crate) fn prepare(conn: &'c Connection) -> Result<Inserts<'c>, StoreError> {
        Ok(Inserts {
            body: conn.prepare("INSERT INTO fts(rowid, body, files) VALUES (?1, ?2, ?3)")?,
            stem: conn.prepare("INSERT INTO fts_stem(rowid, body) VALUES (?1, ?2)")?,
        })
    }

    /// Adds a stored record: `body` and `files` as the index sees them
    /// (see `index_form`); `stemmed` for conversation, whose text also
    /// enters the stemmed index (what tools printed is large and searched
    /// by exact words: error codes, paths, identifiers).
    pub(crate) fn add(
        &mut self,
        rowid: i64,
        stemmed: bool,
        body: &str,
        files: &str,
    ) -> Result<(), StoreError> {
        self.body.execute(params![rowid, body, files])?;
        if stemmed {
            self.stem.execute(params![rowid, body])?;
        }
        Ok(())
    }
}

/// Removes a record from the indexes (a row absent from one is fine).
pub(crate) fn delete(conn: &Connection, rowid: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM fts WHERE rowid = ?1")?
        .execute([rowid])?;
    conn.prepare_cached("DELETE FROM fts_stem WHERE rowid = ?1")?
        .execute([rowid])?;
    Ok(())
}

/// Does one step of merging each index into one segment: about `pages`
/// leaf pages of merge work each (FTS5's `merge` command with a negative
/// page count, which first gathers every segment onto one level as
/// `optimize` does, so steps repeated until one does nothing leave a
/// single segment, as `optimize` would). Returns whether either index had
/// anything left to merge.
pub(crate) fn merge_step(conn: &Connection, pages: u32) -> Result<bool, StoreError> {
    let mut worked = false;
    for sql in [
        "INSERT INTO fts(fts, rank) VALUES ('merge', ?1)",
        "INSERT INTO fts_stem(fts_stem, rank) VALUES ('merge', ?1)",
    ] {
        let before = conn.total_changes();
        conn.execute(sql, [-i64::from(pages.max(1))])?;
        // FTS5 counts the command itself as one change; any merge work
        // writes more.
        worked |= conn.total_changes() - before >= 2;
    }
    Ok(worked)
}

/// Segments FTS5 gathers on one level before merging them into one on
/// the next (`automerge`), while it merges on its own: set by the schema
/// (v12) and put back by [`resume_merging`].
const AUTOMERGE: i64 = 16;
/// Segments on one level from which FTS5 merges them within the write that
/// made the last (`crisismerge`): its default, put back by
/// [`resume_merging`].
const CRISIS_MERGE: i64 = 16;
/// `crisismerge` while merging is paused ([`pause_merging`]): a pass that
/// writes 10 GB commits some 25 to 40 times, one segment per index each,
/// and reaches it only beyond about 20 GB, where a crisis merge of 64
/// segments still rewrites each entry once more, not once per level.
const PAUSED_CRISIS_MERGE: i64 = 64;

/// Stops FTS5's own merging of `conn`'s indexes until [`resume_merging`]:
/// a large pass's commits then leave their segments side by side for the
/// one merge at its end (`optimize`), which writes each entry once more.
/// Merging as it went, FTS5 also merged every sixteen of them into one on
/// the next level first, so at 10 GB a cold pass wrote and read the same
/// entries again (12.9 -> 10.5 GB written, 27.9 -> 23.9 GB read, 3 to 7%
/// less of the pass's time), and the more the history, the more levels.
pub(crate) fn pause_merging(conn: &Connection) -> Result<(), StoreError> {
    set_merging(conn, 0, PAUSED_CRISIS_MERGE)
}

/// Lets FTS5 merge `conn`'s indexes on its own again, as the schema has
/// it (see [`pause_merging`]).
pub(crate) fn resume_merging(conn: &Connection) -> Result<(), StoreError> {
    set_merging(conn, AUTOMERGE, CRISIS_MERGE)
}

fn set_merging(conn: &Connection, automerge: i64, crisis: i64) -> Result<(), StoreError> {
    for table in ["fts", "fts_stem"] {
        let sql = format!("INSERT INTO {table}({table}, rank) VALUES (?1, ?2)");
        conn.execute(&sql, params!["automerge", automerge])?;
        conn.execute(&sql, params!["crisismerge", crisis])?;
    }
    Ok(())
}

/// Whether FTS5 merges `conn`'s indexes on its own (see [`pause_merging`]):
/// both tables' `automerge` as the schema sets it.
#[cfg(test)]
pub(crate) fn merging(conn: &Connection) -> bool {
    ["fts", "fts_stem"].iter().all(|table| {
        conn.query_row(
            &format!("SELECT v FROM {table}_config WHERE k = 'automerge'"),
            [],
            |r| r.get::<_, i64>(0),
        )
        .is_ok_and(|v| v == AUTOMERGE)
    })
}

/// Merges both indexes so no term of a deleted row stays in their segments.
pub(crate) fn optimize(conn: &Connection) -> Result<(), StoreError> {
    conn.execute("INSERT INTO fts(fts) VALUES ('optimize')", [])?;
    conn.execute("INSERT INTO fts_stem(fts_stem) VALUES ('optimize')", [])?;
    Ok(())
}

/// Records per backfill transaction.
const BACKFILL_BATCH: i64 = 5_000;

/// Adds records stored before the stemmed index existed to it, resuming
/// from the id saved in `meta.fts_stem_backfill` (see `store::backfill`),
/// so a record is never added twice. Returns how many it added.
pub(crate) fn backfill_stems(conn: &mut Connection) -> Result<u64, StoreError> {
    let mut added = 0u64;
    super::backfill::in_batches(conn, "fts_stem_backfill", |tx, from| {
        let rows: Vec<(i64, String, i64, Vec<u8>)> = {
            let mut stmt = tx.prepare_cached(
                "SELECT id, role, flags, text FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![from, BACKFILL_BATCH], |r| {
                Ok((r.get(0)?, codec::role_at(r, 1)?, r.get(2)?, r.get(3)?))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        for (id, role, flags, text) in &rows {
            if stemmed_role(role) {
                let text = codec::decode(tx, text, *flags);
                tx.prepare_cached("INSERT INTO fts_stem(rowid, body) VALUES (?1, ?2)")?
                    .execute(params![id, index_form(&text)])?;
                added += 1;
            }
        }
        Ok(rows.last().map(|r| r.0))
    })?;
    Ok(added)
}

/// Indexes again the records stored before a record in Chinese, Japanese
/// or Korean entered the index with the English words of its character
/// pairs (`text::index_form`), resuming from the id saved in
/// `meta.cjk_reindex` (see `store::backfill`). The index itself says
/// which records hold CJK text ([`records_with_cjk`]), so a history
/// without any reads nothing; each of those records is removed from both
/// indexes and added again. Returns how many were indexed again.
pub(crate) fn reindex_cjk(conn: &mut Connection) -> Result<u64, StoreError> {
    if super::meta_get(conn, "cjk_reindex")?.is_none() {
        return Ok(0);
    }
    let ids = records_with_cjk(conn)?;
    let mut redone = 0u64;
    super::backfill::in_batches(conn, "cjk_reindex", |tx, from| {
        let first = ids.partition_point(|&id| id <= from);
        let batch = &ids[first..(first + BACKFILL_BATCH as usize).min(ids.len())];
        let mut inserts = Inserts::prepare(tx)?;
        for &id in batch {
            let row = tx
                .prepare_cached("SELECT role, flags, text, files FROM records WHERE id = ?1")?
                .query_row([id], |r| {
                    Ok((
                        codec::role_at(r, 0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .optional()?;
            // Deleted since the index was asked.
            let Some((role, flags, text, files)) = row else {
                continue;
            };
            let text = codec::decode(tx, &text, flags);
            delete(tx, id)?;
            inserts.add(
                id,
                stemmed_role(&role),
                &index_form(&text),
                &index_form(&files),
            )?;
            redone += 1;
        }
        Ok(batch.last().copied())
    })?;
    Ok(redone)
}

/// CJK characters asked for in one full-text query.
const TERMS_PER_MATCH: usize = 100;

/// The ids, ascending, of the records whose indexed text or files hold a
/// CJK character: the index keeps each such character as a term of its
/// own, so its vocabulary lists them and a query for them finds the
/// records, without reading any record's text.
fn records_with_cjk(conn: &Connection) -> Result<Vec<i64>, StoreError> {
    // From the first CJK code point `text::is_cjk` knows (hiragana) up.
    let terms: Vec<String> = conn
        .prepare("SELECT term FROM fts_vocab WHERE term >= ?1")?
        .query_map(["\u{3040}"], |r| r.get::<_, String>(0))?
        .filter_map(|t| {
            t.ok().filter(|t| {
                let mut chars = t.chars();
                matches!((chars.next(), chars.next()), (Some(c), None) if crate::text::is_cjk(c))
            })
        })
        .collect();
    let mut ids = Vec::new();
    for chunk in terms.chunks(TERMS_PER_MATCH) {
        let question = chunk
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = conn.prepare_cached("SELECT rowid FROM fts WHERE fts MATCH ?1")?;
        for id in stmt.query_map([question], |r| r.get::<_, i64>(0))? {
            ids.push(id?);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

#[cfg(test)]
/// Segments in the full-text index `table`, from its structure record
/// (row 10 of `<table>_data`: a 4-byte cookie, FTS5's 4-byte mark of
/// its second structure format when present, then the number of
/// levels and of segments as varints).
pub(crate) fn segments(conn: &Connection, table: &str) -> u64 {
    let block: Vec<u8> = conn
        .query_row(
            &format!("SELECT block FROM {table}_data WHERE id = 10"),
            [],
            |r| r.get(0),
        )
        .expect("structure record");
    let mut at = 4;
    if block.get(4..8) == Some(&[0xff, 0x00, 0x00, 0x01][..]) {
        at = 8;
    }
    let mut varint = || {
        let mut v = 0u64;
        loop {
            let b = block[at];
            at += 1;
            v = (v << 7) | u64::from(b & 0x7f);
            if b & 0x80 == 0 {
                return v;
            }
        }
    };
    let _levels = varint();
    varint()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_leaves_each_index_one_segment_that_still_finds_every_record() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = crate::store::Store::open(&dir.path().join("cairn.db")).expect("open");
        let conn = store.conn();
        // One commit per record: a segment each.
        for i in 0..12 {
            conn.execute(
                "INSERT INTO fts(rowid, body, files) VALUES (?1, ?2, '')",
                params![i, format!("heron number {i} landed")],
            )
            .expect("fts");
            conn.execute(
                "INSERT INTO fts_stem(rowid, body) VALUES (?1, ?2)",
                params![i, format!("heron number {i} landed")],
            )
            .expect("stem");
        }
        assert_eq!(segments(conn, "fts"), 12);
        assert_eq!(segments(conn, "fts_stem"), 12);
        store
            .merge_text_indexes(None, crate::store::bulk::MERGE_PAGES)
            .expect("merge");
        let conn = store.conn();
        assert_eq!(segments(conn, "fts"), 1);
        assert_eq!(segments(conn, "fts_stem"), 1);
        let found = |table: &str, q: &str| -> i64 {
            conn.query_row(
                &format!("SELECT count(*) FROM {table} WHERE {table} MATCH ?1"),
                [q],
                |r| r.get(0),
            )
            .expect("match")
        };
        assert_eq!(found("fts", "heron"), 12);
        assert_eq!(found("fts", "7"), 1);
        assert_eq!(found("fts_stem", "land"), 12);
    }
}
