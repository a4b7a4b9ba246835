//! The survey: every store the index knows with the size and mtime it was
//! last read at, kept in a small file beside the database (`survey.bin`),
//! so that a `cairn index` with nothing new compares the walk of the
//! agents' folders with it and never opens the database.
//!
//! A survey is written only by a pass that read nothing and wrote nothing,
//! from the `sources` rows read in one transaction, and it is trusted only
//! while the database is provably the one it was taken from:
//!
//! - the same configuration (a hash of the resolved configuration and of
//!   this build's version and schema);
//! - the database file and its write-ahead log have the same device,
//!   inode, size, mtime and ctime (a log that is absent or empty counts as
//!   no log, since it holds no commit). Every commit writes one of them;
//! - those files last changed strictly before a clock reading taken before
//!   they were stat'ed, so any later write stamps them with a newer time.
//!   On Linux the reading is the coarse real-time clock the local file
//!   systems stamp files with, so a write within the same tick is caught;
//!   a file system not known to stamp that way (network, FAT), and other
//!   systems, need the files to be two seconds older than the reading.
//!
//! Any doubt (no file, another version, a torn or damaged file, a changed
//! database, a store that differs) means the ordinary pass, which is never
//! wrong, only slower. Unix only: elsewhere there is never a survey.

use std::io::Write;
use std::path::Path;

use crate::pathmap::PathMap;

/// The survey's file name in the node's home.
pub const FILE: &str = "survey.bin";

const MAGIC: &[u8; 8] = b"cairnsv1";

/// Bytes before the row count: the magic, the configuration key, the two
/// file identities (a presence byte and five u64 each) and the reading.
const HEADER_LEN: usize = 8 + 32 + 2 * (1 + 5 * 8) + 2 * 8;

/// How much older than the clock reading the database files must be on a
/// file system whose timestamps may be coarse or set by another machine.
const SLOW_CLOCK_MARGIN_NS: i64 = 2_000_000_000;

/// A row's state in the survey.
const STATE_OK: u8 = 0;
const STATE_FAILED: u8 = 1;
const STATE_MISSING: u8 = 2;

/// One file as stat'ed: enough to tell that it was written since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl FileId {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        })
    }

    #[cfg(not(unix))]
    fn of(_path: &Path) -> Option<FileId> {
        None
    }

    fn newest_ns(&self) -> i64 {
        self.mtime_ns.max(self.ctime_ns)
    }
}

/// The database file and its write-ahead log as stat'ed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbFiles {
    db: FileId,
    /// `None` when there is no log or an empty one.
    wal: Option<FileId>,
}

impl DbFiles {
    /// Stats the database at `db_path` and its `-wal`; `None` when there
    /// is no database (or on a system without a survey).
    pub fn of(db_path: &Path) -> Option<DbFiles> {
        let db = FileId::of(db_path)?;
        let mut wal_path = db_path.as_os_str().to_owned();
        wal_path.push("-wal");
        let wal = FileId::of(Path::new(&wal_path)).filter(|w| w.size > 0);
        Some(DbFiles { db, wal })
    }

    fn newest_ns(&self) -> i64 {
        self.db
            .newest_ns()
            .max(self.wal.map_or(i64::MIN, |w| w.newest_ns()))
    }
}

/// A clock reading to compare file times with, and how much older than it
/// the files must be (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    now_ns: i64,
    margin_ns: i64,
}

impl Reading {
    /// Reads the clock for the files of the folder `dir`. Take it before
    /// the files are stat'ed.
    pub fn take(dir: &Path) -> Reading {
        #[cfg(target_os = "linux")]
        {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
            let margin_ns = if local_fine_clock(dir) {
                0
            } else {
                SLOW_CLOCK_MARGIN_NS
            };
            Reading {
                now_ns: t.tv_sec * 1_000_000_000 + t.tv_nsec,
                margin_ns,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            let now_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            Reading {
                now_ns,
                margin_ns: SLOW_CLOCK_MARGIN_NS,
            }
        }
    }

    /// Whether files that last changed at `newest_ns` can be trusted not to
    /// change again without their times moving.
    fn settled(&self, newest_ns: i64) -> bool {
        newest_ns < self.now_ns.saturating_sub(self.margin_ns)
    }
}

/// Whether the database at `db_path` last changed before a clock reading
/// taken now (so a survey of it could be written).
#[cfg(test)]
pub(crate) fn settled(home: &Path, db_path: &Path) -> bool {
    let reading = Reading::take(home);
    DbFiles::of(db_path).is_some_and(|f| reading.settled(f.newest_ns()))
}

/// Whether the file system holding `dir` stamps files with this kernel's
/// clock at nanosecond precision: the local ones cairn's home is usually on.
#[cfg(target_os = "linux")]
fn local_fine_clock(dir: &Path) -> bool {
    const FINE: [i64; 8] = [
        0xEF53,      // ext2/3/4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0x794C_7630, // overlayfs
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
        0xCA45_1A4E, // bcachefs
    ];
    // The field's integer type differs between architectures.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(dir).is_ok_and(|s| FINE.contains(&(s.f_type as i64)))
}

/// The configuration a survey belongs to: a hash of a full description
/// of everything a pass depends on (the resolved configuration), of this
/// build and of its database `schema` version.
pub fn config_key(config: &str, schema: u32) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(&schema.to_le_bytes());
    h.update(config.as_bytes());
    *h.finalize().as_bytes()
}

