//! Writing records and per-source state, one transaction at a time.
//!
//! An [`Ingest`] wraps one SQLite transaction: records, the FTS rows, the
//! session summaries and the source's new offset or watermark commit
//! together, so a crash mid-file loses nothing and duplicates nothing.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::hash_index::{self, HashIds};
use super::insert::{NewRecord, RecordStatements, RowIds, insert};
use super::{Store, StoreError};
use crate::redact::RedactionCounts;

/// What the indexer remembers about one store between passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceState {
    /// Row id in `sources`.
    pub id: i64,
    /// Agent id.
    pub agent: String,
    /// Path of the store.
    pub path: String,
    /// Reader kind: `lines`, `whole` or `database`.
    pub kind: String,
    /// File size at the last pass.
    pub size: u64,
    /// File modification time (ns since the epoch) at the last pass.
    pub mtime_ns: i64,
    /// Lines: the byte offset just after the last complete line consumed.
    pub offset: u64,
    /// blake3 of the first bytes of the file, up to `offset` (rewrite detection).
    pub head_hash: Option<Vec<u8>>,
    /// blake3 of the bytes just before `offset` (rewrite detection).
    pub tail_hash: Option<Vec<u8>>,
    /// Database readers: their watermark.
    pub watermark: Option<String>,
    /// Lines or rows skipped as malformed, in total.
    pub skipped: u64,
    /// The last whole-store error, if the last pass failed.
    pub last_error: Option<String>,
    /// The store was not on disk at the last pass (its records stay).
    pub missing: bool,
}

/// What a pass compares with the disk for one known store: the part of
/// its [`SourceState`] that tells whether it changed or went missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceStamp {
    /// Row id in `sources`.
    pub id: i64,
    /// Agent id.
    pub agent: String,
    /// Path of the store.
    pub path: String,
    /// File size at the last pass.
    pub size: u64,
    /// File modification time (ns since the epoch) at the last pass.
    pub mtime_ns: i64,
    /// The last pass could not read it.
    pub failed: bool,
    /// The store was not on disk at the last pass.
    pub missing: bool,
}

const STATE_COLUMNS: &str = "id, agent, path, kind, size, mtime_ns, offset, head_hash, tail_hash,
     watermark, skipped, last_error, missing";

/// Sets the generation of the `sources` rows anew (see the schema's v19
/// and [`Store::sources_gen`]). Every write to what a survey holds of a
/// row (its agent, path, size, mtime, error or missing mark) calls it, in
/// the write's transaction. One row by its key: no statement savepoint,
/// which would make FTS5 write out the terms it holds in memory.
fn new_sources_gen(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE sources_gen SET gen = random() WHERE id = 0")?
        .execute([])?;
    Ok(())
}

/// The columns of a [`SourceStamp`], in the order [`stamp_row`] reads.
const STAMP_COLUMNS: &str = "id, agent, path, size, mtime_ns, last_error IS NOT NULL, missing";

fn stamp_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SourceStamp> {
    Ok(SourceStamp {
        id: r.get(0)?,
        agent: r.get(1)?,
        path: r.get(2)?,
        size: r.get::<_, i64>(3)? as u64,
        mtime_ns: r.get(4)?,
        failed: r.get(5)?,
        missing: r.get(6)?,
    })
}

fn state_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SourceState> {
    Ok(SourceState {
        id: r.get(0)?,
        agent: r.get(1)?,
        path: r.get(2)?,
        kind: r.get(3)?,
        size: r.get::<_, i64>(4)? as u64,
        mtime_ns: r.get(5)?,
        offset: r.get::<_, i64>(6)? as u64,
        head_hash: r.get(7)?,
        tail_hash: r.get(8)?,
        watermark: r.get(9)?,
        skipped: r.get::<_, i64>(10)? as u64,
        last_error: r.get(11)?,
        missing: r.get(12)?,
    })
}

