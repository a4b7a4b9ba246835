//! `cairn hook <event>`: entry points for agents' hooks.
//!
//! Hooks fail open: a missing index, a locked or corrupt database, bad
//! input, a slow disk or any other problem gives no output and exit code 0,
//! within [`BUDGET`] (or `$CAIRN_HOOK_BUDGET_MS`). A hook only reads (the
//! database is opened read-only) and never starts an indexing pass. Why a
//! hook stayed silent is logged at debug level (`CAIRN_LOG=debug`).

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::args::{GlobalArgs, HookArgs, HookEvent};

/// Time a hook may take before it gives up silently.
pub const BUDGET: Duration = Duration::from_millis(250);
/// Overrides [`BUDGET`] (milliseconds), for slow machines and tests.
pub const BUDGET_ENV: &str = "CAIRN_HOOK_BUDGET_MS";
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
    let budget = std::env::var(BUDGET_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(BUDGET, Duration::from_millis);
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
    let left = budget.saturating_sub(started.elapsed());
    if let Ok(Some(text)) = rx.recv_timeout(left) {
        let mut out = std::io::stdout().lock();
        // A closed pipe is the agent's business; the hook still succeeds.
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
    Ok(())
}

/// The SessionStart response, or `None` when there is nothing to say or anything failed.
fn session_start(global: &GlobalArgs) -> Option<String> {
    match digest(global) {
        Ok(out) => out,
        Err(why) => {
            // Only with CAIRN_LOG=debug: a hook stays silent by default.
            tracing::debug!(why, "session-start hook gave no digest");
            None
        }
    }
}

fn digest(global: &GlobalArgs) -> Result<Option<String>, String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .lock()
        .take(INPUT_MAX)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    let input: SessionStartInput =
        serde_json::from_slice(&raw).map_err(|e| format!("bad hook input: {e}"))?;
    if let Some(e) = input.hook_event_name.as_deref()
        && e != "SessionStart"
    {
        return Err(format!("not a SessionStart event: {e}"));
    }
    let cwd = match input.cwd {
        Some(c) if !c.is_empty() => c,
        _ => std::env::current_dir()
            .map_err(|e| format!("no cwd: {e}"))?
            .to_str()
            .ok_or("cwd is not UTF-8")?
            .to_owned(),
    };
    let cfg = super::config(global).map_err(|e| format!("{e:#}"))?;
    let Some(digest) = cairn_node::mcp::hook_digest(&cfg, &cwd, input.session_id.as_deref())
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let v = serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": digest,
        }
    });
    Ok(Some(format!("{v}\n")))
}
