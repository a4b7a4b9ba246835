//! `cairn status`: what this node holds.

use serde::Serialize;

use crate::args::{GlobalArgs, JsonArgs};
use crate::output;

#[derive(Serialize)]
struct Status<'a> {
    node_id: String,
    node_short_id: String,
    node_name: &'a str,
    home: String,
    database: String,
    config: Option<String>,
    schema_version: u32,
    #[serde(flatten)]
    stats: &'a cairn_node::store::StoreStats,
    /// Agent configs that contain cairn's MCP server entry or hook.
    wired: Vec<super::install::Wired>,
    /// Where this node's `cairn serve` listens, if one is running.
    listen_addr: Option<String>,
    /// Paired machines.
    peers: usize,
    /// The background service that runs `cairn serve` (`None` where cairn
    /// knows no service manager).
    service: Option<crate::install::service::ServiceState>,
    /// How far the index is behind the agents' stores.
    freshness: Option<cairn_node::indexer::Freshness>,
    /// True when no path in the home is open to other users.
    private: bool,
    /// Paths in the home other users can still read, write or enter.
    exposed: Vec<cairn_node::home::Exposed>,
    /// Paths this start made private (they were open to other users).
    tightened: &'a [cairn_node::home::Exposed],
    /// Whether search uses the meaning tier (`[search] semantic`).
    semantic: bool,
    /// Records with a meaning vector, and records waiting for one.
    vectors: cairn_node::store::VectorCounts,
    /// How many stores were found that this cairn does not understand.
    not_understood: usize,
    /// Those stores: agent, path, what was found, release when known.
    not_understood_stores: Vec<super::sources::NotUnderstood>,
}

