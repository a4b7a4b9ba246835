//! The meaning vectors again, as one flat file beside the database
//! (`<db>-vectors`), so that the meaning tier of a search reads them as
//! plain bytes, a megabyte at a time, instead of a row at a time through
//! SQLite (600 ms for 1.1 million vectors at 10 GB of history).
//!
//! The file is a cache: the `vectors` table stays the truth, and the file
//! is trusted only as far as the database says. Layout:
//!
//! - a 32-byte header: the magic `cairnvf1`, the vector length (u32 LE),
//!   4 reserved bytes, and a random 16-byte token naming this file;
//! - then entries of the record id (i64 LE), one over the vector's length
//!   (f32 LE) and the int8 vector as offset binary (each value plus 128),
//!   ascending by id: what `embed::Scorer::score_offset` takes.
//!
//! `meta.vector_file` holds the token, how many entries are trusted and
//! the highest record id they cover. It is written in the transaction
//! that extends or rebuilds the file, after the file's bytes are on disk,
//! so the database never vouches for bytes that are not there; bytes past
//! the trusted count (a pass that died before its commit) are ignored and
//! overwritten. A trigger deletes the row whenever a vector is deleted or
//! changed, and the next vector pass rebuilds the file under a new token.
//! A reader that finds no row, another token, or a short file scans the
//! table instead; it is never wrong, only slower. Vectors stored after the
//! trusted range are read from the table as well.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

const MAGIC: &[u8; 8] = b"cairnvf1";
/// Bytes before the first entry.
pub(crate) const HEADER_LEN: u64 = 32;
/// The `meta` key that vouches for the file.
const MARK_KEY: &str = "vector_file";
/// Entries read per read call by a scanning thread.
const CHUNK_ENTRIES: usize = 2048;
/// Below this many entries a scan stays on the calling thread.
const PARALLEL_FROM: u64 = 32_768;
/// Threads that scan at most.
const MAX_THREADS: usize = 4;

/// The file of the database at `db`.
pub(crate) fn path_for(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-vectors");
    PathBuf::from(p)
}

/// What the database vouches for: the file with this token, its first
/// `count` entries, which hold every vector up to record id `upto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    token: [u8; 16],
    count: u64,
    upto: i64,
}

impl Mark {
    fn encode(&self) -> String {
        format!(
            "{} {} {}",
            crate::hex::encode(&self.token),
            self.count,
            self.upto
        )
    }

    fn decode(s: &str) -> Option<Mark> {
        let mut parts = s.split(' ');
        let token = data_encoding::HEXLOWER_PERMISSIVE
            .decode(parts.next()?.as_bytes())
            .ok()?
            .try_into()
            .ok()?;
        let count = parts.next()?.parse().ok()?;
        let upto = parts.next()?.parse().ok()?;
        parts
            .next()
            .is_none()
            .then_some(Mark { token, count, upto })
    }
}

fn read_mark(conn: &Connection) -> Result<Option<Mark>, StoreError> {
    let v: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [MARK_KEY], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(v.as_deref().and_then(Mark::decode))
}

fn header(dim: usize, token: &[u8; 16]) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&(dim as u32).to_le_bytes());
    h[16..32].copy_from_slice(token);
    h
}

/// Bytes of one entry for vectors of length `dim`.
fn entry_len(dim: usize) -> u64 {
    12 + dim as u64
}

/// Whether a file of `len` bytes holds the entries `mark` trusts (a count
/// too large to have been written is no exception).
fn holds(len: u64, mark: &Mark, dim: usize) -> bool {
    mark.count
        .checked_mul(entry_len(dim))
        .and_then(|b| b.checked_add(HEADER_LEN))
        .is_some_and(|need| len >= need)
}

/// Opens the file if it is the one `mark` names, for vectors of length
/// `dim` (whatever length its header gives when `None`), and holds at
/// least the trusted entries.
fn open_marked(path: &Path, mark: &Mark, dim: Option<usize>, write: bool) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .ok()?;
    let mut h = [0u8; HEADER_LEN as usize];
    read_at(&file, &mut h, 0).ok()?;
    let len = file.metadata().ok()?.len();
    let dim = dim.unwrap_or(u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as usize);
    (h == header(dim, &mark.token) && holds(len, mark, dim)).then_some(file)
}

