//! The daemon's long-lived connections with its peers: dialing one,
//! serving the sessions a peer opens on one, and running a session of ours
//! on one.
//!
//! Each is a task that reports what happened as a [`LinkEvent`] on the
//! daemon's channel; which task runs when is the scheduler's decision
//! (`scheduler.rs`), carried out by the driver in `daemon.rs`. Sessions use
//! the conversation in `session.rs` unchanged: whichever side opens a
//! stream on a connection is that session's dialer, so both sides push
//! over a connection whichever side dialed it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_protocol::{ALPN_SYNC, Hello, NodeId};
use tokio::sync::{Semaphore, mpsc};

use super::endpoint::{Endpoint, PeerConnection, answer_session};
use super::peers::{Peer, PeerTable};
use super::scheduler::ConnId;
use super::session::{
    self, SessionConfig, SessionReport, SharedNode, SyncError, dial_targets, note_seen,
    record_outcome, run_opened, run_session,
};

/// What a link task reports to the driver.
#[derive(Debug)]
pub enum LinkEvent {
    /// A connection is up (accepted, or dialed by this node).
    Connected {
        /// The connection.
        conn: PeerConnection,
        /// Whether this node dialed it.
        dialed: bool,
    },
    /// A dial reached none of the peer's addresses.
    DialFailed {
        /// The peer.
        peer: NodeId,
        /// Why.
        error: SyncError,
    },
    /// A connection closed.
    Disconnected {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
        /// What quinn said.
        reason: String,
    },
    /// The peer opened a session on a connection.
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
        /// What it moved.
        result: Result<SessionReport, SyncError>,
    },
    /// A session of ours ended.
    SessionDone {
        /// The peer.
        peer: NodeId,
        /// The connection.
        conn: ConnId,
        /// What it moved.
        result: Result<SessionReport, SyncError>,
    },
}

/// What every link task needs.
#[derive(Clone)]
pub struct LinkCtx {
    /// The daemon's endpoint (dials go out from the listening socket, so
    /// peers see the address they can dial back).
    pub endpoint: Arc<Endpoint>,
    /// The node.
    pub node: SharedNode,
    /// The node's home (peer table).
    pub home: PathBuf,
    /// This node's `Hello`.
    pub hello: Hello,
    /// Limits of each session.
    pub session: SessionConfig,
    /// Sessions peers opened that may run at once, over all connections.
    pub inbound: Arc<Semaphore>,
    /// Where reports go.
    pub events: mpsc::UnboundedSender<LinkEvent>,
}

/// The id the scheduler knows a connection by.
pub fn conn_id(conn: &PeerConnection) -> ConnId {
    conn.quinn().stable_id() as ConnId
}

/// Dials `peer` at all its addresses at once; reports
/// [`LinkEvent::Connected`] (the address that answered becomes the first
/// to dial) or [`LinkEvent::DialFailed`].
pub async fn dial(ctx: LinkCtx, peer: Peer) {
    let Some((id, fp)) = peer.id().zip(peer.fingerprint_bytes()) else {
        return;
    };
    let local = ctx
        .endpoint
        .local_addr()
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
    let targets = dial_targets(&peer, local).await;
    match ctx.endpoint.connect_any(&targets, &fp, ALPN_SYNC).await {
        Ok((conn, addr)) => {
            let home = ctx.home.clone();
            let noted = tokio::task::spawn_blocking(move || {
                PeerTable::modify(&home, |t| {
                    if let Some(p) = t.by_fingerprint_mut(&fp) {
                        p.remember_address(addr);
                        p.last_seen_ms = Some(session::now_ms());
                    }
                    Ok(())
                })
            })
            .await;
            if let Ok(Err(e)) = noted {
                tracing::warn!(error = %e, "peer table not updated");
            }
            tracing::info!(peer = %id, remote = %addr, "connected");
            let _ = ctx.events.send(LinkEvent::Connected { conn, dialed: true });
        }
        Err(failures) => {
            for e in &failures {
                tracing::debug!(peer = %id, error = %e, "dial failed");
            }
            let error = SyncError::Unreachable {
                name: peer.name.clone(),
                tried: targets,
                last: failures.into_iter().last().map(Box::new),
            };
            let _ = ctx.events.send(LinkEvent::DialFailed { peer: id, error });
        }
    }
}

