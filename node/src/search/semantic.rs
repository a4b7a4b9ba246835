//! The meaning tier of search: a brute-force scan of the records' int8
//! vectors for the query's vector, fused with the lexical ranking by
//! reciprocal rank.
//!
//! Exact look-ups (identifiers, error codes, paths, quoted phrases) stay
//! lexical: their words are the point, and a near-miss in meaning would
//! only push the exact match down. A question with no lexical match at all
//! is answered from the vectors alone. [`fuse`](super::fuse) blends what
//! this tier finds with the lexical ranking.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::id_set::IdSet;
use super::plan::Plan;
use super::screen::Screen;
use super::{SearchError, SearchOptions};
use crate::embed::{Embedder, Scorer};
use crate::store::{Filter, Store, StoreError, runs, vector_file};

/// Records the vector scan hands to fusion.
const VECTOR_RECORDS: usize = 200;
/// Below this cosine a record is not considered related at all (0.25,
/// 0.4 and 0.5 tried on the tune split: 0.4 keeps recall and drops most
/// unrelated sessions).
const MIN_SIMILARITY: f32 = 0.4;

/// Han characters a question without spaces may hold and still be one
/// word: a Chinese word is one to four of them, a question a dozen.
const HAN_WORD: usize = 4;

/// Whether a text without spaces reads as one word rather than a Chinese
/// or Japanese sentence, which leaves no space between its words: at most
/// [`HAN_WORD`] Han characters and no hiragana (Japanese grammar is
/// written in it; a katakana loanword alone is one word).
fn unspaced_word(raw: &str) -> bool {
    let han = raw.chars().filter(|&c| crate::text::is_han(c)).count();
    han <= HAN_WORD && !raw.chars().any(crate::text::is_hiragana)
}

/// True when the query names something exactly: a single word, a quoted
/// phrase, or a word that is an identifier, code, path or number (not a
/// year) rather than prose (see [`unspaced_word`] for Chinese and Japanese).
pub fn is_exact_lookup(raw: &str) -> bool {
    let one_word = raw.split_whitespace().count() == 1 && unspaced_word(raw);
    if raw.contains('"') || one_word {
        return true;
    }
    raw.split_whitespace().any(|w| {
        let w = w.trim_matches(|c: char| matches!(c, '?' | '!' | ',' | '.' | ';' | ':' | '\''));
        let letters = w.chars().any(char::is_alphabetic);
        let digits = w.chars().filter(char::is_ascii_digit).count();
        let year = digits == 4 && w.len() == 4 && (w.starts_with("19") || w.starts_with("20"));
        let number = digits >= 3 && !letters && !year;
        // Upper case inside a word: camelCase, OOMKilled, HTTPError.
        let camel = w.chars().skip(1).any(char::is_uppercase) && w.chars().any(char::is_lowercase);
        let symbols = w.chars().any(|c| "_/\\:.#[]()=<>@$*{}".contains(c));
        (letters && digits > 0) || number || camel || symbols
    })
}

/// One session's best record by meaning.
pub(super) struct Near {
    pub(super) record_id: i64,
    pub(super) session: i64,
    pub(super) role: String,
    pub(super) sim: f32,
}

/// Heap entry for the top records: similarity, record id.
#[derive(Debug, Clone, Copy)]
struct Top(f32, i64);
impl PartialEq for Top {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Top {}
impl PartialOrd for Top {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Top {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: the heap's top is the weakest kept record (the lower
        // similarity; of two equal, the older record).
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// The best records offered (at most `cap`, [`VECTOR_RECORDS`] unless
/// asked), by similarity and then the newer record first: the same records
/// whatever order they come in, so a scan split between threads keeps
/// what one thread would.
struct TopRecords {
    heap: BinaryHeap<Top>,
    cap: usize,
}

impl TopRecords {
    fn new() -> TopRecords {
        TopRecords::keeping(VECTOR_RECORDS)
    }

    fn keeping(cap: usize) -> TopRecords {
        TopRecords {
            heap: BinaryHeap::with_capacity(cap + 1),
            cap,
        }
    }

    /// Whether `cap` records are kept: a new one must beat the weakest.
    fn full(&self) -> bool {
        self.heap.len() >= self.cap
    }

    /// The similarity a record must reach to be kept now.
    fn floor(&self) -> f32 {
        match self.heap.peek() {
            Some(weakest) if self.full() => weakest.0.max(MIN_SIMILARITY),
            _ => MIN_SIMILARITY,
        }
    }

    fn offer(&mut self, sim: f32, record_id: i64) {
        let t = Top(sim, record_id);
        if self.heap.len() < self.cap {
            self.heap.push(t);
        } else if self.heap.peek().is_some_and(|weakest| t < *weakest) {
            self.heap.pop();
            self.heap.push(t);
        }
    }

    /// Scores `stored` and keeps it if it is among the best so far.
    fn consider(&mut self, scorer: &Scorer, record_id: i64, stored: &[u8]) {
        if let Some(sim) = scorer.score(stored, self.floor()) {
            self.offer(sim, record_id);
        }
    }

    /// [`TopRecords::consider`] for a vector in offset binary whose
    /// inverse norm is known (as the vector file keeps it).
    fn consider_offset(&mut self, scorer: &Scorer, record_id: i64, inv: f32, offset: &[u8]) {
        if let Some(sim) = scorer.score_offset(offset, inv, self.floor()) {
            self.offer(sim, record_id);
        }
    }

