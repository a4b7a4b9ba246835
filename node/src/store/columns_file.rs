//! The columns file (`cairn.db-columns`): per record id, what the ranker
//! and the filters need (role, time, decision mark, session, length
//! class, role byte), the one derived home of these facts; where it
//! cannot say, the reader asks `records`.
//!
//! Layout: the [`super::flat_file`] header (magic `cairnrc3`) alone in
//! the first 4 KiB, then sealed [`super::pages`] of [`PER_PAGE`] 16-byte
//! entries, record `id` in page `id / PER_PAGE`: the stamp word (u64 LE),
//! the session row (u32 LE), the role code, the length class, the role
//! byte, a zero byte. A zero field says nothing. `meta.columns_file`
//! (token, `upto`) vouches for every record up to `upto`; pages are written whole and synced before the
//! mark moves ([`Store::write_columns`]); a deleting path zeroes its
//! records' entries in its own transaction ([`zero`]) or drops the mark,
//! so a non-zero entry also says its record exists in the reader's
//! snapshot. The readers of one search read through one view of the
//! file ([`SearchView`]): mapped once, each page checked once. Must not:
//! write anything but this file and its mark.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;

use super::columns::{self, Stamp};
use super::derived::{self, Component};
use super::flat_file::{self, HEADER_LEN, RegionWriter};
use super::mapped::{self, Which};
use super::pages::{self, BODY, PAGE};
use super::{Store, StoreError, codec};
use crate::record::Role;

/// The file's magic.
const MAGIC: &[u8; 8] = Component::Columns.spec().magic;

/// Bytes per record.
const ENTRY: usize = 16;

/// Entries per page.
const PER_PAGE: usize = BODY / ENTRY;

/// Where an entry keeps the length class.
pub(crate) const LENGTH_AT: usize = 13;

/// Where an entry keeps the role byte.
pub(crate) const ROLE_AT: usize = 14;

/// Pages (the header's included) of the regions the file is written in
/// ([`flat_file::REGION`]): a writer writes a region at once where it
/// can, which leaves the kernel whole regions to cache and map as huge
/// pages, so a search that reads entries all over a large file takes few
/// page faults. A transaction writes to the end of one region.
const REGION_PAGES: u64 = flat_file::REGION / PAGE as u64;

/// The files older versions kept beside the database, removed when the
/// file is written anew.
const FORMER: [&str; 2] = ["-lengths", "-roles"];

fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The page holding record `id`'s entry, and where in the page.
fn place(id: i64) -> (u64, usize) {
    let id = id as u64;
    (
        id / PER_PAGE as u64,
        (id % PER_PAGE as u64) as usize * ENTRY,
    )
}

/// Where page `n` starts in the file, after the header's page.
fn page_offset(n: u64) -> u64 {
    (n + 1) * PAGE as u64
}

/// The page after the last of the region that page `n` lies in.
fn region_end(n: u64) -> u64 {
    ((n + 1) / REGION_PAGES + 1) * REGION_PAGES - 1
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
    /// columns and its length class; its first 13 bytes zero when it
    /// cannot hold them.
    fn entry(
        role: rusqlite::types::ValueRef<'_>,
        stamp: Stamp,
        session: i64,
        class: u8,
    ) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        e[LENGTH_AT] = class;
        e[ROLE_AT] = columns::role_byte(role);
        let (Some(code), Ok(session), word) = (
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
        e[12] = code;
        e
    }

    /// What an entry holds; `None` when it says nothing.
    pub(crate) fn of(e: &[u8]) -> Option<Columns> {
        let word = u64::from_le_bytes(e[..8].try_into().ok()?);
        let session = u32::from_le_bytes(e[8..12].try_into().ok()?);
        let role = Role::ALL
            .into_iter()
            .find(|r| codec::role_code(*r) == e[12])?;
        if session == 0 || e[ENTRY - 1] != 0 {
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
        derived::mark_text(&self.token, &[self.upto.into()])
    }

    fn decode(s: &str) -> Option<Mark> {
        let (token, [upto]) = derived::parse_mark(s)?;
        let upto = i64::try_from(upto).ok().filter(|u| *u >= 0)?;
        Some(Mark { token, upto })
    }

    /// Bytes of pages that hold the entries it vouches for.
    fn pages_len(&self) -> u64 {
        (place(self.upto).0 + 1) * PAGE as u64
    }
}

fn read_mark(conn: &Connection) -> rusqlite::Result<Option<Mark>> {
    let v = Component::Columns.read_mark(conn)?;
    Ok(v.as_deref().and_then(Mark::decode))
}

fn write_mark(conn: &Connection, mark: &Mark) -> rusqlite::Result<()> {
    Component::Columns.write_mark(conn, &mark.encode())
}

fn drop_mark(conn: &Connection) -> rusqlite::Result<()> {
    Component::Columns.drop_mark(conn)
}

fn header(token: &[u8; 16]) -> [u8; HEADER_LEN] {
    flat_file::header(MAGIC, ENTRY, token)
}

/// The file of the database at `db` when its header names `mark`'s token.
fn open_marked(db: &Path, mark: &Mark, write: bool) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(Component::Columns.path(db))
        .ok()?;
    let mut h = [0u8; HEADER_LEN];
    flat_file::read_at(&file, &mut h, 0).ok()?;
    (h == header(&mark.token)).then_some(file)
}

