//! Bounded walks of the agents' folders: every file a source keeps, with
//! the size and mtime taken as its folder is listed.
//!
//! A pass with nothing new costs one stat per store, so the walk is most
//! of it. Folders are listed by a small pool of two threads that take
//! folders from a shared stack as they find them; each folder's listing is
//! kept apart and the lists are joined in order at the end, so the output
//! is the same depth-first, name-ordered list whatever thread listed what.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

use super::{Reader, SourceFile, Stat};

#[cfg(target_os = "linux")]
mod getdents;

/// Decides which files a walk keeps, from their full path. Shared by the
/// threads of a walk.
pub type Keep<'a> = &'a (dyn Fn(&Path) -> bool + Sync);

/// Lists files under `dir` (recursively, at most `max_depth` levels down)
/// for which `keep` is true, sorted for a stable order. A missing folder
/// yields nothing; a folder that exists but cannot be listed (no
/// permission, I/O error) is listed itself, whatever `keep` says, so the
/// indexer reports it (see [`folder_error`]) instead of skipping it
/// silently. Symlinked folders are not followed.
pub fn walk_files(dir: &Path, max_depth: usize, keep: Keep<'_>) -> Vec<PathBuf> {
    walk(dir, max_depth, keep, |path, _| path)
}

/// [`walk_files`] as stores read by `reader`, each with the size and mtime
/// the walk took: a stat by name relative to the folder being listed costs
/// the kernel less than one by full path, and the indexer need not stat
/// the file again.
pub fn walk_stores(
    dir: &Path,
    max_depth: usize,
    keep: Keep<'_>,
    reader: Reader,
) -> Vec<SourceFile> {
    walk(dir, max_depth, keep, |path, stat| SourceFile {
        path,
        reader,
        stat,
    })
}

/// Why a discovered folder (see [`walk_files`]) cannot be read, or `None`
/// when `path` is not a folder or can be listed now.
pub fn folder_error(path: &Path) -> Option<String> {
    if !path.is_dir() {
        return None;
    }
    std::fs::read_dir(path)
        .err()
        .map(|e| format!("cannot list folder {}: {e}", path.display()))
}

/// A file a walk kept, with its size and mtime when they could be taken.
type Walked = (PathBuf, Option<Stat>);

/// What a folder holds, in name order.
enum Item {
    /// A kept file (or a folder that cannot be listed).
    File(Walked),
    /// A subfolder: its index among the walk's folders.
    Folder(usize),
}

/// A folder of the walk: where it is, how much deeper the walk may go
/// below it, and its listing once a thread has made it.
struct Folder {
    path: PathBuf,
    depth_left: usize,
    items: Vec<Item>,
}

/// What the walk's threads share.
struct Pool {
    /// Every folder found so far; index 0 is the walk's root.
    folders: Vec<Folder>,
    /// Folders found and not yet taken by a thread.
    todo: Vec<usize>,
    /// Threads listing a folder right now.
    busy: usize,
}

/// The walk behind [`walk_files`]: depth first, each folder's entries in
/// name order (the order a sort of the whole paths by component gives),
/// each kept file made into what the caller lists by `make`.
fn walk<T>(
    dir: &Path,
    max_depth: usize,
    keep: Keep<'_>,
    make: impl Fn(PathBuf, Option<Stat>) -> T,
) -> Vec<T> {
    let shared = Shared {
        pool: Mutex::new(Pool {
            folders: vec![Folder {
                path: dir.to_path_buf(),
                depth_left: max_depth,
                items: Vec::new(),
            }],
            todo: vec![0],
            busy: 0,
        }),
        more: Condvar::new(),
        keep,
    };
    std::thread::scope(|s| shared.work(Some(s)));
    let pool = shared
        .pool
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    flatten(pool.folders, make)
}

