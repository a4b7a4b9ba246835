//! The derived files beside the database, listed once ([`Component::ALL`]):
//! each one's name, magic, former magics, `meta` mark, check and rebuild,
//! for the full check, the survey, `cairn index`'s naming of a file it
//! could not write, and the tests. Losing any costs speed or a
//! recomputation, never a record. Holds no file's format and writes no
//! file but the marks.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{Damage, StoreError};

/// One derived file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `-columns`: the ranker's columns by record id (`store::columns_file`).
    Columns,
    /// `-vectors`: the meaning vectors (`store::vector_file`).
    Vectors,
    /// `-sketch`: a sign sketch per vector (`store::sketch`).
    Sketch,
    /// `-cells`: the sketches filed under coarse cells (`store::cells`).
    Cells,
}

/// What the list says of a component.
#[derive(Debug)]
pub struct Spec {
    /// Appended to the database's path to name the file.
    pub suffix: &'static str,
    /// The magic its first 8 bytes hold.
    pub magic: &'static [u8; 8],
    /// Magics of former versions: such a file is written anew once,
    /// without being reported as damaged.
    pub former: &'static [&'static [u8; 8]],
    /// Whether it exists only with the semantic tier on.
    pub semantic: bool,
    /// The `meta` key whose value vouches for what of the file a reader
    /// may trust (its token and how far); none for the cells, which their
    /// head ties to the sketch they file.
    pub mark: Option<&'static str>,
    /// How it is checked.
    pub checked: &'static str,
    /// How it is rebuilt.
    pub rebuilt: &'static str,
}

const COLUMNS: Spec = Spec {
    suffix: "-columns",
    magic: b"cairnrc3",
    former: &[b"cairnrc1", b"cairnrc2"],
    semantic: false,
    mark: Some("columns_file"),
    checked: "4 KiB pages sealed with a CRC-32 (`store::pages`), each checked before it is read",
    rebuilt: "its `meta` mark is dropped; the pass's columns step writes it anew",
};

const VECTORS: Spec = Spec {
    suffix: "-vectors",
    magic: b"cairnvf2",
    former: &[b"cairnvf1"],
    semantic: true,
    mark: Some("vector_file"),
    checked: "a CRC-32 per entry, checked before the entry is scored",
    rebuilt: "lost with its `meta` mark; the vector pass computes every vector again",
};

const SKETCH: Spec = Spec {
    suffix: "-sketch",
    magic: b"cairnsk2",
    former: &[b"cairnsk1"],
    semantic: true,
    mark: Some("sketch_file"),
    checked: "sealed counted pages (`store::pages`); a failing page's entries are scored exactly",
    rebuilt: "its mark is dropped; the vector sync sketches every entry again, against the mean in its head when that holds",
};

const CELLS: Spec = Spec {
    suffix: "-cells",
    magic: b"cairncl2",
    former: &[b"cairncl1"],
    semantic: true,
    mark: None,
    checked: "sealed pages (`store::pages`); a failing page sends the question to the full sketch scan",
    rebuilt: "removed; the vector sync writes it anew from the sketch",
};

impl Component {
    /// Every derived file, in the order the full check takes them (the
    /// vector file before the sketch and cells it vouches for).
    pub const ALL: [Component; 4] = [
        Component::Columns,
        Component::Vectors,
        Component::Sketch,
        Component::Cells,
    ];

    /// The file's name beside a database named `db_name` (`cairn.db`).
    pub fn file_name(self, db_name: &str) -> String {
        format!("{db_name}{}", self.spec().suffix)
    }

    /// What the list says of it.
    pub const fn spec(self) -> &'static Spec {
        match self {
            Component::Columns => &COLUMNS,
            Component::Vectors => &VECTORS,
            Component::Sketch => &SKETCH,
            Component::Cells => &CELLS,
        }
    }

    /// The file of the database at `db`.
    pub fn path(self, db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(self.spec().suffix);
        PathBuf::from(p)
    }

    /// The token its pages are sealed with, for a file made for the
    /// vector file (or columns file) named by `token`: a page of one
    /// component never passes as another's.
    pub(crate) fn seal_token(self, token: &[u8; 16]) -> [u8; 16] {
        let mut h = blake3::Hasher::new();
        h.update(b"cairn derived page");
        h.update(self.spec().suffix.as_bytes());
        h.update(token);
        let mut t = [0u8; 16];
        t.copy_from_slice(&h.finalize().as_bytes()[..16]);
        t
    }

    /// The value of its `meta` mark, if it has one.
    pub(crate) fn read_mark(self, conn: &Connection) -> rusqlite::Result<Option<String>> {
        match self.spec().mark {
            Some(key) => super::meta_get(conn, key),
            None => Ok(None),
        }
    }

    /// Sets its `meta` mark to `value` (nothing for a file without one).
    pub(crate) fn write_mark(self, conn: &Connection, value: &str) -> rusqlite::Result<()> {
        self.spec()
            .mark
            .map_or(Ok(()), |key| super::meta_set(conn, key, value))
    }

    /// Drops its `meta` mark: the database vouches for none of the file.
    pub(crate) fn drop_mark(self, conn: &Connection) -> rusqlite::Result<()> {
        self.spec()
            .mark
            .map_or(Ok(()), |key| super::meta_drop(conn, key))
    }

    /// Whether the file at `path` is a former version's (its magic is one
    /// of [`Spec::former`]): written anew, not reported as damaged.
    pub(crate) fn is_former(self, path: &Path) -> bool {
        let mut magic = [0u8; 8];
        std::fs::File::open(path)
            .and_then(|f| super::flat_file::read_at(&f, &mut magic, 0))
            .is_ok()
            && self.spec().former.contains(&&magic)
    }
}

