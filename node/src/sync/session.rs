//! One sync session over an authenticated connection, for both roles: the
//! driver of the conversation state machine.
//!
//! The conversation's rules after the `Hello` exchange (docs/wire-format.md)
//! live in `cairn_protocol::conversation`, pure and tested on a virtual
//! clock: exchange `Watermarks`, plan and send pulls, serve the peer's
//! pulls, apply the batches answering ours (the next pull of a `more` batch
//! goes out first), re-plan stale pulls, `Bye` when nothing is left, end
//! when both said it, within the message and time bounds. This module is
//! the I/O around it ([`run_session`]): it reads frames, feeds them to the
//! [`Conversation`] with the time since the session started, and performs
//! its actions: sends frames, serves pulls (`Node::serve_pull`, with the
//! scope the peer table gives that peer) and applies batches
//! (`Node::apply_pulled`, one transaction each, watermark included, then
//! the fresh watermarks go back to the machine) on the blocking pool, and
//! arms the one timer. How the machine ended maps onto [`SyncError`] with
//! the same blame as before the split.
//!
//! A batch's records are prepared (redacted again, encoded) on the
//! blocking pool as soon as the reader has it, while the node stores the
//! batch before ([`store::Preparer`]), when the node stores batches without
//! vectors (a large catch-up, or no meaning tier).
//!
//! Incoming frames are read by a small task into a bounded queue, so a side
//! busy writing a batch never stops draining the peer (no write-write
//! deadlock under QUIC flow control); an honest peer never has more than a
//! handful of messages in flight, a hostile one only fills the queue and
//! then runs into the per-message timeout.
//!
//! Also: one session with a paired peer dialed at the addresses
//! `sync::dial` picks ([`sync_with`], [`sync_peer`]), answering an accepted
//! connection ([`serve_connection`]) and noting the outcome in the peer
//! table. Failures are [`SyncError`] (`sync::error`). Never logs record text.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cairn_protocol::{
    Action, ApplyResult, Conversation, ConversationConfig, ConversationError, Event, Hello,
    MAX_WATERMARKS, Message, NodeId, OriginName, PlanLimits, SpkiFingerprint, total_behind,
};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::clean_name;
use super::dial;
// Dialing and the error type live beside this module; these paths stay for callers.
pub use super::dial::{dial_candidates, dial_targets, probe, resolve_hosts};
use super::endpoint::{
    Endpoint, PeerConnection, RECV_TIMEOUT, Session, SessionError, open_session, recv_msg, send_msg,
};
pub use super::error::SyncError;
use super::peers::{Peer, PeerTable};
use super::quota::{DayUsage, Quota};
pub use crate::clock::now_ms;
use crate::node::{CatchUpHolder, Node, NodeError};
use crate::store::{self, ApplyError, ApplyReport};

/// A node shared between sessions (and the daemon's indexer).
pub type SharedNode = Arc<Mutex<Node>>;

/// Messages read ahead of the session loop. An honest peer has at most its
/// pulls (≤ `max_pulls`), the batches answering ours (≤ `max_pulls`) and a
/// `Bye` in flight.
const READ_AHEAD: usize = 6;
/// How long the end of a session waits for the peer to acknowledge our last bytes.
const FINISH_LINGER: Duration = Duration::from_secs(2);
/// Meta key prefix for "entries the peer held that we lacked" after the last session.
const BEHIND_META: &str = "sync.behind.";

/// Limits of one session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Pull sizes and how many pulls may be in flight.
    pub limits: PlanLimits,
    /// Time allowed for each expected message (and each write).
    pub msg_timeout: Duration,
    /// Time allowed for the whole session.
    pub max_duration: Duration,
    /// Most messages (sent plus received) in one session.
    pub max_messages: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            limits: PlanLimits::default(),
            msg_timeout: RECV_TIMEOUT,
            max_duration: Duration::from_secs(30 * 60),
            max_messages: 1_000_000,
        }
    }
}

