//! `cairn search`: refresh incrementally (unless `cairn serve` runs for
//! this home and does that), then rank and print.

use anyhow::bail;
use cairn_node::record::Role;
use cairn_node::search::{SearchOptions, parse_since};
use serde::Serialize;

use crate::args::{GlobalArgs, SearchArgs};
use crate::output;

#[derive(Serialize)]
struct JsonOut<'a> {
    hits: &'a [cairn_node::search::Hit],
}

/// How long `cairn search` may spend reading new history before it answers.
const REFRESH_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `cairn search`.
pub fn run(global: &GlobalArgs, args: &SearchArgs) -> anyhow::Result<()> {
    let now = super::now_ms();
    let mut roles = Vec::new();
    for r in &args.role {
        for part in r.split(',') {
            match Role::parse(part.trim()) {
                Some(role) => roles.push(role),
                None => bail!(
                    "unknown role {part:?}; use user, assistant, tool_call, tool_output or note"
                ),
            }
        }
    }
    let since_ms = match &args.since {
        Some(s) => match parse_since(s, now) {
            Some(t) => Some(t),
            None => {
                bail!("cannot read --since {s:?}; use 90m, 36h, 7d, 2w, or a date like 2026-01-31")
            }
        },
        None => None,
    };
    let mut node = super::open(global)?;
    // A running daemon keeps the index fresh; reading here would only
    // compete with it for the database.
    if !args.no_refresh && !cairn_node::sync::daemon::is_serving(&node.config().home) {
        // Bounded: a first run on a large history answers from what is
        // indexed so far instead of making the user wait for all of it.
        let report = super::refresh(&mut node, !args.json, Some(REFRESH_BUDGET))?;
        if report.deferred > 0 {
            eprintln!(
                "cairn: {} store(s) not indexed yet; answers cover what is. Run `cairn index` to finish.",
                report.deferred
            );
        }
    }
    let opts = SearchOptions {
        limit: usize::from(args.limit),
        agent: args.agent.clone(),
        project: args.project.clone(),
        machine: args.machine.clone(),
        since_ms,
        roles,
        session: args.session.clone(),
        now_ms: now,
    };
    let query = args.query.join(" ");
    let hits = node.search(&query, &opts)?;
    if args.json {
        return output::json(&JsonOut { hits: &hits });
    }
    let mut out = output::stdout();
    if hits.is_empty() {
        return output::line(&mut out, "no matches");
    }
    for (i, h) in hits.iter().enumerate() {
        let when = h
            .time
            .as_deref()
            .map(|t| t.replace('T', " ").trim_end_matches('Z').to_owned());
        output::line(
            &mut out,
            &format!(
                "{}. {} · {} · {} · {} · {}",
                i + 1,
                h.agent,
                h.project.as_deref().unwrap_or("-"),
                h.machine,
                when.as_deref().unwrap_or("-"),
                h.role
            ),
        )?;
        output::line(&mut out, &format!("   {}", output::printable(&h.snippet)))?;
        let short: String = h.session_id.chars().take(12).collect();
        let more = if h.matches > 1 {
            format!(" ({} matches)", h.matches)
        } else {
            String::new()
        };
        output::line(&mut out, &format!("   cairn show {short}{more}"))?;
    }
    Ok(())
}
