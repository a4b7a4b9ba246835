//! Coarse cells over the sketches (`<db>-cells`): the sketches clustered
//! by Hamming distance (binary k-means on a sample), each entry filed
//! under its nearest centroid, so a question reads the nearest cells'
//! [`probed`] entries instead of every sketch.
//!
//! Layout, in sealed [`super::pages`]: a head (header with magic
//! `cairncl2` and the vector file's token, the sketch mean's blake3
//! prefix, the cell count, the entries covered, the centroids, each
//! cell's first entry), then counted pages of entries cell by cell: their
//! positions (u32 LE) then their sketches. A head that fails or names
//! another sketch is ignored; a failing page sends the question to the
//! full sketch scan. Written whole and renamed into place from [`from`]
//! entries when the cells cover under three quarters of the sketch; a
//! blank in the sketch removes the file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::derived::Component;
use super::flat_file::{self, RegionWriter, read_at};
use super::mapped::{self, Mappings, Which};
use super::pages::{self, PAGE};

const MAGIC: &[u8; 8] = Component::Cells.spec().magic;

/// Sketched entries from which searches go through the cells (about 3.5
/// GB of history): below, reading every sketch costs a question little.
/// Unit tests cluster small files; the built binary's tests set
/// `CAIRN_TEST_SKETCH_FROM` (see `store::sketch`).
pub(crate) fn from() -> u64 {
    match cfg!(test) {
        true => 64,
        false => super::sketch::test_knob().unwrap_or(400_000),
    }
}
/// A search reads at least one in this many of the covered entries (one
/// in 4 kept the full scan's recall at 10 GB; one in 16 lost 7 points).
const PROBE_SHARE: u64 = 4;
/// Rounds of k-means.
const ROUNDS: usize = 6;
/// Entries of the sample per cell the centroids are trained on.
const SAMPLE_PER_CELL: usize = 48;
/// Bytes before the centroids.
const FIXED: u64 = flat_file::HEADER_LEN as u64 + 32;

/// Entries (position and sketch) a page holds, for sketches of `size` bytes.
fn per_page(size: usize) -> u64 {
    pages::per_page(4 + size) as u64
}

/// Bytes of the head of `count` cells of sketches of `size` bytes.
fn head_len(count: usize, size: usize) -> usize {
    FIXED as usize + count * size + 8 * (count + 1)
}

/// The 16 bytes that name a sketch's mean.
pub(crate) fn mean_key(mean: &[f32]) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    for m in mean {
        h.update(&m.to_le_bytes());
    }
    let mut key = [0u8; 16];
    key.copy_from_slice(&h.finalize().as_bytes()[..16]);
    key
}

/// How many entries a search reads of `covered`, when it wants `k`.
pub(crate) fn probed(covered: u64, k: usize) -> u64 {
    (covered / PROBE_SHARE).max(4 * k as u64)
}

/// How many cells for `n` entries: twice the square root (the square root
/// itself lost 1.3 more points of R@1 by agent at the same share read).
fn cells_for(n: usize) -> usize {
    ((2.0 * (n as f64).sqrt()) as usize).clamp(1, 1 << 16)
}

/// The cells file open for a search.
#[derive(Debug)]
pub(crate) struct Cells {
    file: File,
    /// The file's path, to name it.
    pub(crate) path: PathBuf,
    /// The token its pages are sealed with.
    seal: [u8; 16],
    /// Bytes of one sketch.
    size: usize,
    /// The entries of the sketch it covers, from the first.
    pub(crate) covered: u64,
    centroids: Vec<u8>,
    /// The first entry of each cell, then `covered`.
    starts: Vec<u64>,
    /// The file's number of the first page of entries.
    body: u64,
    /// The cells' entries mapped by a long-lived reader (see
    /// [`Cells::held_in`]), read there instead of from the file.
    mapped: Option<mapped::Entries>,
}