impl SessionConfig {
    /// The bounds handed to the conversation state machine.
    fn conversation(&self) -> ConversationConfig {
        ConversationConfig {
            limits: self.limits,
            msg_timeout: self.msg_timeout,
            max_duration: self.max_duration,
            max_messages: self.max_messages,
        }
    }
}

/// What one session moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionReport {
    /// The peer's node id.
    pub peer_id: String,
    /// The peer's name, as it announced it.
    pub peer_name: String,
    /// Batches received and applied.
    pub batches_received: u64,
    /// Records received (whether new or not).
    pub records_received: u64,
    /// Records stored that this node did not have.
    pub stored: u64,
    /// Records received that were already stored (a second provenance).
    pub duplicates: u64,
    /// Records refused because a tombstone covers them.
    pub refused: u64,
    /// Tombstones received and stored.
    pub tombstones: u64,
    /// Records deleted by those tombstones.
    pub purged: u64,
    /// Received forgets covering records here that their issuer does not
    /// own: those stay until their owner forgets them too.
    pub forgets_deferred: u64,
    /// Log slots received as stubs.
    pub stubs: u64,
    /// Batches sent answering the peer's pulls.
    pub batches_sent: u64,
    /// Records sent in them.
    pub records_sent: u64,
    /// Entries the peer held that this node lacked at the watermark exchange.
    pub behind_before: u64,
    /// Entries this node still lacks from what the peer announced, at the end.
    pub behind_after: u64,
    /// Entries this node held that the peer lacked at the exchange.
    pub peer_behind: u64,
    /// Batches refused because their origin did not check out (forged,
    /// altered, unsigned, or claiming this node's own log); nothing of
    /// them was stored.
    pub batches_refused: u64,
    /// Tombstones in those batches (a forged forget is refused with them).
    pub tombstones_refused: u64,
    /// Logs of this node's own origin the peer claimed to hold more of
    /// than this node wrote (another epoch, or past its end): never pulled.
    pub own_origin_claims: u64,
    /// Logs the peer offered of origins the user refused (`cairn peers
    /// --refuse-origin`): never pulled.
    #[serde(skip_serializing_if = "is_zero")]
    pub refused_origin_logs: u64,
    /// The per-peer limit that stopped this session taking more, if one
    /// did (the rest waits for a later session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
    /// Why entries were refused, one line per refusal (at most a few).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Most refusal reasons one report keeps.
const MAX_REFUSALS: usize = 8;

impl SessionReport {
    fn add(&mut self, r: &ApplyReport, records: u64) {
        self.batches_received += 1;
        self.records_received += records;
        self.stored += r.stored;
        self.duplicates += r.duplicates;
        self.refused += r.refused;
        self.tombstones += r.tombstones;
        self.purged += r.purged;
        self.forgets_deferred += r.forgets_deferred;
        self.stubs += r.stubs;
    }

    /// Notes a refusal's reason (the first few are kept).
    fn refuse(&mut self, reason: String) {
        if self.refusals.len() < MAX_REFUSALS && !self.refusals.contains(&reason) {
            self.refusals.push(reason);
        }
    }

    /// Whether anything arrived or left.
    pub fn moved_anything(&self) -> bool {
        self.batches_received > 0 || self.batches_sent > 0
    }
}

/// Runs `f` on the node on the blocking pool.
pub async fn with_node<T: Send + 'static>(
    node: &SharedNode,
    f: impl FnOnce(&mut Node) -> T + Send + 'static,
) -> Result<T, SyncError> {
    let node = Arc::clone(node);
    tokio::task::spawn_blocking(move || {
        let mut guard = node.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    })
    .await
    .map_err(|_| SyncError::Task)
}

/// The `Hello` this node sends: its id, name, software and `instance`
/// (random per process start).
pub fn local_hello(node: &Node, instance: u64) -> Result<Hello, SyncError> {
    let id = node.identity().id();
    Ok(Hello::current(
        id,
        &node.config().node_name,
        concat!("cairn ", env!("CARGO_PKG_VERSION")),
        instance,
    ))
}

