//! The daemon's index loop: passes over the agents' stores on file
//! events (`watch`), on a poll timer where a store is not watched, and a
//! backstop walk; writes to stores the last walk found are read without
//! a walk. After each pass it records the pass for `cairn index`
//! (`index-pass.json`) and tells the sync service when this node's own
//! log grew.
//!
//! It drives the node's one index entry point; it never talks to peers
//! (that is `sync`'s, through [`SyncHandle`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::instance::{self, LastPass};
use super::watch::{self, Watch};
use super::{DaemonConfig, RELEASE_AFTER};
use crate::clock::now_ms;
use crate::indexer;
use crate::node::{IndexRequest, Node};
use crate::sync::service::SyncHandle;
use crate::sync::session::{SharedNode, with_node};

/// Whether [`DaemonConfig::after_backlog`] is due after a pass that left
/// `deferred` stores for later, `read` bytes having been read by the
/// passes since it was last called.
fn backlog_done(read: u64, deferred: u64) -> bool {
    deferred == 0 && read >= RELEASE_AFTER
}

/// Runs the index loop until aborted: passes into `node` on changes to
/// the stores under `stores` that `watch` reports (`dirty` wakes it), on
/// the poll timer and the backstop, telling `sync` when this node's own
/// log grew.
pub(super) async fn run(
    home: PathBuf,
    node: SharedNode,
    cfg: DaemonConfig,
    (mut watch, stores, dirty): (Watch, StoreRoots, Arc<Notify>),
    sync: SyncHandle,
) {
    // Runs until aborted; each iteration waits for a change or the poll
    // timer. A tick walks the stores only when one is not watched, a root
    // appeared, or the backstop is due (see `daemon::watch`). Writes to
    // stores the last walk found are read without a walk (see
    // `next_walk`).
    let mut first = true;
    let mut last_mark = None;
    let mut last_walk = std::time::Instant::now();
    let mut known = Some(indexer::Stores::default());
    let mut walk_next = true;
    // Bytes read since `after_backlog` was last called.
    let mut read_since = 0u64;
    loop {
        if !first {
            tokio::select! {
                _ = dirty.notified() => {
                    tokio::time::sleep(cfg.debounce).await;
                }
                _ = tokio::time::sleep(cfg.poll_interval) => {
                    let rewatched = watch.follow(stores.existing());
                    if !rewatched
                        && !watch::pass_due(watch.complete(), last_walk.elapsed(), cfg.backstop_interval)
                    {
                        continue;
                    }
                    walk_next = true;
                }
            }
        }
        first = false;
        // Taken before the pass: a write after this is in the next one.
        let changed = watch.take_changed();
        if woken_for_nothing(walk_next, &changed, watch.complete()) {
            continue;
        }
        let some = match (&known, walk_next) {
            (Some(k), false) => next_walk(k, &changed, watch.complete()),
            _ => None,
        };
        // A walk of every store refreshes the list of stores.
        let mut keep = match some {
            Some(_) => None,
            None => {
                last_walk = std::time::Instant::now();
                Some(known.take().unwrap_or_default())
            }
        };
        let started = std::time::Instant::now();
        let started_ms = now_ms();
        let r = with_node(&node, move |n| {
            let deadline = Some(started + Duration::from_secs(5));
            let req = IndexRequest::new(now_ms()).until(deadline);
            let rep = match (some, &mut keep) {
                (Some(walk), _) => n.index(req.walked(walk)),
                (None, k) => n.index(req.keeping(k.get_or_insert_default())),
            };
            (rep, own_mark(n), keep)
        })
        .await;
        // What a pass that failed left of the list cannot be trusted.
        walk_next = !matches!(r, Ok((Ok(_), _, _)));
        match r {
            Ok((Ok(rep), mark, kept)) => {
                if let Some(k) = kept {
                    known = Some(k);
                }
                // For `cairn index` beside the daemon, which shows this
                // instead of running a pass of its own.
                let pass = LastPass {
                    pid: std::process::id(),
                    started_ms,
                    finished_ms: now_ms(),
                    took_ms: started.elapsed().as_millis() as u64,
                    report: rep.clone(),
                };
                if let Err(e) = instance::write_last_pass(&home, &pass) {
                    tracing::debug!(error = %e, "cannot record the last indexing pass");
                }
                if rep.added > 0 || rep.removed > 0 {
                    tracing::info!(added = rep.added, "indexed new history");
                }
                // A derived file that cannot be written (a full disk) is
                // said on stderr whatever the log level: searches slow
                // down until it is.
                for (path, why) in &rep.unwritten {
                    tracing::error!(path = %path, why = %why, "could not write a derived file beside the database");
                }
                // Our own log grew (this pass, or `cairn remember` / `cairn
                // forget` run beside the daemon): push it.
                if mark != last_mark {
                    last_mark = mark;
                    sync.changed();
                }
                if rep.deferred > 0 || rep.vectors_left {
                    // More to read or embed: come back at once, with a walk
                    // (the stores left are not named by any event).
                    walk_next = true;
                    dirty.notify_one();
                }
                read_since = read_since.saturating_add(rep.bytes_read);
                if let Some(release) = cfg.after_backlog
                    && backlog_done(read_since, rep.deferred)
                {
                    read_since = 0;
                    let _ = tokio::task::spawn_blocking(release).await;
                }
            }
            Ok((Err(e), _, _)) => tracing::warn!(error = %e, "indexing failed"),
            Err(e) => tracing::warn!(error = %e, "indexing task failed"),
        }
    }
}

