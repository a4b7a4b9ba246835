//! The records' hash index (`records_hash8`) and a pass that builds it
//! once at its end instead of at every commit.
//!
//! The index's keys are prefixes of blake3 hashes, so the records of one
//! commit land in nearly every leaf of it: each commit of a long pass
//! dirties, logs and checkpoints the whole index as it stands, and a pass
//! of n records in commits of a fixed size writes it O(n²) bytes over
//! (1.7 GB each way at 10 GB, against 0.05 GB at 1 GB). A pass that reads
//! much into a small database therefore *defers* the index: in its first
//! transaction it drops the index and notes [`DEFERRED`] in `meta`,
//! answers "is a record with this hash stored" from a map of every
//! record's hash prefix ([`HashIds`], loaded with what the database held
//! and added to with each record the pass stores), and builds the index
//! in one sorted pass at its end ([`ensure`]).
//!
//! The invariant: while the note is present, the index is absent and every
//! record in the database is in the deferring pass's map. It holds because
//! every other writer that looks a record up by hash (another pass, a
//! peer's batch, a forget) first calls [`ensure`] inside its write
//! transaction, which builds the index and removes the note; the deferring
//! pass checks the note at the start of each of its transactions
//! ([`holds`]) and uses the index from then on when the note is gone or
//! not its own. A pass killed while deferring leaves the note behind, and
//! the next such writer builds the index. Reads never look records up by
//! hash, so they are unaffected either way.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Store, StoreError};

impl Store {
    /// Builds the records' hash index if a pass deferred it and did not
    /// build it at its end (it failed, or was killed). Returns whether it
    /// built it.
    pub(crate) fn ensure_hash_index(&mut self) -> Result<bool, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let built = ensure(&tx)?;
        tx.commit()?;
        Ok(built)
    }
}

/// The `meta` key present (with the deferring pass's token as its value)
/// while `records_hash8` is dropped.
pub(super) const DEFERRED: &str = "records_hash8_deferred";

/// The index, as the schema creates it.
const CREATE: &str = "CREATE INDEX IF NOT EXISTS records_hash8 ON records(substr(hash, 1, 8))";

/// Builds the index if a pass deferred it, and removes the note. To be
/// called inside a write transaction before looking a record up by hash.
/// Returns whether it built it.
pub(crate) fn ensure(conn: &Connection) -> Result<bool, StoreError> {
    if super::meta_get(conn, DEFERRED)?.is_none() {
        return Ok(false);
    }
    let started = std::time::Instant::now();
    conn.execute(CREATE, [])?;
    super::meta_drop(conn, DEFERRED)?;
    tracing::info!(
        ms = started.elapsed().as_millis() as u64,
        "built the records' hash index"
    );
    Ok(true)
}

/// Whether the index is still deferred by the pass holding `token`.
pub(crate) fn holds(conn: &Connection, token: &str) -> Result<bool, StoreError> {
    Ok(super::meta_get(conn, DEFERRED)?.as_deref() == Some(token))
}

/// Defers the index for a pass that will hold `token`, inside its write
/// transaction: loads every stored record's hash prefix, drops the index
/// and notes it. `None` (nothing changed) when the index is already
/// deferred by someone else or a row id does not fit the map.
pub(crate) fn defer(conn: &Connection, token: &str) -> Result<Option<HashIds>, StoreError> {
    if ensure(conn)? {
        // Another pass deferred it (or was killed doing so): built again,
        // and left to serve rather than taken from under that pass.
        return Ok(None);
    }
    let stored: i64 = conn.query_row("SELECT count(*) FROM records", [], |r| r.get(0))?;
    let mut ids = HashIds::with_capacity(usize::try_from(stored).unwrap_or(0));
    {
        let mut q = conn.prepare("SELECT id, substr(hash, 1, 4) FROM records")?;
        let mut rows = q.query([])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let prefix: Vec<u8> = row.get(1)?;
            let Some(key) = key_of(&prefix) else {
                // Not a hash this store writes: leave the index alone.
                return Ok(None);
            };
            if !ids.add_key(key, id) {
                return Ok(None);
            }
        }
    }
    conn.execute("DROP INDEX IF EXISTS records_hash8", [])?;
    super::meta_set(conn, DEFERRED, token)?;
    Ok(Some(ids))
}

/// A token no other pass holds: this process and the time.
pub(crate) fn new_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// Whether the index exists.
#[cfg(test)]
pub(crate) fn present(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'records_hash8')",
        [],
        |r| r.get(0),
    )
    .unwrap_or(false)
}

/// The map key of a hash: its first 4 bytes. Two of a pass's hashes share
/// them about once in 2³² look-ups per entry probed, and the row check
/// tells them apart.
fn key_of(hash: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(hash.get(..4)?.try_into().ok()?))
}

/// Which row ids may hold a record with a given hash: a hash table from
/// the hash's first 4 bytes to row ids, in two flat arrays with open
/// addressing (8 bytes a slot, at most three quarters full: 11 to 21
/// bytes a record, against some 90 of a `HashMap` of whole hashes; 67 MB
/// for the 5.3 million records of 10 GB of history). A key may map to
/// several ids (two hashes sharing 4 bytes, a row deleted and its hash
/// stored again), and an id may no longer hold that hash (a row deleted
/// since), so callers check each candidate against the row:
/// [`HashIds::find`].
#[derive(Debug)]
pub(crate) struct HashIds {
    keys: Vec<u32>,
    /// Row ids (0: an empty slot; SQLite's row ids here start at 1).
    ids: Vec<u32>,
    len: usize,
}

