//! A search's filters (agent, project, session, machine, role, since),
//! compiled once into the SQL that judges a record by its row, and the
//! allowed-checks built on them (by rows, runs, sessions or the columns
//! file). Only
//! reads; the SQL is written here and nowhere else, and what to try first
//! is the caller's policy.

use rusqlite::types::Value as SqlValue;

use super::columns;
use super::columns_file::{self, ROLE_AT};
use super::ranker::Columns;
use super::{Store, StoreError, codec, runs};
use crate::record::Role;

/// The filters of one search, as given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only this agent.
    pub agent: Option<String>,
    /// Only sessions whose project path contains this.
    pub project: Option<String>,
    /// Only records from the machine with this name (or node id).
    pub machine: Option<String>,
    /// Only records at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only these roles (all when empty).
    pub roles: Vec<Role>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
}

impl Filter {
    /// Only the filters on the session: agent, project, session.
    pub fn on_session(&self) -> Filter {
        Filter {
            agent: self.agent.clone(),
            project: self.project.clone(),
            session: self.session.clone(),
            ..Filter::default()
        }
    }

    /// Only the filters on the record: machine, time, roles.
    pub fn on_record(&self) -> Filter {
        Filter {
            machine: self.machine.clone(),
            since_ms: self.since_ms,
            roles: self.roles.clone(),
            ..Filter::default()
        }
    }

    /// Only the filters that neither the runs, the role bytes nor the
    /// stamps can judge: the machine.
    pub fn beyond_columns(&self) -> Filter {
        Filter {
            machine: self.machine.clone(),
            ..Filter::default()
        }
    }

    /// Whether a filter names something of the session.
    pub fn by_session(&self) -> bool {
        self.agent.is_some() || self.project.is_some() || self.session.is_some()
    }

    /// Whether nothing narrows the search (no join, no clause).
    pub fn unfiltered(&self) -> bool {
        !self.by_session()
            && self.machine.is_none()
            && self.since_ms.is_none()
            && self.roles.is_empty()
    }

    /// The joins the filters need (`se` = sessions, `og` = origins, `n` =
    /// nodes), for a query over `records r`.
    pub(crate) fn push_joins(&self, sql: &mut String) {
        if self.by_session() {
            sql.push_str(" JOIN sessions se ON se.id = r.session");
        }
        self.push_origin_joins(sql);
    }

    /// The joins of [`Filter::push_joins`] for the machine (`og`, `n`).
    pub(crate) fn push_origin_joins(&self, sql: &mut String) {
        if self.machine.is_some() {
            sql.push_str(
                " JOIN origins og ON og.id = r.origin LEFT JOIN nodes n ON n.id = og.node",
            );
        }
    }

    /// Appends the filters as ` AND ...` clauses, numbering their
    /// arguments after those already in `args`.
    pub(crate) fn push_filters(&self, sql: &mut String, args: &mut Vec<SqlValue>) {
        // Each clause names its argument `?X`; it is numbered as it is pushed.
        let mut arg = |sql: &mut String, clause: &str, v: SqlValue| {
            args.push(v);
            sql.push_str(&clause.replace("?X", &format!("?{}", args.len())));
        };
        if let Some(a) = &self.agent {
            arg(sql, " AND se.agent = ?X", SqlValue::Text(a.clone()));
        }
        if let Some(p) = &self.project {
            arg(
                sql,
                " AND instr(se.project, ?X) > 0",
                SqlValue::Text(p.clone()),
            );
        }
        if let Some(m) = &self.machine {
            arg(
                sql,
                " AND (n.name = ?X OR og.node = ?X)",
                SqlValue::Text(m.clone()),
            );
        }
        if let Some(t) = self.since_ms {
            arg(sql, " AND r.ts >= ?X", SqlValue::Integer(t));
        }
        if let Some(s) = &self.session {
            arg(
                sql,
                " AND substr(se.session_id, 1, length(?X)) = ?X",
                SqlValue::Text(s.clone()),
            );
        }
        if !self.roles.is_empty() {
            sql.push_str(&format!(
                " AND r.role IN ({})",
                codec::roles_sql(&self.roles)
            ));
        }
    }

