//! Running unattended: how fresh `cairn status` says the index is.

use std::io::Write;

use crate::util::TestHome;

fn append_line(home: &TestHome, text: &str) {
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    let path = home
        .path()
        .join(format!(".claude/projects/-home-dev-widgets/{sid}.jsonl"));
    let line = serde_json::json!({
        "type": "user", "uuid": "u-fresh-1", "parentUuid": null, "sessionId": sid,
        "timestamp": "2026-01-04T10:00:00.000Z", "cwd": "/home/dev/widgets",
        "message": {"role": "user", "content": text}
    });
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open transcript");
    writeln!(f, "{line}").expect("append");
}

#[test]
fn status_tells_how_far_the_index_is_behind_the_agents_stores() {
    let home = TestHome::seeded();
    let before = home.json(&["status", "--json"]);
    let stores = before["freshness"]["stores"].as_u64().expect("stores");
    assert!(stores > 3, "{before}");
    assert_eq!(
        before["freshness"]["pending"], stores,
        "nothing indexed yet: {before}"
    );
    home.ok(&["index", "--quiet"]);
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["freshness"]["pending"], 0, "{st}");
    assert!(st["freshness"]["newest_indexed_ms"].is_i64(), "{st}");
    assert!(home.ok(&["status"]).contains("all"), "text status");
    append_line(&home, "the ibis renderer is frozen");
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["freshness"]["pending"], 1, "{st}");
    let text = home.ok(&["status"]);
    assert!(
        text.contains("1 of") && text.contains("changed since indexed"),
        "{text}"
    );
}

/// Pairs `a` (named `a_name`, inviting on loopback) with `b` through the real commands.
fn pair(a: &TestHome, a_name: &str, b: &TestHome) {
    use std::io::BufRead;
    let mut child = a
        .cmd(&["pair", "--listen", "127.0.0.1:0", "--json"])
        .env("HOSTNAME", a_name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the code line");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code JSON");
    let code = v["code"].as_str().expect("code").to_owned();
    b.ok(&["pair", &code, "--json"]);
    // The inviter exits after one pairing; its wait is bounded by the code's expiry.
    let status = child.wait().expect("inviter exits");
    assert!(status.success());
}

fn checks<'a>(report: &'a serde_json::Value, area: &str) -> Vec<&'a serde_json::Value> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["area"] == area)
        .collect()
}

#[test]
fn doctor_explains_each_problem_with_its_fix() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let out = home.run(&["doctor", "--json"]);
    assert!(!out.status.success(), "problems make doctor fail");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    // No service: the fix is `cairn install`.
    let svc = checks(&r, "service");
    assert_eq!(svc[0]["level"], "problem", "{r}");
    assert!(
        svc[0]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("cairn install")),
        "{r}"
    );
    // Freshly indexed.
    assert_eq!(checks(&r, "index")[0]["level"], "ok", "{r}");
    // Claude Code's config exists in the fixtures but has no cairn entry.
    let agents = checks(&r, "agents");
    let claude = agents
        .iter()
        .find(|c| {
            c["summary"]
                .as_str()
                .is_some_and(|s| s.starts_with("claude-code"))
        })
        .unwrap_or_else(|| panic!("no claude-code check: {r}"));
    assert_eq!(claude["level"], "problem");
    assert_eq!(claude["fix"], "`cairn install --agent claude-code`");
    assert_eq!(checks(&r, "peers")[0]["level"], "ok", "{r}");
    assert_eq!(checks(&r, "port").len(), 1, "{r}");
    assert!(r["problems"].as_u64().is_some_and(|n| n >= 2), "{r}");
    let text = String::from_utf8_lossy(&home.run(&["doctor"]).stdout).into_owned();
    assert!(
        text.contains("PROBLEM service") && text.contains("fix: `cairn install"),
        "{text}"
    );

    // A key readable by others is made private as the node opens, and
    // doctor says so.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = home.cairn_home().join("identity.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let r: serde_json::Value =
            serde_json::from_slice(&home.run(&["doctor", "--json"]).stdout).expect("doctor JSON");
        let perm = checks(&r, "permissions");
        assert_eq!(perm[0]["level"], "warn", "{r}");
        let summary = perm[0]["summary"].as_str().unwrap_or("");
        assert!(
            summary.contains(&key.display().to_string()) && summary.contains("made it private"),
            "{r}"
        );
        let mode = std::fs::metadata(&key).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    // Wired, with the daemon running: service, index and agents are fine.
    home.ok(&["install", "--no-service"]);
    // The "daemon" is this test process, which really holds the port.
    let held = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind a UDP port");
    let addr = held.local_addr().expect("addr").to_string();
    let state =
        serde_json::json!({"listen_addr": addr, "pid": std::process::id(), "started_ms": 1});
    std::fs::write(home.cairn_home().join("serve.json"), state.to_string()).expect("serve.json");
    let r = home.json(&["doctor", "--json"]);
    assert_eq!(r["problems"], 0, "{r}");
    assert_eq!(checks(&r, "service")[0]["level"], "ok", "{r}");
    assert!(
        checks(&r, "agents")[0]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("claude-code")),
        "{r}"
    );
    assert!(home.ok(&["doctor"]).contains("all good") || r["warnings"].as_u64() > Some(0));
}

