//! Kinds of developer tools and the tools of each kind, written by hand
//! in `node/assets/glossary.txt`: a question that names a kind ("which
//! HTTP client", "the bundler", "our ORM") also looks up the tools of
//! that kind its history names ("reqwest", "webpack", "diesel"), as it
//! looks up the translations of a foreign word.
//!
//! This module owns the list and how a question's words find its lines;
//! the lexical tier decides what a tool's match weighs and which tools the
//! history holds. A kind is one word ("bundler", "orm") or two that the
//! question says one after the other ("web framework"); a plural names its
//! singular. Only tools whose names are one plain token are listed, and
//! none that is an everyday English word ("make", "click", "spring").

use crate::text::sorted_lookup;

use super::query::Term;

/// The list: a header line, then `kind tool tool …` sorted by kind (two
/// words joined by `_`), each kind's tools the most used first.
static LIST: &str = include_str!("../../assets/glossary.txt");

/// Kinds one question looks up at most (in the order asked).
pub(super) const MOST_KINDS: usize = 3;
/// Tools of one kind a question looks up at most: the first this many of
/// its line that the history holds.
pub(super) const MOST_TOOLS: usize = 6;

/// `word` and, for a plural, its singular forms.
fn forms(word: &str) -> impl Iterator<Item = String> + '_ {
    let ies = word
        .strip_suffix("ies")
        .filter(|s| s.len() >= 3)
        .map(|s| format!("{s}y"));
    let s = word
        .strip_suffix('s')
        .filter(|s| s.len() >= 3 && !s.ends_with('s'))
        .map(str::to_string);
    std::iter::once(word.to_string()).chain(ies).chain(s)
}

/// The word `t` is, when it is one.
fn word(t: &Term) -> Option<&str> {
    match t {
        Term::Phrase(p) if p.len() == 1 => Some(p[0].as_str()),
        _ => None,
    }
}

/// The tools of the kind `key` (`http_client`, `bundler`).
fn tools_of(key: &str) -> Option<Vec<&'static str>> {
    sorted_lookup(LIST, key).map(|rest| rest.split_whitespace().collect())
}

/// The kinds `terms` (a question's terms, in order) name, at most
/// [`MOST_KINDS`]: for each, the index of the term that ends it (the noun
/// its tools stand for: "client" of "http client") and its tools, the
/// most used first. Two neighbouring words are tried before the second
/// alone, so "web framework" is one kind and "framework" alone none.
pub(super) fn kinds_named(terms: &[Term]) -> Vec<(usize, Vec<&'static str>)> {
    let mut out = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        if out.len() == MOST_KINDS {
            break;
        }
        // A quoted phrase of two words names a kind as two words asked
        // one after the other do.
        let (before, last) = match t {
            Term::Phrase(p) if p.len() == 2 => (Some(p[0].as_str()), p[1].as_str()),
            _ => match word(t) {
                Some(w) => (i.checked_sub(1).and_then(|j| word(&terms[j])), w),
                None => continue,
            },
        };
        let pair = before
            .into_iter()
            .flat_map(|b| forms(last).map(move |l| format!("{b}_{l}")));
        if let Some(tools) = pair.chain(forms(last)).find_map(|key| tools_of(&key)) {
            out.push((i, tools));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(words: &[&str]) -> Vec<Term> {
        words
            .iter()
            .map(|w| Term::Phrase(vec![w.to_string()]))
            .collect()
    }

    #[test]
    fn the_list_is_sorted_and_plain() {
        let mut last = String::new();
        for line in LIST.lines().skip(1) {
            let mut parts = line.split(' ');
            let kind = parts.next().unwrap();
            assert!(
                kind.as_bytes() > last.as_bytes(),
                "{kind} after {last}: unsorted or twice"
            );
            assert!(
                kind.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{kind}"
            );
            let tools: Vec<&str> = parts.collect();
            assert!(!tools.is_empty(), "{kind} lists no tool");
            for t in &tools {
                let plain = t.len() >= 2
                    && t.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    && t.as_bytes()[0].is_ascii_lowercase();
                assert!(plain, "{kind}: {t} is not one plain token");
            }
            last = kind.to_string();
        }
        assert!(LIST.lines().count() > 50);
    }

    #[test]
    fn two_words_name_a_kind_before_the_second_alone() {
        let named = kinds_named(&terms(&["which", "http", "clients", "crate"]));
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].0, 2, "the kind ends at its second word");
        assert_eq!(named[0].1[0], "reqwest");
        // "framework" alone is no kind; "web framework" is.
        assert!(kinds_named(&terms(&["framework"])).is_empty());
        let web = kinds_named(&terms(&["web", "framework"]));
        assert!(web[0].1.contains(&"axum") && web[0].1.contains(&"django"));
        // One word that is a kind, plural or not.
        for w in ["bundler", "bundlers", "orm", "orms"] {
            assert_eq!(kinds_named(&terms(&[w])).len(), 1, "{w}");
        }
        assert_eq!(
            kinds_named(&terms(&["utility", "libraries"]))[0].1[0],
            "lodash"
        );
        // A quoted two-word phrase names its kind too.
        let quoted = vec![Term::Phrase(vec!["test".into(), "runner".into()])];
        assert!(kinds_named(&quoted)[0].1.contains(&"pytest"));
        // Words that name nothing, and a word the list lists as a tool.
        assert!(kinds_named(&terms(&["why", "did", "we", "pin", "hyper"])).is_empty());
    }

    #[test]
    fn a_question_looks_up_few_kinds() {
        let many = terms(&["bundler", "linter", "formatter", "orm", "dataframe"]);
        let named = kinds_named(&many);
        assert_eq!(named.len(), MOST_KINDS);
        assert_eq!(named.iter().map(|n| n.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    }
}
