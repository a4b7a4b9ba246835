//! `cairn sync [--peer NAME] [--json]`: one sync round with every paired
//! machine (or one) now, for people who do not keep `cairn serve` running.
//! Every peer and every known address is dialed at once with a short
//! handshake timeout, so offline peers cost seconds, not minutes; each is
//! reported as synced, unreachable (with the addresses tried and when it
//! was last seen), refused, or failed.
//! Reads new local history first so it goes out in the same round (unless
//! a `cairn serve` for this home has read it already). The
//! session itself lives in `cairn_node::sync::session`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cairn_node::sync::endpoint::{Endpoint, Role};
use cairn_node::sync::peers::{Peer, PeerTable};
use cairn_node::sync::session::{
    self, SessionConfig, SessionReport, SharedNode, SyncError, local_hello, new_instance,
};
use serde::Serialize;

use crate::args::{GlobalArgs, SyncArgs};
use crate::output;

/// How long each dial waits for a handshake: every address of every peer
/// is dialed at once, so an offline peer costs this much, once.
const DIAL_TIMEOUT: Duration = Duration::from_secs(3);

/// What became of one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum State {
    /// A session ran to its end.
    Synced,
    /// No address answered.
    Unreachable,
    /// It answered, but refused this node's key (or showed another key).
    Refused,
    /// It answered and the session failed.
    Failed,
}

#[derive(Serialize)]
struct PeerResult {
    name: String,
    node_id: String,
    short_id: String,
    status: State,
    /// Addresses dialed when no session ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tried: Vec<String>,
    last_seen_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<SessionReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct SyncOutput {
    peers: Vec<PeerResult>,
    elapsed_ms: u64,
}

/// Runs `cairn sync`.
pub fn run(global: &GlobalArgs, args: &SyncArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut node = super::open(global)?;
    let home = node.config().home.clone();
    if !cairn_node::sync::daemon::is_serving(&home) {
        super::refresh(&mut node, !args.json, None)?;
    }
    let table = PeerTable::load(&home)?;
    let peers: Vec<Peer> = match &args.peer {
        Some(q) => vec![table.find(q)?.clone()],
        None => table.peers().to_vec(),
    };
    if peers.is_empty() {
        bail!("no paired machines: run `cairn pair` here and `cairn pair CODE` on the other one");
    }
    let hello = local_hello(&node, new_instance())?;
    let rt = cairn_node::sync::runtime().context("start the network runtime")?;
    let endpoint = {
        let _guard = rt.enter();
        let mut e = Endpoint::bind(
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            node.identity().key(),
            Role::ClientOnly,
        )?;
        e.set_handshake_timeout(DIAL_TIMEOUT);
        Arc::new(e)
    };
    let node: SharedNode = Arc::new(Mutex::new(node));
    let cfg = SessionConfig::default();
    // Every peer at once; each attempt is bounded by the dial timeout and
    // the session bounds.
    let outcomes = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in peers.iter().cloned().enumerate() {
            let (endpoint, node, home, hello, cfg) = (
                Arc::clone(&endpoint),
                Arc::clone(&node),
                home.clone(),
                hello.clone(),
                cfg.clone(),
            );
            set.spawn(async move {
                let r = session::sync_peer(&endpoint, &node, &home, &p, &hello, &cfg).await;
                (i, r)
            });
        }
        let mut out = Vec::new();
        while let Some(j) = set.join_next().await {
            if let Ok(v) = j {
                out.push(v);
            }
        }
        out.sort_by_key(|(i, _)| *i);
        out
    });
    let mut results = Vec::new();
    for (i, r) in outcomes {
        let Some(p) = peers.get(i) else { continue };
        let mut res = PeerResult {
            name: p.name.clone(),
            node_id: p.node_id.clone(),
            short_id: p.short_id(),
            status: State::Synced,
            tried: Vec::new(),
            last_seen_ms: p.last_seen_ms,
            report: None,
            error: None,
        };
        match r {
            Ok(rep) => res.report = Some(rep),
            Err(e) => {
                res.status = match &e {
                    SyncError::Unreachable { .. } => State::Unreachable,
                    SyncError::Refused { .. } => State::Refused,
                    _ => State::Failed,
                };
                res.tried = match &e {
                    SyncError::Unreachable { tried, .. } => {
                        tried.iter().map(ToString::to_string).collect()
                    }
                    SyncError::Refused { addr, .. } => vec![addr.to_string()],
                    _ => Vec::new(),
                };
                if res.tried.is_empty() && res.status == State::Unreachable {
                    // Names that did not resolve are still worth naming.
                    res.tried.clone_from(&p.hosts);
                }
                res.error = Some(format!("{:#}", anyhow::Error::new(e)));
            }
        }
        results.push(res);
    }
    endpoint.close();
    if results.iter().any(|r| r.status == State::Synced) {
        // Let the last frames of finished sessions reach their peers.
        rt.block_on(endpoint.wait_idle(Duration::from_secs(1)));
    }
    let failed = results.iter().filter(|r| r.status != State::Synced).count();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if args.json {
        output::json(&SyncOutput {
            peers: results,
            elapsed_ms,
        })?;
    } else {
        show(&results)?;
    }
    if failed > 0 && failed == peers.len() {
        bail!("no paired machine could be synced");
    }
    Ok(())
}

fn show(results: &[PeerResult]) -> anyhow::Result<()> {
    let mut out = output::stdout();
    for r in results {
        let who = format!("{} ({})", output::printable(&r.name), r.short_id);
        let line = match (&r.report, &r.error) {
            (Some(rep), _) if !rep.moved_anything() => format!("{who}: already in step"),
            (Some(rep), _) => {
                let mut s = format!(
                    "{who}: received {} records ({} new), sent {}",
                    rep.records_received, rep.stored, rep.records_sent
                );
                if rep.tombstones > 0 {
                    s.push_str(&format!(
                        ", {} forget(s) applied ({} records removed)",
                        rep.tombstones, rep.purged
                    ));
                }
                if rep.refused > 0 {
                    s.push_str(&format!(", {} forgotten records refused", rep.refused));
                }
                if rep.behind_after > 0 {
                    s.push_str(&format!(", still {} behind", rep.behind_after));
                }
                s
            }
            (None, _) => match r.status {
                State::Unreachable => format!(
                    "{who}: unreachable (tried {}; last seen {})",
                    if r.tried.is_empty() {
                        "no known address".to_owned()
                    } else {
                        r.tried.join(", ")
                    },
                    output::ago(r.last_seen_ms, super::now_ms())
                ),
                State::Refused => format!(
                    "{who}: refused: {}",
                    r.error.as_deref().unwrap_or("the handshake was refused")
                ),
                _ => format!(
                    "{who}: failed: {}",
                    r.error.as_deref().unwrap_or("unknown error")
                ),
            },
        };
        output::line(&mut out, &line)?;
    }
    Ok(())
}
