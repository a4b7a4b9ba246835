//! Meaning vectors of records: an int8 vector for what people said (user,
//! assistant, note) when the embedding table knows its words, computed
//! here from the stored redacted text and never sent. `meta.vectors_upto`
//! is the highest record id examined (ids are never reused); the
//! `vectors` table holds a vector until the next pass moves it into the
//! vector file (`store::vector_file`).

use rusqlite::params;

use super::vector_file::{self, Synced};
use super::{Store, StoreError, codec};
use crate::embed::{Embedder, quantize};
use crate::record::Role;

/// The highest record id the vector pass examined.
const UPTO: &str =
    "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vectors_upto'), 0)";

/// Records embedded per transaction (fewer in tests, so that a pass of a few
/// hundred records takes several, as a large one does).
const BATCH: i64 = if cfg!(test) { 32 } else { 2_000 };

/// Texts below this many are embedded on the calling thread alone.
const PARALLEL_FROM: usize = 16;

/// The quantized vector of each text that has one, in the texts' order:
/// the texts are split between [`super::flat_file::threads`] (one per
/// core, embedding being the whole cost of a vector pass), since each
/// vector is computed on its own.
fn embed_all(e: &Embedder<'_>, texts: &[(i64, String)]) -> Vec<(i64, Vec<u8>)> {
    let threads = match texts.len() < PARALLEL_FROM {
        true => 1,
        false => super::flat_file::threads(),
    };
    let per = texts.len().div_ceil(threads).max(1);
    let parts = super::flat_file::in_parts(threads, |i| {
        let part = texts.chunks(per).nth(i).unwrap_or_default();
        Ok(part
            .iter()
            .filter_map(|(id, t)| e.embed(t).map(|v| (*id, quantize(&v))))
            .collect::<Vec<_>>())
    });
    parts.expect("embedding reads no file").concat()
}

/// Whether every stored record was examined for a vector, asked inside
/// the caller's write transaction: records it stores next may then bring
/// their vectors along ([`put_examined`]) instead of waiting for a pass.
pub(super) fn none_pending(conn: &rusqlite::Connection) -> Result<bool, StoreError> {
    let upto: i64 = conn.query_row(UPTO, [], |r| r.get(0))?;
    Ok(!conn
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM records WHERE id > ?1)")?
        .query_row([upto], |r| r.get::<_, bool>(0))?)
}

/// Stores the vectors computed for records this transaction stored after
/// [`none_pending`] held, and marks every record up to `last` (the
/// highest of their ids) examined, as a vector pass over them would.
pub(super) fn put_examined(
    conn: &rusqlite::Connection,
    vectors: &[(i64, Vec<u8>)],
    last: i64,
) -> Result<(), StoreError> {
    let mut put = conn.prepare_cached("INSERT OR REPLACE INTO vectors(id, v) VALUES (?1, ?2)")?;
    for (id, v) in vectors {
        put.execute(params![id, v])?;
    }
    conn.prepare_cached(
        "INSERT INTO meta(key, value) VALUES ('vectors_upto', ?1)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute([last])?;
    Ok(())
}

/// How far the vectors have come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct VectorCounts {
    /// Records with a vector.
    pub with_vector: u64,
    /// Records not yet examined (stored since the last vector pass).
    pub pending: u64,
}

/// Whether a record of this role gets a vector.
pub fn embeds_role(role: &str) -> bool {
    matches!(role, "user" | "assistant" | "note")
}

