//! Two bytes per record that search reads without the record's row, in
//! blocks of [`BLOCK`] records by id: its length, for ranking (table
//! `record_lens`), and its role, for a filter on roles (table
//! `record_bytes`).
//!
//! Search scores a word's matches by BM25 with a term frequency of one,
//! which needs each match's length against the others'. FTS5's `bm25()`
//! reads every match's row of `fts_docsize`, and `records` is wider
//! still: a word matching thousands of records spread over a large
//! history cost one page read per match (4 µs each at 10 GB, in a fresh
//! process). Here a thousand records' lengths share a row of 1 KiB, so
//! the matches of a word share pages, and one query's words share them
//! too. A search filtered on roles reads the roles from rows of their
//! own, in the same blocks: a candidate whose role the filter rules out
//! needs no look-up in `records` (at 1 GB, `--role user` read thousands
//! of rows a question). The two were one row of 2 KiB until v17, which an
//! unfiltered search read for the lengths alone: at 10 GB a question whose
//! words match across the history read every one of its 1,731 pages,
//! against the 742 of the lengths alone.
//!
//! A length byte holds the length's class: the length in bytes of the
//! record's plain text on a scale of 10% steps (see [`class_of`]), which
//! is finer than ranking needs. A role byte holds the code `records.role`
//! stores for a known role (`codec::role_code`), or [`OTHER_ROLE`] for any
//! other name. In both, 0 means "not known": a record stored before the
//! column existed and not yet backfilled, a forgotten one, or one whose
//! row was damaged. The reader then asks `records`, so a missing byte
//! costs speed, never a different answer. Both bytes are written in the
//! same transaction as their record (see [`Pending`]) and never change,
//! since a record's text and role never do.

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreError, codec};

/// Records per row of `record_lens` and of `record_bytes`.
pub(crate) const BLOCK: i64 = 1024;

/// The ratio between the lengths of two neighbouring classes.
const STEP: f64 = 1.1;

/// The role byte of a role none of the known ones (a name a newer peer
/// sent): no filter allows it.
pub(crate) const OTHER_ROLE: u8 = 0xff;

/// The class of a text `len` bytes long: 1 for an empty one, then one
/// more for every 10% of length, up to 255 (about 2.6 · 10¹⁰ bytes, far
/// beyond what a record holds).
pub(crate) fn class_of(len: usize) -> u8 {
    let c = 1.0 + ((len as f64) + 1.0).ln() / STEP.ln();
    c.round().clamp(1.0, 255.0) as u8
}

/// The length a class stands for (the middle of its range, in bytes);
/// `None` for class 0, "not known".
pub(crate) fn length_of(class: u8) -> Option<f64> {
    // Worked out once: a search asks for thousands.
    static LENGTHS: std::sync::LazyLock<[f64; 256]> =
        std::sync::LazyLock::new(|| std::array::from_fn(|c| STEP.powf(c as f64 - 1.0) - 1.0));
    (class > 0).then(|| LENGTHS[usize::from(class)])
}

/// The role byte of a `records.role` value.
pub(crate) fn role_byte(value: rusqlite::types::ValueRef<'_>) -> u8 {
    codec::role_code_in(value).unwrap_or(OTHER_ROLE)
}

/// The block of record `id` and its byte within it.
fn place(id: i64) -> (i64, usize) {
    super::blocks::place::<BLOCK>(id)
}

/// One block's bytes, each [`BLOCK`] long: what a damaged or missing
/// column holds is read as all unknown.
#[derive(Debug, Clone, Default)]
struct Block {
    lens: Vec<u8>,
    roles: Vec<u8>,
}

/// One column of a block's row: [`BLOCK`] bytes, all unknown when it is
/// missing or damaged.
fn column_of(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(match r.get_ref(i)?.as_blob() {
        Ok(b) if b.len() == BLOCK as usize => b.to_vec(),
        _ => vec![0; BLOCK as usize],
    })
}

impl Block {
    fn empty() -> Block {
        Block {
            lens: vec![0; BLOCK as usize],
            roles: vec![0; BLOCK as usize],
        }
    }
}

/// Bytes of records inserted in the current transaction, written to
/// `record_lens` and `record_bytes` by [`Pending::write`] before it
/// commits.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// (length class, role byte) by record; a byte left 0 is not written.
    noted: super::blocks::Noted<(u8, u8), BLOCK>,
}

impl Pending {
    /// Notes that record `id`'s plain text is `len` bytes long and its
    /// role `role` (a [`role_byte`]).
    pub(crate) fn add(&mut self, id: i64, len: usize, role: u8) {
        self.note(id, class_of(len), role);
    }

