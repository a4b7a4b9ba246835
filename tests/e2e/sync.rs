//! Two real `cairn serve` processes in temp homes on 127.0.0.1, paired with
//! `cairn pair` / `cairn pair CODE`: history on one becomes searchable on
//! the other, a line appended while both run arrives within a deadline,
//! `cairn sync`, `cairn peers` and `cairn status` report it. Every child is
//! killed by a guard so a failing test leaves nothing running.

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) use crate::nat_hub::{NatHub, ip};
use crate::util::{TestHome, all_bytes_under, contains, planted_secrets};

// Generous: the deadline only bounds a failing wait, and a loaded 2-core CI
// machine can miss one 30 s periodic round. Speed is measured by
// `cairn-bench sync`, never asserted here.
pub(crate) const DEADLINE: Duration = Duration::from_secs(90);

/// Kills the child (if still running) when dropped.
pub(crate) struct Reap(pub(crate) Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A test machine: a temp home and the host name its commands run under.
pub(crate) struct Machine {
    pub(crate) home: TestHome,
    pub(crate) name: &'static str,
    /// Network namespace every command runs in, if any.
    pub(crate) netns: Option<String>,
}

impl Machine {
    pub(crate) fn new(home: TestHome, name: &'static str) -> Machine {
        Machine {
            home,
            name,
            netns: None,
        }
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.home.cmd(args);
        if let Some(ns) = &self.netns {
            // Same environment, run through `ip netns exec NS cairn ARGS`.
            let mut wrapped = Command::new("ip");
            wrapped
                .args(["netns", "exec", ns])
                .arg(crate::util::cairn_bin())
                .args(args)
                .env_clear()
                .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
                .current_dir(self.home.path());
            c = wrapped;
        }
        c.env("HOSTNAME", self.name);
        c
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().expect("run cairn");
        assert!(
            out.status.success(),
            "{}: cairn {args:?} failed\nstdout: {}\nstderr: {}",
            self.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"))
    }

    /// Hits for `query`, answered from the index as it is.
    pub(crate) fn search(&self, query: &str) -> Vec<serde_json::Value> {
        let args = ["search", "--json", "--no-refresh", "--", query];
        let out = crate::util::search_output(&args, self.cmd(&args).output().expect("run cairn"));
        let v: serde_json::Value = serde_json::from_str(&out).expect("search JSON");
        v["hits"].as_array().cloned().unwrap_or_default()
    }

    /// Starts `cairn serve --listen ADDR` and waits (bounded) for its state file.
    pub(crate) fn serve(&self, listen: &str) -> (Reap, String) {
        let child = self.spawn_serve(listen);
        let addr = wait_for(DEADLINE, || {
            let v = self.json(&["status", "--json"]);
            v["listen_addr"].as_str().map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("{}: cairn serve never reported its address", self.name));
        (child, addr)
    }

    /// Starts `cairn serve` without waiting for it to listen.
    pub(crate) fn spawn_serve(&self, listen: &str) -> Reap {
        let child = self
            .cmd(&["serve", "--listen", listen])
            .env(
                "CAIRN_LOG",
                "info,cairn_node::sync=debug,cairn_node::daemon=debug",
            )
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.home.path().join("serve.log"))
                    .map_or_else(|_| Stdio::null(), Stdio::from),
            )
            .spawn()
            .expect("spawn cairn serve");
        Reap(child)
    }
}

/// Polls `f` with growing pauses until it returns `Some`, or `None` at the deadline.
pub(crate) fn wait_for<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(20);
    while start.elapsed() < deadline {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(250));
    }
    None
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("probe a free port")
        .port()
}

/// Machine A with the seeded history indexed, an empty machine B, and
/// how many records A holds.
pub(crate) fn seeded_and_empty() -> (Machine, Machine, u64) {
    let a = Machine::new(TestHome::seeded(), "fixture-laptop");
    let b = Machine::new(TestHome::empty(), "beta");
    a.ok(&["index", "--quiet"]);
    let a_records = a.json(&["status", "--json"])["records"]
        .as_u64()
        .expect("records");
    assert!(a_records > 0);
    (a, b, a_records)
}

