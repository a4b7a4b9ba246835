//! Fusion, the last step of a search: the lexical ranking and the meaning
//! tier's nearest sessions blended by reciprocal rank, each tier's vote
//! weighed by how close the session comes to that tier's best.
//!
//! Pure but for [`blend`], which asks the meaning tier for what it left
//! for after the lexical tier (see `semantic::nearest_of`).

use std::collections::HashMap;

use super::SearchError;
use super::plan::Plan;
use super::rank::Ranked;
use super::semantic::{self, Near, Scanned};
use crate::store::{Store, runs};

/// Sessions from each tier that take part in fusion.
const FUSE_DEPTH: usize = 50;
/// Reciprocal-rank constant: larger flattens the difference between ranks.
/// Chosen with VECTOR_WEIGHT on the recall bench's tune split (k 10/60 ×
/// weight 0.5–1.0); see docs/embeddings.md.
const RRF_K: f64 = 10.0;
/// Weight of the vector tier against the lexical one (1.0): the lexical
/// ranking is the stronger signal when it has one.
const VECTOR_WEIGHT: f64 = 0.6;
/// How much a session's lexical score, relative to the best session's,
/// scales its rank's share in fusion (the power it is raised to). The
/// lexical score is the session's own evidence: its matching records
/// summed and its coverage of the question's words. By rank alone, a
/// session that matched one generic word ("pin the tab" for "pin hyper")
/// came second to the session that matched both, and the meaning tier's
/// vote then put it first. Chosen on the recall bench's tune split with
/// [`MEANING_STRENGTH`] (0.5/1/2 × 1/2/3/4/8, vector weight 0.6–1.0;
/// docs/embeddings.md): ALL/tune 82.3% -> 84.1%, holdout 83.6% -> 85.5%.
const LEXICAL_STRENGTH: f64 = 1.0;
/// The same for a session's best cosine relative to the meaning tier's
/// best: a steep power, since this table's cosines sit close together
/// (0.4 is the floor) and one a tenth below the best is far less alike.
const MEANING_STRENGTH: f64 = 4.0;
/// How much the share of the question a session's best run of records
/// covers scales its lexical vote (the power it is raised to): a session
/// first only because a short record holds one of four words ("yes
/// operation" for "the pet needed an operation after eating clothing")
/// outvoted the meaning tier's answer. Chosen on the recall bench's tune
/// split (0 / 0.25 / 0.5 / 0.75 / 1 / 2; from 0.5 on, reworded questions
/// were lost): ALL/tune 85.5% -> 85.9% on the set alone, 82.7% -> 83.0%
/// in the 1 GB history, no category lower.
const LEXICAL_COVERAGE: f64 = 0.25;

/// The lexical ranking `lex` of `plan`'s question, fused with the meaning
/// tier when it applies (`scanned`, from `semantic::alongside`), unless
/// the question names a period and the lexical tier has an answer: such a
/// question is answered from the period itself by the lexical tier.
pub(super) fn blend(
    store: &Store,
    plan: &Plan<'_>,
    lex: Vec<Ranked>,
    scanned: Option<Scanned>,
    pre: Option<&runs::RunMap>,
) -> Result<Vec<Ranked>, SearchError> {
    let Some(scanned) = scanned else {
        return Ok(lex);
    };
    if !lex.is_empty() && plan.period.is_some() {
        return Ok(lex);
    }
    Ok(match semantic::nearest_of(store, plan, scanned, pre)? {
        Some(near) => fuse(lex, near),
        None => lex,
    })
}

/// Lexical and meaning ranks fused: each session scores the sum of
/// `weight × strength / (RRF_K + rank)` over the tiers that found it, a
/// tier's strength being how close the session comes to that tier's best
/// (see [`LEXICAL_STRENGTH`], [`MEANING_STRENGTH`]) and, for the lexical
/// tier, how much of the question it covers ([`LEXICAL_COVERAGE`]); the
/// lexical tier's record stands for a session both found.
pub(super) fn fuse(lex: Vec<Ranked>, near: Vec<Near>) -> Vec<Ranked> {
    // Relative to the tier's best; all alike when the best has no score.
    let strength = |score: f64, best: f64, power: f64| match best > 0.0 {
        true => (score / best).clamp(0.0, 1.0).powf(power),
        false => 1.0,
    };
    let top_lex = lex.first().map_or(0.0, |r| r.score);
    let top_sim = near.first().map_or(0.0, |n| f64::from(n.sim));
    let mut by_session: HashMap<i64, (f64, Ranked)> = HashMap::new();
    for (i, r) in lex.into_iter().enumerate() {
        let s = strength(r.score, top_lex, LEXICAL_STRENGTH) * r.coverage.powf(LEXICAL_COVERAGE)
            / (RRF_K + i as f64 + 1.0);
        by_session.insert(r.session_row, (s, r));
    }
    for (i, n) in near.into_iter().take(FUSE_DEPTH).enumerate() {
        let s = strength(f64::from(n.sim), top_sim, MEANING_STRENGTH) * VECTOR_WEIGHT
            / (RRF_K + i as f64 + 1.0);
        by_session
            .entry(n.session)
            .and_modify(|e| e.0 += s)
            .or_insert((
                s,
                Ranked {
                    record_id: n.record_id,
                    score: 0.0,
                    matches: 1,
                    session_row: n.session,
                    role: n.role,
                    answers: Vec::new(),
                    coverage: 0.0,
                },
            ));
    }
    let mut all: Vec<(f64, Ranked)> = by_session.into_values().collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.record_id.cmp(&a.1.record_id)));
    all.into_iter()
        .map(|(s, mut r)| {
            r.score = (s * 1e5).round() / 1e5;
            r
        })
        .collect()
}
