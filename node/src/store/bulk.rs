//! Bulk loading: how a writer that stores much at once uses the database.
//! Owns the policy of an indexing pass's writer (how often it commits,
//! how large its page cache grows, whether the records' hash index is
//! built at its end instead of at every commit) and the merges of the
//! full-text indexes around it (FTS5's own merging paused during a large
//! pass, merges in steps with a deadline, a merge left due finished by a
//! later pass).
//!
//! It decides and carries out that policy around a writer's
//! transactions; the records themselves go through [`Ingest`], and it
//! knows nothing of agent files or of the pass that feeds it.

use std::time::{Duration, Instant};

use super::ingest::Ingest;
use super::{Store, StoreError, fts};

/// When the writer commits: once its transaction holds this much text or
/// has been open this long, whichever comes first.
#[derive(Debug, Clone, Copy)]
struct TxLimits {
    bytes: u64,
    time: Duration,
}

/// A pass with less than this to read is a catch-up: it commits often,
/// so other writers get in soon and a crash re-reads little.
const LARGE_PASS: u64 = 256 << 20;
/// Commits of a catch-up pass.
const TX_CATCH_UP: TxLimits = TxLimits {
    bytes: 32 << 20,
    time: Duration::from_millis(750),
};
/// Commits of a large (cold) pass. Each commit flushes the full-text
/// indexes' pending terms into a new segment (merged again later) and
/// writes every page it dirtied, so the scattered pages of the hash
/// indexes are written once per commit: with fewer, larger commits a 3 GB
/// corpus wrote 3.1 GB instead of 7.2 GB and took 14% less CPU. Three
/// seconds stays well inside the 10 s other writers wait for the lock.
const TX_LARGE: TxLimits = TxLimits {
    bytes: 128 << 20,
    time: Duration::from_secs(3),
};
/// Commits of a large pass into a database that will be larger than
/// [`LARGER_DB`]: twice as far apart, since the larger the hash indexes,
/// the more of their pages each commit dirties and writes again (a 10 GB
/// corpus took 6% less CPU and 8% less time). Six seconds still leaves
/// other writers four of the ten they wait for the lock.
const TX_LARGER: TxLimits = TxLimits {
    bytes: 256 << 20,
    time: Duration::from_secs(6),
};
/// The database size (what is there plus what the pass will add) from
/// which a large pass commits by [`TX_LARGER`].
const LARGER_DB: u64 = 2 << 30;
/// The writer's page cache (KiB) while it has work: large enough for the
/// full-text merges, which otherwise re-read pages from the OS.
const WRITER_CACHE_KIB: u32 = 32 * 1024;
/// A large pass's writer cache grows to this share of the database it will
/// leave (about a quarter of what it reads is written), up to
/// [`MAX_WRITER_CACHE_KIB`]: the records' hash index takes random inserts
/// and is a few percent of the database, so a cache that keeps pace with it
/// saves re-reading its pages (on a 3 GB corpus a cache a quarter of the
/// size cost 6% more CPU).
const WRITER_CACHE_SHARE: u64 = 16;
/// The most a large pass's writer cache grows to (KiB).
const MAX_WRITER_CACHE_KIB: u32 = 128 * 1024;

/// The meta key present while a merge of the full-text indexes is due
/// (see [`Store::note_merge_due`]).
const MERGE_DUE: &str = "fts_merge_due";

/// Ends a merge of the full-text indexes in its last transaction `tx`: the
/// note that it was due goes, and FTS5 merges on its own again (a large
/// pass paused it: see [`Store::pause_text_merging`]).
fn merged(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    super::meta_drop(tx, MERGE_DUE)?;
    fts::resume_merging(tx)
}

/// Leaf pages of full-text merge work per transaction: about 50 ms of it.
pub(crate) const MERGE_PAGES: u32 = 2_000;

