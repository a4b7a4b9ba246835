//! Meaning-level text vectors from a static token-embedding table.
//!
//! Each vocabulary token has a fixed vector (distilled once from
//! all-MiniLM-L6-v2, see docs/embeddings.md); a text's vector is the sum of
//! its first [`MAX_TOKENS`] tokens' rows (the table already weighs common
//! tokens down), normalised to unit length. It is cheap enough to give
//! every user, assistant and note record a vector after it is stored
//! (`store::vectors`). The table is compiled into the binary: nothing is
//! read from disk or the network to use it. Pure.

pub mod table;
pub mod wordpiece;

use std::sync::OnceLock;

use table::Table;

/// The built-in table (see `tools/embed/distill.py`).
static BUILTIN: &[u8] = include_bytes!("../../assets/embed/minilm-static.bin");

/// Its tokens in byte order, derived from it by `node/build.rs`.
static BUILTIN_INDEX: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vocab_index.bin"));

/// How many tokens of a text count: enough for the gist of a message,
/// bounded so that long tool output costs no more than a paragraph.
pub const MAX_TOKENS: usize = 256;

/// Pieces a text embedded alone may look up before building the whole
/// vocabulary's map is the cheaper way (a question has a few hundred).
const ONE_TEXT_PIECES: usize = 4_096;

/// The prefix of `text` that is tokenized: a token is rarely shorter than
/// a character, so this bounds the work for huge texts.
fn bounded(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(MAX_TOKENS * 12)
        .map_or(text.len(), |(i, _)| i);
    &text[..end]
}

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
        Embedder::from_table(Table::parse(bytes)?)
    }

    fn from_table(table: Table<'a>) -> Result<Embedder<'a>, EmbedError> {
        let unk = table
            .row_of("[UNK]")
            .ok_or_else(|| EmbedError::BadTable("no [UNK] token".into()))?;
        Ok(Embedder { table, unk })
    }

    /// The token table itself (its rows, for neighbours of a token).
    pub fn table(&self) -> &Table<'a> {
        &self.table
    }

    /// Dimensions of the vectors.
    pub fn dim(&self) -> usize {
        self.table.dim
    }

    /// Builds the vocabulary's map now (once per process), so that every
    /// later text, a question too, is split with it: for a process that
    /// embeds question after question, such as the daemon's search socket.
    pub fn warm(&self) {
        self.table.vocab();
    }

    /// The token ids of (a bounded prefix of) `text`.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        wordpiece::tokenize(self.table.vocab(), self.unk, bounded(text), MAX_TOKENS)
    }

    /// The unit vector of `text`, or `None` when no token of it carries
    /// meaning (empty text, only unknown pieces).
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        self.vector_of(&self.tokens(text))
    }

    /// [`Embedder::embed`] for a text embedded alone, such as a question:
    /// the same vector, without building the whole vocabulary's map when
    /// it is not built yet: only the pieces the text's words could split
    /// into are looked up, in the table's index.
    pub fn embed_one(&self, text: &str) -> Option<Vec<f32>> {
        if self.table.has_vocab() {
            return self.embed(text);
        }
        let text = bounded(text);
        // Each word gives at least one token: later words are never reached.
        let mut wanted = table::WantedSet::default();
        let mut words = 0;
        wordpiece::words(text, |w| {
            words += 1;
            wordpiece::pieces(w, &mut |p| {
                wanted.insert(p);
            });
            words < MAX_TOKENS && wanted.len() <= ONE_TEXT_PIECES
        });
        if wanted.len() > ONE_TEXT_PIECES {
            return self.embed(text);
        }
        let vocab = self.table.vocab_of(&wanted);
        self.vector_of(&wordpiece::tokenize(&vocab, self.unk, text, MAX_TOKENS))
    }

    /// The unit vector of the sum of the rows of `ids`.
    fn vector_of(&self, ids: &[u32]) -> Option<Vec<f32>> {
        let mut acc = vec![0f32; self.table.dim];
        for &id in ids {
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

/// The blake3 of the built-in table (hex), which names the table that
/// made a data folder's vectors (`store::vector_file::keep_table`): a
/// folder whose vectors another table made computes them again. A test
/// checks it against the bytes, so a new table cannot ship without it.
pub const BUILTIN_ID: &str = "df96e4b0e3fe84b2f5dbeb597c3b6b6b31fc4f0bfc92041f4f1765048d888206";

/// The table of every data folder written before tables were named:
/// the single-token distillation of `tools/embed/distill.py`.
pub const LEGACY_ID: &str = "6b4f3a5ea3af9235a8e5b0a488d5c183a2de6f84f3988f401b30f7cfb7abb856";

/// The process's embedder: the built-in table unless [`install`] put
/// another in its place first.
static PROCESS: OnceLock<Embedder<'static>> = OnceLock::new();

/// The name of a table [`install`]ed in place of the built-in one.
static INSTALLED_ID: OnceLock<String> = OnceLock::new();

/// The name (blake3, hex) of the table this process embeds with, known
/// without parsing it.
pub fn table_id() -> &'static str {
    INSTALLED_ID.get().map_or(BUILTIN_ID, String::as_str)
}

/// The embedder over the table compiled into cairn, parsed once per
/// process on first use. Parsing only checks the table; the vocabulary's
/// map (a millisecond or two) is built when the first text is embedded.
pub fn builtin() -> &'static Embedder<'static> {
    PROCESS.get_or_init(built_in_table)
}

/// A new embedder over the built-in table and its index.
fn built_in_table() -> Embedder<'static> {
    Table::parse(BUILTIN)
        .map(|t| t.with_index(BUILTIN_INDEX))
        .and_then(Embedder::from_table)
        .expect("the built-in table is valid")
}

