//! The lexical tier of a planned search: each concept of the question
//! (a term as written, a plain word's stem) looked up in the full-text
//! indexes, its newest matches scored by BM25 with a term frequency of
//! one, the best of them that the filter allows handed to [`rank`] with
//! their ranker columns, and a named period's own records added.
//!
//! Reads go through the store's read API (`store::candidates`,
//! `store::filter`, `store::ranker`, `store::period`); nothing here writes
//! SQL or judges the meaning tier.

use super::plan::Plan;
use super::query::{Query, Term};
use super::screen::Screen;
use super::{SearchError, df, expand, glossary, passage, projects, rank};
use crate::store::ranker::{Columns, Facts};
use crate::store::{Filter, Store, StoreError, runs};
use crate::text::is_cjk;

/// How many of a concept's best-scored matches go to the ranker.
pub(super) const CANDIDATES: usize = 600;

/// When a query could match more records than this, only the newest this
/// many matches are scored: search cost stays bounded however large the
/// memory grows, and very common words cannot stall it. (Each one costs a
/// length look-up that its neighbours mostly share: see `store::ranker::Facts`.)
pub(super) const SCAN_LIMIT: i64 = 8_000;

/// How many of a concept's newest matches a filtered search reaches back
/// through for those its filters allow (when the newest [`SCAN_LIMIT`]
/// gave too few): the reach-back stops there however few it found, so a
/// rare filter over a common word does not read every match. Not for a
/// filter on the time (see [`reach_of`]).
pub(super) const REACH_LIMIT: usize = 32_000;

/// How far a search with `filter` reaches back through a concept's matches
/// ([`REACH_LIMIT`]). A filter on the time reaches back through all of
/// them: record ids follow the order in which histories were read, which
/// for a history read whole at once (a first index, a peer's first sync)
/// need not be the order of the records' times, so the newest matches by
/// id can all be older than the filter's time while older ids hold the
/// answer. Its screen rules out the sessions that ended before the time
/// without their rows.
pub(super) fn reach_of(filter: &Filter) -> usize {
    match filter.since_ms {
        Some(_) => usize::MAX,
        None => REACH_LIMIT,
    }
}

/// A word in more than this share of all records is a stop word for this
/// corpus: dropped when the query has rarer words.
const COMMON_SHARE: f64 = 0.05;

