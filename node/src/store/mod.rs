//! The node's SQLite database and the flat files beside it: records,
//! sessions, per-source file state, redaction counts, the full-text
//! indexes, origin logs and tombstones for sync, meaning vectors, and the
//! runs and flat files search reads instead of rows.
//!
//! This module is the only code that writes to the database and those
//! files. It stores what it is given: redaction happens before an indexed
//! record reaches it (see `crate::indexer`); a record received from a peer
//! is redacted again by [`wire`] before it is stored, and a stored one
//! again before it is sent. Other modules read through its named methods
//! (`filter`, `candidates`, `ranker`, `period`, `hits`, `read`, `browse`);
//! none outside it runs SQL on the database.

mod apply;
mod backfill;
mod browse;
pub(crate) mod bulk;
mod catch_up;
mod cells;
#[cfg(test)]
pub(crate) use cells::covered_in_file as cells_covered;
pub(crate) mod candidates;
pub mod codec;
pub(crate) mod columns;
pub(crate) mod columns_file;
pub(crate) mod derived;
mod dict;
pub mod filter;
mod flat_file;
mod forget;
mod fts;
mod hash_index;
#[cfg(test)]
mod hash_index_tests;
mod hits;
mod ingest;
mod insert;
mod log;
mod mapped;
#[cfg(test)]
mod open_tests;
mod pages;
pub(crate) mod period;
pub(crate) mod ranker;
mod read;
#[cfg(test)]
mod read_api_tests;
mod redacted_with;
pub(crate) mod runs;
mod schema;
mod session_lookup;
pub(crate) mod sketch;
pub mod survey;
#[cfg(test)]
mod sync_tests;
pub mod trust;
mod upgrade_fields;
pub(crate) mod vector_file;
pub(crate) mod vectors;
pub mod wire;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// What to call before a database made by an older cairn is upgraded.
static UPGRADE_NOTICE: std::sync::OnceLock<fn(&Path, u32, u32)> = std::sync::OnceLock::new();

/// Sets, once per process, what [`Store::open`] calls (with the database,
/// its format version and this build's) before it upgrades a database made
/// by an older cairn: a one-time rewrite that takes a while on a large
/// index, which a front end may want to announce.
pub fn set_upgrade_notice(notice: fn(&Path, u32, u32)) {
    let _ = UPGRADE_NOTICE.set(notice);
}

pub use apply::{ApplyError, ApplyReport, ApplyRequest, Blame, PreparedBatch, Preparer};
pub use browse::{Activity, DayCount, Origin, ProjectCount, RecentFilter};
pub use catch_up::{CATCH_UP_MIN, CatchUp};
pub use columns_file::Damage;
pub use derived::Component;
pub use dict::Encoder;
pub use filter::Filter;
pub(crate) use filter::SessionVerdicts;
pub use forget::{ForgetCandidate, ForgetError, ForgetReport, MAX_QUERY_FORGET, TombstoneRow};
pub use ingest::{Ingest, SourceStamp, SourceState};
pub use insert::NewRecord;
pub use log::{LogKind, OwnLog, StoredRecord};
pub use read::{AgentCounts, SessionInfo, SessionRecord, SourceRow, StoreStats};
pub use schema::SCHEMA_VERSION;
pub use session_lookup::{SessionLookup, handle_of};

/// The migrations, in order (for tests that make an older database).
#[cfg(test)]
pub(crate) fn schema_migrations() -> &'static [&'static str] {
    schema::MIGRATIONS
}
pub use trust::{OriginKey, OriginRefusal, RefuseOriginError, TrustError};
pub use upgrade_fields::FieldsUpgrade;
pub use vector_file::Synced;
pub use vectors::{VectorCounts, embeds_role};