/// The cells of the sketch whose entries are `size` bytes, made for the
/// vector file `token` (vectors of length `dim`) and the sketch's mean
/// named `mean`, when they are there and cover no more than the sketch's
/// `sketched` entries.
pub(crate) fn open(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    mean: &[u8; 16],
    sketched: u64,
) -> Option<Cells> {
    let path = Component::Cells.path(db);
    let file = File::open(&path).ok()?;
    let seal = Component::Cells.seal_token(token);
    let size = dim.div_ceil(8);
    let Some((count, covered, head)) = read_head(&file, &seal, token, dim) else {
        if flat_file::claims(&file, MAGIC, token) {
            tracing::error!(path = %path.display(), "the head of the sketch's cells is damaged: they are not read (every sketch is); the next `cairn index` writes them anew");
            super::derived::note_damage(&path);
        }
        return None;
    };
    if head[32..48] != mean[..] || covered > sketched {
        return None;
    }
    let (centroids, starts) = head[FIXED as usize..].split_at(count * size);
    let starts: Vec<u64> = starts
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    if starts[0] != 0 || starts[count] != covered || starts.windows(2).any(|w| w[0] > w[1]) {
        return None;
    }
    Some(Cells {
        file,
        path,
        seal,
        size,
        covered,
        centroids: centroids.to_vec(),
        starts,
        body: pages::head_pages(head_len(count, size)),
        mapped: None,
    })
}

/// The number of cells, the entries covered and the head of the cells
/// `file` made for the vector file `token` (sealed with `seal`), when the
/// head is intact, names that file, and the file's length fits its shape.
fn read_head(
    file: &File,
    seal: &[u8; 16],
    token: &[u8; 16],
    dim: usize,
) -> Option<(usize, u64, Vec<u8>)> {
    let len = file.metadata().ok()?.len();
    let fixed = pages::read_head(file, seal, FIXED as usize)?;
    if fixed[..flat_file::HEADER_LEN] != flat_file::header(MAGIC, dim, token) {
        return None;
    }
    let count = u32::from_le_bytes(fixed[48..52].try_into().ok()?) as usize;
    let covered = u64::from_le_bytes(fixed[56..64].try_into().ok()?);
    let size = dim.div_ceil(8);
    if count == 0 || count as u64 > covered || count > 1 << 20 {
        return None;
    }
    let head = head_len(count, size);
    let pages = pages::head_pages(head) + covered.div_ceil(per_page(size));
    if len != pages * PAGE as u64 {
        return None;
    }
    Some((count, covered, pages::read_head(file, seal, head)?))
}

impl Cells {
    /// Calls `each` with the positions and the sketches of the entries of
    /// the cells nearest to `query`, nearest cell first, until `want`
    /// entries have been read (or every cell).
    #[cfg(test)]
    pub(crate) fn probe(
        &self,
        query: &[u8],
        want: u64,
        each: impl FnMut(&[u32], &[u8]),
    ) -> std::io::Result<bool> {
        self.read(&self.nearest(query, want), each)
    }

    /// The cells nearest to `query`, nearest first, that hold `want`
    /// entries between them (or every cell); empty cells left out.
    pub(crate) fn nearest(&self, query: &[u8], want: u64) -> Vec<usize> {
        let mut order: Vec<(u32, usize)> = self
            .centroids
            .chunks_exact(self.size)
            .enumerate()
            .map(|(c, centroid)| (super::sketch::distance(query, centroid), c))
            .collect();
        order.sort_unstable();
        let mut held = 0u64;
        let mut out = Vec::new();
        for (_, c) in order {
            if held >= want {
                break;
            }
            let m = self.starts[c + 1] - self.starts[c];
            if m > 0 {
                out.push(c);
                held += m;
            }
        }
        out
    }