/// A random instance id for this process.
pub fn new_instance() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // Only used to tell restarts apart; the clock will do.
        return now_ms() as u64;
    }
    u64::from_le_bytes(b)
}

/// Reads frames into a bounded queue until the stream ends or fails.
struct Reader {
    rx: mpsc::Receiver<Result<Message, SessionError>>,
    task: tokio::task::JoinHandle<()>,
    ahead: Ahead,
}

/// Where batches are prepared ahead of their apply: while the node
/// stores one batch, the records of the next, already read, are redacted
/// again and encoded on the blocking pool (`Node::batch_preparer`), so
/// the thread holding the write transaction only runs SQL.
#[derive(Clone)]
struct Ahead {
    /// Replaced when the database gains its text dictionary during the
    /// session (an indexing pass trains one from the records received):
    /// batches prepared without it would be prepared again by the apply.
    preparer: Arc<Mutex<store::Preparer>>,
    /// Whether the node uses prepared batches now (see
    /// `Node::uses_prepared_batches`), as of its last apply.
    used: Arc<std::sync::atomic::AtomicBool>,
    /// Preparations under way, by the batch's log and first seq.
    jobs: Arc<Mutex<AheadJobs>>,
}

type AheadJobs =
    std::collections::HashMap<(NodeId, u64, u64), tokio::task::JoinHandle<store::PreparedBatch>>;

impl Ahead {
    /// Starts preparing `batch` if prepared batches are used.
    fn start(&self, batch: &cairn_protocol::Batch) {
        if batch.records.is_empty() || !self.used.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let p = (self.preparer.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let b = batch.clone();
        let job = tokio::task::spawn_blocking(move || p.prepare(b));
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        // Batches never applied (refused, unasked) leave theirs: a few
        // at most, dropped once more are under way than can be in flight.
        if jobs.len() >= READ_AHEAD {
            jobs.clear();
        }
        jobs.insert((batch.origin, batch.epoch, batch.after_seq), job);
    }

    /// The preparation of `batch`, once done, if one was started.
    async fn take(&self, batch: &cairn_protocol::Batch) -> Option<store::PreparedBatch> {
        let job = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(batch.origin, batch.epoch, batch.after_seq))?;
        job.await.ok()
    }
}

/// Gives the session's `preparer` the database's text dictionary once it
/// has one (written once, never replaced: only its arrival matters).
fn refresh_preparer(n: &Node, preparer: &Mutex<store::Preparer>) {
    let mut p = preparer.lock().unwrap_or_else(PoisonError::into_inner);
    if !p.has_dict() {
        let fresh = n.batch_preparer();
        if fresh.has_dict() {
            *p = fresh;
        }
    }
}

