//! `cairn remember`: store a durable note.

use crate::args::{GlobalArgs, RememberArgs};
use crate::output;

/// Runs `cairn remember`.
pub fn run(global: &GlobalArgs, args: &RememberArgs) -> anyhow::Result<()> {
    let mut node = super::open(global)?;
    let text = args.text.join(" ");
    let redacted = node.remember(&text, args.project.as_deref(), super::now_ms())?;
    if args.json {
        return output::json(&serde_json::json!({ "stored": true, "redacted": redacted }));
    }
    let mut out = output::stdout();
    let mut msg = String::from("remembered");
    if let Some(p) = &args.project {
        msg.push_str(&format!(" for {p}"));
    }
    if !redacted.is_empty() {
        let kinds: Vec<&str> = redacted.keys().copied().collect();
        msg.push_str(&format!(" (secrets removed: {})", kinds.join(", ")));
    }
    output::line(&mut out, &msg)
}
