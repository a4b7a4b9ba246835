//! Per-peer limits on what this node takes from one peer: entries and
//! bytes per session and per day, a sustained rate within a session, and
//! a floor of free disk space, so one peer can never fill the disk.
//!
//! Pure: no clock, no disk, no store. The session driver passes the time
//! (Unix ms), the batch's size and the free space it measured, keeps the
//! day's usage in the store between sessions, and turns a [`LimitHit`]
//! into a halt of the session (the batch is not applied and its entries
//! wait for a later session: the watermark did not move past them).

use serde::Serialize;

/// Milliseconds in the rolling day a peer's daily volume is counted over.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub use crate::config::PeerLimits;

const MIB: u64 = 1024 * 1024;

/// What one peer sent in the current rolling day (kept between sessions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayUsage {
    /// When the day began, Unix ms.
    pub start_ms: i64,
    /// Entries taken since.
    pub entries: u64,
    /// Bytes taken since.
    pub bytes: u64,
}

impl DayUsage {
    /// The stored form: `start_ms entries bytes`.
    pub fn to_text(&self) -> String {
        format!("{} {} {}", self.start_ms, self.entries, self.bytes)
    }

    /// Parses [`DayUsage::to_text`]; anything else is a fresh day.
    pub fn from_text(s: &str) -> DayUsage {
        let mut it = s.split_whitespace();
        let mut next = || it.next().and_then(|x| x.parse::<i64>().ok());
        match (next(), next(), next()) {
            (Some(start_ms), Some(e), Some(b)) if e >= 0 && b >= 0 => DayUsage {
                start_ms,
                entries: e as u64,
                bytes: b as u64,
            },
            _ => DayUsage::default(),
        }
    }
}

/// Which limit a batch would have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Entries in this session.
    SessionEntries,
    /// Bytes in this session.
    SessionBytes,
    /// Entries in the rolling day.
    DayEntries,
    /// Bytes in the rolling day.
    DayBytes,
    /// The sustained rate.
    Rate,
    /// The free-space floor.
    Disk,
}

/// A refused batch: which limit, its value and what was already taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", self.describe())]
pub struct LimitHit {
    /// The limit.
    pub kind: LimitKind,
    /// Its configured value.
    pub limit: u64,
    /// What was taken (or, for the disk, is free) before this batch.
    pub used: u64,
}

impl LimitHit {
    fn describe(&self) -> String {
        let (l, u) = (self.limit, self.used);
        let what = match self.kind {
            LimitKind::SessionEntries => {
                format!("per-session limit of {l} entries from this peer reached ({u} taken)")
            }
            LimitKind::SessionBytes => {
                format!(
                    "per-session limit of {} MiB from this peer reached",
                    l / MIB
                )
            }
            LimitKind::DayEntries => {
                format!("per-day limit of {l} entries from this peer reached ({u} taken)")
            }
            LimitKind::DayBytes => {
                format!("per-day limit of {} MiB from this peer reached", l / MIB)
            }
            LimitKind::Rate => {
                format!("rate limit of {l} entries per second from this peer reached ({u} taken)")
            }
            LimitKind::Disk => format!(
                "less than {} MiB free on the database's disk ({} MiB free)",
                l / MIB,
                u / MIB
            ),
        };
        format!("{what}; the rest waits for a later sync ([sync.limits] in the config file)")
    }
}

/// One session's account with one peer.
#[derive(Debug, Clone)]
pub struct Quota {
    limits: PeerLimits,
    day: DayUsage,
    session_start_ms: i64,
    entries: u64,
    bytes: u64,
}

impl Quota {
    /// A session starting at `now_ms` with the day's usage so far (a day
    /// older than [`DAY_MS`], or one from the future, starts afresh).
    pub fn new(limits: PeerLimits, day: DayUsage, now_ms: i64) -> Quota {
        let fresh = now_ms.saturating_sub(day.start_ms) >= DAY_MS || day.start_ms > now_ms;
        let day = if fresh {
            DayUsage {
                start_ms: now_ms,
                ..DayUsage::default()
            }
        } else {
            day
        };
        Quota {
            limits,
            day,
            session_start_ms: now_ms,
            entries: 0,
            bytes: 0,
        }
    }

    /// Takes a batch of `entries` entries and `bytes` bytes at `now_ms`,
    /// with `free_bytes` free on the disk (if known), or says which limit
    /// it would pass; a refused batch is not counted.
    pub fn admit(
        &mut self,
        now_ms: i64,
        entries: u64,
        bytes: u64,
        free_bytes: Option<u64>,
    ) -> Result<(), LimitHit> {
        let l = &self.limits;
        let hit = |kind, limit, used| Err(LimitHit { kind, limit, used });
        if let Some(free) = free_bytes
            && free < l.min_free_bytes.saturating_add(bytes)
        {
            return hit(LimitKind::Disk, l.min_free_bytes, free);
        }
        if self.entries.saturating_add(entries) > l.session_entries {
            return hit(LimitKind::SessionEntries, l.session_entries, self.entries);
        }
        if self.bytes.saturating_add(bytes) > l.session_bytes {
            return hit(LimitKind::SessionBytes, l.session_bytes, self.bytes);
        }
        if self.day.entries.saturating_add(entries) > l.day_entries {
            return hit(LimitKind::DayEntries, l.day_entries, self.day.entries);
        }
        if self.day.bytes.saturating_add(bytes) > l.day_bytes {
            return hit(LimitKind::DayBytes, l.day_bytes, self.day.bytes);
        }
        let secs = u64::try_from(now_ms.saturating_sub(self.session_start_ms)).unwrap_or(0) / 1000;
        let allowed = l
            .burst_entries
            .saturating_add(l.entries_per_sec.saturating_mul(secs));
        if self.entries.saturating_add(entries) > allowed {
            return hit(LimitKind::Rate, l.entries_per_sec, self.entries);
        }
        self.entries += entries;
        self.bytes += bytes;
        self.day.entries += entries;
        self.day.bytes += bytes;
        Ok(())
    }