/// Pairs `a` (inviting on `listen`) with `b` through the real commands.
pub(crate) fn pair(a: &Machine, b: &Machine, listen: &str) {
    let mut child = a
        .cmd(&["pair", "--listen", listen, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let mut inviter = Reap(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(DEADLINE).expect("the pairing code line");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code JSON");
    let code = v["code"].as_str().expect("code").to_owned();
    let joined = b.json(&["pair", &code, "--json"]);
    assert_eq!(joined["paired"]["name"], a.name);
    let exited = wait_for(DEADLINE, || inviter.0.try_wait().ok().flatten());
    assert!(
        exited.is_some_and(|s| s.success()),
        "the inviter exits after pairing"
    );
}

pub(crate) fn widgets_transcript(home: &TestHome) -> PathBuf {
    home.path()
        .join(".claude/projects/-home-dev-widgets/d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44.jsonl")
}

pub(crate) fn claude_line(session: &str, uuid: &str, text: &str) -> String {
    serde_json::json!({
        "type": "user",
        "uuid": uuid,
        "parentUuid": null,
        "sessionId": session,
        "timestamp": "2026-01-04T10:00:00.000Z",
        "cwd": "/home/dev/widgets",
        "message": {"role": "user", "content": text}
    })
    .to_string()
}

#[test]
fn two_serve_daemons_pair_and_replicate_within_seconds() {
    // The seeded home's config names the machine.
    let (a, b, a_records) = seeded_and_empty();

    // A invites on the port its daemon will then listen on.
    let port = free_port();
    let a_listen = format!("127.0.0.1:{port}");
    pair(&a, &b, &a_listen);
    let (_a_serve, a_addr) = a.serve(&a_listen);
    assert_eq!(a_addr, a_listen);
    let (_b_serve, b_addr) = b.serve("127.0.0.1:0");
    assert!(b_addr.starts_with("127.0.0.1:"), "{b_addr}");

    // B's daemon dials A at once and pulls A's whole history.
    let synced = wait_for(DEADLINE, || {
        let n = b.json(&["status", "--json"])["records"].as_u64()?;
        (n >= a_records).then_some(n)
    });
    assert_eq!(synced, Some(a_records), "B holds exactly A's records");
    let hits = b.search("timezone");
    assert!(!hits.is_empty(), "A's fixture history is searchable on B");
    assert!(hits.iter().all(|h| h["machine"] == a.name), "{hits:?}");
    let machine = b.json(&[
        "search",
        "--json",
        "--no-refresh",
        "--machine",
        a.name,
        "--",
        "timezone",
    ]);
    assert!(!machine["hits"].as_array().expect("hits").is_empty());

    // A line appended on A while both run is searchable on B within seconds.
    let path = widgets_transcript(&a.home);
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    let started = Instant::now();
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open transcript");
        writeln!(
            f,
            "{}",
            claude_line(
                sid,
                "u-sync-1",
                "we chose the okapi scheduler for nightly builds"
            )
        )
        .expect("append");
    }
    let arrived = wait_for(DEADLINE, || {
        (!b.search("okapi").is_empty()).then(Instant::now)
    });
    let Some(arrived) = arrived else {
        dump_logs(&[&a, &b]);
        panic!("the new line never reached B");
    };
    let latency = arrived.duration_since(started);
    eprintln!("propagation latency A -> B: {latency:?}");
    if latency > Duration::from_secs(5) {
        for m in [&a, &b] {
            let log = std::fs::read_to_string(m.home.path().join("serve.log")).unwrap_or_default();
            eprintln!("--- {} serve log ---\n{log}", m.name);
        }
    }
    // How fast is measured by `cairn-bench sync` (propagation p50/p95), not asserted here.

    // A note remembered beside the running daemon goes out too.
    a.ok(&[
        "remember",
        "--project",
        "/home/dev/widgets",
        "the tapir cache is warmed at boot",
    ]);
    let tapir = wait_for(DEADLINE, || {
        let h = b.search("tapir");
        (!h.is_empty()).then_some(h)
    });
    assert!(tapir.is_some(), "a remembered note reached B");

    // The peer tables note the sessions; nothing is left behind.
    let peers = b.json(&["peers", "--json"]);
    let pa = &peers["peers"][0];
    assert_eq!(pa["name"], a.name);
    assert!(pa["last_sync_ms"].is_i64(), "{pa}");
    assert!(
        pa["records_received"]
            .as_u64()
            .is_some_and(|n| n > a_records)
    );
    let st = a.json(&["status", "--json"]);
    assert_eq!(st["peers"], 1);
    // A learned B's listening address when B dialed it.
    let peers = a.json(&["peers", "--json"]);
    assert_eq!(
        peers["peers"][0]["last_addr"].as_str(),
        Some(b_addr.as_str())
    );

    // A one-off `cairn sync` next to the daemon: already in step.
    let v = b.json(&["sync", "--json"]);
    let rep = &v["peers"][0]["report"];
    assert_eq!(rep["records_received"], 0, "{v}");
    assert_eq!(rep["behind_after"], 0, "{v}");
    assert_eq!(
        b.json(&["peers", "--json"])["peers"][0]["behind"],
        0,
        "behind is known after a session"
    );

    // Unpairing on A takes effect in its running daemon: B is refused.
    a.ok(&["unpair", "beta"]);
    let refused = wait_for(DEADLINE, || {
        let out = b.cmd(&["sync", "--json"]).output().ok()?;
        (!out.status.success()).then_some(out)
    })
    .expect("B's sync is refused once A unpaired it");
    let v: serde_json::Value = serde_json::from_slice(&refused.stdout).expect("sync JSON");
    assert!(v["peers"][0]["error"].is_string(), "{v}");
    assert_eq!(v["peers"][0]["status"], "refused", "{v}");

    // No planted secret from A's fixtures reached B's files.
    for (path, bytes) in all_bytes_under(&b.home.cairn_home()) {
        for s in planted_secrets() {
            assert!(
                !contains(&bytes, s.as_bytes()),
                "planted secret {s:?} in {}",
                path.display()
            );
        }
    }
}

/// Shorter than the daemons' 30 s periodic round: what arrives within it
/// came from the round a pairing kicks, not from the timer.
const FIRST_ROUND: Duration = Duration::from_secs(20);

#[test]
fn pairing_beside_two_running_daemons_starts_the_first_round_on_both_sides() {
    let a = Machine::new(TestHome::seeded(), "fixture-laptop");
    let b = Machine::new(TestHome::empty(), "beta");
    a.ok(&["index", "--quiet"]);
    b.ok(&["remember", "the capybara cluster runs in eu-west"]);
    let a_records = records_of(&a);
    // Both daemons run, with nothing paired, before the pairing.
    let (_a_serve, _) = a.serve("127.0.0.1:0");
    let (_b_serve, _) = b.serve("127.0.0.1:0");
    let paired_at = Instant::now();
    pair(&a, &b, &format!("127.0.0.1:{}", free_port()));
    // Each side's daemon sees the new peer and syncs at once, so each side
    // holds the other's records long before the periodic round.
    let on_b = wait_for(FIRST_ROUND, || {
        (records_of(&b) > a_records).then(Instant::now)
    });
    let on_a = wait_for(FIRST_ROUND, || {
        (!a.search("capybara").is_empty()).then(Instant::now)
    });
    if on_a.is_none() || on_b.is_none() {
        for m in [&a, &b] {
            let log = std::fs::read_to_string(m.home.path().join("serve.log")).unwrap_or_default();
            eprintln!("--- {} serve log ---\n{log}", m.name);
        }
    }
    let on_b = on_b.expect("A's history reached B after pairing, without a periodic round");
    let on_a = on_a.expect("B's note reached A after pairing, without a periodic round");
    eprintln!(
        "pairing -> first records: on B {:?}, on A {:?}",
        on_b.duration_since(paired_at),
        on_a.duration_since(paired_at)
    );
    assert!(
        !b.search("timezone").is_empty(),
        "A's fixture history is searchable on B"
    );
}

#[test]
fn cairn_sync_with_a_peer_offline_answers_quickly_and_says_what_it_tried() {
    let a = Machine::new(TestHome::empty(), "alpha");
    let b = Machine::new(TestHome::empty(), "beta");
    a.ok(&["remember", "the heron gateway is retired"]);
    // Paired, then A goes offline: nothing of A listens anywhere.
    pair(&a, &b, &format!("127.0.0.1:{}", free_port()));
    let started = Instant::now();
    let out = b.cmd(&["sync", "--json"]).output().expect("run cairn sync");
    let took = started.elapsed();
    eprintln!("cairn sync with its only peer offline answered in {took:?}");
    assert!(!out.status.success(), "no peer could be synced");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sync JSON");
    let p = &v["peers"][0];
    assert_eq!(p["name"], "alpha", "{v}");
    assert_eq!(p["status"], "unreachable", "{v}");
    let tried = p["tried"].as_array().expect("addresses tried");
    assert!(
        !tried.is_empty()
            && tried
                .iter()
                .all(|t| t.as_str().is_some_and(|t| t.starts_with("127.0.0.1:"))),
        "{v}"
    );
    assert!(v["elapsed_ms"].is_u64(), "{v}");
    // The text form names the state, the addresses and when it was last seen.
    let out = b.cmd(&["sync"]).output().expect("run cairn sync");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("alpha") && text.contains("unreachable (tried 127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("last seen"), "{text}");
}

#[test]
fn another_machine_at_a_peers_address_is_named_a_stranger_not_the_peer() {
    let a = Machine::new(TestHome::empty(), "alpha");
    let b = Machine::new(TestHome::empty(), "beta");
    let c = Machine::new(TestHome::empty(), "gamma");
    // B keeps the port A's daemon listens on as A's address.
    let (a_serve, a_addr) = a.serve("127.0.0.1:0");
    pair(&a, &b, &format!("127.0.0.1:{}", free_port()));
    // A goes away; another machine's daemon now answers at that address.
    drop(a_serve);
    let (_c_serve, c_addr) = c.serve(&a_addr);
    assert_eq!(c_addr, a_addr);
    let out = b.cmd(&["sync", "--json"]).output().expect("run cairn sync");
    assert!(!out.status.success(), "no peer could be synced");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sync JSON");
    let p = &v["peers"][0];
    assert_eq!(p["status"], "refused", "{v}");
    let error = p["error"].as_str().expect("error");
    assert!(
        error.starts_with(&format!(
            "alpha is not at {a_addr}: a machine with another key"
        )),
        "{v}"
    );
    // The text form does not call it alpha's refusal.
    let out = b.cmd(&["sync"]).output().expect("run cairn sync");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("alpha is not at {a_addr}")) && !text.contains("refused"),
        "{text}"
    );
    let out = b
        .cmd(&["doctor", "--json"])
        .output()
        .expect("run cairn doctor");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    let peer: Vec<&serde_json::Value> = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["area"] == "peer")
        .collect();
    let summary = peer[0]["summary"].as_str().expect("summary");
    assert!(summary.contains(&format!("is not at {a_addr}")), "{r}");
    assert!(
        peer[0]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("set up again")),
        "{r}"
    );
}