    fn note(&mut self, id: i64, class: u8, role: u8) {
        self.noted.note(id, (class, role));
    }

    /// Drops what was noted of record `id`.
    pub(crate) fn forget(&mut self, id: i64) {
        self.noted.forget(id);
    }

    /// Writes what was noted (one read and one write per block touched)
    /// and forgets it.
    pub(crate) fn write(&mut self, conn: &Connection) -> Result<(), StoreError> {
        for (block, bytes) in self.noted.take() {
            patch(conn, block, true, |b| {
                for (at, (class, role)) in bytes {
                    if class > 0 {
                        b.lens[at] = class;
                    }
                    if role > 0 {
                        b.roles[at] = role;
                    }
                }
            })?;
        }
        Ok(())
    }
}

/// Changes a block's bytes through `edit` (a damaged column starts all
/// unknown). A block not stored yet is made, all unknown, only when
/// `create` says so. Its lengths are a row of `record_lens`, its roles a
/// row of `record_bytes`; both are written.
fn patch(
    conn: &Connection,
    block: i64,
    create: bool,
    edit: impl FnOnce(&mut Block),
) -> Result<(), StoreError> {
    let lens = stored(conn, LENS, block)?;
    let roles = stored(conn, ROLES, block)?;
    if lens.is_none() && roles.is_none() && !create {
        return Ok(());
    }
    let mut b = Block::empty();
    b.lens = lens.unwrap_or(b.lens);
    b.roles = roles.unwrap_or(b.roles);
    edit(&mut b);
    conn.prepare_cached("INSERT OR REPLACE INTO record_lens(block, lens) VALUES (?1, ?2)")?
        .execute(params![block, b.lens])?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO record_bytes(block, lens, roles) VALUES (?1, x'', ?2)",
    )?
    .execute(params![block, b.roles])?;
    Ok(())
}

/// Where a kind of byte is kept: its table and column.
type Place = (&'static str, &'static str);
/// The lengths' table and column.
const LENS: Place = ("record_lens", "lens");
/// The roles' table and column.
const ROLES: Place = ("record_bytes", "roles");

/// The query for one block's bytes of `place`.
fn block_query((table, column): Place) -> String {
    format!("SELECT {column} FROM {table} WHERE block = ?1")
}

/// The stored bytes of `place` for `block`; `None` without a row.
fn stored(conn: &Connection, place: Place, block: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached(&block_query(place))?
        .query_row([block], |r| column_of(r, 0))
        .optional()
}

/// Makes the bytes of records `ids` unknown again (a forget leaves no
/// trace of a record): one read and write per row touched.
pub(crate) fn clear(
    conn: &Connection,
    ids: impl IntoIterator<Item = i64>,
) -> Result<(), StoreError> {
    for (block, ats) in super::blocks::by_block::<BLOCK>(ids) {
        patch(conn, block, false, |b| {
            for at in ats {
                b.lens[at] = 0;
                b.roles[at] = 0;
            }
        })?;
    }
    Ok(())
}

/// The plain text's length of a stored `text` value, from its bytes and
/// the row's `flags`, without decompressing it (a zstd frame states its
/// size). `None` for a value that cannot say.
fn plain_len(text: &[u8], flags: i64) -> Option<usize> {
    match flags & codec::ENCODING {
        0 => Some(text.len()),
        _ => zstd::zstd_safe::get_frame_content_size(text)
            .ok()
            .flatten()
            .map(|n| n as usize),
    }
}

/// [`plain_len`] of a `text` column's value (older databases hold some
/// as SQL text, newer ones as blobs).
fn stored_len(text: rusqlite::types::ValueRef<'_>, flags: i64) -> Option<usize> {
    use rusqlite::types::ValueRef;
    match text {
        ValueRef::Blob(b) | ValueRef::Text(b) => plain_len(b, flags),
        _ => None,
    }
}

/// Records per backfill transaction.
const BACKFILL_BATCH: i64 = 50_000;

/// Fills in the lengths of records stored before the lengths existed (v13),
/// resuming from the id saved in `meta.lengths_backfill`. Returns how many
/// records it filled in.
pub(crate) fn backfill_lengths(conn: &mut Connection) -> Result<u64, StoreError> {
    backfill(conn, "lengths_backfill", "flags, text", |r| {
        Ok(stored_len(r.get_ref(2)?, r.get(1)?).map(|len| (class_of(len), 0)))
    })
}

