//! Search over the store, one straight line: [`plan`] (the question,
//! period and filter parsed once) → [`lexical`] (each concept's newest
//! matches, counted by [`df`], scored by BM25 with a term frequency of
//! one, filtered through the [`screen`], [`rank`]ed by session) beside
//! [`semantic`] (the meaning tier, on another thread) → [`fuse`] (by
//! reciprocal rank) → [`passage`] (a pasted passage's own sessions first)
//! → [`page`] (what the page of hits shows). Every read goes through the
//! store's read API; this module writes no SQL.

mod df;
mod expand;
mod fuse;
mod glossary;
mod id_set;
mod lexical;
mod page;
mod passage;
mod plan;
mod projects;
pub mod query;
pub mod rank;
mod screen;
pub mod semantic;
pub mod snippet;
mod spans;
pub mod when;

use serde::{Deserialize, Serialize};

use crate::record::Role;
use crate::store::{Filter, Store, StoreError};
pub use expand::neighbour_list;
use lexical::SCAN_LIMIT;
use plan::Plan;
pub use query::Query;

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
    /// The filters of these options, for the store's read API.
    pub fn filter(&self) -> Filter {
        Filter {
            agent: self.agent.clone(),
            project: self.project.clone(),
            machine: self.machine.clone(),
            since_ms: self.since_ms,
            roles: self.roles.clone(),
            session: self.session.clone(),
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
    /// The words the excerpts were cut around, for highlighting: the
    /// question's own and the English words its words of another
    /// language were looked up by. Empty from an older daemon.
    #[serde(default)]
    pub words: Vec<String>,
}

impl Page {
    /// The words to highlight in this page: those it names, else (a page
    /// from an older daemon, or one only the meaning tier found) the
    /// words of `question`.
    pub fn highlight_words(&self, question: &Query) -> Vec<String> {
        match self.words.is_empty() {
            true => question.highlight_words(),
            false => self.words.clone(),
        }
    }
}

/// Errors of a search.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for SearchError {
    fn from(e: rusqlite::Error) -> Self {
        SearchError::Store(StoreError::from(e))
    }
}