impl Store {
    /// Starts a write transaction for records that originate on node `origin`.
    pub fn ingest(&mut self, origin: &str) -> Result<Ingest<'_>, StoreError> {
        // Taking `&mut self` keeps every other use of the connection out
        // while the transaction is open.
        let conn = &self.conn;
        let mut ing = Ingest {
            conn,
            statements: None,
            tx: None,
            origin: origin.to_owned(),
            ids: RowIds::default(),
            inserted: 0,
            log: None,
            tombstones: false,
            unheld: false,
            deferral: None,
            hash_ready: false,
            rules: self
                .redaction_rules
                .as_ref()
                .map(|r| r.rules_id().to_owned()),
        };
        ing.begin()?;
        Ok(ing)
    }

    /// The saved state of the store at `path`, if it was seen before.
    pub fn source_state(&self, path: &str) -> Result<Option<SourceState>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {STATE_COLUMNS} FROM sources WHERE path = ?1"),
                [path],
                state_row,
            )
            .optional()?)
    }

    /// The generation of the `sources` rows: a new random value after any
    /// change to a store's agent, path, size, mtime, error or missing mark
    /// (see the schema's v19; `new_sources_gen`). `None` before the
    /// database has one.
    pub fn sources_gen(&self) -> Result<Option<i64>, StoreError> {
        if !super::schema::has_table(&self.conn, "sources_gen")? {
            return Ok(None);
        }
        Ok(self
            .conn
            .query_row("SELECT gen FROM sources_gen WHERE id = 0", [], |r| r.get(0))
            .optional()?)
    }

    /// The light row of the store at `path`, when the index knows it.
    pub fn source_stamp(&self, path: &str) -> Result<Option<SourceStamp>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {STAMP_COLUMNS} FROM sources WHERE path = ?1"),
                [path],
                stamp_row,
            )
            .optional()?)
    }

    /// Every store the index knows, by path (for tests).
    #[cfg(test)]
    pub fn source_states(
        &self,
    ) -> Result<std::collections::HashMap<String, SourceState>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {STATE_COLUMNS} FROM sources"))?;
        let rows = stmt.query_map([], state_row)?;
        let mut out = std::collections::HashMap::new();
        for r in rows {
            let s = r?;
            out.insert(s.path.clone(), s);
        }
        Ok(out)
    }

    /// Every store the index knows, with only what a pass with nothing new
    /// needs (one light row each; the whole state of a changed store is
    /// read with [`Store::source_state`]).
    pub fn source_stamps(&self) -> Result<Vec<SourceStamp>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {STAMP_COLUMNS} FROM sources"))?;
        let rows = stmt.query_map([], stamp_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Marks every known store of the given agents that is not present
    /// as missing (its records stay), and clears the mark on those that are.
    /// `known` is what [`Store::source_stamps`] returned at the start of the
    /// pass and `present[i]` whether `known[i]` is on disk now; when no mark
    /// changes, nothing is written (no transaction).
    /// Returns how many stores are missing.
    pub fn mark_missing(
        &mut self,
        known: &[SourceStamp],
        present: &[bool],
        agents: &[&str],
    ) -> Result<u64, StoreError> {
        enum Change {
            /// Set or clear the missing mark.
            Mark(i64, bool),
            /// A gone store whose last pass failed: delete it if it has no
            /// records, else mark it missing (the flag: it already is).
            DropFailed(i64, bool),
        }
        let mut n = 0;
        let mut changes = Vec::new();
        for (s, &here) in known.iter().zip(present) {
            if !agents.contains(&s.agent.as_str()) {
                continue;
            }
            let gone = !here;
            if gone && s.failed {
                changes.push(Change::DropFailed(s.id, s.missing));
            } else if gone != s.missing {
                changes.push(Change::Mark(s.id, gone));
            }
            n += u64::from(gone);
        }
        if changes.is_empty() {
            return Ok(n);
        }
        let tx = self.conn.transaction()?;
        {
            let mut set = tx.prepare("UPDATE sources SET missing = ?2 WHERE id = ?1")?;
            // A store that only ever failed (an unreadable folder, say) and
            // is no longer there leaves nothing behind.
            let mut drop_failed = tx.prepare(
                "DELETE FROM sources WHERE id = ?1
                 AND NOT EXISTS (SELECT 1 FROM records WHERE source = ?1)",
            )?;
            let mut drop_counts = tx.prepare("DELETE FROM redactions WHERE source = ?1")?;
            new_sources_gen(&tx)?;
            for change in changes {
                match change {
                    Change::Mark(id, gone) => {
                        set.execute(params![id, gone])?;
                    }
                    Change::DropFailed(id, missing) => {
                        if drop_failed.execute([id])? > 0 {
                            drop_counts.execute([id])?;
                            n -= 1;
                        } else if !missing {
                            set.execute(params![id, true])?;
                        }
                    }
                }
            }
        }
        tx.commit()?;
        Ok(n)
    }
}

