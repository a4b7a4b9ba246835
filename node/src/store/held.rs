//! How a store's searches reach the flat files' entries (vector file,
//! sketch, cells): mapped, by default, so a search scores the candidates
//! it picks where they lie (the files are written in 2 MiB regions the
//! kernel keeps as huge pages, so a mapping costs a fault per 2 MiB, not
//! a `pread` per candidate), or copied into memory by a long-lived reader
//! (the daemon's search socket) up to a budget per file.
//!
//! A copy is tied to a [`Key`] (the vector file's token, the vector
//! length, the blanked count, for the sketch its file's identity): under
//! one key leading entries never change, so a copy shorter than what the
//! database trusts is extended, and any other difference drops it. A scan
//! reads only as many entries as its snapshot trusts. A file over the
//! budget is mapped instead (see [`Mapped`]); the columns file is always
//! mapped, under its token and file identity (its zeroed entries show at
//! once, as through `pread`).

use std::fs::File;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

use super::flat_file::read_at;

/// A flat file's entries in memory, from its first: a copy, or the file
/// mapped. Cheap to clone (both are shared).
#[derive(Debug, Clone)]
pub(crate) enum Entries {
    Copied(Arc<Vec<u8>>),
    Mapped(Arc<Mapped>),
}

impl Deref for Entries {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Entries::Copied(bytes) => bytes,
            Entries::Mapped(m) => m.map.get(m.start..).unwrap_or_default(),
        }
    }
}

/// A flat file mapped read-only, its entries from byte `start`.
///
/// cairn never shortens a flat file: it appends entries, overwrites the
/// bytes past the trusted ones, blanks an entry in place, and replaces a
/// file whole by renaming a new one over it (the mapping keeps the old
/// one). So every byte mapped stays readable for as long as the mapping
/// lives. A blanked entry changes under a mapping: a search reading it at
/// that moment scores some mix of the old and the zeroed bytes, which is
/// what a read racing the same write through `pread` could see too, and
/// the blank count moves the key, so the next search maps the file anew.
/// Only another program shortening the file would make reading a mapped
/// page fault (`SIGBUS`); the files are private to their user (0600), as
/// the database is.
#[derive(Debug)]
pub(crate) struct Mapped {
    map: memmap2::Mmap,
    start: usize,
}

/// What a copy was read for: it stays valid while this is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// The vector file's token (for the sketch, with its mean's name folded in).
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

/// One copy or mapping: the file's entries from its first, for `key`.
#[derive(Debug)]
struct Copy {
    key: Key,
    bytes: Entries,
}

/// Which flat file a copy is of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Vectors,
    Sketch,
    /// The sketch's coarse cells (`store::cells`): always mapped, never
    /// copied, since a question reads a quarter of them (a copy would
    /// only duplicate the page cache). The file is only ever replaced whole, and a mapping
    /// keeps the old file, so its identity cannot be taken by another
    /// while the mapping lives.
    Cells,
    /// The ranker's columns (`store::columns_file`): always mapped, as the
    /// cells are: a question reads entries scattered over the file. Each
    /// reader checks a page before it reads it (`store::pages`).
    Columns,
}

impl Which {
    /// Whether an append rewrites the file's last 4 KiB page in place
    /// (the sketch's counted pages, `store::pages`): a copy extended then
    /// reads that page again.
    fn rewrites_last_page(self) -> bool {
        matches!(self, Which::Sketch)
    }

    /// Whether this file is mapped whatever its size: read a little here
    /// and there by each question, never scanned whole.
    fn mapped_always(self) -> bool {
        matches!(self, Which::Cells | Which::Columns)
    }
}

/// The copies a store keeps, at most `budget` bytes each; larger files
/// are mapped.
#[derive(Debug)]
pub(crate) struct Held {
    budget: u64,
    vectors: Mutex<Option<Copy>>,
    sketch: Mutex<Option<Copy>>,
    cells: Mutex<Option<Copy>>,
    columns: Mutex<Option<Copy>>,
}

