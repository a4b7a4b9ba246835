//! Ranking: BM25 adjusted by role, decision language and age, grouped by session.

use rustc_hash::FxHashMap;

use crate::store::codec::DECISION as DECISION_FLAG;

/// A record FTS5 matched, with what ranking needs (no text).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub(super) record_id: i64,
    /// The parts of the question this record matched: (concept index,
    /// score), the score being -bm25 of the term as written, or of its stem
    /// times [`STEM_WEIGHT`], whichever is higher. Empty when the record
    /// was found only because it lies in a period the question names.
    pub(super) parts: Vec<(usize, f64)>,
    pub(super) role: String,
    pub(super) ts: Option<i64>,
    pub(super) session_row: i64,
    /// `records.flags` (decision bit).
    pub(super) flags: i64,
}

impl Candidate {
    /// Notes that the record matched concept `k` with `score` (the best
    /// score, where it matched the concept before).
    pub(super) fn add_part(&mut self, k: usize, score: f64) {
        match self.parts.iter_mut().find(|p| p.0 == k) {
            Some(p) => p.1 = p.1.max(score),
            None => self.parts.push((k, score)),
        }
    }
}

/// The best record of one session, with the session's score.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub(super) record_id: i64,
    pub(super) score: f64,
    pub(super) matches: usize,
    pub(super) session_row: i64,
    pub(super) role: String,
    /// When the best record is the user's own words, the session's
    /// matched assistant or note records after it, best-scoring first:
    /// the likely answers (the page keeps those before the user's next
    /// turn).
    pub(super) answers: Vec<i64>,
    /// The share of the question its best run of records covers.
    pub(super) coverage: f64,
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

/// How much a stem-only match counts next to an exact one: a record that
/// matches a word as written also matches its stem, so it scores above a
/// record of the same length that matches only the stem.
pub(super) const STEM_WEIGHT: f64 = 0.6;

/// How much a project's name, said by every record of its sessions,
/// counts next to a word the record holds (see `search::projects`).
pub(super) const PROJECT_WEIGHT: f64 = 1.0;

/// BM25's term saturation and length normalisation, as FTS5 sets them.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// A word's BM25 weight among `docs` records, `df` of which hold it, as
/// FTS5's `bm25()` computes it (never below a millionth).
pub(super) fn bm25_idf(docs: i64, df: i64) -> f64 {
    let (n, d) = (docs.max(1) as f64, df.max(0) as f64);
    ((n - d + 0.5) / (d + 0.5)).ln().max(1e-6)
}

/// BM25's share for a record that holds the word once and is `len` long
/// where records average `mean`: 1 at the average length, more for
/// shorter records, less for longer ones.
pub(super) fn bm25_tf_one(len: f64, mean: f64) -> f64 {
    let ratio = if mean > 0.0 { len / mean } else { 1.0 };
    (BM25_K1 + 1.0) / (1.0 + BM25_K1 * (1.0 - BM25_B + BM25_B * ratio))
}
/// Concepts (terms and stems) looked up per query at most.
pub(super) const MAX_CONCEPTS: usize = 16;
/// Concepts a session's coverage can count: one bit each (the lexical tier
/// plans at most [`MAX_CONCEPTS`] and adds a concept per named project).
pub(super) const MAX_COVERED: usize = 64;
/// A session's score is multiplied by `COVERAGE_FLOOR + (1 - COVERAGE_FLOOR)
/// × coverage`, coverage being the IDF-weighted share of the question's
/// concepts that its best stretch of neighbouring records matched
/// together (see [`NEIGHBOURS`]).
const COVERAGE_FLOOR: f64 = 0.3;
/// A stretch of neighbouring records: record ids up to this far apart, so
/// a question and its reply (with a tool call between) cover a question
/// together, while a long session's scattered mentions of its words do
/// not. Over all of a session's records, long sessions that held each
/// word somewhere outranked the short one that answered: on the recall
/// bench in the 1 GB history, 0 / 2 / all records apart gave ALL/tune
/// 83.4 / 82.7 / 81.6% R@1, and on the set alone 85.2 / 85.5 / 85.5%
/// (0 lost a question answered across a question and its reply).
const NEIGHBOURS: i64 = 2;
/// How much newer beats older, at most, across the whole history: time is a
/// tie-breaker, not a verdict (an old answer beats a newer passing mention).
const TIME_WEIGHT: f64 = 0.1;
/// Boost for records written in a period the question names.
const PERIOD_BOOST: f64 = 4.0;
/// Score of a record found only because it lies in the named period,
/// relative to the best word match.
const PERIOD_ONLY: f64 = 0.3;
/// Each further record of a session adds this share of the previous one's
/// weight: evidence adds up, with diminishing returns.
const EVIDENCE_DECAY: f64 = 0.35;
/// Further records of a session that count.
const EVIDENCE_RECORDS: usize = 4;

