//! The survey (`survey.bin`): what the agents' stores looked like when
//! the index last read every one whole, so that a `cairn index` with
//! nothing new compares the walk with it and never opens the database.
//!
//! Per source: how many stores were on disk, a [`Tally`] (the sum of a
//! keyed 128-bit SipHash of each store's path, size and mtime) and those
//! hashes sorted, which tell a pass which stores differ. It is trusted
//! for the same configuration (a hash of it, this build and the schema)
//! either by its files, without opening the database (the database and
//! its WAL keep the device, inode, size, mtime and ctime it was taken
//! with, and had last changed before a clock reading taken before the
//! stat: the coarse real-time clock on Linux's local file systems, two
//! seconds' margin elsewhere), or, with the database open, by the random
//! generation every write to the `sources` rows renews. Any doubt means
//! the ordinary pass, never a wrong one. Unix only.

use std::hash::Hasher;
use std::io::Write;
use std::path::Path;

use siphasher::sip128::{Hasher128, SipHasher13};

use super::{SourceStamp, Store, StoreError};

/// The survey's file name in the node's home.
pub const FILE: &str = "survey.bin";

const MAGIC: &[u8; 8] = b"cairnsv3";

/// Bytes before the source count: the magic, the configuration key, the
/// two file identities (a presence byte and five u64 each), the reading
/// and the generation of the `sources` rows (a presence byte and an i64).
const HEADER_LEN: usize = 8 + 32 + 2 * (1 + 5 * 8) + 2 * 8 + 1 + 8;

/// How much older than the clock reading the database files must be on a
/// file system whose timestamps may be coarse or set by another machine.
const SLOW_CLOCK_MARGIN_NS: i64 = 2_000_000_000;

/// Bytes of a source's entry after its name and before its hashes: the
/// count of its stores and the count of its hashes.
const COUNTS_LEN: usize = 8 + 8;

/// One file as stat'ed: enough to tell that it was written since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct FileId {
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
struct DbFiles {
    db: FileId,
    /// `None` when there is no log or an empty one.
    wal: Option<FileId>,
}

impl DbFiles {
    /// Stats the database at `db_path` and its `-wal`; `None` when there
    /// is no database (or on a system without a survey).
    fn of(db_path: &Path) -> Option<DbFiles> {
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
struct Reading {
    now_ns: i64,
    margin_ns: i64,
}

impl Reading {
    /// Reads the clock for the files of the folder `dir`. Take it before
    /// the files are stat'ed.
    fn take(dir: &Path) -> Reading {
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
/// of everything a pass depends on (the resolved configuration, whose
/// `Debug` form names all of it), of this build and of its schema.
pub fn config_key(config: &dyn std::fmt::Debug) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(&super::SCHEMA_VERSION.to_le_bytes());
    h.update(format!("{config:?}").as_bytes());
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

/// The hash a survey keeps of the store at `path`, read whole at `size`
/// and `mtime_ns`.
pub fn store_hash(keys: Keys, path: &[u8], size: u64, mtime_ns: i64) -> u128 {
    let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
    // The length first, so that no two (path, size, mtime) hash the same
    // bytes.
    h.write(&(path.len() as u64).to_le_bytes());
    h.write(path);
    h.write(&size.to_le_bytes());
    h.write(&mtime_ns.to_le_bytes());
    u128::from(h.finish128())
}

impl Tally {
    /// Adds the store at `path` with `size` and `mtime_ns`.
    pub fn add(&mut self, keys: Keys, path: &[u8], size: u64, mtime_ns: i64) {
        self.add_hash(store_hash(keys, path, size, mtime_ns));
    }

    /// Adds a store by its [`store_hash`].
    pub fn add_hash(&mut self, hash: u128) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(hash);
    }
}

/// One source as surveyed.
struct Source {
    agent: String,
    /// Its stores on disk (those whose last read failed too) and the sum
    /// of the hashes of those read whole.
    tally: Tally,
    /// The hashes of the stores read whole, sorted.
    stores: Vec<u128>,
}

/// A loaded survey, for this configuration, whole. Whether it describes
/// the database as it is now is told by its files ([`Survey::by_files`]),
/// or, with the database open, by the generation of its `sources` rows
/// ([`Survey::describes_generation`]).
pub struct Survey {
    keys: Keys,
    /// The database files it describes, and where they are.
    files: DbFiles,
    db_path: std::path::PathBuf,
    /// The database files had settled before it was taken, and are still
    /// as it was taken with.
    by_files: bool,
    /// The generation of the `sources` rows it was taken from.
    generation: Option<i64>,
    /// Per source with stores on disk, its agent id, tally and hashes.
    sources: Vec<Source>,
}

/// A source's stores as a survey to be written holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tallied {
    /// The agent id of the source.
    pub agent: String,
    /// Its stores on disk, those whose last read failed included.
    pub count: u64,
    /// The [`store_hash`] of each store read whole, in any order.
    pub hashes: Vec<u128>,
}

/// What a store a pass read was in a survey taken before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Was {
    /// Not among its stores (new, or back after being gone).
    Absent,
    /// Counted, but its last read had failed (no hash).
    Failed,
    /// Read whole, with this hash.
    Read(u128),
}

/// Why a survey was not written (not an error: the next pass just opens
/// the database).
#[derive(Debug, PartialEq, Eq)]
enum NotSaved {
    /// The database files changed too recently to be trusted, and there
    /// is no generation to trust it by.
    Unsettled,
    /// There is no database to describe.
    NoDatabase,
}

/// How a survey that was written will be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// By its database files, before the database is opened (and by its
    /// generation too, when it has one).
    Files,
    /// Only by the generation of the `sources` rows, once the database is
    /// open: the files changed too recently to be trusted.
    Generation,
}

