//! The planted-secret matrix: every kind of fake secret in
//! `fixtures/planted-kinds.json`, planted in every position a record can
//! carry it (user text, assistant text, tool call arguments JSON-escaped,
//! tool output inside the elided middle and in the kept tail, notes, the
//! session id, a sub-agent's parent session id, the project path and the
//! files a tool call names), then indexed by the real binary. Nothing may
//! be left in any file under the node's home, among the full-text index's
//! terms, nor in `show` / `search` JSON or the MCP server's answers.
//! Prints the kinds x positions table of leaks (the goal, asserted, is
//! none). The position "a peer's batch" is covered in the node with the
//! same kinds (the AWS and prose forms included): by the store test
//! `every_planted_kind_received_from_a_peer_is_redacted_before_storage`
//! (every field, text past the cut) and over real QUIC by the hostile-peer
//! test `secrets_in_every_field_of_a_peer_batch_are_never_stored_and_secret_forgets_are_refused`
//! (every field and every role, checked in the database bytes, every
//! table cell, search hits and shown sessions); the agents' own formats
//! in [`recorded_formats_leak_nothing`].

use std::fmt::Write as _;
use std::path::Path;

use crate::util::{TestHome, all_bytes_under, contains};

use serde_json::json;

pub(crate) struct Planted {
    pub(crate) kind: String,
    pub(crate) text: String,
    pub(crate) secrets: Vec<String>,
}

pub(crate) fn planted_kinds() -> Vec<Planted> {
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
    line_in(SESSION, "/home/dev/vault", uuid, kind, message)
}