/// The time span ranking works in: the oldest record's time and now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) oldest_ms: i64,
    pub(super) now_ms: i64,
}

/// Recency as a tie-breaker: from 1.0 (now) down to `1 - TIME_WEIGHT` (the
/// oldest record), relative to the span of this history, so a history of
/// ten years and one of ten days are treated alike. Undated records count
/// as the oldest: they never gain from time.
fn time_factor(ts: Option<i64>, span: Span) -> f64 {
    let Some(ts) = ts else {
        return 1.0 - TIME_WEIGHT;
    };
    let width = (span.now_ms - span.oldest_ms).max(1) as f64;
    let age = ((span.now_ms - ts) as f64 / width).clamp(0.0, 1.0);
    1.0 - TIME_WEIGHT * age
}

/// Scores candidates, groups them by session (adding up evidence, weighed
/// by how much of the question the session covers) and returns all
/// sessions, best first. `weights` holds each concept's IDF.
pub(super) fn rank(
    cands: Vec<Candidate>,
    weights: &[f64],
    span: Span,
    period: Option<&super::when::Period>,
) -> Vec<Ranked> {
    struct Group {
        scored: Vec<(f64, Candidate)>,
    }
    let words = |c: &Candidate| c.parts.iter().map(|p| p.1).sum::<f64>();
    let best_word = cands.iter().map(words).fold(0.0f64, f64::max);
    let total_weight: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let mut groups: FxHashMap<i64, Group> = FxHashMap::default();
    for c in cands {
        let w = words(&c);
        let mut s = if w > 0.0 {
            w
        } else {
            PERIOD_ONLY * if best_word > 0.0 { best_word } else { 1.0 }
        };
        s *= role_weight(&c.role) * time_factor(c.ts, span);
        if c.flags & DECISION_FLAG != 0 {
            s *= 1.2;
        }
        if let (Some(p), Some(ts)) = (period, c.ts)
            && p.contains(ts)
        {
            s *= PERIOD_BOOST;
        }
        let g = groups
            .entry(c.session_row)
            .or_insert_with(|| Group { scored: Vec::new() });
        g.scored.push((s, c));
    }
    let mut scored: Vec<(f64, Group, f64)> = groups
        .into_values()
        .map(|mut g| {
            g.scored
                .sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.record_id.cmp(&a.1.record_id)));
            let mut total = 0.0;
            let mut w = 1.0;
            for (s, _) in g.scored.iter().take(EVIDENCE_RECORDS + 1) {
                total += s * w;
                w *= EVIDENCE_DECAY;
            }
            let coverage = best_stretch(&g.scored, weights) / total_weight;
            (
                total * (COVERAGE_FLOOR + (1.0 - COVERAGE_FLOOR) * coverage.min(1.0)),
                g,
                coverage.min(1.0),
            )
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(b.1.scored[0].1.ts.cmp(&a.1.scored[0].1.ts))
            .then(b.1.scored[0].1.record_id.cmp(&a.1.scored[0].1.record_id))
    });
    scored
        .into_iter()
        .map(|(score, g, coverage)| {
            let best = &g.scored[0].1;
            let answers = match best.role == "user" {
                true => g
                    .scored
                    .iter()
                    .filter(|(_, c)| matches!(c.role.as_str(), "assistant" | "note"))
                    .filter(|(_, c)| c.record_id > best.record_id)
                    .map(|(_, c)| c.record_id)
                    .collect(),
                false => Vec::new(),
            };
            Ranked {
                record_id: best.record_id,
                score: (score * 1000.0).round() / 1000.0,
                matches: g
                    .scored
                    .iter()
                    .filter(|(_, c)| !c.parts.is_empty())
                    .count()
                    .max(1),
                session_row: best.session_row,
                role: best.role.clone(),
                answers,
                coverage,
            }
        })
        .collect()
}

