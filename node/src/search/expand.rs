//! Query expansion from the meaning table's own neighbours: for a content
//! word of a prose question, up to [`NEIGHBOURS`] other words whose rows
//! in the built-in token table lie nearest to its row (cosine at least
//! [`FLOOR`]), which the lexical tier looks up as down-weighted stand-ins
//! for the word ([`WEIGHT`]): "kids" also finds "children", "ceramics"
//! "pottery".
//!
//! The neighbours are worked out once, offline, by [`neighbour_list`]
//! (`cairn-bench recall --write-neighbours`) into
//! `node/assets/embed/neighbours.txt`, compiled in: a question reads a few
//! lines of it, never the table. Only plain whole-word tokens (ASCII
//! letters, three or more) that are neither stop words nor common (their
//! SIF weight, the row's length, below [`MIN_WEIGHT`]) are expanded or
//! offered, and never a word's own inflections (the stem index finds
//! those). This module owns the list and how it is made; it does not
//! decide when a question is expanded (the lexical tier does, for
//! questions the meaning tier answers too) nor read the store.
//!
//! The translations a question's foreign words are looked up by live in
//! `text::translation`; this module only bounds how many are used.

use crate::embed::Embedder;
use crate::text::sorted_lookup as lookup;

/// The list, as [`neighbour_list`] wrote it for the built-in table.
static LIST: &str = include_str!("../../assets/embed/neighbours.txt");

/// Words of one question translated at most (in the order asked).
pub(super) const MOST_TRANSLATED: usize = 8;

/// Neighbours kept per word.
pub(super) const NEIGHBOURS: usize = 3;
/// Cosine a neighbour's row must reach with the word's.
const FLOOR: f32 = 0.45;
/// Least SIF weight (row length) of a word expanded or offered: the
/// table weighs a token by how rare it is, so this leaves out common
/// words ("time", "new", "good", "family") whose neighbours are noise.
const MIN_WEIGHT: f32 = 0.97;
/// Weight of a match through a neighbour or a translation against a
/// match of the word itself (the stem index's matches of a neighbour count
/// `rank::STEM_WEIGHT` of that again).
pub(super) const WEIGHT: f64 = 0.6;
/// A neighbour that matches more records than this in the history is
/// not looked up: common there, it tells little, and its matches would
/// take a scan (about 3 ms of a fresh question on the 1 GB benchmark
/// history for a question with many neighbours).
pub(super) const MOST_MATCHES: i64 = 1_000;
/// Words of one question expanded at most (its rarest first): a pasted
/// page of text must not cost a look-up per neighbour of every word.
pub(super) const MOST_WORDS: usize = 6;

/// The first line of the list: the table it was made from and how.
fn header(table_id: &str) -> String {
    format!(
        "# cairn neighbours v1 table {table_id} k {NEIGHBOURS} floor {FLOOR} weight {MIN_WEIGHT}"
    )
}

/// The neighbours of `word` in the built-in list, nearest first; none for
/// a word the list does not expand.
pub(super) fn neighbours_of(word: &str) -> impl Iterator<Item = &'static str> {
    lookup(LIST, word)
        .into_iter()
        .flat_map(str::split_whitespace)
}

/// A token that may be expanded or offered: ASCII letters, three or more.
fn plain(token: &str) -> bool {
    token.len() >= 3 && token.bytes().all(|b| b.is_ascii_lowercase())
}

/// Every row of `e`'s table as a unit vector, with its token and its
/// length (the SIF weight).
struct Rows<'a> {
    dim: usize,
    tokens: Vec<&'a str>,
    weights: Vec<f32>,
    unit: Vec<f32>,
}

