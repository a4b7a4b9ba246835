//! Search over the store: query parsing, FTS5 candidates, ranking and snippets.
//!
//! FTS5 `MATCH` finds each concept's newest matching records, on exact
//! words and (for plain English words) on their stems; a date or period
//! named in the question adds the records of that time. The matches are
//! scored here, not by FTS5's `bm25()`: BM25's idf from the planner's count
//! and its length factor at a term frequency of one. [`rank`] then weighs
//! them by role, decision language, the period and (only as a tie-breaker)
//! recency, and adds up each session's evidence so one chatty session
//! cannot fill the page; [`semantic`] fuses in the meaning tier. This
//! module only reads, but it reads with SQL of its own (`Store::conn`).

mod df;
mod id_set;
mod period;
pub mod query;
pub mod rank;
mod screen;
pub mod semantic;
pub mod snippet;
mod spans;
pub mod when;

use rusqlite::OptionalExtension;
use rusqlite::types::Value as SqlValue;
use serde::{Deserialize, Serialize};

use crate::record::Role;
use crate::store::{Store, StoreError, codec, columns_file, record_bytes, runs};
use crate::text;
pub use query::Query;
use query::Term;
use screen::Screen;

/// Filters and options for one search.
#[derive(Debug, Clone, Default)]
pub struct SearchOptions {
    /// Sessions to return at most.
    pub limit: usize,
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
    /// "Now" for age decay, Unix ms (passed in; this module reads no clock).
    pub now_ms: i64,
    /// The meaning tier's embedder (see [`semantic`]); lexical only when
    /// `None`. `Node::search` fills it in when the tier is on.
    pub semantic: Option<&'static crate::embed::Embedder<'static>>,
    /// Lexical tier only for this query, even when the meaning tier is on.
    pub lexical_only: bool,
}

impl SearchOptions {
    /// Only the filters on the session: agent, project, session.
    pub(crate) fn on_session(&self) -> SearchOptions {
        SearchOptions {
            agent: self.agent.clone(),
            project: self.project.clone(),
            session: self.session.clone(),
            ..SearchOptions::default()
        }
    }

    /// Only the filters on the record: machine, time, roles.
    pub(crate) fn on_record(&self) -> SearchOptions {
        SearchOptions {
            machine: self.machine.clone(),
            since_ms: self.since_ms,
            roles: self.roles.clone(),
            ..SearchOptions::default()
        }
    }
}

/// One search result: the best-matching record of one session.
///
/// Serialized as part of the `--json` public contract: fields may be added,
/// never renamed or removed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hit {
    /// The agent's own session id.
    pub session_id: String,
    /// Agent id.
    pub agent: String,
    /// Working directory of the session.
    pub project: Option<String>,
    /// Name of the machine the record was first indexed on.
    pub machine: String,
    /// Role of the matching record.
    pub role: String,
    /// Time of the matching record, RFC 3339 UTC.
    pub time: Option<String>,
    /// Relevance (higher is better; comparable within one result list only).
    pub score: f64,
    /// A short excerpt around the match, on one line.
    pub snippet: String,
    /// Source file of the record, where it was read on this machine.
    pub source: Option<String>,
    /// Byte offset (or row id) in the source.
    pub offset: Option<i64>,
    /// Records of this session that matched.
    pub matches: usize,
    /// Session title (first prompt line).
    pub title: Option<String>,
    /// Stable record id in this database, for fetching the record.
    pub record_id: i64,
    /// When the best record is the user's own words (often the question),
    /// an excerpt of the reply in the same session that best matches, or
    /// else the reply right after it: the answer people look for.
    pub answer_snippet: Option<String>,
    /// Role of the answer record.
    pub answer_role: Option<String>,
    /// Record id of the answer record.
    pub answer_record_id: Option<i64>,
    /// Time of the answer record, RFC 3339 UTC.
    pub answer_time: Option<String>,
}

/// One page of results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page {
    /// The hits of this page, best first.
    pub hits: Vec<Hit>,
    /// Sessions that matched in all (this page and the others).
    pub total: usize,
    /// Sessions skipped before this page.
    pub offset: usize,
}

/// Errors of a search.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How many of a concept's best-scored matches go to the ranker.
const CANDIDATES: usize = 600;
/// When a query could match more records than this, only the newest this
/// many matches are scored: search cost stays bounded however large the
/// memory grows, and very common words cannot stall it. (Each one costs a
/// length look-up that its neighbours mostly share: see `store::record_bytes`.)
const SCAN_LIMIT: i64 = 8_000;
/// How many of a concept's newest matches a filtered search reaches back
/// through for those its filters allow (when the newest [`SCAN_LIMIT`]
/// gave too few): the reach-back stops there however few it found. A
/// rare filter (`--role user`, a small project) over a word matching
/// 136,000 records at 10 GB read every match, 139,000 of them for 1,800
/// allowed (22 ms of a question), where the same word at 1 GB has 13,600.
/// Below the share at which a word counts as common ([`COMMON_SHARE`]) of
/// 1 GB's 530,000 records, so a question at 1 GB reaches back as far as it
/// did. Not for a filter on the time (see [`reach_of`]).
const REACH_LIMIT: usize = 32_000;

/// How far a search with `opts` reaches back through a concept's matches
/// ([`REACH_LIMIT`]). A filter on the time reaches back through all of
/// them: record ids follow the order in which histories were read, which
/// for a history read whole at once (a first index, a peer's first sync)
/// need not be the order of the records' times, so the newest matches by
/// id can all be older than the filter's time while older ids hold the
/// answer. Its screen rules out the sessions that ended before the time
/// without their rows (at 10 GB, `--since` over the last four months with
/// a word matching 136,000 records: 117 ms before it did, 30 ms after).
fn reach_of(opts: &SearchOptions) -> usize {
    match opts.since_ms {
        Some(_) => usize::MAX,
        None => REACH_LIMIT,
    }
}

/// A word in more than this share of all records is a stop word for this
/// corpus: dropped when the query has rarer words.
const COMMON_SHARE: f64 = 0.05;

impl From<rusqlite::Error> for SearchError {
    fn from(e: rusqlite::Error) -> Self {
        SearchError::Store(StoreError::Sqlite(e))
    }
}

/// Drops terms that are too common to tell records apart when rarer terms
/// exist, and terms found nowhere; returns the rest with how many records
/// each matches (an upper bound).
fn plan_terms(df: &mut df::Frequencies, q: &Query) -> rusqlite::Result<(Query, Vec<i64>)> {
    let mut with_df = Vec::new();
    for t in &q.terms {
        with_df.push((t.clone(), df.term(t)?));
    }
    let (terms, dfs) = telling(with_df, df.docs()).into_iter().unzip();
    Ok((
        Query {
            terms,
            stems: q.stems.clone(),
            text: q.text.clone(),
        },
        dfs,
    ))
}

/// The items (terms or stems, each with how many of `docs` records it
/// matches) that tell records apart: those found somewhere, and, when some
/// are rarer than the stop-word share, only those.
fn telling<T>(with_df: Vec<(T, i64)>, docs: i64) -> Vec<(T, i64)> {
    let common = ((docs as f64 * COMMON_SHARE) as i64).max(2_000);
    let has_rare = with_df.iter().any(|(_, df)| *df > 0 && *df <= common);
    with_df
        .into_iter()
        .filter(|(_, df)| *df > 0 && (!has_rare || *df <= common))
        .collect()
}

/// How many records a named period adds to the candidates at most.
const PERIOD_CANDIDATES: usize = 400;

/// Runs a search. An empty query returns no hits.
pub fn search(store: &Store, q: &Query, opts: &SearchOptions) -> Result<Vec<Hit>, SearchError> {
    Ok(search_page(store, q, opts, 0)?.hits)
}

/// The joins the options' filters need (`se` = sessions, `og` = origins,
/// `n` = nodes), for a
/// query over `records r`.
pub(crate) fn push_joins(sql: &mut String, opts: &SearchOptions) {
    if by_session(opts) {
        sql.push_str(" JOIN sessions se ON se.id = r.session");
    }
    push_origin_joins(sql, opts);
}

/// Whether a filter names something of the session (`se`).
pub(crate) fn by_session(opts: &SearchOptions) -> bool {
    opts.agent.is_some() || opts.project.is_some() || opts.session.is_some()
}

/// The joins of [`push_joins`] for the machine filter (`og`, `n`).
pub(crate) fn push_origin_joins(sql: &mut String, opts: &SearchOptions) {
    if opts.machine.is_some() {
        sql.push_str(" JOIN origins og ON og.id = r.origin LEFT JOIN nodes n ON n.id = og.node");
    }
}

/// Appends the options' filters as ` AND ...` clauses, numbering their
/// arguments after those already in `args`. Used by the lexical and the
/// meaning tier, so both honour the same filters.
pub(crate) fn push_filters(sql: &mut String, args: &mut Vec<SqlValue>, opts: &SearchOptions) {
    // Each clause names its argument `?X`; it is numbered as it is pushed.
    let mut arg = |sql: &mut String, clause: &str, v: SqlValue| {
        args.push(v);
        sql.push_str(&clause.replace("?X", &format!("?{}", args.len())));
    };
    if let Some(a) = &opts.agent {
        arg(sql, " AND se.agent = ?X", SqlValue::Text(a.clone()));
    }
    if let Some(p) = &opts.project {
        arg(
            sql,
            " AND instr(se.project, ?X) > 0",
            SqlValue::Text(p.clone()),
        );
    }
    if let Some(m) = &opts.machine {
        arg(
            sql,
            " AND (n.name = ?X OR og.node = ?X)",
            SqlValue::Text(m.clone()),
        );
    }
    if let Some(t) = opts.since_ms {
        arg(sql, " AND r.ts >= ?X", SqlValue::Integer(t));
    }
    if let Some(s) = &opts.session {
        arg(
            sql,
            " AND substr(se.session_id, 1, length(?X)) = ?X",
            SqlValue::Text(s.clone()),
        );
    }
    if !opts.roles.is_empty() {
        sql.push_str(&format!(
            " AND r.role IN ({})",
            codec::roles_sql(&opts.roles)
        ));
    }
}

