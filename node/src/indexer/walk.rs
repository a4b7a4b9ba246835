//! Finding the stores: every enabled source's stores on disk with their
//! size and mtime, walked on threads of their own (sources side by side,
//! handed on in the registry's order), and the list of stores a whole walk
//! found, for later passes over a few stores named by file events.
//!
//! It lists folders and stats files; it never reads a store's contents,
//! never opens the database, and decides nothing about what changed
//! (that is `detect`'s).

use std::path::Path;
use std::sync::mpsc::Receiver;

use super::in_order;
use crate::sources::{self, Locations, Reader, SourceFile, Stat};
use crate::store::StoreError;

/// A store on disk with its size and mtime.
pub(super) struct Found {
    pub(super) agent: &'static str,
    pub(super) file: SourceFile,
    pub(super) size: u64,
    pub(super) mtime_ns: i64,
    /// Its [`crate::store::survey::store_hash`] with the keys of the walk that
    /// found it, when it was given some.
    pub(super) hash: Option<u128>,
}

impl Found {
    /// Its [`crate::store::survey::store_hash`] with `keys`.
    pub(super) fn hash(
        &self,
        walked_with: Option<crate::store::survey::Keys>,
        keys: crate::store::survey::Keys,
    ) -> u128 {
        match self.hash {
            Some(h) if walked_with == Some(keys) => h,
            _ => crate::store::survey::store_hash(
                keys,
                self.file.path.as_os_str().as_encoded_bytes(),
                self.size,
                self.mtime_ns,
            ),
        }
    }
}

/// The disk half of a pass: every enabled store with its size and mtime
/// (taken by the walk as it lists each folder), found on a thread of its
/// own. A command starts it before it opens the node, so the walk overlaps
/// that; a pass started without one starts its own.
pub struct Walk {
    /// Sources' stores already taken from the walking thread (by
    /// [`super::unchanged_since`]), handed to the pass first.
    pub(super) taken: Vec<Vec<Found>>,
    /// The walking thread, and each source's stores as it finds them.
    pub(super) walker: Option<(std::thread::JoinHandle<()>, Receiver<Batch>)>,
    /// The keys the walking thread tallies each source's stores with.
    pub(super) keys: Option<crate::store::survey::Keys>,
    /// The walk is over and everything it found is in `taken`.
    pub(super) done: bool,
    /// What to walk, when no thread could be had.
    locations: Locations,
    disabled: Vec<String>,
    /// The walk holds some stores only, named by their paths (see
    /// [`Stores::walk_of`]): a store it lacks is not gone.
    pub(super) partial: bool,
    /// A survey that held for the database when [`super::unchanged_since`] found
    /// a store that differs from it: the pass compares with it first.
    pub(super) survey: Option<Box<crate::store::survey::Survey>>,
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walk")
            .field("taken", &self.taken.iter().map(Vec::len).sum::<usize>())
            .field("walking", &self.walker.is_some())
            .field("done", &self.done)
            .field("partial", &self.partial)
            .finish()
    }
}

impl Walk {
    /// Starts walking the stores of every source not in `disabled`; give
    /// the pass the same locations and disabled sources. With `keys`, the
    /// walking threads also tally each source's stores with them, side by
    /// side, for [`super::unchanged_since`] to compare with a survey made with
    /// the same keys.
    pub fn start(
        locations: &Locations,
        disabled: &[String],
        keys: Option<crate::store::survey::Keys>,
    ) -> Walk {
        let (mut loc, dis) = (locations.clone(), disabled.to_vec());
        let (tx, rx) = std::sync::mpsc::channel();
        let walker = std::thread::Builder::new()
            .name("cairn-walk".into())
            .spawn(move || {
                // The project folders, walked for anew when that is due.
                crate::projects::refresh(
                    &mut loc,
                    crate::clock::now_ms(),
                    &crate::projects::LIMITS,
                );
                discover_all(&loc, &dis, keys, &mut |batch| {
                    // The pass stopped (a database error): stop walking.
                    tx.send(batch).is_ok()
                });
            })
            .ok()
            .map(|h| (h, rx));
        Walk {
            taken: Vec::new(),
            done: false,
            walker,
            keys,
            locations: locations.clone(),
            disabled: disabled.to_vec(),
            partial: false,
            survey: None,
        }
    }