impl<'a> Rows<'a> {
    fn of(e: &Embedder<'a>) -> Rows<'a> {
        let t = e.table();
        let dim = t.dim;
        let mut rows = Rows {
            dim,
            tokens: Vec::new(),
            weights: Vec::new(),
            unit: Vec::new(),
        };
        for (i, token) in t.tokens().enumerate() {
            let mut v = vec![0f32; dim];
            t.add_row(i as u32, &mut v);
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            rows.tokens.push(token);
            rows.weights.push(n);
            match n > 0.0 {
                true => rows.unit.extend(v.iter().map(|x| x / n)),
                false => rows.unit.extend(std::iter::repeat_n(0.0, dim)),
            }
        }
        rows
    }

    fn unit(&self, i: usize) -> &[f32] {
        &self.unit[i * self.dim..(i + 1) * self.dim]
    }

    /// Whether row `i` may be expanded or offered.
    fn usable(&self, i: usize) -> bool {
        let token = self.tokens[i];
        self.weights[i] >= MIN_WEIGHT && plain(token) && !super::query::is_stopword(token)
    }

    /// The neighbours of row `at` (nearest first, at most [`NEIGHBOURS`]),
    /// among `candidates`.
    fn nearest(&self, at: usize, candidates: &[usize]) -> Vec<(&'a str, f32)> {
        let word = self.tokens[at];
        let stem = crate::text::light_stem(word);
        let q = self.unit(at);
        let mut best: Vec<(&'a str, f32)> = Vec::new();
        for &j in candidates {
            let token = self.tokens[j];
            if j == at || token.starts_with(word) || word.starts_with(token) {
                continue;
            }
            let c = dot(q, self.unit(j));
            if c < FLOOR || crate::text::light_stem(token) == stem {
                continue;
            }
            best.push((token, c));
        }
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        best.truncate(NEIGHBOURS);
        best
    }

    /// The first row of `word`, if it may be expanded.
    #[cfg(test)]
    fn row_of(&self, word: &str) -> Option<usize> {
        let at = self.tokens.iter().position(|t| *t == word)?;
        self.usable(at).then_some(at)
    }
}

/// Dot product in eight lanes (the order is fixed, so the result is too).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let rest: f32 = a
        .chunks_exact(8)
        .remainder()
        .iter()
        .zip(b.chunks_exact(8).remainder())
        .map(|(x, y)| x * y)
        .sum();
    lanes.iter().sum::<f32>() + rest
}

/// The neighbour list of `e`'s table (its name `table_id`), as
/// `node/assets/embed/neighbours.txt` holds it: a header, then one line
/// per word that has neighbours, `word nb nb…`, sorted by word. A dev
/// tool's work (tens of seconds in a release build): a search never
/// calls it.
pub fn neighbour_list(e: &Embedder<'_>, table_id: &str) -> String {
    let rows = Rows::of(e);
    let candidates: Vec<usize> = (0..rows.tokens.len()).filter(|&i| rows.usable(i)).collect();
    let mut lines: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &at in &candidates {
        // A token listed twice counts once, as its first row.
        if !seen.insert(rows.tokens[at]) {
            continue;
        }
        let near = rows.nearest(at, &candidates);
        if !near.is_empty() {
            let words: Vec<&str> = near.iter().map(|n| n.0).collect();
            lines.push(format!("{} {}", rows.tokens[at], words.join(" ")));
        }
    }
    lines.sort();
    let mut out = header(table_id);
    for l in lines {
        out.push('\n');
        out.push_str(&l);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_was_made_from_the_built_in_table() {
        // A new table cannot ship with the old table's neighbours.
        assert_eq!(
            LIST.lines().next(),
            Some(header(crate::embed::BUILTIN_ID).as_str())
        );
        // And what it says of a sample of words is what the table says.
        let rows = Rows::of(crate::embed::builtin());
        let candidates: Vec<usize> = (0..rows.tokens.len()).filter(|&i| rows.usable(i)).collect();
        for word in ["kids", "ceramics", "evening", "foliage", "dollars", "chose"] {
            let want: Vec<&str> = match rows.row_of(word) {
                Some(at) => rows.nearest(at, &candidates).iter().map(|n| n.0).collect(),
                None => Vec::new(),
            };
            let got: Vec<&str> = neighbours_of(word).collect();
            assert_eq!(got, want, "{word}");
        }
        assert_eq!(neighbours_of("kids").next(), Some("children"));
    }

    #[test]
    fn stop_words_pieces_and_numbers_are_never_expanded_nor_offered() {
        for w in crate::search::query::STOPWORDS {
            assert_eq!(neighbours_of(w).count(), 0, "{w}");
        }
        for w in ["##ing", "30", "2024", "go", "new", "time", "x", ""] {
            assert_eq!(neighbours_of(w).count(), 0, "{w}");
        }
        let mut lines = 0;
        let mut last = "";
        for line in LIST.lines().skip(1) {
            let mut words = line.split(' ');
            let word = words.next().expect("a word");
            assert!(word > last, "sorted: {last} then {word}");
            last = word;
            let near: Vec<&str> = words.collect();
            assert!(!near.is_empty() && near.len() <= NEIGHBOURS, "{line}");
            for w in std::iter::once(word).chain(near.iter().copied()) {
                assert!(plain(w), "{line}");
                assert!(!super::super::query::is_stopword(w), "{line}");
            }
            for n in &near {
                // Its own inflections are the stem index's to find.
                assert_ne!(crate::text::light_stem(n), crate::text::light_stem(word));
                assert!(!n.starts_with(word) && !word.starts_with(n), "{line}");
            }
            lines += 1;
        }
        assert!(lines > 1_000, "{lines}");
    }

    #[test]
    fn every_word_of_the_neighbour_list_is_found() {
        for line in LIST.lines().skip(1) {
            let (word, rest) = line.split_once(' ').expect("word and neighbours");
            assert_eq!(lookup(LIST, word), Some(rest));
        }
    }
}