/// A new file for the database at `db`, with the header for `token`, put
/// in place of any other (and of the files older versions kept).
fn create(db: &Path, token: &[u8; 16]) -> Result<File, StoreError> {
    let path = Component::Columns.path(db);
    let (file, tmp) = flat_file::create_beside(&path).map_err(StoreError::writing(&path))?;
    let mut head = [0u8; PAGE];
    head[..HEADER_LEN].copy_from_slice(&header(token));
    flat_file::write_at(&file, &head, 0).map_err(StoreError::writing(&tmp))?;
    file.sync_data().map_err(StoreError::writing(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(StoreError::writing(&path))?;
    for former in FORMER {
        let _ = std::fs::remove_file(beside(db, former));
    }
    Ok(file)
}

/// The file as one snapshot's mark vouches for it: its pages mapped (the
/// store's kept mapping, see `store::mapped`; else one of its own) and
/// what checking them found.
/// Shared by the readers of one search ([`SearchView`]), so each page is
/// mapped once and checked once per search.
#[derive(Debug)]
struct View {
    map: mapped::Entries,
    token: [u8; 16],
    upto: i64,
    path: PathBuf,
    checked: Mutex<pages::Checked>,
    /// Whether a damaged page was logged.
    told: AtomicBool,
}

impl View {
    /// The file of `store`'s database as its snapshot vouches; `None` when
    /// there is none it vouches for or it cannot be mapped.
    fn open(store: &Store) -> Option<View> {
        let mark = read_mark(store.conn()).ok()??;
        let file = open_marked(store.path(), &mark, false)?;
        let len = mark.pages_len();
        let map = match &store.mappings {
            Some(mappings) => flat_file::identity(&file).and_then(|id| {
                let key = mapped::Key {
                    token: mark.token,
                    dim: ENTRY,
                    blank: 0,
                    file: Some(id),
                };
                mappings.entries(Which::Columns, key, &file, PAGE as u64, len)
            }),
            None => mapped::map_once(&file, PAGE as u64, len),
        }?;
        Some(View {
            map,
            token: mark.token,
            upto: mark.upto,
            path: Component::Columns.path(store.path()),
            checked: Mutex::default(),
            told: AtomicBool::new(false),
        })
    }

    /// Record `id`'s entry; `None` past the mark or in a page that fails
    /// its check.
    fn entry(&self, id: i64) -> Option<&[u8]> {
        if id < 1 || id > self.upto {
            return None;
        }
        let (n, at) = place(id);
        self.page(n).map(|page| &page[at..at + ENTRY])
    }

    /// The byte at `at` of the entries of `ids`, in their order, 0 where
    /// the file cannot say (as [`View::entry`]). A page is looked up (and
    /// checked, the first time) once for a run of ids on it, as a
    /// concept's matches mostly are, instead of once per id.
    fn bytes(&self, ids: &[i64], at: usize) -> Vec<u8> {
        let mut last: Option<(u64, Option<&[u8]>)> = None;
        ids.iter()
            .map(|&id| {
                if id < 1 || id > self.upto {
                    return 0;
                }
                let (n, off) = place(id);
                let page = match last {
                    Some((m, page)) if m == n => page,
                    _ => {
                        let page = self.page(n);
                        last = Some((n, page));
                        page
                    }
                };
                page.map_or(0, |p| p[off + at])
            })
            .collect()
    }

    /// Page `n`, whole; `None` past the mapping or when it fails its check.
    fn page(&self, n: u64) -> Option<&[u8]> {
        let from = usize::try_from(n).ok()? * PAGE;
        let page = self.map.get(from..from + PAGE)?;
        self.intact(n, page).then_some(page)
    }

    /// Whether page `n` (`page`, its bytes) passes its check, checked
    /// now unless a reader of this view checked it before.
    fn intact(&self, n: u64, page: &[u8]) -> bool {
        let checked = || self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ok) = checked().of(n) {
            return ok;
        }
        // A delete seals a page again while a mapping may read it: a page
        // caught half written is read once more.
        let ok = pages::intact(&self.token, n, page) || {
            std::thread::yield_now();
            pages::intact(&self.token, n, page)
        };
        checked().note(n, ok);
        if !ok && !self.told.swap(true, AtomicOrdering::Relaxed) {
            tracing::error!(
                path = %self.path.display(),
                page = n,
                "a damaged page of a derived file: its records are read from the database, and the next `cairn index` writes the file anew"
            );
            super::derived::note_damage(&self.path);
        }
        ok
    }
}

/// The view of the columns file a search under way shares between its
/// readers, opened by the first of them: it lives from
/// `Store::read_snapshot` to the end of that snapshot, when the mark it
/// was opened under can no longer move. Outside a search, each reader
/// opens its own view.
#[derive(Debug, Default)]
pub(crate) struct SearchView {
    scope: Mutex<Scope>,
}

/// Where a store is with its search's view.
#[derive(Debug, Default)]
enum Scope {
    /// No search under way: each reader opens its own view.
    #[default]
    Outside,
    /// A search started and no reader asked yet.
    Unopened,
    /// The search's view (`None`: its snapshot vouches for no file).
    Opened(Option<Arc<View>>),
}

impl SearchView {
    /// A search starts: its first reader opens the view.
    pub(crate) fn begin(&self) {
        *self.lock() = Scope::Unopened;
    }

    /// The search ended: its view is let go.
    pub(crate) fn end(&self) {
        *self.lock() = Scope::Outside;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scope> {
        self.scope.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The view a reader of `store` reads through: the search's, else its own;
/// `None` when its snapshot vouches for no file or it cannot be mapped.
fn view_of(store: &Store) -> Option<Arc<View>> {
    let mut scope = store.search_columns.lock();
    match &*scope {
        Scope::Outside => View::open(store).map(Arc::new),
        Scope::Opened(view) => view.clone(),
        Scope::Unopened => {
            let view = View::open(store).map(Arc::new);
            *scope = Scope::Opened(view.clone());
            view
        }
    }
}

/// A search's reader of the ranker's columns.
pub(crate) struct Reader {
    view: Arc<View>,
}

impl Reader {
    /// The file of `store`'s database, read as its snapshot vouches;
    /// `None` when there is none it vouches for.
    pub(crate) fn open(store: &Store) -> Option<Reader> {
        Some(Reader {
            view: view_of(store)?,
        })
    }

    /// Record `id`'s columns; `None` when the file cannot say (past the
    /// mark, an entry that says nothing, a damaged page): ask `records`.
    pub(crate) fn columns(&mut self, id: i64) -> Option<Columns> {
        Columns::of(self.view.entry(id)?)
    }

    /// Record `id`'s byte at `at` ([`LENGTH_AT`], [`ROLE_AT`]); 0 when
    /// the file cannot say.
    pub(crate) fn byte(&mut self, id: i64, at: usize) -> u8 {
        self.view.entry(id).map_or(0, |e| e[at])
    }

    /// [`Reader::byte`] of each of `ids`, in their order.
    pub(crate) fn bytes(&self, ids: &[i64], at: usize) -> Vec<u8> {
        self.view.bytes(ids, at)
    }
}

/// Every record within `within` (ascending, disjoint ranges of ids) that
/// exists, handed to `take` in ascending order with what `judge` makes of
/// its entry in `file`, or where that cannot say (`None`: no file, past
/// its mark, a page that fails its check, or `judge` says so, as for a
/// zero byte) what `from_row` makes of its row. `rows` selects `id` and
/// the columns `from_row` reads, `WHERE id BETWEEN ?1 AND ?2 ORDER BY
/// id`: a stretch of ids the file cannot say of is one range query. So
/// the answer is the rows' own, only slower where the file cannot say.
pub(crate) fn each_within<T>(
    conn: &Connection,
    mut file: Option<&mut Reader>,
    within: &[(i64, i64)],
    judge: impl Fn(&[u8]) -> Option<T>,
    (rows, from_row): (&str, impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>),
    mut take: impl FnMut(i64, T),
) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached(rows)?;
    let mut read = |stretch: Option<(i64, i64)>, take: &mut dyn FnMut(i64, T)| {
        let Some((a, b)) = stretch else {
            return Ok::<(), StoreError>(());
        };
        let mut found = stmt.query((a, b))?;
        while let Some(r) = found.next()? {
            take(r.get(0)?, from_row(r)?);
        }
        Ok(())
    };
    let upto = file.as_ref().map_or(0, |f| f.view.upto);
    // The ids just before the one at hand that the file cannot say of.
    let mut unknown: Option<(i64, i64)> = None;
    for &(first, last) in within {
        let first = first.max(1);
        let end = last.min(upto);
        let mut id = first;
        // A page at a time: each checked once, its entries read in place.
        while id <= end {
            let n = place(id).0;
            let stop = end.min(((n + 1) * PER_PAGE as u64 - 1) as i64);
            let page = file.as_mut().and_then(|f| f.view.page(n));
            for id in id..=stop {
                let at = place(id).1;
                match page.and_then(|p| judge(&p[at..at + ENTRY])) {
                    Some(v) => {
                        read(unknown.take(), &mut take)?;
                        take(id, v);
                    }
                    None => {
                        unknown = Some(match unknown {
                            Some((a, b)) if b + 1 == id => (a, id),
                            other => {
                                read(other, &mut take)?;
                                (id, id)
                            }
                        });
                    }
                }
            }
            id = stop + 1;
        }
        // Past the mark: the rest of the range from the rows.
        let tail = first.max(upto + 1);
        if tail <= last {
            read(unknown.take(), &mut take)?;
            read(Some((tail, last)), &mut take)?;
        }
    }
    read(unknown, &mut take)
}

/// A search's reader of one byte of each entry: the length class or the
/// role byte.
pub(crate) struct Bytes {
    view: Arc<View>,
    at: usize,
}

impl Bytes {
    /// The length classes of `store`'s database, read as its snapshot
    /// vouches; `None` when there is no file it vouches for.
    #[cfg(test)]
    pub(crate) fn lengths(store: &Store) -> Option<Bytes> {
        Some(Bytes {
            view: view_of(store)?,
            at: LENGTH_AT,
        })
    }

    /// The role bytes, as [`Bytes::lengths`].
    pub(crate) fn roles(store: &Store) -> Option<Bytes> {
        Some(Bytes {
            view: view_of(store)?,
            at: ROLE_AT,
        })
    }

    /// The bytes of `ids` (in any order), each 0 where the file cannot
    /// say (past the mark, not known, a deleted record, a damaged page).
    pub(crate) fn of(&mut self, ids: &[i64]) -> Vec<u8> {
        self.view.bytes(ids, self.at)
    }
}

/// Pages being written, page `n` being filled: each sealed once the
/// writing moves past it and handed to a [`RegionWriter`], which writes
/// whole regions at once.
struct Writing<'f> {
    out: RegionWriter<'f>,
    path: &'f Path,
    token: [u8; 16],
    n: u64,
    page: Vec<u8>,
}

impl<'f> Writing<'f> {
    /// Pages of `file` from page `first` on.
    fn new(file: &'f File, path: &'f Path, token: [u8; 16], first: u64) -> Writing<'f> {
        Writing {
            out: RegionWriter::new(file, page_offset(first)),
            path,
            token,
            n: first,
            page: vec![0; PAGE],
        }
    }

    /// The bytes of record `id`'s entry, every page before its own
    /// (empty ones included) sealed and handed on.
    fn entry(&mut self, id: i64) -> Result<&mut [u8], StoreError> {
        let (n, at) = place(id);
        while self.n < n {
            self.next_page()?;
        }
        Ok(&mut self.page[at..at + ENTRY])
    }

    /// Seals the page being filled and hands it on; the next starts empty.
    fn next_page(&mut self) -> Result<(), StoreError> {
        pages::seal(&self.token, self.n, &mut self.page);
        self.out
            .write_all(&self.page)
            .map_err(StoreError::writing(self.path))?;
        self.page.fill(0);
        self.n += 1;
        Ok(())
    }

    /// Writes out the page being filled and all that waits.
    fn finish(mut self) -> Result<(), StoreError> {
        self.next_page()?;
        self.out.flush().map_err(StoreError::writing(self.path))
    }
}

/// Writes the entries the file lacks, to the end of the region of the
/// first of them, in one transaction; returns how many (0: the file is
/// complete).
pub(crate) fn write_step(conn: &Connection, db: &Path) -> Result<u64, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let newest: Option<i64> = tx.query_row("SELECT max(id) FROM records", [], |r| r.get(0))?;
    let Some(newest) = newest else {
        return Ok(0);
    };
    let found = read_mark(&tx)?.and_then(|m| Some((open_marked(db, &m, true)?, m)));
    let (file, mut mark) = match found {
        Some((_, m)) if m.upto >= newest => return Ok(0),
        Some(found) => found,
        None => {
            let token = flat_file::new_token(b"cairn columns file", db);
            (create(db, &token)?, Mark { token, upto: 0 })
        }
    };
    let path = Component::Columns.path(db);
    // From the first record of the page the next entry goes in: the page
    // is written whole again, sealed with what it holds now.
    let first = place(mark.upto + 1).0;
    let mut w = Writing::new(&file, &path, mark.token, first);
    let mut stmt = tx.prepare_cached(
        "SELECT id, role, ts, session, flags, text FROM records WHERE id >= ?1 ORDER BY id",
    )?;
    let before = mark.upto;
    let from = (first * PER_PAGE as u64) as i64;
    let mut rows = stmt.query([from])?;
    let mut written = 0u64;
    let mut end = None;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        // The step ends with the region of its first new record.
        let page = place(id).0;
        if id > before && page >= *end.get_or_insert(region_end(page)) {
            break;
        }
        let flags: i64 = r.get(4)?;
        let stamp = Stamp::of(r.get(2)?, flags);
        // A text that cannot state its length leaves the class unknown:
        // a search then reads the row.
        let class = columns::stored_len(r.get_ref(5)?, flags).map_or(0, columns::class_of);
        let e = Columns::entry(r.get_ref(1)?, stamp, r.get(3)?, class);
        w.entry(id)?.copy_from_slice(&e);
        if id > before {
            written += 1;
        }
        mark.upto = mark.upto.max(id);
    }
    w.finish()?;
    drop(rows);
    drop(stmt);
    file.sync_data().map_err(StoreError::writing(&path))?;
    write_mark(&tx, &mark)?;
    tx.commit()?;
    Ok(written)
}

