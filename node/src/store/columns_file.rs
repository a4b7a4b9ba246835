//! What the ranker needs of every record in two flat files beside the
//! database, so a search reads a candidate's with a small read instead of
//! look-ups in SQLite tables.
//!
//! - `cairn.db-columns`: its role, time, decision mark and session, 16
//!   bytes a record, for the ranker's candidates: in `records` that
//!   look-up reads two pages at 10 GB (an inner page of the table, about
//!   800 of them, and the leaf), and a question makes about two thousand.
//! - `cairn.db-lengths`: its length class (`record_bytes::class_of`), a
//!   byte a record, for scoring a word's newest matches: up to 8,000 a
//!   concept, spread over the history, which in `record_lens` cost a row
//!   look-up per block of 1,024 records met; here the bytes of the
//!   stretches that hold them are read in a few large reads
//!   ([`Bytes::of`]).
//! - `cairn.db-roles`: its role byte (`record_bytes::role_byte`), a byte a
//!   record, for a filtered search's screen: a reach back through a word's
//!   newest 32,000 matches, or the meaning tier's 8,000 nearest records,
//!   asks each one's role (and, with a filter on the session, whether it
//!   exists), which in `record_bytes` cost a row read per block of 1,024
//!   records met (10 GB, `--role user`: a sixth of a question's CPU).
//!
//! All three start with the 32-byte header of [`super::flat_file`] (the
//! magic, `cairnrc1`, `cairnrl1` or `cairnro1`, the entry length, 16 or 1,
//! where the vector files put their vector length, and the token they
//! share), then one entry per record id, at `32 + entry * id`. A columns entry is the
//! record's stamp word ([`Stamp::word`], u64 LE), its session row (u32 LE),
//! its role code ([`codec::role_code`]) and three zero bytes; an entry
//! whose word, session or role is zero says nothing (a session row past
//! u32, a role with no code, a deleted record), and so does a length or
//! a role byte of 0.
//!
//! What the database vouches for: `meta.columns_file` holds the token and
//! `upto`, and the three files with that token hold the entries of every
//! record with an id up to `upto` that existed when they were written.
//! Record ids are never reused (`AUTOINCREMENT`) and a record's columns
//! never change, so an entry stays right while its record exists; a
//! search reads only entries up to the mark its snapshot reads, and asks
//! the tables about anything else (a store that holds its flat files,
//! the daemon's, reads them through mappings kept under the token and
//! each file's identity, `store::held`; any other maps the lengths and the
//! roles for the one search, and reads the columns a little at a time with
//! `pread`). What lies past the mark may be anything
//! (a write that never reached its mark, or files written for a newer copy
//! of the database).
//!
//! Written by [`Store::write_columns`] (after an index pass and a batch
//! applied, beside the vector pass), under the write lock, in steps of
//! [`STEP`] records, each step's entries made durable before its mark is
//! committed, the lengths copied from `record_lens`; files that are missing
//! or do not match the mark are written anew under a new token. Every path
//! that deletes records (a forget, a peer's tombstone, a rewritten file's
//! vanished records) zeroes their columns entries in its own transaction
//! ([`zero`]; files it cannot zero lose their mark in that transaction
//! instead): the write lock it holds keeps any write of the files out
//! until it commits, after which those records are gone from every
//! snapshot that could write them, and a zero left by a rollback only
//! sends searches to `records`. So a columns entry that is not zero also
//! says that its record exists in the snapshot of a search that reads it
//! (which the meaning tier relies on), and nothing of a forgotten record's
//! columns stays; were an id ever given again, its entry would be the zero
//! its delete left, and its row would be read. A migration that gave
//! records other ids would have to delete `meta.columns_file`. Derived:
//! losing the files costs speed only.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension};

use super::flat_file::{self, HEADER_LEN};
use super::held::{self, Which};
use super::record_times::Stamp;
use super::{Store, StoreError, codec, record_bytes};
use crate::record::Role;

/// The columns file's magic.
const MAGIC: &[u8; 8] = b"cairnrc1";

/// The lengths file's magic.
const LENGTHS_MAGIC: &[u8; 8] = b"cairnrl1";

/// The roles file's magic.
const ROLES_MAGIC: &[u8; 8] = b"cairnro1";

/// Bytes per record in the columns file.
const ENTRY: usize = 16;

/// The `meta` key of the mark.
const MARK_KEY: &str = "columns_file";

/// Records written per transaction.
pub(crate) const STEP: i64 = 65_536;

/// Columns entries read at once: a question's candidates come in id order
/// and at times close together (a session's records are consecutive).
const WINDOW: usize = 4;

/// Bytes of the lengths file between two wanted ones that are read
/// through rather than skipped with another read: a read costs about what
/// copying a few pages does.
const LENGTHS_GAP: u64 = 4096;

/// Bytes of the lengths file read at a time (the buffer stays small, so
/// it costs no fresh pages, and stays in cache).
const LENGTHS_CHUNK: usize = 128 * 1024;

/// The columns file beside the database at `db`.
pub(crate) fn path_for(db: &Path) -> PathBuf {
    beside(db, "-columns")
}