/// The pool and what the threads need to list a folder.
struct Shared<'k> {
    pool: Mutex<Pool>,
    /// Signalled when folders are added to `todo` or the walk is over.
    more: Condvar,
    keep: Keep<'k>,
}

impl<'k> Shared<'k> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes folders and lists them until none is left and no thread is
    /// listing one (which could find more). The first thread starts a
    /// second one (given `scope`) once there are two folders to share.
    fn work<'s>(&'s self, mut scope: Option<&'s std::thread::Scope<'s, '_>>) {
        let mut pool = self.lock();
        loop {
            let Some(id) = pool.todo.pop() else {
                if pool.busy == 0 {
                    self.more.notify_all();
                    return;
                }
                pool = self.more.wait(pool).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            pool.busy += 1;
            let path = std::mem::take(&mut pool.folders[id].path);
            let depth_left = pool.folders[id].depth_left;
            drop(pool);
            let listed = list(&path, depth_left, self.keep);
            pool = self.lock();
            pool.busy -= 1;
            let mut items = Vec::with_capacity(listed.len());
            for entry in listed {
                items.push(match entry {
                    Listed::File(w) => Item::File(w),
                    Listed::Folder(path) => {
                        let sub = pool.folders.len();
                        pool.folders.push(Folder {
                            path,
                            depth_left: depth_left - 1,
                            items: Vec::new(),
                        });
                        pool.todo.push(sub);
                        Item::Folder(sub)
                    }
                });
            }
            pool.folders[id].items = items;
            if pool.todo.len() >= 2
                && let Some(s) = scope.take()
            {
                // No second thread to be had: this one lists them all.
                let _ = std::thread::Builder::new()
                    .name("cairn-walk".into())
                    .spawn_scoped(s, || self.work(None));
            } else if !pool.todo.is_empty() {
                self.more.notify_one();
            }
        }
    }
}

/// One entry of a folder's listing.
enum Listed {
    File(Walked),
    /// A subfolder to list (only when the walk may go deeper).
    Folder(PathBuf),
}

/// A folder that vanished (or is not a folder) while being walked: not an error.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Lists one folder in name order: its kept files with their stats, and
/// its subfolders when `depth_left` allows going below it. A folder that
/// cannot be listed is itself the one entry (see [`walk_files`]). On Linux
/// straight from the kernel's listing ([`getdents`]), elsewhere through
/// `std::fs::read_dir` ([`list_std`]); both give the same list.
fn list(dir: &Path, depth_left: usize, keep: Keep<'_>) -> Vec<Listed> {
    #[cfg(target_os = "linux")]
    return getdents::list(dir, depth_left, keep);
    #[cfg(not(target_os = "linux"))]
    list_std(dir, depth_left, keep)
}

/// [`list`] through `std::fs::read_dir`, which works everywhere.
#[cfg_attr(all(target_os = "linux", not(test)), allow(dead_code))]
fn list_std(dir: &Path, depth_left: usize, keep: Keep<'_>) -> Vec<Listed> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(e) if gone(&e) => return Vec::new(),
        Err(_) => return vec![Listed::File((dir.to_path_buf(), None))],
    };
    // `DirEntry::path` is the folder as given joined with the name.
    let mut entries: Vec<(PathBuf, std::fs::DirEntry)> = listing
        .filter_map(Result::ok)
        .map(|e| (e.path(), e))
        .collect();
    // One folder's paths share their prefix: comparing the bytes compares the names.
    entries.sort_unstable_by(|a, b| {
        a.0.as_os_str()
            .as_encoded_bytes()
            .cmp(b.0.as_os_str().as_encoded_bytes())
    });
    let mut out = Vec::new();
    for (path, entry) in entries {
        // The type comes with the listing; only a symlink costs a stat by path.
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if depth_left > 0 {
                out.push(Listed::Folder(path));
            }
        } else if ft.is_file() {
            if keep(&path) {
                // Relative to the open folder (a statx on its descriptor).
                match entry.metadata() {
                    Ok(m) => out.push(Listed::File((path, Some(Stat::of(&m))))),
                    Err(e) if gone(&e) => {}
                    Err(_) => out.push(Listed::File((path, None))),
                }
            }
        } else if ft.is_symlink()
            && let Ok(m) = std::fs::metadata(&path)
            && m.is_file()
            && keep(&path)
        {
            out.push(Listed::File((path, Some(Stat::of(&m)))));
        }
    }
    out
}