/// With a filter on the time, adds to a query over sessions `se` the
/// clause that passes over a session whose newest dated record is older
/// than it: such a session holds no record the filter allows (an undated
/// record never passes it). One with no dated record at all (`last_ms`
/// unset) is kept, for the records' rows to decide. Returns whether it
/// added the clause.
pub(crate) fn push_session_time(
    sql: &mut String,
    args: &mut Vec<SqlValue>,
    opts: &SearchOptions,
) -> bool {
    let Some(t) = opts.since_ms else {
        return false;
    };
    args.push(SqlValue::Integer(t));
    sql.push_str(&format!(
        " AND (se.last_ms IS NULL OR se.last_ms >= ?{})",
        args.len()
    ));
    true
}

/// For a search filtered on the session (agent, project, session) or the
/// time, a reader of whether it allows the session of a record (for the
/// time, whether the session may hold a record it allows: see
/// [`push_session_time`]), by the record's run of ids (see `store::runs`);
/// `None` without such a filter, or without the table (a database opened
/// read-only before its upgrade).
pub(crate) fn session_runs<'c>(
    conn: &'c rusqlite::Connection,
    opts: &SearchOptions,
) -> Result<Option<runs::Runs<'c>>, SearchError> {
    if !by_session(opts) && opts.since_ms.is_none() {
        return Ok(None);
    }
    let mut clauses = String::new();
    // Numbered after the session row, `?1`.
    let mut args = vec![SqlValue::Null];
    push_filters(&mut clauses, &mut args, &opts.on_session());
    let mut agent = agent_filter(opts);
    if push_session_time(&mut clauses, &mut args, opts)
        && let Some(f) = agent.as_mut()
    {
        // The run's agent alone no longer judges the session.
        f.alone = false;
    }
    args.remove(0);
    let one = format!("SELECT 1 FROM sessions se WHERE se.id = ?1{clauses}");
    let every = format!("SELECT se.id FROM sessions se WHERE ?1 IS NULL{clauses}");
    Ok(match runs::Runs::new(conn, &one, args, agent)? {
        Some(r) => Some(r.with_every(conn, &every)?),
        None => None,
    })
}

/// The agent the options' filters name, and whether they name nothing
/// else of the session (see `runs::AgentFilter`).
pub(crate) fn agent_filter(opts: &SearchOptions) -> Option<runs::AgentFilter> {
    opts.agent.as_ref().map(|a| runs::AgentFilter {
        agent: a.clone(),
        alone: opts.project.is_none() && opts.session.is_none(),
    })
}

/// Whether no option narrows the search (no join, no clause).
pub(crate) fn unfiltered(opts: &SearchOptions) -> bool {
    let mut probe = String::new();
    push_joins(&mut probe, opts);
    push_filters(&mut probe, &mut Vec::new(), opts);
    probe.is_empty()
}

/// A filtered candidate query: `from` and `first` (the first WHERE clause,
/// with its arguments) plus the options' filters, then `tail` (order, limit).
#[allow(clippy::too_many_arguments)]
fn candidates(
    conn: &rusqlite::Connection,
    score: &str,
    from: &str,
    first: &str,
    first_args: Vec<SqlValue>,
    tail: &str,
    opts: &SearchOptions,
    mut push: impl FnMut(i64, f64, String, Option<i64>, i64, i64),
) -> Result<(), SearchError> {
    let mut sql = format!("SELECT r.id, {score}, r.role, r.ts, r.session, r.flags FROM {from}");
    push_joins(&mut sql, opts);
    sql.push_str(" WHERE ");
    sql.push_str(first);
    let mut args = first_args;
    push_filters(&mut sql, &mut args, opts);
    sql.push(' ');
    sql.push_str(tail);
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
    while let Some(r) = rows.next()? {
        push(
            r.get(0)?,
            r.get(1)?,
            codec::role_at(r, 2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        );
    }
    Ok(())
}

/// The candidates of one concept (`expr` on `index`, matching about `df`
/// of `docs` records), each with its score (higher is better).
///
/// Its newest [`SCAN_LIMIT`] matches are taken (all of them, for most
/// concepts): the cost stays bounded however large the memory grows.
/// Each is scored by BM25 with a term frequency of one: the weight from
/// the planner's `df`, the length from `store::record_bytes` against the newest
/// records' average length. The best [`CANDIDATES`] are returned, best
/// first, for the ranker; only they are looked up in `records` (by the
/// caller, and only those no concept found before).
///
/// A filtered search takes the same matches and looks them up best first,
/// filters and all, until [`CANDIDATES`] pass ([`allowed_best`]): a common
/// word's thousands of matches are not all read from `records` (at 1 GB,
/// an agent filter made a question three times slower when they were).
/// Only when fewer pass and the concept has older matches than those does
/// it reach back: then its candidates are the best of the newest
/// [`SCAN_LIMIT`] matches the filters allow among its newest `reach`
/// ([`REACH_LIMIT`] in a search), found through the search's [`Screen`]
/// where it can rule records out by their session, time or role
/// ([`newest_allowed`]), else each read through a join.
///
/// FTS5's own `bm25()` read each match's row of `fts_docsize`: one page
/// read per match, which for a word matching thousands of records spread
/// over 10 GB of history was most of a question's time (4 µs a match in
/// a fresh process). Counting a word once per record, against the
/// newest records' average length, also ranked better on the recall set,
/// at 1 GB and at 10 GB of history.
fn concept_candidates(
    conn: &rusqlite::Connection,
    lengths: &mut record_bytes::Reader<'_>,
    concept: Concept<'_>,
    (df, docs): (i64, i64),
    opts: &SearchOptions,
    (known, screen): (&dyn Fn(i64) -> bool, &mut Screen<'_>),
    reach: usize,
) -> Result<Vec<Scored>, SearchError> {
    let Concept {
        index,
        expr,
        counted,
    } = concept;
    let table = index.table();
    // The newest SCAN_LIMIT matches: all of them when the planner's count
    // says so, and a bound all the same where it is only an estimate (a
    // stem is planned with its word's count).
    let newest = format!("ORDER BY {table}.rowid DESC LIMIT {SCAN_LIMIT}");
    let mut found: Vec<(i64, Option<Columns>)> = Vec::new();
    match counted {
        // Read already, when the word's frequency was counted.
        Some(ids) => found.extend(ids.iter().map(|&id| (id, None))),
        None => {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT rowid FROM {table} WHERE {table} MATCH ?1 {newest}"
            ))?;
            let mut rows = stmt.query([&expr])?;
            while let Some(r) = rows.next()? {
                found.push((r.get(0)?, None));
            }
        }
    }
    let weight = rank::bm25_idf(docs, df);
    if unfiltered(opts) {
        return Ok(best_of(scored(lengths, found, weight)?, CANDIDATES));
    }
    let older = found.len() as i64 >= SCAN_LIMIT;
    let mut all = scored(lengths, found, weight)?;
    all.sort_unstable_by(best_first);
    let kept = allowed_best(conn, all, opts, known, (screen, lengths))?;
    if kept.len() >= CANDIDATES || !older {
        return Ok(kept);
    }
    // Reaching back: the newest matches the filters allow, among the
    // newest `reach`. Where the screen can rule records out (by session,
    // time or role), it tells which without their rows (see
    // `newest_allowed`).
    if screen.prunes() {
        let found = newest_allowed(conn, table, &expr, (screen, lengths), opts, reach)?;
        return Ok(best_of(scored(lengths, found, weight)?, CANDIDATES));
    }
    // Else with the records' columns the join reads.
    let mut found = Vec::new();
    candidates(
        conn,
        "0",
        &format!(
            "(SELECT rowid AS id FROM {table} WHERE {table} MATCH ?1 \
             ORDER BY rowid DESC LIMIT {}) m JOIN records r ON r.id = m.id",
            i64::try_from(reach).unwrap_or(i64::MAX)
        ),
        "1",
        vec![SqlValue::Text(expr)],
        &format!("ORDER BY r.id DESC LIMIT {SCAN_LIMIT}"),
        opts,
        |id, _, role, ts, se, fl| found.push((id, Some((role, ts, se, fl)))),
    )?;
    Ok(best_of(scored(lengths, found, weight)?, CANDIDATES))
}

/// The newest [`SCAN_LIMIT`] matches of `expr` on `table` that the
/// filters allow, among its newest `reach` matches, newest first: those
/// the `screen` finds allowed, and those it neither allows nor rules out
/// whose rows pass. The same records as the join of those matches with
/// `records` (which at 10 GB took 150 ms of a question for a project
/// holding 4% of the records, reading a row per match until 8,000 passed),
/// without reading a row for most. Only records whose rows were read come
/// with their columns.
fn newest_allowed(
    conn: &rusqlite::Connection,
    table: &str,
    expr: &str,
    (screen, bytes): (&mut Screen<'_>, &mut record_bytes::Reader<'_>),
    opts: &SearchOptions,
    reach: usize,
) -> Result<Vec<(i64, Option<Columns>)>, SearchError> {
    let (sql, mut args) = row_check(opts);
    let mut check = conn.prepare_cached(&sql)?;
    // Reaching back through every match, only the stretches of ids that
    // may hold an allowed record are read, newest first: the same matches
    // in the same order, less those the screen would rule out by their
    // session. With a bounded reach every match counts toward it, so all
    // are read.
    let stretches = match reach {
        usize::MAX => screen.stretches(),
        _ => None,
    };
    let bounded = stretches.is_some();
    let mut stmt = conn.prepare_cached(&match bounded {
        true => format!(
            "SELECT rowid FROM {table} WHERE {table} MATCH ?1 \
             AND rowid >= ?2 AND rowid <= ?3 ORDER BY rowid DESC"
        ),
        false => format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid DESC"),
    })?;
    let stretches = stretches.unwrap_or_else(|| vec![(i64::MIN, i64::MAX)]);
    let mut found = Vec::new();
    let mut seen = 0;
    // The matches a batch at a time, so the screen reads their role bytes
    // at once (`Screen::roles_ahead`).
    let mut batch: Vec<i64> = Vec::with_capacity(SCREEN_BATCH);
    'stretches: for &(first, last) in stretches.iter().rev() {
        let mut rows = match bounded {
            true => stmt.query(rusqlite::params![expr, first, last])?,
            false => stmt.query([expr])?,
        };
        let mut more = true;
        while more {
            batch.clear();
            while batch.len() < SCREEN_BATCH.min(reach - seen) {
                match rows.next()? {
                    Some(r) => batch.push(r.get(0)?),
                    None => {
                        more = false;
                        break;
                    }
                }
            }
            let roles = screen.roles_ahead(&batch);
            for (&id, role) in batch.iter().zip(roles) {
                if found.len() >= SCAN_LIMIT as usize || seen >= reach {
                    break 'stretches;
                }
                seen += 1;
                match screen.verdict(bytes, id, role)? {
                    Some(true) => found.push((id, None)),
                    Some(false) => {}
                    None => {
                        args[0] = SqlValue::Integer(id);
                        if let Some(cols) = check
                            .query_row(rusqlite::params_from_iter(args.iter()), columns_of)
                            .optional()?
                        {
                            found.push((id, Some(cols)));
                        }
                    }
                }
            }
            if found.len() >= SCAN_LIMIT as usize || seen >= reach {
                break 'stretches;
            }
        }
    }
    Ok(found)
}

