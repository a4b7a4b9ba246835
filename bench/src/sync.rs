//! `cairn-bench sync`: replication figures from two real `cairn serve`
//! processes on 127.0.0.1, each in its own temporary home.
//!
//! Reports (never asserts on time):
//! - catch-up of N records (~1 KB each) from a fresh peer: records/s
//!   applied, FTS indexing on (wall time from the receiver's start until
//!   `cairn status` shows all N), and when their meaning vectors, which a
//!   large catch-up computes after its records, are all there;
//! - bytes on the wire per record: the loopback interface's byte counter
//!   over the catch-up (`/proc/net/dev`, Linux; other loopback traffic on
//!   the machine at the same time is counted too);
//! - peak RSS (VmHWM) of both daemons after the catch-up;
//! - propagation latency of one new record (a note appended on A until a
//!   search on B finds it), p50 and p95 over `--samples`.
//!
//! ```text
//! cargo build --release -p cairn -p cairn-bench
//! target/release/cairn-bench sync --records 100000
//! ```
//!
//! `--hub` measures the NAT/hub topology in network namespaces instead
//! (`sync_hub.rs`).

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde::Serialize;

/// Replication figures over loopback.
#[derive(Debug, Parser)]
#[command(name = "cairn-bench sync")]
pub struct SyncBenchArgs {
    /// Records in A's backlog.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Approximate bytes of text per record.
    #[arg(long, default_value_t = 1000)]
    pub record_bytes: usize,
    /// Propagation samples.
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// Work folder (default: a temporary folder, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The cairn binary to measure (default: the one next to this bench).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// Print the figures as JSON too.
    #[arg(long)]
    pub json: bool,
    /// Measure the NAT/hub topology in network namespaces instead (root):
    /// pairing to first records, propagation through the hub, resume after
    /// an address change, `cairn sync` with the peer offline.
    #[arg(long)]
    pub hub: bool,
    /// Hub topology: fresh runs (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Hub topology: address changes of laptop 1 per run.
    #[arg(long, default_value_t = 3)]
    pub moves: usize,
    /// Hub topology: notes laptop 1 starts with.
    #[arg(long, default_value_t = 300)]
    pub hub_records: u64,
}

/// What the sync bench measured.
#[derive(Debug, Serialize)]
pub struct SyncFigures {
    /// Records caught up.
    pub records: u64,
    /// Seconds from the receiver's start to the last record applied.
    pub catch_up_secs: f64,
    /// Records applied per second.
    pub records_per_sec: f64,
    /// Seconds from the receiver's start until no record waits for its
    /// meaning vector (`None`: the meaning tier is off).
    pub vectors_ready_secs: Option<f64>,
    /// Loopback bytes per record over the catch-up (both directions).
    pub wire_bytes_per_record: Option<f64>,
    /// Peak RSS of the sending daemon, MB.
    pub sender_peak_rss_mb: Option<f64>,
    /// Peak RSS of the receiving daemon, MB.
    pub receiver_peak_rss_mb: Option<f64>,
    /// CPU seconds the sending daemon used up to the end of the catch-up.
    pub sender_cpu_secs: Option<f64>,
    /// CPU seconds the receiving daemon used up to the end of the catch-up.
    pub receiver_cpu_secs: Option<f64>,
    /// Propagation latency of one new record, median, ms.
    pub propagation_p50_ms: f64,
    /// Propagation latency, 95th percentile, ms.
    pub propagation_p95_ms: f64,
}