    /// With a filter on the time, adds to a query over sessions `se` the
    /// clause that passes over a session whose newest dated record is
    /// older than it: such a session holds no record the filter allows (an
    /// undated record never passes it). One with no dated record at all
    /// (`last_ms` unset) is kept, for the records' rows to decide
    /// ([`SESSIONS_MAY_HOLD_SINCE`] says the same alone). Returns whether it
    /// added the clause.
    pub(crate) fn push_session_time(&self, sql: &mut String, args: &mut Vec<SqlValue>) -> bool {
        let Some(t) = self.since_ms else {
            return false;
        };
        args.push(SqlValue::Integer(t));
        sql.push_str(&format!(
            " AND (se.last_ms IS NULL OR se.last_ms >= ?{})",
            args.len()
        ));
        true
    }

    /// A query for the ranker's columns of record `?1` (the first
    /// argument, to be set) when the filters allow it, with its arguments.
    pub(crate) fn row_check(&self) -> (String, Vec<SqlValue>) {
        let mut sql = String::from("SELECT r.role, r.ts, r.session, r.flags FROM records r");
        self.push_joins(&mut sql);
        sql.push_str(" WHERE r.id = ?1");
        let mut args: Vec<SqlValue> = vec![SqlValue::Null];
        self.push_filters(&mut sql, &mut args);
        (sql, args)
    }
}

/// The ranker's columns of a record by id when a filter allows it, read
/// from its row (see [`Store::row_check`]).
pub(crate) struct RowCheck<'s> {
    stmt: rusqlite::CachedStatement<'s>,
    args: Vec<SqlValue>,
}

