//! Incremental indexing: discover every agent's stores, read only what
//! changed since the last pass, redact, and hand records to the store.
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
//! A pass runs on two threads: one reads, parses and redacts the stores and
//! prepares each record ([`NewRecord`]: hash, text encoding, index text), the
//! other (the caller's) holds the write transaction and only runs SQL. They
//! meet through a bounded channel of [`Step`]s, so memory stays bounded
//! whatever the size of a store. The writer commits after an amount of text
//! or time, whichever comes first, across store boundaries ([`TX_CATCH_UP`],
//! or [`TX_LARGE`] and [`TX_LARGER`] for a large pass): fewer, larger
//! transactions make fewer and larger full-text segments and write
//! scattered index pages less often.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

mod backlog;
mod in_order;
pub(crate) mod surveyed;

use backlog::{Backlog, CloseOnDrop};
pub use surveyed::Resurvey;

use cairn_protocol::Hash32;

use crate::record::Record;
use crate::redact::{RedactionCounts, Redactor, scope};
use crate::sources::{self, LineParser, Locations, ParseError, Reader, SourceFile, Stat};
use crate::store::codec::TextDict;
use crate::store::{Encoder, NewRecord, SourceStamp, SourceState, Store, StoreError};

/// Bytes hashed at the head of a file, and before its saved offset, to notice rewrites.
const FINGERPRINT: u64 = 4096;
/// Records per chunk handed from the reading thread to the writer.
const BATCH: usize = 4000;
/// Bytes read per chunk, whichever of the two limits comes first.
const CHUNK_BYTES: u64 = 4 << 20;
/// Steps on their way from the reading thread to the writer (most are the
/// small begin and end of a store; the records are bounded by
/// [`BACKLOG_BYTES`]).
const IN_FLIGHT: usize = 1024;
/// Bytes of memory the records the reading thread is ahead of the writer
/// may hold ([`NewRecord::held_bytes`]): enough to read on through the
/// writer's flushes and commits, and a bound on memory whichever thread is
/// the slower. Peak RSS follows it almost byte for byte once the writer is
/// the slower: 24 MiB kept a cold 1 GB pass at 110 MB and as fast as 48 MiB
/// (137 MB). Counting only record text had let records hold twice their
/// text (string capacity, the compressed copy).
const BACKLOG_BYTES: u64 = 24 << 20;
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
/// Longest line read; a longer one is skipped and counted.
const MAX_LINE: usize = 64 * 1024 * 1024;

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

struct Plan {
    agent: &'static str,
    file: SourceFile,
    state: Option<SourceState>,
    size: u64,
    mtime_ns: i64,
}

impl Plan {
    /// Reading store `f`, whose row (when the index knows it) is `state`.
    fn of(f: Found, state: Option<SourceState>) -> Plan {
        Plan {
            agent: f.agent,
            file: f.file,
            state,
            size: f.size,
            mtime_ns: f.mtime_ns,
        }
    }
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

/// What a pass compared the disk with, for a survey made after it.
#[derive(Debug)]
pub enum Compared {
    /// The `sources` rows a pass with nothing to read compared the disk
    /// with, and the store's [`Store::change_stamp`] from before it read
    /// them: while the stamp has not moved they are still the rows.
    Rows((i64, u64), Vec<SourceStamp>),
    /// A survey that held for the database, and the stores the pass read
    /// because they differed from it.
    Surveyed(Resurvey),
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
        return index_some(store, ctx, walk, progress);
    }
    let mut walk = walk;
    if let Some(survey) = walk.survey.take() {
        // The stores the survey holds as they are on disk need no row
        // read; it tells when some other store is gone (or back).
        let mut kept = stores;
        match surveyed::compare(store, walk, survey, kept.as_deref_mut())? {
            surveyed::FromSurvey::Plans {
                plans,
                report,
                resurvey,
            } => {
                let report = if plans.is_empty() {
                    progress(Progress::Start { total_bytes: 0 });
                    finish_left_merge(store, ctx, &report);
                    report
                } else {
                    read_planned(store, ctx, plans, progress, report)?
                };
                *compared = Some(Compared::Surveyed(resurvey));
                return Ok(report);
            }
            surveyed::FromSurvey::Compare(w) => {
                return index_compared(store, ctx, *w, progress, compared, kept);
            }
        }
    }
    index_compared(store, ctx, walk, progress, compared, stores)
}

/// The pass over a whole walk compared with every `sources` row (see
/// [`index_walked_keeping`]).
fn index_compared(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    walk: Walk,
    progress: &mut dyn FnMut(Progress),
    compared: &mut Option<Compared>,
    stores: Option<&mut Stores>,
) -> Result<IndexReport, IndexError> {
    let mut report = IndexReport::default();
    let mut plans = Vec::new();
    let mut kept = stores;
    if let Some(k) = kept.as_deref_mut() {
        k.by_path.clear();
    }
    // One light query for every known store; the disk is then compared in
    // memory, so a pass with nothing new costs one stat per store (taken by
    // the walk that found it) and no per-file database round trip. Only a
    // changed store's whole state is read.
    // The query runs here while the walk runs on its thread; each source's
    // stores are compared as soon as the walk hands them over.
    let before = store.change_stamp()?;
    let known = Known::new(store.source_stamps()?);
    let mut present = vec![false; known.rows.len()];
    walk.each(|f| {
        if let Some(kept) = kept.as_deref_mut() {
            kept.add(&f);
        }
        let key = f.file.path.to_string_lossy();
        let stamp = known.find(&key);
        report.stores += 1;
        if let Some(i) = stamp {
            present[i] = true;
        }
        let stamp = stamp.map(|i| &known.rows[i]);
        if !stamp.is_some_and(|s| is_unchanged(s, f.size, f.mtime_ns)) {
            let state = match stamp {
                Some(_) => store.source_state(&key)?,
                None => None,
            };
            plans.push(Plan::of(f, state));
        }
        Ok(())
    })?;
    let enabled = sources::enabled_agents(ctx.disabled);
    store.mark_missing(&known.rows, &present, &enabled)?;
    if plans.is_empty() {
        progress(Progress::Start { total_bytes: 0 });
        finish_left_merge(store, ctx, &report);
        // A merge moves the stamp: the rows are then compared again by the
        // next pass, which is right (and happens once).
        *compared = Some(Compared::Rows(before, known.rows));
        return Ok(report);
    }
    drop(known);
    read_planned(store, ctx, plans, progress, report)
}

/// The pass over a partial walk: each store it names compared with its
/// own row (no other store is read, and none is marked gone).
fn index_some(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    walk: Walk,
    progress: &mut dyn FnMut(Progress),
) -> Result<IndexReport, IndexError> {
    let mut report = IndexReport::default();
    let mut plans = Vec::new();
    walk.each(|f| {
        report.stores += 1;
        let state = store.source_state(&f.file.path.to_string_lossy())?;
        let unchanged = state.as_ref().is_some_and(|s| {
            read_whole_at(
                (s.size, s.mtime_ns, s.last_error.is_some()),
                f.size,
                f.mtime_ns,
            )
        });
        if !unchanged {
            plans.push(Plan::of(f, state));
        }
        Ok(())
    })?;
    if plans.is_empty() {
        progress(Progress::Start { total_bytes: 0 });
        finish_left_merge(store, ctx, &report);
        return Ok(report);
    }
    read_planned(store, ctx, plans, progress, report)
}

/// A pass with nothing to read still ends a merge of the full-text
/// indexes left due: a process killed during the merge at the end of a
/// large pass (or before it) leaves FTS5's own merging paused and the
/// merge noted as due (`Store::pause_text_merging`), with every store
/// read, so no later pass would reach the writer that merges. Cheap when
/// nothing is due (one look-up in `meta`); with the pass's deadline, the
/// merge goes in steps and a later pass goes on with it.
fn finish_left_merge(store: &mut Store, ctx: &IndexContext<'_>, report: &IndexReport) {
    merge_when_due(store, false, report, ctx.deadline);
}