/// Fills in the roles of records stored before the roles existed (v15),
/// resuming from the id saved in `meta.roles_backfill`. Returns how many
/// records it filled in.
pub(crate) fn backfill_roles(conn: &mut Connection) -> Result<u64, StoreError> {
    backfill(conn, "roles_backfill", "role", |r| {
        Ok(Some((0, role_byte(r.get_ref(1)?))))
    })
}

/// Fills in bytes of the records stored before a column existed, in
/// batches by id from the one saved in `meta.<key>` (see
/// `store::backfill`): each record's row of its id and `columns` gives
/// `bytes` its (length class, role byte), a 0 being left as it is, or
/// nothing to write. Returns how many records it filled in.
fn backfill(
    conn: &mut Connection,
    key: &str,
    columns: &str,
    bytes: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<Option<(u8, u8)>>,
) -> Result<u64, StoreError> {
    let mut filled = 0u64;
    let sql = format!("SELECT id, {columns} FROM records WHERE id > ?1 ORDER BY id LIMIT ?2");
    super::backfill::in_batches(conn, key, |tx, from| {
        let mut batch = Pending::default();
        let mut last = None;
        {
            let mut stmt = tx.prepare_cached(&sql)?;
            let mut rows = stmt.query(params![from, BACKFILL_BATCH])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                if let Some((class, role)) = bytes(r)? {
                    batch.note(id, class, role);
                    filled += 1;
                }
                last = Some(id);
            }
        }
        batch.write(tx)?;
        Ok(last)
    })?;
    Ok(filled)
}

/// Blocks whose lengths [`Reader::typical`] averages: the newest 65,536
/// records.
const TYPICAL_BLOCKS: i64 = 64;

/// Reads record bytes for one search, each block once.
pub(crate) struct Reader<'c> {
    conn: &'c Connection,
    lens: Column<'c>,
    roles: Column<'c>,
    /// The records' times and decision marks (`store::record_times`),
    /// made on first use: most searches never ask.
    times: Option<super::record_times::Reader<'c>>,
    /// [`Reader::typical`], once read.
    typical: Option<Option<f64>>,
    /// Where many lengths are read at once from, when the search has one
    /// (`store::columns_file::Bytes::lengths`).
    many: Option<Box<dyn Classes + 'c>>,
}

/// A source of many records' length classes at once, each 0 where it
/// cannot say.
pub(crate) trait Classes {
    /// The classes of `ids`, in their order.
    fn classes(&mut self, ids: &[i64]) -> Vec<u8>;
}

/// Blocks a [`Column`] keeps at once (1 KiB each). A question's words
/// each ask about their newest matches, newest first, so they share the
/// newest blocks and seldom come back to an old one: the column keeps the
/// newest blocks it read and lets the oldest go. Keeping every block read
/// (5,180 a table at 10 GB) cost a fresh process a page fault per four of
/// them; keeping only the last 256 read made a question whose words each
/// reach back read the newest blocks again for every word. Reading each
/// block once instead, into one mapping advised for huge pages (28f361b,
/// reverted), read a third fewer blocks for a question at 10 GB and took
/// the same time in the release build: the blocks read again come from
/// SQLite's page cache, and the huge pages cost their zeroing.
const KEPT_BLOCKS: usize = 1024;

/// One column of the blocks, the newest [`KEPT_BLOCKS`] read kept.
struct Column<'c> {
    /// A block's row; `None` on a database too old to have the table
    /// (opened read-only).
    row: Option<rusqlite::CachedStatement<'c>>,
    /// Blocks read: the slot of `slots` that holds a kept one, `None` for
    /// one without a row (which costs no slot and is never let go).
    kept: rustc_hash::FxHashMap<i64, Option<usize>>,
    /// The blocks in slots, oldest first: the first is let go when a
    /// block needs a slot and none is free.
    order: std::collections::BTreeSet<i64>,
    /// The kept blocks' bytes, [`BLOCK`] each.
    slots: Vec<Vec<u8>>,
    /// Slots holding no block (one whose block had no row).
    free: Vec<usize>,
    /// The last block asked about and its slot (consecutive ids share it).
    last: Option<(i64, usize)>,
    /// How many blocks it keeps ([`KEPT_BLOCKS`]).
    cap: usize,
}

impl<'c> Column<'c> {
    fn new(conn: &'c Connection, place: Place) -> rusqlite::Result<Self> {
        let row = match super::schema::has_table(conn, place.0)? {
            true => Some(conn.prepare_cached(&block_query(place))?),
            false => None,
        };
        Ok(Column {
            row,
            kept: Default::default(),
            order: Default::default(),
            slots: Vec::new(),
            free: Vec::new(),
            last: None,
            cap: KEPT_BLOCKS,
        })
    }

