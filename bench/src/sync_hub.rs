//! `cairn-bench sync --hub`: the NAT/hub topology in Linux network
//! namespaces (the e2e test's setup, `tests/netns/nat_hub.rs`): a hub and
//! two laptops, each behind its own masquerading router that drops new
//! inbound flows. Three real `cairn serve` daemons; the laptops pair with
//! the hub through `cairn pair CODE`, the direction a NAT allows.
//!
//! Reports per run, then medians over `--runs` (never asserts on time):
//! - seconds from the far laptop's pairing to the first of laptop 1's
//!   records searchable there (and to all of them);
//! - propagation laptop 1 → hub → laptop 2 of one appended note, p50/p95
//!   over `--samples`;
//! - after laptop 1's address changes, append → on laptop 2 (`--moves`
//!   times per run);
//! - `cairn sync` on laptop 1 with its only peer (the hub) offline.
//!
//! Needs root, iproute2 and iptables; says so loudly and exits 0 without.
//!
//! ```text
//! cargo build --release -p cairn -p cairn-bench
//! sudo target/release/cairn-bench sync --hub --runs 3
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::sync::{
    Reap, SyncBenchArgs, isolate, median, note_line, percentile, run_json, wait_for,
};

#[path = "../../tests/netns/nat_hub.rs"]
mod nat_hub;

use nat_hub::NatHub;

/// What one run of the hub bench measured.
#[derive(Debug, Clone, Serialize)]
pub struct HubFigures {
    /// Records laptop 1 starts with.
    pub records: u64,
    /// Far laptop's pairing done → first of laptop 1's records on it, s.
    pub pairing_to_first_secs: f64,
    /// Far laptop's pairing done → all of laptop 1's records on it, s.
    pub pairing_to_all_secs: f64,
    /// Propagation through the hub, median, ms.
    pub propagation_p50_ms: f64,
    /// Propagation through the hub, 95th percentile, ms.
    pub propagation_p95_ms: f64,
    /// After each address change of laptop 1, append → on laptop 2, ms.
    pub resume_ms: Vec<f64>,
    /// `cairn sync` on laptop 1 with the hub offline, ms.
    pub offline_sync_ms: f64,
}

/// One machine: a home in a namespace.
struct Machine {
    home: PathBuf,
    name: &'static str,
    ns: String,
}

