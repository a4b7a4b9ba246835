//! `cairn scope PEER (--project P... | --all)`: which projects' records a
//! paired machine may receive. Out-of-scope records never leave this node;
//! their log slots go out as withheld stubs. A running `cairn serve` picks
//! the change up from the peer table at the next session.

use anyhow::bail;
use cairn_node::sync::facade;

use crate::args::{GlobalArgs, ScopeArgs};
use crate::output;

/// Runs `cairn scope`.
pub fn run(global: &GlobalArgs, args: &ScopeArgs) -> anyhow::Result<()> {
    let cfg = super::config(global)?;
    let scope: Option<Vec<String>> = if args.all {
        None
    } else {
        let mut dirs = Vec::new();
        for p in &args.project {
            let p = p.trim().trim_end_matches('/');
            if p.is_empty() {
                bail!("--project needs a path such as /home/me/work");
            }
            dirs.push(p.to_owned());
        }
        Some(dirs)
    };
    let peer = facade::set_scope(&cfg.home, &args.peer, scope.clone())?;
    let (name, short) = (peer.name.clone(), peer.short_id());
    if args.json {
        return output::json(
            &serde_json::json!({ "peer": name, "short_id": short, "scope": scope }),
        );
    }
    let mut out = output::stdout();
    match &scope {
        None => output::line(
            &mut out,
            &format!(
                "{} ({short}) receives every project",
                output::printable(&name)
            ),
        ),
        Some(dirs) => output::line(
            &mut out,
            &format!(
                "{} ({short}) receives only: {}",
                output::printable(&name),
                dirs.join(", ")
            ),
        ),
    }
}
