//! The survey: what the agents' stores looked like when the index last
//! had read every one of them whole, kept in a small file beside the
//! database (`survey.bin`), so that a `cairn index` with nothing new
//! compares the walk of the agents' folders with it and never opens the
//! database.
//!
//! It holds no list of stores: per source, the number of stores that were
//! on disk and read whole and a [`Tally`] of them, the sum of a keyed
//! 128-bit SipHash of each one's path, size and mtime. A walk tallies what
//! it finds the same way, a source at a time, and the pass has nothing to
//! do when every source's tally is the survey's. Loading it is one small
//! read, and comparing costs a hash per store found, where a list of paths
//! had to be read, checked and put in a table first (a millisecond and a
//! half of a no-op pass at 3,000 stores). A store that is new, grown,
//! touched, gone, or was not read whole (its last read failed) moves its
//! source's sum; two different sets of stores tally alike only by a
//! collision of the sums, with odds of about one in 2^128.
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

use std::hash::Hasher;
use std::io::Write;
use std::path::Path;

use siphasher::sip128::{Hasher128, SipHasher13};

/// The survey's file name in the node's home.
pub const FILE: &str = "survey.bin";

const MAGIC: &[u8; 8] = b"cairnsv2";

/// Bytes before the source count: the magic, the configuration key, the
/// two file identities (a presence byte and five u64 each) and the reading.
const HEADER_LEN: usize = 8 + 32 + 2 * (1 + 5 * 8) + 2 * 8;

/// How much older than the clock reading the database files must be on a
/// file system whose timestamps may be coarse or set by another machine.
const SLOW_CLOCK_MARGIN_NS: i64 = 2_000_000_000;

/// Bytes of a source's entry after its name: the count and the sum.
const TALLY_LEN: usize = 8 + 16;

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
    /// The agent whose source found it.
    pub agent: &'a str,
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

/// Stores tallied: how many, and the sum of their hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    count: u64,
    sum: u128,
}

/// The SipHash keys of a survey's tallies, taken from its configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys(u64, u64);

impl Keys {
    /// The keys of a survey made with the configuration key `key`.
    pub fn of(key: &[u8; 32]) -> Keys {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&key[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Keys(word(0), word(8))
    }
}

impl Tally {
    /// Adds the store at `path` with `size` and `mtime_ns`.
    pub fn add(&mut self, keys: Keys, path: &[u8], size: u64, mtime_ns: i64) {
        let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
        // The length first, so that no two (path, size, mtime) hash the
        // same bytes.
        h.write(&(path.len() as u64).to_le_bytes());
        h.write(path);
        h.write(&size.to_le_bytes());
        h.write(&mtime_ns.to_le_bytes());
        self.count += 1;
        self.sum = self.sum.wrapping_add(u128::from(h.finish128()));
    }
}

/// A loaded survey that was found trustworthy for the database as it is now.
pub struct Survey {
    keys: Keys,
    /// Per source with stores on disk that were read whole, its agent id
    /// and their tally.
    sources: Vec<(String, Tally)>,
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
    let keys = Keys::of(key);
    let mut sources: Vec<(&str, Tally)> = Vec::new();
    for k in known {
        if k.missing {
            continue;
        }
        let at = match sources.iter().position(|(a, _)| *a == k.agent) {
            Some(at) => at,
            None => {
                sources.push((k.agent, Tally::default()));
                sources.len() - 1
            }
        };
        if k.failed {
            // Never matched by a walk, which finds the store and tallies
            // it: the next pass reads it again.
            sources[at].1.count += 1;
        } else {
            sources[at]
                .1
                .add(keys, k.path.as_bytes(), k.size, k.mtime_ns);
        }
    }
    let mut out = Vec::with_capacity(HEADER_LEN + 8 + sources.len() * 64 + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(key);
    put_files(&mut out, &files);
    out.extend_from_slice(&reading.now_ns.to_le_bytes());
    out.extend_from_slice(&reading.margin_ns.to_le_bytes());
    // Agent ids are short; a longer one is left out, so its stores never
    // match and always take the ordinary pass.
    sources.retain(|(agent, _)| agent.len() <= usize::from(u8::MAX));
    out.extend_from_slice(&(sources.len() as u64).to_le_bytes());
    for (agent, tally) in &sources {
        out.push(agent.len() as u8);
        out.extend_from_slice(agent.as_bytes());
        out.extend_from_slice(&tally.count.to_le_bytes());
        out.extend_from_slice(&tally.sum.to_le_bytes());
    }
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
        let mut sources = Vec::with_capacity(count.min(256));
        for _ in 0..count {
            let len = usize::from(c.u8()?);
            let agent = std::str::from_utf8(c.take(len)?).ok()?.to_owned();
            let tally = c.take(TALLY_LEN)?;
            let (n, sum) = tally.split_at(8);
            sources.push((
                agent,
                Tally {
                    count: u64::from_le_bytes(n.try_into().ok()?),
                    sum: u128::from_le_bytes(sum.try_into().ok()?),
                },
            ));
        }
        if !c.0.is_empty() {
            return None;
        }
        Some(Survey {
            keys: Keys::of(key),
            sources,
        })
    }