/// How long a stepped merge lets go of the write lock between steps, for
/// a writer waiting on it to take it (SQLite's busy handler retries every
/// few milliseconds at first, then every 25 to 100).
const MERGE_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// Steps of one stepped merge at most: far more than any history needs
/// (10 GB takes a few hundred), a bound on the loop.
const MAX_MERGE_STEPS: u32 = 100_000;

/// How the writer of one pass works.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BulkPlan {
    limits: TxLimits,
    /// Its page cache (KiB).
    cache_kib: u32,
    /// Whether it builds the records' hash index at its end instead of at
    /// every commit (see `store::hash_index`).
    defer_hash_index: bool,
}

impl BulkPlan {
    /// The plan for a pass with `total` bytes to read into `store`,
    /// `to_end` when nothing cuts it short (no deadline).
    pub(crate) fn for_pass(
        store: &Store,
        total: u64,
        to_end: bool,
    ) -> Result<BulkPlan, StoreError> {
        let db_bytes = if total >= LARGE_PASS {
            store.db_bytes()?
        } else {
            0
        };
        let (limits, cache_kib) = writer_policy(total, db_bytes);
        let defer_hash_index = to_end && defers_hash_index(total, db_bytes);
        Ok(BulkPlan {
            limits,
            // The cache grows with the database for the hash index's random
            // inserts; a pass that defers the index has none to make, and its
            // map and the index's build at the end need the memory instead
            // (10 GB: peak RSS 451 MB with both).
            cache_kib: if defer_hash_index {
                WRITER_CACHE_KIB
            } else {
                cache_kib
            },
            defer_hash_index,
        })
    }

    /// The plan for a peer's large catch-up (`store::catch_up`), whose
    /// batches commit one by one: the writer's cache, and, when it stores
    /// much into a database small beside it (`large`: it defers the hash
    /// index), FTS5's own merging paused for one merge at its end, as for
    /// a large pass. Each batch's segments would otherwise be merged again
    /// and again by the next batches' commits.
    pub(crate) fn for_catch_up(large: bool) -> BulkPlan {
        BulkPlan {
            limits: if large { TX_LARGE } else { TX_CATCH_UP },
            cache_kib: WRITER_CACHE_KIB,
            defer_hash_index: false,
        }
    }

    /// Whether the pass is a large one (see [`LARGE_PASS`]).
    fn large(&self) -> bool {
        self.limits.bytes > TX_CATCH_UP.bytes
    }
}

/// A bulk load under way: from [`Store::begin_bulk`] to [`Store::end_bulk`].
#[derive(Debug)]
pub(crate) struct Bulk {
    plan: BulkPlan,
    /// The connection's own cache size, put back at the end.
    cache_before: u32,
    /// Text written in the open transaction.
    tx_bytes: u64,
    tx_started: Instant,
}

/// What a bulk load that ended well did, for the merge after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loaded {
    /// Records it stored.
    pub(crate) added: u64,
    /// Stores (or parts of one) it left for a later load.
    pub(crate) deferred: u64,
}

impl Bulk {
    /// Starts the load's transactions in `ing`: defers the records' hash
    /// index when the plan says so.
    pub(crate) fn start(&mut self, ing: &mut Ingest<'_>) -> Result<(), StoreError> {
        if self.plan.defer_hash_index && !ing.defer_hash_index()? {
            tracing::debug!("the records' hash index stays for this pass");
        }
        self.tx_bytes = 0;
        self.tx_started = Instant::now();
        Ok(())
    }

    /// Counts `bytes` of text written in the open transaction.
    pub(crate) fn wrote(&mut self, bytes: u64) {
        self.tx_bytes += bytes;
    }

    /// Commits and goes on in a new transaction once the open one holds
    /// the plan's amount of text or has been open its time.
    pub(crate) fn commit_if_due(&mut self, ing: &mut Ingest<'_>) -> Result<(), StoreError> {
        let limits = self.plan.limits;
        if self.tx_bytes >= limits.bytes || self.tx_started.elapsed() >= limits.time {
            ing.commit_and_continue()?;
            self.tx_bytes = 0;
            self.tx_started = Instant::now();
        }
        Ok(())
    }
}

