//! Incremental indexing: discover every agent's stores, read only what
//! changed since the last pass, redact, and hand records to the store.
//!
//! A pass is four jobs, one module each:
//! - [`walk`]: finding the stores on disk, with their size and mtime;
//! - [`detect`]: which of them changed since the pass that last read them
//!   (their `sources` rows, or a survey), and how far the index is behind;
//! - [`read`]: reading, parsing, redacting and preparing the changed
//!   stores' records on a reading thread;
//! - [`write`]: storing them on the caller's thread, under the store's
//!   bulk-load policy (`store::bulk`).
//!
//! This root holds what they share (the pass's context and report) and the
//! pass itself, which joins them.
//!
//! Cost is proportional to the change, not to the store:
//! - an append-only JSONL file is read from its last safe offset (the end of
//!   the last complete line; a torn last line is left for the next pass);
//! - a file whose head or the bytes before the saved offset changed, or that
//!   shrank, was rewritten: it is re-read and only its own vanished records
//!   are removed;
//! - a whole-document file is re-parsed when its size or mtime moves;
//! - a database is read from its reader's watermark;
//! - a file that disappeared keeps its records (memory outlives transcripts).
//!
//! A file's offset only advances in the same transaction as its last
//! records, so a crash re-reads from the old offset and the content-hash
//! dedupe absorbs the repeat.
//!
//! The reading and the writing thread meet through a bounded channel of
//! steps, with the memory of the records on their way bounded
//! ([`backlog`]), so memory stays bounded whatever the size of a store.

use std::sync::mpsc::sync_channel;

mod backlog;
pub mod detect;
mod in_order;
mod read;
pub(crate) mod surveyed;
pub mod walk;
mod write;

use backlog::{Backlog, CloseOnDrop};
use detect::Plan;
pub use detect::{Compared, Freshness, freshness, unchanged_since};
pub(crate) use read::redact;
pub use surveyed::Resurvey;
pub use walk::{Stores, Walk};

use crate::redact::Redactor;
use crate::sources::Locations;
use crate::store::bulk::BulkPlan;
use crate::store::{Store, StoreError};

/// Steps on their way from the reading thread to the writer (most are the
/// small begin and end of a store; the records are bounded by
/// [`BACKLOG_BYTES`]).
const IN_FLIGHT: usize = 1024;
/// Bytes of memory the records the reading thread is ahead of the writer
/// may hold ([`crate::store::NewRecord::held_bytes`]): enough to read on through the
/// writer's flushes and commits, and a bound on memory whichever thread is
/// the slower. Peak RSS follows it almost byte for byte once the writer is
/// the slower: 24 MiB kept a cold 1 GB pass at 110 MB and as fast as 48 MiB
/// (137 MB). Counting only record text had let records hold twice their
/// text (string capacity, the compressed copy).
const BACKLOG_BYTES: u64 = 24 << 20;

/// What to index and with what.
pub struct IndexContext<'a> {
    /// Where the agents keep their stores.
    pub locations: &'a Locations,
    /// Agent ids not to read.
    pub disabled: &'a [String],
    /// The redaction rules.
    pub redactor: &'a Redactor,
    /// This node's id, the origin of every record read here.
    pub origin: &'a str,
    /// Current time, Unix ms.
    pub now_ms: i64,
    /// Stop reading new stores (and large files at a batch boundary) after
    /// this instant; the rest is picked up by the next pass. Newest stores
    /// are read first. `None` reads everything.
    pub deadline: Option<std::time::Instant>,
}

/// Progress of a pass, for a progress bar.
#[derive(Debug, Clone)]
pub enum Progress {
    /// The pass will read about this many bytes.
    Start {
        /// Bytes pending over all changed stores.
        total_bytes: u64,
    },
    /// This many more bytes were read.
    Advance(u64),
}

/// What one pass did.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct IndexReport {
    /// Stores discovered.
    pub stores: u64,
    /// Stores that had changes and were read.
    pub changed: u64,
    /// Bytes of history read.
    pub bytes_read: u64,
    /// New records stored.
    pub added: u64,
    /// Records removed because their rewritten file no longer has them.
    pub removed: u64,
    /// Malformed lines or rows skipped this pass.
    pub skipped: u64,
    /// Stores that could not be read this pass, with why.
    pub failed: Vec<(String, String)>,
    /// Stores left (wholly or partly) for the next pass because the deadline passed.
    pub deferred: u64,
    /// Records this pass made meaning vectors for (tool output gets none
    /// but counts): its new ones, and earlier ones an interrupted pass
    /// left or a lost or damaged vector file needs again.
    #[serde(default)]
    pub embedded: u64,
    /// Records whose meaning vectors a pass with a deadline left for a
    /// later pass (the meaning tier does not see them yet).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vectors_left: bool,
    /// Derived files beside the database (the columns and vector files)
    /// that could not be written, with why: searches read the database
    /// instead until a later pass writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwritten: Vec<(String, String)>,
    /// Derived files found damaged, with what was wrong: never read, and
    /// written anew by this pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rebuilt: Vec<(String, String)>,
}

