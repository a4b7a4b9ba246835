//! The wall clock for the "now" that logic takes as an argument (indexing
//! contexts, search options, named periods), so tests can pin it. The
//! edges read it here: the CLI, the daemon and sync, the MCP server, the
//! browse page.
//!
//! Not the only clock reader: deadlines and timings use `Instant`, and a
//! few unique tokens in `store` mix in the time.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds. A clock before 1970 reads as 0 and one past
/// the `i64` range saturates at `i64::MAX`, so the value never wraps.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Now, in Unix seconds (0 for a clock before 1970).
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_and_seconds_agree() {
        let (ms, s) = (now_ms(), now_unix());
        // Both read after 2020 and within a few seconds of each other.
        assert!(ms > 1_577_836_800_000, "{ms}");
        assert!((ms / 1000 - s as i64).abs() <= 2, "{ms} vs {s}");
    }
}
