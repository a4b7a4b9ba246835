//! The token-embedding table file: vocabulary, one scale per row, int8 rows.
//!
//! Layout (little endian), written by `tools/embed/distill.py`:
//! `b"CAIRNEMB"`, u32 version (1), u32 rows, u32 dim, u32 vocabulary bytes,
//! the vocabulary (one token per row, joined by `\n`), rows × f32 scale,
//! rows × dim int8. Parsing borrows the bytes: the built-in table is read
//! straight from the binary. The token → row map is built on first use,
//! so a process that only needs the table's shape (or that starts a
//! search's scan before it embeds the question) does not wait for it; a
//! text embedded alone looks its pieces up in the built-in table's
//! [`Index`] (made by `node/build.rs`) instead.

use std::sync::OnceLock;

use super::EmbedError;

/// Token → row. Looked up for every piece of every word embedded, so with
/// a fast non-keyed hash: the keys are the fixed vocabulary, not input.
pub type Vocab<'a> = std::collections::HashMap<&'a str, u32, rustc_hash::FxBuildHasher>;

/// Tokens asked for by [`Table::vocab_of`].
pub type WantedSet = std::collections::HashSet<String, rustc_hash::FxBuildHasher>;

const MAGIC: &[u8; 8] = b"CAIRNEMB";
const HEADER: usize = 8 + 4 * 4;

/// A parsed table, borrowing its bytes.
#[derive(Debug)]
pub struct Table<'a> {
    /// The vocabulary, one token per row, joined by `\n`.
    text: &'a str,
    /// Token → row (the first row of a token listed twice), once built.
    vocab: OnceLock<Vocab<'a>>,
    /// Row scales.
    scales: &'a [u8],
    /// Row values, rows × dim.
    values: &'a [u8],
    /// Dimensions per row.
    pub dim: usize,
    /// The tokens in byte order, when the table comes with them.
    index: Option<Index<'a>>,
}

/// A table's tokens in byte order (the layout `node/build.rs` writes):
/// where each row's token starts in the vocabulary text, and the rows
/// sorted by token, each token once (its first row).
#[derive(Debug)]
struct Index<'a> {
    /// `rows + 1` u32 LE offsets into the text.
    starts: &'a [u8],
    /// Rows (u32 LE), sorted by their tokens.
    sorted: &'a [u8],
}

