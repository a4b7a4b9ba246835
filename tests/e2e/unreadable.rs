//! A project folder the user cannot read is reported by `cairn sources`
//! and `cairn status` like an unreadable file, never skipped silently; once
//! readable again its sessions are indexed.
//!
//! Tests run as root in CI, where mode 000 does not stop reads: there cairn
//! runs through `setpriv` without the two capabilities that bypass file
//! permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the mode bits
//! apply to it as to any user. Without `setpriv` the test says so loudly
//! and skips.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use crate::util::TestHome;

/// A `cairn` command that cannot bypass file permissions, or `None` when
/// that cannot be arranged (root without `setpriv`).
fn unprivileged(home: &TestHome, args: &[&str]) -> Option<Command> {
    let probe = home.path().join(".uid-probe");
    std::fs::write(&probe, b"").expect("probe");
    let root = std::fs::metadata(&probe).expect("stat").uid() == 0;
    std::fs::remove_file(&probe).expect("rm probe");
    let base = home.cmd(args);
    if !root {
        return Some(base);
    }
    let has_setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_setpriv {
        return None;
    }
    let mut c = Command::new("setpriv");
    c.arg("--bounding-set=-dac_override,-dac_read_search")
        .arg("--")
        .arg(base.get_program())
        .args(base.get_args())
        .env_clear()
        .envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(home.path());
    Some(c)
}

fn run_json(cmd: Option<Command>) -> Option<serde_json::Value> {
    let out = cmd?.output().expect("run cairn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}

#[test]
fn unreadable_project_folder_is_reported_then_indexed_when_readable() {
    let home = TestHome::seeded();
    let dir = home.path().join(".claude/projects/-home-dev-locked");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let line = serde_json::json!({
        "type": "user", "uuid": "u1", "parentUuid": null,
        "sessionId": "locked-session-1", "timestamp": "2025-11-04T10:00:00.000Z",
        "cwd": "/home/dev/locked",
        "message": {"role": "user", "content": "the kestrel migration runs at dawn"}
    });
    std::fs::write(dir.join("locked-session-1.jsonl"), format!("{line}\n")).expect("write");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).expect("chmod 000");

    let Some(mut index) = unprivileged(&home, &["index", "--quiet"]) else {
        eprintln!(
            "SKIPPED unreadable_project_folder_is_reported: running as root without setpriv, \
             so a mode-000 folder cannot be made unreadable to cairn"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        return;
    };
    let out = index.output().expect("index");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let sources = run_json(unprivileged(&home, &["sources", "--json"])).expect("sources");
    let listed: Vec<&serde_json::Value> = sources["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .filter(|s| s["path"] == dir.display().to_string())
        .collect();
    assert_eq!(listed.len(), 1, "{sources:#}");
    assert_eq!(listed[0]["agent"], "claude-code");
    let err = listed[0]["error"].as_str().unwrap_or("");
    assert!(
        err.contains("cannot list folder") && err.contains("ermission denied"),
        "{err}"
    );
    let human = unprivileged(&home, &["sources"])
        .expect("cmd")
        .output()
        .expect("sources");
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("-home-dev-locked") && human.contains("[error: cannot list folder"),
        "{human}"
    );

    let status = run_json(unprivileged(&home, &["status", "--json"])).expect("status");
    assert!(
        status["agents"]["claude-code"]["failing"].as_u64() >= Some(1),
        "{status:#}"
    );
    let human = unprivileged(&home, &["status"])
        .expect("cmd")
        .output()
        .expect("status");
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("failed on the last pass"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );

    // Readable again: the session inside is indexed and the error is gone.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.ok(&["index", "--quiet"]);
    assert_eq!(home.search("kestrel migration", &["--no-refresh"]).len(), 1);
    let sources = home.json(&["sources", "--json"]);
    assert!(
        sources["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .all(|s| s["path"] != dir.display().to_string()),
        "the folder is listed after it became readable: {sources:#}"
    );
    assert_eq!(
        home.json(&["status", "--json"])["agents"]["claude-code"]["failing"],
        0
    );
    assert!(
        sources["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .filter(|s| s["present"] == true)
            .all(|s| s["error"].is_null()),
        "{sources:#}"
    );
}
