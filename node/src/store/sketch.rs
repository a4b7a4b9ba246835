//! Sign sketches of the meaning vectors (`<db>-sketch`): one bit per
//! dimension, whether the unit vector lies above the file's mean there
//! (centred, since every vector of the table leans the same way), so a
//! search reads 32 bytes a vector to pick the [`candidates`] the vector
//! file then scores exactly. Below [`from`] entries there is none.
//!
//! Layout, in sealed [`super::pages`]: a head (header with magic
//! `cairnsk2` and the vector file's token, the mean as f32 LE), then
//! counted pages of sketches, entry `i` here being entry `i` there.
//! `meta.sketch_file` (that token, a count) vouches for the first entries,
//! moved only once they are synced: entries past it are stale, never
//! damage, and are written again from their page's start. A failing
//! vouched page's entries are scored exactly and the file named once; the
//! full check drops its mark, and the next update sketches every entry
//! again against the head's mean (a new one if the head failed). A
//! blanked entry's sketch is zeroed with it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;

use super::StoreError;
use super::cells::{self, Cells};
use super::derived::{self, Component};
use super::flat_file::{self, RegionWriter, read_at, write_at};
use super::mapped::{self, Mappings, Which};
use super::pages::{self, PAGE};

const MAGIC: &[u8; 8] = Component::Sketch.spec().magic;
const HEADER_LEN: u64 = flat_file::HEADER_LEN as u64;

/// `CAIRN_TEST_SKETCH_FROM`, for tests of the built binary only: with a
/// number `n`, the sketch and its cells are written from `n` entries on
/// (instead of 100,000 and 400,000) and a search scores a quarter of the
/// entries exactly, so that a small history exercises them.
const TEST_KNOB: &str = "CAIRN_TEST_SKETCH_FROM";

/// The value of [`TEST_KNOB`], read once.
pub(crate) fn test_knob() -> Option<u64> {
    static KNOB: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| {
        let n = std::env::var(TEST_KNOB).ok()?.parse().ok()?;
        tracing::warn!(entries = n, "{TEST_KNOB} is set: sketches from {n} entries");
        Some(n)
    })
}

/// Entries of the vector file from which searches go through the sketch
/// (about 850 MB of history); below, the exact scan reads little enough.
/// Unit tests sketch small files; see [`TEST_KNOB`] for the binary's.
pub(crate) fn from() -> u64 {
    match cfg!(test) {
        true => 16,
        false => test_knob().unwrap_or(100_000),
    }
}
/// The fewest and the most entries scored exactly after the sketch scan.
const CANDIDATES: (usize, usize) = (8_000, 16_000);
/// Entries times candidates, from which the fewest are scored.
const CANDIDATE_PRODUCT: u64 = 1_920_000_000;

/// How many of the `entries` nearest by sketch are scored exactly: all of
/// [`CANDIDATES`]' most up to 120,000 entries, falling to its fewest at
/// 240,000 and beyond (the recall set's figures, in the commit history).
pub(crate) fn candidates(entries: u64) -> usize {
    if !cfg!(test)
        && let Some(n) = test_knob()
        && entries >= n
    {
        return (entries / 4).max(1) as usize;
    }
    let (fewest, most) = CANDIDATES;
    (CANDIDATE_PRODUCT / entries.max(1)).clamp(fewest as u64, most as u64) as usize
}

/// How many entries of the sketch made for the vector file named by
/// `token` the database on `conn` vouches for (none for another file's).
pub(crate) fn vouched(conn: &Connection, token: &[u8; 16]) -> Result<u64, StoreError> {
    let mark = Component::Sketch.read_mark(conn)?;
    Ok(match mark.as_deref().and_then(derived::parse_mark::<1>) {
        Some((t, [count])) if t == *token => u64::try_from(count).unwrap_or(0),
        _ => 0,
    })
}

/// Vouches for the first `count` entries of the sketch made for the
/// vector file named by `token`: call it once they are synced.
pub(crate) fn vouch(conn: &Connection, token: &[u8; 16], count: u64) -> Result<(), StoreError> {
    let text = derived::mark_text(token, &[count.into()]);
    Ok(Component::Sketch.write_mark(conn, &text)?)
}

/// Bytes of one sketch of a vector of length `dim`.
fn sketch_len(dim: usize) -> usize {
    dim.div_ceil(8)
}

fn header(dim: usize, token: &[u8; 16]) -> [u8; HEADER_LEN as usize] {
    flat_file::header(MAGIC, dim, token)
}

/// Bytes of the head: the header and the mean.
fn head_len(dim: usize) -> usize {
    HEADER_LEN as usize + 4 * dim
}

/// Pages of the head.
fn head_pages(dim: usize) -> u64 {
    pages::head_pages(head_len(dim))
}

/// Sketches a page holds.
fn per_page(dim: usize) -> u64 {
    pages::per_page(sketch_len(dim)) as u64
}

/// Pages that hold `count` sketches.
fn pages_for(dim: usize, count: u64) -> u64 {
    count.div_ceil(per_page(dim))
}

/// Where page `p` of the sketches starts (page `head_pages + p` of the file).
fn page_at(dim: usize, p: u64) -> u64 {
    (head_pages(dim) + p) * PAGE as u64
}

/// The sketch of `v` (offset binary, as the vector file keeps it) whose
/// inverse length is `inverse`, against `mean`, into `out`.
pub(crate) fn of_offset(v: &[u8], inverse: f32, mean: &[f32], out: &mut [u8]) {
    out.fill(0);
    if inverse == 0.0 {
        return;
    }
    for (i, (&b, &m)) in v.iter().zip(mean).enumerate() {
        let x = f32::from((b ^ 0x80) as i8) * inverse;
        if x > m {
            out[i / 8] |= 1 << (i % 8);
        }
    }
}

/// The sketch of a unit query vector against `mean`.
pub(crate) fn of_query(q: &[f32], mean: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; sketch_len(q.len())];
    for (i, (&x, &m)) in q.iter().zip(mean).enumerate() {
        if x > m {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// The number of bits where `a` and `b` differ.
///
/// Baseline x86-64 has no popcount instruction, so `count_ones` on a
/// word is a dozen instructions ending in a multiply. Here the bit counts
/// of several words are added up per byte first (each byte of the sum
/// holds at most 8 per word, so 31 words fit) and summed across bytes
/// once: half the work for a 32-byte sketch, which matters when a question
/// compares a million of them. A scan on a CPU that has the instruction
/// uses [`distance_by_popcount`] instead (see [`distances`]).
#[inline(always)]
pub(crate) fn distance(a: &[u8], b: &[u8]) -> u32 {
    const M1: u64 = 0x5555_5555_5555_5555;
    const M2: u64 = 0x3333_3333_3333_3333;
    const M4: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    /// Words whose byte counts fit in a byte each (31 × 8 = 248).
    const WORDS: usize = 31;
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut total: u32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| (x ^ y).count_ones())
        .sum();
    let (mut bytes, mut words) = (0u64, 0);
    for (x, y) in ac.zip(bc) {
        let x = u64::from_le_bytes(x.try_into().expect("8 bytes"))
            ^ u64::from_le_bytes(y.try_into().expect("8 bytes"));
        let x = x - ((x >> 1) & M1);
        let x = (x & M2) + ((x >> 2) & M2);
        bytes += (x + (x >> 4)) & M4;
        words += 1;
        if words == WORDS {
            total += sum_of_bytes(bytes);
            (bytes, words) = (0, 0);
        }
    }
    total + sum_of_bytes(bytes)
}

/// The sum of the eight bytes of `x` (each at most 248).
#[inline(always)]
fn sum_of_bytes(x: u64) -> u32 {
    const LOW: u64 = 0x00ff_00ff_00ff_00ff;
    // Pairs of bytes into 16-bit lanes first: eight bytes of up to 248
    // would overflow the one byte a multiply sums them into.
    let pairs = (x & LOW) + ((x >> 8) & LOW);
    (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32
}

/// Pushes the distance from `query` to each sketch in `bytes` (whole
/// sketches of `query.len()` bytes) onto `dist`, and counts it in `hist`.
///
/// Where the CPU has the `popcnt` instruction (every x86-64 since about
/// 2009, but not baseline x86-64, which the binary is built for), the loop
/// is compiled a second time with it, and that copy is taken.
fn distances(query: &[u8], bytes: &[u8], dist: &mut Vec<u16>, hist: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        #[allow(unsafe_code)]
        // SAFETY: the one requirement of a `target_feature` function is
        // that the CPU has the feature, checked just above.
        unsafe {
            distances_popcnt(query, bytes, dist, hist)
        };
        return;
    }
    each_distance(query, bytes, dist, hist, distance);
}

/// [`distances`] compiled for a CPU with the `popcnt` instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn distances_popcnt(query: &[u8], bytes: &[u8], dist: &mut Vec<u16>, hist: &mut [u32]) {
    each_distance(query, bytes, dist, hist, distance_by_popcount);
}

