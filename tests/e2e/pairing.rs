//! `cairn pair` in one process and `cairn pair CODE` in another, real QUIC
//! on 127.0.0.1, then `cairn peers` and `cairn unpair` on both homes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::util::TestHome;

const DEADLINE: Duration = Duration::from_secs(30);

/// Kills the child if the test fails before it exits.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `cairn pair --listen 127.0.0.1:0 --json` in `home` and returns the
/// process and the code from its first stdout line (waited for with a deadline).
fn start_inviter(
    home: &TestHome,
    name: &str,
    extra: &[&str],
) -> (Reap, String, String, mpsc::Receiver<String>) {
    let mut args = vec!["pair", "--listen", "127.0.0.1:0", "--json"];
    args.extend_from_slice(extra);
    let mut child = home
        .cmd(&args)
        .env("HOSTNAME", name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let child = Reap(child);
    let first = rx
        .recv_timeout(DEADLINE)
        .expect("cairn pair printed its code line in time");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code line is JSON");
    let code = v["code"].as_str().expect("code").to_owned();
    assert!(code.starts_with("cairn1-"), "{code}");
    assert_eq!(
        v["addrs"][0].as_str().map(|a| a.starts_with("127.0.0.1:")),
        Some(true),
        "{v}"
    );
    let addr = v["addrs"][0].as_str().expect("addr").to_owned();
    (child, code, addr, rx)
}

/// Waits (bounded) for the child to exit and returns whether it succeeded.
fn wait_exit(child: &mut Reap) -> bool {
    let start = Instant::now();
    let mut delay = Duration::from_millis(10);
    while start.elapsed() < DEADLINE {
        if let Some(status) = child.0.try_wait().expect("try_wait") {
            return status.success();
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(200));
    }
    panic!("cairn pair did not exit within {DEADLINE:?}");
}

fn peers(home: &TestHome) -> Vec<serde_json::Value> {
    home.json(&["peers", "--json"])["peers"]
        .as_array()
        .expect("peers array")
        .clone()
}

#[test]
fn pair_two_homes_through_the_cli_then_unpair() {
    let (a, b) = (TestHome::empty(), TestHome::empty());
    let (mut inviter, code, addr, lines) = start_inviter(&a, "alpha", &[]);

    let joined = b
        .cmd(&["pair", &code, "--json"])
        .env("HOSTNAME", "beta")
        .output()
        .expect("run cairn pair CODE");
    assert!(
        joined.status.success(),
        "join failed: {}",
        String::from_utf8_lossy(&joined.stderr)
    );
    let jv: serde_json::Value = serde_json::from_slice(&joined.stdout).expect("join JSON");
    assert_eq!(jv["paired"]["name"], "alpha");

    assert!(
        wait_exit(&mut inviter),
        "the inviter exits successfully after one pairing"
    );
    let done = lines.recv_timeout(DEADLINE).expect("inviter's result line");
    let iv: serde_json::Value = serde_json::from_str(&done).expect("result JSON");
    assert_eq!(iv["paired"]["name"], "beta");

    let (pa, pb) = (peers(&a), peers(&b));
    assert_eq!(pa.len(), 1);
    assert_eq!(pb.len(), 1);
    assert_eq!(pa[0]["name"], "beta");
    assert_eq!(pb[0]["name"], "alpha");
    // Each side's id for the other is the other's own node id.
    let a_id = a.json(&["status", "--json"])["node_id"].clone();
    let b_id = b.json(&["status", "--json"])["node_id"].clone();
    assert_eq!(pb[0]["node_id"], a_id);
    assert_eq!(pa[0]["node_id"], b_id);
    // The joiner remembers where to dial the inviter: the code's address.
    assert_eq!(pb[0]["addresses"][0].as_str(), Some(addr.as_str()));
    assert!(pa[0]["addresses"].as_array().is_some_and(|a| a.is_empty()));

    // The code was single use: a third machine is turned away.
    let c = TestHome::empty();
    let again = c.run(&["pair", &code]);
    assert!(!again.status.success(), "a spent code must not pair");
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("could not reach"), "readable error: {err}");
    assert!(peers(&c).is_empty());

    // Per-peer scope: only some projects go to beta, then all again.
    let out = a.ok(&["scope", "beta", "--project", "/home/dev/acme/"]);
    assert!(out.contains("receives only: /home/dev/acme"), "{out}");
    assert_eq!(peers(&a)[0]["scope"], serde_json::json!(["/home/dev/acme"]));
    a.ok(&["scope", "beta", "--all"]);
    assert!(peers(&a)[0]["scope"].is_null());
    assert!(
        !a.run(&["scope", "beta"]).status.success(),
        "scope needs --project or --all"
    );
    assert!(!a.run(&["scope", "nobody", "--all"]).status.success());

    // Unpair by name: gone from the table.
    let out = b.ok(&["unpair", "alpha"]);
    assert!(out.contains("unpaired alpha"), "{out}");
    assert!(peers(&b).is_empty());
    let missing = b.run(&["unpair", "alpha"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no paired peer matches"));
}

#[test]
fn malformed_and_expired_codes_are_refused_readably() {
    let b = TestHome::empty();
    let out = b.run(&["pair", "cairn1-notacode"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pairing code"), "{err}");

    let a = TestHome::empty();
    let (mut inviter, code, _addr, _lines) = start_inviter(&a, "alpha", &["--timeout", "1s"]);
    assert!(!wait_exit(&mut inviter), "the window ends unpaired");
    let out = b.run(&["pair", &code]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expired"), "{err}");
    assert!(peers(&a).is_empty() && peers(&b).is_empty());
}
