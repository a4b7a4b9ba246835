//! A [`Node`]: one machine's cairn, built from a resolved [`Config`]. It
//! ties the identity, the store, the redactor and the sources together and
//! is what the CLI, the MCP server, the browse page and (through
//! `sync`, which drives a shared `Node`) the daemon talk to.

use crate::config::Config;
use crate::home;
use crate::identity::{Identity, IdentityError};
use crate::indexer::{self, IndexContext, IndexError, IndexReport, Progress};
use crate::redact::{RedactionCounts, Redactor};
use crate::search::{self, Hit, Query, SearchError, SearchOptions};
use crate::sources::notes;
use crate::store::survey;
use crate::store::{
    ApplyError, ApplyReport, ApplyRequest, Component, ForgetCandidate, ForgetError, ForgetReport,
    MAX_QUERY_FORGET, SessionLookup, Store, StoreError, StoreStats, Synced,
};
use cairn_protocol::{Batch, ForgetTarget, NodeId, Pull, Watermark};

/// Failures of node operations.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The identity key could not be loaded or made.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Indexing failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// Searching failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// Writing a note failed.
    #[error("failed to write note to {path}: {source}")]
    Note {
        /// The notes file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A note with no text.
    #[error("a note needs some text")]
    EmptyNote,
    /// Forgetting failed.
    #[error(transparent)]
    Forget(#[from] ForgetError),
    /// The home folder could not be created.
    #[error("failed to create the cairn home {path}: {source}")]
    Home {
        /// The folder.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A forget selector that matches nothing.
    #[error("nothing to forget: {what} matches no stored record")]
    NothingToForget {
        /// The selector, as given.
        what: String,
    },
    /// A session id prefix that matches several sessions.
    #[error("session prefix {prefix:?} matches {count} sessions; give more of the id")]
    AmbiguousSession {
        /// The prefix given.
        prefix: String,
        /// Sessions it matches (at least 2).
        count: usize,
    },
    /// A query forget that matches more records than one forget may name.
    #[error("the query matches more than {max} records; narrow it")]
    TooManyMatches {
        /// The limit.
        max: usize,
    },
}

/// What `cairn forget` is asked to forget, before it is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgetRequest {
    /// One session, by (a unique prefix of) its id.
    Session(String),
    /// Every record whose project is exactly this path.
    Project(String),
    /// Every record containing all the words of this query.
    Query(String),
}

/// A resolved forget: the tombstone targets and the records they cover now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ForgetPlan {
    /// What the tombstones will name.
    #[serde(skip)]
    pub targets: Vec<ForgetTarget>,
    /// The records they cover on this node now (for showing; at most
    /// [`MAX_QUERY_FORGET`]).
    pub records: Vec<ForgetCandidate>,
}

/// A search page answered beside a refresh pass
/// ([`Node::search_page_refreshed`]).
#[derive(Debug)]
pub struct RefreshedPage {
    /// The answer, as current as the pass left the index.
    pub page: search::Page,
    /// What the pass did.
    pub report: IndexReport,
    /// Whether the query ran a second time because the pass (or another
    /// process) changed the index after the first answer.
    pub reran: bool,
}

/// What an indexing pass is asked to do ([`Node::index`]). By default: a
/// pass at its time over a walk of every store, to its end, reporting no
/// progress, keeping no list of stores and leaving no survey.
pub struct IndexRequest<'a> {
    now_ms: i64,
    deadline: Option<std::time::Instant>,
    walk: Option<indexer::Walk>,
    keep: Option<&'a mut indexer::Stores>,
    survey: bool,
    progress: Option<&'a mut dyn FnMut(Progress)>,
}

impl std::fmt::Debug for IndexRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexRequest")
            .field("now_ms", &self.now_ms)
            .field("deadline", &self.deadline)
            .field("walk", &self.walk)
            .field("keep", &self.keep.is_some())
            .field("survey", &self.survey)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl<'a> IndexRequest<'a> {
    /// A pass at `now_ms` (Unix ms), the time its rows are stamped with.
    pub fn new(now_ms: i64) -> IndexRequest<'a> {
        IndexRequest {
            now_ms,
            deadline: None,
            walk: None,
            keep: None,
            survey: false,
            progress: None,
        }
    }

    /// Stops taking on new work at `deadline` (newest stores first; a
    /// large file at a batch boundary): what is left is read by the next
    /// pass. `None` reads everything.
    pub fn until(mut self, deadline: Option<std::time::Instant>) -> IndexRequest<'a> {
        self.deadline = deadline;
        self
    }

    /// Reads what `walk` finds: a walk from [`Node::start_walk`] for this
    /// node's configuration (started before the node was opened), or one
    /// of a few stores from [`indexer::Stores::walk_of`].
    pub fn walked(mut self, walk: indexer::Walk) -> IndexRequest<'a> {
        self.walk = Some(walk);
        self
    }

    /// Leaves in `stores` every store a whole walk found, for later passes
    /// over a few of them ([`indexer::Stores::walk_of`]); a walk of some
    /// stores leaves it as it was.
    pub fn keeping(mut self, stores: &'a mut indexer::Stores) -> IndexRequest<'a> {
        self.keep = Some(stores);
        self
    }

    /// Leaves a survey for the next pass when one can be had cheaply:
    /// after a pass that found nothing new, or one that compared the disk
    /// with a survey that held and read what differed (see
    /// [`crate::store::survey`]). Not leaving one is logged, not failed.
    pub fn leaving_survey(mut self) -> IndexRequest<'a> {
        self.survey = true;
        self
    }

    /// Reports the pass's progress to `f` (for a progress bar).
    pub fn progress(mut self, f: &'a mut dyn FnMut(Progress)) -> IndexRequest<'a> {
        self.progress = Some(f);
        self
    }
}

/// Records stored since the columns files were last written before a pass
/// writes them again (`Node::write_columns`): a daemon's pass after an
/// agent wrote a few lines need not wait on two `fdatasync`s, and a search
/// reads the rows of those few records, the newest, whose pages lie
/// together at the table's end. In tests every pass writes them, so the
/// sync and node tests go through the files.
const COLUMNS_DUE: i64 = if cfg!(test) { 1 } else { 1_024 };

/// How often a pass with a deadline (the daemon's) checks every page of
/// the derived files (`Store::check_columns`), counted from its first
/// pass; a pass without one (`cairn index`) always does.
const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Records a vector pass examines between moves of their vectors into the
/// vector file: the `vectors` table, and the free pages it leaves in the
/// database once emptied, stay a few megabytes even on a first pass over
/// gigabytes of history.
const MOVE_EVERY: u64 = if cfg!(test) { 64 } else { 16_000 };

/// Records received in a catch-up (batches with more to follow) after
/// which the vector and columns files are written without waiting for the
/// log's last batch (see [`Node::apply_batch_from`]).
const RECEIVED_FILE_STEP: u64 = if cfg!(test) { 64 } else { MOVE_EVERY };

/// One machine's cairn.
pub struct Node {
    config: Config,
    identity: Identity,
    store: Store,
    redactor: Redactor,
    tightened: Vec<home::Exposed>,
    /// The rows the last pass compared the disk with, when it had nothing
    /// to read: [`Node::save_survey`] uses them while they are current.
    compared: Option<indexer::Compared>,
    /// Records received from peers since the vector and columns files were
    /// last written: a catch-up writes them in steps, not after every batch.
    received_unfiled: u64,
    /// A large catch-up on the bulk path, between its batches (see
    /// `store::catch_up`).
    catch_up: Option<crate::store::CatchUp>,
    /// The sessions holding a log of it, by holder id: a session gone
    /// without ending its part (its task dropped) is let go at the next
    /// batch or end of any session.
    catch_up_holders: std::collections::BTreeMap<u64, std::sync::Weak<()>>,
    /// A catch-up left its records' vectors to [`Node::finish_catch_up`].
    catch_up_vectors: bool,
    /// A move of vectors made while more records waited put the sketch's
    /// cells off (`sketch::CellsWhen::Later`): the last move writes them,
    /// in this call of [`Node::embed_pending`] or a later one.
    cells_put_off: bool,
    /// When the derived files were last checked whole, or when the first
    /// pass with a deadline began (its clock for the next check).
    checked_at: Option<std::time::Instant>,
    /// Derived files that could not be written since the last pass's
    /// report, with why (see `IndexReport::unwritten`).
    unwritten: Vec<(String, String)>,
}

/// A sync session's part in a large catch-up (see [`Node::apply_pulled`]):
/// made once per session and handed to each of its batches and to its
/// end. Dropping every clone without [`Node::finish_catch_up`] (a task
/// cancelled) lets the part go at the node's next batch or session end.
#[derive(Debug, Clone)]
pub struct CatchUpHolder {
    id: u64,
    alive: std::sync::Arc<()>,
}

impl CatchUpHolder {
    /// A holder no other session has.
    pub fn new() -> CatchUpHolder {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        CatchUpHolder {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            alive: std::sync::Arc::new(()),
        }
    }
}