/// Runs a search. An empty query returns no hits.
pub fn search(store: &Store, q: &Query, opts: &SearchOptions) -> Result<Vec<Hit>, SearchError> {
    Ok(search_page(store, q, opts, 0)?.hits)
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
    let _snapshot = store.read_snapshot()?;
    let plan = Plan::new(q, opts);
    // The meaning tier opens the vector file, to scan it beside the
    // lexical tier.
    let prepared = semantic::prepare(store, &plan)?;
    let narrow = prepared.as_ref().is_some_and(|p| p.narrow());
    let runs = plan.runs_up_front(store, narrow)?;
    let (lexical, scanned) =
        semantic::alongside(prepared, || lexical::run(store, &plan, runs.as_ref()));
    let (lexical, words, rare) = lexical?;
    let mut ranked = fuse::blend(store, &plan, lexical, scanned, runs.as_ref())?;
    // A pasted passage said word for word somewhere: those sessions first.
    if let Some(p) = passage::of(q) {
        let said = passage::said(store, &p, &rare, &plan.filter, offset + opts.limit)?;
        ranked = passage::first(said, ranked);
    }
    page::page(store, ranked, words, (offset, opts.limit))
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
    use rusqlite::OptionalExtension;

    use super::lexical::{
        CANDIDATES, Concept, REACH_LIMIT, Scored, best_of, concept_candidates, reach_of, scored,
    };
    use super::screen::Screen;
    use super::*;
    use crate::record::Record;
    use crate::store::{codec, columns_file};

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
        opts.filter().push_joins(&mut sql);
        sql.push_str(" WHERE 1");
        let mut args = Vec::new();
        opts.filter().push_filters(&mut sql, &mut args);
        conn.prepare(&sql)
            .expect("prepare")
            .query_map(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// Every match of `expr` on `fts`, newest first, scored with `weight`.
    fn every_match_scored(store: &Store, expr: &str, weight: f64) -> Vec<Scored> {
        let conn = store.test_conn();
        let mut lengths = store.facts().expect("lengths");
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
    fn common_gadget(store: &Store) -> (i64, i64, f64, String) {
        let mut freq = df::Frequencies::new(store).expect("frequencies");
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

    /// The first ten hits for `q`, unfiltered.
    fn hits(store: &Store, q: &str) -> Vec<Hit> {
        let opts = SearchOptions {
            limit: 10,
            now_ms: NOW,
            ..SearchOptions::default()
        };
        search(store, &Query::parse(q), &opts).expect("search")
    }

    /// The sessions `q` finds with `limit` 5 at `NOW`, best first, the
    /// meaning tier's table `semantic` (none: off) and `--lexical` as
    /// given.
    fn sessions_found(
        store: &Store,
        q: &str,
        semantic: Option<&'static crate::embed::Embedder<'static>>,
        lexical_only: bool,
    ) -> Vec<String> {
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            semantic,
            lexical_only,
            ..SearchOptions::default()
        };
        search(store, &Query::parse(q), &opts)
            .expect("search")
            .into_iter()
            .map(|h| h.session_id)
            .collect()
    }

    fn first(store: &Store, q: &str) -> Hit {
        hits(store, q)
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
        let mut freq = df::Frequencies::new(&store).expect("frequencies");
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
        let conn = store.test_conn();
        let (df, docs, weight, expr) = common_gadget(&store);
        // The records a filter allows, read on their own.
        let allowed = |opts: &SearchOptions| allowed_by_rows(conn, opts);
        let got_with = |opts: &SearchOptions,
                        (up_front, elsewhere): (bool, bool),
                        reach: usize|
         -> Vec<(f64, i64)> {
            // Some records an earlier concept found, so known to pass.
            let passing = allowed(opts);
            let known = |id| id % 7 == 0 && passing.contains(&id);
            let mut lengths = store.facts().expect("lengths");
            let concept = Concept {
                index: df::Index::Exact,
                expr: expr.clone(),
                counted: None,
            };
            // Every run read up front, as for a narrow filter, or each as
            // a candidate needs it.
            let map = match up_front {
                true => store.allowed_session_runs(&opts.filter()).expect("map"),
                false => None,
            };
            let mut screen = Screen::new(&store, &opts.filter(), map.as_ref()).expect("screen");
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
                let mut twin = Screen::new(&store, &opts.filter(), map.as_ref()).expect("screen");
                let mut judge = Screen::new(&store, &opts.filter(), map.as_ref()).expect("screen");
                judge.columns_elsewhere(elsewhere);
                let mut ahead = Screen::new(&store, &opts.filter(), map.as_ref()).expect("screen");
                ahead.read_roles(columns_file::Bytes::roles(&store));
                let mut bytes = store.facts().expect("bytes");
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
                &store,
                &mut lengths,
                concept,
                (df, docs),
                &opts.filter(),
                filters,
                reach,
            )
            .expect("candidates")
            .into_iter()
            .map(|(score, id, cols)| {
                // Columns, where given (the ranker looks up the others),
                // are the record's own.
                if let Some((_, _, session, _)) = cols.as_deref() {
                    let own: i64 = conn
                        .query_row("SELECT session FROM records WHERE id = ?1", [id], |r| {
                            r.get(0)
                        })
                        .expect("row");
                    assert_eq!(*session, own, "{opts:?}: {id}");
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
        let all = every_match_scored(&store, &expr, weight);
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
        // So with only some role bytes in the columns file, or no file.
        let with_runs: Vec<_> = filters.iter().map(&got).collect();
        let every_other_role = "every other entry's role byte zeroed (and sealed)";
        let no_file = "the columns file removed";
        for cut in [
            "DELETE FROM record_runs WHERE first % 3 = 0",
            every_other_role,
            "DELETE FROM record_runs",
            no_file,
        ] {
            if cut == every_other_role {
                let nth = std::cell::Cell::new(0);
                columns_file::tests::rewrite_entries(&store, true, |e| {
                    nth.set(nth.get() + 1);
                    if nth.get() % 2 == 0 {
                        e[columns_file::ROLE_AT] = 0;
                    }
                });
            } else if cut == no_file {
                std::fs::remove_file(crate::store::Component::Columns.path(store.path()))
                    .expect("remove");
            } else {
                conn.execute(cut, []).expect("cut");
            }
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
        let conn = store.test_conn();
        let (df, docs, weight, expr) = common_gadget(&store);
        let got = |opts: &SearchOptions, up_front: bool| -> (Vec<(f64, i64)>, usize) {
            let mut lengths = store.facts().expect("lengths");
            let map = match up_front {
                true => store.allowed_session_runs(&opts.filter()).expect("map"),
                false => None,
            };
            assert_eq!(map.is_some(), up_front, "{opts:?}");
            let mut screen = Screen::new(&store, &opts.filter(), map.as_ref()).expect("screen");
            let stretches = screen.stretches().map_or(0, |s| s.len());
            let known = |_| false;
            let concept = Concept {
                index: df::Index::Exact,
                expr: expr.clone(),
                counted: None,
            };
            let found = concept_candidates(
                &store,
                &mut lengths,
                concept,
                (df, docs),
                &opts.filter(),
                (&known, &mut screen),
                reach_of(&opts.filter()),
            )
            .expect("candidates");
            (
                found.into_iter().map(|(sc, id, _)| (sc, id)).collect(),
                stretches,
            )
        };
        // Every match newest first, and what the rows say a concept keeps.
        let all = every_match_scored(&store, &expr, weight);
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
        let conn = store.test_conn();
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
        // The stamps from the rows (no columns file yet), then from the
        // columns file: the same verdicts.
        for file in [false, true] {
            if file {
                assert_eq!(store.write_columns().expect("columns"), top as u64);
            }
            for cut in [0, 3, 5, 8, 9, 20] {
                let since = NOW - 20 * HOUR + cut * HOUR + 5 * 60_000;
                for agent in [None, Some("codex")] {
                    let opts = SearchOptions {
                        since_ms: Some(since),
                        agent: agent.map(Into::into),
                        ..SearchOptions::default()
                    };
                    let mut screen = Screen::new(&store, &opts.filter(), None).expect("screen");
                    assert!(screen.prunes());
                    let mut bytes = store.facts().expect("bytes");
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
                        // Exactly what the row says, with or without the file.
                        assert_eq!(verdict, Some(!(other || early)), "{opts:?}: {id} {file}");
                        assert!(!ended || verdict == Some(false), "{opts:?}: {id}");
                        if verdict == Some(false) {
                            assert!(other || early, "{opts:?}: {id}");
                            out += 1;
                        }
                    }
                    // Every record before it and every undated one is out.
                    let ended = (1..=top)
                        .filter(|&id| of(id).is_some_and(|o| o.0.is_none_or(|t| t < since)))
                        .count() as i64;
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

    /// A prose question's word also finds its neighbours in the meaning
    /// table (`expand`), below the word itself; a question kept lexical
    /// (`--lexical`, a single word, no meaning tier) does not.
    #[test]
    fn a_question_finds_a_record_holding_only_a_neighbour_of_its_word() {
        let (_d, store) = store_with(&[
            rec(
                "children",
                Role::Assistant,
                Some(NOW - 40 * DAY),
                "the children were asleep by nine after the fair",
            ),
            rec(
                "other",
                Role::User,
                Some(NOW - DAY),
                "the fair opens at nine tomorrow",
            ),
            rec(
                "kids",
                Role::Assistant,
                Some(NOW - 90 * DAY),
                "the kids were asleep before the fair closed",
            ),
        ]);
        let ask = |q: &str, semantic: bool, lexical_only: bool| {
            sessions_found(
                &store,
                q,
                semantic.then(crate::embed::builtin),
                lexical_only,
            )
        };
        assert!(expand::neighbours_of("kids").any(|n| n == "children"));
        // Only one record says "kids"; the one that says "children" is
        // found through it, below the record that has the word itself, and
        // the one with neither is not found.
        assert_eq!(ask("where are the kids", true, false), ["kids", "children"]);
        // Without the expansion only the word's own record.
        assert_eq!(ask("where are the kids", true, true), ["kids"]);
        assert_eq!(ask("where are the kids", false, false), ["kids"]);
        // A single word is an exact look-up: never expanded.
        assert_eq!(ask("kids", true, false), ["kids"]);
        // A stop word has no neighbours: "where" finds nothing of "there".
        assert!(expand::neighbours_of("where").next().is_none());
    }

    /// The small test table as an embedder that lives for the test run.
    fn tiny_embedder() -> &'static crate::embed::Embedder<'static> {
        let table: &'static [u8] = Box::leak(crate::embed::tests::tiny().into_boxed_slice());
        Box::leak(Box::new(
            crate::embed::Embedder::from_bytes(table).expect("table"),
        ))
    }

    /// A question in another language finds an English session by the
    /// English words its own words translate to (`expand`), even where
    /// the meaning tier finds nothing (here a table that knows no Russian
    /// or Chinese word); kept lexical (`--lexical`), it does not.
    #[test]
    fn a_question_in_another_language_finds_english_words_it_translates_to() {
        let before =
            "we went through the cron schedule and the deploy script line by line. ".repeat(6);
        let (_d, store) = store_with(&[
            rec(
                "locked",
                Role::Assistant,
                Some(NOW - 10 * DAY),
                &format!(
                    "{before}Then the databases were locked under heavy writes, so the job retries"
                ),
            ),
            rec(
                "memory",
                Role::User,
                Some(NOW - 20 * DAY),
                "the server memory grows every day until the host restarts",
            ),
            rec(
                "garden",
                Role::User,
                Some(NOW - DAY),
                "the garden party moved to saturday",
            ),
        ]);
        let tiny = tiny_embedder();
        let ask = |q: &str, lexical_only: bool| sessions_found(&store, q, Some(tiny), lexical_only);
        assert_eq!(ask("ошибка базы данных под нагрузкой", false), ["locked"]);
        assert_eq!(ask("服务器内存每天都在涨", false), ["memory"]);
        assert!(ask("ошибка базы данных под нагрузкой", true).is_empty());
        assert!(ask("服务器内存每天都在涨", true).is_empty());
        // The excerpt shows where the translation matched, as it would
        // for the English word.
        let opts = SearchOptions {
            limit: 1,
            now_ms: NOW,
            semantic: Some(tiny),
            ..SearchOptions::default()
        };
        let page =
            search_page(&store, &Query::parse("ошибка базы данных"), &opts, 0).expect("search");
        let hit = &page.hits[0];
        assert!(
            hit.snippet.contains("databases were locked"),
            "{}",
            hit.snippet
        );
        // And the page names the word for the CLI and the browse page to
        // highlight, beside the question's own.
        let database = crate::text::light_stem("database");
        assert!(page.words.contains(&database), "{:?}", page.words);
        assert!(page.words.iter().any(|w| w == "ошибка"), "{:?}", page.words);
    }

    /// A question that names a kind of tool ("http client", "bundler")
    /// finds the session that names only the tool (`glossary`); kept
    /// lexical, it does not.
    #[test]
    fn a_kind_of_tool_finds_the_session_that_names_only_the_tool() {
        let (_d, store) = store_with(&[
            rec(
                "reqwest",
                Role::Assistant,
                Some(NOW - 60 * DAY),
                "pinned reqwest to 0.11 until axum moves to hyper 1",
            ),
            rec(
                "clients",
                Role::User,
                Some(NOW - 2 * DAY),
                "browser clients call the public API directly",
            ),
            rec(
                "vite",
                Role::Assistant,
                Some(NOW - 30 * DAY),
                "moved the web shop from webpack to vite: builds take 12 s",
            ),
            rec(
                "garden",
                Role::User,
                Some(NOW - DAY),
                "the garden party moved to saturday",
            ),
        ]);
        let tiny = tiny_embedder();
        let ask = |q: &str, lexical_only: bool| sessions_found(&store, q, Some(tiny), lexical_only);
        // The tool stands for "client" (below the word itself), so the
        // record that names it and what the question asks about wins.
        let client = ask("which http client did we pin", false);
        assert_eq!(
            client.first().map(String::as_str),
            Some("reqwest"),
            "{client:?}"
        );
        assert!(client.contains(&"clients".to_string()), "{client:?}");
        let stuck = ask("why are we stuck on the old http client", false);
        assert!(stuck.contains(&"reqwest".to_string()), "{stuck:?}");
        assert_eq!(ask("why did we pick that bundler", false), ["vite"]);
        // Kept lexical, the kind is only its words.
        assert_eq!(
            ask("why are we stuck on the old http client", true),
            ["clients"]
        );
        assert!(ask("why did we pick that bundler", true).is_empty());
        // The tool found is shown as the question's own words are.
        let opts = SearchOptions {
            limit: 1,
            now_ms: NOW,
            semantic: Some(tiny),
            ..SearchOptions::default()
        };
        let page = search_page(&store, &Query::parse("which bundler"), &opts, 0).expect("search");
        assert!(page.words.iter().any(|w| w == "vite"), "{:?}", page.words);
    }

    #[test]
    fn a_word_is_found_in_its_other_spelling() {
        let (_d, store) = store_with(&[
            rec(
                "us",
                Role::Assistant,
                Some(NOW - 90 * DAY),
                "the fx folder was not recognized as a package",
            ),
            rec(
                "gb",
                Role::User,
                Some(NOW - 2 * DAY),
                "my colour theme broke",
            ),
            rec("both", Role::User, Some(NOW - 3 * DAY), "the licence check"),
            rec("both", Role::User, Some(NOW - 3 * DAY), "a license file"),
            rec("other", Role::User, Some(NOW - DAY), "a package of folders"),
        ]);
        let ask = |q: &str| sessions_found(&store, q, None, false);
        // Said only the other way: looked up that way, and first.
        assert_eq!(ask("package recognised")[0], "us");
        assert_eq!(ask("color")[..], ["gb"]);
        // Said both ways: each spelling finds both records.
        let page = &hits(&store, "license")[0];
        assert_eq!((page.session_id.as_str(), page.matches), ("both", 2));
        // A quoted word is exact.
        assert!(ask("\"color\"").is_empty());
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
    fn a_project_the_question_names_counts_as_said_in_its_sessions() {
        let in_project = |session: &str, project: &str, text: &str| {
            let mut r = rec(session, Role::Assistant, Some(NOW - 30 * DAY), text);
            r.project = Some(project.into());
            r
        };
        let (_d, store) = store_with(&[
            // Never says "tzparse" or "web shop": only their projects do.
            in_project(
                "gap",
                "/home/dev/tzparse",
                "In the spring the gap of local times now returns an error to every caller.",
            ),
            in_project(
                "shop",
                "/home/dev/Web-Shop",
                "Moved the bundler from webpack to vite in the end, after long talks.",
            ),
            // The same words, shorter, in another project.
            in_project("other", "/home/dev/acme", "Spring gap returns an error."),
            in_project("build", "/home/dev/acme", "The bundler moved to vite."),
            // Started in a folder of tzparse, and in a folder of acme.
            in_project(
                "sub",
                "/home/dev/tzparse/fuzz",
                "The fuzzer found that an ambiguous fold hour returns the later offset.",
            ),
            in_project(
                "acmesub",
                "/home/dev/acme/fuzz",
                "Fuzzer: fold hour offsets.",
            ),
            // The home folder, which holds most projects: naming it says nothing.
            in_project(
                "home",
                "/home/dev",
                "Fold hour offsets, from the home folder.",
            ),
            in_project("srv", "/srv/tools", "Fold hour offsets."),
            // A project named by a word the question only begins.
            in_project(
                "upgrade",
                "/home/dev/infra",
                "Upgraded the main Postgres with pg_upgrade over the weekend; downtime was four minutes.",
            ),
            in_project("pgacme", "/home/dev/acme", "Postgres upgrade downtime."),
        ]);
        assert_eq!(
            first(&store, "fuzzer fold hour offset").session_id,
            "acmesub"
        );
        assert_eq!(
            first(&store, "tzparse fuzzer fold hour offset").session_id,
            "sub"
        );
        let order = |q: &str| {
            let found = hits(&store, q);
            found.into_iter().map(|h| h.session_id).collect::<Vec<_>>()
        };
        assert_eq!(
            order("fold hour offsets"),
            order("dev fold hour offsets"),
            "the home folder is named for nothing"
        );
        assert_eq!(first(&store, "spring gap error").session_id, "other");
        assert_eq!(
            first(&store, "spring gap error in tzparse").session_id,
            "gap"
        );
        assert_eq!(first(&store, "bundler vite").session_id, "build");
        assert_eq!(
            first(&store, "bundler vite in the web shop").session_id,
            "shop"
        );
        assert_eq!(first(&store, "bundler vite in web-shop").session_id, "shop");
        // "infrastructure" says the project "infra".
        assert_eq!(
            first(&store, "postgres upgrade downtime").session_id,
            "pgacme"
        );
        assert_eq!(
            first(&store, "infrastructure postgres upgrade downtime").session_id,
            "upgrade"
        );
        // A project alone finds nothing its words do not.
        assert!(order("webshop tzparse").is_empty());
    }

    #[test]
    fn a_hyphenated_compound_also_finds_its_words_apart() {
        let (_d, store) = store_with(&[
            rec(
                "apart",
                Role::User,
                Some(NOW - DAY),
                "The ledger service's API hangs under load.",
            ),
            rec(
                "other",
                Role::User,
                Some(NOW - DAY),
                "The weather was fine.",
            ),
        ]);
        assert_eq!(first(&store, "Ledger-API hangs").session_id, "apart");
        assert_eq!(hits(&store, "Ledger-API").len(), 1);
        // Identifiers and paths stay exact.
        assert!(hits(&store, "ledger_api").is_empty());
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

    /// The answer shown is a reply to the question shown: a reply to the
    /// user's next turn that matches better answers that turn instead.
    #[test]
    fn the_answer_shown_replies_to_the_question_shown() {
        let (_d, store) = store_with(&[
            rec(
                "s",
                Role::User,
                Some(NOW - DAY),
                "should we keep meilisearch for the search page or embed one?",
            ),
            rec(
                "s",
                Role::Assistant,
                Some(NOW - DAY + 1000),
                "Decision: we chose tantivy over meilisearch, so deploys stay a single binary.",
            ),
            rec(
                "s",
                Role::User,
                Some(NOW - DAY + 2000),
                "confirm it in one line",
            ),
            rec(
                "s",
                Role::Assistant,
                Some(NOW - DAY + 3000),
                "yes: meilisearch search out",
            ),
        ]);
        let hit = first(&store, "meilisearch search page");
        assert!(hit.snippet.contains("keep meilisearch"), "{}", hit.snippet);
        let answer = hit.answer_snippet.expect("answer");
        assert!(answer.contains("we chose tantivy"), "{answer}");
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
            store.test_conn().execute_batch(
                "DELETE FROM fts_stem; INSERT INTO meta(key, value) VALUES ('fts_stem_backfill', '0');",
            )
            .expect("reset");
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(first(&store, "pin").session_id, "s");
        assert_eq!(store.meta("fts_stem_backfill").expect("meta"), None);
    }

    /// A record written in Chinese is found by an English question
    /// through the English words of its character pairs, which only the
    /// index holds; a database indexed before that gets them on its next
    /// open, and one without CJK text has nothing to redo.
    #[test]
    fn an_english_question_finds_a_chinese_record_old_or_new() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        // "We decided to disable the order cache for now and read the
        // database directly."
        let zh = "我们决定先禁用订单缓存，直接读数据库。";
        {
            let mut store = Store::open(&path).expect("open");
            let mut ing = store.ingest("node").expect("ingest");
            ing.insert(&rec("zh", Role::Assistant, Some(NOW), zh), None)
                .expect("insert");
            ing.insert(
                &rec("en", Role::User, Some(NOW), "the weather was nice today"),
                None,
            )
            .expect("insert");
            ing.commit().expect("commit");
            let hit = first(&store, "why did we disable caching");
            assert_eq!(hit.session_id, "zh");
            // The stored text and its snippet are the record's own.
            assert!(hit.snippet.contains("禁用"), "{}", hit.snippet);
            assert!(!hit.snippet.contains("disable"), "{}", hit.snippet);
            // As a database indexed before the English words were added.
            let spaced: String = zh
                .chars()
                .map(|c| match crate::text::is_cjk(c) {
                    true => format!(" {c} "),
                    false => c.to_string(),
                })
                .collect();
            let conn = store.test_conn();
            let id: i64 = conn
                .query_row("SELECT min(id) FROM records", [], |r| r.get(0))
                .expect("the Chinese record, stored first");
            conn.execute("DELETE FROM fts WHERE rowid = ?1", [id])
                .expect("delete");
            conn.execute("DELETE FROM fts_stem WHERE rowid = ?1", [id])
                .expect("delete");
            conn.execute(
                "INSERT INTO fts(rowid, body, files) VALUES (?1, ?2, '')",
                rusqlite::params![id, spaced],
            )
            .expect("old body");
            conn.execute(
                "INSERT INTO fts_stem(rowid, body) VALUES (?1, ?2)",
                rusqlite::params![id, spaced],
            )
            .expect("old stems");
            conn.execute_batch("INSERT INTO meta(key, value) VALUES ('cjk_reindex', '0');")
                .expect("mark");
            assert!(hits(&store, "disable caching").is_empty());
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(first(&store, "why did we disable caching").session_id, "zh");
        assert_eq!(store.meta("cjk_reindex").expect("meta"), None);
        // Still found by its own characters.
        assert_eq!(first(&store, "缓存").session_id, "zh");

        // Without CJK in the index the mark goes at once.
        let other = dir.path().join("d.db");
        {
            let mut store = Store::open(&other).expect("open");
            let mut ing = store.ingest("node").expect("ingest");
            ing.insert(&rec("en", Role::User, Some(NOW), "plain english"), None)
                .expect("insert");
            ing.commit().expect("commit");
            store
                .test_conn()
                .execute_batch("INSERT INTO meta(key, value) VALUES ('cjk_reindex', '0');")
                .expect("mark");
        }
        let store = Store::open(&other).expect("reopen");
        assert_eq!(store.meta("cjk_reindex").expect("meta"), None);
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
        let (_d, mut store) = store_with(&recs);
        // Read with `pread`, against the mapped reader below.
        store.read_flat_files_per_search();
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
        // A daemon's reader maps the files (store::mapped): the same pages.
        let held = Store::open_read_only(store.path()).expect("read-only");
        assert_eq!(pages(&held), from_tables, "from the files mapped");

        // Every length read as the longest class (the pages sealed again,
        // as a writer would): the word tier's scores move, so it read them.
        let columns = crate::store::Component::Columns.path(store.path());
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
            if let Some(s) = crate::store::columns::Stamp::from_word(w) {
                let older = crate::store::columns::Stamp {
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

    /// A database from the build before the side tables went (their rows
    /// and pending backfill marks included) opens at the current version
    /// without them, and its filtered searches (role, since, project,
    /// session, and together) answer as they did before the upgrade, from
    /// the columns file and, without it, from the rows.
    #[test]
    fn an_old_database_loses_its_side_tables_and_answers_as_before() {
        const HOUR: i64 = 3_600_000;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let recs: Vec<Record> = (0..1_500i64)
            .map(|i| {
                let role = Role::ALL[(i % 4) as usize];
                let text = format!("gadget note {i} {}", "padding ".repeat((i % 13) as usize));
                let mut r = rec(
                    &format!("s{}", i % 23),
                    role,
                    Some(NOW - (1_500 - i) * HOUR),
                    &text,
                );
                r.project = Some(format!("/work/p{}", i % 23 % 3));
                r
            })
            .collect();
        let searches = [
            SearchOptions::default(),
            SearchOptions {
                roles: vec![Role::User],
                ..SearchOptions::default()
            },
            SearchOptions {
                since_ms: Some(NOW - 300 * HOUR),
                ..SearchOptions::default()
            },
            SearchOptions {
                project: Some("p1".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                agent: Some("claude-code".into()),
                session: Some("s1".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::Assistant, Role::ToolOutput],
                since_ms: Some(NOW - 900 * HOUR),
                project: Some("p2".into()),
                ..SearchOptions::default()
            },
        ];
        let answers = |store: &Store| -> Vec<Vec<String>> {
            searches
                .iter()
                .map(|opts| {
                    let opts = SearchOptions {
                        limit: 30,
                        now_ms: NOW,
                        lexical_only: true,
                        ..opts.clone()
                    };
                    let hits = search(store, &Query::parse("gadget"), &opts).expect("search");
                    for h in &hits {
                        let role_ok = opts.roles.is_empty()
                            || opts.roles.iter().any(|r| r.as_str() == h.role);
                        let p = h.project.as_deref().unwrap_or_default();
                        let project_ok =
                            opts.project.as_ref().is_none_or(|w| p.contains(w.as_str()));
                        assert!(role_ok && project_ok, "{opts:?}: {h:?}");
                    }
                    hits.iter().map(|h| format!("{h:?}")).collect()
                })
                .collect()
        };
        let before = {
            let mut store = Store::open(&path).expect("open");
            let mut ing = store.ingest("node").expect("ingest");
            for r in &recs {
                ing.insert(r, None).expect("insert");
            }
            ing.commit().expect("commit");
            assert_eq!(store.write_columns().expect("columns"), 1_500);
            answers(&store)
        };
        for (opts, hits) in searches.iter().zip(&before) {
            assert!(hits.len() >= 3, "{opts:?}: {hits:?}");
        }
        // As the build before left it: the side tables, filled, with a
        // backfill still pending, at the version before the one that
        // drops them.
        let dropping = crate::store::schema_migrations()
            .iter()
            .position(|m| m.contains("DROP TABLE IF EXISTS record_times"))
            .expect("the migration");
        {
            let conn = rusqlite::Connection::open(&path).expect("raw");
            conn.execute_batch(
                "CREATE TABLE record_lens(block INTEGER PRIMARY KEY, lens BLOB NOT NULL);
                 CREATE TABLE record_bytes(block INTEGER PRIMARY KEY, lens BLOB NOT NULL, roles BLOB);
                 CREATE TABLE record_times(block INTEGER PRIMARY KEY, times BLOB NOT NULL);
                 CREATE TABLE run_blocks(block INTEGER PRIMARY KEY, runs BLOB NOT NULL);
                 INSERT INTO run_blocks(block, runs) VALUES (0, x'01ffff');
                 INSERT INTO meta(key, value) VALUES ('times_backfill', '700');
                 INSERT INTO meta(key, value) VALUES ('run_blocks_backfill', '3');",
            )
            .expect("old tables");
            for block in 0..2i64 {
                conn.execute(
                    "INSERT INTO record_lens(block, lens) VALUES (?1, ?2)",
                    (block, vec![9u8; 1024]),
                )
                .expect("lens");
                conn.execute(
                    "INSERT INTO record_bytes(block, lens, roles) VALUES (?1, x'', ?2)",
                    (block, vec![codec::role_code(Role::User); 1024]),
                )
                .expect("roles");
            }
            conn.execute(
                "INSERT INTO record_times(block, times) VALUES (0, ?1)",
                [vec![1u8; 2048]],
            )
            .expect("times");
            conn.pragma_update(None, "user_version", dropping as i64)
                .expect("version");
        }
        let store = Store::open(&path).expect("upgrade");
        let conn = store.test_conn();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(version, i64::from(crate::store::SCHEMA_VERSION));
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master
                 WHERE name IN ('record_lens', 'record_bytes', 'record_times', 'run_blocks')",
                [],
                |r| r.get(0),
            )
            .expect("tables");
        assert_eq!(left, 0, "the side tables are gone");
        let marks: i64 = conn
            .query_row(
                "SELECT count(*) FROM meta WHERE key IN
                 ('lengths_backfill', 'roles_backfill', 'times_backfill', 'run_blocks_backfill')",
                [],
                |r| r.get(0),
            )
            .expect("marks");
        assert_eq!(marks, 0, "their backfill marks are gone");
        assert_eq!(answers(&store), before, "from the columns file");
        std::fs::remove_file(crate::store::Component::Columns.path(store.path())).expect("remove");
        assert_eq!(answers(&store), before, "from the rows");
        assert_eq!(store.write_columns().expect("anew"), 1_500);
        assert_eq!(answers(&store), before, "from the file written anew");
    }

    /// A panic message the passage tests paste.
    const PANIC: &str = "index out of bounds: the len is 3 but the index is 3";

    /// Sessions of `agent`: `fuzz`, whose long tool output says [`PANIC`]
    /// once, and twenty newer ones (`other0`..) whose short user records
    /// hold its rarer words alone, which outrank that output by words.
    fn panic_said_once(agent: &str) -> Vec<Record> {
        let filler = "running 12 tests for the lexer module ".repeat(20);
        let at = |session: &str, role, ts, text: &str| {
            let mut r = Record::new(agent, session, role, text);
            r.time_ms = Some(ts);
            r
        };
        let mut recs = vec![
            at(
                "fuzz",
                Role::User,
                NOW - 90 * DAY,
                "cargo fuzz found a crash in the lexer",
            ),
            at(
                "fuzz",
                Role::ToolOutput,
                NOW - 90 * DAY + 1,
                &format!("{filler} thread panicked at src/lexer.rs:57:21: {PANIC}"),
            ),
        ];
        for i in 0..20 {
            let text = format!("the bounds and the len of index {i}");
            recs.push(at(&format!("other{i}"), Role::User, NOW - i * DAY, &text));
        }
        recs
    }

    #[test]
    fn a_pasted_passage_finds_the_session_that_says_it_word_for_word() {
        // The panic message is in one session's tool output; twenty other
        // sessions have short user records with its rarer words alone,
        // which outrank a long tool output by words alone.
        let passage = PANIC;
        let recs = panic_said_once("claude-code");
        let (_dir, store) = store_with(&recs);
        let ask = |q: &str| sessions_found(&store, q, None, false);
        assert_eq!(ask(passage)[0], "fuzz");
        // The same words in another order say no passage: by its words
        // alone the session is not first.
        let reordered = "3 is the index but 3 is the len: out of bounds index";
        assert_ne!(ask(reordered)[0], "fuzz");
        // A filter the passage's record does not pass keeps it out.
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            roles: vec![Role::User],
            ..SearchOptions::default()
        };
        let users = search(&store, &Query::parse(passage), &opts).expect("search");
        assert!(users.iter().all(|h| h.role == "user"), "{users:?}");
        assert_ne!(users[0].session_id, "fuzz");
        // Quoted, it is an exact look-up already: the same first session.
        assert_eq!(ask(&format!("\"{passage}\""))[0], "fuzz");
    }

    #[test]
    fn a_pasted_line_of_chinese_or_of_common_code_words_finds_who_said_it() {
        // A line said once in a tool output, and many short user records
        // holding its words in another order, which outrank it by words.
        let chinese = "验证器字段不存在时处理继承场景";
        let code = "return self.width * self.height * self.depth";
        let filler = "running 12 tests for the lexer module ".repeat(20);
        let mut recs = vec![
            rec(
                "zh",
                Role::ToolOutput,
                Some(NOW - 90 * DAY),
                &format!("{filler} {chinese}"),
            ),
            rec(
                "py",
                Role::ToolOutput,
                Some(NOW - 90 * DAY),
                &format!("{filler} {code}"),
            ),
        ];
        for i in 0..20 {
            let text = "场景继承处理时不存在字段验证器";
            recs.push(rec(
                &format!("zh{i}"),
                Role::User,
                Some(NOW - i * DAY),
                text,
            ));
        }
        // Each of the line's identifiers in more than 2,000 records, two
        // of them at a time.
        let pairs = [
            "return self.width * self.height",
            "return self.height * self.depth",
            "return self.depth * self.width",
        ];
        for i in 0..3_150 {
            let text = pairs[i as usize % 3];
            recs.push(rec(&format!("py{i}"), Role::User, Some(NOW - i), text));
        }
        let (_dir, store) = store_with(&recs);
        let ask = |q: &str| sessions_found(&store, q, None, false);
        assert_eq!(ask(chinese)[0], "zh");
        assert_eq!(ask(code)[0], "py");
    }

    #[test]
    fn a_pasted_passage_is_found_under_a_filter_past_newer_records_it_leaves_out() {
        // The passage is said in one codex session; other codex sessions
        // hold its rarer words alone, and sixty newer sessions of another
        // agent hold every word of it in another order, so the newest
        // records holding its words are all ones `--agent codex` leaves out.
        let passage = PANIC;
        let mut recs = panic_said_once("codex");
        for i in 0..60 {
            let text = "3 is the index but 3 is the len: out of bounds index";
            recs.push(rec(&format!("noise{i}"), Role::User, Some(NOW - i), text));
        }
        let (_dir, store) = store_with(&recs);
        let opts = SearchOptions {
            limit: 5,
            now_ms: NOW,
            agent: Some("codex".into()),
            ..SearchOptions::default()
        };
        let found = search(&store, &Query::parse(passage), &opts).expect("search");
        assert!(found.iter().all(|h| h.agent == "codex"), "{found:?}");
        assert_eq!(found[0].session_id, "fuzz", "{found:?}");
    }
}
