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
//! An MCP server with no daemon beside it keeps a watch too, to skip its
//! walk before a read when nothing changed. It must know that the events
//! of every write made before the read have been handled, and a watch
//! with a barrier can tell ([`Watch::settle`]): a file of its own, watched
//! on the same queue as the stores, is written, and the kernel queues that
//! write's event after every earlier one.
//!
//! [`DaemonConfig::backstop_interval`]: super::DaemonConfig::backstop_interval
//! [`DaemonConfig::poll_interval`]: super::DaemonConfig::poll_interval

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long a fully watched reader goes without walking the stores when no
/// event came: the daemon's default backstop, and the MCP server's.
pub const BACKSTOP: Duration = Duration::from_secs(30);

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
    /// What changed since a reader last took it ([`Watch::take_changed`]).
    changed: Mutex<Changed>,
}

impl Signals {
    fn note(&self, f: impl FnOnce(&mut Changed)) {
        f(&mut self.changed.lock().unwrap_or_else(PoisonError::into_inner));
        self.dirty.notify_one();
    }
}

/// Files written to that [`Changed`] names at most; more make it
/// [`Changed::anything`].
pub const MAX_CHANGED: usize = 64;

/// What the watch saw change since it was last asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// Files whose contents were written to (in the order first seen, each
    /// once), when nothing else changed.
    pub paths: Vec<PathBuf>,
    /// Something else changed too (a file or folder made, removed or
    /// renamed, the node's notes or a pass asked for, more than
    /// [`MAX_CHANGED`] files, events lost): only a walk of every store can
    /// tell what.
    pub anything: bool,
}

impl Changed {
    /// The files written to, when that is all that changed (possibly
    /// none); `None` when anything else did.
    pub fn written_only(&self) -> Option<&[PathBuf]> {
        (!self.anything).then_some(self.paths.as_slice())
    }

    /// Nothing changed: a wake-up that finds this came for changes an
    /// earlier take already had (an event that arrived as they were
    /// taken still leaves its wake-up behind).
    pub fn is_empty(&self) -> bool {
        !self.anything && self.paths.is_empty()
    }

    fn wrote(&mut self, paths: &[PathBuf]) {
        for p in paths {
            if self.paths.contains(p) {
                continue;
            }
            if self.paths.len() == MAX_CHANGED {
                self.anything = true;
                return;
            }
            self.paths.push(p.clone());
        }
    }
}

/// A watch's barrier file (see [`Watch::settle`]).
struct Barrier {
    file: tempfile::NamedTempFile,
    /// Writes of it since the current watcher started.
    writes: u64,
    /// The closings of those writes the current watcher's handler has
    /// seen: new with each watcher, so a late event of an old one counts
    /// for nothing.
    seen: Arc<Seen>,
}

