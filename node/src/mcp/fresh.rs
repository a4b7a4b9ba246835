//! Keeping MCP answers fresh: before a read, the server reads new agent
//! history itself unless a `cairn serve` daemon runs for the same home (the
//! daemon indexes within a fraction of a second of a change, so a second
//! reader would only compete with it for the database).
//!
//! The pass is incremental and bounded by a small deadline, like the one
//! `cairn search` runs: a huge first run answers from what is indexed so
//! far and the next call continues. When the survey shows nothing new on
//! disk there is no pass, and a pass that finds nothing new leaves one. A failed pass is logged and the answer
//! comes from the index as it is; freshness never turns into a tool error.

use std::time::{Duration, Instant};

use crate::node::Node;
use crate::sync::daemon;

/// The longest an MCP read waits for new history to be indexed.
pub const REFRESH_BUDGET: Duration = Duration::from_millis(1500);

/// What happened before an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// A daemon runs for this home and keeps the index fresh.
    DaemonServes,
    /// This process read new history (`deferred` stores left for later).
    Read {
        /// New records stored.
        added: u64,
        /// Stores cut short by the deadline.
        deferred: u64,
    },
    /// The pass failed; the answer uses the index as it is.
    Failed,
}

/// Reads new history into `node` within `budget`, unless a daemon serves
/// its home.
pub fn refresh(node: &mut Node, now_ms: i64, budget: Duration) -> Refresh {
    if daemon::is_serving(&node.config().home) {
        return Refresh::DaemonServes;
    }
    let deadline = Instant::now() + budget;
    // Nothing new by the survey: no pass (see `crate::survey`).
    let mut walk = Node::start_walk(node.config());
    if Node::unchanged_since_survey(node.config(), &mut walk).is_some() {
        return Refresh::Read {
            added: 0,
            deferred: 0,
        };
    }
    let pass = node.index_walked(walk, now_ms, Some(deadline), &mut |_| {});
    match pass {
        Ok(rep) => {
            if rep.nothing_new()
                && let Err(e) = node.save_survey()
            {
                tracing::debug!(error = %e, "cannot leave a survey");
            }
            if rep.added > 0 || rep.deferred > 0 {
                tracing::info!(
                    added = rep.added,
                    deferred = rep.deferred,
                    "read new history before answering"
                );
            }
            Refresh::Read {
                added: rep.added,
                deferred: rep.deferred,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read new history; answering from the index as it is");
            Refresh::Failed
        }
    }
}