/// The loop of [`distances`], with the distance function of the copy.
#[inline(always)]
fn each_distance(
    query: &[u8],
    bytes: &[u8],
    dist: &mut Vec<u16>,
    hist: &mut [u32],
    distance: impl Fn(&[u8], &[u8]) -> u32,
) {
    for e in bytes.chunks_exact(query.len()) {
        let d = distance(query, e) as u16;
        hist[usize::from(d)] += 1;
        dist.push(d);
    }
}

/// The bits that differ between `a` and `b`, counted a word at a time with
/// `count_ones`: one instruction each where the caller is compiled for
/// `popcnt`, a slow sequence otherwise (so only such a caller uses it).
#[cfg(any(target_arch = "x86_64", test))]
#[inline(always)]
pub(super) fn distance_by_popcount(a: &[u8], b: &[u8]) -> u32 {
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: u32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| (x ^ y).count_ones())
        .sum();
    let words: u32 = ac
        .zip(bc)
        .map(|(x, y)| {
            let x = u64::from_le_bytes(x.try_into().expect("8 bytes"));
            let y = u64::from_le_bytes(y.try_into().expect("8 bytes"));
            (x ^ y).count_ones()
        })
        .sum();
    tail + words
}

/// A sketch file open for a search.
#[derive(Debug)]
pub(crate) struct Reader {
    file: File,
    /// The file's path, to name it.
    path: PathBuf,
    /// The token its pages are sealed with.
    seal: [u8; 16],
    /// The entries from the first, at least `count` of them, when the
    /// store maps them (see `store::mapped`).
    mapped: Option<mapped::Entries>,
    pub(crate) mean: Vec<f32>,
    /// Entries it holds of those the vector file's trusted ones.
    pub(crate) count: u64,
    dim: usize,
    /// Its coarse cells, when they cover [`cells::from`] entries or more.
    cells: Option<Cells>,
    /// Entries bypassed because their page failed its check; the file is
    /// named once, when the reader is dropped.
    damaged: AtomicU64,
}

impl Drop for Reader {
    fn drop(&mut self) {
        let n = self.damaged.load(Ordering::Relaxed);
        if n > 0 {
            tracing::error!(path = %self.path.display(), entries = n, "damaged pages of the sketch were not read (their vectors were scored exactly); the next `cairn index` writes the file anew");
            derived::note_damage(&self.path);
        }
    }
}

/// The sketch of the vector file `of` names (its token, vector length and
/// blank count; `trusted` entries), when it is there and holds at least
/// [`from()`] of them that the database vouches for (`vouched`); its
/// entries read from `mappings` when given.
pub(crate) fn open(
    db: &Path,
    of: mapped::Key,
    trusted: u64,
    vouched: u64,
    mappings: Option<&Mappings>,
) -> Option<Reader> {
    let trusted = trusted.min(vouched);
    if trusted < from() {
        return None;
    }
    let dim = of.dim;
    let file = File::open(Component::Sketch.path(db)).ok()?;
    let seal = Component::Sketch.seal_token(&of.token);
    let Some((mean, count)) = check(&file, &of.token, dim) else {
        if flat_file::claims(&file, MAGIC, &of.token) {
            tracing::error!(path = %Component::Sketch.path(db).display(), "the sketch's head is damaged: it is not read (every vector is scored); the next `cairn index` writes it anew");
            derived::note_damage(&Component::Sketch.path(db));
        }
        return None;
    };
    let count = count.min(trusted);
    if count < from() {
        return None;
    }
    let named = cells::mean_key(&mean);
    let entries = mappings.and_then(|h| {
        // The file and its mean: a sketch removed and written anew may
        // reuse the old one's inode, and a new mean changes every entry.
        // The vector file's token with the mean's name folded in.
        let key = mapped::Key {
            token: std::array::from_fn(|i| of.token[i] ^ named[i]),
            file: flat_file::identity(&file),
            ..of
        };
        key.file?;
        let len = pages_for(dim, count) * PAGE as u64;
        h.entries(Which::Sketch, key, &file, page_at(dim, 0), len)
    });
    let cells = cells::open(db, &of.token, dim, &named, count)
        .filter(|c| c.covered >= cells::from())
        .map(|c| match mappings {
            Some(h) => c.mapped_in(h, of),
            None => c,
        });
    Some(Reader {
        file,
        path: Component::Sketch.path(db),
        seal,
        mapped: entries,
        mean,
        count,
        dim,
        cells,
        damaged: AtomicU64::new(0),
    })
}

