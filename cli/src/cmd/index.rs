//! `cairn index`: one incremental pass.

use crate::args::{GlobalArgs, IndexArgs};
use crate::output;

/// Runs `cairn index`.
pub fn run(global: &GlobalArgs, args: &IndexArgs) -> anyhow::Result<()> {
    let mut node = super::open(global)?;
    let started = std::time::Instant::now();
    let report = super::refresh(&mut node, !args.quiet && !args.json, None)?;
    if args.json {
        return output::json(&report);
    }
    if !args.quiet {
        let mut out = output::stdout();
        output::line(
            &mut out,
            &format!(
                "indexed {} of {} stores in {:.2}s: {} new records, {} removed, {} malformed lines skipped, {:.1} MB read",
                report.changed,
                report.stores,
                started.elapsed().as_secs_f64(),
                report.added,
                report.removed,
                report.skipped,
                report.bytes_read as f64 / 1e6
            ),
        )?;
        for (path, why) in &report.failed {
            output::line(&mut out, &format!("  not read this pass: {path}: {why}"))?;
        }
    }
    Ok(())
}
