//! LAN discovery for `cairn doctor`: whether it is on (config, and what
//! the running daemon says in `discovery.json`) and which paired machines
//! the daemon heard on this network.

use cairn_node::config::Config;
use cairn_node::daemon::ServeState;
use cairn_node::sync::discovery::{self, Off, Status};
use cairn_node::sync::peers::PeerTable;

use super::{Check, Level, check as finding};
use crate::output;

/// What to do when a paired machine on the same network is not heard.
const NOT_HEARD_FIX: &str = "if a paired machine is on this network, run `cairn doctor` there (its discovery must be on too), and let mDNS through both firewalls: UDP 5353 to and from 224.0.0.251";

/// The discovery finding.
pub(super) fn check(cfg: &Config, serving: Option<&ServeState>) -> Check {
    if !cfg.discovery {
        let file = cfg
            .config_path
            .as_ref()
            .map_or_else(|| "the config".to_owned(), |p| p.display().to_string());
        return finding(
            "discovery",
            Level::Ok,
            format!(
                "LAN discovery is off (`[sync] discovery = false` in {file}): paired machines are dialed only at the addresses they were paired or last seen at"
            ),
            None,
        );
    }
    let Some(st) = serving else {
        return finding(
            "discovery",
            Level::Warn,
            "LAN discovery is on, but no cairn serve runs to announce this machine or to find paired ones on this network".to_owned(),
            Some("start the daemon (see the service check above)".to_owned()),
        );
    };
    match discovery::read_status(&cfg.home).filter(|s| s.pid == st.pid) {
        None => finding(
            "discovery",
            Level::Warn,
            format!(
                "cairn serve (pid {}) has not said whether it announces this machine on the LAN (it started a moment ago, or it is an older cairn)",
                st.pid
            ),
            Some(
                "run `cairn doctor` again in a few seconds; if this stays, restart cairn serve"
                    .to_owned(),
            ),
        ),
        Some(s) if !s.active => inactive(&s),
        Some(s) => active(cfg, &s),
    }
}

fn inactive(s: &Status) -> Check {
    let why = s.inactive_reason.clone().unwrap_or_default();
    match s.off {
        Some(Off::Config) => finding(
            "discovery",
            Level::Ok,
            format!("LAN discovery is off for the running daemon: {why}"),
            None,
        ),
        Some(Off::Loopback) => finding(
            "discovery",
            Level::Warn,
            format!(
                "LAN discovery is off: {why}, so paired machines on this network cannot find it"
            ),
            Some("run cairn serve with `--listen 0.0.0.0:7878` (the default)".to_owned()),
        ),
        _ => finding(
            "discovery",
            Level::Warn,
            format!(
                "LAN discovery could not start: {why}; paired machines are dialed only at their stored addresses"
            ),
            Some("make sure this machine may use multicast on UDP 5353 (a container needs host networking for it), then restart cairn serve".to_owned()),
        ),
    }
}

fn active(cfg: &Config, s: &Status) -> Check {
    let announce = format!(
        "LAN discovery is on: this machine is announced as {} (sync port {}), with no name or path",
        s.digest.as_deref().unwrap_or("?"),
        s.port.map_or_else(|| "?".to_owned(), |p| p.to_string())
    );
    let peers = PeerTable::load(&cfg.home)
        .map(|t| t.peers().to_vec())
        .unwrap_or_default();
    let now = cairn_node::clock::now_ms();
    let heard: Vec<String> = s
        .found
        .iter()
        .map(|f| {
            let name = peers
                .iter()
                .find(|p| p.node_id.to_string() == f.node_id)
                .map_or_else(|| f.node_id.clone(), |p| p.name.clone());
            let at: Vec<String> = f.addrs.iter().map(ToString::to_string).collect();
            format!(
                "{name} at {} ({})",
                at.join(", "),
                output::ago(Some(f.seen_ms), now)
            )
        })
        .collect();
    let ignored = match (s.tally.unknown, s.tally.malformed) {
        (0, 0) => String::new(),
        (u, m) => {
            format!("; ignored {u} announcement(s) from unpaired machines and {m} malformed one(s)")
        }
    };
    if peers.is_empty() {
        return finding(
            "discovery",
            Level::Ok,
            format!("{announce}; no paired machines to look for yet{ignored}"),
            None,
        );
    }
    if heard.is_empty() {
        return finding(
            "discovery",
            Level::Ok,
            format!(
                "{announce}; none of the {} paired machine(s) was heard on this network (expected when they are elsewhere){ignored}",
                peers.len()
            ),
            Some(NOT_HEARD_FIX.to_owned()),
        );
    }
    finding(
        "discovery",
        Level::Ok,
        format!(
            "{announce}; heard {} of {} paired machine(s) here: {}{ignored}",
            heard.len(),
            peers.len(),
            heard.join("; ")
        ),
        None,
    )
}