impl Reader {
    fn spawn(
        mut recv: quinn::RecvStream,
        mut decoder: cairn_protocol::FrameDecoder,
        idle: Duration,
        ahead: Ahead,
    ) -> Reader {
        let (tx, rx) = mpsc::channel(READ_AHEAD);
        let prepare = ahead.clone();
        let task = tokio::spawn(async move {
            // Bounded: every iteration reads one message or ends the task,
            // and each read is bounded in time.
            loop {
                let r = recv_msg(&mut recv, &mut decoder, idle).await;
                if let Ok(Message::Batch(b)) = &r {
                    prepare.start(b);
                }
                let stop = r.is_err();
                if tx.send(r).await.is_err() || stop {
                    break;
                }
            }
        });
        Reader { rx, task, ahead }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn send(
    stream: &mut quinn::SendStream,
    msg: &Message,
    timeout: Duration,
) -> Result<(), SessionError> {
    match tokio::time::timeout(timeout, send_msg(stream, msg)).await {
        Err(_) => Err(SessionError::Timeout { after: timeout }),
        Ok(r) => r,
    }
}

/// Opens the session stream on `conn` (as dialer or listener), exchanges
/// Hello, then runs the session to its end.
pub async fn run_session(
    conn: &PeerConnection,
    dialer: bool,
    node: &SharedNode,
    hello: &Hello,
    scope: Option<Vec<String>>,
    cfg: &SessionConfig,
) -> Result<SessionReport, SyncError> {
    let session = open_session(conn, dialer, hello, cfg.msg_timeout).await?;
    run_opened(session, conn.peer_id(), node, scope, cfg).await
}

/// Runs a session on a stream already opened (or accepted) with the
/// `Hello` exchange done, e.g. one of many streams of a long-lived
/// connection, to its end.
pub async fn run_opened(
    session: Session,
    peer: NodeId,
    node: &SharedNode,
    scope: Option<Vec<String>>,
    cfg: &SessionConfig,
) -> Result<SessionReport, SyncError> {
    let start = Instant::now();
    // This session's part in a large catch-up, which other sessions may
    // share (`Node::apply_pulled`).
    let holder = CatchUpHolder::new();
    // The conversation ends itself at `max_duration`; this also bounds the
    // database work it waits on.
    let result = match tokio::time::timeout_at(
        start + cfg.max_duration,
        drive(session, peer, node, scope, cfg, start, &holder),
    )
    .await
    {
        Err(_) => Err(too_long(peer, cfg)),
        Ok(r) => r,
    };
    // What this session's part of a large catch-up left (a deferred index
    // if it was cut short, the vectors of its records), in steps between
    // which other users of the node get in; the peer no longer waits for
    // any of it.
    loop {
        let h = holder.clone();
        if !matches!(
            with_node(node, move |n| n.finish_catch_up(&h)).await,
            Ok(true)
        ) {
            break;
        }
    }
    result
}

fn too_long(peer: NodeId, cfg: &SessionConfig) -> SyncError {
    SyncError::TooLong {
        peer,
        messages: cfg.max_messages,
        after: cfg.max_duration,
    }
}

/// Drives one [`Conversation`]: performs its actions against the stream
/// and the node, feeds it what happened, times measured from `start`.
async fn drive(
    session: Session,
    peer: NodeId,
    node: &SharedNode,
    scope: Option<Vec<String>>,
    cfg: &SessionConfig,
    start: Instant,
    holder: &CatchUpHolder,
) -> Result<SessionReport, SyncError> {
    let Session {
        send: mut out,
        recv,
        decoder,
        peer_hello,
        ..
    } = session;
    let peer_name = clean_name(&peer_hello.node_name);
    let mut report = SessionReport {
        peer_id: peer.to_string(),
        peer_name: peer_name.clone(),
        ..SessionReport::default()
    };
    // Hits from this peer's own log name it by its announced name.
    let (pid, pname) = (peer.to_string(), peer_name);
    with_node(node, move |n| n.store().upsert_node(&pid, &pname))
        .await?
        .map_err(NodeError::from)?;

    let mut local = with_node(node, |n| n.watermarks()).await??;
    if local.len() > MAX_WATERMARKS {
        tracing::warn!(
            logs = local.len(),
            "more origin logs than one message carries; sending the first {MAX_WATERMARKS}"
        );
        local.truncate(MAX_WATERMARKS);
    }
    let ids: Vec<String> = local.iter().map(|w| w.origin.to_string()).collect();
    let names = with_node(node, move |n| n.store().node_names(&ids))
        .await?
        .map_err(NodeError::from)?
        .into_iter()
        .filter_map(|(id, name)| {
            Some(OriginName {
                origin: id.parse().ok()?,
                name,
            })
        })
        .collect();
    let own = with_node(node, |n| n.identity().id()).await?;
    let refused = with_node(node, |n| n.store().refused_origins())
        .await?
        .map_err(NodeError::from)?;
    let usage_key = format!("{USAGE_META}{peer}");
    let (limits, day, db_dir) = {
        let key = usage_key.clone();
        with_node(node, move |n| {
            let day = n.store().meta(&key).ok().flatten();
            let dir = n.config().db_path.parent().map(Path::to_path_buf);
            (n.config().sync_limits, day, dir)
        })
        .await?
    };
    let day = day.map(|d| DayUsage::from_text(&d)).unwrap_or_default();
    let mut quota = Quota::new(limits, day, now_ms());
    let own_wm = local.iter().find(|w| w.origin == own).copied();
    let mut conv = Conversation::new(cfg.conversation(), peer, start.elapsed(), local, names);
    if let Some(hit) = quota.day_spent() {
        // Nothing would be taken: do not ask (the peer is still served).
        tracing::info!(peer = %peer, limit = %hit, "not pulling from this peer today");
        report.limited = Some(hit.to_string());
        conv.stop_pulling(start.elapsed());
    }
    let ahead = with_node(node, |n| Ahead {
        preparer: Arc::new(Mutex::new(n.batch_preparer())),
        used: Arc::new(std::sync::atomic::AtomicBool::new(
            n.uses_prepared_batches(),
        )),
        jobs: Arc::default(),
    })
    .await?;
    let mut reader = Reader::spawn(recv, decoder, cfg.msg_timeout.saturating_mul(2), ahead);
    let mut timer = start + cfg.max_duration;
    let outcome = loop {
        let mut done = None;
        while let Some(action) = conv.poll_action() {
            match action {
                Action::Send(msg) => send(&mut out, &msg, cfg.msg_timeout).await?,
                Action::NoteNames(names) => {
                    let named: Vec<(String, String)> = names
                        .into_iter()
                        .map(|n| (n.origin.to_string(), clean_name(&n.name)))
                        .collect();
                    with_node(node, move |n| {
                        named
                            .iter()
                            .try_for_each(|(id, name)| n.store().name_node_if_unknown(id, name))
                    })
                    .await?
                    .map_err(NodeError::from)?;
                }
                Action::Serve(pull) => {
                    let sc = scope.clone();
                    let batch =
                        with_node(node, move |n| n.serve_pull(&pull, sc.as_deref())).await??;
                    report.batches_sent += 1;
                    report.records_sent += batch.records.len() as u64;
                    conv.handle(start.elapsed(), Event::Served(batch));
                }
                Action::Apply { pull, batch } => {
                    let records = batch.records.len() as u64;
                    let tombstones = batch.tombstones.len() as u64;
                    let entries = records + tombstones + batch.stubs.len() as u64;
                    let free = db_dir.as_deref().and_then(free_bytes);
                    if let Err(hit) = quota.admit(now_ms(), entries, batch_bytes(&batch), free) {
                        if report.limited.is_none() {
                            tracing::warn!(peer = %peer, limit = %hit, "stopped taking entries from this peer");
                            report.limited = Some(hit.to_string());
                        }
                        let local = with_node(node, |n| n.watermarks()).await??;
                        conv.handle(
                            start.elapsed(),
                            Event::Applied {
                                result: ApplyResult::Halt,
                                local,
                            },
                        );
                        continue;
                    }
                    let (key, day) = (usage_key.clone(), quota.day().to_text());
                    // What the peer holds past this batch: a large
                    // catch-up takes the bulk path.
                    let coming = conv
                        .remote()
                        .and_then(|r| {
                            r.iter()
                                .find(|w| w.origin == batch.origin && w.epoch == batch.epoch)
                        })
                        .map_or(0, |w| w.seq.saturating_sub(batch.last_seq));
                    let holder = holder.clone();
                    let prepared = reader.ahead.take(&batch).await;
                    let used = Arc::clone(&reader.ahead.used);
                    let preparer = Arc::clone(&reader.ahead.preparer);
                    let (applied, local) = with_node(node, move |n| {
                        let applied =
                            n.apply_pulled(&pull, &batch, Some(&peer), coming, &holder, prepared);
                        used.store(
                            n.uses_prepared_batches(),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        refresh_preparer(n, &preparer);
                        // What this peer sent today counts whatever became of it.
                        if let Err(e) = n.store().set_meta(&key, &day) {
                            tracing::warn!(error = %e, "could not note the peer's usage");
                        }
                        let local = applied.is_ok().then(|| n.watermarks());
                        (applied, local)
                    })
                    .await?;
                    let result = match applied {
                        Ok(r) => {
                            report.add(&r, records);
                            ApplyResult::Applied
                        }
                        Err(ApplyError::Stale { .. }) => ApplyResult::Stale,
                        // A batch that does not check out (forged, altered,
                        // unsigned, a foreign tombstone): nothing of it is
                        // stored, its log is not pulled again this session,
                        // the rest of the session goes on.
                        Err(e @ (ApplyError::Refused(_) | ApplyError::Peer(_))) => {
                            let reason = format!("{:#}", anyhow_like(&e));
                            tracing::warn!(peer = %peer, error = %reason, "refused a batch; nothing of it stored");
                            report.batches_refused += 1;
                            report.tombstones_refused += tombstones;
                            report.refuse(reason);
                            ApplyResult::Refused
                        }
                        Err(source) => {
                            let failed = Event::Applied {
                                result: ApplyResult::Failed,
                                local: Vec::new(),
                            };
                            conv.handle(start.elapsed(), failed);
                            return Err(SyncError::Apply { peer, source });
                        }
                    };
                    let local = match local {
                        Some(l) => l?,
                        None => with_node(node, |n| n.watermarks()).await??,
                    };
                    conv.handle(start.elapsed(), Event::Applied { result, local });
                }
                Action::ArmTimer { at } => timer = start + at,
                Action::Done(r) => done = Some(r),
            }
        }
        if let Some(r) = done {
            break r;
        }
        let event = tokio::select! {
            m = reader.rx.recv() => match m {
                Some(Ok(msg)) => Event::Received(strip_own(msg, own, own_wm, &refused, &mut report)),
                Some(Err(SessionError::Closed)) | None => Event::Closed,
                Some(Err(e)) => return Err(e.into()),
            },
            () = tokio::time::sleep_until(timer) => Event::Timer,
        };
        conv.handle(start.elapsed(), event);
    };
    let finished = outcome.map_err(|e| conversation_error(peer, cfg, e))?;
    report.behind_before = finished.behind_before;
    report.peer_behind = finished.peer_behind;
    drop(reader);
    if out.finish().is_ok() {
        let _ = tokio::time::timeout(FINISH_LINGER, out.stopped()).await;
    }
    let end = with_node(node, |n| n.watermarks()).await??;
    report.behind_after = total_behind(&end, conv.remote().unwrap_or_default());
    tracing::debug!(
        peer = %peer,
        received = report.records_received,
        stored = report.stored,
        sent = report.records_sent,
        "sync session done"
    );
    Ok(report)
}

/// Meta key prefix for what a peer sent in the current rolling day.
const USAGE_META: &str = "sync.usage.";

/// About how many bytes a batch's entries take once stored (their text
/// fields; ids and hashes as a fixed 64 bytes each).
fn batch_bytes(b: &cairn_protocol::Batch) -> u64 {
    let records: usize = b
        .records
        .iter()
        .map(|r| {
            64 + r.agent.len()
                + r.session_id.len()
                + r.parent_session.as_ref().map_or(0, String::len)
                + r.project.as_ref().map_or(0, String::len)
                + r.role.len()
                + r.text.len()
                + r.files.iter().map(String::len).sum::<usize>()
        })
        .sum();
    (records + 64 * (b.tombstones.len() + b.stubs.len())) as u64
}

/// Free bytes for an unprivileged writer on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// An error and its sources on one line (`a: b: c`).
fn anyhow_like(e: &dyn std::error::Error) -> impl std::fmt::Display + '_ {
    struct Chain<'a>(&'a dyn std::error::Error);
    impl std::fmt::Display for Chain<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.0)?;
            let mut src = self.0.source();
            while let Some(s) = src {
                write!(f, ": {s}")?;
                src = s.source();
            }
            Ok(())
        }
    }
    Chain(e)
}