/// The highest record id with a row in `vectors` (0 for none).
fn newest(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT COALESCE(max(id), 0) FROM vectors", [], |r| r.get(0))
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Whether the file holds every vector the table has, as far as a read
/// can tell without a write lock (a [`sync`] then has nothing to do).
pub(crate) fn current(conn: &Connection, db: &Path) -> Result<bool, StoreError> {
    let Some(mark) = read_mark(conn)? else {
        return Ok(false);
    };
    Ok(mark.upto >= newest(conn)? && open_marked(&path_for(db), &mark, None, false).is_some())
}

/// Removes the file when the database does not vouch for it (a vector was
/// deleted since it was written), so nothing of a forgotten record stays
/// in it until the next vector pass.
pub(crate) fn remove_untrusted(conn: &Connection, db: &Path) -> Result<(), StoreError> {
    if read_mark(conn)?.is_some() {
        return Ok(());
    }
    let path = path_for(db);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(StoreError::Io { path, source: e })
        }
        _ => Ok(()),
    }
}

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// The file already held every vector.
    Current,
    /// Entries were added to the end of the trusted ones.
    Extended(u64),
    /// The file was written anew with this many entries.
    Rebuilt(u64),
}

/// Brings the file of the database at `db` up to the `vectors` table, in
/// one write transaction on `conn`: extends it with the vectors stored
/// since, or writes it anew when the database no longer vouches for it.
pub(crate) fn sync(conn: &mut Connection, db: &Path, dim: usize) -> Result<Synced, StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let newest = newest(&tx)?;
    let path = path_for(db);
    let io = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let mark = read_mark(&tx)?;
    let open = mark.and_then(|m| open_marked(&path, &m, Some(dim), true).map(|f| (m, f)));
    let (mark, done) = match open {
        Some((m, _)) if m.upto >= newest => return Ok(Synced::Current),
        Some((m, file)) => {
            let start = HEADER_LEN + m.count * entry_len(dim);
            let (added, upto) = fill(&tx, &file, Start::Seek(start), m.upto, dim, &path)?;
            let mark = Mark {
                token: m.token,
                count: m.count + added,
                upto: upto.max(newest),
            };
            (mark, Synced::Extended(added))
        }
        None => {
            let token = new_token(db);
            let tmp = {
                let mut p = path.clone().into_os_string();
                p.push(".tmp");
                PathBuf::from(p)
            };
            let file = crate::home::private_file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io)?;
            let (added, upto) = fill(&tx, &file, Start::Header(&token), 0, dim, &path)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            let mark = Mark {
                token,
                count: added,
                upto: upto.max(newest),
            };
            (mark, Synced::Rebuilt(added))
        }
    };
    tx.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![MARK_KEY, mark.encode()],
    )?;
    tx.commit()?;
    Ok(done)
}

/// Where [`fill`] starts writing.
enum Start<'a> {
    /// At this byte of an existing file.
    Seek(u64),
    /// At the start of a new file, with the header for this token.
    Header(&'a [u8; 16]),
}
/// Writes every vector above record id `after` into `file` from `start`,
/// then syncs the file's data; returns how many entries, and the highest
/// record id written. `path` names the file in errors.
fn fill(
    conn: &Connection,
    file: &File,
    start: Start<'_>,
    after: i64,
    dim: usize,
    path: &Path,
) -> Result<(u64, i64), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut w = BufWriter::with_capacity(1 << 20, file);
    match start {
        Start::Seek(at) => {
            std::io::Seek::seek(&mut w, std::io::SeekFrom::Start(at)).map_err(io)?;
        }
        Start::Header(token) => w.write_all(&header(dim, token)).map_err(io)?,
    }
    let written = write_entries(conn, &mut w, after, dim).map_err(|e| e.at(path))?;
    w.flush().map_err(io)?;
    drop(w);
    file.sync_data().map_err(io)?;
    Ok(written)
}

/// A failure while copying vectors into the file.
enum CopyError {
    Db(rusqlite::Error),
    Io(std::io::Error),
}

