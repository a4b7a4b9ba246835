//! What the full-text indexes answer a search: a concept's newest matching
//! record ids (all of them, a bounded number, or within stretches of ids),
//! the vocabulary's counts for a prefix, the span of record ids the
//! estimates scale to, and, for a filtered search reaching back, the
//! matches its filter allows with their ranker columns.
//!
//! Only reads. The expression matched is the caller's FTS5 text, already
//! quoted (see `search::query`); nothing typed reaches FTS5 as syntax.

use rusqlite::types::Value as SqlValue;

use super::filter::Filter;
use super::ranker::Columns;
use super::{Store, StoreError, codec};

/// A full-text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FtsIndex {
    /// `fts`: words as written.
    Exact,
    /// `fts_stem`: stems of conversation words.
    Stem,
}

impl FtsIndex {
    /// The index's table.
    fn table(self) -> &'static str {
        match self {
            FtsIndex::Exact => "fts",
            FtsIndex::Stem => "fts_stem",
        }
    }
}

impl Store {
    /// The lowest and highest record id (0, 0 when there are none).
    pub(crate) fn id_span(&self) -> Result<(i64, i64), StoreError> {
        // Two subqueries: SQLite answers a lone min() or max() from the
        // end of the table, but scans it whole for both at once.
        Ok(self.conn().query_row(
            "SELECT COALESCE((SELECT min(id) FROM records), 0),
                    COALESCE((SELECT max(id) FROM records), 0)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    /// The newest `limit` records that match `expr` in `index`, newest
    /// first.
    pub(crate) fn newest_matches(
        &self,
        index: FtsIndex,
        expr: &str,
        limit: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let table = index.table();
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid DESC LIMIT ?2"
        ))?;
        let mut rows = stmt.query(rusqlite::params![expr, limit])?;
        let mut ids = Vec::new();
        while let Some(r) = rows.next()? {
            ids.push(r.get(0)?);
        }
        Ok(ids)
    }

    /// The sum of the counts of every indexed word that starts with
    /// `prefix` (up to 2,000 words), from the vocabulary.
    pub(crate) fn prefix_docs(&self, prefix: &str) -> Result<i64, StoreError> {
        let mut upper = prefix.to_string();
        upper.push(char::MAX);
        let mut stmt = self.conn().prepare_cached(
            "SELECT doc FROM fts_vocab WHERE term >= ?1 AND term < ?2 LIMIT 2000",
        )?;
        let rows = stmt.query_map([prefix, upper.as_str()], |r| r.get::<_, i64>(0))?;
        let mut sum = 0i64;
        for r in rows {
            sum = sum.saturating_add(r?);
        }
        Ok(sum)
    }

    /// True when the stemmed index exists (a database opened read-only may
    /// predate it).
    pub(crate) fn has_stem_index(&self) -> Result<bool, StoreError> {
        Ok(self
            .conn()
            .prepare_cached("SELECT count(*) FROM sqlite_master WHERE name = 'fts_stem'")?
            .query_row([], |r| r.get::<_, i64>(0))
            .map(|n| n > 0)?)
    }

    /// The newest `limit` of the newest `reach` matches of `expr` in
    /// `index` that `filter` allows, newest first, each with its ranker
    /// columns (read through a join with `records`).
    pub(crate) fn allowed_matches(
        &self,
        (index, expr): (FtsIndex, &str),
        filter: &Filter,
        reach: usize,
        limit: i64,
    ) -> Result<Vec<(i64, Columns)>, StoreError> {
        let table = index.table();
        let reach = i64::try_from(reach).unwrap_or(i64::MAX);
        let mut sql = format!(
            "SELECT r.id, 0, r.role, r.ts, r.session, r.flags FROM \
             (SELECT rowid AS id FROM {table} WHERE {table} MATCH ?1 \
             ORDER BY rowid DESC LIMIT {reach}) m JOIN records r ON r.id = m.id"
        );
        filter.push_joins(&mut sql);
        sql.push_str(" WHERE 1");
        let mut args = vec![SqlValue::Text(expr.to_owned())];
        filter.push_filters(&mut sql, &mut args);
        sql.push_str(&format!(" ORDER BY r.id DESC LIMIT {limit}"));
        let mut stmt = self.conn().prepare(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        let mut found = Vec::new();
        while let Some(r) = rows.next()? {
            found.push((
                r.get(0)?,
                (codec::role_at(r, 2)?, r.get(3)?, r.get(4)?, r.get(5)?),
            ));
        }
        Ok(found)
    }

    /// The matches of `expr` in `index`, newest first, in batches handed
    /// to `each` until it returns false or none is left: within each of
    /// `stretches` (ascending `(first, last)` ids, read from the last)
    /// when given, else all of them. Each batch holds `size()` matches,
    /// fewer at the end of a stretch.
    pub(crate) fn match_batches<E: From<StoreError>>(
        &self,
        (index, expr): (FtsIndex, &str),
        stretches: Option<&[(i64, i64)]>,
        mut size: impl FnMut() -> usize,
        mut each: impl FnMut(&[i64]) -> Result<bool, E>,
    ) -> Result<(), E> {
        let table = index.table();
        let bounded = stretches.is_some();
        let mut stmt = self
            .conn()
            .prepare_cached(&match bounded {
                true => format!(
                    "SELECT rowid FROM {table} WHERE {table} MATCH ?1 \
                     AND rowid >= ?2 AND rowid <= ?3 ORDER BY rowid DESC"
                ),
                false => {
                    format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid DESC")
                }
            })
            .map_err(StoreError::from)?;
        let whole = [(i64::MIN, i64::MAX)];
        let stretches = stretches.unwrap_or(&whole);
        let mut batch: Vec<i64> = Vec::new();
        for &(first, last) in stretches.iter().rev() {
            let mut rows = match bounded {
                true => stmt.query(rusqlite::params![expr, first, last]),
                false => stmt.query([expr]),
            }
            .map_err(StoreError::from)?;
            let mut more = true;
            while more {
                batch.clear();
                let want = size();
                while batch.len() < want {
                    match rows.next().map_err(StoreError::from)? {
                        Some(r) => batch.push(r.get(0).map_err(StoreError::from)?),
                        None => {
                            more = false;
                            break;
                        }
                    }
                }
                if !each(&batch)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