    /// The keys a walk tallies its stores with to compare them with this survey.
    pub fn keys(&self) -> Keys {
        self.keys
    }

    /// Whether `tally`, of every store the source of `agent` found on disk
    /// (each with its size and mtime), is the survey's for that source: the
    /// same stores, each read whole at that size and mtime.
    pub fn same(&self, agent: &str, tally: Tally) -> bool {
        self.sources.iter().any(|(a, t)| a == agent && *t == tally)
    }

    /// How many sources had stores on disk when the survey was taken: a
    /// walk with nothing new finds stores for exactly these.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn known(
        agent: &'static str,
        path: &'static str,
        size: u64,
        failed: bool,
        missing: bool,
    ) -> Known<'static> {
        Known {
            agent,
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
            known("claude-code", "/a/one.jsonl", 10, false, false),
            known("codex", "/b/x.jsonl", 5, false, false),
            known("claude-code", "/a/three.jsonl", 30, false, false),
            known("claude-code", "/a/gone.jsonl", 40, false, true),
            known("gemini", "/c/failed.json", 50, true, false),
            known("aider", "/d/gone.md", 60, false, true),
        ]
    }

    /// Saves a survey of [`rows`] for `db` with `key`; returns its path.
    fn saved(dir: &Path, db: &Path, later: Reading, key: &[u8; 32]) -> std::path::PathBuf {
        save(dir, key, later, DbFiles::of(db), rows())
            .expect("save")
            .expect("saved");
        dir.join(FILE)
    }

    /// The tally of stores found on disk, as a walk makes it.
    fn found(s: &Survey, stores: &[(&str, u64, i64)]) -> Tally {
        let mut t = Tally::default();
        for (path, size, mtime) in stores {
            t.add(s.keys(), path.as_bytes(), *size, *mtime);
        }
        t
    }

    #[test]
    fn a_saved_survey_matches_a_source_only_when_it_finds_the_same_stores() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        let saved = save(dir.path(), &key, later, DbFiles::of(&db), rows()).expect("save");
        assert_eq!(saved, Ok(()));
        let s = Survey::load(dir.path(), &key, &db).expect("trusted");
        let claude = [("/a/one.jsonl", 10, 7), ("/a/three.jsonl", 30, 7)];
        // In any order: the walk's order is not the database's.
        assert!(s.same("claude-code", found(&s, &claude)));
        assert!(s.same("claude-code", found(&s, &[claude[1], claude[0]])));
        assert!(s.same("codex", found(&s, &[("/b/x.jsonl", 5, 7)])));
        // Another source's stores are not this one's.
        assert!(!s.same("codex", found(&s, &claude)));
        for (stores, why) in [
            (vec![("/a/one.jsonl", 11, 7), claude[1]], "grown"),
            (vec![("/a/one.jsonl", 10, 8), claude[1]], "touched"),
            (vec![claude[0]], "one is gone"),
            (
                vec![claude[0], claude[1], ("/a/new.jsonl", 1, 7)],
                "a new one",
            ),
            (
                vec![claude[0], claude[1], ("/a/gone.jsonl", 40, 7)],
                "the missing one is back",
            ),
            (
                vec![("/a/three.jsonl", 10, 7), ("/a/one.jsonl", 30, 7)],
                "sizes swapped",
            ),
            (vec![claude[0], claude[0]], "one found twice"),
        ] {
            assert!(!s.same("claude-code", found(&s, &stores)), "{why}");
        }
        // The store whose last read failed is found again: read it again.
        assert!(!s.same("gemini", found(&s, &[("/c/failed.json", 50, 7)])));
        // A source whose stores are all gone is not expected on disk.
        assert!(!s.same("aider", Tally::default()));
        assert_eq!(s.sources(), 3);
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
        saved(dir.path(), &db, later, &key);
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
        let path = saved(dir.path(), &db, later, &key);
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

    #[test]
    fn a_survey_of_the_older_format_is_not_used() {
        let (dir, db, later) = setup();
        let key = [1u8; 32];
        let path = saved(dir.path(), &db, later, &key);
        let mut old = std::fs::read(&path).expect("read");
        // The same file with an older cairn's magic and a sum that checks
        // out: the magic alone retires it.
        old[..8].copy_from_slice(b"cairnsv1");
        let body = old.len() - 32;
        let sum = *blake3::hash(&old[..body]).as_bytes();
        old[body..].copy_from_slice(&sum);
        std::fs::write(&path, &old).expect("write");
        assert!(Survey::load(dir.path(), &key, &db).is_none());
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
