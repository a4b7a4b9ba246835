//! One `cairn serve` per home. The daemon holds an exclusive lock on
//! `serve.lock` in the node's home for as long as it runs; the operating
//! system releases it when the process ends, even by `kill -9`, so a crash
//! never blocks the next start. A second daemon is refused before it binds
//! a port or touches `serve.json`, and is told which one is running.
//!
//! Also reads `serve.json`, where a running daemon says where it listens
//! (the daemon writes it): pairing, `cairn status`, `cairn doctor`, the MCP
//! server and the browse page ask here whether a daemon serves the home.
//! And `index-pass.json`, where it says what its last indexing pass did:
//! `cairn index` asks it for a pass (by writing `index.request`, a file
//! the daemon watches) and shows that pass instead of running one of its
//! own beside it.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::indexer::IndexReport;
use crate::lock::{FileLock, LockError};

/// The lock file in the node's home.
pub const SERVE_LOCK_FILE: &str = "serve.lock";
/// File in the node's home that says where a running daemon listens.
pub const SERVE_STATE_FILE: &str = "serve.json";
/// File in the node's home where a running daemon records its last indexing pass.
pub const LAST_PASS_FILE: &str = "index-pass.json";
/// File in the node's home the daemon watches: writing it asks for a pass now.
pub const PASS_REQUEST_FILE: &str = "index.request";
/// Largest state file read.
const MAX_STATE_BYTES: u64 = 64 * 1024;
/// Largest last-pass file read (its list of failed stores may be long).
const MAX_PASS_BYTES: u64 = 4 << 20;

/// What a daemon's last indexing pass did, as written to `index-pass.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LastPass {
    /// The daemon's process id.
    pub pid: u32,
    /// When the pass started (Unix ms).
    pub started_ms: i64,
    /// When the pass finished (Unix ms).
    pub finished_ms: i64,
    /// How long it took (ms).
    pub took_ms: u64,
    /// What it did.
    pub report: IndexReport,
}

/// Records the daemon's last pass in the home. Written to a temporary file
/// and renamed over the old one, so a reader sees one pass or the other;
/// not synced: it only informs, and a crash loses nothing that matters.
pub fn write_last_pass(home: &Path, pass: &LastPass) -> std::io::Result<()> {
    use std::io::Write;
    let json = serde_json::to_vec(pass).map_err(std::io::Error::other)?;
    let tmp = home.join(format!(".{LAST_PASS_FILE}.{}", std::process::id()));
    let written = crate::home::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&json))
        .and_then(|()| std::fs::rename(&tmp, home.join(LAST_PASS_FILE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates the request file (empty, 0600) if it is missing, so the daemon
/// can watch it from the start.
pub fn prepare_pass_requests(home: &Path) -> std::io::Result<()> {
    crate::home::private_file()
        .write(true)
        .create(true)
        .truncate(false)
        .open(home.join(PASS_REQUEST_FILE))
        .map(drop)
}

/// Asks the daemon serving `home` for an indexing pass now: rewrites the
/// request file in place (the daemon watches it; its polling covers it
/// when it cannot watch). Returns when the request was made (Unix ms): a
/// pass that started at or after it has read everything written before.
/// Fails when the file is missing: a daemon that does not take requests.
pub fn request_pass(home: &Path, now_ms: i64) -> std::io::Result<i64> {
    use std::io::Write;
    let mut f = crate::home::private_file()
        .write(true)
        .truncate(true)
        .open(home.join(PASS_REQUEST_FILE))?;
    f.write_all(format!("{now_ms}\n").as_bytes())?;
    Ok(now_ms)
}

/// The last pass recorded by the daemon `state` describes (`None` when it
/// has not finished one yet, or the file is unreadable or malformed).
pub fn last_pass(home: &Path, state: &ServeState) -> Option<LastPass> {
    let f = std::fs::File::open(home.join(LAST_PASS_FILE)).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_PASS_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice::<LastPass>(&bytes)
        .ok()
        .filter(|p| p.pid == state.pid)
}

/// Where a running daemon listens, as written to `serve.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeState {
    /// The bound address (the real port when asked for port 0).
    pub listen_addr: SocketAddr,
    /// The daemon's process id.
    pub pid: u32,
    /// When it started (Unix ms).
    pub started_ms: i64,
}

/// The state file of the node with this home.
pub fn state_path(home: &Path) -> PathBuf {
    home.join(SERVE_STATE_FILE)
}

/// Reads `serve.json` (`None` if absent, unreadable or malformed).
pub fn read_state(home: &Path) -> Option<ServeState> {
    let f = std::fs::File::open(state_path(home)).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_STATE_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Reads `serve.json` and keeps it only if its process still runs (Linux:
/// `/proc/PID`; elsewhere the file is trusted).
pub fn running_state(home: &Path) -> Option<ServeState> {
    let st = read_state(home)?;
    if cfg!(target_os = "linux") && !Path::new(&format!("/proc/{}", st.pid)).exists() {
        return None;
    }
    Some(st)
}

/// Whether a `cairn serve` daemon runs for this home (and so keeps its
/// index fresh): `serve.json` names a live process.
pub fn is_serving(home: &Path) -> bool {
    running_state(home).is_some()
}

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
            let state = read_state(home).filter(|s| holder.is_none_or(|p| p == s.pid));
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
    fn pass_requests_need_the_daemons_file_and_last_passes_name_their_daemon() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        // No file: the daemon does not take requests.
        assert!(request_pass(home, 5).is_err());
        prepare_pass_requests(home).expect("prepare");
        assert_eq!(request_pass(home, 7).expect("request"), 7);
        assert_eq!(
            std::fs::read_to_string(home.join(PASS_REQUEST_FILE)).expect("read"),
            "7\n"
        );
        let state = ServeState {
            listen_addr: "127.0.0.1:7878".parse().expect("addr"),
            pid: 42,
            started_ms: 1,
        };
        assert!(last_pass(home, &state).is_none());
        let pass = LastPass {
            pid: 42,
            started_ms: 8,
            finished_ms: 9,
            took_ms: 1,
            report: IndexReport {
                stores: 3,
                ..IndexReport::default()
            },
        };
        write_last_pass(home, &pass).expect("write");
        let read = last_pass(home, &state).expect("read back");
        assert_eq!((read.started_ms, read.report.stores), (8, 3));
        // Another daemon's pass (an earlier run) is not this one's.
        let other = ServeState { pid: 43, ..state };
        assert!(last_pass(home, &other).is_none());
    }

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
            state_path(dir.path()),
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
