//! One `cairn serve` per home. The daemon holds an exclusive lock on
//! `serve.lock` in the node's home for as long as it runs; the operating
//! system releases it when the process ends, even by `kill -9`, so a crash
//! never blocks the next start. A second daemon is refused before it binds
//! a port or touches `serve.json`, and is told which one is running.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::lock::{FileLock, LockError};

/// The lock file in the node's home.
pub const SERVE_LOCK_FILE: &str = "serve.lock";

/// Why this daemon may not run.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// Another daemon serves this home.
    #[error(
        "another cairn serve is already running for {home} ({}); stop it first (it keeps serving this node)",
        describe(*pid, *listen_addr)
    )]
    AlreadyRunning {
        /// The node's home.
        home: PathBuf,
        /// The running daemon's process id, if known.
        pid: Option<u32>,
        /// Where it listens, once it has bound its address.
        listen_addr: Option<SocketAddr>,
    },
    /// The lock file could not be used.
    #[error(transparent)]
    Lock(LockError),
}

fn describe(pid: Option<u32>, addr: Option<SocketAddr>) -> String {
    match (pid, addr) {
        (Some(p), Some(a)) => format!("pid {p}, listening on {a}"),
        (Some(p), None) => format!("pid {p}, still starting"),
        (None, Some(a)) => format!("listening on {a}"),
        (None, None) => "pid unknown".to_owned(),
    }
}

/// Claims the home for this daemon; held until the returned lock is dropped.
pub fn claim(home: &Path) -> Result<FileLock, InstanceError> {
    match FileLock::try_acquire(&home.join(SERVE_LOCK_FILE)) {
        Ok(lock) => Ok(lock),
        Err(LockError::Held { holder, .. }) => {
            let state =
                super::daemon::read_state(home).filter(|s| holder.is_none_or(|p| p == s.pid));
            Err(InstanceError::AlreadyRunning {
                home: home.to_path_buf(),
                pid: holder.or(state.as_ref().map(|s| s.pid)),
                listen_addr: state.map(|s| s.listen_addr),
            })
        }
        Err(e) => Err(InstanceError::Lock(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_claim_names_the_running_daemon() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = claim(dir.path()).expect("first claim");
        let err = claim(dir.path()).expect_err("second claim");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}, still starting", std::process::id())),
            "{msg}"
        );
        std::fs::write(
            super::super::daemon::state_path(dir.path()),
            format!(
                r#"{{"listen_addr":"127.0.0.1:7878","pid":{},"started_ms":1}}"#,
                std::process::id()
            ),
        )
        .expect("write state");
        let msg = claim(dir.path()).expect_err("still held").to_string();
        assert!(msg.contains("listening on 127.0.0.1:7878"), "{msg}");
        drop(held);
        claim(dir.path()).expect("free again");
    }
}
