//! The `cairn serve` daemon: one node kept in sync with its paired peers
//! over long-lived connections.
//!
//! Owns the long-running loops around a [`SharedNode`]:
//! - **listen**: a sync endpoint on `--listen` whose allow-list is the peer
//!   table; accepted connections go to the driver;
//! - **index**: watches the agents' stores (the `notify` crate) with a
//!   polling fallback (see [`super::watch`]), indexes within a fraction of
//!   a second of a change, and tells the driver when this node's own log
//!   grew;
//! - **peers**: follows the peer table (re-read when it changes, so a
//!   pairing or unpairing takes effect without a restart);
//! - **driver**: the thin shell around the pure [`Scheduler`]: it feeds
//!   the scheduler what happened (connections up and down, dials failed,
//!   sessions done, new records, the peer table, LAN sightings via
//!   [`Sightings`]) and carries out what it decides (dial a peer, run a
//!   session on a connection, close a duplicate) with the tasks in
//!   `links.rs`. One connection per reachable peer stays up (QUIC
//!   keep-alives); new records start a session on it as a new stream,
//!   whichever side dialed, so a node behind NAT that dialed out still
//!   gets pushed to within a second;
//! - **state**: the bound address in `serve.json` in the node's home, so
//!   `cairn status --json` and tests can find it; removed on shutdown;
//! - **searches**: the CLI's searches, answered on a Unix socket in the
//!   home from a connection kept warm (`search_socket`).
//!
//! Everything is bounded: sessions by [`SessionConfig`], inbound sessions
//! by a semaphore (and QUIC's stream limit per connection), connections by
//! a cap, retries by the backoff cap. Logs with tracing, never record text.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use cairn_protocol::{NodeId, SpkiFingerprint};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::time::Instant;

use super::endpoint::{Endpoint, EndpointError, PeerConnection, Role};
pub use super::instance::{
    LAST_PASS_FILE, LastPass, PASS_REQUEST_FILE, SERVE_STATE_FILE, ServeState, is_serving,
    last_pass, read_state, request_pass, running_state, state_path,
};
use super::links::{self, LinkCtx, LinkEvent};
use super::peers::{Peer, PeerTable, PeersError};
use super::scheduler::{Action, ConnId, Input, Scheduler, SchedulerConfig};
use super::session::{
    self, SessionConfig, SharedNode, SyncError, local_hello, new_instance, with_node,
};
use super::tls::AllowList;
use super::watch::{self, Watch};
use crate::clock::now_ms;
use crate::indexer;
use crate::node::{IndexRequest, Node};

/// Inbound sessions served at once.
const MAX_INBOUND: usize = 32;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Where to listen (`0.0.0.0:7878` by default; `127.0.0.1:0` in tests).
    pub listen: SocketAddr,
    /// A sync round with every peer at least this often.
    pub sync_interval: Duration,
    /// Index at least this often even without file events, while any of
    /// the agents' stores is not watched (the fallback; see `sync::watch`).
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
            listen: SocketAddr::from(([0, 0, 0, 0], super::DEFAULT_PORT)),
            sync_interval: Duration::from_secs(30),
            poll_interval: Duration::from_secs(3),
            backstop_interval: super::watch::BACKSTOP,
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