/// Kills the child when dropped.
pub(crate) struct Reap(pub(crate) Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

struct Side {
    home: PathBuf,
    name: &'static str,
}

impl Side {
    fn cmd(&self, cairn: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(cairn);
        c.args(args);
        isolate(&mut c, &self.home, self.name);
        c
    }

    fn json(&self, cairn: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        run_json(self.cmd(cairn, args), args)
    }

    fn records(&self, cairn: &Path) -> anyhow::Result<u64> {
        self.json(cairn, &["status", "--json"])?["records"]
            .as_u64()
            .context("status has no record count")
    }

    /// Records waiting for a meaning vector, when the meaning tier is on.
    fn vectors_pending(&self, cairn: &Path) -> anyhow::Result<Option<u64>> {
        let status = self.json(cairn, &["status", "--json"])?;
        if status["semantic"] != serde_json::Value::Bool(true) {
            return Ok(None);
        }
        status["vectors"]["pending"]
            .as_u64()
            .map(Some)
            .context("status has no vector count")
    }

    fn notes_file(&self) -> PathBuf {
        self.home.join(".local/share/cairn/notes.jsonl")
    }
}

/// Runs `cairn` as a machine of its own: only `home` as its world, `name`
/// as its host name, quiet logs.
pub(crate) fn isolate(c: &mut Command, home: &Path, name: &str) {
    c.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOSTNAME", name)
        .env("CAIRN_LOG", "error")
        .current_dir(home);
}

/// Runs a `cairn … --json` command and parses what it printed; a failure
/// carries its stderr.
pub(crate) fn run_json(mut c: Command, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let out = c.output()?;
    if !out.status.success() {
        bail!(
            "cairn {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub(crate) fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    // Bounded by `limit`.
    while start.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn lo_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("lo:"))?;
    let nums: Vec<u64> = line
        .split(':')
        .nth(1)?
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    // Received bytes is field 0, transmitted bytes field 8; on lo they are
    // the same packets, so count one direction.
    nums.first().copied()
}

fn peak_rss_mb(pid: u32) -> Option<f64> {
    crate::measure::proc_status_mb(pid, "VmHWM:")
}

/// User + system CPU seconds of a process (`/proc/PID/stat`, 100 ticks/s).
fn cpu_secs(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall.
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The median (0 for none).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    percentile(&mut v, 0.5)
}

pub(crate) fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i.min(v.len() - 1)]
}

pub(crate) fn note_line(i: u64, text: &str) -> String {
    serde_json::json!({
        "time_ms": 1_767_225_600_000i64 + i as i64,
        "project": "/bench",
        "text": text,
    })
    .to_string()
}

/// Entry point of `cairn-bench sync` (`argv[1]` is `sync`).
pub fn main() -> anyhow::Result<()> {
    let args = SyncBenchArgs::parse_from(std::env::args().skip(1));
    let cairn = match &args.cairn {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("bench binary has no folder")?
            .join("cairn"),
    };
    anyhow::ensure!(cairn.is_file(), "no cairn binary at {}", cairn.display());
    if args.hub {
        return crate::sync_hub::main(&cairn, &args);
    }
    let figures = run(&cairn, &args)?;
    println!(
        "catch-up: {} records in {:.2} s = {:.0} records/s applied (FTS on)",
        figures.records, figures.catch_up_secs, figures.records_per_sec
    );
    match figures.vectors_ready_secs {
        Some(s) => println!("meaning vectors: all computed {s:.2} s after the receiver's start"),
        None => println!("meaning vectors: off"),
    }
    match figures.wire_bytes_per_record {
        Some(b) => println!("wire: {b:.0} loopback bytes per record"),
        None => println!("wire: unavailable (no /proc/net/dev)"),
    }
    println!(
        "peak RSS: sender {} MB, receiver {} MB",
        figures
            .sender_peak_rss_mb
            .map_or("?".to_owned(), |m| format!("{m:.1}")),
        figures
            .receiver_peak_rss_mb
            .map_or("?".to_owned(), |m| format!("{m:.1}"))
    );
    println!(
        "CPU during catch-up: sender {} s, receiver {} s",
        figures
            .sender_cpu_secs
            .map_or("?".to_owned(), |c| format!("{c:.2}")),
        figures
            .receiver_cpu_secs
            .map_or("?".to_owned(), |c| format!("{c:.2}"))
    );
    println!(
        "propagation of one new record: p50 {:.0} ms, p95 {:.0} ms",
        figures.propagation_p50_ms, figures.propagation_p95_ms
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    }
    Ok(())
}