/// The mean and entry count of a sketch file made for `token` and `dim`,
/// when its head is intact: the entries of the pages before the last,
/// and those the last says it holds when it is intact (a torn last page
/// counts none, and is written again by the next update).
fn check(file: &File, token: &[u8; 16], dim: usize) -> Option<(Vec<f32>, u64)> {
    let seal = Component::Sketch.seal_token(token);
    let len = file.metadata().ok()?.len();
    let head = head_pages(dim);
    let total = len / PAGE as u64;
    if total < head {
        return None;
    }
    let bytes = pages::read_head(file, &seal, head_len(dim))?;
    if bytes[..HEADER_LEN as usize] != header(dim, token) {
        return None;
    }
    let mean: Vec<f32> = bytes[HEADER_LEN as usize..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    if mean.iter().any(|m| !m.is_finite()) {
        return None;
    }
    let pages = total - head;
    if pages == 0 {
        return Some((mean, 0));
    }
    let per = per_page(dim);
    let mut last = vec![0u8; PAGE];
    read_at(file, &mut last, page_at(dim, pages - 1)).ok()?;
    let in_last = match pages::intact(&seal, head + pages - 1, &last) {
        true => (pages::count_of(&last) as u64).min(per),
        false => 0,
    };
    Some((mean, (pages - 1) * per + in_last))
}

/// What is wrong with the sketch beside `db`, made for the vector file
/// named by `token` (vectors of length `dim`), if anything: its head, or
/// a page of the `vouched` sketches, fails its check or holds fewer than
/// it should. None for no file, nothing vouched for (entries past the
/// mark are stale, written again by the next update), a former version's,
/// or one made for another vector file (written anew anyway).
pub(crate) fn damage(db: &Path, token: &[u8; 16], dim: usize, vouched: u64) -> Option<String> {
    let path = Component::Sketch.path(db);
    if vouched == 0 || !path.is_file() || Component::Sketch.is_former(&path) {
        return None;
    }
    let Ok(file) = File::open(&path) else {
        return Some("it cannot be opened".into());
    };
    let seal = Component::Sketch.seal_token(token);
    let Some(head) = pages::read_head(&file, &seal, head_len(dim)) else {
        let mut h = [0u8; HEADER_LEN as usize];
        let other =
            read_at(&file, &mut h, 0).is_ok() && h[..8] == MAGIC[..] && h[16..] != token[..];
        return (!other).then(|| "its head fails its check".into());
    };
    if head[..HEADER_LEN as usize] != header(dim, token) {
        return None;
    }
    let (first, per) = (head_pages(dim), per_page(dim));
    let total = first + pages_for(dim, vouched);
    let len = file.metadata().map_or(0, |m| m.len());
    if len < total * PAGE as u64 {
        return Some(format!("it is cut short ({len} bytes)"));
    }
    // Every vouched page full but the last, which holds the rest at least.
    let want = |n: u64| Some((vouched - (n - first) * per).min(per) as usize);
    match pages::bad_counted(&file, &seal, (first, total), want) {
        Ok(bad) => pages::failing(&bad, total),
        Err(e) => Some(format!("it cannot be read: {e}")),
    }
}

impl Reader {
    /// Whether the entries are read from a mapping.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Whether searches go through its coarse cells.
    #[cfg(test)]
    pub(crate) fn has_cells(&self) -> bool {
        self.cells.is_some()
    }

    /// The positions of the `k` entries nearest to `query` by sketch
    /// distance (of equal ones, the later entries), ascending: of every
    /// entry, or, when the sketch has cells, of the entries in the cells
    /// nearest to the query ([`cells::probed`] of them) and those the cells
    /// do not cover yet.
    pub(crate) fn nearest(&self, query: &[u8], k: usize) -> std::io::Result<Vec<u64>> {
        let n = self.count as usize;
        if k >= n {
            return Ok((0..self.count).collect());
        }
        if let Some(cells) = &self.cells {
            return self.nearest_in_cells(cells, query, k);
        }
        self.nearest_scan(query, k)
    }

    /// [`Reader::nearest`] over every entry of the sketch.
    fn nearest_scan(&self, query: &[u8], k: usize) -> std::io::Result<Vec<u64>> {
        let n = self.count as usize;
        let size = sketch_len(self.dim);
        // Each thread reads its part and returns every entry's distance
        // (at most the number of bits, which fits u16) and a histogram.
        let threads = flat_file::threads();
        let per = n.div_ceil(threads);
        let bits = 8 * size;
        let part = |i: usize| -> std::io::Result<(Vec<u16>, Vec<u32>)> {
            let first = (i * per).min(n);
            let end = (first + per).min(n);
            let mut dist = Vec::with_capacity(end.saturating_sub(first));
            let mut hist = vec![0u32; bits + 1];
            self.each_run(first as u64, end as u64, |_, m, bytes| match bytes {
                Some(bytes) => distances(query, bytes, &mut dist, &mut hist),
                // Bypassed: never chosen by distance, scored all the same.
                None => dist.extend(std::iter::repeat_n(BYPASSED, m)),
            })?;
            Ok((dist, hist))
        };
        let parts = flat_file::in_parts(threads, part)?;
        let mut bypassed = Vec::new();
        let mut hist = vec![0u64; bits + 1];
        for (_, h) in &parts {
            for (t, c) in hist.iter_mut().zip(h) {
                *t += u64::from(*c);
            }
        }
        let (limit, mut at_limit) = limit_of(&hist, k);
        let mut out = Vec::with_capacity(k);
        for (p, (dist, _)) in parts.iter().enumerate().rev() {
            let first = p * per;
            for (i, &d) in dist.iter().enumerate().rev() {
                if d == BYPASSED {
                    bypassed.push((first + i) as u64);
                    continue;
                }
                let d = usize::from(d);
                if d < limit {
                    out.push((first + i) as u64);
                } else if d == limit && at_limit > 0 {
                    at_limit -= 1;
                    out.push((first + i) as u64);
                }
            }
        }
        out.extend(bypassed);
        out.sort_unstable();
        Ok(out)
    }

    /// [`Reader::nearest`] through the cells: the [`cells::probed`] entries
    /// of the cells nearest to `query` and the entries past those the cells
    /// cover, read in parts on threads of their own as a full scan is. Each
    /// part takes every `threads`th of the cells, nearest first, so the
    /// parts hold about as many entries each, and its share of the entries
    /// past them; it keeps only the entries that can still be among the
    /// `k` nearest (see [`Nearest`]).
    fn nearest_in_cells(&self, cells: &Cells, query: &[u8], k: usize) -> std::io::Result<Vec<u64>> {
        let bits = 8 * sketch_len(self.dim);
        let chosen = cells.nearest(query, cells::probed(cells.covered, k));
        let threads = flat_file::threads();
        let (from, end) = (cells.covered as usize, self.count as usize);
        let tail_per = end.saturating_sub(from).div_ceil(threads);
        let part = |i: usize| -> std::io::Result<Option<Nearest>> {
            let mut near = Nearest::new(bits, k);
            let mine: Vec<usize> = chosen.iter().skip(i).step_by(threads).copied().collect();
            let whole = cells.read(&mine, |pos, sketches| {
                near.add(query, pos.iter().map(|&p| u64::from(p)), sketches);
            })?;
            if !whole {
                return Ok(None);
            }
            let first = (from + i * tail_per).min(end);
            let last = (first + tail_per).min(end);
            self.each_run(first as u64, last as u64, |at, m, bytes| match bytes {
                Some(bytes) => near.add(query, at..at + m as u64, bytes),
                None => near.bypassed.extend(at..at + m as u64),
            })?;
            Ok(Some(near))
        };
        let parts = flat_file::in_parts(threads, part)?;
        match parts.into_iter().collect::<Option<Vec<Nearest>>>() {
            Some(parts) => Ok(select(&parts, k)),
            // A page of the cells failed its check: its entries are not
            // known, so every sketch is read instead.
            None => {
                tracing::error!(path = %cells.path.display(), "a damaged page of the sketch's cells was not read (every sketch was read instead); the next `cairn index` writes the file anew");
                derived::note_damage(&cells.path);
                self.nearest_scan(query, k)
            }
        }
    }

    /// Calls `each(at, n, sketches)` for the entries `first..end`, run
    /// by run, in order: the `n` sketches from entry `at`, or `None` for
    /// `n` entries whose page failed its check (or holds fewer than it
    /// should), which the caller scores exactly.
    fn each_run(
        &self,
        first: u64,
        end: u64,
        mut each: impl FnMut(u64, usize, Option<&[u8]>),
    ) -> std::io::Result<()> {
        if first >= end {
            return Ok(());
        }
        let size = sketch_len(self.dim);
        let per = per_page(self.dim);
        // Pages per read: 128 KiB, which stays in cache and costs a
        // fresh process few page faults.
        const CHUNK: u64 = 32;
        let (last, head) = ((end - 1) / per + 1, head_pages(self.dim));
        let mut buf = Vec::new();
        let mut spare = vec![0u8; PAGE];
        let mut p = first / per;
        while p < last {
            let m = (last - p).min(CHUNK);
            let bytes: &[u8] = match &self.mapped {
                Some(mapped) => &mapped[p as usize * PAGE..(p + m) as usize * PAGE],
                None => {
                    buf.resize(m as usize * PAGE, 0);
                    read_at(&self.file, &mut buf, page_at(self.dim, p))?;
                    &buf
                }
            };
            for (i, page) in bytes.chunks_exact(PAGE).enumerate() {
                let n = p + i as u64;
                let (lo, hi) = ((n * per).max(first), ((n + 1) * per).min(end));
                let need = (hi - n * per) as usize;
                let page = self.checked(head + n, page, need, &mut spare);
                if page.is_none() {
                    self.damaged.fetch_add(hi - lo, Ordering::Relaxed);
                }
                let held = page.map_or(0, |pg| pages::count_of(pg).min(need));
                let good = (n * per + held as u64).max(lo);
                if let Some(page) = page
                    && good > lo
                {
                    let from = (lo - n * per) as usize * size;
                    each(lo, (good - lo) as usize, Some(&page[from..held * size]));
                }
                if hi > good {
                    each(good, (hi - good) as usize, None);
                }
            }
            p += m;
        }
        Ok(())
    }

    /// Page `n` of the file (`bytes`, as read or held) when it is intact;
    /// when it fails or holds fewer than `need` sketches (a page rewritten
    /// by an append since it was held or read), read again from the file
    /// into `spare` once. `None` when it still fails.
    fn checked<'a>(
        &self,
        n: u64,
        bytes: &'a [u8],
        need: usize,
        spare: &'a mut [u8],
    ) -> Option<&'a [u8]> {
        if pages::intact(&self.seal, n, bytes) && pages::count_of(bytes) >= need {
            return Some(bytes);
        }
        let read = read_at(&self.file, spare, n * PAGE as u64).is_ok();
        (read && pages::intact(&self.seal, n, spare)).then_some(spare)
    }
}

/// The distance a bypassed entry is given in a scan: more than any
/// sketch's, never chosen by distance.
const BYPASSED: u16 = u16::MAX;

/// The entries of one part of a search through the cells that may be
/// among the `k` nearest: every entry read is counted in `hist`, but kept
/// only when it lies within the distance at which the entries this part
/// has read hold `k` already. That distance only shrinks as the part reads
/// on, and the `k` nearest of all the parts lie within each part's, so
/// nothing they need is dropped, and the counts of every distance up to
/// theirs are whole.
struct Nearest {
    k: usize,
    hist: Vec<u32>,
    /// Position and distance of each entry kept.
    kept: Vec<(u64, u16)>,
    /// The distance past which nothing more is kept.
    limit: usize,
    /// The distances of the entries being added.
    scratch: Vec<u16>,
    /// Entries whose page failed its check: chosen whatever their distance.
    bypassed: Vec<u64>,
}

