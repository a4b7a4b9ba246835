//! Listing a folder on Linux straight from `getdents64`, each file
//! stat'ed by name on the open folder, with one allocation per entry kept.
//!
//! `std::fs::read_dir` copies every name it reads into an allocation of its
//! own, and the walk then joined each one onto the folder's path and kept
//! both until the folder was sorted. Here the names land in one buffer per
//! folder, are sorted there, and a path is made only for what the listing
//! keeps (a kept file or a subfolder). Same entries, same order, same
//! stats as the portable listing ([`super::list_std`]); the tests compare
//! the two.

use std::ffi::{CStr, OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
use rustix::io::Errno;

use super::{Keep, Listed};
use crate::sources::Stat;

/// Bytes of directory entries read per `getdents64` call.
const READ_BUF: usize = 32 * 1024;

/// A folder that vanished (or is not a folder) while being walked.
fn gone(e: Errno) -> bool {
    e == Errno::NOENT || e == Errno::NOTDIR
}

/// Lists one folder as [`super::list_std`] does: its kept files with their
/// stats and, when `depth_left` allows, its subfolders, in name order; a
/// folder that cannot be listed is itself the one entry.
pub(super) fn list(dir: &Path, depth_left: usize, keep: Keep<'_>) -> Vec<Listed> {
    let fd = match rustix::fs::openat(
        rustix::fs::CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) if gone(e) => return Vec::new(),
        Err(_) => return vec![Listed::File((dir.to_path_buf(), None))],
    };
    let (names, mut entries) = read_names(&fd);
    entries.sort_unstable_by(|a, b| a.name(&names).cmp(b.name(&names)));
    // The folder's path and a separator, then each name in turn: the path
    // `Path::join` makes, built in one reused buffer.
    let mut path = dir.as_os_str().as_bytes().to_vec();
    if path.last().is_some_and(|&b| b != b'/') {
        path.push(b'/');
    }
    let base = path.len();
    let mut out = Vec::with_capacity(entries.len());
    for e in &entries {
        let name = e.name(&names);
        path.truncate(base);
        path.extend_from_slice(name);
        let owned = |path: &[u8]| PathBuf::from(OsString::from_vec(path.to_vec()));
        let c_name = e.c_name(&names);
        let here = || Path::new(OsStr::from_bytes(&path));
        match kind(&fd, c_name, e.kind) {
            FileType::Directory if depth_left > 0 => out.push(Listed::Folder(owned(&path))),
            FileType::RegularFile if keep(here()) => {
                match rustix::fs::statat(&fd, c_name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => out.push(Listed::File((owned(&path), Some(stat_of(&st))))),
                    Err(e) if gone(e) => {}
                    Err(_) => out.push(Listed::File((owned(&path), None))),
                }
            }
            FileType::Symlink => {
                // Followed: a link to a file is that file, at its size and mtime.
                if let Ok(st) = rustix::fs::statat(&fd, c_name, AtFlags::empty())
                    && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                    && keep(here())
                {
                    out.push(Listed::File((owned(&path), Some(stat_of(&st)))));
                }
            }
            _ => {}
        }
    }
    out
}

/// An entry of a folder: where its name lies in the names buffer (the
/// name, then a NUL) and the type the listing gave.
struct Entry {
    at: u32,
    len: u32,
    kind: FileType,
}

impl Entry {
    fn name<'a>(&self, names: &'a [u8]) -> &'a [u8] {
        &names[self.at as usize..(self.at + self.len) as usize]
    }

    fn c_name<'a>(&self, names: &'a [u8]) -> &'a CStr {
        CStr::from_bytes_with_nul(&names[self.at as usize..=(self.at + self.len) as usize])
            .expect("each name is stored with its NUL")
    }
}

/// Every name in the folder (but `.` and `..`), each followed by a NUL in
/// one buffer, and the entries pointing into it. A read error ends the
/// listing with what was read, as the portable listing skips it.
fn read_names(fd: &OwnedFd) -> (Vec<u8>, Vec<Entry>) {
    let mut buf: Vec<MaybeUninit<u8>> = Vec::with_capacity(READ_BUF);
    buf.resize(READ_BUF, MaybeUninit::uninit());
    let mut listing = RawDir::new(fd, &mut buf);
    let mut names = Vec::new();
    let mut entries = Vec::new();
    while let Some(Ok(e)) = listing.next() {
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let (Ok(at), Ok(len)) = (u32::try_from(names.len()), u32::try_from(name.len())) else {
            break;
        };
        names.extend_from_slice(name);
        names.push(0);
        entries.push(Entry {
            at,
            len,
            kind: e.file_type(),
        });
    }
    (names, entries)
}

/// The entry's type, from the listing or, where the file system did not
/// give one, from a stat of the entry itself (a link is not followed).
fn kind(fd: &OwnedFd, name: &CStr, listed: FileType) -> FileType {
    if listed != FileType::Unknown {
        return listed;
    }
    rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
}

/// The size and mtime of a stat, as [`Stat::of`] reads them from metadata:
/// nanoseconds since the epoch, and 0 for a time before it.
fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let ns = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
    Stat {
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime_ns: if ns < 0 { 0 } else { ns as i64 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> OwnedFd {
        rustix::fs::openat(
            rustix::fs::CWD,
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("open folder")
    }

    /// Where the file system gives no type, a stat tells it: a folder, a
    /// file, and a link (not followed); a name that is gone has none.
    #[test]
    fn an_entry_without_a_listed_type_is_stated() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("f"), "x").expect("write");
        std::os::unix::fs::symlink(dir.path().join("f"), dir.path().join("l")).expect("symlink");
        let fd = open(dir.path());
        let of = |name: &CStr| kind(&fd, name, FileType::Unknown);
        assert_eq!(of(c"sub"), FileType::Directory);
        assert_eq!(of(c"f"), FileType::RegularFile);
        assert_eq!(of(c"l"), FileType::Symlink);
        assert_eq!(of(c"gone"), FileType::Unknown);
        // A type the listing gave is taken as it is.
        assert_eq!(kind(&fd, c"f", FileType::Directory), FileType::Directory);
    }

    /// Times are read as `Stat::of` reads them, a time before the epoch
    /// included.
    #[test]
    fn stats_match_the_portable_reading_of_the_same_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fd = open(dir.path());
        let times = [
            std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789),
            std::time::UNIX_EPOCH,
            std::time::UNIX_EPOCH - std::time::Duration::from_millis(1500),
        ];
        for (i, t) in times.into_iter().enumerate() {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, "x".repeat(i + 3)).expect("write");
            let f = std::fs::File::options().write(true).open(&p).expect("open");
            f.set_modified(t).expect("set mtime");
            drop(f);
            let name = std::ffi::CString::new(format!("f{i}")).expect("name");
            let st =
                rustix::fs::statat(&fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).expect("stat");
            let m = std::fs::metadata(&p).expect("metadata");
            assert_eq!(stat_of(&st), Stat::of(&m), "{t:?}");
        }
    }
}
