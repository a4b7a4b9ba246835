//! The daemon's sync scheduling as a pure state machine: what to dial, when
//! to run a session on which connection, when to retry.
//!
//! No sockets, no tokio, no clock: the driver (`daemon.rs`) feeds
//! [`Input`]s with the current time as a [`Duration`] since any fixed
//! origin, carries out the returned [`Action`]s, and calls
//! [`Scheduler::handle`] with [`Input::Tick`] at [`Scheduler::next_wakeup`].
//! Jitter comes from a seeded generator, so a test on a virtual clock sees
//! the same decisions every run.
//!
//! The rules:
//! - every paired peer with somewhere to dial is dialed until one
//!   connection with it is up (from either side); failed dials back off
//!   exponentially from `backoff_min` to `backoff_max`, plus up to 25 %
//!   jitter; a peer seen at a new address is dialed again at once (an
//!   attempt still dialing its old addresses is replaced);
//! - a peer heard at new addresses (LAN discovery) is dialed even while
//!   connected, since its connection may run over a path that just died;
//!   when this machine's own network changes (its interface addresses),
//!   every peer's backoff is reset and every peer is dialed at once, the
//!   connected ones too. Such a re-check dial, once up, replaces (closes)
//!   the connections that were up when it started; if it fails, they stay;
//! - connections stay up; the newest live one is used for our sessions.
//!   When both sides' dials cross, the node with the larger id closes the
//!   one it dialed, so both keep the same one;
//! - the side that dialed runs a session as soon as the connection is up
//!   (that first session pulls both ways);
//! - a change (our indexer stored records, or a session stored records from
//!   some peer) starts a session with every connected peer except the one
//!   the records came from; a peer already in a session (ours or its own,
//!   on any of its connections) gets one "again" flag, so a burst costs at
//!   most one more session per peer;
//! - at most one session of ours per peer is in flight; a failed session is
//!   retried on the same link after a backoff, and one lost with its
//!   connection runs again at once on another live one; a periodic round
//!   runs a session with every connected peer as a safety net;
//! - when the last connection with a peer goes down it is redialed after a
//!   random delay of at most `backoff_min` if it had lasted `stable_after`,
//!   else with the next backoff step (a flapping path, or an older peer
//!   that closes after each session, does not cause a dial storm);
//! - a removed peer is forgotten: its connections are closed and any late
//!   report about it is ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_protocol::NodeId;

/// A connection's id, unique within one daemon run.
pub type ConnId = u64;

/// Timing of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// A safety session with every connected peer at least this often.
    pub round_interval: Duration,
    /// First retry delay after a failure.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// A connection that lasted this long was a success: when it drops,
    /// the peer is redialed at once (after a little jitter). One that
    /// dropped sooner counts as a failed dial, so a flapping path or a
    /// peer that closes every connection backs off.
    pub stable_after: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            round_interval: Duration::from_secs(30),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(120),
            stable_after: Duration::from_secs(10),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A paired peer (new, or its entry changed); `dialable` when it has
    /// any address or host name to dial.
    PeerAdded {
        /// The peer.
        peer: NodeId,
        /// Whether there is anywhere to dial it.
        dialable: bool,
    },
    /// The peer was unpaired.
    PeerRemoved {
        /// The peer.
        peer: NodeId,
    },
    /// The peer was seen at an address (discovery, or its entry gained
    /// one): dial now if it is not connected, whatever the backoff.
    Seen {
        /// The peer.
        peer: NodeId,
    },
    /// The peer was heard at new addresses (LAN discovery): as for
    /// [`Input::Seen`], and if it is connected, dialed anyway (the
    /// connection may run over a dead path); the new connection, once up,
    /// replaces the ones that were up before.
    Heard {
        /// The peer.
        peer: NodeId,
    },
    /// This machine's own network changed (its interface addresses): every
    /// peer's backoff is reset and every peer is dialed at once, connected
    /// ones too (as for [`Input::Heard`]).
    NetworkChanged,
    /// An authenticated connection with the peer is up.
    Connected {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
        /// Whether this node dialed it (else the peer did).
        dialed: bool,
    },
    /// A connection closed (for any reason).
    Disconnected {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
    },
    /// A [`Action::Dial`] failed on every address.
    DialFailed {
        /// The peer.
        peer: NodeId,
    },
    /// The peer opened a session on this connection.
    InboundStarted {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
    },
    /// A session the peer opened ended.
    InboundDone {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
    },
    /// A session started by [`Action::StartSession`] ended.
    SessionDone {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
        /// Whether it completed.
        ok: bool,
    },
    /// New records on this node (indexed here, or stored from `except`).
    Changed {
        /// The peer the records came from: it has them already.
        except: Option<NodeId>,
    },
    /// Time passed.
    Tick,
}

