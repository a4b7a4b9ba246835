//! A question that is a passage pasted whole (an error message, a log
//! line, a line an agent wrote): when records say the whole of it word for
//! word, their sessions come first, newest first, and the fused ranking
//! follows. Without this, a passage of common words is judged by its
//! rarest words alone, and in a large history other records holding
//! those outrank the one that holds the passage.
//!
//! Only for a question that reads as pasted ([`of`]: no quotes, prefix or
//! CJK; [`LONG`] tokens or more, or [`MIN_TOKENS`] with a digit or code
//! punctuation) with words that match at most [`MOST_MATCHES`] records:
//! the newest records holding all of those ([`MOST_RECORDS`] at most) are
//! read and kept where their text holds the passage's tokens in order.
//! Not an FTS5 phrase query: it walks the common words' matches too,
//! milliseconds at 1 GB for a passage no record says. A typed question
//! ("why did we pin hyper") costs nothing. Reads go through the store's
//! read API; nothing here writes SQL.

use super::SearchError;
use super::df::Index;
use super::query::{Query, Term};
use super::rank::Ranked;
use crate::store::{Filter, Store};
use crate::text::{is_cjk, tokens};

/// Tokens a question with a digit or code punctuation needs to be taken
/// for a passage.
pub(super) const MIN_TOKENS: usize = 4;

/// Tokens that make any question a passage.
pub(super) const LONG: usize = 8;

/// The most records a word of the passage may match to be one it is
/// looked up by.
pub(super) const MOST_MATCHES: i64 = 2_000;

/// Words of the passage it is looked up by at most (its rarest).
const MOST_WORDS: usize = 4;

/// The records holding those words read at most, newest first.
const MOST_RECORDS: i64 = 200;

/// The question `q` as one phrase, when it reads as a pasted passage; its
/// text is left empty, so that a date inside it names no period.
pub(super) fn of(q: &Query) -> Option<Query> {
    let text = &q.text;
    if text.contains('"') || q.terms.iter().any(|t| matches!(t, Term::Prefix(_))) {
        return None;
    }
    let toks = tokens(text);
    if toks.iter().any(|t| t.chars().any(is_cjk)) {
        return None;
    }
    let machine = text.chars().any(|c| {
        c.is_ascii_digit() || !(c.is_alphabetic() || c.is_whitespace() || ",.?!'-".contains(c))
    });
    let pasted = toks.len() >= LONG || (toks.len() >= MIN_TOKENS && machine);
    pasted.then(|| Query {
        terms: vec![Term::Phrase(toks)],
        ..Query::default()
    })
}

/// The sessions whose records the `filter` allows say `passage` (from
/// [`of`]), each with its newest such record, newest first; `rare` are the
/// question's words that match at most [`MOST_MATCHES`] records, rarest
/// first. None without such words, or when no record says it.
pub(super) fn said(
    store: &Store,
    passage: &Query,
    rare: &[String],
    filter: &Filter,
) -> Result<Vec<Ranked>, SearchError> {
    let Some(Term::Phrase(want)) = passage.terms.first() else {
        return Ok(Vec::new());
    };
    if rare.is_empty() {
        return Ok(Vec::new());
    }
    let by = Query {
        terms: rare
            .iter()
            .take(MOST_WORDS)
            .map(|w| Term::Phrase(vec![w.clone()]))
            .collect(),
        ..Query::default()
    };
    let ids = store.newest_matches(Index::Exact, &by.to_fts_all(), MOST_RECORDS)?;
    let mut check = store.row_check(filter)?;
    let mut out: Vec<Ranked> = Vec::new();
    for id in ids {
        let Some(text) = store.record_text(id)? else {
            continue;
        };
        if !holds(&tokens(&text.text), want) {
            continue;
        }
        let Some((role, _, session_row, _)) = check.columns(id)? else {
            continue;
        };
        if !out.iter().any(|r| r.session_row == session_row) {
            out.push(Ranked {
                record_id: id,
                score: 0.0,
                matches: 1,
                session_row,
                role,
                answer: None,
                coverage: 1.0,
            });
        }
    }
    Ok(out)
}

