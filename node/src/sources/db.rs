//! Helpers for the SQLite stores several agents keep: open strictly
//! read-only (never creating the file), probe tables and columns (schemas
//! drift between versions), and read cells of any storage class.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::SourceError;

/// Opens a database read-only; a missing file is an error, never created.
pub fn open_read_only(path: &Path) -> Result<Connection, SourceError> {
    if !path.is_file() {
        return Err(SourceError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "database not found"),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sql_err(path, e))?;
    conn.busy_timeout(Duration::from_secs(2))
        .map_err(|e| sql_err(path, e))?;
    Ok(conn)
}

/// Wraps a SQLite error with the store's path.
pub fn sql_err(path: &Path, source: rusqlite::Error) -> SourceError {
    SourceError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// The names of the database's tables.
pub fn tables(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// The column names of `table` (one of the caller's constant names, never input).
pub fn columns(conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(1))?;
    rows.collect()
}

/// `name` when the table has that column, else `NULL` (for SELECT lists).
pub fn col_or_null<'a>(cols: &HashSet<String>, name: &'a str) -> &'a str {
    if cols.contains(name) { name } else { "NULL" }
}

/// A cell as text (TEXT or UTF-8 BLOB; numbers formatted).
pub fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    }
}

/// A cell holding a time in any shape (Unix s/ms/µs as a number, ISO or
/// `YYYY-MM-DD HH:MM:SS` text) as Unix ms.
pub fn time(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => super::common::epoch_to_ms(i),
        // Epoch seconds with a fraction (Hermes' `time.time()`): keep the
        // milliseconds; a value already in ms or µs is scaled as an integer.
        ValueRef::Real(f) if f.is_finite() => {
            let whole = f as i64;
            let ms = super::common::epoch_to_ms(whole)?;
            if ms == whole.saturating_mul(1000) {
                Some((f * 1000.0).round() as i64)
            } else {
                Some(ms)
            }
        }
        ValueRef::Real(_) => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b)
            .ok()
            .and_then(super::common::parse_time_str),
        ValueRef::Null => None,
    }
}

/// A watermark string as an integer (row id or time), if it is one.
pub fn watermark_i64(w: &super::Watermark) -> Option<i64> {
    w.as_deref().and_then(|s| s.trim().parse().ok())
}

/// The tables of an agent's database when it holds every one of `needed`.
/// `Ok(None)` when it holds no table at all (the agent created it and has
/// not written its schema yet: nothing to read); the error of
/// [`foreign_schema`] naming `wanted` when it holds others.
pub fn require_tables(
    path: &Path,
    conn: &Connection,
    needed: &[&str],
    wanted: &str,
) -> Result<Option<HashSet<String>>, SourceError> {
    let t = tables(conn).map_err(|e| sql_err(path, e))?;
    if needed.iter().all(|n| t.contains(*n)) {
        return Ok(Some(t));
    }
    match foreign_schema(path, conn, &t, wanted) {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// The error for a database whose `tables` lack the ones its reader knows
/// (`wanted`, in words): [`SourceError::NotUnderstood`], naming the tables
/// it has and its `user_version` when set. `None` when it has no table at
/// all: the agent created it and has not written its schema yet.
pub fn foreign_schema(
    path: &Path,
    conn: &Connection,
    tables: &HashSet<String>,
    wanted: &str,
) -> Option<SourceError> {
    let mut names: Vec<&str> = tables
        .iter()
        .map(String::as_str)
        .filter(|t| !t.starts_with("sqlite_"))
        .collect();
    if names.is_empty() {
        return None;
    }
    names.sort_unstable();
    let shown = names.len().min(6);
    let mut what = format!(
        "a database without {wanted} (its tables: {}{})",
        names[..shown].join(", "),
        if names.len() > shown { ", ..." } else { "" }
    );
    if let Some(v) = user_version(conn) {
        what.push_str(&format!(", schema version {v}"));
    }
    Some(SourceError::NotUnderstood {
        path: path.to_path_buf(),
        what,
    })
}

/// A database's `PRAGMA user_version`, when set (not 0).
pub fn user_version(conn: &Connection) -> Option<i64> {
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .ok()?;
    (v != 0).then_some(v)
}
