//! The `cairn` CLI end to end: index the fixture home, search it, and check
//! incremental indexing, redaction, bad input and the `--json` contract.

use std::io::Write;

use crate::util::{TestHome, all_bytes_under, contains, planted_secrets};

/// Every planted fact is found, in the right agent's session, ranked first.
#[test]
fn search_finds_planted_facts_first() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let cases = [
        (
            "why did we pin hyper?",
            "claude-code",
            "pinned hyper to 0.14",
        ),
        ("job queue redis", "codex", "from redis to sqlite"),
        (
            "tantivy or meilisearch",
            "gemini",
            "tantivy over meilisearch",
        ),
        ("why vendor openssl", "aider", "vendor the openssl crate"),
        ("rate limiter window incident", "copilot", "rate limiter"),
        ("flaky test cause", "pi", "timezone assumption"),
        ("figment serde-env", "opencode", "figment"),
        (
            "websockets corporate proxy dashboard",
            "cursor",
            "server-sent events",
        ),
        ("payment webhook retries", "cursor", "five attempts"),
        ("float64 rounding cents", "opencode", "integer cents"),
        ("ledger API timeout export", "gemini", "500 rows"),
    ];
    for (query, agent, needle) in cases {
        home.assert_found_first(query, agent, needle);
    }
}

/// Non-ASCII questions find non-ASCII answers.
#[test]
fn chinese_and_russian_queries() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let hits = home.search("为什么选择tantivy", &["--no-refresh"]);
    assert_eq!(hits[0]["agent"], "gemini", "{hits:#?}");
    let hits = home.search("不需要服务器", &["--no-refresh"]);
    assert_eq!(hits[0]["agent"], "gemini", "{hits:#?}");
    let hits = home.search("почему отключили кэширование", &["--no-refresh"]);
    assert_eq!(hits[0]["agent"], "aider", "{hits:#?}");
}

/// The `--json` hit shape is a public contract.
#[test]
fn json_contract_fields() {
    let home = TestHome::seeded();
    let hits = home.search("hyper proxy", &[]);
    let h = &hits[0];
    for key in [
        "session_id",
        "agent",
        "project",
        "machine",
        "role",
        "time",
        "score",
        "snippet",
        "source",
    ] {
        assert!(h.get(key).is_some(), "hit lacks {key}: {h:#}");
    }
    assert_eq!(h["machine"], "fixture-laptop");
    assert_eq!(h["project"], "/home/dev/acme");
    let time = h["time"].as_str().expect("time string");
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");
    assert!(h["score"].as_f64().expect("score") > 0.0);
    let source = h["source"].as_str().expect("source path");
    assert!(
        source.starts_with(home.path().to_str().expect("utf-8 path")),
        "{source}"
    );
}

/// Queries full of FTS5 syntax and punctuation never reach the user as errors.
#[test]
fn hostile_queries_do_not_error() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    for q in [
        "foo::bar",
        "\"unclosed",
        "NOT",
        "( OR )",
        "*",
        "src/main.rs",
        "error[E0382]: borrow of moved value: `x`",
        "a AND b NEAR(c)",
        "col:value",
        "^start",
        "'single' \"double\"",
        "-",
        "🙂",
    ] {
        let out = home.search_out(&["search", "--json", "--no-refresh", "--", q]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert!(v["hits"].is_array(), "{q:?} -> {out}");
    }
    let hits = home.search("Cargo.toml", &["--no-refresh", "--role", "tool_call"]);
    assert!(hits.iter().all(|h| h["role"] == "tool_call"), "{hits:#?}");
}

