//! A packed copy of `record_runs` (table `run_blocks`), with each run's
//! agent, that a search reads whole in a fraction of a millisecond.
//!
//! A search filtered on the session judges each candidate by the run of
//! record ids that holds it (see `store::runs`). Read a row at a time,
//! the 31,074 runs of the 10 GB benchmark history took 4 ms or more
//! (SQLite steps a row in 100–170 ns on the benchmark machine), so a
//! search read only the runs its candidates lie in, each with a query of
//! its own, and judged each session with another: a filtered question
//! spent several milliseconds there. Here the runs whose first id falls
//! in one block of [`SPAN`] ids are one blob of delta-coded integers
//! (about 400 runs and 3 KiB a block at 10 GB), decoded in Rust; each run
//! carries its session's agent, which never changes, so a filter on the
//! agent alone needs no look-up in `sessions` at all.
//!
//! The blobs are derived from `record_runs` and rewritten in the same
//! transaction as any change to it (`runs::extend_by`,
//! `runs::forget_session`), block by block ([`repack`]); a database stored
//! before the table existed is packed by [`backfill`], and until that is
//! done a search reads the runs as before ([`Packed::read`] says `None`).
//! A blob that does not decode is reported, never trusted: the search
//! reads the runs as before.

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

/// Record ids per block: the runs starting in `[b · SPAN, (b + 1) · SPAN)`
/// are block `b`'s.
pub(crate) const SPAN: i64 = 1 << 16;

/// The blob layout's version, its first byte.
const VERSION: u8 = 1;

/// Blocks packed per transaction by [`backfill`].
const BACKFILL_BLOCKS: i64 = 64;

/// The `meta` row that marks the packing of older runs as pending.
const PENDING: &str = "run_blocks_backfill";

/// One run: every record from `first` to `last` belongs to session row
/// `session`, of agent `agent` (an index into [`Packed::agent`]'s names,
/// `None` when its session row was gone when the run was packed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) session: i64,
    pub(crate) agent: Option<u16>,
}

/// The index of the run of `runs` (in id order, none overlapping another;
/// `span` gives a run's first and last id) that holds record `id`, if any.
///
/// `hint` is the index this found last: a search asks about ids in order
/// (a doclist newest first, a batch of look-ups oldest first), and a
/// question's matches cluster in sessions, so the next id mostly lies in
/// the same run or a near one. The search therefore gallops from the hint
/// (1, 2, 4, ... runs away) before it halves, so a near run costs a few
/// comparisons instead of a binary search over every run: a filtered
/// question at 10 GB asked about 200,000 ids, and searching the 31,074
/// runs from scratch was a sixth of its time.
pub(crate) fn holding<T>(
    runs: &[T],
    id: i64,
    hint: &mut usize,
    span: impl Fn(&T) -> (i64, i64),
) -> Option<usize> {
    let first = |i: usize| span(&runs[i]).0;
    let h = (*hint).min(runs.len().checked_sub(1)?);
    // The runs starting at or before `id` are `runs[..p]`; bound `p`.
    let (lo, hi) = if id < first(h) {
        let mut step = 1;
        while step <= h && first(h - step) > id {
            step *= 2;
        }
        (h.saturating_sub(step), h - step / 2)
    } else {
        let mut step = 1;
        while h + step < runs.len() && first(h + step) <= id {
            step *= 2;
        }
        (h + step / 2 + 1, (h + step).min(runs.len()))
    };
    let p = lo + runs[lo..hi].partition_point(|r| span(r).0 <= id);
    let at = p.checked_sub(1)?;
    *hint = at;
    (id <= span(&runs[at]).1).then_some(at)
}

/// A blob that does not decode: what is wrong, for the log.
#[derive(Debug, thiserror::Error)]
#[error("run block {block}: {what}")]
pub(crate) struct Malformed {
    block: i64,
    what: &'static str,
}

/// Every run, in id order, read from the packed blocks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Packed {
    runs: Vec<Run>,
    agents: Vec<String>,
}

impl Packed {
    /// Every run of `conn`; `None` when the database has no packed copy
    /// to trust (a database opened read-only before its upgrade, the
    /// packing of older runs not done, a block that does not decode).
    pub(crate) fn read(conn: &Connection) -> Result<Option<Packed>, StoreError> {
        if !super::backfill::done(conn, "run_blocks", PENDING)? {
            return Ok(None);
        }
        let mut stmt = conn.prepare_cached("SELECT block, runs FROM run_blocks ORDER BY block")?;
        let mut rows = stmt.query([])?;
        let mut packed = Packed::default();
        while let Some(r) = rows.next()? {
            let block: i64 = r.get(0)?;
            let blob = r.get_ref(1)?.as_blob().unwrap_or_default();
            if let Err(e) = packed.decode(block, blob) {
                tracing::warn!(error = %e, "the packed runs are damaged; reading the runs one by one");
                return Ok(None);
            }
        }
        Ok(Some(packed))
    }

