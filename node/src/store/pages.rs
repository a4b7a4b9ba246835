//! Sealed 4 KiB pages, the unit in which the derived files (columns file,
//! sketch, cells) are written and checked: [`BODY`] bytes, then a trailer
//! whose first four bytes are the CRC-32 of the file's token, the page
//! number and the rest of the page. A reader checks a page before it
//! trusts a byte of it; one that fails is never read. A counted page
//! keeps its entry count in its body's last four bytes; a head is a
//! file's opening bytes over as many pages as they fill. Knows nothing
//! of the entries or the database; writes no file.

/// Bytes of a page.
pub(crate) const PAGE: usize = 4096;

/// Bytes of a page that hold entries.
pub(crate) const BODY: usize = 4080;

/// The checksum of page `n` of the file named by `token`.
fn sum(token: &[u8; 16], n: u64, page: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(token);
    h.update(&n.to_le_bytes());
    h.update(&page[..BODY]);
    h.update(&page[BODY + 4..PAGE]);
    h.finalize()
}

/// Writes the trailer of `page` (page `n` of the file named by `token`).
pub(crate) fn seal(token: &[u8; 16], n: u64, page: &mut [u8]) {
    page[BODY + 4..PAGE].fill(0);
    let s = sum(token, n, page);
    page[BODY..BODY + 4].copy_from_slice(&s.to_le_bytes());
}

/// Whether `page` is whole and holds what its writer sealed.
pub(crate) fn intact(token: &[u8; 16], n: u64, page: &[u8]) -> bool {
    page.len() == PAGE
        && page[BODY + 4..].iter().all(|&b| b == 0)
        && page[BODY..BODY + 4] == sum(token, n, page).to_le_bytes()
}

/// The numbers of the pages of `bytes` (whole pages, the first of them
/// page `first`) that fail their check.
pub(crate) fn damaged(token: &[u8; 16], first: u64, bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(PAGE)
        .zip(first..)
        .filter(|(p, n)| !intact(token, *n, p))
        .map(|(_, n)| n)
        .collect()
}

/// Bytes of a counted page's body that hold entries: the last four bytes
/// of [`BODY`] say how many entries the page holds (u32 LE), so that a
/// file appended to a page at a time needs no count kept elsewhere.
pub(crate) const COUNTED: usize = BODY - 4;

/// How many entries of `size` bytes a counted page holds at most.
pub(crate) fn per_page(size: usize) -> usize {
    COUNTED / size.max(1)
}

/// The number of entries a counted page says it holds.
pub(crate) fn count_of(page: &[u8]) -> usize {
    u32::from_le_bytes(page[COUNTED..BODY].try_into().expect("4 bytes")) as usize
}

/// Writes `count` into counted `page` and seals it as page `n`.
pub(crate) fn seal_counted(token: &[u8; 16], n: u64, page: &mut [u8], count: usize) {
    page[COUNTED..BODY].copy_from_slice(&(count as u32).to_le_bytes());
    seal(token, n, page);
}

/// Pages that a head of `len` bytes fills (at least one).
pub(crate) fn head_pages(len: usize) -> u64 {
    len.div_ceil(BODY).max(1) as u64
}

/// `head` cut into the bodies of pages `0..`[`head_pages`], each sealed:
/// a file's opening bytes, read back whole by [`read_head`].
pub(crate) fn sealed_head(token: &[u8; 16], head: &[u8]) -> Vec<u8> {
    let pages = head_pages(head.len());
    let mut out = vec![0u8; pages as usize * PAGE];
    for (n, (page, body)) in out.chunks_mut(PAGE).zip(head.chunks(BODY)).enumerate() {
        page[..body.len()].copy_from_slice(body);
        seal(token, n as u64, page);
    }
    if head.is_empty() {
        seal(token, 0, &mut out);
    }
    out
}

/// The first `len` bytes of the head of `file`, when every page of it is
/// intact; `None` when one fails or cannot be read.
pub(crate) fn read_head(file: &std::fs::File, token: &[u8; 16], len: usize) -> Option<Vec<u8>> {
    let pages = head_pages(len) as usize;
    let mut raw = vec![0u8; pages * PAGE];
    super::flat_file::read_at(file, &mut raw, 0).ok()?;
    if !damaged(token, 0, &raw).is_empty() {
        return None;
    }
    let mut out: Vec<u8> = raw.chunks(PAGE).flat_map(|p| &p[..BODY]).copied().collect();
    out.truncate(len);
    Some(out)
}