impl CopyError {
    fn at(self, path: &Path) -> StoreError {
        match self {
            CopyError::Db(e) => e.into(),
            CopyError::Io(source) => StoreError::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// Writes every vector above record id `after` as an entry; returns how
/// many, and the highest id written. A vector of another length (not one
/// this table makes) is left out.
fn write_entries(
    conn: &Connection,
    w: &mut impl Write,
    after: i64,
    dim: usize,
) -> Result<(u64, i64), CopyError> {
    let mut stmt = conn
        .prepare("SELECT id, v FROM vectors WHERE id > ?1 AND v IS NOT NULL ORDER BY id")
        .map_err(CopyError::Db)?;
    let mut rows = stmt.query([after]).map_err(CopyError::Db)?;
    let (mut n, mut upto) = (0u64, after);
    while let Some(r) = rows.next().map_err(CopyError::Db)? {
        let id: i64 = r.get(0).map_err(CopyError::Db)?;
        let v = r
            .get_ref(1)
            .and_then(|v| v.as_blob().map_err(rusqlite::Error::from))
            .map_err(CopyError::Db)?;
        upto = id;
        if v.len() != dim {
            continue;
        }
        w.write_all(&id.to_le_bytes()).map_err(CopyError::Io)?;
        w.write_all(&crate::embed::inverse_norm(v).to_le_bytes())
            .map_err(CopyError::Io)?;
        w.write_all(&crate::embed::offset_binary(v))
            .map_err(CopyError::Io)?;
        n += 1;
    }
    Ok((n, upto))
}

/// A token no other file of this database has had: the clock, the
/// process and the path, hashed.
fn new_token(db: &Path) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(b"cairn vector file");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(&now.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(db.as_os_str().as_encoded_bytes());
    let mut t = [0u8; 16];
    t.copy_from_slice(&h.finalize().as_bytes()[..16]);
    t
}

/// The trusted part of the file, open for a scan.
#[derive(Debug)]
pub(crate) struct Scan {
    file: File,
    count: u64,
    dim: usize,
    /// Vectors of records above this id are not in the file.
    pub(crate) upto: i64,
}

/// The file of the database at `db` as the database on `conn` vouches for
/// it, or `None` (no file, another token, too short: scan the table).
pub(crate) fn open(conn: &Connection, db: &Path, dim: usize) -> Result<Option<Scan>, StoreError> {
    let Some(mark) = read_mark(conn)? else {
        return Ok(None);
    };
    Ok(
        open_marked(&path_for(db), &mark, Some(dim), false).map(|file| Scan {
            file,
            count: mark.count,
            dim,
            upto: mark.upto,
        }),
    )
}

impl Scan {
    /// Calls `step(state, id, inverse norm, offset-binary vector)` for every trusted entry, the
    /// entries split in id order between up to [`MAX_THREADS`] threads,
    /// each with its own state from `init`; returns the states. A read
    /// error ends the scan with it.
    pub(crate) fn fold<T: Send>(
        &self,
        init: impl Fn() -> T + Sync,
        step: impl Fn(&mut T, i64, f32, &[u8]) + Sync,
    ) -> std::io::Result<Vec<T>> {
        let threads = if self.count < PARALLEL_FROM {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(1, usize::from)
                .clamp(1, MAX_THREADS)
        };
        self.fold_with(threads, init, step)
    }

    /// [`Scan::fold`] with `threads` threads.
    fn fold_with<T: Send>(
        &self,
        threads: usize,
        init: impl Fn() -> T + Sync,
        step: impl Fn(&mut T, i64, f32, &[u8]) + Sync,
    ) -> std::io::Result<Vec<T>> {
        let threads = threads.max(1);
        let per = self.count.div_ceil(threads as u64);
        let part = |first: u64| -> std::io::Result<T> {
            let end = (first + per).min(self.count);
            let size = entry_len(self.dim) as usize;
            let mut buf = vec![0u8; CHUNK_ENTRIES * size];
            let mut state = init();
            let mut at = first;
            while at < end {
                let n = ((end - at) as usize).min(CHUNK_ENTRIES);
                let bytes = &mut buf[..n * size];
                read_at(&self.file, bytes, HEADER_LEN + at * size as u64)?;
                for e in bytes.chunks_exact(size) {
                    let (id, rest) = e.split_at(8);
                    let (inverse_norm, v) = rest.split_at(4);
                    let id = i64::from_le_bytes(id.try_into().expect("8 bytes"));
                    let inverse_norm =
                        f32::from_le_bytes(inverse_norm.try_into().expect("4 bytes"));
                    step(&mut state, id, inverse_norm, v);
                }
                at += n as u64;
            }
            Ok(state)
        };
        if threads == 1 {
            return part(0).map(|s| vec![s]);
        }
        std::thread::scope(|s| {
            let part = &part;
            let spawned: Vec<_> = (1..threads as u64)
                .map(|i| {
                    let first = i * per;
                    (
                        first,
                        std::thread::Builder::new().spawn_scoped(s, move || part(first)),
                    )
                })
                .collect();
            let mut out = vec![part(0)?];
            for (first, handle) in spawned {
                out.push(match handle {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
                    // No thread to be had: this one reads that part too.
                    Err(_) => part(first)?,
                });
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, Role};
    use crate::store::Store;

    /// A store holding `n` user records with vectors (of the tiny table).
    fn store_with(dir: &Path, n: usize) -> Store {
        let mut store = Store::open(&dir.join("c.db")).expect("open");
        add(&mut store, 0, n);
        store
    }

    /// Stores records `from..to` and embeds them.
    fn add(store: &mut Store, from: usize, to: usize) {
        let words = ["slow", "terminal", "shell", "rounding", "sluggish"];
        let records = (from..to).map(|i| {
            let text = format!("{} {} {i}", words[i % 5], words[i / 5 % 5]);
            Record::new("claude-code", "s1", Role::User, &text)
        });
        crate::store::vectors::tests::store_embedded(store, records);
    }

    /// The table's (id, vector) pairs.
    fn table(store: &Store) -> Vec<(i64, Vec<u8>)> {
        let mut stmt = store
            .conn
            .prepare("SELECT id, v FROM vectors WHERE v IS NOT NULL ORDER BY id")
            .expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    /// What a scan of the file reads, with `threads` threads, in order.
    fn scanned(store: &Store, threads: usize) -> Option<Vec<(i64, Vec<u8>)>> {
        let scan = store.vector_scan(3).expect("open")?;
        let parts = scan
            .fold_with(
                threads,
                Vec::new,
                |out: &mut Vec<(i64, Vec<u8>)>, id, inv, v| {
                    let v = crate::embed::offset_binary(v);
                    assert_eq!(inv, crate::embed::inverse_norm(&v));
                    out.push((id, v))
                },
            )
            .expect("scan");
        Some(parts.into_iter().flatten().collect())
    }

    #[test]
    fn the_file_is_written_extended_and_rebuilt_after_a_delete() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 50);
        // Nothing vouched for yet: a search reads the table.
        assert!(!store.vector_file_current().expect("current"));
        assert!(scanned(&store, 1).is_none());
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(50)
        );
        assert!(store.vector_file_current().expect("current"));
        assert_eq!(scanned(&store, 1), Some(table(&store)));
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Current);
        // New vectors are appended; the old entries stay where they were.
        add(&mut store, 50, 80);
        assert!(!store.vector_file_current().expect("current"));
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(30)
        );
        assert_eq!(store.vector_scan(3).expect("open").expect("file").upto, 80);
        // Split between threads, the entries still come in id order.
        for threads in [1, 2, 3, 7] {
            assert_eq!(scanned(&store, threads), Some(table(&store)), "{threads}");
        }
        // A deleted record's vector takes the file's mark back.
        store
            .conn
            .execute("DELETE FROM records WHERE id = 7", [])
            .expect("delete");
        assert!(scanned(&store, 1).is_none());
        assert!(!store.vector_file_current().expect("current"));
        // A forget's scrub removes the file, vectors of what it forgot and all.
        assert!(store.scrub().expect("scrub"));
        assert!(!path_for(store.path()).exists());
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(79)
        );
        store.scrub().expect("scrub");
        assert!(path_for(store.path()).exists(), "a trusted file stays");
        assert_eq!(scanned(&store, 2), Some(table(&store)));
        // Another vector length (another table) is not this file.
        assert!(store.vector_scan(4).expect("open").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path_for(store.path()))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, crate::home::FILE_MODE);
        }
    }

    #[test]
    fn bytes_the_database_does_not_vouch_for_are_ignored_then_overwritten() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 20);
        store.sync_vector_file(3).expect("sync");
        let path = path_for(store.path());
        // A pass that died after writing entries and before its commit.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(&[0xAB; 37]).expect("write");
        drop(f);
        assert_eq!(scanned(&store, 1), Some(table(&store)));
        add(&mut store, 20, 25);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(5)
        );
        assert_eq!(scanned(&store, 1), Some(table(&store)));
        // A file cut short, or with another token: not trusted, and the
        // next sync writes it anew.
        let len = std::fs::metadata(&path).expect("stat").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(len - 1).expect("truncate");
        drop(f);
        assert!(scanned(&store, 1).is_none());
        assert!(!store.vector_file_current().expect("current"));
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(25)
        );
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(scanned(&store, 1).is_none());
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(25)
        );
        assert_eq!(scanned(&store, 1), Some(table(&store)));
        // A damaged mark: a count no file could hold.
        let good: String = store
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'vector_file'",
                [],
                |r| r.get(0),
            )
            .expect("mark");
        let token = good.split(' ').next().expect("token").to_string();
        for count in [u64::MAX, u64::MAX / 200, 26] {
            store
                .conn
                .execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'vector_file'",
                    [format!("{token} {count} 25")],
                )
                .expect("damage");
            assert!(scanned(&store, 1).is_none(), "{count}");
            assert!(!store.vector_file_current().expect("current"), "{count}");
        }
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(25)
        );
        // A missing file.
        std::fs::remove_file(&path).expect("rm");
        assert!(scanned(&store, 1).is_none());
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(25)
        );
    }

    #[test]
    fn a_mark_reads_back_and_anything_else_is_no_mark() {
        let m = Mark {
            token: [7; 16],
            count: 12,
            upto: 99,
        };
        assert_eq!(Mark::decode(&m.encode()), Some(m));
        for bad in [
            "",
            "zz 1 2",
            "0707 1 2",
            &format!("{} 1", crate::hex::encode(&[7; 16])),
            &(m.encode() + " 4"),
        ] {
            assert_eq!(Mark::decode(bad), None, "{bad}");
        }
    }
}
