//! Turning what a person typed into a safe FTS5 query.
//!
//! Nothing the user types reaches FTS5 as syntax: every term is quoted, so
//! `foo::bar`, `src/main.rs`, `"unclosed`, `NOT`, `(` or a pasted stack trace
//! can never raise an FTS5 syntax error. Supported on purpose: `"quoted
//! phrases"`, `prefix*` terms, and CJK runs (searched as phrases).

use crate::text::{is_cjk, tokens};

/// One thing to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// Tokens that must appear next to each other, in order (one token = a word).
    Phrase(Vec<String>),
    /// A word prefix (`hyp*`).
    Prefix(String),
}

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// The terms, any of which may match (ranked by how many and how rare).
    pub terms: Vec<Term>,
    /// Plain words written outside quotes (lowercase, no CJK, no
    /// identifiers): these are also looked up by their English stem, so
    /// "signed" finds "sign". Quoted phrases and identifiers stay exact.
    pub stems: Vec<String>,
    /// What was typed, for dates and periods named in the question.
    pub text: String,
}

/// Common English words that carry no meaning in a question.
pub(super) const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "being", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "happened",
    "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "me", "my", "of", "on", "or", "our", "she", "should", "so", "some", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "very",
    "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with",
    "would", "you", "your",
];

pub(super) fn is_stopword(t: &str) -> bool {
    STOPWORDS.binary_search(&t).is_ok()
}

/// True for a word worth looking up by its stem: letters only (at least
/// three), no CJK. Numbers, hex and identifiers stay exact.
fn is_plain_word(w: &str) -> bool {
    w.chars().count() >= 3 && w.chars().all(|c| c.is_alphabetic() && !is_cjk(c))
}

/// What an English contraction ends in after its apostrophe ("we're",
/// "they'll", "I'd", "I'm", "we've"; "'s" only after a pronoun or "let",
/// since a noun's possessive, "Mel's", is the rarer phrase and stays), and
/// the articles a French or Italian word may start with ("l'import",
/// "qu'il"). The index splits words at the apostrophe, so left on they
/// would make the word a two-token phrase matching only that spelling.
const CLITIC_ENDS: &[&str] = &["d", "ll", "m", "re", "ve"];
const ELIDED_STARTS: &[&str] = &["c", "d", "j", "l", "m", "n", "qu", "s", "t"];

/// One typed word with its clitics taken off.
enum Word<'a> {
    /// The word itself: "we" for "we're", "import" for "l'import".
    Plain(&'a str),
    /// A negation contracted to `n't` ("isn't", "don't", "can't"): a
    /// function word that matches every record saying it, whatever about.
    Negation,
}

fn without_clitics(word: &str) -> Word<'_> {
    let apostrophe = |c: char| c == '\'' || c == '\u{2019}';
    let core = word.trim_matches(|c: char| !c.is_alphanumeric());
    let letters = |s: &str| !s.is_empty() && s.chars().all(char::is_alphabetic);
    let mut core_word = core;
    if let Some(i) = core.rfind(apostrophe) {
        let before = &core[..i];
        let lower = before.to_lowercase();
        let after = core[i..].trim_start_matches(apostrophe).to_lowercase();
        if letters(before) && after == "t" && lower.ends_with('n') {
            return Word::Negation;
        }
        let contracted_is = after == "s" && (is_stopword(&lower) || lower == "let");
        if letters(before) && (CLITIC_ENDS.contains(&after.as_str()) || contracted_is) {
            core_word = before;
        }
    }
    if let Some(i) = core_word.find(apostrophe) {
        let (start, rest) = (
            &core_word[..i],
            core_word[i..].trim_start_matches(apostrophe),
        );
        if ELIDED_STARTS.contains(&start.to_lowercase().as_str())
            && letters(rest)
            && rest.chars().count() >= 2
        {
            return Word::Plain(rest);
        }
    }
    // Punctuation around the word is no token either way.
    Word::Plain(core_word)
}

