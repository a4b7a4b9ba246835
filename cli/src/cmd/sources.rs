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
    let mut seen = std::collections::HashSet::new();
    for source in cairn_node::sources::registry() {
        let disabled = cfg.disabled.iter().any(|d| d == source.agent());
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
                error: state.and_then(|s| s.2.clone()),
                present: true,
                path,
            });
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
    if args.json {
        return output::json(&serde_json::json!({ "sources": stores }));
    }
    let mut out = output::stdout();
    if stores.is_empty() {
        return output::line(&mut out, "no agent history found on this machine");
    }
    let mut per_agent: std::collections::BTreeMap<&str, (usize, u64)> =
        std::collections::BTreeMap::new();
    for s in &stores {
        let e = per_agent.entry(&s.agent).or_default();
        e.0 += 1;
        e.1 += s.records;
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
    }
    Ok(())
}
