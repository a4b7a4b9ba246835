//! The records a period named in a question adds to its candidates: the
//! newest of what was said in it. Records have no index on time alone,
//! so only the sessions overlapping the period (`sessions.first_ms`,
//! `last_ms`) are visited, each one's records sought newest first in
//! `records_session (session, ts)`, until no session left can hold a
//! record newer than the newest `cap` found (ties: the higher id).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rusqlite::types::Value as SqlValue;

use super::filter::Filter;
use super::{Store, StoreError, codec};
use crate::record::Role;

/// A record found in the period: (id, role, time, session row, flags).
pub(crate) type InPeriod = (i64, String, Option<i64>, i64, i64);

/// A record while the newest are sought: (time, id, role, session row,
/// flags), ordered by time and id alone (ids are unique).
type ByTime = (i64, i64, String, i64, i64);

impl Store {
    /// The newest `cap` records of people, models and notes with a time in
    /// `[from, to)` that `filter` allows, newest first.
    pub(crate) fn newest_in_period(
        &self,
        range: (i64, i64),
        filter: &Filter,
        cap: usize,
    ) -> Result<Vec<InPeriod>, StoreError> {
        newest(self.conn(), range, filter, cap)
    }
}

/// [`Store::newest_in_period`].
fn newest(
    conn: &rusqlite::Connection,
    (from, to): (i64, i64),
    opts: &Filter,
    cap: usize,
) -> Result<Vec<InPeriod>, StoreError> {
    if cap == 0 || from >= to {
        return Ok(Vec::new());
    }
    let sessions = overlapping(conn, (from, to), opts)?;
    // The filters on the record; those on the session chose the sessions.
    let on_record = opts.on_record();
    let mut sql = String::from("SELECT r.id, r.role, r.ts, r.session, r.flags FROM records r");
    on_record.push_origin_joins(&mut sql);
    sql.push_str(&format!(
        " WHERE r.session = ?1 AND r.ts >= ?2 AND r.ts < ?3 AND r.role IN ({})",
        codec::roles_sql(&[Role::User, Role::Assistant, Role::Note])
    ));
    let mut args = vec![
        SqlValue::Null,
        SqlValue::Integer(from),
        SqlValue::Integer(to),
    ];
    on_record.push_filters(&mut sql, &mut args);
    sql.push_str(&format!(" ORDER BY r.ts DESC, r.id DESC LIMIT {cap}"));
    let mut stmt = conn.prepare(&sql)?;
    // The newest `cap` so far, the oldest of them on top.
    let mut kept: BinaryHeap<Reverse<ByTime>> = BinaryHeap::new();
    for (session, newest_possible) in sessions {
        if kept.len() == cap && kept.peek().is_some_and(|Reverse(o)| newest_possible < o.0) {
            break;
        }
        args[0] = SqlValue::Integer(session);
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        while let Some(r) = rows.next()? {
            let (ts, id): (i64, i64) = (r.get(2)?, r.get(0)?);
            if kept.len() == cap {
                match kept.peek() {
                    Some(Reverse(o)) if (ts, id) > (o.0, o.1) => {
                        kept.pop();
                    }
                    // This session's records come newest first: none after
                    // this one gets in either.
                    _ => break,
                }
            }
            kept.push(Reverse((
                ts,
                id,
                codec::role_at(r, 1)?,
                r.get(3)?,
                r.get(4)?,
            )));
        }
    }
    // Ascending `Reverse`s: newest first.
    Ok(kept
        .into_sorted_vec()
        .into_iter()
        .map(|Reverse((ts, id, role, session, flags))| (id, role, Some(ts), session, flags))
        .collect())
}

