//! One module per command; shared set-up here.

pub mod demo;
pub mod docs;
pub mod doctor;
pub mod forget;
pub mod handoff;
pub mod hook;
pub mod index;
pub mod install;
pub mod mcp;
pub mod pair;
pub mod remember;
pub mod resume;
pub mod scope;
pub mod search;
pub mod serve;
pub mod show;
pub mod sources;
pub mod status;
pub mod sync;
pub mod ui;

use std::io::IsTerminal;

use anyhow::Context;
use cairn_node::config::{Config, Env};
use cairn_node::indexer::{IndexReport, Progress};
use cairn_node::node::{IndexRequest, Node};

use crate::args::GlobalArgs;

/// Resolves the configuration from the environment and the global flags.
pub fn config(global: &GlobalArgs) -> anyhow::Result<Config> {
    let mut env = Env::capture(|k| std::env::var(k).ok());
    if let Some(h) = &global.home {
        env.cairn_home = Some(h.clone());
    }
    Ok(Config::resolve(&env, global.config.as_deref())?)
}

/// Opens this machine's node.
pub fn open(global: &GlobalArgs) -> anyhow::Result<Node> {
    let cfg = config(global)?;
    let home = cfg.home.clone();
    Node::open(cfg).with_context(|| format!("cannot open the cairn node in {}", home.display()))
}

pub use cairn_node::clock::now_ms;

/// Runs an indexing pass; shows a progress bar on a terminal when `show_bar`
/// and there is more than a little to read.
pub fn refresh(
    node: &mut Node,
    show_bar: bool,
    budget: Option<std::time::Duration>,
) -> anyhow::Result<IndexReport> {
    // A plain pass: it compares nothing with the survey, so its walk
    // tallies nothing.
    let deadline = budget.map(|b| std::time::Instant::now() + b);
    with_bar(show_bar, |on_progress| {
        let req = IndexRequest::new(now_ms())
            .until(deadline)
            .progress(on_progress);
        Ok(node.index(req)?)
    })
}

/// Runs `pass` with a progress callback that draws a bar on a terminal when
/// `show_bar` and the pass has more than a little to read.
pub fn with_bar<T>(
    show_bar: bool,
    pass: impl FnOnce(&mut dyn FnMut(Progress)) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let bar = (show_bar && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::hidden();
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} indexing {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {wide_bar}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut on_progress = |p: Progress| {
        if let Some(b) = &bar {
            match p {
                Progress::Start { total_bytes } => {
                    b.set_length(total_bytes);
                    // Only draw when there is real work, so quick refreshes stay silent.
                    if total_bytes > 8 * 1024 * 1024 {
                        b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    }
                }
                Progress::Advance(n) => b.inc(n),
            }
        }
    };
    let out = pass(&mut on_progress)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(out)
}