/// The weight of the question's concepts that the best stretch of
/// neighbouring records among `scored` matched together (ids at most
/// [`NEIGHBOURS`] apart, counted from each record on).
fn best_stretch(scored: &[(f64, Candidate)], weights: &[f64]) -> f64 {
    let mut by_id: Vec<(i64, u64)> = scored
        .iter()
        .map(|(_, c)| {
            let bits = c
                .parts
                .iter()
                .filter(|(k, _)| *k < MAX_COVERED)
                .fold(0u64, |b, (k, _)| b | 1 << k);
            (c.record_id, bits)
        })
        .collect();
    by_id.sort_unstable();
    let (mut best, mut seen) = (0.0f64, 0u64);
    for (i, &(first, _)) in by_id.iter().enumerate() {
        let bits = by_id[i..]
            .iter()
            .take_while(|(id, _)| *id <= first.saturating_add(NEIGHBOURS))
            .fold(0u64, |b, (_, x)| b | x);
        // Most runs cover what one already did: weigh each set once.
        if bits == seen {
            continue;
        }
        seen = bits;
        let (mut left, mut weight) = (bits, 0.0);
        while left != 0 {
            let k = left.trailing_zeros() as usize;
            weight += weights.get(k).copied().unwrap_or(0.0);
            left &= left - 1;
        }
        best = best.max(weight);
    }
    best
}

