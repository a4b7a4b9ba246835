//! The decision classifier: does a record read like a decision or an
//! explanation? The store answers it once when a record is stored (the
//! `DECISION` bit of `records.flags`); search boosts such records.
//!
//! The phrases are English, and their word boundaries are ASCII ones: with
//! Unicode boundaries the regex engine's fast automaton gives up on any text
//! holding a non-ASCII character and runs its slowest engine over all of it
//! (7% of a cold index's CPU), and a phrase right beside CJK text, where
//! there are no spaces, would not count.

use std::sync::LazyLock;

use regex::Regex;

static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(decided|decision|we chose|chose|choose|because|instead of|pinned|pin it|switched|settled on|went with|root cause|the fix|fixed by|caused by|trade-?off|rather than)(?-u:\b)",
    )
    .expect("static regex")
});

/// True when text reads like a decision or an explanation.
pub fn is_decision(text: &str) -> bool {
    DECISION.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_and_explanations_are_recognised() {
        for yes in [
            "We decided to pin tokio to 1.38",
            "went with SQLite rather than Postgres",
            "The root cause was a stale lock",
            "Chose FTS5 because it ships with SQLite",
            "a TRADEOFF between size and speed",
            // Word boundaries are ASCII: an English phrase counts beside CJK text.
            "改用SQLite because它更快",
        ] {
            assert!(is_decision(yes), "{yes}");
        }
        for no in ["ls -la", "the build passed", "undecided", "choosers"] {
            assert!(!is_decision(no), "{no}");
        }
    }
}