/// The lengths file beside the database at `db`.
pub(crate) fn lengths_path_for(db: &Path) -> PathBuf {
    beside(db, "-lengths")
}

/// The roles file beside the database at `db`.
pub(crate) fn roles_path_for(db: &Path) -> PathBuf {
    beside(db, "-roles")
}

fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// What the ranker needs of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Columns {
    pub(crate) role: Role,
    pub(crate) stamp: Stamp,
    pub(crate) session: i64,
}

impl Columns {
    /// The entry of a record's `role`, `ts`, `session` and `flags`
    /// columns; zeros when it cannot hold them.
    fn entry(role: rusqlite::types::ValueRef<'_>, stamp: Stamp, session: i64) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        let (Some(role), Ok(session), word) = (
            codec::role_code_in(role),
            u32::try_from(session),
            stamp.word(),
        ) else {
            return e;
        };
        if session == 0 || word == 0 {
            return e;
        }
        e[..8].copy_from_slice(&word.to_le_bytes());
        e[8..12].copy_from_slice(&session.to_le_bytes());
        e[12] = role;
        e
    }

    /// What an entry holds; `None` when it says nothing.
    fn of(e: &[u8]) -> Option<Columns> {
        let word = u64::from_le_bytes(e[..8].try_into().ok()?);
        let session = u32::from_le_bytes(e[8..12].try_into().ok()?);
        let role = Role::ALL
            .into_iter()
            .find(|r| codec::role_code(*r) == e[12])?;
        if session == 0 || e[13..].iter().any(|&b| b != 0) {
            return None;
        }
        Some(Columns {
            role,
            stamp: Stamp::from_word(word)?,
            session: i64::from(session),
        })
    }
}

/// The file the database vouches for and how far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    token: [u8; 16],
    upto: i64,
}

impl Mark {
    fn encode(&self) -> String {
        format!("{} {}", crate::hex::encode(&self.token), self.upto)
    }

    fn decode(s: &str) -> Option<Mark> {
        let (token, upto) = s.split_once(' ')?;
        let token = data_encoding::HEXLOWER_PERMISSIVE
            .decode(token.as_bytes())
            .ok()?
            .try_into()
            .ok()?;
        Some(Mark {
            token,
            upto: upto.parse().ok().filter(|u| *u >= 0)?,
        })
    }
}

fn read_mark(conn: &Connection) -> rusqlite::Result<Option<Mark>> {
    let v: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [MARK_KEY], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(v.as_deref().and_then(Mark::decode))
}

fn write_mark(conn: &Connection, mark: &Mark) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (MARK_KEY, mark.encode()),
    )?;
    Ok(())
}

/// One of the three files: its suffix, magic and entry length.
#[derive(Debug, Clone, Copy)]
struct Kind {
    path: fn(&Path) -> PathBuf,
    magic: &'static [u8; 8],
    entry: usize,
}

const COLUMNS: Kind = Kind {
    path: path_for,
    magic: MAGIC,
    entry: ENTRY,
};

const LENGTHS: Kind = Kind {
    path: lengths_path_for,
    magic: LENGTHS_MAGIC,
    entry: 1,
};

const ROLES: Kind = Kind {
    path: roles_path_for,
    magic: ROLES_MAGIC,
    entry: 1,
};

/// The three files, in the order `write_step` takes them.
const KINDS: [Kind; 3] = [COLUMNS, LENGTHS, ROLES];

impl Kind {
    fn header(&self, token: &[u8; 16]) -> [u8; HEADER_LEN] {
        flat_file::header(self.magic, self.entry, token)
    }

    /// The file of the database at `db` when its header names `mark`'s token.
    fn open_marked(&self, db: &Path, mark: &Mark, write: bool) -> Option<File> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .open((self.path)(db))
            .ok()?;
        let mut h = [0u8; HEADER_LEN];
        flat_file::read_at(&file, &mut h, 0).ok()?;
        (h == self.header(&mark.token)).then_some(file)
    }

    /// Where `store`'s searches read this file, and the record id up to
    /// which the mark its snapshot reads vouches for it; `None` when there
    /// is no such mark or the file is not its. A store that holds its flat
    /// files (a daemon's) reads its mapping of the file, kept under the
    /// mark's token and the file's identity (`store::held`); any other
    /// reads the file.
    fn vouched(&self, store: &Store, which: Which) -> Option<(Source, i64)> {
        let mark = read_mark(store.conn()).ok()??;
        let file = self.open_marked(store.path(), &mark, false)?;
        let len = (u64::try_from(mark.upto).ok()? + 1).checked_mul(self.entry as u64)?;
        let mapped = match &store.held {
            Some(held) => flat_file::identity(&file).and_then(|id| {
                let key = held::Key {
                    token: mark.token,
                    dim: self.entry,
                    blank: 0,
                    file: Some(id),
                };
                held.entries(which, key, &file, HEADER_LEN as u64, len)
            }),
            // A process that holds nothing (a fresh `cairn search`) maps the
            // files of a byte a record all the same: its screen and its
            // scoring ask for the bytes of batches of ids spread over the
            // history, batch after batch over the same stretches, which
            // `pread` copied out again each time (10 GB, a question about
            // the last two weeks: 19.4 -> 23.5 ms when the role bytes came
            // that way; mapped, 19.2), where a mapping faults each page in
            // once. The columns file's scattered 16-byte entries are still
            // read with `pread`: mapping every flat file cost a fresh
            // search more than it saved.
            None if self.entry == 1 => held::map_once(&file, HEADER_LEN as u64, len),
            None => None,
        };
        let source = match mapped {
            Some(entries) => Source::Mapped(entries),
            None => Source::File(file),
        };
        Some((source, mark.upto))
    }

    /// A new file for the database at `db`, with the header for `token`,
    /// put in place of any other.
    fn create(&self, db: &Path, token: &[u8; 16]) -> Result<File, StoreError> {
        let path = (self.path)(db);
        let (file, tmp) = flat_file::create_beside(&path).map_err(io(&path))?;
        flat_file::write_at(&file, &self.header(token), 0).map_err(io(&tmp))?;
        file.sync_data().map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        Ok(file)
    }

    fn offset(&self, id: i64) -> u64 {
        HEADER_LEN as u64 + id as u64 * self.entry as u64
    }
}