/// Drops terms that are too common to tell records apart when rarer terms
/// exist, and terms found nowhere; returns the rest with how many records
/// each matches (an upper bound).
fn plan_terms(df: &mut df::Frequencies, q: &Query) -> Result<(Query, Vec<i64>), StoreError> {
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

/// `q` with each plain word the history says only in its other spelling
/// (`text::other_spelling`: "recognized" for a typed "recognised") in that
/// spelling, and the plain words it says in both, each with its other.
fn respelled(
    freq: &mut df::Frequencies,
    q: &Query,
    index: df::Index,
) -> Result<(Query, Vec<(String, String)>), StoreError> {
    let mut out = q.clone();
    let mut both = Vec::new();
    for w in &q.stems {
        let Some(v) = crate::text::other_spelling(w) else {
            continue;
        };
        if freq.token(index, &v)? == 0 {
            continue;
        }
        match freq.token(index, w)? {
            0 => out = out.respelled(w, &v),
            _ => both.push((w.clone(), v)),
        }
    }
    Ok((out, both))
}

/// A word of the question, the English words it stands for, and how
/// many records the rarest of them matches.
type Translated = (Term, Vec<&'static str>, i64);

/// The terms of `terms` that translate to English words this history
/// holds (`text::translations_of`; a word of another language, or two
/// CJK characters), at most [`expand::MOST_TRANSLATED`]: each with those
/// words and how many records the rarest of them matches.
fn translated(
    freq: &mut df::Frequencies,
    terms: &[Term],
    index: df::Index,
) -> Result<Vec<Translated>, StoreError> {
    let mut out = Vec::new();
    for t in terms {
        let key = match t {
            Term::Phrase(p) if p.len() == 1 => p[0].clone(),
            Term::Phrase(p) if p.len() == 2 && p.iter().all(|c| c.chars().all(is_cjk)) => {
                p.concat()
            }
            _ => continue,
        };
        let mut english = Vec::new();
        let mut least = i64::MAX;
        for e in crate::text::translations_of(&key) {
            let df = freq.token(index, e)?;
            if df > 0 {
                english.push(e);
                least = least.min(df);
            }
        }
        if !english.is_empty() && !out.iter().any(|(o, _, _)| o == t) {
            out.push((t.clone(), english, least));
        }
        if out.len() == expand::MOST_TRANSLATED {
            break;
        }
    }
    Ok(out)
}

/// The terms of `terms` that end a kind of developer tool the glossary
/// lists ("client" of "http client", "bundler"), with the tools of that
/// kind this history names (`glossary::kinds_named`, at most
/// [`glossary::MOST_TOOLS`] each, none matching more than
/// [`expand::MOST_MATCHES`] records) and how many records the rarest of
/// them matches.
fn tools_named(freq: &mut df::Frequencies, terms: &[Term]) -> Result<Vec<Translated>, StoreError> {
    let mut out = Vec::new();
    for (head, tools) in glossary::kinds_named(terms) {
        let mut found = Vec::new();
        let mut least = i64::MAX;
        for tool in tools {
            if let Some(df) = freq.rare(df::Index::Exact, tool, expand::MOST_MATCHES)?
                && df > 0
            {
                found.push(tool);
                least = least.min(df);
            }
            if found.len() == glossary::MOST_TOOLS {
                break;
            }
        }
        if !found.is_empty() {
            out.push((terms[head].clone(), found, least));
        }
    }
    Ok(out)
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

/// The candidates of one concept (`expr` on `index`, matching about `df`
/// of `docs` records), each with its score (higher is better).
///
/// Its newest [`SCAN_LIMIT`] matches are taken (all of them, for most
/// concepts): the cost stays bounded however large the memory grows.
/// Each is scored by BM25 with a term frequency of one: the weight from
/// the planner's `df`, the length from `store::ranker::Facts` against the newest
/// records' average length. The best [`CANDIDATES`] are returned, best
/// first, for the ranker; only they are looked up in `records` (by the
/// caller, and only those no concept found before).
///
/// A filtered search takes the same matches and looks them up best first,
/// filters and all, until [`CANDIDATES`] pass ([`allowed_best`]): a common
/// word's thousands of matches are not all read from `records`.
/// Only when fewer pass and the concept has older matches than those does
/// it reach back: then its candidates are the best of the newest
/// [`SCAN_LIMIT`] matches the filters allow among its newest `reach`
/// ([`REACH_LIMIT`] in a search), found through the search's [`Screen`]
/// where it can rule records out by their session, time or role
/// ([`newest_allowed`]), else each read through a join.
///
/// Not FTS5's `bm25()`, which reads a page of `fts_docsize` per match;
/// a word counted once per record also ranked better on the recall set.
pub(super) fn concept_candidates(
    store: &Store,
    lengths: &mut Facts<'_>,
    concept: Concept<'_>,
    (df, docs): (i64, i64),
    filter: &Filter,
    (known, screen): (&dyn Fn(i64) -> bool, &mut Screen<'_>),
    reach: usize,
) -> Result<Vec<Scored>, SearchError> {
    let Concept {
        index,
        expr,
        counted,
    } = concept;
    // The newest SCAN_LIMIT matches: all of them when the planner's count
    // says so, and a bound all the same where it is only an estimate (a
    // stem is planned with its word's count).
    let found: Vec<(i64, FilterColumns)> = match counted {
        // Read already, when the word's frequency was counted.
        Some(ids) => ids.iter().map(|&id| (id, None)).collect(),
        None => store
            .newest_matches(index, &expr, SCAN_LIMIT)?
            .into_iter()
            .map(|id| (id, None))
            .collect(),
    };
    let weight = rank::bm25_idf(docs, df);
    if filter.unfiltered() {
        return Ok(best_of(scored(lengths, found, weight)?, CANDIDATES));
    }
    let older = found.len() as i64 >= SCAN_LIMIT;
    let mut all = scored(lengths, found, weight)?;
    all.sort_unstable_by(best_first);
    let kept = allowed_best(store, all, filter, known, (screen, lengths))?;
    if kept.len() >= CANDIDATES || !older {
        return Ok(kept);
    }
    // Reaching back: the newest matches the filters allow, among the
    // newest `reach`. Where the screen can rule records out (by session,
    // time or role), it tells which without their rows (see
    // `newest_allowed`).
    if screen.prunes() {
        let found = newest_allowed(store, (index, &expr), (screen, lengths), filter, reach)?;
        return Ok(best_of(scored(lengths, found, weight)?, CANDIDATES));
    }
    // Else with the records' columns the join reads.
    let found = store
        .allowed_matches((index, &expr), filter, reach, SCAN_LIMIT)?
        .into_iter()
        .map(|(id, cols)| (id, Some(Box::new(cols))))
        .collect();
    Ok(best_of(scored(lengths, found, weight)?, CANDIDATES))
}

/// The newest [`SCAN_LIMIT`] matches of `expr` on `table` that the
/// filters allow, among its newest `reach` matches, newest first: those
/// the `screen` finds allowed, and those it neither allows nor rules out
/// whose rows pass. The same records as the join of those matches with
/// `records`, without reading a row for most. Only records whose rows were read come
/// with their columns.
fn newest_allowed(
    store: &Store,
    (index, expr): (df::Index, &str),
    (screen, bytes): (&mut Screen<'_>, &mut Facts<'_>),
    filter: &Filter,
    reach: usize,
) -> Result<Vec<(i64, FilterColumns)>, SearchError> {
    let mut check = store.row_check(filter)?;
    // Reaching back through every match, only the stretches of ids that
    // may hold an allowed record are read, newest first: the same matches
    // in the same order, less those the screen would rule out by their
    // session. With a bounded reach every match counts toward it, so all
    // are read.
    let stretches = match reach {
        usize::MAX => screen.stretches(),
        _ => None,
    };
    let mut found = Vec::new();
    let seen = std::cell::Cell::new(0usize);
    // The matches a batch at a time, so the screen reads their role bytes
    // at once (`Screen::roles_ahead`).
    store.match_batches(
        (index, expr),
        stretches.as_deref(),
        || SCREEN_BATCH.min(reach - seen.get()),
        |batch| {
            let roles = screen.roles_ahead(batch);
            for (&id, role) in batch.iter().zip(roles) {
                if found.len() >= SCAN_LIMIT as usize || seen.get() >= reach {
                    return Ok(false);
                }
                seen.set(seen.get() + 1);
                match screen.verdict(bytes, id, role)? {
                    Some(true) => found.push((id, None)),
                    Some(false) => {}
                    None => {
                        if let Some(cols) = check.columns(id)? {
                            found.push((id, Some(Box::new(cols))));
                        }
                    }
                }
            }
            Ok::<bool, SearchError>(found.len() < SCAN_LIMIT as usize && seen.get() < reach)
        },
    )?;
    Ok(found)
}

/// Matches a reach back reads before the screen judges them, their role
/// bytes read at once from the roles file.
const SCREEN_BATCH: usize = 1_024;

/// Best first; of equal scores, the newer (ids are unique, so the order
/// is total).
fn best_first(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(b.1.cmp(&a.1))
}

/// The best `n` of `scored`, best first (only they are put in order).
pub(super) fn best_of(mut scored: Vec<Scored>, n: usize) -> Vec<Scored> {
    if scored.len() > n {
        scored.select_nth_unstable_by(n, best_first);
        scored.truncate(n);
    }
    scored.sort_unstable_by(best_first);
    scored
}

/// Each match scored by BM25 with a term frequency of one, `weight` being
/// the concept's idf: its length from `store::ranker::Facts` against the newest
/// records' average length.
pub(super) fn scored(
    lengths: &mut Facts<'_>,
    found: Vec<(i64, FilterColumns)>,
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
/// others' (`offer`). The look-ups go a
/// batch at a time in id order, so that a page read for one is still
/// cached for its neighbours; a batch is no larger than the records still
/// needed (at least 64), so few more are read than pass.
fn allowed_best(
    store: &Store,
    scored: Vec<Scored>,
    filter: &Filter,
    known: &dyn Fn(i64) -> bool,
    (screen, bytes): (&mut Screen<'_>, &mut Facts<'_>),
) -> Result<Vec<Scored>, SearchError> {
    let mut check = store.row_check(filter)?;
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
            if let Some(cols) = check.columns(id)? {
                kept.push((score, id, Some(Box::new(cols))));
            }
        }
    }
    Ok(best_of(kept, CANDIDATES))
}

/// A concept's candidate: its score, its record id, and the record's
/// columns when a filter made the query read them.
pub(super) type Scored = (f64, i64, FilterColumns);

/// A candidate's columns when a filter made the query read them: boxed,
/// as most candidates come without (a concept's thousands of matches are
/// listed twice over, and unboxed columns made each entry four times the
/// size, its pages faulted in by every fresh search).
pub(super) type FilterColumns = Option<Box<Columns>>;

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
        c.add_part(k, score);
    }
    Ok(())
}

/// One concept to look up: its FTS5 expression on `index`, and its newest
/// matches when the planner read them already (a single word or stem).
pub(super) struct Concept<'a> {
    pub(super) index: df::Index,
    pub(super) expr: String,
    pub(super) counted: Option<&'a [i64]>,
}