    /// Record `id`'s byte; 0 when not known.
    fn byte(&mut self, id: i64) -> rusqlite::Result<u8> {
        let (block, at) = place(id);
        if let Some((b, slot)) = self.last
            && b == block
        {
            return Ok(self.slots[slot][at]);
        }
        let Some(stmt) = &mut self.row else {
            return Ok(0);
        };
        if let Some(&slot) = self.kept.get(&block) {
            let Some(slot) = slot else {
                return Ok(0);
            };
            self.last = Some((block, slot));
            return Ok(self.slots[slot][at]);
        }
        // The slot `last` names may be given to this block.
        self.last = None;
        // Every slot taken: the oldest block's goes to this one.
        let oldest = match self.free.is_empty() && self.slots.len() >= self.cap {
            true => self.order.pop_first(),
            false => None,
        };
        let slot = match (
            self.free.pop(),
            oldest.and_then(|o| self.kept.remove(&o).flatten()),
        ) {
            (Some(s), _) | (None, Some(s)) => s,
            (None, None) => {
                self.slots.push(vec![0; BLOCK as usize]);
                self.slots.len() - 1
            }
        };
        let bytes = &mut self.slots[slot];
        let found = stmt
            .query_row([block], |r| {
                match r.get_ref(0)?.as_blob() {
                    Ok(b) if b.len() == BLOCK as usize => bytes.copy_from_slice(b),
                    // A damaged column reads as all unknown.
                    _ => bytes.fill(0),
                }
                Ok(())
            })
            .optional()?;
        if found.is_none() {
            self.free.push(slot);
            self.kept.insert(block, None);
            return Ok(0);
        }
        self.kept.insert(block, Some(slot));
        self.order.insert(block);
        self.last = Some((block, slot));
        Ok(self.slots[slot][at])
    }
}

impl<'c> Reader<'c> {
    /// A reader of `conn`'s record bytes.
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<Self> {
        Ok(Reader {
            conn,
            lens: Column::new(conn, LENS)?,
            roles: Column::new(conn, ROLES)?,
            times: None,
            typical: None,
            many: None,
        })
    }

    /// Reads many lengths at once from `many` where it knows them
    /// ([`Reader::lengths`]).
    pub(crate) fn with_many(mut self, many: Option<Box<dyn Classes + 'c>>) -> Self {
        self.many = many;
        self
    }

    /// The lengths of `ids`, each as [`Reader::length`] gives it: from the
    /// source of many when the reader has one and it knows, else one at a
    /// time.
    pub(crate) fn lengths(&mut self, ids: &[i64]) -> rusqlite::Result<Vec<Option<f64>>> {
        let many = match &mut self.many {
            Some(m) => m.classes(ids),
            None => Vec::new(),
        };
        ids.iter()
            .enumerate()
            .map(|(i, &id)| match many.get(i).and_then(|&c| length_of(c)) {
                Some(len) => Ok(Some(len)),
                None => self.length(id),
            })
            .collect()
    }

    /// The average length of the newest records (those of the last
    /// [`TYPICAL_BLOCKS`] blocks, so the cost is the same at any size of
    /// history), which BM25 measures each match's length against; `None`
    /// when no length is known.
    pub(crate) fn typical(&mut self) -> rusqlite::Result<Option<f64>> {
        if let Some(t) = self.typical {
            return Ok(t);
        }
        let mut sum = 0.0;
        let mut n = 0u64;
        if self.lens.row.is_some() {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT lens FROM record_lens ORDER BY block DESC LIMIT ?1")?;
            let mut rows = stmt.query([TYPICAL_BLOCKS])?;
            while let Some(r) = rows.next()? {
                for len in column_of(r, 0)?.iter().filter_map(|c| length_of(*c)) {
                    sum += len;
                    n += 1;
                }
            }
        }
        let t = (n > 0).then(|| sum / n as f64);
        self.typical = Some(t);
        Ok(t)
    }

    /// The length (bytes of plain text, to 10%) of record `id`, from its
    /// block, else from the record itself; `None` if there is no such
    /// record.
    pub(crate) fn length(&mut self, id: i64) -> rusqlite::Result<Option<f64>> {
        if let Some(known) = length_of(self.lens.byte(id)?) {
            return Ok(Some(known));
        }
        let len = self
            .conn
            .prepare_cached("SELECT flags, text FROM records WHERE id = ?1")?
            .query_row([id], |r| Ok(stored_len(r.get_ref(1)?, r.get(0)?)))
            .optional()?
            .flatten();
        Ok(len.and_then(|n| length_of(class_of(n))))
    }