#[test]
fn doctor_reports_an_offline_peer_as_unreachable_within_seconds() {
    let a = TestHome::empty();
    let b = TestHome::empty();
    pair(&a, "alpha", &b);
    let started = std::time::Instant::now();
    let out = b.run(&["doctor", "--json"]);
    eprintln!(
        "cairn doctor with one peer offline took {:?}",
        started.elapsed()
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    let peer = checks(&r, "peer");
    assert_eq!(peer.len(), 1, "{r}");
    assert_eq!(peer[0]["level"], "problem", "{r}");
    let s = peer[0]["summary"].as_str().expect("summary");
    assert!(
        s.starts_with("alpha (") && s.contains("unreachable") && s.contains("127.0.0.1:"),
        "{s}"
    );
    assert!(s.contains("last seen"), "{s}");
    assert!(
        peer[0]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("cairn serve")),
        "{r}"
    );
}

/// The last pass `cairn serve` recorded: its report, when it added records.
fn last_pass_adding(home: &TestHome) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(home.cairn_home().join("index-pass.json")).ok()?;
    let pass: serde_json::Value = serde_json::from_str(&text).ok()?;
    (pass["report"]["added"].as_u64()? > 0).then(|| pass["report"].clone())
}

/// Waits for the daemon's next pass that adds something and asserts it
/// read one store and added one record (`what` was written).
fn assert_read_alone(home: &TestHome, what: &str) {
    use std::time::Duration;
    let pass = crate::sync::wait_for(Duration::from_secs(30), || last_pass_adding(home))
        .unwrap_or_else(|| panic!("{what} was never read"));
    assert_eq!(
        (pass["stores"].as_u64(), pass["added"].as_u64()),
        (Some(1), Some(1)),
        "{what}: {pass}"
    );
}