fn offset(id: i64) -> u64 {
    COLUMNS.offset(id)
}

/// Where a reader takes its entries from.
enum Source {
    /// The file, a read at a time.
    File(File),
    /// The store's mapping of the file's entries, from record id 0's on.
    Mapped(held::Entries),
}

/// A search's reader of the file, as far as its snapshot's mark vouches.
pub(crate) struct Reader {
    source: Source,
    upto: i64,
    /// Entries read last, from record id `first`.
    buf: Vec<u8>,
    first: i64,
}

impl Reader {
    /// The file of `store`'s database, read as its snapshot vouches;
    /// `None` when there is none it vouches for.
    pub(crate) fn open(store: &Store) -> Option<Reader> {
        let (source, upto) = COLUMNS.vouched(store, Which::Columns)?;
        Some(Reader {
            source,
            upto,
            buf: Vec::with_capacity(WINDOW * ENTRY),
            first: 0,
        })
    }

    /// Record `id`'s columns; `None` when the file cannot say (past the
    /// mark, an entry that says nothing, a failed read): ask `records`.
    pub(crate) fn columns(&mut self, id: i64) -> Option<Columns> {
        if id < 1 || id > self.upto {
            return None;
        }
        let file = match &self.source {
            Source::File(file) => file,
            Source::Mapped(entries) => {
                let at = usize::try_from(id).ok()? * ENTRY;
                return Columns::of(entries.get(at..at + ENTRY)?);
            }
        };
        let held = self.buf.len() / ENTRY;
        let at = match id.checked_sub(self.first) {
            Some(d) if d >= 0 && (d as usize) < held => d as usize,
            _ => {
                let n = (self.upto - id + 1).min(WINDOW as i64) as usize;
                self.buf.resize(n * ENTRY, 0);
                if flat_file::read_at(file, &mut self.buf, offset(id)).is_err() {
                    self.buf.clear();
                    return None;
                }
                self.first = id;
                0
            }
        };
        Columns::of(&self.buf[at * ENTRY..(at + 1) * ENTRY])
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A search's reader of a file of a byte a record (the lengths or the
/// roles), as far as its snapshot's mark vouches.
pub(crate) struct Bytes {
    source: Source,
    upto: i64,
    buf: Vec<u8>,
    kind: Kind,
}

impl Bytes {
    /// The lengths file of `store`'s database, read as its snapshot
    /// vouches; `None` when there is none it vouches for.
    pub(crate) fn lengths(store: &Store) -> Option<Bytes> {
        Self::open(store, LENGTHS, Which::Lengths)
    }

    /// The roles file of `store`'s database, as [`Bytes::lengths`].
    pub(crate) fn roles(store: &Store) -> Option<Bytes> {
        Self::open(store, ROLES, Which::Roles)
    }

    fn open(store: &Store, kind: Kind, which: Which) -> Option<Bytes> {
        let (source, upto) = kind.vouched(store, which)?;
        Some(Bytes {
            source,
            upto,
            buf: Vec::new(),
            kind,
        })
    }

    /// The bytes of `ids` (in any order), each 0 where the file cannot
    /// say (past the mark, a length or role not known, a deleted record, a
    /// failed read). The stretches holding them are read in order, a gap
    /// of up to [`LENGTHS_GAP`] bytes read through, at most
    /// [`LENGTHS_CHUNK`] at a time.
    pub(crate) fn of(&mut self, ids: &[i64]) -> Vec<u8> {
        let mut out = vec![0u8; ids.len()];
        let wanted = |id: i64| id >= 1 && id <= self.upto;
        let file = match &self.source {
            Source::File(file) => file,
            Source::Mapped(entries) => {
                for (o, &id) in out.iter_mut().zip(ids) {
                    if wanted(id) {
                        *o = entries.get(id as usize).copied().unwrap_or(0);
                    }
                }
                return out;
            }
        };
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| wanted(ids[i])).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        let mut i = 0;
        while i < order.len() {
            // A chunk from the first id left: every wanted id within it,
            // up to a gap too wide to read through.
            let from = self.kind.offset(ids[order[i]]);
            let mut to = from + 1;
            let mut j = i + 1;
            while j < order.len() {
                let at = self.kind.offset(ids[order[j]]);
                if at >= from + LENGTHS_CHUNK as u64 || at > to + LENGTHS_GAP {
                    break;
                }
                to = to.max(at + 1);
                j += 1;
            }
            self.buf.resize((to - from) as usize, 0);
            if flat_file::read_at(file, &mut self.buf, from).is_ok() {
                for &k in &order[i..j] {
                    out[k] = self.buf[(self.kind.offset(ids[k]) - from) as usize];
                }
            }
            i = j;
        }
        out
    }
}

impl record_bytes::Classes for Bytes {
    fn classes(&mut self, ids: &[i64]) -> Vec<u8> {
        self.of(ids)
    }
}

/// Writes the entries of up to [`STEP`] records the files lack, in one
/// transaction; returns how many (0: the files are complete).
pub(crate) fn write_step(conn: &Connection, db: &Path) -> Result<u64, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let newest: Option<i64> = tx.query_row("SELECT max(id) FROM records", [], |r| r.get(0))?;
    let Some(newest) = newest else {
        return Ok(0);
    };
    let found = read_mark(&tx)?.and_then(|m| {
        let [c, l, r] = KINDS.map(|k| k.open_marked(db, &m, true));
        Some(([c?, l?, r?], m))
    });
    let ([columns, lengths, roles], mut mark) = match found {
        Some((_, m)) if m.upto >= newest => return Ok(0),
        Some(found) => found,
        None => {
            let token = flat_file::new_token(b"cairn columns files", db);
            let [c, l, r] = KINDS.map(|k| k.create(db, &token));
            ([c?, l?, r?], Mark { token, upto: 0 })
        }
    };
    let (cpath, lpath, rpath) = (path_for(db), lengths_path_for(db), roles_path_for(db));
    let mut stmt = tx.prepare_cached(
        "SELECT id, role, ts, session, flags FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
    )?;
    let mut rows = stmt.query((mark.upto, STEP))?;
    // The lengths as `record_lens` holds them, a block at a time.
    let mut classes = record_bytes::Reader::new(&tx)?;
    // Consecutive ids are written together; a gap (a deleted record) is left.
    let mut run: Vec<u8> = Vec::new();
    let mut run_lens: Vec<u8> = Vec::new();
    let mut run_roles: Vec<u8> = Vec::new();
    let mut run_first = 0i64;
    let flush = |first: i64, run: &[u8], lens: &[u8], roles_of: &[u8]| {
        if !run.is_empty() {
            flat_file::write_at(&columns, run, COLUMNS.offset(first)).map_err(io(&cpath))?;
            flat_file::write_at(&lengths, lens, LENGTHS.offset(first)).map_err(io(&lpath))?;
            flat_file::write_at(&roles, roles_of, ROLES.offset(first)).map_err(io(&rpath))?;
        }
        Ok::<(), StoreError>(())
    };
    let mut written = 0u64;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let stamp = Stamp::of(r.get(2)?, r.get(4)?);
        let e = Columns::entry(r.get_ref(1)?, stamp, r.get(3)?);
        if run_lens.is_empty() || run_first + run_lens.len() as i64 != id {
            flush(run_first, &run, &run_lens, &run_roles)?;
            run.clear();
            run_lens.clear();
            run_roles.clear();
            run_first = id;
        }
        run.extend_from_slice(&e);
        run_lens.push(classes.class(id)?);
        run_roles.push(record_bytes::role_byte(r.get_ref(1)?));
        mark.upto = id;
        written += 1;
    }
    flush(run_first, &run, &run_lens, &run_roles)?;
    drop((rows, classes));
    drop(stmt);
    columns.sync_data().map_err(io(&cpath))?;
    lengths.sync_data().map_err(io(&lpath))?;
    roles.sync_data().map_err(io(&rpath))?;
    write_mark(&tx, &mark)?;
    tx.commit()?;
    Ok(written)
}