/// Terms for one whitespace-separated word: runs of ordinary tokens stay
/// one phrase (identifiers, paths), runs of CJK characters become
/// overlapping two-character phrases so a question written without spaces
/// still matches text that shares only part of it.
fn word_terms(toks: &[String]) -> Vec<Term> {
    let mut out = Vec::new();
    let mut plain: Vec<String> = Vec::new();
    let mut cjk: Vec<String> = Vec::new();
    let flush_cjk = |cjk: &mut Vec<String>, out: &mut Vec<Term>| {
        if cjk.len() == 1 {
            out.push(Term::Phrase(std::mem::take(cjk)));
        } else {
            for pair in cjk.windows(2) {
                out.push(Term::Phrase(pair.to_vec()));
            }
            cjk.clear();
        }
    };
    for t in toks {
        if t.chars().all(is_cjk) {
            if !plain.is_empty() {
                out.push(Term::Phrase(std::mem::take(&mut plain)));
            }
            cjk.push(t.clone());
        } else {
            if !cjk.is_empty() {
                flush_cjk(&mut cjk, &mut out);
            }
            plain.push(t.clone());
        }
    }
    if !plain.is_empty() {
        out.push(Term::Phrase(plain));
    }
    if !cjk.is_empty() {
        flush_cjk(&mut cjk, &mut out);
    }
    out
}

impl Query {
    /// Parses user input. Never fails; an input with no searchable
    /// characters gives an empty query.
    pub fn parse(input: &str) -> Query {
        let mut terms = Vec::new();
        let mut rest = String::new();
        // Quoted phrases first; an unclosed quote runs to the end.
        let mut parts = input.split('"');
        if let Some(first) = parts.next() {
            rest.push_str(first);
        }
        for (i, part) in parts.enumerate() {
            if i % 2 == 0 {
                let toks = tokens(part);
                if !toks.is_empty() {
                    terms.push(Term::Phrase(toks));
                }
            } else {
                rest.push(' ');
                rest.push_str(part);
            }
        }
        let mut words = Vec::new();
        for word in rest.split_whitespace() {
            if let Some(stem) = word.strip_suffix('*') {
                let toks = tokens(stem);
                if toks.len() == 1 && !toks[0].chars().any(is_cjk) {
                    words.push((Term::Prefix(toks[0].clone()), false));
                    continue;
                }
            }
            let (word, negation) = match without_clitics(word) {
                Word::Plain(w) => (w, false),
                Word::Negation => (word, true),
            };
            words.extend(word_terms(&tokens(word)).into_iter().map(|t| (t, negation)));
        }
        let is_stop = |t: &Term, negation: bool| {
            negation || matches!(t, Term::Phrase(p) if p.len() == 1 && is_stopword(&p[0]))
        };
        let meaningful = !terms.is_empty() || words.iter().any(|(t, n)| !is_stop(t, *n));
        let mut stems = Vec::new();
        for (t, negation) in words {
            let stop = is_stop(&t, negation);
            if stop && meaningful {
                continue;
            }
            if let Term::Phrase(p) = &t
                && let [w] = &p[..]
                && is_plain_word(w)
                && !stems.contains(w)
            {
                stems.push(w.clone());
            }
            if !terms.contains(&t) {
                terms.push(t);
            }
        }
        Query {
            terms,
            stems,
            text: input.to_owned(),
        }
    }

    /// The FTS5 MATCH expression for the stemmed index: the plain words, OR-ed.
    pub fn to_stem_fts(words: &[String]) -> String {
        words
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ")
    }

    /// A copy without the given single-word terms (words that named a
    /// date, which the ranking uses as a period instead), unless that would
    /// leave nothing to search for.
    pub fn without_words(&self, words: &[String]) -> Query {
        let keep =
            |t: &Term| !matches!(t, Term::Phrase(p) if p.len() == 1 && words.contains(&p[0]));
        let terms: Vec<Term> = self.terms.iter().filter(|t| keep(t)).cloned().collect();
        if terms.is_empty() {
            return self.clone();
        }
        Query {
            terms,
            stems: self
                .stems
                .iter()
                .filter(|w| !words.contains(w))
                .cloned()
                .collect(),
            text: self.text.clone(),
        }
    }

    /// The phrases the question wrote as hyphenated compounds of letters
    /// ("Ledger-API", "rate-limit"), as opposed to identifiers, paths or
    /// quoted phrases.
    pub fn compounds(&self) -> Vec<&Term> {
        let text = self.text.to_lowercase();
        self.terms
            .iter()
            .filter(|t| {
                matches!(t, Term::Phrase(p) if p.len() > 1
                    && p.iter().all(|w| w.chars().all(|c| c.is_alphabetic() && !is_cjk(c)))
                    && text.contains(&p.join("-")))
            })
            .collect()
    }

