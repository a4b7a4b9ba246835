//! Runs the `cairn` binary as a fresh process (the way agents call it) and
//! reports medians; peak RSS is sampled from `/proc/<pid>/status` (Linux).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use super::BenchArgs;
use super::corpus::{self, MULTI, RARE};

/// One timed child run.
pub(super) struct Run {
    pub(super) wall: Duration,
    pub(super) peak_rss_kb: u64,
    /// CPU time of all its threads (user and system) at the last sample
    /// before it exited (Linux; zero elsewhere).
    pub(super) cpu: Duration,
    pub(super) stdout: Vec<u8>,
}

fn run_cairn(cairn: &Path, home: &Path, args: &[&str]) -> anyhow::Result<Run> {
    run_cairn_env(cairn, home, &[], args)
}

/// Runs `cairn` with `$HOME` set to `home` plus the variables in `env`,
/// sampling its peak RSS while it runs.
pub(super) fn run_cairn_env(
    cairn: &Path,
    home: &Path,
    env: &[(&str, &Path)],
    args: &[&str],
) -> anyhow::Result<Run> {
    let started = Instant::now();
    let mut cmd = Command::new(cairn);
    cmd.args(args)
        .env("HOME", home)
        .env("HOSTNAME", "bench")
        .env_remove("CAIRN_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {}", cairn.display()))?;
    let status_path = format!("/proc/{}/status", child.id());
    let stat_path = format!("/proc/{}/stat", child.id());
    let (mut peak, mut cpu) = (0, Duration::ZERO);
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut s) = stdout {
            let _ = std::io::Read::read_to_end(&mut s, &mut buf);
        }
        buf
    });
    // Bounded: a run that takes more than an hour is a failure, not a figure.
    let deadline = started + Duration::from_secs(3600);
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_path)
            && let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if let Some(t) = std::fs::read_to_string(&stat_path)
            .ok()
            .and_then(|s| cpu_of_stat(&s))
        {
            cpu = cpu.max(t);
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() > deadline {
            child.kill()?;
            bail!("cairn {args:?} ran for over an hour");
        }
        // Often at first, for short runs; then seldom, since reading a busy
        // process's /proc files costs it time (a cold index ran about 5%
        // slower sampled every 2 ms). The peak is the kernel's high-water
        // mark, so a sample only has to come before the exit.
        let every = if started.elapsed() < Duration::from_millis(200) {
            Duration::from_millis(2)
        } else {
            Duration::from_millis(25)
        };
        std::thread::sleep(every);
    };
    let wall = started.elapsed();
    let stdout = reader.join().unwrap_or_default();
    // `cairn search` exits 1 when nothing matched: a result, not a failure.
    let no_match = args.first() == Some(&"search") && status.code() == Some(1);
    if !status.success() && !no_match {
        bail!("cairn {args:?} failed with {status}");
    }
    Ok(Run {
        wall,
        peak_rss_kb: peak,
        cpu,
        stdout,
    })
}

/// The user plus system time of a process's threads from the text of its
/// `/proc/<pid>/stat`: fields 14 and 15, in clock ticks (`USER_HZ`, 100 on
/// Linux). The command name (field 2) may hold spaces, so fields are
/// counted after its closing parenthesis.
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    const TICKS_PER_SEC: u64 = 100;
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (the state).
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SEC,
    ))
}

/// A memory figure of a running process in MB, from its `/proc/PID/status`
/// line `field` (such as `VmRSS:` or `VmHWM:`); Linux only.
pub(crate) fn proc_status_mb(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// CPU time (user + system, ms) process `pid` has used so far (Linux
/// only: read from `/proc`).
pub(crate) fn proc_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime: fields 14 and 15 of the line, in clock ticks.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 1000.0 / USER_HZ)
}

/// Clock ticks per second of the times in `/proc` (`USER_HZ`, which the
/// kernel's ABI fixes at 100 on x86-64 and arm64).
const USER_HZ: f64 = 100.0;

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

pub(super) fn p95(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1]
    }
}

#[derive(Serialize)]
pub(super) struct Figure {
    name: &'static str,
    median: f64,
    p95: Option<f64>,
    unit: &'static str,
    target: &'static str,
}

impl Figure {
    /// A figure of timings in milliseconds: their median and p95.
    pub(super) fn timings(name: &'static str, ms: &mut [f64], target: &'static str) -> Figure {
        Figure::new(name, median(ms), Some(p95(ms)), "ms", target)
    }

    pub(super) fn new(
        name: &'static str,
        median: f64,
        p95: Option<f64>,
        unit: &'static str,
        target: &'static str,
    ) -> Figure {
        Figure {
            name,
            median,
            p95,
            unit,
            target,
        }
    }
}

/// What every table says about where its figures come from.
const CAVEAT: &str = "medians of wall-clock times on this machine; other load on it (a shared \
     or busy machine) inflates them, so compare figures taken side by side";

/// Prints the figures as a table (and as JSON when asked), with the caveat.
pub(super) fn print_table(figures: &[Figure], json: bool) -> anyhow::Result<()> {
    println!("{CAVEAT}");
    // As wide as the longest name, so the columns line up.
    let w = figures
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(0)
        .max(44);
    println!(
        "{:<w$} {:>10} {:>10} {:<6} target",
        "figure", "median", "p95", "unit"
    );
    for f in figures {
        let p = f.p95.map_or("-".to_owned(), |p| format!("{p:.1}"));
        println!(
            "{:<w$} {:>10.1} {:>10} {:<6} {}",
            f.name, f.median, p, f.unit, f.target
        );
    }
    if json {
        println!("{}", serde_json::to_string(figures)?);
    }
    Ok(())
}

