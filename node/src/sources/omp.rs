//! oh-my-pi (`omp`), a pi fork: pi-format JSONL session files, append-only.
//!
//! Stores: `~/.omp/agent/sessions/**`, `~/.omp/profiles/<p>/agent/sessions/**`,
//! `$XDG_DATA_HOME/omp/sessions/**` and `$XDG_DATA_HOME/omp/profiles/<p>/sessions/**`.
//! The format is pi's (a `session` header with `cwd`, then `message` lines)
//! plus `title`/`title_change`, `custom` and a `developer` role, which pi's
//! parser already skips; so the reader is [`super::pi::new_parser`], read
//! from the last safe offset.

use std::path::PathBuf;

use super::common::{has_suffix, walk_stores};
use super::{Locations, Reader, Source, SourceFile};

/// The oh-my-pi source.
pub struct Omp;

fn profile_roots(base: &std::path::Path, inner: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base.join("profiles")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path().join(inner))
        .collect();
    v.sort();
    v
}

fn session_dirs(loc: &Locations) -> Vec<PathBuf> {
    let home = loc.home.join(".omp");
    let data = loc.xdg_data_home.join("omp");
    let mut v = vec![home.join("agent/sessions"), data.join("sessions")];
    v.extend(profile_roots(&home, "agent/sessions"));
    v.extend(profile_roots(&data, "sessions"));
    v
}

impl Source for Omp {
    fn agent(&self) -> &'static str {
        "omp"
    }

    fn history_dirs(&self, loc: &Locations) -> Vec<PathBuf> {
        session_dirs(loc)
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![loc.home.join(".omp"), loc.xdg_data_home.join("omp")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        session_dirs(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    4,
                    &|p| has_suffix(p, ".jsonl"),
                    Reader::Lines(super::pi::new_parser),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovers_home_profile_and_xdg_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        let files = [
            ".omp/agent/sessions/--p--/a.jsonl",
            ".omp/profiles/work/agent/sessions/--p--/b.jsonl",
            ".local/share/omp/sessions/--p--/c.jsonl",
            ".local/share/omp/profiles/x/sessions/d.jsonl",
        ];
        for f in files {
            let p = h.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, b"{}\n").expect("write");
        }
        std::fs::write(h.join(".omp/agent/sessions/--p--/notes.txt"), b"x").expect("write");
        let found = Omp.discover(&Locations::under_home(h));
        assert_eq!(found.len(), 4, "{found:?}");
    }
}
