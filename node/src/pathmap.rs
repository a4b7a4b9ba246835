//! A table that finds a path among a list of paths without allocating per
//! path: open addressing on a quick hash, the list itself holding the paths.
//! A pass compares thousands of paths on disk with those the index knows,
//! and a miss rarely compares any text.

/// Where each path of a list is; the list is not kept, so every look-up is
/// given a way to read the list's paths.
pub struct PathMap {
    /// (hash of the path, index into the list); the length a power of two
    /// at least twice the list's, `u32::MAX` marking a free slot.
    slots: Vec<(u64, u32)>,
}

impl PathMap {
    /// Indexes `paths`, the list's paths in order.
    pub fn new<'a>(paths: impl ExactSizeIterator<Item = &'a [u8]>) -> PathMap {
        let len = (paths.len() * 2).next_power_of_two().max(16);
        let mut slots = vec![(0, u32::MAX); len];
        for (i, p) in paths.enumerate() {
            let h = path_hash(p);
            let mut at = h as usize & (len - 1);
            while slots[at].1 != u32::MAX {
                at = (at + 1) & (len - 1);
            }
            slots[at] = (h, i as u32);
        }
        PathMap { slots }
    }

    /// The index in the list of `path`, where `path_at(i)` is the list's
    /// `i`th path.
    pub fn find<'a>(&self, path: &[u8], path_at: impl Fn(usize) -> &'a [u8]) -> Option<usize> {
        let h = path_hash(path);
        let mask = self.slots.len() - 1;
        let mut at = h as usize & mask;
        loop {
            let (sh, i) = self.slots[at];
            if i == u32::MAX {
                return None;
            }
            if sh == h && path_at(i as usize) == path {
                return Some(i as usize);
            }
            at = (at + 1) & mask;
        }
    }
}

/// A quick hash of a path, eight bytes at a time (the paths come from the
/// local disk and the node's own files, so no adversary picks them).
fn path_hash(path: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = path.len() as u64;
    for chunk in path.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_found_at_its_place_and_no_other_is() {
        let paths: Vec<String> = (0..500)
            .map(|i| format!("/home/u/.claude/projects/-p{}/s{i}.jsonl", i % 7))
            .collect();
        let map = PathMap::new(paths.iter().map(|p| p.as_bytes()));
        let at = |i: usize| paths[i].as_bytes();
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(map.find(p.as_bytes(), at), Some(i));
        }
        for miss in ["", "/home/u/.claude/projects/-p0/s7.json", "/other"] {
            assert_eq!(map.find(miss.as_bytes(), at), None, "{miss}");
        }
        let empty = PathMap::new(std::iter::empty());
        assert_eq!(empty.find(b"/a", |_| b"".as_slice()), None);
    }
}