/// The sources of a survey of the `sources` rows `known`.
fn tallied<'a>(keys: Keys, known: impl IntoIterator<Item = Known<'a>>) -> Vec<Tallied> {
    let mut sources: Vec<Tallied> = Vec::new();
    for k in known {
        if k.missing {
            continue;
        }
        // A store whose last read failed is counted with no hash: a walk,
        // which finds the store and hashes it, never matches it, and the
        // next pass reads it again.
        let s = source_of(&mut sources, k.agent);
        s.count += 1;
        if !k.failed {
            s.hashes
                .push(store_hash(keys, k.path.as_bytes(), k.size, k.mtime_ns));
        }
    }
    sources
}

/// The entry of `agent` in `sources`, added empty when it has none.
fn source_of<'s>(sources: &'s mut Vec<Tallied>, agent: &str) -> &'s mut Tallied {
    let at = match sources.iter().position(|s| s.agent == agent) {
        Some(at) => at,
        None => {
            sources.push(Tallied {
                agent: agent.to_owned(),
                count: 0,
                hashes: Vec::new(),
            });
            sources.len() - 1
        }
    };
    &mut sources[at]
}

/// What a survey is taken with, beside its stores: the database files
/// (stat'ed after `reading`) and the generation of the `sources` rows,
/// both inside the transaction that read the rows.
#[derive(Debug, Clone, Copy)]
struct Taken {
    /// The clock reading before the files were stat'ed.
    pub reading: Reading,
    /// The database files; `None` when there is no database.
    pub files: Option<DbFiles>,
    /// The generation of the `sources` rows, when the database has one.
    pub generation: Option<i64>,
}

/// Writes a survey of `known`, the rows read with `taken`. Replaces the
/// file atomically. Returns how it will be trusted, or why nothing was
/// written.
fn save<'a>(
    home: &Path,
    key: &[u8; 32],
    taken: Taken,
    known: impl IntoIterator<Item = Known<'a>>,
) -> std::io::Result<Result<Trust, NotSaved>> {
    save_tallied(home, key, taken, tallied(Keys::of(key), known))
}

/// Writes a survey whose sources are `sources` (see [`save`]).
fn save_tallied(
    home: &Path,
    key: &[u8; 32],
    taken: Taken,
    mut sources: Vec<Tallied>,
) -> std::io::Result<Result<Trust, NotSaved>> {
    let Taken {
        reading,
        files,
        generation,
    } = taken;
    let Some(files) = files else {
        return Ok(Err(NotSaved::NoDatabase));
    };
    let trust = if reading.settled(files.newest_ns()) {
        Trust::Files
    } else if generation.is_some() {
        Trust::Generation
    } else {
        return Ok(Err(NotSaved::Unsettled));
    };
    // Agent ids are short; a longer one is left out, so its stores never
    // match and always take the ordinary pass. So is a source with no
    // stores.
    sources.retain(|s| s.agent.len() <= usize::from(u8::MAX) && s.count > 0);
    let hashes: usize = sources.iter().map(|s| s.hashes.len()).sum();
    let mut out = Vec::with_capacity(HEADER_LEN + 8 + sources.len() * 64 + hashes * 16 + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(key);
    put_files(&mut out, &files);
    out.extend_from_slice(&reading.now_ns.to_le_bytes());
    out.extend_from_slice(&reading.margin_ns.to_le_bytes());
    out.push(u8::from(generation.is_some()));
    out.extend_from_slice(&generation.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&(sources.len() as u64).to_le_bytes());
    for s in &mut sources {
        s.hashes.sort_unstable();
        out.push(s.agent.len() as u8);
        out.extend_from_slice(s.agent.as_bytes());
        out.extend_from_slice(&s.count.to_le_bytes());
        out.extend_from_slice(&(s.hashes.len() as u64).to_le_bytes());
        for h in &s.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
    }
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    let mut tmp = tempfile::NamedTempFile::new_in(home)?;
    tmp.write_all(&out)?;
    tmp.persist(home.join(FILE)).map_err(|e| e.error)?;
    Ok(Ok(trust))
}

/// The survey in `home` a walk may compare with (see [`Survey::load`]):
/// none when a derived file beside the database at `db_path` was written
/// after it (damage, or another program), so that a pass checks them.
pub fn load_current(home: &Path, key: &[u8; 32], db_path: &Path) -> Option<Survey> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let surveyed = mtime(&home.join(FILE));
    let changed = surveyed.is_some_and(|surveyed| {
        super::Component::ALL
            .iter()
            .any(|c| mtime(&c.path(db_path)).is_some_and(|t| t > surveyed))
    });
    if changed {
        return None;
    }
    Survey::load(home, key, db_path)
}

