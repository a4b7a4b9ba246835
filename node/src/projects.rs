//! Project folders found without configuration: where the per-project
//! stores lie (aider's `.aider.chat.history.md` at a git root, Crush's
//! `.crush/` and the Go opencode's `.opencode/`), which no file in the
//! home lists.
//!
//! Three ways in: the working folders of the sessions already indexed, any
//! agent's ([`learn`], after a pass that added records); Crush's own list
//! of its projects (read by its source, `sources::crush`); and a bounded
//! walk of the usual code folders under the home ([`walk_code_folders`]),
//! made by the first pass and again once a day ([`refresh`]), never on
//! every pass (the file is read by every pass: one small read). Only folders that hold such a store are kept, remembered in
//! `projects.json` in the node's home and put in
//! [`Locations::project_dirs`], so a pass pays a few `stat`s per folder
//! that holds one.
//!
//! This module writes nothing but its own file, never follows symbolic
//! links, and never reads the stores it finds (the sources do).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sources::Locations;

/// The file in the node's home that remembers the folders found.
pub const FILE: &str = "projects.json";

/// How long a walk of the code folders is trusted before the next pass
/// walks them again.
pub const REWALK_MS: i64 = 24 * 60 * 60 * 1000;

/// What, in a folder, is a per-project store some source reads.
const MARKERS: [&str; 3] = [".aider.chat.history.md", ".crush", ".opencode"];

/// The usual folders of code under the home, walked `depth` levels down.
const CODE_DIRS: [&str; 22] = [
    "code",
    "Code",
    "src",
    "source",
    "projects",
    "Projects",
    "dev",
    "Developer",
    "development",
    "work",
    "workspace",
    "workspaces",
    "git",
    "github",
    "GitHub",
    "repos",
    "repositories",
    "hack",
    "go/src",
    "Documents/GitHub",
    "Documents/code",
    "Documents/Projects",
];

/// Folders a walk never enters: build output, dependencies, caches.
const SKIP: [&str; 12] = [
    "node_modules",
    "target",
    "vendor",
    "venv",
    "__pycache__",
    "build",
    "dist",
    "out",
    "Library",
    "Applications",
    "snap",
    "go/pkg",
];

/// How far a walk of the code folders may go.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Levels below a code folder (the home itself is looked at one level down).
    pub depth: usize,
    /// Folders listed, in all.
    pub folders: usize,
    /// Time spent, in all.
    pub budget: Duration,
}

/// The limits of the walk a pass makes.
pub const LIMITS: Limits = Limits {
    depth: 4,
    folders: 20_000,
    budget: Duration::from_secs(2),
};

/// What `projects.json` holds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    /// When the code folders were last walked (Unix ms).
    pub walked_ms: Option<i64>,
    /// Folders that held a per-project store when found, sorted.
    pub folders: Vec<PathBuf>,
}

/// Whether `dir` holds a per-project store some source reads.
pub fn holds_store(dir: &Path) -> bool {
    MARKERS
        .iter()
        .any(|m| std::fs::symlink_metadata(dir.join(m)).is_ok())
}

/// What `file` remembers; nothing when it is missing or unreadable (the
/// next pass walks again).
pub fn load(file: &Path) -> Remembered {
    let Ok(bytes) = std::fs::read(file) else {
        return Remembered::default();
    };
    serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(file = %file.display(), error = %e, "project folders file unreadable; walking again");
        Remembered::default()
    })
}

/// Writes `r` to `file` whole and private (see
/// [`crate::home::write_private_atomic`]), making the node's home if the
/// walk that found them ran before the node made it.
fn save(file: &Path, r: &Remembered) {
    let written = serde_json::to_vec_pretty(r)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            if let Some(dir) = file.parent() {
                crate::home::ensure(dir)?;
            }
            crate::home::write_private_atomic(file, &bytes)
        });
    if let Err(e) = written {
        tracing::warn!(file = %file.display(), error = %e, "cannot remember the project folders found");
    }
}

/// What a walk of the code folders found, and what it cost.
#[derive(Debug, Default)]
pub struct Walked {
    /// Folders holding a per-project store, sorted.
    pub found: Vec<PathBuf>,
    /// Folders listed.
    pub listed: usize,
    /// Whether a limit cut the walk short.
    pub cut_short: bool,
}

/// Walks the usual code folders under `home` (see [`CODE_DIRS`]) down to
/// `limits.depth` levels, and the home's own folders one level down, for
/// folders holding a per-project store. Hidden folders, dependency and
/// build folders ([`SKIP`]) and symbolic links are not entered, nor is
/// anything below a git work tree's root (per-project stores are at the
/// root, or in the folder an agent ran in, which [`learn`] finds).
pub fn walk_code_folders(home: &Path, limits: &Limits) -> Walked {
    let started = Instant::now();
    let mut w = Walked::default();
    let mut queue: std::collections::VecDeque<(PathBuf, usize)> = CODE_DIRS
        .iter()
        .map(|d| (home.join(d), limits.depth))
        .collect();
    queue.push_back((home.to_path_buf(), 1));
    let mut seen = std::collections::HashSet::new();
    while let Some((dir, depth)) = queue.pop_front() {
        if w.listed >= limits.folders || started.elapsed() >= limits.budget {
            w.cut_short = true;
            break;
        }
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        w.listed += 1;
        let mut is_repo = false;
        let mut children = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == ".git" {
                is_repo = true;
            }
            if MARKERS.contains(&name) && dir != home {
                w.found.push(dir.clone());
            }
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if depth > 0 && is_dir && !name.starts_with('.') && !SKIP.contains(&name) {
                children.push(e.path());
            }
        }
        if is_repo && dir != home {
            continue;
        }
        for c in children {
            if !SKIP.iter().any(|s| c.ends_with(s)) {
                queue.push_back((c, depth - 1));
            }
        }
    }
    w.found.sort();
    w.found.dedup();
    w
}

