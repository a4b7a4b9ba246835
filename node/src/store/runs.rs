//! Which session each record belongs to, as runs of consecutive record
//! ids (`record_runs`), so a search filtered on the session rules a
//! candidate out without reading its row (a session's records take
//! consecutive ids: one run per session on the 1 GB history). A run
//! claims only what is true, every record from `first` to `last` belongs
//! to `session`: runs are worked out from the rows in the transaction
//! that stores them ([`extend`]), ids are never reused, and an id no run
//! holds is looked up in `records`.

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

/// Records read per batch when the runs of records stored before the
/// table existed are filled in (see [`backfill`]).
const BACKFILL_BATCH: i64 = 100_000;

/// The last record id the runs cover, and the run that ends there
/// (first id and session), if any.
fn tail(conn: &Connection) -> rusqlite::Result<Option<(i64, i64, i64)>> {
    conn.prepare_cached("SELECT first, last, session FROM record_runs ORDER BY first DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
}

/// Adds the runs of the records stored after the last one the runs cover,
/// at most `limit` of them (all when `None`); returns how many records it
/// covered. Called inside the transaction that stored them, before it
/// commits. Each run is written once: the runs are worked out first.
fn extend_by(conn: &Connection, limit: Option<i64>) -> Result<i64, StoreError> {
    let end = tail(conn)?;
    let after = end.map_or(0, |(_, last, _)| last);
    // (first, last, session), the first one the stored tail when it goes on.
    let mut runs: Vec<(i64, i64, i64)> = end.into_iter().collect();
    let stored_tail = runs.len();
    let mut covered = 0;
    {
        let mut stmt = conn
            .prepare_cached("SELECT id, session FROM records WHERE id > ?1 ORDER BY id LIMIT ?2")?;
        let mut rows = stmt.query(params![after, limit.unwrap_or(-1)])?;
        while let Some(r) = rows.next()? {
            let (id, session): (i64, i64) = (r.get(0)?, r.get(1)?);
            covered += 1;
            match runs.last_mut() {
                Some(run) if run.2 == session && run.1 + 1 == id => run.1 = id,
                _ => runs.push((id, id, session)),
            }
        }
    }
    for (i, &(first, last, session)) in runs.iter().enumerate() {
        if i < stored_tail {
            if last != after {
                conn.prepare_cached("UPDATE record_runs SET last = ?2 WHERE first = ?1")?
                    .execute(params![first, last])?;
            }
        } else {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO record_runs(first, last, session) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![first, last, session])?;
        }
    }
    Ok(covered)
}

/// Adds the runs of every record stored since the runs were last extended:
/// to be called in the transaction that stored them, before it commits.
pub(crate) fn extend(conn: &Connection) -> Result<(), StoreError> {
    extend_by(conn, None).map(|_| ())
}

/// Fills in the runs of records stored before the table existed, a batch
/// at a time (see `store::backfill`); returns how many records it covered.
pub(crate) fn backfill(conn: &mut Connection) -> Result<i64, StoreError> {
    let mut covered = 0;
    super::backfill::in_batches(conn, "runs_backfill", |tx, _| {
        let n = extend_by(tx, Some(BACKFILL_BATCH))?;
        covered += n;
        // The runs themselves say where the work stands; the row's value
        // only says that it is not done.
        Ok((n > 0).then_some(0))
    })?;
    Ok(covered)
}

/// Whether the database has the table (one opened read-only before its
/// upgrade has not).
fn has_table(conn: &Connection) -> rusqlite::Result<bool> {
    super::schema::has_table(conn, "record_runs")
}

/// Runs as (first, last) record ids, and the last record id the runs
/// cover (see [`RunMap::allowed_ranges`]).
pub(crate) type Ranges = (Vec<(i64, i64)>, i64);

/// Every run, read up front, each marked with whether a search's filters
/// allow its session: for a search that would otherwise read most of them
/// one at a time (a narrow filter's, whose scan reads them anyway).
#[derive(Debug, Clone)]
pub(crate) struct RunMap {
    /// (first, last, allowed), by first id.
    runs: Vec<(i64, i64, bool)>,
}

