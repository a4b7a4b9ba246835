//! The flat files' entries as a store's searches read them: mapped
//! read-only (vector file, sketch, cells, columns), each mapping kept
//! while the file it maps is the one the database trusts, so a process
//! that answers many searches maps each file once. The files are written
//! in 2 MiB regions the kernel keeps as huge pages, so a search pays a
//! fault per 2 MiB it touches, not a `pread` per candidate it scores.
//!
//! A mapping is tied to a [`Key`] (the vector file's token, the vector
//! length, the blanked count, for the sketch, cells and columns their
//! file's identity): under one key leading entries never change, so a
//! mapping shorter than what the database trusts is made anew, and any
//! other difference drops it. A scan reads only as many entries as its
//! snapshot trusts. Where a file cannot be mapped the readers fall back
//! to `pread`.

use std::fs::File;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

/// A flat file's entries mapped, from its first. Cheap to clone (the
/// mapping is shared).
#[derive(Debug, Clone)]
pub(crate) struct Entries(Arc<Mapped>);

impl Deref for Entries {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.0.map.get(self.0.start..).unwrap_or_default()
    }
}

/// A flat file mapped read-only, its entries from byte `start`.
///
/// cairn never shortens a flat file below what a reader trusts: it
/// appends entries, overwrites the bytes past the trusted ones, blanks an
/// entry in place, and replaces a file whole by renaming a new one over it
/// (the mapping keeps the old one). So every byte a reader reads stays
/// backed for as long as the mapping lives. A blanked entry changes under
/// a mapping: a search reading it at that moment scores some mix of the
/// old and the zeroed bytes, which is what a read racing the same write
/// through `pread` could see too, and the blank count moves the key, so
/// the next search maps the file anew. Only another program shortening
/// the file would make reading a mapped page fault (`SIGBUS`); the files
/// are private to their user (0600), as the database is.
#[derive(Debug)]
pub(crate) struct Mapped {
    map: memmap2::Mmap,
    start: usize,
}

/// What a mapping was made for: it stays valid while this is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// The vector file's token (for the sketch, with its mean's name folded in).
    pub(crate) token: [u8; 16],
    /// The vector length.
    pub(crate) dim: usize,
    /// Entries the database says are blanked.
    pub(crate) blank: u64,
    /// The mapped file's device and inode (the sketch is written anew
    /// under the same token by a rename); `None` for the vector file,
    /// whose token changes whenever it is written anew.
    pub(crate) file: Option<(u64, u64)>,
}

/// One mapping: the file's entries from its first, for `key`.
#[derive(Debug)]
struct Kept {
    key: Key,
    bytes: Entries,
}

/// Which flat file a mapping is of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Vectors,
    Sketch,
    /// The sketch's coarse cells (`store::cells`), only ever replaced
    /// whole: a mapping keeps the old file, so its identity cannot be
    /// taken by another while the mapping lives.
    Cells,
    /// The ranker's columns (`store::columns_file`). Each reader checks a
    /// page before it reads it (`store::pages`).
    Columns,
}

/// The mappings a store keeps, one per flat file.
#[derive(Debug, Default)]
pub(crate) struct Mappings {
    vectors: Mutex<Option<Kept>>,
    sketch: Mutex<Option<Kept>>,
    cells: Mutex<Option<Kept>>,
    columns: Mutex<Option<Kept>>,
}

impl Mappings {
    /// The first `len` bytes of entries of `file` (starting at byte
    /// `start`) as they are under `key`: the kept mapping while it has
    /// them, else the file mapped anew. `None` (and nothing kept) when
    /// the file cannot be mapped or is shorter: the caller reads the file.
    pub(crate) fn entries(
        &self,
        which: Which,
        key: Key,
        file: &File,
        start: u64,
        len: u64,
    ) -> Option<Entries> {
        let mut slot = self.slot(which);
        let have = match slot.take() {
            Some(kept) if kept.key == key => Some(kept.bytes),
            // Another file, or entries blanked since: map it again.
            _ => None,
        };
        let got = map(have, file, start, len);
        if let Some(bytes) = &got {
            *slot = Some(Kept {
                key,
                bytes: bytes.clone(),
            });
        }
        got
    }

    /// The mapping of `which` file, locked.
    fn slot(&self, which: Which) -> std::sync::MutexGuard<'_, Option<Kept>> {
        match which {
            Which::Vectors => &self.vectors,
            Which::Sketch => &self.sketch,
            Which::Cells => &self.cells,
            Which::Columns => &self.columns,
        }
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a mapping of `which` file is kept now (for tests).
    #[cfg(test)]
    pub(crate) fn mapped(&self, which: Which) -> bool {
        self.slot(which).is_some()
    }
}

/// The entries of `file` from byte `start`, mapped for a reader that
/// keeps nothing (a store reading with `pread`, see `columns_file`);
/// `None` when the file cannot be mapped or is shorter than `len` bytes
/// of entries.
pub(crate) fn map_once(file: &File, start: u64, len: u64) -> Option<Entries> {
    map(None, file, start, len)
}

