//! `cairn sync [--peer NAME] [--json]`: one sync round with every paired
//! machine (or one) now, for people who do not keep `cairn serve` running.
//! Every peer and every known address is dialed at once with a short
//! handshake timeout, so offline peers cost seconds, not minutes; each is
//! reported as synced, unreachable (with the addresses tried and when it
//! was last seen), refused, or failed.
//! Reads new local history first so it goes out in the same round (unless
//! a `cairn serve` for this home has read it already). The
//! round itself is `cairn_node::sync::facade::sync_once`.

use std::time::{Duration, Instant};

use anyhow::bail;
use cairn_node::sync::facade::{self, PeerOutcome};
use cairn_node::sync::session::{SessionReport, SyncError};
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
    /// A refusal by a machine with another key at one of the peer's
    /// addresses (the error says so): the text form does not call it the
    /// peer's refusal.
    #[serde(skip)]
    stranger: bool,
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
    if !cairn_node::daemon::is_serving(&home) {
        super::refresh(&mut node, !args.json, None)?;
    }
    let outcomes = facade::sync_once(node, args.peer.as_deref(), DIAL_TIMEOUT)?;
    let peers = outcomes.len();
    let results: Vec<PeerResult> = outcomes.into_iter().map(result_of).collect();
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
    if failed > 0 && failed == peers {
        bail!("no paired machine could be synced");
    }
    Ok(())
}

fn result_of(o: PeerOutcome) -> PeerResult {
    let p = o.peer;
    let mut res = PeerResult {
        name: p.name.clone(),
        node_id: p.node_id.to_string(),
        short_id: p.short_id(),
        status: State::Synced,
        tried: Vec::new(),
        last_seen_ms: p.last_seen_ms,
        report: None,
        error: None,
        stranger: false,
    };
    match o.result {
        Ok(rep) => res.report = Some(rep),
        Err(e) => {
            res.stranger = matches!(e, SyncError::Refused { stranger: true, .. });
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
            res.error = Some(crate::error_text(&anyhow::Error::new(e)));
        }
    }
    res
}

/// Whether a session refused or limited anything (worth a line even when
/// nothing moved).
fn refused_anything(rep: &SessionReport) -> bool {
    rep.batches_refused > 0 || rep.own_origin_claims > 0 || rep.limited.is_some()
}

fn show(results: &[PeerResult]) -> anyhow::Result<()> {
    let mut out = output::stdout();
    for r in results {
        let who = format!("{} ({})", output::printable(&r.name), r.short_id);
        let line = match (&r.report, &r.error) {
            (Some(rep), _) if !rep.moved_anything() && !refused_anything(rep) => {
                format!("{who}: already in step")
            }
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
                if rep.forgets_deferred > 0 {
                    s.push_str(&format!(
                        ", {} forget(s) of records {} does not own left to their owners",
                        rep.forgets_deferred,
                        output::printable(&r.name)
                    ));
                }
                if rep.behind_after > 0 {
                    s.push_str(&format!(", still {} behind", rep.behind_after));
                }
                if rep.batches_refused > 0 {
                    s.push_str(&format!(
                        "; REFUSED {} batch(es) ({} forget(s)) that did not check out",
                        rep.batches_refused, rep.tombstones_refused
                    ));
                }
                if rep.own_origin_claims > 0 {
                    s.push_str(&format!(
                        "; ignored {} claim(s) on this machine's own log",
                        rep.own_origin_claims
                    ));
                }
                if rep.refused_origin_logs > 0 {
                    s.push_str(&format!(
                        "; skipped {} log(s) of machines refused here (`cairn peers`)",
                        rep.refused_origin_logs
                    ));
                }
                if let Some(limit) = &rep.limited {
                    s.push_str(&format!("; limited: {}", output::printable(limit)));
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
                State::Refused if r.stranger => format!(
                    "{who}: {}",
                    r.error.as_deref().unwrap_or("another machine answered")
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
        for why in r.report.iter().flat_map(|rep| &rep.refusals) {
            output::line(&mut out, &format!("  refused: {}", output::printable(why)))?;
        }
    }
    Ok(())
}