/// A mark's value: the file's token in hex, then `numbers`, spaced.
pub(crate) fn mark_text(token: &[u8; 16], numbers: &[i128]) -> String {
    let mut out = crate::hex::encode(token);
    for n in numbers {
        out.push_str(&format!(" {n}"));
    }
    out
}

/// The token and the `N` numbers of a mark's value (see [`mark_text`]),
/// wide enough for any `u64` or `i64` a mark holds.
pub(crate) fn parse_mark<const N: usize>(s: &str) -> Option<([u8; 16], [i128; N])> {
    let mut parts = s.split(' ');
    let token = data_encoding::HEXLOWER_PERMISSIVE
        .decode(parts.next()?.as_bytes())
        .ok()?
        .try_into()
        .ok()?;
    let mut numbers = [0i128; N];
    for n in &mut numbers {
        *n = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some((token, numbers))
}

/// Marks `path`, a derived file a reader found damaged, for the next
/// pass: its time is set to the epoch, which no write gives a file. While
/// a derived file is marked no survey holds or is left (`store::survey`),
/// and the next pass, a search's refresh included, checks every derived
/// file ([`Store::derived_marked`](super::Store::derived_marked)), gives
/// up the damaged one and clears the marks. Damage that left a file's
/// size and time as they were (a failing disk) would otherwise wait for a
/// pass with other work. Best effort: the reader's message stands.
pub(crate) fn note_damage(path: &Path) {
    set_time(path, std::time::UNIX_EPOCH);
}

/// Whether the file at `path` is marked by [`note_damage`].
pub(crate) fn is_marked(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(is_mark)
}

/// Whether a derived file's modification time is [`note_damage`]'s mark.
pub(crate) fn is_mark(time: std::time::SystemTime) -> bool {
    time == std::time::UNIX_EPOCH
}

/// Sets the modification time of the file at `path`, if it is there.
fn set_time(path: &Path, to: std::time::SystemTime) {
    if let Err(e) = File::open(path).and_then(|f| f.set_modified(to)) {
        tracing::debug!(path = %path.display(), error = %e, "cannot set a derived file's time");
    }
}

/// The file a failure to write derived data names, and why: the file the
/// error carries, else `fallback`'s.
pub fn failure(db: &Path, fallback: Component, e: &StoreError) -> (String, String) {
    match e {
        // The path is named beside the reason: the reason alone.
        StoreError::Derived { path, source } => (path.display().to_string(), source.to_string()),
        _ => (fallback.path(db).display().to_string(), e.to_string()),
    }
}

impl super::Store {
    /// Whether a reader marked a derived file damaged ([`note_damage`]):
    /// the next pass checks them all, whatever its deadline.
    pub fn derived_marked(&self) -> bool {
        Component::ALL
            .iter()
            .any(|c| is_marked(&c.path(&self.path)))
    }

    /// Checks every page or entry of every derived file (the semantic
    /// tier's only when `semantic`), in the order of [`Component::ALL`]; a damaged
    /// one is given up as its [`Spec::rebuilt`] says, so that the pass
    /// that follows writes it anew, and is returned with what was wrong.
    /// A missing file or a former version's is no damage.
    pub fn check_derived(&self, semantic: bool) -> Result<Vec<Damage>, StoreError> {
        let mut out = Vec::new();
        for c in Component::ALL {
            // Checked now: a mark a reader left has done its work.
            if is_marked(&c.path(&self.path)) {
                let now = crate::clock::now_ms().max(1) as u64;
                let now = std::time::UNIX_EPOCH + std::time::Duration::from_millis(now);
                set_time(&c.path(&self.path), now);
            }
            if c.spec().semantic && !semantic {
                continue;
            }
            let why = match c {
                Component::Columns => self.check_columns()?.map(|d| d.why),
                Component::Vectors => super::vector_file::check(&self.conn, &self.path)?,
                Component::Sketch | Component::Cells => {
                    let cells = c == Component::Cells;
                    super::vector_file::check_follower(&self.conn, &self.path, cells)?
                }
            };
            if let Some(why) = why {
                out.push(Damage {
                    path: c.path(&self.path),
                    why,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_component_has_its_own_file_magic_and_seal() {
        let db = Path::new("/h/cairn.db");
        let mut seen = std::collections::HashSet::new();
        for c in Component::ALL {
            let s = c.spec();
            assert!(
                seen.insert(s.suffix) && seen.insert(std::str::from_utf8(s.magic).expect("ascii"))
            );
            for f in s.former {
                assert_ne!(*f, s.magic, "{c:?}");
                assert!(seen.insert(std::str::from_utf8(*f).expect("ascii")));
            }
        }
        assert_eq!(Component::Sketch.path(db), Path::new("/h/cairn.db-sketch"));
        let t = [3u8; 16];
        assert_ne!(
            Component::Sketch.seal_token(&t),
            Component::Cells.seal_token(&t)
        );
        assert_ne!(
            Component::Sketch.seal_token(&t),
            Component::Sketch.seal_token(&[4; 16])
        );
    }
}