impl Default for CatchUpHolder {
    fn default() -> Self {
        CatchUpHolder::new()
    }
}

impl Node {
    /// Opens the node's database (creating the home, key and database on first run).
    pub fn open(config: Config) -> Result<Node, NodeError> {
        home::ensure(&config.home).map_err(|source| NodeError::Home {
            path: config.home.clone(),
            source,
        })?;
        let tightened = home::tighten(&config.home);
        let identity = Identity::load_or_create(&config.identity_path)?;
        let mut store = Store::open(&config.db_path)?;
        // An older build kept the survey in a file; the database holds it.
        let _ = std::fs::remove_file(config.home.join(survey::OLD_FILE));
        // The database keeps node ids as text (its `origin` columns).
        let origin = identity.id().to_string();
        store.upsert_node(&origin, &config.node_name)?;
        // The own sync log's epoch is chosen on first open; reading the
        // clock here keeps the store clock-free.
        store.ensure_log(&origin, crate::clock::now_ms())?;
        // A database from before every field was redacted: its ids,
        // projects, titles and files are redacted once, now.
        let redactor = Redactor::new();
        store.redact_stored_fields(&redactor)?;
        store.set_redaction_rules(&redactor);
        // Batches of the own log leave sealed with the identity key.
        match crate::seal::Signer::new(identity.key()) {
            Ok(signer) => store.set_signer(std::sync::Arc::new(signer)),
            Err(e) => {
                tracing::warn!(error = %e, "this node's batches go out unsealed; peers will refuse them")
            }
        }
        Ok(Node {
            config,
            identity,
            store,
            redactor,
            tightened,
            compared: None,
            received_unfiled: 0,
            catch_up: None,
            catch_up_holders: std::collections::BTreeMap::new(),
            catch_up_vectors: false,
            cells_put_off: false,
            checked_at: None,
            unwritten: Vec::new(),
        })
    }

    /// Paths in the home that opening this node made private (they were
    /// readable by other users), with their old modes.
    pub fn tightened(&self) -> &[home::Exposed] {
        &self.tightened
    }

