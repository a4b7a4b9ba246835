//! The vector file (`<db>-vectors`): every record's meaning vector as
//! plain bytes, read a megabyte at a time instead of a row at a time.
//!
//! Layout: the [`flat_file`] header (magic `cairnvf2`), then entries
//! ascending by record id: the id (i64 LE), the inverse norm (f32 LE), a
//! CRC-32 of the rest, the int8 vector as offset binary. `meta.vector_file`
//! (token, trusted count, highest id covered, blanked count) is written in
//! the transaction that moves vectors here from the `vectors` table, after
//! the bytes are synced; bytes past it are ignored and overwritten.
//! Deleted records (`vectors_gone`) are blanked in place. A file the
//! database does not vouch for is lost and its vectors computed again
//! ([`sync`]); the sketch follows the file. A filtered scan skips blocks
//! by their first entries' ids, read from the file ([`Scan::block_firsts`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;

use super::derived::{self, Component};
use super::flat_file::{self, RegionWriter, read_at, write_at};
use super::mapped::{self, Mappings, Which};
use super::sketch;
use super::{StoreError, meta_get, meta_set};

const MAGIC: &[u8; 8] = Component::Vectors.spec().magic;
/// Bytes before the first entry.
pub(crate) const HEADER_LEN: u64 = flat_file::HEADER_LEN as u64;
/// Entries read per read call by a scanning thread.
const CHUNK_ENTRIES: usize = 2048;
/// Wanted entries at most this many apart are read with one call, the
/// entries between them too: about a page of bytes costs less to copy
/// than a system call on the benchmark machine.
const JOIN_GAP: u64 = 16;
/// Below this many entries a scan stays on the calling thread.
const PARALLEL_FROM: u64 = 32_768;
/// Entries per block that a scan for some records only skips when none of
/// them can be wanted (see [`Scan::fold_wanted`]): 17 KiB of 256-long
/// vectors, about 300 records of history.
const SKIP_BLOCK: u64 = 64;

/// What the database vouches for: the file with this token, its first
/// `count` entries, which hold every vector up to record id `upto` that
/// the table does not, `blank` of them blanked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    token: [u8; 16],
    count: u64,
    upto: i64,
    blank: u64,
}

impl Mark {
    fn encode(&self) -> String {
        let numbers = [self.count.into(), self.upto.into(), self.blank.into()];
        derived::mark_text(&self.token, &numbers)
    }

    fn decode(s: &str) -> Option<Mark> {
        let (token, [count, upto, blank]) = derived::parse_mark(s)?;
        Some(Mark {
            token,
            count: u64::try_from(count).ok()?,
            upto: i64::try_from(upto).ok()?,
            blank: u64::try_from(blank).ok()?,
        })
    }
}

fn read_mark(conn: &Connection) -> Result<Option<Mark>, StoreError> {
    let v = Component::Vectors.read_mark(conn)?;
    Ok(v.as_deref().and_then(Mark::decode))
}

fn header(dim: usize, token: &[u8; 16]) -> [u8; HEADER_LEN as usize] {
    flat_file::header(MAGIC, dim, token)
}

/// Bytes of one entry for vectors of length `dim`.
fn entry_len(dim: usize) -> u64 {
    16 + dim as u64
}

/// The checksum of an entry: the CRC-32 of its id, inverse norm and
/// vector (all but the checksum's own four bytes, 12 to 16).
fn entry_sum(e: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&e[..12]);
    h.update(&e[16..]);
    h.finalize()
}

/// The entry of record `id`: its inverse norm and offset-binary vector,
/// sealed with its checksum.
fn entry(id: i64, inverse_norm: f32, offset_binary: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(16 + offset_binary.len());
    e.extend_from_slice(&id.to_le_bytes());
    e.extend_from_slice(&inverse_norm.to_le_bytes());
    e.extend_from_slice(&[0; 4]);
    e.extend_from_slice(offset_binary);
    let sum = entry_sum(&e);
    e[12..16].copy_from_slice(&sum.to_le_bytes());
    e
}

/// Whether an entry holds what its writer sealed.
fn intact(e: &[u8]) -> bool {
    e.len() >= 16 && e[12..16] == entry_sum(e).to_le_bytes()
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
/// least the trusted entries; returns it with its vector length.
fn open_marked(path: &Path, mark: &Mark, dim: Option<usize>, write: bool) -> Option<(File, usize)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .ok()?;
    let mut h = [0u8; HEADER_LEN as usize];
    read_at(&file, &mut h, 0).ok()?;
    let len = file.metadata().ok()?.len();
    let dim = dim.unwrap_or(u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as usize);
    (h == header(dim, &mark.token) && holds(len, mark, dim)).then_some((file, dim))
}

/// The highest record id with a row in `vectors` (0 for none).
fn newest(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT COALESCE(max(id), 0) FROM vectors", [], |r| r.get(0))
}

/// Records deleted while the file held their vectors, ascending.
fn gone(conn: &Connection) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM vectors_gone ORDER BY id")?;
    let ids = stmt.query_map([], |r| r.get(0))?;
    ids.collect()
}

/// Whether any deleted record waits for its entry to be blanked.
fn any_gone(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS(SELECT 1 FROM vectors_gone)")?
        .query_row([], |r| r.get(0))
}

/// The trusted entry of record `id`, found by bisection over the ids
/// (entries are in ascending id order): its byte offset.
fn find(file: &File, count: u64, dim: usize, id: i64) -> std::io::Result<Option<u64>> {
    let size = entry_len(dim);
    let (mut lo, mut hi) = (0u64, count);
    let mut at = [0u8; 8];
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let offset = HEADER_LEN + mid * size;
        read_at(file, &mut at, offset)?;
        match i64::from_le_bytes(at).cmp(&id) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(Some(offset)),
        }
    }
    Ok(None)
}

/// Blanks the entries of records `ids` (a zero vector, inverse norm 0)
/// where the trusted part of `file` has them and they are not blank
/// already; returns the positions of those it blanked. The caller syncs
/// the file.
fn blank(file: &File, mark: &Mark, dim: usize, ids: &[i64]) -> std::io::Result<Vec<u64>> {
    let zero = vec![0x80u8; dim];
    let mut inv = [0u8; 4];
    let mut done = Vec::new();
    for &id in ids.iter().filter(|&&id| id <= mark.upto) {
        let Some(at) = find(file, mark.count, dim, id)? else {
            continue;
        };
        read_at(file, &mut inv, at + 8)?;
        if f32::from_le_bytes(inv) != 0.0 {
            write_at(file, &entry(id, 0.0, &zero), at)?;
            done.push((at - HEADER_LEN) / entry_len(dim));
        }
    }
    Ok(done)
}

/// Calls `visit(id, inverse norm, offset-binary vector)` for the entries
/// `from..to` of `file` (vectors of length `dim`), a chunk at a time; the
/// first error, of the read or of `visit`, ends it.
fn read_range(
    file: &File,
    dim: usize,
    (from, to): (u64, u64),
    damaged: Option<&AtomicU64>,
    visit: &mut impl FnMut(i64, f32, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let size = entry_len(dim) as usize;
    let mut buf = vec![0u8; CHUNK_ENTRIES.min(to.saturating_sub(from) as usize) * size];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(CHUNK_ENTRIES);
        let bytes = &mut buf[..n * size];
        read_at(file, bytes, HEADER_LEN + at * size as u64)?;
        each_entry(bytes, size, damaged, visit)?;
        at += n as u64;
    }
    Ok(())
}

/// Brings the sketch (see [`sketch`]) in line with the file after a
/// committed change: blanks the sketches of `blanked` entries, then adds
/// those of new entries. The sketch's cells follow unless `cells` puts
/// them off. A failure names the file it could not write: searches then
/// scan exactly what the sketch lacks, and the caller reports it.
fn follow(
    conn: &Connection,
    db: &Path,
    mark: &Mark,
    dim: usize,
    blanked: &[u64],
    cells: sketch::CellsWhen,
) -> Result<(), StoreError> {
    if let Err(e) = sketch::blank(db, &mark.token, dim, blanked) {
        // No sketch of a blanked entry may stay: the next sync writes
        // the sketch anew.
        sketch::remove(db);
        return Err(e);
    }
    let path = Component::Vectors.path(db);
    let file = File::open(&path).map_err(StoreError::io_at(&path))?;
    sketch::update(
        db,
        &mark.token,
        dim,
        (mark.count, sketch::vouched(conn, &mark.token)?),
        &mut |from, to, each| {
            // Entry for entry, damaged or not: the sketch's entries
            // stand by position, and a damaged entry is never scored.
            read_range(&file, dim, (from, to), None, &mut |_, inverse, v| {
                each(inverse, v)
            })
        },
        &mut |count| sketch::vouch(conn, &mark.token, count),
        cells,
    )
}