    /// Everything the walk finds, one source's stores to a batch, once it
    /// is over.
    pub(super) fn into_batches(self) -> Vec<Vec<Found>> {
        let mut out = self.taken;
        if self.done {
            return out;
        }
        match self.walker {
            Some((walker, rx)) => {
                out.extend(rx.into_iter().map(|b| b.found));
                walker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
            None => discover_all(&self.locations, &self.disabled, None, &mut |b| {
                out.push(b.found);
                true
            }),
        }
        out
    }

    /// A whole walk that is over and found `batches` (hashed with `keys`).
    pub(super) fn over(batches: Vec<Vec<Found>>, keys: Option<crate::store::survey::Keys>) -> Walk {
        Walk {
            taken: batches,
            walker: None,
            keys,
            done: true,
            locations: Locations::default(),
            disabled: Vec::new(),
            partial: false,
            survey: None,
        }
    }

    /// Hands every store found to `f`, in the walk's order, as soon as its
    /// source's walk is done; stops at the first error.
    pub(super) fn each(
        self,
        mut f: impl FnMut(Found) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for found in self.taken {
            found.into_iter().try_for_each(&mut f)?;
        }
        if self.done {
            return Ok(());
        }
        let Some((walker, rx)) = self.walker else {
            // No thread to be had: walk here.
            let mut failed = Ok(());
            discover_all(&self.locations, &self.disabled, None, &mut |batch| {
                failed = batch.found.into_iter().try_for_each(&mut f);
                failed.is_ok()
            });
            return failed;
        };
        for batch in rx {
            batch.found.into_iter().try_for_each(&mut f)?;
        }
        // The channel closed: the walk ended (a panic in it is this thread's).
        walker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        Ok(())
    }
}

/// Every store the last whole walk found, by path, with the source that
/// found it and how to read it: what a pass over a few stores named by
/// their paths (file events) needs instead of a walk of all of them.
#[derive(Default)]
pub struct Stores {
    pub(super) by_path: std::collections::HashMap<std::path::PathBuf, (&'static str, Reader)>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("stores", &self.by_path.len())
            .finish()
    }
}

/// Suffixes of the files SQLite keeps beside a database: a write to one
/// of them is a write to the database store it belongs to.
const DB_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

impl Stores {
    pub(super) fn add(&mut self, f: &Found) {
        self.by_path
            .insert(f.file.path.clone(), (f.agent, f.file.reader));
    }

    /// Lists the stores of `walk` when it is a whole walk that is over (as
    /// one a survey matched is); false, and left empty, otherwise.
    pub fn fill_from(&mut self, walk: &Walk) -> bool {
        self.by_path.clear();
        if !walk.done || walk.partial {
            return false;
        }
        for f in walk.taken.iter().flatten() {
            self.add(f);
        }
        true
    }

    /// How many stores.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// True when no walk filled it yet, or it found nothing.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// The store a write to `path` changed: `path` itself, or the database
    /// whose side file (`-wal`, ...) it is.
    fn store_of(&self, path: &Path) -> Option<(&Path, &'static str, Reader)> {
        if let Some((p, (agent, reader))) = self.by_path.get_key_value(path) {
            return Some((p, agent, *reader));
        }
        // A path that is not UTF-8 maps to no database (a walk reads it).
        let name = path.to_str()?;
        DB_SIDE_FILES.iter().find_map(|side| {
            let db = Path::new(name.strip_suffix(side)?);
            match self.by_path.get_key_value(db) {
                Some((p, (agent, r @ Reader::Database(_)))) => Some((p.as_path(), *agent, *r)),
                _ => None,
            }
        })
    }

