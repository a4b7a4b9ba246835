//! Crush (Charm, the continuation of the Go opencode): SQLite `crush.db`.
//!
//! Crush keeps a project's sessions in `<project>/.crush/crush.db` (with its
//! `-wal`) and can be pointed at a global data folder
//! (`$CRUSH_GLOBAL_DATA`, default `$XDG_DATA_HOME/crush`). The schema is the
//! Go opencode one plus a `provider` column on `messages`, so the reader is
//! opencode's legacy reader ([`super::opencode::read_db`]); the indexer files
//! its records under `crush`. Project-local stores are found under the
//! configured project roots. Incremental by the reader's time watermark.

use std::collections::HashSet;
use std::path::PathBuf;

use super::common::walk_files;
use super::{Locations, Reader, Source, SourceFile};

/// The Crush source.
pub struct Crush;

fn global_dir(loc: &Locations) -> PathBuf {
    loc.var_or("CRUSH_GLOBAL_DATA", loc.xdg_data_home.join("crush"))
}

impl Source for Crush {
    fn agent(&self) -> &'static str {
        "crush"
    }

    /// The project list and logs beside the global database.
    fn not_history(&self) -> &'static [&'static str] {
        &["projects.json", "logs"]
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CRUSH_GLOBAL_DATA"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = vec![global_dir(loc)];
        v.extend(loc.project_roots().iter().map(|r| r.join(".crush")));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut seen = HashSet::new();
        let mut paths = walk_files(&global_dir(loc), 2, &|p| {
            p.file_name().is_some_and(|n| n == "crush.db")
        });
        paths.extend(
            loc.project_roots()
                .iter()
                .map(|r| r.join(".crush/crush.db"))
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
}
