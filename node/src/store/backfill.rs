//! Work a migration leaves for Rust to do over the records already stored
//! (`fts::backfill_stems`, `runs::backfill`): SQL cannot decode their
//! text, nor work out runs cheaply. The work goes in batches by record
//! id, each in its own write transaction, resuming from the last id done,
//! which a `meta` row keeps (removed when done).

use rusqlite::{Connection, Transaction};

use super::StoreError;

/// Runs `batch` until it reports nothing left. `key` names the `meta` row
/// that holds the last record id done; with no such row there is nothing
/// to do, and that plain read is all a call costs (every open makes one,
/// and must not wait on the write lock a busy daemon keeps taking).
/// `batch` gets the transaction and the last id done, works on the
/// records after it and returns the last id it covered, or `None` when
/// there were none. Each batch re-reads the row inside its write
/// transaction, so two processes opening the database at once share the
/// work instead of repeating it.
pub(super) fn in_batches(
    conn: &mut Connection,
    key: &str,
    mut batch: impl FnMut(&Transaction<'_>, i64) -> Result<Option<i64>, StoreError>,
) -> Result<(), StoreError> {
    if super::meta_get(conn, key)?.is_none() {
        return Ok(());
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let Some(from) = super::meta_get(&tx, key)? else {
            return Ok(());
        };
        // (As SQLite's CAST reads it: text that is no number is 0.)
        match batch(&tx, from.trim().parse().unwrap_or(0))? {
            None => super::meta_drop(&tx, key)?,
            Some(last) => super::meta_set(&tx, key, &last.to_string())?,
        }
        tx.commit()?;
    }
}