/// A peer's `Watermarks` without claims on this node's own log beyond
/// what this node wrote: only this node writes its log, so another epoch
/// of it, or seqs past its end, are never pulled (counted and logged).
/// Logs of origins the user refused are left out too (counted).
fn strip_own(
    msg: Message,
    own: NodeId,
    own_wm: Option<cairn_protocol::Watermark>,
    refused: &[NodeId],
    report: &mut SessionReport,
) -> Message {
    match msg {
        Message::Watermarks { mut entries, names } => {
            let before = entries.len();
            entries.retain(|w| !refused.contains(&w.origin));
            report.refused_origin_logs += (before - entries.len()) as u64;
            let before = entries.len();
            entries.retain(|w| {
                w.origin != own || own_wm.is_some_and(|o| o.epoch == w.epoch && w.seq <= o.seq)
            });
            let claims = (before - entries.len()) as u64;
            if claims > 0 {
                tracing::warn!(
                    logs = claims,
                    "the peer claims entries of this node's own log that this node never wrote; not pulled"
                );
                report.own_origin_claims += claims;
                report.refuse(format!(
                    "the peer claims {claims} log(s) of this node's own origin that this node never wrote; refused"
                ));
            }
            Message::Watermarks { entries, names }
        }
        other => other,
    }
}