/// Zeroes the entries of `ids` the files of `conn`'s database hold (the
/// records a delete removes, in its transaction). Files that cannot be
/// zeroed lose their mark in that transaction instead, so the delete is
/// never stopped by them.
pub(crate) fn zero(conn: &Connection, ids: &[i64]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let Some(db) = conn.path().filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let Some(mark) = read_mark(conn)? else {
        return Ok(());
    };
    let held: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|&id| id >= 1 && id <= mark.upto)
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    let db = Path::new(db);
    let zeroed = |kind: Kind| -> std::io::Result<()> {
        let file = kind
            .open_marked(db, &mark, true)
            .ok_or(std::io::ErrorKind::NotFound)?;
        let blank = vec![0u8; kind.entry];
        for &id in &held {
            flat_file::write_at(&file, &blank, kind.offset(id))?;
        }
        file.sync_data()
    };
    for kind in KINDS {
        if let Err(e) = zeroed(kind) {
            // Files that cannot be zeroed are vouched for no more (in this
            // same transaction): the delete goes on, and the next write
            // makes them anew.
            tracing::warn!(error = %e, path = %(kind.path)(db).display(), "could not zero deleted records' columns; the columns files are given up");
            conn.execute("DELETE FROM meta WHERE key = ?1", [MARK_KEY])?;
            return Ok(());
        }
    }
    Ok(())
}