/// Whether the loop was woken by events the last pass already took: no
/// walk is due (`walk_next`: not the first pass, nor one after a failure
/// or a deferral, nor a tick's), every root is watched, and nothing
/// changed since. An event that comes while the loop waits out its
/// debounce is taken with the ones before it, yet leaves the loop a
/// wake-up (a line written in two parts, a file made and then written):
/// that pass would have walked every store to find nothing.
fn woken_for_nothing(walk_next: bool, changed: &watch::Changed, complete: bool) -> bool {
    !walk_next && complete && changed.is_empty()
}

/// The walk of the next pass when it can skip walking every store: when
/// every root is watched (`complete`) and all that changed since the last
/// pass is the contents of stores the last walk found (`known`). `None`
/// means a walk of every store (a file made, removed or renamed, events
/// lost, a file that is no known store; with no event at all the loop
/// makes no pass, see [`woken_for_nothing`]).
fn next_walk(
    known: &indexer::Stores,
    changed: &watch::Changed,
    complete: bool,
) -> Option<indexer::Walk> {
    let written = changed.written_only().filter(|_| complete)?;
    known.walk_of(written)
}

/// This node's own log position (epoch, seq).
fn own_mark(n: &Node) -> Option<(u64, u64)> {
    let own = n.identity().id();
    n.watermarks()
        .ok()?
        .iter()
        .find(|w| w.origin == own)
        .map(|w| (w.epoch, w.seq))
}

/// Where the agents' stores may be, for the watch: the roots that exist
/// are looked for at start and at every poll tick.
pub(super) struct StoreRoots {
    pub(super) locations: crate::sources::Locations,
    pub(super) disabled: Vec<String>,
}

impl StoreRoots {
    /// The folders (or files) the agents write their histories to that
    /// exist now. Never a whole home or project tree: a recursive watch on
    /// `$HOME` would cost a watch per folder and wake on every write
    /// anywhere, including this node's own database; the notes file is
    /// the notes source's root, never the home around it.
    ///
    /// The project folders are those the passes found so far (remembered
    /// in their file, see [`crate::projects`]), not only those known at
    /// start.
    pub(super) fn existing(&self) -> Vec<PathBuf> {
        match &self.locations.projects_file {
            Some(file) => {
                let mut loc = self.locations.clone();
                loc.project_dirs = crate::projects::load(file).folders;
                crate::sources::watch_roots(&loc, &self.disabled)
            }
            None => crate::sources::watch_roots(&self.locations, &self.disabled),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_watch_follows_the_project_folders_the_passes_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let project = home.join("clients/acme");
        std::fs::create_dir_all(&project).expect("mkdir");
        let history = project.join(".aider.chat.history.md");
        std::fs::write(&history, b"# aider chat started at 2026-12-05 18:01:59\n").expect("write");
        let file = home.join("projects.json");
        let mut locations = crate::sources::Locations::under_home(home);
        locations.projects_file = Some(file.clone());
        let roots = StoreRoots {
            locations,
            disabled: Vec::new(),
        };
        assert!(!roots.existing().contains(&history));
        // A pass remembers the folder (here: as `learn` does).
        assert_eq!(crate::projects::learn(&file, [project.clone()]), [project]);
        assert!(roots.existing().contains(&history));
    }

    #[test]
    fn memory_is_given_back_once_a_backlog_is_read_and_not_before() {
        // A backlog read in passes cut short: not while stores are left,
        // then at the pass that catches up.
        assert!(!backlog_done(10 * RELEASE_AFTER, 3));
        assert!(backlog_done(10 * RELEASE_AFTER, 0));
        assert!(backlog_done(RELEASE_AFTER, 0));
        // An agent's writes, read a few lines at a time: never.
        assert!(!backlog_done(RELEASE_AFTER - 1, 0));
        assert!(!backlog_done(0, 0));
    }

    #[test]
    fn a_wake_up_with_nothing_changed_and_no_walk_due_makes_no_pass() {
        let nothing = watch::Changed::default();
        assert!(woken_for_nothing(false, &nothing, true));
        // A walk is due (the first pass, after a failure or a deferral, a
        // tick's): it is made.
        assert!(!woken_for_nothing(true, &nothing, true));
        // A root not watched: events may be missing, so the pass walks.
        assert!(!woken_for_nothing(false, &nothing, false));
        // Something changed: a pass.
        let wrote = watch::Changed {
            paths: vec![PathBuf::from("/s/a.jsonl")],
            anything: false,
        };
        assert!(!woken_for_nothing(false, &wrote, true));
        let anything = watch::Changed {
            paths: Vec::new(),
            anything: true,
        };
        assert!(!woken_for_nothing(false, &anything, true));
    }
}