/// One write transaction. Dropped without [`Ingest::commit`], it rolls back.
pub struct Ingest<'a> {
    conn: &'a Connection,
    /// Prepared at the first record (before `tx`, so dropped first).
    statements: Option<RecordStatements<'a>>,
    /// Always `Some` between [`Ingest::begin`] and a commit.
    tx: Option<Transaction<'a>>,
    origin: String,
    ids: RowIds,
    inserted: u64,
    log: Option<super::log::Appender>,
    tombstones: bool,
    /// Whether a record slot names a record not held (see `log::revive`).
    unheld: bool,
    /// While this pass defers the records' hash index: the map that
    /// stands in for it (see `store::hash_index`).
    deferral: Option<Deferral>,
    /// Whether this transaction made sure the hash index exists.
    hash_ready: bool,
    /// The rules that redacted the records stored (see
    /// `store::redacted_with`).
    rules: Option<String>,
}

/// A pass's hold on the deferred hash index.
#[derive(Debug)]
struct Deferral {
    ids: HashIds,
    /// The value of the `meta` note while the pass holds it.
    token: String,
}

impl Ingest<'_> {
    /// Opens the write transaction and reads what the sync hooks need.
    fn begin(&mut self) -> Result<(), StoreError> {
        // Immediate: the sync hooks read before the first write.
        self.tx = Some(Transaction::new_unchecked(
            self.conn,
            TransactionBehavior::Immediate,
        )?);
        // Sync hooks: the own log's next slot, and whether any tombstone
        // may refuse a record.
        super::redacted_with::hold(self.conn, self.rules.as_deref())?;
        self.log = super::log::Appender::open(self.conn, &self.origin)?;
        self.tombstones = super::log::any_tombstones(self.conn)?;
        self.unheld = super::log::any_unheld(self.conn)?;
        self.ids.clear();
        // Another writer that looked a record up by hash since the last
        // commit built the index again: it serves from now on.
        if let Some(d) = &self.deferral
            && !hash_index::holds(self.conn, &d.token)?
        {
            tracing::info!("the records' hash index was built by another writer");
            self.deferral = None;
        }
        self.hash_ready = false;
        Ok(())
    }

    /// Drops the records' hash index until this pass ends, looking records
    /// up in memory instead (see `store::hash_index`): for a pass that will
    /// store much into a small database. Returns whether it did (not when
    /// another pass holds it deferred).
    pub fn defer_hash_index(&mut self) -> Result<bool, StoreError> {
        if self.deferral.is_some() {
            return Ok(true);
        }
        let token = hash_index::new_token();
        let Some(ids) = hash_index::defer(self.conn, &token)? else {
            return Ok(false);
        };
        tracing::info!(
            records = ids.len(),
            "the records' hash index is built at the end of this pass"
        );
        self.deferral = Some(Deferral { ids, token });
        Ok(true)
    }

    /// Commits and opens no new transaction, so a test can write from
    /// another connection between a pass's transactions.
    #[cfg(test)]
    pub(crate) fn pause(&mut self) -> Result<(), StoreError> {
        self.finish()
    }

    /// Opens the next transaction after [`Ingest::pause`].
    #[cfg(test)]
    pub(crate) fn resume(&mut self) -> Result<(), StoreError> {
        self.begin()
    }

    /// Whether this pass holds the records' hash index deferred.
    #[cfg(test)]
    pub(crate) fn defers_hash_index(&self) -> bool {
        self.deferral.is_some()
    }

    /// Builds the records' hash index now if this pass deferred it.
    fn end_deferral(&mut self) -> Result<(), StoreError> {
        if let Some(d) = self.deferral.take() {
            tracing::debug!(
                records = d.ids.len(),
                map_bytes = d.ids.held_bytes(),
                "the pass's map of record hashes"
            );
            // Its memory goes before the index build's sorter takes some.
            drop(d);
            hash_index::ensure(self.conn)?;
        }
        self.hash_ready = true;
        Ok(())
    }

    /// The row id of the stored record with `hash`.
    fn record_id(&self, hash: &[u8; 32]) -> Result<Option<i64>, StoreError> {
        match &self.deferral {
            Some(d) => d.ids.find(self.conn, hash),
            None => super::log::record_id(self.conn, hash),
        }
    }

    /// Commits what was written so far and opens a new transaction, so a
    /// long pass lets other writers in between and bounds what a crash
    /// re-reads.
    pub fn commit_and_continue(&mut self) -> Result<(), StoreError> {
        self.finish()?;
        self.begin()
    }

    fn finish(&mut self) -> Result<(), StoreError> {
        if let Some(stmts) = &mut self.statements {
            stmts.finish(self.conn, &mut self.ids)?;
        }
        if let Some(log) = &mut self.log {
            log.finish(self.conn)?;
        }
        if self.tx.is_some() {
            super::redacted_with::stamp(self.conn, self.rules.as_deref())?;
        }
        if let Some(tx) = self.tx.take() {
            tx.commit()?;
        }
        Ok(())
    }

    /// Creates or finds the `sources` row for a store and returns its state.
    pub fn source(
        &mut self,
        agent: &str,
        path: &str,
        kind: &str,
    ) -> Result<SourceState, StoreError> {
        self.conn.execute(
            "INSERT INTO sources(agent, path, kind) VALUES (?1, ?2, ?3)
             ON CONFLICT(path) DO UPDATE SET missing = 0",
            (agent, path, kind),
        )?;
        new_sources_gen(self.conn)?;
        let id: i64 =
            self.conn
                .query_row("SELECT id FROM sources WHERE path = ?1", [path], |r| {
                    r.get(0)
                })?;
        Ok(SourceState {
            id,
            agent: agent.to_owned(),
            path: path.to_owned(),
            kind: kind.to_owned(),
            ..SourceState::default()
        })
    }

    /// Saves a store's offsets, hashes and watermark.
    pub fn save_state(&mut self, s: &SourceState, now_ms: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE sources SET kind = ?2, size = ?3, mtime_ns = ?4, offset = ?5, head_hash = ?6,
                    tail_hash = ?7, watermark = ?8, skipped = ?9, last_error = ?10, indexed_ms = ?11,
                    missing = 0
             WHERE id = ?1",
            params![
                s.id,
                s.kind,
                s.size as i64,
                s.mtime_ns,
                s.offset as i64,
                s.head_hash,
                s.tail_hash,
                s.watermark,
                s.skipped as i64,
                s.last_error,
                now_ms
            ],
        )?;
        new_sources_gen(self.conn)?;
        Ok(())
    }

    /// Adds redaction counts for a source.
    pub fn add_redactions(
        &mut self,
        source: i64,
        counts: &RedactionCounts,
    ) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO redactions(source, kind, count) VALUES (?1, ?2, ?3)
             ON CONFLICT(source, kind) DO UPDATE SET count = count + excluded.count",
        )?;
        for (kind, n) in counts {
            stmt.execute(params![source, kind, *n as i64])?;
        }
        Ok(())
    }

    /// Forgets the redaction counts of a source (before it is re-read from scratch).
    pub fn reset_redactions(&mut self, source: i64) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM redactions WHERE source = ?1", [source])?;
        Ok(())
    }

    /// Stores one (already redacted) record read from `source` (None for
    /// notes and, later, records received from peers). Returns whether it was
    /// new: a record whose content hash is already stored is skipped.
    #[cfg(test)]
    pub(crate) fn insert(
        &mut self,
        rec: &crate::record::Record,
        source: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.insert_new(&NewRecord::from_record(rec.clone()), source)
    }

    /// Stores the text dictionary an indexing pass trained, before the
    /// records encoded with it (see `store::dict`).
    pub fn save_text_dict(&mut self, dict: &super::codec::TextDict) -> Result<(), StoreError> {
        super::dict::save(self.conn, dict)
    }

    /// [`Ingest::insert`] for a record prepared beforehand (see [`NewRecord`]).
    pub fn insert_new(&mut self, rec: &NewRecord, source: Option<i64>) -> Result<bool, StoreError> {
        let hash = rec.hash;
        // A forgotten record never comes back, even if its file is still on disk.
        if self.tombstones
            && super::log::covered(
                self.conn,
                &hash,
                &rec.agent,
                &rec.session_id,
                rec.project.as_deref(),
            )?
        {
            return Ok(false);
        }
        if !self.hash_ready && self.deferral.is_none() {
            hash_index::ensure(self.conn)?;
            self.hash_ready = true;
        }
        let stmts = match &mut self.statements {
            Some(s) => s,
            None => self
                .statements
                .insert(RecordStatements::prepare(self.conn)?),
        };
        let known = self.deferral.as_ref().map(|d| &d.ids);
        let Some(id) = insert(
            self.conn,
            stmts,
            rec,
            &self.origin,
            source,
            &mut self.ids,
            known,
        )?
        else {
            // Already stored (e.g. received from a peer): this node's log
            // names it too, once, as a second provenance.
            if self.log.is_some()
                && let Some(id) = self.record_id(&hash)?
                && let Some(log) = &mut self.log
                && !super::log::own_log_has(self.conn, log, id, &hash)?
            {
                log.append_record(self.conn, id)?;
            }
            return Ok(false);
        };
        if let Some(d) = &mut self.deferral
            && !d.ids.add(&hash, id)
        {
            // A row id past what the map holds: the index again.
            self.end_deferral()?;
        }
        if self.unheld {
            super::log::revive(self.conn, id, &hash)?;
        }
        if let Some(log) = &mut self.log {
            log.append_record(self.conn, id)?;
        }
        self.inserted += 1;
        Ok(true)
    }

    /// Deletes the records read from `source` whose hash is not in `keep`:
    /// how a rewritten file has only its own vanished records replaced.
    pub fn retain_source_records(
        &mut self,
        source: i64,
        keep: &HashSet<[u8; 32]>,
    ) -> Result<u64, StoreError> {
        let doomed: Vec<(i64, i64)> = {
            let mut stmt = self
                .conn
                .prepare("SELECT id, hash, session FROM records WHERE source = ?1")?;
            let rows = stmt.query_map([source], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?;
            let mut v = Vec::new();
            for row in rows {
                let (id, hash, session) = row?;
                let keep_it =
                    <[u8; 32]>::try_from(hash.as_slice()).is_ok_and(|h| keep.contains(&h));
                if !keep_it {
                    v.push((id, session));
                }
            }
            v
        };
        for (id, session) in &doomed {
            self.delete_record(*id, *session)?;
        }
        // Nor may their entries in the columns file (`store::columns_file`).
        let ids: Vec<i64> = doomed.iter().map(|d| d.0).collect();
        super::columns_file::zero(self.conn, &ids)?;
        // Their slots now name their hashes (trigger `logs_follow_records`).
        self.unheld |= !doomed.is_empty();
        Ok(doomed.len() as u64)
    }

    fn delete_record(&mut self, id: i64, session: i64) -> Result<(), StoreError> {
        super::fts::delete(self.conn, id)?;
        self.conn
            .prepare_cached("DELETE FROM records WHERE id = ?1")?
            .execute([id])?;
        self.conn
            .prepare_cached("UPDATE sessions SET records = records - 1 WHERE id = ?1")?
            .execute([session])?;
        Ok(())
    }

    /// How many new records this transaction stored so far.
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    /// Commits everything; a pass that deferred the records' hash index
    /// builds it in this last transaction.
    pub fn commit(mut self) -> Result<(), StoreError> {
        self.end_deferral()?;
        self.finish()
    }
}