#[test]
fn a_pairing_code_may_name_a_host_and_the_peer_is_then_dialed_by_name() {
    let a = Machine::new(TestHome::empty(), "alpha");
    let b = Machine::new(TestHome::empty(), "beta");
    a.ok(&["remember", "the marmot index is rebuilt weekly"]);
    let (_a_serve, a_addr) = a.serve("127.0.0.1:0");
    let a_port = a_addr.rsplit(':').next().expect("port");
    // The code names `localhost` instead of an address.
    let mut child = a
        .cmd(&[
            "pair",
            "--listen",
            "127.0.0.1:0",
            "--advertise",
            "localhost:0",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let _inviter = Reap(child);
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("code line");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code JSON");
    let addrs = v["addrs"].as_array().expect("addrs");
    assert_eq!(addrs.len(), 1, "{v}");
    assert!(
        addrs[0]
            .as_str()
            .is_some_and(|s| s.starts_with("localhost:")),
        "{v}"
    );
    b.json(&["pair", v["code"].as_str().expect("code"), "--json"]);
    // B keeps the name, pointing at A's daemon.
    let peers = b.json(&["peers", "--json"]);
    assert_eq!(
        peers["peers"][0]["hosts"],
        serde_json::json!([format!("localhost:{a_port}")]),
        "{peers}"
    );
    // Forget every numeric address: B still finds A by name.
    cairn_node::sync::peers::PeerTable::modify(&b.home.cairn_home(), |t| {
        for p in t.peers_mut() {
            p.addresses.clear();
            p.last_addr = None;
        }
        Ok(())
    })
    .expect("forget B's numeric addresses");
    // (A's daemon takes up to a second to allow B's key after the pairing.)
    let synced = wait_for(DEADLINE, || {
        let out = b.cmd(&["sync", "--json"]).output().ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["peers"][0]["status"] == "synced").then_some(v)
    });
    assert!(synced.is_some(), "B synced with A, dialed by name");
    assert!(!b.search("marmot").is_empty(), "A's note arrived by name");
}

#[test]
fn cairn_sync_without_peers_or_listeners_fails_readably() {
    let a = Machine::new(TestHome::empty(), "alpha");
    let out = a.cmd(&["sync"]).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no paired machines"), "{err}");
}

pub(crate) fn records_of(m: &Machine) -> u64 {
    m.json(&["status", "--json"])["records"]
        .as_u64()
        .expect("records")
}

/// Kills the daemon with SIGKILL (no shutdown path runs) and reaps it.
fn kill9(mut child: Reap) {
    let _ = child.0.kill();
    let _ = child.0.wait();
}

/// Records in the database at `db`, read without opening a node (a node's
/// open may wait on a writer's lock, and the writer may be stopped).
fn stored_records(db: &std::path::Path) -> Option<u64> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    conn.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))
        .ok()
        .and_then(|n| u64::try_from(n).ok())
}

