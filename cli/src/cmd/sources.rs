//! `cairn sources`: the agent stores found on this machine.

use std::collections::HashMap;

use serde::Serialize;

use crate::args::{GlobalArgs, JsonArgs};
use crate::output;

#[derive(Serialize)]
struct Store {
    agent: String,
    path: String,
    reader: String,
    present: bool,
    indexed: bool,
    records: u64,
    skipped: u64,
    error: Option<String>,
}

/// One agent: where it was looked for, and what was found there that cannot be read.
#[derive(Serialize)]
struct AgentPaths {
    agent: &'static str,
    disabled: bool,
    checked: Vec<String>,
    stores: usize,
    records: u64,
    unreadable: Vec<UnreadableStore>,
}

#[derive(Serialize)]
struct UnreadableStore {
    path: String,
    reason: &'static str,
}

/// Runs `cairn sources`.
pub fn run(global: &GlobalArgs, args: &JsonArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let known: HashMap<String, (bool, u64, Option<String>, u64)> = node
        .store()
        .list_sources()?
        .into_iter()
        .map(|r| (r.path, (r.missing, r.skipped, r.last_error, r.records)))
        .collect();
    let cfg = node.config();
    let mut stores = Vec::new();
    let mut agents = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for source in cairn_node::sources::registry() {
        let disabled = cfg.disabled.iter().any(|d| d == source.agent());
        let first = stores.len();
        agents.push(AgentPaths {
            agent: source.agent(),
            disabled,
            checked: source
                .roots(&cfg.locations)
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            stores: 0,
            records: 0,
            unreadable: source
                .unreadable(&cfg.locations)
                .into_iter()
                .map(|u| UnreadableStore {
                    path: u.path.display().to_string(),
                    reason: u.reason,
                })
                .collect(),
        });
        for f in source.discover(&cfg.locations) {
            let path = f.path.display().to_string();
            let state = known.get(&path);
            seen.insert(path.clone());
            stores.push(Store {
                agent: source.agent().to_owned(),
                reader: if disabled {
                    "disabled".to_owned()
                } else {
                    format!("{:?}", f.reader).to_lowercase()
                },
                indexed: state.is_some(),
                records: state.map_or(0, |s| s.3),
                skipped: state.map_or(0, |s| s.1),
                // A folder that cannot be listed is reported even before
                // an indexing pass has recorded it.
                error: cairn_node::sources::common::folder_error(&f.path)
                    .or_else(|| state.and_then(|s| s.2.clone())),
                present: true,
                path,
            });
        }
        if let Some(a) = agents.last_mut() {
            a.stores = stores.len() - first;
            a.records = stores[first..].iter().map(|s: &Store| s.records).sum();
        }
    }
    for r in node.store().list_sources()? {
        if !seen.contains(&r.path) {
            stores.push(Store {
                agent: r.agent,
                path: r.path,
                reader: "-".to_owned(),
                present: false,
                indexed: true,
                records: r.records,
                skipped: r.skipped,
                error: r.last_error,
            });
        }
    }
    // A file named after a session id that holds a secret is shown
    // redacted (the index keeps the real path, to read it again).
    let shown = |p: &str| cairn_node::redact::fields::shown_path(p).into_owned();
    for s in &mut stores {
        s.path = shown(&s.path);
        s.error = s.error.as_deref().map(shown);
    }
    for u in agents.iter_mut().flat_map(|a| a.unreadable.iter_mut()) {
        u.path = shown(&u.path);
    }
    if args.json {
        return output::json(&serde_json::json!({ "sources": stores, "agents": agents }));
    }
    let mut out = output::stdout();
    let unreadable = agents.iter().any(|a| !a.unreadable.is_empty());
    if stores.is_empty() && !unreadable {
        output::line(
            &mut out,
            "no agent history found on this machine; looked in:",
        )?;
        for a in &agents {
            output::line(&mut out, &format!("{}: {}", a.agent, a.checked.join(", ")))?;
        }
        return Ok(());
    }
    let mut per_agent: std::collections::BTreeMap<&str, (usize, u64)> =
        std::collections::BTreeMap::new();
    for s in &stores {
        let e = per_agent.entry(&s.agent).or_default();
        e.0 += 1;
        e.1 += s.records;
    }
    for a in agents.iter().filter(|a| !a.unreadable.is_empty()) {
        per_agent.entry(a.agent).or_default();
    }
    for (agent, (n, records)) in per_agent {
        output::line(
            &mut out,
            &format!("{agent}: {n} store(s), {records} records"),
        )?;
        for s in stores.iter().filter(|s| s.agent == agent) {
            let mut note = String::new();
            if !s.present {
                note.push_str(" [gone; records kept]");
            } else if !s.indexed {
                note.push_str(" [not indexed yet]");
            }
            if s.skipped > 0 {
                note.push_str(&format!(" [{} malformed skipped]", s.skipped));
            }
            if let Some(e) = &s.error {
                note.push_str(&format!(" [error: {e}]"));
            }
            output::line(
                &mut out,
                &format!("  {} ({} records){}", s.path, s.records, note),
            )?;
        }
        for a in agents.iter().filter(|a| a.agent == agent) {
            for u in &a.unreadable {
                output::line(
                    &mut out,
                    &format!("  {} [found, not readable: {}]", u.path, u.reason),
                )?;
            }
        }
    }
    Ok(())
}
