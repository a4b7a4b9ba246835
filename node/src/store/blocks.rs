//! Record ids grouped into the blocks of a side table's rows
//! (`record_bytes`, `record_times`): row `b` of a table in blocks of
//! `BLOCK` records holds records `b · BLOCK` to `b · BLOCK + BLOCK − 1`.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use super::StoreError;

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

/// Where [`wanted_within`] reads: the side table's rows (`block`, and
/// the column holding `width` bytes per record) and, for the records whose
/// bytes cannot say, their rows in `records` (`id` and the column that
/// decides).
pub(crate) struct Sides<'q> {
    /// `SELECT block, <bytes> FROM <table> WHERE block BETWEEN ?1 AND ?2
    /// ORDER BY block`.
    pub(crate) blocks: &'q str,
    /// Bytes per record in a block's row.
    pub(crate) width: usize,
    /// `SELECT id, <column> FROM records WHERE id BETWEEN ?1 AND ?2 ORDER
    /// BY id`.
    pub(crate) rows: &'q str,
}

/// Every record within `within` (ascending, disjoint ranges of ids) that
/// `judge` finds wanted from its bytes in a side table (`Some(true)`; `None`
/// when they cannot say), or `row_wanted` from its row where they cannot,
/// as ranges of ids handed to `add` in ascending order. The bytes cannot
/// say for a block with no row or a damaged one (any other length), or
/// where `judge` says so (a zero byte or word, also what a deleted record
/// leaves): the records of such a stretch are read from `records`, one
/// range query each.
pub(crate) fn wanted_within<const BLOCK: i64>(
    conn: &Connection,
    within: &[(i64, i64)],
    sides: Sides<'_>,
    judge: impl Fn(&[u8]) -> Option<bool>,
    row_wanted: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<bool>,
    add: impl FnMut(i64, i64),
) -> Result<(), StoreError> {
    let mut runs = Stretches {
        add,
        rows: conn.prepare_cached(sides.rows)?,
        row_wanted,
        last: None,
        run: None,
        unknown: None,
    };
    let row_len = BLOCK as usize * sides.width;
    let mut blocks = conn.prepare_cached(sides.blocks)?;
    for &(first, last) in within {
        let first = first.max(1);
        if first > last {
            continue;
        }
        // The next id of the range not yet fed.
        let mut next = first;
        let mut rows = blocks.query(params![first.div_euclid(BLOCK), last.div_euclid(BLOCK)])?;
        while let Some(r) = rows.next()? {
            let start = r.get::<_, i64>(0)? * BLOCK;
            // Ids of blocks with no row: not known.
            while next < start.min(last + 1) {
                runs.feed(next, None)?;
                next += 1;
            }
            let bytes = match r.get_ref(1)?.as_blob() {
                Ok(b) if b.len() == row_len => Some(b),
                _ => None,
            };
            let end = (start + BLOCK - 1).min(last);
            while next <= end {
                let at = (next - start) as usize * sides.width;
                let verdict = bytes.and_then(|b| judge(&b[at..at + sides.width]));
                runs.feed(next, verdict)?;
                next += 1;
            }
        }
        while next <= last {
            runs.feed(next, None)?;
            next += 1;
        }
    }
    runs.close()
}

/// The state of [`wanted_within`]: the wanted ids found so far, handed on
/// a range at a time, and the stretch of ids whose bytes cannot say.
struct Stretches<'c, A, W> {
    add: A,
    /// The records of a stretch of ids, with the column that decides.
    rows: rusqlite::CachedStatement<'c>,
    row_wanted: W,
    /// The last id fed.
    last: Option<i64>,
    /// The wanted ids just before it, not yet handed on.
    run: Option<(i64, i64)>,
    /// The ids just before it whose bytes were not known.
    unknown: Option<(i64, i64)>,
}

impl<A, W> Stretches<'_, A, W>
where
    A: FnMut(i64, i64),
    W: Fn(&rusqlite::Row<'_>) -> rusqlite::Result<bool>,
{
    /// Takes what id `id`'s bytes say (`None`: not known). Ids come in
    /// ascending order; a gap ends the stretches before it.
    fn feed(&mut self, id: i64, verdict: Option<bool>) -> Result<(), StoreError> {
        if self.last.is_some_and(|l| l + 1 != id) {
            self.close()?;
        }
        self.last = Some(id);
        let Some(wanted) = verdict else {
            self.hand_on_run();
            self.unknown = Some(self.unknown.map_or((id, id), |(a, _)| (a, id)));
            return Ok(());
        };
        self.read_unknown()?;
        if wanted {
            self.run = Some(self.run.map_or((id, id), |(a, _)| (a, id)));
        } else {
            self.hand_on_run();
        }
        Ok(())
    }

    /// Ends every stretch: hands on the wanted ids, reads the unknown ones.
    fn close(&mut self) -> Result<(), StoreError> {
        self.hand_on_run();
        self.read_unknown()
    }

    fn hand_on_run(&mut self) {
        if let Some((a, b)) = self.run.take() {
            (self.add)(a, b);
        }
    }

    /// Reads the records of the unknown stretch from their rows.
    fn read_unknown(&mut self) -> Result<(), StoreError> {
        let Some((a, b)) = self.unknown.take() else {
            return Ok(());
        };
        let mut rows = self.rows.query(params![a, b])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            if (self.row_wanted)(r)? {
                (self.add)(id, id);
            }
        }
        Ok(())
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