    fn merge(&mut self, other: TopRecords) {
        for t in other.heap {
            self.offer(t.0, t.1);
        }
    }
}

/// What became of the vector file for one search.
enum FileScan {
    /// Not opened yet.
    NotTried,
    /// Not opened yet, for a filtered search found too narrow to check the
    /// file's nearest records first ([`check_nearest_first`], asked once
    /// by [`prepare`]): the file is scanned for the ids the filters allow
    /// (with the allowed sessions' runs when the search read them already:
    /// see `Store::allowed_session_runs` and [`nearest_with`]).
    Narrow,
    /// Not usable (not trusted or unreadable): only the table is read.
    Unusable,
    /// Its best records, and the record id above which the table must be
    /// read.
    Found(TopRecords, i64),
    /// For a filtered search, the file's nearest records, not yet checked
    /// against the filters (see [`checked`]); the record id above which
    /// the table must be read; and whether they are every record that
    /// reached the floor.
    Nearest(TopRecords, i64, bool),
}

/// The best records of the flat vector file (see `store::vector_file`)
/// among those `keep` allows.
fn scan_file(
    scan: &vector_file::Scan,
    scorer: &Scorer,
    keep: impl Fn(i64) -> bool + Sync,
) -> FileScan {
    scan_file_keeping(scan, scorer, VECTOR_RECORDS, keep)
}

/// [`scan_file`] keeping the best `cap` records.
fn scan_file_keeping(
    scan: &vector_file::Scan,
    scorer: &Scorer,
    cap: usize,
    keep: impl Fn(i64) -> bool + Sync,
) -> FileScan {
    match scan.fold(
        || TopRecords::keeping(cap),
        |top, id, inv, v| {
            if keep(id) {
                top.consider_offset(scorer, id, inv, v)
            }
        },
    ) {
        Ok(parts) => {
            let mut top = TopRecords::keeping(cap);
            parts.into_iter().for_each(|p| top.merge(p));
            FileScan::Found(top, scan.upto)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the vector file; reading the vectors table");
            FileScan::Unusable
        }
    }
}

/// The best records of the whole vector file for the unit vector `qv`:
/// through the file's sketch when it has one (the exact scores of the
/// entries the sketch puts nearest, see `store::sketch`), else by
/// [`scan_file`] of every entry.
fn scan_file_unfiltered(scan: &vector_file::Scan, scorer: &Scorer, qv: &[f32]) -> FileScan {
    match scan.fold_sketched(qv, TopRecords::new, |top, id, inv, v| {
        top.consider_offset(scorer, id, inv, v)
    }) {
        Ok(Some((parts, _))) => {
            let mut top = TopRecords::new();
            parts.into_iter().for_each(|p| top.merge(p));
            FileScan::Found(top, scan.upto)
        }
        Ok(None) => scan_file(scan, scorer, |_| true),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the vector sketch; scanning every vector");
            scan_file(scan, scorer, |_| true)
        }
    }
}

/// The nearest records [`checked`] takes at a time, their role bytes read
/// at once: most filters pass some hundreds of the first few batches.
const CHECK_BATCH: usize = 512;

/// How many of the file's nearest records a filtered search checks one by
/// one before it falls back to the set of every record it allows.
const WIDE: usize = 8_000;

/// Whether checking the file's nearest records one by one is worth trying
/// first: always for filters on the record alone (role, machine), whose
/// allowed ids would take a read of the whole records table; for a filter
/// on the session (agent, project, session) only when the sessions it
/// allows hold a tenth of the records or more; for a filter on the time
/// (without one on the session) only when the sessions that started at or
/// after it are a tenth of all ([`time_share_wide`]). A narrower one's ids
/// come quickly from the runs (`allowed_by_runs`, and the stamps for the
/// time), and [`WIDE`] nearest records would seldom hold
/// [`VECTOR_RECORDS`] of them.
///
/// The share is measured on the newest [`SHARE_SESSIONS`] sessions, so its
/// cost does not grow with the history. A filter whose share differs in
/// older sessions is still answered right, only more slowly ([`checked`]).
fn check_nearest_first(store: &Store, filter: &Filter) -> Result<bool, SearchError> {
    nearest_first_within(store, filter, SHARE_SESSIONS)
}

/// How many of the newest sessions [`check_nearest_first`] measures a
/// filter's share on.
const SHARE_SESSIONS: i64 = 2_000;

/// [`check_nearest_first`] for a filter on the time alone: whether the
/// sessions that started at or after it are a tenth of all or more,
/// counted through `sessions_first_ms` without reading a session's row.
/// (The newest sessions by id are no sample of times: ids follow reading
/// order.) A session that started before the time and ended after it is
/// not counted: a filter judged narrow wrongly costs speed, never an
/// answer.
fn time_share_wide(store: &Store, since: i64) -> Result<bool, SearchError> {
    let (after, all) = store.sessions_started_since(since)?;
    Ok(after / all.max(1.0) * WIDE as f64 >= 4.0 * VECTOR_RECORDS as f64)
}

/// [`check_nearest_first`] measured on the newest `sessions` sessions.
fn nearest_first_within(
    store: &Store,
    filter: &Filter,
    sessions: i64,
) -> Result<bool, SearchError> {
    if !filter.by_session() {
        return match filter.since_ms {
            Some(since) => time_share_wide(store, since),
            None => Ok(true),
        };
    }
    let (mine, all) = store.session_share(filter, sessions)?;
    // Four times the records needed: the nearest may hold less of the
    // filter's sessions than the whole does.
    Ok(mine / all.max(1.0) * WIDE as f64 >= 4.0 * VECTOR_RECORDS as f64)
}

/// The file's `wide` records nearest to the unit vector `qv`, for a
/// filtered search to check against its filters ([`checked`]): found
/// through the sketch when the file has one, as an unfiltered search finds
/// its records (the [`sketch::candidates`](crate::store::sketch) nearest
/// by sketch, scored exactly), else by scoring every entry. They are
/// every record that reached the floor when fewer than `wide` did and
/// every entry was scored.
fn file_nearest(scan: &vector_file::Scan, scorer: &Scorer, qv: &[f32], wide: usize) -> FileScan {
    let sketched = scan.fold_sketched(
        qv,
        || TopRecords::keeping(wide),
        |top, id, inv, v| top.consider_offset(scorer, id, inv, v),
    );
    match sketched {
        Ok(Some((parts, every))) => {
            let mut top = TopRecords::keeping(wide);
            parts.into_iter().for_each(|p| top.merge(p));
            let complete = every && !top.full();
            return FileScan::Nearest(top, scan.upto, complete);
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the vector sketch; scanning every vector");
        }
    }
    match scan_file_keeping(scan, scorer, wide, |_| true) {
        FileScan::Found(top, upto) => {
            let complete = !top.full();
            FileScan::Nearest(top, upto, complete)
        }
        other => other,
    }
}

/// A filtered search's best records from the file's `nearest` ones (see
/// [`file_nearest`]), checked against the filters one by one (by the
/// search's screen of runs and role bytes, a look-up by id only for a
/// record the screen cannot judge: see `search::screen`), best first, until
/// [`VECTOR_RECORDS`] pass. `None` when fewer pass and the nearest were
/// not every record that reached the floor (`complete`): the filters are
/// narrower than [`check_nearest_first`] judged, and the caller scans for
/// the ids they allow ([`allowed`]).
///
/// What passes is what a scan of the allowed records keeps, up to the
/// sketch: exactly that when the file has no sketch or every entry was
/// scored, else the allowed records among those the sketch puts nearest,
/// which is how an unfiltered search finds its records too (the recall
/// bench's `--by-agent` run measures it; see docs/embeddings.md).
fn checked(
    store: &Store,
    nearest: TopRecords,
    (upto, complete): (i64, bool),
    filter: &Filter,
    pre: Option<&runs::RunMap>,
) -> Result<Option<FileScan>, SearchError> {
    let mut check = store.row_check(filter)?;
    let mut screen = Screen::new(store, filter, pre)?;
    screen.read_roles(store.roles_file());
    let mut bytes = store.facts()?;
    let mut kept = TopRecords::new();
    // Sorted by `Top`'s order: the nearest first, a batch at a time, so
    // their role bytes are read at once (`Screen::roles_ahead`).
    let nearest = nearest.heap.into_sorted_vec();
    for part in nearest.chunks(CHECK_BATCH) {
        if kept.full() {
            break;
        }
        let ids: Vec<i64> = part.iter().map(|t| t.1).collect();
        let roles = screen.roles_ahead(&ids);
        for (&Top(sim, id), role) in part.iter().zip(roles) {
            if kept.full() {
                break;
            }
            let pass = match screen.verdict(&mut bytes, id, role)? {
                Some(verdict) => verdict,
                None => check.passes(id)?,
            };
            if pass {
                kept.offer(sim, id);
            }
        }
    }
    Ok((kept.full() || complete).then_some(FileScan::Found(kept, upto)))
}

/// A filtered search's best records from the vector file: those of
/// `nearest` that pass the filters when enough do ([`checked`]), else
/// those of a scan of every allowed record (also when `nearest` was not
/// tried). `scan` is the file when open already; `pre`, the allowed
/// sessions' runs when read already.
fn narrowed_file(
    store: &Store,
    scan: Option<&vector_file::Scan>,
    scorer: &Scorer,
    dim: usize,
    nearest: FileScan,
    filter: &Filter,
    pre: Option<&runs::RunMap>,
) -> Result<FileScan, SearchError> {
    if let FileScan::Nearest(top, upto, complete) = nearest
        && let Some(found) = checked(store, top, (upto, complete), filter, pre)?
    {
        return Ok(found);
    }
    let opened;
    let scan = match scan {
        Some(scan) => scan,
        None => match store.vector_scan(dim)? {
            Some(scan) => {
                opened = scan;
                &opened
            }
            None => return Ok(FileScan::Unusable),
        },
    };
    let allowed = allowed(store, scan.upto, filter, pre)?;
    let cap = VECTOR_RECORDS;
    let firsts = scan.block_firsts()?;
    match scan.fold_wanted(
        &firsts,
        |first, last| allowed.any_in(first, last),
        || TopRecords::keeping(cap),
        |top, id, inv, v| {
            if allowed.contains(id) {
                top.consider_offset(scorer, id, inv, v)
            }
        },
    ) {
        Ok(parts) => {
            let mut top = TopRecords::keeping(cap);
            parts.into_iter().for_each(|p| top.merge(p));
            Ok(FileScan::Found(top, scan.upto))
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the vector file; reading the vectors table");
            Ok(FileScan::Unusable)
        }
    }
}

/// The records up to id `upto` that a filtered search allows. Every role
/// is let in unless the search names roles: the file holds vectors of
/// conversation records only, and without a condition on the role a
/// session filter is answered from the `records_session` index alone.
fn allowed(
    store: &Store,
    upto: i64,
    filter: &Filter,
    pre: Option<&runs::RunMap>,
) -> Result<IdSet, SearchError> {
    if !filter.beyond_columns().unfiltered() {
        return allowed_by_rows(store, upto, filter);
    }
    // The sessions' set from the runs (for a filter on the time, the
    // sessions that may hold a record it allows), with the ranges it lies
    // in, where the stamps and the roles are then read (a project's runs,
    // the last two weeks' sessions: a twentieth of the bytes or less).
    let on_session = Filter {
        since_ms: filter.since_ms,
        ..filter.on_session()
    };
    let (sessions, within) = match filter.by_session() || filter.since_ms.is_some() {
        true => match allowed_by_runs(store, upto, &on_session, pre)? {
            Some((set, within)) => (Some(set), within),
            None => return allowed_by_rows(store, upto, filter),
        },
        false => (None, vec![(1, upto)]),
    };
    let times = filter.since_ms.map(|since| {
        allowed_by_columns(&within, upto, |w, add| store.ids_dated_since(w, since, add))
    });
    let roles = (!filter.roles.is_empty()).then(|| {
        allowed_by_columns(&within, upto, |w, add| {
            store.ids_with_roles(w, &filter.roles, add)
        })
    });
    let (times, roles) = (times.transpose()?, roles.transpose()?);
    // No columns file: the rows.
    if matches!(times, Some(None)) || matches!(roles, Some(None)) {
        return allowed_by_rows(store, upto, filter);
    }
    let mut sets = [sessions, times.flatten(), roles.flatten()]
        .into_iter()
        .flatten();
    let Some(mut set) = sets.next() else {
        return allowed_by_rows(store, upto, filter);
    };
    for other in sets {
        set.keep_only(&other);
    }
    Ok(set)
}

/// [`allowed`] for a filter on the time or on roles from the columns
/// file (`read`: `Store::ids_dated_since` or `Store::ids_with_roles`)
/// over the ids `within` (ascending ranges) cut at `upto`, not from every
/// record's row. `None` without a columns file.
fn allowed_by_columns(
    within: &[(i64, i64)],
    upto: i64,
    read: impl FnOnce(&[(i64, i64)], &mut dyn FnMut(i64, i64)) -> Result<Option<()>, StoreError>,
) -> Result<Option<IdSet>, SearchError> {
    let mut set = IdSet::upto(upto);
    let within: Vec<(i64, i64)> = within
        .iter()
        .map(|&(a, b)| (a, b.min(upto)))
        .filter(|(a, b)| a <= b)
        .collect();
    let done = read(&within, &mut |first, last| set.insert_range(first, last))?;
    Ok(done.map(|()| set))
}

/// A set of allowed ids, and the ascending ranges of ids it lies in.
type IdsIn = (IdSet, Vec<(i64, i64)>);

/// [`allowed`] for a filter on the session alone, from the runs of record
/// ids of the sessions it allows (see `store::runs`), and the records after
/// the runs' end from their rows. With the set come the
/// ranges of ids it lies in (the allowed runs, and the ids after the runs'
/// end), ascending. `None` without such a filter or without the runs.
fn allowed_by_runs(
    store: &Store,
    upto: i64,
    filter: &Filter,
    pre: Option<&runs::RunMap>,
) -> Result<Option<IdsIn>, SearchError> {
    let (ranges, covered) = match pre {
        Some(map) => map.allowed_ranges(),
        None => match store.allowed_session_runs(filter)? {
            Some(map) => map.allowed_ranges(),
            None => return Ok(None),
        },
    };
    let mut set = IdSet::upto(upto);
    let mut within = ranges;
    for &(first, last) in &within {
        set.insert_range(first, last);
    }
    if covered < upto {
        within.push((covered + 1, upto));
        store.allowed_ids_after((covered, upto), filter, |id| set.insert(id))?;
    }
    Ok(Some((set, within)))
}

/// [`allowed`] from the records' rows (see `Store::allowed_ids_by_rows`).
fn allowed_by_rows(store: &Store, upto: i64, filter: &Filter) -> Result<IdSet, SearchError> {
    let mut set = IdSet::upto(upto);
    store.allowed_ids_by_rows(upto, filter, |id| set.insert(id))?;
    Ok(set)
}

/// What the meaning tier can do before the lexical tier runs, with no
/// database connection: the vector file open for a scan, which
/// [`alongside`] starts by embedding the question (so the embedder's
/// vocabulary is built off the lexical tier's path). For a filtered
/// search the scan finds the file's nearest records, which are checked
/// against the filters after ([`checked`]).
pub(crate) struct Prepared<'q> {
    text: &'q str,
    embedder: &'static Embedder<'static>,
    scan: Option<vector_file::Scan>,
    filtered: bool,
    /// Filters too narrow to check the file's nearest records first.
    narrow: bool,
}

impl Prepared<'_> {
    /// Whether the filters are too narrow to check the file's nearest
    /// records first ([`check_nearest_first`]).
    pub(crate) fn narrow(&self) -> bool {
        self.narrow
    }
}

