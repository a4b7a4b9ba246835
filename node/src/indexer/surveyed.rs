//! The compare of a pass whose survey held for the database but not for
//! the disk (a transcript grew since): the stores the survey has as they
//! are on disk are left alone, and only the others' `sources` rows are
//! read, where the ordinary compare reads every store's row. Afterwards
//! the survey and those stores' new rows make the next survey (see
//! [`Resurvey`]).
//!
//! It only answers when it is sure: a store the survey has that the walk
//! does not find (gone), one whose row says it was gone (back), or any
//! commit by another process while it looked, and the ordinary compare
//! runs instead, on the same walk.

use super::detect::{Plan, read_whole_at};
use super::walk::{Found, Stores, Walk};
use crate::store::survey::{Keys, Known, Survey, Tallied, Was, store_hash};
use crate::store::{SourceState, Store, StoreError};

/// What the compare with a survey decided.
pub(super) enum FromSurvey {
    /// Read these stores; every other store found is as its row has it,
    /// and no known store is gone.
    Plans {
        plans: Vec<Plan>,
        /// How many stores the walk found.
        stores: u64,
        resurvey: Resurvey,
    },
    /// The survey cannot tell: the ordinary compare, over this walk (over,
    /// with everything it found).
    Compare(Box<Walk>),
}

/// What a pass compared with a survey read, to make the next survey from
/// it once the pass is over (see [`Resurvey::sources`]).
pub struct Resurvey {
    /// The store's change stamp before the compare: a survey made later
    /// holds only while no other connection committed since.
    before: (i64, u64),
    survey: Box<Survey>,
    /// Each store planned for reading: its source, path and what it was in
    /// the survey.
    read: Vec<(&'static str, String, Was)>,
}

impl std::fmt::Debug for Resurvey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resurvey")
            .field("before", &self.before)
            .field("read", &self.read.len())
            .finish()
    }
}

impl Resurvey {
    /// The sources of the survey of the database as `store` has it now:
    /// `None` when another connection committed since the compare, or a
    /// store read has no row (or one marked gone). Call it inside the
    /// transaction that writes the survey.
    pub fn sources(&self, store: &Store) -> Result<Option<Vec<Tallied>>, StoreError> {
        if store.change_stamp()?.0 != self.before.0 {
            return Ok(None);
        }
        let mut rows = Vec::with_capacity(self.read.len());
        for (_, path, _) in &self.read {
            rows.push(store.source_stamp(path)?);
        }
        let read = self.read.iter().zip(&rows).map(|((agent, _, was), row)| {
            let now = row.as_ref().map(|r| Known {
                agent: &r.agent,
                path: &r.path,
                size: r.size,
                mtime_ns: r.mtime_ns,
                failed: r.failed,
                missing: r.missing,
            });
            (*agent, *was, now)
        });
        Ok(self.survey.after(read))
    }
}

/// How many stores of a source the compare looks up one at a time at
/// least, before it leaves them to the compare with every row (and an
/// eighth of the source's stores, when that is more).
pub(crate) const MAX_LOOKUPS: usize = 256;

/// A store the compare will read: where it is in the walk, its row (none
/// when it is new) and what it was in the survey.
struct Planned {
    batch: usize,
    at: usize,
    state: Option<SourceState>,
    was: Was,
}

