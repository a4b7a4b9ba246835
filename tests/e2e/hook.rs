//! `cairn hook session-start`: Claude Code's hook response on a warm index,
//! and silence with exit code 0 on every failure (fail open).

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::TestHome;

fn start_input(cwd: &str) -> String {
    json!({
        "session_id": "00000000-new-session",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": cwd,
        "hook_event_name": "SessionStart",
        "source": "startup",
    })
    .to_string()
}

/// Generous, so a loaded test machine cannot turn a digest into silence.
const TEST_BUDGET_MS: &str = "20000";

fn hook(home: &TestHome, stdin: &[u8]) -> Output {
    let mut child = home
        .cmd(&["hook", "session-start"])
        .env("CAIRN_HOOK_BUDGET_MS", TEST_BUDGET_MS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cairn hook");
    {
        let mut input = child.stdin.take().expect("stdin");
        // The hook may stop reading early; a closed pipe is fine.
        let _ = input.write_all(stdin);
    }
    child.wait_with_output().expect("cairn hook runs")
}

fn assert_silent(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: exit {}", out.status);
    assert!(
        out.stdout.is_empty(),
        "{what}: printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn hook_prints_the_project_digest_on_a_warm_index() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let out = hook(&home, start_input("/home/dev/acme").as_bytes());
    assert!(out.status.success(), "exit {}", out.status);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("additionalContext is a string");
    assert!(
        ctx.len() <= cairn_node::mcp::DIGEST_MAX,
        "{} bytes",
        ctx.len()
    );
    assert!(ctx.contains("pinned hyper to 0.14"), "{ctx}");
    assert!(
        ctx.starts_with(r#"<recalled_memory source="cairn" untrusted="true">"#),
        "{ctx}"
    );
    assert!(ctx.ends_with("</recalled_memory>"), "{ctx}");
    // Only this project: the widgets sessions stay out.
    assert!(!ctx.contains("/home/dev/widgets"), "{ctx}");
}

#[test]
fn hook_includes_notes_for_the_project_and_skips_other_projects() {
    let home = TestHome::seeded();
    home.ok(&[
        "remember",
        "--project",
        "/home/dev/acme",
        "we decided releases are cut on tuesdays",
    ]);
    let out = hook(&home, start_input("/home/dev/acme").as_bytes());
    let v: Value = serde_json::from_slice(&out.stdout).expect("hook JSON");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(ctx.contains("releases are cut on tuesdays"), "{ctx}");
    assert_silent(
        &hook(&home, start_input("/home/dev/nothing-here").as_bytes()),
        "unknown project",
    );
}

#[test]
fn hook_is_silent_without_an_index_and_creates_none() {
    let home = TestHome::seeded();
    assert_silent(
        &hook(&home, start_input("/home/dev/acme").as_bytes()),
        "no index",
    );
    assert!(
        !home.cairn_home().join("cairn.db").exists(),
        "the hook must never create or build the index"
    );
}

#[test]
fn hook_is_silent_with_a_corrupt_database() {
    let home = TestHome::seeded();
    std::fs::create_dir_all(home.cairn_home()).expect("mkdir");
    std::fs::write(
        home.cairn_home().join("cairn.db"),
        b"this is not sqlite at all, sorry",
    )
    .expect("write garbage db");
    assert_silent(
        &hook(&home, start_input("/home/dev/acme").as_bytes()),
        "corrupt database",
    );
}

#[test]
fn hook_is_silent_with_garbage_on_stdin() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    for input in [
        &b"not json at all"[..],
        b"",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        br#"{"cwd": 17}"#,
        br#"{"hook_event_name": "Stop", "cwd": "/home/dev/acme"}"#,
    ] {
        assert_silent(
            &hook(&home, input),
            &format!("stdin {:?}", String::from_utf8_lossy(input)),
        );
    }
}

#[test]
fn hook_gives_up_silently_when_stdin_never_ends() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let mut child = home
        .cmd(&["hook", "session-start"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cairn hook");
    // Keep stdin open and unwritten: the hook must still finish on its own.
    let stdin = child.stdin.take().expect("stdin");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("poll the hook") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the hook did not give up on a silent stdin"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(stdin);
    let out = child.wait_with_output().expect("collect output");
    assert!(status.success(), "exit {status}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
