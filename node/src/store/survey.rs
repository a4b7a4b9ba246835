//! The survey: what the agents' stores looked like when the index last
//! read every one whole, kept in the database's one `survey` row, so that
//! a pass with nothing new compares the walk with it instead of with
//! every store's `sources` row.
//!
//! Per source: how many stores were on disk, a [`Tally`] (the sum of a
//! keyed 128-bit SipHash of each store's path, size and mtime) and those
//! hashes sorted, which tell a pass which stores differ. A survey holds
//! while the database is as it was taken: the same configuration (a hash
//! of it, this build and the schema), the same generation of the
//! `sources` rows (renewed by every write to them), the same newest
//! record (one stored since, by sync, leaves work for a pass) and the
//! derived files at the same sizes and times. A damaged row can only fail
//! to match a walk, which then takes the ordinary pass: any doubt means
//! that pass, never a wrong one.

use std::hash::Hasher;
use std::path::Path;

use rusqlite::{OptionalExtension, TransactionBehavior};
use siphasher::sip128::{Hasher128, SipHasher13};

use super::{SourceStamp, Store, StoreError};

/// The file an older build kept the survey in, beside the database;
/// removed when a node opens.
pub const OLD_FILE: &str = "survey.bin";

/// Mixed into the configuration key: a new layout of the row is never
/// read as an older one.
const MAGIC: &[u8; 8] = b"cairnsv4";

/// Bytes of a source's entry after its name and before its hashes: the
/// count of its stores and the count of its hashes.
const COUNTS_LEN: usize = 8 + 8;

/// The configuration a survey belongs to: a hash of a full description
/// of everything a pass depends on (the resolved configuration, whose
/// `Debug` form names all of it), of this build and of its schema.
pub fn config_key(config: &dyn std::fmt::Debug) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(&super::SCHEMA_VERSION.to_le_bytes());
    h.update(format!("{config:?}").as_bytes());
    *h.finalize().as_bytes()
}

/// One store as the index last read it.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// The agent whose source found it.
    pub agent: &'a str,
    /// Its path.
    pub path: &'a str,
    /// Size when last read.
    pub size: u64,
    /// Modification time (ns) when last read.
    pub mtime_ns: i64,
    /// The last pass could not read it.
    pub failed: bool,
    /// It was not on disk at the last pass.
    pub missing: bool,
}

/// Stores tallied: how many, and the sum of their hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    count: u64,
    sum: u128,
}

/// The SipHash keys of a survey's tallies, taken from its configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys(u64, u64);

impl Keys {
    /// The keys of a survey made with the configuration key `key`.
    pub fn of(key: &[u8; 32]) -> Keys {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&key[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Keys(word(0), word(8))
    }
}

/// The hash a survey keeps of the store at `path`, read whole at `size`
/// and `mtime_ns`.
pub fn store_hash(keys: Keys, path: &[u8], size: u64, mtime_ns: i64) -> u128 {
    let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
    // The length first, so that no two (path, size, mtime) hash the same
    // bytes.
    h.write(&(path.len() as u64).to_le_bytes());
    h.write(path);
    h.write(&size.to_le_bytes());
    h.write(&mtime_ns.to_le_bytes());
    u128::from(h.finish128())
}

impl Tally {
    /// Adds the store at `path` with `size` and `mtime_ns`.
    pub fn add(&mut self, keys: Keys, path: &[u8], size: u64, mtime_ns: i64) {
        self.add_hash(store_hash(keys, path, size, mtime_ns));
    }

    /// Adds a store by its [`store_hash`].
    pub fn add_hash(&mut self, hash: u128) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(hash);
    }
}

/// One source as surveyed.
struct Source {
    agent: String,
    /// Its stores on disk (those whose last read failed too) and the sum
    /// of the hashes of those read whole.
    tally: Tally,
    /// The hashes of the stores read whole, sorted.
    stores: Vec<u128>,
}

/// A survey for this configuration that still describes the database
/// it was loaded from (see the module documentation).
pub struct Survey {
    keys: Keys,
    /// The generation of the `sources` rows it was taken from.
    generation: i64,
    /// Per source with stores on disk, its agent id, tally and hashes.
    sources: Vec<Source>,
}

/// A source's stores as a survey to be written holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tallied {
    /// The agent id of the source.
    pub agent: String,
    /// Its stores on disk, those whose last read failed included.
    pub count: u64,
    /// The [`store_hash`] of each store read whole, in any order.
    pub hashes: Vec<u128>,
}