impl Store {
    /// The highest record id examined for a vector.
    fn vectors_upto(&self) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(UPTO, [], |r| r.get(0))?)
    }

    /// Whether any record waits for its vector: two index look-ups, so a
    /// pass with nothing new need not load the embedding table.
    pub fn vectors_pending(&self) -> Result<bool, StoreError> {
        none_pending(&self.conn).map(|none| !none)
    }

    /// How many records have vectors, and how many wait for one.
    pub fn vector_counts(&self) -> Result<VectorCounts, StoreError> {
        let upto = self.vectors_upto()?;
        let in_table: i64 = self.conn.query_row(
            "SELECT count(*) FROM vectors WHERE v IS NOT NULL",
            [],
            |r| r.get(0),
        )?;
        let with_vector = in_table as u64 + vector_file::held(&self.conn)?;
        let pending: i64 =
            self.conn
                .query_row("SELECT count(*) FROM records WHERE id > ?1", [upto], |r| {
                    r.get(0)
                })?;
        Ok(VectorCounts {
            with_vector,
            pending: pending as u64,
        })
    }

    /// Computes the vectors of every record stored since the last pass
    /// (new, received or, on first run, all existing records), a batch per
    /// transaction so a crash loses at most one batch of work. Returns how
    /// many records were examined.
    pub fn embed_pending(&mut self, e: &Embedder<'_>) -> Result<u64, StoreError> {
        self.embed_some(e, u64::MAX)
    }

    /// [`Store::embed_pending`] until at least `most` records are examined
    /// (whole batches), or none are left.
    pub fn embed_some(&mut self, e: &Embedder<'_>, most: u64) -> Result<u64, StoreError> {
        let mut done = 0u64;
        while done < most {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let upto: i64 = tx.query_row(UPTO, [], |r| r.get(0))?;
            let rows: Vec<(i64, String, i64, Vec<u8>)> = {
                let mut stmt = tx.prepare_cached(&format!(
                    "SELECT id, role, flags, CASE WHEN role IN ({}) THEN text ELSE x'' END
                     FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
                    codec::roles_sql(&[Role::User, Role::Assistant, Role::Note])
                ))?;
                let rows = stmt.query_map(params![upto, BATCH], |r| {
                    Ok((r.get(0)?, codec::role_at(r, 1)?, r.get(2)?, r.get(3)?))
                })?;
                rows.collect::<Result<_, _>>()?
            };
            let Some(&(last, ..)) = rows.last() else {
                return Ok(done);
            };
            let texts: Vec<(i64, String)> = rows
                .iter()
                .filter(|(_, role, ..)| embeds_role(role))
                .map(|(id, _, flags, text)| (*id, codec::decode(&tx, text, *flags)))
                .collect();
            put_examined(&tx, &embed_all(e, &texts), last)?;
            tx.commit()?;
            done += rows.len() as u64;
        }
        Ok(done)
    }

    /// Moves the vectors of the table into the flat file of vectors (see
    /// `store::vector_file`) and blanks those of deleted records; with no
    /// file yet, writes it. `dim` is the embedder's vector length.
    /// [`Synced::Lost`] means the file could not be trusted and the vector
    /// pass starts again from the first record.
    pub fn sync_vector_file(&mut self, dim: usize) -> Result<Synced, StoreError> {
        vector_file::sync(
            &mut self.conn,
            &self.path,
            dim,
            super::sketch::CellsWhen::Now,
        )
    }

    /// Checks every entry of the vector file; a damaged file is lost (the
    /// next vector pass computes its vectors again) and named.
    #[cfg(test)]
    pub fn check_vectors(&self) -> Result<Option<super::Damage>, StoreError> {
        Ok(
            vector_file::check(&self.conn, &self.path)?.map(|why| super::Damage {
                path: crate::store::Component::Vectors.path(&self.path),
                why,
            }),
        )
    }

    /// [`Store::sync_vector_file`] for a step of a long vector pass, with
    /// more vectors to move after it: the sketch's cells wait for the last
    /// step's sync (see [`sketch::CellsWhen::Later`](super::sketch::CellsWhen)).
    pub fn sync_vector_file_step(&mut self, dim: usize) -> Result<Synced, StoreError> {
        vector_file::sync(
            &mut self.conn,
            &self.path,
            dim,
            super::sketch::CellsWhen::Later,
        )
    }

    /// Whether the flat file of vectors holds every vector (checked
    /// without a write lock or the embedder).
    pub fn vector_file_current(&self) -> Result<bool, StoreError> {
        vector_file::current(&self.conn, &self.path)
    }

    /// The flat file of vectors as far as the database vouches for it,
    /// open for a scan; `None` when a search must read the table.
    pub(crate) fn vector_scan(&self, dim: usize) -> Result<Option<vector_file::Scan>, StoreError> {
        vector_file::open(&self.conn, &self.path, dim, self.mappings.as_ref())
    }

    /// Makes this store's searches read the flat files with `pread`, as
    /// they do where a file cannot be mapped (for tests of that path).
    #[cfg(test)]
    pub(crate) fn read_flat_files_per_search(&mut self) {
        self.mappings = None;
    }

    /// The stored vector of one record (int8), if it has one: in the
    /// table, or else in the flat file.
    #[cfg(test)]
    pub(crate) fn vector(&self, record_id: i64) -> Result<Option<Vec<u8>>, StoreError> {
        use rusqlite::OptionalExtension;
        let in_table = self
            .conn
            .query_row("SELECT v FROM vectors WHERE id = ?1", [record_id], |r| {
                r.get::<_, Option<Vec<u8>>>(0)
            })
            .optional()?
            .flatten();
        match in_table {
            Some(v) => Ok(Some(v)),
            None => vector_file::lookup(&self.conn, &self.path, record_id),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::embed::tests::tiny;
    use crate::record::{Record, Role};

    /// Stores `records` in one transaction and gives them their vectors
    /// (of the tiny table, `embed::tests::tiny`).
    pub(crate) fn store_embedded(store: &mut Store, records: impl IntoIterator<Item = Record>) {
        let bytes = tiny();
        let e = Embedder::from_bytes(&bytes).expect("table");
        let mut ing = store.ingest("node").expect("ingest");
        for r in records {
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        store.embed_pending(&e).expect("embed");
    }

    #[test]
    fn a_batch_split_between_threads_gives_each_text_its_own_vector_in_order() {
        let bytes = tiny();
        let e = Embedder::from_bytes(&bytes).expect("table");
        let words = [
            "slow terminal",
            "sluggish shell",
            "rounding",
            "zzz",
            "shells",
        ];
        // Enough texts to be split; "zzz" has no known word and no vector.
        let texts: Vec<(i64, String)> = (0..PARALLEL_FROM as i64 * 3 + 5)
            .map(|i| (i * 10, words[i as usize % words.len()].to_string()))
            .collect();
        let one_by_one: Vec<(i64, Vec<u8>)> = texts
            .iter()
            .filter_map(|(id, t)| e.embed(t).map(|v| (*id, quantize(&v))))
            .collect();
        let split = embed_all(&e, &texts);
        assert_eq!(split, one_by_one);
        assert_eq!(
            split.len(),
            texts.iter().filter(|(_, t)| t != "zzz").count()
        );
    }

    #[test]
    fn conversation_gets_vectors_tools_do_not_and_deletes_follow() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let bytes = tiny();
        let e = Embedder::from_bytes(&bytes).expect("table");
        let mut ing = store.ingest("node").expect("ingest");
        ing.insert(
            &Record::new("claude-code", "s1", Role::User, "slow terminal"),
            None,
        )
        .expect("insert");
        ing.insert(
            &Record::new(
                "claude-code",
                "s1",
                Role::ToolOutput,
                "slow terminal output",
            ),
            None,
        )
        .expect("insert");
        ing.insert(
            &Record::new("claude-code", "s1", Role::Assistant, "zzz"),
            None,
        )
        .expect("insert");
        ing.commit().expect("commit");
        assert_eq!(store.vector_counts().expect("counts").pending, 3);
        assert!(store.vectors_pending().expect("pending"));
        assert_eq!(store.embed_pending(&e).expect("embed"), 3);
        assert!(!store.vectors_pending().expect("pending"));
        // Only the user record has meaning in the tiny vocabulary.
        let c = store.vector_counts().expect("counts");
        assert_eq!((c.with_vector, c.pending), (1, 0));
        assert!(store.vector(1).expect("v").is_some());
        assert!(store.vector(2).expect("v").is_none());
        // Nothing left: a second pass does nothing.
        assert_eq!(store.embed_pending(&e).expect("embed"), 0);
        // Forgetting the record removes its vector.
        store
            .conn
            .execute("DELETE FROM records WHERE id = 1", [])
            .expect("delete");
        assert_eq!(store.vector_counts().expect("counts").with_vector, 0);
    }
}