/// Closings of a barrier file's writes a handler has seen.
#[derive(Default)]
struct Seen {
    count: Mutex<u64>,
    moved: Condvar,
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
    /// The barrier ([`Watch::settle`]), when the watch has one.
    barrier: Option<Barrier>,
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
        let mut w = Watch::unstarted(enabled, extra, (home, notes_file), dirty, None);
        w.watch(stores);
        w
    }

    /// A watch on `stores` with a barrier (see [`Watch::settle`]), for a
    /// reader that must know whether anything changed before it reads. The
    /// barrier is a temporary file of its own, removed with the watch; a
    /// watch that cannot make one works as [`Watch::start`]'s, and never
    /// settles. Linux only (inotify reports a file's closing after a
    /// write, which the barrier waits for; other systems' watchers do
    /// not): elsewhere it never settles either.
    pub fn start_settling(
        stores: Vec<PathBuf>,
        home: &Path,
        notes_file: &Path,
        dirty: Arc<Notify>,
    ) -> Watch {
        let made = match cfg!(target_os = "linux") {
            true => tempfile::Builder::new()
                .prefix("cairn-watch-")
                .tempfile()
                .map_err(|e| tracing::debug!(error = %e, "no barrier file; reads walk the stores"))
                .ok(),
            false => None,
        };
        let barrier = made.map(|file| Barrier {
            file,
            writes: 0,
            seen: Arc::default(),
        });
        let extra = barrier
            .iter()
            .map(|b| b.file.path().to_path_buf())
            .collect();
        let mut w = Watch::unstarted(true, extra, (home, notes_file), dirty, barrier);
        w.watch(stores);
        w
    }

    /// A watch not set up yet (see [`Watch::watch`]).
    fn unstarted(
        enabled: bool,
        extra: Vec<PathBuf>,
        (home, notes_file): (&Path, &Path),
        dirty: Arc<Notify>,
        barrier: Option<Barrier>,
    ) -> Watch {
        Watch {
            enabled,
            home: home.to_path_buf(),
            notes_file: notes_file.to_path_buf(),
            extra,
            roots: Vec::new(),
            all_watched: false,
            signals: Arc::new(Signals {
                dirty,
                lost: AtomicBool::new(false),
                changed: Mutex::default(),
            }),
            barrier,
            _watcher: None,
        }
    }

    /// Waits (at most `timeout`) until the handler has handled every event
    /// the kernel queued before this call, by writing the barrier file and
    /// waiting for that write's closing: one watcher reads one queue, in
    /// order. False when the watch has no barrier or watcher, or the event
    /// did not come in time (then the caller cannot know what changed, and
    /// the barrier is dropped: later calls say false at once instead of
    /// waiting again).
    pub fn settle(&mut self, timeout: Duration) -> bool {
        let Some(barrier) = &mut self.barrier else {
            return false;
        };
        if self._watcher.is_none() || std::fs::write(barrier.file.path(), b"").is_err() {
            return false;
        }
        // Each write closes once: every write so far seen means this one is.
        barrier.writes += 1;
        let deadline = Instant::now() + timeout;
        let seen = Arc::clone(&barrier.seen);
        let mut count = seen.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count < barrier.writes {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!("the watch's barrier did not come back; reads walk the stores");
                self.barrier = None;
                return false;
            }
            count = seen
                .moved
                .wait_timeout(count, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// What changed since the last call (nothing named, and not
    /// `anything`, when no event came). A reader that takes it before it
    /// walks or reads has those changes covered; an event handled after
    /// it is in the next.
    pub fn take_changed(&self) -> Changed {
        std::mem::take(
            &mut self
                .signals
                .changed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
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
        // A new watcher counts the barrier's writes anew.
        let barrier = self.barrier.as_mut().map(|b| {
            b.writes = 0;
            b.seen = Arc::default();
            (b.file.path().to_path_buf(), Arc::clone(&b.seen))
        });
        let (watcher, all) = start_watcher(
            &self.roots,
            &self.home,
            &self.notes_file,
            barrier,
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
    barrier: Option<(PathBuf, Arc<Seen>)>,
    signals: Arc<Signals>,
) -> (Option<notify::RecommendedWatcher>, bool) {
    use notify::event::{AccessKind, AccessMode};
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
                signals.note(|c| c.anything = true);
                return;
            }
        };
        // The barrier's closing after a write (see `Watch::settle`): counted,
        // never a change.
        if let Some((path, seen)) = &barrier
            && ev.paths.iter().any(|p| p == path)
        {
            if ev.kind == EventKind::Access(AccessKind::Close(AccessMode::Write)) {
                *seen.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                seen.moved.notify_all();
            }
            return;
        }
        // The queue overflowed, or a watched root itself went away: its
        // watch is gone with it.
        let root_gone =
            matches!(ev.kind, EventKind::Remove(_)) && ev.paths.iter().any(|p| watched.contains(p));
        if ev.need_rescan() || root_gone {
            signals.lost.store(true, Ordering::Relaxed);
            signals.note(|c| c.anything = true);
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
            // A write to the contents of files in the agents' stores, or
            // of the notes file (a note appended), names them; anything
            // else (the home's other files, a pass asked for) asks for a
            // walk.
            let written = matches!(
                ev.kind,
                EventKind::Modify(notify::event::ModifyKind::Data(_))
            ) && !ev.paths.is_empty()
                && ev
                    .paths
                    .iter()
                    .all(|p| !p.starts_with(&home_dir) || p == &notes);
            signals.note(|c| match written {
                true => c.wrote(&ev.paths),
                false => c.anything = true,
            });
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

    /// Takes the wake-up a change left, if any.
    #[cfg(target_os = "linux")]
    fn taken(dirty: &Notify) -> bool {
        std::pin::pin!(dirty.notified()).enable()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_settled_watch_has_handled_every_write_made_before_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let home = dir.path().join("home");
        let root = dir.path().join("store");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(root.join("sub")).expect("root");
        let notes = home.join("notes.jsonl");
        let dirty = Arc::new(Notify::new());
        let mut w = Watch::start_settling(vec![root.clone()], &home, &notes, Arc::clone(&dirty));
        assert!(w.complete(), "the store and the barrier are watched");
        let long = Duration::from_secs(10);
        assert!(w.settle(long));
        taken(&dirty);
        // The barrier's own writes are never a change.
        for _ in 0..3 {
            assert!(w.settle(long));
        }
        assert!(!taken(&dirty), "the barrier counted as a change");
        // Whatever is written just before, settling has seen it: a file
        // made in a folder below the root, then grown, write after write.
        let file = root.join("sub/s.jsonl");
        for i in 0..20 {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .expect("open");
            std::io::Write::write_all(&mut f, format!("{{\"n\":{i}}}\n").as_bytes())
                .expect("append");
            drop(f);
            assert!(w.settle(long), "write {i}");
            assert!(
                taken(&dirty),
                "write {i} not handled when the watch settled"
            );
            assert!(w.settle(long));
            assert!(!taken(&dirty), "write {i} reported twice");
        }
        // A watch set up anew counts its barrier anew.
        std::fs::create_dir_all(dir.path().join("other")).expect("other");
        assert!(w.follow(vec![root.clone(), dir.path().join("other")]));
        assert!(w.settle(long));
        // A watch without a barrier never settles.
        let mut plain = Watch::start(true, vec![root], Vec::new(), &home, &notes, dirty);
        assert!(!plain.settle(Duration::from_millis(10)));
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

    #[cfg(target_os = "linux")]
    #[test]
    fn writes_to_files_are_named_and_anything_else_asks_for_a_walk() {
        let dir = tempfile::tempdir().expect("tmp");
        let home = dir.path().join("home");
        let root = dir.path().join("store");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(root.join("p")).expect("root");
        let (a, b) = (root.join("p/a.jsonl"), root.join("p/b.jsonl"));
        std::fs::write(&a, b"").expect("a");
        std::fs::write(&b, b"").expect("b");
        let notes = home.join("notes.jsonl");
        let dirty = Arc::new(Notify::new());
        let mut w = Watch::start_settling(vec![root.clone(), home.clone()], &home, &notes, dirty);
        let long = Duration::from_secs(10);
        assert!(w.settle(long));
        w.take_changed();
        let append = |p: &Path, text: &str| {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .expect("open");
            std::io::Write::write_all(&mut f, text.as_bytes()).expect("append");
        };
        // Writes to existing files: each named once, in order.
        append(&b, "one\n");
        append(&a, "one\n");
        append(&b, "two\n");
        assert!(w.settle(long));
        let c = w.take_changed();
        assert_eq!((c.paths, c.anything), (vec![b.clone(), a.clone()], false));
        // Taken: nothing is left.
        assert_eq!(w.take_changed(), Changed::default());
        // A file made: only a walk finds what it is.
        std::fs::write(root.join("p/c.jsonl"), b"x\n").expect("c");
        assert!(w.settle(long));
        assert!(w.take_changed().anything);
        // Removed or renamed: the same.
        std::fs::rename(&a, root.join("p/a2.jsonl")).expect("rename");
        assert!(w.settle(long));
        assert!(w.take_changed().anything);
        // More files than are named: a walk.
        for i in 0..=MAX_CHANGED {
            let p = root.join(format!("p/f{i}"));
            std::fs::write(&p, b"").expect("make");
        }
        assert!(w.settle(long));
        w.take_changed();
        for i in 0..=MAX_CHANGED {
            append(&root.join(format!("p/f{i}")), "x");
        }
        assert!(w.settle(long));
        let c = w.take_changed();
        assert!(c.anything);
        assert_eq!(c.paths.len(), MAX_CHANGED);
        // A note appended to the notes file in the home is named like a
        // store written to; the notes file made is not (a walk finds it).
        std::fs::write(&notes, b"").expect("notes");
        assert!(w.settle(long));
        assert!(w.take_changed().anything);
        append(&notes, "{}\n");
        assert!(w.settle(long));
        let c = w.take_changed();
        assert_eq!((c.paths, c.anything), (vec![notes.clone()], false));
        // A pass asked for through the home's request file: a walk.
        let request = home.join(super::super::instance::PASS_REQUEST_FILE);
        std::fs::write(&request, b"").expect("request");
        assert!(w.settle(long));
        w.take_changed();
        append(&request, "x");
        assert!(w.settle(long));
        assert!(w.take_changed().anything);
        // The home's other files (the database among them) are not looked at.
        std::fs::write(home.join("cairn.db"), b"").expect("db");
        append(&home.join("cairn.db"), "x");
        assert!(w.settle(long));
        assert_eq!(w.take_changed(), Changed::default());
    }
}