/// What a store a pass read was in a survey taken before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Was {
    /// Not among its stores (new, or back after being gone).
    Absent,
    /// Counted, but its last read had failed (no hash).
    Failed,
    /// Read whole, with this hash.
    Read(u128),
}

/// The sources of a survey of the `sources` rows `known`.
fn tallied<'a>(keys: Keys, known: impl IntoIterator<Item = Known<'a>>) -> Vec<Tallied> {
    let mut sources: Vec<Tallied> = Vec::new();
    for k in known {
        if k.missing {
            continue;
        }
        // A store whose last read failed is counted with no hash: a walk,
        // which finds the store and hashes it, never matches it, and the
        // next pass reads it again.
        let s = source_of(&mut sources, k.agent);
        s.count += 1;
        if !k.failed {
            s.hashes
                .push(store_hash(keys, k.path.as_bytes(), k.size, k.mtime_ns));
        }
    }
    sources
}

/// The entry of `agent` in `sources`, added empty when it has none.
fn source_of<'s>(sources: &'s mut Vec<Tallied>, agent: &str) -> &'s mut Tallied {
    let at = match sources.iter().position(|s| s.agent == agent) {
        Some(at) => at,
        None => {
            sources.push(Tallied {
                agent: agent.to_owned(),
                count: 0,
                hashes: Vec::new(),
            });
            sources.len() - 1
        }
    };
    &mut sources[at]
}

/// The state of the database a survey holds for, beside its stores.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    /// The generation of the `sources` rows; `None` in a database too old
    /// to have one (opened read-only before its upgrade).
    generation: Option<i64>,
    /// The newest record's id (0 when there is none).
    newest: i64,
    /// The derived files' sizes and modification times ([`derived_files`]).
    derived: Option<Vec<u8>>,
}

/// Each derived file beside the database at `db`: a presence byte, then
/// its size and modification time (ns) when present. A file written since
/// (a pass, another program, damage) is then told by a survey, so the
/// pass that checks it runs. None while a reader's mark is on one
/// (`derived::note_damage`): no survey holds or is left until a pass
/// has checked it.
fn derived_files(db: &Path) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(super::Component::ALL.len() * 17);
    for c in super::Component::ALL {
        match std::fs::metadata(c.path(db)) {
            Ok(m) => {
                let time = m.modified().ok();
                if time.is_some_and(super::derived::is_mark) {
                    return None;
                }
                let mtime = time
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as u64);
                out.push(1);
                out.extend_from_slice(&m.len().to_le_bytes());
                out.extend_from_slice(&mtime.to_le_bytes());
            }
            Err(_) => out.push(0),
        }
    }
    Some(out)
}

/// A survey's sources as the row's body holds them: their count, then per
/// source its agent id (a length byte first), its counts and its hashes,
/// sorted.
fn encode(mut sources: Vec<Tallied>) -> Vec<u8> {
    // Agent ids are short; a longer one is left out, so its stores never
    // match and always take the ordinary pass. So is a source with no
    // stores.
    sources.retain(|s| s.agent.len() <= usize::from(u8::MAX) && s.count > 0);
    let hashes: usize = sources.iter().map(|s| s.hashes.len()).sum();
    let mut out = Vec::with_capacity(8 + sources.len() * 64 + hashes * 16);
    out.extend_from_slice(&(sources.len() as u64).to_le_bytes());
    for s in &mut sources {
        s.hashes.sort_unstable();
        out.push(s.agent.len() as u8);
        out.extend_from_slice(s.agent.as_bytes());
        out.extend_from_slice(&s.count.to_le_bytes());
        out.extend_from_slice(&(s.hashes.len() as u64).to_le_bytes());
        for h in &s.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
    }
    out
}

