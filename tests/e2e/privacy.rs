//! The node's home is private whatever the umask: the folder 0700, every
//! file 0600 (database, WAL, shared memory, notes, key, serve state and
//! lock); a loose home from an older build is tightened on start, logged,
//! and reported by `cairn status`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::TestHome;

/// `cairn ARGS` run under umask 000 (through `sh`, which sets it and
/// execs cairn with the same environment).
fn under_umask_000(home: &TestHome, args: &[&str]) -> Command {
    let base = home.cmd(args);
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(base.get_program())
        .args(base.get_args())
        .env_clear()
        .envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(home.path());
    c
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777
}

/// Every path under `dir` with its mode. A file the running daemon
/// removes between the listing and its stat (a temporary file it renames
/// into place) is left out: it no longer exists to be checked.
fn modes_under(dir: &Path) -> Vec<(String, u32)> {
    let mut out = vec![(dir.display().to_string(), mode(dir))];
    for e in std::fs::read_dir(dir).expect("ls").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(modes_under(&p));
            continue;
        }
        match std::fs::symlink_metadata(&p) {
            Ok(m) => out.push((p.display().to_string(), m.permissions().mode() & 0o777)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("stat {}: {e}", p.display()),
        }
    }
    out
}

#[test]
fn home_is_private_under_a_permissive_umask() {
    let home = TestHome::seeded();
    let run = |args: &[&str]| {
        let out = under_umask_000(&home, args).output().expect("run cairn");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["index", "--quiet"]);
    run(&["remember", "--project", "/p", "a private fact"]);
    // The daemon writes serve.json and holds serve.lock while it runs.
    let mut serve = under_umask_000(&home, &["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let state = home.cairn_home().join("serve.json");
    let start = Instant::now();
    while !state.exists() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let modes = modes_under(&home.cairn_home());
    let _ = serve.kill();
    let _ = serve.wait();
    let names: Vec<&str> = modes
        .iter()
        .filter_map(|(p, _)| Path::new(p).file_name()?.to_str())
        .collect();
    for want in [
        "cairn.db",
        "cairn.db-wal",
        "cairn.db-shm",
        "notes.jsonl",
        "identity.key",
        "serve.json",
        "serve.lock",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for (path, m) in &modes {
        let want = if Path::new(path).is_dir() {
            0o700
        } else {
            0o600
        };
        assert_eq!(*m, want, "{path} is {m:o}");
    }
}

#[test]
fn a_loose_home_is_tightened_logged_and_reported() {
    let home = TestHome::empty();
    home.ok(&["remember", "a fact"]);
    let dir = home.cairn_home();
    // What an older build left under umask 022.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for (p, _) in modes_under(&dir).into_iter().skip(1) {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = home
        .cmd(&["status", "--json"])
        .env("CAIRN_LOG", "warn")
        .output()
        .expect("status");
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("tightened permissions"), "{log}");
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let tightened = st["tightened"].as_array().expect("tightened");
    assert!(
        tightened
            .iter()
            .any(|e| e["path"] == dir.display().to_string() && e["mode"] == 0o755),
        "{st}"
    );
    assert!(
        tightened.iter().any(|e| e["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("notes.jsonl"))),
        "{st}"
    );
    assert_eq!(st["private"], true, "{st}");
    for (path, m) in modes_under(&dir) {
        assert_eq!(m & 0o077, 0, "{path} is still {m:o}");
    }
    // The next start has nothing to do, and says the home is private.
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["tightened"], serde_json::json!([]));
    assert_eq!(st["exposed"], serde_json::json!([]));
    let human = home.ok(&["status"]);
    assert!(human.contains("readable only by you"), "{human}");
}