impl Machine {
    fn cmd(&self, cairn: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).arg(cairn).args(args);
        isolate(&mut c, &self.home, self.name);
        c
    }

    fn json(&self, cairn: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        run_json(self.cmd(cairn, args), args)
    }

    fn records(&self, cairn: &Path) -> u64 {
        self.json(cairn, &["status", "--json"])
            .ok()
            .and_then(|v| v["records"].as_u64())
            .unwrap_or(0)
    }

    fn finds(&self, cairn: &Path, word: &str) -> bool {
        self.json(cairn, &["search", "--json", "--no-refresh", "--", word])
            .ok()
            .and_then(|v| v["hits"].as_array().map(|h| !h.is_empty()))
            .unwrap_or(false)
    }

    fn notes_file(&self) -> PathBuf {
        self.home.join(".local/share/cairn/notes.jsonl")
    }

    fn append(&self, i: u64, text: &str) -> anyhow::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.notes_file())?;
        writeln!(f, "{}", note_line(i, text))?;
        Ok(())
    }

    fn serve(&self, cairn: &Path) -> anyhow::Result<Reap> {
        let child = Reap(
            self.cmd(cairn, &["serve", "--listen", "0.0.0.0:7878"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
        wait_for(Duration::from_secs(30), || {
            self.json(cairn, &["status", "--json"])
                .ok()
                .and_then(|v| v["listen_addr"].as_str().map(str::to_owned))
        })
        .context("cairn serve did not start")?;
        Ok(child)
    }
}

/// Pairs `joiner` with the code `inviter` prints (advertising `advertise`).
fn pair(cairn: &Path, inviter: &Machine, joiner: &Machine, advertise: &str) -> anyhow::Result<()> {
    let mut child = Reap(
        inviter
            .cmd(
                cairn,
                &[
                    "pair",
                    "--listen",
                    "0.0.0.0:7879",
                    "--advertise",
                    advertise,
                    "--json",
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().context("inviter stdout")?).read_line(&mut line)?;
    let code: serde_json::Value = serde_json::from_str(&line)?;
    let code = code["code"].as_str().context("no code")?.to_owned();
    joiner.json(cairn, &["pair", &code, "--json"])?;
    wait_for(Duration::from_secs(30), || {
        child.0.try_wait().ok().flatten()
    })
    .context("the inviter did not exit")?;
    Ok(())
}

/// Entry point of `cairn-bench sync --hub`.
pub fn main(cairn: &Path, args: &SyncBenchArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for run in 0..args.runs.max(1) {
        eprintln!("hub run {} of {} ...", run + 1, args.runs.max(1));
        let net = match NatHub::create() {
            Ok(n) => n,
            Err(why) => {
                eprintln!(
                    "\n!!!!! SKIPPED cairn-bench sync --hub: {why}.\n\
                     !!!!! It needs root, iproute2 and iptables (network namespaces).\n"
                );
                return Ok(());
            }
        };
        let f = one_run(cairn, args, net)?;
        println!(
            "run {}: pairing -> first records on the far laptop {:.2} s (all {} in {:.2} s); \
             propagation p50 {:.0} ms, p95 {:.0} ms; resume after an address change {} ms; \
             cairn sync with the hub offline {:.0} ms",
            run + 1,
            f.pairing_to_first_secs,
            f.records,
            f.pairing_to_all_secs,
            f.propagation_p50_ms,
            f.propagation_p95_ms,
            f.resume_ms
                .iter()
                .map(|m| format!("{m:.0}"))
                .collect::<Vec<_>>()
                .join("/"),
            f.offline_sync_ms
        );
        runs.push(f);
    }
    let med = |g: &dyn Fn(&HubFigures) -> f64| median(runs.iter().map(g).collect());
    let resume: Vec<f64> = runs.iter().flat_map(|f| f.resume_ms.clone()).collect();
    println!(
        "medians over {} runs: pairing -> first records {:.2} s (target <= 5 s), all {:.2} s; \
         propagation laptop -> hub -> laptop p50 {:.0} ms, p95 {:.0} ms (target p95 <= 1000 ms); \
         resume after an address change {:.0} ms (target <= 10000 ms, {} samples); \
         cairn sync with the peer offline {:.0} ms (target <= 6000 ms)",
        runs.len(),
        med(&|f| f.pairing_to_first_secs),
        med(&|f| f.pairing_to_all_secs),
        med(&|f| f.propagation_p50_ms),
        med(&|f| f.propagation_p95_ms),
        median(resume.clone()),
        resume.len(),
        med(&|f| f.offline_sync_ms),
    );
    println!("(a shared, loaded machine inflates these; each run is fresh namespaces and homes)");
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
    }
    Ok(())
}

fn one_run(cairn: &Path, args: &SyncBenchArgs, mut net: NatHub) -> anyhow::Result<HubFigures> {
    let tmp = tempfile::Builder::new()
        .prefix("cairn-bench-hub-")
        .tempdir()?;
    let make = |name: &'static str, ns: &str| -> anyhow::Result<Machine> {
        let home = tmp.path().join(name);
        std::fs::create_dir_all(home.join(".local/share/cairn"))?;
        Ok(Machine {
            home,
            name,
            ns: ns.to_owned(),
        })
    };
    let hub = make("bench-hub", &net.hub)?;
    let l1 = make("bench-laptop-1", &net.laptops[0])?;
    let l2 = make("bench-laptop-2", &net.laptops[1])?;

    // Laptop 1's history: a few hundred notes.
    let records = args.hub_records;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(l1.notes_file())?);
        for i in 0..records {
            writeln!(
                f,
                "{}",
                note_line(i, &format!("hub bench note {i} about the relay"))
            )?;
        }
        f.flush()?;
    }
    let out = l1.cmd(cairn, &["index", "--quiet"]).output()?;
    anyhow::ensure!(out.status.success(), "indexing laptop 1 failed");
    let _hub_serve = hub.serve(cairn)?;
    let _l1_serve = l1.serve(cairn)?;
    let _l2_serve = l2.serve(cairn)?;

    let advertise = format!("{}:7879", net.hub_ip);
    pair(cairn, &hub, &l1, &advertise)?;
    pair(cairn, &hub, &l2, &advertise)?;
    let paired = Instant::now();
    let limit = Duration::from_secs(120);
    let first = wait_for(limit, || (l2.records(cairn) > 0).then(Instant::now))
        .context("no record reached the far laptop")?;
    let all = wait_for(limit, || (l2.records(cairn) >= records).then(Instant::now))
        .context("not all records reached the far laptop")?;

    let mut lat = Vec::new();
    for k in 0..args.samples {
        let word = format!("hubprobe{k}x");
        let t0 = Instant::now();
        l1.append(1_000_000 + k as u64, &word)?;
        let found = wait_for(Duration::from_secs(60), || {
            l2.finds(cairn, &word).then(Instant::now)
        })
        .context("an appended note never reached the far laptop")?;
        lat.push(found.duration_since(t0).as_secs_f64() * 1000.0);
    }

    let mut resume = Vec::new();
    for m in 0..args.moves {
        let new_ip = {
            let cur = &net.lans[0].1;
            let prefix = cur.rsplit_once('.').map_or(cur.as_str(), |(p, _)| p);
            format!("{prefix}.{}", 100 + m)
        };
        net.readdress(0, &new_ip)
            .map_err(|e| anyhow::anyhow!("readdress laptop 1: {e}"))?;
        let word = format!("movedprobe{m}x");
        let t0 = Instant::now();
        l1.append(2_000_000 + m as u64, &word)?;
        let found = wait_for(Duration::from_secs(120), || {
            l2.finds(cairn, &word).then(Instant::now)
        })
        .context("sync did not resume after the address change")?;
        resume.push(found.duration_since(t0).as_secs_f64() * 1000.0);
    }

    // The hub goes away; `cairn sync` on laptop 1 must say so quickly.
    drop(_hub_serve);
    let t0 = Instant::now();
    let out = l1.cmd(cairn, &["sync", "--json"]).output()?;
    let offline = t0.elapsed().as_secs_f64() * 1000.0;
    let said = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        said.contains("unreachable"),
        "cairn sync did not report the hub unreachable: {said}"
    );

    Ok(HubFigures {
        records,
        pairing_to_first_secs: first.duration_since(paired).as_secs_f64(),
        pairing_to_all_secs: all.duration_since(paired).as_secs_f64(),
        propagation_p50_ms: percentile(&mut lat.clone(), 0.5),
        propagation_p95_ms: percentile(&mut lat, 0.95),
        resume_ms: resume,
        offline_sync_ms: offline,
    })
}