/// Whether `toks` holds `want` as a run of consecutive tokens.
fn holds(toks: &[String], want: &[String]) -> bool {
    !want.is_empty() && toks.windows(want.len()).any(|w| w == want)
}

/// The sessions of `said` first, scored as the best of `ranked`, then the
/// rest of `ranked` in its order.
pub(super) fn first(mut said: Vec<Ranked>, ranked: Vec<Ranked>) -> Vec<Ranked> {
    if said.is_empty() {
        return ranked;
    }
    let top = ranked.first().map_or(1.0, |r| r.score);
    for r in &mut said {
        r.score = top;
    }
    let sessions: std::collections::HashSet<i64> = said.iter().map(|r| r.session_row).collect();
    said.extend(
        ranked
            .into_iter()
            .filter(|r| !sessions.contains(&r.session_row)),
    );
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(session_row: i64, record_id: i64) -> Ranked {
        Ranked {
            record_id,
            score: 1.0,
            matches: 1,
            session_row,
            role: "user".into(),
            answer: None,
            coverage: 1.0,
        }
    }

    #[test]
    fn a_long_unquoted_question_is_a_passage_and_others_are_not() {
        let p = of(&Query::parse(
            "index out of bounds: the len is 3 but the index is 3",
        ));
        let words = "index out of bounds the len is 3 but the index is 3";
        let want: Vec<String> = words.split(' ').map(String::from).collect();
        assert_eq!(p.expect("a passage").terms, vec![Term::Phrase(want)]);
        for not in [
            "pin hyper",
            "why did we",
            "which database did we choose and why",
            "the len: 3",
            "\"index out of bounds\" the len is 3",
            "index out of bou* the len",
            "为什么选择 tantivy 作为 搜索",
        ] {
            assert!(of(&Query::parse(not)).is_none(), "{not}");
        }
        let long = "let me check the project structure and try running the server";
        assert!(of(&Query::parse(long)).is_some(), "{long}");
        let dated = of(&Query::parse("on 2024-06-03 the build failed")).expect("a passage");
        assert!(dated.text.is_empty(), "a date inside names no period");
    }

    #[test]
    fn a_passage_is_held_only_as_consecutive_tokens_in_order() {
        let toks = |s: &str| tokens(s);
        let text = toks("thread panicked: index out of bounds: the len is 3 but the index is 3");
        assert!(holds(&text, &toks("index out of bounds: the len is 3")));
        assert!(holds(&text, &toks("the index is 3")));
        assert!(!holds(&text, &toks("the index is 4")));
        assert!(!holds(&text, &toks("out of index bounds")));
        assert!(!holds(&toks("is 3"), &toks("the index is 3")));
        assert!(!holds(&text, &[]));
    }

    #[test]
    fn sessions_that_say_the_passage_come_first_and_the_rest_keep_their_order() {
        let fused = vec![ranked(1, 10), ranked(2, 20), ranked(3, 30), ranked(4, 40)];
        let said = vec![ranked(3, 31), ranked(5, 50)];
        let order: Vec<(i64, i64)> = first(said, fused.clone())
            .iter()
            .map(|r| (r.session_row, r.record_id))
            .collect();
        assert_eq!(order, vec![(3, 31), (5, 50), (1, 10), (2, 20), (4, 40)]);
        let mut scores = first(vec![ranked(5, 50)], fused.clone())
            .into_iter()
            .map(|r| r.score);
        assert!(
            scores.all(|s| s == 1.0),
            "the passage's sessions tie with the best"
        );
        let same: Vec<i64> = first(Vec::new(), fused)
            .iter()
            .map(|r| r.session_row)
            .collect();
        assert_eq!(same, vec![1, 2, 3, 4]);
    }
}
