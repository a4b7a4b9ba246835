//! The daemon's watch on the agents' stores, and when its index loop walks
//! them.
//!
//! File events (the `notify` crate) start a pass within a fraction of a
//! second of a change. A walk of every store costs one stat per file (31,000
//! of them for 10 GB of history), so while every root is watched the loop
//! walks only on an event or every [`DaemonConfig::backstop_interval`];
//! when a root cannot be watched (no watcher, a failed watch, a watched
//! folder removed, the event queue overflowing) it walks every
//! [`DaemonConfig::poll_interval`] as before. A store folder that appears
//! after the daemon started (an agent installed since) is noticed at the
//! next poll tick, watched, and read at once.
//!
//! [`DaemonConfig::backstop_interval`]: super::daemon::DaemonConfig::backstop_interval
//! [`DaemonConfig::poll_interval`]: super::daemon::DaemonConfig::poll_interval

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Whether a poll tick (no file event) should run a pass: always unless
/// every root is watched (`complete`), and then only once `since_pass`
/// reaches `backstop`.
pub fn pass_due(complete: bool, since_pass: Duration, backstop: Duration) -> bool {
    !complete || since_pass >= backstop
}

/// What the watcher's handler signals.
struct Signals {
    /// A change worth a pass.
    dirty: Arc<Notify>,
    /// Events may have been missed: a watched root went away, the queue
    /// overflowed, or the watcher failed. Cleared by a new watch.
    lost: AtomicBool,
}