/// Keeps the stem words that match something and are not too common (when
/// rarer ones exist); returns them with how many records each matches.
fn plan_stems(
    df: &mut df::Frequencies,
    words: &[String],
) -> Result<(Vec<String>, Vec<i64>), StoreError> {
    let mut with_df = Vec::new();
    for w in words {
        with_df.push((w.clone(), df.token(df::Index::Stem, w)?));
    }
    Ok(telling(with_df, df.docs()).into_iter().unzip())
}

/// What the lexical tier found: every session its words match, best
/// first; the words to highlight; and the question's words (see
/// [`passage::Word`]) that match at most [`passage::MOST_MATCHES`]
/// records, rarest first, with their counts.
pub(super) type Found = (Vec<rank::Ranked>, Vec<String>, Vec<passage::Word>);

/// The lexical tier of `plan` ([`Found`]). `pre` is the run map read up
/// front (see [`Plan::runs_up_front`](super::plan::Plan::runs_up_front)).
pub(super) fn run(
    store: &Store,
    plan: &Plan<'_>,
    pre: Option<&runs::RunMap>,
) -> Result<Found, SearchError> {
    let empty = (Vec::new(), Vec::new(), Vec::new());
    let (period, filter) = (&plan.period, &plan.filter);
    if plan.words.is_empty() {
        return Ok(empty);
    }
    let mut freq = df::Frequencies::new(store)?;
    // A hyphenated compound stands also for its words ("Ledger-API" where
    // the sessions say "ledger" and "the API").
    let mut loose = Vec::new();
    for t in plan.words.compounds() {
        if let Term::Phrase(p) = t {
            loose.extend(p.iter().cloned());
        }
    }
    let widened = plan.words.with_words(&loose);
    // Asked once for the stems and spellings here and the neighbours' stems below.
    let stem_index = store.has_stem_index()?;
    let spelling_index = match stem_index {
        true => df::Index::Stem,
        false => df::Index::Exact,
    };
    let (respelled, also_spelled) = respelled(&mut freq, &widened, spelling_index)?;
    let q = &respelled;
    let (mut qx, mut dfs) = plan_terms(&mut freq, q)?;
    let mut rare: Vec<passage::Word> = (qx.terms.iter().zip(&dfs))
        .filter_map(|(t, &df)| match t {
            Term::Phrase(p) if df <= passage::MOST_MATCHES => Some((df, p.clone())),
            _ => None,
        })
        .collect();
    rare.sort();
    // A word that is already very common as written gains nothing from its
    // stem but the cost of a second scan: look up stems of the others only.
    let mut stem_words = Vec::new();
    for w in &q.stems {
        if freq.token(df::Index::Exact, w)? <= SCAN_LIMIT {
            stem_words.push(w.clone());
        }
    }
    let (mut stems, mut stem_dfs) = if !stem_words.is_empty() && stem_index {
        plan_stems(&mut freq, &stem_words)?
    } else {
        (Vec::new(), Vec::new())
    };
    // Words of another language, with the English words they translate
    // to that this history holds: they stand for them below, looked up
    // once each, by stem where the index has stems (their other forms
    // too).
    let translation_index = match stem_index {
        true => df::Index::Stem,
        false => df::Index::Exact,
    };
    let translations = match plan.embedder {
        Some(_) => translated(&mut freq, &q.terms, translation_index)?,
        None => Vec::new(),
    };
    // Kinds of developer tools the question names, with the tools of that
    // kind the history names: they stand for the kind as translations do.
    let tools = match plan.embedder {
        Some(_) => tools_named(&mut freq, &q.terms)?,
        None => Vec::new(),
    };
    let words_found =
        !qx.is_empty() || !stems.is_empty() || !translations.is_empty() || !tools.is_empty();
    // Words that match nothing find nothing, unless the question names a
    // period: then what was said in that period is the answer.
    if !words_found && period.is_none() {
        return Ok(empty);
    }
    if plan.dates_only || !words_found {
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
    // A translated word (or a kind of tool) the history never says is a
    // part of the question all the same, as rare as its rarest translation
    // (or tool).
    if !plan.dates_only {
        for (t, _, df) in translations.iter().chain(&tools) {
            if !concepts.iter().any(|c| c.0.as_ref() == Some(t)) {
                concepts.push((Some(t.clone()), None, *df));
            }
        }
    }
    // A pasted page of text: the rarest words carry the meaning.
    concepts.sort_by_key(|c| c.2);
    concepts.truncate(rank::MAX_CONCEPTS);
    let mut weights: Vec<f64> = concepts.iter().map(|c| idf(c.2)).collect();
    // A project the question names is said in every record of its
    // sessions: the word's own concept, or one of its own.
    let mut projects = Vec::new();
    for named in projects::named(store, &q.text, docs / 2)? {
        let said = |c: &(Option<Term>, Option<String>, i64)| match &c.0 {
            Some(Term::Phrase(p)) => p.len() == 1 && p[0] == named.name,
            _ => false,
        };
        let k = match concepts.iter().position(said) {
            Some(k) => k,
            None if weights.len() < rank::MAX_COVERED => {
                weights.push(idf(named.records));
                weights.len() - 1
            }
            None => continue,
        };
        let score = rank::bm25_idf(docs, named.records) * rank::PROJECT_WEIGHT;
        projects.push((k, score, named.sessions));
    }
    let mut lengths = store.facts()?;
    let mut screen = Screen::new(store, filter, pre)?;
    // Only a filtered concept asks the screen (an unfiltered search would
    // open and map the file for nothing).
    if !filter.unfiltered() {
        screen.read_roles(store.roles_file());
    }
    // Keyed by record id, never by input: the fast hash is safe here.
    let mut by_id = ById::default();
    // A record a concept found before (its stem's matches hold most of its
    // word's) is not looked up again. The columns come from the flat file
    // where it has them: one small read each instead of a look-up in the
    // table.
    let mut columns = store.ranker_columns()?;
    screen.columns_elsewhere(columns.reads_file());
    let mut add = |by_id: &mut ById, mut scored: Vec<Scored>, k: usize, weight: f64| {
        // In id order, the look-ups walk the records' table from one end
        // to the other, and one whose page an earlier look-up read finds
        // it still cached. The order offered in changes nothing else.
        scored.sort_unstable_by_key(|s| s.1);
        for (score, id, cols) in scored {
            offer(by_id, id, Some((k, score * weight)), || {
                if let Some(cols) = cols {
                    return Ok(Some(*cols));
                }
                Ok(columns.columns(id)?)
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
                store,
                &mut lengths,
                concept,
                (df, docs),
                filter,
                filters,
                reach_of(filter),
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
        // The word's other spelling, where the history says both, is the
        // same word: looked up as this concept, once (by stem, where the
        // index has stems: its other forms too), at the word's weight.
        let word = match (exact, stem) {
            (_, Some(w)) => Some(w),
            (Some(Term::Phrase(p)), None) if p.len() == 1 => Some(&p[0]),
            _ => None,
        };
        let other = also_spelled.iter().find(|(w, _)| Some(w) == word);
        if let Some((_, v)) = other {
            let index = spelling_index;
            let expr = match index {
                df::Index::Exact => df::token_expr(v),
                df::Index::Stem => Query::to_stem_fts(std::slice::from_ref(v)),
            };
            let df = freq.token(index, v)?;
            let concept = Concept {
                index,
                expr,
                counted: freq.newest(index, v),
            };
            look_up(&mut by_id, concept, (k, df, 1.0))?;
        }
    }
    // A prose question's words stand also for their neighbours in the
    // meaning table (`expand`): "kids" finds "children", at a lower weight
    // and as the same part of the question; a word of another language
    // (or two CJK characters) stands also for its English translations.
    if plan.embedder.is_some() {
        let words = concepts
            .iter()
            .enumerate()
            .filter_map(|(k, c)| match c {
                (_, Some(w), _) => Some((k, w)),
                (Some(Term::Phrase(p)), None, _) if p.len() == 1 => Some((k, &p[0])),
                _ => None,
            })
            .take(expand::MOST_WORDS)
            .flat_map(|(k, w)| expand::neighbours_of(w).map(move |n| (k, n, None)));
        let mut translated = Vec::new();
        for (list, index) in [
            (&translations, translation_index),
            (&tools, df::Index::Exact),
        ] {
            for (k, c) in concepts.iter().enumerate() {
                if let Some((_, words, _)) = list.iter().find(|t| c.0.as_ref() == Some(&t.0)) {
                    translated.extend(words.iter().map(|e| (k, *e, Some(index))));
                }
            }
        }
        // `None`: a neighbour; else a translation or a tool, looked up in
        // that index.
        for (k, stand_in, given) in words.chain(translated) {
            let neighbour = given.is_none();
            let lookups = match given {
                None => &[
                    (df::Index::Exact, expand::WEIGHT),
                    (df::Index::Stem, expand::WEIGHT * rank::STEM_WEIGHT),
                ][..],
                Some(index) => &[(index, expand::WEIGHT)][..],
            };
            for &(index, weight) in lookups {
                if index == df::Index::Stem && !stem_index {
                    continue;
                }
                // A neighbour common in this history says little and
                // would cost a scan of its matches; a translation is the
                // question's own word, looked up however common it is (at
                // the neighbours' weight all the same).
                let df = match neighbour {
                    true => freq.rare(index, stand_in, expand::MOST_MATCHES)?,
                    false => Some(freq.token(index, stand_in)?),
                };
                let Some(df) = df else {
                    continue;
                };
                if df == 0 {
                    continue;
                }
                let expr = match index {
                    df::Index::Exact => df::token_expr(stand_in),
                    df::Index::Stem => Query::to_stem_fts(&[stand_in.to_string()]),
                };
                let concept = Concept {
                    index,
                    expr,
                    counted: freq.newest(index, stand_in),
                };
                look_up(&mut by_id, concept, (k, df, weight))?;
            }
        }
    }
    if let Some(p) = period {
        // What was said in the named period, even in other words.
        for range in &p.ranges {
            for (id, role, ts, se, fl) in
                store.newest_in_period(*range, filter, PERIOD_CANDIDATES)?
            {
                offer(&mut by_id, id, None, || Ok(Some((role, ts, se, fl))))?;
            }
        }
    }
    for c in by_id.values_mut() {
        for (k, score, sessions) in &projects {
            if sessions.contains(&c.session_row) {
                c.add_part(*k, *score);
            }
        }
    }
    let oldest = store.oldest_session_ms()?;
    let span = rank::Span {
        oldest_ms: oldest.unwrap_or(plan.now_ms).min(plan.now_ms),
        now_ms: plan.now_ms,
    };
    let ranked = rank::rank(
        by_id.into_values().collect(),
        &weights,
        span,
        period.as_ref(),
    );
    let mut words = q.highlight_words();
    if let Some(p) = period {
        words.retain(|w| !p.words.contains(w));
    }
    // What a translation or another spelling found is shown as the
    // question's own words are (by its light stem, so "databases" shows
    // for "database").
    let english = translations
        .iter()
        .chain(&tools)
        .flat_map(|t| t.1.iter().copied());
    for e in english.chain(also_spelled.iter().map(|(_, v)| v.as_str())) {
        let stem = crate::text::light_stem(e);
        if stem.chars().count() >= 3 && !words.contains(&stem) {
            words.push(stem);
        }
    }
    Ok((ranked, words, rare))
}
