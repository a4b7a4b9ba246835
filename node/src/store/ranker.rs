//! What a ranker reads of a record: its columns (role, time, session row,
//! decision flag), and the lengths, role bytes and stamps its scores and
//! screens read ([`Facts`]), each from the columns file where it vouches
//! and else from the record's row, so the answer is the same either way;
//! the oldest session's start, the far end of recency; and the projects,
//! so a question can name one.
//!
//! Only reads, through the columns file's own reader (`columns_file`);
//! it changes nothing.

use rusqlite::OptionalExtension;

use super::columns::{self, Stamp};
use super::columns_file::{self, LENGTH_AT, ROLE_AT};
use super::{Store, StoreError, codec};

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

    /// A reader of records' lengths, role bytes and stamps for one
    /// search (see [`Facts`]).
    pub(crate) fn facts(&self) -> Result<Facts<'_>, StoreError> {
        Ok(Facts {
            conn: self.conn(),
            file: columns_file::Reader::open(self),
            row: self
                .conn()
                .prepare_cached("SELECT role, ts, flags, session FROM records WHERE id = ?1")?,
            text: self
                .conn()
                .prepare_cached("SELECT flags, text FROM records WHERE id = ?1")?,
            typical: None,
        })
    }

    /// The roles file, where the store has one it vouches for: many
    /// records' role bytes read at once.
    pub(crate) fn roles_file(&self) -> Option<columns_file::Bytes> {
        columns_file::Bytes::roles(self)
    }

    /// The first `most` distinct project paths, in order: found by seeking
    /// through the `sessions_project` index once per project, so the cost
    /// grows with the number of projects, not of sessions.
    pub(crate) fn project_paths(&self, most: usize) -> Result<Vec<String>, StoreError> {
        let mut q = self
            .conn()
            .prepare_cached("SELECT min(project) FROM sessions WHERE project > ?1")?;
        let mut paths = Vec::new();
        let mut after = String::new();
        // Each step moves strictly past the last path.
        while paths.len() < most
            && let Some(p) = q.query_row([&after], |r| r.get::<_, Option<String>>(0))?
        {
            paths.push(p.clone());
            after = p;
        }
        Ok(paths)
    }

    /// The sessions of project `path` (their rows) and how many records
    /// they hold together.
    pub(crate) fn project_sessions(
        &self,
        path: &str,
    ) -> Result<(rustc_hash::FxHashSet<i64>, i64), StoreError> {
        let mut q = self
            .conn()
            .prepare_cached("SELECT id, records FROM sessions WHERE project = ?1")?;
        let mut rows = q.query([path])?;
        let (mut sessions, mut records) = (rustc_hash::FxHashSet::default(), 0);
        while let Some(r) = rows.next()? {
            sessions.insert(r.get::<_, i64>(0)?);
            records += r.get::<_, i64>(1)?;
        }
        Ok((sessions, records))
    }

    /// When the oldest session started (Unix ms), if any is dated.
    pub(crate) fn oldest_session_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT min(first_ms) FROM sessions", [], |r| r.get(0))?)
    }
}

/// Records whose lengths [`Facts::typical`] averages: the newest 65,536
/// by id.
const TYPICAL: i64 = 65_536;

/// A search's reader of records' facts: length, role byte, stamp,
/// session. Each
/// comes from the columns file where it vouches for the record, else from
/// the record's row (the file's tail past its mark, a damaged page, no
/// file): the same answer, more slowly.
pub(crate) struct Facts<'s> {
    conn: &'s rusqlite::Connection,
    file: Option<columns_file::Reader>,
    /// A record's role, time and flags.
    row: rusqlite::CachedStatement<'s>,
    /// A record's flags and stored text, for its length.
    text: rusqlite::CachedStatement<'s>,
    /// [`Facts::typical`], once read.
    typical: Option<Option<f64>>,
}

impl Facts<'_> {
    /// The lengths (bytes of plain text, to 10%) of `ids`, in their order;
    /// `None` for a record that is gone.
    pub(crate) fn lengths(&mut self, ids: &[i64]) -> Result<Vec<Option<f64>>, StoreError> {
        let classes = match &self.file {
            Some(f) => f.bytes(ids, LENGTH_AT),
            None => vec![0; ids.len()],
        };
        ids.iter()
            .zip(classes)
            .map(|(&id, class)| match columns::length_of(class) {
                Some(len) => Ok(Some(len)),
                None => self.length_of_row(id),
            })
            .collect()
    }

    /// The length of record `id` from its row (see [`Facts::lengths`]).
    fn length_of_row(&mut self, id: i64) -> Result<Option<f64>, StoreError> {
        let len = self
            .text
            .query_row([id], |r| Ok(columns::stored_len(r.get_ref(1)?, r.get(0)?)))
            .optional()?
            .flatten();
        Ok(len.and_then(|n| columns::length_of(columns::class_of(n))))
    }

    /// The average length of the newest [`TYPICAL`] records (so the cost
    /// is the same at any size of history), which BM25 measures each
    /// match's length against; `None` when no length is known.
    pub(crate) fn typical(&mut self) -> Result<Option<f64>, StoreError> {
        if let Some(t) = self.typical {
            return Ok(t);
        }
        let newest: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM records", [], |r| r.get(0))?;
        let (mut sum, mut n) = (0.0, 0u64);
        if let Some(newest) = newest {
            columns_file::each_within(
                self.conn,
                self.file.as_mut(),
                &[((newest - TYPICAL + 1).max(1), newest)],
                |e| columns::length_of(e[LENGTH_AT]).map(Some),
                (
                    "SELECT id, flags, text FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
                    |r| {
                        Ok(columns::stored_len(r.get_ref(2)?, r.get(1)?)
                            .and_then(|n| columns::length_of(columns::class_of(n))))
                    },
                ),
                |_, len| {
                    if let Some(len) = len {
                        sum += len;
                        n += 1;
                    }
                },
            )?;
        }
        let t = (n > 0).then(|| sum / n as f64);
        self.typical = Some(t);
        Ok(t)
    }

    /// The role byte of record `id`; `None` for a record that is gone.
    pub(crate) fn role(&mut self, id: i64) -> Result<Option<u8>, StoreError> {
        match self.file.as_mut().map_or(0, |f| f.byte(id, ROLE_AT)) {
            0 => Ok(self.row(id)?.map(|(role, _, _)| role)),
            b => Ok(Some(b)),
        }
    }

    /// The time and decision mark of record `id`; `None` for a record
    /// that is gone.
    pub(crate) fn stamp(&mut self, id: i64) -> Result<Option<Stamp>, StoreError> {
        if let Some(c) = self.file.as_mut().and_then(|f| f.columns(id)) {
            return Ok(Some(c.stamp));
        }
        Ok(self.row(id)?.map(|(_, stamp, _)| stamp))
    }

    /// The session row of record `id`; `None` for a record that is gone.
    pub(crate) fn session(&mut self, id: i64) -> Result<Option<i64>, StoreError> {
        if let Some(c) = self.file.as_mut().and_then(|f| f.columns(id)) {
            return Ok(Some(c.session));
        }
        Ok(self.row(id)?.map(|(_, _, session)| session))
    }

    /// Record `id`'s role byte, stamp and session row from its row.
    fn row(&mut self, id: i64) -> Result<Option<(u8, Stamp, i64)>, StoreError> {
        Ok(self
            .row
            .query_row([id], |r| {
                Ok((
                    columns::role_byte(r.get_ref(0)?),
                    Stamp::of(r.get(1)?, r.get(2)?),
                    r.get(3)?,
                ))
            })
            .optional()?)
    }
}