/// The watch on the roots, as set up now.
pub struct Watch {
    /// Whether watching is on at all (`DaemonConfig::watch`).
    enabled: bool,
    home: PathBuf,
    notes_file: PathBuf,
    /// Watched whatever the stores: the notes file, the pass request file.
    extra: Vec<PathBuf>,
    /// The roots of the current watch (stores that existed then, and `extra`).
    roots: Vec<PathBuf>,
    /// Whether every one of `roots` is watched.
    all_watched: bool,
    signals: Arc<Signals>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Watch {
    /// Watches `stores` (the agents' roots that exist) and `extra`, when
    /// `enabled`; events that matter wake `dirty`.
    pub fn start(
        enabled: bool,
        stores: Vec<PathBuf>,
        extra: Vec<PathBuf>,
        home: &Path,
        notes_file: &Path,
        dirty: Arc<Notify>,
    ) -> Watch {
        let mut w = Watch {
            enabled,
            home: home.to_path_buf(),
            notes_file: notes_file.to_path_buf(),
            extra,
            roots: Vec::new(),
            all_watched: false,
            signals: Arc::new(Signals {
                dirty,
                lost: AtomicBool::new(false),
            }),
            _watcher: None,
        };
        w.watch(stores);
        w
    }

    /// Whether every root is watched and no event can have been missed:
    /// then a poll tick need not walk the stores.
    pub fn complete(&self) -> bool {
        self.all_watched && !self.signals.lost.load(Ordering::Relaxed)
    }

    /// Brings the watch in line with `stores` (the agents' roots that exist
    /// now): watches anew when they differ from the watched ones or events
    /// may have been lost. Returns whether it did (a pass is then due: the
    /// new roots may hold history no event announced).
    pub fn follow(&mut self, stores: Vec<PathBuf>) -> bool {
        if !self.enabled {
            return false;
        }
        let lost = self.signals.lost.load(Ordering::Relaxed);
        if !lost && self.roots == with_extra(stores.clone(), &self.extra) {
            return false;
        }
        tracing::debug!(lost, "watching the agents' stores anew");
        self.watch(stores);
        true
    }

    fn watch(&mut self, stores: Vec<PathBuf>) {
        self.roots = with_extra(stores, &self.extra);
        self._watcher = None;
        self.all_watched = false;
        if !self.enabled {
            return;
        }
        // Cleared before the new watch: anything lost from here on is seen.
        self.signals.lost.store(false, Ordering::Relaxed);
        let (watcher, all) = start_watcher(
            &self.roots,
            &self.home,
            &self.notes_file,
            Arc::clone(&self.signals),
        );
        self._watcher = watcher;
        self.all_watched = all;
    }
}

/// `stores` and `extra`, sorted, without repeats.
fn with_extra(mut stores: Vec<PathBuf>, extra: &[PathBuf]) -> Vec<PathBuf> {
    stores.extend(extra.iter().cloned());
    stores.sort();
    stores.dedup();
    stores
}

/// A watcher on `roots` (the stores recursively, files and anything in the
/// home alone), and whether every root could be watched.
fn start_watcher(
    roots: &[PathBuf],
    home: &Path,
    notes_file: &Path,
    signals: Arc<Signals>,
) -> (Option<notify::RecommendedWatcher>, bool) {
    use notify::{EventKind, RecursiveMode, Watcher};
    let home_dir = home.to_path_buf();
    let notes = notes_file.to_path_buf();
    let request = home.join(super::instance::PASS_REQUEST_FILE);
    let watched: Vec<PathBuf> = roots.to_vec();
    let handler = move |res: notify::Result<notify::Event>| {
        let ev = match res {
            Ok(ev) => ev,
            Err(e) => {
                tracing::debug!(error = %e, "file watching failed; polling until watched anew");
                signals.lost.store(true, Ordering::Relaxed);
                signals.dirty.notify_one();
                return;
            }
        };
        // The queue overflowed, or a watched root itself went away: its
        // watch is gone with it.
        let root_gone =
            matches!(ev.kind, EventKind::Remove(_)) && ev.paths.iter().any(|p| watched.contains(p));
        if ev.need_rescan() || root_gone {
            signals.lost.store(true, Ordering::Relaxed);
            signals.dirty.notify_one();
            return;
        }
        let relevant = matches!(
            ev.kind,
            EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
        ) && !matches!(
            ev.kind,
            EventKind::Modify(notify::event::ModifyKind::Metadata(_))
        );
        // The node's own database lives in its home: only the notes file
        // and the pass request file count there.
        let ours = ev
            .paths
            .iter()
            .any(|p| !p.starts_with(&home_dir) || p == &notes || p == &request);
        if relevant && ours {
            signals.dirty.notify_one();
        }
    };
    let mut w = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "file watching unavailable; polling only");
            return (None, false);
        }
    };
    let mut all = true;
    for r in roots {
        let mode = if r.starts_with(home) || r.is_file() {
            RecursiveMode::NonRecursive
        } else {
            RecursiveMode::Recursive
        };
        if let Err(e) = w.watch(r, mode) {
            all = false;
            tracing::warn!(path = %r.display(), error = %e, "cannot watch; polling covers it");
        }
    }
    (Some(w), all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_walks_only_when_a_root_is_unwatched_or_the_backstop_is_reached() {
        let backstop = Duration::from_secs(30);
        assert!(pass_due(false, Duration::ZERO, backstop));
        assert!(!pass_due(true, Duration::from_secs(3), backstop));
        assert!(!pass_due(true, Duration::from_millis(29_999), backstop));
        assert!(pass_due(true, backstop, backstop));
        assert!(pass_due(true, Duration::from_secs(90), backstop));
    }

    /// Waits (bounded) until `done`.
    fn wait_for(done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    #[test]
    fn a_watch_is_complete_until_a_root_goes_and_follows_roots_that_appear() {
        let dir = tempfile::tempdir().expect("tmp");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir_all(a.join("sub")).expect("a");
        let dirty = Arc::new(Notify::new());
        let notes = home.join("notes.jsonl");
        let request = home.join(super::super::instance::PASS_REQUEST_FILE);
        std::fs::write(&request, b"").expect("request file");
        let mut w = Watch::start(
            true,
            vec![a.clone()],
            vec![request.clone()],
            &home,
            &notes,
            Arc::clone(&dirty),
        );
        assert!(w.complete(), "every root watched");
        assert!(!w.follow(vec![a.clone()]), "the same roots: nothing to do");
        // A store folder that appears is watched at the next tick.
        std::fs::create_dir_all(&b).expect("b");
        assert!(w.follow(vec![a.clone(), b.clone()]));
        assert!(w.complete());
        assert_eq!(w.roots, vec![a.clone(), b.clone(), request.clone()]);
        // A write below a root wakes the loop.
        let woke = Arc::new(AtomicBool::new(false));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        // A wake-up stored by an earlier event is taken first.
        rt.block_on(async {
            let _ = tokio::time::timeout(Duration::from_millis(50), dirty.notified()).await;
        });
        let notified = {
            let dirty = Arc::clone(&dirty);
            let woke = Arc::clone(&woke);
            std::thread::spawn(move || {
                let event = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(10), dirty.notified()).await
                });
                woke.store(event.is_ok(), Ordering::Relaxed);
            })
        };
        std::fs::write(b.join("s.jsonl"), b"{}\n").expect("write");
        assert!(wait_for(|| woke.load(Ordering::Relaxed)));
        notified.join().expect("join");
        assert!(w.complete(), "a write loses nothing");
        // A watched root removed: its watch is gone, so the watch is no
        // longer complete (ticks walk) until it is set up anew.
        std::fs::remove_dir_all(&a).expect("rm");
        assert!(wait_for(|| !w.complete()), "the loss is seen");
        assert!(w.follow(vec![b.clone()]));
        assert!(w.complete());
        // Watching off: never complete, nothing to follow.
        let mut off = Watch::start(false, vec![b.clone()], Vec::new(), &home, &notes, dirty);
        assert!(!off.complete());
        assert!(!off.follow(vec![a, b]));
    }
}