    /// These cells with their entries read from a mapping of the file
    /// kept in `mappings` (under `of`, the vector file's key, with this
    /// file's identity): each question reads its quarter of the entries
    /// where they lie instead of copying them out of the page cache.
    /// Unchanged when the file cannot be mapped.
    pub(crate) fn mapped_in(mut self, mappings: &Mappings, of: mapped::Key) -> Cells {
        let Some(identity) = flat_file::identity(&self.file) else {
            return self;
        };
        let key = mapped::Key {
            file: Some(identity),
            ..of
        };
        let len = self.covered.div_ceil(per_page(self.size)) * PAGE as u64;
        self.mapped = mappings.entries(Which::Cells, key, &self.file, self.body * PAGE as u64, len);
        self
    }

    /// Whether the entries are read from a mapping.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Calls `each` with the positions and the sketches of the entries of
    /// each of `cells`, in that order, a page at a time. Returns false,
    /// having stopped, at the first page that fails its check.
    pub(crate) fn read(
        &self,
        cells: &[usize],
        mut each: impl FnMut(&[u32], &[u8]),
    ) -> std::io::Result<bool> {
        let per = per_page(self.size);
        let sketches_at = 4 * per as usize;
        let mut buf = Vec::new();
        let mut positions = Vec::new();
        for &c in cells {
            let (first, end) = (self.starts[c], self.starts[c + 1]);
            if first == end {
                continue;
            }
            // The cell's pages, in one read when they are not held.
            let (p0, p1) = (first / per, (end - 1) / per + 1);
            let span: &[u8] = match &self.mapped {
                Some(m) => &m[p0 as usize * PAGE..p1 as usize * PAGE],
                None => {
                    buf.resize((p1 - p0) as usize * PAGE, 0);
                    read_at(&self.file, &mut buf, (self.body + p0) * PAGE as u64)?;
                    &buf
                }
            };
            for (page, p) in span.chunks_exact(PAGE).zip(p0..) {
                let lo = (first.max(p * per) - p * per) as usize;
                let hi = (end.min((p + 1) * per) - p * per) as usize;
                if !pages::intact(&self.seal, self.body + p, page) || pages::count_of(page) < hi {
                    return Ok(false);
                }
                positions.clear();
                positions.extend(
                    page[4 * lo..4 * hi]
                        .chunks_exact(4)
                        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))),
                );
                each(
                    &positions,
                    &page[sketches_at + lo * self.size..sketches_at + hi * self.size],
                );
            }
        }
        Ok(true)
    }
}

/// Writes the cells of the sketch whose `count` entries `sketches` reads
/// (`None` when a page of them fails its check) anew when it holds
/// [`from`] entries or more and the cells there cover less than three
/// quarters of them, or are missing or made for another sketch. Returns
/// whether it wrote them.
pub(crate) fn refresh(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    mean: &[f32],
    sketches: impl FnOnce() -> std::io::Result<Option<Vec<u8>>>,
    count: u64,
) -> std::io::Result<bool> {
    if current(db, token, dim, mean, count) {
        return Ok(false);
    }
    let Some(sketches) = sketches()? else {
        return Ok(false);
    };
    let key = mean_key(mean);
    let size = dim.div_ceil(8);
    let (centroids, cell_of) = cluster(&sketches, size);
    write(db, token, dim, &key, &sketches, size, &centroids, &cell_of)?;
    Ok(true)
}

/// Whether the cells need no writing for a sketch of `count` entries with
/// `mean`: it holds fewer than [`from`], or cells made for it cover three
/// quarters of them.
pub(crate) fn current(db: &Path, token: &[u8; 16], dim: usize, mean: &[f32], count: u64) -> bool {
    count < from()
        || open(db, token, dim, &mean_key(mean), count).is_some_and(|c| c.covered * 4 >= count * 3)
}

