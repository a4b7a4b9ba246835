//! `cairn search`: refresh incrementally (unless `cairn serve` runs for
//! this home and does that), then rank and print.

use anyhow::{Context, bail};
use cairn_node::node::Node;
use cairn_node::record::Role;
use cairn_node::search::{SearchOptions, parse_since};
use serde::Serialize;

use crate::args::{GlobalArgs, SearchArgs};
use crate::output;

#[derive(Serialize)]
struct JsonOut<'a> {
    hits: &'a [cairn_node::search::Hit],
    /// Sessions that matched in all.
    total: usize,
    /// Sessions skipped before these.
    offset: usize,
}

/// How long `cairn search` may spend reading new history before it answers.
const REFRESH_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `cairn search`.
pub fn run(global: &GlobalArgs, args: &SearchArgs) -> anyhow::Result<()> {
    let now = super::now_ms();
    // The same checks as the MCP server's `search` tool.
    let query = args.query.join(" ");
    if query.trim().is_empty() {
        bail!("the query is empty; give words, a \"quoted phrase\", a path or an error message");
    }
    if let Some(agent) = &args.agent {
        let known: Vec<&str> = cairn_node::sources::registry()
            .iter()
            .map(|s| s.agent())
            .collect();
        if !known.contains(&agent.as_str()) {
            bail!("unknown --agent {agent:?}; use one of {}", known.join(", "));
        }
    }
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
    let cfg = super::config(global)?;
    let serving = cairn_node::daemon::is_serving(&cfg.home);
    let opts = SearchOptions {
        limit: usize::from(args.limit),
        agent: args.agent.clone(),
        project: args.project.clone(),
        machine: args.machine.clone(),
        since_ms,
        roles,
        session: args.session.clone(),
        now_ms: now,
        semantic: None, // filled in by `Node::search`
        lexical_only: args.lexical,
    };
    // A running daemon keeps the index fresh, and answers from a warm
    // connection what this process would answer cold.
    let served = match serving {
        true => cairn_node::daemon::search_socket::served(&cfg, &query, &opts, args.offset),
        false => None,
    };
    let page = match served {
        Some(page) => page,
        None => search_here(cfg, args, &query, &opts, serving)?,
    };
    print_page(args, &query, &page, now)
}

/// The page this process finds, refreshing the index first unless a
/// daemon keeps it fresh (`serving`) or `--no-refresh`.
fn search_here(
    cfg: cairn_node::config::Config,
    args: &SearchArgs,
    query: &str,
    opts: &SearchOptions,
    serving: bool,
) -> anyhow::Result<cairn_node::search::Page> {
    // A running daemon keeps the index fresh; reading here would only
    // compete with it for the database. Otherwise the walk of the agents'
    // folders starts now, overlapping opening the node.
    let walk = (!args.no_refresh && !serving).then(|| Node::start_walk(&cfg));
    let home = cfg.home.clone();
    let mut node = Node::open(cfg)
        .with_context(|| format!("cannot open the cairn node in {}", home.display()))?;
    node.for_one_search()?;
    let page = match walk {
        Some(walk) => {
            // The query runs while the walk surveys the agents' folders; it
            // runs again only if the pass then changes the index. Bounded:
            // a first run on a large history answers from what is indexed
            // so far instead of making the user wait for all of it.
            let deadline = std::time::Instant::now() + REFRESH_BUDGET;
            let refreshed = super::with_bar(!args.json, |on_progress| {
                Ok(node.search_page_refreshed(
                    query,
                    opts,
                    args.offset,
                    walk,
                    super::now_ms(),
                    Some(deadline),
                    on_progress,
                )?)
            })?;
            if refreshed.report.deferred > 0 {
                eprintln!(
                    "cairn: {} store(s) not indexed yet; answers cover what is. Run `cairn index` to finish.",
                    refreshed.report.deferred
                );
            } else if refreshed.report.vectors_left {
                eprintln!(
                    "cairn: some records have no meaning vectors yet; answers by meaning cover the rest. Run `cairn index` to finish."
                );
            }
            refreshed.page
        }
        None => node.search_page(query, opts, args.offset)?,
    };
    Ok(page)
}

/// Prints a page, as JSON with `--json`.
fn print_page(
    args: &SearchArgs,
    query: &str,
    page: &cairn_node::search::Page,
    now: i64,
) -> anyhow::Result<()> {
    let hits = &page.hits;
    if args.json {
        output::json(&JsonOut {
            hits,
            total: page.total,
            offset: page.offset,
        })?;
        return if hits.is_empty() {
            Err(crate::NoMatch.into())
        } else {
            Ok(())
        };
    }
    let mut out = output::stdout();
    if hits.is_empty() {
        if page.total > 0 {
            output::line(
                &mut out,
                &format!(
                    "no sessions after the first {}: {} matched in all",
                    page.offset, page.total
                ),
            )?;
        } else {
            output::line(&mut out, "no matches")?;
        }
        return Err(crate::NoMatch.into());
    }
    let color = output::color_enabled();
    let words = page.highlight_words(&cairn_node::search::Query::parse(query));
    let dim = |s: &str| {
        if color {
            format!("\u{1b}[2m{s}\u{1b}[0m")
        } else {
            s.to_owned()
        }
    };
    for (i, h) in hits.iter().enumerate() {
        output::line(
            &mut out,
            &dim(&format!(
                "{}. {} · {} · {} · {} · {}",
                page.offset + i + 1,
                output::printable(&h.agent),
                output::printable(h.project.as_deref().unwrap_or("-")),
                output::printable(&h.machine),
                output::local_time(h.time.as_deref(), now),
                h.role
            )),
        )?;
        let snippet = output::highlight(&output::printable(&h.snippet), &words, color);
        match &h.answer_snippet {
            Some(answer) => {
                output::line(&mut out, &format!("   {}: {snippet}", h.role))?;
                let answer = output::highlight(&output::printable(answer), &words, color);
                output::line(
                    &mut out,
                    &format!(
                        "   {}: {answer}",
                        h.answer_role.as_deref().unwrap_or("answer")
                    ),
                )?;
            }
            None => output::line(&mut out, &format!("   {snippet}"))?,
        }
        let short: String = h.session_id.chars().take(12).collect();
        let more = if h.matches > 1 {
            format!(" ({} matches)", h.matches)
        } else {
            String::new()
        };
        output::line(
            &mut out,
            &dim(&format!(
                "   cairn show {}{more}",
                output::printable(&short)
            )),
        )?;
    }
    let shown_to = page.offset + hits.len();
    if page.offset > 0 || shown_to < page.total {
        let range = if page.offset > 0 {
            format!("{}–{}", page.offset + 1, shown_to)
        } else {
            hits.len().to_string()
        };
        output::line(
            &mut out,
            &format!(
                "\n{range} of {} sessions — --limit / --offset for more",
                page.total
            ),
        )?;
    }
    Ok(())
}