/// Lets a daemon run in slices of `slice` and, between slices, stops it
/// (SIGSTOP) and counts the records in `db`; once there are `target`, kills
/// it (SIGKILL) while it is still stopped. The kill lands at the count just
/// read however fast the catch-up runs and however loaded the machine is,
/// so it lands mid-way. Returns that count, or `None` at the deadline.
fn kill9_at(child: Reap, db: &std::path::Path, target: u64, slice: Duration) -> Option<u64> {
    use nix::sys::signal::{Signal, kill};
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).expect("pid"));
    let signal = |sig: Signal| {
        let _ = kill(pid, sig);
    };
    let start = Instant::now();
    let mut reached = None;
    while start.elapsed() < DEADLINE {
        signal(Signal::SIGCONT);
        std::thread::sleep(slice);
        signal(Signal::SIGSTOP);
        if let Some(n) = stored_records(db).filter(|n| *n >= target) {
            reached = Some(n);
            break;
        }
    }
    kill9(child);
    reached
}

#[test]
fn kill_9_of_the_receiver_mid_catch_up_loses_and_duplicates_nothing() {
    const TOTAL: u64 = 40_000;
    let a = Machine::new(TestHome::empty(), "alpha");
    let b = Machine::new(TestHome::empty(), "beta");
    // A's backlog: one notes session of 40,000 distinct records (~300 B each).
    let notes = a.home.cairn_home().join("notes.jsonl");
    std::fs::create_dir_all(notes.parent().expect("parent")).expect("mkdir");
    let mut body = String::new();
    for i in 0..TOTAL {
        let line = serde_json::json!({
            "time_ms": 1_767_225_600_000i64 + i as i64,
            "project": "/big",
            "text": format!("backlog item {i:06} {}", "filler words for size ".repeat(12)),
        });
        body.push_str(&line.to_string());
        body.push('\n');
    }
    std::fs::write(&notes, body).expect("write notes");
    a.ok(&["index", "--quiet"]);
    assert_eq!(records_of(&a), TOTAL);

    let port = free_port();
    let a_listen = format!("127.0.0.1:{port}");
    pair(&a, &b, &a_listen);
    let (_a_serve, _) = a.serve(&a_listen);

    // Three times: start B, let the catch-up get going, kill -9 it mid-way.
    let b_db = b.home.cairn_home().join("cairn.db");
    let mut seen = 0;
    let mut mid_way_kills = 0;
    for round in 0..3 {
        let b_serve = b.spawn_serve("127.0.0.1:0");
        // Kill at a different depth each time: after the first batch, then later.
        let target = seen + 1 + round * 4_000;
        let progressed = kill9_at(b_serve, &b_db, target, Duration::from_millis(15))
            .unwrap_or_else(|| panic!("round {round}: B made no progress"));
        let after = records_of(&b);
        assert!(after >= progressed, "committed batches survive a kill -9");
        assert!(after <= TOTAL, "never more than A holds: {after}");
        eprintln!("round {round}: killed at {after}/{TOTAL} records");
        if after < TOTAL {
            mid_way_kills += 1;
        }
        seen = after;
    }
    assert!(
        mid_way_kills >= 2,
        "kills landed mid catch-up: {mid_way_kills}"
    );

    // A last start finishes the catch-up.
    let (_b_serve, _) = b.serve("127.0.0.1:0");
    let done = wait_for(Duration::from_secs(120), || {
        let n = records_of(&b);
        (n >= TOTAL).then_some(n)
    });
    assert_eq!(done, Some(TOTAL), "every record present exactly once");
    // The session holds each item exactly once, by content.
    let show = b.json(&["show", "--json", "--limit", "100000", "notes:/big"]);
    let recs = show["records"].as_array().expect("records");
    assert_eq!(recs.len() as u64, TOTAL);
    let distinct: std::collections::HashSet<&str> =
        recs.iter().filter_map(|r| r["text"].as_str()).collect();
    assert_eq!(distinct.len() as u64, TOTAL, "no duplicate records");
    let hits = b.search("\"backlog item 012345\"");
    assert_eq!(hits.len(), 1, "{hits:?}");
    // Nothing left to move.
    let v = b.json(&["sync", "--json"]);
    assert_eq!(v["peers"][0]["report"]["records_received"], 0, "{v}");
}