    /// The run that holds record `id`, if any; `hint` as [`holding`]'s.
    pub(crate) fn run_of(&self, id: i64, hint: &mut usize) -> Option<&Run> {
        let at = holding(&self.runs, id, hint, |r| (r.first, r.last))?;
        self.runs.get(at)
    }

    /// The name of agent index `i`.
    #[cfg(test)]
    pub(crate) fn agent(&self, i: u16) -> Option<&str> {
        self.agents.get(usize::from(i)).map(String::as_str)
    }

    /// The index of agent `name`, `None` when no run has it.
    pub(crate) fn agent_index(&self, name: &str) -> Option<u16> {
        let i = self.agents.iter().position(|a| a == name)?;
        u16::try_from(i).ok()
    }

    /// Whether every run's agent is known.
    pub(crate) fn agents_known(&self) -> bool {
        self.runs.iter().all(|r| r.agent.is_some())
    }

    /// Every run, in id order.
    pub(crate) fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Appends block `block`'s runs from `blob`, checking every field:
    /// the runs ascend, from inside the block, with no overlap with those
    /// before.
    fn decode(&mut self, block: i64, blob: &[u8]) -> Result<(), Malformed> {
        let bad = |what| Malformed { block, what };
        let mut at = Cursor { blob, pos: 0 };
        if at.byte().ok_or(bad("empty"))? != VERSION {
            return Err(bad("unknown version"));
        }
        let names = at.varint().ok_or(bad("truncated agents"))?;
        // Each name takes a byte at least: a count past the blob is false.
        if names > blob.len() as u64 {
            return Err(bad("agent count"));
        }
        let mut local = Vec::with_capacity(names as usize);
        for _ in 0..names {
            let len = at.varint().ok_or(bad("truncated agent"))?;
            let name = at.bytes(len).ok_or(bad("truncated agent"))?;
            let name = std::str::from_utf8(name).map_err(|_| bad("agent not UTF-8"))?;
            let i = match self.agents.iter().position(|a| a == name) {
                Some(i) => i,
                None => {
                    self.agents.push(name.to_string());
                    self.agents.len() - 1
                }
            };
            local.push(u16::try_from(i).map_err(|_| bad("too many agents"))?);
        }
        let count = at.varint().ok_or(bad("truncated count"))?;
        if count > blob.len() as u64 {
            return Err(bad("run count"));
        }
        let base = block.checked_mul(SPAN).ok_or(bad("block out of range"))?;
        let end = base + SPAN;
        let mut prev_first = base;
        let mut prev_session = 0i64;
        self.runs.reserve(count as usize);
        for _ in 0..count {
            let step = at.varint().ok_or(bad("truncated run"))?;
            let len = at.varint().ok_or(bad("truncated run"))?;
            let session = at.varint().ok_or(bad("truncated run"))?;
            let agent = at.varint().ok_or(bad("truncated run"))?;
            let first = i64::try_from(step)
                .ok()
                .and_then(|s| prev_first.checked_add(s))
                .filter(|&f| f < end)
                .ok_or(bad("run out of place"))?;
            let last = i64::try_from(len)
                .ok()
                .and_then(|l| first.checked_add(l))
                .ok_or(bad("run too long"))?;
            let session = prev_session
                .checked_add(unzigzag(session))
                .ok_or(bad("session out of range"))?;
            let agent = match agent {
                0 => None,
                a => Some(*local.get(a as usize - 1).ok_or(bad("unknown agent"))?),
            };
            if let Some(before) = self.runs.last()
                && first <= before.last
            {
                return Err(bad("runs overlap"));
            }
            self.runs.push(Run {
                first,
                last,
                session,
                agent,
            });
            prev_first = first;
            prev_session = session;
        }
        if at.pos != blob.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(())
    }
}

/// A reading position in a blob.
struct Cursor<'b> {
    blob: &'b [u8],
    pos: usize,
}

