//! Ranking: BM25 adjusted by role, decision language and age, grouped by session.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::SearchOptions;
use crate::store::codec::DECISION as DECISION_FLAG;

/// A record FTS5 matched, with what ranking needs (no text).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub(super) record_id: i64,
    /// FTS5 bm25: more negative is better.
    pub(super) bm25: f64,
    pub(super) role: String,
    pub(super) ts: Option<i64>,
    pub(super) session_row: i64,
    /// `records.flags` (decision bit).
    pub(super) flags: i64,
}

/// The best record of one session, with the session's score.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub(super) record_id: i64,
    pub(super) score: f64,
    pub(super) matches: usize,
}

/// What a person said outweighs what a tool printed.
fn role_weight(role: &str) -> f64 {
    match role {
        "note" => 1.5,
        "user" => 1.3,
        "assistant" => 1.0,
        "tool_call" => 0.55,
        "tool_output" => 0.35,
        _ => 0.5,
    }
}

static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(decided|decision|we chose|chose|choose|because|instead of|pinned|pin it|switched|settled on|went with|root cause|the fix|fixed by|caused by|trade-?off|rather than)\b",
    )
    .expect("static regex")
});

/// True when text reads like a decision or an explanation; such records
/// get a ranking boost (the store keeps the answer in `records.flags`).
pub fn is_decision(text: &str) -> bool {
    DECISION.is_match(text)
}

/// Age decay: a year-old record keeps about 70% of its score, never below 40%.
fn age_factor(ts: Option<i64>, now_ms: i64) -> f64 {
    let Some(ts) = ts else { return 0.8 };
    let days = ((now_ms - ts) as f64 / 86_400_000.0).max(0.0);
    (1.0 / (1.0 + days / 365.0).sqrt()).max(0.4)
}

/// Scores candidates, keeps the best record per session, and returns the top sessions.
pub(super) fn rank(cands: Vec<Candidate>, opts: &SearchOptions) -> Vec<Ranked> {
    struct Group {
        best: Candidate,
        best_score: f64,
        others: Vec<f64>,
    }
    let mut groups: HashMap<i64, Group> = HashMap::new();
    for c in cands {
        let mut s = -c.bm25 * role_weight(&c.role) * age_factor(c.ts, opts.now_ms);
        if c.flags & DECISION_FLAG != 0 {
            s *= 1.2;
        }
        match groups.get_mut(&c.session_row) {
            Some(g) if s > g.best_score => {
                g.others.push(g.best_score);
                g.best = c;
                g.best_score = s;
            }
            Some(g) => g.others.push(s),
            None => {
                groups.insert(
                    c.session_row,
                    Group {
                        best: c,
                        best_score: s,
                        others: Vec::new(),
                    },
                );
            }
        }
    }
    let mut scored: Vec<(f64, Group)> = groups
        .into_values()
        .map(|mut g| {
            // A session that matches in several places is a little more likely the answer.
            g.others.sort_by(|a, b| b.total_cmp(a));
            let support: f64 = g.others.iter().take(3).sum::<f64>() * 0.1;
            (g.best_score + support, g)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(b.1.best.ts.cmp(&a.1.best.ts))
            .then(b.1.best.record_id.cmp(&a.1.best.record_id))
    });
    scored
        .into_iter()
        .take(opts.limit.max(1))
        .map(|(score, g)| Ranked {
            record_id: g.best.record_id,
            score: (score * 1000.0).round() / 1000.0,
            matches: g.others.len() + 1,
        })
        .collect()
}

/// Unix ms as RFC 3339 UTC with a `Z`.
pub fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_decays_gently() {
        let now = 1_800_000_000_000;
        assert_eq!(age_factor(Some(now), now), 1.0);
        let year = age_factor(Some(now - 365 * 86_400_000), now);
        assert!((0.69..0.72).contains(&year), "{year}");
        assert_eq!(age_factor(Some(0), now), 0.4);
    }

    #[test]
    fn conversation_outweighs_tool_noise() {
        assert!(role_weight("user") > role_weight("assistant"));
        assert!(role_weight("assistant") > role_weight("tool_call"));
        assert!(role_weight("tool_call") > role_weight("tool_output"));
    }
}