/// Makes `bytes` (a table file, see [`table`]) this process's table in
/// place of the built-in one, for a benchmark that measures a candidate
/// table without a rebuild. It must come before the first use of
/// [`builtin`]; a table that does not parse, or a call after that first
/// use, is refused and changes nothing. Vectors stored with one table
/// mean nothing to another: only for a data folder made with this table.
pub fn install(bytes: &'static [u8]) -> Result<(), EmbedError> {
    let e = Embedder::from_bytes(bytes)?;
    let id = blake3::hash(bytes).to_hex().to_string();
    PROCESS
        .set(e)
        .map_err(|_| EmbedError::BadTable("a table is already in use in this process".into()))?;
    // Set second: no other call can have set it, as `PROCESS` was free.
    let _ = INSTALLED_ID.set(id);
    Ok(())
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

/// Cosine similarity of a unit query vector and a stored int8 vector, in
/// floating point: what [`Scorer`]'s integer scores stand for.
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

/// Scores stored int8 vectors against one query in integer arithmetic:
/// the query is rounded to i16 once, and a vector's score is its exact
/// integer dot product with that (which the compiler turns into packed
/// multiply-adds), times its known inverse length, over the scale. That is
/// the cosine of the vector and the rounded query: within
/// [`Scorer::bound`] of [`cosine`] (about 2e-4 for 256 dimensions), far
/// less than the int8 rounding of the stored vector itself moves it.
///
/// Every path that scores a vector (the table's rows, the vector file's
/// entries, the sketch's candidates) gets the same value for it, so a
/// ranking does not depend on the path. Scoring in floating point instead,
/// only near the floor, was a chain of 256 dependent adds per vector: a
/// filtered search keeping the 8,000 nearest scored most candidates so.
#[derive(Debug, Clone)]
pub struct Scorer {
    /// The query scaled by `scale` and rounded.
    rounded: Vec<i16>,
    /// 128 times the sum of `rounded` (wrapping): what [`offset_binary`]
    /// adds to a dot product.
    bias: i32,
    scale: f32,
}

impl Scorer {
    /// A scorer for the unit vector `query`.
    pub fn new(query: &[f32]) -> Scorer {
        let max = query.iter().fold(0f32, |m, x| m.max(x.abs()));
        let sum = query.iter().map(|x| x.abs()).sum::<f32>();
        // As large as i16 allows, and small enough that no dot product with
        // an int8 vector leaves i32 (127 * sum(|rounded|) < 2^31).
        let scale = if max > 0.0 {
            (f32::from(i16::MAX) / max).min(2.0e9 / (127.0 * (sum + 1.0)))
        } else {
            1.0
        };
        let rounded: Vec<i16> = query
            .iter()
            .map(|x| (x * scale).round().clamp(-32767.0, 32767.0) as i16)
            .collect();
        let bias = rounded
            .iter()
            .fold(0i32, |b, &q| b.wrapping_add(i32::from(q).wrapping_mul(128)));
        Scorer {
            rounded,
            bias,
            scale,
        }
    }

    /// How far a score may lie from [`cosine`]'s: rounding moves each
    /// query component by at most 0.5 / scale, so the dot product with a
    /// unit vector by at most 0.5 / scale * sqrt(dim). (Floating-point
    /// rounding of the two computations adds a little.)
    pub fn bound(&self) -> f32 {
        0.5 * (self.rounded.len() as f32).sqrt() / self.scale
    }

    /// The score of `stored` when it reaches `floor`; `None` when it does
    /// not (or `stored` is all zeros).
    pub fn score(&self, stored: &[u8], floor: f32) -> Option<f32> {
        let inverse = inverse_norm(stored);
        if inverse == 0.0 {
            return None;
        }
        let dot = dot(&self.rounded, stored, |b| i32::from(b as i8));
        self.finish(dot, inverse, floor)
    }

    /// [`Scorer::score`] of a vector kept as [`offset_binary`] bytes, with
    /// its [`inverse_norm`] known (a search reads these from the vector
    /// file, a million at a time).
    pub fn score_offset(&self, offset: &[u8], inverse: f32, floor: f32) -> Option<f32> {
        if inverse == 0.0 {
            return None;
        }
        let dot = dot(&self.rounded, offset, i32::from);
        // Each byte is its value plus 128; the true product fits i32, so
        // the wrapped sums give it exactly.
        let dot = dot.wrapping_sub(self.bias);
        self.finish(dot, inverse, floor)
    }

    /// The score of a vector whose integer dot product with the rounded
    /// query is `dot`, when it reaches `floor`.
    #[inline(always)]
    fn finish(&self, dot: i32, inverse: f32, floor: f32) -> Option<f32> {
        let score = dot as f32 * inverse / self.scale;
        (score >= floor).then_some(score)
    }
}

/// The dot product of `q` and the bytes `v`, each widened by `widen` (to a
/// value that fits i16), in wrapping i32 arithmetic. Summed 32 products at
/// a time: the shape the compiler turns into x86-64's multiply-add of
/// pairs (`pmaddwd`, baseline SSE2, eight products per instruction) with
/// one horizontal sum per 32. A plain running sum came out with each
/// product widened to 32 bits first, at less than half the speed (26 ms
/// against 12 ms for 1.15 million vectors of 256 on one core).
#[inline(always)]
fn dot(q: &[i16], v: &[u8], widen: impl Fn(u8) -> i32) -> i32 {
    const BLOCK: usize = 32;
    let n = q.len().min(v.len());
    let (q, v) = (&q[..n], &v[..n]);
    let (qc, vc) = (q.chunks_exact(BLOCK), v.chunks_exact(BLOCK));
    let (q_rest, v_rest) = (qc.remainder(), vc.remainder());
    let mut sum = 0i32;
    for (a, b) in qc.zip(vc) {
        let mut block = 0i32;
        for i in 0..BLOCK {
            block = block.wrapping_add(i32::from(a[i]) * widen(b[i]));
        }
        sum = sum.wrapping_add(block);
    }
    for (&a, &b) in q_rest.iter().zip(v_rest) {
        sum = sum.wrapping_add(i32::from(a) * widen(b));
    }
    sum
}

/// Int8 bytes as offset binary (each value plus 128, as u8), and back: the
/// same function both ways.
pub fn offset_binary(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().map(|b| b ^ 0x80).collect()
}

/// One over the length of a stored int8 vector; 0 for a zero vector.
pub fn inverse_norm(stored: &[u8]) -> f32 {
    let n: i32 = stored
        .iter()
        .map(|&b| {
            let v = i32::from(b as i8);
            v * v
        })
        .sum();
    if n == 0 { 0.0 } else { 1.0 / (n as f32).sqrt() }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_text_embedded_alone_gets_the_vector_the_whole_vocabulary_gives() {
        let long_word = "x".repeat(150);
        // More pieces than a question has: the whole map is built instead.
        let many_words = (0..100)
            .map(|i| format!("{i:03}abcdefghijklmnopqrstuvwxyz"))
            .collect::<Vec<_>>()
            .join(" ");
        let texts = [
            "why did we pin hyper?",
            "Café déjà-vu: PINNED reqwest 0.11 because of hyper",
            "为什么禁用缓存",
            "почему мы закрепили hyper",
            "error[E0502]: cannot borrow `x` as mutable /src/main.rs:12",
            long_word.as_str(),
            many_words.as_str(),
            "",
            "\u{7}\u{0}",
        ];
        for text in texts {
            // A fresh table each time: its map is not built yet.
            let alone = built_in_table();
            let got = alone.embed_one(text);
            assert_eq!(alone.table.has_vocab(), text == many_words, "{text}");
            // A table without an index looks the pieces up in its map.
            let bare = Embedder::from_bytes(BUILTIN).expect("table");
            assert_eq!(bare.embed_one(text), got, "{text}");
            let full = built_in_table();
            assert_eq!(got, full.embed(text), "{text}");
            // With the map built, the map answers.
            assert!(full.table.has_vocab());
            assert_eq!(full.embed_one(text), got, "{text}");
            // Warmed before its first text, as the daemon's is.
            let warmed = built_in_table();
            warmed.warm();
            assert!(warmed.table.has_vocab());
            assert_eq!(warmed.embed_one(text), got, "{text}");
        }
    }

    /// A small deterministic generator, so the test needs no crate.
    fn lcg(state: &mut u64) -> u32 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 33) as u32
    }

    #[test]
    fn the_scorer_stays_within_its_bound_of_cosine_and_drops_only_what_is_below_the_floor() {
        let mut st = 7u64;
        let unit = |st: &mut u64, dim: usize| -> Vec<f32> {
            let v: Vec<f32> = (0..dim)
                .map(|_| lcg(st) as f32 / u32::MAX as f32 - 0.5)
                .collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / n).collect()
        };
        for dim in [8usize, 40, 64, 256, 1024] {
            let q = unit(&mut st, dim);
            let scorer = Scorer::new(&q);
            let mut near = 0;
            for i in 0..4000 {
                // Half the vectors lie close to the query, so scores cluster
                // around every floor tried.
                let mut v = unit(&mut st, dim);
                if i % 2 == 0 {
                    let w = (i % 7) as f32 / 6.0;
                    v = q
                        .iter()
                        .zip(&v)
                        .map(|(a, b)| a * w + b * (1.0 - w))
                        .collect();
                }
                let stored = quantize(&v);
                let exact = cosine(&q, &stored);
                let offset = offset_binary(&stored);
                assert_eq!(offset_binary(&offset), stored);
                let inverse = inverse_norm(&stored);
                let score = scorer.score(&stored, -1.0).expect("a score");
                // The bound, and a little for the rounding of the sums.
                let slack = scorer.bound() + 1e-5;
                assert!((score - exact).abs() <= slack, "dim {dim}: {score} {exact}");
                for floor in [-1.0f32, 0.0, 0.4, 0.6, score, score + 1e-6, exact] {
                    let got = scorer.score(&stored, floor);
                    assert_eq!(scorer.score_offset(&offset, inverse, floor), got);
                    if score >= floor {
                        assert_eq!(got, Some(score), "dim {dim} floor {floor}");
                        near += 1;
                    } else {
                        assert_eq!(got, None, "dim {dim} floor {floor}");
                    }
                }
            }
            assert!(near > 4000, "{near}");
        }
        // A zero vector scores nothing, as cosine gives it 0.
        let q = unit(&mut st, 8);
        assert_eq!(Scorer::new(&q).score(&[0; 8], -1.0), None);
    }

    #[test]
    fn the_paired_dot_product_is_the_plain_one() {
        let mut st = 11u64;
        for n in [0usize, 1, 15, 16, 17, 40, 64, 255, 256, 300] {
            let q: Vec<i16> = (0..n).map(|_| lcg(&mut st) as i16).collect();
            let v: Vec<u8> = (0..n).map(|_| lcg(&mut st) as u8).collect();
            let plain = |widen: fn(u8) -> i32| {
                q.iter()
                    .zip(&v)
                    .map(|(&a, &b)| i64::from(a) * i64::from(widen(b)))
                    .sum::<i64>() as i32
            };
            assert_eq!(dot(&q, &v, i32::from), plain(i32::from), "{n}");
            let signed: fn(u8) -> i32 = |b| i32::from(b as i8);
            assert_eq!(dot(&q, &v, signed), plain(signed), "{n}");
            // Lengths that differ: the shorter counts.
            if n > 3 {
                assert_eq!(
                    dot(&q[..n - 3], &v, i32::from),
                    dot(&q[..n - 3], &v[..n - 3], i32::from)
                );
            }
        }
    }

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
    fn the_builtin_table_is_named_by_its_hash() {
        assert_eq!(blake3::hash(BUILTIN).to_hex().as_str(), BUILTIN_ID);
        assert_eq!(table_id(), BUILTIN_ID, "no test installs a table");
        // A damaged table is refused before it could take the built-in
        // one's place, and the process's name for its table stays.
        let good = tiny();
        assert!(install(Vec::leak(good[..good.len() - 1].to_vec())).is_err());
        assert!(install(b"").is_err());
        assert_eq!(table_id(), BUILTIN_ID);
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

    /// The table's rows for other scripts were fitted to translations
    /// (tools/embed/crosslingual.py): a sentence in Russian, Chinese,
    /// Japanese or Korean lands near its English meaning, far from an
    /// unrelated English sentence. With the English-only rows each pair
    /// below differed by less than 0.2 (or had no vector at all).
    #[test]
    fn the_builtin_table_places_other_languages_near_their_english_meaning() {
        let e = builtin();
        let cases = [
            (
                "не удалось подключиться к серверу базы данных",
                "could not connect to the database server",
                "the button colour on the settings page",
            ),
            (
                "сборка падает из-за ошибки компиляции",
                "the build fails with a compile error",
                "we moved the meeting to Tuesday",
            ),
            (
                "文件上传失败",
                "file upload failed",
                "rename the variable in the loop",
            ),
            (
                "数据库连接超时",
                "database connection timed out",
                "the chart legend is too small",
            ),
            (
                "ファイルを保存できません",
                "cannot save the file",
                "the team lunch is on Friday",
            ),
            (
                "서버에 연결할 수 없습니다",
                "unable to connect to the server",
                "sort the list alphabetically",
            ),
        ];
        for (other, same, unrelated) in cases {
            let q = e.embed(other).expect("a vector");
            let near = cosine(&q, &quantize(&e.embed(same).expect("v")));
            let far = cosine(&q, &quantize(&e.embed(unrelated).expect("v")));
            assert!(near > far + 0.3, "{other}: {near} against {far}");
        }
    }

    /// The tokens added for other scripts never match inside English
    /// text, so English embeds with bert-base-uncased's rows alone.
    #[test]
    fn english_text_uses_only_the_english_vocabulary() {
        /// Rows of the bert-base-uncased vocabulary, first in the table.
        const ENGLISH_ROWS: u32 = 30_522;
        let e = builtin();
        assert!(
            e.table.rows() > ENGLISH_ROWS as usize,
            "the added tokens are there"
        );
        for text in [
            "why did we pin hyper to 0.14 after the upgrade broke the build?",
            "Naïve café résumé: SQLITE_BUSY (database is locked) under load",
            "error[E0382]: borrow of moved value `cfg` in src/main.rs:42",
        ] {
            let ids = e.tokens(text);
            assert!(!ids.is_empty());
            assert!(ids.iter().all(|&id| id < ENGLISH_ROWS), "{text}: {ids:?}");
        }
    }
}