/// What is wrong with the cells beside `db`, made for the vector file
/// named by `token` (vectors of length `dim`), if anything: a page of its
/// head or of its entries fails its check, or its shape does not fit its
/// length. None for no file, a former version's, or one made for another
/// vector file (written anew anyway).
pub(crate) fn damage(db: &Path, token: &[u8; 16], dim: usize) -> Option<String> {
    let path = Component::Cells.path(db);
    if !path.is_file() || Component::Cells.is_former(&path) {
        return None;
    }
    let Ok(file) = File::open(&path) else {
        return Some("it cannot be opened".into());
    };
    let seal = Component::Cells.seal_token(token);
    let Some((count, covered, _)) = read_head(&file, &seal, token, dim) else {
        let mut h = [0u8; flat_file::HEADER_LEN];
        let other =
            read_at(&file, &mut h, 0).is_ok() && h[..8] == MAGIC[..] && h[16..] != token[..];
        return (!other).then(|| "its head fails its check or does not fit its length".into());
    };
    let size = dim.div_ceil(8);
    let (first, per) = (pages::head_pages(head_len(count, size)), per_page(size));
    let total = first + covered.div_ceil(per);
    // Every page full but the last, which holds the rest.
    let want = |n: u64| Some((covered - (n - first) * per).min(per) as usize);
    match pages::bad_counted(&file, &seal, (first, total), want) {
        Ok(bad) => pages::failing(&bad, total),
        Err(e) => Some(format!("it cannot be read: {e}")),
    }
}

/// How many entries the cells file beside `db` says it covers, if there
/// is one (its header alone is read).
#[cfg(test)]
pub(crate) fn covered_in_file(db: &Path) -> Option<u64> {
    let file = File::open(Component::Cells.path(db)).ok()?;
    let mut fixed = [0u8; FIXED as usize];
    read_at(&file, &mut fixed, 0).ok()?;
    (fixed[..8] == MAGIC[..])
        .then(|| u64::from_le_bytes(fixed[56..64].try_into().expect("8 bytes")))
}

/// Removes the cells (when the sketch they copy changes under them).
pub(crate) fn remove(db: &Path) {
    let _ = std::fs::remove_file(Component::Cells.path(db));
}

/// Centroids for `sketches` (each `size` bytes) and each one's cell.
fn cluster(sketches: &[u8], size: usize) -> (Vec<u8>, Vec<u32>) {
    let n = sketches.len() / size;
    let k = cells_for(n);
    let entry = |i: usize| &sketches[i * size..(i + 1) * size];
    // An even sample to train on, and the centroids started from an even
    // share of it.
    let sample_n = (k * SAMPLE_PER_CELL).min(n);
    let sample: Vec<usize> = (0..sample_n).map(|i| i * n / sample_n).collect();
    let mut centroids: Vec<u8> = (0..k)
        .flat_map(|c| entry(sample[c * sample_n / k]).to_vec())
        .collect();
    let bits = 8 * size;
    for _ in 0..ROUNDS {
        let mut counts = vec![0u32; k * bits];
        let mut members = vec![0u32; k];
        let cells = assign(sample.len(), |j| {
            nearest(entry(sample[j]), &centroids, size)
        });
        for (&i, &c) in sample.iter().zip(&cells) {
            let (e, c) = (entry(i), c as usize);
            members[c] += 1;
            let row = &mut counts[c * bits..(c + 1) * bits];
            for (b, slot) in row.iter_mut().enumerate() {
                *slot += u32::from(e[b / 8] >> (b % 8) & 1);
            }
        }
        for c in 0..k {
            // A cell no sample chose keeps its centroid.
            if members[c] == 0 {
                continue;
            }
            let out = &mut centroids[c * size..(c + 1) * size];
            out.fill(0);
            for b in 0..bits {
                if 2 * counts[c * bits + b] > members[c] {
                    out[b / 8] |= 1 << (b % 8);
                }
            }
        }
    }
    let cell_of = assign(n, |i| nearest(entry(i), &centroids, size));
    (centroids, cell_of)
}

