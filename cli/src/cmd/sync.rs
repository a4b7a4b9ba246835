//! `cairn sync [--peer NAME] [--json]`: one sync round with every paired
//! machine (or one) now, for people who do not keep `cairn serve` running.
//! Reads new local history first so it goes out in the same round. The
//! session itself lives in `cairn_node::sync::session`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use cairn_node::sync::endpoint::{Endpoint, Role};
use cairn_node::sync::pairing;
use cairn_node::sync::peers::{Peer, PeerTable};
use cairn_node::sync::session::{
    self, SessionConfig, SessionReport, SharedNode, local_hello, new_instance,
};
use serde::Serialize;

use crate::args::{GlobalArgs, SyncArgs};
use crate::output;

#[derive(Serialize)]
struct PeerResult {
    name: String,
    node_id: String,
    short_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<SessionReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct SyncOutput {
    peers: Vec<PeerResult>,
}

/// Runs `cairn sync`.
pub fn run(global: &GlobalArgs, args: &SyncArgs) -> anyhow::Result<()> {
    let mut node = super::open(global)?;
    super::refresh(&mut node, !args.json, None)?;
    let home = node.config().home.clone();
    let table = PeerTable::load(&home)?;
    let peers: Vec<Peer> = match &args.peer {
        Some(q) => vec![table.find(q)?.clone()],
        None => table.peers().to_vec(),
    };
    if peers.is_empty() {
        bail!("no paired machines: run `cairn pair` here and `cairn pair CODE` on the other one");
    }
    let hello = local_hello(&node, new_instance())?;
    let rt = pairing::runtime().context("start the network runtime")?;
    let endpoint = {
        let _guard = rt.enter();
        Endpoint::bind(
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            node.identity().key(),
            Role::ClientOnly,
        )?
    };
    let node: SharedNode = Arc::new(Mutex::new(node));
    let cfg = SessionConfig::default();
    let mut results = Vec::new();
    for p in &peers {
        let r = rt.block_on(session::sync_peer(&endpoint, &node, &home, p, &hello, &cfg));
        let (report, error) = match r {
            Ok(rep) => (Some(rep), None),
            Err(e) => (None, Some(format!("{:#}", anyhow::Error::new(e)))),
        };
        results.push(PeerResult {
            name: p.name.clone(),
            node_id: p.node_id.clone(),
            short_id: p.short_id(),
            report,
            error,
        });
    }
    endpoint.close();
    rt.block_on(endpoint.wait_idle(std::time::Duration::from_secs(2)));
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    if args.json {
        output::json(&SyncOutput { peers: results })?;
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
            (None, Some(e)) => format!("{who}: failed: {e}"),
            (None, None) => format!("{who}: failed"),
        };
        output::line(&mut out, &line)?;
    }
    Ok(())
}
