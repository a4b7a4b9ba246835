//! The `cairn serve` daemon: one node kept fresh and in sync, for as long
//! as the process runs.
//!
//! Owns the process around a shared [`Node`]:
//! - **instance**: one daemon per home (`serve.lock`), where it listens
//!   (`serve.json`, removed on shutdown), its last indexing pass and the
//!   requests for one (`instance`);
//! - **index**: the index loop (`index_loop`) over the agents' stores,
//!   watched with a polling fallback (`watch`);
//! - **searches**: the CLI's searches, answered on a Unix socket in the
//!   home from a connection kept warm (`search_socket`);
//! - **sync**: the peers, through `sync`'s public [`SyncService`], which
//!   it tells when this node's own log grew.
//!
//! It uses `sync`; `sync` never imports it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

mod index_loop;
pub mod instance;
pub mod search_socket;
pub mod watch;

use crate::clock::now_ms;
use crate::node::Node;
use crate::sync::scheduler::SchedulerConfig;
use crate::sync::service::{ServiceConfig, ServiceError, SyncService};
use crate::sync::session::{SessionConfig, SharedNode};
pub use instance::{
    LAST_PASS_FILE, LastPass, PASS_REQUEST_FILE, SERVE_STATE_FILE, ServeState, is_serving,
    last_pass, read_state, request_pass, running_state, state_path,
};
use watch::Watch;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Where to listen (`0.0.0.0:7878` by default; `127.0.0.1:0` in tests).
    pub listen: SocketAddr,
    /// A sync round with every peer at least this often.
    pub sync_interval: Duration,
    /// Index at least this often even without file events, while any of
    /// the agents' stores is not watched (the fallback; see `daemon::watch`).
    pub poll_interval: Duration,
    /// Index at least this often while every store is watched (a backstop
    /// for events lost anyway); roots that appear are still looked for
    /// every `poll_interval`.
    pub backstop_interval: Duration,
    /// Wait this long after a file event for more before indexing.
    pub debounce: Duration,
    /// How often the peer table is checked for changes.
    pub peers_check: Duration,
    /// First retry delay for an unreachable peer.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// A connection that lasted this long was a success (see
    /// [`SchedulerConfig::stable_after`]).
    pub stable_after: Duration,
    /// Time allowed for each dial's handshake.
    pub handshake_timeout: Duration,
    /// Limits of each session.
    pub session: SessionConfig,
    /// Watch the agents' stores for changes (else only poll).
    pub watch: bool,
    /// Announce this node and find paired peers on the LAN (mDNS).
    pub discovery: bool,
    /// Called once the passes have read at least [`RELEASE_AFTER`] bytes
    /// of history since it was last called and have caught up (no store
    /// left for later), on a blocking thread: a binary whose heap keeps
    /// what it frees for the next search (`cairn serve`'s) gives memory a
    /// backlog took back to the system here. `None`: nothing to call.
    pub after_backlog: Option<fn()>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], crate::sync::DEFAULT_PORT)),
            sync_interval: Duration::from_secs(30),
            poll_interval: Duration::from_secs(3),
            backstop_interval: watch::BACKSTOP,
            debounce: Duration::from_millis(150),
            peers_check: Duration::from_secs(1),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(120),
            stable_after: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(5),
            session: SessionConfig::default(),
            watch: true,
            discovery: true,
            after_backlog: None,
        }
    }
}

/// Bytes of history the passes read before [`DaemonConfig::after_backlog`]
/// is due (once they catch up): an agent's day of writing stays below it,
/// a first index of a history or a long time away does not.
pub const RELEASE_AFTER: u64 = 64 << 20;

impl DaemonConfig {
    /// The scheduler's part of it.
    pub fn scheduler(&self) -> SchedulerConfig {
        SchedulerConfig {
            round_interval: self.sync_interval,
            backoff_min: self.backoff_min,
            backoff_max: self.backoff_max,
            stable_after: self.stable_after,
        }
    }

    /// The sync service's part of it.
    pub fn service(&self) -> ServiceConfig {
        ServiceConfig {
            listen: self.listen,
            scheduler: self.scheduler(),
            peers_check: self.peers_check,
            handshake_timeout: self.handshake_timeout,
            session: self.session.clone(),
            discovery: self.discovery,
        }
    }
}

/// Failures that stop the daemon (everything else is logged and retried).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The sync service could not start (the endpoint, the peer table,
    /// the node's description of itself).
    #[error(transparent)]
    Sync(#[from] ServiceError),
    /// Another daemon serves this home.
    #[error(transparent)]
    Instance(#[from] Box<instance::InstanceError>),
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
    let json = serde_json::to_vec(st).map_err(|e| io(std::io::Error::other(e)))?;
    crate::home::write_private_atomic(&path, &json).map_err(io)
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
    let _claim = instance::claim(&home).map_err(Box::new)?;
    let service = SyncService::bind(&node, cfg.service())?;
    let bound = service.local_addr();
    // `cairn index` asks for a pass by writing this file; it exists before
    // `serve.json` names this daemon, so a request never finds it missing.
    let requests = match instance::prepare_pass_requests(&home) {
        Ok(()) => Some(home.join(PASS_REQUEST_FILE)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot create the pass request file");
            None
        }
    };
    // Searches from the CLI, answered warm (see `search_socket`); bound
    // before `serve.json` names this daemon, so a CLI that finds the
    // daemon finds the socket. Without it the CLI searches on its own: a
    // failure is only logged.
    #[cfg(unix)]
    let searches = match search_socket::server::SearchSocket::bind(&home, &node.config().db_path) {
        Ok(socket) => Some(socket),
        Err(e) => {
            tracing::warn!(error = %e, "searches are not answered by the daemon");
            None
        }
    };
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

    #[cfg(unix)]
    let semantic = node.config().semantic;
    let notes_file = node.config().locations.notes_file.clone();
    let stores = index_loop::StoreRoots {
        locations: node.config().locations.clone(),
        disabled: node.config().disabled.clone(),
    };
    let dirty = Arc::new(Notify::new());
    let watch = Watch::start(
        cfg.watch,
        stores.existing(),
        requests.into_iter().collect(),
        &home,
        &notes_file,
        Arc::clone(&dirty),
    );
    let node: SharedNode = Arc::new(Mutex::new(node));

    let mut tasks = tokio::task::JoinSet::new();
    #[cfg(unix)]
    if let Some(socket) = searches {
        if semantic {
            socket.ready_meaning_tier();
        }
        tasks.spawn(socket.serve());
    }
    let sync = service.start(Arc::clone(&node), &mut tasks);
    tasks.spawn(index_loop::run(
        home.clone(),
        node,
        cfg.clone(),
        (watch, stores, Arc::clone(&dirty)),
        sync,
    ));

    shutdown.await;
    tracing::info!("shutting down");
    tasks.abort_all();
    // Bounded: abort_all makes every task finish promptly.
    while tasks.join_next().await.is_some() {}
    service.close().await;
    let _ = std::fs::remove_file(state_path(&home));
    let _ = std::fs::remove_file(home.join(LAST_PASS_FILE));
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

#[cfg(test)]
mod tests {
    use super::*;
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
