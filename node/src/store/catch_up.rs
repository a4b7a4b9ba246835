//! A large catch-up from a peer, stored on the local bulk path.
//!
//! While a peer holds much more of a log than this node (a first sync of
//! a big history), its batches are stored as a large local pass stores
//! its records: the records' hash index is deferred across the batches
//! (`store::hash_index`: dropped and noted in the catch-up's first
//! transaction, a map of hash prefixes standing in for it, built once at
//! the end) and the new records' vectors are left to the vector pass the
//! node runs when the catch-up ends, as a cold pass leaves them to the one
//! after it. Each batch is still checked and stored in its own transaction
//! with its watermark (`store::apply`); only where the index work happens
//! moves.
//!
//! Several sessions (one per peer) may catch up at once: each log in
//! bulk names the holder (a session) that pulls it, and the catch-up, with
//! its deferral, lasts until no holder has a log left
//! ([`CatchUp::release`]), so one session ending never ends another's.
//!
//! Owns when a catch-up is large enough ([`Store::begin_catch_up`]) and
//! the hold on the deferred index between batches. Must not keep the
//! index deferred past [`Store::end_catch_up`], and never trusts its map
//! once another writer built the index (checked at each batch).

use std::collections::{BTreeMap, BTreeSet};

use cairn_protocol::{Hash32, NodeId};
use rusqlite::Connection;

use super::bulk::{Bulk, BulkPlan, Loaded};
use super::hash_index::{self, HashIds};
use super::{Store, StoreError};

/// Entries a peer must hold past a batch for the batches that bring them
/// to take the bulk path: a dozen batches or more. Below it, per-batch
/// vectors and the index as it stands cost less than the work at the end.
/// In tests a few batches do, so sessions go through it.
pub const CATCH_UP_MIN: u64 = if cfg!(test) { 64 } else { 12_000 };

/// WAL pages after which a commit checkpoints, during a catch-up (64 MiB
/// of 4 KiB pages): pages its batches write again and again (the tables'
/// last leaves, the indexes' inner pages) are copied into the database
/// file once per checkpoint instead of once per 1,000 pages.
const CATCH_UP_CHECKPOINT_PAGES: i64 = 16_384;
/// SQLite's own, put back at the catch-up's end.
const DEFAULT_CHECKPOINT_PAGES: i64 = 1_000;
/// Bytes of write-ahead log file kept once it is emptied.
const WAL_KEPT_BYTES: i64 = 8 << 20;

/// A catch-up on the bulk path, from [`Store::begin_catch_up`] until
/// [`Store::end_catch_up`]. Held by the caller between batches.
#[derive(Debug)]
pub struct CatchUp {
    /// The logs (origin, epoch) whose remaining entries come in bulk, each
    /// with the holders (sessions) pulling it.
    logs: BTreeMap<(NodeId, u64), BTreeSet<u64>>,
    /// The hold on the deferred hash index, while it lasts.
    deferral: Option<Deferral>,
    /// The bulk-load policy around its batches (`store::bulk`).
    bulk: Bulk,
    /// Records its batches stored.
    stored: u64,
}

/// The map standing in for the hash index, and the token in `meta` that
/// says it still does.
#[derive(Debug)]
struct Deferral {
    ids: HashIds,
    token: String,
}

/// Whether a catch-up bringing `coming` entries into a database holding
/// `stored` records defers the hash index: building it once over both at
/// the end costs less than `coming` random inserts into it only when what
/// is there is not much larger than what comes (a local pass asks the
/// same of bytes: `indexer::defers_hash_index`).
pub(crate) fn defers_index(coming: u64, stored: u64) -> bool {
    coming >= CATCH_UP_MIN && stored <= coming
}

impl CatchUp {
    /// Adds a log whose remaining entries come in bulk, pulled by
    /// `holder`.
    pub fn add_log(&mut self, origin: NodeId, epoch: u64, holder: u64) {
        self.logs.entry((origin, epoch)).or_default().insert(holder);
    }

    /// The log is caught up; returns whether no bulk log is left.
    pub fn log_done(&mut self, origin: NodeId, epoch: u64) -> bool {
        self.logs.remove(&(origin, epoch));
        self.logs.is_empty()
    }

    /// `holder` ended (its session is over, or a batch of it failed): its
    /// logs leave the bulk path. Returns whether no bulk log is left.
    pub fn release(&mut self, holder: u64) -> bool {
        self.logs.retain(|_, h| {
            h.remove(&holder);
            !h.is_empty()
        });
        self.logs.is_empty()
    }

    /// The holders with a log in bulk.
    pub fn holders(&self) -> BTreeSet<u64> {
        self.logs.values().flatten().copied().collect()
    }

    /// Whether the batch's records are stored without their vectors.
    pub fn covers(&self, origin: NodeId, epoch: u64) -> bool {
        self.logs.contains_key(&(origin, epoch))
    }

    /// Whether this catch-up holds the hash index deferred (for tests).
    #[cfg(test)]
    pub(crate) fn defers_hash_index(&self) -> bool {
        self.deferral.is_some()
    }

