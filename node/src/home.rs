//! The node's home folder is private: the folder is 0700 and every file in
//! it 0600, whatever the umask. Files cairn creates there are opened with
//! those modes ([`private_file`]); SQLite gives the WAL and shared-memory
//! files the mode of the database file, which is created 0600 before
//! SQLite first opens it. Homes made by older builds (or copied in by
//! hand) are tightened when a node opens them, with a warning in the log.
//! Files replaced whole (the notes file after a forget, `serve.json`) go
//! through [`write_private_atomic`].
//!
//! Unix only: elsewhere the functions here do nothing and report nothing.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// Mode of the home folder and of folders in it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file in the home.
pub const FILE_MODE: u32 = 0o600;
/// Deepest folder level looked at under the home.
const MAX_DEPTH: usize = 4;

/// A path in the home that other users can read, write or enter.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exposed {
    /// The file or folder.
    pub path: PathBuf,
    /// Its permission bits (e.g. `0o644`).
    pub mode: u32,
}

/// Creates the home (and missing parents) if needed; the home itself is
/// made 0700 when this call creates it.
pub fn ensure(home: &Path) -> std::io::Result<()> {
    if home.is_dir() {
        return Ok(());
    }
    if let Some(parent) = home.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(DIR_MODE);
    }
    match b.create(home) {
        Ok(()) => Ok(()),
        // Another process made it first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && home.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Options that create a file 0600 (the umask can only remove bits from
/// that, never add any).
pub fn private_file() -> OpenOptions {
    #[allow(unused_mut)]
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(FILE_MODE);
    }
    o
}

/// Replaces `path` with `bytes` atomically: they are written to a new
/// temporary file beside it (0600, a unique name, so concurrent writers
/// never share one; removed again if anything fails), synced, renamed over
/// `path`, and the folder is synced so the rename survives a crash.
pub fn write_private_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(".cairn-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(FILE_MODE));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Every path under `home` (the home itself included) that others can
/// access. Symbolic links are not followed.
pub fn exposed(home: &Path) -> Vec<Exposed> {
    let mut out = Vec::new();
    #[cfg(unix)]
    walk(home, MAX_DEPTH, &mut out);
    #[cfg(not(unix))]
    let _ = home;
    out
}

/// Removes group and other permissions from every path [`exposed`] finds,
/// logging each change. Returns what was tightened (with its old mode);
/// paths that could not be changed are logged and stay in [`exposed`].
pub fn tighten(home: &Path) -> Vec<Exposed> {
    let mut done = Vec::new();
    #[cfg(unix)]
    for e in exposed(home) {
        use std::os::unix::fs::PermissionsExt;
        let new = e.mode & 0o700;
        match std::fs::set_permissions(&e.path, std::fs::Permissions::from_mode(new)) {
            Ok(()) => {
                tracing::warn!(
                    path = %e.path.display(),
                    old = format_args!("{:o}", e.mode),
                    new = format_args!("{new:o}"),
                    "tightened permissions in the cairn home: it was readable by other users"
                );
                done.push(e);
            }
            Err(err) => tracing::warn!(
                path = %e.path.display(),
                error = %err,
                "cannot make this path private; other users may read it"
            ),
        }
    }
    #[cfg(not(unix))]
    let _ = home;
    done
}

#[cfg(unix)]
fn walk(path: &Path, depth: usize, out: &mut Vec<Exposed>) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() {
        return;
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        out.push(Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.is_dir() && depth > 0 {
        let Ok(rd) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        children.sort();
        for c in children {
            walk(&c, depth - 1, out);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn atomic_writes_are_private_whole_and_leave_nothing_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("serve.json");
        write_private_atomic(&f, b"first").expect("write");
        assert_eq!(std::fs::read(&f).expect("read"), b"first");
        assert_eq!(mode(&f), FILE_MODE);
        // A loose file being replaced ends up private too.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private_atomic(&f, b"second, longer").expect("rewrite");
        assert_eq!(std::fs::read(&f).expect("read"), b"second, longer");
        assert_eq!(mode(&f), FILE_MODE);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["serve.json"], "no temporary file is left");
        // A folder that does not exist is an error, not a panic.
        assert!(write_private_atomic(&dir.path().join("no/such/f"), b"x").is_err());
    }

    #[test]
    fn created_private_and_loose_homes_are_tightened() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("a/b/cairn");
        ensure(&home).expect("ensure");
        ensure(&home).expect("ensure twice");
        assert_eq!(mode(&home), DIR_MODE);
        let f = home.join("notes.jsonl");
        let mut w = private_file()
            .create(true)
            .append(true)
            .open(&f)
            .expect("create");
        w.write_all(b"x\n").expect("write");
        assert_eq!(mode(&f), FILE_MODE);
        assert!(exposed(&home).is_empty());

        // An old, loose home: folder 0755, files 0644 and 0666, a sub folder.
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        set(&home, 0o755);
        set(&f, 0o644);
        let db = home.join("cairn.db-wal");
        std::fs::write(&db, b"w").expect("write");
        set(&db, 0o666);
        let sub = home.join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        set(&sub, 0o755);
        let inner = sub.join("x");
        std::fs::write(&inner, b"i").expect("write");
        set(&inner, 0o640);
        // A link to a file outside is neither followed nor changed.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"o").expect("write");
        set(&outside, 0o644);
        std::os::unix::fs::symlink(&outside, home.join("link")).expect("symlink");

        let found: Vec<(PathBuf, u32)> = exposed(&home)
            .into_iter()
            .map(|e| (e.path, e.mode))
            .collect();
        let want = vec![
            (home.clone(), 0o755),
            (db.clone(), 0o666),
            (f.clone(), 0o644),
            (sub.clone(), 0o755),
            (inner.clone(), 0o640),
        ];
        assert_eq!(found, want);
        let done = tighten(&home);
        assert_eq!(done.len(), 5);
        assert!(exposed(&home).is_empty());
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&f), 0o600);
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&inner), 0o600);
        assert_eq!(mode(&outside), 0o644, "a link target outside was changed");
        assert!(tighten(&home).is_empty());
    }
}
