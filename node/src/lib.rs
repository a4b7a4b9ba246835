//! cairn-node: everything a cairn node does on its own machine.
//!
//! Sources read the agents' histories, redaction scrubs secrets, the store
//! keeps records in SQLite with an FTS5 index, and search answers queries.
//! The modules are layered (ARCHITECTURE.md, checked by `tests/layers.rs`):
//! `record`, `home`, `lock`, `clock`, `hex`, `text`, `embed`, `pathmap` at
//! the bottom; then `redact`, `identity`, `seal`; `sources`; `projects`;
//! `config`, `store` (with the survey); `indexer`, `search`, `handoff`;
//! the [`node::Node`] façade; `sync`, which drives a shared node; the
//! `cairn serve` `daemon` (with the search socket it answers the CLI on),
//! which uses `sync`; and the front ends served from the library, `mcp`
//! and `ui`. Each imports only from layers below its own.
//!
//! The node never reads environment variables itself: the caller resolves a
//! [`config::Config`] from a captured [`config::Env`] and passes it in, so
//! several nodes can share a process.

pub mod clock;
pub mod config;
pub mod daemon;
pub mod embed;
pub mod handoff;
pub mod hex;
pub mod home;
pub mod identity;
pub mod indexer;
pub mod lock;
pub mod mcp;
pub mod node;
pub mod pathmap;
pub mod projects;
pub mod record;
pub mod redact;
pub mod seal;
pub mod search;
pub mod sources;
pub mod store;
pub mod sync;
pub mod text;
pub mod ui;