/// Failures of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation (its message is this error's text,
    /// not a source to print again).
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    /// SQLite met a damaged page of a database that opened (power loss on
    /// a disk that lies about syncs, a failing disk).
    #[error("the database is damaged ({0}); `cairn doctor` checks it and says what to do")]
    Damaged(rusqlite::Error),
    /// SQLite could not write: the disk (or the user's quota) is full. The
    /// open transaction is rolled back; what earlier ones stored stays.
    #[error(
        "the disk holding the database is full: free some space and run again (what was stored before stays)"
    )]
    DiskFull,
    /// The file exists but is not a usable cairn database.
    #[error(
        "{path} is not a readable cairn database ({source}); move it aside (keep it) and run `cairn index` to start a new one: paired machines send back what they hold"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// Another process kept the database busy longer than [`BUSY_TIMEOUT`].
    #[error(
        "{path} is busy: another cairn process held it longer than {}s; try again",
        BUSY_TIMEOUT.as_secs()
    )]
    Busy {
        /// The database file.
        path: PathBuf,
    },
    /// Another process stored a different text dictionary during a pass
    /// that trained its own; the pass's open transaction is abandoned.
    #[error("another process stored a text dictionary meanwhile; index again")]
    DictionaryRace,
    /// The database was written by a newer cairn.
    #[error(
        "database schema version {found} is newer than this cairn supports ({supported}); upgrade cairn"
    )]
    TooNew {
        /// Version in the file.
        found: u32,
        /// Newest version this build knows.
        supported: u32,
    },
    /// A derived file beside the database could not be written.
    #[error("could not write {path}: {source}")]
    Derived {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The home folder could not be created.
    #[error("failed to create {path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Names `path` as the file an I/O error was met on ([`StoreError::Io`]).
    pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> StoreError + Copy + '_ {
        move |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Names `path` as the derived file that could not be written
    /// ([`StoreError::Derived`]).
    pub(crate) fn writing(path: &Path) -> impl Fn(std::io::Error) -> StoreError + Copy + '_ {
        move |source| StoreError::Derived {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull,
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                StoreError::Damaged(e)
            }
            _ => StoreError::Sqlite(e),
        }
    }
}

/// How long any statement waits for another process's write to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Plans statements without looking at the values bound to them (SQLite's
/// query planner stability guarantee).
///
/// Otherwise SQLite peeks at a bound value wherever it might choose
/// another plan for it (a join by a bound row id, a range next to a
/// partial index, a full-text `MATCH`) and marks the statement to be
/// compiled again whenever that binding changes: a cached statement such
/// as a hit's details (`records` joined to its session, origin and
/// source by id) was parsed and planned anew for every hit of every
/// search. No statement of cairn's depends on that: there are no
/// `sqlite_stat` tables to estimate from, and each partial index is
/// implied by the statements that use it whatever the value.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

/// Tells a damaged file ([`StoreError::Corrupt`]) from a busy one
/// ([`StoreError::Busy`]) and from every other SQLite failure.
fn classify(path: &Path, source: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
            path: path.to_path_buf(),
            source,
        },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            tracing::warn!(path = %path.display(), error = %source, "database busy");
            StoreError::Busy {
                path: path.to_path_buf(),
            }
        }
        _ => StoreError::from(source),
    }
}