    /// A walk of just the stores the writes to `paths` changed, each
    /// stat'ed now, for a pass that reads those alone; `None` when a path
    /// is no known store (a new store, or a file that is none: only a walk
    /// of everything can tell) or cannot be stat'ed (gone since), and
    /// when `paths` is empty.
    pub fn walk_of(&self, paths: &[std::path::PathBuf]) -> Option<Walk> {
        if paths.is_empty() {
            return None;
        }
        let mut found: Vec<Found> = Vec::new();
        for p in paths {
            let (path, agent, reader) = self.store_of(p)?;
            if found.iter().any(|f| f.file.path == path) {
                continue;
            }
            let file = SourceFile::new(path.to_path_buf(), reader);
            std::fs::symlink_metadata(&file.path).ok()?;
            let stat = fingerprint_meta(&file);
            found.push(Found {
                agent,
                file,
                size: stat.size,
                mtime_ns: stat.mtime_ns,
                hash: None,
            });
        }
        Some(Walk {
            taken: vec![found],
            walker: None,
            keys: None,
            done: true,
            locations: Locations::default(),
            disabled: Vec::new(),
            partial: true,
            survey: None,
        })
    }
}

/// Threads that walk sources side by side.
const DISCOVER_THREADS: usize = 2;

/// One source's stores as a walk found them, in its order.
pub(super) struct Batch {
    pub(super) found: Vec<Found>,
    /// Their tally, when the walk was given keys.
    pub(super) tally: Option<crate::store::survey::Tally>,
}

/// Walks every enabled source, handing each one's stores (and with `keys`
/// their tally) to `out` in the registry's order as soon as they and every
/// earlier source's are found, until `out` says stop. Sources are walked
/// side by side ([`in_order::in_order`]), and tallied on the same threads.
fn discover_all(
    locations: &Locations,
    disabled: &[String],
    keys: Option<crate::store::survey::Keys>,
    out: &mut dyn FnMut(Batch) -> bool,
) {
    let enabled: Vec<Box<dyn sources::Source>> = sources::registry()
        .into_iter()
        .filter(|s| !disabled.iter().any(|d| d == s.agent()))
        .collect();
    let walk_one = |i: usize| {
        let source = &enabled[i];
        let mut tally = keys.map(|_| crate::store::survey::Tally::default());
        let found = source
            .discover(locations)
            .into_iter()
            .map(|file| {
                let stat = fingerprint_meta(&file);
                let mut f = Found {
                    agent: source.agent(),
                    file,
                    size: stat.size,
                    mtime_ns: stat.mtime_ns,
                    hash: None,
                };
                if let (Some(keys), Some(tally)) = (keys, tally.as_mut()) {
                    let h = f.hash(None, keys);
                    tally.add_hash(h);
                    f.hash = Some(h);
                }
                f
            })
            .collect::<Vec<Found>>();
        Batch { found, tally }
    };
    in_order::in_order(enabled.len(), DISCOVER_THREADS, &walk_one, &mut |batch| {
        batch.found.is_empty() || out(batch)
    });
}

/// Size and mtime (those the walk took when it did); for a database,
/// summed over it and its WAL so writes that only reached the WAL still
/// count as a change.
fn fingerprint_meta(file: &SourceFile) -> Stat {
    let one = |p: &Path| std::fs::metadata(p).map_or(Stat::default(), |m| Stat::of(&m));
    let main = file.stat.unwrap_or_else(|| one(&file.path));
    if matches!(file.reader, Reader::Database(_)) {
        let mut wal = file.path.clone().into_os_string();
        wal.push("-wal");
        let w = one(Path::new(&wal));
        return Stat {
            size: main.size + w.size,
            mtime_ns: main.mtime_ns.max(w.mtime_ns),
        };
    }
    main
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_a_databases_side_file_names_the_database() {
        fn read(
            _: &Path,
            _: &sources::Watermark,
        ) -> Result<sources::DbBatch, sources::SourceError> {
            Ok(sources::DbBatch::default())
        }
        fn whole(_: &Path, _: &[u8]) -> sources::Parsed {
            sources::Parsed::default()
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("state.vscdb");
        let doc = dir.path().join("chat.json");
        std::fs::write(&db, "db").expect("db");
        std::fs::write(dir.path().join("state.vscdb-wal"), "wal").expect("wal");
        std::fs::write(&doc, "{}").expect("doc");
        std::fs::write(dir.path().join("chat.json-wal"), "x").expect("not a wal");
        let mut known = Stores::default();
        for (path, reader) in [(&db, Reader::Database(read)), (&doc, Reader::Whole(whole))] {
            known.add(&Found {
                agent: "cursor",
                file: SourceFile::new(path.clone(), reader),
                size: 0,
                mtime_ns: 0,
                hash: None,
            });
        }
        let named = |p: &str| {
            let walk = known.walk_of(&[dir.path().join(p)])?;
            let mut paths = Vec::new();
            walk.each(|f| {
                // The database's size counts its log too.
                paths.push((f.file.path.clone(), f.size));
                Ok(())
            })
            .expect("each");
            Some(paths)
        };
        assert_eq!(named("state.vscdb-wal"), Some(vec![(db.clone(), 5)]));
        assert_eq!(named("state.vscdb-shm"), Some(vec![(db.clone(), 5)]));
        assert_eq!(named("chat.json"), Some(vec![(doc.clone(), 2)]));
        // Only a database has side files.
        assert_eq!(named("chat.json-wal"), None);
    }
}
