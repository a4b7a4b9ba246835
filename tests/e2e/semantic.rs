//! The meaning tier: a question in other words finds its session, the
//! lexical tier alone does not, the switch in config and `--lexical` turn
//! it off, and it works with no network at all.

use std::path::Path;
use std::process::Command;

use crate::util::TestHome;

/// Writes one Claude Code session (alternating user and assistant lines).
fn session(home: &Path, id: &str, turns: &[&str]) {
    let dir = home.join(".claude/projects/-home-dev-acme");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut body = String::new();
    for (i, text) in turns.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let content = if role == "user" {
            serde_json::json!(text)
        } else {
            serde_json::json!([{"type": "text", "text": text}])
        };
        body.push_str(
            &serde_json::json!({
                "type": role,
                "uuid": format!("{id}-{i}"),
                "parentUuid": null,
                "sessionId": id,
                "timestamp": format!("2025-11-0{}T10:00:0{i}.000Z", 1 + i % 8),
                "cwd": "/home/dev/acme",
                "message": {"role": role, "content": content}
            })
            .to_string(),
        );
        body.push('\n');
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), body).expect("write session");
}

fn seeded() -> TestHome {
    let home = TestHome::empty();
    let h = home.path();
    session(
        h,
        "shell-startup",
        &[
            "each fresh tab in iTerm takes three seconds before I can type",
            "Your zsh profile loads nvm eagerly at start-up; lazy-load it so the prompt appears at once.",
        ],
    );
    session(
        h,
        "invoice-rounding",
        &[
            "the invoice totals are off by a cent sometimes",
            "We switched to banker's rounding for half cents, so totals match the ledger.",
        ],
    );
    session(
        h,
        "dependency-pin",
        &[
            "can we move to hyper 1.0 yet?",
            "Not yet: we pinned hyper to 0.14 because reqwest still depends on the old version.",
        ],
    );
    session(
        h,
        "macos-build",
        &[
            "the release build for macOS needs a new code signing certificate",
            "The new certificate goes in the CI secrets; the signing step reads it from there.",
        ],
    );
    home
}

const QUESTION: &str = "why does launching a console window lag";

fn first_session(hits: &[serde_json::Value]) -> Option<&str> {
    hits.first().and_then(|h| h["session_id"].as_str())
}

#[test]
fn a_question_in_other_words_finds_its_session_only_by_meaning() {
    let home = seeded();
    home.ok(&["index"]);
    let hits = home.search(QUESTION, &[]);
    assert_eq!(first_session(&hits), Some("shell-startup"), "{hits:#?}");
    let lexical = home.search(QUESTION, &["--lexical"]);
    assert_ne!(
        first_session(&lexical),
        Some("shell-startup"),
        "{lexical:#?}"
    );
    let q = "why are we holding back the http crate upgrade";
    assert_eq!(first_session(&home.search(q, &[])), Some("dependency-pin"));
    assert_ne!(
        first_session(&home.search(q, &["--lexical"])),
        Some("dependency-pin")
    );
    // Exact look-ups rank as the lexical tier ranks them.
    for q in ["hyper 0.14", "\"banker's rounding\""] {
        let a: Vec<_> = home
            .search(q, &[])
            .iter()
            .map(|h| h["record_id"].clone())
            .collect();
        let b: Vec<_> = home
            .search(q, &["--lexical"])
            .iter()
            .map(|h| h["record_id"].clone())
            .collect();
        assert_eq!(a, b, "{q}");
    }
    let status = home.json(&["status", "--json"]);
    assert_eq!(status["semantic"], true, "{status}");
    assert_eq!(status["vectors"]["with_vector"], 8, "{status}");
    assert_eq!(status["vectors"]["pending"], 0, "{status}");
}

#[test]
fn config_switch_turns_it_off_and_vectors_are_backfilled_when_on() {
    let home = seeded();
    let config = home.path().join(".config/cairn/config.toml");
    std::fs::create_dir_all(config.parent().expect("parent")).expect("mkdir");
    std::fs::write(&config, "[search]\nsemantic = false\n").expect("write config");
    home.ok(&["index"]);
    let status = home.json(&["status", "--json"]);
    assert_eq!(status["semantic"], false);
    assert_eq!(status["vectors"]["with_vector"], 0);
    assert_eq!(status["vectors"]["pending"], 8);
    assert!(home.ok(&["status"]).contains("semantic  off"));
    let off = home.search(QUESTION, &[]);
    assert_ne!(first_session(&off), Some("shell-startup"), "{off:#?}");
    // Back on: the records indexed meanwhile get their vectors.
    std::fs::remove_file(&config).expect("rm config");
    home.ok(&["index"]);
    let status = home.json(&["status", "--json"]);
    assert_eq!(status["vectors"]["with_vector"], 8, "{status}");
    let on = home.search(QUESTION, &[]);
    assert_eq!(first_session(&on), Some("shell-startup"), "{on:#?}");
}

/// Runs `cairn` in a fresh network namespace (no interface but a down
/// loopback): nothing can leave the machine, and any attempt would fail.
fn offline(home: &TestHome, args: &[&str]) -> Option<std::process::Output> {
    let probe = Command::new("unshare").args(["-rn", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: unshare -rn (user + network namespaces) is not available here");
        return None;
    }
    let c = home.cmd(args);
    let program = c.get_program().to_owned();
    let mut wrapped = Command::new("unshare");
    wrapped.arg("-rn").arg(program).args(c.get_args());
    wrapped.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    wrapped.current_dir(home.path());
    Some(wrapped.output().expect("run cairn offline"))
}

#[test]
fn indexing_and_searching_by_meaning_need_no_network() {
    let home = seeded();
    let Some(out) = offline(&home, &["index"]) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = offline(&home, &["search", "--json", "--", QUESTION]).expect("offline");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let hits = v["hits"].as_array().expect("hits");
    assert_eq!(first_session(hits), Some("shell-startup"), "{v:#}");
    // And no socket of any internet family is even opened on the way
    // (checked when strace is there to see).
    let traced = Command::new("strace")
        .args(["-f", "-e", "trace=socket,connect,sendto", "-o"])
        .arg(home.path().join("trace.txt"))
        .arg(crate::util::cairn_bin())
        .args(["search", "--no-refresh", "--json", "--", QUESTION])
        .env_clear()
        .env("HOME", home.path())
        .env("HOSTNAME", "testbox")
        .env("CAIRN_LOG", "error")
        .output();
    match traced {
        Ok(o) if o.status.success() => {
            let trace = std::fs::read_to_string(home.path().join("trace.txt")).expect("trace");
            assert!(
                !trace.contains("AF_INET"),
                "search opened an internet socket:\n{trace}"
            );
        }
        _ => eprintln!("SKIPPED: strace is not available; socket check not run"),
    }
}
