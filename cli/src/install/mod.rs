//! Wiring cairn into coding agents' own config files: `cairn install`,
//! `cairn uninstall`, and the "wired into" lines of `cairn status`; plus
//! the background service that runs `cairn serve` (`service`).
//!
//! Edits are format-preserving (JSON by splicing spans, TOML with
//! toml_edit, Continue's YAML list line by line), idempotent, and
//! reversible byte for byte; a config that does
//! not parse is never written.

mod agents;
mod apply;
pub mod jsonc;
pub mod service;
mod target;
pub mod toml;
pub mod yaml;

pub use agents::{Agent, Ctx, UNSUPPORTED, all, note_after_install};
pub use apply::{Action, ApplyError, BACKUP_SUFFIX, Change, apply, read};
pub use target::{HOOK_ARGS, NAME, Target, TargetError, What};