    /// A copy with `words` added as words of their own (a plain one with
    /// its stem), after the terms already there.
    pub fn with_words(&self, words: &[String]) -> Query {
        let mut q = self.clone();
        for w in words {
            let t = Term::Phrase(vec![w.clone()]);
            if is_stopword(w) || q.terms.contains(&t) {
                continue;
            }
            q.terms.push(t);
            if is_plain_word(w) && !q.stems.contains(w) {
                q.stems.push(w.clone());
            }
        }
        q
    }

    /// A copy with the plain word `from` written `to` instead (its other
    /// spelling).
    pub fn respelled(&self, from: &str, to: &str) -> Query {
        let mut q = self.clone();
        let (from_t, to_t) = (
            Term::Phrase(vec![from.to_owned()]),
            Term::Phrase(vec![to.to_owned()]),
        );
        let had = q.terms.contains(&to_t);
        q.terms.retain(|t| !(had && *t == from_t));
        for t in &mut q.terms {
            if *t == from_t {
                *t = to_t.clone();
            }
        }
        q.stems.retain(|w| w != to);
        for w in &mut q.stems {
            if w == from {
                *w = to.to_owned();
            }
        }
        q
    }

    /// True when there is nothing to search for.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The FTS5 MATCH expression: every term quoted, joined with OR.
    pub fn to_fts(&self) -> String {
        self.fts_joined(" OR ")
    }

    /// The FTS5 MATCH expression that needs every term (quoted phrases stay
    /// phrases): what `cairn forget --query` matches.
    pub fn to_fts_all(&self) -> String {
        self.fts_joined(" AND ")
    }

    fn fts_joined(&self, op: &str) -> String {
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        self.terms
            .iter()
            .map(|t| match t {
                Term::Phrase(toks) => quote(&toks.join(" ")),
                Term::Prefix(p) => format!("{}*", quote(p)),
            })
            .collect::<Vec<_>>()
            .join(op)
    }