/// Serves the sessions the peer opens on `conn` until it closes, then
/// reports [`LinkEvent::Disconnected`]. Also notes where the peer was seen.
pub async fn watch(ctx: LinkCtx, conn: PeerConnection) {
    let (peer, id) = (conn.peer_id(), conn_id(&conn));
    seen(&ctx.home, &conn).await;
    let mut running = tokio::task::JoinSet::new();
    // Ends when the connection closes; each iteration accepts one stream
    // or reaps one finished session.
    let reason = loop {
        tokio::select! {
            accepted = conn.quinn().accept_bi() => {
                let (send, recv) = match accepted {
                    Ok(s) => s,
                    Err(e) => break e.to_string(),
                };
                let Ok(permit) = Arc::clone(&ctx.inbound).try_acquire_owned() else {
                    tracing::warn!(peer = %peer, "too many sessions; refusing one");
                    drop((send, recv));
                    continue;
                };
                let (ctx, conn) = (ctx.clone(), conn.clone());
                running.spawn(async move {
                    let _ = ctx.events.send(LinkEvent::InboundStarted { peer, conn: id });
                    let result = inbound(&ctx, &conn, send, recv).await;
                    let _ = ctx.events.send(LinkEvent::InboundDone { peer, conn: id, result });
                    drop(permit);
                });
            }
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    };
    // The connection is gone: what still runs on it can only fail.
    running.abort_all();
    while running.join_next().await.is_some() {}
    let _ = ctx.events.send(LinkEvent::Disconnected {
        peer,
        conn: id,
        reason,
    });
}

async fn inbound(
    ctx: &LinkCtx,
    conn: &PeerConnection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
) -> Result<SessionReport, SyncError> {
    let opened = answer_session(conn, send, recv, &ctx.hello, ctx.session.msg_timeout).await?;
    let scope = scope_of(&ctx.home, conn).await?;
    seen(&ctx.home, conn).await;
    let report = run_opened(opened, conn.peer_id(), &ctx.node, scope, &ctx.session).await?;
    record_outcome(&ctx.node, &ctx.home, &conn.fingerprint(), &report).await?;
    Ok(report)
}

/// Runs one session of ours on `conn` and reports [`LinkEvent::SessionDone`].
pub async fn session(ctx: LinkCtx, conn: PeerConnection) {
    let (peer, id) = (conn.peer_id(), conn_id(&conn));
    let result = async {
        let scope = scope_of(&ctx.home, &conn).await?;
        seen(&ctx.home, &conn).await;
        let report = run_session(&conn, true, &ctx.node, &ctx.hello, scope, &ctx.session).await?;
        record_outcome(&ctx.node, &ctx.home, &conn.fingerprint(), &report).await?;
        Ok(report)
    }
    .await;
    let _ = ctx.events.send(LinkEvent::SessionDone {
        peer,
        conn: id,
        result,
    });
}

/// The projects the peer table lets this peer receive.
async fn scope_of(home: &Path, conn: &PeerConnection) -> Result<Option<Vec<String>>, SyncError> {
    let (home, fp) = (home.to_path_buf(), conn.fingerprint());
    let table = tokio::task::spawn_blocking(move || PeerTable::load(&home))
        .await
        .map_err(|_| SyncError::Task)??;
    Ok(table.by_fingerprint(&fp).and_then(|p| p.scope.clone()))
}

/// Notes the peer's current address (it may have moved: QUIC follows a
/// client to its new address, and the table should too).
async fn seen(home: &Path, conn: &PeerConnection) {
    let (home, fp, addr) = (
        home.to_path_buf(),
        conn.fingerprint(),
        conn.remote_address(),
    );
    let r = tokio::task::spawn_blocking(move || note_seen(&home, &fp, addr)).await;
    if let Ok(Err(e)) = r {
        tracing::warn!(error = %e, "peer table not updated");
    }
}