impl Held {
    /// Keeps copies of up to `budget` bytes of entries per file.
    pub(crate) fn new(budget: u64) -> Held {
        Held {
            budget,
            vectors: Mutex::new(None),
            sketch: Mutex::new(None),
            cells: Mutex::new(None),
            columns: Mutex::new(None),
        }
    }

    /// The first `len` bytes of entries of `file` (starting at byte
    /// `start`) as they are under `key`: the copy, extended with what it
    /// lacks, or read anew; over the budget, the file mapped (kept while
    /// it reaches `len`). `None` (and nothing kept) when the file cannot
    /// be read or mapped, or is shorter: the caller reads the file.
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
            Some(copy) if copy.key == key => Some(copy.bytes),
            // Another file, or entries blanked since: read it all again.
            _ => None,
        };
        let got = if len > self.budget || which.mapped_always() {
            map(have, file, start, len)
        } else {
            extend(have, file, start, len, which.rewrites_last_page())
        };
        if let Some(bytes) = &got {
            *slot = Some(Copy {
                key,
                bytes: bytes.clone(),
            });
        }
        got
    }

    /// The copy of `which` file, locked.
    fn slot(&self, which: Which) -> std::sync::MutexGuard<'_, Option<Copy>> {
        match which {
            Which::Vectors => &self.vectors,
            Which::Sketch => &self.sketch,
            Which::Cells => &self.cells,
            Which::Columns => &self.columns,
        }
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes copied now (for tests; a mapping copies none).
    #[cfg(test)]
    pub(crate) fn len(&self, which: Which) -> usize {
        match self.slot(which).as_ref().map(|c| &c.bytes) {
            Some(Entries::Copied(bytes)) => bytes.len(),
            _ => 0,
        }
    }

    /// Whether `which` file is mapped now (for tests).
    #[cfg(test)]
    pub(crate) fn mapped(&self, which: Which) -> bool {
        matches!(
            self.slot(which).as_ref().map(|c| &c.bytes),
            Some(Entries::Mapped(_))
        )
    }
}

/// `have` (a copy of the leading bytes of the entries, if any) made at
/// least `len` long by reading what it lacks from `file` (and, when `paged`,
/// its last 4 KiB page again); `None` when the read fails.
fn extend(
    have: Option<Entries>,
    file: &File,
    start: u64,
    len: u64,
    paged: bool,
) -> Option<Entries> {
    let mut have = match have {
        Some(Entries::Copied(bytes)) => bytes,
        _ => Arc::new(Vec::new()),
    };
    let len = usize::try_from(len).ok()?;
    let from = have.len();
    if from >= len {
        return Some(Entries::Copied(have));
    }
    let from = match paged {
        true => from - from % super::pages::PAGE,
        false => from,
    };
    // Usually the only owner (scans end with their search); otherwise the
    // bytes are copied once, and the scan holding the old ones keeps them.
    let bytes = Arc::make_mut(&mut have);
    bytes.resize(len, 0);
    match read_at(file, &mut bytes[from..], start + from as u64) {
        Ok(()) => Some(Entries::Copied(have)),
        Err(e) => {
            tracing::debug!(error = %e, "cannot copy a flat file into memory; reading it per search");
            None
        }
    }
}

/// The entries of `file` from byte `start`, mapped for a reader that
/// keeps nothing (a fresh search's, see `columns_file`); `None` when the
/// file cannot be mapped or is shorter than `len` bytes of entries.
pub(crate) fn map_once(file: &File, start: u64, len: u64) -> Option<Entries> {
    map(None, file, start, len)
}