/// Matches a reach back reads before the screen judges them, their role
/// bytes read at once from the roles file.
const SCREEN_BATCH: usize = 1_024;

/// A query for the ranker's columns of record `?1` (the first argument,
/// to be set) when the options' filters allow it, with its arguments.
pub(crate) fn row_check(opts: &SearchOptions) -> (String, Vec<SqlValue>) {
    let mut sql = String::from("SELECT r.role, r.ts, r.session, r.flags FROM records r");
    push_joins(&mut sql, opts);
    sql.push_str(" WHERE r.id = ?1");
    let mut args: Vec<SqlValue> = vec![SqlValue::Null];
    push_filters(&mut sql, &mut args, opts);
    (sql, args)
}

/// The ranker's columns from a row of [`row_check`].
fn columns_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Columns> {
    Ok((codec::role_at(r, 0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

/// Best first; of equal scores, the newer (ids are unique, so the order
/// is total).
fn best_first(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(b.1.cmp(&a.1))
}

/// The best `n` of `scored`, best first (only they are put in order).
fn best_of(mut scored: Vec<Scored>, n: usize) -> Vec<Scored> {
    if scored.len() > n {
        scored.select_nth_unstable_by(n, best_first);
        scored.truncate(n);
    }
    scored.sort_unstable_by(best_first);
    scored
}

/// Each match scored by BM25 with a term frequency of one, `weight` being
/// the concept's idf: its length from `store::record_bytes` against the newest
/// records' average length.
fn scored(
    lengths: &mut record_bytes::Reader<'_>,
    found: Vec<(i64, Option<Columns>)>,
    weight: f64,
) -> Result<Vec<Scored>, SearchError> {
    let ids: Vec<i64> = found.iter().map(|f| f.0).collect();
    let lens = lengths.lengths(&ids)?;
    let mean = match lengths.typical()? {
        Some(t) => t,
        // No length is known (a database too old to hold them): the
        // matches' own average.
        None => {
            let known: Vec<f64> = lens.iter().flatten().copied().collect();
            known.iter().sum::<f64>() / known.len().max(1) as f64
        }
    };
    Ok(found
        .into_iter()
        .zip(lens)
        .map(|((id, cols), len)| {
            let score = weight * rank::bm25_tf_one(len.unwrap_or(mean), mean);
            (score, id, cols)
        })
        .collect())
}

/// The best [`CANDIDATES`] of `scored` (best first already) that the
/// search's filters allow, with their records' columns, best first: each
/// is looked up with the filters, the best first, until that many pass or
/// none is left. A record `known` to have passed (an earlier concept's
/// candidate) is not looked up again, and comes without its columns; nor
/// is one the search's [`Screen`] rules out (its session, and its role
/// through `bytes` when a filter names roles); and when the ranker's
/// columns come from the columns file, one the screen allows is kept
/// without its row too ([`Screen::judge`]), its columns read with the
/// others' (`offer`: 10 GB, `--agent codex` and `--role user`, a question
/// went from 27.5–32.8 to 22.3–23.7 ms). The look-ups go a
/// batch at a time in id order, so that a page read for one is still
/// cached for its neighbours; a batch is no larger than the records still
/// needed (at least 64), so few more are read than pass.
fn allowed_best(
    conn: &rusqlite::Connection,
    scored: Vec<Scored>,
    opts: &SearchOptions,
    known: &dyn Fn(i64) -> bool,
    (screen, bytes): (&mut Screen<'_>, &mut record_bytes::Reader<'_>),
) -> Result<Vec<Scored>, SearchError> {
    let (sql, mut args) = row_check(opts);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut kept: Vec<Scored> = Vec::new();
    let mut rest = scored.into_iter().peekable();
    while kept.len() < CANDIDATES && rest.peek().is_some() {
        let mut batch: Vec<Scored> = rest
            .by_ref()
            .take((CANDIDATES - kept.len()).max(64))
            .collect();
        batch.sort_unstable_by_key(|s| s.1);
        let ids: Vec<i64> = batch.iter().map(|s| s.1).collect();
        let roles = screen.roles_ahead(&ids);
        for ((score, id, _), role) in batch.into_iter().zip(roles) {
            if known(id) {
                kept.push((score, id, None));
                continue;
            }
            match screen.judge(bytes, id, role)? {
                Some(false) => continue,
                // Its columns come with the other candidates' (`offer`).
                Some(true) => {
                    kept.push((score, id, None));
                    continue;
                }
                None => {}
            }
            args[0] = SqlValue::Integer(id);
            let cols = stmt
                .query_row(rusqlite::params_from_iter(args.iter()), columns_of)
                .optional()?;
            if let Some(cols) = cols {
                kept.push((score, id, Some(cols)));
            }
        }
    }
    Ok(best_of(kept, CANDIDATES))
}

/// A concept's candidate: its score, its record id, and the record's
/// columns when a filter made the query read them.
type Scored = (f64, i64, Option<Columns>);

/// The ranker's candidates by record id.
type ById = rustc_hash::FxHashMap<i64, rank::Candidate>;

/// Adds record `id` to the candidates, with `concept`'s part (its index
/// and score) when given. Only a record not among them yet needs its
/// columns (`cols`); `None` from it (a record deleted since) leaves it out.
fn offer(
    by_id: &mut ById,
    id: i64,
    concept: Option<(usize, f64)>,
    cols: impl FnOnce() -> Result<Option<Columns>, SearchError>,
) -> Result<(), SearchError> {
    let c = match by_id.entry(id) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
            let Some((role, ts, session_row, flags)) = cols()? else {
                return Ok(());
            };
            v.insert(rank::Candidate {
                record_id: id,
                parts: Vec::new(),
                role,
                ts,
                session_row,
                flags,
            })
        }
    };
    if let Some((k, score)) = concept {
        match c.parts.iter_mut().find(|p| p.0 == k) {
            Some(p) => p.1 = p.1.max(score),
            None => c.parts.push((k, score)),
        }
    }
    Ok(())
}

/// One concept to look up: its FTS5 expression on `index`, and its newest
/// matches when the planner read them already (a single word or stem).
struct Concept<'a> {
    index: df::Index,
    expr: String,
    counted: Option<&'a [i64]>,
}

/// The ranker's columns of a record from the columns file (the flags
/// hold only the decision mark, the one flag the ranker reads).
fn ranker_columns(c: columns_file::Columns) -> Columns {
    let flags = match c.stamp.decision {
        true => codec::DECISION,
        false => 0,
    };
    (c.role.as_str().to_owned(), c.stamp.ts, c.session, flags)
}

/// What the ranker needs of a record: role, time, session row, flags.
type Columns = (String, Option<i64>, i64, i64);

/// True when the stemmed index exists (a database opened read-only may
/// predate it).
fn has_stem_index(conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT count(*) FROM sqlite_master WHERE name = 'fts_stem'")?
        .query_row([], |r| r.get::<_, i64>(0))
        .map(|n| n > 0)
}

/// Keeps the stem words that match something and are not too common (when
/// rarer ones exist); returns them with how many records each matches.
fn plan_stems(
    df: &mut df::Frequencies,
    words: &[String],
) -> rusqlite::Result<(Vec<String>, Vec<i64>)> {
    let mut with_df = Vec::new();
    for w in words {
        with_df.push((w.clone(), df.token(df::Index::Stem, w)?));
    }
    Ok(telling(with_df, df.docs()).into_iter().unzip())
}

/// Runs a search and returns the page of `opts.limit` sessions after the
/// first `offset`, with the number of sessions that matched in all.
pub fn search_page(
    store: &Store,
    q: &Query,
    opts: &SearchOptions,
    offset: usize,
) -> Result<Page, SearchError> {
    // One snapshot for the whole search: a vector pass moves vectors from
    // the table into the vector file and then deletes them from the table,
    // so the file's mark and the table must be read as of one moment.
    // (Dropped at the end, which ends the read.)
    let _snapshot = match store.conn().is_autocommit() {
        true => Some(store.conn().unchecked_transaction()?),
        false => None,
    };
    // The meaning tier's scan of the vector file runs beside the lexical tier.
    let prepared = semantic::prepare(store, q, opts)?;
    // A filter too narrow to check the file's nearest records: the scan
    // after the lexical tier reads every allowed session's runs, so they
    // are read first and serve the lexical tier's screen too (a binary
    // search per candidate instead of a run and a session read each). So
    // does any filter on the time: its reach back through every match of
    // a word reads only the stretches of ids the runs leave open
    // (`Screen::stretches`), and a screen judging sessions one by one
    // reads every allowed session anyway once it has met 64; the meaning
    // tier's check of the file's nearest records then judges them by the
    // same map (10 GB, the last six months, a quarter of the sessions:
    // 19.9-46.3 -> 16.3-31.4 ms a question, non-LTO, same answers). And so
    // does a filter on the agent alone, whose map comes from the packed
    // runs without reading a session: the lexical tier's screen and the
    // meaning tier's check each decoded every packed run otherwise (10 GB,
    // `--agent codex`: 18.1 -> 17.3 ms, `--agent claude-code` 17.0 -> 16.2).
    let agent_alone = agent_filter(opts).is_some_and(|f| f.alone);
    let pre = match prepared.as_ref().is_some_and(|p| p.narrow())
        || opts.since_ms.is_some()
        || agent_alone
    {
        true => semantic::allowed_session_runs(store, opts)?,
        false => None,
    };
    let (lexical, scanned) =
        semantic::alongside(prepared, || lexical(store, q, opts, pre.as_ref()));
    let (lexical, words) = lexical?;
    let ranked = semantic::blend(store, q, opts, lexical, scanned, pre.as_ref())?;
    let total = ranked.len();
    let mut hits = Vec::new();
    for top in ranked.into_iter().skip(offset).take(opts.limit.max(1)) {
        if let Some(hit) = hit_details(store.conn(), &top, &words)? {
            hits.push(hit);
        }
    }
    Ok(Page {
        hits,
        total,
        offset,
    })
}

/// Every session the words match, best first, and the words to highlight.
fn lexical(
    store: &Store,
    q: &Query,
    opts: &SearchOptions,
    pre: Option<&runs::RunMap>,
) -> Result<(Vec<rank::Ranked>, Vec<String>), SearchError> {
    let conn = store.conn();
    let empty = (Vec::new(), Vec::new());
    let period = when::period(&q.text, opts.now_ms);
    // "What happened on June 1 2024?": nothing but the date to go on.
    let dates_only = period.as_ref().is_some_and(|p| {
        q.terms
            .iter()
            .all(|t| matches!(t, Term::Phrase(w) if w.len() == 1 && p.words.contains(&w[0])))
    });
    let q = match &period {
        Some(p) => q.without_words(&p.words),
        None => q.clone(),
    };
    if q.is_empty() {
        return Ok(empty);
    }
    let mut freq = df::Frequencies::new(conn)?;
    let (mut qx, mut dfs) = plan_terms(&mut freq, &q)?;
    // A word that is already very common as written gains nothing from its
    // stem but the cost of a second scan: look up stems of the others only.
    let mut stem_words = Vec::new();
    for w in &q.stems {
        if freq.token(df::Index::Exact, w)? <= SCAN_LIMIT {
            stem_words.push(w.clone());
        }
    }
    let (mut stems, mut stem_dfs) = if !stem_words.is_empty() && has_stem_index(conn)? {
        plan_stems(&mut freq, &stem_words)?
    } else {
        (Vec::new(), Vec::new())
    };
    let words_found = !qx.is_empty() || !stems.is_empty();
    // Words that match nothing find nothing, unless the question names a
    // period: then what was said in that period is the answer.
    if !words_found && period.is_none() {
        return Ok(empty);
    }
    if dates_only || !words_found {
        qx.terms.clear();
        dfs.clear();
        stems.clear();
        stem_dfs.clear();
    }
    // One concept per thing asked for: a term as written and, for a plain
    // word, its stem. Each is looked up on its own, so ranking knows which
    // parts of the question a record (and a session) covers.
    let docs = freq.docs();
    let idf = |df: i64| (1.0 + docs.max(1) as f64 / df.max(1) as f64).ln();
    let mut concepts: Vec<(Option<Term>, Option<String>, i64)> = Vec::new();
    for (t, df) in qx.terms.iter().zip(&dfs) {
        let stem = match t {
            Term::Phrase(p) if p.len() == 1 && stems.contains(&p[0]) => Some(p[0].clone()),
            _ => None,
        };
        concepts.push((Some(t.clone()), stem, *df));
    }
    for (w, df) in stems.iter().zip(&stem_dfs) {
        if !concepts.iter().any(|c| c.1.as_ref() == Some(w)) {
            concepts.push((None, Some(w.clone()), *df));
        }
    }
    // A pasted page of text: the rarest words carry the meaning.
    concepts.sort_by_key(|c| c.2);
    concepts.truncate(rank::MAX_CONCEPTS);
    let weights: Vec<f64> = concepts.iter().map(|c| idf(c.2)).collect();
    let mut lengths = record_bytes::Reader::new(conn)?.with_many(
        columns_file::Bytes::lengths(store).map(|l| Box::new(l) as Box<dyn record_bytes::Classes>),
    );
    let mut screen = Screen::new(conn, opts, pre)?;
    // Only a filtered concept asks the screen (an unfiltered search would
    // open and map the file for nothing).
    if !unfiltered(opts) {
        screen.read_roles(columns_file::Bytes::roles(store));
    }
    // Keyed by record id, never by input: the fast hash is safe here.
    let mut by_id = ById::default();
    // A record a concept found before (its stem's matches hold most of its
    // word's) is not looked up again.
    let mut columns =
        conn.prepare_cached("SELECT role, ts, session, flags FROM records WHERE id = ?1")?;
    // The same columns from the flat file, where it has them: one small
    // read each instead of a look-up in the table.
    let mut flat = columns_file::Reader::open(store);
    screen.columns_elsewhere(flat.is_some());
    let mut add = |by_id: &mut ById, mut scored: Vec<Scored>, k: usize, weight: f64| {
        // In id order, the look-ups walk the records' table from one end
        // to the other, and one whose page an earlier look-up read finds
        // it still cached (0.3–0.4 ms of a fresh word search at 1 and
        // 10 GB). The order offered in changes nothing else.
        scored.sort_unstable_by_key(|s| s.1);
        for (score, id, cols) in scored {
            offer(by_id, id, Some((k, score * weight)), || {
                if cols.is_some() {
                    return Ok(cols);
                }
                if let Some(c) = flat.as_mut().and_then(|f| f.columns(id)) {
                    return Ok(Some(ranker_columns(c)));
                }
                Ok(columns
                    .query_row([id], |r| {
                        Ok((codec::role_at(r, 0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()?)
            })?;
        }
        Ok::<(), SearchError>(())
    };
    // A concept's candidates, found and added to the ranker's (as the
    // `k`th concept, its planned frequency `df`, scores times `weight`).
    let mut look_up =
        |by_id: &mut ById, concept: Concept<'_>, (k, df, weight): (usize, i64, f64)| {
            let known = |id| by_id.contains_key(&id);
            let filters = (&known as &dyn Fn(i64) -> bool, &mut screen);
            let scored = concept_candidates(
                conn,
                &mut lengths,
                concept,
                (df, docs),
                opts,
                filters,
                reach_of(opts),
            )?;
            add(by_id, scored, k, weight)
        };
    for (k, (exact, stem, df)) in concepts.iter().enumerate() {
        if let Some(t) = exact {
            let one = Query {
                terms: vec![t.clone()],
                ..Query::default()
            };
            let counted = match t {
                Term::Phrase(p) if p.len() == 1 => freq.newest(df::Index::Exact, &p[0]),
                _ => None,
            };
            let concept = Concept {
                index: df::Index::Exact,
                expr: one.to_fts(),
                counted,
            };
            look_up(&mut by_id, concept, (k, *df, 1.0))?;
        }
        if let Some(w) = stem {
            let concept = Concept {
                index: df::Index::Stem,
                expr: Query::to_stem_fts(std::slice::from_ref(w)),
                counted: freq.newest(df::Index::Stem, w),
            };
            look_up(&mut by_id, concept, (k, *df, rank::STEM_WEIGHT))?;
        }
    }
    if let Some(p) = &period {
        // What was said in the named period, even in other words.
        for range in &p.ranges {
            for (id, role, ts, se, fl) in period::newest(conn, *range, opts, PERIOD_CANDIDATES)? {
                offer(&mut by_id, id, None, || Ok(Some((role, ts, se, fl))))?;
            }
        }
    }
    let oldest: Option<i64> =
        conn.query_row("SELECT min(first_ms) FROM sessions", [], |r| r.get(0))?;
    let span = rank::Span {
        oldest_ms: oldest.unwrap_or(opts.now_ms).min(opts.now_ms),
        now_ms: opts.now_ms,
    };
    let ranked = rank::rank(
        by_id.into_values().collect(),
        &weights,
        span,
        period.as_ref(),
    );
    let mut words = q.highlight_words();
    if let Some(p) = &period {
        words.retain(|w| !p.words.contains(w));
    }
    Ok((ranked, words))
}

/// The record that answers a user's record: the best-matching reply, else
/// the first reply after it in the same session.
fn answer_of(conn: &rusqlite::Connection, top: &rank::Ranked) -> rusqlite::Result<Option<i64>> {
    use rusqlite::OptionalExtension;
    if top.role != "user" {
        return Ok(None);
    }
    if top.answer.is_some() {
        return Ok(top.answer);
    }
    conn.prepare_cached(&format!(
        "SELECT id FROM records WHERE session = ?1 AND id > ?2 AND role IN ({})
         ORDER BY id LIMIT 1",
        codec::roles_sql(&[Role::Assistant, Role::Note])
    ))?
    .query_row([top.session_row, top.record_id], |r| r.get(0))
    .optional()
}

/// Fetches what a hit shows: text for the snippet, session, machine, source.
fn hit_details(
    conn: &rusqlite::Connection,
    top: &rank::Ranked,
    words: &[String],
) -> rusqlite::Result<Option<Hit>> {
    use rusqlite::OptionalExtension;
    let answer = match answer_of(conn, top)? {
        Some(id) => conn
            .prepare_cached("SELECT role, ts, flags, text FROM records WHERE id = ?1")?
            .query_row([id], |r| {
                let text = codec::decode(conn, &r.get::<_, Vec<u8>>(3)?, r.get(2)?);
                Ok((
                    id,
                    codec::role_at(r, 0)?,
                    r.get::<_, Option<i64>>(1)?,
                    snippet::make(&text::strip_terminal(&text), words, 200),
                ))
            })
            .optional()?,
        None => None,
    };
    let clean = |s: Option<String>| s.map(|s| text::strip_terminal(&s));
    conn.prepare_cached(
        "SELECT r.role, r.ts, r.flags, r.text, r.offset, se.session_id, se.agent, se.project, se.title,
                COALESCE(n.name, og.node), src.path
         FROM records r
         JOIN sessions se ON se.id = r.session
         JOIN origins og ON og.id = r.origin
         LEFT JOIN nodes n ON n.id = og.node
         LEFT JOIN sources src ON src.id = r.source
         WHERE r.id = ?1",
    )?
    .query_row([top.record_id], |r| {
        let text = codec::decode(conn, &r.get::<_, Vec<u8>>(3)?, r.get(2)?);
        Ok(Hit {
            snippet: snippet::make(&text::strip_terminal(&text), words, 200),
            role: codec::role_at(r, 0)?,
            time: r.get::<_, Option<i64>>(1)?.and_then(rank::rfc3339),
            offset: r.get(4)?,
            session_id: text::strip_terminal(&r.get::<_, String>(5)?),
            agent: r.get(6)?,
            project: clean(r.get(7)?),
            title: clean(r.get(8)?),
            machine: text::strip_terminal(&r.get::<_, String>(9)?),
            // Shown redacted: a file named after a session id that holds
            // a secret (the stored path stays real, to read it again).
            source: clean(r.get(10)?)
                .map(|p| crate::redact::fields::shown_path(&p).into_owned()),
            score: top.score,
            matches: top.matches,
            record_id: top.record_id,
            answer_snippet: answer.as_ref().map(|a| a.3.clone()),
            answer_role: answer.as_ref().map(|a| a.1.clone()),
            answer_record_id: answer.as_ref().map(|a| a.0),
            answer_time: answer.as_ref().and_then(|a| a.2).and_then(rank::rfc3339),
        })
    })
    .optional()
}

/// Parses `--since`: a duration back from `now_ms` (`90m`, `36h`, `7d`, `2w`,
/// `1h30m`; humantime's units, a year being 365.25 days) or a date
/// (`2026-01-31`) or an RFC 3339 time.
pub fn parse_since(s: &str, now_ms: i64) -> Option<i64> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        let back = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        return Some(now_ms.saturating_sub(back));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis());
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_shapes() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("7d", now), Some(now - 7 * 86_400_000));
        assert_eq!(parse_since("90m", now), Some(now - 90 * 60_000));
        assert_eq!(parse_since("2026-01-31", now), Some(1_769_817_600_000));
        assert_eq!(parse_since("soon", now), None);
        assert_eq!(parse_since("7q", now), None);
        assert_eq!(parse_since("2w", now), Some(now - 14 * 86_400_000));
        assert_eq!(parse_since("36h", now), Some(now - 36 * 3_600_000));
        assert_eq!(parse_since("1h30m", now), Some(now - 90 * 60_000));
        assert_eq!(parse_since("7", now), None);
    }
}

#[cfg(test)]
mod store_tests {
    use super::*;
    use crate::record::Record;

    const DAY: i64 = 86_400_000;
    const NOW: i64 = 1_764_547_200_000; // 2025-12-01

    fn rec(session: &str, role: Role, ts: Option<i64>, text: &str) -> Record {
        let mut r = Record::new("claude-code", session, role, text);
        r.time_ms = ts;
        r
    }

    /// Every record `opts` allows, read from the rows.
    fn allowed_by_rows(
        conn: &rusqlite::Connection,
        opts: &SearchOptions,
    ) -> std::collections::HashSet<i64> {
        let mut sql = String::from("SELECT r.id FROM records r");
        push_joins(&mut sql, opts);
        sql.push_str(" WHERE 1");
        let mut args = Vec::new();
        push_filters(&mut sql, &mut args, opts);
        conn.prepare(&sql)
            .expect("prepare")
            .query_map(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// Every match of `expr` on `fts`, newest first, scored with `weight`.
    fn every_match_scored(conn: &rusqlite::Connection, expr: &str, weight: f64) -> Vec<Scored> {
        let mut lengths = record_bytes::Reader::new(conn).expect("lengths");
        let all: Vec<i64> = conn
            .prepare("SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rowid DESC")
            .expect("prepare")
            .query_map([expr], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        scored(
            &mut lengths,
            all.into_iter().map(|id| (id, None)).collect(),
            weight,
        )
        .expect("scored")
    }

    /// What a filtered concept keeps of `all` (its matches, newest first,
    /// scored) when the records `allowed` pass: the best of the newest
    /// SCAN_LIMIT matches that pass, or, when fewer than CANDIDATES do,
    /// of the newest SCAN_LIMIT that pass among the newest `reach`.
    fn kept_by_rows(
        all: &[Scored],
        allowed: &std::collections::HashSet<i64>,
        reach: usize,
    ) -> Vec<(f64, i64)> {
        let pick = |from: Vec<&Scored>| -> Vec<(f64, i64)> {
            let kept = from.into_iter().filter(|s| allowed.contains(&s.1)).cloned();
            best_of(kept.collect(), CANDIDATES)
                .into_iter()
                .map(|s| (s.0, s.1))
                .collect()
        };
        let among_newest = pick(all.iter().take(SCAN_LIMIT as usize).collect());
        match among_newest.len() >= CANDIDATES {
            true => among_newest,
            false => pick(
                all.iter()
                    .take(reach)
                    .filter(|s| allowed.contains(&s.1))
                    .take(SCAN_LIMIT as usize)
                    .collect(),
            ),
        }
    }

    /// The word "gadget" as a concept of `conn`'s history, where it has
    /// more matches than SCAN_LIMIT: its planned frequency, the records
    /// the planner counts, its weight and its expression.
    fn common_gadget(conn: &rusqlite::Connection) -> (i64, i64, f64, String) {
        let mut freq = df::Frequencies::new(conn).expect("frequencies");
        let df = freq.token(df::Index::Exact, "gadget").expect("df");
        assert!(df > SCAN_LIMIT);
        let weight = rank::bm25_idf(freq.docs(), df);
        (df, freq.docs(), weight, df::token_expr("gadget"))
    }

    fn store_with(recs: &[Record]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for r in recs {
            ing.insert(r, None).expect("insert");
        }
        ing.commit().expect("commit");
        (dir, store)
    }

    fn first(store: &Store, q: &str) -> Hit {
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        search(store, &Query::parse(q), &opts)
            .expect("search")
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no hit for {q:?}"))
    }

    #[test]
    fn a_word_too_common_to_score_through_fts5_still_ranks_by_role_and_length() {
        // "error" in more records than the scan limit: only the newest
        // matches are scored, with BM25 at a term frequency of one. Of two
        // user records that say it once, the short one comes first although
        // the long one is newer; tool output, however much of it, comes last.
        let filler = "the build log printed another error line while compiling ".repeat(12);
        let mut recs: Vec<Record> = (0..SCAN_LIMIT + 200)
            .map(|i| {
                rec(
                    "tools",
                    Role::ToolOutput,
                    Some(NOW - 30 * DAY + i),
                    &format!("{filler} step {i}"),
                )
            })
            .collect();
        recs.push(rec(
            "short",
            Role::User,
            Some(NOW - 3 * DAY),
            "why this error?",
        ));
        recs.push(rec(
            "long",
            Role::User,
            Some(NOW - 2 * DAY),
            &format!("{filler} and so on: why this error?"),
        ));
        let (_d, store) = store_with(&recs);
        let mut freq = df::Frequencies::new(store.conn()).expect("frequencies");
        assert!(freq.token(df::Index::Exact, "error").expect("df") > SCAN_LIMIT);
        let opts = SearchOptions {
            limit: 3,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        let order: Vec<String> = search(&store, &Query::parse("error"), &opts)
            .expect("search")
            .into_iter()
            .map(|h| h.session_id)
            .collect();
        assert_eq!(order, ["short", "long", "tools"]);
    }

    /// A filtered search looks up a concept's matches best first until
    /// enough pass, and reaches back past the newest matches only when
    /// too few of them do, through no more than its reach of them.
    #[test]
    fn a_filtered_concept_keeps_the_best_matches_it_allows() {
        // More matches than the scan limit: the 1,400 oldest from goose
        // and codex in turn (most older than the newest SCAN_LIMIT), the
        // rest from codex (every third) and claude-code; codex's oldest are
        // tool calls, the others the user's and the assistant's turns in
        // turn; texts of many lengths, so scores differ and tie. The 800
        // oldest came from another machine, "peer".
        let n = SCAN_LIMIT + 400;
        let recs: Vec<Record> = (0..n)
            .map(|i| {
                let agent = match i {
                    _ if i < 1_400 && i % 2 == 0 => "goose",
                    _ if i < 1_400 || i % 3 == 0 => "codex",
                    _ => "claude-code",
                };
                let role = match i % 2 {
                    0 => Role::User,
                    _ if i < 1_400 => Role::ToolCall,
                    _ => Role::Assistant,
                };
                let text = format!("gadget {}", "word ".repeat((i % 23) as usize));
                let mut r = Record::new(agent, &format!("{agent}{}", i % 50), role, &text);
                r.time_ms = Some(NOW - DAY + i);
                r
            })
            .collect();
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        for (origin, part) in [("peer", &recs[..800]), ("node", &recs[800..])] {
            let mut ing = store.ingest(origin).expect("ingest");
            for r in part {
                ing.insert(r, None).expect("insert");
            }
            ing.commit().expect("commit");
        }
        // The flat files, whose roles file the screen reads ahead from
        // when the ranker's columns come from the columns file.
        assert_eq!(store.write_columns().expect("columns files"), n as u64);
        let conn = store.conn();
        let (df, docs, weight, expr) = common_gadget(conn);
        // The records a filter allows, read on their own.
        let allowed = |opts: &SearchOptions| allowed_by_rows(conn, opts);
        let got_with = |opts: &SearchOptions,
                        (up_front, elsewhere): (bool, bool),
                        reach: usize|
         -> Vec<(f64, i64)> {
            // Some records an earlier concept found, so known to pass.
            let passing = allowed(opts);
            let known = |id| id % 7 == 0 && passing.contains(&id);
            let mut lengths = record_bytes::Reader::new(conn).expect("lengths");
            let concept = Concept {
                index: df::Index::Exact,
                expr: expr.clone(),
                counted: None,
            };
            // Every run read up front, as for a narrow filter, or each as
            // a candidate needs it.
            let map = match up_front {
                true => semantic::allowed_session_runs(&store, opts).expect("map"),
                false => None,
            };
            let mut screen = Screen::new(conn, opts, map.as_ref()).expect("screen");
            // Whether a record the screen allows is taken without its row
            // (as when the columns files hold the ranker's columns), and
            // its role byte read ahead from the roles file beside them.
            screen.columns_elsewhere(elsewhere);
            if elsewhere {
                screen.read_roles(columns_file::Bytes::roles(&store));
            }
            // What the look-ups skip is what the screen's verdict rules
            // out, for every record and a few ids past them; what they
            // take without the row, what it allows.
            {
                let mut twin = Screen::new(conn, opts, map.as_ref()).expect("screen");
                let mut judge = Screen::new(conn, opts, map.as_ref()).expect("screen");
                judge.columns_elsewhere(elsewhere);
                let mut ahead = Screen::new(conn, opts, map.as_ref()).expect("screen");
                ahead.read_roles(columns_file::Bytes::roles(&store));
                let mut bytes = record_bytes::Reader::new(conn).expect("bytes");
                let top: i64 = conn
                    .query_row("SELECT max(id) FROM records", [], |r| r.get(0))
                    .expect("top");
                let ids: Vec<i64> = (1..=top + 3).collect();
                let roles = ahead.roles_ahead(&ids);
                for (&id, role) in ids.iter().zip(roles) {
                    let verdict = twin.verdict(&mut bytes, id, 0).expect("verdict");
                    let out = screen.rules_out(&mut bytes, id, 0).expect("rules out");
                    assert_eq!(out, verdict == Some(false), "{opts:?}: {id}");
                    let judged = judge.judge(&mut bytes, id, 0).expect("judge");
                    match elsewhere {
                        true => assert_eq!(judged, verdict, "{opts:?}: {id}"),
                        false => assert_eq!(judged, (out).then_some(false), "{opts:?}: {id}"),
                    }
                    // With the role byte read ahead: the same, or, where the
                    // role bytes were cleared, what the record's row says.
                    let read_ahead = ahead.verdict(&mut bytes, id, role).expect("ahead");
                    match verdict {
                        Some(_) => assert_eq!(read_ahead, verdict, "{opts:?}: {id}"),
                        None => assert!(
                            read_ahead.is_none() || read_ahead == Some(passing.contains(&id)),
                            "{opts:?}: {id}"
                        ),
                    }
                }
            }
            let filters = (&known as &dyn Fn(i64) -> bool, &mut screen);
            concept_candidates(
                conn,
                &mut lengths,
                concept,
                (df, docs),
                opts,
                filters,
                reach,
            )
            .expect("candidates")
            .into_iter()
            .map(|(score, id, cols)| {
                // Columns, where given (the ranker looks up the others),
                // are the record's own.
                if let Some((_, _, session, _)) = cols {
                    let own: i64 = conn
                        .query_row("SELECT session FROM records WHERE id = ?1", [id], |r| {
                            r.get(0)
                        })
                        .expect("row");
                    assert_eq!(session, own, "{opts:?}: {id}");
                }
                (score, id)
            })
            .collect()
        };
        let got_within = |opts: &SearchOptions, reach: usize| -> Vec<(f64, i64)> {
            let each = got_with(opts, (false, false), reach);
            assert_eq!(
                got_with(opts, (true, false), reach),
                each,
                "{opts:?}: runs read up front"
            );
            assert_eq!(
                got_with(opts, (false, true), reach),
                each,
                "{opts:?}: allowed records taken without their rows"
            );
            each
        };
        let got = |opts: &SearchOptions| got_within(opts, REACH_LIMIT);
        // Every match, newest first, scored.
        let all = every_match_scored(conn, &expr, weight);
        assert_eq!(all.len() as i64, n);
        let want_within =
            |opts: &SearchOptions, reach: usize| kept_by_rows(&all, &allowed(opts), reach);
        let want = |opts: &SearchOptions| want_within(opts, REACH_LIMIT);
        let agent = |a: &str| SearchOptions {
            agent: Some(a.into()),
            ..SearchOptions::default()
        };
        let filters = [
            agent("codex"),
            agent("goose"),
            SearchOptions {
                roles: vec![Role::User],
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::Assistant],
                ..agent("codex")
            },
            SearchOptions {
                roles: vec![Role::User, Role::Assistant, Role::ToolCall],
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::ToolCall],
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::ToolCall, Role::User],
                ..agent("codex")
            },
        ];
        for opts in &filters {
            let got = got(opts);
            assert_eq!(got.len(), CANDIDATES, "{opts:?}");
            assert_eq!(got, want(opts), "{opts:?}");
        }
        // With only some runs (a database still being filled in) or none,
        // the same: a record no run holds is looked up.
        // So with only some role bytes known, or none.
        let with_runs: Vec<_> = filters.iter().map(&got).collect();
        // The packed runs follow the table (as every writer keeps them),
        // and are then set aside (their packing pending).
        for cut in [
            "DELETE FROM record_runs WHERE first % 3 = 0",
            "INSERT INTO meta(key, value) VALUES ('run_blocks_backfill', '0')",
            "UPDATE record_bytes SET roles = NULL WHERE block % 2 = 0",
            "DELETE FROM record_runs",
            "UPDATE record_bytes SET roles = NULL",
        ] {
            conn.execute(cut, []).expect("cut");
            crate::store::packed_runs::repack_all(conn).expect("repack");
            for (opts, want) in filters.iter().zip(&with_runs) {
                assert_eq!(&got(opts), want, "{cut} {opts:?}");
            }
        }
        // Goose's matches and the tool calls are all older than the newest:
        // they reached back.
        for reached in [1, 5] {
            let got = got(&filters[reached]);
            assert!(got.iter().all(|s| s.1 <= 1_400), "{got:?}");
        }
        // A filter that allows everything keeps what no filter keeps.
        assert_eq!(got(&filters[4]), got(&SearchOptions::default()));
        // Filters the screen cannot settle, where fewer may pass: the time
        // (which rules out a session that ended before it, and leaves the
        // others to the rows), and the machine, which only the rows tell
        // (a reach back joins them with the matches), alone or with others.
        let since = |i: i64| Some(NOW - DAY + i);
        let unsettled = [
            SearchOptions {
                since_ms: since(2_000),
                ..SearchOptions::default()
            },
            SearchOptions {
                since_ms: since(500),
                ..agent("goose")
            },
            SearchOptions {
                since_ms: since(300),
                roles: vec![Role::ToolCall],
                ..SearchOptions::default()
            },
            SearchOptions {
                machine: Some("peer".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                machine: Some("peer".into()),
                roles: vec![Role::User],
                ..SearchOptions::default()
            },
            SearchOptions {
                machine: Some("node".into()),
                since_ms: since(1_200),
                ..agent("goose")
            },
        ];
        assert_eq!(allowed(&unsettled[3]).len(), 800);
        // Within a reach short of every match, the oldest are not seen.
        // And reaching back through every match (as a filter on the time
        // does): with every run read up front, only the stretches of ids
        // the runs do not rule out are read (`Screen::stretches`).
        for opts in filters.iter().chain(&unsettled) {
            for reach in [REACH_LIMIT, 8_300, 8_100, usize::MAX] {
                let got = got_within(opts, reach);
                assert!(!got.is_empty(), "{opts:?} within {reach}");
                assert_eq!(got, want_within(opts, reach), "{opts:?} within {reach}");
            }
        }
        for reached in [&filters[1], &unsettled[3]] {
            assert_ne!(
                want_within(reached, 8_100),
                want_within(reached, REACH_LIMIT)
            );
        }
    }

    /// A filter on the time reaches back through every match of a concept
    /// but reads only the stretches of ids the runs do not rule out
    /// (`Screen::stretches`), newest first: the same candidates as reading
    /// every match, with ids that run against the sessions' times (a first
    /// index of a long history), a resumed old session, more allowed runs
    /// than stretches, and ids that no run holds (runs still being worked
    /// out, or past their end).
    #[test]
    fn a_time_filter_reaches_back_through_the_stretches_the_runs_leave_open() {
        const MIN: i64 = 60_000;
        // 70 sessions of 150 records, read newest first: session s began
        // s days ago. Every word matches, more than SCAN_LIMIT in all.
        let sessions = 70i64;
        let agent = |s: i64| if s % 2 == 0 { "codex" } else { "claude-code" };
        let recs: Vec<Record> = (0..sessions * 150)
            .map(|i| {
                let (s, k) = (i / 150, i % 150);
                let text = format!("gadget {}", "word ".repeat((i % 17) as usize));
                let mut r = Record::new(agent(s), &format!("s{s}"), Role::User, &text);
                r.time_ms = Some(NOW - s * DAY + k * MIN);
                r
            })
            .collect();
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for r in &recs {
            ing.insert(r, None).expect("insert");
        }
        ing.commit().expect("commit");
        // Session 60, two months old, resumed today: its old records lie
        // among the oldest ids, its session now ends after any filter.
        let mut ing = store.ingest("node").expect("ingest");
        let mut resumed = Record::new(agent(60), "s60", Role::User, "gadget again");
        resumed.time_ms = Some(NOW + MIN);
        ing.insert(&resumed, None).expect("insert");
        ing.commit().expect("commit");
        let conn = store.conn();
        let (df, docs, weight, expr) = common_gadget(conn);
        let got = |opts: &SearchOptions, up_front: bool| -> (Vec<(f64, i64)>, usize) {
            let mut lengths = record_bytes::Reader::new(conn).expect("lengths");
            let map = match up_front {
                true => semantic::allowed_session_runs(&store, opts).expect("map"),
                false => None,
            };
            assert_eq!(map.is_some(), up_front, "{opts:?}");
            let mut screen = Screen::new(conn, opts, map.as_ref()).expect("screen");
            let stretches = screen.stretches().map_or(0, |s| s.len());
            let known = |_| false;
            let concept = Concept {
                index: df::Index::Exact,
                expr: expr.clone(),
                counted: None,
            };
            let found = concept_candidates(
                conn,
                &mut lengths,
                concept,
                (df, docs),
                opts,
                (&known, &mut screen),
                reach_of(opts),
            )
            .expect("candidates");
            (
                found.into_iter().map(|(sc, id, _)| (sc, id)).collect(),
                stretches,
            )
        };
        // Every match newest first, and what the rows say a concept keeps.
        let all = every_match_scored(conn, &expr, weight);
        let want =
            |opts: &SearchOptions| kept_by_rows(&all, &allowed_by_rows(conn, opts), usize::MAX);
        let since = |days: i64| SearchOptions {
            since_ms: Some(NOW - days * DAY + 75 * MIN),
            ..SearchOptions::default()
        };
        let filters = [
            // The last eight days (the newest sessions, the lowest ids, and
            // the resumed one): three stretches and the ids past the runs.
            since(8),
            // With the agent too: every other session of the last 40 days.
            SearchOptions {
                agent: Some("codex".into()),
                ..since(40)
            },
            // The other agent's of the last 65 days: more allowed runs
            // than stretches.
            SearchOptions {
                agent: Some("claude-code".into()),
                ..since(65)
            },
        ];
        let mut stretches = Vec::new();
        for opts in &filters {
            let (each, none) = got(opts, false);
            assert_eq!(none, 0, "{opts:?}");
            assert!(!each.is_empty(), "{opts:?}");
            assert_eq!(each, want(opts), "{opts:?}: every match read");
            let (read, n) = got(opts, true);
            assert_eq!(read, each, "{opts:?}: through the stretches");
            stretches.push(n);
        }
        // Newest by time lie lowest by id (sessions 0 to 8), but for the
        // resumed session's new record: the reach back was needed.
        let found = want(&filters[0]);
        let resumed_id = sessions * 150 + 1;
        assert!(found.iter().any(|s| s.1 == resumed_id));
        assert_eq!(
            found
                .iter()
                .filter(|s| s.1 > 9 * 150 && s.1 != resumed_id)
                .count(),
            0
        );
        assert_eq!(stretches[0], 3, "{stretches:?}");
        assert!(
            stretches[1] > 3 && stretches[1] <= spans::MOST,
            "{stretches:?}"
        );
        assert_eq!(stretches[2], spans::MOST, "{stretches:?}");
        // Runs still being worked out, or lost: the ids no run holds, and
        // those past the runs' end, are read too.
        for cut in [
            "DELETE FROM record_runs WHERE session % 4 = 1",
            "DELETE FROM record_runs WHERE first > 5000",
        ] {
            conn.execute(cut, []).expect("cut");
            crate::store::packed_runs::repack_all(conn).expect("repack");
            for opts in &filters {
                let (read, _) = got(opts, true);
                assert_eq!(read, want(opts), "{cut} {opts:?}");
            }
        }
    }

    /// A filter on the time rules out, without their rows, the records of
    /// every session whose newest dated record is older than it (with a
    /// filter on the agent too, whose runs alone would have allowed them),
    /// and allows none without its row: its own time decides.
    #[test]
    fn a_time_filter_is_judged_by_the_runs_and_the_stamps() {
        const HOUR: i64 = 3_600_000;
        // Ten sessions of ten records an hour apart, their records a
        // minute apart, codex's and claude-code's in turn; session 9's
        // records are undated, and so is one of session 6's.
        let recs: Vec<Record> = (0..100i64)
            .map(|i| {
                let (s, k) = (i / 10, i % 10);
                let agent = if s % 2 == 0 { "codex" } else { "claude-code" };
                let mut r = Record::new(agent, &format!("s{s}"), Role::User, "widget talk");
                r.time_ms = match (s, k) {
                    (9, _) | (6, 4) => None,
                    _ => Some(NOW - 20 * HOUR + s * HOUR + k * 60_000),
                };
                r
            })
            .collect();
        let (_d, store) = store_with(&recs);
        let conn = store.conn();
        let top: i64 = conn
            .query_row("SELECT max(id) FROM records", [], |r| r.get(0))
            .expect("top");
        // Each record's time and its session's newest.
        let of = |id: i64| -> Option<(Option<i64>, Option<i64>, String)> {
            conn.query_row(
                "SELECT r.ts, se.last_ms, se.agent FROM records r
                 JOIN sessions se ON se.id = r.session WHERE r.id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .expect("row")
        };
        // With the records' stamps, and then without (a database whose
        // stamps are not filled in yet): then only the rows can allow.
        for stamps in [true, false] {
            if !stamps {
                conn.execute("DELETE FROM record_times", [])
                    .expect("no stamps");
            }
            for cut in [0, 3, 5, 8, 9, 20] {
                let since = NOW - 20 * HOUR + cut * HOUR + 5 * 60_000;
                for agent in [None, Some("codex")] {
                    let opts = SearchOptions {
                        since_ms: Some(since),
                        agent: agent.map(Into::into),
                        ..SearchOptions::default()
                    };
                    let mut screen = Screen::new(conn, &opts, None).expect("screen");
                    assert!(screen.prunes());
                    let mut bytes = record_bytes::Reader::new(conn).expect("bytes");
                    let mut out = 0;
                    for id in 1..=top + 2 {
                        let verdict = screen.verdict(&mut bytes, id, 0).expect("verdict");
                        let Some((ts, last, a)) = of(id) else {
                            assert_eq!(verdict, None, "{opts:?}: {id}");
                            continue;
                        };
                        let ended = last.is_some_and(|l| l < since);
                        let other = agent.is_some_and(|want| want != a);
                        let early = ts.is_none_or(|t| t < since);
                        if stamps {
                            // Exactly what the row says.
                            assert_eq!(verdict, Some(!(other || early)), "{opts:?}: {id}");
                        } else {
                            assert_ne!(verdict, Some(true), "{opts:?}: {id}");
                            assert_eq!(verdict == Some(false), ended || other, "{opts:?}: {id}");
                        }
                        if verdict == Some(false) {
                            assert!(other || early, "{opts:?}: {id}");
                            out += 1;
                        }
                    }
                    // Without stamps, sessions 0..cut ended before it (all of
                    // them at 20, but the undated one); with them, every
                    // record before it and every undated one is out too.
                    let ended = match stamps {
                        false => cut.min(9) * 10,
                        true => (1..=top)
                            .filter(|&id| of(id).is_some_and(|o| o.0.is_none_or(|t| t < since)))
                            .count() as i64,
                    };
                    if agent.is_none() {
                        assert_eq!(out, ended, "{opts:?}");
                    }
                    // What a search finds: the records at or after the time.
                    let hits = search(
                        &store,
                        &Query::parse("widget"),
                        &SearchOptions {
                            limit: 20,
                            now_ms: NOW,
                            ..opts.clone()
                        },
                    )
                    .expect("search");
                    let mut found: Vec<String> = hits.into_iter().map(|h| h.session_id).collect();
                    found.sort();
                    let want: Vec<String> = (0..10i64)
                        .filter(|s| {
                            let a = if s % 2 == 0 { "codex" } else { "claude-code" };
                            agent.is_none_or(|want| want == a)
                                && (0..10).any(|k| {
                                    !matches!((*s, k), (9, _) | (6, 4))
                                        && NOW - 20 * HOUR + s * HOUR + k * 60_000 >= since
                                })
                        })
                        .map(|s| format!("s{s}"))
                        .collect();
                    assert_eq!(found, want, "{opts:?}");
                }
            }
        }
    }

    #[test]
    fn inflected_question_finds_inflected_answer_first() {
        let (_d, store) = store_with(&[
            rec(
                "pottery",
                Role::User,
                Some(NOW - 400 * DAY),
                "I just signed up for a pottery class!",
            ),
            rec(
                "other",
                Role::User,
                Some(NOW - DAY),
                "the class diagram needs a legend",
            ),
            rec(
                "crash",
                Role::Assistant,
                Some(NOW - 300 * DAY),
                "The worker was crashing on empty input.",
            ),
        ]);
        assert_eq!(
            first(&store, "When did she sign up for the pottery class?").session_id,
            "pottery"
        );
        assert_eq!(first(&store, "worker crashes").session_id, "crash");
        // Quoted phrases stay exact: no stem match for "sign up".
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        assert!(
            search(&store, &Query::parse("\"sign up\""), &opts)
                .expect("search")
                .is_empty()
        );
    }

    #[test]
    fn exact_matches_rank_above_stem_only() {
        let (_d, store) = store_with(&[
            rec(
                "stem",
                Role::Assistant,
                Some(NOW - DAY),
                "we were pinning versions all day",
            ),
            rec(
                "exact",
                Role::Assistant,
                Some(NOW - 200 * DAY),
                "pin the version of hyper",
            ),
        ]);
        assert_eq!(first(&store, "pin").session_id, "exact");
    }

    #[test]
    fn an_old_answer_beats_a_newer_one_word_match() {
        let (_d, store) = store_with(&[
            rec(
                "old",
                Role::User,
                Some(NOW - 3 * 365 * DAY),
                "why sqlite for the job store?",
            ),
            rec(
                "old",
                Role::Assistant,
                Some(NOW - 3 * 365 * DAY),
                "We switched the job store to SQLite because it is one file.",
            ),
            rec("new", Role::User, Some(NOW - DAY), "switch the tab"),
            rec(
                "undated",
                Role::User,
                None,
                "how do I switch from light to dark mode",
            ),
        ]);
        assert_eq!(
            first(&store, "why did we switch to sqlite").session_id,
            "old"
        );
    }

    #[test]
    fn undated_records_do_not_outrank_dated_ones() {
        let (_d, store) = store_with(&[
            rec(
                "dated",
                Role::Assistant,
                Some(NOW - 700 * DAY),
                "the deploy key rotation happens monthly",
            ),
            rec(
                "undated",
                Role::Assistant,
                None,
                "the deploy key rotation happens monthly.",
            ),
        ]);
        assert_eq!(first(&store, "deploy key rotation").session_id, "dated");
    }

    #[test]
    fn a_date_in_the_question_prefers_that_period() {
        let oct_2023 = 1_697_328_000_000; // 2023-10-15
        let (_d, store) = store_with(&[
            rec(
                "oct",
                Role::Assistant,
                Some(oct_2023),
                "We decided to drop the cache layer of the reporting service after the outage.",
            ),
            // Newer and shorter: first unless the question names October 2023.
            rec(
                "recent",
                Role::Assistant,
                Some(NOW - 5 * DAY),
                "The cache layer is back.",
            ),
        ]);
        assert_eq!(first(&store, "cache").session_id, "recent");
        assert_eq!(
            first(&store, "what did we decide about the cache in October 2023").session_id,
            "oct"
        );
        // --since stays a hard filter.
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            since_ms: Some(NOW - 30 * DAY),
            ..SearchOptions::default()
        };
        let hits = search(&store, &Query::parse("cache in October 2023"), &opts).expect("search");
        assert!(hits.iter().all(|h| h.session_id == "recent"), "{hits:?}");
    }

    #[test]
    fn the_answer_not_the_question_is_shown() {
        let (_d, store) = store_with(&[
            rec(
                "s",
                Role::User,
                Some(NOW - DAY),
                "why did we pin hyper to 0.14?",
            ),
            rec(
                "s",
                Role::Assistant,
                Some(NOW - DAY + 1000),
                "axum 0.6 is built on the old version, so we kept it until the upgrade.",
            ),
        ]);
        let hit = first(&store, "why did we pin hyper");
        assert_eq!(hit.role, "user");
        assert!(hit.snippet.contains("pin hyper"));
        let answer = hit.answer_snippet.expect("answer");
        assert!(answer.contains("axum 0.6"), "{answer}");
        assert_eq!(hit.answer_role.as_deref(), Some("assistant"));
        assert!(hit.answer_record_id.is_some());
    }

    /// The unfiltered path looks up only the best matches in `records`;
    /// a filter that allows every record must rank the same.
    #[test]
    fn a_filter_that_allows_everything_ranks_as_no_filter_does() {
        let words = [
            "cache",
            "cache miss",
            "cache eviction policy",
            "flaky cache test",
        ];
        let recs: Vec<Record> = (0..60)
            .map(|i| {
                let role = if i % 3 == 0 {
                    Role::Assistant
                } else {
                    Role::User
                };
                let text = format!("{} {}", words[i % 4], "filler ".repeat(i % 9));
                rec(
                    &format!("s{}", i % 11),
                    role,
                    Some(NOW - i as i64 * DAY),
                    &text,
                )
            })
            .collect();
        let (_d, store) = store_with(&recs);
        let plain = SearchOptions {
            limit: 50,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        let all_roles = SearchOptions {
            roles: vec![Role::User, Role::Assistant],
            ..plain.clone()
        };
        let ids = |opts: &SearchOptions, q: &str| -> Vec<(String, String)> {
            search(&store, &Query::parse(q), opts)
                .expect("search")
                .into_iter()
                .map(|h| (h.session_id, h.snippet))
                .collect()
        };
        for q in ["cache", "cache eviction", "flaky test"] {
            let want = ids(&all_roles, q);
            assert!(!want.is_empty(), "{q}");
            assert_eq!(ids(&plain, q), want, "{q}");
        }
    }

    #[test]
    fn pages_and_totals() {
        let recs: Vec<Record> = (0..7)
            .map(|i| {
                rec(
                    &format!("s{i}"),
                    Role::User,
                    Some(NOW - i * DAY),
                    "flamingo sighting",
                )
            })
            .collect();
        let (_d, store) = store_with(&recs);
        let opts = SearchOptions {
            limit: 3,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        let q = Query::parse("flamingo");
        let p1 = search_page(&store, &q, &opts, 0).expect("p1");
        let p3 = search_page(&store, &q, &opts, 6).expect("p3");
        assert_eq!((p1.hits.len(), p1.total), (3, 7));
        assert_eq!((p3.hits.len(), p3.total, p3.offset), (1, 7, 6));
        assert!(
            p1.hits
                .iter()
                .all(|h| h.session_id != p3.hits[0].session_id)
        );
    }

    #[test]
    fn escape_sequences_never_reach_hits() {
        let (_d, store) = store_with(&[rec(
            "esc",
            Role::ToolOutput,
            Some(NOW),
            "\u{1b}[31mboom\u{1b}[0m \u{1b}]0;pwned\u{7}kaboom",
        )]);
        let hit = first(&store, "kaboom");
        assert!(
            !hit.snippet.contains('\u{1b}') && !hit.snippet.contains("pwned"),
            "{}",
            hit.snippet
        );
    }

    #[test]
    fn stems_are_backfilled_for_records_stored_before_the_stem_index() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        {
            let mut store = Store::open(&path).expect("open");
            let mut ing = store.ingest("node").expect("ingest");
            ing.insert(&rec("s", Role::User, Some(NOW), "we pinned hyper"), None)
                .expect("insert");
            ing.commit().expect("commit");
            // As a database from before the stemmed index looked.
            store.conn().execute_batch(
                "DELETE FROM fts_stem; INSERT INTO meta(key, value) VALUES ('fts_stem_backfill', '0');",
            )
            .expect("reset");
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(first(&store, "pin").session_id, "s");
        assert_eq!(store.meta("fts_stem_backfill").expect("meta"), None);
    }

    /// A search ranks from the columns files exactly as from the tables,
    /// and does read them: entries changed under it change its scores.
    #[test]
    fn a_search_ranks_from_the_columns_files_as_from_the_tables() {
        let recs: Vec<Record> = (0..600i64)
            .map(|i| {
                let role = Role::ALL[i as usize % Role::ALL.len()];
                let ts = (i % 9 != 0).then_some(NOW - (600 - i) * DAY / 10);
                let text = match i % 3 {
                    0 => format!(
                        "we pinned hyper because the queue retried {i} {}",
                        "x ".repeat((i % 17) as usize)
                    ),
                    1 => format!("the queue worker retries a flaky test, run {i}"),
                    _ => format!(
                        "decided: cache the embeddings per session {i} {}",
                        "y ".repeat((i % 11) as usize)
                    ),
                };
                rec(&format!("s{}", i % 23), role, ts, &text)
            })
            .collect();
        let (_d, store) = store_with(&recs);
        let opts = SearchOptions {
            limit: 10,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        let questions = [
            "why did we pin hyper",
            "queue retries",
            "cache embeddings",
            "flaky",
        ];
        // Unfiltered, and filtered on roles and on the time (a screen
        // that allows a record then takes its columns from the file).
        let filtered = [
            opts.clone(),
            SearchOptions {
                roles: vec![Role::User, Role::Assistant],
                ..opts.clone()
            },
            SearchOptions {
                since_ms: Some(NOW - 30 * DAY),
                ..opts.clone()
            },
        ];
        let pages = |store: &Store| -> Vec<Vec<(String, i64, f64)>> {
            filtered
                .iter()
                .flat_map(|opts| {
                    questions.iter().map(move |q| {
                        search_page(store, &Query::parse(q), opts, 0)
                            .expect("search")
                            .hits
                            .into_iter()
                            .map(|h| (h.session_id, h.record_id, h.score))
                            .collect()
                    })
                })
                .collect()
        };
        let from_tables = pages(&store);
        assert!(from_tables.iter().all(|p| p.len() >= 2), "{from_tables:?}");
        assert_eq!(store.write_columns().expect("write"), 600);
        assert_eq!(pages(&store), from_tables, "from the files");
        // A daemon's reader maps the files (store::held): the same pages.
        let mut held = Store::open_read_only(store.path()).expect("read-only");
        held.hold_flat_files(1 << 30);
        assert_eq!(pages(&held), from_tables, "from the files mapped");

        // Every length read as the longest class (the pages sealed again,
        // as a writer would): the word tier's scores move, so it read them.
        let columns = columns_file::path_for(store.path());
        let pristine = std::fs::read(&columns).expect("read");
        let restore = || {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&columns)
                .expect("open");
            std::os::unix::fs::FileExt::write_all_at(&file, &pristine, 0).expect("restore");
        };
        columns_file::tests::rewrite_entries(&store, true, |e| e[columns_file::LENGTH_AT] = 200);
        assert_ne!(pages(&store), from_tables, "lengths from the file");
        assert_eq!(pages(&held), pages(&store), "lengths from the mapping");
        restore();
        assert_eq!(pages(&store), from_tables, "restored");

        // Every role byte read as a tool's output: the search filtered on
        // the user's and the assistant's words finds none of them, so its
        // screen read the role bytes; the others do not read them.
        let by_tables = pages(&store);
        let tool = codec::role_code(Role::ToolOutput);
        columns_file::tests::rewrite_entries(&store, true, |e| e[columns_file::ROLE_AT] = tool);
        let tampered = pages(&store);
        let n = questions.len();
        assert!(by_tables[n..2 * n].iter().all(|p| !p.is_empty()));
        assert!(tampered[n..2 * n].iter().all(Vec::is_empty), "{tampered:?}");
        assert_eq!(tampered[..n], by_tables[..n], "unfiltered");
        assert_eq!(tampered[2 * n..], by_tables[2 * n..], "on the time");
        assert_eq!(pages(&held), tampered, "roles from the mapping");
        restore();
        assert_eq!(pages(&store), by_tables, "roles as written again");

        // Every record dated a year earlier in the columns file: recency
        // moves the scores, so it read them. The same bytes not sealed
        // again (damage on disk) are never read: the tables answer.
        let older = |e: &mut [u8]| {
            let w = u64::from_le_bytes(e[..8].try_into().expect("word"));
            if let Some(s) = crate::store::record_times::Stamp::from_word(w) {
                let older = crate::store::record_times::Stamp {
                    ts: s.ts.map(|t| t - 365 * DAY),
                    ..s
                };
                e[..8].copy_from_slice(&older.word().to_le_bytes());
            }
        };
        columns_file::tests::rewrite_entries(&store, true, older);
        assert_ne!(pages(&store), from_tables, "columns from the file");
        restore();
        columns_file::tests::rewrite_entries(&store, false, older);
        columns_file::tests::rewrite_entries(&store, false, |e| e[columns_file::ROLE_AT] = tool);
        assert_eq!(pages(&store), from_tables, "damaged pages are not read");
        assert_eq!(pages(&held), from_tables, "nor through a mapping");
        // Without the files, the tables again; a write makes them anew.
        std::fs::remove_file(&columns).expect("remove");
        assert_eq!(pages(&store), from_tables, "from the tables again");
        assert_eq!(store.write_columns().expect("anew"), 600);
        assert_eq!(pages(&store), from_tables, "from the files anew");
    }
}
