//! Crush (Charm, the continuation of the Go opencode): SQLite `crush.db`.
//!
//! Crush keeps a project's sessions in `<project>/.crush/crush.db` (with its
//! `-wal`) and can be pointed at a global data folder
//! (`$CRUSH_GLOBAL_DATA`, default `$XDG_DATA_HOME/crush`). The schema is the
//! Go opencode one plus a `provider` column on `messages`, so the reader is
//! opencode's legacy reader ([`super::opencode::read_db`]); the indexer files
//! its records under `crush`. Incremental by the reader's time watermark.
//!
//! Project stores are found three ways: Crush's own list of the projects it
//! ran in, `projects.json` in the global data folder (`{projects: [{path,
//! data_dir, last_accessed}]}`, `data_dir` holding the project's
//! `crush.db`), and the project roots, configured or found
//! ([`Locations::project_roots`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::common::walk_files;
use super::{Locations, Reader, Source, SourceFile};

/// The Crush source.
pub struct Crush;

fn global_dir(loc: &Locations) -> PathBuf {
    loc.var_or("CRUSH_GLOBAL_DATA", loc.xdg_data_home.join("crush"))
}

/// The data folders Crush lists in `projects.json` in `global`: each
/// project's `data_dir` (relative ones under its `path`). Nothing when the
/// file is missing or not that shape.
pub fn listed_data_dirs(global: &Path) -> Vec<PathBuf> {
    let Ok(bytes) = std::fs::read(global.join("projects.json")) else {
        return Vec::new();
    };
    let Ok(doc) = serde_json::from_slice::<Value>(&bytes) else {
        tracing::debug!(dir = %global.display(), "crush projects.json is not JSON");
        return Vec::new();
    };
    let projects = doc.get("projects").and_then(Value::as_array);
    projects
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let path = p.get("path").and_then(Value::as_str).map(PathBuf::from);
            let data = p.get("data_dir").and_then(Value::as_str).map(PathBuf::from);
            match (path, data) {
                (_, Some(d)) if d.is_absolute() => Some(d),
                (Some(p), Some(d)) if p.is_absolute() => Some(p.join(d)),
                (Some(p), None) if p.is_absolute() => Some(p.join(".crush")),
                _ => None,
            }
        })
        .collect()
}

/// Every folder that may hold a project's `crush.db`.
fn project_data_dirs(loc: &Locations) -> Vec<PathBuf> {
    let mut v = listed_data_dirs(&global_dir(loc));
    for r in loc.project_roots() {
        let d = r.join(".crush");
        if !v.contains(&d) {
            v.push(d);
        }
    }
    v
}

impl Source for Crush {
    fn agent(&self) -> &'static str {
        "crush"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CRUSH_GLOBAL_DATA"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = vec![global_dir(loc)];
        v.extend(project_data_dirs(loc));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut seen = HashSet::new();
        let mut paths = walk_files(&global_dir(loc), 2, &|p| {
            p.file_name().is_some_and(|n| n == "crush.db")
        });
        paths.extend(
            project_data_dirs(loc)
                .into_iter()
                .map(|d| d.join("crush.db"))
                .filter(|p| p.is_file()),
        );
        paths
            .into_iter()
            .filter(|p| seen.insert(p.clone()))
            .map(|path| SourceFile::new(path, Reader::Database(super::opencode::read_db)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::Watermark;

    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/crush/dbos-transact-golang/crush.db"
    );

    #[test]
    fn discovers_project_and_global_stores() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let proj = home.join("work/app");
        std::fs::create_dir_all(proj.join(".crush")).expect("mkdir");
        std::fs::write(proj.join(".crush/crush.db"), b"").expect("write");
        std::fs::create_dir_all(home.join(".local/share/crush")).expect("mkdir");
        std::fs::write(home.join(".local/share/crush/crush.db"), b"").expect("write");
        let mut loc = Locations::under_home(home);
        loc.aider_roots = vec![proj.clone()];
        let found: Vec<PathBuf> = Crush.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.contains(&proj.join(".crush/crush.db")));
        let none = Locations::under_home(&home.join("nowhere"));
        assert!(Crush.discover(&none).is_empty());
    }

    #[test]
    fn real_crush_database_reads_without_errors() {
        let path = std::path::Path::new(REAL);
        if !path.is_file() {
            eprintln!("skipping: {REAL} not present");
            return;
        }
        let batch = super::super::opencode::read_db(path, &Watermark::None).expect("read");
        assert!(batch.parsed.errors.is_empty(), "{:?}", batch.parsed.errors);
        assert!(!batch.parsed.records.is_empty());
    }

    #[test]
    fn projects_listed_by_crush_are_found_without_configuration() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let a = home.join("somewhere/a");
        let b = home.join("other/b");
        std::fs::create_dir_all(a.join(".crush")).expect("mkdir");
        std::fs::write(a.join(".crush/crush.db"), b"").expect("write");
        std::fs::create_dir_all(home.join("data-b")).expect("mkdir");
        std::fs::write(home.join("data-b/crush.db"), b"").expect("write");
        let global = home.join(".local/share/crush");
        std::fs::create_dir_all(&global).expect("mkdir");
        let list = serde_json::json!({"projects": [
            {"path": a, "data_dir": a.join(".crush"), "last_accessed": "2026-12-01T10:00:00Z"},
            {"path": b, "data_dir": home.join("data-b"), "last_accessed": "2026-11-01T10:00:00Z"},
            {"path": home.join("gone"), "data_dir": home.join("gone/.crush")},
            {"path": "relative", "data_dir": "relative/.crush"}
        ]});
        std::fs::write(global.join("projects.json"), list.to_string()).expect("write");
        let loc = Locations::under_home(home);
        let mut found: Vec<PathBuf> = Crush.discover(&loc).into_iter().map(|f| f.path).collect();
        found.sort();
        assert_eq!(
            found,
            [home.join("data-b/crush.db"), a.join(".crush/crush.db")]
        );
        assert!(Crush.roots(&loc).contains(&home.join("data-b")));
        // A broken list is no list.
        std::fs::write(global.join("projects.json"), b"{not json").expect("write");
        assert!(Crush.discover(&loc).is_empty());
    }
}