    /// The day's limit already reached (a session need not pull at all).
    pub fn day_spent(&self) -> Option<LimitHit> {
        let (l, d) = (&self.limits, &self.day);
        if d.entries >= l.day_entries {
            return Some(LimitHit {
                kind: LimitKind::DayEntries,
                limit: l.day_entries,
                used: d.entries,
            });
        }
        (d.bytes >= l.day_bytes).then_some(LimitHit {
            kind: LimitKind::DayBytes,
            limit: l.day_bytes,
            used: d.bytes,
        })
    }

    /// The day's usage, to keep for the next session.
    pub fn day(&self) -> DayUsage {
        self.day
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> PeerLimits {
        PeerLimits {
            session_entries: 100,
            session_bytes: 10_000,
            day_entries: 250,
            day_bytes: 1_000_000,
            entries_per_sec: 10,
            burst_entries: 50,
            min_free_bytes: 5_000,
        }
    }

    const T0: i64 = 1_767_225_600_000;

    #[test]
    fn a_flood_is_cut_at_the_burst_then_follows_the_rate() {
        let mut q = Quota::new(small(), DayUsage::default(), T0);
        assert_eq!(q.admit(T0, 50, 10, None), Ok(()));
        let e = q.admit(T0, 1, 10, None).expect_err("burst spent");
        assert_eq!((e.kind, e.limit, e.used), (LimitKind::Rate, 10, 50));
        // Two seconds later, twenty more are allowed, not twenty-one.
        assert_eq!(q.admit(T0 + 2_000, 20, 10, None), Ok(()));
        assert_eq!(
            q.admit(T0 + 2_000, 1, 10, None).map_err(|e| e.kind),
            Err(LimitKind::Rate)
        );
        assert!(e.to_string().contains("the rest waits"), "{e}");
    }

    #[test]
    fn session_and_day_volumes_are_bounded_and_the_day_rolls_over() {
        let mut q = Quota::new(small(), DayUsage::default(), T0);
        let later = T0 + 60_000;
        assert_eq!(q.admit(later, 100, 100, None), Ok(()));
        assert_eq!(
            q.admit(later, 1, 1, None).map_err(|e| e.kind),
            Err(LimitKind::SessionEntries)
        );
        // The next session the same day: the day's count carries over.
        let mut q = Quota::new(small(), q.day(), later);
        assert_eq!(q.admit(later + 60_000, 100, 100, None), Ok(()));
        let mut q = Quota::new(small(), q.day(), later + 120_000);
        assert_eq!(
            q.admit(later + 180_000, 51, 1, None).map_err(|e| e.kind),
            Err(LimitKind::DayEntries)
        );
        assert_eq!(q.admit(later + 180_000, 50, 1, None), Ok(()));
        assert_eq!(q.day_spent().map(|h| h.kind), Some(LimitKind::DayEntries));
        // A day after the first batch, the count starts again.
        let q = Quota::new(small(), q.day(), T0 + DAY_MS);
        assert_eq!((q.day().entries, q.day_spent()), (0, None));
        let mut q = Quota::new(small(), DayUsage::default(), T0);
        assert_eq!(
            q.admit(later, 1, 10_001, None).map_err(|e| e.kind),
            Err(LimitKind::SessionBytes)
        );
    }

    #[test]
    fn the_disk_floor_refuses_before_anything_else() {
        let mut q = Quota::new(small(), DayUsage::default(), T0);
        let e = q.admit(T0, 1, 100, Some(5_050)).expect_err("disk");
        assert_eq!((e.kind, e.used), (LimitKind::Disk, 5_050));
        assert_eq!(q.admit(T0, 1, 100, Some(5_100)), Ok(()));
    }

    #[test]
    fn usage_text_round_trips_and_garbage_is_a_fresh_day() {
        let d = DayUsage {
            start_ms: T0,
            entries: 7,
            bytes: 99,
        };
        assert_eq!(DayUsage::from_text(&d.to_text()), d);
        assert_eq!(DayUsage::from_text("x 1 2"), DayUsage::default());
        assert_eq!(DayUsage::from_text("1 -3 2"), DayUsage::default());
        // A usage from the future (clock set back) starts afresh too.
        let q = Quota::new(small(), d, T0 - 1);
        assert_eq!(q.day().entries, 0);
    }
}
