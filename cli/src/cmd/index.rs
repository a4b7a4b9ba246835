//! `cairn index`: one incremental pass, unless a `cairn serve` for this
//! home keeps the index fresh: then it says so and shows that daemon's
//! last pass instead of running a second one that would only compete with
//! it for the database.

use anyhow::Context;
use cairn_node::indexer::IndexReport;
use cairn_node::node::Node;
use cairn_node::sync::daemon::{self, LastPass, ServeState};
use serde::Serialize;

use crate::args::{GlobalArgs, IndexArgs};
use crate::output;

/// `cairn index --json` when a daemon serves the home.
#[derive(Serialize)]
struct Served<'a> {
    /// The daemon that keeps the index fresh.
    served_by: &'a ServeState,
    /// Its last pass, if it has finished one.
    last_pass: Option<&'a LastPass>,
}

/// Runs `cairn index`.
pub fn run(global: &GlobalArgs, args: &IndexArgs) -> anyhow::Result<()> {
    let cfg = super::config(global)?;
    if let Some(state) = daemon::running_state(&cfg.home) {
        return served(&cfg.home, &state, args);
    }
    let started = std::time::Instant::now();
    // The walk of the agents' folders overlaps opening the node.
    let walk = Node::start_walk(&cfg);
    let home = cfg.home.clone();
    let mut node = Node::open(cfg)
        .with_context(|| format!("cannot open the cairn node in {}", home.display()))?;
    let report = super::refresh_walked(&mut node, walk, !args.quiet && !args.json, None)?;
    if args.json {
        return output::json(&report);
    }
    if !args.quiet {
        let mut out = output::stdout();
        output::line(&mut out, &summary(&report, started.elapsed().as_secs_f64()))?;
        for (path, why) in &report.failed {
            output::line(&mut out, &format!("  not read this pass: {path}: {why}"))?;
        }
    }
    Ok(())
}

fn summary(report: &IndexReport, secs: f64) -> String {
    format!(
        "indexed {} of {} stores in {secs:.2}s: {} new records, {} removed, {} malformed lines skipped, {:.1} MB read",
        report.changed,
        report.stores,
        report.added,
        report.removed,
        report.skipped,
        report.bytes_read as f64 / 1e6
    )
}

/// A daemon serves the home: report it and its last pass.
fn served(home: &std::path::Path, state: &ServeState, args: &IndexArgs) -> anyhow::Result<()> {
    let last = daemon::last_pass(home, state);
    if args.json {
        return output::json(&Served {
            served_by: state,
            last_pass: last.as_ref(),
        });
    }
    if args.quiet {
        return Ok(());
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "cairn serve (pid {}) keeps this index fresh; no pass of its own was run here",
            state.pid
        ),
    )?;
    let now = super::now_ms();
    match &last {
        Some(p) => {
            let ago = (now - p.finished_ms).max(0) as f64 / 1000.0;
            output::line(
                &mut out,
                &format!(
                    "its last pass, {ago:.1}s ago: {}",
                    summary(&p.report, p.took_ms as f64 / 1000.0)
                ),
            )?;
            for (path, why) in &p.report.failed {
                output::line(&mut out, &format!("  not read that pass: {path}: {why}"))?;
            }
        }
        None => output::line(
            &mut out,
            &format!(
                "it has not finished a pass yet (it started {:.1}s ago)",
                (now - state.started_ms).max(0) as f64 / 1000.0
            ),
        )?,
    }
    Ok(())
}
