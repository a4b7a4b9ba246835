//! `cairn index`: one incremental pass, unless a `cairn serve` for this
//! home keeps the index fresh: then it asks that daemon for a pass now
//! (through a file in the private home the daemon watches), waits for it
//! (bounded) and shows it, instead of running a second pass that would
//! only compete with the daemon for the database.

use anyhow::Context;
use cairn_node::daemon::{self, LastPass, ServeState};
use cairn_node::indexer::IndexReport;
use cairn_node::node::{IndexRequest, Node};
use serde::Serialize;

use crate::args::{GlobalArgs, IndexArgs};
use crate::output;

/// How long `cairn index` waits for the pass it asked a daemon for (the
/// daemon's passes stop taking on work after 5 s).
const PASS_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// `cairn index --json` when a daemon serves the home.
#[derive(Serialize)]
struct Served<'a> {
    /// The daemon that keeps the index fresh.
    served_by: &'a ServeState,
    /// Whether `last_pass` is the pass asked for now (it started after the
    /// request, so it read everything written before this command).
    fresh: bool,
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
    // The walk of the agents' folders overlaps opening the node; when the
    // survey of the last pass still holds, it is all there is to do.
    let mut walk = Node::start_walk(&cfg);
    let home = cfg.home.clone();
    let mut node = Node::open(cfg)
        .with_context(|| format!("cannot open the cairn node in {}", home.display()))?;
    let report = match node.unchanged_since_survey(&mut walk) {
        Some(report) => {
            // The walk is over and what it found is not needed: the process
            // ends next and gives its memory back at once, sooner than
            // freeing every store's path one at a time.
            std::mem::forget(walk);
            report
        }
        None => super::with_bar(!args.quiet && !args.json, |on_progress| {
            let req = IndexRequest::new(super::now_ms())
                .walked(walk)
                .leaving_survey()
                .progress(on_progress);
            Ok(node.index(req)?)
        })?,
    };
    show(&report, started, args)
}

fn show(report: &IndexReport, started: std::time::Instant, args: &IndexArgs) -> anyhow::Result<()> {
    if args.json {
        output::json(report)?;
    } else if !args.quiet {
        let mut out = output::stdout();
        output::line(&mut out, &summary(report, started.elapsed().as_secs_f64()))?;
        for (path, why) in &report.failed {
            output::line(&mut out, &format!("  not read this pass: {path}: {why}"))?;
        }
        for (path, why) in &report.rebuilt {
            output::line(&mut out, &format!("  damaged, written anew: {path}: {why}"))?;
        }
    }
    unwritten(&report.unwritten)
}

/// An error naming every derived file a pass could not write (a full
/// disk, a file in the way): the records are stored, but searches slow
/// down until a pass writes them, so the command must not say all is well.
fn unwritten(files: &[(String, String)]) -> anyhow::Result<()> {
    match files {
        [] => Ok(()),
        _ => {
            let each: Vec<String> = files
                .iter()
                .map(|(p, why)| format!("{p} ({why})"))
                .collect();
            anyhow::bail!(
                "the records are stored, but these derived files could not be written: {}",
                each.join("; ")
            )
        }
    }
}

fn summary(report: &IndexReport, secs: f64) -> String {
    // Vectors beyond the new records' (a lost or damaged vector file, an
    // interrupted pass) are what such a pass spent its time on.
    let again = match report.embedded.saturating_sub(report.added) {
        0 => String::new(),
        n => format!(", meaning vectors made again over {n} earlier records"),
    };
    format!(
        "indexed {} of {} stores in {secs:.2}s: {} new records, {} removed, {} malformed lines skipped, {:.1} MB read{again}",
        report.changed,
        report.stores,
        report.added,
        report.removed,
        report.skipped,
        report.bytes_read as f64 / 1e6
    )
}

/// A daemon serves the home: ask it for a pass, wait for it (bounded),
/// and report it.
fn served(home: &std::path::Path, state: &ServeState, args: &IndexArgs) -> anyhow::Result<()> {
    let asked = daemon::request_pass(home, super::now_ms()).ok();
    let is_fresh =
        |p: &Option<LastPass>| asked.is_some_and(|t| p.as_ref().is_some_and(|p| p.started_ms >= t));
    let deadline = std::time::Instant::now() + PASS_WAIT;
    let mut pause = std::time::Duration::from_millis(5);
    let mut last = daemon::last_pass(home, state);
    while asked.is_some()
        && !is_fresh(&last)
        && std::time::Instant::now() < deadline
        && daemon::running_state(home).is_some_and(|s| s.pid == state.pid)
    {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
        last = daemon::last_pass(home, state);
    }
    let fresh = is_fresh(&last);
    // What the daemon's pass asked for could not write fails this command too.
    let failed = match (&last, fresh) {
        (Some(p), true) => p.report.unwritten.clone(),
        _ => Vec::new(),
    };
    if args.json {
        output::json(&Served {
            served_by: state,
            fresh,
            last_pass: last.as_ref(),
        })?;
        return unwritten(&failed);
    }
    if args.quiet {
        return unwritten(&failed);
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "cairn serve (pid {}) keeps this index fresh; it was asked for a pass instead of running one here",
            state.pid
        ),
    )?;
    let now = super::now_ms();
    match &last {
        Some(p) => {
            let ago = (now - p.finished_ms).max(0) as f64 / 1000.0;
            let which = if fresh {
                "its pass now".to_owned()
            } else {
                format!("it has not run that pass yet; its last pass, {ago:.1}s ago")
            };
            output::line(
                &mut out,
                &format!("{which}: {}", summary(&p.report, p.took_ms as f64 / 1000.0)),
            )?;
            for (path, why) in &p.report.failed {
                output::line(&mut out, &format!("  not read that pass: {path}: {why}"))?;
            }
            for (path, why) in &p.report.rebuilt {
                output::line(&mut out, &format!("  damaged, written anew: {path}: {why}"))?;
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
    unwritten(&failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_vectors_made_beyond_the_new_records() {
        let mut r = IndexReport {
            added: 100,
            embedded: 100,
            ..IndexReport::default()
        };
        assert!(
            !summary(&r, 1.0).contains("vectors"),
            "{}",
            summary(&r, 1.0)
        );
        r.embedded = 300;
        assert!(
            summary(&r, 1.0).ends_with(", meaning vectors made again over 200 earlier records"),
            "{}",
            summary(&r, 1.0)
        );
    }
}
