//! The `cairn serve` daemon: one node kept in sync with its paired peers.
//!
//! Owns the long-running loops around a [`SharedNode`]:
//! - **listen**: a sync endpoint on `--listen` whose allow-list is the peer
//!   table (re-read when `peers.json` changes, so a pairing or unpairing
//!   takes effect without a restart); each accepted connection runs one
//!   session as the listener ([`session::serve_connection`]);
//! - **index**: watches the agents' stores (the `notify` crate) with a
//!   polling fallback, indexes within a fraction of a second of a change,
//!   and asks for a sync round when something new was read;
//! - **sync**: a round with every peer on a timer and whenever something new
//!   arrives (local history, or records relayed from another peer); a peer
//!   that cannot be reached is retried with exponential backoff and jitter;
//!   dialing goes out from the listening socket, so peers see (and
//!   remember) the address they can dial back;
//! - **state**: the bound address in `serve.json` in the node's home, so
//!   `cairn status --json` and tests can find it; removed on shutdown.
//!
//! Everything is bounded: sessions by [`SessionConfig`], concurrent inbound
//! sessions by a semaphore, retries by the backoff cap. Logs with tracing,
//! never record text.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use cairn_protocol::SpkiFingerprint;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::endpoint::{Endpoint, EndpointError, Role};
pub use super::instance::{
    SERVE_STATE_FILE, ServeState, is_serving, read_state, running_state, state_path,
};
use super::peers::{Peer, PeerTable, PeersError};
use super::session::{
    self, SessionConfig, SharedNode, SyncError, local_hello, new_instance, with_node,
};
use super::tls::AllowList;
use crate::clock::now_ms;
use crate::node::Node;

/// Inbound sessions served at once.
const MAX_INBOUND: usize = 32;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Where to listen (`0.0.0.0:7878` by default; `127.0.0.1:0` in tests).
    pub listen: SocketAddr,
    /// A sync round with every peer at least this often.
    pub sync_interval: Duration,
    /// Index at least this often even without file events (the fallback).
    pub poll_interval: Duration,
    /// Wait this long after a file event for more before indexing.
    pub debounce: Duration,
    /// How often `peers.json` is checked for changes.
    pub peers_check: Duration,
    /// First retry delay for an unreachable peer.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Time allowed for each dial's handshake.
    pub handshake_timeout: Duration,
    /// Limits of each session.
    pub session: SessionConfig,
    /// Watch the agents' stores for changes (else only poll).
    pub watch: bool,
    /// Announce this node and find paired peers on the LAN (mDNS).
    pub discovery: bool,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], super::DEFAULT_PORT)),
            sync_interval: Duration::from_secs(30),
            poll_interval: Duration::from_secs(3),
            debounce: Duration::from_millis(150),
            peers_check: Duration::from_secs(1),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(120),
            handshake_timeout: Duration::from_secs(5),
            session: SessionConfig::default(),
            watch: true,
            discovery: true,
        }
    }
}