/// What the meaning tier did beside the lexical tier.
pub(crate) struct Scanned(Beside);

enum Beside {
    /// The query's vector and what the vector file gave for it.
    Found { qv: Vec<f32>, file: FileScan },
    /// No word of the query is in the embedder's vocabulary.
    NoVector,
    /// Nothing ran beside: a search naming a period, or one whose filters
    /// are narrow enough to scan for the ids they allow (`narrow`; embedded
    /// and scanned by [`nearest_of`] if needed).
    Later { narrow: bool },
}

/// The embedder for a search of `query` with `opts` when the meaning tier
/// is `on`: none for an exact look-up or a search asked to stay lexical,
/// so such a search never pays for loading the table.
pub fn embedder_for(
    on: bool,
    query: &str,
    opts: &SearchOptions,
) -> Option<&'static crate::embed::Embedder<'static>> {
    if !on || opts.lexical_only || is_exact_lookup(query) {
        return None;
    }
    Some(crate::embed::builtin())
}

/// Prepares the meaning tier of `plan`; `None` when it does not apply (no
/// embedder, lexical only, an exact look-up). A question naming a period
/// keeps its lexical ranking when it has one, so its file is left for
/// [`nearest_of`] to scan if needed; so is that of a search whose filters
/// are too narrow to check the file's nearest records
/// ([`check_nearest_first`]).
pub(crate) fn prepare<'q>(
    store: &Store,
    plan: &Plan<'q>,
) -> Result<Option<Prepared<'q>>, SearchError> {
    let Some(embedder) = plan.embedder else {
        return Ok(None);
    };
    let filtered = !plan.filter.unfiltered();
    let period = plan.period.is_some();
    let narrow = !period && filtered && !check_nearest_first(store, &plan.filter)?;
    let scan = match period || narrow {
        true => None,
        false => store.vector_scan(embedder.dim())?,
    };
    Ok(Some(Prepared {
        text: &plan.query.text,
        embedder,
        scan,
        filtered,
        narrow,
    }))
}

