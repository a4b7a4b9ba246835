//! Applying a [`Target`] to its file: read, edit, show the exact change,
//! back the original up once, and replace the file atomically. A file that
//! does not parse is never written.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::target::{Target, TargetError};

/// Suffix of the one-time backup written next to a config before cairn first changes it.
pub const BACKUP_SUFFIX: &str = ".cairn-backup";

/// Add or remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `cairn install`
    Install,
    /// `cairn uninstall`
    Uninstall,
}

/// What applying one target did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub enum Change {
    /// Nothing to do.
    Unchanged,
    /// The file was (or would be) rewritten.
    Changed {
        /// A unified-style diff of the change.
        diff: String,
        /// The backup written, if this was the first change.
        backup: Option<PathBuf>,
    },
    /// The file's format has no safe editor here: the user makes the change,
    /// following these instructions (the file was not touched).
    Manual {
        /// What to add or remove, and where.
        instructions: String,
    },
}

/// Why a target could not be applied; the file is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The config could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The config is not in the expected format; it was left untouched.
    #[error("{path} left untouched: {source}")]
    Edit {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: TargetError,
    },
    /// The new config could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads a config; a missing file reads as empty.
pub fn read(path: &Path) -> Result<Option<String>, ApplyError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ApplyError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Applies `action` for `target`; writes nothing when `dry_run`.
pub fn apply(target: &Target, action: Action, dry_run: bool) -> Result<Change, ApplyError> {
    // Edit the file a symlinked config points at, not the link.
    let path = std::fs::canonicalize(&target.path).unwrap_or_else(|_| target.path.clone());
    let old = read(&path)?;
    if old.is_none() && action == Action::Uninstall {
        return Ok(Change::Unchanged);
    }
    let old_text = old.as_deref().unwrap_or("");
    if let Some((snippet, present)) = target.snippet(old_text) {
        return Ok(match (action, present) {
            (Action::Install, true) | (Action::Uninstall, false) => Change::Unchanged,
            (Action::Install, false) => Change::Manual {
                instructions: format!(
                    "add this to {} (cairn does not rewrite this format):\n{}",
                    path.display(),
                    snippet.trim_end()
                ),
            },
            (Action::Uninstall, true) => Change::Manual {
                instructions: format!(
                    "remove this entry from {} (cairn does not rewrite this format):\n{}",
                    path.display(),
                    snippet.trim_end()
                ),
            },
        });
    }
    if action == Action::Install
        && let Some(entry) = target.needs_existing(old_text)
    {
        return Ok(Change::Manual {
            instructions: format!(
                "{} is missing or empty; run the agent once so it writes its config, \
                 then run `cairn install` again, or add this to it:\n{}",
                path.display(),
                entry.trim_end()
            ),
        });
    }
    let backup_path = backup_path(&path);
    let original = match action {
        Action::Uninstall => std::fs::read_to_string(&backup_path).ok(),
        Action::Install => None,
    };
    let edited = match action {
        Action::Install => target.install(old_text),
        Action::Uninstall => target.uninstall(old_text, original.as_deref()),
    }
    .map_err(|source| ApplyError::Edit {
        path: path.clone(),
        source,
    })?;
    let Some(new_text) = edited else {
        return Ok(Change::Unchanged);
    };
    let diff = diff(&path, old_text, &new_text);
    if dry_run {
        return Ok(Change::Changed { diff, backup: None });
    }
    let write_err = |source| ApplyError::Write {
        path: path.clone(),
        source,
    };
    // A file cairn created (no backup) and that holds nothing else now goes away.
    if action == Action::Uninstall && !backup_path.exists() && is_empty_config(&new_text) {
        std::fs::remove_file(&path).map_err(write_err)?;
        return Ok(Change::Changed { diff, backup: None });
    }
    let backup = match old {
        Some(_) => backup_once(&path, &backup_path).map_err(write_err)?,
        None => None,
    };
    write_atomic(&path, &new_text).map_err(write_err)?;
    Ok(Change::Changed { diff, backup })
}

/// `{}` or nothing, give or take white space.
fn is_empty_config(text: &str) -> bool {
    let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    t.is_empty() || t == "{}"
}

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(BACKUP_SUFFIX);
    PathBuf::from(name)
}

/// Copies `path` to its backup unless a backup already exists.
fn backup_once(path: &Path, backup: &Path) -> std::io::Result<Option<PathBuf>> {
    if backup.exists() {
        return Ok(None);
    }
    std::fs::copy(path, backup)?;
    Ok(Some(backup.to_path_buf()))
}

/// Writes through a uniquely named temporary file in the same folder
/// (removed again if anything fails), syncs it and renames it over `path`,
/// then syncs the folder. The file keeps the original's permissions; a new
/// file gets what `File::create` would give (0666 less the umask).
pub(super) fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut builder = tempfile::Builder::new();
    builder.prefix(".cairn-tmp-");
    let kept = std::fs::metadata(path).map(|m| m.permissions());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // The mode given to open(2), which the umask then narrows.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    if let Ok(perms) = kept {
        tmp.as_file().set_permissions(perms)?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A unified diff of the change, with two lines of context.
pub fn diff(path: &Path, old: &str, new: &str) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&name, &name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn atomic_writes_keep_the_mode_and_leave_nothing_behind() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("settings.json");
        std::fs::write(&f, "{}").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomic(&f, "{\"a\": 1}\n").expect("write");
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "{\"a\": 1}\n");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&f), 0o640);
        let fresh = dir.path().join("new/config.json");
        write_atomic(&fresh, "x").expect("create");
        assert_eq!(
            mode(&fresh) & 0o600,
            0o600,
            "a new file is the user's to read and write"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        let mut names = names;
        names.sort();
        assert_eq!(names, ["new", "settings.json"], "no temporary file is left");
    }

    #[test]
    fn diff_shows_the_changed_lines_with_context() {
        let d = diff(
            Path::new("/x.json"),
            "a\nb\nc\nd\ne\n",
            "a\nb\nc\nNEW\nd\ne\n",
        );
        assert_eq!(
            d,
            "--- /x.json\n+++ /x.json\n@@ -2,4 +2,5 @@\n b\n c\n+NEW\n d\n e\n"
        );
        let d = diff(Path::new("/x"), "", "{}\n");
        assert_eq!(d, "--- /x\n+++ /x\n@@ -0,0 +1 @@\n+{}\n");
    }
}
