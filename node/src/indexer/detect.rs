//! Change detection: which of the stores a walk found are new or changed
//! since the pass that last read them, judged by their `sources` rows
//! (size, mtime, whether that pass failed) or by a survey, and how far
//! the index is behind the disk.
//!
//! It reads `sources` rows and the walk's stats, never a store's
//! contents; its only write is marking stores gone from the disk as
//! missing (their records stay).

use super::surveyed::Resurvey;
use super::walk::{Found, Stores, Walk};
use super::{IndexError, IndexReport};
use crate::sources::{self, Locations, Reader, SourceFile};
use crate::store::{SourceStamp, SourceState, Store, StoreError};

/// A store to read this pass, with what the index knows of it.
pub(super) struct Plan {
    pub(super) agent: &'static str,
    pub(super) file: SourceFile,
    pub(super) state: Option<SourceState>,
    pub(super) size: u64,
    pub(super) mtime_ns: i64,
}

impl Plan {
    /// Reading store `f`, whose row (when the index knows it) is `state`.
    pub(super) fn of(f: Found, state: Option<SourceState>) -> Plan {
        Plan {
            agent: f.agent,
            file: f.file,
            state,
            size: f.size,
            mtime_ns: f.mtime_ns,
        }
    }
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

/// The stores of a whole walk to read, compared with every `sources` row
/// (see [`super::index_walked_keeping`]); stores gone from the disk are
/// marked missing. With nothing to read, leaves in `compared` the rows it
/// compared with.
pub(super) fn compare_all(
    store: &mut Store,
    disabled: &[String],
    walk: Walk,
    compared: &mut Option<Compared>,
    stores: Option<&mut Stores>,
) -> Result<(Vec<Plan>, IndexReport), StoreError> {
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
    let enabled = sources::enabled_agents(disabled);
    store.mark_missing(&known.rows, &present, &enabled)?;
    if plans.is_empty() {
        // A merge (the pass's, when one is left due) moves the stamp: the
        // rows are then compared again by the next pass, which is right
        // (and happens once).
        *compared = Some(Compared::Rows(before, known.rows));
    }
    Ok((plans, report))
}

/// The stores of a partial walk to read: each store it names compared
/// with its own row (no other store is read, and none is marked gone).
pub(super) fn compare_some(
    store: &Store,
    walk: Walk,
) -> Result<(Vec<Plan>, IndexReport), StoreError> {
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
    Ok((plans, report))
}

/// Bytes the pass will read for `plans`: what a store grew by past its
/// saved offset, or all of it.
pub(super) fn pending_bytes(plans: &[Plan]) -> u64 {
    plans
        .iter()
        .map(|p| match (&p.file.reader, &p.state) {
            (Reader::Lines(_), Some(s)) if s.offset <= p.size => p.size - s.offset,
            _ => p.size,
        })
        .sum()
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

/// Whether the walk finds exactly the stores of `survey` (one that holds
/// for the database), each at the size and mtime the index read it
/// whole: then a pass has nothing to do, and this returns how many stores
/// there are. Otherwise (or with no walking thread) `None`, and the walk
/// keeps what it found so far, and the survey, for the pass; it stops
/// comparing at the first source that differs, so the pass can start
/// while the walk goes on.
pub fn unchanged_since(walk: &mut Walk, survey: crate::store::survey::Survey) -> Option<u64> {
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

/// The survey's tally of `found` (see [`crate::store::survey::Tally`]), hashed
/// by a walk with `walked_with`.
fn tally_of(
    found: &[Found],
    walked_with: Option<crate::store::survey::Keys>,
    keys: crate::store::survey::Keys,
) -> crate::store::survey::Tally {
    let mut tally = crate::store::survey::Tally::default();
    for f in found {
        tally.add_hash(f.hash(walked_with, keys));
    }
    tally
}

/// Whether a store's size and mtime are what the last pass read, and that
/// pass succeeded: such a store has nothing new.
fn is_unchanged(s: &SourceStamp, size: u64, mtime_ns: i64) -> bool {
    read_whole_at((s.size, s.mtime_ns, s.failed), size, mtime_ns)
}

/// Whether a store whose row says it was read at (`size`, `mtime_ns`),
/// `failed` or not, is unchanged at `size` and `mtime_ns` now.
pub(super) fn read_whole_at(
    (size, mtime_ns, failed): (u64, i64, bool),
    now_size: u64,
    now_mtime: i64,
) -> bool {
    size == now_size && mtime_ns == now_mtime && !failed
}