/// The session error for how a conversation ended.
fn conversation_error(peer: NodeId, cfg: &SessionConfig, e: ConversationError) -> SyncError {
    match e {
        ConversationError::Unexpected { expected, got } => SyncError::Unexpected {
            peer,
            expected,
            got,
        },
        ConversationError::UnaskedBatch { origin, after_seq } => SyncError::UnaskedBatch {
            peer,
            origin,
            after_seq,
        },
        ConversationError::BadBatch(e) => SyncError::Apply {
            peer,
            source: ApplyError::Peer(e),
        },
        ConversationError::Refused { code, reason } => {
            SessionError::Refused { code, reason }.into()
        }
        ConversationError::Closed => SessionError::Closed.into(),
        ConversationError::Timeout { after } => SessionError::Timeout { after }.into(),
        ConversationError::TooLong { .. } => too_long(peer, cfg),
        // Not reached: the driver returns the apply error itself.
        ConversationError::ApplyFailed => SyncError::Task,
    }
}

/// Dials `peer` from `endpoint` at all its known addresses at once (the
/// first that answers with the pinned key wins) and runs one session as the dialer; closes the
/// connection afterwards. Returns the report and the address that answered.
pub async fn sync_with(
    endpoint: &Endpoint,
    node: &SharedNode,
    peer: &Peer,
    hello: &Hello,
    cfg: &SessionConfig,
) -> Result<(SessionReport, SocketAddr), SyncError> {
    let (conn, addr) = dial::connect(endpoint, peer).await?;
    let r = run_session(&conn, true, node, hello, peer.scope.clone(), cfg).await;
    conn.close(0, b"done");
    match r {
        Ok(rep) => Ok((rep, addr)),
        // Our key was refused just after the handshake.
        Err(SyncError::Session(e)) if e.is_refusal() => Err(SyncError::Refused {
            name: peer.name.clone(),
            addr,
            stranger: false,
            source: Box::new(e),
        }),
        Err(e) => Err(e),
    }
}