    /// Paths in the home that other users can still access now.
    pub fn exposed(&self) -> Vec<home::Exposed> {
        home::exposed(&self.config.home)
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This node's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The store, for read queries.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sizes the database's page cache for a process that answers one
    /// search and exits (see [`Store::ONE_SEARCH_CACHE_KIB`]). An index
    /// pass the search makes sets its own while it runs.
    pub fn for_one_search(&self) -> Result<(), NodeError> {
        Ok(self.store.set_cache_kib(Store::ONE_SEARCH_CACHE_KIB)?)
    }

    /// Runs one incremental indexing pass as `req` asks: over its walk
    /// (else one of every store), until its deadline, keeping the stores
    /// a whole walk found, and leaving a survey for the next pass. After
    /// the read: vectors for the new records, the columns file, the
    /// derived files checked when due, free pages given back.
    pub fn index(&mut self, req: IndexRequest<'_>) -> Result<IndexReport, NodeError> {
        let IndexRequest {
            now_ms,
            deadline,
            walk,
            mut keep,
            survey,
            progress,
        } = req;
        let mut quiet = |_: Progress| {};
        let progress: &mut dyn FnMut(Progress) = match progress {
            Some(p) => p,
            None => &mut quiet,
        };
        // A walk of its own is compared with no survey: no tallies.
        let walk = walk.unwrap_or_else(|| {
            indexer::Walk::start(&self.config.locations, &self.config.disabled, None)
        });
        let mut report = self.read_walked(walk, now_ms, deadline, progress, keep.as_deref_mut())?;
        // Sessions just read may name project folders holding stores no
        // walk found (an aider history where Claude Code ran): read them now.
        if report.added > 0 && self.learn_project_folders()? {
            let walk = indexer::Walk::start(&self.config.locations, &self.config.disabled, None);
            report.absorb(self.read_walked(walk, now_ms, deadline, progress, keep)?);
        }
        // Checked before they are written: a damaged file is written anew
        // by this same pass.
        // A pass with a deadline (a search's refresh, MCP, the daemon)
        // starts the clock on its first pass and checks once it has run
        // for [`CHECK_EVERY`]: a one-shot search never pays for reading
        // both files whole (its reads check the pages they touch anyway),
        // unless a reader marked one damaged.
        let now = std::time::Instant::now();
        let started = *self.checked_at.get_or_insert(now);
        if deadline.is_none()
            || now.duration_since(started) >= CHECK_EVERY
            || self.store.derived_marked()
        {
            self.check_derived(&mut report)?;
        }
        // A pass with a deadline computes the vectors of what it stored
        // itself, and of a backlog (a vector file given up, a pass cut
        // short) only until its deadline: a search's refresh must not
        // spend half a minute computing a 10 GB history's vectors again.
        let at_least = deadline.map(|_| report.added);
        (report.embedded, report.vectors_left) = self.embed_pending_upto(at_least, deadline)?;
        self.write_columns();
        report.unwritten.append(&mut self.unwritten);
        match self.store.trim_free_pages() {
            Ok(0) => {}
            Ok(pages) => tracing::debug!(pages, "free pages given back"),
            Err(e) => tracing::warn!(error = %e, "could not give free pages back"),
        }
        // The survey only spares a later pass its compare: a failure to
        // leave one costs that pass time, never an answer.
        if survey && let Err(e) = self.leave_survey(&report) {
            tracing::warn!(error = %e, "cannot leave a survey for the next pass");
        }
        Ok(report)
    }

    /// Starts the disk walk of a pass for the node `config` will open, so
    /// that it overlaps opening it (see [`IndexRequest::walked`]). Its
    /// threads tally what they find for [`Node::unchanged_since_survey`].
    pub fn start_walk(config: &Config) -> indexer::Walk {
        let keys = survey::Keys::of(&survey::config_key(config));
        indexer::Walk::start(&config.locations, &config.disabled, Some(keys))
    }

    /// The report of a pass over `walk` (from [`Node::start_walk`]) that the
    /// survey shows has nothing to do (see [`crate::store::survey`]).
    /// `None` when there is no survey, it no longer describes the
    /// database, or the walk finds a store that differs from it: then
    /// `walk` (with what it found so far, and still going) is for the pass
    /// ([`IndexRequest::walked`]).
    pub fn unchanged_since_survey(&self, walk: &mut indexer::Walk) -> Option<IndexReport> {
        let key = survey::config_key(&self.config);
        let known = survey::Survey::load(&self.store, &key)?;
        let stores = indexer::unchanged_since(walk, known)?;
        Some(IndexReport {
            stores,
            ..IndexReport::default()
        })
    }

    /// Writes the survey a later [`Node::unchanged_since_survey`] trusts
    /// (see [`Store::save_survey`]): call it after a pass that found
    /// nothing new. Returns whether one was written.
    fn save_survey(&mut self) -> Result<bool, NodeError> {
        let enabled = crate::sources::enabled_agents(&self.config.disabled);
        let rows = match self.compared.take() {
            Some(indexer::Compared::Rows(before, stamps)) => Some((before, stamps)),
            _ => None,
        };
        let key = survey::config_key(&self.config);
        Ok(self.store.save_survey(&key, &enabled, rows)?)
    }

    /// Leaves a survey for the next pass after the pass that made `report`,
    /// when one can be had cheaply: after a pass that found nothing new
    /// (see [`Node::save_survey`]), and after one that compared the disk
    /// with a survey that held for the database and read the stores that
    /// differed from it, from that survey and those stores' rows now (when
    /// no other process committed since). Returns whether one was written.
    fn leave_survey(&mut self, report: &IndexReport) -> Result<bool, NodeError> {
        // A derived file left unwritten, or vectors left, must be tried by
        // the next pass, which a survey would skip.
        if !report.unwritten.is_empty() || report.vectors_left {
            self.compared = None;
            return Ok(false);
        }
        let resurvey = match self.compared.take() {
            Some(indexer::Compared::Surveyed(r)) => r,
            other => {
                self.compared = other;
                return if report.nothing_new() {
                    self.save_survey()
                } else {
                    Ok(false)
                };
            }
        };
        let key = survey::config_key(&self.config);
        Ok(self.store.save_survey_of(&key, |s| resurvey.sources(s))?)
    }

    /// The indexer's pass over `walk` with this node's settings, and
    /// nothing after it.
    fn read_walked(
        &mut self,
        walk: indexer::Walk,
        now_ms: i64,
        deadline: Option<std::time::Instant>,
        progress: &mut dyn FnMut(Progress),
        stores: Option<&mut indexer::Stores>,
    ) -> Result<IndexReport, NodeError> {
        let origin = self.identity.id().to_string();
        let ctx = IndexContext {
            locations: &self.config.locations,
            disabled: &self.config.disabled,
            redactor: &self.redactor,
            origin: &origin,
            now_ms,
            deadline,
        };
        Ok(indexer::index_walked_keeping(
            &mut self.store,
            &ctx,
            walk,
            progress,
            &mut self.compared,
            stores,
        )?)
    }

    /// Remembers the working folders of the indexed sessions that hold a
    /// per-project store (see [`crate::projects::learn`]) and adds them to
    /// this node's locations; true when there were new ones.
    fn learn_project_folders(&mut self) -> Result<bool, NodeError> {
        let Some(file) = self.config.locations.projects_file.clone() else {
            return Ok(false);
        };
        let known: std::collections::HashSet<std::path::PathBuf> =
            self.config.locations.project_roots().into_iter().collect();
        let candidates = self
            .store
            .session_projects()?
            .into_iter()
            .map(std::path::PathBuf::from)
            .filter(|p| !known.contains(p));
        let new = crate::projects::learn(&file, candidates);
        if new.is_empty() {
            return Ok(false);
        }
        tracing::info!(
            folders = new.len(),
            "found project folders with their own stores"
        );
        let dirs = &mut self.config.locations.project_dirs;
        dirs.extend(new);
        dirs.sort();
        dirs.dedup();
        Ok(true)
    }

    /// The embedder for a search (see [`search::semantic::embedder_for`]).
    fn embedder_for(
        &self,
        query: &str,
        opts: &SearchOptions,
    ) -> Option<&'static crate::embed::Embedder<'static>> {
        search::semantic::embedder_for(self.config.semantic, query, opts)
    }

    /// Gives every record stored since the last pass its meaning vector
    /// (computed here, from the stored redacted text). Returns how many
    /// records were examined; nothing when the semantic tier is off.
    ///
    /// The new vectors are moved into the flat file that searches scan
    /// (see `store::vector_file`) every [`MOVE_EVERY`] records, as far as
    /// they fill whole 2 MiB regions, and all at the end; the cells over
    /// their sketch are written (when due) only at the end. A failure there is logged, not returned: the vectors stay in
    /// the table, where searches read them, until a later pass. A file
    /// that cannot be trusted any more is written again from vectors
    /// computed anew.
    pub fn embed_pending(&mut self) -> Result<u64, StoreError> {
        self.embed_pending_upto(None, None).map(|(done, _)| done)
    }

    /// [`Node::embed_pending`] that stops, at a move, once it examined about
    /// `most` records (`None`: all) and `until` (if any) has passed;
    /// returns how many it examined and whether more wait for a later call.
    fn embed_pending_upto(
        &mut self,
        most: Option<u64>,
        until: Option<std::time::Instant>,
    ) -> Result<(u64, bool), StoreError> {
        if !self.config.semantic {
            return Ok((0, false));
        }
        // Loaded only when there is work: parsing the table costs more than
        // a pass with nothing new.
        let embedder = crate::embed::builtin;
        let (mut done, mut lost, mut moving) = (0, false, true);
        loop {
            let examined = match self.store.vectors_pending()? {
                true => self.store.embed_some(embedder(), MOVE_EVERY)?,
                false => 0,
            };
            done += examined;
            let more = examined >= MOVE_EVERY;
            if moving && (!self.store.vector_file_current()? || (!more && self.cells_put_off)) {
                let dim = embedder().dim();
                self.cells_put_off = more;
                let synced = match more {
                    true => self.store.sync_vector_file_step(dim),
                    false => self.store.sync_vector_file(dim),
                };
                match synced {
                    // Computed again once; a second loss in a row waits
                    // for the next pass.
                    Ok(Synced::Lost) if !lost => {
                        tracing::warn!(
                            "the vector file was lost or damaged; computing its vectors again"
                        );
                        lost = true;
                        continue;
                    }
                    Ok(synced) => tracing::debug!(?synced, "vector file"),
                    Err(e) => {
                        tracing::warn!(
                            error = %e,
                            "could not write the vector file; searches read the vectors table"
                        );
                        self.unwritten.push(crate::store::derived::failure(
                            self.store.path(),
                            Component::Vectors,
                            &e,
                        ));
                        moving = false;
                    }
                }
            }
            if !more {
                return Ok((done, false));
            }
            // A step that examined a whole move may have taken the last:
            // then the next round ends the loop with the file's last sync.
            if most.is_some_and(|m| done >= m)
                && until.is_none_or(|d| std::time::Instant::now() >= d)
                && self.store.vectors_pending()?
            {
                return Ok((done, true));
            }
        }
    }

    /// Writes the columns files' entries of the records stored since they
    /// were last written, once [`COLUMNS_DUE`] of them wait (see
    /// `store::columns_file`). A failure is logged, not returned: searches
    /// read those records' rows instead.
    fn write_columns(&mut self) {
        match self.store.write_columns_due(COLUMNS_DUE) {
            Ok(0) => {}
            Ok(n) => tracing::debug!(records = n, "columns file"),
            Err(e) => {
                tracing::warn!(error = %e, "could not write the columns file");
                self.unwritten.push(crate::store::derived::failure(
                    self.store.path(),
                    Component::Columns,
                    &e,
                ));
            }
        }
    }

    /// Checks every page of the derived files; a damaged one is given up,
    /// noted in `report`, and written anew by this pass.
    fn check_derived(&mut self, report: &mut IndexReport) -> Result<(), NodeError> {
        self.checked_at = Some(std::time::Instant::now());
        for damage in self.store.check_derived(self.config.semantic)? {
            tracing::warn!(path = %damage.path.display(), why = %damage.why, "a damaged derived file is written anew");
            report
                .rebuilt
                .push((damage.path.display().to_string(), damage.why));
        }
        Ok(())
    }

    /// Whether the semantic tier is on, and how far the vectors have come.
    pub fn semantic_status(&self) -> Result<(bool, crate::store::VectorCounts), NodeError> {
        Ok((self.config.semantic, self.store.vector_counts()?))
    }

    /// How far the index is behind the agents' stores (reads no history).
    pub fn freshness(&self) -> Result<indexer::Freshness, NodeError> {
        Ok(indexer::freshness(
            &self.store,
            &self.config.locations,
            &self.config.disabled,
        )?)
    }

    /// One page of a search: `opts.limit` sessions after the first `offset`,
    /// with the number of sessions that matched.
    pub fn search_page(
        &self,
        query: &str,
        opts: &SearchOptions,
        offset: usize,
    ) -> Result<search::Page, NodeError> {
        let opts = SearchOptions {
            semantic: self.embedder_for(query, opts),
            ..opts.clone()
        };
        Ok(search::search_page(
            &self.store,
            &Query::parse(query),
            &opts,
            offset,
        )?)
    }

    /// One page of a search that is as fresh as a refresh pass makes it, in
    /// about the time of the slower of the two: the query runs on the index
    /// as it is while `walk` (from [`Node::start_walk`]) is still surveying
    /// the agents' folders, then the pass finishes. When the pass changed
    /// nothing (no store read, no row written here, no commit by another
    /// process since before the query) that first answer is current and is
    /// kept; otherwise the query runs again on the refreshed index. When
    /// the survey shows the walk has nothing new, there is no pass at all
    /// (see [`Node::unchanged_since_survey`]); a pass that finds nothing new
    /// leaves a survey for the next one.
    #[allow(clippy::too_many_arguments)]
    pub fn search_page_refreshed(
        &mut self,
        query: &str,
        opts: &SearchOptions,
        offset: usize,
        walk: indexer::Walk,
        now_ms: i64,
        deadline: Option<std::time::Instant>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RefreshedPage, NodeError> {
        let before = self.store.change_stamp()?;
        let first = self.search_page(query, opts, offset)?;
        let mut walk = walk;
        // The survey holds for the database and the disk is as it says,
        // and nothing was committed since before the query: the first
        // answer is current, no pass.
        if let Some(report) = self.unchanged_since_survey(&mut walk)
            && self.store.change_stamp()? == before
        {
            return Ok(RefreshedPage {
                page: first,
                report,
                reran: false,
            });
        }
        let report = self.index(
            IndexRequest::new(now_ms)
                .walked(walk)
                .until(deadline)
                .progress(progress),
        )?;
        let untouched = report.changed == 0
            && report.added == 0
            && report.removed == 0
            && report.deferred == 0
            && self.store.change_stamp()? == before;
        let (page, reran) = if untouched {
            (first, false)
        } else {
            (self.search_page(query, opts, offset)?, true)
        };
        // Leave a survey for the next search or `cairn index`: none held,
        // and none would have been wrong, or one held for the database and
        // the pass read what differed. After another process's commit,
        // none.
        // The survey only spares a later pass its compare: a failure to
        // leave one costs that pass time, never this answer.
        if (untouched || !report.nothing_new())
            && let Err(e) = self.leave_survey(&report)
        {
            tracing::warn!(error = %e, "cannot leave a survey for the next pass");
        }
        Ok(RefreshedPage {
            page,
            report,
            reran,
        })
    }

    /// Searches the merged memory (the first page).
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>, NodeError> {
        let opts = SearchOptions {
            semantic: self.embedder_for(query, opts),
            ..opts.clone()
        };
        Ok(search::search(&self.store, &Query::parse(query), &opts)?)
    }

    /// Stores a durable note (redacted first) and indexes it at once.
    /// Returns the kinds of secret that were removed from it.
    pub fn remember(
        &mut self,
        text: &str,
        project: Option<&str>,
        now_ms: i64,
    ) -> Result<RedactionCounts, NodeError> {
        if text.trim().is_empty() {
            return Err(NodeError::EmptyNote);
        }
        let mut counts = RedactionCounts::new();
        let clean = self.redactor.redact(text, &mut counts).into_owned();
        // The project is written to the notes file as given: redacted
        // first, as the text is.
        let project =
            project.map(|p| crate::redact::fields::redact_path(&self.redactor, p, &mut counts));
        let path = self.config.locations.notes_file.clone();
        notes::append(&path, project.as_deref(), &clean, now_ms)
            .map_err(|source| NodeError::Note { path, source })?;
        // Index just the notes: a note must not wait for a pass over every agent.
        let others: Vec<String> = crate::sources::registry()
            .iter()
            .map(|s| s.agent().to_owned())
            .filter(|a| a != notes::AGENT)
            .collect();
        let origin = self.identity.id().to_string();
        let ctx = IndexContext {
            locations: &self.config.locations,
            disabled: &others,
            redactor: &self.redactor,
            origin: &origin,
            now_ms,
            deadline: None,
        };
        indexer::index_all(&mut self.store, &ctx, &mut |_| {})?;
        self.embed_pending()?;
        self.write_columns();
        // Logged where they failed; the next pass tries again.
        self.unwritten.clear();
        Ok(counts)
    }

    /// Store totals.
    pub fn stats(&self) -> Result<StoreStats, NodeError> {
        Ok(self.store.stats()?)
    }

    /// This node's watermark for every origin log it holds.
    pub fn watermarks(&self) -> Result<Vec<Watermark>, NodeError> {
        Ok(self.store.watermarks()?)
    }

    /// Answers a peer's pull from the store, redacted again on the way out;
    /// `scope` (project prefixes) withholds everything outside it.
    pub fn serve_pull(&self, pull: &Pull, scope: Option<&[String]>) -> Result<Batch, NodeError> {
        Ok(self.store.serve_pull(pull, scope, &self.redactor)?)
    }

    /// Applies a batch `peer` sent in answer to `pull` (see
    /// `Store::apply_batch`; the peer vouches for an origin key this node
    /// sees for the first time).
    ///
    /// When the batch brought tombstones, notes they cover are removed from
    /// this node's notes file too (a failure there is logged: the batch is
    /// already committed and the records are gone from the index).
    pub fn apply_batch_from(
        &mut self,
        pull: &Pull,
        batch: &Batch,
        peer: Option<&NodeId>,
    ) -> Result<ApplyReport, ApplyError> {
        self.apply_pulled(pull, batch, peer, 0, &CatchUpHolder::new(), None)
    }

    /// [`Node::apply_batch_from`] for a batch after which the peer holds
    /// `coming` more entries of its log (from its watermarks), pulled by
    /// the session `holder`. A large catch-up takes the bulk path
    /// (`store::catch_up`): its records are stored without their vectors
    /// and, when the database is small beside what comes, with the
    /// records' hash index deferred. Several sessions share one catch-up;
    /// it ends (the index built) when no session has a log left in it:
    /// each log's last batch, a failed batch or the end of a session
    /// ([`Node::finish_catch_up`]) lets that session's part go, never
    /// another's. The vectors follow after the last session's end, as a
    /// cold indexing pass makes them after its records. The records may
    /// come prepared `ahead` ([`Node::batch_preparer`]).
    pub fn apply_pulled(
        &mut self,
        pull: &Pull,
        batch: &Batch,
        peer: Option<&NodeId>,
        coming: u64,
        holder: &CatchUpHolder,
        ahead: Option<crate::store::PreparedBatch>,
    ) -> Result<ApplyReport, ApplyError> {
        self.let_gone_holders_go();
        if batch.more && coming >= crate::store::CATCH_UP_MIN {
            match &mut self.catch_up {
                Some(c) => c.add_log(batch.origin, batch.epoch, holder.id),
                None => {
                    self.catch_up =
                        self.store
                            .begin_catch_up(batch.origin, batch.epoch, coming, holder.id)?
                }
            }
            if self.catch_up.is_some() {
                self.catch_up_holders
                    .insert(holder.id, std::sync::Arc::downgrade(&holder.alive));
            }
        }
        let bulk = self
            .catch_up
            .as_ref()
            .is_some_and(|c| c.covers(batch.origin, batch.epoch));
        // Received records get their vectors as they are stored, except in
        // a large catch-up; vectors never travel.
        let embedder = (self.config.semantic && !batch.records.is_empty() && !bulk)
            .then(crate::embed::builtin);
        let applied = self.store.apply_batch(
            ApplyRequest::new(pull, batch, &self.redactor)
                .from_peer(peer)
                .embedding(embedder)
                .catching_up(self.catch_up.as_mut())
                .prepared(ahead),
        );
        let report = match applied {
            Ok(r) => r,
            Err(e) => {
                // The session ends on most failures; the index and vectors
                // are not left waiting for its part of the catch-up.
                if !matches!(e, ApplyError::Stale { .. }) {
                    self.release_catch_up(holder.id);
                }
                return Err(e);
            }
        };
        if report.tombstones > 0 {
            let targets: Result<Vec<ForgetTarget>, _> = self
                .store
                .tombstones()
                .map(|rows| rows.iter().filter_map(tombstone_target).collect());
            match targets
                .map_err(NodeError::from)
                .and_then(|t| self.forget_notes(&t))
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(notes = n, "removed notes a peer's forget covers"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not remove forgotten notes from the notes file")
                }
            }
        }
        self.received_unfiled += report.stored;
        if bulk && !batch.more {
            let done = self
                .catch_up
                .as_mut()
                .is_some_and(|c| c.log_done(batch.origin, batch.epoch));
            if done {
                self.end_catch_up();
            }
        }
        // The vector file and the columns files: while the peer has more
        // of this log to send, they wait, as for a local pass's records
        // until its end: each move of the vectors into the vector file and
        // each columns write syncs files, which after every batch of a
        // catch-up cost more than storing the batch. The batch that ends
        // the log, a step's worth of records, or the next index pass
        // writes them (and computes any vector still missing). A large
        // catch-up leaves both to the end of the session.
        if (!batch.more || self.received_unfiled >= RECEIVED_FILE_STEP) && self.catch_up.is_none() {
            self.received_unfiled = 0;
            if self.catch_up.is_none() && !self.catch_up_vectors {
                self.embed_pending()?;
            }
            self.write_columns();
            // Logged where they failed; the next pass tries again.
            self.unwritten.clear();
        }
        Ok(report)
    }

    /// What prepares a peer's batches off the node while it stores an
    /// earlier one (see `ApplyRequest::prepared`).
    pub fn batch_preparer(&self) -> crate::store::Preparer {
        self.store.preparer(&self.redactor)
    }

    /// Whether batches prepared ahead are used now: their records are
    /// stored without vectors (a large catch-up, or no meaning tier).
    pub fn uses_prepared_batches(&self) -> bool {
        self.catch_up.is_some() || !self.config.semantic
    }

    /// Lets the session `holder`'s part of the catch-up go; ends the
    /// catch-up when no other session has a log left in it.
    fn release_catch_up(&mut self, holder: u64) {
        self.catch_up_holders.remove(&holder);
        if self.catch_up.as_mut().is_some_and(|c| c.release(holder)) {
            self.end_catch_up();
        }
    }

    /// Lets go the parts of sessions that ended without saying so (their
    /// task was dropped): no one else would end them.
    fn let_gone_holders_go(&mut self) {
        let gone: Vec<u64> = self
            .catch_up_holders
            .iter()
            .filter(|(_, alive)| alive.strong_count() == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            tracing::debug!(holder = id, "a session left its part of a catch-up");
            self.release_catch_up(id);
        }
    }

    /// Ends the large catch-up, if one is on: builds the records' hash
    /// index if it deferred it (a failure is logged: the next writer
    /// builds it). Its vectors wait for [`Node::finish_catch_up`]. Called
    /// when no session has a log left in it.
    fn end_catch_up(&mut self) {
        let Some(c) = self.catch_up.take() else {
            return;
        };
        self.catch_up_holders.clear();
        if let Err(e) = self.store.end_catch_up(c) {
            tracing::warn!(error = %e, "the records' hash index not built after a catch-up");
        }
        self.catch_up_vectors = true;
    }

    /// Whether a large catch-up is on, and the sessions holding a log of
    /// it (for tests).
    #[cfg(test)]
    pub(crate) fn catch_up_holders(&self) -> Option<std::collections::BTreeSet<u64>> {
        self.catch_up.as_ref().map(crate::store::CatchUp::holders)
    }

    /// At the end of the session `holder`: lets its part of the catch-up
    /// go, then, once no session has a log left in it, one step of what
    /// the catch-up left: the vectors of about [`MOVE_EVERY`] of its
    /// records computed and moved into the vector file, then, at the last
    /// step, the columns files written. Returns whether more steps remain
    /// (none while another session still catches up: the last one to end
    /// does them). A session calls it after it ended, in steps, so that
    /// whoever else uses the node gets in between; a failure is logged
    /// and leaves the rest to the next index pass.
    pub fn finish_catch_up(&mut self, holder: &CatchUpHolder) -> bool {
        self.release_catch_up(holder.id);
        self.let_gone_holders_go();
        if self.catch_up.is_some() || !self.catch_up_vectors {
            return false;
        }
        // The full-text merge the catch-up left, a step a call.
        match self.store.step_left_merge() {
            Ok(true) => return true,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the full-text merge after a catch-up left to a later pass")
            }
        }
        match self.embed_pending_upto(Some(MOVE_EVERY), None) {
            Ok((_, true)) => return true,
            Ok((_, false)) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the vectors of a catch-up not computed; the next pass does");
            }
        }
        self.catch_up_vectors = false;
        self.received_unfiled = 0;
        self.write_columns();
        // Logged where they failed; the next pass tries again.
        self.unwritten.clear();
        false
    }

    /// Removes the notes `targets` cover from the notes file; returns how many.
    fn forget_notes(&self, targets: &[ForgetTarget]) -> Result<u64, NodeError> {
        if targets.is_empty() {
            return Ok(0);
        }
        let path = self.config.locations.notes_file.clone();
        let redactor = &self.redactor;
        let removed = notes::rewrite_without(&path, |mut r| {
            // The record exactly as indexing stores it, so hashes match.
            indexer::redact(&mut r, redactor, &mut RedactionCounts::new());
            targets.iter().any(|t| covers(t, &r))
        })
        .map_err(|source| NodeError::Note { path, source })?;
        Ok(removed as u64)
    }

    /// Resolves what a forget request covers, without changing anything.
    pub fn plan_forget(&self, req: &ForgetRequest) -> Result<ForgetPlan, NodeError> {
        let nothing = |what: &str| NodeError::NothingToForget {
            what: what.to_owned(),
        };
        let plan = match req {
            ForgetRequest::Session(prefix) => {
                let s = match self.store.find_session(prefix)? {
                    SessionLookup::One(s) => *s,
                    SessionLookup::None => {
                        return Err(nothing(&format!("session {prefix}")));
                    }
                    SessionLookup::Several { count, .. } => {
                        return Err(NodeError::AmbiguousSession {
                            prefix: prefix.clone(),
                            count,
                        });
                    }
                };
                let target = ForgetTarget::Session {
                    agent: s.agent.clone(),
                    session_id: s.session_id.clone(),
                };
                let records = self.store.forget_candidates(&target, MAX_QUERY_FORGET)?;
                ForgetPlan {
                    targets: vec![target],
                    records,
                }
            }
            ForgetRequest::Project(path) => {
                let target = ForgetTarget::Project {
                    project: path.clone(),
                };
                let records = self.store.forget_candidates(&target, MAX_QUERY_FORGET)?;
                if records.is_empty() {
                    return Err(nothing(&format!("project {path}")));
                }
                ForgetPlan {
                    targets: vec![target],
                    records,
                }
            }
            ForgetRequest::Query(q) => {
                let records = self
                    .store
                    .records_matching_all(&Query::parse(q).to_fts_all(), MAX_QUERY_FORGET + 1)?;
                if records.is_empty() {
                    return Err(nothing(&format!("query {q:?}")));
                }
                if records.len() > MAX_QUERY_FORGET {
                    return Err(NodeError::TooManyMatches {
                        max: MAX_QUERY_FORGET,
                    });
                }
                let targets = records
                    .iter()
                    .map(|r| ForgetTarget::Record { hash: r.hash })
                    .collect();
                ForgetPlan { targets, records }
            }
        };
        Ok(plan)
    }

    /// Forgets what `plan` names, here and (through the tombstones in this
    /// node's log) on every peer.
    ///
    /// Notes are primary data kept in the notes file: the notes the plan
    /// covers are also removed from it (the file is rewritten atomically), so
    /// their text is gone from disk, not only from the index.
    pub fn forget(&mut self, plan: &ForgetPlan, now_ms: i64) -> Result<ForgetReport, NodeError> {
        let mut report = self.store.forget(&plan.targets, now_ms)?;
        report.notes = self.forget_notes(&plan.targets)?;
        Ok(report)
    }
}