/// Unix ms as RFC 3339 UTC with a `Z`.
pub fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {

    #[test]
    fn bm25_with_one_occurrence_favours_rare_words_and_short_records() {
        // FTS5's weight: ln((N - n + 0.5) / (n + 0.5)), at least a millionth.
        assert!((bm25_idf(1000, 10) - (990.5f64 / 10.5).ln()).abs() < 1e-12);
        assert!(bm25_idf(1000, 10) > bm25_idf(1000, 100));
        assert_eq!(bm25_idf(1000, 900), 1e-6);
        assert!((bm25_tf_one(50.0, 50.0) - 1.0).abs() < 1e-12);
        assert!(bm25_tf_one(10.0, 50.0) > 1.0);
        assert!(bm25_tf_one(500.0, 50.0) < bm25_tf_one(100.0, 50.0));
        assert_eq!(bm25_tf_one(10.0, 0.0), 1.0);
    }
    use super::*;

    fn cand(id: i64, session: i64, bm25: f64, role: &str, ts: Option<i64>) -> Candidate {
        Candidate {
            record_id: id,
            parts: vec![(0, -bm25)],
            role: role.to_owned(),
            ts,
            session_row: session,
            flags: 0,
        }
    }

    const YEAR: i64 = 365 * 86_400_000;
    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn time_is_only_a_tie_breaker_relative_to_the_span() {
        let span = Span {
            oldest_ms: NOW - 4 * YEAR,
            now_ms: NOW,
        };
        assert_eq!(time_factor(Some(NOW), span), 1.0);
        assert!((time_factor(Some(NOW - 4 * YEAR), span) - 0.9).abs() < 1e-9);
        assert_eq!(time_factor(None, span), time_factor(Some(0), span));
    }

    #[test]
    fn an_old_answer_beats_a_newer_one_word_match() {
        let span = Span {
            oldest_ms: NOW - 3 * YEAR,
            now_ms: NOW,
        };
        let old_answer = cand(1, 10, -6.0, "assistant", Some(NOW - 3 * YEAR));
        let new_mention = cand(2, 20, -5.0, "assistant", Some(NOW - 86_400_000));
        let r = rank(vec![new_mention, old_answer], &[1.0], span, None);
        assert_eq!(r[0].record_id, 1);
    }

    #[test]
    fn undated_records_do_not_outrank_dated_ones() {
        let span = Span {
            oldest_ms: NOW - 2 * YEAR,
            now_ms: NOW,
        };
        let dated = cand(1, 10, -5.0, "assistant", Some(NOW - YEAR));
        let undated = cand(2, 20, -5.0, "assistant", None);
        let r = rank(vec![undated, dated], &[1.0], span, None);
        assert_eq!(r[0].record_id, 1);
    }

    #[test]
    fn evidence_adds_up_but_one_strong_match_still_wins() {
        let span = Span {
            oldest_ms: NOW - YEAR,
            now_ms: NOW,
        };
        // Session 10: three records each matching part of the question.
        // Session 20: one record matching a little better than each.
        let spread = vec![
            cand(1, 10, -3.0, "assistant", Some(NOW)),
            cand(2, 10, -3.0, "assistant", Some(NOW)),
            cand(3, 10, -3.0, "assistant", Some(NOW)),
            cand(4, 20, -3.5, "assistant", Some(NOW)),
        ];
        assert_eq!(rank(spread.clone(), &[1.0], span, None)[0].session_row, 10);
        // A strong exact match (e.g. a rare identifier) still wins.
        let mut strong = spread;
        strong.push(cand(5, 30, -20.0, "tool_output", Some(NOW)));
        assert_eq!(rank(strong, &[1.0], span, None)[0].session_row, 30);
    }

    #[test]
    fn a_session_covering_more_of_the_question_wins() {
        let span = Span {
            oldest_ms: NOW - YEAR,
            now_ms: NOW,
        };
        // "pin hyper": session 10 says "pin" twice, session 20
        // says "pinned" (stem) and "hyper" in one record each.
        let mut a = cand(1, 10, -3.0, "assistant", Some(NOW));
        a.parts = vec![(0, 3.0)];
        let mut b = cand(2, 10, -3.0, "assistant", Some(NOW));
        b.parts = vec![(0, 3.0)];
        let mut c = cand(3, 20, -3.0, "assistant", Some(NOW));
        c.parts = vec![(0, 2.4)];
        let mut d = cand(4, 20, -3.0, "assistant", Some(NOW));
        d.parts = vec![(1, 3.0)];
        let r = rank(vec![a, b, c, d], &[2.0, 2.0], span, None);
        assert_eq!(r[0].session_row, 20);
    }

    #[test]
    fn coverage_counts_neighbouring_records_together_not_a_whole_session() {
        let span = Span {
            oldest_ms: NOW - YEAR,
            now_ms: NOW,
        };
        let with = |id: i64, session: i64, parts: Vec<(usize, f64)>| {
            let mut c = cand(id, session, 0.0, "assistant", Some(NOW));
            c.parts = parts;
            c
        };
        // A question of three words. Session 10 holds each of them, in
        // records far apart, and one of them twice more; session 20 holds
        // two of them in a question and its reply.
        let long = vec![
            with(1, 10, vec![(0, 3.0)]),
            with(40, 10, vec![(1, 3.0)]),
            with(80, 10, vec![(2, 3.0)]),
            with(120, 10, vec![(0, 3.0)]),
            with(160, 10, vec![(0, 3.0)]),
        ];
        let short = vec![with(200, 20, vec![(0, 3.0)]), with(202, 20, vec![(1, 3.0)])];
        let weights = [2.0, 2.0, 2.0];
        let r = rank([long.clone(), short.clone()].concat(), &weights, span, None);
        assert_eq!(r[0].session_row, 20, "{r:?}");
        // The same two records further apart are no longer one stretch.
        let apart = vec![with(200, 20, vec![(0, 3.0)]), with(203, 20, vec![(1, 3.0)])];
        let r = rank([long, apart].concat(), &weights, span, None);
        assert_eq!(r[0].session_row, 10, "{r:?}");
        // Coverage counts at most MAX_COVERED concepts and never panics.
        let many = with(1, 10, (0..100).map(|k| (k, 1.0)).collect());
        let r = rank(vec![many], &[1.0; 100], span, None);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_named_period_is_preferred() {
        let span = Span {
            oldest_ms: NOW - 2 * YEAR,
            now_ms: NOW,
        };
        let period = super::super::when::Period {
            ranges: vec![(NOW - YEAR - 10 * 86_400_000, NOW - YEAR + 10 * 86_400_000)],
            words: vec![],
        };
        let inside = cand(1, 10, -4.0, "assistant", Some(NOW - YEAR));
        let outside = cand(2, 20, -5.0, "assistant", Some(NOW - 1000));
        let r = rank(vec![outside, inside], &[1.0], span, Some(&period));
        assert_eq!(r[0].session_row, 10);
    }

    #[test]
    fn the_answer_is_found_next_to_the_question() {
        let span = Span {
            oldest_ms: NOW - YEAR,
            now_ms: NOW,
        };
        let question = cand(1, 10, -5.0, "user", Some(NOW));
        let answer = cand(2, 10, -2.0, "assistant", Some(NOW));
        let r = rank(vec![question, answer], &[1.0], span, None);
        assert_eq!((r[0].record_id, r[0].answers.clone()), (1, vec![2]));
    }

    #[test]
    fn conversation_outweighs_tool_noise() {
        assert!(role_weight("user") > role_weight("assistant"));
        assert!(role_weight("assistant") > role_weight("tool_call"));
        assert!(role_weight("tool_call") > role_weight("tool_output"));
    }
}