/// Dials `peer` ([`sync_with`]), runs one session and notes the outcome
/// in the peer table (the address that answered moves to the front).
pub async fn sync_peer(
    endpoint: &Endpoint,
    node: &SharedNode,
    home: &Path,
    peer: &Peer,
    hello: &Hello,
    cfg: &SessionConfig,
) -> Result<SessionReport, SyncError> {
    let (report, addr) = sync_with(endpoint, node, peer, hello, cfg).await?;
    let fp = peer.fingerprint_bytes().ok_or_else(|| SyncError::BadPeer {
        name: peer.name.clone(),
    })?;
    PeerTable::modify(home, |t| {
        if let Some(p) = t.by_fingerprint_mut(&fp) {
            p.remember_address(addr);
            p.last_seen_ms = Some(now_ms());
        }
        Ok(())
    })?;
    record_outcome(node, home, &fp, &report).await?;
    Ok(report)
}

/// Answers an accepted sync connection: runs the session as the listener
/// with the scope the peer table gives this peer, then notes it in the
/// peer table. The caller has checked the key against the allow-list.
pub async fn serve_connection(
    conn: PeerConnection,
    node: &SharedNode,
    home: &Path,
    hello: &Hello,
    cfg: &SessionConfig,
) -> Result<SessionReport, SyncError> {
    let fp = conn.fingerprint();
    let remote = conn.remote_address();
    let scope = {
        let table = PeerTable::load(home)?;
        table.by_fingerprint(&fp).and_then(|p| p.scope.clone())
    };
    note_seen(home, &fp, remote)?;
    let result = run_session(&conn, false, node, hello, scope, cfg).await;
    if let Ok(report) = &result {
        record_outcome(node, home, &fp, report).await?;
    }
    // The dialer closes; give it a moment, then close our side too.
    let _ = tokio::time::timeout(FINISH_LINGER, conn.quinn().closed()).await;
    conn.close(0, b"done");
    result
}

