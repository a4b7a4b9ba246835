//! What a ranker reads of a record: its columns (role, time, session row,
//! decision flag), from the columns file where it vouches and else from
//! the row; the length classes and role bytes its scores and screens
//! read; and the oldest session's start, the far end of recency.
//!
//! Only reads, through the side tables' and flat files' own readers
//! (`record_bytes`, `columns_file`); it changes none of them.

use rusqlite::OptionalExtension;

use super::{Store, StoreError, codec, columns_file, record_bytes};

/// What the ranker needs of a record: role, time, session row, flags.
pub(crate) type Columns = (String, Option<i64>, i64, i64);

/// A search's reader of records' ranker columns (see [`Store::ranker_columns`]).
pub(crate) struct ColumnReader<'s> {
    /// The columns file, where the store has one it vouches for.
    flat: Option<columns_file::Reader>,
    row: rusqlite::CachedStatement<'s>,
}

impl ColumnReader<'_> {
    /// Whether the columns come from the columns file (where it can say).
    pub(crate) fn reads_file(&self) -> bool {
        self.flat.is_some()
    }

    /// Record `id`'s columns: from the file when it says (the flags then
    /// hold only the decision mark, the one flag the ranker reads), else
    /// from its row; `None` for a record that is gone.
    pub(crate) fn columns(&mut self, id: i64) -> Result<Option<Columns>, StoreError> {
        if let Some(c) = self.flat.as_mut().and_then(|f| f.columns(id)) {
            let flags = match c.stamp.decision {
                true => codec::DECISION,
                false => 0,
            };
            return Ok(Some((
                c.role.as_str().to_owned(),
                c.stamp.ts,
                c.session,
                flags,
            )));
        }
        Ok(self
            .row
            .query_row([id], |r| {
                Ok((codec::role_at(r, 0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?)
    }

    /// Record `id`'s session row and role; `None` for a record that is
    /// gone (a delete zeroes the file's entry before it commits).
    pub(crate) fn owner(&mut self, id: i64) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self
            .columns(id)?
            .map(|(role, _, session, _)| (session, role)))
    }
}

impl Store {
    /// A reader of records' ranker columns for one search.
    pub(crate) fn ranker_columns(&self) -> Result<ColumnReader<'_>, StoreError> {
        Ok(ColumnReader {
            flat: columns_file::Reader::open(self),
            row: self
                .conn()
                .prepare_cached("SELECT role, ts, session, flags FROM records WHERE id = ?1")?,
        })
    }

    /// A reader of records' length classes, role bytes and stamps, the
    /// lengths read many at once from the lengths file where it vouches.
    pub(crate) fn lengths_reader(&self) -> Result<record_bytes::Reader<'_>, StoreError> {
        Ok(record_bytes::Reader::new(self.conn())?.with_many(
            columns_file::Bytes::lengths(self)
                .map(|l| Box::new(l) as Box<dyn record_bytes::Classes>),
        ))
    }

    /// The roles file, where the store has one it vouches for: many
    /// records' role bytes read at once.
    pub(crate) fn roles_file(&self) -> Option<columns_file::Bytes> {
        columns_file::Bytes::roles(self)
    }

    /// A reader of records' role bytes and stamps from the side tables.
    pub(crate) fn bytes_reader(&self) -> Result<record_bytes::Reader<'_>, StoreError> {
        Ok(record_bytes::Reader::new(self.conn())?)
    }

    /// When the oldest session started (Unix ms), if any is dated.
    pub(crate) fn oldest_session_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT min(first_ms) FROM sessions", [], |r| r.get(0))?)
    }
}