/// The `sources` rows a pass with nothing to read compared the disk with,
/// and the store's [`Store::change_stamp`] from before it read them: while
/// the stamp has not moved they are still the rows.
pub type ComparedRows = ((i64, u64), Vec<SourceStamp>);

impl Store {
    /// Writes the survey of the `sources` rows of the `enabled` agents
    /// into `home` (keyed `key`): `compared` while nothing was committed
    /// since before its rows were read (checked after the database files
    /// are stat'ed), otherwise the rows read again with the files stat'ed
    /// in one read transaction, and nothing when another connection
    /// committed meanwhile. When the files changed too recently to be
    /// trusted, it is written to be trusted by the rows' generation.
    /// Returns whether one that a walk trusts before the database is
    /// opened was written; failing to write the file is only logged.
    pub fn save_survey(
        &self,
        home: &Path,
        key: &[u8; 32],
        enabled: &[&str],
        compared: Option<ComparedRows>,
    ) -> Result<bool, StoreError> {
        let compared = match compared {
            Some((before, stamps)) => {
                let mut taken = self.taken(home, None);
                taken.generation = self.sources_gen()?;
                let current = self.change_stamp().ok() == Some(before);
                current.then_some((stamps, taken))
            }
            None => None,
        };
        let snapshot = match compared {
            Some(s) => Some(s),
            None => {
                self.read_consistent(|s| Ok((s.source_stamps()?, s.taken(home, s.sources_gen()?))))?
            }
        };
        let Some((stamps, taken)) = snapshot else {
            return Ok(false);
        };
        let known = stamps
            .iter()
            .filter(|s| enabled.contains(&s.agent.as_str()))
            .map(|s| Known {
                agent: &s.agent,
                path: &s.path,
                size: s.size,
                mtime_ns: s.mtime_ns,
                failed: s.failed,
                missing: s.missing,
            });
        Ok(written(save(home, key, taken, known)))
    }

    /// Writes the survey whose sources `sources` reads (with the
    /// generation of the `sources` rows they are of) inside one read
    /// transaction with the database files stat'ed; nothing when it
    /// answers `None` or another connection committed meanwhile. Returns
    /// what [`Store::save_survey`] returns.
    pub fn save_survey_of(
        &self,
        home: &Path,
        key: &[u8; 32],
        sources: impl FnOnce(&Store) -> Result<Option<(Vec<Tallied>, Option<i64>)>, StoreError>,
    ) -> Result<bool, StoreError> {
        let snapshot = self.read_consistent(|s| {
            Ok(sources(s)?.map(|(sources, generation)| (sources, s.taken(home, generation))))
        })?;
        let Some((sources, taken)) = snapshot.flatten() else {
            return Ok(false);
        };
        Ok(written(save_tallied(home, key, taken, sources)))
    }

    /// The database files stat'ed after a clock reading for the file
    /// system they are on, with the rows' `generation`.
    fn taken(&self, home: &Path, generation: Option<i64>) -> Taken {
        let reading = Reading::take(self.path().parent().unwrap_or(home));
        Taken {
            reading,
            files: DbFiles::of(self.path()),
            generation,
        }
    }
}

