//! Pure sync planning: watermark arithmetic and which pulls to send.
//!
//! Owns the rule "for every origin log the peer holds further than we do,
//! pull from our watermark", in a deterministic order and bounded in number
//! (atuin's `operations()` idea). Never reads a store and never decides
//! leases or retries: the node filters and schedules.

use std::collections::BTreeMap;

use crate::ids::NodeId;
use crate::limits::{MAX_BATCH_BYTES, MAX_BATCH_ENTRIES};
use crate::message::{Pull, Watermark};

/// The highest contiguous seq after applying `seqs` to `watermark`.
///
/// `seqs` are the seqs held above the watermark, in ascending order
/// (duplicates and seqs at or below the watermark are ignored). Stops at the
/// first gap: `contiguous_max(3, [4, 5, 7])` is 5.
pub fn contiguous_max(watermark: u64, seqs: impl IntoIterator<Item = u64>) -> u64 {
    let mut w = watermark;
    for s in seqs {
        if s <= w {
            continue;
        }
        if Some(s) == w.checked_add(1) {
            w = s;
        } else {
            break;
        }
    }
    w
}

/// How large and how many pulls to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLimits {
    /// Most pulls returned (the rest wait for the next planning round).
    pub max_pulls: usize,
    /// `max_records` for each pull (clamped to 1..=[`MAX_BATCH_ENTRIES`]).
    pub max_records: u32,
    /// `max_bytes` for each pull (clamped to 1..=[`MAX_BATCH_BYTES`]).
    pub max_bytes: u32,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits {
            max_pulls: 2,
            max_records: MAX_BATCH_ENTRIES as u32,
            max_bytes: MAX_BATCH_BYTES as u32,
        }
    }
}

/// One origin log a peer holds further than we do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lag {
    /// The log's author.
    pub origin: NodeId,
    /// The log's epoch.
    pub epoch: u64,
    /// Our watermark (0 if we hold nothing of it).
    pub local: u64,
    /// The peer's watermark.
    pub remote: u64,
}

impl Lag {
    /// Entries we lack.
    pub fn behind(&self) -> u64 {
        self.remote - self.local
    }
}

/// Collapses a watermark list to one entry per `(origin, epoch)`, keeping the
/// highest seq (a hostile or buggy list may repeat keys).
fn by_log(list: &[Watermark]) -> BTreeMap<(NodeId, u64), u64> {
    let mut m = BTreeMap::new();
    for w in list {
        let e = m.entry((w.origin, w.epoch)).or_insert(0);
        *e = (*e).max(w.seq);
    }
    m
}

/// Every origin log where `remote` is ahead of `local`, ordered by
/// `(origin, epoch)`. Logs only we hold, or where we are ahead, are absent:
/// the peer pulls those itself.
pub fn lags(local: &[Watermark], remote: &[Watermark]) -> Vec<Lag> {
    let local = by_log(local);
    by_log(remote)
        .into_iter()
        .filter_map(|((origin, epoch), remote)| {
            let local = local.get(&(origin, epoch)).copied().unwrap_or(0);
            (remote > local).then_some(Lag {
                origin,
                epoch,
                local,
                remote,
            })
        })
        .collect()
}

/// Entries `remote` holds that `local` lacks, summed over every log
/// (saturating): how far behind `local` is.
pub fn total_behind(local: &[Watermark], remote: &[Watermark]) -> u64 {
    lags(local, remote)
        .iter()
        .fold(0u64, |acc, l| acc.saturating_add(l.behind()))
}

/// The pulls to send after exchanging watermarks: one per lagging log, from
/// our watermark, at most `limits.max_pulls`, in `(origin, epoch)` order.
/// Empty when the peer has nothing new, so a reconnect with nothing to do
/// costs the single watermark exchange.
pub fn plan_pulls(local: &[Watermark], remote: &[Watermark], limits: &PlanLimits) -> Vec<Pull> {
    plan_pulls_where(local, remote, limits, |_| true)
}

/// [`plan_pulls`] keeping only the lags `want` accepts (e.g. logs not
/// already being pulled from another peer, or within this peer's scope).
pub fn plan_pulls_where(
    local: &[Watermark],
    remote: &[Watermark],
    limits: &PlanLimits,
    mut want: impl FnMut(&Lag) -> bool,
) -> Vec<Pull> {
    let max_records = limits.max_records.clamp(1, MAX_BATCH_ENTRIES as u32);
    let max_bytes = limits.max_bytes.clamp(1, MAX_BATCH_BYTES as u32);
    lags(local, remote)
        .into_iter()
        .filter(|l| want(l))
        .take(limits.max_pulls)
        .map(|l| Pull {
            origin: l.origin,
            epoch: l.epoch,
            after_seq: l.local,
            max_records: u32::try_from(l.behind())
                .unwrap_or(u32::MAX)
                .clamp(1, max_records),
            max_bytes,
        })
        .collect()
}