/// The target a stored tombstone names (`None` for a malformed row).
fn tombstone_target(t: &crate::store::TombstoneRow) -> Option<ForgetTarget> {
    match t.target {
        1 => Some(ForgetTarget::Session {
            agent: t.agent.clone()?,
            session_id: t.session_id.clone()?,
        }),
        2 => Some(ForgetTarget::Project {
            project: t.project.clone()?,
        }),
        3 => Some(ForgetTarget::Record { hash: t.hash? }),
        _ => None,
    }
}

/// True when a forget of `target` covers the record `r` (as stored).
fn covers(target: &ForgetTarget, r: &crate::record::Record) -> bool {
    match target {
        ForgetTarget::Session { agent, session_id } => {
            r.agent == *agent && r.session_id == *session_id
        }
        ForgetTarget::Project { project } => r.project.as_deref() == Some(project.as_str()),
        ForgetTarget::Record { hash } => r.content_hash() == *hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn claude_line(session: &str, i: u32, text: &str) -> String {
        format!(
            concat!(
                r#"{{"type":"user","uuid":"{s}-{i}","sessionId":"{s}","#,
                r#""timestamp":"2025-11-24T10:00:{i:02}.000Z","cwd":"/p","#,
                r#""message":{{"role":"user","content":"{t}"}}}}"#,
                "\n"
            ),
            s = session,
            i = i,
            t = text
        )
    }

    fn append(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open");
        std::io::Write::write_all(&mut f, text.as_bytes()).expect("write");
    }

    /// Runs a pass with nothing new and saves the survey it leaves.
    fn settle(node: &mut Node) {
        let r = node.index(IndexRequest::new(0)).expect("pass");
        assert_eq!((r.changed, r.added, r.removed), (0, 0, 0), "{r:?}");
        assert!(node.save_survey().expect("save"), "no survey was written");
    }

    /// A home whose one Claude Code transcript (`projects/-p/s1.jsonl`)
    /// holds `text` and was indexed once.
    fn indexed_home(text: &str) -> (tempfile::TempDir, Config, Node, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let mut node = Node::open(cfg.clone()).expect("open");
        let file = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
        append(&file, &claude_line("s1", 0, text));
        node.index(IndexRequest::new(0)).expect("first pass");
        (dir, cfg, node, file)
    }

    /// A pass over the walk the survey hands back (it must, `why`).
    fn pass_after_walk(node: &mut Node, why: &str) -> IndexReport {
        let walk = surveyed(node).expect_err(why);
        node.index(IndexRequest::new(0).walked(*walk))
            .expect("pass")
    }

    /// Whether the last pass compared the disk with a survey (not with
    /// every row).
    fn by_survey(node: &Node) -> bool {
        matches!(node.compared, Some(indexer::Compared::Surveyed(_)))
    }

    /// The survey's answer, or the walk it hands back.
    fn surveyed(node: &Node) -> Result<IndexReport, Box<indexer::Walk>> {
        let mut walk = Node::start_walk(node.config());
        node.unchanged_since_survey(&mut walk).ok_or(Box::new(walk))
    }

    /// A derived file written after the survey (damage, another program)
    /// stops the survey's shortcut, and the pass that runs instead finds
    /// the damage, names the file and writes it anew.
    #[test]
    fn a_derived_file_changed_after_the_survey_is_checked_by_a_pass() {
        let (_dir, cfg, mut node, _) = indexed_home("a heron in the marsh");
        settle(&mut node);
        assert!(surveyed(&node).is_ok(), "nothing changed");
        let columns = Component::Columns.path(&cfg.db_path);
        let mut bytes = std::fs::read(&columns).expect("columns file");
        // A byte of the first page of entries, after the header's page.
        bytes[4096 + 40] ^= 0xff;
        bytes.push(0);
        std::fs::write(&columns, &bytes).expect("damage");
        let walk = surveyed(&node).expect_err("the shortcut is not taken");
        let r = node
            .index(IndexRequest::new(0).walked(*walk))
            .expect("pass");
        assert_eq!(r.rebuilt.len(), 1, "{r:?}");
        assert_eq!(r.rebuilt[0].0, columns.display().to_string());
        assert!(r.unwritten.is_empty(), "{r:?}");
        assert_eq!(node.store.check_columns().expect("check"), None, "anew");
    }

    /// A walk that tallied its stores with the survey's keys, one that
    /// tallied with other keys and one that tallied nothing all compare
    /// alike: the tallies of the last two are made on comparing.
    #[test]
    fn a_walk_compares_alike_whoever_tallied_it() {
        let (_dir, cfg, mut node, first) = indexed_home("a heron in the marsh");
        settle(&mut node);
        let key = survey::config_key(&cfg);
        let known = || survey::Survey::load(&node.store, &key).expect("a survey");
        let tallies = [
            Some(survey::Keys::of(&key)),
            Some(survey::Keys::of(&[7; 32])),
            None,
        ];
        let compare = |keys| {
            let mut walk = indexer::Walk::start(&cfg.locations, &cfg.disabled, keys);
            indexer::unchanged_since(&mut walk, known())
        };
        for keys in tallies {
            assert_eq!(compare(keys), Some(1), "{keys:?}");
        }
        append(&first, &claude_line("s1", 1, "an egret"));
        for keys in tallies {
            assert_eq!(compare(keys), None, "{keys:?}");
        }
    }

    #[test]
    fn the_survey_tells_a_pass_with_nothing_new_until_anything_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = crate::config::lexical_for_tests(dir.path());
        // The file an older build kept its survey in goes at the open.
        let old = cfg.home.join(survey::OLD_FILE);
        std::fs::create_dir_all(&cfg.home).expect("home");
        std::fs::write(&old, b"cairnsv3").expect("old survey");
        let mut node = Node::open(cfg.clone()).expect("open");
        assert!(!old.exists(), "the old survey file is removed");
        // No survey before the first pass.
        assert!(surveyed(&node).is_err());
        let projects = cfg.locations.claude_dir.join("projects");
        let first = projects.join("-p/s1.jsonl");
        append(
            &first,
            &claude_line("s1", 0, "the heron flew over the marsh"),
        );
        node.index(IndexRequest::new(0)).expect("first pass");
        settle(&mut node);
        let report = surveyed(&node).expect("nothing new");
        assert_eq!((report.stores, report.changed, report.added), (1, 0, 0));

        // An append: the walk comes back whole and the pass reads the line.
        append(&first, &claude_line("s1", 1, "a kingfisher dove for fish"));
        let r = pass_after_walk(&mut node, "the store grew");
        assert_eq!((r.stores, r.changed, r.added), (1, 1, 1));
        // That pass wrote the database: the survey no longer holds, though
        // the disk is now what the index has.
        assert!(surveyed(&node).is_err());
        settle(&mut node);
        assert_eq!(surveyed(&node).expect("nothing new").stores, 1);

        // A new store, then that store gone: each takes a pass.
        let second = projects.join("-q/s2.jsonl");
        append(&second, &claude_line("s2", 0, "an egret in the reeds"));
        let r = pass_after_walk(&mut node, "a new store");
        assert_eq!((r.stores, r.added), (2, 1));
        settle(&mut node);
        assert_eq!(surveyed(&node).expect("nothing new").stores, 2);
        std::fs::remove_file(&second).expect("rm");
        let r = pass_after_walk(&mut node, "a store is gone");
        assert_eq!(r.stores, 1);
        settle(&mut node);
        assert_eq!(surveyed(&node).expect("nothing new").stores, 1);

        // A refreshed search with nothing new leaves a survey too, and a
        // search after an append does not trust it.
        node.store.drop_survey().expect("drop");
        assert!(surveyed(&node).is_err());
        let opts = SearchOptions {
            limit: 10,
            ..SearchOptions::default()
        };
        let walk = Node::start_walk(&cfg);
        let r = node
            .search_page_refreshed("heron", &opts, 0, walk, 0, None, &mut |_| {})
            .expect("search");
        assert_eq!((r.page.hits.len(), r.reran), (1, false));
        assert_eq!(surveyed(&node).expect("left by the search").stores, 1);
        append(&first, &claude_line("s1", 2, "a grebe dived"));
        let walk = Node::start_walk(&cfg);
        let r = node
            .search_page_refreshed("grebe", &opts, 0, walk, 0, None, &mut |_| {})
            .expect("search");
        assert_eq!((r.page.hits.len(), r.reran, r.report.added), (1, true, 1));
        settle(&mut node);

        // Another configuration (a source turned off) has no survey.
        let mut other = cfg.clone();
        other.disabled.push("codex".into());
        let other = Node::open(other).expect("open");
        assert!(surveyed(&other).is_err());
        drop(other);

        // Another cairn rewrites what the index knows of a store (as a
        // reset would) just after a pass with nothing new: neither the
        // survey from before nor one written from that pass's rows may say
        // nothing changed.
        let r = node.index(IndexRequest::new(0)).expect("pass");
        assert_eq!(r.changed, 0);
        let mut raw = crate::store::Store::open(&cfg.db_path).expect("other");
        let mut reset = raw
            .source_state(&first.to_string_lossy())
            .expect("state")
            .expect("known");
        reset.size = 0;
        let mut ing = raw.ingest("elsewhere").expect("ingest");
        ing.save_state(&reset, 0).expect("save");
        ing.commit().expect("commit");
        assert!(surveyed(&node).is_err());
        assert!(
            node.save_survey().expect("save"),
            "written from rows read again"
        );
        let r = pass_after_walk(&mut node, "the database changed");
        assert_eq!(r.changed, 1, "the store is read again: {r:?}");
    }

    /// A survey's sources, in one order, for comparing two surveys.
    fn sources_of(s: &survey::Survey) -> Vec<survey::Tallied> {
        let mut v = s.after(std::iter::empty()).expect("sources");
        v.sort_by(|a, b| a.agent.cmp(&b.agent));
        v
    }

    fn loaded(node: &Node) -> survey::Survey {
        survey::Survey::load(&node.store, &survey::config_key(node.config())).expect("a survey")
    }

    fn missing(node: &Node, path: &Path) -> bool {
        node.store
            .source_stamp(&path.to_string_lossy())
            .expect("row")
            .expect("known")
            .missing
    }

    #[test]
    fn a_pass_a_survey_held_for_reads_what_differs_and_leaves_the_survey_a_full_compare_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let mut node = Node::open(cfg.clone()).expect("open");
        let projects = cfg.locations.claude_dir.join("projects");
        let path = |i: u32| projects.join(format!("-p{i}/s{i}.jsonl"));
        for i in 1..=3 {
            append(&path(i), &claude_line(&format!("s{i}"), 0, "a heron"));
        }
        let codex = cfg
            .locations
            .codex_home
            .join("sessions/2025/11/24/rollout-2025-11-24T10-00-00-x.jsonl");
        append(
            &codex,
            concat!(
                r#"{"timestamp":"2025-11-24T10:00:00.000Z","type":"session_meta","#,
                r#""payload":{"id":"x","cwd":"/p"}}"#,
                "\n"
            ),
        );
        node.index(IndexRequest::new(0)).expect("first pass");
        settle(&mut node);
        let codex_known = node
            .store
            .source_stamp(&codex.to_string_lossy())
            .expect("row")
            .is_some();

        // One store grew and one is new: the pass reads those two, tells
        // no store is gone without reading the others' rows, and lists
        // every store it found for later passes.
        append(&path(1), &claude_line("s1", 1, "an egret"));
        append(&path(4), &claude_line("s4", 0, "a grebe"));
        let walk = surveyed(&node).expect_err("two stores differ");
        let mut kept = indexer::Stores::default();
        let r = node
            .index(IndexRequest::new(0).walked(*walk).keeping(&mut kept))
            .expect("pass");
        assert_eq!(
            (r.stores, r.changed, r.added),
            (4 + u64::from(codex_known), 2, 2)
        );
        assert!(by_survey(&node), "{:?}", node.compared);
        assert_eq!(kept.len() as u64, r.stores);
        // The survey it leaves says nothing is new, and is the one a
        // compare of every row leaves.
        assert!(node.leave_survey(&r).expect("leave"));
        assert_eq!(surveyed(&node).expect("nothing new").stores, r.stores);
        let left = sources_of(&loaded(&node));
        assert!(node.save_survey().expect("save"));
        assert_eq!(left, sources_of(&loaded(&node)));

        // A store gone: the survey cannot tell which, so every row is
        // compared, and the store is marked gone.
        std::fs::remove_file(path(2)).expect("rm");
        append(&path(3), &claude_line("s3", 1, "a stork"));
        let r = pass_after_walk(&mut node, "a store is gone");
        assert_eq!((r.changed, r.added), (1, 1));
        assert!(!by_survey(&node));
        assert!(
            !node.leave_survey(&r).expect("leave"),
            "no survey to make it from"
        );
        assert!(missing(&node, &path(2)));
        settle(&mut node);

        // The store back: its row is marked gone, so again every row.
        append(&path(2), &claude_line("s2", 0, "a heron"));
        let r = pass_after_walk(&mut node, "a store is back");
        assert!(!by_survey(&node));
        assert!(!missing(&node, &path(2)), "{r:?}");
        settle(&mut node);

        // Another process commits after the survey was loaded, leaving
        // the stores' rows as they were (a checkpoint, a count): the rows'
        // generation says the survey still holds.
        append(&path(1), &claude_line("s1", 2, "a crane"));
        let walk = surveyed(&node).expect_err("a store grew");
        let raw = rusqlite::Connection::open(&cfg.db_path).expect("raw");
        raw.execute("UPDATE sources SET skipped = skipped + 1", [])
            .expect("update");
        let _: (i64, i64, i64) = raw
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .expect("checkpoint");
        let r = node
            .index(IndexRequest::new(0).walked(*walk))
            .expect("pass");
        assert_eq!((r.changed, r.added), (1, 1));
        assert!(by_survey(&node));
        // The survey it leaves holds through such commits too.
        assert!(node.leave_survey(&r).expect("leave"));
        raw.execute("UPDATE sources SET skipped = skipped + 1", [])
            .expect("update");
        assert_eq!(surveyed(&node).expect("nothing new").stores, r.stores);

        // Another cairn that writes what the survey describes (even the
        // same values) moves the generation: every row is compared.
        append(&path(1), &claude_line("s1", 3, "an ibis"));
        let mut other = crate::store::Store::open(&cfg.db_path).expect("other");
        let same = other
            .source_state(&path(3).to_string_lossy())
            .expect("state")
            .expect("known");
        let mut ing = other.ingest("elsewhere").expect("ingest");
        ing.save_state(&same, 0).expect("save");
        ing.commit().expect("commit");
        let r = pass_after_walk(&mut node, "a store grew");
        assert_eq!((r.changed, r.added), (1, 1));
        assert!(!by_survey(&node));

        // A commit by another process after the pass: no survey from it.
        settle(&mut node);
        append(&path(1), &claude_line("s1", 4, "a spoonbill"));
        let r = pass_after_walk(&mut node, "a store grew");
        assert!(by_survey(&node));
        raw.execute("UPDATE sources SET skipped = skipped + 1", [])
            .expect("update");
        assert!(!node.leave_survey(&r).expect("leave"));
        assert!(surveyed(&node).is_err());
    }

    /// Many stores new at once (a source turned on): their rows are not
    /// looked up one at a time, every row is compared, and all are read.
    #[test]
    fn a_pass_with_many_new_stores_compares_every_row_and_reads_them_all() {
        let (_dir, cfg, mut node, _) = indexed_home("a heron");
        let projects = cfg.locations.claude_dir.join("projects");
        settle(&mut node);
        let many = indexer::surveyed::MAX_LOOKUPS as u32 + 1;
        for i in 2..=many + 1 {
            append(
                &projects.join(format!("-p/s{i}.jsonl")),
                &claude_line(&format!("s{i}"), 0, "an egret"),
            );
        }
        let r = pass_after_walk(&mut node, "new stores");
        assert_eq!(
            (r.stores, r.changed, r.added),
            (u64::from(many) + 1, u64::from(many), u64::from(many))
        );
        assert!(!by_survey(&node));
    }

    /// A search that reads an append leaves a survey under which the next
    /// search has nothing to read.
    #[test]
    fn a_search_that_read_an_append_leaves_a_survey_for_the_next() {
        let (_dir, cfg, mut node, file) = indexed_home("a heron");
        let opts = SearchOptions {
            limit: 10,
            ..SearchOptions::default()
        };
        settle(&mut node);
        append(&file, &claude_line("s1", 1, "bird1"));
        let walk = Node::start_walk(&cfg);
        let r = node
            .search_page_refreshed("bird1", &opts, 0, walk, 0, None, &mut |_| {})
            .expect("search");
        assert_eq!((r.page.hits.len(), r.reran, r.report.added), (1, true, 1));
        let next = surveyed(&node).expect("a survey was left");
        assert_eq!((next.stores, next.changed), (1, 0));
    }

    #[test]
    fn a_refreshed_search_keeps_its_first_answer_only_when_nothing_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let mut node = Node::open(cfg).expect("open");
        let file = node
            .config()
            .locations
            .claude_dir
            .join("projects/-p/s1.jsonl");
        append(
            &file,
            &claude_line("s1", 0, "the heron flew over the marsh"),
        );
        node.index(IndexRequest::new(0)).expect("first pass");
        let opts = SearchOptions {
            limit: 10,
            ..SearchOptions::default()
        };
        let search = |node: &mut Node, q: &str| {
            let walk = Node::start_walk(node.config());
            node.search_page_refreshed(q, &opts, 0, walk, 0, None, &mut |_| {})
                .expect("search")
        };

        // Nothing new: the answer from before the pass is the one returned.
        let r = search(&mut node, "heron");
        assert!(!r.reran, "{:?}", r.report);
        assert_eq!((r.report.changed, r.report.added), (0, 0));
        assert_eq!(r.page.hits.len(), 1);

        // A line appended since: the first answer (no hit) is stale, so the
        // query runs again and finds it.
        append(&file, &claude_line("s1", 1, "a kingfisher dove for fish"));
        // Sized for one search, as `cairn search` sizes it: the pass the
        // search makes sets its own page cache and puts this one back.
        node.for_one_search().expect("cache");
        let r = search(&mut node, "kingfisher");
        assert_eq!(
            node.store().cache_kib().expect("cache"),
            Store::ONE_SEARCH_CACHE_KIB
        );
        assert!(r.reran);
        assert_eq!((r.report.changed, r.report.added), (1, 1));
        assert_eq!(r.page.hits.len(), 1, "the appended line is found");
        assert!(r.page.hits[0].snippet.contains("kingfisher"));

        // Indexed by someone else meanwhile: the stamp moves with another
        // connection's commit, so a first answer from before it is not kept.
        let before = node.store().change_stamp().expect("stamp");
        let mut other = Node::open(node.config().clone()).expect("second open");
        append(&file, &claude_line("s1", 2, "an egret in the reeds"));
        other.index(IndexRequest::new(0)).expect("other pass");
        assert_ne!(node.store().change_stamp().expect("stamp"), before);
        let r = search(&mut node, "egret");
        assert_eq!(r.page.hits.len(), 1);
    }

    /// A pass that moves its vectors in several steps writes the sketch's
    /// cells once, at its last move, over every entry: also when the last
    /// step moved a full share and the move after it finds nothing left.
    /// (Cells brought up to date at every step would end covering 192 of
    /// 250: see `vector_file`'s test of the same.)
    #[test]
    fn a_pass_moving_vectors_in_steps_leaves_cells_over_all_of_them() {
        for records in [250u32, 4 * MOVE_EVERY as u32] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut cfg = crate::config::lexical_for_tests(dir.path());
            cfg.semantic = true;
            let mut node = Node::open(cfg.clone()).expect("open");
            let file = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
            let words = ["heron", "marsh", "kingfisher", "reeds", "egret", "tide"];
            let mut lines = String::new();
            for i in 0..records {
                let said = format!(
                    "the {} by the {} number {i}",
                    words[i as usize % 6],
                    words[i as usize / 6 % 6]
                );
                lines.push_str(&claude_line("s1", i, &said));
            }
            append(&file, &lines);
            node.index(IndexRequest::new(0)).expect("pass");
            let counts = node.store().vector_counts().expect("counts");
            assert_eq!(counts.with_vector, u64::from(records));
            let covered = crate::store::cells_covered(node.store().path());
            assert_eq!(covered, Some(u64::from(records)));
        }
    }

    #[test]
    fn a_pass_with_a_deadline_embeds_what_it_stored_and_a_backlog_only_until_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = crate::config::lexical_for_tests(dir.path());
        cfg.semantic = true;
        let mut node = Node::open(cfg.clone()).expect("open");
        let file = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
        let lines = |from: u32, to: u32| -> String {
            (from..to)
                .map(|i| claude_line("s1", i, &format!("the heron by the marsh number {i}")))
                .collect()
        };
        // Four moves' worth (MOVE_EVERY is 64 in tests), past its deadline:
        // what the pass stored gets its vectors all the same.
        append(&file, &lines(0, 256));
        let past = Some(std::time::Instant::now());
        let r = node.index(IndexRequest::new(0).until(past)).expect("pass");
        assert_eq!((r.added, r.embedded, r.vectors_left), (256, 256, false));
        let counts = node.store().vector_counts().expect("counts");
        assert_eq!((counts.with_vector, counts.pending), (256, 0));
        // The vector file lost: a pass past its deadline computes one move
        // of them again and says more are left, which also keeps it from
        // leaving a survey that would skip the next pass.
        let vectors = Component::Vectors.path(node.store().path());
        std::fs::remove_file(&vectors).expect("rm");
        let walk = Node::start_walk(node.config());
        let r = node
            .index(
                IndexRequest::new(0)
                    .walked(walk)
                    .until(past)
                    .leaving_survey(),
            )
            .expect("pass");
        assert!(r.vectors_left && r.embedded < 256, "{r:?}");
        assert!(!r.nothing_new());
        assert!(surveyed(&node).is_err(), "no survey may skip the rest");
        let first = r.embedded;
        let counts = node.store().vector_counts().expect("counts");
        assert!(counts.pending > 0, "{counts:?}");
        // A pass with time enough, or none, finishes them.
        let later = Some(std::time::Instant::now() + std::time::Duration::from_secs(60));
        let r = node.index(IndexRequest::new(0).until(later)).expect("pass");
        assert!(!r.vectors_left && r.embedded + first == 256, "{r:?}");
        let counts = node.store().vector_counts().expect("counts");
        assert_eq!((counts.with_vector, counts.pending), (256, 0));
        assert!(vectors.exists());
    }

    #[test]
    fn a_lost_vector_file_is_computed_again_by_the_next_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = crate::config::lexical_for_tests(dir.path());
        cfg.semantic = true;
        let mut node = Node::open(cfg.clone()).expect("open");
        let file = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
        let said = [
            "the terminal is slow when a new window opens",
            "we round half cents up when we bill customers",
            "the build cache lives in the target folder",
        ];
        for (i, t) in said.iter().enumerate() {
            append(&file, &claude_line("s1", i as u32, t));
        }
        node.index(IndexRequest::new(0)).expect("pass");
        let counts = node.store().vector_counts().expect("counts");
        assert_eq!((counts.with_vector, counts.pending), (3, 0));
        let vectors = Component::Vectors.path(node.store().path());
        let in_table = |node: &Node| -> i64 {
            node.store()
                .test_conn()
                .query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))
                .expect("count")
        };
        assert!(vectors.exists());
        assert_eq!(in_table(&node), 0, "each vector is kept once, in the file");
        let before: Vec<_> = (1..=3)
            .map(|id| node.store().vector(id).expect("vector"))
            .collect();
        assert!(before.iter().all(Option::is_some), "{before:?}");
        // The file goes: one call gives it up and computes it again.
        std::fs::remove_file(&vectors).expect("rm");
        assert_eq!(node.embed_pending().expect("embed"), 3);
        assert!(vectors.exists());
        assert_eq!(in_table(&node), 0);
        let after: Vec<_> = (1..=3)
            .map(|id| node.store().vector(id).expect("vector"))
            .collect();
        assert_eq!(after, before);
        assert_eq!(node.embed_pending().expect("embed"), 0);
    }

    // Catch-ups shared by sessions (`store::catch_up`).

    /// A lexical node in a temp home whose notes file holds `texts` (one
    /// note each, at fixed times), indexed.
    fn noted_node(texts: &[String]) -> (tempfile::TempDir, Node) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut node = Node::open(crate::config::lexical_for_tests(dir.path())).expect("open");
        add_notes(&mut node, texts);
        (dir, node)
    }

    /// Appends `texts` to the node's notes file (times from their
    /// numbers, so the same text and number is the same record on every
    /// node) and indexes them.
    fn add_notes(node: &mut Node, texts: &[String]) {
        let mut body = String::new();
        for t in texts {
            let n: i64 = t
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("numbered");
            let line = serde_json::json!({
                "time_ms": 1_767_225_600_000i64 + n,
                "project": "/shared",
                "text": t,
            });
            body.push_str(&line.to_string());
            body.push('\n');
        }
        append(&node.config().locations.notes_file.clone(), &body);
        node.index(IndexRequest::new(0)).expect("index");
    }

    fn numbered(word: &str, range: std::ops::Range<u32>) -> Vec<String> {
        range.map(|i| format!("{word} note number {i}")).collect()
    }

    /// One session's pulls of `from`'s own log into `to`, batch by batch.
    struct Puller<'a> {
        from: &'a Node,
        holder: CatchUpHolder,
        epoch: u64,
        end: u64,
    }

    impl<'a> Puller<'a> {
        fn new(from: &'a Node) -> Puller<'a> {
            let id = from.identity().id();
            let w = from
                .watermarks()
                .expect("watermarks")
                .into_iter()
                .find(|w| w.origin == id)
                .expect("own log");
            Puller {
                from,
                holder: CatchUpHolder::new(),
                epoch: w.epoch,
                end: w.seq,
            }
        }

        /// Applies the next batch (40 entries) to `to`, as a session
        /// does; returns whether more is left.
        fn step(&self, to: &mut Node) -> bool {
            let origin = self.from.identity().id();
            let pull = Pull {
                origin,
                epoch: self.epoch,
                after_seq: to.store().watermark(&origin, self.epoch).expect("wm"),
                max_records: 40,
                max_bytes: 1 << 20,
            };
            let batch = self.from.serve_pull(&pull, None).expect("serve");
            let coming = self.end.saturating_sub(batch.last_seq);
            // Prepared ahead, as a session does while the batch before is
            // stored.
            let ahead = Some(to.batch_preparer().prepare(batch.clone()));
            to.apply_pulled(&pull, &batch, None, coming, &self.holder, ahead)
                .expect("apply");
            batch.more
        }
    }

    fn count(node: &Node, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(&node.config().db_path).expect("open db");
        conn.query_row(sql, [], |r| r.get(0)).expect("count")
    }

    /// Whether the records' hash index is dropped and noted as deferred.
    fn index_deferred(node: &Node) -> bool {
        let present = count(
            node,
            "SELECT count(*) FROM sqlite_master WHERE name = 'records_hash8'",
        );
        let noted = count(
            node,
            "SELECT count(*) FROM meta WHERE key = 'records_hash8_deferred'",
        );
        assert_eq!(
            present + noted,
            1,
            "the index is there or noted as deferred"
        );
        noted == 1
    }

    #[test]
    fn concurrent_catch_ups_end_only_their_own_part_and_store_each_record_once() {
        // A and C each hold 200 records; 50 of them are the same records
        // on both (one note, two provenances).
        let (_a_dir, a) = noted_node(&numbered("heron", 0..200));
        let mut c_texts = numbered("heron", 0..50);
        c_texts.extend(numbered("egret", 50..200));
        let (_c_dir, c) = noted_node(&c_texts);
        let (_b_dir, mut b) = noted_node(&[]);
        let (from_a, from_c) = (Puller::new(&a), Puller::new(&c));
        let (h_a, h_c) = (from_a.holder.id, from_c.holder.id);

        // Session 1 pulls A's log, session 2 C's: one catch-up, both parts.
        assert!(from_a.step(&mut b));
        assert_eq!(b.catch_up_holders(), Some([h_a].into()));
        assert!(index_deferred(&b));
        // As a large local pass: FTS5's own merging waits for its end.
        let automerge = "SELECT v FROM fts_config WHERE k = 'automerge'";
        assert_eq!(count(&b, automerge), 0);
        assert!(from_c.step(&mut b));
        assert_eq!(b.catch_up_holders(), Some([h_a, h_c].into()));
        assert!(from_a.step(&mut b) && from_c.step(&mut b));

        // Session 2 ends, cut short: session 1's part and the deferral stay.
        assert!(!b.finish_catch_up(&from_c.holder));
        assert_eq!(b.catch_up_holders(), Some([h_a].into()));
        assert!(index_deferred(&b));

        // A third session takes C's log up and is dropped without ending:
        // the next batch of any session lets its part go.
        let from_c2 = Puller::new(&c);
        assert!(from_c2.step(&mut b));
        let h_c2 = from_c2.holder.id;
        assert_eq!(b.catch_up_holders(), Some([h_a, h_c2].into()));
        drop(from_c2);
        assert!(from_a.step(&mut b));
        assert_eq!(b.catch_up_holders(), Some([h_a].into()));
        assert!(index_deferred(&b));
        // As a large local pass: FTS5's own merging waits for its end.
        let automerge = "SELECT v FROM fts_config WHERE k = 'automerge'";
        assert_eq!(count(&b, automerge), 0);

        // A local pass stores records A sends later (duplicates to find)
        // and builds the index, as every other writer does; the catch-up
        // goes on through the index.
        add_notes(&mut b, &numbered("heron", 150..160));
        assert!(!index_deferred(&b));
        assert_eq!(b.catch_up_holders(), Some([h_a].into()));

        // Session 1 reaches the end of A's log: the catch-up ends.
        while from_a.step(&mut b) {}
        assert_eq!(b.catch_up_holders(), None);
        assert!(!index_deferred(&b));
        // Its end merges the full-text indexes (paused meanwhile) in steps.
        let mut steps = 0;
        while b.finish_catch_up(&from_a.holder) {
            steps += 1;
            assert!(steps < 1_000, "the merge after a catch-up never ends");
        }
        assert_eq!(count(&b, automerge), 16, "FTS5 merges on its own again");
        assert_eq!(
            count(&b, "SELECT count(*) FROM meta WHERE key = 'fts_merge_due'"),
            0
        );
        // The rest of C's log, in a session of its own.
        let from_c3 = Puller::new(&c);
        while from_c3.step(&mut b) {}
        assert!(!b.finish_catch_up(&from_c3.holder));

        // Every record once, every slot of both logs held.
        assert_eq!(count(&b, "SELECT count(*) FROM records"), 350);
        assert_eq!(count(&b, "SELECT count(DISTINCT hash) FROM records"), 350);
        for p in [&from_a, &from_c] {
            let origin = p.from.identity().id();
            assert_eq!(b.store().watermark(&origin, p.epoch).expect("wm"), 200);
        }
        assert_eq!(
            count(&b, "SELECT count(*) FROM logs WHERE rec IS NOT NULL"),
            410
        );
        assert!(!index_deferred(&b));
    }
}
