//! A question pasted whole (an error message, a log line, a line an
//! agent wrote): the sessions whose records say it word for word come
//! first, newest first, then the fused ranking. By its words alone such
//! a passage is judged by its rarest words, and in a large history other
//! records holding only those outrank the one that says the passage.
//!
//! Cost stays bounded: only a question that reads as pasted ([`of`]), and
//! of the newest [`MOST_IDS`] records holding all of its words that match
//! at most [`MOST_MATCHES`] records, only [`MOST_RECORDS`] (and
//! [`MOST_BYTES`] of text) that the search's filters allow, in sessions
//! not found yet, are read, then kept where their text holds its tokens
//! in order. (An FTS5 phrase query would walk the common words' matches
//! too.) Reads go through the store's read API.

use std::collections::HashSet;

use super::SearchError;
use super::df::Index;
use super::query::{Query, Term};
use super::rank::Ranked;
use crate::store::{Filter, Store};
use crate::text::{spaced_tokens, tokens};

/// Tokens that make a question a passage; [`MIN_TOKENS`] do when it has a
/// digit or code punctuation. Past [`MOST_TOKENS`] it is a pasted page,
/// which the lexical tier's rarest words serve.
const LONG: usize = 8;
const MIN_TOKENS: usize = 4;
const MOST_TOKENS: usize = 64;

/// The most records a word may match to be one the passage is found by.
pub(super) const MOST_MATCHES: i64 = 2_000;

/// The rarest words a passage is found by, the most records holding them
/// looked at (a filter may allow few of the newest), and the most records
/// and bytes of their text read.
const MOST_WORDS: usize = 4;
const MOST_IDS: i64 = 400;
const MOST_RECORDS: usize = 50;
const MOST_BYTES: usize = 512 << 10;

/// The tokens of `q` when it reads as pasted: nothing quoted, no prefix,
/// and long or machine-like (each CJK character is a token, as in the
/// index).
pub(super) fn of(q: &Query) -> Option<Vec<String>> {
    let text = &q.text;
    if text.contains('"') || q.terms.iter().any(|t| matches!(t, Term::Prefix(_))) {
        return None;
    }
    let toks = tokens(text);
    let machine = text.chars().any(|c| {
        c.is_ascii_digit() || !(c.is_alphabetic() || c.is_whitespace() || ",.?!'-".contains(c))
    });
    let pasted = toks.len() >= LONG || (toks.len() >= MIN_TOKENS && machine);
    (pasted && toks.len() <= MOST_TOKENS).then_some(toks)
}

/// The sessions the `filter` allows whose records say `passage` (from
/// [`of`]), each with its newest such record, newest first, found by the
/// question's `rare` words (rarest first); none without such words.
pub(super) fn said(
    store: &Store,
    passage: &[String],
    rare: &[String],
    filter: &Filter,
) -> Result<Vec<Ranked>, SearchError> {
    if rare.is_empty() {
        return Ok(Vec::new());
    }
    let words = rare.iter().take(MOST_WORDS);
    let by = Query {
        terms: words.map(|w| Term::Phrase(vec![w.clone()])).collect(),
        ..Query::default()
    };
    let needle = spaced_tokens(&passage.join(" "));
    let mut check = store.row_check(filter)?;
    let mut out: Vec<Ranked> = Vec::new();
    let (mut read, mut bytes) = (0, 0);
    for id in store.newest_matches(Index::Exact, &by.to_fts_all(), MOST_IDS)? {
        if read >= MOST_RECORDS || bytes > MOST_BYTES {
            break;
        }
        // Newest first, so a session's first record found is its newest.
        let Some((role, _, session_row, _)) = check.columns(id)? else {
            continue;
        };
        if out.iter().any(|r| r.session_row == session_row) {
            continue;
        }
        let Some(text) = store.record_text(id)? else {
            continue;
        };
        read += 1;
        bytes += text.text.len();
        if spaced_tokens(&text.text).contains(&needle) {
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

/// The sessions of `said` first, scored as the best of `ranked`, then the
/// rest of `ranked` in its order.
pub(super) fn first(mut said: Vec<Ranked>, ranked: Vec<Ranked>) -> Vec<Ranked> {
    let top = ranked.first().map_or(1.0, |r| r.score);
    let sessions: HashSet<i64> = said.iter().map(|r| r.session_row).collect();
    said.iter_mut().for_each(|r| r.score = top);
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
        assert_eq!(p.expect("a passage"), want);
        for not in [
            "pin hyper",
            "why did we",
            "which database did we choose and why",
            "the len: 3",
            "\"index out of bounds\" the len is 3",
            "index out of bou* the len",
            "为什么 tantivy",
        ] {
            assert!(of(&Query::parse(not)).is_none(), "{not}");
        }
        let long = "let me check the project structure and try running the server";
        assert!(of(&Query::parse(long)).is_some(), "{long}");
        let page = "the build failed again ".repeat(17);
        assert!(of(&Query::parse(&page)).is_none(), "a pasted page");
        let mixed = of(&Query::parse("把 .python-version 改成 3.10")).expect("a passage");
        assert_eq!(mixed, ["把", "python", "version", "改", "成", "3", "10"]);
    }

    #[test]
    fn a_passage_is_held_only_as_consecutive_tokens_in_order() {
        let holds = |text: &str, want: &str| spaced_tokens(text).contains(&spaced_tokens(want));
        let text = "thread panicked: index out of bounds: the len is 3 but the index is 3";
        assert!(holds(text, "Index out of bounds: the len is 3"));
        assert!(holds(text, "the index is 3"));
        assert!(!holds(text, "the index is 4"));
        assert!(!holds(text, "out of index bounds"));
        assert!(!holds(text, "the index is 33"));
        assert!(!holds("is 3", "the index is 3"));
        let cjk = "请把 .python-version 改成 3.10 吧";
        assert!(holds(cjk, "把 .python-version 改成 3.10"));
        assert!(!holds(cjk, "把 .python-version 改为 3.10"));
        // The same tokens as the index's, one space apart.
        for t in [text, cjk, "  İstanbul -- naïve_café/ÉTÉ 42x "] {
            assert_eq!(
                spaced_tokens(t),
                format!(" {} ", tokens(t).join(" ")),
                "{t}"
            );
        }
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
