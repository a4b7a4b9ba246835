//! `cairn handoff`: the brief to continue a session from, as text or JSON.
//! Reads the stored records only (no indexing pass), so it prints the same
//! brief on every machine that holds the session.

use std::io::Write;

use crate::args::{GlobalArgs, HandoffArgs};
use crate::output;

/// Runs `cairn handoff`.
pub fn run(global: &GlobalArgs, args: &HandoffArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let session = cairn_node::handoff::find_session(node.store(), &args.session)?;
    let brief =
        cairn_node::handoff::session_brief(node.store(), &session, args.max_bytes as usize)?;
    if args.json {
        return output::json(&brief);
    }
    let mut out = output::stdout();
    out.write_all(brief.text.as_bytes())?;
    out.flush()?;
    Ok(())
}
