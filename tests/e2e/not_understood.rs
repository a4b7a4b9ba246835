//! Stores found but not understood are never silent: `cairn sources`,
//! `cairn status` and `cairn doctor` name them (text and `--json`).

use crate::util::TestHome;

/// Plants a project folder of a Claude Code layout no reader knows (a
/// future release's, its version in a manifest) and a goose database of
/// an unknown schema; returns their paths.
fn plant(home: &TestHome) -> (std::path::PathBuf, std::path::PathBuf) {
    let proj = home.path().join(".claude/projects/-home-dev-app");
    std::fs::create_dir_all(proj.join("v3")).expect("mkdir");
    std::fs::write(proj.join("v3/segment-0001.bin"), b"\x00\x01\x02").expect("write");
    std::fs::write(proj.join("v3/manifest.json"), br#"{"version": "3.0.0"}"#).expect("write");
    let goose = home.path().join(".local/share/goose/sessions");
    std::fs::create_dir_all(&goose).expect("mkdir");
    let db = goose.join("sessions.db");
    // In place of the seeded goose database.
    if db.exists() {
        std::fs::remove_file(&db).expect("rm");
    }
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute_batch("CREATE TABLE threads_v2 (id TEXT); PRAGMA user_version = 7;")
        .expect("schema");
    (proj, db)
}

#[test]
fn stores_not_understood_are_named_by_sources_status_and_doctor() {
    let home = TestHome::seeded();
    let (proj, db) = plant(&home);
    // Before any pass: the folder is already reported.
    let sources = home.json(&["sources", "--json"]);
    let claude = sources["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["agent"] == "claude-code")
        .expect("claude-code")
        .clone();
    let unread = claude["unreadable"].as_array().expect("unreadable");
    assert_eq!(unread.len(), 1, "{claude:#}");
    assert_eq!(unread[0]["kind"], "not_understood");
    assert_eq!(
        unread[0]["path"],
        proj.parent().expect("projects").display().to_string()
    );
    assert_eq!(
        unread[0]["reason"],
        "1 entry in a layout this cairn does not read: -home-dev-app/"
    );
    assert_eq!(unread[0]["release"], "3.0.0");
    assert_eq!(claude["not_understood"], 1);
    // The seeded sessions beside it are still read.
    assert!(claude["stores"].as_u64() > Some(0), "{claude:#}");

    let _ = home.run(&["index", "--quiet"]);
    let sources = home.json(&["sources", "--json"]);
    let goose_store = sources["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["path"] == db.display().to_string())
        .expect("goose db listed")
        .clone();
    let why = goose_store["not_understood"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("found, not understood")
            && why.contains("threads_v2")
            && why.contains("schema version 7"),
        "{goose_store:#}"
    );
    let text = home.ok(&["sources"]);
    assert!(
        text.contains(
            "[found, not understood: 1 entry in a layout this cairn does not read: -home-dev-app/, release 3.0.0]"
        ),
        "{text}"
    );
    assert!(
        text.contains("[found, not understood: a database without goose's"),
        "{text}"
    );

    let status = home.json(&["status", "--json"]);
    assert_eq!(status["not_understood"], 2, "{status:#}");
    let listed = status["not_understood_stores"].as_array().expect("list");
    let agents: Vec<&str> = listed.iter().filter_map(|n| n["agent"].as_str()).collect();
    assert_eq!(agents, ["claude-code", "goose"], "{status:#}");
    assert_eq!(listed[0]["release"], "3.0.0");
    let text = home.ok(&["status"]);
    assert!(
        text.contains("sources   claude-code: found, not understood: 1 entry in a layout"),
        "{text}"
    );

    let doctor = home.run(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("doctor json");
    let warned: Vec<&serde_json::Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["area"] == "sources")
        .collect();
    assert_eq!(warned.len(), 2, "{report:#}");
    assert!(
        warned
            .iter()
            .all(|c| c["level"] == "warn" && c["fix"].is_string())
    );
    assert!(
        warned[0]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("release 3.0.0")),
        "{report:#}"
    );

    // Once the layout is gone, nothing is reported.
    std::fs::remove_dir_all(&proj).expect("rm");
    std::fs::remove_file(&db).expect("rm");
    let status = home.json(&["status", "--json"]);
    assert_eq!(status["not_understood"], 0, "{status:#}");
}