/// A transcript line of session `session` run in `cwd`.
fn line_in(session: &str, cwd: &str, uuid: &str, kind: &str, message: serde_json::Value) -> String {
    json!({
        "type": kind,
        "uuid": uuid,
        "parentUuid": null,
        "sessionId": session,
        "timestamp": "2026-01-05T10:00:00.000Z",
        "cwd": cwd,
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
        "session id" => vec![line_in(
            &format!("s{i} {text}"),
            "/home/dev/vault",
            &format!("u{i}"),
            "user",
            json!({"role": "user", "content": format!("plain message number {i}")}),
        )],
        "project and files" => vec![line_in(
            SESSION,
            &format!("/home/dev/{text}/app"),
            &format!("c{i}"),
            "assistant",
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Edit", "input": {"file_path": format!("/home/dev/app/{text}.rs"), "old_string": "a", "new_string": "b"}}]}),
        )],
        other => panic!("unknown position {other}"),
    }
}

/// The sub-agent transcripts planting each kind's text in the parent
/// session id they carry (`<session>/subagents/agent-*.jsonl`).
fn plant_parents(dir: &Path, kinds: &[Planted]) {
    let sub = dir.join(SESSION).join("subagents");
    std::fs::create_dir_all(&sub).expect("mkdir");
    for (i, k) in kinds.iter().enumerate() {
        let l = line_in(
            &format!("p{i} {}", k.text),
            "/home/dev/vault",
            &format!("u{i}"),
            "user",
            json!({"role": "user", "content": format!("plain sub-agent message number {i}")}),
        );
        std::fs::write(sub.join(format!("agent-k{i:03}.jsonl")), l + "\n").expect("write");
    }
}

/// Every term of both full-text indexes of the database at `db`.
fn full_text_terms(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the database read-only");
    conn.execute_batch(
        "CREATE VIRTUAL TABLE temp.stem_vocab USING fts5vocab(main, fts_stem, row);",
    )
    .expect("stem vocabulary");
    let mut terms = Vec::new();
    for table in ["fts_vocab", "temp.stem_vocab"] {
        let mut q = conn
            .prepare(&format!("SELECT term FROM {table}"))
            .expect("vocabulary");
        let rows = q.query_map([], |r| r.get::<_, String>(0)).expect("terms");
        terms.extend(rows.map(|t| t.expect("term")));
    }
    terms
}

/// What a home holds and answers, for leaks to be looked for in.
struct Seen {
    files: Vec<Vec<u8>>,
    terms: Vec<String>,
    outputs: Vec<String>,
}

impl Seen {
    fn of(home: &TestHome, outputs: Vec<String>) -> Seen {
        Seen {
            files: all_bytes_under(&home.cairn_home())
                .into_iter()
                .map(|(_, b)| b)
                .collect(),
            terms: full_text_terms(&home.cairn_home().join("cairn.db")),
            outputs,
        }
    }

    /// How many of `secrets` leaked: found in a file, an answer, or as a
    /// full-text term (lower case, at least 8 characters, inside it).
    fn leaks(&self, secrets: &[String]) -> usize {
        secrets
            .iter()
            .filter(|s| {
                let lower = s.to_lowercase();
                self.files.iter().any(|b| contains(b, s.as_bytes()))
                    || self.outputs.iter().any(|o| o.contains(s.as_str()))
                    || self
                        .terms
                        .iter()
                        .any(|t| t.len() >= 8 && lower.contains(t.as_str()))
            })
            .count()
    }
}

/// The MCP server's answers to `questions` and the session window of the
/// first hit of each.
fn mcp_answers(home: &TestHome, questions: &[&str]) -> Vec<String> {
    use crate::mcp::{call, connect, first_handle, runtime, text};
    runtime().block_on(async {
        let client = connect(home).await;
        let mut out = Vec::new();
        for q in questions {
            let found = text(&call(&client, "search", json!({"query": q, "limit": 20})).await);
            if found.contains("handle: ") {
                let handle = first_handle(&found);
                out.push(text(
                    &call(&client, "session", json!({"handle": handle, "limit": 500})).await,
                ));
            }
            out.push(found);
        }
        client.cancel().await.expect("close the client");
        out
    })
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
        "session id",
        "parent session id",
        "project and files",
    ];
    let questions = [
        "password",
        "key",
        "token",
        "PRIVATE KEY",
        "secret",
        "login",
        "aws",
        "access",
        "plain",
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
            if *position == "parent session id" {
                plant_parents(&dir, &kinds);
                jsonl.push_str(&line(
                    "root",
                    "user",
                    json!({"role": "user", "content": "the parent session"}),
                ));
                jsonl.push('\n');
            } else {
                for (i, k) in kinds.iter().enumerate() {
                    for l in plant(position, i, &k.text) {
                        jsonl.push_str(&l);
                        jsonl.push('\n');
                    }
                }
            }
            std::fs::write(dir.join(format!("{SESSION}.jsonl")), jsonl).expect("write");
            outputs.push(home.ok(&["index", "--quiet"]));
        }
        for q in questions {
            outputs.push(home.search_out(&[
                "search",
                "--json",
                "--no-refresh",
                "-n",
                "100",
                "--",
                q,
            ]));
        }
        // Every session found, shown whole, by the id search gave.
        let mut shown = std::collections::BTreeSet::new();
        for o in outputs.clone() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&o) else {
                continue;
            };
            for hit in v["hits"].as_array().into_iter().flatten() {
                if let Some(id) = hit["session_id"].as_str()
                    && shown.insert(id.to_owned())
                {
                    outputs.push(home.ok(&["show", "--no-pager", "--json", "--", id]));
                }
            }
        }
        if position.ends_with("session id") {
            // Every planted session is found (by its plain message).
            assert!(
                shown.len() >= kinds.len(),
                "{position}: {} sessions found",
                shown.len()
            );
        } else if *position != "note" {
            outputs.push(home.ok(&["show", "--no-pager", "--json", SESSION]));
        }
        outputs.extend(mcp_answers(&home, &questions));
        let status = home.json(&["status", "--json"]);
        assert!(
            status["records"].as_u64().is_some_and(|n| n > 0),
            "{status}"
        );
        outputs.push(status.to_string());
        let seen = Seen::of(&home, outputs);
        for (k, planted) in kinds.iter().enumerate() {
            table[p][k] = seen.leaks(&planted.secrets);
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

/// What the recorder's scripted model answers (`FAKE_FACT` of
/// `../shared/realagents/common.sh`), in every recorded agent's files.
const RECORDED_FACT: &str =
    "Decision: we pinned the quokka library to 2.3 because 2.4 broke the parser.";

/// The forms put in place of [`RECORDED_FACT`] (padded to its length, so
/// the agents' SQLite files stay well formed), with their secrets. None
/// needs escaping in JSON.
const RECORDED_FORMS: &[(&str, &[&str])] = &[
    (
        "AKIARF824AXTER2S549Q / NPeWAyQK/axbJHdVbosTRw4wWdEN4oihegq/1Gdm ok",
        &[
            "AKIARF824AXTER2S549Q",
            "NPeWAyQK/axbJHdVbosTRw4wWdEN4oihegq/1Gdm",
            "axbJHdVbosTRw4wWdEN4oihegq",
        ],
    ),
    (
        "run with --aws-secret-access-key mCphYPK7x+m6Y9vMXiRB+MIQrkS8tnokudiHt3V6",
        &[
            "mCphYPK7x+m6Y9vMXiRB+MIQrkS8tnokudiHt3V6",
            "MIQrkS8tnokudiHt3V6",
        ],
    ),
    (
        "the AWS secret is VSl+VHjk1HJm4mXjtoM2OisJmqG0ndYHDSxhHJmk",
        &[
            "VSl+VHjk1HJm4mXjtoM2OisJmqG0ndYHDSxhHJmk",
            "VHjk1HJm4mXjtoM2OisJmqG0ndYHDSxhHJmk",
        ],
    ),
    (
        "API key is A7Ut7bWOjVPkCnQ87qdfa0X3, ooj6XlxUDk1TOxCakeuf6AaB is the key",
        &["A7Ut7bWOjVPkCnQ87qdfa0X3", "ooj6XlxUDk1TOxCakeuf6AaB"],
    ),
];

/// Copies the tree `from` into `to`, every occurrence of `needle`
/// replaced by `with` (as long), files written anew (the recordings are
/// read-only).
fn copy_replacing(from: &Path, to: &Path, needle: &[u8], with: &[u8]) -> usize {
    assert_eq!(needle.len(), with.len());
    std::fs::create_dir_all(to).expect("mkdir");
    let mut replaced = 0;
    for entry in std::fs::read_dir(from).expect("read recording") {
        let entry = entry.expect("entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            replaced += copy_replacing(&src, &dst, needle, with);
        } else if let Ok(mut bytes) = std::fs::read(&src) {
            let mut i = 0;
            while i + needle.len() <= bytes.len() {
                if &bytes[i..i + needle.len()] == needle {
                    bytes[i..i + needle.len()].copy_from_slice(with);
                    replaced += 1;
                    i += needle.len();
                } else {
                    i += 1;
                }
            }
            std::fs::write(&dst, bytes).expect("write copy");
        }
    }
    replaced
}

/// Every recorded agent (`../shared/real-histories/recorded` and the
/// project's own recordings under `fixtures/agents/*/*/home` that hold the
/// recorder's decision: what today's releases write), its final answer
/// replaced by each new secret form, indexed by the real binary: the
/// agent's answer is found, with a marker where the secret was, and no
/// secret is left anywhere.
#[test]
fn recorded_formats_leak_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/real-histories/recorded");
    let mut agents: Vec<_> = match std::fs::read_dir(&root) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(_) => {
            eprintln!(
                "SKIPPED recorded_formats_leak_nothing for {}: absent (the project's own recordings still run)",
                root.display()
            );
            Vec::new()
        }
    };
    agents.sort();
    let fact = RECORDED_FACT.as_bytes();
    let own: Vec<_> = crate::util::recorded_releases("home")
        .into_iter()
        .map(|rel| crate::util::agent_fixtures().join(rel).join("home"))
        .filter(|home| {
            all_bytes_under(home)
                .iter()
                .any(|(_, b)| b.windows(fact.len()).any(|w| w == fact))
        })
        .collect();
    assert!(own.len() >= 20, "{own:?}");
    agents.extend(own);
    let mut report =
        String::from("recorded formats: leaks per form (- = the answer is not indexed)\n");
    let mut total = 0;
    let mut indexed = 0;
    for dir in &agents {
        // A shared recording is named by its folder, the project's own by
        // `<agent>/<release>` (its folder is `home`).
        let name = if dir.ends_with("home") {
            dir.parent()
                .and_then(|r| {
                    Some(format!(
                        "{}/{}",
                        r.parent()?.file_name()?.to_str()?,
                        r.file_name()?.to_str()?
                    ))
                })
                .unwrap_or_else(|| "?".to_owned())
        } else {
            dir.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("?")
                .to_owned()
        };
        let _ = write!(report, "{name:<32}");
        for (form, secrets) in RECORDED_FORMS {
            assert!(form.len() <= RECORDED_FACT.len(), "{form}");
            let padded = format!("{form:<width$}", width = RECORDED_FACT.len());
            let home = TestHome::empty();
            let n = copy_replacing(
                dir,
                home.path(),
                RECORDED_FACT.as_bytes(),
                padded.as_bytes(),
            );
            assert!(n > 0, "{name}: the recorded answer is nowhere");
            let mut outputs = vec![home.ok(&["index", "--quiet"])];
            for q in ["aws", "secret", "key", "API"] {
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
            let mut shown = std::collections::BTreeSet::new();
            for o in outputs.clone() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&o) else {
                    continue;
                };
                for hit in v["hits"].as_array().into_iter().flatten() {
                    if let Some(id) = hit["session_id"].as_str()
                        && shown.insert(id.to_owned())
                    {
                        outputs.push(home.ok(&["show", "--no-pager", "--json", "--", id]));
                    }
                }
            }
            let found = outputs.iter().any(|o| o.contains("[REDACTED:"));
            let secrets: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
            let leaks = Seen::of(&home, outputs).leaks(&secrets);
            total += leaks;
            if found {
                indexed += 1;
                let _ = write!(report, " {leaks}");
            } else {
                let _ = write!(report, " -");
            }
        }
        report.push('\n');
    }
    let _ = writeln!(
        report,
        "total leaks: {total}; forms found redacted: {indexed}"
    );
    eprintln!("{report}");
    assert_eq!(total, 0, "{report}");
    // Most recorded agents' answers are indexed (those cairn does not
    // read yet are listed with -: no leak there either, as nothing of
    // them is stored).
    assert!(indexed >= RECORDED_FORMS.len() * 10, "{report}");
}