impl Nearest {
    fn new(bits: usize, k: usize) -> Nearest {
        Nearest {
            k,
            hist: vec![0; bits + 1],
            kept: Vec::new(),
            limit: bits,
            scratch: Vec::new(),
            bypassed: Vec::new(),
        }
    }

    /// Counts the entries at `positions`, whose sketches are `sketches`,
    /// and keeps those within the limit.
    fn add(&mut self, query: &[u8], positions: impl Iterator<Item = u64>, sketches: &[u8]) {
        self.scratch.clear();
        distances(query, sketches, &mut self.scratch, &mut self.hist);
        let limit = self.limit;
        self.kept.extend(
            positions
                .zip(&self.scratch)
                .filter(|(_, d)| usize::from(**d) <= limit)
                .map(|(p, &d)| (p, d)),
        );
        self.limit = limit_of(&self.hist, self.k).0;
        // Drop what the limit has since passed by, now and then.
        if self.kept.len() >= 4 * self.k.max(1024) {
            let limit = self.limit;
            self.kept.retain(|(_, d)| usize::from(*d) <= limit);
        }
    }
}

/// The `k` nearest of the entries the `parts` kept (of equal ones, the
/// later entries), ascending.
fn select(parts: &[Nearest], k: usize) -> Vec<u64> {
    let bits = parts.first().map_or(0, |p| p.hist.len() - 1);
    let mut hist = vec![0u64; bits + 1];
    for part in parts {
        for (t, c) in hist.iter_mut().zip(&part.hist) {
            *t += u64::from(*c);
        }
    }
    let (limit, at_limit) = limit_of(&hist, k);
    let mut out = Vec::with_capacity(k);
    let mut ties = Vec::new();
    for part in parts {
        for &(p, d) in &part.kept {
            match usize::from(d).cmp(&limit) {
                std::cmp::Ordering::Less => out.push(p),
                std::cmp::Ordering::Equal => ties.push(p),
                std::cmp::Ordering::Greater => {}
            }
        }
    }
    ties.sort_unstable_by(|a, b| b.cmp(a));
    out.extend(ties.into_iter().take(at_limit as usize));
    out.extend(parts.iter().flat_map(|p| p.bypassed.iter().copied()));
    out.sort_unstable();
    out
}

/// The distance within which lie at least `k` of the entries counted in
/// `hist` (all of them, at its last, when fewer), and how many of those
/// at that distance are needed to make `k`.
fn limit_of<C: Copy + Into<u64>>(hist: &[C], k: usize) -> (usize, u64) {
    let mut within = 0u64;
    let mut limit = hist.len() - 1;
    for (d, c) in hist.iter().enumerate() {
        within += (*c).into();
        if within >= k as u64 {
            limit = d;
            break;
        }
    }
    let below: u64 = hist[..limit].iter().map(|c| (*c).into()).sum();
    (limit, (k as u64).saturating_sub(below))
}

/// Called with each entry of the vector file: its inverse norm and its
/// offset-binary vector.
pub(crate) type EachEntry<'a> = dyn FnMut(f32, &[u8]) -> std::io::Result<()> + 'a;

/// Reads the vector file's entries `from..to` through an [`EachEntry`].
pub(crate) type Entries<'a> = dyn FnMut(u64, u64, &mut EachEntry<'_>) -> std::io::Result<()> + 'a;

/// Whether an update of the sketch brings its cells up to date as well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CellsWhen {
    /// Now: the cells are written anew if they cover too little.
    Now,
    /// At a later update: more entries are on their way (a long vector
    /// pass moves them into the file in steps), and cells written now
    /// would soon cover too little and be written again. Until then
    /// searches read the entries the cells do not cover from the sketch:
    /// more bytes per question, never a worse answer.
    Later,
}

/// Brings the sketch of the vector file named by `token` (vectors of
/// length `dim`, `trusted` entries, read through `entries`) up to date:
/// writes the sketches of entries past the `vouched` ones (from the start
/// of their page), or the whole file anew (with a new mean) when it is
/// missing, damaged at its head or made for another file, then has
/// `vouch` vouch for all `trusted` once they are synced. Nothing below
/// [`from`] entries. The cells over the sketch (see `store::cells`) are
/// brought up to date too, unless `cells` is [`CellsWhen::Later`]. An
/// error names the file that could not be written.
pub(crate) fn update(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    (trusted, vouched): (u64, u64),
    entries: &mut Entries<'_>,
    vouch: &mut dyn FnMut(u64) -> Result<(), StoreError>,
    cells: CellsWhen,
) -> Result<(), StoreError> {
    if trusted < from() {
        return Ok(());
    }
    let path = Component::Sketch.path(db);
    let io = StoreError::writing(&path);
    let existing = crate::home::private_file()
        .read(true)
        .write(true)
        .open(&path)
        .ok()
        .and_then(|f| check(&f, token, dim).map(|(mean, n)| (f, mean, n)));
    let seal = Component::Sketch.seal_token(token);
    let (file, mean) = match existing {
        Some((file, mean, n)) if n <= trusted => {
            let n = n.min(vouched);
            if n < trusted {
                append(&file, &seal, dim, n, trusted, &mean, entries).map_err(io)?;
            }
            (file, mean)
        }
        _ => {
            let mean = mean_of(entries, dim, trusted).map_err(io)?;
            let (file, tmp) = flat_file::create_beside(&path).map_err(io)?;
            let written = write_new(&file, &seal, token, dim, trusted, &mean, entries)
                .and_then(|()| std::fs::rename(&tmp, &path));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(io(e));
            }
            // Written for writing only: read back through a new handle.
            (File::open(&path).map_err(io)?, mean)
        }
    };
    if vouched < trusted {
        vouch(trusted)?;
    }
    if cells == CellsWhen::Later {
        // Cells made for an old sketch's mean are ignored meanwhile.
        return Ok(());
    }
    refresh_cells(db, token, dim, &mean, &file, trusted)
}

/// Writes a new sketch file into `file`: its head, then the sketches of
/// entries `0..trusted`, synced.
fn write_new(
    file: &File,
    seal: &[u8; 16],
    token: &[u8; 16],
    dim: usize,
    trusted: u64,
    mean: &[f32],
    entries: &mut Entries<'_>,
) -> std::io::Result<()> {
    let mut head = header(dim, token).to_vec();
    for m in mean {
        head.extend_from_slice(&m.to_le_bytes());
    }
    let mut w = RegionWriter::new(file, 0);
    w.write_all(&pages::sealed_head(seal, &head))?;
    let pw = PageWriter::new(seal, dim, 0);
    write_pages(file, w, pw, (0, trusted), mean, entries)
}

/// Writes the sketches of entries `n..trusted` into `file` (which holds
/// `n` good ones) from the start of entry `n`'s page, so no byte of a
/// page torn or left unvouched is kept, and cuts what lies past them;
/// synced.
fn append(
    file: &File,
    seal: &[u8; 16],
    dim: usize,
    n: u64,
    trusted: u64,
    mean: &[f32],
    entries: &mut Entries<'_>,
) -> std::io::Result<()> {
    let p = n / per_page(dim);
    let w = RegionWriter::new(file, page_at(dim, p));
    let pw = PageWriter::new(seal, dim, p);
    let from = p * per_page(dim);
    file.set_len(page_at(dim, pages_for(dim, trusted)))?;
    write_pages(file, w, pw, (from, trusted), mean, entries)
}

/// Writes the sketches of entries `from..to` through `pw` into `w`, then
/// the last page, and syncs `file`.
fn write_pages(
    file: &File,
    mut w: RegionWriter<'_>,
    mut pw: PageWriter<'_>,
    (from, to): (u64, u64),
    mean: &[f32],
    entries: &mut Entries<'_>,
) -> std::io::Result<()> {
    let mut out = vec![0u8; pw.size];
    entries(from, to, &mut |inverse, v| {
        of_offset(v, inverse, mean, &mut out);
        pw.push(&out, &mut w)
    })?;
    pw.finish(&mut w)?;
    w.flush()?;
    drop(w);
    file.sync_data()
}

/// Fills counted pages of sketches and writes each, sealed, once full.
struct PageWriter<'a> {
    seal: &'a [u8; 16],
    /// The file's number of the page being filled.
    n: u64,
    page: Vec<u8>,
    fill: usize,
    per: usize,
    size: usize,
}