impl RowCheck<'_> {
    /// The ranker's columns of record `id` when it exists and the filter
    /// allows it.
    pub(crate) fn columns(&mut self, id: i64) -> Result<Option<Columns>, StoreError> {
        use rusqlite::OptionalExtension;
        self.args[0] = SqlValue::Integer(id);
        Ok(self
            .stmt
            .query_row(rusqlite::params_from_iter(self.args.iter()), |r| {
                Ok((codec::role_at(r, 0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?)
    }

    /// Whether record `id` exists and the filter allows it.
    pub(crate) fn passes(&mut self, id: i64) -> Result<bool, StoreError> {
        self.args[0] = SqlValue::Integer(id);
        Ok(self
            .stmt
            .exists(rusqlite::params_from_iter(self.args.iter()))?)
    }
}

impl Store {
    /// The row check of `filter` (see [`RowCheck`]).
    pub(crate) fn row_check(&self, filter: &Filter) -> Result<RowCheck<'_>, StoreError> {
        let (sql, args) = filter.row_check();
        Ok(RowCheck {
            stmt: self.conn().prepare_cached(&sql)?,
            args,
        })
    }

    /// For a filter on the session (agent, project, session) or the
    /// time, a judge of whether it allows a session (for the time,
    /// whether the session may hold a record it allows: see
    /// [`Filter::push_session_time`]); `None` without such a filter.
    pub(crate) fn session_verdicts(
        &self,
        filter: &Filter,
    ) -> Result<Option<SessionVerdicts<'_>>, StoreError> {
        if !filter.by_session() && filter.since_ms.is_none() {
            return Ok(None);
        }
        let conn = self.conn();
        let mut clauses = String::new();
        // Numbered after the session row, `?1`.
        let mut args = vec![SqlValue::Null];
        filter.on_session().push_filters(&mut clauses, &mut args);
        filter.push_session_time(&mut clauses, &mut args);
        let one = format!("SELECT 1 FROM sessions se WHERE se.id = ?1{clauses}");
        let every = format!("SELECT se.id FROM sessions se WHERE ?1 IS NULL{clauses}");
        Ok(Some(SessionVerdicts {
            allowed: conn.prepare(&one)?,
            every: conn.prepare(&every)?,
            args,
            sessions: rustc_hash::FxHashMap::default(),
            asked: 0,
            complete: false,
        }))
    }

    /// Every run, each with whether a filter on the session allows its
    /// session (see `runs::RunMap`), and a filter on the time whether the
    /// session may hold a record it allows (see
    /// [`Filter::push_session_time`]): one read of the sessions it allows
    /// and of the runs. `None` without such a filter or without the runs.
    pub(crate) fn allowed_session_runs(
        &self,
        filter: &Filter,
    ) -> Result<Option<runs::RunMap>, StoreError> {
        if !filter.by_session() && filter.since_ms.is_none() {
            return Ok(None);
        }
        let conn = self.conn();
        let mut args: Vec<SqlValue> = Vec::new();
        let sql = match (filter.by_session(), filter.since_ms) {
            // The time alone: the sessions that may hold a record it allows
            // (see `Filter::push_session_time`) from their index, not the
            // rows.
            (false, Some(t)) => {
                args.push(SqlValue::Integer(t));
                SESSIONS_MAY_HOLD_SINCE.to_string()
            }
            // Read in table order (`NOT INDEXED`): through the index on the
            // agent, the rows of its sessions lie one on a page apart,
            // slower than reading every row.
            _ => {
                let mut sql = String::from("SELECT se.id FROM sessions se NOT INDEXED WHERE 1");
                filter.on_session().push_filters(&mut sql, &mut args);
                filter.push_session_time(&mut sql, &mut args);
                sql
            }
        };
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        let mut sessions = rustc_hash::FxHashSet::default();
        while let Some(r) = rows.next()? {
            sessions.insert(r.get::<_, i64>(0)?);
        }
        runs::RunMap::read(conn, |s| sessions.contains(&s))
    }

    /// Of the newest `sessions` sessions, the records of those the filter
    /// on the session allows and the records of all, as `(allowed, all)`.
    pub(crate) fn session_share(
        &self,
        filter: &Filter,
        sessions: i64,
    ) -> Result<(f64, f64), StoreError> {
        let mut sql = String::from("SELECT total(se.records) FILTER (WHERE true");
        let mut args: Vec<SqlValue> = Vec::new();
        filter.on_session().push_filters(&mut sql, &mut args);
        sql.push_str(&format!(
            "), total(se.records) FROM (SELECT * FROM sessions ORDER BY id DESC LIMIT {sessions}) se"
        ));
        Ok(self
            .conn()
            .prepare_cached(&sql)?
            .query_row(rusqlite::params_from_iter(args.iter()), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?)
    }

    /// The sessions that started at or after `since` and all sessions, as
    /// `(after, all)`, counted through `sessions_first_ms` without reading
    /// a session's row.
    pub(crate) fn sessions_started_since(&self, since: i64) -> Result<(f64, f64), StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT (SELECT count(*) FROM sessions WHERE first_ms >= ?1),
                        (SELECT count(*) FROM sessions)",
            )?
            .query_row([since], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    /// Each record id after `covered` up to `upto` that `filter` allows,
    /// read from the rows (with their sessions), handed to `add`.
    pub(crate) fn allowed_ids_after(
        &self,
        (covered, upto): (i64, i64),
        filter: &Filter,
        mut add: impl FnMut(i64),
    ) -> Result<(), StoreError> {
        let mut sql =
            String::from("SELECT r.id FROM records r JOIN sessions se ON se.id = r.session");
        // No join for a search's filter on the session and time, which
        // is what reads this; a filter on the machine needs one.
        filter.push_origin_joins(&mut sql);
        sql.push_str(" WHERE r.id > ?1 AND r.id <= ?2");
        let mut args: Vec<SqlValue> = vec![SqlValue::Integer(covered), SqlValue::Integer(upto)];
        filter.push_filters(&mut sql, &mut args);
        let mut stmt = self.conn().prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        while let Some(r) = rows.next()? {
            add(r.get(0)?);
        }
        Ok(())
    }

    /// Each record id up to `upto` that `filter` allows, read from the
    /// records' rows, handed to `add`.
    pub(crate) fn allowed_ids_by_rows(
        &self,
        upto: i64,
        filter: &Filter,
        mut add: impl FnMut(i64),
    ) -> Result<(), StoreError> {
        // A filter on the session or the time is answered sessions first
        // (`CROSS JOIN` fixes the order), each one's records sought in
        // `records_session (session, ts)`: with a project's `instr` SQLite
        // would otherwise read every entry of that index and look its
        // session up, and a time filter alone read every entry of the
        // index; here a session that ended before the time is passed over
        // and the others' records are sought from the time on.
        let sessions_first = filter.by_session() || filter.since_ms.is_some();
        let mut sql = String::from(match sessions_first {
            true => "SELECT r.id FROM sessions se CROSS JOIN records r ON r.session = se.id",
            false => "SELECT r.id FROM records r",
        });
        filter.push_origin_joins(&mut sql);
        // `+r.id`: the bound on the id must not pick the plan. Used as a
        // range on the table's key, it reads every row up to `upto` (the
        // whole table, text and all); without it, a time filter alone scans
        // the narrow `records_session (session, ts)` index instead, and a
        // session filter still seeks it.
        sql.push_str(" WHERE +r.id <= ?1");
        let mut args: Vec<SqlValue> = vec![SqlValue::Integer(upto)];
        filter.push_filters(&mut sql, &mut args);
        filter.push_session_time(&mut sql, &mut args);
        let mut stmt = self.conn().prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        while let Some(r) = rows.next()? {
            add(r.get(0)?);
        }
        Ok(())
    }

    /// The records within `within` (ascending ranges of ids) dated at or
    /// after `since`, as ranges handed to `add`, judged from the columns
    /// file's stamps and, where it cannot say, from the rows (see
    /// `columns_file::each_within`); `None` without a columns file (the
    /// caller then reads the rows its own way).
    pub(crate) fn ids_dated_since(
        &self,
        within: &[(i64, i64)],
        since: i64,
        add: impl FnMut(i64, i64),
    ) -> Result<Option<()>, StoreError> {
        let Some(mut file) = columns_file::Reader::open(self) else {
            return Ok(None);
        };
        let dated = |ts: Option<i64>| ts.is_some_and(|ts| ts >= since);
        let mut ranges = Ranges::new(add);
        columns_file::each_within(
            self.conn(),
            Some(&mut file),
            within,
            |e| columns_file::Columns::of(e).map(|c| dated(c.stamp.ts)),
            (
                "SELECT id, ts FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
                |r| Ok(dated(r.get(1)?)),
            ),
            |id, wanted| ranges.take(id, wanted),
        )?;
        ranges.close();
        Ok(Some(()))
    }

    /// The records within `within` (ascending ranges of ids) whose role is
    /// one of `roles`, as ranges handed to `add`, judged from the columns
    /// file's role bytes and, where it cannot say, from the rows; `None`
    /// without a columns file.
    pub(crate) fn ids_with_roles(
        &self,
        within: &[(i64, i64)],
        roles: &[Role],
        add: impl FnMut(i64, i64),
    ) -> Result<Option<()>, StoreError> {
        let Some(mut file) = columns_file::Reader::open(self) else {
            return Ok(None);
        };
        let mut wants = [false; 256];
        for r in roles {
            wants[usize::from(codec::role_code(*r))] = true;
        }
        let mut ranges = Ranges::new(add);
        columns_file::each_within(
            self.conn(),
            Some(&mut file),
            within,
            |e| (e[ROLE_AT] != 0).then(|| wants[usize::from(e[ROLE_AT])]),
            (
                "SELECT id, role FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
                |r| Ok(wants[usize::from(columns::role_byte(r.get_ref(1)?))]),
            ),
            |id, wanted| ranges.take(id, wanted),
        )?;
        ranges.close();
        Ok(Some(()))
    }

    /// Each vector stored in the `vectors` table after record id `after`
    /// (those not yet in the vector file) whose record `filter` allows,
    /// handed to `add` with its bytes.
    pub(crate) fn vectors_after(
        &self,
        after: i64,
        filter: &Filter,
        mut add: impl FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        let mut sql = String::from("SELECT v.id, v.v FROM vectors v");
        if !filter.unfiltered() {
            sql.push_str(" JOIN records r ON r.id = v.id");
            filter.push_joins(&mut sql);
        }
        sql.push_str(" WHERE v.v IS NOT NULL AND v.id > ?1");
        let mut args: Vec<SqlValue> = vec![SqlValue::Integer(after)];
        filter.push_filters(&mut sql, &mut args);
        let mut stmt = self.conn().prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        while let Some(r) = rows.next()? {
            let v = r.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            add(r.get(0)?, v);
        }
        Ok(())
    }
}

/// The sessions a filter on the time alone (`?1`) may find a record in:
/// [`Filter::push_session_time`]'s clause as two ranges of
/// `sessions_last_ms` (one scan of the index each, no set of row ids to
/// merge as the clause's `OR` would need).
const SESSIONS_MAY_HOLD_SINCE: &str = "SELECT id FROM sessions WHERE last_ms >= ?1
     UNION ALL SELECT id FROM sessions WHERE last_ms IS NULL";

/// Sessions a [`SessionVerdicts`] judges one by one before it reads
/// every allowed session at once.
const ASK_LIMIT: usize = 64;

/// Whether a search's filters allow a session, judged as its candidates
/// meet their sessions: each session looked up once, or, past
/// [`ASK_LIMIT`] of them, every allowed session read at once (a search
/// reaching back through a common word's matches meets thousands, which
/// are read faster all at once; one that meets few never reads them all).
pub(crate) struct SessionVerdicts<'c> {
    /// Whether session row `?1` is allowed (a row when it is).
    allowed: rusqlite::Statement<'c>,
    /// The row ids of every allowed session (`?1` NULL).
    every: rusqlite::Statement<'c>,
    /// The statements' arguments, the session row first.
    args: Vec<SqlValue>,
    /// Sessions judged so far.
    sessions: rustc_hash::FxHashMap<i64, bool>,
    /// Sessions `allowed` was asked about.
    asked: usize,
    /// True once `every` was read into `sessions`: a session not there
    /// is not allowed.
    complete: bool,
}

impl SessionVerdicts<'_> {
    /// Whether the filters allow session row `session`.
    pub(crate) fn allows(&mut self, session: i64) -> Result<bool, StoreError> {
        if let Some(&yes) = self.sessions.get(&session) {
            return Ok(yes);
        }
        if self.complete {
            return Ok(false);
        }
        self.asked += 1;
        if self.asked > ASK_LIMIT {
            self.args[0] = SqlValue::Null;
            let mut rows = self
                .every
                .query(rusqlite::params_from_iter(self.args.iter()))?;
            // Those judged already keep their verdicts, which are the same.
            while let Some(r) = rows.next()? {
                self.sessions.insert(r.get(0)?, true);
            }
            self.complete = true;
            return Ok(*self.sessions.entry(session).or_insert(false));
        }
        self.args[0] = SqlValue::Integer(session);
        let yes = self
            .allowed
            .exists(rusqlite::params_from_iter(self.args.iter()))?;
        self.sessions.insert(session, yes);
        Ok(yes)
    }
}

/// Ids handed on as ranges: consecutive wanted ids joined, ascending.
struct Ranges<A: FnMut(i64, i64)> {
    add: A,
    run: Option<(i64, i64)>,
}

impl<A: FnMut(i64, i64)> Ranges<A> {
    fn new(add: A) -> Self {
        Ranges { add, run: None }
    }

    /// Takes record `id` (ascending), wanted or not.
    fn take(&mut self, id: i64, wanted: bool) {
        match self.run {
            Some((a, b)) if wanted && b + 1 == id => self.run = Some((a, id)),
            _ => {
                self.close();
                if wanted {
                    self.run = Some((id, id));
                }
            }
        }
    }

    /// Hands on the range being joined.
    fn close(&mut self) {
        if let Some((a, b)) = self.run.take() {
            (self.add)(a, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use rusqlite::OptionalExtension;

    #[test]
    fn past_its_limit_a_judge_reads_every_allowed_session_at_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        // Sessions of two records each, their newest an hour apart, in
        // turn of both agents; every seventh undated.
        let sessions = ASK_LIMIT as i64 * 3;
        let mut ing = store.ingest("node").expect("ingest");
        for s in 0..sessions {
            let agent = if s % 2 == 0 { "codex" } else { "claude-code" };
            for k in 0..2 {
                let mut r = Record::new(agent, &format!("s{s}"), Role::User, format!("t{k}"));
                r.time_ms = (s % 7 != 0).then_some(s * 3_600_000 + k);
                ing.insert(&r, None).expect("insert");
            }
        }
        ing.commit().expect("commit");
        let conn = store.conn();
        let rows: Vec<i64> = conn
            .prepare("SELECT id FROM sessions ORDER BY id")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let allowed = |session: i64, since: i64| -> bool {
            conn.query_row(
                "SELECT 1 FROM sessions WHERE id = ?1
                 AND (last_ms IS NULL OR last_ms >= ?2) AND agent = 'codex'",
                rusqlite::params![session, since],
                |_| Ok(()),
            )
            .optional()
            .expect("row")
            .is_some()
        };
        for since in [0, 100 * 3_600_000, 1_000 * 3_600_000, i64::MAX] {
            let filter = Filter {
                agent: Some("codex".into()),
                since_ms: Some(since),
                ..Filter::default()
            };
            let mut judge = store
                .session_verdicts(&filter)
                .expect("judge")
                .expect("a filter on the session");
            // Each session asked about in turn, then all again in the
            // other order, past the limit and after.
            for &session in rows.iter().chain(rows.iter().rev()) {
                assert_eq!(
                    judge.allows(session).expect("allows"),
                    allowed(session, since),
                    "since {since}: session {session}"
                );
            }
            assert!(judge.complete, "since {since}");
            assert_eq!(judge.asked, ASK_LIMIT + 1, "since {since}");
        }
        // Without a filter on the session or the time, nothing to judge.
        let roles = Filter {
            roles: vec![Role::User],
            ..Filter::default()
        };
        assert!(store.session_verdicts(&roles).expect("judge").is_none());
    }
}
