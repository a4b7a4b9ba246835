//! The planted-secret matrix: every kind of fake secret in
//! `fixtures/planted-kinds.json`, planted in every position a record can
//! carry it (user text, assistant text, tool call arguments JSON-escaped,
//! tool output inside the elided middle and in the kept tail, notes), then
//! indexed by the real binary. Nothing may be left in any file under the
//! node's home nor in `show` / `search` output. Prints the kinds × positions
//! table of leaks (the goal, asserted, is none). The position "received
//! from a peer" is covered in the node's store tests with the same kinds.

use std::fmt::Write as _;
use std::path::Path;

use crate::util::{TestHome, all_bytes_under, contains};

struct Planted {
    kind: String,
    text: String,
    secrets: Vec<String>,
}

fn planted_kinds() -> Vec<Planted> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/planted-kinds.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p).expect("read planted-kinds.json")).expect("json");
    v["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| Planted {
            kind: k["kind"].as_str().expect("kind").to_owned(),
            text: k["text"].as_str().expect("text").to_owned(),
            secrets: k["secrets"]
                .as_array()
                .expect("secrets")
                .iter()
                .map(|s| s.as_str().expect("secret").to_owned())
                .collect(),
        })
        .collect()
}

const SESSION: &str = "5e3c1a2b-7d4f-4e6a-9b8c-0d1e2f3a4b5c";

fn line(uuid: &str, kind: &str, message: serde_json::Value) -> String {
    serde_json::json!({
        "type": kind,
        "uuid": uuid,
        "parentUuid": null,
        "sessionId": SESSION,
        "timestamp": "2026-01-05T10:00:00.000Z",
        "cwd": "/home/dev/vault",
        "message": message,
    })
    .to_string()
}

/// A long build log: far over the tool-output cap on its own.
fn log_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("step {i:03}: compiled module_{i} ok\n"))
        .collect()
}

/// The transcript lines planting `text` in `position` (record `i`).
fn plant(position: &str, i: usize, text: &str) -> Vec<String> {
    let id = format!("toolu_{i:04}");
    match position {
        "user text" => vec![line(
            &format!("u{i}"),
            "user",
            serde_json::json!({"role": "user", "content": format!("here it is:\n{text}")}),
        )],
        "assistant text" => vec![line(
            &format!("a{i}"),
            "assistant",
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": format!("I will use\n{text}\nnext")}]}),
        )],
        "tool call (JSON-escaped)" => vec![line(
            &format!("c{i}"),
            "assistant",
            serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "mcp__vault__store", "input": {"path": "secret/ci", "value": text}}]}),
        )],
        "tool output (elided middle)" | "tool output (kept tail)" => {
            let output = if position.ends_with("middle)") {
                format!("{}{text}\n{}", log_lines(200), log_lines(120))
            } else {
                format!("{}{text}\n", log_lines(200))
            };
            vec![
                line(
                    &format!("c{i}"),
                    "assistant",
                    serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "make deploy"}}]}),
                ),
                line(
                    &format!("r{i}"),
                    "user",
                    serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
                ),
            ]
        }
        other => panic!("unknown position {other}"),
    }
}

/// Every leak of `secrets` in the home's files and in `outputs`.
fn leaks(home: &TestHome, outputs: &[String], secrets: &[String]) -> usize {
    let files = all_bytes_under(&home.cairn_home());
    secrets
        .iter()
        .filter(|s| {
            files.iter().any(|(_, b)| contains(b, s.as_bytes()))
                || outputs.iter().any(|o| o.contains(s.as_str()))
        })
        .count()
}

#[test]
fn planted_secret_matrix_leaks_nothing() {
    let kinds = planted_kinds();
    assert!(kinds.len() >= 30, "{} kinds", kinds.len());
    let positions = [
        "user text",
        "assistant text",
        "tool call (JSON-escaped)",
        "tool output (elided middle)",
        "tool output (kept tail)",
        "note",
    ];
    // leaks[position][kind]
    let mut table = vec![vec![0usize; kinds.len()]; positions.len()];
    for (p, position) in positions.iter().enumerate() {
        // One home per position, so every leak is attributed to its position.
        let home = TestHome::empty();
        let mut outputs = Vec::new();
        if *position == "note" {
            for k in &kinds {
                outputs.push(home.ok(&[
                    "remember",
                    "--project",
                    "/home/dev/vault",
                    &format!("deploy notes:\n{}", k.text),
                ]));
            }
        } else {
            let dir = home.path().join(".claude/projects/-home-dev-vault");
            std::fs::create_dir_all(&dir).expect("mkdir");
            let mut jsonl = String::new();
            for (i, k) in kinds.iter().enumerate() {
                for l in plant(position, i, &k.text) {
                    jsonl.push_str(&l);
                    jsonl.push('\n');
                }
            }
            std::fs::write(dir.join(format!("{SESSION}.jsonl")), jsonl).expect("write");
            outputs.push(home.ok(&["index", "--quiet"]));
            outputs.push(home.ok(&["show", "--no-pager", "--json", SESSION]));
        }
        for q in ["password", "key", "token", "PRIVATE KEY", "secret", "login"] {
            outputs.push(home.search_out(&[
                "search",
                "--json",
                "--no-refresh",
                "-n",
                "50",
                "--",
                q,
            ]));
        }
        let status = home.json(&["status", "--json"]);
        assert!(
            status["records"].as_u64().is_some_and(|n| n > 0),
            "{status}"
        );
        for (k, planted) in kinds.iter().enumerate() {
            table[p][k] = leaks(&home, &outputs, &planted.secrets);
        }
    }
    let mut report =
        String::from("planted secrets leaked (distinct substrings found), kind x position:\n");
    let _ = write!(report, "{:<24}", "kind");
    for position in &positions {
        let _ = write!(report, " | {position}");
    }
    report.push('\n');
    for (k, planted) in kinds.iter().enumerate() {
        let _ = write!(report, "{:<24}", planted.kind);
        for (p, position) in positions.iter().enumerate() {
            let _ = write!(report, " | {:>width$}", table[p][k], width = position.len());
        }
        report.push('\n');
    }
    let total: usize = table.iter().flatten().sum();
    let _ = writeln!(
        report,
        "total leaks: {total} ({} kinds x {} positions)",
        kinds.len(),
        positions.len()
    );
    eprintln!("{report}");
    assert_eq!(total, 0, "{report}");
}
