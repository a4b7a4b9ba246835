//! `cairn demo`: the whole local pipeline on any machine, even one with no
//! agent history. It lays the embedded fixture histories (eight agents,
//! planted decisions and fake secrets) into a temporary home, indexes them,
//! asks a few questions the way a person would, and cleans up.

use anyhow::Context;
use cairn_node::config::{Config, Env};
use cairn_node::node::Node;
use cairn_node::search::SearchOptions;

use crate::args::DemoArgs;
use crate::output;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/demo_fixtures.rs"));
}

/// The questions the demo asks.
const QUESTIONS: &[&str] = &[
    "why did we pin hyper?",
    "which search engine did we pick for acme and why",
    "job queue redis",
    "为什么选择 tantivy",
    "почему отключили кэширование",
    "src/webhooks/payment.ts retries",
];

/// Runs `cairn demo`.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("cairn-demo-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    for (rel, bytes) in embedded::FILES {
        let dest = dir.path().join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&dest, bytes).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    let env = Env {
        home: Some(dir.path().to_path_buf()),
        hostname: Some("demo-laptop".to_owned()),
        ..Env::default()
    };
    let mut node = Node::open(Config::resolve(&env, None)?)?;
    let started = std::time::Instant::now();
    let report = node.index(super::now_ms(), &mut |_| {})?;
    let stats = node.stats()?;
    let mut results = Vec::new();
    for q in QUESTIONS {
        let opts = SearchOptions {
            limit: 2,
            now_ms: super::now_ms(),
            ..SearchOptions::default()
        };
        results.push((*q, node.search(q, &opts)?));
    }
    if args.json {
        let answers: Vec<_> = results
            .iter()
            .map(|(q, hits)| serde_json::json!({ "query": q, "hits": hits }))
            .collect();
        return output::json(
            &serde_json::json!({ "index": report, "stats": stats, "answers": answers }),
        );
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "cairn demo: indexed {} records in {} sessions from {} agents in {:.0} ms ({} malformed lines skipped and counted)",
            stats.records,
            stats.sessions,
            stats.agents.len(),
            started.elapsed().as_secs_f64() * 1000.0,
            report.skipped
        ),
    )?;
    let redactions: u64 = stats
        .agents
        .values()
        .flat_map(|a| a.redactions.values())
        .sum();
    output::line(
        &mut out,
        &format!("secrets redacted before storage: {redactions}"),
    )?;
    for (q, hits) in &results {
        output::line(&mut out, "")?;
        output::line(&mut out, &format!("? {q}"))?;
        match hits.first() {
            None => output::line(&mut out, "  (no match)")?,
            Some(h) => {
                output::line(
                    &mut out,
                    &format!(
                        "  {} · {} · {} · session {}",
                        h.agent,
                        h.project.as_deref().unwrap_or("-"),
                        h.machine,
                        short(&h.session_id)
                    ),
                )?;
                output::line(&mut out, &format!("  {}", output::printable(&h.snippet)))?;
            }
        }
    }
    output::line(&mut out, "")?;
    output::line(
        &mut out,
        "Your own history: `cairn index`, then `cairn search -- \"your question\"`.",
    )?;
    Ok(())
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}