/// Zeroes the entries of `ids` the file of `conn`'s database holds (the
/// records a delete removes, in its transaction), sealing their pages
/// again. A file that cannot be zeroed, or a page that already fails its
/// check, loses the file its mark in that transaction instead, so the
/// delete is never stopped by it and no damaged page is sealed as good.
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
    let mut held: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|&id| id >= 1 && id <= mark.upto)
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    held.sort_unstable();
    let db = Path::new(db);
    let zeroed = || -> std::io::Result<()> {
        let file = open_marked(db, &mark, true).ok_or(std::io::ErrorKind::NotFound)?;
        let mut page = vec![0u8; PAGE];
        let mut i = 0;
        while i < held.len() {
            let n = place(held[i]).0;
            flat_file::read_at(&file, &mut page, page_offset(n))?;
            if !pages::intact(&mark.token, n, &page) {
                return Err(std::io::Error::other(format!("page {n} fails its check")));
            }
            while i < held.len() && place(held[i]).0 == n {
                let at = place(held[i]).1;
                page[at..at + ENTRY].fill(0);
                i += 1;
            }
            pages::seal(&mark.token, n, &mut page);
            flat_file::write_at(&file, &page, page_offset(n))?;
        }
        file.sync_data()
    };
    if let Err(e) = zeroed() {
        // A file that cannot be zeroed is vouched for no more (in this
        // same transaction): the delete goes on, and the next write makes
        // it anew.
        tracing::warn!(error = %e, path = %Component::Columns.path(db).display(), "could not zero deleted records' columns; the columns file is given up");
        drop_mark(conn)?;
    }
    Ok(())
}

