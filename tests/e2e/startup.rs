//! Many real `cairn` processes starting on one fresh home at the same
//! moment all succeed (schema creation, key creation and the first write
//! race each other), and only one `cairn serve` runs per home: a second one
//! is refused, names the running one and leaves its `serve.json` alone; the
//! lock goes with its holder, even after `kill -9`.

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::TestHome;

const DEADLINE: Duration = Duration::from_secs(30);

/// Kills the child (if still running) when dropped.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn wait_for<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    while start.elapsed() < deadline {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
    None
}

/// Waits (bounded) for a child to exit and returns its output (its pipes
/// are drained on threads meanwhile, so a chatty child cannot block).
fn finish(mut child: Reap) -> Option<Output> {
    use std::io::Read;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .0
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .0
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = wait_for(DEADLINE, || child.0.try_wait().ok().flatten())?;
    Some(Output {
        status,
        stdout: out.join().ok()?,
        stderr: err.join().ok()?,
    })
}

fn serve_state(home: &TestHome) -> Option<serde_json::Value> {
    let bytes = std::fs::read(home.cairn_home().join("serve.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// 20 fresh homes, each opened by three or four processes started at once
/// (`status`, `index`, `remember`, and in every other home `serve`): every
/// one must succeed. The figures are printed.
#[test]
fn many_processes_on_a_fresh_home_all_succeed() {
    const HOMES: usize = 20;
    let (mut started, mut failed) = (0usize, Vec::new());
    for round in 0..HOMES {
        let home = TestHome::empty();
        let failed_before = failed.len();
        let mut batch: Vec<(String, Reap)> = Vec::new();
        let mut spawn = |args: &[&str]| {
            let child = home
                .cmd(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn cairn");
            batch.push((args.join(" "), Reap(child)));
        };
        spawn(&["status", "--json"]);
        spawn(&["index", "--quiet"]);
        spawn(&["remember", &format!("fact number {round}")]);
        let serving = round % 2 == 0;
        if serving {
            spawn(&["serve", "--listen", "127.0.0.1:0"]);
        }
        started += batch.len();
        for (what, child) in batch {
            if what.starts_with("serve") {
                // Success for a daemon: it reaches the point of listening
                // (its own pid in serve.json) and is still running.
                let mut child = child;
                let pid = child.0.id();
                let up = wait_for(DEADLINE, || {
                    if matches!(child.0.try_wait(), Ok(Some(_))) {
                        return Some(false);
                    }
                    serve_state(&home).filter(|s| s["pid"] == pid).map(|_| true)
                });
                if up != Some(true) {
                    let err = finish(child)
                        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                        .unwrap_or_default();
                    failed.push(format!("home {round}: {what}: {err}"));
                }
                continue;
            }
            match finish(child) {
                Some(out) if out.status.success() => {}
                Some(out) => failed.push(format!(
                    "home {round}: {what}: {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                )),
                None => failed.push(format!("home {round}: {what}: did not finish")),
            }
        }
        if failed.len() > failed_before {
            continue;
        }
        // Everything each process wrote is there once.
        let st = home.json(&["status", "--json"]);
        assert_eq!(
            st["schema_version"],
            cairn_node::store::SCHEMA_VERSION,
            "{st}"
        );
        assert_eq!(
            home.search(&format!("fact number {round}"), &["--no-refresh"])
                .len(),
            1,
            "home {round}"
        );
    }
    println!(
        "concurrent start: {started} processes started on {HOMES} fresh homes, {} failed",
        failed.len()
    );
    for f in &failed {
        assert!(
            !f.contains("move it aside"),
            "busy reported as corrupt: {f}"
        );
    }
    assert!(failed.is_empty(), "failures:\n{}", failed.join("\n"));
}

#[test]
fn only_one_serve_per_home_and_the_lock_dies_with_its_holder() {
    let home = TestHome::empty();
    home.ok(&["status"]);
    let serve = |home: &TestHome| {
        Reap(
            home.cmd(&["serve", "--listen", "127.0.0.1:0"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn cairn serve"),
        )
    };
    let mut first = serve(&home);
    let pid = first.0.id();
    let state = wait_for(DEADLINE, || serve_state(&home).filter(|s| s["pid"] == pid))
        .expect("the first serve reports its address");
    let addr = state["listen_addr"].as_str().expect("address").to_owned();
    let before = std::fs::read(home.cairn_home().join("serve.json")).expect("read state");

    // A second daemon on the same home is refused, clearly.
    let out = finish(serve(&home)).expect("the second serve exits");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already running"), "{err}");
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    assert!(err.contains(&addr), "{err}");
    // The running daemon and its state file are untouched.
    assert_eq!(
        std::fs::read(home.cairn_home().join("serve.json")).expect("state still there"),
        before
    );
    assert!(
        matches!(first.0.try_wait(), Ok(None)),
        "the first serve died"
    );
    assert_eq!(
        home.json(&["status", "--json"])["listen_addr"],
        addr.as_str()
    );

    // kill -9: the lock goes with the process; a new daemon starts.
    first.0.kill().expect("kill -9");
    first.0.wait().expect("reap");
    let third = serve(&home);
    let pid3 = third.0.id();
    wait_for(DEADLINE, || serve_state(&home).filter(|s| s["pid"] == pid3))
        .expect("a new serve starts after the old one was killed");
    drop(third);
}