/// The fewest slots a map starts with.
const MIN_SLOTS: usize = 1 << 12;

impl HashIds {
    /// A map with room for `n` entries before it grows.
    pub(crate) fn with_capacity(n: usize) -> HashIds {
        let slots = (n.saturating_mul(4) / 3 + 1)
            .next_power_of_two()
            .max(MIN_SLOTS);
        HashIds {
            keys: vec![0; slots],
            ids: vec![0; slots],
            len: 0,
        }
    }

    /// Entries added.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Notes that row `id` holds a record with `hash`. False when `id`
    /// does not fit (not positive, or past 2³²): the caller then stops
    /// relying on the map.
    pub(crate) fn add(&mut self, hash: &[u8; 32], id: i64) -> bool {
        key_of(hash).is_some_and(|k| self.add_key(k, id))
    }

    fn add_key(&mut self, key: u32, id: i64) -> bool {
        let Ok(id) = u32::try_from(id) else {
            return false;
        };
        if id == 0 {
            return false;
        }
        if (self.len + 1) * 4 > self.keys.len() * 3 {
            self.grow();
        }
        place(&mut self.keys, &mut self.ids, key, id);
        self.len += 1;
        true
    }

    fn grow(&mut self) {
        let slots = self.keys.len() * 2;
        let mut keys = vec![0; slots];
        let mut ids = vec![0; slots];
        for (k, id) in self.keys.iter().zip(&self.ids) {
            if *id != 0 {
                place(&mut keys, &mut ids, *k, *id);
            }
        }
        self.keys = keys;
        self.ids = ids;
    }

    /// The row ids noted under `hash`'s key, most likely first.
    fn candidates(&self, hash: &[u8; 32]) -> impl Iterator<Item = i64> + '_ {
        let key = key_of(hash).unwrap_or_default();
        let mask = self.keys.len() - 1;
        let start = key as usize & mask;
        (0..self.keys.len())
            .map(move |i| (start + i) & mask)
            .take_while(|&s| self.ids[s] != 0)
            .filter(move |&s| self.keys[s] == key)
            .map(|s| i64::from(self.ids[s]))
    }

    /// The row id of the stored record with `hash`, checked against the
    /// row itself.
    pub(crate) fn find(
        &self,
        conn: &Connection,
        hash: &[u8; 32],
    ) -> Result<Option<i64>, StoreError> {
        for id in self.candidates(hash) {
            let same: Option<bool> = conn
                .prepare_cached("SELECT hash = ?2 FROM records WHERE id = ?1")?
                .query_row(params![id, &hash[..]], |r| r.get(0))
                .optional()?;
            if same == Some(true) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Heap bytes held.
    pub(crate) fn held_bytes(&self) -> usize {
        (self.keys.capacity() + self.ids.capacity()) * 4
    }
}

/// Puts `(key, id)` in the first free slot from the key's own.
fn place(keys: &mut [u32], ids: &mut [u32], key: u32, id: u32) {
    let mask = keys.len() - 1;
    let mut s = key as usize & mask;
    while ids[s] != 0 {
        s = (s + 1) & mask;
    }
    keys[s] = key;
    ids[s] = id;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u32, tail: u8) -> [u8; 32] {
        let mut h = [tail; 32];
        h[..4].copy_from_slice(&n.to_le_bytes());
        h
    }

    #[test]
    fn the_map_finds_every_id_under_its_key_through_growth_and_collisions() {
        let mut m = HashIds::with_capacity(0);
        let first = m.keys.len();
        // Keys that share their low bits, so they all probe from one slot.
        let n = 3 * first as u32;
        for i in 0..n {
            assert!(m.add(&hash(i << 16, 1), i as i64 + 1));
        }
        assert!(m.keys.len() > first, "grew");
        assert_eq!(m.len(), n as usize);
        assert!(m.len() * 4 <= m.keys.len() * 3);
        for i in 0..n {
            let got: Vec<i64> = m.candidates(&hash(i << 16, 1)).collect();
            assert_eq!(got, vec![i as i64 + 1]);
        }
        // Two hashes sharing their first 8 bytes: both ids are candidates.
        assert!(m.add(&hash(5 << 16, 2), 999_999));
        let got: Vec<i64> = m.candidates(&hash(5 << 16, 2)).collect();
        assert_eq!(got, vec![6, 999_999]);
        assert_eq!(m.candidates(&hash(7, 1)).count(), 0);
    }

    #[test]
    fn ids_the_map_cannot_hold_are_refused() {
        let mut m = HashIds::with_capacity(10);
        assert!(!m.add(&hash(1, 0), 0));
        assert!(!m.add(&hash(1, 0), -3));
        assert!(!m.add(&hash(1, 0), i64::from(u32::MAX) + 1));
        assert!(m.add(&hash(1, 0), i64::from(u32::MAX)));
        assert_eq!(m.len(), 1);
    }
}