/// Runs the measurements with the `cairn` binary at `cairn`.
pub fn run(cairn: &Path, args: &SyncBenchArgs) -> anyhow::Result<SyncFigures> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("cairn-bench-sync-")
                .tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let a = Side {
        home: dir.join("a"),
        name: "bench-a",
    };
    let b = Side {
        home: dir.join("b"),
        name: "bench-b",
    };
    for s in [&a, &b] {
        let _ = std::fs::remove_dir_all(&s.home);
        std::fs::create_dir_all(s.home.join(".local/share/cairn"))?;
    }

    eprintln!("writing and indexing {} records on A ...", args.records);
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(a.notes_file())?);
        let filler = "lorem ipsum dolor sit amet consectetur ";
        for i in 0..args.records {
            let mut text = format!("bench record {i} ");
            while text.len() < args.record_bytes {
                text.push_str(filler);
            }
            text.truncate(args.record_bytes);
            writeln!(f, "{}", note_line(i, &text))?;
        }
        f.flush()?;
    }
    let out = a.cmd(cairn, &["index", "--quiet"]).output()?;
    anyhow::ensure!(out.status.success(), "indexing A failed");

    // Pair through the real commands, A inviting on the port it will serve on.
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let a_listen = format!("127.0.0.1:{port}");
    let mut inviter = Reap(
        a.cmd(cairn, &["pair", "--listen", &a_listen, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut line = String::new();
    BufReader::new(inviter.0.stdout.take().context("inviter stdout")?).read_line(&mut line)?;
    let code: serde_json::Value = serde_json::from_str(&line)?;
    let code = code["code"].as_str().context("no code")?.to_owned();
    b.json(cairn, &["pair", &code, "--json"])?;
    wait_for(Duration::from_secs(30), || {
        inviter.0.try_wait().ok().flatten()
    })
    .context("the inviter did not exit")?;

    let serve = |s: &Side, listen: &str| -> anyhow::Result<Reap> {
        let child = Reap(
            s.cmd(cairn, &["serve", "--listen", listen])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
        wait_for(Duration::from_secs(30), || {
            s.json(cairn, &["status", "--json"])
                .ok()
                .and_then(|v| v["listen_addr"].as_str().map(str::to_owned))
        })
        .context("cairn serve did not start")?;
        Ok(child)
    };
    let a_serve = serve(&a, &a_listen)?;

    eprintln!("catching up on B ...");
    let lo_before = lo_bytes();
    let started = Instant::now();
    let b_serve = serve(&b, "127.0.0.1:0")?;
    let limit = Duration::from_secs(3600);
    // Poll gently: status is a process start each time.
    let mut caught_up = false;
    while started.elapsed() < limit {
        if b.records(cairn)? >= args.records {
            caught_up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::ensure!(caught_up, "catch-up did not finish within {limit:?}");
    let catch_up = started.elapsed().as_secs_f64();
    let lo_after = lo_bytes();
    let sender_rss = peak_rss_mb(a_serve.0.id());
    let receiver_rss = peak_rss_mb(b_serve.0.id());
    let (sender_cpu, receiver_cpu) = (cpu_secs(a_serve.0.id()), cpu_secs(b_serve.0.id()));
    let mut vectors_ready = None;
    while started.elapsed() < limit {
        match b.vectors_pending(cairn)? {
            Some(0) => vectors_ready = Some(started.elapsed().as_secs_f64()),
            Some(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            None => {}
        }
        break;
    }

    eprintln!("measuring propagation ...");
    let mut lat = Vec::new();
    for k in 0..args.samples {
        let word = format!("propagationprobe{k}x");
        let t0 = Instant::now();
        {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(a.notes_file())?;
            writeln!(f, "{}", note_line(10_000_000 + k as u64, &word))?;
        }
        let found = wait_for(Duration::from_secs(30), || {
            let v = b
                .json(cairn, &["search", "--json", "--no-refresh", "--", &word])
                .ok()?;
            (!v["hits"].as_array()?.is_empty()).then(Instant::now)
        })
        .context("a new record never reached B")?;
        lat.push(found.duration_since(t0).as_secs_f64() * 1000.0);
    }
    drop(b_serve);
    drop(a_serve);

    let wire = match (lo_before, lo_after) {
        (Some(x), Some(y)) if args.records > 0 => {
            Some(y.saturating_sub(x) as f64 / args.records as f64)
        }
        _ => None,
    };
    Ok(SyncFigures {
        records: args.records,
        catch_up_secs: catch_up,
        records_per_sec: args.records as f64 / catch_up.max(1e-9),
        vectors_ready_secs: vectors_ready,
        wire_bytes_per_record: wire,
        sender_peak_rss_mb: sender_rss,
        receiver_peak_rss_mb: receiver_rss,
        sender_cpu_secs: sender_cpu,
        receiver_cpu_secs: receiver_cpu,
        propagation_p50_ms: percentile(&mut lat.clone(), 0.5),
        propagation_p95_ms: percentile(&mut lat, 0.95),
    })
}