/// Filters narrow results.
#[test]
fn filters_agent_project_role_since_session() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let hits = home.search("proxy", &["--no-refresh", "--agent", "cursor"]);
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h["agent"] == "cursor"));
    let hits = home.search("proxy", &["--no-refresh", "--project", "acme"]);
    assert!(
        hits.iter()
            .all(|h| h["project"].as_str().is_some_and(|p| p.contains("acme")))
    );
    let hits = home.search("proxy", &["--no-refresh", "--role", "user"]);
    assert!(hits.iter().all(|h| h["role"] == "user"));
    let hits = home.search("hyper", &["--no-refresh", "--since", "2099-01-01"]);
    assert!(hits.is_empty(), "{hits:#?}");
    let all = home.search("hyper", &["--no-refresh"]);
    let sid = all[0]["session_id"].as_str().expect("sid");
    let prefix: String = sid.chars().take(6).collect();
    let hits = home.search("hyper", &["--no-refresh", "--session", &prefix]);
    assert!(hits.iter().all(|h| h["session_id"] == sid));
    let bad = home.run(&["search", "--since", "tomorrowish", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--since"));
}

/// No planted secret is in any file cairn wrote, nor in any output.
#[test]
fn planted_secrets_never_stored_or_printed() {
    let home = TestHome::seeded();
    let mut outputs = vec![home.ok(&["index"])];
    outputs.push(home.ok(&["status", "--json"]));
    outputs.push(home.ok(&["sources", "--json"]));
    for q in [
        "token",
        "key",
        "password",
        "secret",
        "Authorization Bearer",
        "postgres",
        "PRIVATE KEY",
        "AKIA",
        "ghp",
        "sk-proj",
        "npm",
        "hf",
        "glpat",
        "xoxb",
        "AIza",
        "sk_live",
        "eyJ",
    ] {
        outputs.push(home.search_out(&["search", "--json", "--no-refresh", "-n", "50", "--", q]));
    }
    // Every session's transcript.
    let all = home.search("the", &["--no-refresh", "-n", "500"]);
    assert!(all.len() >= 10, "expected many sessions, got {}", all.len());
    let status = home.json(&["status", "--json"]);
    let mut sessions: Vec<String> = Vec::new();
    for q in ["the", "a", "token", "proxy", "de", "и", "是"] {
        for h in home.search(q, &["--no-refresh", "-n", "500"]) {
            sessions.push(h["session_id"].as_str().expect("sid").to_owned());
        }
    }
    sessions.sort();
    sessions.dedup();
    for sid in &sessions {
        outputs.push(home.ok(&["show", "--no-pager", "--json", sid]));
    }
    let files = all_bytes_under(&home.cairn_home());
    assert!(files.iter().any(|(p, _)| p.ends_with("cairn.db")));
    for secret in planted_secrets() {
        for (path, bytes) in &files {
            assert!(
                !contains(bytes, secret.as_bytes()),
                "{secret} found in {}",
                path.display()
            );
        }
        for out in &outputs {
            assert!(!out.contains(&secret), "{secret} printed");
        }
    }
    // And the redaction was counted per kind.
    let total: u64 = status["agents"]
        .as_object()
        .expect("agents")
        .values()
        .flat_map(|a| a["redactions"].as_object().expect("redactions").values())
        .map(|n| n.as_u64().expect("count"))
        .sum();
    assert!(total >= 17, "redactions counted: {total}");
}

fn claude_session(home: &TestHome) -> std::path::PathBuf {
    let dir = home.path().join(".claude/projects/-home-dev-acme");
    std::fs::read_dir(&dir)
        .expect("claude fixture dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && std::fs::read_to_string(p).is_ok_and(|t| t.contains("pinned hyper"))
        })
        .expect("the hyper session fixture")
}

fn claude_line(session: &str, uuid: &str, text: &str) -> String {
    serde_json::json!({
        "type": "user",
        "uuid": uuid,
        "parentUuid": null,
        "sessionId": session,
        "timestamp": "2025-11-04T10:00:00.000Z",
        "cwd": "/home/dev/acme",
        "message": {"role": "user", "content": text}
    })
    .to_string()
}

fn session_id_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["sessionId"].as_str().map(str::to_owned))
        .expect("a sessionId line")
}

fn records(home: &TestHome) -> u64 {
    home.json(&["status", "--json"])["records"]
        .as_u64()
        .expect("records")
}