impl RunMap {
    /// Every run of `conn`, each session judged by `allowed`; `None`
    /// without the table.
    pub(crate) fn read(
        conn: &Connection,
        allowed: impl Fn(i64) -> bool,
    ) -> Result<Option<RunMap>, StoreError> {
        if !has_table(conn)? {
            return Ok(None);
        }
        let mut stmt =
            conn.prepare_cached("SELECT first, last, session FROM record_runs ORDER BY first")?;
        let mut rows = stmt.query([])?;
        let mut runs = Vec::new();
        while let Some(r) = rows.next()? {
            runs.push((r.get(0)?, r.get(1)?, allowed(r.get(2)?)));
        }
        Ok(Some(RunMap { runs }))
    }

    /// The allowed runs as (first, last) ids, and the last record id the
    /// runs cover: every record up to it lies in a run (runs are worked out
    /// in id order, and ids are never reused), and records after it are in
    /// none yet.
    pub(crate) fn allowed_ranges(&self) -> Ranges {
        let covered = self.runs.iter().map(|r| r.1).max().unwrap_or(0);
        let ranges = self
            .runs
            .iter()
            .filter(|r| r.2)
            .map(|r| (r.0, r.1))
            .collect();
        (ranges, covered)
    }

    /// The ids the map does not rule out, as ascending (first, last)
    /// ranges: the allowed runs, and the ids between runs that no run
    /// holds (a forgotten session's, or runs still being worked out, which
    /// only a record's row can judge); with the last id the runs cover.
    pub(crate) fn open_ranges(&self) -> Ranges {
        // By first id already, as read; sorted again in case.
        let mut runs: Vec<&(i64, i64, bool)> = self.runs.iter().collect();
        runs.sort_unstable_by_key(|r| r.0);
        let mut open: Vec<(i64, i64)> = Vec::new();
        let mut next = 1i64;
        for &&(first, last, allowed) in &runs {
            if first > next {
                open.push((next, first - 1));
            }
            if allowed {
                open.push((first, last));
            }
            next = next.max(last.saturating_add(1));
        }
        (open, next - 1)
    }

    /// Whether the filters allow the session of record `id`, as
    /// [`Runs::allows`] says it: `None` when no run holds the id. `hint`
    /// is the caller's, as [`holding`]'s (0 to start).
    pub(crate) fn allows(&self, id: i64, hint: &mut usize) -> Option<bool> {
        let at = holding(&self.runs, id, hint, |r| (r.0, r.1))?;
        Some(self.runs[at].2)
    }
}

/// The index of the run of `runs` (in id order, none overlapping another;
/// `span` gives a run's first and last id) that holds record `id`, if any.
///
/// `hint` is the index this found last: a search asks about ids in order
/// (a doclist newest first, a batch of look-ups oldest first), and a
/// question's matches cluster in sessions, so the next id mostly lies in
/// the same run or a near one. The search therefore gallops from the hint
/// (1, 2, 4, ... runs away) before it halves, so a near run costs a few
/// comparisons instead of a binary search over every run.
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

