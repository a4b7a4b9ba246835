//! Stores found but not understood: what lies in an agent's history
//! folders that no reader of this cairn reads, a database without the
//! tables its reader knows, a file of which no line or part had a shape a
//! reader knows. So that a new release of an agent that moves or reshapes
//! its history shows up in `cairn sources`, `cairn doctor` and `cairn
//! status` instead of as silently missing memory.
//!
//! It only lists folders and looks at the names of what it finds (and at
//! most one small JSON file per finding for a release number); it never
//! reads history, and it never writes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::common::walk_files;
use super::{Locations, Reader, Source, SourceError, SourceFile, Unreadable};

/// How every "found, not understood" message starts, in errors kept with
/// a store as in what `cairn sources` prints.
pub const NOT_UNDERSTOOD: &str = "found, not understood";

/// How deep below an entry of a history folder the check looks for files.
const DEPTH: usize = 4;

/// How many unknown entries a finding names (it counts them all).
const NAMED: usize = 3;

/// Everything of `source` found on disk that it does not read: its own
/// [`Source::unreadable`] stores and those [`not_understood`] finds.
/// `found` is what its [`Source::discover`] returned.
pub fn unread(source: &dyn Source, loc: &Locations, found: &[SourceFile]) -> Vec<Unreadable> {
    let mut v = source.unreadable(loc);
    v.extend(not_understood(source, loc, found));
    v
}

/// The entries of `source`'s history folders that hold files none of the
/// stores it found lies in: one finding per folder, naming them.
///
/// An entry is a file or folder directly in a history folder. Hidden
/// entries and the source's [`Source::not_history`] are the agent's
/// bookkeeping. A folder holding none of the found stores counts only if
/// there is a file somewhere below it (an empty skeleton is not history);
/// a loose file counts only when nothing in its folder was found (an
/// index file beside the sessions is not history either). A history
/// folder holding a database store is the agent's data folder, where
/// other files are expected: its database is checked when it is read
/// (see [`classify`]).
pub fn not_understood(
    source: &dyn Source,
    loc: &Locations,
    found: &[SourceFile],
) -> Vec<Unreadable> {
    let aside: BTreeSet<&str> = source.not_history().iter().copied().collect();
    let mut out = Vec::new();
    let mut dirs = source.history_dirs(loc);
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        if !dir.is_dir() {
            continue;
        }
        let inside: Vec<&SourceFile> = found.iter().filter(|f| f.path.starts_with(&dir)).collect();
        if inside
            .iter()
            .any(|f| matches!(f.reader, Reader::Database(_)))
        {
            continue;
        }
        let unknown = unknown_entries(&dir, &inside, &aside);
        if unknown.is_empty() {
            continue;
        }
        let mut names: Vec<String> = unknown
            .iter()
            .take(NAMED)
            .map(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                if p.is_dir() {
                    format!("{name}/")
                } else {
                    name.into_owned()
                }
            })
            .collect();
        if unknown.len() > NAMED {
            names.push("...".to_owned());
        }
        let what = format!(
            "{} {} in a layout this cairn does not read: {}",
            unknown.len(),
            if unknown.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            names.join(", ")
        );
        let release = unknown.iter().find_map(|p| release_in(p, &aside));
        out.push(Unreadable::not_understood(dir, what, release));
    }
    out
}

/// The entries of `dir` no store in `inside` lies in that hold history
/// (see [`not_understood`]), in name order.
fn unknown_entries(dir: &Path, inside: &[&SourceFile], aside: &BTreeSet<&str>) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<PathBuf> = listing
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| !skipped_name(p, aside))
        .collect();
    entries.sort();
    entries
        .into_iter()
        .filter(|entry| {
            if inside.iter().any(|f| f.path.starts_with(entry)) {
                return false;
            }
            if entry.is_dir() {
                !history_files(entry, aside, 1).is_empty()
            } else {
                entry.is_file() && inside.is_empty()
            }
        })
        .collect()
}

/// Up to `max` files below `dir` that are not bookkeeping.
fn history_files(dir: &Path, aside: &BTreeSet<&str>, max: usize) -> Vec<PathBuf> {
    let mut files = walk_files(dir, DEPTH, &|p| {
        !p.strip_prefix(dir)
            .unwrap_or(p)
            .components()
            .any(|c| skipped_name(Path::new(c.as_os_str()), aside))
    });
    files.truncate(max);
    files
}

/// A hidden name or one of the agent's bookkeeping names.
fn skipped_name(p: &Path, aside: &BTreeSet<&str>) -> bool {
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    name.starts_with('.') || aside.contains(name.as_ref())
}

/// The release that wrote an unknown entry, when a small JSON file in it
/// says (a top-level `version`, `cli_version`, `app_version` or
/// `agent_version` string, or such a field of a top-level `metadata`).
fn release_in(entry: &Path, aside: &BTreeSet<&str>) -> Option<String> {
    const KEYS: [&str; 4] = ["version", "cli_version", "app_version", "agent_version"];
    const MAX_BYTES: u64 = 64 * 1024;
    let candidates: Vec<PathBuf> = if entry.is_dir() {
        history_files(entry, aside, 16)
    } else {
        vec![entry.to_path_buf()]
    };
    candidates
        .iter()
        .filter(|p| super::common::has_suffix(p, ".json"))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_BYTES))
        .find_map(|p| {
            let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
            let pick = |v: &serde_json::Value| {
                KEYS.iter()
                    .find_map(|k| v.get(k).and_then(serde_json::Value::as_str))
                    .map(str::to_owned)
            };
            pick(&doc).or_else(|| doc.get("metadata").and_then(pick))
        })
}

/// A database reader's error as what it says about the store: a query on
/// a table or column the database lacks means a schema this cairn does
/// not know ([`SourceError::NotUnderstood`], with the database's
/// `user_version` as its release when set); anything else is unchanged.
pub fn classify(e: SourceError) -> SourceError {
    let SourceError::Sqlite { path, source } = e else {
        return e;
    };
    let msg = source.to_string();
    if !(msg.contains("no such table") || msg.contains("no such column")) {
        return SourceError::Sqlite { path, source };
    }
    let mut what = format!("a database this cairn's reader does not know ({msg})");
    let version = super::db::open_read_only(&path)
        .ok()
        .and_then(|c| super::db::user_version(&c));
    if let Some(v) = version {
        what.push_str(&format!(", schema version {v}"));
    }
    SourceError::NotUnderstood { path, what }
}

/// What a store the index knows says about being understood: its kept
/// error when that is a [`SourceError::NotUnderstood`], or, for a store
/// of which every line, row or part was skipped and nothing read, that
/// none had a shape a reader knows.
pub fn store_not_understood(
    records: u64,
    skipped: u64,
    last_error: Option<&str>,
) -> Option<String> {
    if let Some(e) = last_error {
        return e.starts_with(NOT_UNDERSTOOD).then(|| e.to_owned());
    }
    (records == 0 && skipped > 0).then(|| {
        format!("{NOT_UNDERSTOOD}: none of its {skipped} line(s) or part(s) had a shape this cairn reads")
    })
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