/// A line appended to a transcript while the daemon runs (or a note to the
/// notes file) is read by a pass over that file alone: the file event
/// names it, so the daemon does not walk every store (at 10 GB of history,
/// 31,000 stats and as many rows compared per write an agent makes).
#[test]
fn the_daemon_reads_an_appended_transcript_without_walking_every_store() {
    use crate::sync::{Reap, wait_for};
    use std::time::Duration;

    let home = TestHome::seeded();
    // The notes file is there from the start (a file made later is
    // watched from a tick after, which walks).
    home.ok(&["remember", "the heron build pins clang 17"]);
    let _daemon = Reap(home.spawn_serve());
    // Its first pass walks and reads every store.
    let first = wait_for(Duration::from_secs(60), || last_pass_adding(&home))
        .unwrap_or_else(|| panic!("the daemon's first pass never came"));
    let stores = first["stores"].as_u64().expect("stores");
    assert!(stores > 3, "{first}");
    std::fs::remove_file(home.cairn_home().join("index-pass.json")).expect("rm");
    append_line(&home, "the kestrel cache is warmed at boot");
    assert_read_alone(&home, "the appended line");
    let hits = home.search("kestrel", &[]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    // So is a note appended to the notes file in the node's home (written
    // here as `remember` writes one, so that the daemon is the reader).
    std::fs::remove_file(home.cairn_home().join("index-pass.json")).expect("rm");
    let note = serde_json::json!({"time_ms": 1_767_600_000_000i64, "text": "the heron build also pins lld 17"});
    let mut notes = std::fs::OpenOptions::new()
        .append(true)
        .open(home.cairn_home().join("notes.jsonl"))
        .expect("notes file");
    std::io::Write::write_all(&mut notes, format!("{note}\n").as_bytes()).expect("note");
    assert_read_alone(&home, "the appended note");
    assert_eq!(home.search("lld", &[]).len(), 1);
    // A new transcript is found by a walk of every store.
    std::fs::remove_file(home.cairn_home().join("index-pass.json")).expect("rm");
    let sid = "0b7e4f2a-9c1d-4e3b-8a6f-5d2c1b0a9e88";
    let dir = home.path().join(".claude/projects/-home-dev-widgets");
    let line = serde_json::json!({
        "type": "user", "uuid": "u-new-1", "parentUuid": null, "sessionId": sid,
        "timestamp": "2026-01-05T10:00:00.000Z", "cwd": "/home/dev/widgets",
        "message": {"role": "user", "content": "the osprey queue replays at noon"}
    });
    std::fs::write(dir.join(format!("{sid}.jsonl")), format!("{line}\n")).expect("new");
    let pass = wait_for(Duration::from_secs(30), || last_pass_adding(&home))
        .unwrap_or_else(|| panic!("the new transcript was never read"));
    assert_eq!(pass["stores"].as_u64(), Some(stores + 1), "{pass}");
    assert_eq!(home.search("osprey", &[]).len(), 1);
}

/// A database damaged under cairn (pages overwritten, the file still
/// opens): doctor runs SQLite's check, names the file and what it found,
/// and says how to rebuild it; following that fix gives a whole database
/// with the same answers.
#[test]
fn doctor_names_a_damaged_database_and_the_rebuild_works() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let r: serde_json::Value =
        serde_json::from_slice(&home.run(&["doctor", "--json"]).stdout).expect("doctor JSON");
    assert_eq!(checks(&r, "database")[0]["level"], "ok", "{r}");
    let question = [
        "search",
        "--no-refresh",
        "--json",
        "--",
        "why did we pin hyper",
    ];
    let before = home.json(&question);
    assert!(
        before["hits"].as_array().is_some_and(|h| !h.is_empty()),
        "{before}"
    );
    let db = home.cairn_home().join("cairn.db");
    // The full-text index's root page: opening never reads it, every
    // word search does.
    let (root, page): (usize, usize) = {
        let conn = rusqlite::Connection::open(&db).expect("open db");
        conn.query_row(
            "SELECT rootpage, (SELECT page_size FROM pragma_page_size())
             FROM sqlite_master WHERE name = 'fts_data'",
            [],
            |r| Ok((r.get::<_, u32>(0)? as usize, r.get::<_, u32>(1)? as usize)),
        )
        .expect("fts_data's root page")
    };
    let mut bytes = std::fs::read(&db).expect("read db");
    bytes[(root - 1) * page..root * page].fill(0xA5);
    std::fs::write(&db, &bytes).expect("damage");
    let out = home.run(&["doctor", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let check = checks(&r, "database")[0];
    assert_eq!(check["level"], "problem", "{r}");
    let summary = check["summary"].as_str().unwrap_or("");
    assert!(
        summary.contains(&db.display().to_string()) && summary.contains("damaged"),
        "{r}"
    );
    // A search that meets the damage says so and where to look.
    let found = home.run(&question);
    assert_eq!(found.status.code(), Some(2));
    let said = String::from_utf8_lossy(&found.stderr);
    assert!(
        said.contains("damaged") && said.contains("cairn doctor"),
        "{said}"
    );
    let fix = check["fix"].as_str().unwrap_or("");
    assert!(
        fix.contains("aside") && fix.contains("`cairn index`"),
        "{r}"
    );
    // The fix, as a user follows it.
    std::fs::rename(&db, db.with_extension("db.damaged")).expect("move aside");
    home.ok(&["index", "--quiet"]);
    let r: serde_json::Value =
        serde_json::from_slice(&home.run(&["doctor", "--json"]).stdout).expect("doctor JSON");
    assert_eq!(checks(&r, "database")[0]["level"], "ok", "{r}");
    assert_eq!(
        home.json(&question)["hits"],
        before["hits"],
        "the same answers"
    );
}
