//! The token-embedding table file: vocabulary, one scale per row, int8 rows.
//!
//! Layout (little endian), written by `tools/embed/distill.py`:
//! `b"CAIRNEMB"`, u32 version (1), u32 rows, u32 dim, u32 vocabulary bytes,
//! the vocabulary (one token per row, joined by `\n`), rows × f32 scale,
//! rows × dim int8. Parsing borrows the bytes: the built-in table is read
//! straight from the binary. The token → row map is built on first use,
//! so a process that only needs the table's shape (or that starts a
//! search's scan before it embeds the question) does not wait for it.

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
        })
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

    /// Token → row for the tokens of `wanted` only, from one pass over the
    /// vocabulary (a fraction of building [`Table::vocab`], for a text
    /// embedded once).
    pub fn vocab_of(&self, wanted: &WantedSet) -> Vocab<'a> {
        let shapes = Shapes::of(wanted);
        let mut vocab = Vocab::default();
        for (n, tok) in self.text.split('\n').enumerate() {
            if shapes.may_hold(tok) && wanted.contains(tok) {
                vocab.entry(tok).or_insert(n as u32);
            }
        }
        vocab
    }

    /// Whether [`Table::vocab`] has been built.
    pub fn has_vocab(&self) -> bool {
        self.vocab.get().is_some()
    }

    /// The row of `token` (its first, if listed twice), found without
    /// building the map.
    pub fn row_of(&self, token: &str) -> Option<u32> {
        self.text
            .split('\n')
            .position(|t| t == token)
            .map(|n| n as u32)
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

/// The first bytes and lengths of the tokens [`Table::vocab_of`] looks
/// for, so that its pass over the vocabulary hashes only the tokens that
/// could be one of them. A question's words split into some hundred
/// pieces of a few dozen shapes, and most of the 30,522 tokens of the
/// built-in table share none: hashing every one of them was about 0.4 ms
/// of each fresh question's embedding.
struct Shapes {
    /// Per first byte, a bit per length (lengths from 127 on share the
    /// last bit); the continuation pieces (`##…`) by the first byte after
    /// their mark, in the upper half. An empty token is first byte 0,
    /// length 0.
    bits: [u128; 512],
}

impl Shapes {
    fn of(wanted: &WantedSet) -> Shapes {
        let mut bits = [0u128; 512];
        for w in wanted {
            let (first, len) = Shapes::shape(w);
            bits[first] |= 1 << len;
        }
        Shapes { bits }
    }

    fn shape(token: &str) -> (usize, u32) {
        let len = token.len().min(127) as u32;
        let b = token.as_bytes();
        match b {
            [b'#', b'#', next, ..] => (256 + usize::from(*next), len),
            _ => (usize::from(b.first().copied().unwrap_or(0)), len),
        }
    }

    /// False only when no token looked for has `token`'s shape.
    fn may_hold(&self, token: &str) -> bool {
        let (first, len) = Shapes::shape(token);
        self.bits[first] >> len & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_pass_every_token_looked_for_and_few_others() {
        let table = Table::parse(super::super::BUILTIN).expect("table");
        let wanted: WantedSet = ["pin", "##ned", "hyper", "", "x".repeat(140).as_str(), "为"]
            .into_iter()
            .map(String::from)
            .collect();
        let shapes = Shapes::of(&wanted);
        for w in &wanted {
            assert!(shapes.may_hold(w), "{w:?}");
        }
        // A longer token of a long one's first byte shares its last bit.
        assert!(shapes.may_hold(&"x".repeat(200)));
        let passed = table
            .text
            .split('\n')
            .filter(|t| shapes.may_hold(t))
            .count();
        assert!(passed * 20 < table.rows(), "{passed} of {}", table.rows());
        // The pass finds exactly what a look-up of each token finds.
        let found = table.vocab_of(&wanted);
        for w in &wanted {
            assert_eq!(found.get(w.as_str()).copied(), table.row_of(w), "{w:?}");
        }
        assert!(found.contains_key("hyper") && found.contains_key("##ned"));
    }
}