/// Reads the stores `plans` names (changed since the last pass, or new)
/// into `store`, adding to `report`.
fn read_planned(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    mut plans: Vec<Plan>,
    progress: &mut dyn FnMut(Progress),
    report: IndexReport,
) -> Result<IndexReport, IndexError> {
    let total: u64 = plans
        .iter()
        .map(|p| match (&p.file.reader, &p.state) {
            (Reader::Lines(_), Some(s)) if s.offset <= p.size => p.size - s.offset,
            _ => p.size,
        })
        .sum();
    progress(Progress::Start { total_bytes: total });
    let db_bytes = if total >= LARGE_PASS {
        store.db_bytes()?
    } else {
        0
    };
    let (limits, cache_kib) = writer_policy(total, db_bytes);
    let defer_hash_index = ctx.deadline.is_none() && defers_hash_index(total, db_bytes);
    let writer = Writer {
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
    };
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
                let out = Out {
                    tx,
                    encoder: std::cell::RefCell::new(encoder),
                    backlog,
                };
                read_all(ctx, plans, &out)
            });
        if let Err(e) = reader {
            // No second thread to be had: nothing was read; the next pass retries.
            tracing::warn!(error = %e, "cannot start the reading thread");
            return Ok(report);
        }
        // However the writer ends, a reader waiting for room wakes.
        let _close = CloseOnDrop(backlog);
        let inbox = Inbox { rx, backlog };
        write_all(store, ctx, inbox, progress, report, writer)
    })
}

/// How the writer of one pass works.
#[derive(Debug, Clone, Copy)]
struct Writer {
    limits: TxLimits,
    /// Its page cache (KiB).
    cache_kib: u32,
    /// Whether it builds the records' hash index at its end instead of at
    /// every commit (see `store::hash_index`).
    defer_hash_index: bool,
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

/// The reading side's half of the channel, and how it encodes record text.
/// A send fails only when the writer stopped (on a database error); the
/// reader then stops too.
struct Out<'b> {
    tx: SyncSender<Step>,
    encoder: std::cell::RefCell<Encoder>,
    backlog: &'b Backlog,
}

/// The writer hung up.
struct Hangup;

impl Out<'_> {
    /// Hands `step` to the writer, first waiting for room in the backlog
    /// for the memory its records hold.
    fn send(&self, step: Step) -> Result<(), Hangup> {
        self.backlog.hold(step.held_bytes()).map_err(|_| Hangup)?;
        self.tx.send(step).map_err(|_| Hangup)
    }
}

/// The writer's half: steps in order, each giving its room in the
/// backlog back once the writer has taken it in.
struct Inbox<'b> {
    rx: Receiver<Step>,
    backlog: &'b Backlog,
}

/// What the reading thread hands the writer, in order, for each store:
/// `Begin`, maybe `Replace`, any `Records`, then `End` or `Failed`.
enum Step {
    /// A store is about to be read.
    Begin {
        agent: &'static str,
        path: String,
        kind: &'static str,
        /// What the last pass saved, if the store was seen before.
        state: Option<SourceState>,
    },
    /// The store is read from scratch: its redaction counts restart, and
    /// at its end its records no longer in it are removed.
    Replace,
    /// Records read from the store, redacted and prepared, with the
    /// redaction counts and the bytes read for them.
    Records {
        records: Vec<NewRecord>,
        counts: RedactionCounts,
        bytes: u64,
    },
    /// The store was read up to `state` (its id is the writer's to fill).
    End {
        state: SourceState,
        skipped: u64,
        bytes: u64,
    },
    /// The store could not be read this pass.
    Failed { why: String },
    /// The reader trained the database's text dictionary: stored before
    /// the records encoded with it, which follow.
    Dict(std::sync::Arc<TextDict>),
    /// Stores (or parts of one) left for the next pass by the deadline.
    Deferred(u64),
}

impl Step {
    /// Heap bytes this step's records hold, their list's spare room
    /// included (what the backlog bounds).
    fn held_bytes(&self) -> u64 {
        match self {
            Step::Records { records, .. } => {
                let spare = records.capacity() - records.len();
                let held: usize = records.iter().map(NewRecord::held_bytes).sum();
                (held + spare * std::mem::size_of::<NewRecord>()) as u64
            }
            _ => 0,
        }
    }
}

/// The store the writer is working on.
struct Current {
    id: i64,
    agent: &'static str,
    path: String,
    kind: &'static str,
    state: Option<SourceState>,
    /// Hashes of the records read, for a store read from scratch.
    keep: Option<HashSet<Hash32>>,
}

/// The writing side: applies the steps in order inside one write
/// transaction at a time.
fn write_all(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    inbox: Inbox<'_>,
    progress: &mut dyn FnMut(Progress),
    report: IndexReport,
    writer: Writer,
) -> Result<IndexReport, IndexError> {
    let Writer {
        limits, cache_kib, ..
    } = writer;
    // The connection's own size (SQLite's default, or a search's) is put
    // back afterwards.
    let before = store.cache_kib()?;
    store.set_cache_kib(cache_kib)?;
    let large = limits.bytes > TX_CATCH_UP.bytes;
    // A large pass ends with one merge of what its commits wrote (or the
    // pass that finishes its backlog does: see `merge_step`), so FTS5's
    // own merging along the way would only write the same entries twice.
    if large && let Err(e) = store.pause_text_merging() {
        tracing::warn!(error = %e, "full-text merging not paused for a large pass");
    }
    let written = write_steps(store, ctx, inbox, progress, report, writer);
    if written.is_err()
        && writer.defer_hash_index
        && let Err(e) = store.ensure_hash_index()
    {
        // The next writer that looks a record up by hash builds it.
        tracing::warn!(error = %e, "the records' hash index not built after a failed pass");
    }
    if let Ok(report) = &written {
        merge_when_due(store, large, report, ctx.deadline);
    }
    store.set_cache_kib(before)?;
    if written.is_ok() && large {
        // Large commits grow the WAL file (~90 MB at 1 GB), and SQLite
        // keeps it at that size while a connection stays open (a daemon):
        // give the space back once. A reader in the way only defers it,
        // and the pass is done whatever happens here.
        if let Err(e) = store.truncate_wal() {
            tracing::debug!(error = %e, "WAL not truncated after a large pass");
        }
    }
    written
}

