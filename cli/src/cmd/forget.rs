//! `cairn forget`: remove a session, a project or the records matching a
//! query, here and (through a tombstone in this node's log) on every paired
//! machine. Shows what it would remove and does nothing without `--yes`.

use anyhow::bail;
use cairn_node::node::{ForgetPlan, ForgetRequest};
use cairn_node::store::ForgetReport;

use crate::args::{ForgetArgs, GlobalArgs};
use crate::output;

/// Records listed before "... and N more".
const SHOWN: usize = 20;

/// Runs `cairn forget`.
pub fn run(global: &GlobalArgs, args: &ForgetArgs) -> anyhow::Result<()> {
    let req = if let Some(s) = &args.session {
        ForgetRequest::Session(s.clone())
    } else if let Some(p) = &args.project {
        ForgetRequest::Project(p.clone())
    } else if let Some(q) = &args.query {
        ForgetRequest::Query(q.clone())
    } else {
        bail!("say what to forget: --session ID-PREFIX, --project PATH or --query TEXT");
    };
    let mut node = super::open(global)?;
    let plan = node.plan_forget(&req)?;
    if !args.yes {
        print_plan(&plan, args, None)?;
        if args.dry_run {
            return Ok(());
        }
        bail!(
            "nothing was forgotten: re-run with --yes to forget these {} records here and on every paired machine",
            plan.records.len()
        );
    }
    let report = node.forget(&plan, super::now_ms())?;
    print_plan(&plan, args, Some(&report))
}

fn print_plan(
    plan: &ForgetPlan,
    args: &ForgetArgs,
    done: Option<&ForgetReport>,
) -> anyhow::Result<()> {
    if args.json {
        return output::json(&serde_json::json!({
            "forgotten": done.is_some(),
            "records": plan.records,
            "report": done,
        }));
    }
    let mut out = output::stdout();
    let sessions: std::collections::BTreeSet<(&str, &str)> = plan
        .records
        .iter()
        .map(|r| (r.agent.as_str(), r.session_id.as_str()))
        .collect();
    let head = match done {
        Some(r) => format!(
            "forgot {} records in {} sessions{}; the forget reaches every paired machine at its next sync",
            r.records,
            sessions.len(),
            if r.notes > 0 {
                format!(" (and {} notes from the notes file)", r.notes)
            } else {
                String::new()
            }
        ),
        None => format!(
            "would forget {} records in {} sessions:",
            plan.records.len(),
            sessions.len()
        ),
    };
    output::line(&mut out, &head)?;
    if done.is_none() {
        for r in plan.records.iter().take(SHOWN) {
            let line = format!(
                "  {}  {}  {}  {}  {}",
                output::short_time(r.time_ms),
                r.agent,
                r.session_id,
                r.role,
                r.project.as_deref().unwrap_or("-")
            );
            output::line(&mut out, &output::printable(&line))?;
        }
        if plan.records.len() > SHOWN {
            output::line(
                &mut out,
                &format!("  ... and {} more", plan.records.len() - SHOWN),
            )?;
        }
    }
    Ok(())
}