impl IndexReport {
    /// Adds what a second pass over the same stores, `later`, did: its
    /// walk is the newer, so its counts of stores stand.
    pub fn absorb(&mut self, later: IndexReport) {
        self.stores = later.stores;
        self.changed += later.changed;
        self.bytes_read += later.bytes_read;
        self.added += later.added;
        self.removed += later.removed;
        self.skipped += later.skipped;
        self.failed = later.failed;
        self.deferred = later.deferred;
        self.embedded += later.embedded;
        self.vectors_left = later.vectors_left;
        self.unwritten.extend(later.unwritten);
        self.rebuilt.extend(later.rebuilt);
    }

    /// The pass read nothing, wrote nothing and left nothing for later: the
    /// disk is as the index has it (what a survey describes).
    pub fn nothing_new(&self) -> bool {
        self.changed == 0
            && self.added == 0
            && self.removed == 0
            && self.deferred == 0
            && !self.vectors_left
            && self.failed.is_empty()
            && self.unwritten.is_empty()
            && self.rebuilt.is_empty()
    }
}

/// Errors that stop a pass (store failures); per-file problems are counted instead.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs one indexing pass over every enabled source.
pub fn index_all(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<IndexReport, IndexError> {
    index_walked(
        store,
        ctx,
        Walk::start(ctx.locations, ctx.disabled, None),
        progress,
    )
}

/// [`index_all`] with a walk already started (with `ctx`'s locations and
/// disabled sources).
pub fn index_walked(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    walk: Walk,
    progress: &mut dyn FnMut(Progress),
) -> Result<IndexReport, IndexError> {
    index_walked_keeping(store, ctx, walk, progress, &mut None, None)
}

/// [`index_walked`] that also leaves in `compared` what a whole walk's pass
/// compared the disk with, when a survey can be made after it (the rows
/// of a pass that had nothing to read, or the survey a pass compared with
/// and what it read; nothing otherwise), and in `stores`, when given,
/// every store a whole walk found (a partial walk leaves it as it was).
pub fn index_walked_keeping(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    walk: Walk,
    progress: &mut dyn FnMut(Progress),
    compared: &mut Option<Compared>,
    stores: Option<&mut Stores>,
) -> Result<IndexReport, IndexError> {
    *compared = None;
    if walk.partial {
        let (plans, report) = detect::compare_some(store, walk)?;
        return read_planned(store, ctx, plans, progress, report);
    }
    let mut walk = walk;
    let mut stores = stores;
    if let Some(survey) = walk.survey.take() {
        // The stores the survey holds as they are on disk need no row
        // read; it tells when some other store is gone (or back).
        match surveyed::compare(store, walk, survey, stores.as_deref_mut())? {
            surveyed::FromSurvey::Plans {
                plans,
                stores,
                resurvey,
            } => {
                let report = IndexReport {
                    stores,
                    ..IndexReport::default()
                };
                let report = read_planned(store, ctx, plans, progress, report)?;
                *compared = Some(Compared::Surveyed(resurvey));
                return Ok(report);
            }
            surveyed::FromSurvey::Compare(w) => walk = *w,
        }
    }
    let (plans, report) = detect::compare_all(store, ctx.disabled, walk, compared, stores)?;
    read_planned(store, ctx, plans, progress, report)
}

/// Reads the stores `plans` names (changed since the last pass, or new)
/// into `store`, adding to `report`. With nothing to read, the pass still
/// finishes a full-text merge left due (see [`Store::finish_left_merge`]).
fn read_planned(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    mut plans: Vec<Plan>,
    progress: &mut dyn FnMut(Progress),
    report: IndexReport,
) -> Result<IndexReport, IndexError> {
    if plans.is_empty() {
        progress(Progress::Start { total_bytes: 0 });
        store.finish_left_merge(ctx.deadline);
        return Ok(report);
    }
    let total = detect::pending_bytes(&plans);
    progress(Progress::Start { total_bytes: total });
    let plan = BulkPlan::for_pass(store, total, ctx.deadline.is_none())?;
    // Newest first, so a pass cut short by its deadline has read what people ask about.
    plans.sort_by_key(|p| std::cmp::Reverse(p.mtime_ns));
    let (tx, rx) = sync_channel(IN_FLIGHT);
    let encoder = store.text_encoder();
    let backlog = Backlog::new(BACKLOG_BYTES);
    std::thread::scope(|s| {
        let backlog = &backlog;
        let reader = std::thread::Builder::new()
            .name("cairn-read".into())
            .spawn_scoped(s, move || {
                let out = read::Out {
                    tx,
                    encoder: std::cell::RefCell::new(encoder),
                    backlog,
                };
                read::read_all(ctx, plans, &out)
            });
        if let Err(e) = reader {
            // No second thread to be had: nothing was read; the next pass retries.
            tracing::warn!(error = %e, "cannot start the reading thread");
            return Ok(report);
        }
        // However the writer ends, a reader waiting for room wakes.
        let _close = CloseOnDrop(backlog);
        let inbox = write::Inbox { rx, backlog };
        write::write_all(store, ctx, inbox, progress, report, plan)
    })
}

#[cfg(test)]
mod tests;