/// Merges the full-text indexes after a pass that `report`s this, when
/// [`merge_step`] says so, or notes the merge as due. A failure is only
/// logged: the pass is done whatever happens here.
fn merge_when_due(store: &mut Store, large: bool, report: &IndexReport, until: Option<Instant>) {
    let due = match store.merge_due() {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell whether a full-text merge is due");
            return;
        }
    };
    match merge_step(large, report, due) {
        MergeStep::Now => {
            let started = Instant::now();
            match store.merge_text_indexes(until, crate::store::MERGE_PAGES) {
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

/// What a pass that `report`s this does about the merge, `large` when it
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
fn merge_step(large: bool, report: &IndexReport, due: bool) -> MergeStep {
    let stored_much = large && report.added > 0;
    match (report.deferred == 0, due) {
        (true, true) => MergeStep::Now,
        (true, false) if stored_much => MergeStep::Now,
        (false, false) if stored_much => MergeStep::Due,
        _ => MergeStep::Nothing,
    }
}

fn write_steps(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    inbox: Inbox<'_>,
    progress: &mut dyn FnMut(Progress),
    mut report: IndexReport,
    writer: Writer,
) -> Result<IndexReport, IndexError> {
    let limits = writer.limits;
    let mut ing = store.ingest(ctx.origin)?;
    if writer.defer_hash_index && !ing.defer_hash_index()? {
        tracing::debug!("the records' hash index stays for this pass");
    }
    let mut cur: Option<Current> = None;
    let mut tx_bytes = 0u64;
    let mut tx_started = Instant::now();
    for step in inbox.rx.iter() {
        // Taken off the channel: the reader may read on (the step in hand
        // is the one chunk beyond the cap).
        inbox.backlog.release(step.held_bytes());
        match step {
            Step::Begin {
                agent,
                path,
                kind,
                state,
            } => {
                report.changed += 1;
                let id = match &state {
                    Some(s) => s.id,
                    None => ing.source(agent, &path, kind)?.id,
                };
                cur = Some(Current {
                    id,
                    agent,
                    path,
                    kind,
                    state,
                    keep: None,
                });
            }
            Step::Replace => {
                if let Some(c) = &mut cur {
                    ing.reset_redactions(c.id)?;
                    c.keep = Some(HashSet::new());
                }
            }
            Step::Records {
                records,
                counts,
                bytes,
            } => {
                let Some(c) = &mut cur else { continue };
                for r in &records {
                    if let Some(k) = &mut c.keep {
                        k.insert(*r.hash());
                    }
                    tx_bytes += r.text_len() as u64;
                    if ing.insert_new(r, Some(c.id))? {
                        report.added += 1;
                    }
                }
                ing.add_redactions(c.id, &counts)?;
                report.bytes_read += bytes;
                progress(Progress::Advance(bytes));
            }
            Step::End {
                mut state,
                skipped,
                bytes,
            } => {
                let Some(c) = cur.take() else { continue };
                state.id = c.id;
                if let Some(keep) = &c.keep {
                    report.removed += ing.retain_source_records(c.id, keep)?;
                }
                ing.save_state(&state, ctx.now_ms)?;
                report.skipped += skipped;
                report.bytes_read += bytes;
                progress(Progress::Advance(bytes));
            }
            Step::Failed { why } => {
                let Some(c) = cur.take() else { continue };
                tracing::warn!(agent = c.agent, path = %c.path, error = %why, "store skipped this pass");
                let mut st = c.state.unwrap_or_else(|| SourceState {
                    id: c.id,
                    agent: c.agent.to_owned(),
                    path: c.path.clone(),
                    kind: c.kind.to_owned(),
                    ..SourceState::default()
                });
                st.last_error = Some(why.clone());
                ing.save_state(&st, ctx.now_ms)?;
                report.failed.push((c.path, why));
            }
            Step::Deferred(n) => report.deferred += n,
            Step::Dict(d) => ing.save_text_dict(&d)?,
        }
        if tx_bytes >= limits.bytes || tx_started.elapsed() >= limits.time {
            ing.commit_and_continue()?;
            tx_bytes = 0;
            tx_started = Instant::now();
        }
    }
    ing.commit()?;
    Ok(report)
}

/// The reading side: every planned store in turn, until the deadline.
fn read_all(ctx: &IndexContext<'_>, plans: Vec<Plan>, out: &Out) {
    // Parsers that cut long texts redact them whole first, with this
    // node's rules (see `redact::scope`).
    let _scope = scope::enter(ctx.redactor);
    let total = plans.len() as u64;
    for (i, plan) in plans.into_iter().enumerate() {
        // Every pass reads at least one store, so passes always make progress.
        if i > 0 && past(ctx.deadline) {
            let _ = out.send(Step::Deferred(total - i as u64));
            return;
        }
        if read_one(ctx, &plan, out).is_err() {
            return;
        }
    }
}

/// Reads one store and hands what it holds to the writer.
fn read_one(ctx: &IndexContext<'_>, plan: &Plan, out: &Out) -> Result<(), Hangup> {
    let begin = || Step::Begin {
        agent: plan.agent,
        path: plan.file.path.to_string_lossy().into_owned(),
        kind: reader_kind(&plan.file.reader),
        state: plan.state.clone(),
    };
    if plan.file.path.is_dir() {
        // A folder the source could not list: report it like a file
        // that cannot be read (if it became readable meanwhile, its
        // files are discovered next pass).
        if let Some(why) = sources::common::folder_error(&plan.file.path) {
            out.send(begin())?;
            out.send(Step::Failed { why })?;
        }
        return Ok(());
    }
    out.send(begin())?;
    // Counts left by a file that failed part-way are not this file's.
    drop(scope::take_counts());
    let outcome = match plan.file.reader {
        Reader::Lines(factory) => read_lines(ctx, plan, factory, out),
        Reader::Whole(parse) => read_whole(ctx, plan, parse, out),
        Reader::Database(read) => read_database(ctx, plan, read, out),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(FileError::Hangup) => Err(Hangup),
        Err(FileError::Source(why)) => out.send(Step::Failed { why }),
    }
}

/// How far the index is behind the agents' stores, without reading them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Freshness {
    /// Stores on disk.
    pub stores: u64,
    /// Stores changed since they were last indexed (or never indexed).
    pub pending: u64,
    /// Newest modification among the stores on disk (Unix ms).
    pub newest_change_ms: Option<i64>,
    /// Newest modification among the stores as last indexed (Unix ms).
    pub newest_indexed_ms: Option<i64>,
}

/// Compares every enabled store's size and mtime with what the index last
/// read: the same change detection an indexing pass does, and nothing else.
pub fn freshness(
    store: &Store,
    locations: &Locations,
    disabled: &[String],
) -> Result<Freshness, IndexError> {
    let mut f = Freshness::default();
    let walk = Walk::start(locations, disabled, None);
    let known = Known::new(store.source_stamps()?);
    walk.each(|file| {
        f.stores += 1;
        let ms = file.mtime_ns / 1_000_000;
        f.newest_change_ms = f.newest_change_ms.max(Some(ms));
        match known
            .find(&file.file.path.to_string_lossy())
            .map(|i| &known.rows[i])
        {
            Some(s) => {
                f.newest_indexed_ms = f.newest_indexed_ms.max(Some(s.mtime_ns / 1_000_000));
                if !is_unchanged(s, file.size, file.mtime_ns) {
                    f.pending += 1;
                }
            }
            None => f.pending += 1,
        }
        Ok(())
    })?;
    Ok(f)
}

/// A store on disk with its size and mtime.
struct Found {
    agent: &'static str,
    file: SourceFile,
    size: u64,
    mtime_ns: i64,
    /// Its [`crate::survey::store_hash`] with the keys of the walk that
    /// found it, when it was given some.
    hash: Option<u128>,
}

impl Found {
    /// Its [`crate::survey::store_hash`] with `keys`.
    fn hash(&self, walked_with: Option<crate::survey::Keys>, keys: crate::survey::Keys) -> u128 {
        match self.hash {
            Some(h) if walked_with == Some(keys) => h,
            _ => crate::survey::store_hash(
                keys,
                self.file.path.as_os_str().as_encoded_bytes(),
                self.size,
                self.mtime_ns,
            ),
        }
    }
}

/// The stores the index knows, and where each path is among them.
struct Known {
    rows: Vec<SourceStamp>,
    map: crate::pathmap::PathMap,
}

impl Known {
    fn new(rows: Vec<SourceStamp>) -> Known {
        let map = crate::pathmap::PathMap::new(rows.iter().map(|r| r.path.as_bytes()));
        Known { rows, map }
    }

    /// Where the store at `path` is in `rows`.
    fn find(&self, path: &str) -> Option<usize> {
        self.map
            .find(path.as_bytes(), |i| self.rows[i].path.as_bytes())
    }
}

/// The disk half of a pass: every enabled store with its size and mtime
/// (taken by the walk as it lists each folder), found on a thread of its
/// own. A command starts it before it opens the node, so the walk overlaps
/// that; a pass started without one starts its own.
pub struct Walk {
    /// Sources' stores already taken from the walking thread (by
    /// [`unchanged_since`]), handed to the pass first.
    taken: Vec<Vec<Found>>,
    /// The walking thread, and each source's stores as it finds them.
    walker: Option<(std::thread::JoinHandle<()>, Receiver<Batch>)>,
    /// The keys the walking thread tallies each source's stores with.
    keys: Option<crate::survey::Keys>,
    /// The walk is over and everything it found is in `taken`.
    done: bool,
    /// What to walk, when no thread could be had.
    locations: Locations,
    disabled: Vec<String>,
    /// The walk holds some stores only, named by their paths (see
    /// [`Stores::walk_of`]): a store it lacks is not gone.
    partial: bool,
    /// A survey that held for the database when [`unchanged_since`] found
    /// a store that differs from it: the pass compares with it first.
    survey: Option<Box<crate::survey::Survey>>,
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walk")
            .field("taken", &self.taken.iter().map(Vec::len).sum::<usize>())
            .field("walking", &self.walker.is_some())
            .field("done", &self.done)
            .field("partial", &self.partial)
            .finish()
    }
}

impl Walk {
    /// Starts walking the stores of every source not in `disabled`; give
    /// the pass the same locations and disabled sources. With `keys`, the
    /// walking threads also tally each source's stores with them, side by
    /// side, for [`unchanged_since`] to compare with a survey made with
    /// the same keys.
    pub fn start(
        locations: &Locations,
        disabled: &[String],
        keys: Option<crate::survey::Keys>,
    ) -> Walk {
        let (mut loc, dis) = (locations.clone(), disabled.to_vec());
        let (tx, rx) = std::sync::mpsc::channel();
        let walker = std::thread::Builder::new()
            .name("cairn-walk".into())
            .spawn(move || {
                // The project folders, walked for anew when that is due.
                crate::projects::refresh(
                    &mut loc,
                    crate::clock::now_ms(),
                    &crate::projects::LIMITS,
                );
                discover_all(&loc, &dis, keys, &mut |batch| {
                    // The pass stopped (a database error): stop walking.
                    tx.send(batch).is_ok()
                });
            })
            .ok()
            .map(|h| (h, rx));
        Walk {
            taken: Vec::new(),
            done: false,
            walker,
            keys,
            locations: locations.clone(),
            disabled: disabled.to_vec(),
            partial: false,
            survey: None,
        }
    }

    /// Everything the walk finds, one source's stores to a batch, once it
    /// is over.
    fn into_batches(self) -> Vec<Vec<Found>> {
        let mut out = self.taken;
        if self.done {
            return out;
        }
        match self.walker {
            Some((walker, rx)) => {
                out.extend(rx.into_iter().map(|b| b.found));
                walker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
            None => discover_all(&self.locations, &self.disabled, None, &mut |b| {
                out.push(b.found);
                true
            }),
        }
        out
    }

    /// A whole walk that is over and found `batches` (hashed with `keys`).
    fn over(batches: Vec<Vec<Found>>, keys: Option<crate::survey::Keys>) -> Walk {
        Walk {
            taken: batches,
            walker: None,
            keys,
            done: true,
            locations: Locations::default(),
            disabled: Vec::new(),
            partial: false,
            survey: None,
        }
    }

    /// Hands every store found to `f`, in the walk's order, as soon as its
    /// source's walk is done; stops at the first error.
    fn each(self, mut f: impl FnMut(Found) -> Result<(), StoreError>) -> Result<(), StoreError> {
        for found in self.taken {
            found.into_iter().try_for_each(&mut f)?;
        }
        if self.done {
            return Ok(());
        }
        let Some((walker, rx)) = self.walker else {
            // No thread to be had: walk here.
            let mut failed = Ok(());
            discover_all(&self.locations, &self.disabled, None, &mut |batch| {
                failed = batch.found.into_iter().try_for_each(&mut f);
                failed.is_ok()
            });
            return failed;
        };
        for batch in rx {
            batch.found.into_iter().try_for_each(&mut f)?;
        }
        // The channel closed: the walk ended (a panic in it is this thread's).
        walker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        Ok(())
    }
}

/// Every store the last whole walk found, by path, with the source that
/// found it and how to read it: what a pass over a few stores named by
/// their paths (file events) needs instead of a walk of all of them.
#[derive(Default)]
pub struct Stores {
    by_path: std::collections::HashMap<std::path::PathBuf, (&'static str, Reader)>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("stores", &self.by_path.len())
            .finish()
    }
}

/// Suffixes of the files SQLite keeps beside a database: a write to one
/// of them is a write to the database store it belongs to.
const DB_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

impl Stores {
    fn add(&mut self, f: &Found) {
        self.by_path
            .insert(f.file.path.clone(), (f.agent, f.file.reader));
    }

    /// Lists the stores of `walk` when it is a whole walk that is over (as
    /// one a survey matched is); false, and left empty, otherwise.
    pub fn fill_from(&mut self, walk: &Walk) -> bool {
        self.by_path.clear();
        if !walk.done || walk.partial {
            return false;
        }
        for f in walk.taken.iter().flatten() {
            self.add(f);
        }
        true
    }

    /// How many stores.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// True when no walk filled it yet, or it found nothing.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// The store a write to `path` changed: `path` itself, or the database
    /// whose side file (`-wal`, ...) it is.
    fn store_of(&self, path: &Path) -> Option<(&Path, &'static str, Reader)> {
        if let Some((p, (agent, reader))) = self.by_path.get_key_value(path) {
            return Some((p, agent, *reader));
        }
        // A path that is not UTF-8 maps to no database (a walk reads it).
        let name = path.to_str()?;
        DB_SIDE_FILES.iter().find_map(|side| {
            let db = Path::new(name.strip_suffix(side)?);
            match self.by_path.get_key_value(db) {
                Some((p, (agent, r @ Reader::Database(_)))) => Some((p.as_path(), *agent, *r)),
                _ => None,
            }
        })
    }

    /// A walk of just the stores the writes to `paths` changed, each
    /// stat'ed now, for a pass that reads those alone; `None` when a path
    /// is no known store (a new store, or a file that is none: only a walk
    /// of everything can tell) or cannot be stat'ed (gone since), and
    /// when `paths` is empty.
    pub fn walk_of(&self, paths: &[std::path::PathBuf]) -> Option<Walk> {
        if paths.is_empty() {
            return None;
        }
        let mut found: Vec<Found> = Vec::new();
        for p in paths {
            let (path, agent, reader) = self.store_of(p)?;
            if found.iter().any(|f| f.file.path == path) {
                continue;
            }
            let file = SourceFile::new(path.to_path_buf(), reader);
            std::fs::symlink_metadata(&file.path).ok()?;
            let stat = fingerprint_meta(&file);
            found.push(Found {
                agent,
                file,
                size: stat.size,
                mtime_ns: stat.mtime_ns,
                hash: None,
            });
        }
        Some(Walk {
            taken: vec![found],
            walker: None,
            keys: None,
            done: true,
            locations: Locations::default(),
            disabled: Vec::new(),
            partial: true,
            survey: None,
        })
    }
}

/// Whether the walk finds exactly the stores of `survey` (trusted by its
/// files), each at the size and mtime the index read it whole: then a
/// pass has nothing to do, and this returns how many stores there are. Otherwise (or with no walking
/// thread) `None`, and the walk keeps what it found so far, and the
/// survey, for the pass; it stops comparing at the first source that
/// differs, so the pass can start while the walk goes on.
pub fn unchanged_since(walk: &mut Walk, survey: crate::survey::Survey) -> Option<u64> {
    // A survey its files do not vouch for is for the pass, which asks the
    // database for its generation.
    if !survey.by_files() {
        walk.survey = Some(Box::new(survey));
        return None;
    }
    let Some((walker, rx)) = walk.walker.take() else {
        walk.survey = Some(Box::new(survey));
        return None;
    };
    let mut found = 0usize;
    let mut sources = 0usize;
    let keys = survey.keys();
    while let Ok(batch) = rx.recv() {
        found += batch.found.len();
        // A batch is one source's stores (see `discover_all`), tallied by
        // the walk when it was given the survey's keys.
        let tally = match batch.tally {
            Some(tally) if walk.keys == Some(keys) => tally,
            _ => tally_of(&batch.found, walk.keys, keys),
        };
        let same = batch
            .found
            .first()
            .is_some_and(|f| survey.same(f.agent, tally));
        walk.taken.push(batch.found);
        if !same {
            walk.walker = Some((walker, rx));
            walk.survey = Some(Box::new(survey));
            return None;
        }
        sources += 1;
    }
    walker
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    walk.done = true;
    // Fewer: every store of a source the survey has is gone, and the pass
    // marks them missing.
    if sources == survey.sources() {
        return Some(found as u64);
    }
    walk.survey = Some(Box::new(survey));
    None
}

/// The survey's tally of `found` (see [`crate::survey::Tally`]), hashed
/// by a walk with `walked_with`.
fn tally_of(
    found: &[Found],
    walked_with: Option<crate::survey::Keys>,
    keys: crate::survey::Keys,
) -> crate::survey::Tally {
    let mut tally = crate::survey::Tally::default();
    for f in found {
        tally.add_hash(f.hash(walked_with, keys));
    }
    tally
}

/// Threads that walk sources side by side.
const DISCOVER_THREADS: usize = 2;

/// One source's stores as a walk found them, in its order.
struct Batch {
    found: Vec<Found>,
    /// Their tally, when the walk was given keys.
    tally: Option<crate::survey::Tally>,
}

/// Walks every enabled source, handing each one's stores (and with `keys`
/// their tally) to `out` in the registry's order as soon as they and every
/// earlier source's are found, until `out` says stop. Sources are walked
/// side by side ([`in_order::in_order`]), and tallied on the same threads.
fn discover_all(
    locations: &Locations,
    disabled: &[String],
    keys: Option<crate::survey::Keys>,
    out: &mut dyn FnMut(Batch) -> bool,
) {
    let enabled: Vec<Box<dyn sources::Source>> = sources::registry()
        .into_iter()
        .filter(|s| !disabled.iter().any(|d| d == s.agent()))
        .collect();
    let walk_one = |i: usize| {
        let source = &enabled[i];
        let mut tally = keys.map(|_| crate::survey::Tally::default());
        let found = source
            .discover(locations)
            .into_iter()
            .map(|file| {
                let stat = fingerprint_meta(&file);
                let mut f = Found {
                    agent: source.agent(),
                    file,
                    size: stat.size,
                    mtime_ns: stat.mtime_ns,
                    hash: None,
                };
                if let (Some(keys), Some(tally)) = (keys, tally.as_mut()) {
                    let h = f.hash(None, keys);
                    tally.add_hash(h);
                    f.hash = Some(h);
                }
                f
            })
            .collect::<Vec<Found>>();
        Batch { found, tally }
    };
    in_order::in_order(enabled.len(), DISCOVER_THREADS, &walk_one, &mut |batch| {
        batch.found.is_empty() || out(batch)
    });
}

/// Whether a store's size and mtime are what the last pass read, and that
/// pass succeeded: such a store has nothing new.
fn is_unchanged(s: &SourceStamp, size: u64, mtime_ns: i64) -> bool {
    read_whole_at((s.size, s.mtime_ns, s.failed), size, mtime_ns)
}

/// Whether a store whose row says it was read at (`size`, `mtime_ns`),
/// `failed` or not, is unchanged at `size` and `mtime_ns` now.
fn read_whole_at(
    (size, mtime_ns, failed): (u64, i64, bool),
    now_size: u64,
    now_mtime: i64,
) -> bool {
    size == now_size && mtime_ns == now_mtime && !failed
}

enum FileError {
    /// The writer stopped.
    Hangup,
    /// The store cannot be read.
    Source(String),
}

impl From<Hangup> for FileError {
    fn from(_: Hangup) -> Self {
        FileError::Hangup
    }
}

fn io_err(path: &Path, e: std::io::Error) -> FileError {
    FileError::Source(format!("failed to read {}: {e}", path.display()))
}

fn reader_kind(r: &Reader) -> &'static str {
    match r {
        Reader::Lines(_) => "lines",
        Reader::Whole(_) => "whole",
        Reader::Database(_) => "database",
    }
}

/// Size and mtime (those the walk took when it did); for a database,
/// summed over it and its WAL so writes that only reached the WAL still
/// count as a change.
fn fingerprint_meta(file: &SourceFile) -> Stat {
    let one = |p: &Path| std::fs::metadata(p).map_or(Stat::default(), |m| Stat::of(&m));
    let main = file.stat.unwrap_or_else(|| one(&file.path));
    if matches!(file.reader, Reader::Database(_)) {
        let mut wal = file.path.clone().into_os_string();
        wal.push("-wal");
        let w = one(Path::new(&wal));
        return Stat {
            size: main.size + w.size,
            mtime_ns: main.mtime_ns.max(w.mtime_ns),
        };
    }
    main
}

/// Cleans a record in place before it is stored: removes text cairn itself
/// injected into an agent's context (recalled memory echoed back into the
/// agent's transcript must not be re-indexed as if someone had said it),
/// then redacts secrets in every field (ids included, see
/// `redact::fields`), adding to `counts`.
pub(crate) fn redact(r: &mut Record, redactor: &Redactor, counts: &mut RedactionCounts) {
    if let std::borrow::Cow::Owned(t) = crate::redact::recalled::strip_recalled(&r.text) {
        r.text = t;
    }
    crate::redact::fields::redact_record(r, redactor, counts);
}

/// Redacts and prepares records for the writer and sends them.
fn send_records(
    ctx: &IndexContext<'_>,
    agent: &str,
    records: &mut Vec<Record>,
    bytes: u64,
    out: &Out,
) -> Result<(), Hangup> {
    // What the parsers redacted before cutting long texts, then the rest.
    let mut counts = scope::take_counts();
    let mut prepared = Vec::with_capacity(records.len());
    let mut enc = out.encoder.borrow_mut();
    for mut r in records.drain(..) {
        // Filed under the source that found the store, so a source can reuse
        // another agent's parser (Crush reads with opencode's).
        if r.agent != agent {
            r.agent = agent.to_owned();
        }
        redact(&mut r, ctx.redactor, &mut counts);
        if r.text.trim().is_empty() {
            continue;
        }
        prepared.push(NewRecord::from_record_with(r, &mut enc));
    }
    if let Some(d) = enc.take_trained() {
        out.send(Step::Dict(d))?;
    }
    out.send(Step::Records {
        records: prepared,
        counts,
        bytes,
    })
}

fn hash_range(file: &mut File, start: u64, len: u64) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity(len as usize);
    file.by_ref().take(len).read_to_end(&mut buf)?;
    Ok(blake3::hash(&buf).as_bytes().to_vec())
}

