//! A question pasted whole (an error message, a log line, a line an
//! agent wrote): the sessions whose records say it word for word come
//! first, newest first, then the fused ranking. By its words alone such
//! a passage is judged by its rarest words, and in a large history other
//! records holding only those outrank the one that says the passage.
//!
//! Cost stays bounded: only a question that reads as pasted ([`of`]), and
//! of the newest [`MOST_IDS`] records holding all of its rarest words
//! (those matching at most [`MOST_MATCHES_PROSE`] records, or, in a line
//! of code whose words are all commoner, [`MOST_MATCHES`]), only
//! [`MOST_RECORDS`] (and [`MOST_BYTES`] of text) that the search's
//! filters allow, in sessions not found yet, are read, then kept where
//! their text holds its tokens in order. (An FTS5 phrase query would walk
//! the common words' matches too.) Reads go through the store's read API.

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
const MOST_MATCHES_PROSE: i64 = 2_000;
/// The same for a line of code none of whose words is that rare
/// (`return self.width * self.height`): its words are an API's, common
/// one by one and rare together. Prose stays at the lower bound, since a
/// long typed question reads as a passage too and is rarely said word for
/// word.
pub(super) const MOST_MATCHES: i64 = 8_000;

/// A word of the question as the lexical tier looks it up (a token, an
/// identifier's tokens such as `self.width`, two CJK characters) with how
/// many records match it at most.
pub(super) type Word = (i64, Vec<String>);

/// A question that reads as pasted: its tokens, and whether it has code
/// punctuation (more than a sentence's).
pub(super) struct Passage {
    tokens: Vec<String>,
    code: bool,
}

/// The rarest words a passage is found by, the most records holding them
/// looked at (a filter may allow few of the newest), and the most records
/// and bytes of their text read.
const MOST_WORDS: usize = 4;
const MOST_IDS: i64 = 400;
const MOST_RECORDS: usize = 50;
const MOST_BYTES: usize = 512 << 10;

/// `q` when it reads as pasted: nothing quoted, no prefix, and long or
/// machine-like (each CJK character is a token, as in the index).
pub(super) fn of(q: &Query) -> Option<Passage> {
    let text = &q.text;
    if text.contains('"') || q.terms.iter().any(|t| matches!(t, Term::Prefix(_))) {
        return None;
    }
    let toks = tokens(text);
    let machine = text.chars().any(|c| {
        c.is_ascii_digit() || !(c.is_alphabetic() || c.is_whitespace() || ",.?!'-".contains(c))
    });
    let code = text
        .chars()
        .any(|c| !(c.is_alphanumeric() || c.is_whitespace() || ",.?!'-，。？！、：；".contains(c)));
    let pasted = toks.len() >= LONG || (toks.len() >= MIN_TOKENS && machine);
    (pasted && toks.len() <= MOST_TOKENS).then_some(Passage { tokens: toks, code })
}

/// The words of `passage` it is found by: its rarest (of `rare`, rarest
/// first) that match at most [`MOST_MATCHES_PROSE`] records, or in a line
/// of code with no such word at most [`MOST_MATCHES`].
fn found_by<'w>(passage: &Passage, rare: &'w [Word]) -> impl Iterator<Item = &'w Word> {
    let prose = rare.iter().any(|w| w.0 <= MOST_MATCHES_PROSE);
    let most = match !prose && passage.code {
        true => MOST_MATCHES,
        false => MOST_MATCHES_PROSE,
    };
    rare.iter().filter(move |w| w.0 <= most).take(MOST_WORDS)
}

/// Up to `most` sessions the `filter` allows whose records say `passage`
/// (from [`of`]), each with its newest such record, newest first, found by
/// the question's `rare` words (see [`found_by`]); none without such
/// words. (A page of `most` sessions needs no more.)
pub(super) fn said(
    store: &Store,
    passage: &Passage,
    rare: &[Word],
    filter: &Filter,
    most: usize,
) -> Result<Vec<Ranked>, SearchError> {
    let by = Query {
        terms: found_by(passage, rare)
            .map(|w| Term::Phrase(w.1.clone()))
            .collect(),
        ..Query::default()
    };
    if by.terms.is_empty() {
        return Ok(Vec::new());
    }
    let needle = spaced_tokens(&passage.tokens.join(" "));
    let mut check = store.row_check(filter)?;
    let mut out: Vec<Ranked> = Vec::new();
    let (mut read, mut bytes) = (0, 0);
    for id in store.newest_matches(Index::Exact, &by.to_fts_all(), MOST_IDS)? {
        if read >= MOST_RECORDS || bytes > MOST_BYTES || out.len() >= most {
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
                answers: Vec::new(),
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
            answers: Vec::new(),
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
        let p = p.expect("a passage");
        assert_eq!(p.tokens, want);
        assert!(p.code, "a colon");
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
        assert!(!of(&Query::parse(long)).expect(long).code, "{long}");
        let typed = "why did we pin hyper to 0.14, and who asked?";
        assert!(!of(&Query::parse(typed)).expect(typed).code, "{typed}");
        let line = "return self.width * self.height * self.depth";
        assert!(of(&Query::parse(line)).expect(line).code, "{line}");
        let page = "the build failed again ".repeat(17);
        assert!(of(&Query::parse(&page)).is_none(), "a pasted page");
        let mixed = of(&Query::parse("把 .python-version 改成 3.10")).expect("a passage");
        assert_eq!(
            mixed.tokens,
            ["把", "python", "version", "改", "成", "3", "10"]
        );
        let sentence = "为什么导入银行账单时，内存占用那么高？";
        assert!(
            !of(&Query::parse(sentence)).expect(sentence).code,
            "{sentence}"
        );
        // Short, but with a comma between its words: still pasted, not code.
        let short = "内存占用，很高";
        assert!(!of(&Query::parse(short)).expect(short).code, "{short}");
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
    fn a_passage_is_found_by_its_rarest_words_and_a_line_of_code_by_commoner_ones() {
        let word = |n: i64, w: &str| (n, w.split(' ').map(String::from).collect::<Vec<_>>());
        let by = |q: &str, rare: &[Word]| -> Vec<String> {
            let p = of(&Query::parse(q)).expect(q);
            found_by(&p, rare).map(|w| w.1.join(" ")).collect()
        };
        let prose = "let me check the project structure and try running the server";
        let code = "return self.width * self.height * self.depth";
        let common = [word(3_066, "self depth"), word(5_716, "self width")];
        // Prose: only words of at most 2,000 matches.
        assert!(by(prose, &common).is_empty());
        // Code none of whose words is that rare: the commoner ones.
        assert_eq!(by(code, &common), ["self depth", "self width"]);
        // Code with a rare word: that one alone, as prose.
        let rare = [word(40, "depth"), word(3_066, "self depth")];
        assert_eq!(by(code, &rare), ["depth"]);
        // The four rarest at most, CJK pairs among them.
        let many = [
            word(1, "验 证"),
            word(2, "b"),
            word(3, "c"),
            word(4, "d"),
            word(5, "e"),
        ];
        assert_eq!(by(prose, &many), ["验 证", "b", "c", "d"]);
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
