//! Keeping MCP answers fresh: before a read, the server reads new agent
//! history itself unless a `cairn serve` daemon runs for the same home (the
//! daemon indexes within a fraction of a second of a change, so a second
//! reader would only compete with it for the database).
//!
//! The pass is incremental and bounded by a small deadline, like the one
//! `cairn search` runs: a huge first run answers from what is indexed so
//! far and the next call continues. When the survey shows nothing new on
//! disk there is no pass, and a pass that finds nothing new leaves one. A
//! failed pass is logged and the answer comes from the index as it is;
//! freshness never turns into a tool error.
//!
//! The survey still walks every store: one stat per file, 28 ms for the
//! 31,000 files of 10 GB of history. So the server also watches the
//! stores ([`Watched`]): when no file event came since its last pass, the
//! watch misses nothing, and every event queued before the read has been
//! handled (`Watch::settle`), nothing changed and there is no walk at all.
//! Any doubt (no watch, a lost event, a barrier that did not come back in
//! time, or [`BACKSTOP`] since the last pass) walks as before. When all
//! that changed is writes to stores the last whole pass found (an agent
//! adding to its transcript), the read reads those alone, as the daemon
//! does (`indexer::Stores`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::config::Config;
use crate::daemon;
use crate::daemon::watch::{self, Watch};
use crate::indexer::Stores;
use crate::node::{IndexRequest, Node};

/// The longest an MCP read waits for new history to be indexed.
pub const REFRESH_BUDGET: Duration = Duration::from_millis(1500);

/// How long the server trusts its watch alone: a read this long after the
/// last pass walks the stores anyway, as the daemon's poll does.
pub use crate::daemon::watch::BACKSTOP;

/// The longest a read waits for the watch to handle the events queued
/// before it (it takes well under a millisecond).
const SETTLE: Duration = Duration::from_millis(200);

/// What happened before an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// A daemon runs for this home and keeps the index fresh.
    DaemonServes,
    /// The watch saw no change since the last pass: nothing was walked.
    Quiet,
    /// This process read new history (`deferred` stores left for later).
    Read {
        /// New records stored.
        added: u64,
        /// Stores cut short by the deadline.
        deferred: u64,
    },
    /// The watch named the stores written to since the last pass, all
    /// known: this process read them alone, without a walk.
    Named {
        /// New records stored.
        added: u64,
        /// Stores cut short by the deadline.
        deferred: u64,
    },
    /// The pass failed; the answer uses the index as it is.
    Failed,
}

/// What the watch tells of the stores since the last whole pass.
enum Since {
    /// Nothing changed.
    Quiet,
    /// Only these files were written to.
    Wrote(Vec<std::path::PathBuf>),
    /// Anything may have changed: a walk tells.
    Unknown,
}

/// What a server keeps between reads to tell that nothing changed: its
/// watch on the agents' stores (set up on the first read) and when its
/// last whole pass started.
pub struct Watched {
    watch: Option<Watch>,
    dirty: Arc<Notify>,
    last_pass: Option<Instant>,
    /// The stores the last whole pass found, when it succeeded.
    known: Option<Stores>,
}

impl Default for Watched {
    fn default() -> Self {
        Watched {
            watch: None,
            dirty: Arc::new(Notify::new()),
            last_pass: None,
            known: None,
        }
    }
}

impl Watched {
    /// What can have changed in `cfg`'s stores since the last whole pass
    /// (see the module's notes). Either way any change reported so far is
    /// taken: the pass that follows reads it, and a change after this call
    /// is reported anew.
    fn since(&mut self, cfg: &Config) -> Since {
        let roots = crate::sources::watch_roots(&cfg.locations, &cfg.disabled);
        let watch = match &mut self.watch {
            Some(watch) => {
                // New roots may hold history no event announced.
                if watch.follow(roots) {
                    self.last_pass = None;
                }
                watch
            }
            None => self.watch.insert(Watch::start_settling(
                roots,
                &cfg.home,
                &cfg.locations.notes_file,
                Arc::clone(&self.dirty),
            )),
        };
        // Walk when the daemon's poll would: a root unwatched or the
        // backstop reached (or no pass yet).
        let due = self
            .last_pass
            .is_none_or(|t| watch::pass_due(watch.complete(), t.elapsed(), BACKSTOP));
        let trusted = !due && watch.settle(SETTLE);
        // A change reported since the last call left a permit: taken here,
        // with what the change was.
        let changed = std::pin::pin!(self.dirty.notified()).enable();
        let what = watch.take_changed();
        match (trusted, changed && !what.is_empty()) {
            (false, _) => Since::Unknown,
            (true, false) => Since::Quiet,
            (true, true) => what
                .written_only()
                .map_or(Since::Unknown, |paths| Since::Wrote(paths.to_vec())),
        }
    }
}