/// Whether a survey was written that a walk trusts before the database is
/// opened; failing to write one is only logged.
fn written(saved: std::io::Result<Result<Trust, NotSaved>>) -> bool {
    match saved {
        Ok(trust) => trust == Ok(Trust::Files),
        Err(e) => {
            tracing::debug!(error = %e, "cannot write the survey");
            false
        }
    }
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
    /// is whole. Whether it still describes the database at `db_path` is
    /// [`Survey::by_files`] (see the module documentation) or
    /// [`Survey::describes_generation`].
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
        let has_generation = c.u8()? == 1;
        let generation = has_generation.then_some(c.u64()? as i64);
        let by_files = reading.settled(files.newest_ns()) && DbFiles::of(db_path) == Some(files);
        // Neither can tell: not worth reading the rest.
        if !by_files && generation.is_none() {
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
            let counts = c.take(COUNTS_LEN)?;
            let (n, h) = counts.split_at(8);
            let stores = u64::from_le_bytes(n.try_into().ok()?);
            let hashed = u64::from_le_bytes(h.try_into().ok()?);
            // A source's hashes are of some of its stores, and they are
            // all in the file.
            if hashed > stores || (hashed as usize).checked_mul(16)? > c.0.len() {
                return None;
            }
            let mut tally = Tally {
                count: stores - hashed,
                sum: 0,
            };
            let mut sorted = Vec::with_capacity(hashed as usize);
            for chunk in c.take(hashed as usize * 16)?.chunks_exact(16) {
                let h = u128::from_le_bytes(chunk.try_into().ok()?);
                tally.add_hash(h);
                sorted.push(h);
            }
            if !sorted.is_sorted() {
                return None;
            }
            sources.push(Source {
                agent,
                tally,
                stores: sorted,
            });
        }
        if !c.0.is_empty() {
            return None;
        }
        Some(Survey {
            keys: Keys::of(key),
            files,
            db_path: db_path.to_path_buf(),
            by_files,
            generation,
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
        self.source(agent).is_some_and(|s| s.tally == tally)
    }

    /// Whether the store with [`store_hash`] `hash` is one of the stores
    /// of the source of `agent` read whole, as the survey has it.
    pub fn holds(&self, agent: &str, hash: u128) -> bool {
        self.source(agent)
            .is_some_and(|s| s.stores.binary_search(&hash).is_ok())
    }

    /// How many stores of the source of `agent` were on disk, those whose
    /// last read failed included.
    pub fn count(&self, agent: &str) -> u64 {
        self.source(agent).map_or(0, |s| s.tally.count)
    }

    /// The agent ids of the sources that had stores on disk.
    pub fn agents(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(|s| s.agent.as_str())
    }

    fn source(&self, agent: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.agent == agent)
    }

    /// How many sources had stores on disk when the survey was taken: a
    /// walk with nothing new finds stores for exactly these.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Whether the database files had settled when the survey was taken
    /// and were still those it was taken with when it was loaded: then it
    /// describes the database without opening it.
    pub fn by_files(&self) -> bool {
        self.by_files
    }

    /// Whether the survey is trusted by its files and they are still those
    /// it was taken with: nothing was committed since it was loaded.
    pub fn still_describes_database(&self) -> bool {
        self.by_files && DbFiles::of(&self.db_path) == Some(self.files)
    }

    /// Whether the survey was taken from `sources` rows at `generation`
    /// (a database's [`crate::store::Store::sources_gen`]): then it
    /// describes that database's rows, whatever else was written since.
    pub fn describes_generation(&self, generation: Option<i64>) -> bool {
        generation.is_some() && generation == self.generation
    }

    /// The sources of a survey of the database after a pass read the
    /// stores of `read` and nothing else changed: each store's agent,
    /// what it was in this survey, and its `sources` row now (`None` when
    /// it has none or is marked gone: then no survey can be made this way).
    pub fn after<'a>(
        &self,
        read: impl IntoIterator<Item = (&'a str, Was, Option<Known<'a>>)>,
    ) -> Option<Vec<Tallied>> {
        let mut sources: Vec<Tallied> = self
            .sources
            .iter()
            .map(|s| Tallied {
                agent: s.agent.clone(),
                count: s.tally.count,
                hashes: s.stores.clone(),
            })
            .collect();
        for (agent, was, now) in read {
            let now = now.filter(|k| !k.missing && k.agent == agent)?;
            let s = source_of(&mut sources, agent);
            match was {
                Was::Absent => s.count += 1,
                Was::Failed => {}
                Was::Read(h) => {
                    let i = s.hashes.iter().position(|&x| x == h)?;
                    s.hashes.swap_remove(i);
                }
            }
            if !now.failed {
                s.hashes.push(store_hash(
                    self.keys,
                    now.path.as_bytes(),
                    now.size,
                    now.mtime_ns,
                ));
            }
        }
        Some(sources)
    }
}

#[cfg(all(test, unix))]
#[path = "survey_tests.rs"]
mod tests;