impl<'a> PageWriter<'a> {
    /// Fills pages of the sketches from page `p`.
    fn new(seal: &'a [u8; 16], dim: usize, p: u64) -> Self {
        PageWriter {
            seal,
            n: head_pages(dim) + p,
            page: vec![0u8; PAGE],
            fill: 0,
            per: per_page(dim) as usize,
            size: sketch_len(dim),
        }
    }

    fn push(&mut self, sketch: &[u8], w: &mut impl Write) -> std::io::Result<()> {
        let at = self.fill * self.size;
        self.page[at..at + self.size].copy_from_slice(sketch);
        self.fill += 1;
        if self.fill == self.per {
            self.finish(w)?;
            self.page.fill(0);
            self.fill = 0;
            self.n += 1;
        }
        Ok(())
    }

    /// Writes the page being filled, when it holds any sketch.
    fn finish(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        if self.fill == 0 {
            return Ok(());
        }
        pages::seal_counted(self.seal, self.n, &mut self.page, self.fill);
        w.write_all(&self.page)
    }
}

/// Brings the cells of the sketch `file` (holding `count` entries, its
/// mean `mean`) up to date (see `store::cells`), timed in the log.
fn refresh_cells(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    mean: &[f32],
    file: &File,
    count: u64,
) -> Result<(), StoreError> {
    let started = std::time::Instant::now();
    let sketches = || sketches_of(file, token, dim, count);
    let wrote = cells::refresh(db, token, dim, mean, sketches, count)
        .map_err(StoreError::writing(&Component::Cells.path(db)))?;
    if wrote {
        tracing::info!(
            entries = count,
            ms = started.elapsed().as_millis() as u64,
            "wrote the sketch's cells"
        );
    }
    Ok(())
}

/// The first `count` sketches of `file` (made for `token`), one after
/// another; `None` when a page of them fails its check (the cells are
/// then not written from it: the full check writes the sketch anew).
fn sketches_of(
    file: &File,
    token: &[u8; 16],
    dim: usize,
    count: u64,
) -> std::io::Result<Option<Vec<u8>>> {
    let (seal, size, per) = (
        Component::Sketch.seal_token(token),
        sketch_len(dim),
        per_page(dim),
    );
    let pages = pages_for(dim, count);
    let mut raw = vec![0u8; pages as usize * PAGE];
    read_at(file, &mut raw, page_at(dim, 0))?;
    let mut out = Vec::with_capacity(count as usize * size);
    for (p, page) in raw.chunks_exact(PAGE).enumerate() {
        let want = (count - p as u64 * per).min(per) as usize;
        if !pages::intact(&seal, head_pages(dim) + p as u64, page) || pages::count_of(page) < want {
            return Ok(None);
        }
        out.extend_from_slice(&page[..want * size]);
    }
    Ok(Some(out))
}

/// Zeroes the sketches of the entries at `positions` (blanked in the
/// vector file named by `token`), where the sketch has them, and syncs
/// them; a page that fails its check is left (it is never read). An
/// error names the file.
pub(crate) fn blank(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    positions: &[u64],
) -> Result<(), StoreError> {
    if positions.is_empty() {
        return Ok(());
    }
    let path = Component::Sketch.path(db);
    let Ok(file) = crate::home::private_file()
        .read(true)
        .write(true)
        .open(&path)
    else {
        return Ok(());
    };
    let Some((_, n)) = check(&file, token, dim) else {
        return Ok(());
    };
    let seal = Component::Sketch.seal_token(token);
    let (size, per) = (sketch_len(dim), per_page(dim));
    let mut page = vec![0u8; PAGE];
    let mut blanked = false;
    let done = (|| -> std::io::Result<()> {
        for &p in positions.iter().filter(|&&p| p < n) {
            let (at, number) = (page_at(dim, p / per), head_pages(dim) + p / per);
            read_at(&file, &mut page, at)?;
            if !pages::intact(&seal, number, &page) {
                continue;
            }
            let slot = (p % per) as usize * size;
            page[slot..slot + size].fill(0);
            pages::seal(&seal, number, &mut page);
            write_at(&file, &page, at)?;
            blanked = true;
        }
        file.sync_data()
    })();
    // The cells hold copies of the sketches: written anew from the sketch
    // by the update that follows, so no copy of a blanked one remains.
    if blanked || done.is_err() {
        cells::remove(db);
    }
    done.map_err(|source| StoreError::Derived { path, source })
}

/// Removes the sketch (when its vector file is lost).
pub(crate) fn remove(db: &Path) {
    let _ = std::fs::remove_file(Component::Sketch.path(db));
    cells::remove(db);
}

/// Whether the sketch and its cells are as an update would leave them for
/// the vector file named by `token` with `trusted` entries: none below
/// [`from`], else a sketch that holds and is `vouched` for every entry
/// and cells that cover three quarters of them (checked by their heads
/// and last pages only).
pub(crate) fn current(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    (trusted, vouched): (u64, u64),
) -> bool {
    if trusted < from() {
        return true;
    }
    if vouched < trusted {
        return false;
    }
    let Some((mean, n)) = File::open(Component::Sketch.path(db))
        .ok()
        .and_then(|f| check(&f, token, dim))
    else {
        return false;
    };
    n == trusted && cells::current(db, token, dim, &mean, n)
}

/// The mean of the unit vectors of entries `0..trusted` (blank ones left out).
fn mean_of(entries: &mut Entries<'_>, dim: usize, trusted: u64) -> std::io::Result<Vec<f32>> {
    let mut sum = vec![0f64; dim];
    let mut n = 0u64;
    entries(0, trusted, &mut |inverse, v| {
        if inverse != 0.0 {
            for (s, &b) in sum.iter_mut().zip(v) {
                *s += f64::from(f32::from((b ^ 0x80) as i8) * inverse);
            }
            n += 1;
        }
        Ok(())
    })?;
    Ok(sum
        .into_iter()
        .map(|s| if n > 0 { (s / n as f64) as f32 } else { 0.0 })
        .collect())
}

/// The mean and the first `count` sketches of the sketch beside `db`
/// (for tests that compare them with the vectors).
#[cfg(test)]
pub(crate) fn read_all(db: &Path, token: &[u8; 16], dim: usize) -> (Vec<f32>, Vec<u8>) {
    let file = File::open(Component::Sketch.path(db)).expect("sketch");
    let (mean, n) = check(&file, token, dim).expect("intact");
    let all = sketches_of(&file, token, dim, n)
        .expect("read")
        .expect("intact");
    (mean, all)
}

#[cfg(test)]
mod tests {
    use super::{Nearest, distance, distance_by_popcount, distances, each_distance, select};
    use crate::store::Component;

    /// Bits that differ, one byte at a time.
    fn plain(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    /// Synthetic vectors of 64 dimensions in a few clusters, as the
    /// vector file hands them to `update` (offset binary, inverse norm).
    fn vectors(n: usize) -> Vec<(f32, Vec<u8>)> {
        let centres: Vec<Vec<u8>> = (0..6).map(|c| noise(c + 1, 64)).collect();
        (0..n)
            .map(|i| {
                let mut v = centres[i % centres.len()].clone();
                for (j, b) in noise(i as u64 + 100, 8).iter().enumerate() {
                    v[(*b as usize + j * 8) % 64] ^= 0x55;
                }
                let stored: Vec<u8> = v.iter().map(|b| b ^ 0x80).collect();
                (crate::embed::inverse_norm(&stored), v)
            })
            .collect()
    }

    fn sketch_all(db: &std::path::Path, token: &[u8; 16], all: &[(f32, Vec<u8>)]) {
        sketch_entries(db, token, all, super::CellsWhen::Now);
    }

    /// Sketches `all` in one update, cells now or later, after updates
    /// that each finished (the file's entries all vouched for).
    fn sketch_entries(
        db: &std::path::Path,
        token: &[u8; 16],
        all: &[(f32, Vec<u8>)],
        cells: super::CellsWhen,
    ) {
        let in_file = std::fs::File::open(Component::Sketch.path(db))
            .ok()
            .and_then(|f| super::check(&f, token, 64))
            .map_or(0, |(_, n)| n);
        update(db, token, all, in_file, cells).expect("update");
    }

    /// Updates the sketch to `all`, `vouched` of them vouched for; the
    /// count it vouches for after.
    fn update(
        db: &std::path::Path,
        token: &[u8; 16],
        all: &[(f32, Vec<u8>)],
        vouched: u64,
        cells: super::CellsWhen,
    ) -> Result<u64, super::StoreError> {
        let mut entries = |from: u64, to: u64, each: &mut super::EachEntry<'_>| {
            for (inv, v) in &all[from as usize..to as usize] {
                each(*inv, v)?;
            }
            Ok(())
        };
        let mut now = vouched;
        let trusted = (all.len() as u64, vouched);
        let mut vouch = |n| {
            now = n;
            Ok(())
        };
        super::update(db, token, 64, trusted, &mut entries, &mut vouch, cells)?;
        Ok(now)
    }

