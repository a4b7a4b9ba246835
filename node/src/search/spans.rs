//! The stretches of record ids a search reaching back through every match
//! of a concept reads (a time filter, see `search::lexical::reach_of`),
//! when every run was read up front with the filters' verdict
//! (`runs::RunMap`): the allowed runs, joined where they touch and across
//! the narrowest gaps until few remain, and everything after the runs.
//! Each stretch is one rowid-bounded full-text query, so matches in the
//! gaps are never read (record ids follow reading order, not time).

/// At most this many stretches: each costs a query and a seek in every
/// segment holding the concept's term, so past a few dozen the seeks cost
/// more than reading the matches between them would.
pub(crate) const MOST: usize = 32;

/// The stretches, ascending, that hold every id of `ranges` (ascending or
/// not, disjoint (first, last) ids) and every id after `covered`: those
/// that touch joined, then the narrowest gaps closed until at most `most`
/// remain (of equal gaps, the newest first). The ids a closed gap brings
/// in are not allowed by the filters; the caller's screen rules them out.
pub(crate) fn joined(ranges: &[(i64, i64)], covered: i64, most: usize) -> Vec<(i64, i64)> {
    let mut all: Vec<(i64, i64)> = ranges.iter().copied().filter(|(a, b)| a <= b).collect();
    all.push((covered.saturating_add(1), i64::MAX));
    all.sort_unstable();
    let mut touching: Vec<(i64, i64)> = Vec::with_capacity(all.len());
    for (a, b) in all {
        match touching.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => touching.push((a, b)),
        }
    }
    let most = most.max(1);
    if touching.len() <= most {
        return touching;
    }
    // The gap after stretch i, narrowest first (of equal ones, the later).
    let mut gaps: Vec<(i64, usize)> = touching
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].0 - w[0].1, i))
        .collect();
    gaps.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
    let mut closed = vec![false; touching.len()];
    for &(_, i) in gaps.iter().take(touching.len() - most) {
        closed[i] = true;
    }
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(most);
    let mut open_after = true;
    for (i, &(a, b)) in touching.iter().enumerate() {
        match (open_after, out.last_mut()) {
            (false, Some(last)) => last.1 = b,
            _ => out.push((a, b)),
        }
        open_after = !closed[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether every id of `ranges` and past `covered` (up to `top`) lies
    /// in one of `spans`.
    fn covers(spans: &[(i64, i64)], ranges: &[(i64, i64)], covered: i64, top: i64) -> bool {
        let inside = |id: i64| spans.iter().any(|&(a, b)| a <= id && id <= b);
        ranges.iter().all(|&(a, b)| (a..=b).all(inside)) && (covered + 1..=top).all(inside)
    }

    #[test]
    fn touching_runs_join_and_the_ids_past_the_runs_are_one_stretch() {
        let ranges = [(11, 20), (1, 5), (6, 9), (21, 30), (40, 40)];
        assert_eq!(
            joined(&ranges, 50, 8),
            [(1, 9), (11, 30), (40, 40), (51, i64::MAX)]
        );
        // The last run reaching the runs' end joins the ids after it.
        assert_eq!(joined(&[(3, 7), (9, 10)], 10, 8), [(3, 7), (9, i64::MAX)]);
        // Nothing allowed: only what no run holds yet.
        assert_eq!(joined(&[], 99, 8), [(100, i64::MAX)]);
        // A run past the recorded end (it cannot be) is still covered.
        assert_eq!(joined(&[(5, 200)], 99, 8), [(5, i64::MAX)]);
    }

    #[test]
    fn the_narrowest_gaps_close_first_until_few_stretches_remain() {
        // Gaps of 1, 10, 2 and 30 ids between five stretches (the last
        // the ids past the runs' end).
        let ranges = [(1, 4), (6, 9), (20, 29), (32, 40)];
        let covered = 70;
        assert_eq!(
            joined(&ranges, covered, 3),
            [(1, 9), (20, 40), (71, i64::MAX)]
        );
        assert_eq!(joined(&ranges, covered, 2), [(1, 40), (71, i64::MAX)]);
        assert_eq!(joined(&ranges, covered, 1), [(1, i64::MAX)]);
        assert_eq!(joined(&ranges, covered, 0), [(1, i64::MAX)]);
        // Equal gaps: the newer closes first.
        assert_eq!(
            joined(&[(1, 1), (3, 3), (5, 5)], 10, 3),
            [(1, 1), (3, 5), (11, i64::MAX)]
        );
    }

    #[test]
    fn every_allowed_id_stays_inside_whatever_the_cap() {
        // Runs of scattered lengths and gaps, every third allowed.
        let mut ranges = Vec::new();
        let mut at = 1i64;
        for i in 0..300i64 {
            at += (i * 7_919) % 40;
            let len = 1 + (i * 104_729) % 20;
            if i % 3 == 0 {
                ranges.push((at, at + len - 1));
            }
            at += len;
        }
        let covered = at + 5;
        for most in [1, 2, 5, 32, 1_000] {
            let spans = joined(&ranges, covered, most);
            assert!(spans.len() <= most.max(1), "{most}: {}", spans.len());
            assert!(covers(&spans, &ranges, covered, covered + 50), "{most}");
            assert!(spans.windows(2).all(|w| w[0].1 + 1 < w[1].0), "{most}");
        }
        // With room for all, nothing else is read.
        let spans = joined(&ranges, covered, 1_000);
        let inside: i64 = spans[..spans.len() - 1]
            .iter()
            .map(|(a, b)| b - a + 1)
            .sum();
        let allowed: i64 = ranges.iter().map(|(a, b)| b - a + 1).sum();
        assert_eq!(inside, allowed);
    }
}