/// The folders `loc` should read per-project stores from: those remembered
/// in its [`Locations::projects_file`], walked for anew first when that
/// file has no walk younger than [`REWALK_MS`] (and then remembered).
/// Nothing happens without a file.
pub fn refresh(loc: &mut Locations, now_ms: i64, limits: &Limits) {
    let Some(file) = loc.projects_file.clone() else {
        return;
    };
    let mut r = load(&file);
    let due = r
        .walked_ms
        .is_none_or(|t| now_ms.saturating_sub(t) >= REWALK_MS || t > now_ms);
    if due {
        let w = walk_code_folders(&loc.home, limits);
        tracing::debug!(
            listed = w.listed,
            found = w.found.len(),
            cut_short = w.cut_short,
            "walked the code folders for per-project stores"
        );
        r.folders.retain(|f| holds_store(f));
        r.folders.extend(w.found);
        r.folders.sort();
        r.folders.dedup();
        r.walked_ms = Some(now_ms);
        save(&file, &r);
    }
    loc.project_dirs = r.folders;
}

/// Remembers, of `candidates` (the working folders of sessions indexed),
/// those that hold a per-project store and are not remembered yet, and
/// returns them. Relative paths are ignored.
pub fn learn(file: &Path, candidates: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut r = load(file);
    let mut new: Vec<PathBuf> = candidates
        .into_iter()
        .filter(|p| p.is_absolute() && r.folders.binary_search(p).is_err() && holds_store(p))
        .collect();
    new.sort();
    new.dedup();
    if !new.is_empty() {
        r.folders.extend(new.iter().cloned());
        r.folders.sort();
        r.folders.dedup();
        save(file, &r);
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, b"").expect("write");
    }

    #[test]
    fn the_walk_finds_stores_in_code_folders_within_its_bounds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        touch(&h.join("code/proj-aider/.aider.chat.history.md"));
        std::fs::create_dir_all(h.join("code/proj-aider/.git")).expect("mkdir");
        touch(&h.join("src/team/app/.crush/crush.db"));
        touch(&h.join("notes/.opencode/opencode.db")); // the home, one level down
        // Not entered: below a git root, hidden, dependencies, too deep.
        touch(&h.join("code/proj-aider/sub/.aider.chat.history.md"));
        touch(&h.join("code/.hidden/x/.aider.chat.history.md"));
        touch(&h.join("code/web/node_modules/m/.aider.chat.history.md"));
        touch(&h.join("code/a/b/c/d/e/.aider.chat.history.md"));
        touch(&h.join("misc/deep/.aider.chat.history.md"));
        // The home's own history is aider's global store, not a project.
        touch(&h.join(".aider.chat.history.md"));
        let w = walk_code_folders(h, &LIMITS);
        assert_eq!(
            w.found,
            [
                h.join("code/proj-aider"),
                h.join("notes"),
                h.join("src/team/app")
            ]
        );
        assert!(!w.cut_short);
        let few = Limits {
            folders: 2,
            ..LIMITS
        };
        let w = walk_code_folders(h, &few);
        assert!(w.cut_short && w.listed == 2, "{w:?}");
    }

    #[test]
    fn refresh_walks_when_cold_or_stale_and_learn_adds_indexed_folders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        let cairn = h.join(".local/share/cairn");
        std::fs::create_dir_all(&cairn).expect("mkdir");
        touch(&h.join("code/a/.aider.chat.history.md"));
        let mut loc = Locations::under_home(h);
        loc.projects_file = Some(cairn.join(FILE));

        refresh(&mut loc, 1_000, &LIMITS);
        assert_eq!(loc.project_dirs, [h.join("code/a")]);
        // Remembered: a new store is not walked for until the walk is due.
        touch(&h.join("code/b/.crush/crush.db"));
        refresh(&mut loc, 2_000, &LIMITS);
        assert_eq!(loc.project_dirs, [h.join("code/a")]);
        refresh(&mut loc, 1_000 + REWALK_MS, &LIMITS);
        assert_eq!(loc.project_dirs, [h.join("code/a"), h.join("code/b")]);

        // An indexed session's folder outside the code folders.
        touch(&h.join("elsewhere/x/.aider.chat.history.md"));
        let new = learn(
            &cairn.join(FILE),
            [
                h.join("elsewhere/x"),
                h.join("code/a"),
                h.join("elsewhere"),
                PathBuf::from("relative/x"),
            ],
        );
        assert_eq!(new, [h.join("elsewhere/x")]);
        refresh(&mut loc, 1_000 + REWALK_MS + 1, &LIMITS);
        assert_eq!(loc.project_dirs.len(), 3, "{:?}", loc.project_dirs);
        assert!(learn(&cairn.join(FILE), [h.join("elsewhere/x")]).is_empty());

        // No file: nothing is walked.
        let mut bare = Locations::under_home(h);
        refresh(&mut bare, 1_000, &LIMITS);
        assert!(bare.project_dirs.is_empty());
    }
}
