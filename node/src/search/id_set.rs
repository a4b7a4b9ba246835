//! A set of record ids as a bitmap: what a filter allows, for the meaning
//! tier's scan of the vector file (see `search::semantic`).

/// A set of record ids from 0 to a highest one, a bit each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdSet {
    last: i64,
    bits: Vec<u64>,
}

impl IdSet {
    /// An empty set for ids up to `last`.
    pub(crate) fn upto(last: i64) -> IdSet {
        let span = usize::try_from(last.saturating_add(1)).unwrap_or(0);
        IdSet {
            last,
            bits: vec![0u64; span.div_ceil(64)],
        }
    }

    /// Adds the ids from `first` to `last` (those inside the set's span).
    pub(crate) fn insert_range(&mut self, first: i64, last: i64) {
        let (lo, hi) = (first.max(0), last.min(self.last));
        if lo > hi {
            return;
        }
        let (lo, hi) = (lo as usize, hi as usize);
        for w in lo / 64..=hi / 64 {
            self.bits[w] |= Self::mask(w, lo, hi);
        }
    }

    /// The bits of word `w` that lie from `lo` to `hi`.
    fn mask(w: usize, lo: usize, hi: usize) -> u64 {
        let mut bits = !0u64;
        if w == lo / 64 {
            bits &= !0u64 << (lo % 64);
        }
        if w == hi / 64 {
            bits &= !0u64 >> (63 - hi % 64);
        }
        bits
    }

    /// Adds `id` (ignored outside the set's span).
    pub(crate) fn insert(&mut self, id: i64) {
        if id <= self.last
            && let Ok(at) = usize::try_from(id)
            && let Some(w) = self.bits.get_mut(at / 64)
        {
            *w |= 1 << (at % 64);
        }
    }

    /// Whether any id from `first` to `last` is in the set.
    pub(crate) fn any_in(&self, first: i64, last: i64) -> bool {
        let (lo, hi) = (first.max(0), last.min(self.last));
        if lo > hi {
            return false;
        }
        let (lo, hi) = (lo as usize, hi as usize);
        (lo / 64..=hi / 64).any(|w| self.bits[w] & Self::mask(w, lo, hi) != 0)
    }

    /// Whether the set holds no id.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }

    /// Whether `id` is in the set.
    pub(crate) fn contains(&self, id: i64) -> bool {
        usize::try_from(id).is_ok_and(|at| {
            self.bits
                .get(at / 64)
                .is_some_and(|w| w & (1 << (at % 64)) != 0)
        })
    }

    /// Keeps only the ids `other` holds too.
    pub(crate) fn keep_only(&mut self, other: &IdSet) {
        for (i, w) in self.bits.iter_mut().enumerate() {
            *w &= other.bits.get(i).copied().unwrap_or(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_set_holds_what_was_put_in_and_nothing_else() {
        let mut set = IdSet::upto(130);
        for id in [0, 1, 63, 64, 127, 130, 131, -1, i64::MAX] {
            set.insert(id);
        }
        let held: Vec<i64> = (-2..200).filter(|&id| set.contains(id)).collect();
        assert_eq!(held, vec![0, 1, 63, 64, 127, 130]);
        assert!(!set.contains(i64::MIN) && !set.contains(i64::MAX));
        assert!(!IdSet::upto(-1).contains(0));
        // Whether a range holds any: the same as asking id by id.
        for first in -3..135 {
            for last in first - 1..first + 70 {
                let any = (first..=last).any(|id| set.contains(id));
                assert_eq!(set.any_in(first, last), any, "{first}..={last}");
            }
        }
        assert!(!IdSet::upto(-1).any_in(0, 10));
        // A range added is held in full, within the set's span.
        let mut ranged = IdSet::upto(100);
        ranged.insert_range(-5, 3);
        ranged.insert_range(98, 200);
        let held: Vec<i64> = (-10..300).filter(|&id| ranged.contains(id)).collect();
        assert_eq!(held, [0, 1, 2, 3, 98, 99, 100]);
        // Kept only where another set holds them too, whatever its span.
        let mut both = ranged.clone();
        both.keep_only(&set);
        let held: Vec<i64> = (-10..300).filter(|&id| both.contains(id)).collect();
        assert_eq!(held, [0, 1]);
        let mut short = set.clone();
        short.keep_only(&IdSet::upto(63));
        assert!((-10..300).all(|id| !short.contains(id)));
    }
}
