//! `cairn pair`, `cairn peers` and `cairn unpair`: making, listing and
//! removing pairings, and listing, refusing and allowing the machines
//! relayed through them. The exchange itself lives in
//! `cairn_node::sync::pairing`, reached through `cairn_node::sync::facade`;
//! relayed origins are `cairn_node::sync::origins`'s; this module parses
//! flags and prints.

use std::time::Duration;

use anyhow::{Context, bail};
use cairn_node::sync::facade::{self, FacadeError, Invitation};
use cairn_node::sync::pairing::{PairError, Paired};
use cairn_node::sync::peers::Peer;
use serde::Serialize;

use cairn_node::sync::origins::{self, RelayedOrigin};

use crate::args::{GlobalArgs, PairArgs, PeersArgs, UnpairArgs};
use crate::output;

/// Longest pairing window accepted.
const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

#[derive(Serialize)]
struct CodeLine<'a> {
    code: &'a str,
    expires_unix: u64,
    addrs: Vec<String>,
    listen: String,
}

#[derive(Serialize)]
struct PeerView<'a> {
    node_id: String,
    short_id: String,
    name: &'a str,
    fingerprint: String,
    addresses: Vec<String>,
    /// Host names dialed by name (resolved each time).
    hosts: &'a [String],
    last_addr: Option<String>,
    paired_at_ms: i64,
    last_seen_ms: Option<i64>,
    last_sync_ms: Option<i64>,
    records_received: u64,
    scope: Option<&'a [String]>,
    /// Log entries the peer held that this node still lacked after the
    /// last sync session with it (unknown before the first).
    behind: Option<u64>,
    /// What this node refused from it (forged, altered or unsigned
    /// batches, forged forgets, claims on this node's own log), and the
    /// limit that stopped the last session; absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    trust: Option<&'a cairn_node::sync::session::TrustNote>,
}

impl<'a> PeerView<'a> {
    fn of(p: &'a Peer) -> PeerView<'a> {
        PeerView {
            node_id: p.node_id.to_string(),
            short_id: p.short_id(),
            name: &p.name,
            fingerprint: cairn_node::hex::encode(&p.fingerprint),
            addresses: p.addresses.iter().map(ToString::to_string).collect(),
            hosts: &p.hosts,
            last_addr: p.last_addr.map(|a| a.to_string()),
            paired_at_ms: p.paired_at_ms,
            last_seen_ms: p.last_seen_ms,
            last_sync_ms: p.last_sync_ms,
            records_received: p.records_received,
            scope: p.scope.as_deref(),
            behind: None,
            trust: None,
        }
    }
}

#[derive(Serialize)]
struct PairedLine<'a> {
    paired: PeerView<'a>,
    remote: String,
}

/// Parses `90s`, `10m`, `1h` or a plain number of seconds.
pub fn parse_window(s: &str) -> anyhow::Result<Duration> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 's')) => (&s[..i], 1),
        Some((i, 'm')) => (&s[..i], 60),
        Some((i, 'h')) => (&s[..i], 3600),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("invalid --timeout {s:?}: use e.g. 90s, 10m or 1h"))?;
    let d = Duration::from_secs(n.saturating_mul(mult));
    if d.is_zero() || d > MAX_WINDOW {
        bail!("--timeout must be between 1s and 24h");
    }
    Ok(d)
}

/// Runs `cairn pair [CODE]`.
pub fn run(global: &GlobalArgs, args: &PairArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    // Told to the other side, to dial back once the pairing port closes.
    let serve_port =
        cairn_node::daemon::running_state(&node.config().home).map(|s| s.listen_addr.port());
    let paired = match &args.code {
        Some(code) => facade::join(&node, serve_port, code).map_err(explain)?,
        None => {
            let window = parse_window(&args.timeout)?;
            let invitation =
                facade::invite(&node, serve_port, args.listen, &args.advertise, window)?;
            show_code(&invitation, args.json)?;
            invitation.wait().map_err(explain)?
        }
    };
    show_paired(&paired, args.json)
}

