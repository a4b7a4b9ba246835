//! Agents whose history is on disk but cannot be read, or is kept on a
//! server: `cairn sources` lists what it found and why it stops there.
//! Nothing here opens the files (some sit beside credentials).
//!
//! - Windsurf (Cascade): `~/.codeium/windsurf/cascade/*.pb`, encrypted.
//! - Trae: `<Trae User>/../ModularData/ai-agent/database.db`, encrypted.
//! - Plandex: plans live on the Plandex server; the local
//!   `~/.plandex-home-v2` only holds the CLI's account settings.

use std::path::PathBuf;

use super::common::{has_suffix, walk_files};
use super::{Locations, Source, SourceFile, Unreadable};

/// Windsurf's Cascade.
pub struct Windsurf;
/// ByteDance's Trae IDE.
pub struct Trae;
/// Plandex.
pub struct Plandex;

impl Source for Windsurf {
    fn agent(&self) -> &'static str {
        "windsurf"
    }

    /// Nothing here is read: [`Source::unreadable`] says why.
    fn history_dirs(&self, _loc: &Locations) -> Vec<PathBuf> {
        Vec::new()
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![loc.home.join(".codeium/windsurf/cascade")]
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }

    fn unreadable(&self, loc: &Locations) -> Vec<Unreadable> {
        let dir = loc.home.join(".codeium/windsurf/cascade");
        if walk_files(&dir, 1, &|p| has_suffix(p, ".pb")).is_empty() {
            return Vec::new();
        }
        vec![Unreadable::closed(
            dir,
            "Windsurf encrypts its Cascade history",
        )]
    }
}

fn trae_dbs(loc: &Locations) -> Vec<PathBuf> {
    ["Trae", "Trae CN", "TRAE SOLO CN"]
        .iter()
        .flat_map(|n| loc.app_config_dirs(n))
        .map(|d| d.join("ModularData/ai-agent/database.db"))
        .collect()
}

impl Source for Trae {
    fn agent(&self) -> &'static str {
        "trae"
    }

    /// Nothing here is read: [`Source::unreadable`] says why.
    fn history_dirs(&self, _loc: &Locations) -> Vec<PathBuf> {
        Vec::new()
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        trae_dbs(loc)
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }

    fn unreadable(&self, loc: &Locations) -> Vec<Unreadable> {
        trae_dbs(loc)
            .into_iter()
            .filter(|p| p.is_file())
            .map(|path| Unreadable::closed(path, "Trae encrypts its agent database"))
            .collect()
    }
}

impl Source for Plandex {
    fn agent(&self) -> &'static str {
        "plandex"
    }

    /// Nothing here is read: [`Source::unreadable`] says why.
    fn history_dirs(&self, _loc: &Locations) -> Vec<PathBuf> {
        Vec::new()
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![
            loc.home.join(".plandex-home-v2"),
            loc.home.join(".plandex-home"),
        ]
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }

    fn unreadable(&self, loc: &Locations) -> Vec<Unreadable> {
        self.roots(loc)
            .into_iter()
            .filter(|p| p.is_dir())
            .map(|path| {
                Unreadable::closed(path, "Plandex keeps plans and conversations on its server")
            })
            .collect()
    }
}
