//! `cairn serve [--listen ADDR] [--no-discovery]`: runs the sync daemon in the foreground
//! until SIGINT or SIGTERM. The daemon lives in `cairn_node::daemon`;
//! this module resolves the node, starts a runtime and prints where it
//! listens (also written to `serve.json` in the node's home, shown by
//! `cairn status --json`).

use anyhow::Context;
use cairn_node::daemon::{self, DaemonConfig};

use crate::args::{GlobalArgs, ServeArgs};
use crate::output;

/// Runs `cairn serve`.
pub fn run(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let name = node.config().node_name.clone();
    let discovery = node.config().discovery && !args.no_discovery;
    let short = node.identity().short_id();
    let rt = daemon::runtime().context("start the network runtime")?;
    let cfg = DaemonConfig {
        listen: args.listen,
        discovery,
        // Its heap keeps freed memory for the next search (crate::heap).
        after_backlog: Some(crate::heap::release),
        ..DaemonConfig::default()
    };
    rt.block_on(daemon::serve(
        node,
        cfg,
        daemon::shutdown_signal(),
        |addr| {
            let mut out = output::stdout();
            let _ = output::line(
                &mut out,
                &format!("cairn serve: {name} ({short}) listening on {addr}; Ctrl-C to stop"),
            );
        },
    ))
    .with_context(|| format!("cannot serve on {}", args.listen))?;
    Ok(())
}