/// The sources of a body [`encode`] made; `None` when it is not one whole.
fn decode(body: &[u8]) -> Option<Vec<Source>> {
    let mut c = Cursor(body);
    let count = usize::try_from(c.u64()?).ok()?;
    let mut sources = Vec::with_capacity(count.min(256));
    for _ in 0..count {
        let len = usize::from(c.u8()?);
        let agent = std::str::from_utf8(c.take(len)?).ok()?.to_owned();
        let counts = c.take(COUNTS_LEN)?;
        let (n, h) = counts.split_at(8);
        let stores = u64::from_le_bytes(n.try_into().ok()?);
        let hashed = u64::from_le_bytes(h.try_into().ok()?);
        // A source's hashes are of some of its stores, and they are all
        // in the body.
        if hashed > stores || (hashed as usize).checked_mul(16)? > c.0.len() {
            return None;
        }
        let mut tally = Tally {
            count: stores - hashed,
            sum: 0,
        };
        let mut sorted = Vec::with_capacity(hashed as usize);
        for chunk in c.take(hashed as usize * 16)?.chunks_exact(16) {
            let h = u128::from_le_bytes(chunk.try_into().ok()?);
            tally.add_hash(h);
            sorted.push(h);
        }
        if !sorted.is_sorted() {
            return None;
        }
        sources.push(Source {
            agent,
            tally,
            stores: sorted,
        });
    }
    c.0.is_empty().then_some(sources)
}

/// Reads little-endian fields off the front of a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

/// The `sources` rows a pass with nothing to read compared the disk with,
/// and the store's [`Store::change_stamp`] from before it read them: while
/// the stamp has not moved they are still the rows.
pub type ComparedRows = ((i64, u64), Vec<SourceStamp>);

impl Store {
    /// Writes the survey of the `sources` rows of the `enabled` agents,
    /// keyed `key`: `compared` while nothing was committed since before
    /// its rows were read, otherwise the rows read again. Returns whether
    /// one was written.
    pub fn save_survey(
        &self,
        key: &[u8; 32],
        enabled: &[&str],
        compared: Option<ComparedRows>,
    ) -> Result<bool, StoreError> {
        let keys = Keys::of(key);
        self.write_survey(key, |s| {
            let stamps = match compared {
                Some((before, stamps)) if s.change_stamp()? == before => stamps,
                _ => s.source_stamps()?,
            };
            let known = stamps
                .iter()
                .filter(|s| enabled.contains(&s.agent.as_str()))
                .map(|s| Known {
                    agent: &s.agent,
                    path: &s.path,
                    size: s.size,
                    mtime_ns: s.mtime_ns,
                    failed: s.failed,
                    missing: s.missing,
                });
            Ok(Some(tallied(keys, known)))
        })
    }

    /// Writes the survey whose sources `sources` reads, keyed `key`;
    /// nothing when it answers `None`. It runs inside the transaction that
    /// writes the survey, so no other connection commits meanwhile.
    /// Returns whether one was written.
    pub fn save_survey_of(
        &self,
        key: &[u8; 32],
        sources: impl FnOnce(&Store) -> Result<Option<Vec<Tallied>>, StoreError>,
    ) -> Result<bool, StoreError> {
        self.write_survey(key, sources)
    }