impl Store {
    /// Sets the database up for a bulk load by `plan`: the writer's page
    /// cache, and for a large load FTS5's own merging paused.
    pub(crate) fn begin_bulk(&mut self, plan: BulkPlan) -> Result<Bulk, StoreError> {
        // The connection's own size (SQLite's default, or a search's) is put
        // back afterwards.
        let cache_before = self.cache_kib()?;
        self.set_cache_kib(plan.cache_kib)?;
        // A large pass ends with one merge of what its commits wrote (or the
        // pass that finishes its backlog does: see `merge_step`), so FTS5's
        // own merging along the way would only write the same entries twice.
        if plan.large()
            && let Err(e) = self.pause_text_merging()
        {
            tracing::warn!(error = %e, "full-text merging not paused for a large pass");
        }
        Ok(Bulk {
            plan,
            cache_before,
            tx_bytes: 0,
            tx_started: Instant::now(),
        })
    }

    /// Ends a bulk load, `loaded` when it ended well (`None` after an
    /// error): the hash index built if the failed load deferred it, the
    /// full-text merge when due, the cache put back, and after a large
    /// load the WAL file truncated until `until`.
    pub(crate) fn end_bulk(
        &mut self,
        bulk: Bulk,
        loaded: Option<Loaded>,
        until: Option<Instant>,
    ) -> Result<(), StoreError> {
        let large = bulk.plan.large();
        if loaded.is_none()
            && bulk.plan.defer_hash_index
            && let Err(e) = self.ensure_hash_index()
        {
            // The next writer that looks a record up by hash builds it.
            tracing::warn!(error = %e, "the records' hash index not built after a failed pass");
        }
        if let Some(loaded) = loaded {
            merge_when_due(self, large, loaded, until);
        }
        self.set_cache_kib(bulk.cache_before)?;
        if loaded.is_some() && large {
            // Large commits grow the WAL file (~90 MB at 1 GB), and SQLite
            // keeps it at that size while a connection stays open (a daemon):
            // give the space back once. A reader in the way only defers it,
            // and the pass is done whatever happens here.
            if let Err(e) = self.truncate_wal() {
                tracing::debug!(error = %e, "WAL not truncated after a large pass");
            }
        }
        Ok(())
    }

    /// A pass with nothing to read still ends a merge of the full-text
    /// indexes left due: a process killed during the merge at the end of a
    /// large pass (or before it) leaves FTS5's own merging paused and the
    /// merge noted as due (`Store::pause_text_merging`), with every store
    /// read, so no later pass would reach the writer that merges. Cheap when
    /// nothing is due (one look-up in `meta`); with the pass's deadline
    /// `until`, the merge goes in steps and a later pass goes on with it.
    pub(crate) fn finish_left_merge(&mut self, until: Option<Instant>) {
        let nothing = Loaded {
            added: 0,
            deferred: 0,
        };
        merge_when_due(self, false, nothing, until);
    }