/// How many records past the mark wait for their entries, read without
/// the write lock; `i64::MAX` when the file is missing or does not match
/// the mark, so that it is written anew however few records there are.
fn pending(conn: &Connection, db: &Path) -> Result<i64, StoreError> {
    let newest: Option<i64> = conn.query_row("SELECT max(id) FROM records", [], |r| r.get(0))?;
    let Some(newest) = newest else {
        return Ok(0);
    };
    let upto = match read_mark(conn)? {
        Some(m) if open_marked(db, &m, false).is_some() => m.upto,
        _ => return Ok(i64::MAX),
    };
    Ok((newest - upto).max(0))
}

/// What checking a derived file found wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file.
    pub path: PathBuf,
    /// What was wrong.
    pub why: String,
}

impl super::Store {
    /// [`Store::write_columns`] once at least `at_least` records wait for
    /// their entries (or the file must be written anew); else nothing, and
    /// searches read those few records' rows. Returns how many it wrote.
    pub fn write_columns_due(&self, at_least: i64) -> Result<u64, StoreError> {
        match pending(&self.conn, &self.path)? {
            0 => Ok(0),
            n if n < at_least => Ok(0),
            _ => self.write_columns(),
        }
    }

    /// Writes the columns file's entries of every record it lacks, a
    /// region at a time; returns how many it wrote.
    pub fn write_columns(&self) -> Result<u64, StoreError> {
        let mut written = 0;
        loop {
            match write_step(&self.conn, &self.path)? {
                0 => return Ok(written),
                n => written += n,
            }
        }
    }