/// How many records past the mark wait for their entries, read without
/// the write lock; `i64::MAX` when the files are missing or do not match
/// the mark, so that they are written anew however few records there are.
fn pending(conn: &Connection, db: &Path) -> Result<i64, StoreError> {
    let newest: Option<i64> = conn.query_row("SELECT max(id) FROM records", [], |r| r.get(0))?;
    let Some(newest) = newest else {
        return Ok(0);
    };
    let upto = match read_mark(conn)? {
        Some(m) if KINDS.iter().all(|k| k.open_marked(db, &m, false).is_some()) => m.upto,
        _ => return Ok(i64::MAX),
    };
    Ok((newest - upto).max(0))
}

impl super::Store {
    /// [`Store::write_columns`] once at least `at_least` records wait for
    /// their entries (or the files must be written anew); else nothing, and
    /// searches read those few records' rows. Returns how many it wrote.
    pub fn write_columns_due(&self, at_least: i64) -> Result<u64, StoreError> {
        match pending(&self.conn, &self.path)? {
            0 => Ok(0),
            n if n < at_least => Ok(0),
            _ => self.write_columns(),
        }
    }

    /// Writes the columns file's entries of every record it lacks, a
    /// [`STEP`] at a time; returns how many it wrote.
    pub fn write_columns(&self) -> Result<u64, StoreError> {
        let mut written = 0;
        loop {
            match write_step(&self.conn, &self.path)? {
                0 => return Ok(written),
                n => written += n,
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::Store;

    /// Asserts that `store`'s columns files, as far as their mark, give
    /// every record its row's columns and `record_lens`' length, and hold
    /// nothing for an id no record has (a record deleted after they were
    /// written included).
    pub(crate) fn assert_true_to(store: &Store, what: &str) {
        let conn = store.conn();
        let mark = read_mark(conn).expect("mark").expect("a mark");
        let live = rows(conn);
        let bytes: std::collections::HashMap<i64, (u8, u8)> = record_bytes::held(conn)
            .into_iter()
            .map(|(id, c, r)| (id, (c, r)))
            .collect();
        let mut reader = Reader::open(store).expect("columns");
        let ids: Vec<i64> = (1..=mark.upto).collect();
        let lengths = Bytes::lengths(store).expect("lengths").of(&ids);
        let roles = Bytes::roles(store).expect("roles").of(&ids);
        for id in 1..=mark.upto {
            let row = live.iter().find(|l| l.0 == id).map(|l| l.1);
            let got = (lengths[id as usize - 1], roles[id as usize - 1]);
            match row {
                Some(c) => {
                    assert_eq!(reader.columns(id), Some(c), "{what}: record {id}");
                    let want = bytes.get(&id).copied().unwrap_or((0, 0));
                    assert_eq!(got, want, "{what}: record {id}");
                    assert_eq!(got.1, codec::role_code(c.role), "{what}: record {id}");
                }
                None => {
                    assert_eq!(entry_bytes(store, id), vec![0; ENTRY], "{what}: gone {id}");
                    assert_eq!(got, (0, 0), "{what}: gone {id}");
                }
            }
        }
    }

    use crate::store::record_times::tests::{three_lines_of_a_file, varied};

    /// Every record's columns as its row holds them, by id.
    fn rows(conn: &Connection) -> Vec<(i64, Columns)> {
        let mut stmt = conn
            .prepare("SELECT id, role, ts, session, flags FROM records ORDER BY id")
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| {
                let role = codec::role_at(r, 1)?;
                Ok((
                    r.get(0)?,
                    Columns {
                        role: Role::ALL
                            .into_iter()
                            .find(|k| k.as_str() == role)
                            .expect("a known role"),
                        stamp: Stamp::of(r.get(2)?, r.get(4)?),
                        session: r.get(3)?,
                    },
                ))
            })
            .expect("query");
        rows.collect::<Result<_, _>>().expect("rows")
    }

    /// Asserts that a reader opened now on each of `stores` gives each
    /// record of `want` its columns where `held` says the file holds them,
    /// and nothing else for any id from 0 to past the last.
    fn reads_as(
        stores: &[&Store],
        want: &[(i64, Columns)],
        held: impl Fn(i64) -> bool,
        what: &str,
    ) {
        for store in stores {
            let reader = Reader::open(store);
            let mut reader = match reader {
                Some(r) => r,
                None => {
                    assert!(want.iter().all(|w| !held(w.0)), "{what}: no file");
                    continue;
                }
            };
            let top = want.last().map_or(0, |w| w.0);
            for id in -1..top + 40 {
                let row = want.iter().find(|w| w.0 == id).map(|w| w.1);
                let got = reader.columns(id);
                match row {
                    Some(c) if held(id) => assert_eq!(got, Some(c), "{what}: record {id}"),
                    _ => assert_eq!(got, None, "{what}: record {id}"),
                }
            }
        }
    }

    /// Asserts that the lengths and the roles files, read through each of
    /// `stores`, give every record of `want` its class from `record_lens`
    /// and its role byte from `record_bytes` where `held` says the files
    /// hold it, and 0 for every other id, asked in shuffled order.
    fn lengths_as(
        stores: &[&Store],
        want: &[(i64, Columns)],
        held: impl Fn(i64) -> bool,
        what: &str,
    ) {
        for store in stores {
            let bytes: std::collections::HashMap<i64, (u8, u8)> = record_bytes::held(store.conn())
                .into_iter()
                .map(|(id, c, r)| (id, (c, r)))
                .collect();
            let top = want.last().map_or(0, |w| w.0);
            let mut ids: Vec<i64> = (-1..top + 40).collect();
            // A fixed shuffle: the reader sorts what it is asked.
            ids.sort_by_key(|id| (id * 7_919) % 1_013);
            let read = |file: Option<Bytes>| match file {
                Some(mut f) => f.of(&ids),
                None => vec![0; ids.len()],
            };
            let (lengths, roles) = (read(Bytes::lengths(store)), read(Bytes::roles(store)));
            for (i, id) in ids.iter().enumerate() {
                let live = want.iter().find(|w| w.0 == *id);
                let expect = match live.filter(|_| held(*id)) {
                    Some(w) => {
                        let known = bytes.get(id).copied().unwrap_or((0, 0));
                        assert_ne!(known.0, 0, "{what}: record {id} has a length");
                        assert_eq!(known.1, codec::role_code(w.1.role), "{what}: record {id}");
                        known
                    }
                    None => (0, 0),
                };
                assert_eq!((lengths[i], roles[i]), expect, "{what}: record {id}");
            }
        }
    }

    fn entry_bytes(store: &Store, id: i64) -> Vec<u8> {
        let file = File::open(path_for(store.path())).expect("file");
        let mut e = vec![0u8; ENTRY];
        flat_file::read_at(&file, &mut e, offset(id)).expect("read");
        e
    }

    /// Stores the varied records `from..to` as this node's own.
    fn insert(store: &mut Store, origin: &str, from: i64, to: i64) {
        let mut ing = store.ingest(origin).expect("ingest");
        for i in from..to {
            ing.insert(&varied(i, Role::ALL.len()), None)
                .expect("insert");
        }
        ing.commit().expect("commit");
    }

    /// A store in a temporary folder with its own log and the varied
    /// records `0..n`; returns the folder, the store and its origin.
    fn store_of(n: i64) -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let origin = cairn_protocol::NodeId([7; 20]).to_string();
        store.ensure_log(&origin, 1_000).expect("own log");
        insert(&mut store, &origin, 0, n);
        (dir, store, origin)
    }

    #[test]
    fn entries_follow_writes_forgets_rewrites_and_a_lost_file() {
        let (_dir, mut store, origin) = store_of(1_300);
        let want = rows(store.conn());
        assert_eq!(want.len(), 1_300);
        assert!(want.iter().any(|w| w.1.stamp.decision), "decisions");
        assert!(want.iter().any(|w| w.1.stamp.ts.is_none()), "undated");
        assert!(want.iter().any(|w| w.1.role == Role::Note), "every role");

        // Nothing before the first write.
        assert!(Reader::open(&store).is_none());
        assert_eq!(store.write_columns().expect("write"), 1_300);
        // A daemon's reader of the same database, which maps the files
        // (store::held): it reads what the files' own readers read at
        // every step below, its mappings kept, grown and replaced.
        let mut held = Store::open_read_only(store.path()).expect("read-only");
        held.hold_flat_files(1 << 30);
        reads_as(&[&store, &held], &want, |_| true, "written");
        lengths_as(&[&store, &held], &want, |_| true, "written");
        let holds = held.held.as_ref().expect("holds");
        assert!(holds.mapped(Which::Columns) && holds.mapped(Which::Lengths));
        assert!(holds.mapped(Which::Roles));
        assert_eq!(store.write_columns().expect("again"), 0, "nothing new");

        // Records stored since are past the mark: read from their rows
        // until the next write, whatever the file holds there. A write
        // that is due only from more of them waits.
        insert(&mut store, &origin, 1_300, 1_400);
        assert_eq!(pending(store.conn(), store.path()).expect("pending"), 100);
        assert_eq!(store.write_columns_due(101).expect("not due"), 0);
        let top = want.last().expect("records").0;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path_for(store.path()))
            .expect("open");
        flat_file::write_at(&file, &[0x55; ENTRY * 10], offset(top + 1)).expect("junk");
        let want = rows(store.conn());
        reads_as(&[&store, &held], &want, |id| id <= top, "stored since");
        lengths_as(&[&store, &held], &want, |id| id <= top, "stored since");
        assert_eq!(store.write_columns_due(100).expect("due"), 100);
        assert_eq!(pending(store.conn(), store.path()).expect("pending"), 0);
        reads_as(&[&store, &held], &want, |_| true, "caught up");
        lengths_as(&[&store, &held], &want, |_| true, "caught up");

        // A snapshot taken before a write keeps the mark it read.
        let old_mark = read_mark(store.conn()).expect("mark").expect("a mark");
        assert_eq!(old_mark.upto, want.last().expect("records").0);

        // A forgotten record leaves no entry behind.
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let gone: Vec<i64> = want
            .iter()
            .filter(|w| {
                store
                    .conn()
                    .query_row(
                        "SELECT session_id = 's3' FROM sessions WHERE id = ?1",
                        [w.1.session],
                        |r| r.get::<_, bool>(0),
                    )
                    .expect("session")
            })
            .map(|w| w.0)
            .collect();
        let report = store.forget(&[target], 2_000).expect("forget");
        assert_eq!(report.records as usize, gone.len());
        let lengths = File::open(lengths_path_for(store.path())).expect("lengths");
        let roles = File::open(roles_path_for(store.path())).expect("roles");
        for id in &gone {
            assert_eq!(entry_bytes(&store, *id), vec![0; ENTRY], "forgotten {id}");
            for (file, kind) in [(&lengths, LENGTHS), (&roles, ROLES)] {
                let mut b = [9u8];
                flat_file::read_at(file, &mut b, kind.offset(*id)).expect("read");
                assert_eq!(b, [0], "forgotten {id}'s byte in {:?}", kind.magic);
            }
        }
        let left = rows(store.conn());
        reads_as(&[&store, &held], &left, |_| true, "forgotten");
        lengths_as(&[&store, &held], &left, |_| true, "forgotten");

        // Nor does a record a rewritten file no longer holds.
        let mut ing = store.ingest(&origin).expect("ingest");
        let (src, keep) = three_lines_of_a_file(&mut ing);
        ing.commit().expect("commit");
        assert_eq!(store.write_columns().expect("write"), 3);
        let before = rows(store.conn());
        let mut ing = store.ingest(&origin).expect("ingest");
        assert_eq!(ing.retain_source_records(src, &keep).expect("retain"), 2);
        ing.commit().expect("commit");
        let left = rows(store.conn());
        for (id, _) in before.iter().filter(|b| !left.iter().any(|l| l.0 == b.0)) {
            assert_eq!(entry_bytes(&store, *id), vec![0; ENTRY], "rewritten {id}");
        }
        reads_as(&[&store, &held], &left, |_| true, "a rewrite");
        lengths_as(&[&store, &held], &left, |_| true, "a rewrite");

        // A file another token names, or none, is not read, and the next
        // write makes it anew under a new token.
        let path = path_for(store.path());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        flat_file::write_at(&file, &[0xAB; 16], 16).expect("another token");
        reads_as(&[&store, &held], &left, |_| false, "another token");
        lengths_as(
            &[&store, &held],
            &left,
            |_| true,
            "the lengths file still matches",
        );
        assert_eq!(store.write_columns().expect("anew"), left.len() as u64);
        reads_as(&[&store, &held], &left, |_| true, "written anew");
        assert_ne!(
            read_mark(store.conn())
                .expect("mark")
                .expect("a mark")
                .token,
            old_mark.token
        );
        std::fs::remove_file(&path).expect("remove");
        reads_as(&[&store, &held], &left, |_| false, "no file");
        // Due however few records came since: every one waits.
        assert_eq!(
            store.write_columns_due(10_000).expect("anew"),
            left.len() as u64
        );
        reads_as(&[&store, &held], &left, |_| true, "written again");
        lengths_as(&[&store, &held], &left, |_| true, "written again");
        std::fs::remove_file(lengths_path_for(store.path())).expect("remove");
        std::fs::remove_file(roles_path_for(store.path())).expect("remove");
        lengths_as(
            &[&store, &held],
            &left,
            |_| false,
            "no lengths or roles file",
        );
        reads_as(
            &[&store, &held],
            &left,
            |_| true,
            "the columns file still matches",
        );
        assert_eq!(store.write_columns().expect("anew"), left.len() as u64);
        reads_as(&[&store, &held], &left, |_| true, "all anew");
        lengths_as(&[&store, &held], &left, |_| true, "all anew");
        // A database whose files came before the roles file (an older
        // cairn's) writes all three anew.
        std::fs::remove_file(roles_path_for(store.path())).expect("remove");
        assert_eq!(
            pending(store.conn(), store.path()).expect("pending"),
            i64::MAX
        );
        assert!(Bytes::roles(&store).is_none());
        assert_eq!(store.write_columns().expect("anew"), left.len() as u64);
        lengths_as(&[&store, &held], &left, |_| true, "roles anew");
    }