/// The first line of a prompt, trimmed to a title.
pub(super) fn session_title(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut end = line.len().min(120);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

/// What identifies a session and what a record may add to it.
pub(super) struct SessionKey<'a> {
    pub(super) agent: &'a str,
    pub(super) session_id: &'a str,
    pub(super) parent_session: Option<&'a str>,
    pub(super) project: Option<&'a str>,
}

/// The `sessions` row for a record's session, created if new (a parent or
/// project learned later fills a gap, never overwrites); kept in `ids` for
/// the transaction.
pub(super) fn session_row(
    conn: &rusqlite::Connection,
    key: &SessionKey<'_>,
    origin: &str,
    ids: &mut RowIds,
) -> Result<i64, StoreError> {
    if let Some((agent, session_id, id)) = &ids.last_session
        && agent == key.agent
        && session_id == key.session_id
    {
        return Ok(*id);
    }
    let cache_key = (key.agent.to_owned(), key.session_id.to_owned());
    let id = match ids.sessions.get(&cache_key) {
        Some(id) => *id,
        None => {
            conn.prepare_cached(
                "INSERT INTO sessions(agent, session_id, parent_session, project, origin)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(agent, session_id) DO UPDATE SET
                    parent_session = COALESCE(sessions.parent_session, excluded.parent_session),
                    project = COALESCE(sessions.project, excluded.project)",
            )?
            .execute(params![
                key.agent,
                key.session_id,
                key.parent_session,
                key.project,
                origin
            ])?;
            let id: i64 = conn
                .prepare_cached("SELECT id FROM sessions WHERE agent = ?1 AND session_id = ?2")?
                .query_row((key.agent, key.session_id), |r| r.get(0))?;
            ids.sessions.insert(cache_key.clone(), id);
            id
        }
    };
    ids.last_session = Some((cache_key.0, cache_key.1, id));
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_to_what_a_survey_holds_of_a_store_moves_the_sources_generation() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let mut seen = vec![store.sources_gen().expect("gen").expect("has one")];
        let mut moved = |store: &Store| {
            let g = store.sources_gen().expect("gen").expect("has one");
            let new = !seen.contains(&g);
            seen.push(g);
            new
        };
        // A store first read: its row made.
        let mut ing = store.ingest("origin").expect("ingest");
        let mut state = ing.source("codex", "/a.jsonl", "lines").expect("row");
        ing.commit().expect("commit");
        assert!(moved(&store), "a new row");
        // Read again: its size, mtime and offset saved, then an error.
        for change in [
            |s: &mut SourceState| s.size = 5,
            |s: &mut SourceState| s.mtime_ns = 7,
            |s: &mut SourceState| s.last_error = Some("unreadable".into()),
            |s: &mut SourceState| s.last_error = None,
        ] {
            change(&mut state);
            let mut ing = store.ingest("origin").expect("ingest");
            ing.save_state(&state, 0).expect("save");
            ing.commit().expect("commit");
            assert!(moved(&store), "{state:?}");
        }
        // Gone from disk, marked so, and marked again for nothing.
        let stamps = store.source_stamps().expect("stamps");
        store
            .mark_missing(&stamps, &[false], &["codex"])
            .expect("mark");
        assert!(moved(&store), "marked gone");
        let stamps = store.source_stamps().expect("stamps");
        store
            .mark_missing(&stamps, &[false], &["codex"])
            .expect("mark");
        assert!(!moved(&store), "nothing written");
        // Back: the row found again.
        let mut ing = store.ingest("origin").expect("ingest");
        ing.source("codex", "/a.jsonl", "lines").expect("row");
        ing.commit().expect("commit");
        assert!(moved(&store), "back");
        // Reads leave it.
        store.source_state("/a.jsonl").expect("state");
        store.source_stamp("/a.jsonl").expect("stamp");
        assert!(!moved(&store), "reads");
    }

    #[test]
    fn saving_a_stores_state_leaves_the_full_text_terms_pending() {
        // Each write inside one transaction: the full-text index holds
        // its new terms in memory across the saves (a savepoint per save
        // would write them out as a segment each).
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let mut ing = store.ingest("origin").expect("ingest");
        let mut state = ing.source("codex", "/a.jsonl", "lines").expect("row");
        for i in 0..20i64 {
            ing.conn
                .execute(
                    "INSERT INTO fts(rowid, body, files) VALUES (?1, 'a heron', '')",
                    [i],
                )
                .expect("fts");
            state.size = i as u64;
            ing.save_state(&state, 0).expect("save");
        }
        ing.commit().expect("commit");
        assert_eq!(store.text_index_segments().0, 1);
    }
}