/// `cell(i)` for each `i` below `n`, in order, worked out in parts on up
/// to four threads: for the rounds of training as well as for filing
/// every entry (on one thread, the rounds were about a third of writing
/// the cells at 10 GB).
fn assign(n: usize, cell: impl Fn(usize) -> u32 + Sync) -> Vec<u32> {
    let threads = flat_file::threads();
    let per = n.div_ceil(threads).max(1);
    let parts = flat_file::in_parts(threads, |t| {
        let from = (t * per).min(n);
        let to = (from + per).min(n);
        Ok((from..to).map(&cell).collect::<Vec<u32>>())
    })
    .expect("assigning cells does no I/O");
    parts.concat()
}

/// The index of the centroid (each `size` bytes of `centroids`) nearest
/// to `e` by Hamming distance; of equal ones, the first.
fn nearest(e: &[u8], centroids: &[u8], size: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        #[allow(unsafe_code)]
        // SAFETY: the one requirement of a `target_feature` function is
        // that the CPU has the feature, checked just above.
        return unsafe { nearest_popcnt(e, centroids, size) };
    }
    nearest_with(e, centroids, size, super::sketch::distance)
}

/// [`nearest`] compiled for a CPU with the `popcnt` instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn nearest_popcnt(e: &[u8], centroids: &[u8], size: usize) -> u32 {
    nearest_with(e, centroids, size, super::sketch::distance_by_popcount)
}

#[inline(always)]
fn nearest_with(
    e: &[u8],
    centroids: &[u8],
    size: usize,
    distance: impl Fn(&[u8], &[u8]) -> u32,
) -> u32 {
    let mut best = (u32::MAX, 0u32);
    for (c, centroid) in centroids.chunks_exact(size).enumerate() {
        let d = distance(e, centroid);
        if d < best.0 {
            best = (d, c as u32);
        }
    }
    best.1
}