/// The sessions with a record in `[from, to)` as far as their first and
/// last times tell, that the filters on the session allow, each with the
/// newest time a record of it in the period can have; newest first.
fn overlapping(
    conn: &rusqlite::Connection,
    (from, to): (i64, i64),
    opts: &Filter,
) -> Result<Vec<(i64, i64)>, StoreError> {
    let on_session = opts.on_session();
    // `+` keeps `sessions_last_ms` out of the plan: for a period long
    // past, the sessions that ended after it began are nearly all of them,
    // those that began before it ended few (`sessions_first_ms`).
    let mut sql = String::from(
        "SELECT se.id, se.last_ms FROM sessions se WHERE se.first_ms < ?1 AND +se.last_ms >= ?2",
    );
    let mut args = vec![SqlValue::Integer(to), SqlValue::Integer(from)];
    on_session.push_filters(&mut sql, &mut args);
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let last: i64 = r.get(1)?;
        out.push((r.get::<_, i64>(0)?, last.min(to - 1)));
    }
    out.sort_unstable_by_key(|&(id, newest)| Reverse((newest, id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::store::Store;

    const HOUR: i64 = 3_600_000;

    /// What a scan of every record in the period gives: the reference.
    fn scanned(
        conn: &rusqlite::Connection,
        (from, to): (i64, i64),
        opts: &Filter,
        cap: usize,
    ) -> Vec<InPeriod> {
        let mut sql = String::from("SELECT r.id, r.role, r.ts, r.session, r.flags FROM records r");
        opts.push_joins(&mut sql);
        sql.push_str(&format!(
            " WHERE r.ts >= ?1 AND r.ts < ?2 AND r.role IN ({})",
            codec::roles_sql(&[Role::User, Role::Assistant, Role::Note])
        ));
        let mut args = vec![SqlValue::Integer(from), SqlValue::Integer(to)];
        opts.push_filters(&mut sql, &mut args);
        sql.push_str(&format!(" ORDER BY r.ts DESC, r.id DESC LIMIT {cap}"));
        let mut stmt = conn.prepare(&sql).expect("prepare");
        let mut rows = stmt
            .query(rusqlite::params_from_iter(args.iter()))
            .expect("query");
        let mut out = Vec::new();
        while let Some(r) = rows.next().expect("row") {
            out.push((
                r.get(0).expect("id"),
                codec::role_at(r, 1).expect("role"),
                r.get(2).expect("ts"),
                r.get(3).expect("session"),
                r.get(4).expect("flags"),
            ));
        }
        out
    }

    /// Sessions of two agents, in three projects, from two machines, that
    /// overlap in time, with every role, records without a time and many
    /// records sharing a time (ties at the cut).
    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        for (origin, sessions) in [("node", 0..24), ("peer", 24..32)] {
            let mut ing = store.ingest(origin).expect("ingest");
            for s in sessions {
                let agent = if s % 3 == 0 { "codex" } else { "claude-code" };
                let start = (s as i64 % 9) * 5 * HOUR;
                for i in 0..(5 + s % 7) {
                    let role = Role::ALL[(s + i) % Role::ALL.len()];
                    let mut r =
                        Record::new(agent, &format!("sess-{s:02}"), role, format!("r {s} {i}"));
                    r.project = Some(format!("/work/p{}", s % 3));
                    r.time_ms = match (s + i) % 11 {
                        0 => None,
                        // Whole hours: many records share a time.
                        1 | 2 => Some(start + (i as i64 / 2) * HOUR),
                        _ => Some(start + i as i64 * 7 * 60_000),
                    };
                    ing.insert(&r, None).expect("insert");
                }
            }
            ing.commit().expect("commit");
        }
        // Records appended later to the first sessions (a file that grew),
        // the lowest session last: the newest ids sit in the sessions
        // visited last among those that can reach a time, at times other
        // sessions' records share.
        let mut ing = store.ingest("node").expect("ingest");
        for s in (0..10).rev() {
            for i in 0..3 {
                let role = [Role::User, Role::Assistant, Role::Note][i];
                let mut r = Record::new(
                    "claude-code",
                    &format!("sess-{s:02}"),
                    role,
                    format!("more {s} {i}"),
                );
                r.project = Some(format!("/work/p{}", s % 3));
                r.time_ms = Some((s as i64 % 4) * 5 * HOUR + i as i64 * HOUR);
                ing.insert(&r, None).expect("insert");
            }
        }
        ing.commit().expect("commit");
        (dir, store)
    }

    #[test]
    fn the_sessions_first_walk_finds_what_a_scan_of_every_record_finds() {
        let (_dir, store) = store();
        let conn = store.conn();
        let filters = [
            Filter::default(),
            Filter {
                agent: Some("codex".into()),
                ..Filter::default()
            },
            Filter {
                project: Some("p1".into()),
                ..Filter::default()
            },
            Filter {
                session: Some("sess-1".into()),
                ..Filter::default()
            },
            Filter {
                machine: Some("peer".into()),
                ..Filter::default()
            },
            Filter {
                roles: vec![Role::User],
                since_ms: Some(10 * HOUR),
                ..Filter::default()
            },
            Filter {
                agent: Some("claude-code".into()),
                machine: Some("node".into()),
                roles: vec![Role::Assistant, Role::Note],
                ..Filter::default()
            },
        ];
        let periods = [
            (0, 100 * HOUR),
            (0, HOUR),
            (12 * HOUR, 20 * HOUR),
            (20 * HOUR + 1, 20 * HOUR + 2),
            (200 * HOUR, 300 * HOUR),
            (5 * HOUR, 5 * HOUR),
            (0, 2 * HOUR + 1),
            (5 * HOUR, 7 * HOUR + 1),
        ];
        let mut cut = 0;
        for opts in &filters {
            for &period in &periods {
                for cap in [1, 3, 7, 400] {
                    let want = scanned(conn, period, opts, cap);
                    let got = newest(conn, period, opts, cap).expect("newest");
                    assert_eq!(got, want, "{period:?} cap {cap} {opts:?}");
                    cut += usize::from(want.len() == cap);
                }
            }
        }
        // The cap cut the result often enough to test the early stop.
        assert!(cut >= 20, "{cut}");
    }
}