/// Runs `lexical` on this thread while others embed the question and scan
/// the prepared vector file (neither needs a database connection), and
/// returns both.
pub(crate) fn alongside<T>(
    prepared: Option<Prepared<'_>>,
    lexical: impl FnOnce() -> T,
) -> (T, Option<Scanned>) {
    let Some(Prepared {
        text,
        embedder,
        scan,
        filtered,
        narrow,
    }) = prepared
    else {
        return (lexical(), None);
    };
    let Some(scan) = scan else {
        return (lexical(), Some(Scanned(Beside::Later { narrow })));
    };
    let beside = || {
        let Some(qv) = embedder.embed_one(text) else {
            return Scanned(Beside::NoVector);
        };
        let scorer = Scorer::new(&qv);
        let file = match filtered {
            true => file_nearest(&scan, &scorer, &qv, WIDE),
            false => scan_file_unfiltered(&scan, &scorer, &qv),
        };
        Scanned(Beside::Found { qv, file })
    };
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("cairn-vectors".into())
            .spawn_scoped(s, beside);
        let out = lexical();
        let scanned = match spawned {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            // No thread to be had: embedded and scanned here, after.
            Err(_) => beside(),
        };
        (out, Some(scanned))
    })
}

/// The sessions nearest to `qv` in meaning, best first, honouring the
/// search filters.
#[cfg(test)]
fn nearest(store: &Store, qv: &[f32], opts: &SearchOptions) -> Result<Vec<Near>, SearchError> {
    nearest_with(store, qv, FileScan::NotTried, &opts.filter(), None)
}

/// [`nearest`] with what the vector file gave already (see [`alongside`]),
/// and the run map the search read up front, if it did (see
/// `Plan::runs_up_front`), for the checks of the file's nearest records.
fn nearest_with(
    store: &Store,
    qv: &[f32],
    file: FileScan,
    filter: &Filter,
    given: Option<&runs::RunMap>,
) -> Result<Vec<Near>, SearchError> {
    let scorer = Scorer::new(qv);
    // A filter narrows the file scan to the records it allows.
    let narrowed = !filter.unfiltered();
    let (file, known_narrow) = match file {
        FileScan::Narrow => (FileScan::NotTried, true),
        other => (other, false),
    };
    let file = match file {
        FileScan::NotTried => match store.vector_scan(qv.len())? {
            Some(scan) if narrowed => {
                // A role, time or machine filter alone would read the whole
                // records table for the ids it allows, and a wide filter on
                // the session allows many: the file's nearest records are
                // checked one by one first (see `check_nearest_first`).
                let nearest = match !known_narrow && check_nearest_first(store, filter)? {
                    true => file_nearest(&scan, &scorer, qv, WIDE),
                    false => FileScan::NotTried,
                };
                narrowed_file(
                    store,
                    Some(&scan),
                    &scorer,
                    qv.len(),
                    nearest,
                    filter,
                    given,
                )?
            }
            Some(scan) => scan_file_unfiltered(&scan, &scorer, qv),
            None => FileScan::Unusable,
        },
        // Found beside the lexical tier, for a filtered search.
        nearest @ FileScan::Nearest(..) => {
            narrowed_file(store, None, &scorer, qv.len(), nearest, filter, given)?
        }
        other => other,
    };
    let (mut top, after) = match file {
        FileScan::Found(top, after) => (top, after),
        _ => (TopRecords::new(), i64::MIN),
    };
    // The vectors stored after the file's last entry (all the table holds).
    store.vectors_after(after, filter, |id, v| top.consider(&scorer, id, v))?;
    // Where the columns file has an entry, it says the record is still
    // there (a delete zeroes it before it commits), and whose it is.
    let mut columns = store.ranker_columns()?;
    let mut tops = top.heap.into_vec();
    tops.sort_unstable_by_key(|t| t.1);
    let mut best: HashMap<i64, Near> = HashMap::new();
    for Top(sim, record_id) in tops {
        // A record deleted since the file was read is left out.
        let Some((session, role)) = columns.owner(record_id)? else {
            continue;
        };
        let near = Near {
            record_id,
            session,
            role,
            sim,
        };
        match best.get_mut(&session) {
            // Of two equally near, the newer record, whatever order the
            // heap gives them in.
            Some(e) if e.sim > sim || (e.sim == sim && e.record_id > record_id) => {}
            Some(e) => *e = near,
            None => {
                best.insert(session, near);
            }
        }
    }
    let mut out: Vec<Near> = best.into_values().collect();
    out.sort_by(|a, b| b.sim.total_cmp(&a.sim).then(a.session.cmp(&b.session)));
    Ok(out)
}