    /// Merges each full-text index into one segment: with a deadline
    /// `until`, a step of about `pages` leaf pages per transaction, until
    /// nothing is left to merge or `until` has passed (one step at least);
    /// with none, in one transaction. A large pass ends with it: the segments it leaves on the lowest level would otherwise be
    /// merged by whichever small write later fills that level, a search's
    /// refresh or a daemon's pass (1.2 s of one search at 1 GB), where here
    /// it costs 0.9 s at 1 GB and 10 s at 10 GB once. In steps, so that
    /// another writer (a note remembered, a daemon's received batch) waits
    /// a step, not the whole merge: after each step the lock is let go for
    /// [`MERGE_PAUSE`]. The merge noted as due ([`Store::note_merge_due`])
    /// is forgotten with the last step, in its transaction; a merge cut
    /// short is noted as due, for a later pass to go on with it. Returns
    /// whether it finished.
    pub(crate) fn merge_text_indexes(
        &mut self,
        until: Option<std::time::Instant>,
        pages: u32,
    ) -> Result<bool, StoreError> {
        let Some(until) = until else {
            // No deadline (a `cairn index`, whose own transactions hold
            // the lock as long): the whole merge at once, which is faster
            // and leaves fewer free pages than steps.
            let tx = self.conn.transaction()?;
            fts::optimize(&tx)?;
            merged(&tx)?;
            tx.commit()?;
            return Ok(true);
        };
        for step in 0..MAX_MERGE_STEPS {
            if step > 0 {
                if std::time::Instant::now() >= until {
                    self.note_merge_due()?;
                    return Ok(false);
                }
                std::thread::sleep(MERGE_PAUSE);
            }
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let worked = fts::merge_step(&tx, pages)?;
            if !worked {
                merged(&tx)?;
            }
            tx.commit()?;
            if !worked {
                return Ok(true);
            }
        }
        self.note_merge_due()?;
        Ok(false)
    }

    /// Notes that the full-text indexes hold the segments of a large
    /// backlog that passes cut short by their deadline (a daemon's, a
    /// search's) stored, for the pass that finishes it to merge.
    pub(crate) fn note_merge_due(&self) -> Result<(), StoreError> {
        self.set_meta(MERGE_DUE, "1")
    }

    /// Stops FTS5's own merging of the full-text indexes for a large pass
    /// (see `fts::pause_merging`) and notes the merge as due, in one
    /// transaction: whatever becomes of the pass, merging resumes with the
    /// merge of everything its commits left, by the pass that finishes the
    /// backlog ([`Store::merge_text_indexes`]), never before it.
    pub(crate) fn pause_text_merging(&mut self) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        fts::pause_merging(&tx)?;
        super::meta_set(&tx, MERGE_DUE, "1")?;
        tx.commit()?;
        Ok(())
    }

    /// Segments in the full-text index and in the stemmed one.
    #[cfg(test)]
    pub(crate) fn text_index_segments(&self) -> (u64, u64) {
        (
            fts::segments(&self.conn, "fts"),
            fts::segments(&self.conn, "fts_stem"),
        )
    }

    /// Whether FTS5 merges the full-text indexes on its own, as the schema
    /// has it (not paused by [`Store::pause_text_merging`]).
    #[cfg(test)]
    pub(crate) fn text_merging(&self) -> bool {
        fts::merging(&self.conn)
    }

    /// Whether a merge was noted as due and not done since.
    pub(crate) fn merge_due(&self) -> Result<bool, StoreError> {
        Ok(self.meta(MERGE_DUE)?.is_some())
    }
}

/// Whether a pass with `total` bytes to read into a database of
/// `db_bytes`, run to its end, defers the records' hash index: a large
/// pass into a database small beside it (a first index, above all), where
/// building the index once at the end costs far less than writing it
/// again at every commit, and loading the hashes already stored is quick.
fn defers_hash_index(total: u64, db_bytes: u64) -> bool {
    total >= LARGE_PASS && db_bytes.saturating_mul(4) <= total
}

/// How the writer commits, and its page cache (KiB), for a pass with
/// `total` bytes to read into a database of `db_bytes`.
fn writer_policy(total: u64, db_bytes: u64) -> (TxLimits, u32) {
    if total < LARGE_PASS {
        return (TX_CATCH_UP, WRITER_CACHE_KIB);
    }
    let expected = db_bytes + total / 4;
    let kib = (expected / WRITER_CACHE_SHARE / 1024).min(u64::from(MAX_WRITER_CACHE_KIB));
    let limits = if expected >= LARGER_DB {
        TX_LARGER
    } else {
        TX_LARGE
    };
    (limits, (kib as u32).max(WRITER_CACHE_KIB))
}