/// An appended line is picked up alone; a torn line waits until it is complete.
#[test]
fn appends_and_torn_lines() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let path = claude_session(&home);
    let sid = session_id_of(&path);
    let before = records(&home);
    // The fixture ends with a torn line; complete it first so appends start clean.
    let mut text = std::fs::read_to_string(&path).expect("read");
    if !text.ends_with('\n') {
        text.push('\n');
        std::fs::write(&path, &text).expect("write");
    }
    home.ok(&["index", "--quiet"]);
    let base = records(&home);
    assert!(base >= before);

    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    writeln!(
        f,
        "{}",
        claude_line(
            &sid,
            "u-append-1",
            "we decided the zanzibar cache ttl is 42 minutes"
        )
    )
    .expect("append");
    let report = home.json(&["index", "--json"]);
    assert_eq!(report["added"], 1, "{report}");
    assert_eq!(report["changed"], 1, "{report}");
    let hits = home.search("zanzibar ttl", &["--no-refresh"]);
    assert_eq!(hits[0]["session_id"], sid.as_str());

    // A torn line (no newline yet) is not consumed...
    let line = claude_line(&sid, "u-append-2", "the quokka migration runs on sundays");
    let (head, tail) = line.split_at(line.len() / 2);
    write!(f, "{head}").expect("append head");
    f.flush().expect("flush");
    home.ok(&["index", "--quiet"]);
    assert!(home.search("quokka", &["--no-refresh"]).is_empty());
    // ...until it is complete, and then exactly once.
    writeln!(f, "{tail}").expect("append tail");
    home.ok(&["index", "--quiet"]);
    assert_eq!(home.search("quokka", &["--no-refresh"]).len(), 1);
    assert_eq!(records(&home), base + 2);
    // Nothing changed: a pass reads nothing.
    let report = home.json(&["index", "--json"]);
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(records(&home), base + 2);
}

/// A rewritten file has only its own vanished records replaced; others stay.
#[test]
fn rewrite_replaces_only_that_file() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let path = claude_session(&home);
    let sid = session_id_of(&path);
    assert!(
        !home
            .search("hyper", &["--no-refresh", "--agent", "claude-code"])
            .is_empty()
    );
    let codex_before = home
        .search("redis sqlite", &["--no-refresh", "--agent", "codex"])
        .len();
    // Rewrite in place with shorter, different content.
    std::fs::write(
        &path,
        format!(
            "{}\n",
            claude_line(&sid, "u-new", "the walrus protocol replaced everything")
        ),
    )
    .expect("rewrite");
    let report = home.json(&["index", "--json"]);
    assert!(report["removed"].as_u64().expect("removed") > 0, "{report}");
    assert_eq!(home.search("walrus protocol", &["--no-refresh"]).len(), 1);
    let hyper = home.search("pinned hyper", &["--no-refresh", "--agent", "claude-code"]);
    assert!(
        hyper.iter().all(|h| h["session_id"] != sid.as_str()),
        "old records of the rewritten file remain: {hyper:#?}"
    );
    assert_eq!(
        home.search("redis sqlite", &["--no-refresh", "--agent", "codex"])
            .len(),
        codex_before
    );
}

/// A deleted transcript keeps its records.
#[test]
fn removed_file_keeps_its_records() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let path = claude_session(&home);
    std::fs::remove_file(&path).expect("remove");
    home.ok(&["index", "--quiet"]);
    assert!(
        !home
            .search("pinned hyper", &["--no-refresh", "--agent", "claude-code"])
            .is_empty()
    );
    let sources = home.json(&["sources", "--json"]);
    let gone = sources["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .any(|s| s["present"] == false);
    assert!(gone, "{sources:#}");
}