fn show_code(invitation: &Invitation, json: bool) -> anyhow::Result<()> {
    let code = invitation.code();
    let text = code.encode();
    let listen = invitation
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if json {
        return output::json(&CodeLine {
            code: &text,
            expires_unix: code.expires_unix(),
            addrs: invitation.dials(),
            listen,
        });
    }
    let until = output::short_time(i64::try_from(code.expires_unix()).ok().map(|s| s * 1000));
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!("Pairing code (one use, valid until {until} UTC):"),
    )?;
    output::line(&mut out, "")?;
    output::line(&mut out, &format!("    {text}"))?;
    output::line(&mut out, "")?;
    output::line(
        &mut out,
        &format!("On the other machine run:  cairn pair {text}"),
    )?;
    let addrs = invitation.dials();
    output::line(
        &mut out,
        &format!(
            "Waiting on {listen} (the code dials {}) ...",
            addrs.join(", ")
        ),
    )
}

fn show_paired(p: &Paired, json: bool) -> anyhow::Result<()> {
    if json {
        return output::json(&PairedLine {
            paired: PeerView::of(&p.peer),
            remote: p.remote.to_string(),
        });
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "paired with {} ({}), node id {}",
            output::printable(&p.peer.name),
            p.peer.short_id(),
            p.peer.node_id
        ),
    )
}

/// Adds what the user can do to the errors they can do something about.
fn explain(e: FacadeError) -> anyhow::Error {
    let hint = match &e {
        FacadeError::Pair(PairError::Unreachable { .. }) => Some(
            "check the other machine is still waiting in `cairn pair` and that UDP to it is allowed; a code works only once",
        ),
        FacadeError::Pair(PairError::Refused { .. }) => {
            Some("run `cairn pair` again on the other machine")
        }
        _ => None,
    };
    match hint {
        // The cause first, then what to do about it.
        Some(h) => anyhow::anyhow!("{}; {h}", crate::error_text(&anyhow::Error::new(e))),
        None => e.into(),
    }
}

/// Runs `cairn peers`.
pub fn run_peers(global: &GlobalArgs, args: &PeersArgs) -> anyhow::Result<()> {
    let cfg = super::config(global)?;
    if let Some(query) = &args.refuse_origin {
        let done = origins::refuse_origin(&cfg, query, cairn_node::clock::now_ms())?;
        if args.json {
            #[derive(Serialize)]
            struct Refused<'a> {
                refused: &'a cairn_node::store::OriginRefusal,
            }
            return output::json(&Refused { refused: &done });
        }
        return output::line(
            &mut output::stdout(),
            &format!(
                "refused {}: deleted {} record(s) and {} log(s) of it; its entries are refused from now on (`cairn peers --allow-origin {}` undoes it)",
                done.origin,
                done.records,
                done.logs,
                &done.origin[..8.min(done.origin.len())]
            ),
        );
    }
    if let Some(query) = &args.allow_origin {
        let id = origins::allow_origin(&cfg, query)?;
        if args.json {
            #[derive(Serialize)]
            struct Allowed {
                allowed: String,
            }
            return output::json(&Allowed {
                allowed: id.to_string(),
            });
        }
        return output::line(
            &mut output::stdout(),
            &format!(
                "allowed {id} again: its entries arrive at the next sync with a peer that holds them"
            ),
        );
    }
    let peers = facade::list_peers(&cfg)?;
    let relayed = origins::relayed_origins(&cfg)?;
    if args.json {
        #[derive(Serialize)]
        struct Peers<'a> {
            peers: Vec<PeerView<'a>>,
            /// Machines not paired with this one whose entries arrived
            /// through a paired peer (or that the user refused).
            relayed_origins: &'a [RelayedOrigin],
        }
        return output::json(&Peers {
            peers: peers
                .iter()
                .map(|s| PeerView {
                    behind: s.behind,
                    trust: s.trust.as_ref(),
                    ..PeerView::of(&s.peer)
                })
                .collect(),
            relayed_origins: &relayed,
        });
    }
    let mut out = output::stdout();
    if peers.is_empty() {
        output::line(
            &mut out,
            "no paired machines: run `cairn pair` here and `cairn pair CODE` on the other machine",
        )?;
        return print_relayed(&mut out, &relayed);
    }
    output::line(
        &mut out,
        &format!(
            "{:<16} {:<10} {:<22} {:<16} {:<16} {:>9} {:>7}",
            "name", "id", "address", "last seen", "last sync", "received", "behind"
        ),
    )?;
    for s in &peers {
        let p = &s.peer;
        let addr = p
            .hosts
            .first()
            .cloned()
            .or_else(|| {
                p.addresses
                    .first()
                    .or(p.last_addr.as_ref())
                    .map(ToString::to_string)
            })
            .unwrap_or_else(|| "-".to_owned());
        output::line(
            &mut out,
            &format!(
                "{:<16} {:<10} {:<22} {:<16} {:<16} {:>9} {:>7}",
                output::printable(&p.name),
                p.short_id(),
                addr,
                output::short_time(p.last_seen_ms),
                output::short_time(p.last_sync_ms),
                p.records_received,
                s.behind.map_or_else(|| "-".to_owned(), |b| b.to_string())
            ),
        )?;
    }
    // What was refused from whom, and what limited a session, below the table.
    for s in &peers {
        let Some(t) = &s.trust else { continue };
        let name = output::printable(&s.peer.name);
        if t.batches_refused > 0 || t.own_origin_claims > 0 {
            output::line(
                &mut out,
                &format!(
                    "{name}: refused {} batch(es) and {} forget(s), ignored {} claim(s) on this machine's own log; last: {}",
                    t.batches_refused,
                    t.tombstones_refused,
                    t.own_origin_claims,
                    output::printable(t.last_refusal.as_deref().unwrap_or("-"))
                ),
            )?;
        }
        if let Some(l) = &t.limited {
            output::line(
                &mut out,
                &format!("{name}: last sync limited: {}", output::printable(l)),
            )?;
        }
    }
    print_relayed(&mut out, &relayed)
}