/// What the driver should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Dial the peer at all its addresses; answer with
    /// [`Input::Connected`] (`dialed: true`) or [`Input::DialFailed`].
    /// A dial of a peer whose dial still runs replaces it.
    Dial {
        /// The peer.
        peer: NodeId,
    },
    /// Open a session on this connection; answer with [`Input::SessionDone`].
    StartSession {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
    },
    /// Close this connection (a crossing duplicate, or an unpaired peer).
    Close {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
    },
}

/// A live connection with a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conn {
    id: ConnId,
    dialed: bool,
    since: Duration,
    /// Sessions the peer opened on it that are still running.
    inbound: u32,
}

/// What the scheduler knows about one peer.
#[derive(Debug, Clone, Default)]
struct PeerState {
    dialable: bool,
    dialing: bool,
    dial_failures: u32,
    /// No dial before this time.
    dial_at: Option<Duration>,
    /// Live connections, oldest first.
    conns: Vec<Conn>,
    /// The connection our session runs on, if one does.
    outbound: Option<ConnId>,
    /// Something changed while a session was running: one more after it.
    again: bool,
    /// A re-check dial runs (the peer was connected when it started): the
    /// connections that were up then, closed once it connects.
    recheck: Option<Vec<ConnId>>,
    session_failures: u32,
    /// A failed session is retried at this time.
    session_at: Option<Duration>,
}

impl PeerState {
    fn busy(&self) -> bool {
        self.outbound.is_some() || self.conns.iter().any(|c| c.inbound > 0)
    }

    fn current(&self) -> Option<ConnId> {
        self.conns.last().map(|c| c.id)
    }
}

/// The scheduler. See the module docs for its rules.
#[derive(Debug, Clone)]
pub struct Scheduler {
    cfg: SchedulerConfig,
    local: NodeId,
    rng: u64,
    next_round: Duration,
    peers: BTreeMap<NodeId, PeerState>,
}

/// The delay after `failures` consecutive failures: doubling from `min`,
/// capped at `max`, plus up to 25 % jitter (`jitter_seed` picks where).
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

impl Scheduler {
    /// A scheduler for the node `local`, with jitter seeded by `seed`,
    /// starting at `now` (the first periodic round is one interval away).
    pub fn new(cfg: SchedulerConfig, local: NodeId, seed: u64, now: Duration) -> Scheduler {
        Scheduler {
            cfg,
            local,
            rng: seed,
            next_round: now + cfg.round_interval,
            peers: BTreeMap::new(),
        }
    }

    /// The peers the scheduler knows.
    pub fn peers(&self) -> impl Iterator<Item = &NodeId> {
        self.peers.keys()
    }

    /// Whether `peer` has a live connection.
    pub fn is_connected(&self, peer: &NodeId) -> bool {
        self.peers.get(peer).is_some_and(|p| !p.conns.is_empty())
    }

    /// The connection our sessions with `peer` use.
    pub fn current_conn(&self, peer: &NodeId) -> Option<ConnId> {
        self.peers.get(peer).and_then(PeerState::current)
    }

    /// When the next periodic round is due.
    pub fn next_round(&self) -> Duration {
        self.next_round
    }