/// Failures that stop the daemon (everything else is logged and retried).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The endpoint could not be bound.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The peer table could not be read.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// The node could not describe itself.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// Another daemon serves this home.
    #[error(transparent)]
    Instance(#[from] Box<super::instance::InstanceError>),
    /// The state file could not be written.
    #[error("write {path}")]
    State {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn write_state(home: &Path, st: &ServeState) -> Result<(), DaemonError> {
    let path = state_path(home);
    let io = |source| DaemonError::State {
        path: path.clone(),
        source,
    };
    let tmp = home.join(format!(".{SERVE_STATE_FILE}.{}.tmp", std::process::id()));
    let json = serde_json::to_vec(st).map_err(|e| io(std::io::Error::other(e)))?;
    let mut f = crate::home::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(&json).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// Retry state of one peer.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    next: Instant,
}

/// Retry state per peer node id, shared by the dialing loop (which sets
/// it) and the accept loop (which clears it: a peer that just reached us
/// is reachable again).
type Backoffs = Arc<Mutex<HashMap<String, Backoff>>>;

fn lock_backoffs(b: &Backoffs) -> std::sync::MutexGuard<'_, HashMap<String, Backoff>> {
    b.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The delay after `failures` consecutive failures: doubling from `min`,
/// capped at `max`, plus up to 25 % jitter.
pub fn backoff_delay(failures: u32, min: Duration, max: Duration, jitter_seed: u64) -> Duration {
    let exp = min.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let base = exp.min(max);
    let quarter = base.as_millis() as u64 / 4;
    let jitter = if quarter == 0 {
        0
    } else {
        jitter_seed % quarter
    };
    base + Duration::from_millis(jitter)
}

fn random_u64() -> u64 {
    new_instance()
}

/// Runs the daemon until `shutdown` resolves; then stops accepting, lets
/// running sessions end (bounded) and removes `serve.json`. `on_bound` is
/// called once with the bound address.
pub async fn serve(
    node: Node,
    cfg: DaemonConfig,
    shutdown: impl Future<Output = ()>,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), DaemonError> {
    let home = node.config().home.clone();
    let _claim = super::instance::claim(&home).map_err(Box::new)?;
    let hello = local_hello(&node, new_instance())?;
    let allowed = Arc::new(RwLock::new(PeerTable::load(&home)?.allowed_fingerprints()));
    let mut endpoint = Endpoint::bind(
        cfg.listen,
        node.identity().key(),
        Role::Sync(AllowList::shared(Arc::clone(&allowed))),
    )?;
    endpoint.set_handshake_timeout(cfg.handshake_timeout);
    let endpoint = Arc::new(endpoint);
    let bound = endpoint
        .local_addr()
        .map_err(|source| EndpointError::Bind {
            addr: cfg.listen,
            source,
        })?;
    write_state(
        &home,
        &ServeState {
            listen_addr: bound,
            pid: std::process::id(),
            started_ms: now_ms(),
        },
    )?;
    tracing::info!(listen = %bound, "serving");
    on_bound(bound);

    let own_id = node.identity().id().to_owned();
    let watch_paths = watch_roots(&node);
    let notes_file = node.config().locations.notes_file.clone();
    let node: SharedNode = Arc::new(Mutex::new(node));
    let kick = Arc::new(Notify::new());
    let dirty = Arc::new(Notify::new());
    let _watcher = if cfg.watch {
        start_watcher(&watch_paths, &home, &notes_file, Arc::clone(&dirty))
    } else {
        None
    };

    let backoffs: Backoffs = Arc::default();
    let (reached_tx, reached_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    let ctx = Ctx {
        endpoint: Arc::clone(&endpoint),
        node: Arc::clone(&node),
        home: home.clone(),
        hello,
    };
    tasks.spawn(accept_loop(
        ctx.clone(),
        cfg.session.clone(),
        Arc::clone(&kick),
        Arc::clone(&backoffs),
        reached_tx.clone(),
    ));
    tasks.spawn(index_loop(
        Arc::clone(&node),
        cfg.clone(),
        Arc::clone(&dirty),
        Arc::clone(&kick),
    ));
    tasks.spawn(peers_loop(
        home.clone(),
        allowed,
        cfg.peers_check,
        Arc::clone(&kick),
    ));
    // A paired peer heard at new addresses on the LAN is synced with now,
    // whatever its backoff; an attempt still dialing its old addresses is
    // dropped (as when it reaches us).
    let (lan_backoffs, lan_kick) = (Arc::clone(&backoffs), Arc::clone(&kick));
    tasks.spawn(super::discovery::run(
        home.clone(),
        own_id,
        bound,
        cfg.discovery,
        move |id: &str| {
            lock_backoffs(&lan_backoffs).remove(id);
            let _ = reached_tx.send(id.to_owned());
            lan_kick.notify_one();
        },
    ));
    tasks.spawn(sync_loop(ctx, cfg.clone(), kick, backoffs, reached_rx));

    shutdown.await;
    tracing::info!("shutting down");
    tasks.abort_all();
    // Bounded: abort_all makes every task finish promptly.
    while tasks.join_next().await.is_some() {}
    endpoint.close();
    endpoint.wait_idle(Duration::from_secs(2)).await;
    let _ = std::fs::remove_file(state_path(&home));
    Ok(())
}

/// A multi-threaded tokio runtime for the daemon (sessions, indexing and
/// dialing run side by side).
pub fn runtime() -> Result<tokio::runtime::Runtime, std::io::Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Resolves on SIGINT or SIGTERM (SIGINT only off Unix).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// What the loops share.
#[derive(Clone)]
struct Ctx {
    endpoint: Arc<Endpoint>,
    node: SharedNode,
    home: PathBuf,
    hello: cairn_protocol::Hello,
}

async fn accept_loop(
    ctx: Ctx,
    cfg: SessionConfig,
    kick: Arc<Notify>,
    backoffs: Backoffs,
    reached: tokio::sync::mpsc::UnboundedSender<String>,
) {
    let Ctx {
        endpoint,
        node,
        home,
        hello,
    } = ctx;
    let permits = Arc::new(Semaphore::new(MAX_INBOUND));
    // Ends when the endpoint closes.
    while let Some(incoming) = endpoint.accept().await {
        let conn = match incoming {
            Ok(c) => c,
            Err(e) => {
                tracing::info!(error = %e, "incoming connection refused");
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(peer = %conn.peer_id(), "too many sessions; dropping connection");
            conn.close(4, b"busy");
            continue;
        };
        let (node, home, hello, cfg, kick, backoffs, reached) = (
            Arc::clone(&node),
            home.clone(),
            hello.clone(),
            cfg.clone(),
            Arc::clone(&kick),
            Arc::clone(&backoffs),
            reached.clone(),
        );
        tokio::spawn(async move {
            let peer = conn.peer_id();
            match session::serve_connection(conn, &node, &home, &hello, &cfg).await {
                Ok(r) => {
                    lock_backoffs(&backoffs).remove(&peer.to_string());
                    let _ = reached.send(peer.to_string());
                    tracing::info!(peer = %peer, received = r.records_received, stored = r.stored, sent = r.records_sent, "session served");
                    // Relay what arrived to the other peers.
                    if r.stored > 0 || r.tombstones > 0 {
                        kick.notify_one();
                    }
                }
                Err(e) => {
                    tracing::warn!(peer = %peer, blame = ?e.blame(), error = %e, "session failed; connection dropped")
                }
            }
            drop(permit);
        });
    }
}

async fn index_loop(node: SharedNode, cfg: DaemonConfig, dirty: Arc<Notify>, kick: Arc<Notify>) {
    // Runs until aborted; each iteration waits for a change or the poll timer.
    let mut first = true;
    let mut last_mark = None;
    loop {
        if !first {
            tokio::select! {
                _ = dirty.notified() => {
                    tokio::time::sleep(cfg.debounce).await;
                }
                _ = tokio::time::sleep(cfg.poll_interval) => {}
            }
        }
        first = false;
        let r = with_node(&node, |n| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let rep = n.index_until(now_ms(), Some(deadline), &mut |_| {});
            (rep, own_mark(n))
        })
        .await;
        match r {
            Ok((Ok(rep), mark)) => {
                if rep.added > 0 || rep.removed > 0 {
                    tracing::info!(added = rep.added, "indexed new history");
                }
                // Our own log grew (this pass, or `cairn remember` / `cairn
                // forget` run beside the daemon): push it.
                if mark != last_mark {
                    last_mark = mark;
                    kick.notify_one();
                }
                if rep.deferred > 0 {
                    // More to read: come back at once.
                    dirty.notify_one();
                }
            }
            Ok((Err(e), _)) => tracing::warn!(error = %e, "indexing failed"),
            Err(e) => tracing::warn!(error = %e, "indexing task failed"),
        }
    }
}

/// This node's own log position (epoch, seq).
fn own_mark(n: &Node) -> Option<(u64, u64)> {
    let own: cairn_protocol::NodeId = n.identity().id().parse().ok()?;
    n.watermarks()
        .ok()?
        .iter()
        .find(|w| w.origin == own)
        .map(|w| (w.epoch, w.seq))
}

fn peers_stamp(home: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(PeerTable::path_in(home)).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Follows `peers.json`: the allow-list takes every change at once, and a
/// peer that was not there before (a pairing just completed, here or in a
/// `cairn pair` beside the daemon) gets its first sync round right away
/// instead of at the next periodic one.
async fn peers_loop(
    home: PathBuf,
    allowed: Arc<RwLock<HashSet<SpkiFingerprint>>>,
    every: Duration,
    kick: Arc<Notify>,
) {
    let mut stamp = peers_stamp(&home);
    loop {
        tokio::time::sleep(every).await;
        let now = peers_stamp(&home);
        if now == stamp {
            continue;
        }
        stamp = now;
        match PeerTable::load(&home) {
            Ok(t) => {
                let set = t.allowed_fingerprints();
                let added = match allowed.write() {
                    Ok(mut w) => {
                        let added = set.difference(&w).count();
                        *w = set;
                        added
                    }
                    Err(_) => 0,
                };
                tracing::info!(peers = t.peers().len(), added, "peer table changed");
                if added > 0 {
                    kick.notify_one();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "peer table unreadable; keeping the old allow-list")
            }
        }
    }
}

async fn sync_loop(
    ctx: Ctx,
    cfg: DaemonConfig,
    kick: Arc<Notify>,
    backoffs: Backoffs,
    mut reached: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let Ctx {
        endpoint,
        node,
        home,
        hello,
    } = ctx;
    type Done = (Peer, Result<session::SessionReport, SyncError>);
    let mut running: tokio::task::JoinSet<Done> = tokio::task::JoinSet::new();
    // Peers with a session in flight, and those to sync again when it ends.
    let mut in_flight: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut again: HashSet<String> = HashSet::new();
    let mut next_round = Instant::now();
    let mut wanted = true;
    // Runs until aborted; each iteration handles one event.
    loop {
        if wanted {
            wanted = false;
            let now = Instant::now();
            if now >= next_round {
                next_round = now + cfg.sync_interval;
            }
            let peers = match PeerTable::load(&home) {
                Ok(t) => t.peers().to_vec(),
                Err(e) => {
                    tracing::warn!(error = %e, "peer table unreadable");
                    Vec::new()
                }
            };
            lock_backoffs(&backoffs).retain(|id, _| peers.iter().any(|p| &p.node_id == id));
            for p in peers {
                if in_flight.contains_key(&p.node_id) {
                    again.insert(p.node_id.clone());
                    continue;
                }
                let waiting = lock_backoffs(&backoffs)
                    .get(&p.node_id)
                    .is_some_and(|b| b.next > now);
                if waiting
                    || (p.addresses.is_empty() && p.hosts.is_empty() && p.last_addr.is_none())
                {
                    // Retry later, or nowhere to dial yet (it will reach us).
                    continue;
                }
                let id = p.node_id.clone();
                let (endpoint, node, home, hello, scfg) = (
                    Arc::clone(&endpoint),
                    Arc::clone(&node),
                    home.clone(),
                    hello.clone(),
                    cfg.session.clone(),
                );
                let handle = running.spawn(async move {
                    let r = session::sync_peer(&endpoint, &node, &home, &p, &hello, &scfg).await;
                    (p, r)
                });
                in_flight.insert(id, handle);
            }
        }
        let soonest = lock_backoffs(&backoffs)
            .values()
            .map(|b| b.next)
            .filter(|n| *n > Instant::now())
            .min()
            .map_or(next_round, |n| n.min(next_round));
        tokio::select! {
            _ = kick.notified() => wanted = true,
            _ = tokio::time::sleep_until(soonest) => wanted = true,
            Some(id) = reached.recv() => {
                // The peer just reached us (and synced): an outbound attempt
                // still dialing an old address is moot; dial the fresh one.
                if let Some(h) = in_flight.remove(&id) {
                    h.abort();
                    again.remove(&id);
                    wanted = true;
                }
            }
            Some(joined) = running.join_next_with_id(), if !running.is_empty() => {
                let Ok((task, (p, r))) = joined else { continue };
                // A result of an attempt replaced meanwhile is ignored.
                if in_flight.get(&p.node_id).map(|h| h.id()) != Some(task) {
                    continue;
                }
                in_flight.remove(&p.node_id);
                if again.remove(&p.node_id) {
                    wanted = true;
                }
                on_round_done(&p, r, &cfg, &backoffs);
            }
        }
    }
}

fn on_round_done(
    p: &Peer,
    r: Result<session::SessionReport, SyncError>,
    cfg: &DaemonConfig,
    backoffs: &Backoffs,
) {
    match r {
        Ok(rep) => {
            lock_backoffs(backoffs).remove(&p.node_id);
            if rep.moved_anything() {
                tracing::info!(peer = %p.node_id, received = rep.records_received, stored = rep.stored, sent = rep.records_sent, "synced");
            }
        }
        Err(e) => {
            let mut map = lock_backoffs(backoffs);
            let b = map.entry(p.node_id.clone()).or_insert(Backoff {
                failures: 0,
                next: Instant::now(),
            });
            b.failures = b.failures.saturating_add(1);
            let delay = backoff_delay(b.failures, cfg.backoff_min, cfg.backoff_max, random_u64());
            b.next = Instant::now() + delay;
            let failures = b.failures;
            drop(map);
            tracing::warn!(peer = %p.node_id, failures, retry_in = ?delay, blame = ?e.blame(), error = %e, "sync failed");
        }
    }
}

/// The paths to watch: the agents' stores that exist, and the notes file.
/// Only the folders (or files) the agents write their histories to, never
/// a whole home or project tree: a recursive watch on `$HOME` would cost
/// a watch per folder and wake on every write anywhere, including this
/// node's own database.
fn watch_roots(node: &Node) -> Vec<PathBuf> {
    let cfg = node.config();
    // Each source names the folders it reads (`Source::roots`); the notes
    // file is the notes source's root, never the home around it: the
    // database and its WAL live there and would wake the watcher on every write.
    crate::sources::watch_roots(&cfg.locations, &cfg.disabled)
}

fn start_watcher(
    roots: &[PathBuf],
    home: &Path,
    notes_file: &Path,
    dirty: Arc<Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let home_dir = home.to_path_buf();
    let notes = notes_file.to_path_buf();
    let handler = move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else { return };
        let relevant = matches!(
            ev.kind,
            EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
        ) && !matches!(
            ev.kind,
            EventKind::Modify(notify::event::ModifyKind::Metadata(_))
        );
        // The node's own database lives in its home: only the notes file counts there.
        let ours = ev
            .paths
            .iter()
            .any(|p| !p.starts_with(&home_dir) || p == &notes);
        if relevant && ours {
            dirty.notify_one();
        }
    };
    let mut w = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "file watching unavailable; polling only");
            return None;
        }
    };
    for r in roots {
        let mode = if r.starts_with(home) || r.is_file() {
            RecursiveMode::NonRecursive
        } else {
            RecursiveMode::Recursive
        };
        if let Err(e) = w.watch(r, mode) {
            tracing::warn!(path = %r.display(), error = %e, "cannot watch; polling covers it");
        }
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_jitters_within_a_quarter() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(backoff_delay(1, min, max, 0), Duration::from_secs(1));
        assert_eq!(backoff_delay(2, min, max, 0), Duration::from_secs(2));
        assert_eq!(backoff_delay(4, min, max, 0), Duration::from_secs(8));
        assert_eq!(backoff_delay(30, min, max, 0), max);
        for seed in [1, 999, u64::MAX] {
            let d = backoff_delay(3, min, max, seed);
            assert!(
                d >= Duration::from_secs(4) && d < Duration::from_secs(5),
                "{d:?}"
            );
        }
    }

    #[test]
    fn state_file_round_trips_and_a_dead_pid_is_not_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let st = ServeState {
            listen_addr: "127.0.0.1:4567".parse().expect("addr"),
            pid: std::process::id(),
            started_ms: 1,
        };
        write_state(dir.path(), &st).expect("write");
        assert_eq!(read_state(dir.path()), Some(st.clone()));
        assert_eq!(running_state(dir.path()), Some(st.clone()));
        let dead = ServeState {
            pid: u32::MAX - 1,
            ..st
        };
        write_state(dir.path(), &dead).expect("write");
        if cfg!(target_os = "linux") {
            assert_eq!(running_state(dir.path()), None);
        }
        std::fs::write(state_path(dir.path()), b"{not json").expect("write");
        assert_eq!(read_state(dir.path()), None);
    }
}
