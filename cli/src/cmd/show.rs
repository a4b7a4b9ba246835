//! `cairn show`: one session's transcript, through a pager on a terminal.

use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

use anyhow::bail;
use serde::Serialize;

use cairn_node::store::SessionLookup;

use crate::args::{GlobalArgs, ShowArgs};
use crate::output;

#[derive(Serialize)]
struct JsonOut<'a> {
    session: &'a cairn_node::store::SessionInfo,
    records: &'a [cairn_node::store::SessionRecord],
    /// Records skipped before these.
    offset: usize,
    /// Records the session holds in all.
    total: u64,
    /// The `--offset` that shows the next records, when some were left out.
    next_offset: Option<usize>,
}

/// Runs `cairn show`.
pub fn run(global: &GlobalArgs, args: &ShowArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let session = match node.store().find_session(&args.session)? {
        SessionLookup::One(s) => *s,
        SessionLookup::None => bail!(
            "no session id starts with {:?}; `cairn search` shows ids",
            args.session
        ),
        SessionLookup::Several { count, handles } => bail!(
            "{:?} matches {count} sessions; give more of the id or a handle:\n  {}",
            args.session,
            handles.join("\n  ")
        ),
    };
    let records = node
        .store()
        .session_records(session.row, args.offset, args.limit)?;
    let total = session.records;
    let end = args.offset + records.len();
    let next_offset = ((end as u64) < total).then_some(end);
    if args.json {
        return output::json(&JsonOut {
            session: &session,
            records: &records,
            offset: args.offset,
            total,
            next_offset,
        });
    }
    let mut text = String::new();
    text.push_str(&format!(
        "session {} · {} · {} · {}\n",
        session.session_id,
        session.agent,
        session.project.as_deref().unwrap_or("-"),
        session.machine
    ));
    if let Some(p) = &session.parent_session {
        text.push_str(&format!("sub-agent of {p}\n"));
    }
    text.push_str(&format!(
        "{} → {} · {} records\n",
        output::short_time(session.first_ms),
        output::short_time(session.last_ms),
        session.records
    ));
    for r in &records {
        text.push_str(&format!(
            "\n── {} · {}\n",
            r.role,
            output::short_time(r.time_ms)
        ));
        text.push_str(&output::printable(&r.text));
        text.push('\n');
        if !r.files.is_empty() {
            text.push_str(&format!("   files: {}\n", r.files.join(", ")));
        }
    }
    // Never cut silently: say what was left out and how to see it.
    if args.offset > 0 || next_offset.is_some() {
        text.push_str(&format!(
            "\n── records {}–{} of {total}",
            (args.offset + 1).min(end.max(1)),
            end
        ));
        if let Some(next) = next_offset {
            text.push_str(&format!(
                "; the rest: cairn show {} --offset {next}",
                session.session_id
            ));
        }
        if args.offset > 0 {
            text.push_str("; earlier: --offset 0");
        }
        text.push('\n');
    }
    page(&text, args.no_pager)
}

/// Sends text through `$PAGER` (default `less -FRX`) when stdout is a terminal.
fn page(text: &str, no_pager: bool) -> anyhow::Result<()> {
    if !no_pager && std::io::stdout().is_terminal() {
        let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -FRX".to_owned());
        let mut parts = pager.split_whitespace();
        if let Some(prog) = parts.next()
            && let Ok(mut child) = Command::new(prog).args(parts).stdin(Stdio::piped()).spawn()
        {
            if let Some(mut stdin) = child.stdin.take() {
                // A pager quit early closes the pipe; that is not an error.
                let _ = stdin.write_all(text.as_bytes());
            }
            child.wait()?;
            return Ok(());
        }
    }
    let mut out = output::stdout();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
