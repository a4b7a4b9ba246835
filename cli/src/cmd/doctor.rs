//! `cairn doctor [--json]`: checks what keeps cairn working unattended and
//! says, in plain words, what is wrong and the command that fixes it: the
//! background service, how fresh the index is, the agents' wiring, the
//! stores found but not understood, each paired machine's reachability,
//! the sync port (and which program holds it), LAN discovery, and the
//! permissions of the node's home. Exits with an error when it found a
//! problem.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use cairn_node::daemon;
use cairn_node::sync::DEFAULT_PORT;
use cairn_node::sync::facade;
use cairn_node::sync::peers::{Peer, PeerTable};
use cairn_node::sync::session::SyncError;
use serde::Serialize;

mod lan;
mod port;

use crate::args::{GlobalArgs, JsonArgs};
use crate::install::service::{self, Manager};
use crate::output;

/// How long each peer's dial waits for a handshake (all dialed at once).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    /// Fine.
    Ok,
    /// Works, but worth a look.
    Warn,
    /// Broken: cairn does not do its job until it is fixed.
    Problem,
}

#[derive(Debug, Serialize)]
struct Check {
    /// What was checked: service, index, agents, peer, port, permissions.
    area: &'static str,
    level: Level,
    /// What was found, in plain words.
    summary: String,
    /// The command or step that fixes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

fn check(area: &'static str, level: Level, summary: String, fix: Option<String>) -> Check {
    Check {
        area,
        level,
        summary,
        fix,
    }
}

#[derive(Serialize)]
struct Report {
    checks: Vec<Check>,
    problems: usize,
    warnings: usize,
    elapsed_ms: u64,
}

/// Runs `cairn doctor`.
pub fn run(global: &GlobalArgs, args: &JsonArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let node = super::open(global)?;
    let cfg = node.config().clone();
    let serving = daemon::running_state(&cfg.home);
    let mut checks = Vec::new();
    checks.push(service_check(global, serving.as_ref()));
    checks.push(index_check(&node, serving.is_some()));
    checks.push(database_check(&node, &cfg.db_path));
    checks.extend(agent_checks(global));
    checks.extend(source_checks(&node));
    checks.extend(peer_checks(&node, &cfg.home)?);
    checks.push(port::check(serving.as_ref()));
    checks.push(lan::check(&cfg, serving.as_ref()));
    // Opening the node already made a loose home private; say what it fixed.
    checks.extend(node.tightened().iter().map(|e| {
        check(
            "permissions",
            Level::Warn,
            format!(
                "{} was open to other users (mode {:o}); cairn made it private on this start",
                e.path.display(),
                e.mode
            ),
            Some(
                "nothing left to do; if others could log in meanwhile, treat what it held as seen"
                    .to_owned(),
            ),
        )
    }));
    checks.extend(permission_checks(
        &cfg.home,
        &cfg.db_path,
        &cfg.identity_path,
    ));
    let problems = checks.iter().filter(|c| c.level == Level::Problem).count();
    let warnings = checks.iter().filter(|c| c.level == Level::Warn).count();
    let report = Report {
        checks,
        problems,
        warnings,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    if args.json {
        output::json(&report)?;
    } else {
        show(&report)?;
    }
    if problems > 0 {
        bail!("{problems} problem(s) found (see above)");
    }
    Ok(())
}

fn show(r: &Report) -> anyhow::Result<()> {
    let mut out = output::stdout();
    for c in &r.checks {
        let mark = match c.level {
            Level::Ok => "ok     ",
            Level::Warn => "warn   ",
            Level::Problem => "PROBLEM",
        };
        output::line(
            &mut out,
            &format!("{mark} {:<11} {}", c.area, output::printable(&c.summary)),
        )?;
        if let Some(f) = &c.fix {
            output::line(
                &mut out,
                &format!("{:<20}fix: {}", "", output::printable(f)),
            )?;
        }
    }
    output::line(
        &mut out,
        &match (r.problems, r.warnings) {
            (0, 0) => "all good".to_owned(),
            (p, w) => format!("{p} problem(s), {w} warning(s)"),
        },
    )
}

fn service_check(global: &GlobalArgs, serving: Option<&daemon::ServeState>) -> Check {
    let plan = super::install::service_plan(global).ok().flatten();
    let state = plan.as_ref().map(|(p, r)| service::state(p, r));
    let (start, logs) = match plan.as_ref().map(|(p, _)| p.manager) {
        Some(Manager::Systemd) => (
            format!("systemctl --user restart {}", service::SYSTEMD_UNIT),
            "journalctl --user -u cairn -n 50".to_owned(),
        ),
        Some(Manager::Launchd) => (
            format!(
                "launchctl load -w {}",
                plan.as_ref()
                    .map_or(String::new(), |(p, _)| p.path.display().to_string())
            ),
            "~/Library/Logs/cairn-serve.log".to_owned(),
        ),
        None => ("cairn serve".to_owned(), "its output".to_owned()),
    };
    if let Some(st) = serving {
        let how = match &state {
            Some(s) if s.installed && s.running == Some(true) => " as the background service",
            _ => "",
        };
        return check(
            "service",
            Level::Ok,
            format!(
                "cairn serve runs{how} (pid {}), indexing as agents write and syncing",
                st.pid
            ),
            None,
        );
    }
    match state {
        None => check(
            "service",
            Level::Warn,
            "no cairn serve runs, and this system has no service manager cairn knows".to_owned(),
            Some(
                "run `cairn serve` under your own supervisor (see deploy/README.md)".to_owned(),
            ),
        ),
        Some(s) if s.installed => check(
            "service",
            Level::Problem,
            format!(
                "the background service is installed ({}) but cairn serve is not running, so nothing indexes or syncs in the background",
                s.path
            ),
            Some(format!("`{start}`; if it stops again, read why in {logs}")),
        ),
        Some(_) => check(
            "service",
            Level::Problem,
            "no background service: the index is only refreshed when you run cairn, and nothing syncs with your other machines".to_owned(),
            Some("`cairn install` (installs and starts it), or keep `cairn serve` running".to_owned()),
        ),
    }
}

/// One warning per store found but not understood: memory an agent wrote
/// that this cairn silently would not have.
fn source_checks(node: &cairn_node::node::Node) -> Vec<Check> {
    let found = match super::sources::not_understood(node) {
        Ok(found) => found,
        Err(e) => {
            return vec![check(
                "sources",
                Level::Warn,
                format!("cannot check the agents' stores: {e}"),
                None,
            )];
        }
    };
    found
        .into_iter()
        .map(|n| {
            check(
                "sources",
                Level::Warn,
                format!("{}: {} ({})", n.agent, n.summary(), n.path),
                Some(
                    "a newer cairn may read it: update cairn; if the newest does not, report the layout (`cairn sources --json` shows what was found)"
                        .to_owned(),
                ),
            )
        })
        .collect()
}

/// SQLite's own check of every page of the database. It reads the whole
/// file: 0.3 s for 1 GB of history, 13 s for 10 GB.
fn database_check(node: &cairn_node::node::Node, db: &Path) -> Check {
    let started = Instant::now();
    // Some seconds for a large history: say what the wait is for.
    let bytes = std::fs::metadata(db).map_or(0, |m| m.len());
    if bytes > 1 << 30 && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!(
            "checking {} ({:.1} GB) for damage...",
            db.display(),
            bytes as f64 / 1e9
        );
    }
    match node.store().damage() {
        Ok(found) if found.is_empty() => check(
            "database",
            Level::Ok,
            format!(
                "whole: SQLite's check of every page found nothing wrong ({:.1} s)",
                started.elapsed().as_secs_f64()
            ),
            None,
        ),
        Ok(found) => check(
            "database",
            Level::Problem,
            format!("{} is damaged: {}", db.display(), findings(&found)),
            Some(format!(
                "with `cairn serve` stopped, move {} aside (keep it) and run `cairn index`: this machine's agent files are read again, and `cairn sync` brings back what paired machines hold; what only this machine held, from agent files since deleted, stays in the old file",
                db.display()
            )),
        ),
        Err(e) => check(
            "database",
            Level::Warn,
            format!("cannot check the database: {e}"),
            None,
        ),
    }
}

/// The first three lines of what SQLite's check found, without its
/// "*** in database main ***" headings.
fn findings(found: &[String]) -> String {
    let lines: Vec<&str> = found
        .iter()
        .flat_map(|f| f.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("***"))
        .collect();
    let more = match lines.len() {
        0..=3 => String::new(),
        n => format!(" (and {} more)", n - 3),
    };
    format!("{}{more}", lines[..lines.len().min(3)].join("; "))
}

fn index_check(node: &cairn_node::node::Node, serving: bool) -> Check {
    let f = match node.freshness() {
        Ok(f) => f,
        Err(e) => {
            let damaged = matches!(
                e,
                cairn_node::node::NodeError::Store(cairn_node::store::StoreError::Damaged(_))
            );
            let fix = match damaged {
                true => "the database check below says what to do",
                false => {
                    "`cairn status` shows the database path; `cairn index` rebuilds what is missing"
                }
            };
            return check(
                "index",
                Level::Problem,
                format!("cannot read the index: {e}"),
                Some(fix.to_owned()),
            );
        }
    };
    if f.stores == 0 {
        return check(
            "index",
            Level::Warn,
            "no agent history found on this machine".to_owned(),
            Some("`cairn sources` lists every path checked per agent".to_owned()),
        );
    }
    if f.pending == 0 {
        return check(
            "index",
            Level::Ok,
            format!(
                "fresh: all {} store(s) indexed (newest change {})",
                f.stores,
                output::short_time(f.newest_change_ms)
            ),
            None,
        );
    }
    let age_ms = super::now_ms() - f.newest_change_ms.unwrap_or(0);
    if serving && age_ms < 60_000 {
        return check(
            "index",
            Level::Ok,
            format!(
                "{} store(s) changed in the last minute; the daemon is reading them",
                f.pending
            ),
            None,
        );
    }
    check(
        "index",
        Level::Warn,
        format!(
            "{} of {} store(s) changed since they were indexed (newest change {}, newest indexed {})",
            f.pending,
            f.stores,
            output::short_time(f.newest_change_ms),
            output::short_time(f.newest_indexed_ms)
        ),
        Some(if serving {
            "the daemon should have read them: check its log".to_owned()
        } else {
            "`cairn index` now; `cairn install` so the daemon keeps it fresh".to_owned()
        }),
    )
}

/// Whether `cairn install` leaves this entry to the user: a format it does
/// not rewrite, or a config it will not create.
fn by_hand(t: &crate::install::Target) -> bool {
    let text = crate::install::read(&t.path)
        .ok()
        .flatten()
        .unwrap_or_default();
    t.snippet(&text).is_some() || t.needs_existing(&text).is_some()
}

fn agent_checks(global: &GlobalArgs) -> Vec<Check> {
    let ctx = match super::install::ctx(global) {
        Ok(c) => c,
        Err(e) => {
            return vec![check(
                "agents",
                Level::Warn,
                format!(
                    "cannot check the agents' configs: {}",
                    crate::error_text(&e)
                ),
                None,
            )];
        }
    };
    let wired = super::install::wired(&ctx);
    let mut out = Vec::new();
    let mut fine = Vec::new();
    for a in crate::install::all(&ctx) {
        let entry = wired
            .iter()
            .find(|w| w.agent == a.id && w.what == crate::install::What::McpServer);
        match entry {
            // Configs cairn does not rewrite (YAML with comments), or one
            // it adds to but never creates (Continue's absent config.yaml):
            // the entry is pasted by hand from what `cairn install` prints.
            None if a.detected && by_hand(&a.mcp) => out.push(check(
                "agents",
                Level::Warn,
                format!(
                    "{} is installed; its config ({}) needs cairn's entry added by hand",
                    a.id,
                    a.mcp.path.display()
                ),
                Some(format!(
                    "`cairn install --agent {}` prints the lines to add",
                    a.id
                )),
            )),
            None if a.detected => out.push(check(
                "agents",
                Level::Problem,
                format!(
                    "{} is installed but cannot use cairn's memory (no MCP entry in {})",
                    a.id,
                    a.wanted_mcp()[0].path.display()
                ),
                Some(format!("`cairn install --agent {}`", a.id)),
            )),
            None => {}
            Some(w) if !w.command.starts_with(&ctx.bin) => {
                let first = w.command.split_whitespace().next().unwrap_or("");
                let level = if Path::new(first).exists() {
                    Level::Warn
                } else {
                    Level::Problem
                };
                out.push(check(
                    "agents",
                    level,
                    format!(
                        "{} runs cairn from {first}, not this binary ({})",
                        a.id, ctx.bin
                    ),
                    Some("`cairn install` points every agent at this binary".to_owned()),
                ));
            }
            Some(_) => fine.push(a.id),
        }
    }
    if !fine.is_empty() {
        out.insert(
            0,
            check(
                "agents",
                Level::Ok,
                format!("wired into {}", fine.join(", ")),
                None,
            ),
        );
    } else if out.is_empty() {
        out.push(check(
            "agents",
            Level::Warn,
            "no supported coding agent found on this machine".to_owned(),
            Some("`cairn install --agent NAME` wires one that cairn did not detect".to_owned()),
        ));
    }
    out
}

fn peer_checks(node: &cairn_node::node::Node, home: &Path) -> anyhow::Result<Vec<Check>> {
    let table = match PeerTable::load(home) {
        Ok(t) => t,
        Err(e) => {
            return Ok(vec![check(
                "peers",
                Level::Problem,
                format!("the peer table cannot be read: {e}"),
                Some(format!(
                    "fix or remove {}",
                    PeerTable::path_in(home).display()
                )),
            )]);
        }
    };
    let peers: Vec<Peer> = table.peers().to_vec();
    if peers.is_empty() {
        return Ok(vec![check(
            "peers",
            Level::Ok,
            "no paired machines (`cairn pair` adds one)".to_owned(),
            None,
        )]);
    }
    // Every peer at once; each probe is bounded by the handshake timeout.
    let results = facade::probe_peers(node, &peers, PROBE_TIMEOUT)?;
    let now = super::now_ms();
    let mut out = Vec::new();
    for (p, r) in peers.iter().zip(results) {
        let who = format!("{} ({})", p.name, p.short_id());
        out.push(match r {
            Ok(addr) => check(
                "peer",
                Level::Ok,
                format!(
                    "{who} reachable at {addr}; last synced {}",
                    output::ago(p.last_sync_ms, now)
                ),
                None,
            ),
            Err(SyncError::Unreachable { tried, .. }) => {
                let tried: Vec<String> = tried.iter().map(ToString::to_string).collect();
                check(
                    "peer",
                    Level::Problem,
                    format!(
                        "{who} unreachable: no answer from {} within {}s; last seen {}",
                        if tried.is_empty() { "any address (none known)".to_owned() } else { tried.join(", ") },
                        PROBE_TIMEOUT.as_secs(),
                        output::ago(p.last_seen_ms, now)
                    ),
                    Some(format!(
                        "make sure `cairn serve` runs on {} (`cairn doctor` there) and that UDP {DEFAULT_PORT} (or its --listen port) is open in its firewall; if it moved to another network it is found again when it dials this machine",
                        p.name
                    )),
                )
            }
            Err(SyncError::Refused {
                addr,
                stranger: true,
                ..
            }) => check(
                "peer",
                Level::Problem,
                format!("{who} is not at {addr}: a machine with another key answers there"),
                Some(format!(
                    "if {name} was set up again (a new key), `cairn unpair {name}` here and pair the two machines again; if it moved, it is found again when it dials this machine",
                    name = p.name
                )),
            ),
            Err(SyncError::Refused { addr, .. }) => check(
                "peer",
                Level::Problem,
                format!("{who} answered at {addr} but refused this machine (it no longer has it paired, or another machine now uses that address)"),
                Some(format!("`cairn unpair {}` here, then pair the two machines again", p.name)),
            ),
            Err(e) => check(
                "peer",
                Level::Problem,
                format!("{who}: {e}"),
                Some(format!("`cairn unpair {}` and pair again if it persists", p.name)),
            ),
        });
    }
    Ok(out)
}

#[cfg(unix)]
fn permission_checks(home: &Path, db: &Path, key: &Path) -> Vec<Check> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    };
    let peers = PeerTable::path_in(home);
    for (path, want, level) in [
        (key, 0o600, Level::Problem),
        (home, 0o700, Level::Warn),
        (db, 0o600, Level::Warn),
        (peers.as_path(), 0o600, Level::Warn),
    ] {
        let Some(m) = mode(path) else { continue };
        if m & 0o077 != 0 {
            let what = if path == key {
                "the node's private key"
            } else if path == home {
                "the node's home"
            } else if path == db {
                "the memory database"
            } else {
                "the peer table"
            };
            out.push(check(
                "permissions",
                level,
                format!(
                    "{what} {} is open to other users (mode {m:o})",
                    path.display()
                ),
                Some(format!("chmod {want:o} {}", path.display())),
            ));
        }
    }
    if out.is_empty() {
        out.push(check(
            "permissions",
            Level::Ok,
            format!(
                "{} and its key, database and peer table are private to you",
                home.display()
            ),
            None,
        ));
    }
    out
}

#[cfg(not(unix))]
fn permission_checks(_home: &Path, _db: &Path, _key: &Path) -> Vec<Check> {
    Vec::new()
}