impl Index<'_> {
    /// The index in `b` for a vocabulary `text` of `rows` tokens, if it is
    /// one: sizes that fit, offsets that lie in the text.
    fn parse<'b>(b: &'b [u8], text: &str, rows: usize) -> Option<Index<'b>> {
        let starts = b.get(4..4 + 4 * (rows + 1))?;
        let sorted = &b[4 + starts.len()..];
        let fits = u32_at(b, 0) as usize == rows
            && sorted.len().is_multiple_of(4)
            && sorted.len() <= 4 * rows
            && u32_at(starts, 0) == 0
            && u32_at(starts, 4 * rows) as usize == text.len() + 1;
        fits.then_some(Index { starts, sorted })
    }

    /// The token of row `r`.
    fn token<'t>(&self, text: &'t str, r: u32) -> &'t str {
        let at = 4 * r as usize;
        let (from, to) = (u32_at(self.starts, at), u32_at(self.starts, at + 4));
        text.get(from as usize..(to as usize).saturating_sub(1))
            .unwrap_or("")
    }

    /// The first row of `token`, by binary search.
    fn row_of(&self, text: &str, token: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.sorted.len() / 4);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let row = u32_at(self.sorted, 4 * mid);
            match self.token(text, row).cmp(token) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(row),
            }
        }
        None
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> Table<'a> {
    /// Checks and parses a table file's bytes.
    pub fn parse(b: &'a [u8]) -> Result<Table<'a>, EmbedError> {
        let bad = |why: &str| EmbedError::BadTable(why.to_owned());
        if b.len() < HEADER || &b[..8] != MAGIC {
            return Err(bad("not a cairn embedding table"));
        }
        if u32_at(b, 8) != 1 {
            return Err(bad("unsupported table version"));
        }
        let rows = u32_at(b, 12) as usize;
        let dim = u32_at(b, 16) as usize;
        let vocab_len = u32_at(b, 20) as usize;
        if rows == 0 || dim == 0 || dim > 4096 {
            return Err(bad("empty or implausible table"));
        }
        let need = rows
            .checked_mul(dim + 4)
            .and_then(|n| n.checked_add(HEADER + vocab_len));
        if need != Some(b.len()) {
            return Err(bad("size does not match the header"));
        }
        let vocab_bytes = &b[HEADER..HEADER + vocab_len];
        let text = std::str::from_utf8(vocab_bytes).map_err(|_| bad("vocabulary is not UTF-8"))?;
        if text.bytes().filter(|&b| b == b'\n').count() + 1 != rows {
            return Err(bad("vocabulary and rows differ in number"));
        }
        let scales_at = HEADER + vocab_len;
        let values_at = scales_at + rows * 4;
        Ok(Table {
            text,
            vocab: OnceLock::new(),
            scales: &b[scales_at..values_at],
            values: &b[values_at..],
            dim,
            index: None,
        })
    }

    /// The table with its tokens' index (see [`Index`]); without it when
    /// `index` is not one for this table.
    pub fn with_index(mut self, index: &'a [u8]) -> Table<'a> {
        self.index = Index::parse(index, self.text, self.rows());
        self
    }

    /// Token → row, built on the first call.
    pub fn vocab(&self) -> &Vocab<'a> {
        self.vocab.get_or_init(|| {
            let mut vocab = Vocab::with_capacity_and_hasher(self.rows(), Default::default());
            for (n, tok) in self.text.split('\n').enumerate() {
                vocab.entry(tok).or_insert(n as u32);
            }
            vocab
        })
    }

    /// Token → row for the tokens of `wanted` only: each looked up in the
    /// index, or in the whole vocabulary's map for a table without one.
    pub fn vocab_of(&self, wanted: &WantedSet) -> Vocab<'a> {
        let mut vocab = Vocab::default();
        for w in wanted {
            if let Some((tok, row)) = self.find(w) {
                vocab.insert(tok, row);
            }
        }
        vocab
    }

    /// The token as the table holds it and its first row.
    fn find(&self, token: &str) -> Option<(&'a str, u32)> {
        match &self.index {
            Some(index) => {
                let row = index.row_of(self.text, token)?;
                Some((index.token(self.text, row), row))
            }
            None => self.vocab().get_key_value(token).map(|(t, r)| (*t, *r)),
        }
    }

    /// Whether [`Table::vocab`] has been built.
    pub fn has_vocab(&self) -> bool {
        self.vocab.get().is_some()
    }

    /// The row of `token` (its first, if listed twice), found without
    /// building the map when the table has an index.
    pub fn row_of(&self, token: &str) -> Option<u32> {
        match &self.index {
            Some(index) => index.row_of(self.text, token),
            None => self
                .text
                .split('\n')
                .position(|t| t == token)
                .map(|n| n as u32),
        }
    }

    /// Rows in the table, one per token.
    pub(crate) fn rows(&self) -> usize {
        self.scales.len() / 4
    }

    /// The tokens, one per row, in row order.
    pub fn tokens(&self) -> impl Iterator<Item = &'a str> {
        self.text.split('\n')
    }

    /// Adds row `id` to `acc` (which has `dim` entries).
    pub fn add_row(&self, id: u32, acc: &mut [f32]) {
        let i = id as usize;
        let Some(s) = self.scales.get(i * 4..i * 4 + 4) else {
            return;
        };
        let scale = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let row = &self.values[i * self.dim..(i + 1) * self.dim];
        for (a, &v) in acc.iter_mut().zip(row) {
            *a += scale * f32::from(v as i8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every token of the built-in table, and some it lacks, is found in
    /// the index at the row the whole vocabulary's map gives.
    #[test]
    fn the_index_finds_each_token_at_its_first_row() {
        let bare = Table::parse(super::super::BUILTIN).expect("table");
        let indexed = Table::parse(super::super::BUILTIN)
            .expect("table")
            .with_index(super::super::BUILTIN_INDEX);
        assert!(indexed.index.is_some(), "the build's index fits the table");
        let absent = ["", "zzzzzzzzqx", "##qqqq", "hyperx", "[unk]", "\u{10FFFF}"];
        for token in bare.tokens().chain(absent) {
            let want = bare.vocab().get(token).copied();
            assert_eq!(indexed.row_of(token), want, "{token:?}");
        }
        let wanted: WantedSet = ["pin", "##ned", "hyper", "", "x".repeat(140).as_str(), "为"]
            .into_iter()
            .map(String::from)
            .collect();
        let found = indexed.vocab_of(&wanted);
        assert_eq!(found, bare.vocab_of(&wanted));
        assert!(found.contains_key("hyper") && found.contains_key("##ned"));
        assert!(!found.contains_key(""));
    }

    /// An index made for another table is not used.
    #[test]
    fn an_index_that_does_not_fit_is_left_out() {
        let b = super::super::BUILTIN_INDEX;
        let table = || Table::parse(super::super::BUILTIN).expect("table");
        assert!(table().with_index(&b[..b.len() - 3]).index.is_none());
        assert!(table().with_index(&b[..16]).index.is_none());
        let mut other = b.to_vec();
        other[0] ^= 1;
        assert!(table().with_index(&other).index.is_none());
        assert!(table().with_index(&[]).index.is_none());
    }
}
