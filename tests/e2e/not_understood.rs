//! Stores found but not understood are never silent: `cairn sources`,
//! `cairn status` and `cairn doctor` name them (text and `--json`), and a
//! Codex rollout compressed in place is read without losing or doubling
//! its records.

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

/// Codex rewrites a week-old rollout as `.jsonl.zst` and deletes the
/// `.jsonl`: the session keeps exactly its records and stays searchable.
#[test]
fn a_codex_rollout_compressed_in_place_keeps_its_records_once() {
    let home = TestHome::empty();
    let day = home.path().join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&day).expect("mkdir");
    let id = "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b";
    let name = format!("rollout-2026-11-20T10-00-00-{id}.jsonl");
    let lines = [
        serde_json::json!({"timestamp": "2026-11-20T10:00:00.000Z", "type": "session_meta",
            "payload": {"id": id, "timestamp": "2026-11-20T10:00:00.000Z", "cwd": "/home/dev/mill"}}),
        serde_json::json!({"timestamp": "2026-11-20T10:00:01.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "why does the heron scheduler stall?"}]}}),
        serde_json::json!({"timestamp": "2026-11-20T10:00:02.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "The heron scheduler waits on a lock."}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let plain = day.join(&name);
    std::fs::write(&plain, &text).expect("write");
    home.ok(&["index", "--quiet"]);
    let before = home.json(&["status", "--json"]);
    assert_eq!(before["records"], 2, "{before:#}");
    let hits = |h: &TestHome| h.search("heron scheduler", &["--no-refresh"]).len();
    assert_eq!(hits(&home), 1);

    let zst = day.join(format!("{name}.zst"));
    std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).expect("zstd")).expect("write");
    std::fs::remove_file(&plain).expect("rm");
    home.ok(&["index", "--quiet"]);
    let after = home.json(&["status", "--json"]);
    assert_eq!(after["records"], 2, "{after:#}");
    assert_eq!(after["sessions"], 1);
    assert_eq!(hits(&home), 1);
    assert_eq!(after["not_understood"], 0, "{after:#}");
    let sources = home.json(&["sources", "--json"]);
    let listed = sources["sources"].as_array().expect("sources");
    assert!(
        listed
            .iter()
            .any(|s| s["path"] == zst.display().to_string() && s["reader"] == "whole"),
        "{sources:#}"
    );
    let show = home.ok(&["show", id, "--no-pager"]);
    assert!(
        show.contains("The heron scheduler waits on a lock."),
        "{show}"
    );
}

/// The agents read since issue 54, one row each: (agent, its history
/// folder under the home, where a future release's session lands). Each
/// folder gets an entry in a layout no reader knows; `cairn sources`
/// names it under that agent as found, not understood, with the release
/// its manifest says.
const NEW_AGENT_FOLDERS: &[(&str, &str)] = &[
    ("nanocoder", ".local/share/nanocoder/sessions"),
    ("gptme", ".local/share/gptme/logs"),
    ("code-puppy", ".code_puppy/autosaves"),
    (
        "vscode",
        ".config/Code/User/globalStorage/emptyWindowChatSessions",
    ),
    ("zed", ".local/share/zed/threads"),
];

#[test]
fn each_new_agent_reports_a_folder_in_an_unknown_layout() {
    for (agent, folder) in NEW_AGENT_FOLDERS {
        let home = TestHome::empty();
        let dir = home.path().join(folder);
        let entry = dir.join("zz-next-release");
        std::fs::create_dir_all(entry.join("parts")).expect("mkdir");
        std::fs::write(entry.join("parts/0001.bin"), b"\x00\x01").expect("write");
        std::fs::write(entry.join("manifest.json"), br#"{"version": "9.1.0"}"#).expect("write");
        let sources = home.json(&["sources", "--json"]);
        let row = sources["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|a| a["agent"] == *agent)
            .unwrap_or_else(|| panic!("{agent} not listed: {sources:#}"))
            .clone();
        let unread = row["unreadable"].as_array().expect("unreadable");
        assert_eq!(unread.len(), 1, "{agent}: {row:#}");
        assert_eq!(unread[0]["kind"], "not_understood", "{agent}");
        assert_eq!(unread[0]["path"], dir.display().to_string(), "{agent}");
        assert_eq!(
            unread[0]["reason"], "1 entry in a layout this cairn does not read: zz-next-release/",
            "{agent}"
        );
        assert_eq!(unread[0]["release"], "9.1.0", "{agent}");
    }
}

/// Zed's database without the table its reader knows is reported as not
/// understood once read, with its schema version.
#[test]
fn a_zed_database_of_an_unknown_schema_is_not_understood() {
    let home = TestHome::empty();
    let dir = home.path().join(".local/share/zed/threads");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let db = dir.join("threads.db");
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute_batch("CREATE TABLE threads_v2 (id TEXT); PRAGMA user_version = 4;")
        .expect("schema");
    let _ = home.run(&["index", "--quiet"]);
    let sources = home.json(&["sources", "--json"]);
    let store = sources["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["path"] == db.display().to_string())
        .expect("zed db listed")
        .clone();
    let why = store["not_understood"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("found, not understood") && why.contains("schema version 4"),
        "{store:#}"
    );
    assert_eq!(store["agent"], "zed", "{store:#}");
}
