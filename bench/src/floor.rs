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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// Entry point of `cairn-bench floor DIR...`.
pub fn main() -> anyhow::Result<()> {
    let roots: Vec<PathBuf> = std::env::args_os().skip(2).map(PathBuf::from).collect();
    anyhow::ensure!(!roots.is_empty(), "usage: cairn-bench floor DIR...");
    let (files, bytes) = walk(&roots, 2);
    println!("{files} files, {bytes} bytes");
    Ok(())
}

/// Stats every file below `roots` (symlinks not followed), the folders
/// shared out among `threads` threads as they are found; returns how many
/// files and their total size.
pub fn walk(roots: &[PathBuf], threads: usize) -> (u64, u64) {
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    // Folders not yet listed, and how many threads are listing one.
    let todo = Mutex::new((roots.to_vec(), 0usize));
    let more = Condvar::new();
    let lock = || todo.lock().unwrap_or_else(PoisonError::into_inner);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let dir = {
                        let mut t = lock();
                        loop {
                            if let Some(dir) = t.0.pop() {
                                t.1 += 1;
                                break dir;
                            }
                            if t.1 == 0 {
                                more.notify_all();
                                return;
                            }
                            t = more.wait(t).unwrap_or_else(PoisonError::into_inner);
                        }
                    };
                    let mut found = Vec::new();
                    list(&dir, &files, &bytes, &mut |sub| found.push(sub));
                    let mut t = lock();
                    t.1 -= 1;
                    t.0.extend(found);
                    more.notify_all();
                }
            });
        }
    });
    (files.into_inner(), bytes.into_inner())
}

/// Counts the files in `dir` and hands each subfolder to `folder`: on
/// Linux from `getdents64` with a stat by name on the open folder (as
/// cairn's walk lists a folder), elsewhere through `std::fs::read_dir`.
#[cfg(target_os = "linux")]
fn list(dir: &Path, files: &AtomicU64, bytes: &AtomicU64, folder: &mut dyn FnMut(PathBuf)) {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
    use std::os::unix::ffi::OsStrExt;
    let Ok(fd) = rustix::fs::openat(
        rustix::fs::CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut listing = RawDir::new(&fd, &mut buf);
    while let Some(Ok(e)) = listing.next() {
        let name = e.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let stat = || rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW);
        let kind = match e.file_type() {
            FileType::Unknown => {
                stat().map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
            }
            kind => kind,
        };
        match kind {
            FileType::Directory => folder(dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()))),
            FileType::RegularFile => {
                if let Ok(st) = stat() {
                    files.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(u64::try_from(st.st_size).unwrap_or(0), Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn list(dir: &Path, files: &AtomicU64, bytes: &AtomicU64, folder: &mut dyn FnMut(PathBuf)) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => folder(entry.path()),
            Ok(t) if t.is_file() => {
                // A stat by name on the open folder, as cairn's walk takes it.
                if let Ok(m) = entry.metadata() {
                    files.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(m.len(), Ordering::Relaxed);
                }
            }
            _ => {}
        }
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