/// Whether SQLite answered that another connection holds the database.
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` again while SQLite answers busy without having waited (it does
/// so where waiting could deadlock, e.g. switching journal modes while
/// another connection opens the file); bounded by [`BUSY_TIMEOUT`].
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = std::time::Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match f() {
            Err(e) if is_busy(&e) && start.elapsed() < BUSY_TIMEOUT => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Free pages below which [`Store::trim_free_pages`] leaves them for
/// reuse (4 MiB of 8 KiB pages).
const TRIM_MIN_PAGES: i64 = 512;

/// An open cairn database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The mappings of the flat files its searches read (`store::mapped`);
    /// `None` only in tests of the `pread` path a file that cannot be
    /// mapped takes.
    mappings: Option<mapped::Mappings>,
    /// The columns file as the search under way sees it, opened once and
    /// shared by its readers (see [`Store::read_snapshot`]).
    search_columns: columns_file::SearchView,
    /// Seals batches of this node's own log (set by the node; a store
    /// without one serves its own log unsealed, which peers refuse).
    signer: Option<std::sync::Arc<crate::seal::Signer>>,
    /// The redactor whose rules (`Redactor::rules_id`) made the records
    /// this store's indexing passes store (set by the node; `None`: not
    /// known, see `store::redacted_with`).
    redaction_rules: Option<crate::redact::Redactor>,
}

/// One snapshot of the database for a search (see
/// [`Store::read_snapshot`]); dropping it ends the read.
pub(crate) struct Snapshot<'s> {
    _txn: Option<rusqlite::Transaction<'s>>,
    store: &'s Store,
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.store.search_columns.end();
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it.
    ///
    /// Safe when several processes open the same fresh home at once: the
    /// file is created 0600 without truncating, every step waits on a busy
    /// database (see [`BUSY_TIMEOUT`]) and the migration re-reads the schema
    /// version inside its write transaction. Only a file SQLite calls
    /// corrupt or not a database is reported as [`StoreError::Corrupt`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            crate::home::ensure(dir).map_err(StoreError::io_at(dir))?;
        }
        // Created here, 0600, so SQLite's WAL and shared-memory files (which
        // copy the database file's mode) are private too.
        let file = crate::home::private_file()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(StoreError::io_at(path))?;
        let new = file.metadata().is_ok_and(|m| m.len() == 0);
        drop(file);
        let classify = |source| classify(path, source);
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(classify)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(classify)?;
        stable_plans(&conn).map_err(classify)?;
        // 8 KiB pages for a new database (an existing one keeps its own):
        // fewer records spill into overflow pages and fewer B-tree pages
        // are half empty.
        conn.pragma_update(None, "page_size", 8192)
            .map_err(classify)?;
        // Free pages a new database can give back (see
        // `Store::trim_free_pages`); an existing one keeps its mode (and
        // is not asked, which could wait on another process's write).
        if new {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
                .map_err(classify)?;
        }
        // The first real read tells a corrupt or foreign file apart.
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(classify)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(classify)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(classify)?;
        let classified = |e| match e {
            StoreError::Sqlite(source) => classify(source),
            other => other,
        };
        let before: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(classify)?;
        if (1..SCHEMA_VERSION).contains(&before) {
            tracing::info!(path = %path.display(), from = before, to = SCHEMA_VERSION, "upgrading the database");
            if let Some(notice) = UPGRADE_NOTICE.get() {
                notice(path, before, SCHEMA_VERSION);
            }
        }
        schema::migrate(&mut conn).map_err(classified)?;
        fts::backfill_stems(&mut conn).map_err(classified)?;
        fts::reindex_cjk(&mut conn).map_err(classified)?;
        runs::backfill(&mut conn).map_err(classified)?;
        vector_file::keep_table(&mut conn, path, crate::embed::table_id()).map_err(classified)?;
        let store = Store::over(conn, path);
        if (1..schema::REBUILT_RECORDS).contains(&before) {
            // The rebuild left the old tables' pages free inside the file:
            // give them back once (a busy database keeps them for reuse).
            tracing::info!(path = %path.display(), "compacting the database after its upgrade");
            store.scrub().map_err(classified)?;
        }
        Ok(store)
    }

    /// Opens an existing database for reading only; never creates or migrates.
    /// Used where a reader must not write (hooks, concurrent readers).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let classify = |source| classify(path, source);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(classify)?;
        conn.busy_timeout(Duration::from_secs(2))
            .map_err(classify)?;
        stable_plans(&conn).map_err(classify)?;
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(classify)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == 0 {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                source: rusqlite::Error::QueryReturnedNoRows,
            });
        }
        Ok(Store::over(conn, path))
    }

    /// A store over `conn`, the database at `path`, opened and checked.
    fn over(conn: Connection, path: &Path) -> Store {
        Store {
            conn,
            path: path.to_path_buf(),
            mappings: Some(mapped::Mappings::default()),
            search_columns: Default::default(),
            signer: None,
            redaction_rules: None,
        }
    }

    /// Gives the database's free pages back to the file system when they
    /// are many (at least [`TRIM_MIN_PAGES`] and a twentieth of the file),
    /// as a first pass over gigabytes of history leaves them: full-text
    /// segments merged late free pages that nothing written after them
    /// takes up. Returns how many pages went. Only a database created with
    /// incremental auto-vacuum (every one since schema v11) can; for
    /// others this does nothing.
    pub fn trim_free_pages(&self) -> Result<u64, StoreError> {
        let (mode, free, pages): (i64, i64, i64) = self.conn.query_row(
            "SELECT a.auto_vacuum, f.freelist_count, p.page_count
             FROM pragma_auto_vacuum() a, pragma_freelist_count() f, pragma_page_count() p",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        if mode != 2 || free < TRIM_MIN_PAGES || free * 20 < pages {
            return Ok(0);
        }
        // Stepped to the end: each step may free only part of the pages.
        let mut vacuum = self.conn.prepare("PRAGMA incremental_vacuum")?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
        Ok(free as u64)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying connection: SQL stays inside this module.
    pub(in crate::store) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The underlying connection, for tests elsewhere that inspect or
    /// damage the database directly.
    #[cfg(test)]
    pub(crate) fn test_conn(&self) -> &Connection {
        &self.conn
    }

    /// Starts a read that sees one snapshot of the database until the
    /// returned guard is dropped (no transaction of its own when this
    /// connection is inside one already). While it lives, the readers of
    /// the columns file share one view of it: one mapping, each page
    /// checked once.
    pub(crate) fn read_snapshot(&self) -> Result<Snapshot<'_>, StoreError> {
        let txn = match self.conn.is_autocommit() {
            true => Some(self.conn.unchecked_transaction()?),
            false => None,
        };
        self.search_columns.begin();
        Ok(Snapshot {
            _txn: txn,
            store: self,
        })
    }

    /// A stamp that moves whenever the database's content may have changed:
    /// SQLite's `data_version` (moves on commits by other connections) and
    /// this connection's own count of changed rows. Equal stamps mean no
    /// query answer can have changed in between.
    pub fn change_stamp(&self) -> Result<(i64, u64), StoreError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        Ok((version, self.conn.total_changes()))
    }

    /// What SQLite's own check of every page, table and index, the
    /// full-text indexes' segments included (`PRAGMA quick_check`), finds
    /// wrong, its first few findings; empty when the file is whole. Reads
    /// the whole file (about 0.3 s for 1 GB of history, 13 s for 10 GB).
    pub fn damage(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare("PRAGMA quick_check(5)")?;
        let found = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>();
        match found {
            Ok(rows) => Ok(rows.into_iter().filter(|r| r != "ok").collect()),
            // A header or schema SQLite cannot read fails the check itself.
            Err(e) => match StoreError::from(e) {
                StoreError::Damaged(e) => Ok(vec![e.to_string()]),
                other => Err(other),
            },
        }
    }

    /// Bytes of the database's pages (free pages included).
    pub fn db_bytes(&self) -> Result<u64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| r.get::<_, i64>(0),
        )? as u64)
    }

    /// The page cache, in KiB, of a process that answers one search and
    /// exits (`cairn search`): SQLite's default (2,000 KiB) is more than
    /// such a search gains from. The pages it keeps cost their buffers'
    /// first touch, and a search that spreads over a large history reads
    /// more pages than either size holds, so with the larger cache more of
    /// the page copies land in memory the CPU's caches do not hold.
    pub const ONE_SEARCH_CACHE_KIB: u32 = 512;

    /// The page cache of this connection, in KiB (a size set in pages is
    /// converted with the page size).
    pub fn cache_kib(&self) -> Result<u32, StoreError> {
        let size: i64 = self.conn.query_row("PRAGMA cache_size", [], |r| r.get(0))?;
        let kib = match size {
            s if s < 0 => -s,
            pages => {
                let page: i64 = self.conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
                pages * page / 1024
            }
        };
        Ok(u32::try_from(kib).unwrap_or(u32::MAX))
    }

    /// Sets the page cache of this connection, in KiB. Writers of large
    /// passes want a large one (full-text merges re-read pages otherwise);
    /// a short-lived reader is faster with the small default, which it
    /// fills without page faults.
    pub fn set_cache_kib(&self, kib: u32) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "cache_size", -i64::from(kib))?;
        Ok(())
    }

    /// Records a node id and its human name so hits can say which machine they came from.
    pub fn upsert_node(&self, id: &str, name: &str) -> Result<(), StoreError> {
        // Skip the write when nothing changed: this runs on every command.
        let known: Option<String> = {
            use rusqlite::OptionalExtension;
            self.conn
                .query_row("SELECT name FROM nodes WHERE id = ?1", [id], |r| r.get(0))
                .optional()?
        };
        if known.as_deref() != Some(name) {
            self.conn.execute(
                "INSERT INTO nodes(id, name) VALUES (?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET name = excluded.name",
                (id, name),
            )?;
        }
        Ok(())
    }

    /// Names a node only if it has no name yet (names learned through a
    /// relay never override a name the node announced itself).
    pub fn name_node_if_unknown(&self, id: &str, name: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO nodes(id, name) VALUES (?1, ?2) ON CONFLICT(id) DO NOTHING",
            (id, name),
        )?;
        Ok(())
    }

    /// The known names of the given node ids.
    pub fn node_names(&self, ids: &[String]) -> Result<Vec<(String, String)>, StoreError> {
        let mut q = self
            .conn
            .prepare_cached("SELECT name FROM nodes WHERE id = ?1")?;
        let mut out = Vec::new();
        for id in ids {
            use rusqlite::OptionalExtension;
            if let Some(name) = q.query_row([id], |r| r.get::<_, String>(0)).optional()? {
                out.push((id.clone(), name));
            }
        }
        Ok(out)
    }

    /// Reads a value from the meta table.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(meta_get(&self.conn, key)?)
    }

    /// Writes a value to the meta table.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        Ok(meta_set(&self.conn, key, value)?)
    }
}

/// The value of `key` in `meta`.
pub(crate) fn meta_get(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

/// Sets `key` in `meta` to `value`.
pub(crate) fn meta_set(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute((key, value))?;
    Ok(())
}

/// Drops `key` from `meta`.
pub(crate) fn meta_drop(conn: &Connection, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM meta WHERE key = ?1")?
        .execute([key])?;
    Ok(())
}