/// Notes an authenticated connection from `fp` at `addr`.
pub fn note_seen(home: &Path, fp: &SpkiFingerprint, addr: SocketAddr) -> Result<(), SyncError> {
    PeerTable::modify(home, |t| {
        t.record_seen(fp, addr, now_ms());
        Ok(())
    })?;
    Ok(())
}

/// Notes a finished session: last sync, records received, and how far
/// behind this node still is (read back by [`behind`]).
pub async fn record_outcome(
    node: &SharedNode,
    home: &Path,
    fp: &SpkiFingerprint,
    report: &SessionReport,
) -> Result<(), SyncError> {
    PeerTable::modify(home, |t| {
        t.record_sync(fp, report.records_received, now_ms());
        Ok(())
    })?;
    let key = format!("{BEHIND_META}{}", report.peer_id);
    let value = report.behind_after.to_string();
    let trust_key = format!("{TRUST_META}{}", report.peer_id);
    let session = report.clone();
    with_node(node, move |n| {
        n.store().set_meta(&key, &value)?;
        let mut note = n
            .store()
            .meta(&trust_key)?
            .and_then(|t| serde_json::from_str::<TrustNote>(&t).ok())
            .unwrap_or_default();
        note.add(&session);
        let text = serde_json::to_string(&note).unwrap_or_default();
        n.store().set_meta(&trust_key, &text)
    })
    .await?
    .map_err(NodeError::from)?;
    Ok(())
}

/// Meta key prefix for what was refused from a peer ([`TrustNote`]).
const TRUST_META: &str = "sync.trust.";

/// What this node refused from one peer, over all sessions, and what
/// limited the last session; shown by `cairn peers`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TrustNote {
    /// Batches refused (forged, altered, unsigned, foreign forgets).
    pub batches_refused: u64,
    /// Forgets (tombstones) refused with them.
    pub tombstones_refused: u64,
    /// Claims on this node's own log ignored.
    pub own_origin_claims: u64,
    /// The last reason a batch was refused.
    pub last_refusal: Option<String>,
    /// The limit that stopped the last session, if one did.
    pub limited: Option<String>,
}

impl TrustNote {
    fn add(&mut self, r: &SessionReport) {
        self.batches_refused += r.batches_refused;
        self.tombstones_refused += r.tombstones_refused;
        self.own_origin_claims += r.own_origin_claims;
        if let Some(last) = r.refusals.last() {
            self.last_refusal = Some(last.clone());
        }
        self.limited.clone_from(&r.limited);
    }
}

/// What this node refused from the peer with this node id (`None` before
/// the first session).
pub fn trust_note(store: &store::Store, peer_id: &str) -> Option<TrustNote> {
    store
        .meta(&format!("{TRUST_META}{peer_id}"))
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
}

/// Entries the peer with this node id held that this node lacked after
/// the last session with it (`None` before the first).
pub fn behind(store: &store::Store, peer_id: &str) -> Option<u64> {
    store
        .meta(&format!("{BEHIND_META}{peer_id}"))
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
