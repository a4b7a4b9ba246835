//! The machine's floor for a pass with nothing new: a bare program that
//! lists the same folders and stats every file in them, on two threads,
//! and does nothing else (no database, no survey, no filtering).
//!
//! `cairn index` with nothing new is one stat per store plus starting a
//! process; how long a stat takes depends on the machine (a virtual
//! machine with costly system calls takes several times what bare metal
//! does). Timing this walk as a fresh process beside `cairn index` shows
//! how much of the figure is the machine and how much is cairn.
//! `cairn-bench floor DIR...` runs it and prints the files and bytes seen.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Entry point of `cairn-bench floor DIR...`.
pub fn main() -> anyhow::Result<()> {
    let roots: Vec<PathBuf> = std::env::args_os().skip(2).map(PathBuf::from).collect();
    anyhow::ensure!(!roots.is_empty(), "usage: cairn-bench floor DIR...");
    let (files, bytes) = walk(&roots, 2);
    println!("{files} files, {bytes} bytes");
    Ok(())
}

/// Stats every file below `roots` (symlinks not followed), the folders
/// just below them shared out among `threads` threads; returns how many
/// files and their total size.
pub fn walk(roots: &[PathBuf], threads: usize) -> (u64, u64) {
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let mut folders = Vec::new();
    for root in roots {
        list(root, &files, &bytes, &mut |dir| folders.push(dir));
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                while let Some(dir) = folders.get(next.fetch_add(1, Ordering::Relaxed)) {
                    below(dir, &files, &bytes);
                }
            });
        }
    });
    (files.into_inner(), bytes.into_inner())
}

fn below(dir: &Path, files: &AtomicU64, bytes: &AtomicU64) {
    list(dir, files, bytes, &mut |sub| below(&sub, files, bytes));
}

/// Counts the files in `dir` and hands each subfolder to `folder`.
fn list(dir: &Path, files: &AtomicU64, bytes: &AtomicU64, folder: &mut dyn FnMut(PathBuf)) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => folder(entry.path()),
            Ok(t) if t.is_file() => count(&entry, files, bytes),
            _ => {}
        }
    }
}

fn count(entry: &std::fs::DirEntry, files: &AtomicU64, bytes: &AtomicU64) {
    // A stat by name on the open folder, as cairn's walk takes it.
    if let Ok(m) = entry.metadata() {
        files.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(m.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_walk_stats_every_file_below_the_roots() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        for (path, len) in [
            (a.join("top.jsonl"), 3),
            (a.join("p1/s1.jsonl"), 10),
            (a.join("p1/s2.jsonl"), 20),
            (a.join("p2/deep/er/s3.jsonl"), 40),
            (b.join("2026/01/02/r.jsonl"), 100),
        ] {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, vec![b'x'; len]).expect("write");
        }
        let missing = dir.path().join("none");
        for threads in [1, 2, 5] {
            assert_eq!(
                walk(&[a.clone(), b.clone(), missing.clone()], threads),
                (5, 173)
            );
        }
        assert_eq!(walk(&[missing], 2), (0, 0));
    }
}