    /// Checks every page of the columns file the database vouches for;
    /// when one fails (or the file is cut short or its header changed),
    /// the database vouches for it no more, so that the next
    /// [`Store::write_columns`] writes it anew, and says what was wrong.
    /// A missing file is no damage: it is written anew all the same.
    pub fn check_columns(&self) -> Result<Option<Damage>, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(
            &self.conn,
            rusqlite::TransactionBehavior::Immediate,
        )?;
        let Some(mark) = read_mark(&tx)? else {
            return Ok(None);
        };
        let path = Component::Columns.path(&self.path);
        let why = match open_marked(&self.path, &mark, false) {
            // None, or an older version's: written anew all the same.
            None if !path.exists() || Component::Columns.is_former(&path) => {
                return Ok(None);
            }
            None => Some("its header does not match the database".to_owned()),
            Some(file) => bad_pages(&file, &mark),
        };
        let Some(why) = why else {
            return Ok(None);
        };
        drop_mark(&tx)?;
        tx.commit()?;
        Ok(Some(Damage { path, why }))
    }
}

/// What is wrong with the pages of `file` that `mark` vouches for, if
/// anything.
fn bad_pages(file: &File, mark: &Mark) -> Option<String> {
    let total = mark.pages_len() / PAGE as u64;
    let mut buf = vec![0u8; REGION_PAGES as usize * PAGE];
    let mut bad = Vec::new();
    let mut n = 0;
    while n < total {
        let count = (total - n).min(REGION_PAGES);
        let chunk = &mut buf[..count as usize * PAGE];
        if flat_file::read_at(file, chunk, page_offset(n)).is_err() {
            return Some(format!("it is cut short before page {n} of {total}"));
        }
        bad.extend(pages::damaged(&mark.token, n, chunk));
        n += count;
    }
    match bad.as_slice() {
        [] => None,
        [first, ..] => Some(format!(
            "{} of its {total} pages fail their checksum (the first: page {first})",
            bad.len()
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::Store;

    /// Every record's length class (from its decoded text) and role byte,
    /// by id: what the file should hold.
    pub(crate) fn expected_bytes(conn: &Connection) -> std::collections::HashMap<i64, (u8, u8)> {
        let mut stmt = conn
            .prepare("SELECT id, flags, text, role FROM records ORDER BY id")
            .expect("records");
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    columns::role_byte(r.get_ref(3)?),
                ))
            })
            .expect("rows");
        rows.map(|row| {
            let (id, flags, text, role) = row.expect("row");
            let class = columns::class_of(codec::decode(conn, &text, flags).len());
            (id, (class, role))
        })
        .collect()
    }

    /// Asserts that `store`'s columns file, as far as their mark, give
    /// every record its row's columns and its text's length, and hold
    /// nothing for an id no record has (a record deleted after they were
    /// written included).
    pub(crate) fn assert_true_to(store: &Store, what: &str) {
        let conn = store.conn();
        let mark = read_mark(conn).expect("mark").expect("a mark");
        let live = rows(conn);
        let bytes = expected_bytes(conn);
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

    /// A Claude Code record of `session` with `role`, time `ts` and `text`.
    pub(crate) fn record(
        session: &str,
        role: Role,
        ts: Option<i64>,
        text: &str,
    ) -> crate::record::Record {
        let mut r = crate::record::Record::new("claude-code", session, role, text);
        r.time_ms = ts;
        r
    }

    /// The `i`th of a run of records in seven sessions, undated ones, old
    /// ones and decisions among them, in the first `roles` roles in turn.
    pub(crate) fn varied(i: i64, roles: usize) -> crate::record::Record {
        let ts = match i % 5 {
            0 => None,
            1 => Some(-86_400_000 * i),
            _ => Some(1_767_225_600_000 + 61_000 * i),
        };
        let text = match i % 4 {
            0 => format!("we decided to pin hyper to 0.14, note {i}"),
            _ => format!("the queue worker retries the job, line {i}"),
        };
        record(
            &format!("s{}", i % 7),
            Role::ALL[i as usize % roles],
            ts,
            &text,
        )
    }

    /// Stores three lines of one file (`/tmp/x.jsonl`) through `ing`;
    /// returns the file's source id and the hashes a rewrite keeps (the
    /// first line's), for `retain_source_records` to delete the other two.
    pub(crate) fn three_lines_of_a_file(
        ing: &mut crate::store::Ingest<'_>,
    ) -> (i64, std::collections::HashSet<[u8; 32]>) {
        let src = ing
            .source("claude-code", "/tmp/x.jsonl", "lines")
            .expect("source");
        for i in 0..3 {
            let r = record(
                "rewritten",
                Role::User,
                Some(5_000 + i),
                &format!("line {i}"),
            );
            ing.insert(&r, Some(src.id)).expect("insert");
        }
        let keep = [record("rewritten", Role::User, Some(5_000), "line 0").content_hash()]
            .into_iter()
            .collect();
        (src.id, keep)
    }

    /// Applies `f` to every entry of `store`'s columns file in place, and
    /// seals the pages again when `seal` (as a writer would); otherwise
    /// the change is damage.
    pub(crate) fn rewrite_entries(store: &Store, seal: bool, f: impl Fn(&mut [u8])) {
        rewrite_entries_by_id(store, seal, |_, e| f(e));
    }

    /// [`rewrite_entries`], `f` told each entry's record id.
    pub(crate) fn rewrite_entries_by_id(store: &Store, seal: bool, f: impl Fn(i64, &mut [u8])) {
        let mark = read_mark(store.conn()).expect("mark").expect("a mark");
        let file = open_marked(store.path(), &mark, true).expect("file");
        let mut page = vec![0u8; PAGE];
        for n in 0..mark.pages_len() / PAGE as u64 {
            flat_file::read_at(&file, &mut page, page_offset(n)).expect("read");
            for (i, e) in page[..BODY].chunks_mut(ENTRY).enumerate() {
                f((n as usize * PER_PAGE + i) as i64, e);
            }
            if seal {
                pages::seal(&mark.token, n, &mut page);
            }
            flat_file::write_at(&file, &page, page_offset(n)).expect("write");
        }
    }

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

    /// Asserts that the length classes and the role bytes, read through each of
    /// `stores`, give every record of `want` its class from its text and
    /// its role byte where `held` says the file holds it, and 0 for every
    /// other id, asked in shuffled order.
    fn lengths_as(
        stores: &[&Store],
        want: &[(i64, Columns)],
        held: impl Fn(i64) -> bool,
        what: &str,
    ) {
        for store in stores {
            let bytes = expected_bytes(store.conn());
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
        let file = File::open(Component::Columns.path(store.path())).expect("file");
        let mut e = vec![0u8; ENTRY];
        let (n, at) = place(id);
        flat_file::read_at(&file, &mut e, page_offset(n) + at as u64).expect("read");
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
        // A daemon's reader of the same database, which maps the file
        // (store::mapped): it reads what a fresh reader reads at every step
        // below, its mapping kept, grown and replaced.
        let held = Store::open_read_only(store.path()).expect("read-only");
        reads_as(&[&store, &held], &want, |_| true, "written");
        lengths_as(&[&store, &held], &want, |_| true, "written");
        let holds = held.mappings.as_ref().expect("holds");
        assert!(holds.mapped(Which::Columns));
        assert_eq!(store.write_columns().expect("again"), 0, "nothing new");
        assert_true_to(&store, "written");

        // Records stored since are past the mark: read from their rows
        // until the next write, whatever the file holds there. A write
        // that is due only from more of them waits.
        insert(&mut store, &origin, 1_300, 1_400);
        assert_eq!(pending(store.conn(), store.path()).expect("pending"), 100);
        assert_eq!(store.write_columns_due(101).expect("not due"), 0);
        let top = want.last().expect("records").0;
        let want = rows(store.conn());
        reads_as(&[&store, &held], &want, |id| id <= top, "stored since");
        lengths_as(&[&store, &held], &want, |id| id <= top, "stored since");
        assert_eq!(store.write_columns_due(100).expect("due"), 100);
        assert_eq!(pending(store.conn(), store.path()).expect("pending"), 0);
        reads_as(&[&store, &held], &want, |_| true, "caught up");
        lengths_as(&[&store, &held], &want, |_| true, "caught up");
        assert_eq!(store.check_columns().expect("check"), None, "caught up");

        // A forgotten record leaves no entry behind.
        let old_mark = read_mark(store.conn()).expect("mark").expect("a mark");
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
        for id in &gone {
            assert_eq!(entry_bytes(&store, *id), vec![0; ENTRY], "forgotten {id}");
        }
        let left = rows(store.conn());
        reads_as(&[&store, &held], &left, |_| true, "forgotten");
        lengths_as(&[&store, &held], &left, |_| true, "forgotten");
        assert_eq!(store.check_columns().expect("check"), None, "resealed");

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
        // write makes it anew under a new token; the files older versions
        // kept go with it.
        let path = Component::Columns.path(store.path());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        flat_file::write_at(&file, &[0xAB; 16], 16).expect("another token");
        reads_as(&[&store, &held], &left, |_| false, "another token");
        lengths_as(&[&store, &held], &left, |_| false, "another token");
        for former in FORMER {
            std::fs::write(beside(store.path(), former), b"old").expect("former");
        }
        assert_eq!(store.write_columns().expect("anew"), left.len() as u64);
        for former in FORMER {
            assert!(!beside(store.path(), former).exists(), "{former} removed");
        }
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
        assert_eq!(store.check_columns().expect("check"), None, "missing");
        // Due however few records came since: every one waits.
        assert_eq!(
            store.write_columns_due(10_000).expect("anew"),
            left.len() as u64
        );
        reads_as(&[&store, &held], &left, |_| true, "written again");
        lengths_as(&[&store, &held], &left, |_| true, "written again");
        assert_true_to(&store, "written again");
    }

    #[test]
    fn each_transaction_writes_to_the_end_of_a_region() {
        let (_dir, store, _) = store_of(3_000);
        let mut next = Vec::new();
        while write_step(store.conn(), store.path()).expect("step") > 0 {
            let mark = read_mark(store.conn()).expect("mark").expect("a mark");
            next.push(page_offset(place(mark.upto + 1).0));
        }
        // Every step but the last stopped at a region's end, so the next
        // one writes the following region from its first byte.
        let region = REGION_PAGES * PAGE as u64;
        let (_, full) = next.split_last().expect("steps");
        assert!(full.len() >= 2, "{next:?}");
        for at in full {
            assert_eq!(at % region, 0, "{next:?}");
        }
        assert_true_to(&store, "in regions");
    }

    fn file_of(path: &Path) -> File {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open")
    }

    #[test]
    fn a_damaged_page_is_never_read_and_the_check_has_it_written_anew() {
        let (_dir, store, _) = store_of(1_300);
        assert_eq!(store.write_columns().expect("write"), 1_300);
        let want = rows(store.conn());
        let path = Component::Columns.path(store.path());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        let held = Store::open_read_only(store.path()).expect("read-only");
        // A few bytes changed in page 1, page 3 zeroed whole (a lost
        // write), a torn write in the last page: those pages' records
        // are read from their rows, every other from the file.
        let bad = |id: i64| [1, 3, 5].contains(&place(id).0);
        flat_file::write_at(&file, &[0x5a; 3], page_offset(1) + 700).expect("damage");
        flat_file::write_at(&file, &[0; PAGE], page_offset(3)).expect("zero");
        flat_file::write_at(&file, &[0x11; 9], page_offset(5) + 10).expect("torn");
        assert_eq!(place(want.last().expect("records").0).0, 5, "six pages");
        reads_as(&[&store, &held], &want, |id| !bad(id), "damaged");
        lengths_as(&[&store, &held], &want, |id| !bad(id), "damaged");
        // A delete does not seal a damaged page as good: the file is given up.
        let (_dir2, mut other, _) = store_of(600);
        other.write_columns().expect("write");
        let p2 = Component::Columns.path(other.path());
        let f2 = std::fs::OpenOptions::new()
            .write(true)
            .open(&p2)
            .expect("open");
        flat_file::write_at(&f2, &[0x77; 2], page_offset(0) + 40).expect("damage");
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s0".into(),
        };
        other.forget(&[target], 2_000).expect("forget");
        assert_eq!(read_mark(other.conn()).expect("mark"), None, "given up");
        // The check names the file and what was wrong, and the next write
        // makes it anew.
        let damage = store.check_columns().expect("check").expect("damage");
        assert_eq!(damage.path, path);
        assert!(damage.why.contains("3 of its 6 pages"), "{}", damage.why);
        assert!(Reader::open(&store).is_none(), "vouched for no more");
        assert_eq!(store.write_columns().expect("anew"), 1_300);
        assert_eq!(store.check_columns().expect("check"), None);
        reads_as(&[&store, &held], &want, |_| true, "written anew");
        assert_true_to(&store, "written anew");
        // A file cut short, or whose header changed, is named too.
        let len = std::fs::metadata(&path).expect("meta").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(len - 100)
            .expect("cut");
        let damage = store.check_columns().expect("check").expect("cut short");
        assert!(damage.why.contains("cut short"), "{}", damage.why);
        store.write_columns().expect("anew");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        flat_file::write_at(&file, b"cairnXX2", 0).expect("magic");
        let damage = store.check_columns().expect("check").expect("header");
        assert!(damage.why.contains("header"), "{}", damage.why);
        // An older version's file is written anew without a word.
        store.write_columns().expect("anew");
        flat_file::write_at(&file_of(&path), b"cairnrc1", 0).expect("magic");
        assert_eq!(store.check_columns().expect("check"), None, "former");
        assert_eq!(store.write_columns().expect("anew"), 1_300);
    }

    #[test]
    fn a_file_that_cannot_be_zeroed_is_given_up_and_the_delete_goes_on() {
        let (_dir, mut store, _) = store_of(70);
        assert_eq!(store.write_columns().expect("write"), 70);
        // The file cannot be opened for writing: a folder now.
        let path = Component::Columns.path(store.path());
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("a folder");
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let report = store.forget(&[target], 2_000).expect("forget");
        assert_eq!(report.records, 10);
        assert_eq!(read_mark(store.conn()).expect("mark"), None, "given up");
        assert!(Reader::open(&store).is_none());
        // Written anew once it can be; until then the error names it.
        let err = store.write_columns().expect_err("the folder is in the way");
        assert!(err.to_string().contains("-columns"), "{err}");
        std::fs::remove_dir(&path).expect("remove the folder");
        assert_eq!(store.write_columns().expect("anew"), 60);
        assert_true_to(&store, "anew");
    }

    #[test]
    fn the_readers_of_one_search_share_its_view_and_the_next_search_opens_one_anew() {
        let (_dir, mut store, origin) = store_of(600);
        store.write_columns().expect("write");
        {
            let _snapshot = store.read_snapshot().expect("snapshot");
            let columns = Reader::open(&store).expect("a file");
            let roles = Bytes::roles(&store).expect("a file");
            assert!(
                Arc::ptr_eq(&columns.view, &roles.view),
                "one mapping, each page checked once, per search"
            );
        }
        // Outside a search each reader opens its own.
        let (a, b) = (Reader::open(&store), Reader::open(&store));
        let (a, b) = (a.expect("a file"), b.expect("a file"));
        assert!(!Arc::ptr_eq(&a.view, &b.view));
        drop((a, b));
        // A search after more were written reads them: the last search's
        // view, whose mark stopped at 600, went with it.
        insert(&mut store, &origin, 600, 900);
        store.write_columns().expect("write");
        let _snapshot = store.read_snapshot().expect("snapshot");
        let mut reader = Reader::open(&store).expect("a file");
        let want = rows(store.conn());
        let (newest, columns) = want.last().expect("rows");
        assert!(*newest > 600, "{newest}");
        assert_eq!(reader.columns(*newest), Some(*columns));
    }

    #[test]
    fn an_entry_says_nothing_unless_whole() {
        let stamp = Stamp::of(Some(1_767_225_600_123), codec::DECISION);
        let user = rusqlite::types::ValueRef::Text(b"user");
        let e = Columns::entry(user, stamp, 42, 9);
        let c = Columns::of(&e).expect("whole");
        assert_eq!((c.role, c.stamp, c.session), (Role::User, stamp, 42));
        assert_eq!(
            (e[LENGTH_AT], e[ROLE_AT]),
            (9, codec::role_code(Role::User))
        );
        // A role with no code, a session row past u32, none, a time too far
        // out for a word: the columns say nothing; the length and the role
        // byte stay.
        let robot = rusqlite::types::ValueRef::Text(b"robot");
        for (e, role) in [
            (Columns::entry(robot, stamp, 42, 9), columns::OTHER_ROLE),
            (
                Columns::entry(user, stamp, 1 << 32, 9),
                codec::role_code(Role::User),
            ),
            (
                Columns::entry(user, stamp, 0, 9),
                codec::role_code(Role::User),
            ),
            (
                Columns::entry(user, Stamp::of(Some(i64::MAX), 0), 42, 9),
                codec::role_code(Role::User),
            ),
        ] {
            assert_eq!(e[..LENGTH_AT], [0; LENGTH_AT]);
            assert_eq!((e[LENGTH_AT], e[ROLE_AT], e[15]), (9, role, 0));
            assert_eq!(Columns::of(&e), None);
        }
        // Bytes no writer makes: an unknown role code, the last byte set.
        let mut bad = Columns::entry(user, stamp, 42, 9);
        bad[12] = 0xee;
        assert_eq!(Columns::of(&bad), None);
        let mut bad = Columns::entry(user, stamp, 42, 9);
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
