//! `cairn mcp`: serve the memory over MCP on stdin/stdout.
//!
//! stdout carries protocol messages only; logs go to stderr (see
//! `init_logging`). The server answers from the index as it is and never
//! starts an indexing pass for a read.

use anyhow::Context;

use crate::args::GlobalArgs;

/// Runs `cairn mcp` until the client closes stdin.
pub fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    let cfg = super::config(global)?;
    cairn_node::mcp::serve_stdio(cfg).context("the MCP server stopped")
}