impl<'b> Cursor<'b> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.blob.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn bytes(&mut self, len: u64) -> Option<&'b [u8]> {
        let end = self.pos.checked_add(usize::try_from(len).ok()?)?;
        let out = self.blob.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// An unsigned LEB128 integer of at most ten bytes.
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return None;
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The blob of one block's runs, `(first, last, session, agent)` in id
/// order, all starting in block `block`.
fn encode(block: i64, runs: &[(i64, i64, i64, Option<String>)]) -> Vec<u8> {
    let mut names: Vec<&str> = Vec::new();
    for (_, _, _, agent) in runs {
        if let Some(a) = agent
            && !names.contains(&a.as_str())
        {
            names.push(a);
        }
    }
    let mut out = vec![VERSION];
    put_varint(&mut out, names.len() as u64);
    for n in &names {
        put_varint(&mut out, n.len() as u64);
        out.extend_from_slice(n.as_bytes());
    }
    put_varint(&mut out, runs.len() as u64);
    let mut prev_first = block * SPAN;
    let mut prev_session = 0i64;
    for (first, last, session, agent) in runs {
        put_varint(&mut out, (first - prev_first) as u64);
        put_varint(&mut out, (last - first) as u64);
        put_varint(&mut out, zigzag(session.wrapping_sub(prev_session)));
        let code = agent
            .as_ref()
            .and_then(|a| names.iter().position(|n| n == a))
            .map_or(0, |i| i as u64 + 1);
        put_varint(&mut out, code);
        prev_first = *first;
        prev_session = *session;
    }
    out
}

/// The block that holds the runs starting at record `first`.
pub(crate) fn block_of(first: i64) -> i64 {
    first.div_euclid(SPAN)
}

