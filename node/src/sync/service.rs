//! The sync side of `cairn serve`: the peers a daemon keeps in sync with
//! over long-lived connections.
//!
//! [`SyncService::bind`] binds the sync endpoint (its allow-list is the
//! peer table); [`SyncService::start`] runs, as tasks of the caller's:
//! - **accept**: accepted connections go to the driver;
//! - **peers**: follows the peer table (re-read when it changes, so a
//!   pairing or unpairing takes effect without a restart);
//! - **discovery**: LAN sightings of paired peers ([`Sightings`]);
//! - **network**: interface changes, after which peers are dialed at once;
//! - **driver**: the thin shell around the pure [`Scheduler`]: it feeds
//!   the scheduler what happened (connections up and down, dials failed,
//!   sessions done, new records, the peer table, LAN sightings) and
//!   carries out what it decides (dial a peer, run a session on a
//!   connection, close a duplicate) with the tasks in `links.rs`. One
//!   connection per reachable peer stays up (QUIC keep-alives); new
//!   records start a session on it as a new stream, whichever side
//!   dialed, so a node behind NAT that dialed out still gets pushed to
//!   within a second.
//!
//! The daemon (`crate::daemon`) owns the process around it: it tells the
//! service when this node's own log grew ([`SyncHandle::changed`]). This
//! module never indexes, watches the agents' stores or answers searches.
//!
//! Everything is bounded: sessions by [`SessionConfig`], inbound sessions
//! by a semaphore (and QUIC's stream limit per connection), connections by
//! a cap, retries by the backoff cap. Logs with tracing, never record text.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use cairn_protocol::{NodeId, SpkiFingerprint};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::endpoint::{Endpoint, EndpointError, PeerConnection, Role};
use super::links::{self, LinkCtx, LinkEvent};
use super::peers::{Peer, PeerTable, PeersError};
use super::scheduler::{Action, ConnId, Input, Scheduler, SchedulerConfig};
use super::session::{self, SessionConfig, SharedNode, SyncError, local_hello, new_instance};
use super::tls::AllowList;
use crate::node::Node;

/// Inbound sessions served at once.
const MAX_INBOUND: usize = 32;

/// How the sync service runs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The scheduler's timings.
    pub scheduler: SchedulerConfig,
    /// How often the peer table is checked for changes.
    pub peers_check: Duration,
    /// Time allowed for each dial's handshake.
    pub handshake_timeout: Duration,
    /// Limits of each session.
    pub session: SessionConfig,
    /// Announce this node and find paired peers on the LAN (mDNS).
    pub discovery: bool,
}

/// Failures that stop the service from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The endpoint could not be bound.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The peer table could not be read.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// The node could not describe itself.
    #[error(transparent)]
    Sync(#[from] SyncError),
}

/// A node's sync endpoint, bound and not yet serving.
#[derive(Debug)]
pub struct SyncService {
    endpoint: Arc<Endpoint>,
    /// The peer table's keys: the endpoint's allow-list, kept current by
    /// the peers task.
    allowed: Arc<RwLock<HashSet<SpkiFingerprint>>>,
    hello: cairn_protocol::Hello,
    home: PathBuf,
    own_id: String,
    bound: SocketAddr,
    cfg: ServiceConfig,
}

impl SyncService {
    /// Binds the sync endpoint of `node` on `cfg.listen`, its allow-list
    /// the peer table in the node's home.
    pub fn bind(node: &Node, cfg: ServiceConfig) -> Result<SyncService, ServiceError> {
        let home = node.config().home.clone();
        let hello = local_hello(node, new_instance())?;
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
        Ok(SyncService {
            endpoint,
            allowed,
            hello,
            home,
            own_id: node.identity().id().to_string(),
            bound,
            cfg,
        })
    }

    /// The address the endpoint is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serves `node` (the node [`SyncService::bind`] was given, now
    /// shared) with tasks spawned on `tasks`: accepting, following the
    /// peer table, LAN discovery, network changes and the driver. They run
    /// until aborted. The handle tells the driver what happens beside it.
    pub fn start(&self, node: SharedNode, tasks: &mut tokio::task::JoinSet<()>) -> SyncHandle {
        let (control, control_rx) = mpsc::unbounded_channel();
        let (link_tx, link_rx) = mpsc::unbounded_channel();
        let local_id = self.hello.node_id;
        let ctx = LinkCtx {
            endpoint: Arc::clone(&self.endpoint),
            node,
            home: self.home.clone(),
            hello: self.hello.clone(),
            session: self.cfg.session.clone(),
            inbound: Arc::new(Semaphore::new(MAX_INBOUND)),
            events: link_tx,
        };
        tasks.spawn(accept_loop(Arc::clone(&self.endpoint), control.clone()));
        tasks.spawn(peers_loop(
            self.home.clone(),
            Arc::clone(&self.allowed),
            self.cfg.peers_check,
            control.clone(),
        ));
        // A paired peer heard on the LAN (its address already in the peer
        // table) is dialed now, whatever its backoff.
        let sightings = Sightings(control.clone());
        tasks.spawn(super::discovery::run(
            self.home.clone(),
            self.own_id.clone(),
            self.bound,
            self.cfg.discovery,
            move |id: &str| {
                if let Ok(peer) = id.parse() {
                    sightings.peer_heard(peer);
                }
            },
        ));
        tasks.spawn(network_loop(control.clone()));
        let sched = Scheduler::new(self.cfg.scheduler, local_id, new_instance(), Duration::ZERO);
        tasks.spawn(Driver::new(ctx, sched).run(control_rx, link_rx));
        SyncHandle(control)
    }

    /// Stops accepting, closes the connections and waits (bounded) for
    /// the peers to learn it.
    pub async fn close(&self) {
        self.endpoint.close();
        self.endpoint.wait_idle(Duration::from_secs(2)).await;
    }
}

/// Tells a running [`SyncService`] what happened beside it.
#[derive(Debug, Clone)]
pub struct SyncHandle(mpsc::UnboundedSender<Control>);

impl SyncHandle {
    /// This node's own log grew (an index pass, or `cairn remember` /
    /// `cairn forget` beside the daemon): the peers are pushed to.
    pub fn changed(&self) {
        let _ = self.0.send(Control::Changed);
    }
}

/// What the service's own tasks (and its handle) tell the driver.
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

/// Where other parts of the service report a paired peer seen at an
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