/// Deletes the runs of session row `session` (when a forget deletes it).
pub(crate) fn forget_session(conn: &Connection, session: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM record_runs WHERE session = ?1")?
        .execute([session])?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{Record, Role};
    use crate::store::Store;

    /// Asserts that the runs tell the truth about `conn`'s records: each
    /// record lies in exactly one run, of its own session, and no run
    /// names a session that is gone.
    pub(crate) fn assert_true_to(conn: &Connection, what: &str) {
        let runs = stored(conn);
        let records = records_of(conn);
        for (id, session) in records {
            let holding: Vec<_> = runs.iter().filter(|r| r.0 <= id && id <= r.1).collect();
            assert_eq!(holding.len(), 1, "{what}: record {id} in {holding:?}");
            assert_eq!(holding[0].2, session, "{what}: record {id}");
        }
        let orphans: i64 = conn
            .query_row(
                "SELECT count(*) FROM record_runs WHERE session NOT IN (SELECT id FROM sessions)",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(orphans, 0, "{what}: runs of sessions that are gone");
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

    /// Every record's (id, session row), in id order.
    fn records_of(conn: &Connection) -> Vec<(i64, i64)> {
        conn.prepare("SELECT id, session FROM records ORDER BY id")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// The runs as stored, in order.
    fn stored(conn: &Connection) -> Vec<(i64, i64, i64)> {
        conn.prepare("SELECT first, last, session FROM record_runs ORDER BY first")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// The runs the rows imply: consecutive ids of one session.
    fn implied(conn: &Connection) -> Vec<(i64, i64, i64)> {
        let rows = records_of(conn);
        let mut runs: Vec<(i64, i64, i64)> = Vec::new();
        for (id, s) in rows {
            match runs.last_mut() {
                Some(run) if run.2 == s && run.1 + 1 == id => run.1 = id,
                _ => runs.push((id, id, s)),
            }
        }
        runs
    }

    fn store_count(store: &Store) -> i64 {
        store
            .conn()
            .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
            .expect("count")
    }

    /// Two sessions taking turns: codex's "a" twice, claude-code's "b",
    /// then "a" again.
    const TURNS: &[(&str, &str)] = &[
        ("codex", "a"),
        ("codex", "a"),
        ("claude-code", "b"),
        ("codex", "a"),
    ];

    fn stores(store: &mut Store, records: &[(&str, &str)]) {
        let before = store_count(store);
        let mut ing = store.ingest("node").expect("ingest");
        for (i, (agent, session)) in records.iter().enumerate() {
            let text = format!("text {i} of {session} after {before}");
            let r = Record::new(agent, session, Role::User, text);
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
    }

    #[test]
    fn runs_follow_the_records_through_inserts_and_a_backfill() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        // A run per turn.
        stores(&mut store, TURNS);
        let conn = store.conn();
        assert_eq!(stored(conn), implied(conn));
        assert_eq!(stored(conn).len(), 3);
        assert_true_to(conn, "stored");
        // The next commit's first record extends the run it follows.
        stores(&mut store, &[("codex", "a"), ("codex", "c")]);
        let conn = store.conn();
        assert_eq!(stored(conn), implied(conn));
        assert_eq!(stored(conn).len(), 4);
        assert_true_to(conn, "extended");
        // Filled in from scratch, as for a database stored before the
        // table existed: the same runs, whatever the batch.
        let want = stored(conn);
        conn.execute("DELETE FROM record_runs", []).expect("clear");
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('runs_backfill', '0')",
            [],
        )
        .expect("mark");
        let mut conn = Connection::open(store.path()).expect("open");
        assert_eq!(backfill(&mut conn).expect("backfill"), 6);
        assert_eq!(stored(&conn), want);
        // Done: a second call finds nothing to do.
        assert_eq!(backfill(&mut conn).expect("backfill"), 0);
        // Opening a database left with that work pending does it.
        conn.execute_batch(
            "DELETE FROM record_runs;
             INSERT INTO meta(key, value) VALUES ('runs_backfill', '0');",
        )
        .expect("older");
        drop(conn);
        let path = store.path().to_path_buf();
        drop(store);
        let store = Store::open(&path).expect("reopen");
        assert_eq!(stored(store.conn()), want, "backfilled");
        assert_true_to(store.conn(), "backfilled");
        // Without the table (a database opened read-only before its
        // upgrade), a search reads no runs.
        store
            .conn()
            .execute_batch("DROP TABLE record_runs;")
            .expect("drop");
        assert!(RunMap::read(store.conn(), |_| true).expect("map").is_none());
    }

    #[test]
    fn a_search_reads_which_runs_are_allowed() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        stores(&mut store, TURNS);
        let conn = store.conn();
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM records ORDER BY id")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let sessions: Vec<i64> = conn
            .prepare("SELECT id FROM sessions WHERE agent = 'codex'")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        // Every run read up front says of each record whether its session
        // is allowed, and nothing of ids before the first or after the last.
        let map = RunMap::read(conn, |s| sessions.contains(&s))
            .expect("map")
            .expect("table");
        let mut hint = 0;
        let verdicts: Vec<Option<bool>> = ids.iter().map(|&id| map.allows(id, &mut hint)).collect();
        assert_eq!(verdicts, [Some(true), Some(true), Some(false), Some(true)]);
        for order in [ids.clone(), ids.iter().rev().copied().collect()] {
            for &id in &order {
                assert_eq!(map.allows(id, &mut hint), map.allows(id, &mut 0), "{id}");
            }
        }
        assert_eq!(map.allows(0, &mut 0), None);
        assert_eq!(map.allows(ids[3] + 1, &mut 0), None);
        // A filter on an agent no run has allows none of them.
        let none = RunMap::read(conn, |_| false).expect("map").expect("table");
        for id in &ids {
            assert_eq!(none.allows(*id, &mut 0), Some(false));
        }
        // A run missing (a damaged table): its records are not known.
        conn.execute("DELETE FROM record_runs WHERE first = ?1", [ids[2]])
            .expect("delete");
        let map = RunMap::read(conn, |s| sessions.contains(&s))
            .expect("map")
            .expect("table");
        assert_eq!(map.allows(ids[2], &mut 0), None);
    }
}