    #[test]
    fn files_that_cannot_be_zeroed_are_given_up_and_the_delete_goes_on() {
        let (_dir, mut store, _) = store_of(70);
        assert_eq!(store.write_columns().expect("write"), 70);
        // The lengths file cannot be opened for writing: a folder now.
        let lengths = lengths_path_for(store.path());
        std::fs::remove_file(&lengths).expect("remove");
        std::fs::create_dir(&lengths).expect("a folder");
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let report = store.forget(&[target], 2_000).expect("forget");
        assert_eq!(report.records, 10);
        assert_eq!(read_mark(store.conn()).expect("mark"), None, "given up");
        assert!(Reader::open(&store).is_none());
        // Written anew once they can be.
        assert!(store.write_columns().is_err(), "the folder is in the way");
        std::fs::remove_dir(&lengths).expect("remove the folder");
        assert_eq!(store.write_columns().expect("anew"), 60);
        assert_true_to(&store, "anew");
    }

    #[test]
    fn lengths_are_read_in_stretches_wherever_they_lie() {
        // A file of 600 KB whose byte at each id is a pattern, and ids
        // asked for close together, far apart (past a chunk), at the
        // chunk's edge, twice, and past the mark.
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l");
        let n: i64 = 600_000;
        let pattern = |id: i64| (id % 251) as u8 + 1;
        let mut bytes = vec![0u8; HEADER_LEN];
        bytes.extend((0..n).map(pattern));
        std::fs::write(&path, &bytes).expect("write");
        let upto = n - 1_000;
        let file = File::open(&path).expect("open");
        let mut l = Bytes {
            source: Source::File(file.try_clone().expect("clone")),
            upto,
            buf: Vec::new(),
            kind: LENGTHS,
        };
        let chunk = LENGTHS_CHUNK as i64;
        let gap = LENGTHS_GAP as i64;
        let mut ids: Vec<i64> = vec![
            5,
            6,
            6,
            7 + gap,
            8 + 2 * gap + 1,
            chunk - 1,
            chunk,
            chunk + 1,
            3 * chunk + 17,
            upto,
            upto + 1,
            n - 1,
            0,
            -4,
        ];
        ids.extend((0..2_000).map(|i| 1 + i * 271));
        ids.reverse();
        let got_by_reads = l.of(&ids);
        for (id, got) in ids.iter().zip(got_by_reads.iter().copied()) {
            let expect = match (1..=upto).contains(id) {
                true => pattern(*id),
                false => 0,
            };
            assert_eq!(got, expect, "id {id}");
        }
        assert!(l.buf.capacity() <= 2 * LENGTHS_CHUNK, "bounded buffer");
        assert_eq!(l.of(&[]), Vec::<u8>::new());
        // The same from a mapping of the file, as a daemon reads it.
        let key = held::Key {
            token: [3; 16],
            dim: 1,
            blank: 0,
            file: flat_file::identity(&file),
        };
        let mapped = held::Held::new(1 << 30)
            .entries(
                Which::Lengths,
                key,
                &file,
                HEADER_LEN as u64,
                upto as u64 + 1,
            )
            .expect("mapped");
        let mut m = Bytes {
            source: Source::Mapped(mapped),
            upto,
            buf: Vec::new(),
            kind: LENGTHS,
        };
        assert_eq!(m.of(&ids), got_by_reads);
        assert!(m.buf.is_empty(), "nothing read into the buffer");
    }