/// A malformed line is skipped, counted, and the rest of the file still read.
#[test]
fn malformed_line_is_counted_and_skipped() {
    let home = TestHome::seeded();
    let path = claude_session(&home);
    let sid = session_id_of(&path);
    // Drop the fixture's torn last line so only our bad line is new.
    let mut text = std::fs::read_to_string(&path).expect("read");
    if !text.ends_with('\n') {
        let cut = text.rfind('\n').map_or(0, |i| i + 1);
        text.truncate(cut);
        std::fs::write(&path, &text).expect("write");
    }
    home.ok(&["index", "--quiet"]);
    let skipped = |h: &TestHome| {
        h.json(&["status", "--json"])["agents"]["claude-code"]["skipped"]
            .as_u64()
            .expect("skipped")
    };
    let before = skipped(&home);
    text.push_str("{\"type\": \"user\", this is not json\n");
    text.push_str(&claude_line(
        &sid,
        "u-after-bad",
        "the okapi flag stays off in production",
    ));
    text.push('\n');
    std::fs::write(&path, text).expect("write");
    home.ok(&["index", "--quiet"]);
    assert_eq!(skipped(&home), before + 1);
    assert_eq!(home.search("okapi", &["--no-refresh"]).len(), 1);
}

/// A corrupt database is reported clearly and left as it was.
#[test]
fn corrupt_database_is_a_clear_error() {
    let home = TestHome::seeded();
    let db = home.cairn_home().join("cairn.db");
    std::fs::create_dir_all(db.parent().expect("parent")).expect("mkdir");
    let garbage = b"this is not a sqlite database at all, just some bytes".repeat(100);
    std::fs::write(&db, &garbage).expect("write garbage");
    for args in [&["status"][..], &["search", "hyper"][..], &["index"][..]] {
        let out = home.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not a readable cairn database"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(
        std::fs::read(&db).expect("read"),
        garbage,
        "corrupt file was modified"
    );
}