/// The sessions nearest in meaning to `plan`'s question, best first,
/// from what ran beside the lexical tier (`scanned`, from [`alongside`]),
/// embedding and scanning now what was left for later; `None` when the
/// question has no vector.
pub(super) fn nearest_of(
    store: &Store,
    plan: &Plan<'_>,
    scanned: Scanned,
    pre: Option<&runs::RunMap>,
) -> Result<Option<Vec<Near>>, SearchError> {
    let (qv, file) = match scanned.0 {
        Beside::Found { qv, file } => (qv, file),
        Beside::NoVector => return Ok(None),
        Beside::Later { narrow } => match plan.embedder.and_then(|e| e.embed_one(&plan.query.text))
        {
            Some(qv) if narrow => (qv, FileScan::Narrow),
            Some(qv) => (qv, FileScan::NotTried),
            None => return Ok(None),
        },
    };
    Ok(Some(nearest_with(store, &qv, file, &plan.filter, pre)?))
}

#[cfg(test)]
mod tests {
    use super::super::fuse::{blend, fuse};
    use super::super::{Query, rank::Ranked};
    use super::*;
    use crate::store::columns_file;

    /// The id of the newest record `store` holds.
    fn last_id(store: &Store) -> i64 {
        store
            .test_conn()
            .query_row("SELECT max(id) FROM records", [], |r| r.get(0))
            .expect("max")
    }

    #[test]
    fn exact_lookups_are_recognised() {
        for q in [
            "error[E0382]",
            "\"pinned hyper\"",
            "src/store/mod.rs",
            "parseConfig",
            "tokio_util",
            "v0.14 upgrade",
            "foo::bar",
            "OOMKilled",
            "port 8080 refused",
            "hyper",
            "缓存",
            "データベース",
        ] {
            assert!(is_exact_lookup(q), "{q}");
        }
        for q in [
            "why are we holding back the http crate upgrade?",
            "new terminal windows open slowly",
            "how do we round half cents",
            "what happened in July 2023",
            "API rate limits",
            "为什么导入银行账单时内存占用那么高",
            "夜間のインポートが止まった",
        ] {
            assert!(!is_exact_lookup(q), "{q}");
        }
    }

