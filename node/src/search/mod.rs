//! Search over the store: query parsing, FTS5 candidates, ranking and snippets.
//!
//! FTS5's BM25 finds candidate records; [`rank`] then weighs them by role,
//! decision language and age, and groups them by session so one chatty
//! session cannot fill the page. This module only reads.

pub mod query;
pub mod rank;
pub mod snippet;
pub mod text;

use rusqlite::types::Value as SqlValue;
use serde::Serialize;

use crate::record::Role;
use crate::store::{Store, StoreError, codec};
pub use query::Query;
use query::Term;

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
}

/// One search result: the best-matching record of one session.
///
/// Serialized as part of the `--json` public contract: fields may be added,
/// never renamed or removed.
#[derive(Debug, Clone, Serialize)]
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
}

/// Errors of a search.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How many candidate records FTS5 hands to the ranker when matches are few.
const CANDIDATES: i64 = 600;
/// When a query could match more records than this, only the newest this
/// many matches are scored: search cost stays bounded however large the
/// memory grows, and very common words cannot stall it.
const SCAN_LIMIT: i64 = 20_000;
/// A word in more than this share of all records is a stop word for this
/// corpus: dropped when the query has rarer words.
const COMMON_SHARE: f64 = 0.05;

impl From<rusqlite::Error> for SearchError {
    fn from(e: rusqlite::Error) -> Self {
        SearchError::Store(StoreError::Sqlite(e))
    }
}

/// How many records contain `token` (from the FTS vocabulary).
fn token_df(conn: &rusqlite::Connection, token: &str) -> rusqlite::Result<i64> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached("SELECT doc FROM fts_vocab WHERE term = ?1")?
        .query_row([token], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// An upper bound on how many records a term matches.
fn term_df(conn: &rusqlite::Connection, term: &Term) -> rusqlite::Result<i64> {
    match term {
        Term::Phrase(tokens) => {
            let mut min = i64::MAX;
            for t in tokens {
                min = min.min(token_df(conn, t)?);
            }
            Ok(if min == i64::MAX { 0 } else { min })
        }
        Term::Prefix(p) => {
            let mut upper = p.clone();
            upper.push(char::MAX);
            let mut stmt = conn.prepare_cached(
                "SELECT doc FROM fts_vocab WHERE term >= ?1 AND term < ?2 LIMIT 2000",
            )?;
            let rows = stmt.query_map([p.as_str(), upper.as_str()], |r| r.get::<_, i64>(0))?;
            let mut sum = 0i64;
            for r in rows {
                sum = sum.saturating_add(r?);
            }
            Ok(sum)
        }
    }
}

/// Drops terms that are too common to tell records apart when rarer terms
/// exist, and estimates how many records the rest match.
fn plan_terms(conn: &rusqlite::Connection, q: &Query) -> rusqlite::Result<(Query, i64)> {
    let docs: i64 = conn.query_row("SELECT COALESCE(max(id), 0) FROM records", [], |r| r.get(0))?;
    let common = ((docs as f64 * COMMON_SHARE) as i64).max(2_000);
    let mut with_df = Vec::new();
    for t in &q.terms {
        with_df.push((t.clone(), term_df(conn, t)?));
    }
    let has_rare = with_df.iter().any(|(_, df)| *df > 0 && *df <= common);
    let kept: Vec<(Term, i64)> = with_df
        .into_iter()
        .filter(|(_, df)| *df > 0 && (!has_rare || *df <= common))
        .collect();
    let estimate = kept
        .iter()
        .map(|(_, df)| *df)
        .fold(0i64, i64::saturating_add);
    Ok((
        Query {
            terms: kept.into_iter().map(|(t, _)| t).collect(),
        },
        estimate,
    ))
}

/// Runs a search. An empty query returns no hits.
pub fn search(store: &Store, q: &Query, opts: &SearchOptions) -> Result<Vec<Hit>, SearchError> {
    let conn = store.conn();
    let (q, estimate) = plan_terms(conn, q)?;
    if q.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = String::from(
        "SELECT r.id, bm25(fts, 1.0, 0.5), r.role, r.ts, r.session, r.flags
         FROM fts JOIN records r ON r.id = fts.rowid",
    );
    if opts.agent.is_some() || opts.project.is_some() || opts.session.is_some() {
        sql.push_str(" JOIN sessions se ON se.id = r.session");
    }
    if opts.machine.is_some() {
        sql.push_str(" LEFT JOIN nodes n ON n.id = r.origin");
    }
    sql.push_str(" WHERE fts MATCH ?1");
    let mut args: Vec<SqlValue> = vec![SqlValue::Text(q.to_fts())];
    // Each clause names its argument `?X`; it is numbered as it is pushed.
    let mut arg = |sql: &mut String, clause: &str, v: SqlValue| {
        args.push(v);
        sql.push_str(&clause.replace("?X", &format!("?{}", args.len())));
    };
    if let Some(a) = &opts.agent {
        arg(&mut sql, " AND se.agent = ?X", SqlValue::Text(a.clone()));
    }
    if let Some(p) = &opts.project {
        arg(
            &mut sql,
            " AND instr(se.project, ?X) > 0",
            SqlValue::Text(p.clone()),
        );
    }
    if let Some(m) = &opts.machine {
        arg(
            &mut sql,
            " AND (n.name = ?X OR r.origin = ?X)",
            SqlValue::Text(m.clone()),
        );
    }
    if let Some(t) = opts.since_ms {
        arg(&mut sql, " AND r.ts >= ?X", SqlValue::Integer(t));
    }
    if let Some(s) = &opts.session {
        arg(
            &mut sql,
            " AND substr(se.session_id, 1, length(?X)) = ?X",
            SqlValue::Text(s.clone()),
        );
    }
    if !opts.roles.is_empty() {
        let names: Vec<String> = opts
            .roles
            .iter()
            .map(|r| format!("'{}'", r.as_str()))
            .collect();
        sql.push_str(&format!(" AND r.role IN ({})", names.join(",")));
    }
    if estimate > SCAN_LIMIT {
        sql.push_str(&format!(" ORDER BY fts.rowid DESC LIMIT {SCAN_LIMIT}"));
    } else {
        sql.push_str(&format!(" ORDER BY 2 LIMIT {CANDIDATES}"));
    }
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
        Ok(rank::Candidate {
            record_id: r.get(0)?,
            bm25: r.get(1)?,
            role: r.get(2)?,
            ts: r.get(3)?,
            session_row: r.get(4)?,
            flags: r.get(5)?,
        })
    })?;
    let mut cands = Vec::new();
    for row in rows {
        cands.push(row?);
    }
    let ranked = rank::rank(cands, opts);
    let words = q.highlight_words();
    let mut hits = Vec::with_capacity(ranked.len());
    for top in ranked {
        if let Some(hit) = hit_details(conn, &top, &words)? {
            hits.push(hit);
        }
    }
    Ok(hits)
}