/// Whether the file holds every vector and no deleted record's (checked
/// without a write lock or the embedder): a [`sync`] then has nothing to do.
pub(crate) fn current(conn: &Connection, db: &Path) -> Result<bool, StoreError> {
    let Some(mark) = read_mark(conn)? else {
        return Ok(newest(conn)? == 0);
    };
    let vouched = sketch::vouched(conn, &mark.token)?;
    Ok(mark.upto >= newest(conn)?
        && !any_gone(conn)?
        && open_marked(&Component::Vectors.path(db), &mark, None, false)
            .is_some_and(|(_, dim)| sketch::current(db, &mark.token, dim, (mark.count, vouched))))
}

/// What [`sketch::damage`] or [`cells::damage`](super::cells::damage)
/// finds wrong with the sketch (`cells` false) or its cells, made for the
/// file the database vouches for, so that the next sync writes it anew.
/// Damaged cells are removed. A damaged sketch loses its mark and keeps
/// its head: every entry is then sketched again against the mean kept
/// there (the bytes it held before the damage, so its cells still serve
/// and answers are as before), or against a new mean if the head failed.
pub(crate) fn check_follower(
    conn: &Connection,
    db: &Path,
    cells: bool,
) -> Result<Option<String>, StoreError> {
    let Some(mark) = read_mark(conn)? else {
        return Ok(None);
    };
    let Some((_, dim)) = open_marked(&Component::Vectors.path(db), &mark, None, false) else {
        return Ok(None);
    };
    let why = match cells {
        false => sketch::damage(db, &mark.token, dim, sketch::vouched(conn, &mark.token)?),
        true => super::cells::damage(db, &mark.token, dim),
    };
    if why.is_some() {
        match cells {
            false => Component::Sketch.drop_mark(conn)?,
            true => super::cells::remove(db),
        }
    }
    Ok(why)
}

/// How many entries of the file hold a vector (trusted and not blanked).
pub(crate) fn held(conn: &Connection) -> Result<u64, StoreError> {
    Ok(read_mark(conn)?.map_or(0, |m| m.count.saturating_sub(m.blank)))
}

/// The vector of record `id` in the file, as the table keeps it (int8).
#[cfg(test)]
pub(crate) fn lookup(conn: &Connection, db: &Path, id: i64) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(mark) = read_mark(conn)?.filter(|m| id <= m.upto) else {
        return Ok(None);
    };
    let path = Component::Vectors.path(db);
    let Some((file, dim)) = open_marked(&path, &mark, None, false) else {
        return Ok(None);
    };
    let io = StoreError::io_at(&path);
    let Some(at) = find(&file, mark.count, dim, id).map_err(io)? else {
        return Ok(None);
    };
    let mut entry = vec![0u8; entry_len(dim) as usize];
    read_at(&file, &mut entry, at).map_err(io)?;
    if !intact(&entry) {
        tracing::error!(path = %path.display(), record = id, "a damaged entry of the vector file is not read; the next `cairn index` writes the file anew");
        derived::note_damage(&path);
        return Ok(None);
    }
    let inv = f32::from_le_bytes(entry[8..12].try_into().expect("4 bytes"));
    Ok((inv != 0.0).then(|| crate::embed::offset_binary(&entry[16..])))
}

/// Removes a file that is no longer this database's.
fn remove(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Derived {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Gives up a file the database cannot trust: its mark, the notes of
/// deleted records and the table's vectors go, and the vector pass starts
/// again from the first record (so the table only ever holds vectors of
/// records above the file's last). The caller removes the file.
fn lose(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "DELETE FROM meta WHERE key = 'vector_file';
         DELETE FROM vectors_gone;
         DELETE FROM vectors;
         INSERT INTO meta(key, value) VALUES ('vectors_upto', 0)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value;",
    )
}

/// The `meta` key naming the embedding table that made the vectors
/// (`embed::table_id`); none means `embed::LEGACY_ID`.
const TABLE_KEY: &str = "vectors_table";

/// Drops every vector, in the table and the file, when another embedding
/// table than `table` made them: a cosine between vectors of two tables
/// means nothing, so the next vector pass computes them all again with
/// `table` (as for a file the database cannot trust, see [`lose`]). Run
/// when the database is opened, before any search reads a vector; a
/// folder already named for `table` costs one look-up.
pub(crate) fn keep_table(conn: &mut Connection, db: &Path, table: &str) -> Result<(), StoreError> {
    if meta_get(conn, TABLE_KEY)?.as_deref() == Some(table) {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let stored = meta_get(&tx, TABLE_KEY)?;
    let other = stored.as_deref().unwrap_or(crate::embed::LEGACY_ID) != table;
    if other {
        tracing::info!(db = %db.display(), "the meaning vectors were made with another table: computing them again");
        lose(&tx)?;
    }
    meta_set(&tx, TABLE_KEY, table)?;
    tx.commit()?;
    if other {
        remove(&Component::Vectors.path(db))?;
        sketch::remove(db);
    }
    Ok(())
}

/// Blanks now the entries of records deleted since the last pass, so
/// nothing of a forgotten record stays in the file; a file the database
/// does not vouch for is removed (see [`lose`]).
pub(crate) fn scrub(conn: &Connection, db: &Path) -> Result<(), StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let path = Component::Vectors.path(db);
    let io = StoreError::io_at(&path);
    match read_mark(&tx)? {
        None => {
            tx.execute("DELETE FROM vectors_gone", [])?;
            remove(&path)?;
        }
        Some(m) => match open_marked(&path, &m, None, true) {
            None => {
                lose(&tx)?;
                remove(&path)?;
            }
            Some((file, dim)) => {
                let blanked = blank(&file, &m, dim, &gone(&tx)?).map_err(io)?;
                file.sync_data().map_err(io)?;
                let m = Mark {
                    blank: m.blank + blanked.len() as u64,
                    ..m
                };
                write_mark(&tx, &m)?;
                tx.execute("DELETE FROM vectors_gone", [])?;
                tx.commit()?;
                // The forget is done; a sketch that cannot follow is
                // removed (no copy of a blanked entry's sketch stays).
                if let Err(e) = follow(conn, db, &m, dim, &blanked, sketch::CellsWhen::Now) {
                    tracing::warn!(error = %e, "cannot update the vector sketch; it is removed");
                    sketch::remove(db);
                }
                return Ok(());
            }
        },
    }
    tx.commit()?;
    sketch::remove(db);
    Ok(())
}

/// Checks the checksum of every entry the database vouches for; when one
/// fails (or the file's header no longer matches), the file is lost as
/// [`sync`] loses one (its vectors are computed again by the next vector
/// pass) and what was wrong is returned. An older version's file, or
/// none, is no damage: it is written anew all the same.
pub(crate) fn check(conn: &Connection, db: &Path) -> Result<Option<String>, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let Some(mark) = read_mark(&tx)? else {
        return Ok(None);
    };
    let path = Component::Vectors.path(db);
    let why = match open_marked(&path, &mark, None, false) {
        Some((file, dim)) => {
            let bad = AtomicU64::new(0);
            let read = read_range(&file, dim, (0, mark.count), Some(&bad), &mut |_, _, _| {
                Ok(())
            });
            match (read, bad.load(Ordering::Relaxed)) {
                (Err(e), _) => Some(format!("it cannot be read: {e}")),
                (Ok(()), 0) => None,
                (Ok(()), n) => Some(format!(
                    "{n} of its {} entries fail their checksum",
                    mark.count
                )),
            }
        }
        None if !path.is_file() || Component::Vectors.is_former(&path) => None,
        None => Some("its header does not match the database, or it is cut short".into()),
    };
    let Some(why) = why else {
        return Ok(None);
    };
    lose(&tx)?;
    tx.commit()?;
    remove(&path)?;
    sketch::remove(db);
    Ok(Some(why))
}