    /// The length class of record `id` as its block holds it; 0 when not
    /// known (no block, or a database from before the table).
    pub(crate) fn class(&mut self, id: i64) -> rusqlite::Result<u8> {
        self.lens.byte(id)
    }

    /// The role byte of record `id` when its block knows it; `None` when
    /// not known (the caller reads the record's row instead).
    pub(crate) fn role(&mut self, id: i64) -> rusqlite::Result<Option<u8>> {
        Ok(Some(self.roles.byte(id)?).filter(|r| *r > 0))
    }

    /// The time and decision mark of record `id` when its block knows
    /// them (see `store::record_times`); `None` when not known.
    pub(crate) fn stamp(
        &mut self,
        id: i64,
    ) -> rusqlite::Result<Option<super::record_times::Stamp>> {
        let times = match &mut self.times {
            Some(t) => t,
            None => self
                .times
                .insert(super::record_times::Reader::new(self.conn)?),
        };
        times.stamp(id)
    }
}

/// Every record within `within` (ascending, disjoint ranges of ids, from
/// `(1, upto)` for the whole history to the runs of a project's sessions)
/// whose role byte `wanted` accepts, as ranges of ids handed to `add` in
/// ascending order; `None` when the roles are still being filled in or the
/// table is missing (the caller then reads the rows). Where the bytes
/// cannot say (a missing or damaged row, a zero byte, which is also what a
/// forgotten record leaves), the records of that stretch are read from
/// `records`, one range query each; a history with nothing forgotten has
/// none but the tail after its last record.
pub(crate) fn with_roles(
    conn: &Connection,
    within: &[(i64, i64)],
    wanted: impl Fn(u8) -> bool,
    add: impl FnMut(i64, i64),
) -> Result<Option<()>, StoreError> {
    if !super::backfill::done(conn, "record_bytes", "roles_backfill")? {
        return Ok(None);
    }
    let mut wants = [false; 256];
    for (b, w) in wants.iter_mut().enumerate() {
        *w = wanted(b as u8);
    }
    super::blocks::wanted_within::<BLOCK>(
        conn,
        within,
        super::blocks::Sides {
            blocks: "SELECT block, roles FROM record_bytes WHERE block BETWEEN ?1 AND ?2 ORDER BY block",
            width: 1,
            rows: "SELECT id, role FROM records WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
        },
        |b| (b[0] != 0).then(|| wants[usize::from(b[0])]),
        |r| Ok(wants[usize::from(role_byte(r.get_ref(1)?))]),
        add,
    )?;
    Ok(Some(()))
}

/// Every record's known bytes: (record id, length class, role byte), by
/// id, for each id with a byte known.
#[cfg(test)]
pub(crate) fn held(conn: &Connection) -> Vec<(i64, u8, u8)> {
    let mut blocks: std::collections::BTreeMap<i64, Block> = Default::default();
    for (table, column) in [("record_lens", "lens"), ("record_bytes", "roles")] {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT block, {column} FROM {table} ORDER BY block"
            ))
            .expect("bytes");
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, column_of(r, 1)?)))
            .expect("rows");
        for row in rows {
            let (block, bytes) = row.expect("row");
            let b = blocks.entry(block).or_insert_with(Block::empty);
            match column {
                "lens" => b.lens = bytes,
                _ => b.roles = bytes,
            }
        }
    }
    let mut out = Vec::new();
    for (block, b) in blocks {
        for (at, (c, role)) in b.lens.iter().zip(&b.roles).enumerate() {
            if *c > 0 || *role > 0 {
                out.push((block * BLOCK + at as i64, *c, *role));
            }
        }
    }
    out
}