    fn key(token: &[u8; 16]) -> super::mapped::Key {
        super::mapped::Key {
            token: *token,
            dim: 64,
            blank: 0,
            file: None,
        }
    }

    fn open(db: &std::path::Path, token: &[u8; 16], n: usize) -> super::Reader {
        super::open(db, key(token), n as u64, n as u64, None).expect("sketch")
    }

    /// The `k` nearest of `among` (position, sketch) to `q`; of equal
    /// ones, the later; ascending.
    fn brute(q: &[u8], among: &[(u64, Vec<u8>)], k: usize) -> Vec<u64> {
        let mut all: Vec<(u32, std::cmp::Reverse<u64>)> = among
            .iter()
            .map(|(p, s)| (plain(q, s), std::cmp::Reverse(*p)))
            .collect();
        all.sort();
        let mut out: Vec<u64> = all.into_iter().take(k).map(|(_, p)| p.0).collect();
        out.sort();
        out
    }

    #[test]
    fn parts_keep_every_entry_the_nearest_need_and_let_the_farther_go() {
        // Sketches of 64 bits at a chosen distance from a query of zeros:
        // 20,000 entries in two parts, the far ones first, so the limit
        // falls while they are read and the far ones kept early are let
        // go; ties at every distance, and 6,000 at the farthest, which the
        // parts keep until nearer ones come.
        let q = [0u8; 8];
        let sketch_at =
            |d: u32| -> Vec<u8> { (u64::MAX >> (64 - d.max(1))).to_le_bytes().to_vec() };
        let distance_of = |p: u64| -> u32 {
            match p {
                0..6_000 => 40,
                6_000..12_000 => 20 + (p % 5) as u32,
                _ => 3 + (p % 11) as u32,
            }
        };
        let entries: Vec<(u64, Vec<u8>)> = (0..20_000u64)
            .map(|p| {
                let d = distance_of(p);
                let s = if d == 0 { vec![0; 8] } else { sketch_at(d) };
                (p, s)
            })
            .collect();
        for k in [1usize, 7, 300, 5_000, 25_000] {
            let mut parts = vec![Nearest::new(64, k), Nearest::new(64, k)];
            for (i, batch) in entries.chunks(500).enumerate() {
                let part = &mut parts[i % 2];
                let bytes: Vec<u8> = batch.iter().flat_map(|(_, s)| s.clone()).collect();
                part.add(&q, batch.iter().map(|(p, _)| *p), &bytes);
            }
            assert_eq!(select(&parts, k), brute(&q, &entries, k), "k = {k}");
            // Each part counted all it read but kept far fewer, once it
            // had read more than `k` at a lower distance.
            for part in &parts {
                assert_eq!(part.hist.iter().map(|&c| c as usize).sum::<usize>(), 10_000);
                if k <= 300 {
                    assert!(
                        part.kept.len() < 4 * 1024 + 500,
                        "k = {k}: kept {}",
                        part.kept.len()
                    );
                }
            }
        }
    }

    #[test]
    fn a_sketch_with_cells_finds_the_nearest_in_the_cells_it_reads_and_all_past_them() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [3u8; 16];
        let all = vectors(400);
        sketch_all(&db, &token, &all);
        let reader = open(&db, &token, all.len());
        assert!(reader.has_cells());
        let cells = reader.cells.as_ref().expect("cells");
        assert_eq!(cells.covered, 400);
        let size = 8;
        let sketch_of = |p: usize| {
            let mut out = vec![0u8; size];
            super::of_offset(&all[p].1, all[p].0, &reader.mean, &mut out);
            out
        };
        for (qi, k) in [(0usize, 3usize), (7, 10), (11, 40), (5, 150)] {
            let q = sketch_of(qi);
            let got = reader.nearest(&q, k).expect("nearest");
            // What the probe reads: the nearest cells' entries.
            let mut read = Vec::new();
            cells
                .probe(&q, super::cells::probed(cells.covered, k), |pos, sk| {
                    for (p, s) in pos.iter().zip(sk.chunks_exact(size)) {
                        assert_eq!(s, &sketch_of(*p as usize)[..]);
                        read.push((u64::from(*p), s.to_vec()));
                    }
                })
                .expect("probe");
            assert!(read.len() as u64 >= (4 * k as u64).min(400));
            assert_eq!(got, brute(&q, &read, k), "k = {k}");
            // The query's own entry is at distance 0: that distance is
            // found (by it, or by a later entry with the same sketch).
            let nearest = got.iter().map(|&p| plain(&q, &sketch_of(p as usize))).min();
            assert_eq!(nearest, Some(0), "k = {k}");
        }
        // Every entry read when the probe covers all: the full scan's.
        let q = sketch_of(1);
        let full: Vec<(u64, Vec<u8>)> = (0..400).map(|p| (p as u64, sketch_of(p))).collect();
        assert_eq!(
            reader.nearest(&q, 120).expect("nearest"),
            brute(&q, &full, 120)
        );