/// Whether [`DaemonConfig::after_backlog`] is due after a pass that left
/// `deferred` stores for later, `read` bytes having been read by the
/// passes since it was last called.
fn backlog_done(read: u64, deferred: u64) -> bool {
    deferred == 0 && read >= RELEASE_AFTER
}

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
    // `cairn index` asks for a pass by writing this file; it exists before
    // `serve.json` names this daemon, so a request never finds it missing.
    let requests = match super::instance::prepare_pass_requests(&home) {
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
    let searches =
        match crate::search_socket::server::SearchSocket::bind(&home, &node.config().db_path) {
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

    let own_id = node.identity().id().to_string();
    #[cfg(unix)]
    let semantic = node.config().semantic;
    let notes_file = node.config().locations.notes_file.clone();
    let stores = StoreRoots {
        locations: node.config().locations.clone(),
        disabled: node.config().disabled.clone(),
    };
    let local_id = hello.node_id;
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

    let (control, control_rx) = mpsc::unbounded_channel();
    let (link_tx, link_rx) = mpsc::unbounded_channel();
    let ctx = LinkCtx {
        endpoint: Arc::clone(&endpoint),
        node: Arc::clone(&node),
        home: home.clone(),
        hello,
        session: cfg.session.clone(),
        inbound: Arc::new(Semaphore::new(MAX_INBOUND)),
        events: link_tx,
    };
    let mut tasks = tokio::task::JoinSet::new();
    #[cfg(unix)]
    if let Some(socket) = searches {
        if semantic {
            socket.ready_meaning_tier();
        }
        tasks.spawn(socket.serve());
    }
    tasks.spawn(accept_loop(Arc::clone(&endpoint), control.clone()));
    tasks.spawn(index_loop(
        home.clone(),
        Arc::clone(&node),
        cfg.clone(),
        (watch, stores, Arc::clone(&dirty)),
        control.clone(),
    ));
    tasks.spawn(peers_loop(
        home.clone(),
        allowed,
        cfg.peers_check,
        control.clone(),
    ));
    // A paired peer heard on the LAN (its address already in the peer
    // table) is dialed now, whatever its backoff.
    let sightings = Sightings(control.clone());
    tasks.spawn(super::discovery::run(
        home.clone(),
        own_id,
        bound,
        cfg.discovery,
        move |id: &str| {
            if let Ok(peer) = id.parse() {
                sightings.peer_heard(peer);
            }
        },
    ));
    tasks.spawn(network_loop(control.clone()));
    let sched = Scheduler::new(cfg.scheduler(), local_id, new_instance(), Duration::ZERO);
    tasks.spawn(Driver::new(ctx, sched).run(control_rx, link_rx));

    shutdown.await;
    tracing::info!("shutting down");
    tasks.abort_all();
    // Bounded: abort_all makes every task finish promptly.
    while tasks.join_next().await.is_some() {}
    endpoint.close();
    endpoint.wait_idle(Duration::from_secs(2)).await;
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

/// What the daemon's own loops (and LAN discovery) tell the driver.
#[derive(Debug)]
enum Control {
    /// A peer connected to us.
    Accepted(PeerConnection),
    /// This node's own log grew (indexing, or `cairn remember` beside it).
    Changed,
    /// The peer table now reads like this.
    Peers(Vec<Peer>),
    /// A peer was seen at an address (LAN discovery).
    Seen(NodeId, SocketAddr),
    /// A peer was seen at an address already written to the peer table.
    Heard(NodeId),
    /// This machine's interface addresses changed.
    NetworkChanged,
}

/// Where other parts of the daemon report a paired peer seen at an
/// address (LAN discovery): the address is remembered and the peer dialed
/// at once whatever its backoff, even when connected if the address is new
/// (its connection may run over a path that just died).
#[derive(Debug, Clone)]
pub struct Sightings(mpsc::UnboundedSender<Control>);

impl Sightings {
    /// Reports `peer` seen at `addr` (ignored for unknown peers).
    pub fn peer_seen(&self, peer: NodeId, addr: SocketAddr) {
        let _ = self.0.send(Control::Seen(peer, addr));
    }

    /// Reports `peer` seen at new addresses the reporter already wrote to
    /// the peer table.
    pub fn peer_heard(&self, peer: NodeId) {
        let _ = self.0.send(Control::Heard(peer));
    }
}

/// How often the machine's interface addresses are compared.
const NETWORK_POLL: Duration = Duration::from_millis(1500);

/// This machine's interface addresses (loopback left out), or `None` when
/// the OS would not list them.
fn local_addresses() -> Option<BTreeSet<IpAddr>> {
    let list = if_addrs::get_if_addrs().ok()?;
    Some(
        list.into_iter()
            .filter(|i| !i.is_loopback())
            .map(|i| i.ip())
            .collect(),
    )
}

/// Reports [`Control::NetworkChanged`] whenever the machine's interface
/// addresses differ from the last reading (new Wi-Fi, wake from sleep,
/// a VPN up or down): the scheduler then dials its peers at once instead
/// of waiting out a backoff grown while the network was gone.
async fn network_loop(control: mpsc::UnboundedSender<Control>) {
    let mut last = local_addresses();
    let mut tick = tokio::time::interval(NETWORK_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Ends when the driver is gone.
    loop {
        tick.tick().await;
        let Some(now) = local_addresses() else {
            continue;
        };
        if last.as_ref() == Some(&now) {
            continue;
        }
        if last.is_some() {
            tracing::info!(addresses = ?now, "network changed; dialing peers now");
            if control.send(Control::NetworkChanged).is_err() {
                break;
            }
        }
        last = Some(now);
    }
}

async fn accept_loop(endpoint: Arc<Endpoint>, control: mpsc::UnboundedSender<Control>) {
    // Ends when the endpoint closes.
    while let Some(incoming) = endpoint.accept().await {
        match incoming {
            Ok(c) => {
                if control.send(Control::Accepted(c)).is_err() {
                    break;
                }
            }
            Err(e) => tracing::info!(error = %e, "incoming connection refused"),
        }
    }
}

async fn index_loop(
    home: PathBuf,
    node: SharedNode,
    cfg: DaemonConfig,
    (mut watch, stores, dirty): (Watch, StoreRoots, Arc<Notify>),
    control: mpsc::UnboundedSender<Control>,
) {
    // Runs until aborted; each iteration waits for a change or the poll
    // timer. A tick walks the stores only when one is not watched, a root
    // appeared, or the backstop is due (see `sync::watch`). Writes to
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
                if let Err(e) = super::instance::write_last_pass(&home, &pass) {
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
                    let _ = control.send(Control::Changed);
                }
                if rep.deferred > 0 {
                    // More to read: come back at once, with a walk (the
                    // stores left are not named by any event).
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

fn peers_stamp(home: &Path) -> Option<u64> {
    PeerTable::generation(home)
}

/// Follows the peer table: the allow-list takes every change at once, and
/// the driver gets the new table (a pairing just completed here or in a
/// `cairn pair` beside the daemon is dialed at once; an unpaired peer's
/// connections close).
async fn peers_loop(
    home: PathBuf,
    allowed: Arc<RwLock<HashSet<SpkiFingerprint>>>,
    every: Duration,
    control: mpsc::UnboundedSender<Control>,
) {
    let mut stamp = None;
    // Runs until aborted; the first iteration hands over the table as it is.
    loop {
        let now = peers_stamp(&home);
        if now != stamp || stamp.is_none() {
            stamp = now;
            match PeerTable::load(&home) {
                Ok(t) => {
                    if let Ok(mut w) = allowed.write() {
                        *w = t.allowed_fingerprints();
                    }
                    if control.send(Control::Peers(t.peers().to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "peer table unreadable; keeping the old allow-list")
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Most connections kept at once (peers dial each other at most twice
/// each; `cairn sync` runs beside a daemon add short-lived ones).
const MAX_CONNS: usize = 256;

/// Carries out the scheduler's decisions: owns the live connections and
/// the dial and session tasks, turns what they report into scheduler
/// inputs, and wakes the scheduler at its timers.
struct Driver {
    sched: Scheduler,
    origin: Instant,
    ctx: LinkCtx,
    peers: HashMap<NodeId, Peer>,
    conns: HashMap<ConnId, PeerConnection>,
    dials: HashMap<NodeId, tokio::task::AbortHandle>,
    sessions: HashMap<NodeId, tokio::task::AbortHandle>,
    tasks: tokio::task::JoinSet<()>,
}

fn dialable(p: &Peer) -> bool {
    !p.addresses.is_empty() || !p.hosts.is_empty() || p.last_addr.is_some()
}

impl Driver {
    fn new(ctx: LinkCtx, sched: Scheduler) -> Driver {
        Driver {
            sched,
            origin: Instant::now(),
            ctx,
            peers: HashMap::new(),
            conns: HashMap::new(),
            dials: HashMap::new(),
            sessions: HashMap::new(),
            tasks: tokio::task::JoinSet::new(),
        }
    }

    async fn run(
        mut self,
        mut control: mpsc::UnboundedReceiver<Control>,
        mut links: mpsc::UnboundedReceiver<LinkEvent>,
    ) {
        // Runs until aborted; each iteration handles one event.
        loop {
            let wake = self.origin + self.sched.next_wakeup();
            tokio::select! {
                Some(c) = control.recv() => self.on_control(c),
                Some(e) = links.recv() => self.on_link(e),
                _ = tokio::time::sleep_until(wake) => self.feed(Input::Tick),
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => {}
            }
        }
    }

    /// Gives the scheduler one input and carries out what it decides.
    fn feed(&mut self, input: Input) {
        let mut queue = vec![input];
        // Bounded: an action yields at most one follow-up input, and only
        // for a connection or peer that is gone (which then yields none).
        while let Some(input) = queue.pop() {
            let now = self.origin.elapsed();
            for action in self.sched.handle(now, input) {
                queue.extend(self.act(action));
            }
        }
    }

    fn act(&mut self, action: Action) -> Option<Input> {
        match action {
            Action::Dial { peer } => {
                let Some(p) = self.peers.get(&peer).cloned() else {
                    return Some(Input::DialFailed { peer });
                };
                tracing::debug!(peer = %peer, "dialing");
                let h = self.tasks.spawn(links::dial(self.ctx.clone(), p));
                if let Some(old) = self.dials.insert(peer, h) {
                    old.abort();
                }
            }
            Action::StartSession { peer, conn } => {
                let Some(c) = self.conns.get(&conn).cloned() else {
                    return Some(Input::SessionDone {
                        peer,
                        conn,
                        ok: false,
                    });
                };
                let h = self.tasks.spawn(links::session(self.ctx.clone(), c));
                if let Some(old) = self.sessions.insert(peer, h) {
                    old.abort();
                }
            }
            Action::Close { peer, conn } => {
                if let Some(c) = self.conns.get(&conn) {
                    tracing::debug!(peer = %peer, conn, "closing a connection");
                    let reason: &[u8] = if self.peers.contains_key(&peer) {
                        b"duplicate"
                    } else {
                        b"not paired"
                    };
                    c.close(3, reason);
                }
            }
        }
        None
    }

    fn on_control(&mut self, c: Control) {
        match c {
            Control::Accepted(conn) => {
                if self.conns.len() >= MAX_CONNS {
                    tracing::warn!(peer = %conn.peer_id(), "too many connections; dropping one");
                    conn.close(4, b"busy");
                    return;
                }
                tracing::info!(peer = %conn.peer_id(), remote = %conn.remote_address(), "accepted");
                self.connected(conn, false);
            }
            Control::Changed => self.feed(Input::Changed { except: None }),
            Control::Peers(list) => self.set_peers(list),
            Control::Heard(peer) => {
                // Take the table's addresses for it now, not at the next check.
                match PeerTable::load(&self.ctx.home) {
                    Ok(t) => self.set_peers(t.peers().to_vec()),
                    Err(e) => tracing::warn!(error = %e, "peer table unreadable"),
                }
                self.feed(Input::Heard { peer });
            }
            Control::NetworkChanged => self.feed(Input::NetworkChanged),
            Control::Seen(peer, addr) => {
                let Some(p) = self.peers.get_mut(&peer) else {
                    return;
                };
                if p.addresses.first() == Some(&addr) {
                    self.feed(Input::Seen { peer });
                    return;
                }
                p.remember_address(addr);
                let fp = p.fingerprint_bytes();
                let home = self.ctx.home.clone();
                self.tasks.spawn_blocking(move || {
                    let r = PeerTable::modify(&home, |t| {
                        if let Some(p) = fp.and_then(|fp| t.by_fingerprint_mut(&fp)) {
                            p.remember_address(addr);
                        }
                        Ok(())
                    });
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "peer table not updated");
                    }
                });
                self.feed(Input::PeerAdded {
                    peer,
                    dialable: true,
                });
                self.feed(Input::Heard { peer });
            }
        }
    }

    fn connected(&mut self, conn: PeerConnection, dialed: bool) {
        let (peer, id) = (conn.peer_id(), links::conn_id(&conn));
        self.conns.insert(id, conn.clone());
        self.tasks.spawn(links::watch(self.ctx.clone(), conn));
        self.feed(Input::Connected {
            peer,
            conn: id,
            dialed,
        });
    }

    fn on_link(&mut self, e: LinkEvent) {
        match e {
            LinkEvent::Connected { conn, dialed } => {
                self.dials.remove(&conn.peer_id());
                self.connected(conn, dialed);
            }
            LinkEvent::DialFailed { peer, error } => {
                self.dials.remove(&peer);
                tracing::info!(peer = %peer, error = %error, "peer unreachable");
                self.feed(Input::DialFailed { peer });
            }
            LinkEvent::Disconnected { peer, conn, reason } => {
                self.conns.remove(&conn);
                tracing::info!(peer = %peer, reason, "disconnected");
                self.feed(Input::Disconnected { peer, conn });
            }
            LinkEvent::InboundStarted { peer, conn } => {
                self.feed(Input::InboundStarted { peer, conn });
            }
            LinkEvent::InboundDone { peer, conn, result } => {
                let fresh = self.log_session(peer, &result, "session served");
                self.feed(Input::InboundDone { peer, conn });
                if fresh {
                    // Relay what arrived to the other peers.
                    self.feed(Input::Changed { except: Some(peer) });
                }
            }
            LinkEvent::SessionDone { peer, conn, result } => {
                self.sessions.remove(&peer);
                let fresh = self.log_session(peer, &result, "synced");
                let ok = result.is_ok();
                self.feed(Input::SessionDone { peer, conn, ok });
                if fresh {
                    self.feed(Input::Changed { except: Some(peer) });
                }
            }
        }
    }

    /// Logs a finished session; whether it stored anything new.
    fn log_session(
        &self,
        peer: NodeId,
        result: &Result<session::SessionReport, SyncError>,
        what: &str,
    ) -> bool {
        match result {
            Ok(r) => {
                if r.moved_anything() {
                    tracing::info!(peer = %peer, received = r.records_received, stored = r.stored, sent = r.records_sent, "{what}");
                }
                r.stored > 0 || r.tombstones > 0
            }
            Err(e) => {
                tracing::warn!(peer = %peer, blame = ?e.blame(), error = %e, "session failed");
                false
            }
        }
    }

    /// Takes the peer table as it now reads: new peers are dialed, a peer
    /// with a new address is dialed again at once, removed ones dropped.
    fn set_peers(&mut self, list: Vec<Peer>) {
        let mut fresh: HashMap<NodeId, Peer> = HashMap::new();
        for p in list {
            if let Some(id) = p.id() {
                fresh.insert(id, p);
            }
        }
        let gone: Vec<NodeId> = self
            .peers
            .keys()
            .filter(|id| !fresh.contains_key(id))
            .copied()
            .collect();
        for peer in gone {
            self.peers.remove(&peer);
            for h in [self.dials.remove(&peer), self.sessions.remove(&peer)]
                .into_iter()
                .flatten()
            {
                h.abort();
            }
            tracing::info!(peer = %peer, "unpaired");
            self.feed(Input::PeerRemoved { peer });
        }
        for (peer, p) in fresh {
            let moved = match self.peers.get(&peer) {
                None => None,
                Some(old) => Some(old.addresses != p.addresses || old.hosts != p.hosts),
            };
            let can = dialable(&p);
            self.peers.insert(peer, p);
            match moved {
                None => {
                    tracing::info!(peer = %peer, "new peer");
                    self.feed(Input::PeerAdded {
                        peer,
                        dialable: can,
                    });
                }
                Some(true) => {
                    self.feed(Input::PeerAdded {
                        peer,
                        dialable: can,
                    });
                    self.feed(Input::Seen { peer });
                }
                Some(false) => {}
            }
        }
    }
}

/// Where the agents' stores may be, for the watch: the roots that exist
/// are looked for at start and at every poll tick.
struct StoreRoots {
    locations: crate::sources::Locations,
    disabled: Vec<String>,
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
    fn existing(&self) -> Vec<PathBuf> {
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