    /// At the start of a batch's transaction: whether this catch-up still
    /// holds the hash index deferred. Another writer that built the index
    /// since ends the deferral; so does a batch with `tombstones`, whose
    /// purges look records up by hash in SQL (the caller then builds the
    /// index with [`hash_index::ensure`]).
    pub(super) fn hold(&mut self, conn: &Connection, tombstones: bool) -> Result<bool, StoreError> {
        if let Some(d) = &self.deferral
            && (tombstones || !hash_index::holds(conn, &d.token)?)
        {
            tracing::info!("the catch-up's deferred hash index is built now");
            self.deferral = None;
        }
        Ok(self.deferral.is_some())
    }

    /// Counts records a batch of it stored.
    pub(super) fn stored(&mut self, records: u64) {
        self.stored += records;
    }

    /// The map standing in for the hash index, while it does (checked at
    /// the start of the transaction by [`CatchUp::hold`]).
    pub(super) fn map(&mut self) -> Option<&mut HashIds> {
        self.deferral.as_mut().map(|d| &mut d.ids)
    }

    /// Gives the map up inside the current transaction: the index is built
    /// there (a row id the map cannot hold).
    pub(super) fn give_up(&mut self, conn: &Connection) -> Result<(), StoreError> {
        self.deferral = None;
        hash_index::ensure(conn)?;
        Ok(())
    }
}

impl Store {
    /// Starts the bulk path for a catch-up of the log `(origin, epoch)`,
    /// whose peer holds `coming` entries past the batch in hand. `None`
    /// when that is too few ([`CATCH_UP_MIN`]). The hash index is deferred
    /// here, in a transaction of its own, when the database is small beside
    /// what comes and no other pass defers it.
    pub fn begin_catch_up(
        &mut self,
        origin: NodeId,
        epoch: u64,
        coming: u64,
        holder: u64,
    ) -> Result<Option<CatchUp>, StoreError> {
        if coming < CATCH_UP_MIN {
            return Ok(None);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let stored: i64 = tx.query_row("SELECT count(*) FROM records", [], |r| r.get(0))?;
        let deferral = if defers_index(coming, stored.max(0) as u64) {
            let token = hash_index::new_token();
            hash_index::defer(&tx, &token)?.map(|ids| Deferral { ids, token })
        } else {
            None
        };
        tx.commit()?;
        let bulk = self.begin_bulk(BulkPlan::for_catch_up(deferral.is_some()))?;
        self.conn
            .pragma_update(None, "wal_autocheckpoint", CATCH_UP_CHECKPOINT_PAGES)?;
        // The log file it grows shrinks back once a checkpoint has
        // emptied it (SQLite otherwise reuses it at its largest size).
        self.conn
            .pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)?;
        tracing::info!(
            coming,
            stored,
            defers_hash_index = deferral.is_some(),
            "a large catch-up takes the bulk path"
        );
        Ok(Some(CatchUp {
            logs: BTreeMap::from([((origin, epoch), BTreeSet::from([holder]))]),
            deferral,
            bulk,
            stored: 0,
        }))
    }

    /// Ends a catch-up: builds the records' hash index if it deferred it.
    /// The caller computes the vectors it left.
    /// The full-text merge its end leaves goes in steps: one here, the
    /// rest noted as due ([`Store::step_left_merge`]).
    pub fn end_catch_up(&mut self, c: CatchUp) -> Result<(), StoreError> {
        let CatchUp {
            deferral,
            bulk,
            stored,
            ..
        } = c;
        if let Err(e) =
            self.conn
                .pragma_update(None, "wal_autocheckpoint", DEFAULT_CHECKPOINT_PAGES)
        {
            tracing::warn!(error = %e, "the log's checkpoint interval stays raised");
        }
        if deferral.is_some() {
            // Its memory goes before the index build's sorter takes some.
            drop(deferral);
            self.ensure_hash_index()?;
        }
        let loaded = Loaded {
            added: stored,
            deferred: 0,
        };
        self.end_bulk(bulk, Some(loaded), Some(std::time::Instant::now()))
    }

    /// One step of a full-text merge left due (by a catch-up's end, or a
    /// pass cut short); returns whether one is still due.
    pub fn step_left_merge(&mut self) -> Result<bool, StoreError> {
        if !self.merge_due()? {
            return Ok(false);
        }
        self.finish_left_merge(Some(std::time::Instant::now()));
        self.merge_due()
    }
}

/// The row id of the stored record with `hash`: from the catch-up's map
/// while it stands in for the index, else through the index.
pub(super) fn record_id(
    conn: &Connection,
    map: Option<&HashIds>,
    hash: &Hash32,
) -> Result<Option<i64>, StoreError> {
    match map {
        Some(m) => m.find(conn, hash),
        None => super::log::record_id(conn, hash),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_catch_up_into_a_database_no_larger_defers_the_index() {
        assert!(defers_index(CATCH_UP_MIN, 0));
        assert!(defers_index(CATCH_UP_MIN * 5, CATCH_UP_MIN * 5));
        assert!(!defers_index(CATCH_UP_MIN * 5, CATCH_UP_MIN * 5 + 1));
        assert!(!defers_index(CATCH_UP_MIN - 1, 0));
    }
}