/// The head and tail fingerprints of a file whose first `offset` bytes were consumed.
fn fingerprints(file: &mut File, offset: u64) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let head = hash_range(file, 0, offset.min(FINGERPRINT))?;
    let tail_len = offset.min(FINGERPRINT);
    let tail = hash_range(file, offset - tail_len, tail_len)?;
    Ok((head, tail))
}

fn read_lines(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    factory: fn(&Path) -> Box<dyn LineParser>,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut state = plan.state.clone().unwrap_or_default();
    let mut start = state.offset;
    let mut rewritten = false;
    if start > 0 {
        let same = plan.size >= start
            && fingerprints(&mut file, start)
                .map(|(h, t)| Some(h) == state.head_hash && Some(t) == state.tail_hash)
                .unwrap_or(false);
        if !same {
            tracing::info!(path = %key, "file was rewritten; re-reading it");
            rewritten = true;
            start = 0;
        }
    }
    let mut parser = factory(path);
    let mut records = Vec::new();
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    if start > 0 {
        // Let the parser learn the session identity from the header line.
        let mut first = Vec::new();
        reader
            .seek(SeekFrom::Start(0))
            .map_err(|e| io_err(path, e))?;
        read_line(&mut reader, &mut first).map_err(|e| io_err(path, e))?;
        if first.ends_with(b"\n") {
            let mut discard = Vec::new();
            let _ignored = parser.line(trim_eol(&first), 0, &mut discard);
            drop(scope::take_counts());
        }
    }
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|e| io_err(path, e))?;
    if rewritten {
        out.send(Step::Replace)?;
        state.skipped = 0;
    }
    let mut pos = start;
    let mut buf = Vec::new();
    let mut skipped = 0u64;
    let mut cut_short = false;
    // Bytes read since the last chunk was sent.
    let mut pending = 0u64;
    loop {
        buf.clear();
        let n = read_line(&mut reader, &mut buf).map_err(|e| io_err(path, e))?;
        if n == 0 || !buf.ends_with(b"\n") {
            break; // end of file, or a torn last line left for the next pass
        }
        let line = trim_eol(&buf);
        if buf.len() > MAX_LINE {
            skipped += 1;
        } else if !line.iter().all(u8::is_ascii_whitespace)
            && let Err(e) = parser.line(line, pos, &mut records)
        {
            log_skip(&key, &e);
            skipped += 1;
        }
        pos += n as u64;
        pending += n as u64;
        if records.len() >= BATCH && past(ctx.deadline) && !rewritten {
            // Out of time: keep what was read and resume here next pass.
            let _ = out.send(Step::Deferred(1));
            cut_short = true;
            break;
        }
        if records.len() >= BATCH || pending >= CHUNK_BYTES {
            // Chunks before the last keep the old offset: a crash re-reads
            // them and the content hashes absorb the repeat.
            send_records(ctx, plan.agent, &mut records, pending, out)?;
            pending = 0;
        }
    }
    parser.finish(&mut records);
    let mut file = reader.into_inner();
    let (head, tail) = fingerprints(&mut file, pos).map_err(|e| io_err(path, e))?;
    state.offset = pos;
    state.head_hash = Some(head);
    state.tail_hash = Some(tail);
    // A file cut short records the size it was read to, so the next pass sees it changed.
    state.size = if cut_short { pos } else { plan.size };
    state.mtime_ns = plan.mtime_ns;
    state.skipped += skipped;
    state.last_error = None;
    state.kind = "lines".into();
    send_records(ctx, plan.agent, &mut records, 0, out)?;
    out.send(Step::End {
        state,
        skipped,
        bytes: pending,
    })?;
    Ok(())
}