/// Merges the full-text indexes after a load that did what `loaded` says, when
/// [`merge_step`] says so, or notes the merge as due. A failure is only
/// logged: the pass is done whatever happens here.
fn merge_when_due(store: &mut Store, large: bool, loaded: Loaded, until: Option<Instant>) {
    let due = match store.merge_due() {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell whether a full-text merge is due");
            return;
        }
    };
    match merge_step(large, loaded, due) {
        MergeStep::Now => {
            let started = Instant::now();
            match store.merge_text_indexes(until, MERGE_PAGES) {
                Ok(true) => tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    "merged the full-text indexes after a large backlog"
                ),
                Ok(false) => tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    "merged part of the full-text indexes; a later pass goes on"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "full-text indexes not merged after a large backlog")
                }
            }
        }
        MergeStep::Due => {
            if let Err(e) = store.note_merge_due() {
                tracing::warn!(error = %e, "cannot note a full-text merge as due");
            }
        }
        MergeStep::Nothing => {}
    }
}

/// What a pass does about merging the full-text indexes.
#[derive(Debug, PartialEq, Eq)]
enum MergeStep {
    /// Merge each into one segment now.
    Now,
    /// Note the merge as due, for the pass that finishes the backlog.
    Due,
    Nothing,
}

/// What a pass that did what `loaded` says does about the merge, `large` when it
/// had a large backlog to read, `due` when an earlier pass noted it.
///
/// A large backlog read to its end leaves each full-text index merged into
/// one segment: the large segments its commits leave on the lowest level
/// would otherwise be merged by whichever small write later fills that
/// level, inside a search's refresh or a daemon's pass (1.2 s at 1 GB).
/// Read in one pass (a cold `cairn index`), that pass merges. Read in
/// passes cut short by their deadline (a daemon's, a search's, such as the
/// first ones after `cairn install`), the first to store something notes
/// the merge as due, and the pass that reads the rest (small or not, with
/// something to store or not) merges. (A large pass also notes it as due
/// when it starts, with FTS5's own merging paused until that merge:
/// `Store::pause_text_merging`.)
fn merge_step(large: bool, loaded: Loaded, due: bool) -> MergeStep {
    let stored_much = large && loaded.added > 0;
    match (loaded.deferred == 0, due) {
        (true, true) => MergeStep::Now,
        (true, false) if stored_much => MergeStep::Now,
        (false, false) if stored_much => MergeStep::Due,
        _ => MergeStep::Nothing,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn report(added: u64, deferred: u64) -> Loaded {
        Loaded { added, deferred }
    }

    #[test]
    fn a_large_backlog_is_merged_by_the_pass_that_finishes_it() {
        use MergeStep::{Due, Nothing, Now};
        // Read in one pass (a cold index).
        assert_eq!(merge_step(true, report(10, 0), false), Now);
        // Read by passes cut short by their deadline (a daemon's, a
        // search's): the first that stores something notes the merge, the
        // one that reads the rest merges, large or not, with something to
        // store or not.
        assert_eq!(merge_step(true, report(10, 3), false), Due);
        assert_eq!(merge_step(true, report(10, 2), true), Nothing);
        assert_eq!(merge_step(false, report(0, 1), true), Nothing);
        assert_eq!(merge_step(false, report(4, 0), true), Now);
        assert_eq!(merge_step(false, report(0, 0), true), Now);
        // Nothing large stored: the small writes' own merging suffices.
        assert_eq!(merge_step(true, report(0, 0), false), Nothing);
        assert_eq!(merge_step(true, report(0, 3), false), Nothing);
        assert_eq!(merge_step(false, report(10, 0), false), Nothing);
        assert_eq!(merge_step(false, report(10, 3), false), Nothing);
    }

    /// Adds `text` to both full-text indexes as record `rowid`, in a
    /// commit of its own.
    fn index_text(store: &Store, rowid: i64, text: &str) {
        store
            .test_conn()
            .execute(
                "INSERT INTO fts(rowid, body, files) VALUES (?1, ?2, '')",
                (rowid, text),
            )
            .expect("fts");
        store
            .test_conn()
            .execute(
                "INSERT INTO fts_stem(rowid, body) VALUES (?1, ?2)",
                (rowid, text),
            )
            .expect("stem");
    }

    /// Records the exact index finds for "heron".
    pub(crate) fn heron_hits(store: &Store) -> i64 {
        store
            .test_conn()
            .query_row(
                "SELECT count(*) FROM fts WHERE fts MATCH 'heron'",
                [],
                |r| r.get(0),
            )
            .expect("count")
    }

    #[test]
    fn a_merge_noted_as_due_is_done_by_the_pass_that_finishes_and_then_forgotten() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        // One commit per record: a segment each, as a backlog's commits leave.
        let add = |store: &Store, from: i64| {
            for i in from..from + 6 {
                index_text(store, i, &format!("heron number {i} landed"));
            }
        };
        add(&store, 0);
        // A large pass cut short: noted, not merged.
        merge_when_due(&mut store, true, report(6, 40), None);
        assert!(store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (6, 6));
        // The note outlives the store being opened again (a daemon restarted).
        drop(store);
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("reopen");
        add(&store, 6);
        merge_when_due(&mut store, true, report(6, 20), None);
        assert!(store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (12, 12));
        // The small pass that reads the rest merges, and the note goes.
        merge_when_due(&mut store, false, report(1, 0), None);
        assert!(!store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (1, 1));
        // Later small passes leave their segments to FTS5's own merging.
        add(&store, 12);
        merge_when_due(&mut store, false, report(6, 0), None);
        assert_eq!(store.text_index_segments(), (7, 7));
        assert!(!store.merge_due().expect("due"));
    }

    #[test]
    fn a_large_pass_pauses_fts5_merging_until_the_merge_that_ends_its_backlog() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("cairn.db");
        let mut store = Store::open(&path).expect("open");
        // One commit per record: a segment each, as a pass's commits leave.
        let add = |store: &Store, from: i64, n: i64| {
            for i in from..from + n {
                index_text(store, i, &format!("heron number {i} landed"));
            }
        };
        // Merging on its own, FTS5 merges sixteen segments of a level into one.
        assert!(store.text_merging());
        add(&store, 0, 20);
        let (words, stems) = store.text_index_segments();
        assert!(words < 20 && stems < 20, "{words} {stems}");
        // A large pass starts: merging stops, and the merge is due.
        store.pause_text_merging().expect("pause");
        assert!(!store.text_merging());
        assert!(store.merge_due().expect("due"));
        add(&store, 20, 20);
        assert_eq!(store.text_index_segments(), (words + 20, stems + 20));
        // Cut short (by its deadline, or killed): paused and due still,
        // after the store is opened again.
        merge_when_due(&mut store, true, report(20, 5), None);
        drop(store);
        let mut store = Store::open(&path).expect("reopen");
        assert!(!store.text_merging());
        assert!(store.merge_due().expect("due"));
        // The pass that reads the rest merges it all, and merging resumes.
        merge_when_due(&mut store, false, report(0, 0), None);
        assert_eq!(store.text_index_segments(), (1, 1));
        assert!(!store.merge_due().expect("due"));
        assert!(store.text_merging());
        add(&store, 40, 20);
        let (words, stems) = store.text_index_segments();
        assert!(words < 20 && stems < 20, "{words} {stems}");
        // Paused, a level's segments are still merged from 64 on (a crisis
        // merge), and a merge in steps resumes merging too.
        // (FTS5 left fewer than sixteen of them on the lowest level.)
        store.pause_text_merging().expect("pause");
        add(&store, 60, 40);
        assert_eq!(store.text_index_segments(), (words + 40, stems + 40));
        add(&store, 100, 30);
        let (more_words, more_stems) = store.text_index_segments();
        assert!(
            more_words < words + 70 && more_stems < stems + 70,
            "{more_words} {more_stems}"
        );
        let mut steps = 0;
        while !store
            .merge_text_indexes(Some(Instant::now()), MERGE_PAGES)
            .expect("step")
        {
            steps += 1;
            assert!(steps < 1_000, "the merge never ends");
        }
        assert_eq!(store.text_index_segments(), (1, 1));
        assert!(store.text_merging());
        assert_eq!(heron_hits(&store), 130);
    }

    #[test]
    fn a_merge_cut_short_by_its_deadline_is_noted_and_a_later_pass_finishes_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        for i in 0..40i64 {
            // Many words a record: each segment spans several pages.
            let words: Vec<String> = (0..600).map(|j| format!("w{}", i * 600 + j)).collect();
            index_text(&store, i, &format!("heron number {i} {}", words.join(" ")));
        }
        // One commit a record: segments FTS5's own merging leaves many of.
        let (words, stems) = store.text_index_segments();
        assert!(words > 4 && stems > 4, "{words} {stems}");
        // A deadline already past: one step of one page, then noted as due.
        let past = Some(Instant::now());
        assert!(!store.merge_text_indexes(past, 1).expect("step"));
        assert!(store.merge_due().expect("due"));
        assert_ne!(store.text_index_segments(), (1, 1));
        // Each later pass goes on where the last stopped, until one step
        // finds nothing left: one segment each, as an optimize leaves,
        // and the note gone with it.
        let mut steps = 1;
        while !store
            .merge_text_indexes(Some(Instant::now()), 1)
            .expect("step")
        {
            steps += 1;
            assert!(steps < 1_000, "the merge never ends");
        }
        assert!(steps > 1, "one page of work did it all");
        assert!(!store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (1, 1));
        assert_eq!(heron_hits(&store), 40);
    }

    #[test]
    fn only_a_large_pass_commits_less_often_with_a_cache_that_follows_the_database() {
        const MIB: u64 = 1 << 20;
        let (small, cache) = writer_policy(100 * MIB, 0);
        assert_eq!(
            (small.bytes, small.time, cache),
            (32 * MIB, Duration::from_millis(750), 32 * 1024)
        );
        // A 1 GB cold pass: large commits, the cache stays at its floor.
        let (large, cache) = writer_policy(1024 * MIB, 0);
        assert_eq!(
            (large.bytes, large.time, cache),
            (128 * MIB, Duration::from_secs(3), 32 * 1024)
        );
        // 3 GB into an empty database, then on top of one of 1 GB: a
        // sixteenth of the database the pass leaves.
        assert_eq!(writer_policy(3072 * MIB, 0).1, 48 * 1024);
        assert_eq!(writer_policy(3072 * MIB, 1024 * MIB).1, 112 * 1024);
        // 10 GB: capped, and commits twice as far apart; so too a 1 GB
        // pass into a database already past 2 GiB.
        let (larger, cache) = writer_policy(10240 * MIB, 0);
        assert_eq!(
            (larger.bytes, larger.time, cache),
            (256 * MIB, Duration::from_secs(6), 128 * 1024)
        );
        assert_eq!(writer_policy(3072 * MIB, 0).0.time, Duration::from_secs(3));
        // The records' hash index is built at the end of a large pass into
        // a database small beside it, and kept up along the way otherwise.
        assert!(defers_hash_index(1024 * MIB, 0));
        assert!(defers_hash_index(1024 * MIB, 256 * MIB));
        assert!(!defers_hash_index(1024 * MIB, 257 * MIB));
        assert!(!defers_hash_index(100 * MIB, 0));
        assert_eq!(
            writer_policy(1024 * MIB, 2048 * MIB).0.time,
            Duration::from_secs(6)
        );
    }
}