/// What [`held`] should be: every record's class, from its decoded text,
/// and its role byte.
#[cfg(test)]
pub(crate) fn expected(conn: &Connection) -> Vec<(i64, u8, u8)> {
    let mut stmt = conn
        .prepare("SELECT id, flags, text, role FROM records ORDER BY id")
        .expect("records");
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                role_byte(r.get_ref(3)?),
            ))
        })
        .expect("rows");
    rows.map(|row| {
        let (id, flags, text, role) = row.expect("row");
        (id, class_of(codec::decode(conn, &text, flags).len()), role)
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_with_length_and_stand_for_it_within_a_step() {
        assert_eq!(class_of(0), 1);
        assert_eq!(length_of(0), None);
        let mut last = 0;
        for len in [1usize, 10, 100, 1_000, 10_000, 100_000, 10_000_000] {
            let c = class_of(len);
            assert!(c > last, "{len}: class {c} after {last}");
            last = c;
            let back = length_of(c).expect("known");
            let ratio = (back + 1.0) / (len as f64 + 1.0);
            assert!((0.95..=1.05).contains(&ratio), "{len} → {c} → {back}");
        }
        assert_eq!(class_of(usize::MAX), 255);
    }

    /// A reader of `conn`, checked to give each of `want`'s records the
    /// length of its class, and its role byte where `role_known` says the
    /// block knows it.
    fn reads_as<'c>(
        conn: &'c Connection,
        want: &[(i64, u8, u8)],
        role_known: impl Fn(i64) -> bool,
    ) -> Reader<'c> {
        let mut reader = Reader::new(conn).expect("reader");
        for (id, class, role) in want {
            assert_eq!(reader.length(*id).expect("length"), length_of(*class));
            let known = role_known(*id).then_some(*role);
            assert_eq!(reader.role(*id).expect("role"), known, "record {id}");
        }
        reader
    }

    /// Asserts that [`with_roles`] finds, for several sets of wanted
    /// roles and of ranges to look in, the records a look at every row
    /// finds, in ascending ranges.
    fn finds_what_the_rows_hold(conn: &Connection, what: &str) {
        let want = expected(conn);
        let top = want.last().map_or(0, |w| w.0);
        let wholes = [top, top + 3_000, top / 2, 0].map(|upto| vec![(1, upto)]);
        // Stretches that start and end inside blocks, touch, span a block
        // boundary and the end of the records.
        let some = vec![(3, 40), (41, 41), (900, 1_100), (1_500, top + 10)];
        for within in wholes.iter().chain([&some]) {
            for wanted in [&[1u8][..], &[2], &[1, 2], &[3, 4], &[OTHER_ROLE], &[]] {
                let mut got: Vec<i64> = Vec::new();
                let done = with_roles(
                    conn,
                    within,
                    |b| wanted.contains(&b),
                    |first, last| {
                        assert!(first <= last, "{what}: {first}..={last}");
                        assert!(got.last().is_none_or(|&l| l < first), "{what}: order");
                        got.extend(first..=last);
                    },
                )
                .expect("with roles");
                assert_eq!(done, Some(()), "{what}");
                let rows: Vec<i64> = want
                    .iter()
                    .filter(|w| within.iter().any(|r| r.0 <= w.0 && w.0 <= r.1))
                    .filter(|w| wanted.contains(&w.2))
                    .map(|w| w.0)
                    .collect();
                assert_eq!(got, rows, "{what}: {wanted:?} within {within:?}");
            }
        }
    }

    fn record(session: &str, role: Role, text: &str) -> crate::record::Record {
        crate::record::Record::new("claude-code", session, role, text)
    }

    use crate::record::Role;

    #[test]
    fn bytes_follow_inserts_backfills_and_deletes() {
        use crate::store::Store;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let mut store = Store::open(&path).expect("open");
        let origin = cairn_protocol::NodeId([7; 20]).to_string();
        store.ensure_log(&origin, 1_000).expect("own log");
        // Short texts stay plain; long ones are compressed, whose length
        // comes from the frame.
        let long = "the queue worker retries the payment job ".repeat(40);
        let mut ing = store.ingest(&origin).expect("ingest");
        for i in 0..1_500 {
            let text = match i % 3 {
                0 => format!("short {i}"),
                1 => format!("{long} {i}"),
                _ => format!("a middling record about the cache, number {i}"),
            };
            let role = Role::ALL[i % 4];
            ing.insert(&record(&format!("s{}", i % 7), role, &text), None)
                .expect("insert");
        }
        ing.commit().expect("commit");
        let conn = store.conn();
        let compressed: i64 = conn
            .query_row(
                "SELECT count(*) FROM records WHERE flags & ?1 != 0",
                [codec::ENCODING],
                |r| r.get(0),
            )
            .expect("count");
        assert!(compressed >= 400, "{compressed} compressed");
        let want = expected(conn);
        assert_eq!(want.len(), 1_500);
        assert!((1..=4).all(|r| want.iter().any(|w| w.2 == r)), "four roles");
        assert_eq!(held(conn), want, "written with their records");
        let mut reader = reads_as(conn, &want, |_| true);
        finds_what_the_rows_hold(conn, "written");

        let all: Vec<f64> = want.iter().filter_map(|w| length_of(w.1)).collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let typical = reader.typical().expect("typical").expect("known");
        assert!((typical - mean).abs() < 1e-6, "{typical} vs {mean}");
        drop(reader);

        // Unknown bytes: lengths are read from the records instead, to the
        // same value; roles are not known, and `with_roles` reads the rows.
        conn.execute_batch(
            "DELETE FROM record_lens WHERE block = 1;
             DELETE FROM record_bytes WHERE block = 1;",
        )
        .expect("drop a block");
        drop(reads_as(conn, &want, |id| id < BLOCK));
        finds_what_the_rows_hold(conn, "a block missing");

        // A damaged row (not a blob) counts as unknown, read from the
        // records too, and a later write starts it afresh.
        conn.execute_batch(
            "UPDATE record_lens SET lens = 7 WHERE block = 0;
             UPDATE record_bytes SET roles = x'0102' WHERE block = 0;",
        )
        .expect("damage a row");
        let mut reader = reads_as(conn, &want, |_| false);
        // (Block 1 was dropped above, block 0 is damaged: none is known.)
        assert_eq!(reader.typical().expect("typical"), None);
        drop(reader);
        finds_what_the_rows_hold(conn, "a block damaged");
        clear(conn, [want[0].0]).expect("clear into a damaged row");
        let rewritten: (Vec<u8>, Vec<u8>) = conn
            .query_row(
                "SELECT l.lens, b.roles FROM record_lens l JOIN record_bytes b USING (block)
                 WHERE block = 0",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        assert_eq!(
            rewritten,
            (vec![0; BLOCK as usize], vec![0; BLOCK as usize])
        );
        // A zero byte of a stored record, in a row that is whole.
        finds_what_the_rows_hold(conn, "zeros for stored records");

        // A database from before either column, with roles stored both
        // ways (a known role's name in an older row) and one no filter
        // knows: backfilled when opened.
        conn.execute_batch(
            "UPDATE records SET role = 'user' WHERE id = 5;
             UPDATE records SET role = 'reviewer' WHERE id = 6;
             DELETE FROM record_bytes;
             DELETE FROM record_lens;
             INSERT INTO meta(key, value) VALUES ('lengths_backfill', '0'), ('roles_backfill', '0');",
        )
        .expect("older");
        // Until the roles are filled in, they cannot say which records
        // hold a role.
        assert_eq!(
            with_roles(conn, &[(1, 100)], |_| true, |_, _| {}).expect("pending"),
            None
        );
        drop(store);
        let mut store = Store::open(&path).expect("reopen");
        let want = expected(store.conn());
        assert_eq!((want[4].2, want[5].2), (1, OTHER_ROLE));
        assert_eq!(held(store.conn()), want, "backfilled");
        let markers: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM meta WHERE key IN ('lengths_backfill', 'roles_backfill')",
                [],
                |r| r.get(0),
            )
            .expect("markers");
        assert_eq!(markers, 0, "done");
        finds_what_the_rows_hold(store.conn(), "backfilled");

        // A forgotten record leaves no byte behind.
        let target = cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: "s3".into(),
        };
        let report = store.forget(&[target], 2_000).expect("forget");
        assert!(report.records > 200);
        let left = expected(store.conn());
        assert_eq!(left.len(), 1_500 - report.records as usize);
        assert_eq!(held(store.conn()), left);
        finds_what_the_rows_hold(store.conn(), "forgotten");

        // Nor does one a rewritten file no longer holds.
        {
            let mut ing = store.ingest(&origin).expect("ingest");
            let (src, keep) = crate::store::record_times::tests::three_lines_of_a_file(&mut ing);
            assert_eq!(ing.retain_source_records(src, &keep).expect("retain"), 2);
            ing.commit().expect("commit");
        }
        let left = expected(store.conn());
        assert_eq!(held(store.conn()), left, "a rewrite");
        finds_what_the_rows_hold(store.conn(), "a rewrite");

        // A database from before the tables, opened read-only (so never
        // migrated): every length comes from the records, no role is known.
        store
            .conn()
            .execute_batch("DROP TABLE record_bytes; DROP TABLE record_lens;")
            .expect("drop the tables");
        let mut reader = reads_as(store.conn(), &left, |_| false);
        assert_eq!(reader.typical().expect("typical"), None);
        assert_eq!(
            with_roles(store.conn(), &[(1, 100)], |_| true, |_, _| {}).expect("no table"),
            None
        );
    }

    /// A store at `path` with 2,100 records of every role in `sessions`
    /// sessions, texts of `word` repeated up to `most - 1` times, and what
    /// its bytes should be.
    fn upgrade_store(
        path: &std::path::Path,
        word: &str,
        sessions: usize,
        most: usize,
    ) -> (crate::store::Store, Vec<(i64, u8, u8)>) {
        let mut store = crate::store::Store::open(path).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for i in 0..2_100 {
            let text = word.repeat(i % most);
            let r = record(&format!("s{}", i % sessions), Role::ALL[i % 5], &text);
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        let want = expected(store.conn());
        (store, want)
    }

    #[test]
    fn a_v14_database_keeps_its_lengths_and_gains_its_roles() {
        use crate::store::Store;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let (store, want) = upgrade_store(&path, "the cache ", 9, 17);
        // As v14 left it: lengths alone, in their own table.
        store
            .conn()
            .execute_batch(
                "CREATE TABLE record_lengths(block INTEGER PRIMARY KEY, lens BLOB NOT NULL);
                 INSERT INTO record_lengths SELECT block, lens FROM record_lens;
                 DROP TABLE record_bytes;
                 DROP TABLE record_lens;
                 PRAGMA user_version = 14;",
            )
            .expect("v14");
        drop(store);
        let store = Store::open(&path).expect("upgrade");
        assert_eq!(held(store.conn()), want);
        let old: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'record_lengths'",
                [],
                |r| r.get(0),
            )
            .expect("old table");
        assert_eq!(old, 0);
        finds_what_the_rows_hold(store.conn(), "upgraded");
    }

    #[test]
    fn a_v16_database_moves_its_lengths_to_their_own_table() {
        use crate::store::Store;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.db");
        let (store, want) = upgrade_store(&path, "the queue ", 7, 13);
        // As v16 left it: both bytes in one row.
        store
            .conn()
            .execute_batch(
                "UPDATE record_bytes
                     SET lens = (SELECT lens FROM record_lens l WHERE l.block = record_bytes.block);
                 DROP TABLE record_lens;
                 PRAGMA user_version = 16;",
            )
            .expect("v16");
        // Read as it is (a database opened read-only is not migrated):
        // the roles from their column, the lengths from the records.
        drop(reads_as(store.conn(), &want, |_| true));
        drop(store);
        let store = Store::open(&path).expect("upgrade");
        assert_eq!(held(store.conn()), want);
        let left: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM record_bytes WHERE length(lens) > 0",
                [],
                |r| r.get(0),
            )
            .expect("lengths left behind");
        assert_eq!(left, 0);
        drop(reads_as(store.conn(), &want, |_| true));
        finds_what_the_rows_hold(store.conn(), "upgraded from v16");
    }

    #[test]
    fn a_column_keeping_few_blocks_reads_every_byte_as_stored() {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(
            "CREATE TABLE record_lens(block INTEGER PRIMARY KEY, lens BLOB NOT NULL)",
        )
        .expect("table");
        // Block b's byte i is (b * 7 + i) % 251 + 1; block 4 has no row
        // and block 6 a damaged one (too short), both read as unknown.
        let byte_of = |b: i64, i: i64| -> u8 {
            match b {
                4 | 6 => 0,
                _ => ((b * 7 + i) % 251 + 1) as u8,
            }
        };
        for b in 0..10i64 {
            let blob: Vec<u8> = match b {
                4 => continue,
                6 => vec![9; 10],
                _ => (0..BLOCK).map(|i| byte_of(b, i)).collect(),
            };
            conn.execute(
                "INSERT INTO record_lens(block, lens) VALUES (?1, ?2)",
                params![b, blob],
            )
            .expect("insert");
        }
        let mut col = Column::new(&conn, LENS).expect("column");
        col.cap = 3;
        // Ascending, descending, back and forth across blocks, and past
        // the last block: more blocks than it keeps, each asked again
        // after it was let go.
        let mut ids: Vec<i64> = (0..10 * BLOCK).step_by(97).collect();
        ids.extend((0..10 * BLOCK).rev().step_by(131));
        ids.extend([
            5,
            9 * BLOCK + 3,
            6,
            4 * BLOCK + 1,
            7,
            6 * BLOCK,
            8,
            12 * BLOCK,
        ]);
        for id in ids {
            let (b, i) = (id.div_euclid(BLOCK), id.rem_euclid(BLOCK));
            let want = if b < 10 { byte_of(b, i) } else { 0 };
            assert_eq!(col.byte(id).expect("byte"), want, "record {id}");
            assert!(col.slots.len() <= 3, "kept {}", col.slots.len());
            assert_eq!(col.order.len() + col.free.len(), col.slots.len());
        }
    }
}