/// The machines relayed through paired peers, below the peers: who
/// vouched for each, its key, when it was first seen, what is held.
fn print_relayed(out: &mut impl std::io::Write, relayed: &[RelayedOrigin]) -> anyhow::Result<()> {
    if relayed.is_empty() {
        return Ok(());
    }
    output::line(out, "")?;
    output::line(
        out,
        "relayed machines (not paired here; refuse one with `cairn peers --refuse-origin ID`):",
    )?;
    output::line(
        out,
        &format!(
            "{:<16} {:<10} {:<16} {:<18} {:<16} {:>8}",
            "name", "id", "relayed by", "key", "first seen", "entries"
        ),
    )?;
    for o in relayed {
        let k = &o.key;
        let by = o
            .vouched_by_name
            .clone()
            .or_else(|| k.vouched_by.as_ref().map(|v| v.chars().take(8).collect()))
            .unwrap_or_else(|| "-".to_owned());
        let key = k
            .fingerprint
            .as_deref()
            .map_or_else(|| "-".to_owned(), |f| f.chars().take(16).collect());
        let entries = if k.refused_ms.is_some() {
            "refused".to_owned()
        } else {
            k.entries.to_string()
        };
        output::line(
            out,
            &format!(
                "{:<16} {:<10} {:<16} {:<18} {:<16} {:>8}",
                output::printable(k.name.as_deref().unwrap_or("-")),
                k.origin.chars().take(8).collect::<String>(),
                output::printable(&by),
                key,
                output::short_time(Some(k.learned_ms)),
                entries
            ),
        )?;
    }
    Ok(())
}

/// Runs `cairn unpair PEER`.
pub fn run_unpair(global: &GlobalArgs, args: &UnpairArgs) -> anyhow::Result<()> {
    let cfg = super::config(global)?;
    let removed = facade::unpair(&cfg.home, &args.peer)?;
    if args.json {
        #[derive(Serialize)]
        struct Unpaired<'a> {
            unpaired: PeerView<'a>,
        }
        return output::json(&Unpaired {
            unpaired: PeerView::of(&removed),
        });
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "unpaired {} ({}): its key is refused from now on",
            output::printable(&removed.name),
            removed.short_id()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse() {
        assert_eq!(parse_window("10m").expect("10m"), Duration::from_secs(600));
        assert_eq!(parse_window("90s").expect("90s"), Duration::from_secs(90));
        assert_eq!(parse_window("2h").expect("2h"), Duration::from_secs(7200));
        assert_eq!(parse_window("45").expect("45"), Duration::from_secs(45));
        assert!(parse_window("0m").is_err());
        assert!(parse_window("25h").is_err());
        assert!(parse_window("soon").is_err());
    }
}
