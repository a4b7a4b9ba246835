//! Derives the built-in embedding table's token index at build time
//! (`OUT_DIR/vocab_index.bin`), so that a fresh process finds a
//! question's word pieces by binary search instead of reading the whole
//! vocabulary (see `embed::table::Index`). The table file is the one
//! home of the vocabulary; this index is rebuilt whenever it changes.
//!
//! Layout, u32 LE throughout: the row count `n`, then `n + 1` offsets into
//! the vocabulary text (row `r` is `text[offset[r]..offset[r + 1] - 1]`,
//! the `- 1` dropping its `\n`), then the rows in token byte order, only
//! the first row of a token listed twice.

use std::path::PathBuf;

const TABLE: &str = "assets/embed/minilm-static.bin";

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

fn main() {
    println!("cargo:rerun-if-changed={TABLE}");
    println!("cargo:rerun-if-changed=build.rs");
    let bytes = std::fs::read(TABLE).unwrap_or_else(|e| panic!("cannot read {TABLE}: {e}"));
    assert!(
        bytes.len() > 24 && &bytes[..8] == b"CAIRNEMB",
        "{TABLE} is not a cairn embedding table"
    );
    let rows = u32_at(&bytes, 12);
    let text_len = u32_at(&bytes, 20);
    let text = &bytes[24..24 + text_len];
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0usize);
    offsets.extend(
        text.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    offsets.push(text_len + 1);
    assert_eq!(
        offsets.len(),
        rows + 1,
        "{TABLE}: rows and vocabulary differ"
    );
    let token = |r: usize| &text[offsets[r]..offsets[r + 1] - 1];
    let mut order: Vec<usize> = (0..rows).collect();
    order.sort_by(|&a, &b| token(a).cmp(token(b)).then(a.cmp(&b)));
    order.dedup_by(|later, first| token(*later) == token(*first));
    let mut out = Vec::with_capacity(4 * (2 + offsets.len() + order.len()));
    let mut put = |v: usize| out.extend_from_slice(&(v as u32).to_le_bytes());
    put(rows);
    offsets.iter().for_each(|&o| put(o));
    order.iter().for_each(|&r| put(r));
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dir.join("vocab_index.bin"), out).expect("cannot write the token index");
}