/// Compares `walk` (started with the survey's keys, for its hashes to be
/// used as they are) with `survey`, when it holds for the database (by
/// the generation of the `sources` rows it was taken from). Waits for the
/// walk to end.
pub(super) fn compare(
    store: &Store,
    walk: Walk,
    survey: Box<Survey>,
    kept: Option<&mut Stores>,
) -> Result<FromSurvey, StoreError> {
    let walked_with = walk.keys;
    let batches = walk.into_batches();
    let before = store.change_stamp()?;
    let generation = store.sources_gen()?;
    let compare = |batches| {
        Ok(FromSurvey::Compare(Box::new(Walk::over(
            batches,
            walked_with,
        ))))
    };
    // Taken after the stamp: the rows are those the survey was taken from.
    if !survey.describes_generation(generation) {
        return compare(batches);
    }
    let Some(planned) = differing(store, &batches, walked_with, &survey)? else {
        return compare(batches);
    };
    // The rows read were those the survey describes: nothing was committed
    // meanwhile, or nothing that changed them.
    let unchanged = store.change_stamp()? == before
        || (generation.is_some() && store.sources_gen()? == generation);
    if !unchanged {
        return compare(batches);
    }
    let stores = batches.iter().map(|b| b.len() as u64).sum();
    let mut plans = Vec::with_capacity(planned.len());
    let mut read = Vec::with_capacity(planned.len());
    let mut next = planned.into_iter().peekable();
    let mut kept = kept;
    if let Some(k) = kept.as_deref_mut() {
        k.by_path.clear();
    }
    for (b, batch) in batches.into_iter().enumerate() {
        for (i, f) in batch.into_iter().enumerate() {
            if let Some(k) = kept.as_deref_mut() {
                k.add(&f);
            }
            let Some(p) = next.next_if(|p| (p.batch, p.at) == (b, i)) else {
                continue;
            };
            read.push((f.agent, f.file.path.to_string_lossy().into_owned(), p.was));
            plans.push(Plan::of(f, p.state));
        }
    }
    Ok(FromSurvey::Plans {
        plans,
        stores,
        resurvey: Resurvey {
            before,
            survey,
            read,
        },
    })
}

/// The stores of `batches` to read, in the walk's order, when the survey
/// accounts for every other store and for every store it has; `None` when
/// it does not.
fn differing(
    store: &Store,
    batches: &[Vec<Found>],
    walked_with: Option<Keys>,
    survey: &Survey,
) -> Result<Option<Vec<Planned>>, StoreError> {
    let keys = survey.keys();
    let mut planned = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let Some(agent) = batch.first().map(|f| f.agent) else {
            continue;
        };
        seen.push(agent);
        let hashes: Vec<u128> = batch.iter().map(|f| f.hash(walked_with, keys)).collect();
        let mut tally = crate::store::survey::Tally::default();
        hashes.iter().for_each(|&h| tally.add_hash(h));
        if survey.same(agent, tally) {
            continue;
        }
        // The survey's stores of this source that the walk found: those
        // as it has them, and those whose row the walk's store has.
        let others: Vec<usize> = (0..batch.len())
            .filter(|&at| !survey.holds(agent, hashes[at]))
            .collect();
        // Past a few, their rows one at a time cost more than all rows at
        // once (a source turned on, a first pass after a long while).
        if others.len() > MAX_LOOKUPS.max(batch.len() / 8) {
            return Ok(None);
        }
        let mut accounted = (batch.len() - others.len()) as u64;
        for at in others {
            let f = &batch[at];
            let state = store.source_state(&f.file.path.to_string_lossy())?;
            let was = match &state {
                None => Was::Absent,
                // Back after being gone, or another source's: only the
                // ordinary compare sets such rows right.
                Some(s) if s.missing || s.agent != agent => return Ok(None),
                Some(s) => {
                    accounted += 1;
                    let failed = s.last_error.is_some();
                    if read_whole_at((s.size, s.mtime_ns, failed), f.size, f.mtime_ns) {
                        // As its row has it (a path the survey hashes
                        // otherwise than the walk does).
                        continue;
                    }
                    if failed {
                        Was::Failed
                    } else {
                        Was::Read(store_hash(keys, s.path.as_bytes(), s.size, s.mtime_ns))
                    }
                }
            };
            planned.push(Planned {
                batch: b,
                at,
                state,
                was,
            });
        }
        // Fewer: a store the survey has is gone, to be marked so.
        if accounted != survey.count(agent) {
            return Ok(None);
        }
    }
    // A source whose stores are all gone.
    if survey.agents().any(|a| !seen.contains(&a)) {
        return Ok(None);
    }
    Ok(Some(planned))
}