/// Runs `cairn status`.
pub fn run(global: &GlobalArgs, args: &JsonArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let stats = node.stats()?;
    let (semantic, vectors) = node.semantic_status()?;
    let cfg = node.config();
    let exposed = node.exposed();
    let not_understood_stores = super::sources::not_understood(&node)?;
    let st = Status {
        node_id: node.identity().id().to_string(),
        node_short_id: node.identity().short_id(),
        node_name: &cfg.node_name,
        home: cfg.home.display().to_string(),
        database: cfg.db_path.display().to_string(),
        config: cfg.config_path.as_ref().map(|p| p.display().to_string()),
        schema_version: cairn_node::store::SCHEMA_VERSION,
        stats: &stats,
        wired: super::install::ctx(global)
            .map(|c| super::install::wired(&c))
            .unwrap_or_default(),
        listen_addr: cairn_node::daemon::running_state(&cfg.home)
            .map(|s| s.listen_addr.to_string()),
        peers: cairn_node::sync::peers::PeerTable::load(&cfg.home)
            .map(|t| t.peers().len())
            .unwrap_or(0),
        service: super::install::service_plan(global)
            .ok()
            .flatten()
            .map(|(plan, runner)| crate::install::service::state(&plan, &runner)),
        freshness: node.freshness().ok(),
        private: exposed.is_empty(),
        exposed,
        tightened: node.tightened(),
        semantic,
        vectors,
        not_understood: not_understood_stores.len(),
        not_understood_stores,
    };
    if args.json {
        return output::json(&st);
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!("node      {} ({})", st.node_name, st.node_short_id),
    )?;
    output::line(&mut out, &format!("home      {}", st.home))?;
    output::line(
        &mut out,
        &format!(
            "config    {}",
            st.config.as_deref().unwrap_or("(none; built-in defaults)")
        ),
    )?;
    output::line(
        &mut out,
        &format!(
            "database  {} ({:.1} MB, schema v{})",
            st.database,
            stats.db_bytes as f64 / 1e6,
            st.schema_version
        ),
    )?;
    output::line(
        &mut out,
        &format!(
            "memory    {} records in {} sessions, last indexed {}",
            stats.records,
            stats.sessions,
            output::short_time(stats.last_indexed_ms)
        ),
    )?;
    output::line(
        &mut out,
        &match &st.listen_addr {
            Some(a) => format!("sync      serving on {a}, {} paired machine(s)", st.peers),
            None => format!(
                "sync      not serving (run `cairn serve`), {} paired machine(s)",
                st.peers
            ),
        },
    )?;
    output::line(
        &mut out,
        &if st.semantic {
            format!(
                "semantic  on: {} records with meaning vectors, {} waiting",
                st.vectors.with_vector, st.vectors.pending
            )
        } else {
            "semantic  off ([search] semantic = false): search by words only".to_owned()
        },
    )?;
    output::line(&mut out, &service_line(st.service.as_ref()))?;
    if let Some(f) = &st.freshness {
        output::line(&mut out, &freshness_line(f, st.listen_addr.is_some()))?;
    }
    for e in st.tightened {
        output::line(
            &mut out,
            &format!(
                "privacy   made {} private (it was {:o}, open to other users)",
                e.path.display(),
                e.mode
            ),
        )?;
    }
    if st.private {
        output::line(&mut out, "privacy   home readable only by you")?;
    } else {
        for e in &st.exposed {
            output::line(
                &mut out,
                &format!(
                    "privacy   WARNING: {} is open to other users (mode {:o}); run chmod go-rwx on it",
                    e.path.display(),
                    e.mode
                ),
            )?;
        }
    }
    if st.wired.is_empty() {
        output::line(&mut out, "wired     into no agent yet: run `cairn install`")?;
    } else {
        for (i, w) in st.wired.iter().enumerate() {
            let label = if i == 0 { "wired" } else { "" };
            output::line(
                &mut out,
                &format!("{label:<9} {} {} in {}", w.agent, w.what.label(), w.path),
            )?;
        }
    }
    for n in &st.not_understood_stores {
        output::line(
            &mut out,
            &format!(
                "sources   {}: {} ({}); see `cairn sources`",
                n.agent,
                output::printable(&n.summary()),
                n.path
            ),
        )?;
    }
    if stats.agents.is_empty() {
        output::line(&mut out, "no agent history indexed yet: run `cairn index`")?;
        return Ok(());
    }
    output::line(&mut out, "")?;
    output::line(
        &mut out,
        &format!(
            "{:<12} {:>7} {:>9} {:>9} {:>8}  redactions",
            "agent", "stores", "sessions", "records", "skipped"
        ),
    )?;
    for (agent, a) in &stats.agents {
        let red: Vec<String> = a
            .redactions
            .iter()
            .map(|(k, n)| format!("{k}:{n}"))
            .collect();
        let mut stores = a.sources.to_string();
        if a.missing_sources > 0 {
            stores.push_str(&format!(" ({} gone)", a.missing_sources));
        }
        output::line(
            &mut out,
            &format!(
                "{:<12} {:>7} {:>9} {:>9} {:>8}  {}",
                agent,
                stores,
                a.sessions,
                a.records,
                a.skipped,
                if red.is_empty() {
                    "-".to_owned()
                } else {
                    red.join(" ")
                }
            ),
        )?;
        if a.failing > 0 {
            output::line(
                &mut out,
                &format!(
                    "{:<12} {} store(s) failed on the last pass: see `cairn sources`",
                    "", a.failing
                ),
            )?;
        }
    }
    Ok(())
}

fn service_line(s: Option<&crate::install::service::ServiceState>) -> String {
    match s {
        None => {
            "service   none on this system: run `cairn serve` under your own supervisor".to_owned()
        }
        Some(s) if !s.installed => {
            "service   not installed: `cairn install` sets it up (or run `cairn serve`)".to_owned()
        }
        Some(s) => {
            let state = match s.running {
                Some(true) => "running",
                Some(false) => "installed, not running",
                None => "installed (the service manager could not be asked)",
            };
            format!("service   {state} ({})", s.path)
        }
    }
}

fn freshness_line(f: &cairn_node::indexer::Freshness, serving: bool) -> String {
    let newest = |ms: Option<i64>| output::short_time(ms);
    if f.pending == 0 {
        format!(
            "fresh     all {} store(s) indexed (newest change {})",
            f.stores,
            newest(f.newest_change_ms)
        )
    } else {
        let who = if serving {
            "the daemon is reading them"
        } else {
            "`cairn index` reads them, or keep `cairn serve` running"
        };
        format!(
            "fresh     {} of {} store(s) changed since indexed (newest change {}, newest indexed {}); {who}",
            f.pending,
            f.stores,
            newest(f.newest_change_ms),
            newest(f.newest_indexed_ms)
        )
    }
}
