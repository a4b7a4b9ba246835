//! The MCP server (`cairn mcp`): a small tool surface over the node's
//! store for coding agents, served over stdio with rmcp, plus the fencing of
//! recalled text and the session-start digest used by agent hooks.
//!
//! It reads the same database as the CLI and the daemon. Before a search or
//! a session read it indexes new history within a small deadline, unless a
//! `cairn serve` daemon runs for the same home and does that already
//! (`fresh`).

mod answer;
mod digest;
pub mod fresh;
mod handoff;
pub mod jsonrpc;
pub mod sanitize;
mod server;
pub mod stdio;
mod tools;

pub use answer::{SEARCH_BUDGET, SESSION_BUDGET, StatusReport, handle};
pub use digest::{DIGEST_MAX, hook_digest, project_digest};
pub use handoff::CONTINUE_SESSION;
pub use server::{CairnServer, Clock, ServeError, serve_stdio, system_clock};
pub use tools::{HANDOFF, REMEMBER, SEARCH, SESSION, STATUS};