    /// When [`Input::Tick`] is next needed (the periodic round at the latest).
    pub fn next_wakeup(&self) -> Duration {
        let mut at = self.next_round;
        for p in self.peers.values() {
            if p.conns.is_empty() && p.dialable && !p.dialing {
                at = at.min(p.dial_at.unwrap_or(Duration::ZERO));
            }
            if !p.conns.is_empty()
                && let Some(t) = p.session_at
            {
                at = at.min(t);
            }
        }
        at
    }

    fn random(&mut self) -> u64 {
        // splitmix64: small, deterministic, good enough for jitter.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn backoff(&mut self, failures: u32) -> Duration {
        let seed = self.random();
        backoff_delay(failures, self.cfg.backoff_min, self.cfg.backoff_max, seed)
    }

    /// Takes one input at time `now` and returns what to do, in order.
    pub fn handle(&mut self, now: Duration, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::PeerAdded { peer, dialable } => {
                let p = self.peers.entry(peer).or_default();
                p.dialable = dialable;
            }
            Input::PeerRemoved { peer } => {
                if let Some(p) = self.peers.remove(&peer) {
                    for c in p.conns {
                        out.push(Action::Close { peer, conn: c.id });
                    }
                }
            }
            Input::Seen { peer } => self.dial_now(peer, false, &mut out),
            Input::Heard { peer } => self.dial_now(peer, true, &mut out),
            Input::NetworkChanged => {
                let ids: Vec<NodeId> = self.peers.keys().copied().collect();
                for peer in ids {
                    self.dial_now(peer, true, &mut out);
                }
            }
            Input::Connected { peer, conn, dialed } => {
                self.connected(now, peer, conn, dialed, &mut out);
            }
            Input::Disconnected { peer, conn } => {
                let Some(p) = self.peers.get(&peer) else {
                    return out;
                };
                let Some(c) = p.conns.iter().find(|c| c.id == conn).copied() else {
                    return out;
                };
                let last = p.conns.len() == 1;
                let stable = now.saturating_sub(c.since) >= self.cfg.stable_after;
                let failures = if stable {
                    0
                } else {
                    p.dial_failures.saturating_add(1)
                };
                let delay = if stable {
                    let jitter_max = self.cfg.backoff_min.as_millis() as u64 + 1;
                    Duration::from_millis(self.random() % jitter_max)
                } else {
                    self.backoff(failures)
                };
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.conns.retain(|c| c.id != conn);
                    if last {
                        // Whoever dials next runs the first session.
                        p.dial_failures = failures;
                        p.dial_at = Some(now + delay);
                        p.session_at = None;
                        p.again = false;
                    }
                }
            }
            Input::DialFailed { peer } => {
                let Some(p) = self.peers.get(&peer) else {
                    return out;
                };
                let connected = !p.conns.is_empty();
                let failures = p.dial_failures.saturating_add(1);
                let delay = if connected {
                    Duration::ZERO
                } else {
                    self.backoff(failures)
                };
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.dialing = false;
                    if !connected {
                        p.dial_failures = failures;
                        p.dial_at = Some(now + delay);
                    }
                }
            }
            Input::InboundStarted { peer, conn } => {
                if let Some(c) = self
                    .peers
                    .get_mut(&peer)
                    .and_then(|p| p.conns.iter_mut().find(|c| c.id == conn))
                {
                    c.inbound = c.inbound.saturating_add(1);
                }
            }
            Input::InboundDone { peer, conn } => {
                if let Some(c) = self
                    .peers
                    .get_mut(&peer)
                    .and_then(|p| p.conns.iter_mut().find(|c| c.id == conn))
                {
                    c.inbound = c.inbound.saturating_sub(1);
                }
            }
            Input::SessionDone { peer, conn, ok } => {
                let Some(p) = self.peers.get(&peer) else {
                    return out;
                };
                if p.outbound != Some(conn) {
                    return out;
                }
                if !p.conns.iter().any(|c| c.id == conn) {
                    // Its connection went down: not the session's fault.
                    // Run it again on another live connection; with none,
                    // whoever dials next runs the first session.
                    if let Some(p) = self.peers.get_mut(&peer) {
                        p.outbound = None;
                        if !p.conns.is_empty() {
                            p.again = true;
                        }
                    }
                    self.fire(now, &mut out);
                    return out;
                }
                let failures = if ok {
                    0
                } else {
                    p.session_failures.saturating_add(1)
                };
                let retry = (!ok).then(|| self.backoff(failures));
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.outbound = None;
                    p.session_failures = failures;
                    if let Some(d) = retry {
                        // The retry covers a pending "again".
                        p.again = false;
                        p.session_at = (!p.conns.is_empty()).then_some(now + d);
                    }
                }
            }
            Input::Changed { except } => {
                for (id, p) in &mut self.peers {
                    if Some(*id) == except || p.conns.is_empty() {
                        continue;
                    }
                    p.again = true;
                }
            }
            Input::Tick => {}
        }
        self.fire(now, &mut out);
        out
    }

    /// Forgets `peer`'s backoff; dials it if it is not connected and a
    /// dial already runs (the running attempt dials the old addresses or
    /// the old network: the driver drops it), or if it is connected and
    /// `recheck` asks for a fresh path. A peer neither connected nor dialing
    /// is dialed by [`Scheduler::fire`] now that nothing holds it back.
    fn dial_now(&mut self, peer: NodeId, recheck: bool, out: &mut Vec<Action>) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.dial_failures = 0;
        p.dial_at = None;
        if !p.dialable {
            return;
        }
        if p.conns.is_empty() {
            if p.dialing {
                out.push(Action::Dial { peer });
            }
        } else if recheck {
            p.recheck = Some(p.conns.iter().map(|c| c.id).collect());
            p.dialing = true;
            out.push(Action::Dial { peer });
        }
    }

    fn connected(
        &mut self,
        now: Duration,
        peer: NodeId,
        conn: ConnId,
        dialed: bool,
        out: &mut Vec<Action>,
    ) {
        let local = self.local;
        let Some(p) = self.peers.get_mut(&peer) else {
            // Not (or no longer) paired.
            out.push(Action::Close { peer, conn });
            return;
        };
        let recheck = if dialed { p.recheck.take() } else { None };
        if dialed {
            p.dialing = false;
        }
        if p.conns.iter().any(|c| c.id == conn) {
            return;
        }
        // A re-check dial got through: the connections up before it are
        // forgotten and closed (their sessions rerun on this one).
        let stale = recheck.unwrap_or_default();
        for c in p.conns.iter().filter(|c| stale.contains(&c.id)) {
            out.push(Action::Close { peer, conn: c.id });
        }
        p.conns.retain(|c| !stale.contains(&c.id));
        // Crossing dials: the larger id gives up the one it dialed.
        if dialed && local > peer && p.conns.iter().any(|c| !c.dialed) {
            out.push(Action::Close { peer, conn });
            return;
        }
        p.conns.push(Conn {
            id: conn,
            dialed,
            since: now,
            inbound: 0,
        });
        // The failure count stays until the connection proves stable.
        p.dial_at = None;
        if dialed {
            // Our first session over it pulls both ways.
            p.again = true;
        }
    }

    /// Starts what is due: sessions flagged "again" on idle peers, retries
    /// and the periodic round, dials.
    fn fire(&mut self, now: Duration, out: &mut Vec<Action>) {
        let round = now >= self.next_round;
        if round {
            self.next_round = now + self.cfg.round_interval;
        }
        for (id, p) in &mut self.peers {
            match p.current() {
                Some(conn) => {
                    if round {
                        p.again = true;
                    }
                    if p.session_at.is_some_and(|t| t <= now) {
                        p.session_at = None;
                        p.again = true;
                    }
                    if p.again && !p.busy() && p.session_at.is_none() {
                        p.again = false;
                        p.outbound = Some(conn);
                        out.push(Action::StartSession { peer: *id, conn });
                    }
                }
                None => {
                    let due = p.dial_at.is_none_or(|t| t <= now);
                    if p.dialable && !p.dialing && due {
                        p.dialing = true;
                        p.dial_at = None;
                        out.push(Action::Dial { peer: *id });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
