//! `cairn sources`: the agent stores found on this machine, and what was
//! found there that this cairn cannot read or does not understand.

use std::collections::HashMap;

use serde::Serialize;

use cairn_node::sources::UnreadableKind;
use cairn_node::sources::layout::{self, NOT_UNDERSTOOD};

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
    /// Why this store, though read, gave nothing this cairn understands
    /// (a database of an unknown schema, a file with no line of a known shape).
    not_understood: Option<String>,
}

/// One agent: where it was looked for, and what was found there that cannot be read.
#[derive(Serialize)]
struct AgentPaths {
    agent: &'static str,
    disabled: bool,
    checked: Vec<String>,
    stores: usize,
    records: u64,
    /// Found but not read: `kind` `closed` (encrypted, on a server) or
    /// `not_understood` (a layout or version this cairn does not know).
    unreadable: Vec<UnreadableStore>,
    /// Entries of `unreadable` not understood, plus stores read but not understood.
    not_understood: usize,
}

#[derive(Serialize)]
struct UnreadableStore {
    path: String,
    reason: String,
    kind: UnreadableKind,
    release: Option<String>,
}

/// One store found but not understood, for `cairn status` and `cairn doctor`.
#[derive(Debug, Clone, Serialize)]
pub struct NotUnderstood {
    /// The agent whose folder it is in.
    pub agent: String,
    /// The folder or file.
    pub path: String,
    /// What was found, in a few words.
    pub what: String,
    /// The agent release or schema version that wrote it, when known.
    pub release: Option<String>,
}

impl NotUnderstood {
    /// "found, not understood: <what>, <release>" as `cairn sources` prints it.
    pub fn summary(&self) -> String {
        let what = self
            .what
            .strip_prefix(NOT_UNDERSTOOD)
            .map_or(self.what.as_str(), |w| {
                w.trim_start_matches(':').trim_start()
            });
        match &self.release {
            Some(r) => format!("{NOT_UNDERSTOOD}: {what}, release {r}"),
            None => format!("{NOT_UNDERSTOOD}: {what}"),
        }
    }
}

/// Every store of an enabled agent found but not understood: folders of a
/// layout no reader knows (a walk of the agents' history folders), and
/// stores the last index pass read without understanding.
pub fn not_understood(node: &cairn_node::node::Node) -> anyhow::Result<Vec<NotUnderstood>> {
    let cfg = node.config();
    let mut out = Vec::new();
    for source in cairn_node::sources::registry() {
        if cfg.disabled.iter().any(|d| d == source.agent()) {
            continue;
        }
        let found = source.discover(&cfg.locations);
        for u in layout::not_understood(source.as_ref(), &cfg.locations, &found) {
            out.push(NotUnderstood {
                agent: source.agent().to_owned(),
                path: u.path.display().to_string(),
                what: u.reason,
                release: u.release,
            });
        }
    }
    for r in node.store().list_sources()? {
        // Gone since the last pass (not marked yet): nothing left to understand.
        if r.missing || cfg.disabled.contains(&r.agent) || !std::path::Path::new(&r.path).exists() {
            continue;
        }
        if let Some(what) =
            layout::store_not_understood(r.records, r.skipped, r.last_error.as_deref())
        {
            out.push(NotUnderstood {
                agent: r.agent,
                path: r.path,
                what,
                release: None,
            });
        }
    }
    Ok(out)
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
    // The project folders as a pass sees them (walked for when due).
    let mut locations = cfg.locations.clone();
    cairn_node::projects::refresh(
        &mut locations,
        super::now_ms(),
        &cairn_node::projects::LIMITS,
    );
    let mut stores = Vec::new();
    let mut agents = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for source in cairn_node::sources::registry() {
        let disabled = cfg.disabled.iter().any(|d| d == source.agent());
        let first = stores.len();
        let found = source.discover(&locations);
        agents.push(AgentPaths {
            agent: source.agent(),
            disabled,
            checked: source
                .roots(&locations)
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            stores: 0,
            records: 0,
            unreadable: layout::unread(source.as_ref(), &locations, &found)
                .into_iter()
                .map(|u| UnreadableStore {
                    path: u.path.display().to_string(),
                    reason: u.reason,
                    kind: u.kind,
                    release: u.release,
                })
                .collect(),
            not_understood: 0,
        });
        for f in found {
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
                not_understood: state
                    .and_then(|s| layout::store_not_understood(s.3, s.1, s.2.as_deref())),
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
            a.not_understood = a
                .unreadable
                .iter()
                .filter(|u| u.kind == UnreadableKind::NotUnderstood)
                .count()
                + stores[first..]
                    .iter()
                    .filter(|s: &&Store| s.not_understood.is_some())
                    .count();
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
                not_understood: None,
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
            if let Some(n) = &s.not_understood {
                note.push_str(&format!(" [{n}]"));
            } else {
                if s.skipped > 0 {
                    note.push_str(&format!(" [{} malformed skipped]", s.skipped));
                }
                if let Some(e) = &s.error {
                    note.push_str(&format!(" [error: {e}]"));
                }
            }
            output::line(
                &mut out,
                &format!("  {} ({} records){}", s.path, s.records, note),
            )?;
        }
        for a in agents.iter().filter(|a| a.agent == agent) {
            for u in &a.unreadable {
                let note = match (u.kind, &u.release) {
                    (UnreadableKind::Closed, _) => format!("found, not readable: {}", u.reason),
                    (UnreadableKind::NotUnderstood, Some(r)) => {
                        format!("{NOT_UNDERSTOOD}: {}, release {r}", u.reason)
                    }
                    (UnreadableKind::NotUnderstood, None) => {
                        format!("{NOT_UNDERSTOOD}: {}", u.reason)
                    }
                };
                output::line(
                    &mut out,
                    &format!("  {} [{}]", u.path, output::printable(&note)),
                )?;
            }
        }
    }
    Ok(())
}