/// Writes the cells file: `centroids`, and each of the `sketches` under
/// its cell (`cell_of`).
#[allow(clippy::too_many_arguments)]
fn write(
    db: &Path,
    token: &[u8; 16],
    dim: usize,
    key: &[u8; 16],
    sketches: &[u8],
    size: usize,
    centroids: &[u8],
    cell_of: &[u32],
) -> std::io::Result<()> {
    let k = centroids.len() / size;
    let n = cell_of.len();
    let mut starts = vec![0u64; k + 1];
    for &c in cell_of {
        starts[c as usize + 1] += 1;
    }
    for c in 0..k {
        starts[c + 1] += starts[c];
    }
    // Entries in cell order, ascending by position within a cell.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| (cell_of[i as usize], i));
    let mut head = flat_file::header(MAGIC, dim, token).to_vec();
    head.extend_from_slice(key);
    head.extend_from_slice(&(k as u32).to_le_bytes());
    head.extend_from_slice(&[0u8; 4]);
    head.extend_from_slice(&(n as u64).to_le_bytes());
    head.extend_from_slice(centroids);
    for s in &starts {
        head.extend_from_slice(&s.to_le_bytes());
    }
    let seal = Component::Cells.seal_token(token);
    let path = Component::Cells.path(db);
    let (file, tmp) = flat_file::create_beside(&path)?;
    let written = (|| -> std::io::Result<()> {
        let mut w = RegionWriter::new(&file, 0);
        w.write_all(&pages::sealed_head(&seal, &head))?;
        let first = pages::head_pages(head.len());
        let per = per_page(size) as usize;
        let mut page = vec![0u8; PAGE];
        for (p, members) in order.chunks(per).enumerate() {
            page.fill(0);
            let sketches_at = 4 * per;
            for (j, &i) in members.iter().enumerate() {
                page[4 * j..4 * j + 4].copy_from_slice(&i.to_le_bytes());
                let (i, at) = (i as usize, sketches_at + j * size);
                page[at..at + size].copy_from_slice(&sketches[i * size..(i + 1) * size]);
            }
            pages::seal_counted(&seal, first + p as u64, &mut page, members.len());
            w.write_all(&page)?;
        }
        w.flush()?;
        drop(w);
        file.sync_data()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sketches in a few clusters: each a random centre with a few bits
    /// flipped.
    fn clustered(n: usize, size: usize, seed: u64) -> Vec<u8> {
        let mut st = seed;
        let mut next = move || {
            st = st
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (st >> 33) as u32
        };
        let centres: Vec<Vec<u8>> = (0..8)
            .map(|_| (0..size).map(|_| next() as u8).collect())
            .collect();
        let mut out = Vec::with_capacity(n * size);
        for i in 0..n {
            let mut s = centres[i % centres.len()].clone();
            for _ in 0..6 {
                let b = next() as usize % (8 * size);
                s[b / 8] ^= 1 << (b % 8);
            }
            out.extend(s);
        }
        out
    }

    fn plain_distance(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    /// Worked out in parts or not, every item's cell comes back in its place.
    #[test]
    fn assigning_in_parts_keeps_each_item_in_its_place() {
        for n in [0usize, 1, 3, 7, 1_000, 4_099] {
            let want: Vec<u32> = (0..n).map(|i| (i * 7 % 13) as u32).collect();
            assert_eq!(assign(n, |i| (i * 7 % 13) as u32), want, "{n}");
        }
    }

    #[test]
    fn every_entry_is_filed_once_under_its_nearest_centroid_with_its_sketch() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let (dim, size, n) = (64, 8, 900);
        let sketches = clustered(n, size, 3);
        let (centroids, cell_of) = cluster(&sketches, size);
        assert_eq!(centroids.len() / size, cells_for(n));
        for (i, &c) in cell_of.iter().enumerate() {
            let e = &sketches[i * size..(i + 1) * size];
            let best = centroids
                .chunks_exact(size)
                .map(|x| plain_distance(e, x))
                .min()
                .expect("a centroid");
            let own = &centroids[c as usize * size..(c as usize + 1) * size];
            assert_eq!(plain_distance(e, own), best, "entry {i}");
        }
        let token = [7u8; 16];
        let key = [9u8; 16];
        write(
            &db, &token, dim, &key, &sketches, size, &centroids, &cell_of,
        )
        .expect("write");
        let cells = open(&db, &token, dim, &key, n as u64).expect("cells");
        assert_eq!(cells.covered, n as u64);
        let mut seen = vec![0u32; n];
        let query = &sketches[..size];
        let mut last_cell_distance = 0;
        cells
            .probe(query, u64::MAX, |positions, got| {
                assert!(positions.windows(2).all(|w| w[0] < w[1]));
                // Nearest cell first.
                let c = cell_of[positions[0] as usize] as usize;
                let d = plain_distance(query, &centroids[c * size..(c + 1) * size]);
                assert!(d >= last_cell_distance);
                last_cell_distance = d;
                for (p, s) in positions.iter().zip(got.chunks_exact(size)) {
                    let p = *p as usize;
                    assert_eq!(s, &sketches[p * size..(p + 1) * size]);
                    assert_eq!(cell_of[p] as usize, c);
                    seen[p] += 1;
                }
            })
            .expect("probe");
        assert!(seen.iter().all(|&s| s == 1));
        // A probe stops once it has what it wants; the query's own
        // cluster comes first.
        let mut read = Vec::new();
        cells
            .probe(query, 50, |positions, _| read.extend_from_slice(positions))
            .expect("probe");
        assert!(read.len() >= 50 && read.len() < n, "{}", read.len());
        assert!(read.contains(&0));
        // Made for another vector file, another mean, or more entries
        // than the sketch holds: not used.
        assert!(open(&db, &[8u8; 16], dim, &key, n as u64).is_none());
        assert!(open(&db, &token, dim, &[0u8; 16], n as u64).is_none());
        assert!(open(&db, &token, dim, &key, n as u64 - 1).is_none());
        // A torn file is not used either.
        let path = Component::Cells.path(&db);
        let len = std::fs::metadata(&path).expect("meta").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(len - 1).expect("truncate");
        assert!(open(&db, &token, dim, &key, n as u64).is_none());
    }
}