fn read_whole(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    parse: fn(&Path, &[u8]) -> sources::Parsed,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let len = bytes.len() as u64;
    let mut parsed = parse(path, &bytes);
    drop(bytes);
    for e in &parsed.errors {
        log_skip(&key, e);
    }
    let mut state = plan.state.clone().unwrap_or_default();
    state.size = plan.size;
    state.mtime_ns = plan.mtime_ns;
    state.skipped = parsed.errors.len() as u64;
    state.last_error = None;
    state.kind = "whole".into();
    out.send(Step::Replace)?;
    while parsed.records.len() > BATCH {
        let mut chunk: Vec<Record> = parsed.records.drain(..BATCH).collect();
        send_records(ctx, plan.agent, &mut chunk, 0, out)?;
    }
    send_records(ctx, plan.agent, &mut parsed.records, 0, out)?;
    let skipped = state.skipped;
    out.send(Step::End {
        state,
        skipped,
        bytes: len,
    })?;
    Ok(())
}

fn read_database(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    read: fn(&Path, &sources::Watermark) -> Result<sources::DbBatch, sources::SourceError>,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let mut state = plan.state.clone().unwrap_or_default();
    let mut batch = read(path, &state.watermark)
        .map_err(|e| FileError::Source(sources::layout::classify(e).to_string()))?;
    for e in &batch.parsed.errors {
        log_skip(&key, e);
    }
    state.watermark = batch.watermark.clone();
    state.size = plan.size;
    state.mtime_ns = plan.mtime_ns;
    let skipped = batch.parsed.errors.len() as u64;
    state.skipped += skipped;
    state.last_error = None;
    state.kind = "database".into();
    while batch.parsed.records.len() > BATCH {
        let mut chunk: Vec<Record> = batch.parsed.records.drain(..BATCH).collect();
        send_records(ctx, plan.agent, &mut chunk, 0, out)?;
    }
    send_records(ctx, plan.agent, &mut batch.parsed.records, 0, out)?;
    out.send(Step::End {
        state,
        skipped,
        bytes: plan.size,
    })?;
    Ok(())
}