    /// Writes the survey whose sources `sources` reads. It never waits for
    /// another process's write: a survey only spares a later pass its
    /// compare, so while the database is busy none is written.
    fn write_survey(
        &self,
        key: &[u8; 32],
        sources: impl FnOnce(&Store) -> Result<Option<Vec<Tallied>>, StoreError>,
    ) -> Result<bool, StoreError> {
        self.conn.busy_timeout(std::time::Duration::ZERO)?;
        let begun =
            rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate);
        self.conn.busy_timeout(super::BUSY_TIMEOUT)?;
        let tx = match begun {
            Ok(tx) => tx,
            Err(e) if super::is_busy(&e) => {
                tracing::debug!("the database is busy: no survey this time");
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        let Some(sources) = sources(self)? else {
            return Ok(false);
        };
        let stamp = self.survey_stamp()?;
        let (Some(generation), Some(derived)) = (stamp.generation, stamp.derived) else {
            return Ok(false);
        };
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO survey(id, key, generation, newest, derived, body)
                 VALUES (0, ?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(rusqlite::params![
                &key[..],
                generation,
                stamp.newest,
                derived,
                encode(sources)
            ])?;
        tx.commit()?;
        Ok(true)
    }

    /// Removes the survey, so that the next pass compares every row.
    pub fn drop_survey(&self) -> Result<(), StoreError> {
        self.conn.execute("DELETE FROM survey", [])?;
        Ok(())
    }

    /// The database's state a survey taken now would hold for.
    fn survey_stamp(&self) -> Result<Stamp, StoreError> {
        let newest = self
            .conn
            .prepare_cached("SELECT COALESCE(max(id), 0) FROM records")?
            .query_row([], |r| r.get(0))?;
        Ok(Stamp {
            generation: self.sources_gen()?,
            newest,
            derived: derived_files(self.path()),
        })
    }
}

impl Survey {
    /// The survey the database of `store` keeps for the configuration
    /// `key`, when it still describes the database (see the module
    /// documentation) and is whole.
    pub fn load(store: &Store, key: &[u8; 32]) -> Option<Survey> {
        match Survey::try_load(store, key) {
            Ok(survey) => survey,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the survey");
                None
            }
        }
    }

    fn try_load(store: &Store, key: &[u8; 32]) -> Result<Option<Survey>, StoreError> {
        if !super::schema::has_table(&store.conn, "survey")? {
            return Ok(None);
        }
        type Row = (Vec<u8>, i64, i64, Vec<u8>, Vec<u8>);
        let row: Option<Row> = store
            .conn
            .prepare_cached(
                "SELECT key, generation, newest, derived, body FROM survey WHERE id = 0",
            )?
            .query_row([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()?;
        let Some((row_key, generation, newest, derived, body)) = row else {
            return Ok(None);
        };
        let taken = Stamp {
            generation: Some(generation),
            newest,
            derived: Some(derived),
        };
        if row_key != key || taken != store.survey_stamp()? {
            return Ok(None);
        }
        Ok(decode(&body).map(|sources| Survey {
            keys: Keys::of(key),
            generation,
            sources,
        }))
    }

    /// The keys a walk tallies its stores with to compare them with this survey.
    pub fn keys(&self) -> Keys {
        self.keys
    }

    /// Whether `tally`, of every store the source of `agent` found on disk
    /// (each with its size and mtime), is the survey's for that source: the
    /// same stores, each read whole at that size and mtime.
    pub fn same(&self, agent: &str, tally: Tally) -> bool {
        self.source(agent).is_some_and(|s| s.tally == tally)
    }

    /// Whether the store with [`store_hash`] `hash` is one of the stores
    /// of the source of `agent` read whole, as the survey has it.
    pub fn holds(&self, agent: &str, hash: u128) -> bool {
        self.source(agent)
            .is_some_and(|s| s.stores.binary_search(&hash).is_ok())
    }

    /// How many stores of the source of `agent` were on disk, those whose
    /// last read failed included.
    pub fn count(&self, agent: &str) -> u64 {
        self.source(agent).map_or(0, |s| s.tally.count)
    }

    /// The agent ids of the sources that had stores on disk.
    pub fn agents(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(|s| s.agent.as_str())
    }

    fn source(&self, agent: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.agent == agent)
    }

    /// How many sources had stores on disk when the survey was taken: a
    /// walk with nothing new finds stores for exactly these.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Whether the survey was taken from `sources` rows at `generation`
    /// (a database's [`crate::store::Store::sources_gen`]): then it
    /// describes that database's rows, whatever else was written since.
    pub fn describes_generation(&self, generation: Option<i64>) -> bool {
        generation == Some(self.generation)
    }

    /// The sources of a survey of the database after a pass read the
    /// stores of `read` and nothing else changed: each store's agent,
    /// what it was in this survey, and its `sources` row now (`None` when
    /// it has none or is marked gone: then no survey can be made this way).
    pub fn after<'a>(
        &self,
        read: impl IntoIterator<Item = (&'a str, Was, Option<Known<'a>>)>,
    ) -> Option<Vec<Tallied>> {
        let mut sources: Vec<Tallied> = self
            .sources
            .iter()
            .map(|s| Tallied {
                agent: s.agent.clone(),
                count: s.tally.count,
                hashes: s.stores.clone(),
            })
            .collect();
        for (agent, was, now) in read {
            let now = now.filter(|k| !k.missing && k.agent == agent)?;
            let s = source_of(&mut sources, agent);
            match was {
                Was::Absent => s.count += 1,
                Was::Failed => {}
                Was::Read(h) => {
                    let i = s.hashes.iter().position(|&x| x == h)?;
                    s.hashes.swap_remove(i);
                }
            }
            if !now.failed {
                s.hashes.push(store_hash(
                    self.keys,
                    now.path.as_bytes(),
                    now.size,
                    now.mtime_ns,
                ));
            }
        }
        Some(sources)
    }
}

#[cfg(test)]
#[path = "survey_tests.rs"]
mod tests;