/// Joins the folders' listings depth first from the root (folder 0), in
/// one list made to size.
fn flatten<T>(mut folders: Vec<Folder>, make: impl Fn(PathBuf, Option<Stat>) -> T) -> Vec<T> {
    let files = folders
        .iter()
        .flat_map(|f| &f.items)
        .filter(|i| matches!(i, Item::File(_)))
        .count();
    let mut out = Vec::with_capacity(files);
    // A stack of listings being emitted, each as the rest of its items.
    let mut stack = vec![std::mem::take(&mut folders[0].items).into_iter()];
    while let Some(items) = stack.last_mut() {
        match items.next() {
            Some(Item::File((path, stat))) => out.push(make(path, stat)),
            Some(Item::Folder(id)) => {
                let sub = std::mem::take(&mut folders[id].items).into_iter();
                stack.push(sub);
            }
            None => {
                stack.pop();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::Parsed;
    use crate::sources::common::has_suffix;

    #[test]
    fn walk_lists_in_path_order_with_the_stats_of_each_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        // Names around '/' in byte order ('-' and '.' sort before it), and
        // enough subfolders that the walk is shared with a second thread.
        let files = [
            "a.jsonl",
            "a/x.jsonl",
            "a-b/x.jsonl",
            "a.d/y.jsonl",
            "b/c/deep.jsonl",
            "b/c/d/too_deep.jsonl",
            "b/z.jsonl",
            "c/1.jsonl",
            "c/2.txt",
            "d/e/f.jsonl",
            "z.jsonl",
        ];
        for (i, f) in files.iter().enumerate() {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x".repeat(i + 1)).expect("write");
        }
        std::fs::create_dir_all(root.join("empty")).expect("mkdir");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("z.jsonl"), root.join("link.jsonl")).expect("symlink");
        let keep = |p: &Path| has_suffix(p, ".jsonl");
        let found = walk_stores(&root, 2, &keep, Reader::Whole(|_, _| Parsed::default()));
        let mut want: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.ends_with(".jsonl") && f.matches('/').count() <= 2)
            .map(|f| root.join(f))
            .collect();
        if cfg!(unix) {
            want.push(root.join("link.jsonl"));
        }
        want.sort();
        let paths: Vec<PathBuf> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(paths, want);
        for f in &found {
            let m = std::fs::metadata(&f.path).expect("stat");
            assert_eq!(f.stat, Some(Stat::of(&m)), "{}", f.path.display());
        }
        assert_eq!(walk_files(&root, 2, &keep), want);
        // Files directly in the folder only, and nothing for a missing folder.
        let top = walk_files(&root, 0, &keep);
        assert_eq!(top.len(), if cfg!(unix) { 3 } else { 2 }, "{top:?}");
        assert!(walk_files(&dir.path().join("nowhere"), 3, &keep).is_empty());
    }

    /// A tree wide and deep enough that both threads list folders: every
    /// file is found once, in the order a sort of the paths gives.
    #[test]
    fn a_wide_tree_is_listed_whole_and_in_order_by_two_threads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let mut want = Vec::new();
        for a in 0..12 {
            for b in 0..(a % 4 + 1) {
                let sub = root.join(format!("p{a:02}")).join(format!("d{b}"));
                std::fs::create_dir_all(&sub).expect("mkdir");
                for f in 0..(a * 3 % 7 + 1) {
                    let p = sub.join(format!("s{f}.jsonl"));
                    std::fs::write(&p, "x").expect("write");
                    want.push(p);
                }
            }
            let p = root.join(format!("p{a:02}.jsonl"));
            std::fs::write(&p, "y").expect("write");
            want.push(p);
        }
        want.sort();
        let keep = |p: &Path| has_suffix(p, ".jsonl");
        for _ in 0..20 {
            assert_eq!(walk_files(root, 2, &keep), want);
        }
        // One level less: the files two folders down are out of reach.
        let shallow: Vec<PathBuf> = want
            .iter()
            .filter(|p| p.parent() == Some(root))
            .cloned()
            .collect();
        assert_eq!(walk_files(root, 1, &keep), shallow);
    }

    /// A listing, as something to compare: each entry's path, and for a
    /// file its stat (or that it had none).
    fn shown(listed: Vec<Listed>) -> Vec<(PathBuf, Option<Option<Stat>>)> {
        listed
            .into_iter()
            .map(|l| match l {
                Listed::File((p, stat)) => (p, Some(stat)),
                Listed::Folder(p) => (p, None),
            })
            .collect()
    }

    /// The Linux listing gives what the portable one gives, entry for
    /// entry: names that sort around '/' and are not UTF-8, links to files,
    /// folders and nowhere, a pipe, files the filter drops, a folder given
    /// with a trailing separator, one that is a file, and one that is gone.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_linux_listing_matches_the_portable_one() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        for f in [
            "a.jsonl",
            "a-b.jsonl",
            "a.b.jsonl",
            "b.txt",
            "c/x.jsonl",
            "d/e/y.jsonl",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, f).expect("write");
        }
        let odd = root.join(std::ffi::OsStr::from_bytes(b"\xff\xfe.jsonl"));
        std::fs::write(&odd, "odd").expect("write");
        std::os::unix::fs::symlink(root.join("a.jsonl"), root.join("to-file.jsonl"))
            .expect("symlink");
        std::os::unix::fs::symlink(root.join("c"), root.join("to-dir.jsonl")).expect("symlink");
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling.jsonl"))
            .expect("symlink");
        let fifo =
            std::ffi::CString::new(root.join("pipe.jsonl").as_os_str().as_bytes()).expect("path");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            fifo.as_c_str(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .expect("mkfifo");
        // By bytes, so the name that is not UTF-8 is kept too.
        let keep = |p: &Path| p.as_os_str().as_bytes().ends_with(b".jsonl");
        let mut slash = root.clone().into_os_string();
        slash.push("/");
        let folders = [
            root.clone(),
            PathBuf::from(slash),
            root.join("d"),
            root.join("a.jsonl"),
            root.join("gone"),
        ];
        for folder in &folders {
            for depth in [0, 1] {
                let linux = shown(getdents::list(folder, depth, &keep));
                let portable = shown(list_std(folder, depth, &keep));
                assert_eq!(linux, portable, "{} at depth {depth}", folder.display());
            }
        }
        // a-b, a.b, a, c, d, to-file and the odd name last; not the links
        // to a folder or nowhere, the pipe or b.txt.
        let top = shown(getdents::list(&root, 1, &keep));
        assert_eq!(top.len(), 7, "{top:?}");
        assert_eq!(top[6].0, odd);
    }

    #[cfg(unix)]
    #[test]
    fn walk_lists_a_folder_it_cannot_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let locked = dir.path().join("a/locked");
        std::fs::create_dir_all(&locked).expect("mkdir");
        std::fs::write(locked.join("s.jsonl"), "x").expect("write");
        std::fs::create_dir_all(dir.path().join("b")).expect("mkdir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        if std::fs::read_dir(&locked).is_ok() {
            // Running as root: permissions do not apply.
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            return;
        }
        let found = walk_files(dir.path(), 3, &|p: &Path| has_suffix(p, ".jsonl"));
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(found, [locked]);
    }
}