        // More entries: the cells still cover three quarters and stay;
        // the new ones are read past them.
        let more = vectors(500);
        sketch_all(&db, &token, &more);
        let reader = open(&db, &token, more.len());
        assert_eq!(reader.cells.as_ref().expect("cells").covered, 400);
        let q = sketch_of(450 % 6);
        let got = reader.nearest(&q, 5).expect("nearest");
        let mut read = Vec::new();
        let cells = reader.cells.as_ref().expect("cells");
        cells
            .probe(&q, super::cells::probed(400, 5), |pos, sk| {
                for (p, s) in pos.iter().zip(sk.chunks_exact(size)) {
                    read.push((u64::from(*p), s.to_vec()));
                }
            })
            .expect("probe");
        let mut sketch_of_more = vec![0u8; size];
        for (p, (inv, v)) in more.iter().enumerate().skip(400) {
            super::of_offset(v, *inv, &reader.mean, &mut sketch_of_more);
            read.push((p as u64, sketch_of_more.clone()));
        }
        assert_eq!(got, brute(&q, &read, 5));
        // Past a quarter more, they are written anew over everything.
        let most = vectors(700);
        sketch_all(&db, &token, &most);
        let reader = open(&db, &token, most.len());
        assert_eq!(reader.cells.as_ref().expect("cells").covered, 700);
        // A blank removes them (the next update writes them anew).
        super::blank(&db, &token, 64, &[3]).expect("blank");
        assert!(!Component::Cells.path(&db).exists());
        assert!(!open(&db, &token, most.len()).has_cells());
        sketch_all(&db, &token, &most);
        assert!(open(&db, &token, most.len()).has_cells());
        // A sketch whose head fails its check is not read at all.
        let path = Component::Sketch.path(&db);
        let good = std::fs::read(&path).expect("read");
        let mut bytes = good.clone();
        bytes[40] ^= 0x10;
        std::fs::write(&path, &bytes).expect("write");
        assert!(super::open(&db, key(&token), 700, 700, None).is_none());
        // A sketch written anew (another mean) leaves them unused until
        // they are written for it; a lost sketch takes them along.
        std::fs::remove_file(&path).expect("rm");
        let fewer = vectors(500);
        update(&db, &token, &fewer, 0, super::CellsWhen::Later).expect("update");
        assert!(Component::Cells.path(&db).exists());
        assert!(!open(&db, &token, 500).has_cells());
        super::remove(&db);
        assert!(!Component::Cells.path(&db).exists());
    }

    #[test]
    fn mapped_cells_answer_as_the_file_does_and_follow_the_file_written_anew() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [5u8; 16];
        let held = super::Mappings::default();
        let open_held = |n: usize| {
            let n = n as u64;
            super::open(&db, key(&token), n, n, Some(&held)).expect("sketch")
        };
        let same_answers = |n: usize| {
            let (plain, mapped) = (open(&db, &token, n), open_held(n));
            assert!(mapped.cells.as_ref().expect("cells").mapped());
            assert!(!plain.cells.as_ref().expect("cells").mapped());
            for qi in [0usize, 7, 11, 5, 123] {
                let mut q = vec![0u8; 8];
                let all = vectors(n);
                super::of_offset(&all[qi].1, all[qi].0, &plain.mean, &mut q);
                for k in [3usize, 40, 150] {
                    assert_eq!(
                        mapped.nearest(&q, k).expect("mapped"),
                        plain.nearest(&q, k).expect("read"),
                        "{n} entries, query {qi}, k {k}"
                    );
                }
            }
        };
        sketch_all(&db, &token, &vectors(400));
        same_answers(400);
        // Written anew over more entries (a new file renamed over the
        // old): the mapping of the old one is not used for it.
        sketch_all(&db, &token, &vectors(700));
        assert_eq!(open_held(700).cells.as_ref().expect("cells").covered, 700);
        same_answers(700);
        // Removed by a blank: no cells, held or not.
        super::blank(&db, &token, 64, &[3]).expect("blank");
        assert!(!open_held(700).has_cells());
    }

    /// A kept mapping of the sketch is never used for a sketch removed and
    /// written anew over other entries (a new mean), even when the new
    /// file gets the old one's inode back.
    #[test]
    fn a_mapped_sketch_written_anew_with_another_mean_is_read_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [9u8; 16];
        let mappings = super::Mappings::default();
        let same_answers = |n: usize| {
            let n64 = n as u64;
            let plain = open(&db, &token, n);
            let mapped = super::open(&db, key(&token), n64, n64, Some(&mappings)).expect("sketch");
            assert!(mapped.mapped() && !plain.mapped());
            let every = sketches(&vectors(n), &plain.mean);
            for qi in [0usize, 7, 11, 5, 23] {
                for k in [3usize, 10, 30] {
                    assert_eq!(
                        mapped.nearest(&every[qi].1, k).expect("mapped"),
                        plain.nearest(&every[qi].1, k).expect("read"),
                        "{n} entries, query {qi}, k {k}"
                    );
                }
            }
        };
        // Below the cells' threshold, so every answer comes from the
        // sketch's own entries.
        sketch_without_cells(&db, &token, &vectors(60));
        same_answers(60);
        super::remove(&db);
        sketch_without_cells(&db, &token, &vectors(40));
        same_answers(40);
    }

    /// Sketches `all` without cells (as a long pass's steps leave them).
    fn sketch_without_cells(db: &std::path::Path, token: &[u8; 16], all: &[(f32, Vec<u8>)]) {
        sketch_entries(db, token, all, super::CellsWhen::Later);
    }

    /// Each entry's sketch against `mean`, with its position.
    fn sketches(all: &[(f32, Vec<u8>)], mean: &[f32]) -> Vec<(u64, Vec<u8>)> {
        all.iter()
            .enumerate()
            .map(|(p, (inv, v))| {
                let mut out = vec![0u8; 8];
                super::of_offset(v, *inv, mean, &mut out);
                (p as u64, out)
            })
            .collect()
    }

    /// Damage as a disk does it to page `n` of the file at `path`: random
    /// bytes over part of it, or the page zeroed.
    fn damage_page(path: &std::path::Path, n: usize, zero: bool) {
        let mut bytes = std::fs::read(path).expect("read");
        let page = &mut bytes[n * super::PAGE..(n + 1) * super::PAGE];
        match zero {
            true => page.fill(0),
            false => noise(n as u64 + 7, 200)
                .iter()
                .enumerate()
                .for_each(|(i, b)| page[i * 13 % super::PAGE] ^= b | 1),
        }
        std::fs::write(path, bytes).expect("write");
    }

    #[test]
    fn a_damaged_page_of_sketches_is_never_trusted_and_its_entries_are_handed_on() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [4u8; 16];
        let all = vectors(2_000);
        sketch_without_cells(&db, &token, &all);
        let path = Component::Sketch.path(&db);
        let pristine = std::fs::read(&path).expect("read");
        let per = super::per_page(64);
        assert_eq!((per, super::head_pages(64)), (509, 1));
        let held = super::Mappings::default();
        let key = key(&token);
        let reader = open(&db, &token, all.len());
        assert!(!reader.has_cells());
        let every = sketches(&all, &reader.mean);
        let queries: Vec<Vec<u8>> = [5usize, 600, 1_999]
            .iter()
            .map(|&i| every[i].1.clone())
            .collect();
        let want: Vec<Vec<u64>> = queries
            .iter()
            .map(|q| reader.nearest(q, 40).expect("nearest"))
            .collect();
        drop(reader);
        assert_eq!(super::damage(&db, &token, 64, 2_000), None, "intact");
        // The second page of sketches (entries 509..1018, the file's page
        // 2), damaged either way.
        for zero in [false, true] {
            std::fs::write(&path, &pristine).expect("put back");
            damage_page(&path, 2, zero);
            let why = super::damage(&db, &token, 64, 2_000).expect("damage found");
            assert!(why.contains("1 of its 5 pages"), "{why}");
            for reader in [
                open(&db, &token, all.len()),
                super::open(&db, key, 2_000, 2_000, Some(&held)).expect("held"),
            ] {
                for (q, want) in queries.iter().zip(&want) {
                    let got = reader.nearest(q, 40).expect("nearest");
                    // Every entry of the damaged page is handed on to be
                    // scored exactly; elsewhere the nearest by sketch.
                    let page: Vec<u64> = (per..2 * per).collect();
                    let (inside, outside): (Vec<u64>, Vec<u64>) =
                        got.iter().partition(|p| page.contains(p));
                    assert_eq!(inside, page);
                    let others: Vec<(u64, Vec<u8>)> = every
                        .iter()
                        .filter(|(p, _)| !page.contains(p))
                        .cloned()
                        .collect();
                    assert_eq!(outside, brute(q, &others, 40));
                    // So every entry the intact file chose is scored still.
                    assert!(want.iter().all(|p| got.contains(p)), "zero {zero}");
                }
                assert!(reader.damaged.load(super::Ordering::Relaxed) >= per);
            }
        }
        // The head damaged: no sketch at all (every vector scored).
        std::fs::write(&path, &pristine).expect("put back");
        damage_page(&path, 0, false);
        assert!(super::open(&db, key, 2_000, 2_000, None).is_none());
        assert!(
            super::damage(&db, &token, 64, 2_000)
                .expect("head")
                .contains("head")
        );
        // Made for another vector file: not damage, written anew anyway.
        std::fs::write(&path, &pristine).expect("put back");
        assert_eq!(super::damage(&db, &[9; 16], 64, 2_000), None);
    }

    #[test]
    fn a_torn_append_is_never_trusted_and_the_next_update_writes_it_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [6u8; 16];
        let all = vectors(1_300);
        sketch_without_cells(&db, &token, &all[..600]);
        let path = Component::Sketch.path(&db);
        let file = || std::fs::File::open(&path).expect("open");
        assert_eq!(super::check(&file(), &token, 64).map(|c| c.1), Some(600));
        let later = super::CellsWhen::Later;
        // A pass that died while it rewrote the second page (holding 91
        // vouched entries) and appended a third, before its mark moved:
        // the second torn, the third written.
        update(&db, &token, &all, 600, later).expect("update");
        damage_page(&path, 2, false);
        // The vouched entries of the torn page are handed on; those past
        // the mark are not the sketch's (the vector scan reads them).
        let (mean, n) = super::check(&file(), &token, 64).expect("head intact");
        assert_eq!(n, 1_300);
        let reader = super::open(&db, key(&token), 1_300, 600, None).expect("sketch");
        assert_eq!(reader.count, 600);
        let every = sketches(&all, &mean);
        let got = reader.nearest(&every[3].1, 10).expect("nearest");
        assert!((509..600).all(|p| got.contains(&p)));
        assert_eq!(reader.damaged.load(super::Ordering::Relaxed), 91);
        drop(reader);
        assert!(super::damage(&db, &token, 64, 600).is_some());
        // The next update writes them again from the torn page on.
        assert_eq!(
            update(&db, &token, &all, 600, later).expect("update"),
            1_300
        );
        assert_eq!(super::damage(&db, &token, 64, 1_300), None, "whole again");
        let (mean2, read) = super::read_all(&db, &token, 64);
        assert_eq!(mean2, mean, "appended, not written anew");
        let want: Vec<u8> = every.into_iter().flat_map(|(_, s)| s).collect();
        assert_eq!(read, want);
    }

    /// Pages past the mark (an append that died before it moved, or an
    /// older cairn's sketch with no mark) are stale, not damaged: no
    /// reader reads them, the full check names nothing, and the next
    /// update writes them again.
    #[test]
    fn a_stale_sketch_past_its_mark_is_not_damaged_and_is_written_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [7u8; 16];
        let all = vectors(1_100);
        let later = super::CellsWhen::Later;
        assert_eq!(
            update(&db, &token, &all[..600], 0, later).expect("update"),
            600
        );
        // The append wrote pages 2 and 3 (entries 509..1,100); page 3,
        // past the mark, is torn and page 2 holds more than it vouches.
        update(&db, &token, &all, 600, later).expect("update");
        let path = Component::Sketch.path(&db);
        damage_page(&path, 3, true);
        assert_eq!(super::damage(&db, &token, 64, 600), None, "stale");
        let reader = super::open(&db, key(&token), 1_100, 600, None).expect("sketch");
        assert_eq!(reader.count, 600);
        let q = sketches(&all[..1], &reader.mean).remove(0).1;
        reader.nearest(&q, 10).expect("nearest");
        assert_eq!(reader.damaged.load(super::Ordering::Relaxed), 0);
        drop(reader);
        // Nothing vouched for at all: no reader, no damage.
        assert!(super::open(&db, key(&token), 1_100, 0, None).is_none());
        assert_eq!(super::damage(&db, &token, 64, 0), None);
        assert!(!super::current(&db, &token, 64, (1_100, 600)));
        assert_eq!(
            update(&db, &token, &all, 600, later).expect("update"),
            1_100
        );
        assert_eq!(super::damage(&db, &token, 64, 1_100), None, "whole");
        let (mean, read) = super::read_all(&db, &token, 64);
        let want: Vec<u8> = sketches(&all, &mean)
            .into_iter()
            .flat_map(|(_, s)| s)
            .collect();
        assert_eq!(read, want);
    }

    #[test]
    fn a_damaged_page_of_cells_sends_the_question_to_every_sketch() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [8u8; 16];
        let all = vectors(2_000);
        sketch_all(&db, &token, &all);
        let path = Component::Cells.path(&db);
        let pristine = std::fs::read(&path).expect("read");
        assert_eq!(super::cells::damage(&db, &token, 64), None, "intact");
        let reader = open(&db, &token, all.len());
        assert!(reader.has_cells());
        let every = sketches(&all, &reader.mean);
        let q = every[77].1.clone();
        let through_cells = reader.nearest(&q, 30).expect("nearest");
        let full = reader.nearest_scan(&q, 30).expect("scan");
        drop(reader);
        let pages = pristine.len() / super::PAGE;
        assert!(pages > 4, "{pages} pages");
        for zero in [false, true] {
            std::fs::write(&path, &pristine).expect("put back");
            damage_page(&path, pages - 2, zero);
            let why = super::cells::damage(&db, &token, 64).expect("found");
            assert!(why.contains("1 of its"), "{why}");
            // Every query that reads the damaged page answers as the full
            // scan; one that does not, as the cells did.
            let reader = open(&db, &token, all.len());
            assert!(reader.has_cells(), "the head is intact");
            let got = reader.nearest(&q, 30).expect("nearest");
            assert!(got == full || got == through_cells, "zero {zero}");
            let all_cells = reader.nearest(&q, 1_000).expect("nearest");
            assert_eq!(all_cells, reader.nearest_scan(&q, 1_000).expect("scan"));
        }
        // The head damaged: the cells are not used.
        std::fs::write(&path, &pristine).expect("put back");
        damage_page(&path, 0, false);
        assert!(!open(&db, &token, all.len()).has_cells());
        assert!(super::cells::damage(&db, &token, 64).is_some());
    }

    #[test]
    fn a_former_file_is_written_anew_and_an_unwritable_one_is_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let token = [2u8; 16];
        let all = vectors(700);
        let path = Component::Sketch.path(&db);
        let mut former = b"cairnsk1".to_vec();
        former.extend(std::iter::repeat_n(7u8, 9_000));
        std::fs::write(&path, &former).expect("write");
        std::fs::write(Component::Cells.path(&db), b"cairncl1 and more").expect("write");
        assert_eq!(
            super::damage(&db, &token, 64, 700),
            None,
            "former, not damaged"
        );
        assert_eq!(super::cells::damage(&db, &token, 64), None, "former");
        sketch_all(&db, &token, &all);
        assert!(open(&db, &token, 700).has_cells(), "both written anew");
        // Something in the way of either: the error names the file.
        for (path, with_cells) in [
            (Component::Sketch.path(&db), false),
            (Component::Cells.path(&db), true),
        ] {
            super::remove(&db);
            std::fs::create_dir(&path).expect("a folder in the way");
            let err =
                update(&db, &token, &all, 0, super::CellsWhen::Now).expect_err("cannot be written");
            match err {
                super::StoreError::Derived { path: named, .. } => assert_eq!(named, path),
                other => panic!("{other}"),
            }
            assert!(
                !dir.path().join("c.db-sketch.tmp").exists()
                    && !dir.path().join("c.db-cells.tmp").exists()
            );
            std::fs::remove_dir(&path).expect("clear");
            assert!(with_cells || !Component::Cells.path(&db).exists());
        }
    }

    #[test]
    fn small_files_score_more_candidates() {
        use super::candidates;
        assert_eq!(candidates(0), 16_000);
        assert_eq!(candidates(100_000), 16_000);
        assert_eq!(candidates(120_000), 16_000);
        assert_eq!(candidates(160_000), 12_000);
        assert_eq!(candidates(240_000), 8_000);
        assert_eq!(candidates(1_150_000), 8_000);
        assert_eq!(candidates(u64::MAX), 8_000);
        let mut last = usize::MAX;
        for n in (0..400_000).step_by(997) {
            let k = candidates(n);
            assert!(k <= last, "never more for a larger file: {n}");
            last = k;
        }
    }

    /// `n` bytes of a xorshift sequence started at `state`.
    fn noise(mut state: u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    #[test]
    fn distances_count_every_differing_bit() {
        let bytes = noise(0x2545_f491_4f6c_dd1d, 8192);
        // Lengths around the word and the 31-word flush, with tails.
        for len in [0, 1, 7, 8, 9, 31, 32, 33, 247, 248, 249, 256, 300, 4096] {
            let (a, b) = (&bytes[..len], &bytes[4096..4096 + len]);
            // Every bit different: the largest count of each length.
            let ones = vec![0xffu8; len];
            let zeros = vec![0u8; len];
            for (name, f) in [
                ("swar", distance as fn(&[u8], &[u8]) -> u32),
                ("popcount", distance_by_popcount),
            ] {
                assert_eq!(f(a, b), plain(a, b), "{name} {len}");
                assert_eq!(f(&ones, &zeros), 8 * len as u32, "{name} {len}");
                assert_eq!(f(a, a), 0, "{name} {len}");
            }
        }
    }

    /// The scan's loop, whichever copy the CPU runs, gives each sketch's
    /// distance in order and the histogram of them.
    #[test]
    fn the_scan_loop_counts_as_the_plain_distance_does() {
        let query = noise(0x9e37_79b9_7f4a_7c15, 32);
        let mut bytes = noise(0x6a09_e667_f3bc_c908, 32 * 5000);
        // The extremes: the query itself and its complement.
        bytes[..32].copy_from_slice(&query);
        let flipped: Vec<u8> = query.iter().map(|b| !b).collect();
        bytes[32..64].copy_from_slice(&flipped);
        let (mut dist, mut hist) = (Vec::new(), vec![0u32; 257]);
        distances(&query, &bytes, &mut dist, &mut hist);
        let want: Vec<u16> = bytes
            .chunks_exact(32)
            .map(|e| plain(&query, e) as u16)
            .collect();
        assert_eq!(dist, want);
        assert_eq!((dist[0], dist[1]), (0, 256));
        let mut want_hist = vec![0u32; 257];
        for d in &want {
            want_hist[usize::from(*d)] += 1;
        }
        assert_eq!(hist, want_hist);
        // The portable copy agrees, appending after what is there.
        let (mut again, mut twice) = (dist.clone(), hist.clone());
        each_distance(&query, &bytes, &mut again, &mut twice, distance);
        assert_eq!(again[want.len()..], want[..]);
        assert!(twice.iter().zip(&hist).all(|(t, h)| *t == 2 * h));
    }
}