/// Two network namespaces joined by a veth pair, deleted on drop.
struct NetnsPair {
    a: String,
    b: String,
    a_ip: String,
    b_ip: String,
}

impl NetnsPair {
    /// Creates the namespaces, or says why it cannot.
    fn create() -> Result<NetnsPair, String> {
        crate::nat_hub::require_root()?;
        let tag = std::process::id() % 100_000;
        let net = std::process::id() % 250 + 1;
        let pair = NetnsPair {
            a: format!("cairn-a-{tag}"),
            b: format!("cairn-b-{tag}"),
            a_ip: format!("10.231.{net}.1"),
            b_ip: format!("10.231.{net}.2"),
        };
        let (va, vb) = (format!("cva{tag}"), format!("cvb{tag}"));
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), pair.a.clone()],
            vec!["netns".into(), "add".into(), pair.b.clone()],
            vec![
                "link".into(),
                "add".into(),
                va.clone(),
                "type".into(),
                "veth".into(),
                "peer".into(),
                "name".into(),
                vb.clone(),
            ],
            vec![
                "link".into(),
                "set".into(),
                va.clone(),
                "netns".into(),
                pair.a.clone(),
            ],
            vec![
                "link".into(),
                "set".into(),
                vb.clone(),
                "netns".into(),
                pair.b.clone(),
            ],
        ];
        let mut all = steps;
        for (ns, dev, ip) in [
            (pair.a.clone(), va, pair.a_ip.clone()),
            (pair.b.clone(), vb, pair.b_ip.clone()),
        ] {
            all.push(vec![
                "-n".into(),
                ns.clone(),
                "addr".into(),
                "add".into(),
                format!("{ip}/24"),
                "dev".into(),
                dev.clone(),
            ]);
            all.push(vec![
                "-n".into(),
                ns.clone(),
                "link".into(),
                "set".into(),
                dev,
                "up".into(),
            ]);
            all.push(vec![
                "-n".into(),
                ns,
                "link".into(),
                "set".into(),
                "lo".into(),
                "up".into(),
            ]);
        }
        for step in all {
            let out = Command::new("ip")
                .args(&step)
                .output()
                .map_err(|e| format!("cannot run `ip`: {e}"))?;
            if !out.status.success() {
                // Drop removes whatever was made.
                return Err(format!(
                    "`ip {}` failed: {}",
                    step.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(pair)
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it (and its peer).
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

#[test]
fn two_daemons_in_separate_network_namespaces_over_veth() {
    let ns = match NetnsPair::create() {
        Ok(ns) => ns,
        Err(why) => {
            eprintln!(
                "\n!!!!! SKIPPED two_daemons_in_separate_network_namespaces_over_veth: {why}.\n\
                 !!!!! Run the e2e tests as root with iproute2 to cover real network namespaces.\n"
            );
            return;
        }
    };
    let mut a = Machine::new(TestHome::seeded(), "fixture-laptop");
    let mut b = Machine::new(TestHome::empty(), "beta");
    a.netns = Some(ns.a.clone());
    b.netns = Some(ns.b.clone());
    a.ok(&["index", "--quiet"]);
    let a_records = records_of(&a);

    // Both ends inside namespaces; nothing dials from the host namespace.
    let a_listen = format!("{}:7878", ns.a_ip);
    let b_listen = format!("{}:7878", ns.b_ip);
    pair(&a, &b, &a_listen);
    let (_a_serve, a_addr) = a.serve(&a_listen);
    let (_b_serve, b_addr) = b.serve(&b_listen);
    assert_eq!(
        (a_addr.as_str(), b_addr.as_str()),
        (a_listen.as_str(), b_listen.as_str())
    );

    let synced = wait_for(DEADLINE, || {
        let n = records_of(&b);
        (n >= a_records).then_some(n)
    });
    assert_eq!(synced, Some(a_records), "B caught up across the veth link");
    let path = widgets_transcript(&a.home);
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open transcript");
        writeln!(
            f,
            "{}",
            claude_line(
                "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44",
                "u-netns-1",
                "the capybara relay lives behind the veth link"
            )
        )
        .expect("append");
    }
    // A pushes on change; if that push is lost, B's own periodic round
    // (every 30 s) still pulls it, so allow for one such round.
    let hits = wait_for(Duration::from_secs(90), || {
        let h = b.search("capybara");
        (!h.is_empty()).then_some(h)
    });
    let Some(hits) = hits else {
        for m in [&a, &b] {
            let log = std::fs::read_to_string(m.home.path().join("serve.log")).unwrap_or_default();
            eprintln!("--- {} serve log ---\n{log}", m.name);
        }
        panic!("the new line did not cross namespaces");
    };
    assert!(hits.iter().all(|h| h["machine"] == a.name));
    // A learned B's namespace address when B dialed it.
    let peers = a.json(&["peers", "--json"]);
    assert_eq!(
        peers["peers"][0]["last_addr"].as_str(),
        Some(b_listen.as_str())
    );
}

/// Pairs `joiner` with the code `inviter` prints while listening on
/// `listen` and advertising `advertise`.
fn pair_advertised(inviter: &Machine, joiner: &Machine, listen: &str, advertise: &str) {
    let mut child = inviter
        .cmd(&[
            "pair",
            "--listen",
            listen,
            "--advertise",
            advertise,
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let mut guard = Reap(child);
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("code line");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code JSON");
    let joined = joiner.json(&["pair", v["code"].as_str().expect("code"), "--json"]);
    assert_eq!(joined["paired"]["name"], inviter.name);
    let exited = wait_for(DEADLINE, || guard.0.try_wait().ok().flatten());
    assert!(
        exited.is_some_and(|s| s.success()),
        "the inviter exits after pairing"
    );
}

pub(crate) fn dump_logs(ms: &[&Machine]) {
    for m in ms {
        let log = std::fs::read_to_string(m.home.path().join("serve.log")).unwrap_or_default();
        eprintln!("--- {} serve log ---\n{log}", m.name);
    }
}

#[test]
fn laptops_behind_separate_nats_sync_through_a_hub() {
    let mut net = match NatHub::create() {
        Ok(n) => n,
        Err(why) => {
            eprintln!(
                "\n!!!!! SKIPPED laptops_behind_separate_nats_sync_through_a_hub: {why}.\n\
                 !!!!! Run the e2e tests as root with iproute2 and iptables to cover NAT.\n"
            );
            return;
        }
    };
    let mut hub = Machine::new(TestHome::empty(), "hub");
    let mut l1 = Machine::new(TestHome::seeded(), "fixture-laptop");
    let mut l2 = Machine::new(TestHome::empty(), "laptop-two");
    hub.netns = Some(net.hub.clone());
    l1.netns = Some(net.laptops[0].clone());
    l2.netns = Some(net.laptops[1].clone());
    l1.ok(&["index", "--quiet"]);
    let l1_records = records_of(&l1);
    // Every daemon listens everywhere in its own namespace.
    let (_hub_serve, _) = hub.serve("0.0.0.0:7878");
    let (_l1_serve, _) = l1.serve("0.0.0.0:7878");
    let (_l2_serve, _) = l2.serve("0.0.0.0:7878");

    // Each laptop pairs against the hub's code: the direction a NAT allows.
    let advertise = format!("{}:7879", net.hub_ip);
    let paired = Instant::now();
    pair_advertised(&hub, &l1, "0.0.0.0:7879", &advertise);
    pair_advertised(&hub, &l2, "0.0.0.0:7879", &advertise);

    // l1's history reaches l2 through the hub; the laptops never meet.
    let arrived = wait_for(Duration::from_secs(90), || {
        (records_of(&l2) >= l1_records).then(Instant::now)
    });
    let Some(arrived) = arrived else {
        dump_logs(&[&hub, &l1, &l2]);
        panic!("l1's records never reached l2 through the hub");
    };
    eprintln!(
        "NAT/hub: pairing -> all of l1's records on l2: {:?}",
        arrived.duration_since(paired)
    );
    let hits = l2.search("timezone");
    assert!(
        !hits.is_empty() && hits.iter().all(|h| h["machine"] == l1.name),
        "{hits:?}"
    );

    // An append on l1 arrives on l2 with no `cairn sync` run by hand.
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    let append = |uuid: &str, text: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(widgets_transcript(&l1.home))
            .expect("open transcript");
        writeln!(f, "{}", claude_line(sid, uuid, text)).expect("append");
    };
    let started = Instant::now();
    append("u-nat-1", "the pangolin gateway speaks only http2");
    let Some(t) = wait_for(Duration::from_secs(90), || {
        (!l2.search("pangolin").is_empty()).then(Instant::now)
    }) else {
        dump_logs(&[&hub, &l1, &l2]);
        panic!("the appended line never crossed the hub");
    };
    eprintln!(
        "NAT/hub: append on l1 -> searchable on l2: {:?}",
        t.duration_since(started)
    );

    // l1 moves to another address; sync resumes by itself.
    let new_ip = net.lans[0].1.replace(".1.2", ".1.77");
    net.readdress(0, &new_ip).expect("readdress l1");
    let started = Instant::now();
    append("u-nat-2", "the quetzal cache moved to the new subnet");
    let Some(t) = wait_for(Duration::from_secs(120), || {
        (!l2.search("quetzal").is_empty()).then(Instant::now)
    }) else {
        dump_logs(&[&hub, &l1, &l2]);
        panic!("sync did not resume after l1's address changed");
    };
    eprintln!(
        "NAT/hub: after l1's address change, append -> on l2: {:?}",
        t.duration_since(started)
    );
}

/// How often `line` appears in `m`'s daemon log.
fn log_count(m: &Machine, line: &str) -> usize {
    std::fs::read_to_string(m.home.path().join("serve.log"))
        .unwrap_or_default()
        .matches(line)
        .count()
}

#[test]
fn a_laptop_back_on_the_network_dials_its_hub_at_once_whatever_its_backoff() {
    let mut net = match NatHub::create() {
        Ok(n) => n,
        Err(why) => {
            eprintln!(
                "\n!!!!! SKIPPED a_laptop_back_on_the_network_dials_its_hub_at_once: {why}.\n\
                 !!!!! Run the e2e tests as root with iproute2 and iptables to cover it.\n"
            );
            return;
        }
    };
    let mut hub = Machine::new(TestHome::empty(), "hub");
    let mut l1 = Machine::new(TestHome::seeded(), "fixture-laptop");
    hub.netns = Some(net.hub.clone());
    l1.netns = Some(net.laptops[0].clone());
    l1.ok(&["index", "--quiet"]);
    let l1_records = records_of(&l1);
    let (_hub_serve, _) = hub.serve("0.0.0.0:7878");
    let (_l1_serve, _) = l1.serve("0.0.0.0:7878");
    pair_advertised(&hub, &l1, "0.0.0.0:7879", &format!("{}:7879", net.hub_ip));
    if wait_for(Duration::from_secs(90), || {
        (records_of(&hub) >= l1_records).then_some(())
    })
    .is_none()
    {
        dump_logs(&[&hub, &l1]);
        panic!("l1's records never reached the hub");
    }

    // The laptop goes offline long enough for its dials to back off.
    net.unplug(0).expect("unplug l1");
    let before = log_count(&l1, "peer unreachable");
    if wait_for(Duration::from_secs(150), || {
        (log_count(&l1, "peer unreachable") >= before + 5).then_some(())
    })
    .is_none()
    {
        dump_logs(&[&hub, &l1]);
        panic!("l1 never noticed the hub was out of reach");
    }
    // Five failures in a row: the next dial is about 16 s away...
    let changes = log_count(&l1, "network changed");
    let new_ip = net.lans[0].1.replace(".1.2", ".1.78");
    net.plug(0, &new_ip).expect("plug l1 back");
    let back = Instant::now();
    // ...but the daemon sees its own addresses change and dials now.
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(widgets_transcript(&l1.home))
            .expect("open transcript");
        writeln!(
            f,
            "{}",
            claude_line(sid, "u-back-1", "the axolotl queue drains on reconnect")
        )
        .expect("append");
    }
    let Some(t) = wait_for(Duration::from_secs(90), || {
        (!hub.search("axolotl").is_empty()).then(Instant::now)
    }) else {
        dump_logs(&[&hub, &l1]);
        panic!("sync did not resume after l1 came back");
    };
    eprintln!(
        "back on the network -> append on the hub: {:?}",
        t.duration_since(back)
    );
    assert!(
        log_count(&l1, "network changed") > changes,
        "l1's daemon did not notice its network change"
    );
}

/// A hub relays a laptop's history to a machine that never paired with
/// it: that machine's `cairn peers` lists the laptop as relayed by the
/// hub, with its key and first sighting; `--refuse-origin` deletes its
/// records there and keeps them out of every later round (new lines
/// included) while the hub still holds them; `--allow-origin` brings them
/// back.
#[test]
fn a_relayed_machine_is_listed_refused_and_allowed_again() {
    let a = Machine::new(TestHome::seeded(), "fixture-laptop");
    let hub = Machine::new(TestHome::empty(), "hub");
    let c = Machine::new(TestHome::empty(), "gamma");
    a.ok(&["index", "--quiet"]);
    let a_records = records_of(&a);
    let hub_listen = format!("127.0.0.1:{}", free_port());
    pair(&hub, &a, &hub_listen);
    pair(&hub, &c, &hub_listen);
    let (_hub_serve, _) = hub.serve(&hub_listen);
    let (_a_serve, _) = a.serve("127.0.0.1:0");
    let (_c_serve, _) = c.serve("127.0.0.1:0");
    if wait_for(DEADLINE, || (records_of(&c) >= a_records).then_some(())).is_none() {
        dump_logs(&[&a, &hub, &c]);
        panic!("A's records never reached C through the hub");
    }
    assert!(!c.search("timezone").is_empty());

    // C lists A as relayed by the hub; the hub, paired with both, lists none.
    let peers = c.json(&["peers", "--json"]);
    let relayed = peers["relayed_origins"].as_array().expect("relayed");
    assert_eq!(relayed.len(), 1, "{peers}");
    let o = &relayed[0];
    assert_eq!(o["name"], a.name, "{o}");
    assert_eq!(o["vouched_by_name"], hub.name, "{o}");
    assert_eq!(o["fingerprint"].as_str().map(str::len), Some(64), "{o}");
    assert!(o["learned_ms"].as_i64().is_some_and(|t| t > 0), "{o}");
    assert!(o["refused_ms"].is_null(), "{o}");
    assert!(o["entries"].as_u64().is_some_and(|n| n >= a_records), "{o}");
    let text = c.ok(&["peers"]);
    assert!(
        text.contains("relayed machines") && text.contains(a.name),
        "{text}"
    );
    let hub_peers = hub.json(&["peers", "--json"]);
    assert_eq!(hub_peers["relayed_origins"], serde_json::json!([]));

    // Refused by name: its records go from C.
    let refused = c.json(&["peers", "--refuse-origin", a.name, "--json"]);
    assert_eq!(
        refused["refused"]["records"].as_u64(),
        Some(a_records),
        "{refused}"
    );
    assert_eq!(records_of(&c), 0);
    assert!(c.search("timezone").is_empty());
    let listed = c.json(&["peers", "--json"]);
    assert!(
        listed["relayed_origins"][0]["refused_ms"].is_i64(),
        "{listed}"
    );
    // A new line on A reaches the hub, never C.
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(widgets_transcript(&a.home))
            .expect("open transcript");
        let line = claude_line(sid, "u-refuse-1", "the okapi relay is refused");
        writeln!(f, "{line}").expect("append");
    }
    if wait_for(DEADLINE, || (!hub.search("okapi").is_empty()).then_some(())).is_none() {
        dump_logs(&[&a, &hub, &c]);
        panic!("the new line never reached the hub");
    }
    let v = c.json(&["sync", "--json"]);
    let rep = &v["peers"][0]["report"];
    assert!(
        rep["refused_origin_logs"].as_u64().is_some_and(|n| n >= 1),
        "{v}"
    );
    assert!(c.search("okapi").is_empty() && c.search("timezone").is_empty());
    assert_eq!(records_of(&c), 0);
    // Unknown names and paired machines are errors that say what to do.
    let out = c
        .cmd(&["peers", "--refuse-origin", "nobody"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no relayed origin matches"), "{err}");
    let out = c
        .cmd(&["peers", "--refuse-origin", "hub"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cairn unpair hub"), "{err}");

    // Allowed again: back at the next round.
    c.ok(&["peers", "--allow-origin", a.name]);
    c.ok(&["sync"]);
    let back = wait_for(DEADLINE, || (!c.search("okapi").is_empty()).then_some(()));
    assert!(back.is_some(), "A's records come back once allowed");
    assert!(!c.search("timezone").is_empty());
}

/// A database rebuilt from scratch (moved aside, as `cairn doctor` says
/// to do with a damaged one) gets back by sync what its paired machines
/// hold: its watermarks went with the old file, so it pulls every log
/// from the start, and the records arrive once.
#[test]
fn a_database_started_anew_gets_its_peers_records_back_by_sync() {
    let (a, b, a_records) = seeded_and_empty();
    let a_listen = format!("127.0.0.1:{}", free_port());
    pair(&a, &b, &a_listen);
    let (_a_serve, _) = a.serve(&a_listen);
    let records = |m: &Machine| m.json(&["status", "--json"])["records"].as_u64();
    let synced = wait_for(DEADLINE, || {
        b.cmd(&["sync", "--json"]).output().ok()?;
        records(&b).filter(|&n| n >= a_records)
    });
    assert_eq!(synced, Some(a_records), "B holds A's records");
    let db = b.home.cairn_home().join("cairn.db");
    std::fs::rename(&db, db.with_extension("db.old")).expect("move aside");
    b.ok(&["index", "--quiet"]);
    assert_eq!(records(&b), Some(0), "a new database");
    let back = wait_for(DEADLINE, || {
        b.cmd(&["sync", "--json"]).output().ok()?;
        records(&b).filter(|&n| n >= a_records)
    });
    assert_eq!(back, Some(a_records), "A's records came back, once each");
    assert!(!b.search("timezone").is_empty(), "and are searchable");
}
