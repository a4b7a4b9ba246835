//! The MCP server (`cairn mcp`): a small tool surface over the node's
//! store for coding agents, served over stdio with rmcp, plus the fencing of
//! recalled text and the session-start digest used by agent hooks.
//!
//! It reads the same database as the CLI and the daemon and never starts an
//! indexing pass to answer a read; only the `remember` tool writes.

mod answer;
mod digest;
pub mod sanitize;
mod server;
mod tools;

pub use answer::{SEARCH_BUDGET, SESSION_BUDGET, StatusReport, handle};
pub use digest::{DIGEST_MAX, project_digest};
pub use sanitize::strip_recalled;
pub use server::{CairnServer, Clock, ServeError, serve_stdio, system_clock};
pub use tools::{REMEMBER, SEARCH, SESSION, STATUS};