/// The numbers of the counted pages `first..end` of `file` (sealed with
/// `token`) that fail their check or hold fewer than `want(n)` entries
/// (`None`: any number); an error when they cannot all be read.
pub(crate) fn bad_counted(
    file: &std::fs::File,
    token: &[u8; 16],
    (first, end): (u64, u64),
    want: impl Fn(u64) -> Option<usize>,
) -> std::io::Result<Vec<u64>> {
    const AT_ONCE: u64 = 32;
    let mut bad = Vec::new();
    let mut buf = vec![0u8; AT_ONCE as usize * PAGE];
    let mut n = first;
    while n < end {
        let m = (end - n).min(AT_ONCE);
        let chunk = &mut buf[..m as usize * PAGE];
        super::flat_file::read_at(file, chunk, n * PAGE as u64)?;
        for (page, n) in chunk.chunks(PAGE).zip(n..) {
            let short = want(n).is_some_and(|w| count_of(page) < w);
            if short || !intact(token, n, page) {
                bad.push(n);
            }
        }
        n += m;
    }
    Ok(bad)
}

/// What the full check says of a file whose pages `bad` (of `total`)
/// failed, if any did.
pub(crate) fn failing(bad: &[u64], total: u64) -> Option<String> {
    let first = bad.first()?;
    Some(format!(
        "{} of its {total} pages fail their check (first: page {first})",
        bad.len()
    ))
}

/// What a reader has learnt of the pages it checked: each is checked
/// once per reader.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    ok: Vec<u64>,
    bad: Vec<u64>,
}

impl Checked {
    /// `Some(true)` for a page checked and intact, `Some(false)` for one
    /// that failed, `None` before it is checked.
    pub(crate) fn of(&self, n: u64) -> Option<bool> {
        let bit = |set: &[u64]| {
            set.get((n / 64) as usize)
                .is_some_and(|w| w >> (n % 64) & 1 == 1)
        };
        match (bit(&self.ok), bit(&self.bad)) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// Notes what checking page `n` found.
    pub(crate) fn note(&mut self, n: u64, ok: bool) {
        let set = if ok { &mut self.ok } else { &mut self.bad };
        let w = (n / 64) as usize;
        if set.len() <= w {
            set.resize(w + 1, 0);
        }
        set[w] |= 1 << (n % 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_only_what_was_sealed_for_its_place() {
        let token = [5u8; 16];
        let mut page = vec![0u8; PAGE];
        page[..BODY]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        seal(&token, 3, &mut page);
        assert!(intact(&token, 3, &page));
        // Another place, another file, a byte changed anywhere, a page
        // zeroed, a page cut short: each fails.
        assert!(!intact(&token, 4, &page));
        assert!(!intact(&[6; 16], 3, &page));
        for at in [0, 100, BODY - 1, BODY, BODY + 3, BODY + 4, PAGE - 1] {
            let mut bad = page.clone();
            bad[at] ^= 0x10;
            assert!(!intact(&token, 3, &bad), "byte {at}");
        }
        assert!(!intact(&token, 3, &[0u8; PAGE]));
        assert!(!intact(&token, 3, &page[..PAGE - 1]));
        // Several pages at once: only the damaged one is named.
        let mut two = page.clone();
        let mut next = page.clone();
        seal(&token, 4, &mut next);
        two.extend_from_slice(&next);
        assert_eq!(damaged(&token, 3, &two), Vec::<u64>::new());
        two[PAGE + 9] = 0xff;
        assert_eq!(damaged(&token, 3, &two), vec![4]);
    }

    #[test]
    fn a_head_reads_back_whole_and_counted_pages_keep_their_count() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        let token = [9u8; 16];
        for len in [0usize, 1, BODY - 1, BODY, BODY + 1, 3 * BODY + 17] {
            let head: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let bytes = sealed_head(&token, &head);
            assert_eq!(bytes.len() as u64, head_pages(len) * PAGE as u64, "{len}");
            std::fs::write(&path, &bytes).expect("write");
            let f = std::fs::File::open(&path).expect("open");
            assert_eq!(read_head(&f, &token, len).as_deref(), Some(&head[..]));
            assert_eq!(read_head(&f, &[1; 16], len), None, "another token");
            // A byte changed in any page of it: not read.
            let mut bad = bytes.clone();
            let at = bad.len() - PAGE + 5;
            bad[at] ^= 1;
            std::fs::write(&path, &bad).expect("write");
            let f = std::fs::File::open(&path).expect("open");
            assert_eq!(read_head(&f, &token, len), None, "{len}");
        }
        assert_eq!((per_page(32), per_page(36), per_page(16)), (127, 113, 254));
        let mut page = vec![0u8; PAGE];
        seal_counted(&token, 4, &mut page, 77);
        assert!(intact(&token, 4, &page));
        assert_eq!(count_of(&page), 77);
    }

    #[test]
    fn checked_pages_are_remembered_each_way() {
        let mut c = Checked::default();
        assert_eq!(c.of(0), None);
        c.note(0, true);
        c.note(130, false);
        assert_eq!(
            (c.of(0), c.of(130), c.of(129), c.of(9_999)),
            (Some(true), Some(false), None, None)
        );
    }
}