/// Runs every measurement and prints the table.
pub fn run(cairn: &Path, home: &Path, corpus_bytes: u64, args: &BenchArgs) -> anyhow::Result<()> {
    let mb = corpus_bytes as f64 / 1e6;
    let cairn_home = home.join(".local/share/cairn");
    let mut figures = Vec::new();

    // Cold index.
    let (mut secs, mut rss) = (Vec::new(), Vec::new());
    for i in 0..args.runs.max(1) {
        let _ = std::fs::remove_dir_all(&cairn_home);
        let r = run_cairn(cairn, home, &["index", "--quiet"])?;
        eprintln!(
            "cold index run {}: {:.1} s, peak RSS {} MB",
            i + 1,
            r.wall.as_secs_f64(),
            r.peak_rss_kb / 1024
        );
        secs.push(r.wall.as_secs_f64());
        rss.push(r.peak_rss_kb as f64 / 1024.0);
    }
    let cold = median(&mut secs);
    figures.push(Figure {
        name: "cold index throughput",
        median: mb / cold,
        p95: None,
        unit: "MB/s",
        target: ">= 20",
    });
    figures.push(Figure {
        name: "cold index peak RSS",
        median: median(&mut rss),
        p95: None,
        unit: "MB",
        target: "<= 300",
    });
    let db = corpus::size_of(&cairn_home);
    figures.push(Figure {
        name: "index size / corpus",
        median: 100.0 * db as f64 / corpus_bytes as f64,
        p95: None,
        unit: "%",
        target: "<= 35",
    });

    // One appended line on the big transcript.
    let big = corpus::biggest_claude_file(home).context("no Claude transcript in the corpus")?;
    let sid = big
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("bench")
        .to_owned();
    let (mut append, mut noop) = (Vec::new(), Vec::new());
    for i in 0..args.reps.max(1) {
        let word = format!("appendmarker{i}x");
        let line = serde_json::json!({"type": "user", "uuid": format!("bench-{i}"), "sessionId": sid, "timestamp": "2026-06-01T00:00:00Z", "cwd": "/home/dev/bench", "message": {"role": "user", "content": format!("we decided {word} today")}});
        let mut f = std::fs::OpenOptions::new().append(true).open(&big)?;
        writeln!(f, "{line}")?;
        drop(f);
        append.push(
            run_cairn(cairn, home, &["index", "--quiet"])?
                .wall
                .as_secs_f64()
                * 1000.0,
        );
        noop.push(
            run_cairn(cairn, home, &["index", "--quiet"])?
                .wall
                .as_secs_f64()
                * 1000.0,
        );
        if i == 0 {
            let r = run_cairn(
                cairn,
                home,
                &["search", "--json", "--no-refresh", "--", &word],
            )?;
            let v: serde_json::Value = serde_json::from_slice(&r.stdout)?;
            anyhow::ensure!(
                v["hits"].as_array().is_some_and(|h| !h.is_empty()),
                "appended line was not found"
            );
        }
    }
    let big_mb = std::fs::metadata(&big).map_or(0, |m| m.len()) as f64 / 1e6;
    figures.push(Figure {
        name: "append 1 line to big transcript (process)",
        median: median(&mut append),
        p95: Some(p95(&mut append)),
        unit: "ms",
        target: "<= 50",
    });
    figures.push(Figure {
        name: "index pass with nothing new (process)",
        median: median(&mut noop),
        p95: Some(p95(&mut noop)),
        unit: "ms",
        target: "-",
    });

    // Search latency from a fresh process.
    for (name, q, target) in [
        ("search rare term", RARE, "<= 20"),
        ("search common term", "error", "<= 100"),
        ("search multi-word query", MULTI, "-"),
    ] {
        let mut t = Vec::new();
        for _ in 0..args.reps.max(1) {
            t.push(
                run_cairn(cairn, home, &["search", "--json", "--no-refresh", "--", q])?
                    .wall
                    .as_secs_f64()
                    * 1000.0,
            );
        }
        figures.push(Figure {
            name,
            median: median(&mut t),
            p95: Some(p95(&mut t)),
            unit: "ms",
            target,
        });
    }
    let mut t = Vec::new();
    for _ in 0..args.reps.max(1) {
        t.push(
            run_cairn(cairn, home, &["search", "--json", "--", MULTI])?
                .wall
                .as_secs_f64()
                * 1000.0,
        );
    }
    figures.push(Figure {
        name: "search multi-word incl. refresh",
        median: median(&mut t),
        p95: Some(p95(&mut t)),
        unit: "ms",
        target: "-",
    });
    let r = run_cairn(
        cairn,
        home,
        &["search", "--json", "--no-refresh", "--", RARE],
    )?;
    let v: serde_json::Value = serde_json::from_slice(&r.stdout)?;
    anyhow::ensure!(
        v["hits"].as_array().is_some_and(|h| h.len() == 1),
        "the rare term should match exactly one session"
    );

    // How this machine starts a thread beside a busy one (see `machine`).
    let mut waits = super::machine::spawn_waits(21);
    figures.push(Figure::timings(
        "machine: wait of a thread started beside a busy one",
        &mut waits,
        "-",
    ));

    println!(
        "corpus: {mb:.0} MB ({big_mb:.0} MB largest transcript), {} cold runs, {} reps; medians on this machine",
        args.runs, args.reps
    );
    print_table(&figures, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_read_after_the_command_name_whatever_it_holds() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime ...
        let stat = "4242 (cairn (x) y) R 1 4242 4242 0 -1 4194304 900 0 0 0 1234 56 0 0 20 0 3";
        assert_eq!(cpu_of_stat(stat), Some(Duration::from_millis(12_900)));
        assert_eq!(cpu_of_stat("4242 (cairn) R 1 2"), None);
        assert_eq!(cpu_of_stat("no parenthesis"), None);
    }
}