/// One store as the index last read it.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// Its path.
    pub path: &'a str,
    /// Size when last read.
    pub size: u64,
    /// Modification time (ns) when last read.
    pub mtime_ns: i64,
    /// The last pass could not read it.
    pub failed: bool,
    /// It was not on disk at the last pass.
    pub missing: bool,
}

/// A loaded survey that was found trustworthy for the database as it is now.
pub struct Survey {
    paths: Vec<u8>,
    rows: Vec<Row>,
    /// Where each row's path is.
    map: PathMap,
    /// Rows of stores that were on disk.
    present: usize,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    start: u32,
    len: u32,
    size: u64,
    mtime_ns: i64,
    state: u8,
}

/// Why a survey was not written (not an error: the next pass just opens
/// the database).
#[derive(Debug, PartialEq, Eq)]
pub enum NotSaved {
    /// The database files changed too recently to be trusted.
    Unsettled,
    /// There is no database to describe.
    NoDatabase,
}

/// Writes a survey of `known` for the database at `db_path`, taken with
/// `files` (stat'ed after `reading`) inside the transaction that read
/// `known`. Replaces the file atomically. Returns why nothing was written.
pub fn save<'a>(
    home: &Path,
    key: &[u8; 32],
    reading: Reading,
    files: Option<DbFiles>,
    known: impl IntoIterator<Item = Known<'a>>,
) -> std::io::Result<Result<(), NotSaved>> {
    let Some(files) = files else {
        return Ok(Err(NotSaved::NoDatabase));
    };
    if !reading.settled(files.newest_ns()) {
        return Ok(Err(NotSaved::Unsettled));
    }
    let mut paths = Vec::new();
    let mut rows = Vec::new();
    for k in known {
        let start = paths.len();
        paths.extend_from_slice(k.path.as_bytes());
        rows.push(Row {
            start: start as u32,
            len: k.path.len() as u32,
            size: k.size,
            mtime_ns: k.mtime_ns,
            state: if k.missing {
                STATE_MISSING
            } else if k.failed {
                STATE_FAILED
            } else {
                STATE_OK
            },
        });
    }
    if paths.len() > u32::MAX as usize {
        return Ok(Err(NotSaved::NoDatabase));
    }
    let mut out = Vec::with_capacity(paths.len() + rows.len() * 25 + 256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(key);
    put_files(&mut out, &files);
    out.extend_from_slice(&reading.now_ns.to_le_bytes());
    out.extend_from_slice(&reading.margin_ns.to_le_bytes());
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    out.extend_from_slice(&(paths.len() as u64).to_le_bytes());
    for r in &rows {
        out.extend_from_slice(&r.start.to_le_bytes());
        out.extend_from_slice(&r.len.to_le_bytes());
        out.extend_from_slice(&r.size.to_le_bytes());
        out.extend_from_slice(&r.mtime_ns.to_le_bytes());
        out.push(r.state);
    }
    out.extend_from_slice(&paths);
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    let mut tmp = tempfile::NamedTempFile::new_in(home)?;
    tmp.write_all(&out)?;
    tmp.persist(home.join(FILE)).map_err(|e| e.error)?;
    Ok(Ok(()))
}

/// Removes the survey (a pass that found it stale writes it again).
pub fn remove(home: &Path) {
    let _ = std::fs::remove_file(home.join(FILE));
}

fn put_files(out: &mut Vec<u8>, f: &DbFiles) {
    put_id(out, Some(&f.db));
    put_id(out, f.wal.as_ref());
}

fn put_id(out: &mut Vec<u8>, id: Option<&FileId>) {
    out.push(u8::from(id.is_some()));
    let id = id.copied().unwrap_or_default();
    for v in [
        id.dev,
        id.ino,
        id.size,
        id.mtime_ns as u64,
        id.ctime_ns as u64,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Reads little-endian fields off the front of a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    fn id(&mut self) -> Option<Option<FileId>> {
        let present = self.u8()? == 1;
        let id = FileId {
            dev: self.u64()?,
            ino: self.u64()?,
            size: self.u64()?,
            mtime_ns: self.u64()? as i64,
            ctime_ns: self.u64()? as i64,
        };
        Some(present.then_some(id))
    }
}

impl Survey {
    /// The survey in `home`, if there is one for this configuration and it
    /// still describes the database at `db_path` (see the module
    /// documentation); `None` otherwise.
    pub fn load(home: &Path, key: &[u8; 32], db_path: &Path) -> Option<Survey> {
        use std::io::Read;
        // The header first: a survey for another configuration or an older
        // database (the usual way one goes stale) costs one small read.
        let mut file = std::fs::File::open(home.join(FILE)).ok()?;
        let mut bytes = vec![0u8; HEADER_LEN];
        file.read_exact(&mut bytes).ok()?;
        let mut c = Cursor(&bytes);
        if c.take(8)? != MAGIC || c.take(32)? != key {
            return None;
        }
        let files = DbFiles {
            db: c.id()??,
            wal: c.id()?,
        };
        let reading = Reading {
            now_ns: c.u64()? as i64,
            margin_ns: c.u64()? as i64,
        };
        if !reading.settled(files.newest_ns()) || DbFiles::of(db_path) != Some(files) {
            return None;
        }
        file.read_to_end(&mut bytes).ok()?;
        let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
        if blake3::hash(body).as_bytes() != sum {
            return None;
        }
        let mut c = Cursor(body.get(HEADER_LEN..)?);
        let count = usize::try_from(c.u64()?).ok()?;
        let paths_len = usize::try_from(c.u64()?).ok()?;
        if count.checked_mul(25)?.checked_add(paths_len)? != c.0.len() {
            return None;
        }
        let mut rows = Vec::with_capacity(count);
        for _ in 0..count {
            let row = Row {
                start: c.u32()?,
                len: c.u32()?,
                size: c.u64()?,
                mtime_ns: c.u64()? as i64,
                state: c.u8()?,
            };
            if row.start as usize + row.len as usize > paths_len {
                return None;
            }
            rows.push(row);
        }
        let paths = c.take(paths_len)?.to_vec();
        let map = PathMap::new(rows.iter().map(|r| row_path(&paths, r)));
        let present = rows.iter().filter(|r| r.state != STATE_MISSING).count();
        Some(Survey {
            paths,
            rows,
            map,
            present,
        })
    }

    /// Whether the store at `path`, found on disk with `size` and
    /// `mtime_ns`, is one the index read whole at that size and mtime.
    pub fn unchanged(&self, path: &[u8], size: u64, mtime_ns: i64) -> bool {
        self.map
            .find(path, |i| row_path(&self.paths, &self.rows[i]))
            .is_some_and(|i| {
                let r = &self.rows[i];
                r.state == STATE_OK && r.size == size && r.mtime_ns == mtime_ns
            })
    }

    /// How many stores were on disk when the survey was taken: a walk with
    /// nothing new finds exactly these.
    pub fn present(&self) -> usize {
        self.present
    }
}

/// A row's path in the survey's path bytes.
fn row_path<'a>(paths: &'a [u8], r: &Row) -> &'a [u8] {
    &paths[r.start as usize..][..r.len as usize]
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn known(path: &str, size: u64, failed: bool, missing: bool) -> Known<'_> {
        Known {
            path,
            size,
            mtime_ns: 7,
            failed,
            missing,
        }
    }

    /// A database file and a clock reading well after its last change.
    fn setup() -> (tempfile::TempDir, std::path::PathBuf, Reading) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("cairn.db");
        std::fs::write(&db, b"pages").expect("write");
        let later = Reading {
            now_ns: DbFiles::of(&db).expect("stat").newest_ns() + 1,
            margin_ns: 0,
        };
        (dir, db, later)
    }

    fn rows() -> Vec<Known<'static>> {
        vec![
            known("/a/one.jsonl", 10, false, false),
            known("/a/two.jsonl", 20, true, false),
            known("/a/gone.jsonl", 30, false, true),
        ]
    }

    #[test]
    fn a_saved_survey_answers_for_each_store_while_the_database_is_untouched() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        let saved = save(dir.path(), &key, later, DbFiles::of(&db), rows()).expect("save");
        assert_eq!(saved, Ok(()));
        let s = Survey::load(dir.path(), &key, &db).expect("trusted");
        assert!(s.unchanged(b"/a/one.jsonl", 10, 7));
        assert!(!s.unchanged(b"/a/one.jsonl", 11, 7), "grown");
        assert!(!s.unchanged(b"/a/one.jsonl", 10, 8), "touched");
        assert!(!s.unchanged(b"/a/two.jsonl", 20, 7), "its last read failed");
        assert!(!s.unchanged(b"/a/gone.jsonl", 30, 7), "it was missing");
        assert!(!s.unchanged(b"/a/new.jsonl", 1, 7), "never indexed");
        // The missing store is not expected on disk.
        assert_eq!(s.present(), 2);
        // Another configuration does not use it.
        assert!(Survey::load(dir.path(), &[2u8; 32], &db).is_none());
    }

    #[test]
    fn any_write_to_the_database_or_its_log_retires_the_survey() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        let wal = dir.path().join("cairn.db-wal");
        // An empty log holds no commit: the same as none.
        std::fs::write(&wal, b"").expect("wal");
        save(dir.path(), &key, later, DbFiles::of(&db), rows())
            .expect("save")
            .expect("saved");
        assert!(Survey::load(dir.path(), &key, &db).is_some());
        std::fs::remove_file(&wal).expect("rm");
        assert!(Survey::load(dir.path(), &key, &db).is_some());
        // A commit lands in the log.
        std::fs::write(&wal, b"frame").expect("wal");
        assert!(Survey::load(dir.path(), &key, &db).is_none());
        std::fs::remove_file(&wal).expect("rm");
        assert!(Survey::load(dir.path(), &key, &db).is_some());
        // A checkpoint writes the database file itself.
        std::fs::write(&db, b"more pages").expect("write");
        assert!(Survey::load(dir.path(), &key, &db).is_none());
        // A database replaced by another file.
        std::fs::remove_file(&db).expect("rm");
        assert!(Survey::load(dir.path(), &key, &db).is_none());
    }

    #[test]
    fn files_changed_at_or_after_the_clock_reading_are_not_trusted() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        let newest = DbFiles::of(&db).expect("stat").newest_ns();
        // The reading does not come after the last change: a write in the
        // same clock tick would leave the times as they are.
        for reading in [
            Reading {
                now_ns: newest,
                margin_ns: 0,
            },
            Reading {
                now_ns: later.now_ns,
                margin_ns: SLOW_CLOCK_MARGIN_NS,
            },
        ] {
            let saved = save(dir.path(), &key, reading, DbFiles::of(&db), rows()).expect("save");
            assert_eq!(saved, Err(NotSaved::Unsettled));
            assert!(!dir.path().join(FILE).exists());
        }
        let none = save(dir.path(), &key, later, None, rows()).expect("save");
        assert_eq!(none, Err(NotSaved::NoDatabase));
    }

    #[test]
    fn a_torn_or_damaged_survey_is_ignored() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        save(dir.path(), &key, later, DbFiles::of(&db), rows())
            .expect("save")
            .expect("saved");
        let path = dir.path().join(FILE);
        let good = std::fs::read(&path).expect("read");
        for cut in [
            0,
            8,
            40,
            HEADER_LEN,
            HEADER_LEN + 10,
            good.len() / 2,
            good.len() - 1,
        ] {
            std::fs::write(&path, &good[..cut]).expect("write");
            assert!(
                Survey::load(dir.path(), &key, &db).is_none(),
                "cut at {cut}"
            );
        }
        for at in [0, 45, good.len() / 2, good.len() - 40] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).expect("write");
            assert!(Survey::load(dir.path(), &key, &db).is_none(), "byte {at}");
        }
        std::fs::write(&path, &good).expect("write");
        assert!(Survey::load(dir.path(), &key, &db).is_some());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_file_systems_stamped_by_this_kernel_need_no_margin() {
        // procfs is not a place a database lives: the two-second margin.
        assert!(!local_fine_clock(Path::new("/proc")));
        assert_eq!(
            Reading::take(Path::new("/proc")).margin_ns,
            SLOW_CLOCK_MARGIN_NS
        );
        // A tmpfs is stamped by this kernel's clock.
        let shm = Path::new("/dev/shm");
        #[allow(clippy::unnecessary_cast)]
        let tmpfs = rustix::fs::statfs(shm).is_ok_and(|s| s.f_type as i64 == 0x0102_1994);
        if tmpfs {
            assert!(local_fine_clock(shm));
            assert_eq!(Reading::take(shm).margin_ns, 0);
        }
    }
}
