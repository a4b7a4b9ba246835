//! The page a search returns: for each ranked session on it, what its hit
//! shows (snippet, role, time, session, machine, source) and, when the best
//! record is the user's own words, the reply that answers them.
//!
//! Reads go through the store (`store::hits`); terminal escapes are
//! stripped here from everything shown, and a source path is shown
//! redacted.

use super::{Hit, Page, SearchError, rank, snippet};
use crate::store::Store;
use crate::text;

/// The page of `limit` (at least one) of `ranked` after the first
/// `offset`, its excerpts cut around `words`; `total` counts every ranked
/// session.
pub(super) fn page(
    store: &Store,
    ranked: Vec<rank::Ranked>,
    words: Vec<String>,
    (offset, limit): (usize, usize),
) -> Result<Page, SearchError> {
    let total = ranked.len();
    let mut hits = Vec::new();
    for top in ranked.into_iter().skip(offset).take(limit.max(1)) {
        if let Some(hit) = hit_details(store, &top, &words)? {
            hits.push(hit);
        }
    }
    Ok(Page {
        hits,
        total,
        offset,
        words,
    })
}

/// The record that answers a user's record: the best-matching reply
/// before the user's next turn in the session, else the first reply after
/// it. A reply to a later turn answers that turn, however well it matches.
fn answer_of(store: &Store, top: &rank::Ranked) -> Result<Option<i64>, SearchError> {
    if top.role != "user" {
        return Ok(None);
    }
    if !top.answers.is_empty() {
        let next = store.user_turn_after(top.session_row, top.record_id)?;
        let before_next = top.answers.iter().find(|&&id| next.is_none_or(|n| id < n));
        if let Some(&id) = before_next {
            return Ok(Some(id));
        }
    }
    Ok(store.reply_after(top.session_row, top.record_id)?)
}

/// Fetches what a hit shows: text for the snippet, session, machine, source.
fn hit_details(
    store: &Store,
    top: &rank::Ranked,
    words: &[String],
) -> Result<Option<Hit>, SearchError> {
    let answer = match answer_of(store, top)? {
        Some(id) => store.record_text(id)?.map(|a| {
            (
                id,
                a.role,
                a.ts,
                snippet::make(&text::strip_terminal(&a.text), words, 200),
            )
        }),
        None => None,
    };
    let clean = |s: Option<String>| s.map(|s| text::strip_terminal(&s));
    let Some(r) = store.hit_row(top.record_id)? else {
        return Ok(None);
    };
    Ok(Some(Hit {
        snippet: snippet::make(&text::strip_terminal(&r.text), words, 200),
        role: r.role,
        time: r.ts.and_then(rank::rfc3339),
        offset: r.offset,
        session_id: text::strip_terminal(&r.session_id),
        agent: r.agent,
        project: clean(r.project),
        title: clean(r.title),
        machine: text::strip_terminal(&r.machine),
        // Shown redacted: a file named after a session id that holds
        // a secret (the stored path stays real, to read it again).
        source: clean(r.source).map(|p| crate::redact::fields::shown_path(&p).into_owned()),
        score: top.score,
        matches: top.matches,
        record_id: top.record_id,
        answer_snippet: answer.as_ref().map(|a| a.3.clone()),
        answer_role: answer.as_ref().map(|a| a.1.clone()),
        answer_record_id: answer.as_ref().map(|a| a.0),
        answer_time: answer.as_ref().and_then(|a| a.2).and_then(rank::rfc3339),
    }))
}
