//! Meaning-level text vectors from a static token-embedding table.
//!
//! Each vocabulary token has a fixed vector (distilled once from
//! all-MiniLM-L6-v2, see docs/embeddings.md); a text's vector is the sum of
//! its tokens' rows (the table already weighs common tokens down),
//! normalised to unit length. It costs microseconds per text, so every
//! record gets one when it is indexed. The table is compiled into the
//! binary: nothing is read from disk or the network to use it.

pub mod table;
pub mod wordpiece;

use std::sync::OnceLock;

use table::Table;

/// The built-in table (see `tools/embed/distill.py`).
static BUILTIN: &[u8] = include_bytes!("../../assets/embed/minilm-static.bin");

/// How many tokens of a text count: enough for the gist of a message,
/// bounded so that long tool output costs no more than a paragraph.
pub const MAX_TOKENS: usize = 256;

/// Problems with an embedding table.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The bytes are not a valid table.
    #[error("invalid embedding table: {0}")]
    BadTable(String),
}

/// Turns text into unit vectors.
#[derive(Debug)]
pub struct Embedder<'a> {
    table: Table<'a>,
    unk: u32,
}

impl<'a> Embedder<'a> {
    /// An embedder over a table file's bytes.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Embedder<'a>, EmbedError> {
        let table = Table::parse(bytes)?;
        let unk = *table
            .vocab
            .get("[UNK]")
            .ok_or_else(|| EmbedError::BadTable("no [UNK] token".into()))?;
        Ok(Embedder { table, unk })
    }

    /// Dimensions of the vectors.
    pub fn dim(&self) -> usize {
        self.table.dim
    }

    /// The token ids of (a bounded prefix of) `text`.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        // A token is rarely shorter than a character; this bounds the work
        // for huge texts before tokenizing.
        let end = text
            .char_indices()
            .nth(MAX_TOKENS * 12)
            .map_or(text.len(), |(i, _)| i);
        wordpiece::tokenize(&self.table.vocab, self.unk, &text[..end], MAX_TOKENS)
    }

    /// The unit vector of `text`, or `None` when no token of it carries
    /// meaning (empty text, only unknown pieces).
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let mut acc = vec![0f32; self.table.dim];
        for id in self.tokens(text) {
            self.table.add_row(id, &mut acc);
        }
        let norm = acc.iter().map(|v| v * v).sum::<f32>().sqrt();
        if !norm.is_finite() || norm < 1e-6 {
            return None;
        }
        acc.iter_mut().for_each(|v| *v /= norm);
        Some(acc)
    }
}

/// The embedder over the table compiled into cairn. Parsing takes a few
/// milliseconds and happens once per process, on first use.
pub fn builtin() -> &'static Embedder<'static> {
    static ONCE: OnceLock<Embedder<'static>> = OnceLock::new();
    ONCE.get_or_init(|| Embedder::from_bytes(BUILTIN).expect("the built-in table is valid"))
}

/// Quantises a unit vector to int8 (scaled so its largest component is
/// ±127); cosine similarity is unchanged up to rounding.
pub fn quantize(v: &[f32]) -> Vec<u8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let s = if max > 0.0 { 127.0 / max } else { 0.0 };
    v.iter()
        .map(|x| (x * s).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect()
}

/// Cosine similarity of a unit query vector and a stored int8 vector.
pub fn cosine(query: &[f32], stored: &[u8]) -> f32 {
    let mut dot = 0f32;
    let mut norm = 0f32;
    for (q, &b) in query.iter().zip(stored) {
        let v = f32::from(b as i8);
        dot += q * v;
        norm += v * v;
    }
    if norm > 0.0 { dot / norm.sqrt() } else { 0.0 }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A table file made here: `rows` as (token, vector) pairs.
    pub(crate) fn tiny_table(rows: &[(&str, &[f32])]) -> Vec<u8> {
        let dim = rows[0].1.len();
        let vocab = rows.iter().map(|r| r.0).collect::<Vec<_>>().join("\n");
        let mut b = b"CAIRNEMB".to_vec();
        for n in [1, rows.len() as u32, dim as u32, vocab.len() as u32] {
            b.extend_from_slice(&n.to_le_bytes());
        }
        b.extend_from_slice(vocab.as_bytes());
        let mut values = Vec::new();
        for (_, v) in rows {
            let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            b.extend_from_slice(&scale.to_le_bytes());
            values.extend(v.iter().map(|x| (x / scale).round() as i8 as u8));
        }
        b.extend_from_slice(&values);
        b
    }

    pub(crate) fn tiny() -> Vec<u8> {
        tiny_table(&[
            ("[UNK]", &[0.0, 0.0, 0.0]),
            ("slow", &[1.0, 0.0, 0.0]),
            ("sluggish", &[0.9, 0.1, 0.0]),
            ("terminal", &[0.0, 1.0, 0.0]),
            ("shell", &[0.1, 0.9, 0.0]),
            ("rounding", &[0.0, 0.0, 1.0]),
            ("##s", &[0.0, 0.0, 0.0]),
        ])
    }

    #[test]
    fn loads_a_tiny_table_and_embeds_by_meaning() {
        let bytes = tiny();
        let e = Embedder::from_bytes(&bytes).expect("load");
        assert_eq!(e.dim(), 3);
        let a = e.embed("Slow terminal").expect("vector");
        let b = e.embed("sluggish shells").expect("vector");
        let c = e.embed("rounding").expect("vector");
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        assert!(dot(&a, &b) > 0.9, "{}", dot(&a, &b));
        assert!(dot(&a, &c).abs() < 0.05);
        assert!(e.embed("").is_none());
        assert!(e.embed("zzz qqq").is_none(), "only [UNK]");
        // Stored int8 vectors keep the similarity.
        let qb = quantize(&b);
        assert!((cosine(&a, &qb) - dot(&a, &b)).abs() < 0.02);
    }

    #[test]
    fn refuses_damaged_tables() {
        let good = tiny();
        assert!(Embedder::from_bytes(&good[..good.len() - 1]).is_err());
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(Embedder::from_bytes(&bad).is_err());
        let mut bad = good.clone();
        bad[12] = 99; // rows no longer match
        assert!(Embedder::from_bytes(&bad).is_err());
        assert!(Embedder::from_bytes(b"").is_err());
        let no_unk = tiny_table(&[("a", &[1.0])]);
        assert!(Embedder::from_bytes(&no_unk).is_err());
    }

    #[test]
    fn the_builtin_table_loads_and_relates_paraphrases() {
        let e = builtin();
        assert_eq!(e.dim(), 256);
        let q = e.embed("new terminal windows open slowly").expect("q");
        let near = quantize(
            &e.embed("zsh startup takes seconds because nvm loads")
                .expect("v"),
        );
        let far = quantize(
            &e.embed("banker's rounding of half cents in invoices")
                .expect("v"),
        );
        assert!(
            cosine(&q, &near) > cosine(&q, &far),
            "{} {}",
            cosine(&q, &near),
            cosine(&q, &far)
        );
    }
}