/// Reads new history into `node` within `budget`, unless a daemon serves
/// its home or `watched` shows that nothing changed since its last pass.
pub fn refresh(node: &mut Node, now_ms: i64, budget: Duration, watched: &mut Watched) -> Refresh {
    if daemon::is_serving(&node.config().home) {
        // The daemon watches the stores: this watch's inotify watches go
        // back, and a read after the daemon stops walks.
        *watched = Watched::default();
        return Refresh::DaemonServes;
    }
    let started = Instant::now();
    let deadline = started + budget;
    let wrote = match watched.since(node.config()) {
        Since::Quiet => return Refresh::Quiet,
        Since::Wrote(paths) => paths,
        Since::Unknown => Vec::new(),
    };
    // A pass that is cut short or fails leaves the next read to walk.
    let last = watched.last_pass.take();
    if let Some(walk) = watched.known.as_ref().and_then(|k| k.walk_of(&wrote)) {
        let req = IndexRequest::new(now_ms).until(Some(deadline)).walked(walk);
        return match node.index(req) {
            Ok(rep) => {
                if rep.deferred == 0 && !rep.vectors_left {
                    watched.last_pass = last;
                }
                Refresh::Named {
                    added: rep.added,
                    deferred: rep.deferred,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read new history; answering from the index as it is");
                Refresh::Failed
            }
        };
    }
    // A whole pass lists the stores anew; one that fails leaves none.
    let mut known = watched.known.take().unwrap_or_default();
    // Nothing new by the survey: no pass (see `crate::store::survey`).
    let mut walk = Node::start_walk(node.config());
    if node.unchanged_since_survey(&mut walk).is_some() {
        watched.last_pass = Some(started);
        watched.known = known.fill_from(&walk).then_some(known);
        return Refresh::Read {
            added: 0,
            deferred: 0,
        };
    }
    let req = IndexRequest::new(now_ms)
        .until(Some(deadline))
        .walked(walk)
        .keeping(&mut known)
        .leaving_survey();
    let pass = node.index(req);
    match pass {
        Ok(rep) => {
            watched.known = Some(known);
            // Stores or vectors left: the next read walks and goes on.
            if rep.deferred == 0 && !rep.vectors_left {
                watched.last_pass = Some(started);
            }
            if rep.added > 0 || rep.deferred > 0 {
                tracing::info!(
                    added = rep.added,
                    deferred = rep.deferred,
                    "read new history before answering"
                );
            }
            Refresh::Read {
                added: rep.added,
                deferred: rep.deferred,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read new history; answering from the index as it is");
            Refresh::Failed
        }
    }
}

// The watch settles on Linux only (see `Watch::start_settling`).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::path::Path;

    /// Appends Claude Code user line `i` of session `sid` to `path`.
    fn append(path: &Path, sid: &str, i: usize) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let line = serde_json::json!({
            "type": "user", "uuid": format!("{sid}-{i}"), "parentUuid": null,
            "sessionId": sid, "timestamp": "2026-01-04T10:00:00.000Z", "cwd": "/p",
            "message": {"role": "user", "content": format!("the heron count is {i}")}
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open");
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).expect("append");
    }

    fn read(added: u64) -> Refresh {
        Refresh::Read { added, deferred: 0 }
    }

    fn named(added: u64) -> Refresh {
        Refresh::Named { added, deferred: 0 }
    }

    #[test]
    fn a_read_walks_the_stores_only_when_something_changed_since_the_last_pass() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let projects = cfg.locations.claude_dir.join("projects");
        let first = projects.join("-p/s1.jsonl");
        append(&first, "s1", 0);
        let mut node = Node::open(cfg.clone()).expect("open");
        let mut watched = Watched::default();
        let mut refresh = |node: &mut Node| refresh(node, 0, REFRESH_BUDGET, &mut watched);
        // The first read walks: the watch was not there before it.
        assert_eq!(refresh(&mut node), read(1));
        assert_eq!(refresh(&mut node), Refresh::Quiet);
        assert_eq!(refresh(&mut node), Refresh::Quiet);
        // A line appended just before a read is read by it, each time,
        // from that store alone: the watch named it.
        for i in 1..6 {
            append(&first, "s1", i);
            assert_eq!(refresh(&mut node), named(1), "line {i}");
            assert_eq!(refresh(&mut node), Refresh::Quiet, "line {i}");
        }
        // A session in a project folder made just now: a walk finds it,
        // and a write to it after that is read alone.
        append(&projects.join("-q/s2.jsonl"), "s2", 0);
        assert_eq!(refresh(&mut node), read(1));
        append(&projects.join("-q/s2.jsonl"), "s2", 1);
        assert_eq!(refresh(&mut node), named(1));
        assert_eq!(refresh(&mut node), Refresh::Quiet);
        // A file below a root that is no store: a walk.
        std::fs::write(projects.join("-q/notes.txt"), "x").expect("write");
        assert_eq!(refresh(&mut node), read(0));
        std::fs::write(projects.join("-q/notes.txt"), "xy").expect("write");
        assert_eq!(refresh(&mut node), read(0));
        // A store removed whole: the read walks.
        std::fs::remove_file(&first).expect("rm");
        assert_ne!(refresh(&mut node), Refresh::Quiet);
        assert_eq!(refresh(&mut node), Refresh::Quiet);
        // A root that was not there when the watch started (another
        // agent's folder) is watched from the next read, which walks.
        let codex = cfg.locations.codex_home.join("sessions");
        std::fs::create_dir_all(&codex).expect("codex");
        assert_eq!(refresh(&mut node), read(0));
        assert_eq!(refresh(&mut node), Refresh::Quiet);
        let hits = node
            .search(
                "heron",
                &crate::search::SearchOptions {
                    limit: 10,
                    ..Default::default()
                },
            )
            .expect("search");
        // Every line appended was read once (a removed file's history stays).
        let matches: Vec<(&str, usize)> = hits
            .iter()
            .map(|h| (h.session_id.as_str(), h.matches))
            .collect();
        assert_eq!(matches, [("s1", 6), ("s2", 2)], "{hits:?}");
    }

    #[test]
    fn a_wake_up_left_by_a_change_already_read_makes_no_walk() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let first = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
        append(&first, "s1", 0);
        let mut node = Node::open(cfg.clone()).expect("open");
        let mut watched = Watched::default();
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut watched), read(1));
        append(&first, "s1", 1);
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut watched),
            named(1)
        );
        // What a change that came as that call took the changes leaves:
        // a wake-up, and nothing noted.
        watched.dirty.notify_one();
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut watched),
            Refresh::Quiet
        );
        append(&first, "s1", 2);
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut watched),
            named(1)
        );
    }

    #[test]
    fn past_the_backstop_a_read_walks_even_when_the_watch_saw_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::config::lexical_for_tests(dir.path());
        append(
            &cfg.locations.claude_dir.join("projects/-p/s1.jsonl"),
            "s1",
            0,
        );
        let mut node = Node::open(cfg).expect("open");
        let mut watched = Watched::default();
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut watched), read(1));
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut watched),
            Refresh::Quiet
        );
        let Some(past) = Instant::now().checked_sub(BACKSTOP) else {
            return;
        };
        watched.last_pass = Some(past);
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut watched), read(0));
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut watched),
            Refresh::Quiet
        );
    }

    #[test]
    fn beside_a_daemon_the_watch_is_given_up_and_a_read_after_it_walks() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::config::lexical_for_tests(dir.path());
        let file = cfg.locations.claude_dir.join("projects/-p/s1.jsonl");
        append(&file, "s1", 0);
        let mut node = Node::open(cfg.clone()).expect("open");
        let mut w = Watched::default();
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut w), read(1));
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut w),
            Refresh::Quiet
        );
        // A daemon for this home, as `cairn serve` records it: a live
        // process (this one) named in serve.json.
        let state = cfg.home.join(crate::daemon::instance::SERVE_STATE_FILE);
        let serving = serde_json::json!({
            "listen_addr": "127.0.0.1:9", "pid": std::process::id(), "started_ms": 1
        });
        std::fs::write(&state, serving.to_string()).expect("serve.json");
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut w),
            Refresh::DaemonServes
        );
        assert!(
            w.watch.is_none() && w.last_pass.is_none(),
            "the watch is given up"
        );
        // Once the daemon stops, the next read walks, and watches anew.
        std::fs::remove_file(&state).expect("rm serve.json");
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut w), read(0));
        assert!(w.watch.is_some());
        append(&file, "s1", 1);
        assert_eq!(refresh(&mut node, 0, REFRESH_BUDGET, &mut w), named(1));
        assert_eq!(
            refresh(&mut node, 0, REFRESH_BUDGET, &mut w),
            Refresh::Quiet
        );
    }
}
