//! Checked pages: the unit in which a derived file beside the database
//! (`store::columns_file`) is written, checked and given up.
//!
//! A page is 4 KiB: [`BODY`] bytes of entries, then a 16-byte trailer
//! whose first four bytes are the CRC-32 of the file's token, the page's
//! number and the page's other bytes (the rest of the trailer is zero). A
//! writer seals every page it writes, whole; a reader checks a page before
//! it trusts any byte of it. A page that fails (a torn write, damage on
//! disk, a page zeroed or copied from elsewhere) is never read: its
//! entries say nothing and the reader asks the database, and the next
//! index pass, which checks every page, writes the file anew.
//!
//! This module knows nothing of what the entries mean, nor of the
//! database; it never writes a file.

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