    /// Lowercase words to highlight in snippets.
    pub fn highlight_words(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.terms {
            match t {
                Term::Phrase(toks) if toks.iter().all(|t| t.chars().all(is_cjk)) => {
                    out.push(toks.concat())
                }
                Term::Phrase(toks) => out.extend(toks.iter().cloned()),
                Term::Prefix(p) => out.push(p.clone()),
            }
        }
        // Stem matches: "signed" for "sign", "crashing" for "crashes".
        for w in &self.stems {
            let stem = crate::text::light_stem(w);
            if stem.chars().count() >= 3 && !out.contains(&stem) {
                out.push(stem);
            }
        }
        out.sort_by_key(|w| std::cmp::Reverse(w.len()));
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyphenated_compounds_of_letters_are_told_from_identifiers() {
        let q = Query::parse(
            "Warum hängt die Ledger-API? rate-limit src/main.rs foo_bar x-86 \"wall clock\"",
        );
        let compounds: Vec<&Term> = q.compounds();
        assert_eq!(
            compounds,
            [
                &Term::Phrase(vec!["ledger".into(), "api".into()]),
                &Term::Phrase(vec!["rate".into(), "limit".into()]),
            ]
        );
        let wide = q.with_words(&["ledger".into(), "api".into(), "the".into()]);
        assert!(wide.terms.contains(&Term::Phrase(vec!["ledger".into()])));
        assert!(wide.terms.contains(&Term::Phrase(vec!["api".into()])));
        assert!(wide.terms.starts_with(&q.terms), "added after the others");
        assert!(wide.stems.contains(&"ledger".to_string()));
        // A stop word is not added.
        assert!(!wide.terms.contains(&Term::Phrase(vec!["the".into()])));
        assert_eq!(wide.text, q.text);
    }

    fn fts(q: &str) -> String {
        Query::parse(q).to_fts()
    }

    #[test]
    fn stopwords_dropped_unless_alone() {
        assert_eq!(fts("why did we pin hyper?"), r#""pin" OR "hyper""#);
        assert_eq!(fts("why"), r#""why""#);
        assert_eq!(fts("the who"), r#""the" OR "who""#);
    }

    #[test]
    fn clitics_come_off_and_a_negation_is_a_stop_word() {
        // "isn't" matched every record saying it, whatever about.
        assert_eq!(
            fts("my bread culture isn’t rising"),
            r#""bread" OR "culture" OR "rising""#
        );
        assert_eq!(fts("why don't we cache it?"), r#""cache""#);
        assert_eq!(fts("we're stuck, it's slow"), r#""stuck" OR "slow""#);
        assert_eq!(fts("they'll ship what I'd built"), r#""ship" OR "built""#);
        // A noun's possessive stays: "Mel's" is rarer than "Mel".
        assert_eq!(fts("Mel's art show"), r#""mel s" OR "art" OR "show""#);
        // French and Italian articles come off the word they start.
        assert_eq!(
            fts("l'import échoue sur l’iPhone qu'il"),
            r#""import" OR "échoue" OR "sur" OR "iphone" OR "il""#
        );
        assert_eq!(Query::parse("l'import").stems, ["import"]);
        // Alone, or quoted, a negation is what there is to look for.
        assert_eq!(fts("isn't"), r#""isn t""#);
        assert_eq!(
            fts(r#"the "wasn't created" line"#),
            r#""wasn t created" OR "line""#
        );
        // Quotes around a word and code are no clitics.
        assert_eq!(
            fts("'ledger.fx' rock'n'roll"),
            r#""ledger fx" OR "rock n roll""#
        );
    }

    #[test]
    fn plain_words_are_stemmed_quoted_and_identifiers_are_not() {
        let q = Query::parse(r#"When did she sign up for the "pottery class"? E0382 foo::bar"#);
        assert_eq!(q.stems, ["sign"]);
        let q = Query::parse("crashes crashing crashed 404 为什么");
        assert_eq!(q.stems, ["crashes", "crashing", "crashed"]);
        assert_eq!(
            Query::to_stem_fts(&q.stems),
            r#""crashes" OR "crashing" OR "crashed""#
        );
        assert!(
            Query::parse("pinned")
                .highlight_words()
                .contains(&"pin".to_owned())
        );
    }

    #[test]
    fn date_words_can_be_dropped_but_never_all() {
        let q = Query::parse("what happened in June 2024 with the dog");
        let w = vec!["june".to_owned(), "2024".to_owned()];
        assert_eq!(q.without_words(&w).to_fts(), r#""dog""#);
        let only = Query::parse("June 2024");
        assert_eq!(only.without_words(&w), only);
    }

    #[test]
    fn stopword_list_is_sorted() {
        let mut s = STOPWORDS.to_vec();
        s.sort_unstable();
        assert_eq!(s, STOPWORDS);
    }

    #[test]
    fn punctuation_heavy_terms_become_phrases() {
        assert_eq!(fts("foo::bar"), r#""foo bar""#);
        assert_eq!(fts("src/store/mod.rs"), r#""src store mod rs""#);
        assert_eq!(
            fts("error[E0382]: borrow of moved value"),
            r#""error e0382" OR "borrow" OR "moved" OR "value""#
        );
        assert_eq!(fts("NOT AND OR ( ) ^ - + :"), r#""not""#);
        assert!(Query::parse("::: --- ///").is_empty());
    }

    #[test]
    fn quotes_and_prefixes() {
        assert_eq!(
            fts(r#""pinned hyper" proxy"#),
            r#""pinned hyper" OR "proxy""#
        );
        assert_eq!(
            fts(r#"unclosed "quote here"#),
            r#""quote here" OR "unclosed""#
        );
        assert_eq!(fts("hyp*"), r#""hyp"*"#);
        assert_eq!(fts("*"), "");
    }

    #[test]
    fn cjk_and_cyrillic() {
        assert_eq!(
            fts("为什么禁用缓存"),
            r#""为 什" OR "什 么" OR "么 禁" OR "禁 用" OR "用 缓" OR "缓 存""#
        );
        assert_eq!(fts("用Redis缓存"), r#""用" OR "redis" OR "缓 存""#);
        assert_eq!(
            fts("почему отключили кэш"),
            r#""почему" OR "отключили" OR "кэш""#
        );
    }
}
