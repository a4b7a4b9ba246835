//! Advisory file locks held by one process at a time (`flock` on Unix,
//! `LockFileEx` on Windows, through the standard library).
//!
//! The operating system drops a lock when its holder exits, however it
//! exits (`kill -9` included), so a lock never outlives its process and
//! needs no stale-lock clean-up. A lock file holds the holder's process id,
//! so whoever is refused can say who holds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Failures taking a lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("{path} is locked by {}", holder.map_or("another process".to_owned(), |p| format!("process {p}")))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's process id, if it wrote one.
        holder: Option<u32>,
    },
    /// The lock file could not be opened or locked.
    #[error("failed to lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// An exclusive lock, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
}

impl FileLock {
    /// Takes the lock on `path` (created 0600 if missing) without waiting,
    /// and writes this process's id into it.
    pub fn try_acquire(path: &Path) -> Result<FileLock, LockError> {
        let mut file = open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    path: path.to_path_buf(),
                    holder: read_pid(&mut file),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(path, source)),
        }
        let pid = std::process::id().to_string();
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .map_err(|e| io(path, e))?;
        Ok(FileLock {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Takes the lock on `path`, waiting for its holder to release it.
    pub fn acquire(path: &Path) -> Result<FileLock, LockError> {
        let file = open(path)?;
        file.lock().map_err(|e| io(path, e))?;
        Ok(FileLock {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the file releases the lock as well; unlocking first makes
        // the release immediate even if the descriptor was inherited.
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path).map_err(|e| io(path, e))
}

fn io(path: &Path, source: std::io::Error) -> LockError {
    LockError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_is_refused_with_the_holder_pid_until_release() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let held = FileLock::try_acquire(&path).expect("first");
        // A second open file description conflicts even in the same process.
        match FileLock::try_acquire(&path) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(held);
        let again = FileLock::try_acquire(&path).expect("free after drop");
        assert_eq!(again.path(), path);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn blocking_acquire_waits_for_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("y.lock");
        let held = FileLock::try_acquire(&path).expect("first");
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        let waiter = std::thread::spawn(move || {
            let l = FileLock::acquire(&p).expect("acquire");
            tx.send(()).expect("send");
            drop(l);
        });
        // Still held: the waiter cannot have it yet.
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err()
        );
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("waiter got the lock after release");
        waiter.join().expect("join");
    }
}
