//! Record ids grouped into the blocks of a side table's rows
//! (`record_bytes`, `record_times`): row `b` of a table in blocks of
//! `BLOCK` records holds records `b · BLOCK` to `b · BLOCK + BLOCK − 1`.

use std::collections::BTreeMap;

/// The block of record `id` and its place within it.
pub(crate) fn place<const BLOCK: i64>(id: i64) -> (i64, usize) {
    (id.div_euclid(BLOCK), id.rem_euclid(BLOCK) as usize)
}

/// The places of `ids`, by block.
pub(crate) fn by_block<const BLOCK: i64>(
    ids: impl IntoIterator<Item = i64>,
) -> BTreeMap<i64, Vec<usize>> {
    let mut out: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for id in ids {
        let (block, at) = place::<BLOCK>(id);
        out.entry(block).or_default().push(at);
    }
    out
}

/// A value per record noted in the current transaction, by block, until
/// the writer takes them.
#[derive(Debug)]
pub(crate) struct Noted<T, const BLOCK: i64> {
    by_block: BTreeMap<i64, Vec<(usize, T)>>,
}

impl<T, const BLOCK: i64> Default for Noted<T, BLOCK> {
    fn default() -> Self {
        Noted {
            by_block: BTreeMap::new(),
        }
    }
}

impl<T, const BLOCK: i64> Noted<T, BLOCK> {
    /// Notes `value` for record `id`.
    pub(crate) fn note(&mut self, id: i64, value: T) {
        let (block, at) = place::<BLOCK>(id);
        self.by_block.entry(block).or_default().push((at, value));
    }

    /// Drops what was noted of record `id`.
    pub(crate) fn forget(&mut self, id: i64) {
        let (block, at) = place::<BLOCK>(id);
        if let Some(values) = self.by_block.get_mut(&block) {
            values.retain(|v| v.0 != at);
        }
    }

    /// Everything noted, by block, leaving nothing.
    pub(crate) fn take(&mut self) -> BTreeMap<i64, Vec<(usize, T)>> {
        std::mem::take(&mut self.by_block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_split_ids_into_blocks() {
        assert_eq!(place::<1024>(0), (0, 0));
        assert_eq!(place::<1024>(1023), (0, 1023));
        assert_eq!(place::<1024>(1024), (1, 0));
        assert_eq!(place::<1024>(5_000_001), (4882, 5_000_001 - 4882 * 1024));
        assert_eq!(place::<256>(257), (1, 1));
        let grouped = by_block::<256>([3, 600, 256, 4]);
        assert_eq!(
            grouped.into_iter().collect::<Vec<_>>(),
            vec![(0, vec![3, 4]), (1, vec![0]), (2, vec![88])]
        );
    }

    #[test]
    fn noted_values_come_back_by_block_less_those_forgotten() {
        let mut n: Noted<u8, 4> = Noted::default();
        for id in [1, 5, 2, 9, 6] {
            n.note(id, id as u8 * 10);
        }
        n.forget(5);
        n.forget(7);
        let got: Vec<_> = n.take().into_iter().collect();
        assert_eq!(
            got,
            vec![
                (0, vec![(1, 10), (2, 20)]),
                (1, vec![(2, 60)]),
                (2, vec![(1, 90)])
            ]
        );
        assert!(n.take().is_empty());
    }
}
