//! Copies in memory of the flat files' entries (`store::vector_file` and
//! `store::sketch`), kept by a long-lived reader (the daemon's search
//! socket) so that each search scores vectors where they lie instead of
//! copying the whole file out of the page cache again: at 1 GB of history
//! that copy was a quarter of the CPU the daemon spent on a question.
//!
//! A copy is tied to a [`Key`]: the vector file's token, the vector length,
//! how many entries the database says are blanked, and for the sketch the
//! sketch file's identity. Under one key the file's leading entries never
//! change (entries are only appended; a blanked entry moves the blank
//! count; a file written anew gets a new token or a new inode), so a copy
//! that is shorter than what the database now trusts is extended with the
//! entries it lacks, and any other difference drops it and reads the file
//! again. A copy may be longer than a search's snapshot trusts: its leading
//! entries are the same, and the scan reads only as many as it trusts.
//!
//! The sketch is blanked after the commit that moves the blank count, so a
//! copy read in between keeps a blanked entry's old sketch until the next
//! change: that only spends a candidate on an entry whose exact score (a
//! zero vector) no search keeps.

use std::fs::File;
use std::sync::{Arc, Mutex, PoisonError};

use super::flat_file::read_at;

/// What a copy was read for: it stays valid while this is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// The vector file's token.
    pub(crate) token: [u8; 16],
    /// The vector length.
    pub(crate) dim: usize,
    /// Entries the database says are blanked.
    pub(crate) blank: u64,
    /// The copied file's device and inode (the sketch is written anew
    /// under the same token by a rename); `None` for the vector file,
    /// whose token changes whenever it is written anew.
    pub(crate) file: Option<(u64, u64)>,
}

/// One copy: the file's entries from its first, for `key`.
#[derive(Debug)]
struct Copy {
    key: Key,
    bytes: Arc<Vec<u8>>,
}

/// Which flat file a copy is of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Vectors,
    Sketch,
}

/// The copies a store keeps, at most `budget` bytes each.
#[derive(Debug)]
pub(crate) struct Held {
    budget: u64,
    vectors: Mutex<Option<Copy>>,
    sketch: Mutex<Option<Copy>>,
}

impl Held {
    /// Keeps copies of up to `budget` bytes of entries per file.
    pub(crate) fn new(budget: u64) -> Held {
        Held {
            budget,
            vectors: Mutex::new(None),
            sketch: Mutex::new(None),
        }
    }

    /// The first `len` bytes of entries of `file` (starting at byte
    /// `start`) as they are under `key`: the copy, extended with what it
    /// lacks, or read anew. `None` (and no copy kept) when `len` is over
    /// the budget or the file cannot be read: the caller reads the file.
    pub(crate) fn entries(
        &self,
        which: Which,
        key: Key,
        file: &File,
        start: u64,
        len: u64,
    ) -> Option<Arc<Vec<u8>>> {
        let mut slot = self.slot(which);
        if len > self.budget {
            *slot = None;
            return None;
        }
        let have = match slot.take() {
            Some(copy) if copy.key == key => copy.bytes,
            // Another file, or entries blanked since: read it all again.
            _ => Arc::new(Vec::new()),
        };
        let got = extend(have, file, start, len);
        if let Some(bytes) = &got {
            *slot = Some(Copy {
                key,
                bytes: Arc::clone(bytes),
            });
        }
        got
    }

    /// The copy of `which` file, locked.
    fn slot(&self, which: Which) -> std::sync::MutexGuard<'_, Option<Copy>> {
        match which {
            Which::Vectors => &self.vectors,
            Which::Sketch => &self.sketch,
        }
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes held now (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self, which: Which) -> usize {
        self.slot(which).as_ref().map_or(0, |c| c.bytes.len())
    }
}

/// `have` (the leading bytes of the entries) made at least `len` long by
/// reading what it lacks from `file`; `None` when the read fails.
fn extend(mut have: Arc<Vec<u8>>, file: &File, start: u64, len: u64) -> Option<Arc<Vec<u8>>> {
    let len = usize::try_from(len).ok()?;
    let from = have.len();
    if from >= len {
        return Some(have);
    }
    // Usually the only owner (scans end with their search); otherwise the
    // bytes are copied once, and the scan holding the old ones keeps them.
    let bytes = Arc::make_mut(&mut have);
    bytes.resize(len, 0);
    match read_at(file, &mut bytes[from..], start + from as u64) {
        Ok(()) => Some(have),
        Err(e) => {
            tracing::debug!(error = %e, "cannot copy a flat file into memory; reading it per search");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(blank: u64) -> Key {
        Key {
            token: [7; 16],
            dim: 3,
            blank,
            file: None,
        }
    }

    #[test]
    fn a_copy_grows_with_its_file_and_is_read_anew_when_its_key_moves() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        let mut bytes: Vec<u8> = (0u8..100).collect();
        std::fs::write(&path, &bytes).expect("write");
        let file = File::open(&path).expect("open");
        let held = Held::new(64);
        // Entries from byte 10.
        let got = held
            .entries(Which::Vectors, key(0), &file, 10, 20)
            .expect("held");
        assert_eq!(got.as_slice(), &bytes[10..30]);
        assert_eq!(held.len(Which::Vectors), 20);
        // A shorter snapshot is answered from the longer copy.
        let got = held
            .entries(Which::Vectors, key(0), &file, 10, 8)
            .expect("held");
        assert_eq!(&got[..8], &bytes[10..18]);
        // More entries: only those are read (the held ones are not read
        // again, so a change under the same key would not show).
        bytes[12] = 200;
        bytes[35] = 201;
        std::fs::write(&path, &bytes).expect("write");
        let got = held
            .entries(Which::Vectors, key(0), &file, 10, 40)
            .expect("held");
        assert_eq!(got[2], 12, "kept, not read again");
        assert_eq!(got[25], 201, "read");
        assert_eq!(&got[20..], &bytes[30..50]);
        // Another key (an entry blanked): read anew.
        let got = held
            .entries(Which::Vectors, key(1), &file, 10, 40)
            .expect("held");
        assert_eq!(got.as_slice(), &bytes[10..50]);
        // The sketch's copy is apart.
        assert_eq!(held.len(Which::Sketch), 0);
        // Over the budget: nothing held, the caller reads the file.
        assert!(held.entries(Which::Vectors, key(1), &file, 0, 65).is_none());
        assert_eq!(held.len(Which::Vectors), 0);
        // Past the end of the file: no copy.
        assert!(held.entries(Which::Sketch, key(1), &file, 90, 20).is_none());
        assert_eq!(held.len(Which::Sketch), 0);
    }
}