fn past(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

fn log_skip(path: &str, e: &ParseError) {
    tracing::warn!(path, error = %e, "skipped malformed input");
}

/// Reads one line including its newline, refusing to buffer more than
/// [`MAX_LINE`] bytes: a longer line is consumed and returned truncated.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(total);
        }
        let (used, done) = match memchr_newline(avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if buf.len() < MAX_LINE + 1 {
            let room = (MAX_LINE + 1 - buf.len()).min(used);
            buf.extend_from_slice(&avail[..room]);
        }
        r.consume(used);
        total += used;
        if done {
            if !buf.ends_with(b"\n") {
                buf.push(b'\n');
            }
            return Ok(total);
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

fn trim_eol(buf: &[u8]) -> &[u8] {
    let b = buf.strip_suffix(b"\n").unwrap_or(buf);
    b.strip_suffix(b"\r").unwrap_or(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::notes;

    fn ctx<'a>(
        loc: &'a Locations,
        redactor: &'a Redactor,
        deadline: Option<std::time::Instant>,
    ) -> IndexContext<'a> {
        IndexContext {
            locations: loc,
            disabled: &[],
            redactor,
            origin: "testnode",
            now_ms: 1_800_000_000_000,
            deadline,
        }
    }

    fn report(added: u64, deferred: u64) -> IndexReport {
        IndexReport {
            added,
            deferred,
            ..IndexReport::default()
        }
    }

    #[test]
    fn a_large_backlog_is_merged_by_the_pass_that_finishes_it() {
        use MergeStep::{Due, Nothing, Now};
        // Read in one pass (a cold index).
        assert_eq!(merge_step(true, &report(10, 0), false), Now);
        // Read by passes cut short by their deadline (a daemon's, a
        // search's): the first that stores something notes the merge, the
        // one that reads the rest merges, large or not, with something to
        // store or not.
        assert_eq!(merge_step(true, &report(10, 3), false), Due);
        assert_eq!(merge_step(true, &report(10, 2), true), Nothing);
        assert_eq!(merge_step(false, &report(0, 1), true), Nothing);
        assert_eq!(merge_step(false, &report(4, 0), true), Now);
        assert_eq!(merge_step(false, &report(0, 0), true), Now);
        // Nothing large stored: the small writes' own merging suffices.
        assert_eq!(merge_step(true, &report(0, 0), false), Nothing);
        assert_eq!(merge_step(true, &report(0, 3), false), Nothing);
        assert_eq!(merge_step(false, &report(10, 0), false), Nothing);
        assert_eq!(merge_step(false, &report(10, 3), false), Nothing);
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
    fn heron_hits(store: &Store) -> i64 {
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
        merge_when_due(&mut store, true, &report(6, 40), None);
        assert!(store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (6, 6));
        // The note outlives the store being opened again (a daemon restarted).
        drop(store);
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("reopen");
        add(&store, 6);
        merge_when_due(&mut store, true, &report(6, 20), None);
        assert!(store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (12, 12));
        // The small pass that reads the rest merges, and the note goes.
        merge_when_due(&mut store, false, &report(1, 0), None);
        assert!(!store.merge_due().expect("due"));
        assert_eq!(store.text_index_segments(), (1, 1));
        // Later small passes leave their segments to FTS5's own merging.
        add(&store, 12);
        merge_when_due(&mut store, false, &report(6, 0), None);
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
        merge_when_due(&mut store, true, &report(20, 5), None);
        drop(store);
        let mut store = Store::open(&path).expect("reopen");
        assert!(!store.text_merging());
        assert!(store.merge_due().expect("due"));
        // The pass that reads the rest merges it all, and merging resumes.
        merge_when_due(&mut store, false, &report(0, 0), None);
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
            .merge_text_indexes(Some(Instant::now()), crate::store::MERGE_PAGES)
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
    fn a_pass_with_nothing_to_read_finishes_a_merge_a_killed_process_left_paused() {
        let (dir, loc) = home_with_notes(30, Some("/p"), "heron note ");
        let db = dir.path().join("db/cairn.db");
        let mut store = Store::open(&db).expect("open");
        let redactor = Redactor::new();
        // Several passes, a commit (a segment per index) each.
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!(r.added, 30);
        for round in 0..4 {
            for i in 0..5 {
                notes::append(
                    &loc.notes_file,
                    Some("/p"),
                    &format!("heron note {round} {i}"),
                    1_700_000_100_000 + i64::from(round * 5 + i),
                )
                .expect("append");
            }
            let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
            assert_eq!(r.added, 5);
        }
        // A large pass paused FTS5's merging, stored everything, and was
        // killed inside the merge that ends it: the merge's transaction
        // is rolled back, so what is left is the pause and the mark, with
        // every store read.
        store.pause_text_merging().expect("pause");
        let segments = store.text_index_segments();
        assert!(segments.0 > 1 && segments.1 > 1, "{segments:?}");
        drop(store);
        let mut store = Store::open(&db).expect("reopen");
        assert!(!store.text_merging());
        assert!(store.merge_due().expect("due"));
        // The next pass has nothing to read; it restores merging and
        // finishes the merge.
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.changed, r.added), (0, 0));
        assert!(store.text_merging(), "automerge not restored");
        assert!(!store.merge_due().expect("due"), "merge mark left");
        assert_eq!(store.text_index_segments(), (1, 1));
        assert_eq!(heron_hits(&store), 50);
        let opts = crate::search::SearchOptions {
            limit: 5,
            now_ms: 1_800_000_000_000,
            ..crate::search::SearchOptions::default()
        };
        let hits = crate::search::search(
            &store,
            &crate::search::Query::parse("heron note 3 4"),
            &opts,
        )
        .expect("search");
        assert!(!hits.is_empty(), "search finds nothing after the merge");
        // With a deadline already past (a search's refresh), the merge
        // goes in steps and a later pass goes on with it.
        store.pause_text_merging().expect("pause");
        let past = Some(std::time::Instant::now());
        let mut passes = 0;
        while store.merge_due().expect("due") {
            index_all(&mut store, &ctx(&loc, &redactor, past), &mut |_| {}).expect("index");
            passes += 1;
            assert!(passes < 1_000, "the merge never ends");
        }
        assert!(store.text_merging());
        assert_eq!(heron_hits(&store), 50);
        // Nothing due: a pass with nothing to read writes nothing.
        let before = store.change_stamp().expect("stamp");
        index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!(store.change_stamp().expect("stamp"), before);
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

    /// A home whose only store is a notes file of `n` notes, `prefix`
    /// followed by the note's number, a millisecond apart.
    fn home_with_notes(
        n: usize,
        project: Option<&str>,
        prefix: &str,
    ) -> (tempfile::TempDir, Locations) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(dir.path());
        loc.notes_file = dir.path().join("notes.jsonl");
        for i in 0..n {
            notes::append(
                &loc.notes_file,
                project,
                &format!("{prefix}{i}"),
                1_700_000_000_000 + i as i64,
            )
            .expect("append");
        }
        (dir, loc)
    }

    #[test]
    fn a_pass_cut_short_resumes_where_it_stopped() {
        let n = BATCH * 2 + 500;
        let (dir, loc) = home_with_notes(n, Some("/p"), "note number ");
        let mut store = Store::open(&dir.path().join("db/cairn.db")).expect("open");
        let redactor = Redactor::new();
        let past = Some(std::time::Instant::now());
        let mut passes = Vec::new();
        for _ in 0..3 {
            let r = index_all(&mut store, &ctx(&loc, &redactor, past), &mut |_| {}).expect("index");
            passes.push((r.added, r.deferred));
        }
        assert_eq!(passes, [(BATCH as u64, 1), (BATCH as u64, 1), (500, 0)]);
        assert_eq!(store.stats().expect("stats").records, n as u64);
        // Nothing left: a further pass reads nothing.
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.changed, r.added), (0, 0));
    }

    #[test]
    fn a_pass_with_nothing_new_writes_nothing_and_missing_stores_are_marked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(dir.path());
        loc.notes_file = dir.path().join("notes.jsonl");
        for i in 0..3 {
            notes::append(
                &loc.notes_file,
                None,
                &format!("fact {i}"),
                1_700_000_000_000 + i,
            )
            .expect("append");
        }
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let redactor = Redactor::new();
        let changes = |s: &Store| -> i64 {
            s.test_conn()
                .query_row("SELECT total_changes()", [], |r| r.get(0))
                .expect("total_changes")
        };
        let missing = |s: &Store| -> Vec<bool> {
            s.list_sources()
                .expect("sources")
                .into_iter()
                .map(|r| r.missing)
                .collect()
        };
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.stores, r.changed, r.added), (1, 1, 3));
        // Nothing new: the pass reads nothing and writes no row.
        let before = changes(&store);
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.stores, r.changed, r.added), (1, 0, 0));
        assert_eq!(changes(&store), before);
        // The file disappears: marked missing, its records kept.
        let moved = dir.path().join("notes.moved");
        std::fs::rename(&loc.notes_file, &moved).expect("move away");
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.stores, r.changed), (0, 0));
        assert_eq!(missing(&store), [true]);
        assert_eq!(store.stats().expect("stats").records, 3);
        // It comes back unchanged: the mark is cleared without a re-read.
        std::fs::rename(&moved, &loc.notes_file).expect("move back");
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((r.stores, r.changed, r.added), (1, 0, 0));
        assert_eq!(missing(&store), [false]);
        // The freshness check agrees: nothing pending.
        let f = freshness(&store, &loc, &[]).expect("freshness");
        assert_eq!((f.stores, f.pending), (1, 0));
    }

    #[test]
    fn walked_stores_pick_up_appends_new_files_and_vanished_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let loc = Locations::under_home(dir.path());
        let projects = loc.claude_dir.join("projects");
        let line = |session: &str, i: u32| {
            format!(
                concat!(
                    r#"{{"type":"user","uuid":"{s}-{i}","sessionId":"{s}","#,
                    r#""timestamp":"2025-11-24T10:00:{i:02}.000Z","cwd":"/p","#,
                    r#""message":{{"role":"user","content":"line {i} of {s}"}}}}"#,
                    "\n"
                ),
                s = session,
                i = i
            )
        };
        let write = |rel: &str, session: &str, lines: std::ops::Range<u32>| {
            let p = projects.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            let text: String = lines.map(|i| line(session, i)).collect();
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .expect("open");
            std::io::Write::write_all(&mut f, text.as_bytes()).expect("write");
        };
        // Enough project folders that the walk is shared between two threads.
        for p in 0..6 {
            for s in 0..3 {
                write(&format!("-p{p}/s{p}{s}.jsonl"), &format!("s{p}{s}"), 0..2);
            }
        }
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let redactor = Redactor::new();
        let mut pass = || {
            let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
            (r.stores, r.changed, r.added)
        };
        assert_eq!(pass(), (18, 18, 36));
        assert_eq!(pass(), (18, 0, 0));
        // A line appended to a file in a folder that gained no file.
        write("-p3/s31.jsonl", "s31", 2..3);
        assert_eq!(pass(), (18, 1, 1));
        // A new file in an old folder.
        write("-p5/s59.jsonl", "s59", 0..2);
        assert_eq!(pass(), (19, 1, 2));
        assert_eq!(pass(), (19, 0, 0));
        // A file that vanished is marked missing; its records stay.
        std::fs::remove_file(projects.join("-p0/s00.jsonl")).expect("rm");
        assert_eq!(pass(), (18, 0, 0));
        let missing: Vec<String> = store
            .list_sources()
            .expect("sources")
            .into_iter()
            .filter(|r| r.missing)
            .map(|r| r.path)
            .collect();
        assert_eq!(missing.len(), 1);
        assert!(missing[0].ends_with("s00.jsonl"), "{missing:?}");
        assert_eq!(store.stats().expect("stats").records, 39);
    }

    #[test]
    fn a_pass_over_named_stores_reads_them_alone_and_marks_no_other_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let loc = Locations::under_home(dir.path());
        let projects = loc.claude_dir.join("projects");
        let append = |rel: &str, text: &str| {
            let p = projects.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            let s = rel
                .trim_end_matches(".jsonl")
                .rsplit('/')
                .next()
                .expect("name");
            let line = format!(
                concat!(
                    r#"{{"type":"user","uuid":"{s}-{t}","sessionId":"{s}","#,
                    r#""timestamp":"2025-11-24T10:00:00.000Z","cwd":"/p","#,
                    r#""message":{{"role":"user","content":"{t}"}}}}"#,
                    "\n"
                ),
                s = s,
                t = text
            );
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .expect("open");
            std::io::Write::write_all(&mut f, line.as_bytes()).expect("write");
            p
        };
        let a = append("-p/a.jsonl", "alpha one");
        let b = append("-p/b.jsonl", "bravo one");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let redactor = Redactor::new();
        let c = ctx(&loc, &redactor, None);
        // A whole walk lists every store it found.
        let whole = |store: &mut Store, known: &mut Stores| {
            let walk = Walk::start(&loc, &[], None);
            let r = index_walked_keeping(store, &c, walk, &mut |_| {}, &mut None, Some(known))
                .expect("index");
            (r.stores, r.added, known.len())
        };
        let named = |store: &mut Store, known: &Stores, paths: &[std::path::PathBuf]| {
            let walk = known.walk_of(paths).expect("every path is known");
            let r = index_walked(store, &c, walk, &mut |_| {}).expect("index");
            (r.stores, r.changed, r.added)
        };
        let mut known = Stores::default();
        assert_eq!(whole(&mut store, &mut known), (2, 2, 2));
        // A write to `a`: a pass over `a` alone reads its new line.
        append("-p/a.jsonl", "alpha two");
        assert_eq!(
            named(&mut store, &known, std::slice::from_ref(&a)),
            (1, 1, 1)
        );
        // Again: nothing new in it now.
        assert_eq!(
            named(&mut store, &known, &[a.clone(), a.clone()]),
            (1, 0, 0)
        );
        // `b`, not named, is neither read nor marked gone, though it grew.
        append("-p/b.jsonl", "bravo two");
        named(&mut store, &known, std::slice::from_ref(&a));
        let rows = store.list_sources().expect("sources");
        assert!(
            rows.iter().all(|r| !r.missing),
            "a store not named was marked gone"
        );
        assert_eq!(store.stats().expect("stats").records, 3);
        // A path that is no store, a new file and a store gone since: only
        // a whole walk can tell, so no pass over named stores is offered.
        let other = projects.join("-p/notes.txt");
        std::fs::write(&other, "x").expect("write");
        assert!(known.walk_of(&[a.clone(), other]).is_none());
        let new = append("-p/c.jsonl", "charlie one");
        assert!(known.walk_of(std::slice::from_ref(&new)).is_none());
        let away = dir.path().join("b.away");
        std::fs::rename(&b, &away).expect("move away");
        assert!(known.walk_of(std::slice::from_ref(&b)).is_none());
        std::fs::rename(&away, &b).expect("move back");
        // The whole walk reads what the named passes left (`b`'s line and
        // the new file), and the list follows the disk.
        assert_eq!(whole(&mut store, &mut known), (3, 2, 3));
        assert!(known.walk_of(std::slice::from_ref(&new)).is_some());
        assert_eq!(store.stats().expect("stats").records, 5);
    }

    #[test]
    fn a_write_to_a_databases_side_file_names_the_database() {
        fn read(
            _: &Path,
            _: &sources::Watermark,
        ) -> Result<sources::DbBatch, sources::SourceError> {
            Ok(sources::DbBatch::default())
        }
        fn whole(_: &Path, _: &[u8]) -> sources::Parsed {
            sources::Parsed::default()
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("state.vscdb");
        let doc = dir.path().join("chat.json");
        std::fs::write(&db, "db").expect("db");
        std::fs::write(dir.path().join("state.vscdb-wal"), "wal").expect("wal");
        std::fs::write(&doc, "{}").expect("doc");
        std::fs::write(dir.path().join("chat.json-wal"), "x").expect("not a wal");
        let mut known = Stores::default();
        for (path, reader) in [(&db, Reader::Database(read)), (&doc, Reader::Whole(whole))] {
            known.add(&Found {
                agent: "cursor",
                file: SourceFile::new(path.clone(), reader),
                size: 0,
                mtime_ns: 0,
                hash: None,
            });
        }
        let named = |p: &str| {
            let walk = known.walk_of(&[dir.path().join(p)])?;
            let mut paths = Vec::new();
            walk.each(|f| {
                // The database's size counts its log too.
                paths.push((f.file.path.clone(), f.size));
                Ok(())
            })
            .expect("each");
            Some(paths)
        };
        assert_eq!(named("state.vscdb-wal"), Some(vec![(db.clone(), 5)]));
        assert_eq!(named("state.vscdb-shm"), Some(vec![(db.clone(), 5)]));
        assert_eq!(named("chat.json"), Some(vec![(doc.clone(), 2)]));
        // Only a database has side files.
        assert_eq!(named("chat.json-wal"), None);
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read_dir").flatten() {
            let dest = to.join(e.file_name());
            if e.file_type().expect("type").is_dir() {
                copy_dir(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), &dest).expect("copy");
            }
        }
    }

    #[test]
    fn stores_sharing_a_transaction_each_save_their_own_offset() {
        // Several stores are written by one transaction of the writer
        // thread: each still ends with its offset at its own end, and a
        // pass that lost every saved offset re-reads them all and adds
        // nothing twice.
        let dir = tempfile::tempdir().expect("tempdir");
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/home/.claude");
        copy_dir(&fixtures, &dir.path().join(".claude"));
        let loc = Locations::under_home(dir.path());
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let redactor = Redactor::new();
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert!(
            r.changed >= 3 && r.added > 0 && r.failed.is_empty(),
            "{r:?}"
        );
        let records = store.stats().expect("stats").records;
        let sources = store.source_states().expect("states");
        assert_eq!(sources.len() as u64, r.changed);
        for (path, s) in &sources {
            let bytes = std::fs::read(path).expect("read");
            // Up to the end of the last complete line.
            let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            assert_eq!(
                (s.offset, s.size),
                (end as u64, bytes.len() as u64),
                "{path}"
            );
        }
        store
            .test_conn()
            .execute(
                "UPDATE sources SET offset = 0, size = 0, head_hash = NULL, tail_hash = NULL",
                [],
            )
            .expect("reset");
        let again = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!((again.changed, again.added), (r.changed, 0));
        assert_eq!(store.stats().expect("stats").records, records);
    }

    #[test]
    fn crash_between_batches_loses_and_duplicates_nothing() {
        // Simulate a crash after intermediate batches: the saved offset is
        // still the old one, so the next pass re-reads and dedupes.
        let (dir, loc) = home_with_notes(BATCH + 10, None, "fact ");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let redactor = Redactor::new();
        index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        // Forget the file state as if the last transaction never committed.
        store
            .test_conn()
            .execute(
                "UPDATE sources SET offset = 0, size = 0, head_hash = NULL, tail_hash = NULL",
                [],
            )
            .expect("reset");
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!(r.added, 0);
        assert_eq!(store.stats().expect("stats").records, (BATCH + 10) as u64);
    }

    #[test]
    fn a_writer_that_fails_mid_pass_stops_the_reader_and_the_next_pass_stores_all() {
        // The database refuses records past the first batch: the pass ends
        // with the error (the reader, ahead of the writer, stops instead of
        // waiting for room), and the next pass, with the database healed,
        // stores every record once.
        let n = BATCH * 3 + 7;
        let (dir, loc) = home_with_notes(n, None, "fact ");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        store
            .test_conn()
            .execute_batch(&format!(
                "CREATE TRIGGER refuse BEFORE INSERT ON records
                 WHEN (SELECT count(*) FROM records) >= {BATCH}
                 BEGIN SELECT RAISE(ABORT, 'disk says no'); END;"
            ))
            .expect("trigger");
        let redactor = Redactor::new();
        let failed = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {});
        assert!(
            failed
                .as_ref()
                .is_err_and(|e| e.to_string().contains("disk says no")),
            "{failed:?}"
        );
        store
            .test_conn()
            .execute_batch("DROP TRIGGER refuse")
            .expect("heal");
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert!(r.failed.is_empty(), "{r:?}");
        assert_eq!(store.stats().expect("stats").records, n as u64);
    }
}
