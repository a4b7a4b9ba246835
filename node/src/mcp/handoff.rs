//! The MCP side of handing a session on: the `handoff` tool's answer (a
//! session's brief, fenced as recalled memory) and the `continue-session`
//! prompt clients offer the user (the brief with a lead line asking the
//! model to carry on).
//!
//! Reads through [`crate::handoff`]; writes nothing and never indexes.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};

use super::answer::ToolFailure;
use super::sanitize;
use crate::handoff::{self, HandoffError};
use crate::node::Node;

/// The prompt's name.
pub const CONTINUE_SESSION: &str = "continue-session";

/// Byte bound of a brief served over MCP (the CLI's default).
pub const HANDOFF_BUDGET: usize = handoff::DEFAULT_MAX_BYTES;

impl From<HandoffError> for ToolFailure {
    fn from(e: HandoffError) -> Self {
        match e {
            HandoffError::Store(s) => s.into(),
            other => ToolFailure::NotFound(sanitize::recalled(&other.to_string())),
        }
    }
}

/// The brief of the session `handle` names, cleaned and fenced.
fn fenced_brief(node: &Node, handle: &str, max_bytes: usize) -> Result<String, ToolFailure> {
    let store = node.store();
    let session = handoff::find_session(store, handle)?;
    let brief = handoff::session_brief(store, &session, max_bytes)?;
    Ok(sanitize::wrap(&sanitize::recalled(&brief.text)))
}

/// Runs the `handoff` tool.
pub fn handoff_tool(node: &Node, handle: &str, max_bytes: usize) -> Result<String, ToolFailure> {
    let body = fenced_brief(node, handle, max_bytes)?;
    Ok(format!(
        "Handoff brief of {} (read more with the `session` tool):\n{body}",
        sanitize::recalled(handle)
    ))
}

/// The prompts `prompts/list` shows.
pub fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new(
            CONTINUE_SESSION,
            Some(
                "Continue a past coding session (from any agent, on any of your machines) here: \
                 cairn's handoff brief of it (goal, decisions, files, commands, open ends) as \
                 the first message.",
            ),
            Some(vec![
                PromptArgument::new("session")
                    .with_title("Session")
                    .with_description(
                        "The session's id, a unique prefix of it, or a search hit's handle (agent:id)",
                    )
                    .with_required(true),
            ]),
        )
        .with_title("Continue a past session"),
    ]
}

/// `prompts/get` for `continue-session`.
pub fn continue_session(node: &Node, session: &str) -> Result<GetPromptResult, ToolFailure> {
    let body = fenced_brief(node, session, HANDOFF_BUDGET)?;
    let text = handoff::launch::prompt_with_brief(&body);
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(
            format!(
                "Continue session {}",
                sanitize::recalled(session).replace('\n', " ")
            ),
        ),
    )
}