    #[test]
    fn an_entry_says_nothing_unless_whole() {
        let stamp = Stamp::of(Some(1_767_225_600_123), codec::DECISION);
        let e = Columns::entry(rusqlite::types::ValueRef::Text(b"user"), stamp, 42);
        let c = Columns::of(&e).expect("whole");
        assert_eq!((c.role, c.stamp, c.session), (Role::User, stamp, 42));
        // A role with no code, a session row past u32, none, a time too far
        // out for a word: zeros.
        for e in [
            Columns::entry(rusqlite::types::ValueRef::Text(b"robot"), stamp, 42),
            Columns::entry(rusqlite::types::ValueRef::Text(b"user"), stamp, 1 << 32),
            Columns::entry(rusqlite::types::ValueRef::Text(b"user"), stamp, 0),
            Columns::entry(
                rusqlite::types::ValueRef::Text(b"user"),
                Stamp::of(Some(i64::MAX), 0),
                42,
            ),
        ] {
            assert_eq!(e, [0; ENTRY]);
            assert_eq!(Columns::of(&e), None);
        }
        // Bytes no writer makes: an unknown role code, reserved bytes set.
        let mut bad = Columns::entry(rusqlite::types::ValueRef::Text(b"user"), stamp, 42);
        bad[12] = 0xee;
        assert_eq!(Columns::of(&bad), None);
        let mut bad = Columns::entry(rusqlite::types::ValueRef::Text(b"user"), stamp, 42);
        bad[15] = 1;
        assert_eq!(Columns::of(&bad), None);
        assert_eq!(
            Mark::decode(
                &Mark {
                    token: [3; 16],
                    upto: 9
                }
                .encode()
            )
            .map(|m| m.upto),
            Some(9)
        );
        assert_eq!(Mark::decode("zz 9"), None);
        assert_eq!(
            Mark::decode(&format!("{} -1", crate::hex::encode(&[3; 16]))),
            None
        );
    }
}