    /// The ids a filter on the session allows, from the runs, are those
    /// the rows give, also for records the runs do not cover yet.
    #[test]
    fn the_runs_and_the_role_bytes_allow_what_the_rows_allow() {
        use crate::record::{Record, Role};
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        for batch in 0..3 {
            let mut ing = store.ingest("node").expect("ingest");
            for i in 0..60 {
                let agent = ["codex", "claude-code", "goose"][i % 3];
                let mut r = Record::new(
                    agent,
                    &format!("s{}", (i / 7 + batch) % 5),
                    Role::ALL[(i / 2) % 4],
                    format!("record {i} of batch {batch}"),
                );
                r.project = Some(format!("/work/p{}", i % 4));
                ing.insert(&r, None).expect("insert");
            }
            ing.commit().expect("commit");
        }
        let upto = last_id(&store);
        assert_eq!(store.write_columns().expect("columns"), upto as u64);
        let filters = [
            SearchOptions {
                agent: Some("codex".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                project: Some("p1".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                session: Some("s3".into()),
                agent: Some("goose".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::User],
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::Assistant, Role::ToolCall],
                agent: Some("codex".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                roles: vec![Role::ToolOutput],
                project: Some("p1".into()),
                ..SearchOptions::default()
            },
        ];
        let same = |what: &str| {
            for opts in &filters {
                let rows = allowed_by_rows(&store, upto, &opts.filter()).expect("rows");
                assert!(!rows.is_empty(), "{opts:?}");
                for bound in [upto, upto / 2] {
                    let rows = allowed_by_rows(&store, bound, &opts.filter()).expect("rows");
                    let how = format!("{what}: {opts:?} up to {bound}");
                    assert_eq!(
                        allowed(&store, bound, &opts.filter(), None).expect("allowed"),
                        rows,
                        "{how}"
                    );
                    // So with every run read up front, as a narrow filter's
                    // search reads them.
                    let map = store.allowed_session_runs(&opts.filter()).expect("map");
                    assert_eq!(
                        allowed(&store, bound, &opts.filter(), map.as_ref()).expect("allowed"),
                        rows,
                        "{how}, read up front"
                    );
                    if opts.roles.is_empty() {
                        let runs =
                            allowed_by_runs(&store, bound, &opts.filter(), None).expect("runs");
                        assert_eq!(runs.expect("the table").0, rows, "{how}");
                    } else if !opts.filter().by_session() {
                        let roles = allowed_by_columns(&[(1, bound)], bound, |w, add| {
                            store.ids_with_roles(w, &opts.roles, add)
                        })
                        .expect("roles");
                        match crate::store::Component::Columns.path(store.path()).exists() {
                            true => assert_eq!(roles.expect("the file"), rows, "{how}"),
                            false => assert!(roles.is_none(), "{how}: no file"),
                        }
                    }
                }
            }
        };
        same("every record in a run");
        // The last runs gone, as if their records were stored by a path
        // that has not worked them out yet.
        store
            .test_conn()
            .execute("DELETE FROM record_runs WHERE first > ?1", [upto / 3])
            .expect("delete");
        same("the newest records in no run");
        // Some records' role bytes not known (their rows tell), a page
        // damaged (never read), then no file (the rows tell).
        columns_file::tests::rewrite_entries_by_id(&store, true, |id, e| {
            if (60..120).contains(&id) {
                e[columns_file::ROLE_AT] = 0;
            }
        });
        same("some role bytes not known");
        columns_file::tests::rewrite_entries_by_id(&store, false, |id, e| {
            if id < 30 {
                e[columns_file::ROLE_AT] = crate::store::codec::role_code(Role::ToolOutput);
            }
        });
        same("a damaged page");
        std::fs::remove_file(crate::store::Component::Columns.path(store.path())).expect("remove");
        same("no columns file");
    }

    /// The ids a filter on the time allows, read sessions first (each
    /// one that ended before it passed over), are those every row at or
    /// after it gives, alone and with other filters: sessions before,
    /// across and after the time, undated records, and a session with no
    /// dated record at all.
    #[test]
    fn the_rows_a_time_filter_allows_are_those_at_or_after_it() {
        use crate::record::{Record, Role};
        const HOUR: i64 = 3_600_000;
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for s in 0..8i64 {
            for k in 0..6i64 {
                let agent = ["codex", "claude-code"][(s % 2) as usize];
                let mut r = Record::new(
                    agent,
                    &format!("s{s}"),
                    Role::ALL[(k % 4) as usize],
                    format!("record {k} of session {s}"),
                );
                r.time_ms = match (s, k) {
                    (7, _) | (3, 2) | (5, 0) => None,
                    _ => Some(s * HOUR + k * 600_000),
                };
                ing.insert(&r, None).expect("insert");
            }
        }
        ing.commit().expect("commit");
        let upto = last_id(&store);
        // Every row read with the filters, records first.
        let every_row = |opts: &SearchOptions| -> IdSet {
            let mut sql = String::from("SELECT r.id FROM records r");
            opts.filter().push_joins(&mut sql);
            sql.push_str(" WHERE 1");
            let mut args = Vec::new();
            opts.filter().push_filters(&mut sql, &mut args);
            let mut set = IdSet::upto(upto);
            let mut stmt = store.test_conn().prepare(&sql).expect("prepare");
            let mut rows = stmt
                .query(rusqlite::params_from_iter(args.iter()))
                .expect("query");
            while let Some(r) = rows.next().expect("row") {
                set.insert(r.get(0).expect("id"));
            }
            set
        };
        let mut sizes = Vec::new();
        // The stamps from the rows (no columns file yet), from the file as
        // written, with some entries saying nothing or a page damaged
        // (then the rows of their stretches say), and with the file gone;
        // each with the sessions' runs read on the way and read before, as
        // a narrow search reads them.
        for state in ["rows", "written", "some unknown", "damaged", "missing"] {
            let older = |e: &mut [u8]| e[..8].copy_from_slice(&(1u64 | 5 << 3).to_le_bytes());
            match state {
                "written" => {
                    assert_eq!(store.write_columns().expect("columns"), upto as u64);
                }
                "some unknown" => {
                    columns_file::tests::rewrite_entries_by_id(&store, true, |id, e| {
                        if id % 3 == 0 {
                            e[..8].fill(0);
                        }
                    })
                }
                "damaged" => columns_file::tests::rewrite_entries(&store, false, older),
                "missing" => {
                    std::fs::remove_file(crate::store::Component::Columns.path(store.path()))
                        .expect("remove")
                }
                _ => {}
            }
            for cut in [
                0,
                2 * HOUR + 1_200_000,
                3 * HOUR + 1_200_000,
                5 * HOUR,
                9 * HOUR,
            ] {
                let since = SearchOptions {
                    since_ms: Some(cut),
                    ..SearchOptions::default()
                };
                for opts in [
                    since.clone(),
                    SearchOptions {
                        agent: Some("codex".into()),
                        ..since.clone()
                    },
                    SearchOptions {
                        roles: vec![Role::User, Role::ToolCall],
                        ..since.clone()
                    },
                    SearchOptions {
                        machine: Some("node".into()),
                        ..since.clone()
                    },
                ] {
                    let want = every_row(&opts);
                    assert_eq!(
                        allowed_by_rows(&store, upto, &opts.filter()).expect("rows"),
                        want,
                        "{opts:?}"
                    );
                    assert_eq!(
                        allowed(&store, upto, &opts.filter(), None).expect("allowed"),
                        want,
                        "{opts:?}, stamps {state}"
                    );
                    let pre = store.allowed_session_runs(&opts.filter()).expect("map");
                    assert_eq!(
                        allowed(&store, upto, &opts.filter(), pre.as_ref()).expect("allowed"),
                        want,
                        "{opts:?}, stamps {state}, the runs read before"
                    );
                    if state == "rows" {
                        sizes.push((1..=upto).filter(|&id| want.contains(id)).count());
                    }
                }
            }
        }
        // From every dated record to none.
        assert_eq!(sizes[0], 6 * 7 - 2);
        assert!(sizes.contains(&0));
    }

    #[test]
    fn only_filters_wide_enough_check_the_nearest_first() {
        use crate::record::{Record, Role};
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        // codex holds 5% of the records, claude-code the rest; the project
        // `/work/wide` half of them.
        for i in 0..200 {
            let agent = if i % 20 == 0 { "codex" } else { "claude-code" };
            let mut r = Record::new(agent, &format!("s{}", i % 40), Role::User, format!("r{i}"));
            // Session k's records from k · 100 s on.
            r.time_ms = Some(i64::from(i % 40) * 100_000 + i64::from(i));
            r.project = Some(
                if i % 40 < 20 {
                    "/work/wide"
                } else {
                    "/work/narrow"
                }
                .into(),
            );
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        let first =
            |opts: SearchOptions| check_nearest_first(&store, &opts.filter()).expect("share");
        let agent = |a: &str| SearchOptions {
            agent: Some(a.into()),
            ..SearchOptions::default()
        };
        assert!(first(SearchOptions {
            roles: vec![Role::User],
            ..SearchOptions::default()
        }));
        assert!(first(agent("claude-code")));
        assert!(
            !first(agent("codex")),
            "5% of 8,000 is 400: too few to be sure"
        );
        assert!(!first(agent("gemini")));
        assert!(first(SearchOptions {
            project: Some("wide".into()),
            ..agent("claude-code")
        }));
        assert!(!first(SearchOptions {
            project: Some("narrow".into()),
            ..agent("codex")
        }));
        assert!(!first(SearchOptions {
            project: Some("elsewhere".into()),
            ..SearchOptions::default()
        }));
        assert!(!first(SearchOptions {
            session: Some("s39".into()),
            ..SearchOptions::default()
        }));
        // A prefix: s1, s10 to s19.
        assert!(first(SearchOptions {
            session: Some("s1".into()),
            ..SearchOptions::default()
        }));
        // A filter on the time alone: the sessions that started at or after
        // it, all, s35 to s39 (12.5%), s37 to s39 (7.5%), none; and a
        // session that started before it but ended after is not counted.
        let since = |t: i64| SearchOptions {
            since_ms: Some(t),
            ..SearchOptions::default()
        };
        assert!(first(since(0)));
        assert!(first(since(3_500_000)));
        assert!(!first(since(3_700_000)));
        assert!(!first(since(4_000_000)));
        assert!(first(since(3_600_000)), "s36 to s39: 10%");
        assert!(!first(since(3_600_100)), "s36 started just before");
        assert!(!first(SearchOptions {
            since_ms: Some(0),
            ..agent("codex")
        }));
        // The share is measured on the newest sessions: the wide project's
        // are the older half (s0 to s19).
        let wide = SearchOptions {
            project: Some("wide".into()),
            ..SearchOptions::default()
        };
        let within = |n| nearest_first_within(&store, &wide.filter(), n).expect("share");
        assert!(within(40) && within(21_000));
        assert!(!within(20), "none of the newest 20");
    }

    /// (record, session, sim) of what `nearest` finds.
    fn found(store: &Store, qv: &[f32], opts: &SearchOptions) -> Vec<(i64, i64, String, f32)> {
        nearest(store, qv, opts)
            .expect("nearest")
            .into_iter()
            .map(|n| (n.record_id, n.session, n.role, n.sim))
            .collect()
    }

    #[test]
    fn the_vector_file_finds_what_the_table_finds() {
        use crate::embed::tests::tiny;
        use crate::record::{Record, Role};
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let bytes = tiny();
        let e = Embedder::from_bytes(&bytes).expect("table");
        let words = ["slow", "terminal", "shell", "rounding", "sluggish"];
        // Far more similar records than the tier keeps, many of them with
        // the same vector (a tie at the cut), over many sessions.
        let fill = |store: &mut Store, range: std::ops::Range<usize>| {
            let records = range.map(|i| {
                let text = format!("{} {} {}", words[i % 5], words[i / 5 % 5], words[i % 3]);
                let role = if i % 4 == 0 {
                    Role::Assistant
                } else {
                    Role::User
                };
                Record::new("claude-code", &format!("s{}", i % 37), role, &text)
            });
            crate::store::vectors::tests::store_embedded(store, records);
        };
        // `twin` gets the same records and keeps every vector in its table.
        let mut twin = Store::open(&dir.path().join("twin.db")).expect("open");
        fill(&mut store, 0..700);
        fill(&mut twin, 0..700);
        let queries: Vec<Vec<f32>> = ["slow terminal", "rounding", "shell sluggish"]
            .iter()
            .map(|q| e.embed(q).expect("vector"))
            .collect();
        let all = SearchOptions::default();
        // Filters the file scan honours by record id: a role, a session, an agent.
        let narrowed = [
            SearchOptions {
                roles: vec![Role::Assistant],
                ..SearchOptions::default()
            },
            SearchOptions {
                session: Some("s12".into()),
                ..SearchOptions::default()
            },
            SearchOptions {
                agent: Some("claude-code".into()),
                ..SearchOptions::default()
            },
        ];
        let same_as_twin = |store: &Store, twin: &Store, what: &str| {
            for (i, q) in queries.iter().enumerate() {
                let want = found(twin, q, &all);
                assert!(want.len() > 5, "{want:?}");
                assert_eq!(found(store, q, &all), want, "{what}: query {i}");
                for opts in &narrowed {
                    let want = found(twin, q, opts);
                    assert!(!want.is_empty(), "{opts:?}");
                    assert_eq!(found(store, q, opts), want, "{what}: query {i} {opts:?}");
                }
            }
        };
        // The file alone (and its sketch: with fewer vectors than the
        // sketch hands on, every one is scored, so the result is exact).
        store.sync_vector_file(e.dim()).expect("sync");
        let scan = store.vector_scan(e.dim()).expect("open").expect("file");
        assert!(scan.sketched());
        assert!(store.vector_scan(e.dim()).expect("scan").is_some());
        same_as_twin(&store, &twin, "file");
        // Filters checked record by record, the file's nearest first, keep
        // what a scan of every allowed id keeps, or give way to it.
        let scan = store.vector_scan(e.dim()).expect("scan").expect("trusted");
        let (mut enough, mut all_seen, mut gave_way) = (0, 0, 0);
        for q in &queries {
            let scorer = Scorer::new(q);
            for opts in &narrowed {
                let ids = allowed(&store, scan.upto, &opts.filter(), None).expect("allowed");
                let FileScan::Found(want, _) = scan_file(&scan, &scorer, |id| ids.contains(id))
                else {
                    panic!("the file is trusted");
                };
                let want = want.heap.into_sorted_vec();
                // Checked with the runs read up front (for a filter on the
                // session) and without: the same.
                let map = store.allowed_session_runs(&opts.filter()).expect("map");
                assert_eq!(map.is_some(), opts.roles.is_empty(), "{opts:?}");
                for wide in [VECTOR_RECORDS, 400, 5_000] {
                    let nearest = || match file_nearest(&scan, &scorer, q, wide) {
                        FileScan::Nearest(top, upto, complete) => (top, (upto, complete)),
                        _ => panic!("the file is trusted"),
                    };
                    let (top, at) = nearest();
                    let with_map =
                        checked(&store, top, at, &opts.filter(), map.as_ref()).expect("checked");
                    let (top, at) = nearest();
                    let got = checked(&store, top, at, &opts.filter(), None).expect("checked");
                    let heap = |f: &Option<FileScan>| match f {
                        Some(FileScan::Found(t, _)) => Some(t.heap.clone().into_sorted_vec()),
                        _ => None,
                    };
                    assert_eq!(heap(&with_map), heap(&got), "{wide} {opts:?}");
                    match got {
                        Some(FileScan::Found(got, _)) => {
                            assert_eq!(got.heap.into_sorted_vec(), want, "{wide} {opts:?}");
                            match want.len() == VECTOR_RECORDS {
                                true => enough += 1,
                                false => all_seen += 1,
                            }
                        }
                        Some(_) => panic!("the file is trusted"),
                        None => {
                            assert!(wide < 5_000, "{opts:?}");
                            gave_way += 1;
                        }
                    }
                }
            }
        }
        assert!(
            enough > 0 && all_seen > 0 && gave_way > 0,
            "{enough} {all_seen} {gave_way}"
        );
        let f = found(&store, &queries[0], &narrowed[0]);
        assert!(f.iter().all(|n| n.2 == "assistant"), "{f:?}");
        // Records stored after the file was written are read from the table.
        fill(&mut store, 700..900);
        fill(&mut twin, 700..900);
        same_as_twin(&store, &twin, "file and table");
        let tail: Vec<_> = queries.iter().map(|q| found(&twin, q, &all)).collect();
        // A deleted record is left out before and after its entry is blanked.
        let best = tail[0][0].0;
        for s in [&store, &twin] {
            s.test_conn()
                .execute("DELETE FROM records WHERE id = ?1", [best])
                .expect("delete");
        }
        same_as_twin(&store, &twin, "deleted");
        store.sync_vector_file(e.dim()).expect("sync");
        same_as_twin(&store, &twin, "blanked");
        let tail: Vec<_> = queries.iter().map(|q| found(&twin, q, &all)).collect();
        // Prepared before the lexical tier and scanned beside it: the same.
        let table: &'static [u8] = Box::leak(tiny().into_boxed_slice());
        let embedder: &'static Embedder<'static> =
            Box::leak(Box::new(Embedder::from_bytes(table).expect("table")));
        let with_tier = SearchOptions {
            semantic: Some(embedder),
            ..SearchOptions::default()
        };
        for (text, want) in [("slow terminal", &tail[0]), ("shell sluggish", &tail[2])] {
            let query = Query::parse(text);
            let prepared = prepare(&store, &Plan::new(&query, &with_tier))
                .expect("prepare")
                .expect("the tier applies");
            assert!(prepared.scan.is_some(), "{text}");
            let (ran, scanned) = alongside(Some(prepared), || 7);
            assert_eq!(ran, 7);
            let Some(Scanned(Beside::Found { qv, file })) = scanned else {
                panic!("{text}: not scanned beside");
            };
            assert!(matches!(file, FileScan::Found(..)), "{text}");
            let got: Vec<_> = nearest_with(&store, &qv, file, &all.filter(), None)
                .expect("nearest")
                .into_iter()
                .map(|n| (n.record_id, n.session, n.role, n.sim))
                .collect();
            assert_eq!(&got, want, "{text}");
        }
        // A filtered search finds the file's nearest beside the lexical
        // tier too, unless its filters are narrow (here the one session of
        // 37), and checks them after: the same as found without a thread.
        let (mut beside, mut later) = (0, 0);
        for opts in &narrowed {
            let opts = SearchOptions {
                semantic: Some(embedder),
                ..opts.clone()
            };
            let query = Query::parse("slow terminal");
            let prepared = prepare(&store, &Plan::new(&query, &opts))
                .expect("prepare")
                .expect("the tier applies");
            assert_eq!(prepared.scan.is_some(), opts.session.is_none(), "{opts:?}");
            match alongside(Some(prepared), || ()).1 {
                Some(Scanned(Beside::Found { qv, file })) => {
                    assert!(matches!(file, FileScan::Nearest(..)), "{opts:?}");
                    // The nearest records checked with the runs read up
                    // front (as for a filter on the time) or as they come.
                    let map = store.allowed_session_runs(&opts.filter()).expect("map");
                    let got: Vec<_> = nearest_with(&store, &qv, file, &opts.filter(), map.as_ref())
                        .expect("nearest")
                        .into_iter()
                        .map(|n| (n.record_id, n.session, n.role, n.sim))
                        .collect();
                    assert!(!got.is_empty(), "{opts:?}");
                    assert_eq!(got, found(&store, &qv, &opts), "{opts:?}");
                    assert_eq!(got, found(&twin, &qv, &opts), "{opts:?}");
                    beside += 1;
                }
                Some(Scanned(Beside::Later { narrow })) => {
                    // Known narrow already: scanned for the allowed ids.
                    assert!(narrow, "{opts:?}");
                    let qv = embedder.embed_one("slow terminal").expect("vector");
                    let map = store.allowed_session_runs(&opts.filter()).expect("map");
                    for pre in [None, map] {
                        let got: Vec<_> = nearest_with(
                            &store,
                            &qv,
                            FileScan::Narrow,
                            &opts.filter(),
                            pre.as_ref(),
                        )
                        .expect("nearest")
                        .into_iter()
                        .map(|n| (n.record_id, n.session, n.role, n.sim))
                        .collect();
                        assert!(!got.is_empty(), "{opts:?}");
                        assert_eq!(got, found(&twin, &qv, &opts), "{opts:?}");
                    }
                    later += 1;
                }
                _ => panic!("{opts:?}: no vector"),
            }
        }
        assert_eq!((beside, later), (2, 1));
        // A question with no word the table knows has no vector, found
        // beside the lexical tier; the lexical ranking stands.
        let query = Query::parse("quite unheard of");
        let prepared = prepare(&store, &Plan::new(&query, &with_tier)).expect("prepare");
        let (_, scanned) = alongside(prepared, || ());
        assert!(matches!(scanned, Some(Scanned(Beside::NoVector))));
        let lex = vec![Ranked {
            record_id: 1,
            score: 1.0,
            matches: 1,
            session_row: 1,
            role: "user".into(),
            answers: Vec::new(),
            coverage: 1.0,
        }];
        let blended =
            blend(&store, &Plan::new(&query, &with_tier), lex, scanned, None).expect("blend");
        assert_eq!(blended.iter().map(|r| r.record_id).collect::<Vec<_>>(), [1]);
        // An exact look-up, or --lexical, leaves the tier out.
        assert!(
            prepare(&store, &Plan::new(&Query::parse("rounding"), &with_tier))
                .expect("prepare")
                .is_none()
        );
        let lexical = SearchOptions {
            lexical_only: true,
            ..with_tier.clone()
        };
        assert!(
            prepare(&store, &Plan::new(&Query::parse("slow terminal"), &lexical))
                .expect("prepare")
                .is_none()
        );
    }

    #[test]
    fn fusion_rewards_agreement_and_keeps_each_tier() {
        let r = |id, session| Ranked {
            record_id: id,
            score: 1.0,
            matches: 1,
            session_row: session,
            role: "user".into(),
            answers: Vec::new(),
            coverage: 1.0,
        };
        let lex = vec![r(10, 1), r(20, 2)];
        let near = vec![
            Near {
                record_id: 21,
                session: 2,
                role: "user".into(),
                sim: 0.9,
            },
            Near {
                record_id: 30,
                session: 3,
                role: "assistant".into(),
                sim: 0.8,
            },
        ];
        let out = fuse(lex, near);
        let ids: Vec<i64> = out.iter().map(|r| r.record_id).collect();
        // Found by both tiers first, with the lexical record shown.
        assert_eq!(ids, vec![20, 10, 30]);
        assert!(fuse(Vec::new(), Vec::new()).is_empty());
    }

    #[test]
    fn fusion_weighs_each_tier_s_rank_by_its_strength() {
        let r = |id, session, score| Ranked {
            record_id: id,
            score,
            matches: 1,
            session_row: session,
            role: "assistant".into(),
            answers: Vec::new(),
            coverage: 1.0,
        };
        let n = |id, session, sim| Near {
            record_id: id,
            session,
            role: "user".into(),
            sim,
        };
        let first = |lex, near| fuse(lex, near)[0].session_row;
        // "pin hyper": session 1 matched both words, session 2 ("pin the
        // tab") one; the meaning tier found only session 2. By rank alone
        // session 2 won; its weak lexical score no longer lets it.
        let lex = vec![r(10, 1, 10.0), r(20, 2, 2.0)];
        assert_eq!(first(lex, vec![n(21, 2, 0.6)]), 1);
        // A lexical runner-up nearly as strong is still lifted by meaning.
        let lex = vec![r(10, 1, 10.0), r(20, 2, 9.0)];
        assert_eq!(first(lex, vec![n(21, 2, 0.6)]), 2);
        // A session far less alike than the meaning tier's best adds
        // little: the lexical order stands.
        let lex = vec![r(10, 1, 10.0), r(20, 2, 9.0)];
        assert_eq!(first(lex, vec![n(31, 3, 0.8), n(21, 2, 0.45)]), 1);
        // No lexical scores (all 0): ranks alone, as before.
        let lex = vec![r(10, 1, 0.0), r(20, 2, 0.0)];
        assert_eq!(first(lex, vec![n(21, 2, 0.6)]), 2);
        // "the pet needed an operation after eating clothing": lexically
        // first on one word of four, a short "yes operation"; the meaning
        // tier's best is second lexically. Covering a quarter of the
        // question, the first's vote no longer outweighs both of the
        // second's; covering all of it, it would.
        let part = |coverage| Ranked {
            coverage,
            ..r(10, 1, 10.0)
        };
        let lex = |coverage| vec![part(coverage), r(20, 2, 7.0)];
        let near = || vec![n(31, 3, 0.9), n(21, 2, 0.75)];
        assert_eq!(first(lex(0.25), near()), 2);
        assert_eq!(first(lex(1.0), near()), 1);
    }
}