/// Writes blocks `from` to `to` anew from `record_runs` (a block left
/// with no run is deleted). Called in the transaction that changed the
/// runs, before it commits.
pub(crate) fn repack(conn: &Connection, from: i64, to: i64) -> Result<(), StoreError> {
    let mut read = conn.prepare_cached(
        "SELECT r.first, r.last, r.session, se.agent FROM record_runs r
         LEFT JOIN sessions se ON se.id = r.session
         WHERE r.first >= ?1 AND r.first < ?2 ORDER BY r.first",
    )?;
    for block in from..=to {
        let runs: Vec<(i64, i64, i64, Option<String>)> = read
            .query_map(params![block * SPAN, (block + 1) * SPAN], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<Result<_, _>>()?;
        if runs.is_empty() {
            conn.prepare_cached("DELETE FROM run_blocks WHERE block = ?1")?
                .execute([block])?;
        } else {
            conn.prepare_cached("INSERT OR REPLACE INTO run_blocks(block, runs) VALUES (?1, ?2)")?
                .execute(params![block, encode(block, &runs)])?;
        }
    }
    Ok(())
}

/// Writes every block anew from `record_runs`, from the first to the
/// last either holds (for tests that change the table by hand).
#[cfg(test)]
pub(crate) fn repack_all(conn: &Connection) -> Result<(), StoreError> {
    let (lo, hi): (Option<i64>, Option<i64>) = conn.query_row(
        "SELECT min(b), max(b) FROM (SELECT block AS b FROM run_blocks
         UNION ALL SELECT first / ?1 FROM record_runs)",
        [SPAN],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    match (lo, hi) {
        (Some(lo), Some(hi)) => repack(conn, lo, hi),
        _ => Ok(()),
    }
}

/// Packs the runs stored before the table existed, [`BACKFILL_BLOCKS`]
/// blocks per transaction (see `store::backfill`); returns how many
/// blocks it wrote or cleared.
pub(crate) fn backfill(conn: &mut Connection) -> Result<i64, StoreError> {
    let mut done = 0;
    super::backfill::in_batches(conn, PENDING, |tx, from| {
        let last: Option<i64> = tx
            .query_row("SELECT max(first) FROM record_runs", [], |r| r.get(0))
            .optional()?
            .flatten();
        let Some(last) = last.map(block_of).filter(|&b| b >= from) else {
            return Ok(None);
        };
        let to = last.min(from + BACKFILL_BLOCKS - 1);
        repack(tx, from, to)?;
        done += to - from + 1;
        Ok(Some(to + 1))
    })?;
    Ok(done)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Asserts that the packed blocks say exactly what `record_runs` and
    /// the sessions' agents say.
    pub(crate) fn assert_packed_true_to(conn: &Connection, what: &str) {
        let packed = Packed::read(conn).expect("read").expect("packed");
        let got: Vec<(i64, i64, i64, Option<String>)> = packed
            .runs()
            .iter()
            .map(|r| {
                let agent = r.agent.and_then(|a| packed.agent(a)).map(str::to_string);
                (r.first, r.last, r.session, agent)
            })
            .collect();
        let want: Vec<(i64, i64, i64, Option<String>)> = conn
            .prepare(
                "SELECT r.first, r.last, r.session, se.agent FROM record_runs r
                 LEFT JOIN sessions se ON se.id = r.session ORDER BY r.first",
            )
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(got, want, "{what}: packed runs");
    }

    fn decoded(block: i64, blob: &[u8]) -> Result<Packed, Malformed> {
        let mut p = Packed::default();
        p.decode(block, blob).map(|()| p)
    }

    #[test]
    fn blocks_decode_to_what_was_encoded() {
        let a = |s: &str| Some(s.to_string());
        let runs = vec![
            (3 * SPAN, 3 * SPAN, 7, a("codex")),
            (3 * SPAN + 1, 3 * SPAN + 900, 2, a("claude-code")),
            (3 * SPAN + 5_000, 4 * SPAN + 70_000, 1 << 40, None),
            (4 * SPAN - 1, 4 * SPAN - 1, 7, a("codex")),
        ];
        // The third ends past its block: a run may, only its first is the
        // block's; the fourth then overlaps it and is refused below.
        let ok = &runs[..3];
        let p = decoded(3, &encode(3, ok)).expect("decodes");
        let back: Vec<_> = p
            .runs()
            .iter()
            .map(|r| {
                let agent = r.agent.and_then(|i| p.agent(i)).map(str::to_string);
                (r.first, r.last, r.session, agent)
            })
            .collect();
        assert_eq!(back, ok);
        assert_eq!(p.run_of(3 * SPAN + 900, &mut 0).map(|r| r.session), Some(2));
        assert_eq!(p.run_of(3 * SPAN + 901, &mut 0), None);
        assert_eq!(p.run_of(3 * SPAN - 1, &mut 0), None);
        assert_eq!(
            p.run_of(4 * SPAN + 70_000, &mut 0).map(|r| r.session),
            Some(1 << 40)
        );
        assert!(decoded(3, &encode(3, &runs)).is_err(), "overlap");
        // A run that does not start in its block is refused.
        let stray = encode(3, &[(4 * SPAN, 4 * SPAN, 1, None)]);
        assert!(decoded(3, &stray).is_err(), "out of its block");
        // Two blocks in turn: the agents' names are shared.
        let mut p = decoded(3, &encode(3, &runs[..1])).expect("first");
        p.decode(5, &encode(5, &[(5 * SPAN, 5 * SPAN + 2, 9, a("codex"))]))
            .expect("second");
        assert_eq!(p.runs()[0].agent, p.runs()[1].agent);
        assert_eq!(p.agent(p.runs()[1].agent.expect("agent")), Some("codex"));
        assert_eq!(zigzag(-3), 5);
        assert_eq!(unzigzag(zigzag(i64::MIN)), i64::MIN);
    }

    #[test]
    fn the_run_found_near_the_last_is_the_one_a_binary_search_finds() {
        // Runs of 1 to 9 ids with gaps of 0 to 3 between them.
        let mut runs = Vec::new();
        let mut next = 10_i64;
        let mut x = 7_u64;
        let mut roll = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        for _ in 0..300 {
            let len = 1 + roll(9) as i64;
            runs.push((next, next + len - 1));
            next += len + roll(4) as i64;
        }
        let plain = |id: i64| {
            let at = runs.partition_point(|r| r.0 <= id).checked_sub(1)?;
            (id <= runs[at].1).then_some(at)
        };
        let all: Vec<i64> = (0..next + 5).collect();
        let mut shuffled = all.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, roll(i as u64 + 1) as usize);
        }
        let orders = [
            all.clone(),
            all.iter().rev().copied().collect::<Vec<_>>(),
            all.iter().step_by(7).copied().collect(),
            shuffled,
        ];
        for ids in orders {
            // A hint left anywhere, even past the end, is only a guess.
            for start in [0, 150, 299, 300, 10_000] {
                let mut hint = start;
                for &id in &ids {
                    assert_eq!(holding(&runs, id, &mut hint, |r| *r), plain(id), "{id}");
                }
            }
        }
        assert_eq!(holding(&[] as &[(i64, i64)], 5, &mut 3, |r| *r), None);
    }

    #[test]
    fn a_damaged_blob_is_refused_and_never_panics() {
        let runs: Vec<_> = (0..40)
            .map(|i| {
                (
                    SPAN + i * 10,
                    SPAN + i * 10 + 3,
                    i % 7,
                    Some(format!("agent{}", i % 3)),
                )
            })
            .collect();
        let good = encode(1, &runs);
        assert!(decoded(1, &good).is_ok());
        // Every truncation, every byte flipped, and a tail of garbage:
        // an error or some runs, never a panic; truncations always fail.
        for cut in 0..good.len() {
            assert!(decoded(1, &good[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                let _ = decoded(1, &bad);
            }
        }
        let mut long = good.clone();
        long.push(0);
        assert!(decoded(1, &long).is_err(), "trailing bytes");
        assert!(decoded(1, &[VERSION, 0xff, 0xff, 0xff]).is_err());
        assert!(decoded(1, &[9]).is_err(), "version");
        assert!(decoded(i64::MAX, &good).is_err(), "block out of range");
        // A pseudo-random blob after the version byte.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            let blob: Vec<u8> = std::iter::once(VERSION)
                .chain((0..64).map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                }))
                .collect();
            let _ = decoded(1, &blob);
        }
    }
}