/// `have` when it maps at least `len` bytes of entries, else `file`
/// mapped anew; `None` when it cannot be mapped or is shorter than
/// `start + len`.
fn map(have: Option<Entries>, file: &File, start: u64, len: u64) -> Option<Entries> {
    if let Some(m @ Entries::Mapped(_)) = have
        && m.len() as u64 >= len
    {
        return Some(m);
    }
    let start = usize::try_from(start).ok()?;
    // SAFETY: the mapping is read-only and cairn never shortens a flat
    // file, so every mapped byte stays backed by the file (see `Mapped`
    // for the blanking that may change bytes under it, and for what
    // another program could do).
    #[allow(unsafe_code)]
    let map = match unsafe { memmap2::Mmap::map(file) } {
        Ok(map) => map,
        Err(e) => {
            tracing::debug!(error = %e, "cannot map a flat file; reading it per search");
            return None;
        }
    };
    // Where the kernel caches the file in 2 MiB pieces (a region written
    // at once, see `columns_file`), or reads it anew for this mapping, it
    // then maps a piece at a time: fewer page faults and page-table
    // entries. Refused by a kernel without huge pages, to no harm.
    let _ = map.advise(memmap2::Advice::HugePage);
    let m = Entries::Mapped(Arc::new(Mapped { map, start }));
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
    fn a_copy_grows_with_its_file_and_is_read_anew_when_its_key_moves() {
        let (dir, file) = file_of_100_bytes();
        let path = dir.path().join("f");
        let mut bytes: Vec<u8> = (0u8..100).collect();
        let held = Held::new(64);
        // Entries from byte 10.
        let got = held
            .entries(Which::Vectors, key(0), &file, 10, 20)
            .expect("held");
        assert_eq!(&got[..], &bytes[10..30]);
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
        assert_eq!(&got[..], &bytes[10..50]);
        // The sketch's copy is apart.
        assert_eq!(held.len(Which::Sketch), 0);
        // Past the end of the file: no copy.
        assert!(held.entries(Which::Sketch, key(1), &file, 90, 20).is_none());
        assert_eq!(held.len(Which::Sketch), 0);
        // Over the budget: the file is mapped, nothing copied.
        let got = held
            .entries(Which::Vectors, key(1), &file, 10, 65)
            .expect("mapped");
        assert!(held.mapped(Which::Vectors));
        assert_eq!(held.len(Which::Vectors), 0);
        assert_eq!(&got[..], &bytes[10..], "the file from byte 10 on");
        // Past the end of the file: no mapping either, and none kept.
        assert!(
            held.entries(Which::Vectors, key(1), &file, 10, 91)
                .is_none()
        );
        assert!(!held.mapped(Which::Vectors));
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
        let Some(Entries::Mapped(m)) = map_once(&file, 4, 96) else {
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
    fn a_sketch_copy_extended_reads_its_last_page_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        let page = super::super::pages::PAGE;
        let mut bytes = vec![1u8; 3 * page];
        std::fs::write(&path, &bytes).expect("write");
        let file = File::open(&path).expect("open");
        let held = Held::new(1 << 20);
        for which in [Which::Sketch, Which::Vectors] {
            held.entries(which, key(0), &file, 0, (page + 10) as u64)
                .expect("held");
        }
        // An append rewrites the second page in place and adds a third.
        bytes[page + 5] = 9;
        std::fs::write(&path, &bytes).expect("write");
        let sketch = held
            .entries(Which::Sketch, key(0), &file, 0, (3 * page) as u64)
            .expect("held");
        assert_eq!(sketch[page + 5], 9, "the page rewritten is read again");
        let vectors = held
            .entries(Which::Vectors, key(0), &file, 0, (3 * page) as u64)
            .expect("held");
        assert_eq!(vectors[page + 5], 1, "entries never rewritten: kept");
    }

    #[test]
    fn a_mapping_is_kept_while_it_reaches_and_made_anew_when_the_file_outgrows_it() {
        use std::io::Write;
        let (dir, file) = file_of_100_bytes();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0u8..100).collect();
        let held = Held::new(8);
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
        // A copy within the budget replaces a mapping.
        let small = held
            .entries(Which::Sketch, key(1), &file, 4, 8)
            .expect("copied");
        assert_eq!(&small[..], &bytes[4..12]);
        assert!(!held.mapped(Which::Sketch));
        assert_eq!(held.len(Which::Sketch), 8);
    }
}