fn write_mark(conn: &Connection, mark: &Mark) -> rusqlite::Result<()> {
    Component::Vectors.write_mark(conn, &mark.encode())
}

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// The file already held every vector.
    Current,
    /// Entries were added to the end of the trusted ones (and those of
    /// deleted records blanked).
    Extended(u64),
    /// The file was written anew from the table with this many entries.
    Rebuilt(u64),
    /// The file could not be trusted and is gone: the vectors it held must
    /// be computed again (the vector pass starts from the first record).
    Lost,
}

/// Moves the vectors of the `vectors` table into the file of the database
/// at `db`, in one write transaction on `conn`: appends them to the file
/// and blanks the entries of deleted records, or, with no file yet,
/// writes it from the table. The table keeps only what the file does not.
/// The sketch follows the file; its cells too, unless `cells` puts them
/// off until a later sync.
pub(crate) fn sync(
    conn: &mut Connection,
    db: &Path,
    dim: usize,
    cells: sketch::CellsWhen,
) -> Result<Synced, StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let newest = newest(&tx)?;
    let path = Component::Vectors.path(db);
    // A step of a long pass moves whole regions only (see `fill`).
    let step = cells == sketch::CellsWhen::Later;
    let io = StoreError::writing(&path);
    let (mark, done, blanked) = match read_mark(&tx)? {
        Some(m) => {
            let Some((file, _)) = open_marked(&path, &m, Some(dim), true) else {
                lose(&tx)?;
                tx.commit()?;
                remove(&path)?;
                sketch::remove(db);
                return Ok(Synced::Lost);
            };
            if m.upto >= newest && !any_gone(&tx)? {
                tx.commit()?;
                // A sketch missing or behind (a failed update) catches up.
                follow(conn, db, &m, dim, &[], cells)?;
                return Ok(Synced::Current);
            }
            let blanked = blank(&file, &m, dim, &gone(&tx)?).map_err(io)?;
            let start = HEADER_LEN + m.count * entry_len(dim);
            let (added, upto) = fill(
                &tx,
                &file,
                Start::Seek(start),
                (m.count, m.upto),
                (dim, step),
                &path,
            )?;
            let mark = Mark {
                token: m.token,
                count: m.count + added,
                upto: upto.unwrap_or(newest),
                blank: m.blank + blanked.len() as u64,
            };
            (mark, Synced::Extended(added), blanked)
        }
        None => {
            let token = flat_file::new_token(b"cairn vector file", db);
            let (file, tmp) = flat_file::create_beside(&path).map_err(io)?;
            let (added, upto) = fill(
                &tx,
                &file,
                Start::Header(&token),
                (0, 0),
                (dim, step),
                &path,
            )?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            let mark = Mark {
                token,
                count: added,
                upto: upto.unwrap_or(newest),
                blank: 0,
            };
            (mark, Synced::Rebuilt(added), Vec::new())
        }
    };
    write_mark(&tx, &mark)?;
    tx.execute("DELETE FROM vectors WHERE id <= ?1", [mark.upto])?;
    tx.execute("DELETE FROM vectors_gone", [])?;
    tx.commit()?;
    follow(conn, db, &mark, dim, &blanked, cells)?;
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
/// the file's entry `at`, then syncs the file's data; returns how many
/// entries, and the highest record id whose vector the file now holds
/// when some are left in the table (`None`: none is). `path` names the
/// file in errors.
///
/// With `step` (a step of a long pass, more to come), the entries past
/// the last 2 MiB boundary the writing reached are left in the table for
/// the next step, the one cut by the boundary included: each step then
/// fills whole regions with one write (see `flat_file::REGION`), and the
/// next one starts by writing that entry again.
fn fill(
    conn: &Connection,
    file: &File,
    start: Start<'_>,
    (at, after): (u64, i64),
    (dim, step): (usize, bool),
    path: &Path,
) -> Result<(u64, Option<i64>), StoreError> {
    let io = StoreError::writing(path);
    let mut w = match start {
        Start::Seek(at) => RegionWriter::new(file, at),
        Start::Header(token) => {
            // Written at once: a step may write no entry.
            write_at(file, &header(dim, token), 0).map_err(io)?;
            RegionWriter::new(file, HEADER_LEN)
        }
    };
    let mut ids = Vec::new();
    write_entries(conn, &mut w, after, dim, &mut ids).map_err(|e| e.at(path))?;
    let whole = match step {
        true => {
            let first = HEADER_LEN + at * entry_len(dim);
            let before = w.written_to().saturating_sub(first) / entry_len(dim);
            ids.len().min(before as usize)
        }
        false => {
            w.flush().map_err(io)?;
            ids.len()
        }
    };
    // What the writer holds past the boundary is never written.
    drop(w);
    file.sync_data().map_err(io)?;
    let upto = match whole < ids.len() {
        true => Some(whole.checked_sub(1).map_or(after, |i| ids[i])),
        false => None,
    };
    Ok((whole as u64, upto))
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
            CopyError::Io(source) => StoreError::Derived {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// Writes every vector above record id `after` as an entry, the first
/// being the file's entry `at`, adding its id to `ids`. A vector of
/// another length (not one this table makes) is left out.
fn write_entries(
    conn: &Connection,
    w: &mut impl Write,
    after: i64,
    dim: usize,
    ids: &mut Vec<i64>,
) -> Result<(), CopyError> {
    let mut stmt = conn
        .prepare("SELECT id, v FROM vectors WHERE id > ?1 AND v IS NOT NULL ORDER BY id")
        .map_err(CopyError::Db)?;
    let mut rows = stmt.query([after]).map_err(CopyError::Db)?;
    while let Some(r) = rows.next().map_err(CopyError::Db)? {
        let id: i64 = r.get(0).map_err(CopyError::Db)?;
        let v = r
            .get_ref(1)
            .and_then(|v| v.as_blob().map_err(rusqlite::Error::from))
            .map_err(CopyError::Db)?;
        if v.len() != dim {
            continue;
        }
        let e = entry(
            id,
            crate::embed::inverse_norm(v),
            &crate::embed::offset_binary(v),
        );
        w.write_all(&e).map_err(CopyError::Io)?;
        ids.push(id);
    }
    Ok(())
}

/// The trusted part of the file, open for a scan.
#[derive(Debug)]
pub(crate) struct Scan {
    file: File,
    /// The file's path, for errors.
    path: PathBuf,
    /// The entries from the first, at least `count` of them, when the
    /// store maps them (see `store::mapped`): read there
    /// instead of from `file`.
    mapped: Option<mapped::Entries>,
    /// The sketch of the trusted entries, when there is one to use.
    sketch: Option<sketch::Reader>,
    count: u64,
    dim: usize,
    /// Vectors of records above this id are not in the file.
    pub(crate) upto: i64,
    /// Entries read that fail their checksum (never scored); said once,
    /// when the scan ends.
    damaged: AtomicU64,
}

impl Drop for Scan {
    fn drop(&mut self) {
        if self.damaged.load(Ordering::Relaxed) > 0 {
            tracing::error!(path = %self.path.display(), "damaged entries of the vector file were not read; the next `cairn index` writes the file anew");
            derived::note_damage(&self.path);
        }
    }
}

/// The file of the database at `db` as the database on `conn` vouches for
/// it, or `None` (no file, another token, too short: only the table can
/// be read). With `mappings`, the entries (and the sketch's) are read
/// from its mappings, brought up to what the database trusts.
pub(crate) fn open(
    conn: &Connection,
    db: &Path,
    dim: usize,
    mappings: Option<&Mappings>,
) -> Result<Option<Scan>, StoreError> {
    let Some(mark) = read_mark(conn)? else {
        return Ok(None);
    };
    let Some((file, _)) = open_marked(&Component::Vectors.path(db), &mark, Some(dim), false) else {
        return Ok(None);
    };
    let key = mapped::Key {
        token: mark.token,
        dim,
        blank: mark.blank,
        file: None,
    };
    let entries = mappings.and_then(|h| {
        h.entries(
            Which::Vectors,
            key,
            &file,
            HEADER_LEN,
            mark.count * entry_len(dim),
        )
    });
    Ok(Some(Scan {
        file,
        path: Component::Vectors.path(db),
        mapped: entries,
        sketch: sketch::open(
            db,
            key,
            mark.count,
            sketch::vouched(conn, &mark.token)?,
            mappings,
        ),
        count: mark.count,
        dim,
        upto: mark.upto,
        damaged: AtomicU64::new(0),
    }))
}

/// Calls `step` for each entry in `bytes` (whole entries of `size` bytes)
/// until it fails. With `damaged`, an entry that fails its checksum is
/// passed over and counted there.
#[inline(always)]
fn each_entry(
    bytes: &[u8],
    size: usize,
    damaged: Option<&AtomicU64>,
    step: &mut impl FnMut(i64, f32, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for e in bytes.chunks_exact(size) {
        if let Some(d) = damaged
            && !intact(e)
        {
            d.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let (id, rest) = e.split_at(8);
        let (inverse_norm, rest) = rest.split_at(4);
        let v = &rest[4..];
        let id = i64::from_le_bytes(id.try_into().expect("8 bytes"));
        let inverse_norm = f32::from_le_bytes(inverse_norm.try_into().expect("4 bytes"));
        step(id, inverse_norm, v)?;
    }
    Ok(())
}

impl Scan {
    /// Whether the file has a sketch a search goes through.
    #[cfg(test)]
    pub(crate) fn sketched(&self) -> bool {
        self.sketch.is_some()
    }

    /// Whether the entries are read from a mapping.
    #[cfg(test)]
    pub(crate) fn mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Calls `visit` for the entries `from..to`, from the mapping
    /// when there is one, else from the file a chunk at a time.
    fn read_range(
        &self,
        from: u64,
        to: u64,
        visit: &mut impl FnMut(i64, f32, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        match &self.mapped {
            Some(bytes) => {
                let size = entry_len(self.dim) as usize;
                let (from, to) = (from as usize * size, to as usize * size);
                each_entry(&bytes[from..to], size, Some(&self.damaged), visit)
            }
            None => read_range(&self.file, self.dim, (from, to), Some(&self.damaged), visit),
        }
    }

    /// Calls `step(state, id, inverse norm, offset-binary vector)` for the
    /// [`sketch::candidates`] entries whose sketches are nearest to the
    /// unit vector `query`'s, and for every entry the sketch does not
    /// hold, split between threads as [`Scan::fold`] splits the file;
    /// `None` when there is no sketch. With the states comes whether every
    /// entry was visited (the sketch holds no more entries than it hands on).
    pub(crate) fn fold_sketched<T: Send>(
        &self,
        query: &[f32],
        init: impl Fn() -> T + Sync,
        step: impl Fn(&mut T, i64, f32, &[u8]) + Sync,
    ) -> std::io::Result<Option<(Vec<T>, bool)>> {
        let Some(sk) = &self.sketch else {
            return Ok(None);
        };
        let near = sk.nearest(
            &sketch::of_query(query, &sk.mean),
            sketch::candidates(sk.count),
        )?;
        let threads = flat_file::threads();
        let near_per = near.len().div_ceil(threads).max(1);
        let tail_per = (self.count - sk.count).div_ceil(threads as u64);
        let part = |i: usize| -> std::io::Result<T> {
            let mut state = init();
            let mut visit = |id, inverse_norm, v: &[u8]| {
                step(&mut state, id, inverse_norm, v);
                Ok(())
            };
            let from = (i * near_per).min(near.len());
            let to = (from + near_per).min(near.len());
            self.read_positions(&near[from..to], &mut visit)?;
            // Entries added since the sketch was written: all of them.
            let from = (sk.count + i as u64 * tail_per).min(self.count);
            let to = (from + tail_per).min(self.count);
            self.read_range(from, to, &mut visit)?;
            Ok(state)
        };
        let every = near.len() as u64 >= sk.count;
        flat_file::in_parts(threads, part).map(|parts| Some((parts, every)))
    }

    /// Calls `visit` for the entries at `positions` (ascending), reading
    /// nearby ones together with what lies between them.
    fn read_positions(
        &self,
        positions: &[u64],
        visit: &mut impl FnMut(i64, f32, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let size = entry_len(self.dim);
        if let Some(bytes) = &self.mapped {
            let size = size as usize;
            for &p in positions {
                let at = p as usize * size;
                each_entry(&bytes[at..at + size], size, Some(&self.damaged), visit)?;
            }
            return Ok(());
        }
        let mut buf = Vec::new();
        let mut i = 0;
        while i < positions.len() {
            let first = positions[i];
            let mut j = i + 1;
            while j < positions.len()
                && positions[j] - first < CHUNK_ENTRIES as u64
                && positions[j] - positions[j - 1] <= JOIN_GAP
            {
                j += 1;
            }
            let last = positions[j - 1];
            buf.resize(((last - first + 1) * size) as usize, 0);
            read_at(&self.file, &mut buf, HEADER_LEN + first * size)?;
            for &p in &positions[i..j] {
                let at = ((p - first) * size) as usize;
                each_entry(
                    &buf[at..at + size as usize],
                    size as usize,
                    Some(&self.damaged),
                    visit,
                )?;
            }
            i = j;
        }
        Ok(())
    }

    /// The first record id of each block of [`SKIP_BLOCK`] entries, for
    /// [`Scan::fold_wanted`], read from the block's first entry;
    /// `i64::MAX` for a block whose first entry fails its checksum, so
    /// that it is read whatever is wanted (and the block before it too).
    pub(crate) fn block_firsts(&self) -> Result<Vec<i64>, StoreError> {
        let size = entry_len(self.dim) as usize;
        let mut entry = vec![0u8; size];
        (0..self.count.div_ceil(SKIP_BLOCK))
            .map(|b| {
                let at = b * SKIP_BLOCK;
                let e = match &self.mapped {
                    Some(bytes) => &bytes[at as usize * size..][..size],
                    None => {
                        read_at(&self.file, &mut entry, HEADER_LEN + at * size as u64)
                            .map_err(StoreError::io_at(&self.path))?;
                        &entry[..]
                    }
                };
                if !intact(e) {
                    self.damaged.fetch_add(1, Ordering::Relaxed);
                    return Ok(i64::MAX);
                }
                Ok(i64::from_le_bytes(e[..8].try_into().expect("8 bytes")))
            })
            .collect()
    }

    /// [`Scan::fold`] over only the blocks of [`SKIP_BLOCK`] entries that
    /// may hold a wanted record: ids ascend through the file, so a block
    /// holds ids from its first entry's (`firsts`, from
    /// [`Scan::block_firsts`]) up to the next block's first entry's, and
    /// `wanted(first, last)` says whether any id in that range is wanted
    /// (the last block's range ends at [`Scan::upto`]).
    pub(crate) fn fold_wanted<T: Send>(
        &self,
        firsts: &[i64],
        wanted: impl Fn(i64, i64) -> bool,
        init: impl Fn() -> T + Sync,
        step: impl Fn(&mut T, i64, f32, &[u8]) + Sync,
    ) -> std::io::Result<Vec<T>> {
        // The entry ranges to read, neighbouring blocks joined.
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (b, &first) in firsts.iter().enumerate() {
            let last = firsts.get(b + 1).map_or(self.upto, |next| next - 1);
            // Ids that do not ascend (a file damaged under its mark) say
            // nothing of the block: it is read.
            if first <= last && !wanted(first, last) {
                continue;
            }
            let from = b as u64 * SKIP_BLOCK;
            let to = (from + SKIP_BLOCK).min(self.count);
            match ranges.last_mut() {
                Some(r) if r.1 == from => r.1 = to,
                _ => ranges.push((from, to)),
            }
        }
        let total: u64 = ranges.iter().map(|r| r.1 - r.0).sum();
        let threads = if total < PARALLEL_FROM {
            1
        } else {
            flat_file::threads()
        };
        // Part `i` reads the entries from `i * per` to `(i + 1) * per` of
        // those wanted, counted through the ranges in order.
        let per = total.div_ceil(threads as u64);
        let part = |i: usize| -> std::io::Result<T> {
            let (start, end) = (i as u64 * per, ((i as u64 + 1) * per).min(total));
            let mut state = init();
            let mut seen = 0;
            for &(from, to) in &ranges {
                let (lo, hi) = (seen, seen + (to - from));
                seen = hi;
                let (a, b) = (lo.max(start), hi.min(end));
                if a < b {
                    self.read_range(from + (a - lo), from + (b - lo), &mut |id, inv, v| {
                        step(&mut state, id, inv, v);
                        Ok(())
                    })?;
                }
            }
            Ok(state)
        };
        flat_file::in_parts(threads, part)
    }

    /// Calls `step(state, id, inverse norm, offset-binary vector)` for every trusted entry, the
    /// entries split in id order between [`flat_file::threads`] threads,
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
            flat_file::threads()
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
        let part = |i: usize| -> std::io::Result<T> {
            let first = (i as u64 * per).min(self.count);
            let end = (first + per).min(self.count);
            let mut state = init();
            self.read_range(first, end, &mut |id, inverse_norm, v| {
                step(&mut state, id, inverse_norm, v);
                Ok(())
            })?;
            Ok(state)
        };
        flat_file::in_parts(threads, part)
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

    /// The mark's text as stored.
    fn mark_text(store: &Store) -> String {
        store
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'vector_file'",
                [],
                |r| r.get(0),
            )
            .expect("mark")
    }

    /// Computes the vectors the table lacks again (after a loss).
    fn embed_again(store: &mut Store) {
        let bytes = crate::embed::tests::tiny();
        let e = crate::embed::Embedder::from_bytes(&bytes).expect("table");
        store.embed_pending(&e).expect("embed");
    }

    /// How many records `vectors_gone` notes.
    fn noted(store: &Store) -> i64 {
        store
            .conn
            .query_row("SELECT count(*) FROM vectors_gone", [], |r| r.get(0))
            .expect("count")
    }

    #[test]
    fn vectors_made_by_another_table_are_dropped_when_the_database_opens() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("c.db");
        let table_named = |store: &Store| store.meta(TABLE_KEY).expect("meta");
        let mut store = store_with(dir.path(), 40);
        add(&mut store, 40, 45);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(45)
        );
        assert_eq!(
            table_named(&store).as_deref(),
            Some(crate::embed::table_id())
        );
        // Reopened with the same table: nothing is lost.
        drop(store);
        let mut store = Store::open(&db).expect("open");
        assert_eq!(store.vector_counts().expect("counts").with_vector, 45);
        // A folder from before tables were named holds the legacy table's
        // vectors: kept when that is the table in use, and named for it.
        store
            .conn
            .execute("DELETE FROM meta WHERE key = ?1", [TABLE_KEY])
            .expect("unname");
        keep_table(&mut store.conn, &db, crate::embed::LEGACY_ID).expect("keep");
        assert_eq!(store.vector_counts().expect("counts").with_vector, 45);
        assert_eq!(
            table_named(&store).as_deref(),
            Some(crate::embed::LEGACY_ID)
        );
        assert!(Component::Vectors.path(&db).exists());
        // Another table: every vector goes, the file too, and the next
        // pass examines every record again.
        add(&mut store, 45, 50);
        assert!(!table(&store).is_empty());
        keep_table(&mut store.conn, &db, "another").expect("keep");
        let counts = store.vector_counts().expect("counts");
        assert_eq!((counts.with_vector, counts.pending), (0, 50));
        assert!(!Component::Vectors.path(&db).exists());
        assert!(store.vector_scan(3).expect("open").is_none());
        assert_eq!(table_named(&store).as_deref(), Some("another"));
        // Named now: opening again with it changes nothing.
        embed_again(&mut store);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(50)
        );
        keep_table(&mut store.conn, &db, "another").expect("keep");
        assert_eq!(store.vector_counts().expect("counts").with_vector, 50);
        assert!(Component::Vectors.path(&db).exists());
    }

    #[test]
    fn each_vector_is_kept_once_and_a_deleted_record_s_entry_is_blanked() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 50);
        // Nothing in the file yet: a search reads the table.
        assert!(!store.vector_file_current().expect("current"));
        assert!(scanned(&store, 1).is_none());
        let mut all = table(&store);
        assert_eq!(all.len(), 50);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(50)
        );
        // Moved, not copied: the table is empty and the file holds them all.
        assert!(table(&store).is_empty());
        assert!(store.vector_file_current().expect("current"));
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        assert_eq!(store.vector_counts().expect("counts").with_vector, 50);
        for (id, v) in &all {
            assert_eq!(store.vector(*id).expect("vector").as_ref(), Some(v));
        }
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Current);
        // New vectors are appended; the old entries stay where they were.
        add(&mut store, 50, 80);
        all.extend(table(&store));
        assert!(!store.vector_file_current().expect("current"));
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(30)
        );
        assert!(table(&store).is_empty());
        assert_eq!(store.vector_scan(3).expect("open").expect("file").upto, 80);
        // Split between threads, the entries still come in id order.
        for threads in [1, 2, 3, 7] {
            assert_eq!(scanned(&store, threads).as_ref(), Some(&all), "{threads}");
        }
        // A deleted record is noted; a forget's scrub blanks its entry at
        // once (a zero vector that no search keeps), in place.
        store
            .conn
            .execute("DELETE FROM records WHERE id = 7", [])
            .expect("delete");
        assert_eq!(noted(&store), 1);
        assert!(!store.vector_file_current().expect("current"));
        assert!(store.scrub().expect("scrub"));
        assert_eq!(noted(&store), 0);
        assert!(store.vector_file_current().expect("current"));
        all[6].1 = vec![0; 3];
        assert_eq!(scanned(&store, 2).as_ref(), Some(&all));
        assert_eq!(store.vector(7).expect("vector"), None);
        assert_eq!(store.vector_counts().expect("counts").with_vector, 79);
        // Or the next pass does, with what else it moves.
        store
            .conn
            .execute("DELETE FROM records WHERE id IN (9, 7)", [])
            .expect("delete");
        add(&mut store, 80, 82);
        all.extend(table(&store));
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(2)
        );
        all[8].1 = vec![0; 3];
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        assert_eq!(store.vector_counts().expect("counts").with_vector, 80);
        // A record deleted before its vector reached the file leaves nothing.
        add(&mut store, 82, 83);
        store
            .conn
            .execute("DELETE FROM records WHERE id = 83", [])
            .expect("delete");
        assert!(table(&store).is_empty());
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(0)
        );
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        // Another vector length (another table) is not this file.
        assert!(store.vector_scan(4).expect("open").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(Component::Vectors.path(store.path()))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, crate::home::FILE_MODE);
        }
    }

    #[test]
    fn a_scan_for_some_records_reads_the_blocks_that_may_hold_them() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 1_000);
        store.sync_vector_file(3).expect("sync");
        store.read_flat_files_per_search();
        let ids: Vec<i64> = scanned(&store, 1)
            .expect("file")
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(ids.len(), 1_000);
        let db = store.path().to_path_buf();
        // Two narrow windows of ids, in blocks 0 and 10.
        let wants = [(ids[10], ids[12]), (ids[700], ids[700])];
        let wanted = |first: i64, last: i64| wants.iter().any(|&(a, b)| a <= last && first <= b);
        let n = SKIP_BLOCK as usize;
        let block = |at: usize| ids[at * n..(at + 1) * n].to_vec();
        // The blocks' first ids, and the ids handed on.
        let read = |s: &Store, wanted: &dyn Fn(i64, i64) -> bool| -> (Vec<i64>, Vec<i64>) {
            let scan = s.vector_scan(3).expect("open").expect("file");
            let firsts = scan.block_firsts().expect("firsts");
            let parts = scan
                .fold_wanted(
                    &firsts,
                    wanted,
                    Vec::new,
                    |seen: &mut Vec<i64>, id, _, _| seen.push(id),
                )
                .expect("scan");
            let mut seen: Vec<i64> = parts.into_iter().flatten().collect();
            seen.sort();
            (firsts, seen)
        };
        let every: Vec<i64> = ids.iter().step_by(n).copied().collect();
        let held = Store::open_read_only(&db).expect("open");
        for (what, s) in [("pread", &store), ("mapped", &held)] {
            let (firsts, seen) = read(s, &wanted);
            assert_eq!(firsts, every, "{what}");
            assert_eq!(seen, [block(0), block(700 / n)].concat(), "{what}");
            assert!(read(s, &|_, _| false).1.is_empty(), "{what}");
            assert_eq!(read(s, &|_, _| true).1, ids, "{what}");
        }
        // A block whose first entry is damaged is read whatever is wanted,
        // and so is the block before it, whose last id is then unknown:
        // nothing wanted is passed over, and the damaged entry is never
        // handed on.
        drop(held);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(Component::Vectors.path(&db))
            .expect("open");
        let first_of_10 = HEADER_LEN + 10 * SKIP_BLOCK * entry_len(3);
        write_at(&f, &[0x55], first_of_10 + entry_len(3) - 1).expect("damage");
        let held = Store::open_read_only(&db).expect("open");
        let mut expected = [block(0), block(9), block(10)].concat();
        expected.retain(|&id| id != ids[10 * n]);
        for (what, s) in [("pread", &store), ("mapped", &held)] {
            let (firsts, seen) = read(s, &wanted);
            assert_eq!(firsts[10], i64::MAX, "{what}");
            assert_eq!(firsts[11], every[11], "{what}");
            assert_eq!(seen, expected, "{what}");
        }
    }

    /// What a sketched scan of `store` yields for `q`: the sketch's
    /// nearest positions, and every entry read, in order.
    fn sketched_scan(store: &Store, q: &[f32]) -> (Vec<u64>, Vec<(i64, Vec<u8>)>) {
        let scan = store.vector_scan(3).expect("open").expect("file");
        let reader = scan.sketch.as_ref().expect("sketch");
        let near = reader
            .nearest(&sketch::of_query(q, &reader.mean), 7)
            .expect("nearest");
        let mut seen: Vec<(i64, Vec<u8>)> = scan
            .fold_sketched(q, Vec::new, |seen, id, _, v| {
                seen.push((id, crate::embed::offset_binary(v)))
            })
            .expect("read")
            .expect("sketched")
            .0
            .into_iter()
            .flatten()
            .collect();
        seen.sort();
        (near, seen)
    }

    #[test]
    fn a_reader_mapping_the_files_reads_what_they_hold_through_every_change() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 50);
        store.sync_vector_file(3).expect("sync");
        // The writer reads the files with `pread`: what the mapping
        // reader must match.
        store.read_flat_files_per_search();
        let held = Store::open_read_only(store.path()).expect("open");
        let q = [0.6f32, -0.48, 0.64];
        let same = |held: &Store, store: &Store, what: &str| {
            assert_eq!(scanned(held, 1), scanned(store, 1), "{what}");
            assert_eq!(scanned(held, 3), scanned(store, 1), "{what}: threads");
            assert_eq!(sketched_scan(held, &q), sketched_scan(store, &q), "{what}");
            let scan = held.vector_scan(3).expect("open").expect("file");
            assert!(scan.mapped(), "{what}: entries mapped");
            assert!(
                scan.sketch.as_ref().expect("sketch").mapped(),
                "{what}: sketch mapped"
            );
            let maps = held.mappings.as_ref().expect("mapped by default");
            assert!(maps.mapped(Which::Vectors) && maps.mapped(Which::Sketch));
            let plain = store.vector_scan(3).expect("open").expect("file");
            assert!(!plain.mapped(), "read with pread");
        };
        same(&held, &store, "first read");
        // Appended entries are read through a mapping made anew.
        add(&mut store, 50, 80);
        store.sync_vector_file(3).expect("sync");
        same(&held, &store, "appended");
        // A forgotten record's blanked entry is read blank.
        store
            .conn
            .execute("DELETE FROM records WHERE id = 7", [])
            .expect("delete");
        store.scrub().expect("scrub");
        let scanned_now = scanned(&held, 1).expect("file");
        assert_eq!(scanned_now[6], (7, vec![0; 3]));
        same(&held, &store, "blanked");
        // A file written anew (another token) replaces the mappings.
        let path = Component::Vectors.path(store.path());
        let len = std::fs::metadata(&path).expect("stat").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(len - 1)
            .expect("truncate");
        assert!(held.vector_scan(3).expect("open").is_none(), "cut short");
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Lost);
        embed_again(&mut store);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(79)
        );
        same(&held, &store, "written anew");
        add(&mut store, 80, 120);
        store.sync_vector_file(3).expect("sync");
        same(&held, &store, "appended again");
    }

    #[test]
    fn a_file_the_database_does_not_vouch_for_is_lost_and_computed_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 20);
        let mut all = table(&store);
        store.sync_vector_file(3).expect("sync");
        let path = Component::Vectors.path(store.path());
        // A pass that died after writing entries and before its commit:
        // the bytes past the trusted count are ignored, then overwritten.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(&[0xAB; 37]).expect("write");
        drop(f);
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        add(&mut store, 20, 25);
        all.extend(table(&store));
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Extended(5)
        );
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        // The vectors the file held are computed again, those still in the
        // table kept, and the file written anew from them.
        let recover = |store: &mut Store| {
            assert!(scanned(store, 1).is_none());
            assert!(!store.vector_file_current().expect("current"));
            assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Lost);
            assert!(!path.exists());
            assert_eq!(store.vector_counts().expect("counts").pending, 25);
            embed_again(store);
            assert_eq!(
                store.sync_vector_file(3).expect("sync"),
                Synced::Rebuilt(25)
            );
            assert_eq!(scanned(store, 1).as_ref(), Some(&all));
        };
        // A file cut short.
        let len = std::fs::metadata(&path).expect("stat").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(len - 1).expect("truncate");
        drop(f);
        recover(&mut store);
        // Another token.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        recover(&mut store);
        // A damaged mark: a count no file could hold, or this file cannot.
        let good = mark_text(&store);
        let token = good.split(' ').next().expect("token").to_string();
        for count in [u64::MAX, u64::MAX / 200, 26] {
            store
                .conn
                .execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'vector_file'",
                    [format!("{token} {count} 25 0")],
                )
                .expect("damage");
            recover(&mut store);
        }
        // A missing file.
        std::fs::remove_file(&path).expect("rm");
        recover(&mut store);
        // A scrub removes a file it cannot trust at once (with whatever of
        // forgotten records it held); the next pass computes it again.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        store.scrub().expect("scrub");
        assert!(!path.exists());
        assert_eq!(store.vector_counts().expect("counts").pending, 25);
        embed_again(&mut store);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(25)
        );
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
    }

    /// The full check names a damaged sketch or cells file and gives it
    /// up: the cells are removed, the sketch loses its mark and is not
    /// read. The next sync writes it anew, after which the check finds
    /// nothing. A sketch whose head holds is sketched again against the
    /// mean kept there: byte for byte what it was, its cells kept.
    #[test]
    fn the_full_check_names_a_damaged_sketch_or_cells_and_the_next_sync_rewrites_it() {
        use crate::store::derived::Component;
        let dir = tempfile::tempdir().expect("tmp");
        // Sketched from 40 entries (its mean theirs), then 40 more.
        let mut store = store_with(dir.path(), 40);
        store.sync_vector_file(3).expect("sync");
        add(&mut store, 40, 80);
        store.sync_vector_file(3).expect("sync");
        assert!(store.vector_file_current().expect("current"));
        assert_eq!(store.check_derived(true).expect("check"), Vec::new());
        let sketch_path = Component::Sketch.path(store.path());
        let cells_path = Component::Cells.path(store.path());
        let undamaged = std::fs::read(&sketch_path).expect("read");
        // A sketch page, zeroed; then a cells page; then the sketch's head.
        for (c, page) in [
            (Component::Sketch, 1),
            (Component::Cells, 1),
            (Component::Sketch, 0),
        ] {
            let path = c.path(store.path());
            let cells_before = std::fs::read(&cells_path).expect("cells");
            let mut bytes = std::fs::read(&path).expect("read");
            let at = page * crate::store::pages::PAGE;
            bytes[at..at + crate::store::pages::PAGE].fill(0);
            std::fs::write(&path, &bytes).expect("damage");
            let found = store.check_derived(true).expect("check");
            assert_eq!(found.len(), 1, "{c:?}: {found:?}");
            assert_eq!(found[0].path, path, "{c:?}");
            assert_eq!(path.exists(), c == Component::Sketch, "{c:?}: given up");
            assert!(!sketched(&store) || c == Component::Cells, "not read");
            assert!(!store.vector_file_current().expect("current"), "{c:?}");
            assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Current);
            assert!(path.exists(), "{c:?}: written anew");
            assert!(sketched(&store));
            assert!(store.vector_file_current().expect("current"));
            assert_eq!(
                store.check_derived(true).expect("check"),
                Vec::new(),
                "{c:?}"
            );
            let repaired = std::fs::read(&sketch_path).expect("read");
            match (c, page) {
                (Component::Sketch, 1) => {
                    assert_eq!(repaired, undamaged, "sketched against the kept mean");
                    assert_eq!(std::fs::read(&cells_path).expect("cells"), cells_before);
                }
                (Component::Sketch, _) => {
                    let head = |b: &[u8]| b[..crate::store::pages::PAGE].to_vec();
                    assert_ne!(head(&repaired), head(&undamaged), "the 80 entries' mean");
                }
                _ => assert_eq!(repaired, undamaged, "the sketch untouched"),
            }
        }
        // Without the semantic tier, only the columns file is checked.
        std::fs::write(Component::Sketch.path(store.path()), b"junk").expect("write");
        assert_eq!(store.check_derived(false).expect("check"), Vec::new());
        assert_eq!(store.check_derived(true).expect("check").len(), 1);
        // A sketch that cannot be written fails the sync, naming it.
        let path = Component::Sketch.path(store.path());
        std::fs::remove_file(&path).expect("rm");
        std::fs::create_dir(&path).expect("a folder in the way");
        match store.sync_vector_file(3) {
            Err(StoreError::Derived { path: named, .. }) => assert_eq!(named, path),
            other => panic!("{other:?}"),
        }
        assert!(
            !store.vector_file_current().expect("current"),
            "tried again"
        );
    }

    /// A sketch the database does not vouch for (its update died before
    /// the mark moved, or an older cairn wrote it) is stale, not damaged:
    /// the full check names nothing, searches do not read it, and the next
    /// sync writes it again and vouches for it.
    #[test]
    fn a_sketch_past_its_mark_is_stale_not_damaged() {
        use crate::store::derived::Component;
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 80);
        store.sync_vector_file(3).expect("sync");
        let token = read_mark(&store.conn).expect("mark").expect("a mark").token;
        assert_eq!(sketch::vouched(&store.conn, &token).expect("vouched"), 80);
        assert!(sketched(&store));
        Component::Sketch.drop_mark(&store.conn).expect("drop");
        let path = Component::Sketch.path(store.path());
        let mut bytes = std::fs::read(&path).expect("read");
        let at = bytes.len() - crate::store::pages::PAGE;
        bytes[at..].fill(0);
        std::fs::write(&path, &bytes).expect("torn");
        assert_eq!(store.check_derived(true).expect("check"), Vec::new());
        assert!(path.exists(), "not given up");
        assert!(!sketched(&store), "not read");
        assert!(!store.vector_file_current().expect("current"), "stale");
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Current);
        assert_eq!(sketch::vouched(&store.conn, &token).expect("vouched"), 80);
        assert!(sketched(&store));
        assert!(store.vector_file_current().expect("current"));
        assert_eq!(store.check_derived(true).expect("check"), Vec::new());
    }

    #[test]
    fn a_damaged_entry_is_never_scored_and_the_check_has_the_file_computed_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 40);
        let all = table(&store);
        store.sync_vector_file(3).expect("sync");
        // Read with `pread`; the reader below maps the file.
        store.read_flat_files_per_search();
        assert_eq!(store.check_vectors().expect("check"), None, "intact");
        let path = Component::Vectors.path(store.path());
        let size = entry_len(3);
        let damage = |entry: u64, at: u64, bytes: &[u8]| {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open");
            write_at(&f, bytes, HEADER_LEN + entry * size + at).expect("damage");
        };
        // A vector byte, an inverse norm, an id, an entry zeroed whole:
        // each entry is passed over, every other read as written, through
        // the file and through a mapping of it.
        damage(3, 17, &[0x01]);
        damage(9, 9, &[0x7f]);
        damage(20, 0, &[0x44]);
        damage(31, 0, &vec![0; size as usize]);
        let kept: Vec<(i64, Vec<u8>)> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| ![3, 9, 20, 31].contains(i))
            .map(|(_, e)| e.clone())
            .collect();
        assert_eq!(scanned(&store, 1).as_ref(), Some(&kept));
        assert_eq!(scanned(&store, 3).as_ref(), Some(&kept));
        let held = Store::open_read_only(store.path()).expect("read-only");
        assert_eq!(scanned(&held, 1).as_ref(), Some(&kept), "mapped");
        assert_eq!(store.vector(all[3].0).expect("lookup"), None, "damaged");
        assert_eq!(
            store.vector(all[4].0).expect("lookup"),
            Some(all[4].1.clone())
        );
        // The check names what was wrong and loses the file; the vectors
        // are computed again and the file written anew whole.
        let why = store.check_vectors().expect("check").expect("damage");
        assert!(why.why.contains("4 of its 40 entries"), "{}", why.why);
        assert_eq!(why.path, path);
        assert!(!path.exists());
        embed_again(&mut store);
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(40)
        );
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        assert_eq!(store.check_vectors().expect("check"), None);
        // A blanked entry is sealed again: no damage.
        let seven = all[7].0;
        store
            .conn
            .execute("DELETE FROM records WHERE id = ?1", [seven])
            .expect("delete");
        store.scrub().expect("scrub");
        assert_eq!(store.vector(seven).expect("lookup"), None, "blanked");
        assert_eq!(store.check_vectors().expect("check"), None, "blanked");
    }

    /// The sketch file's mean and entries (one byte each for the tiny
    /// table's three dimensions).
    fn sketch_file(store: &Store) -> (Vec<f32>, Vec<u8>) {
        let mark = read_mark(&store.conn).expect("mark").expect("a mark");
        sketch::read_all(store.path(), &mark.token, 3)
    }

    /// Whether a scan of the store's file goes through a sketch.
    fn sketched(store: &Store) -> bool {
        let scan = store.vector_scan(3).expect("open").expect("file");
        scan.sketched()
    }

    fn sketch_of(v: &[u8], mean: &[f32]) -> u8 {
        let mut out = [0u8];
        let offset = crate::embed::offset_binary(v);
        sketch::of_offset(&offset, crate::embed::inverse_norm(v), mean, &mut out);
        out[0]
    }

    #[test]
    fn the_sketch_follows_the_file_entry_for_entry() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 40);
        let mut all = table(&store);
        store.sync_vector_file(3).expect("sync");
        assert!(sketched(&store));
        let (mean, sk) = sketch_file(&store);
        // The mean of the unit vectors.
        for (d, m) in mean.iter().enumerate() {
            let want: f32 = all
                .iter()
                .map(|(_, v)| f32::from(v[d] as i8) * crate::embed::inverse_norm(v))
                .sum::<f32>()
                / all.len() as f32;
            assert!((m - want).abs() < 1e-5, "{m} {want}");
        }
        let want: Vec<u8> = all.iter().map(|(_, v)| sketch_of(v, &mean)).collect();
        assert_eq!(sk, want);
        assert!(want.iter().any(|&b| b != want[0]), "sketches differ");
        // Appended entries get sketches against the same mean.
        add(&mut store, 40, 55);
        all.extend(table(&store));
        store.sync_vector_file(3).expect("sync");
        let (mean2, sk) = sketch_file(&store);
        assert_eq!(mean2, mean);
        let want: Vec<u8> = all.iter().map(|(_, v)| sketch_of(v, &mean)).collect();
        assert_eq!(sk, want);
        // A forgotten record's sketch is zeroed with its entry.
        let pos = all.iter().position(|(id, _)| *id == 8).expect("record 8");
        assert_ne!(sk[pos], 0, "record 8 has set bits to lose");
        store
            .conn
            .execute("DELETE FROM records WHERE id = 8", [])
            .expect("delete");
        store.scrub().expect("scrub");
        let (_, sk) = sketch_file(&store);
        assert_eq!(sk[pos], 0);
        assert_eq!(sk.len(), all.len());
        // A sketch torn short, or made for another file, is caught up or
        // written anew by the next pass.
        let path = Component::Sketch.path(store.path());
        let len = std::fs::metadata(&path).expect("stat").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(len - 3)
            .expect("cut");
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Current);
        assert_eq!(sketch_file(&store).1.len(), all.len());
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(!sketched(&store));
        store.sync_vector_file(3).expect("sync");
        assert!(sketched(&store));
        // A lost vector file takes its sketch with it.
        std::fs::remove_file(Component::Vectors.path(store.path())).expect("rm");
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Lost);
        assert!(!path.exists());
    }

    #[test]
    fn a_sketched_scan_reads_the_nearest_sketches_and_all_it_lacks() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 60);
        store.sync_vector_file(3).expect("sync");
        let mut all = table(&store);
        assert!(all.is_empty(), "moved");
        all = scanned(&store, 1).expect("file");
        let (mean, sk) = sketch_file(&store);
        let scan = store.vector_scan(3).expect("open").expect("file");
        let reader = scan.sketch.as_ref().expect("sketch");
        let q = [0.6f32, -0.48, 0.64];
        let qs = sketch::of_query(&q, &mean);
        for k in [1, 5, 17, 59, 60, 100] {
            let got = reader.nearest(&qs, k).expect("nearest");
            // The k nearest by distance; of equal ones, the later entries.
            let mut want: Vec<(u32, std::cmp::Reverse<u64>)> = sk
                .iter()
                .enumerate()
                .map(|(i, b)| (sketch::distance(&qs, &[*b]), std::cmp::Reverse(i as u64)))
                .collect();
            want.sort();
            let mut want: Vec<u64> = want.into_iter().take(k).map(|(_, i)| i.0).collect();
            want.sort();
            assert_eq!(got, want, "k = {k}");
        }
        // Entries appended after the sketch was written are all read.
        add(&mut store, 60, 70);
        let newer = table(&store);
        let upto = store.vector_scan(3).expect("open").expect("file").upto;
        // Appended to the file without a sketch update, as after a
        // failed one.
        let before = std::fs::read(Component::Sketch.path(store.path())).expect("sketch");
        store.sync_vector_file(3).expect("sync");
        std::fs::write(Component::Sketch.path(store.path()), before).expect("put back");
        let scan = store.vector_scan(3).expect("open").expect("file");
        assert!(scan.upto > upto);
        let seen: Vec<i64> = sketched_scan(&store, &q)
            .1
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let near = reader
            .nearest(&qs, sketch::candidates(reader.count))
            .expect("nearest");
        assert_eq!(near.len(), 60, "fewer entries than candidates: all");
        let mut want: Vec<i64> = all.iter().map(|(id, _)| *id).collect();
        want.extend(newer.iter().map(|(id, _)| *id));
        assert_eq!(seen, want);
    }

    /// Embeds what waits in passes of at least `most` records, moving
    /// the vectors into the file after each, as `Node::embed_pending` does.
    fn embed_in_chunks(store: &mut Store, most: u64) -> Vec<Synced> {
        let bytes = crate::embed::tests::tiny();
        let e = crate::embed::Embedder::from_bytes(&bytes).expect("table");
        let mut synced = Vec::new();
        loop {
            let examined = store.embed_some(&e, most).expect("embed");
            synced.push(store.sync_vector_file(3).expect("sync"));
            if examined < most {
                return synced;
            }
        }
    }

    /// Moves made while more vectors wait leave the cells for the last
    /// move, which writes them over every entry, also when it has nothing
    /// left to move; moves that each bring the cells up to date write them
    /// at every step that outgrows them and end covering fewer.
    #[test]
    fn a_long_vector_pass_writes_the_sketch_s_cells_once_at_its_last_move() {
        let dir = tempfile::tempdir().expect("tmp");
        let steps = [640, 1_280, 1_920, 2_500];
        let mut each = Store::open(&dir.path().join("each.db")).expect("open");
        let mut covered = Vec::new();
        let mut from = 0;
        for to in steps {
            add(&mut each, from, to);
            each.sync_vector_file(3).expect("sync");
            covered.push(crate::store::cells_covered(each.path()));
            from = to;
        }
        // Written at 640, 1,280 and 1,920; at 2,500 those still cover
        // three quarters.
        assert_eq!(covered, [Some(640), Some(1_280), Some(1_920), Some(1_920)]);

        let mut once = Store::open(&dir.path().join("once.db")).expect("open");
        let mut from = 0;
        for to in steps {
            add(&mut once, from, to);
            once.sync_vector_file_step(3).expect("step");
            assert_eq!(crate::store::cells_covered(once.path()), None, "{to}");
            from = to;
        }
        // Each step moved the entries of whole regions, the rest waiting in
        // the table (the entry a boundary cuts included), and the sketch
        // followed it.
        let mark = read_mark(&once.conn).expect("mark").expect("a mark");
        let len = std::fs::metadata(Component::Vectors.path(once.path()))
            .expect("stat")
            .len();
        assert_eq!(len % flat_file::REGION, 0, "{len}");
        assert_eq!(mark.count, (len - HEADER_LEN) / entry_len(3));
        assert!(mark.count > 1_920 && mark.count < 2_500, "{}", mark.count);
        assert!(Component::Sketch.path(once.path()).exists());
        // The last move takes the rest and writes the cells.
        assert_eq!(
            once.sync_vector_file(3).expect("sync"),
            Synced::Extended(2_500 - mark.count)
        );
        assert_eq!(crate::store::cells_covered(once.path()), Some(2_500));
        assert_eq!(scanned(&once, 2), scanned(&each, 2));
    }

    #[test]
    fn vectors_moved_in_chunks_and_computed_again_stay_whole_and_in_order() {
        let dir = tempfile::tempdir().expect("tmp");
        // `twin` keeps every vector in its table: the expected entries.
        let twin = store_with(dir.path(), 5_000);
        let all = table(&twin);
        let mut store = Store::open(&dir.path().join("chunked.db")).expect("open");
        let words = ["slow", "terminal", "shell", "rounding", "sluggish"];
        let mut ing = store.ingest("node").expect("ingest");
        for i in 0..5_000 {
            let text = format!("{} {} {i}", words[i % 5], words[i / 5 % 5]);
            let r = Record::new("claude-code", "s1", Role::User, &text);
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        // 2,048: a whole number of the tests' embedding transactions (32).
        let synced = embed_in_chunks(&mut store, 2_048);
        assert_eq!(
            synced,
            [
                Synced::Rebuilt(2_048),
                Synced::Extended(2_048),
                Synced::Extended(904)
            ]
        );
        assert!(table(&store).is_empty());
        assert_eq!(scanned(&store, 3).as_ref(), Some(&all));
        // Blocks begun in one pass and ended in the next are noted once.
        // Lost with vectors still in the table: computed again from the
        // first record, the file written in id order again.
        add(&mut store, 5_000, 5_010);
        let mut all = all;
        all.extend(table(&store));
        std::fs::remove_file(Component::Vectors.path(store.path())).expect("rm");
        assert_eq!(store.sync_vector_file(3).expect("sync"), Synced::Lost);
        assert!(table(&store).is_empty());
        let synced = embed_in_chunks(&mut store, 2_048);
        assert_eq!(synced.len(), 3, "{synced:?}");
        assert_eq!(scanned(&store, 2).as_ref(), Some(&all));
        for (id, v) in all.iter().step_by(499) {
            assert_eq!(store.vector(*id).expect("vector").as_ref(), Some(v));
        }
    }

    #[test]
    fn a_v10_database_s_copy_is_written_anew_from_its_full_table() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = store_with(dir.path(), 30);
        let all = table(&store);
        store.sync_vector_file(3).expect("sync");
        // As v10 left it: every vector in the table as well, a file the
        // mark (three fields then) vouches for, the triggers of v10.
        let mark = mark_text(&store);
        let v10 = mark.rsplit_once(' ').expect("four fields").0.to_string();
        store
            .conn
            .execute_batch(
                "DROP TRIGGER vectors_gone_with_records;
                 DROP TABLE vectors_gone;",
            )
            .expect("v10");
        // v10's own triggers, as its migration made them.
        store
            .conn
            .execute_batch(super::super::schema::MIGRATIONS[9])
            .expect("v10 triggers");
        store
            .conn
            .pragma_update(None, "user_version", 10)
            .expect("v10");
        store
            .conn
            .execute(
                "UPDATE meta SET value = ?1 WHERE key = 'vector_file'",
                [v10],
            )
            .expect("v10 mark");
        for (id, v) in &all {
            store
                .conn
                .execute(
                    "INSERT INTO vectors(id, v) VALUES (?1, ?2)",
                    rusqlite::params![id, v],
                )
                .expect("row");
        }
        let db = store.path().to_path_buf();
        drop(store);
        let mut store = Store::open(&db).expect("upgrade");
        assert!(scanned(&store, 1).is_none(), "the v10 mark is gone");
        assert_eq!(
            store.sync_vector_file(3).expect("sync"),
            Synced::Rebuilt(30)
        );
        assert!(table(&store).is_empty());
        assert_eq!(scanned(&store, 1).as_ref(), Some(&all));
        assert_eq!(store.vector_counts().expect("counts").pending, 0);
    }

    #[test]
    fn a_mark_reads_back_and_anything_else_is_no_mark() {
        let m = Mark {
            token: [7; 16],
            count: 12,
            upto: 99,
            blank: 3,
        };
        assert_eq!(Mark::decode(&m.encode()), Some(m));
        for bad in [
            "",
            "zz 1 2 0",
            "0707 1 2 0",
            &format!("{} 1 2", crate::hex::encode(&[7; 16])),
            &(m.encode() + " 4"),
        ] {
            assert_eq!(Mark::decode(bad), None, "{bad}");
        }
    }
}