/// `have` when it maps at least `len` bytes of entries, else `file`
/// mapped anew; `None` when it cannot be mapped or is shorter than
/// `start + len`.
fn map(have: Option<Entries>, file: &File, start: u64, len: u64) -> Option<Entries> {
    if let Some(m) = have
        && m.len() as u64 >= len
    {
        return Some(m);
    }
    let start = usize::try_from(start).ok()?;
    // SAFETY: the mapping is read-only and cairn never shortens a flat
    // file below what a reader trusts, so every byte read stays backed by
    // the file (see `Mapped` for the blanking that may change bytes under
    // it, and for what another program could do).
    #[allow(unsafe_code)]
    let map = match unsafe { memmap2::Mmap::map(file) } {
        Ok(map) => map,
        Err(e) => {
            tracing::debug!(error = %e, "cannot map a flat file; reading it per search");
            return None;
        }
    };
    // Where the kernel caches the file in 2 MiB pieces (a region written
    // at once, see `flat_file::RegionWriter`), or reads it anew for this
    // mapping, it then maps a piece at a time: fewer page faults and
    // page-table entries. Refused by a kernel without huge pages, to no harm.
    let _ = map.advise(memmap2::Advice::HugePage);
    let m = Entries(Arc::new(Mapped { map, start }));
    (m.len() as u64 >= len).then_some(m)
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

    /// A folder holding the file `f` of the bytes 0 to 99, and `f` open.
    fn file_of_100_bytes() -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        std::fs::write(&path, (0u8..100).collect::<Vec<u8>>()).expect("write");
        let file = File::open(&path).expect("open");
        (dir, file)
    }

    #[test]
    fn a_mapping_is_made_anew_when_its_key_moves_and_never_past_the_file() {
        let (dir, file) = file_of_100_bytes();
        let path = dir.path().join("f");
        let mut bytes: Vec<u8> = (0u8..100).collect();
        let held = Mappings::default();
        // Entries from byte 10.
        let first = held
            .entries(Which::Vectors, key(0), &file, 10, 20)
            .expect("mapped");
        assert_eq!(&first[..20], &bytes[10..30]);
        assert!(held.mapped(Which::Vectors) && !held.mapped(Which::Sketch));
        // Bytes written in place show through the mapping (a blank).
        bytes[12] = 200;
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(first[2], 200);
        // Another key (an entry blanked): mapped anew.
        let again = held
            .entries(Which::Vectors, key(1), &file, 10, 20)
            .expect("mapped");
        assert_ne!(again.as_ptr(), first.as_ptr(), "mapped anew");
        assert_eq!(&again[..], &bytes[10..]);
        // Past the end of the file: no mapping, and none kept.
        assert!(
            held.entries(Which::Vectors, key(1), &file, 10, 91)
                .is_none()
        );
        assert!(!held.mapped(Which::Vectors));
        assert!(held.entries(Which::Sketch, key(1), &file, 90, 20).is_none());
    }

    /// A mapping asks the kernel for huge pages (`hg` among its flags in
    /// `/proc/self/smaps`), where the kernel has them.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_mapping_asks_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("SKIPPED: this kernel has no transparent huge pages");
            return;
        }
        let (_dir, file) = file_of_100_bytes();
        let Some(Entries(m)) = map_once(&file, 4, 96) else {
            panic!("mapped");
        };
        let start = format!("{:x}-", m.map.as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let (_, after) = smaps.split_once(&start).expect("the mapping is listed");
        let flags = after
            .lines()
            .find_map(|l| l.strip_prefix("VmFlags:"))
            .expect("its flags");
        assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
    }

    #[test]
    fn a_mapping_is_kept_while_it_reaches_and_made_anew_when_the_file_outgrows_it() {
        use std::io::Write;
        let (dir, file) = file_of_100_bytes();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0u8..100).collect();
        let held = Mappings::default();
        let first = held
            .entries(Which::Sketch, key(0), &file, 4, 96)
            .expect("mapped");
        assert_eq!(&first[..], &bytes[4..]);
        // Fewer entries trusted: the same mapping answers.
        let again = held
            .entries(Which::Sketch, key(0), &file, 4, 50)
            .expect("mapped");
        assert_eq!(again.as_ptr(), first.as_ptr(), "not mapped again");
        // Entries appended (cairn only ever appends or writes in place):
        // the file is mapped anew to reach them.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(&[1, 2, 3, 4]).expect("append");
        let grown = held
            .entries(Which::Sketch, key(0), &file, 4, 100)
            .expect("mapped");
        assert_eq!(grown.len(), 100);
        assert_eq!(&grown[96..], &[1, 2, 3, 4]);
        // The scan holding the first mapping still reads it.
        assert_eq!(&first[..], &bytes[4..]);
    }
}