/// Notes are stored, redacted and searchable.
#[test]
fn remember_stores_a_redacted_note() {
    let home = TestHome::empty();
    let out = home.ok(&[
        "remember",
        "--project",
        "/home/dev/shop",
        "staging uses port 8443; token ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8",
    ]);
    assert!(out.contains("remembered"), "{out}");
    let hits = home.search("staging port", &[]);
    assert_eq!(hits[0]["agent"], "notes");
    assert_eq!(hits[0]["role"], "note");
    assert_eq!(hits[0]["project"], "/home/dev/shop");
    let snippet = hits[0]["snippet"].as_str().expect("snippet");
    assert!(
        snippet.contains("8443") && !snippet.contains("ghp_sMeh"),
        "{snippet}"
    );
    for (path, bytes) in all_bytes_under(&home.cairn_home()) {
        assert!(
            !contains(&bytes, b"ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8"),
            "{}",
            path.display()
        );
    }
    let bad = home.run(&["remember", "   "]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `show` takes an id prefix, refuses an ambiguous or unknown one.
#[test]
fn show_by_prefix() {
    let home = TestHome::seeded();
    let hits = home.search("pinned hyper", &[]);
    let sid = hits[0]["session_id"].as_str().expect("sid").to_owned();
    let out = home.ok(&["show", "--no-pager", &sid[..8]]);
    assert!(out.contains("pinned hyper to 0.14"), "{out}");
    let v = home.json(&["show", "--json", &sid[..8]]);
    assert_eq!(v["session"]["session_id"], sid.as_str());
    assert!(v["records"].as_array().expect("records").len() > 2);
    let none = home.run(&["show", "zzzz-no-such-session"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no session"));
}

/// An empty machine: everything works and says there is nothing yet.
#[test]
fn empty_home_works() {
    let home = TestHome::empty();
    let out = home.ok(&["status"]);
    assert!(out.contains("no agent history indexed yet"), "{out}");
    assert!(home.search("anything", &[]).is_empty());
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["records"], 0);
    assert_eq!(st["node_id"].as_str().expect("id").len(), 32);
}

/// Memory cairn injected into an agent (and the agent wrote back into its
/// transcript) is not indexed again as if someone had said it.
#[test]
fn recalled_memory_is_not_reindexed() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let path = claude_session(&home);
    let sid = session_id_of(&path);
    let mut text = std::fs::read_to_string(&path).expect("read");
    if !text.ends_with('\n') {
        let cut = text.rfind('\n').map_or(0, |i| i + 1);
        text.truncate(cut);
    }
    let injected = format!(
        "{}\nearlier: the capybara deploy key lives in vault\n{}\nnow tell me about lemurs",
        cairn_node::mcp::sanitize::OPEN,
        cairn_node::mcp::sanitize::CLOSE
    );
    text.push_str(&claude_line(&sid, "u-recalled", &injected));
    text.push('\n');
    std::fs::write(&path, text).expect("write");
    home.ok(&["index", "--quiet"]);
    assert!(
        home.search("capybara", &["--no-refresh"]).is_empty(),
        "recalled text was re-indexed"
    );
    assert_eq!(home.search("lemurs", &["--no-refresh"]).len(), 1);
}

/// `cairn sources` lists every store with how many records came from it.
#[test]
fn sources_count_records_per_store() {
    let home = TestHome::seeded();
    let before = home.json(&["sources", "--json"]);
    let stores = before["sources"].as_array().expect("sources");
    assert!(stores.len() >= 20, "{before:#}");
    assert!(
        stores
            .iter()
            .all(|s| s["indexed"] == false && s["records"] == 0)
    );
    home.ok(&["index", "--quiet"]);
    let after = home.json(&["sources", "--json"]);
    let stores = after["sources"].as_array().expect("sources");
    assert!(stores.iter().all(|s| s["indexed"] == true), "{after:#}");
    let sum: u64 = stores
        .iter()
        .map(|s| s["records"].as_u64().expect("records"))
        .sum();
    let status = home.json(&["status", "--json"]);
    assert_eq!(sum, status["records"].as_u64().expect("records"));
    let agents: std::collections::BTreeSet<&str> =
        stores.iter().filter_map(|s| s["agent"].as_str()).collect();
    for a in [
        "claude-code",
        "codex",
        "gemini",
        "aider",
        "copilot",
        "opencode",
        "cursor",
        "pi",
    ] {
        assert!(agents.contains(a), "{a} not detected: {agents:?}");
    }
}

/// `cairn demo`: two nodes pair and sync over loopback; every question is
/// answered from the other machine's history, and nothing is left behind.
#[test]
fn demo_answers_across_two_machines() {
    let home = TestHome::empty();
    let tmp = home.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let out = home
        .cmd(&["demo", "--json"])
        .env("TMPDIR", &tmp)
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let (l, d) = (
        v["laptop_records"].as_u64().expect("n"),
        v["desktop_records"].as_u64().expect("n"),
    );
    assert!(l > 20 && d > 20, "{v:#}");
    assert_eq!(v["sync"]["records_received"].as_u64(), Some(d), "{v:#}");
    let answers = v["answers"].as_array().expect("answers");
    assert_eq!(answers.len(), 6);
    for a in answers {
        let other = if a["asked_on"] == "laptop" {
            "desktop"
        } else {
            "laptop"
        };
        assert_eq!(a["hits"][0]["machine"], other, "{a:#}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    for secret in planted_secrets() {
        assert!(!text.contains(&secret), "{secret} printed");
    }
    let left: Vec<_> = std::fs::read_dir(&tmp).expect("tmp").collect();
    assert!(left.is_empty(), "demo left files behind: {left:?}");
}

/// `cairn demo` as a person sees it: each of the six questions prints the
/// planted decision that answers it, not the question (issue 57: the
/// Russian question, the payment retries and "which search engine" printed
/// the user's own words, the last a line about a Maps API key).
#[test]
fn demo_prints_the_answer_to_each_question() {
    let home = TestHome::empty();
    let tmp = home.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let out = home
        .cmd(&["demo"])
        .env("TMPDIR", &tmp)
        .env("NO_COLOR", "1")
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Per question: the line right under "answered from ..." holds the
    // decision planted in the fixture session.
    let wanted = [
        (
            "why did we pin hyper?",
            "hyper 1.0 broke the corporate proxy",
        ),
        (
            "job queue redis",
            "switched the job queue from redis to sqlite",
        ),
        (
            "почему отключили кэширование",
            "прокси отдавал устаревшие цены",
        ),
        (
            "which search engine did we pick and why",
            "we chose tantivy over meilisearch",
        ),
        ("为什么选择 tantivy", "不需要服务器"),
        (
            "src/webhooks/payment.ts retries",
            "the retry budget for the payment webhook is five attempts",
        ),
    ];
    let lines: Vec<&str> = text.lines().collect();
    for (question, decision) in wanted {
        let at = lines
            .iter()
            .position(|l| l.ends_with(&format!("? {question}")))
            .unwrap_or_else(|| panic!("{question:?} not asked:\n{text}"));
        let from = lines.get(at + 1).copied().unwrap_or_default();
        assert!(from.contains("answered from"), "{question:?}:\n{text}");
        let answer = lines.get(at + 2).copied().unwrap_or_default();
        assert!(
            answer.contains(decision),
            "{question:?} printed {answer:?}, not the decision {decision:?}"
        );
    }
    assert!(!text.contains("Maps API"), "{text}");
}

/// With a `cairn serve` running for the home, `cairn index` runs no pass of
/// its own: it asks the daemon for a pass, waits for it and shows it, so
/// what was written before it is searchable as soon as it returns.
#[test]
fn index_beside_a_running_daemon_asks_the_daemon_for_a_pass() {
    use std::time::Duration;

    use crate::sync::{Reap, wait_for};

    let home = TestHome::seeded();
    let mine = home.json(&["index", "--json"]);
    assert!(mine["stores"].as_u64().is_some_and(|n| n > 0), "{mine}");
    let daemon = Reap(home.spawn_serve());
    let pid = u64::from(daemon.0.id());
    let deadline = Duration::from_secs(60);
    let first = wait_for(deadline, || {
        let v = home.json(&["index", "--json"]);
        (v["served_by"]["pid"] == pid).then_some(v)
    })
    .unwrap_or_else(|| panic!("cairn index never named the daemon"));
    assert_eq!(first["fresh"], true, "{first}");
    assert!(first.get("stores").is_none(), "{first}");
    assert!(
        first["last_pass"]["report"]["stores"].as_u64().is_some(),
        "{first}"
    );
    // A new session, then at once `cairn index`: the daemon's pass it
    // waited for has read it.
    let session = "5e55a1de-0000-4000-8000-00000000beef";
    let file = home
        .path()
        .join(format!(".claude/projects/-home-dev-daemon/{session}.jsonl"));
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &file,
        format!(
            concat!(
                r#"{{"type":"user","uuid":"d1","sessionId":"{}","timestamp":"2025-11-24T10:00:00.000Z","#,
                r#""cwd":"/home/dev/daemon","message":{{"role":"user","content":"the quokkadaemon word"}}}}"#,
                "\n"
            ),
            session
        ),
    )
    .expect("write session");
    let pass = home.json(&["index", "--json"]);
    assert_eq!(pass["fresh"], true, "{pass}");
    assert_eq!(pass["served_by"]["pid"], pid, "{pass}");
    assert!(
        pass["last_pass"]["started_ms"].as_i64() >= first["last_pass"]["finished_ms"].as_i64(),
        "{pass}"
    );
    assert!(
        !home.search("quokkadaemon", &["--no-refresh"]).is_empty(),
        "the daemon's pass did not read the new session"
    );
    let text = home.ok(&["index"]);
    assert!(
        text.contains(&format!("cairn serve (pid {pid}) keeps this index fresh")),
        "{text}"
    );
    assert!(text.contains("its pass now: indexed "), "{text}");
    assert!(home.ok(&["index", "--quiet"]).is_empty());
    // Without the daemon, `cairn index` runs its own pass again.
    drop(daemon);
    let v = wait_for(deadline, || {
        let v = home.json(&["index", "--json"]);
        v.get("stores").is_some().then_some(v)
    })
    .unwrap_or_else(|| panic!("cairn index still reports a daemon after it stopped"));
    assert_eq!(v["added"], 0, "{v}");
}
