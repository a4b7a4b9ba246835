//! `cairn hook <event>`: entry points for agents' hooks.
//!
//! Hooks fail open: a missing index, a locked or corrupt database, bad
//! input, a slow disk or any other problem gives no output and exit code 0,
//! within [`BUDGET`]. A hook only reads (the database is opened read-only)
//! and never starts an indexing pass.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn_node::store::Store;
use serde::Deserialize;

use crate::args::{GlobalArgs, HookArgs, HookEvent};

/// Time a hook may take before it gives up silently.
pub const BUDGET: Duration = Duration::from_millis(250);
/// Largest hook input read from stdin.
const INPUT_MAX: u64 = 1024 * 1024;

/// What Claude Code sends a SessionStart hook on stdin (unknown fields ignored).
#[derive(Debug, Deserialize)]
struct SessionStartInput {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    hook_event_name: Option<String>,
}

/// Runs `cairn hook <event>`; never fails.
pub fn run(global: &GlobalArgs, args: &HookArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let global = global.clone();
    let event = args.event;
    // The work runs on its own thread so a stuck read (stdin, a locked
    // database) cannot hold the agent up: past the budget we print nothing
    // and exit, and the thread dies with the process.
    let spawned = std::thread::Builder::new()
        .name("cairn-hook".into())
        .spawn(move || {
            let out = match event {
                HookEvent::SessionStart => session_start(&global),
            };
            let _ = tx.send(out);
        });
    if spawned.is_err() {
        return Ok(());
    }
    let left = BUDGET.saturating_sub(started.elapsed());
    if let Ok(Some(text)) = rx.recv_timeout(left) {
        let mut out = std::io::stdout().lock();
        // A closed pipe is the agent's business; the hook still succeeds.
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
    Ok(())
}

/// The SessionStart response, or `None` when there is nothing to say or anything failed.
fn session_start(global: &GlobalArgs) -> Option<String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .lock()
        .take(INPUT_MAX)
        .read_to_end(&mut raw)
        .ok()?;
    let input: SessionStartInput = serde_json::from_slice(&raw).ok()?;
    if input
        .hook_event_name
        .as_deref()
        .is_some_and(|e| e != "SessionStart")
    {
        return None;
    }
    let cwd = match input.cwd {
        Some(c) if !c.is_empty() => c,
        _ => std::env::current_dir().ok()?.to_str()?.to_owned(),
    };
    let cfg = super::config(global).ok()?;
    if !cfg.db_path.is_file() {
        return None;
    }
    let store = Store::open_read_only(&cfg.db_path).ok()?;
    let digest =
        cairn_node::mcp::project_digest(&store, &cwd, input.session_id.as_deref()).ok()??;
    let v = serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": digest,
        }
    });
    Some(format!("{v}\n"))
}