/// Fetches what a hit shows: text for the snippet, session, machine, source.
fn hit_details(
    conn: &rusqlite::Connection,
    top: &rank::Ranked,
    words: &[String],
) -> rusqlite::Result<Option<Hit>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached(
        "SELECT r.role, r.ts, r.flags, r.text, r.offset, se.session_id, se.agent, se.project, se.title,
                COALESCE(n.name, r.origin), src.path
         FROM records r
         JOIN sessions se ON se.id = r.session
         LEFT JOIN nodes n ON n.id = r.origin
         LEFT JOIN sources src ON src.id = r.source
         WHERE r.id = ?1",
    )?
    .query_row([top.record_id], |r| {
        let text = codec::decode(&r.get::<_, Vec<u8>>(3)?, r.get(2)?);
        Ok(Hit {
            snippet: snippet::make(&text, words, 200),
            role: r.get(0)?,
            time: r.get::<_, Option<i64>>(1)?.and_then(rank::rfc3339),
            offset: r.get(4)?,
            session_id: r.get(5)?,
            agent: r.get(6)?,
            project: r.get(7)?,
            title: r.get(8)?,
            machine: r.get(9)?,
            source: r.get(10)?,
            score: top.score,
            matches: top.matches,
            record_id: top.record_id,
        })
    })
    .optional()
}

/// Parses `--since`: a duration back from `now_ms` (`90m`, `36h`, `7d`, `2w`)
/// or a date (`2026-01-31`) or an RFC 3339 time.
pub fn parse_since(s: &str, now_ms: i64) -> Option<i64> {
    let s = s.trim();
    let unit_ms = |u: &str| -> Option<i64> {
        Some(match u {
            "s" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return None,
        })
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if split > 0
        && split < s.len()
        && let (Ok(n), Some(u)) = (s[..split].parse::<i64>(), unit_ms(&s[split..]))
    {
        return Some(now_ms - n.saturating_mul(u));
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
    }
}
