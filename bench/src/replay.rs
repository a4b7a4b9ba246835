//! Measurements on a corpus made outside the bench: the output of
//! `../shared/bench/gencorpus.py OUT SIZE_MB` (real Claude Code and Codex
//! transcripts replayed into many sessions). `OUT/claude` and `OUT/codex`
//! are laid out as the agents' own folders, so the `cairn` binary is pointed
//! at them with `$CLAUDE_CONFIG_DIR` and `$CODEX_HOME`; the node's own data
//! goes to a scratch `$HOME`. The corpus itself is only read.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use super::measure::{Figure, median, print_table, run_cairn_env};

/// Where the corpus and the scratch home are.
struct Setup {
    env: Vec<(&'static str, PathBuf)>,
    home: PathBuf,
    cairn_home: PathBuf,
}

/// One needle line of `needles.tsv`: a word planted in exactly one session.
struct Needle {
    word: String,
    session: String,
}

fn read_needles(corpus: &Path) -> anyhow::Result<Vec<Needle>> {
    let path = corpus.join("needles.tsv");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (is this gencorpus.py output?)",
            path.display()
        )
    })?;
    let all: Vec<Needle> = text
        .lines()
        .filter_map(|l| {
            let (w, s) = l.split_once('\t')?;
            Some(Needle {
                word: w.trim().to_owned(),
                session: s.trim().to_owned(),
            })
        })
        .filter(|n| !n.word.is_empty())
        .collect();
    anyhow::ensure!(!all.is_empty(), "{} lists no needle", path.display());
    Ok(all)
}

/// Times a fresh `cairn` process to its exit (no sampling delay); fails
/// when it does not succeed. Returns milliseconds and its stdout.
fn time_cairn(cairn: &Path, s: &Setup, args: &[&str]) -> anyhow::Result<(f64, Vec<u8>)> {
    let mut cmd = command(cairn, s, args);
    cmd.stderr(Stdio::inherit());
    let started = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {}", cairn.display()))?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        bail!("cairn {args:?} failed with {}", out.status);
    }
    Ok((ms, out.stdout))
}

/// `cairn` with `args` for the scratch home and the corpus's folders,
/// reading nothing from stdin.
fn command(cairn: &Path, s: &Setup, args: &[&str]) -> Command {
    let mut cmd = Command::new(cairn);
    cmd.args(args)
        .env("HOME", &s.home)
        .env("HOSTNAME", "bench")
        .env_remove("CAIRN_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null());
    for (k, v) in &s.env {
        cmd.env(k, v);
    }
    cmd
}

/// The session ids a `search --json` answer names.
fn hit_sessions(stdout: &[u8]) -> anyhow::Result<Vec<String>> {
    let v: serde_json::Value = serde_json::from_slice(stdout).context("search --json output")?;
    Ok(v["hits"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|x| x["session_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

/// Runs every figure of the corpus table and prints it.
pub fn run(
    cairn: &Path,
    corpus: &Path,
    work: &Path,
    runs: usize,
    reps: usize,
    semantic: bool,
    json: bool,
) -> anyhow::Result<()> {
    let claude = corpus.join("claude");
    let codex = corpus.join("codex");
    anyhow::ensure!(
        claude.is_dir() || codex.is_dir(),
        "{} has neither claude/ nor codex/ (expected gencorpus.py output)",
        corpus.display()
    );
    let needles = read_needles(corpus)?;
    let home = work.join("home");
    let config = home.join(".config/cairn");
    std::fs::create_dir_all(&config)?;
    std::fs::write(
        config.join("config.toml"),
        format!("[search]\nsemantic = {semantic}\n"),
    )?;
    let s = Setup {
        env: vec![
            ("CLAUDE_CONFIG_DIR", claude.clone()),
            ("CODEX_HOME", codex.clone()),
        ],
        cairn_home: home.join(".local/share/cairn"),
        home,
    };
    let corpus_bytes = super::corpus::size_of(&claude) + super::corpus::size_of(&codex);
    let files = count_files(&claude) + count_files(&codex);
    let mb = corpus_bytes as f64 / 1e6;
    let mut figures = Vec::new();

    // Cold index: the real binary as a fresh process, peak RSS sampled.
    let (mut secs, mut rss, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs.max(1) {
        let _ = std::fs::remove_dir_all(&s.cairn_home);
        let env: Vec<(&str, &Path)> = s.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let r = run_cairn_env(cairn, &s.home, &env, &["index", "--quiet"])?;
        eprintln!(
            "cold index run {}: {:.1} s, {:.1} s CPU, peak RSS {} MB",
            i + 1,
            r.wall.as_secs_f64(),
            r.cpu.as_secs_f64(),
            r.peak_rss_kb / 1024
        );
        secs.push(r.wall.as_secs_f64());
        rss.push(r.peak_rss_kb as f64 / 1024.0);
        cpu.push(r.cpu.as_secs_f64());
    }
    let cold = median(&mut secs);
    figures.push(Figure::new("cold index", cold, None, "s", "<= 34 at 1 GB"));
    figures.push(Figure::new(
        "cold index throughput",
        mb / cold,
        None,
        "MB/s",
        ">= 30",
    ));
    // CPU per corpus GB: what tells a run at another scale whether the
    // work grows faster than the data (wall time also shows how well the
    // cores are kept busy).
    figures.push(Figure::new(
        "cold index CPU (user+sys) per GB",
        median(&mut cpu) / (mb / 1e3),
        None,
        "s/GB",
        "-",
    ));
    figures.push(Figure::new(
        "cold index peak RSS",
        median(&mut rss),
        None,
        "MB",
        "<= 150",
    ));
    let db = super::corpus::size_of(&s.cairn_home);
    figures.push(Figure::new(
        "index size / corpus",
        100.0 * db as f64 / corpus_bytes as f64,
        None,
        "%",
        "<= 30",
    ));

    // Nothing new: every store unchanged since the last pass.
    figures.push(index_runs(
        cairn,
        &s,
        reps,
        "index with nothing new",
        "<= 10",
        || {},
    )?);
    // The machine's floor for that figure: a bare program that stats the
    // same files as a fresh process (see `floor`).
    let bench = std::env::current_exe().context("the bench's own path")?;
    let mut floor = Vec::new();
    for _ in 0..reps.max(1) {
        let started = Instant::now();
        let out = Command::new(&bench)
            .arg("floor")
            .arg(claude.join("projects"))
            .arg(codex.join("sessions"))
            .arg(codex.join("archived_sessions"))
            .stdin(Stdio::null())
            .output()
            .context("cannot start the floor walk")?;
        floor.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(out.status.success(), "the floor walk failed");
    }
    figures.push(Figure::timings(
        "  floor: a bare 2-thread stat of the same files",
        &mut floor,
        "-",
    ));
    // The same without the survey the previous pass left: the pass opens
    // the database and compares with its rows (as the first pass with
    // nothing new after a write does), then writes the survey again.
    let db = s.cairn_home.join("cairn.db");
    figures.push(index_runs(
        cairn,
        &s,
        reps,
        "index with nothing new, no survey",
        "-",
        || {
            let dropped = cairn_node::store::Store::open(&db).and_then(|st| st.drop_survey());
            if let Err(e) = dropped {
                eprintln!("cannot drop the survey: {e}");
            }
        },
    )?);

    // A rare word: a different needle each repetition, checked against its
    // session, with the refresh a search makes when no daemon runs and
    // without it.
    let mut with = rare_searches(cairn, &s, &needles, reps, &[])?;
    let mut without = rare_searches(cairn, &s, &needles, reps, &["--no-refresh"])?;
    figures.push(Figure::timings(
        "search rare word (default refresh)",
        &mut with,
        "<= 15",
    ));
    figures.push(Figure::timings(
        "search rare word --no-refresh",
        &mut without,
        "-",
    ));
    // A search right after an agent wrote to its transcript (what a
    // search sees while an agent works and no daemon runs): the refresh
    // reads that line, and the answer must be its session.
    let mut grown = Grown::new(&s.home)?;
    let mut after_write = searches_after_writes(cairn, &s, &mut grown, reps)?;
    figures.push(Figure::timings(
        "search right after a transcript grew (default refresh)",
        &mut after_write,
        "-",
    ));
    let mut common = searches_found(cairn, &s, &["error"], reps)?;
    // Questions in a user's words: with the meaning tier on, each also
    // scans every record vector.
    let mut questions = searches_found(cairn, &s, &QUESTIONS, reps)?;
    // The same questions filtered as an agent's own memory is (its agent)
    // and as a search for what the user said (their role): the filters
    // screen the candidates of both tiers.
    let mut by_agent = searches_found_with(cairn, &s, &QUESTIONS, reps, &["--agent", "codex"])?;
    let mut by_role = searches_found_with(cairn, &s, &QUESTIONS, reps, &["--role", "user"])?;
    // And as a question about the last two weeks of the history (`--since`
    // its newest session's last day less 14): how fast a time filter
    // finds the matches of its period, wherever their records lie.
    let since = recent_date(&s, 14)?;
    let mut by_time = searches_found_with(cairn, &s, &QUESTIONS, reps, &["--since", &since])?;
    // The same searches while `cairn serve` runs for the home (as the
    // installed service does): the daemon keeps the index fresh, so a
    // search makes no refresh of its own, and answers it from its warm
    // connection (still a fresh `cairn search` process each time).
    let (mut serving, mut common_served, mut questions_served, daemon_rss, per_write) = {
        let mut daemon = Daemon::start(cairn, &s)?;
        (
            rare_searches(cairn, &s, &needles, reps, &[])?,
            searches_found(cairn, &s, &["error"], reps)?,
            searches_found(cairn, &s, &QUESTIONS, reps)?,
            daemon.rss_mb(),
            daemon.writes(&s, &mut grown, 4 * reps.max(1))?,
        )
    };
    let (mut pass_ms, cpu_per_write) = per_write;
    figures.push(Figure::timings(
        "cairn serve pass after a transcript write",
        &mut pass_ms,
        "-",
    ));
    if let Some(ms) = cpu_per_write {
        figures.push(Figure::new(
            "cairn serve CPU per transcript write (mean)",
            ms,
            None,
            "ms",
            "-",
        ));
    }
    let searches = [
        ("search rare word, cairn serve running", &mut serving, "-"),
        (
            "search common word 'error' --no-refresh",
            &mut common,
            "<= 40",
        ),
        (
            "search common word 'error', cairn serve running",
            &mut common_served,
            "-",
        ),
        ("search a question --no-refresh", &mut questions, "-"),
        (
            "search a question, cairn serve running",
            &mut questions_served,
            "-",
        ),
        (
            "search a question --agent codex --no-refresh",
            &mut by_agent,
            "-",
        ),
        (
            "search a question --role user --no-refresh",
            &mut by_role,
            "-",
        ),
        (
            "search a question --since (last 14 days) --no-refresh",
            &mut by_time,
            "-",
        ),
    ];
    for (label, times, target) in searches {
        figures.push(Figure::timings(label, times, target));
    }
    if let Some((rss, own)) = daemon_rss {
        figures.push(Figure::new(
            "cairn serve RSS after those searches",
            rss,
            None,
            "MB",
            "-",
        ));
        // A large vector file is mapped: its pages count in the RSS but
        // are the page cache's. The daemon's own memory is the rest.
        if let Some(own) = own {
            figures.push(Figure::new(
                "cairn serve RSS, its own memory (RssAnon)",
                own,
                None,
                "MB",
                "-",
            ));
        }
    }

    // How this machine starts a thread beside a busy one (see `machine`).
    let mut waits = super::machine::spawn_waits(21);
    figures.push(Figure::timings(
        "machine: wait of a thread started beside a busy one",
        &mut waits,
        "-",
    ));

    println!(
        "corpus: {} ({mb:.0} MB in {files} files), {runs} cold runs, {reps} reps, meaning tier {}",
        corpus.display(),
        if semantic { "on" } else { "off" }
    );
    print_table(&figures, json)
}

/// Questions worded as a user asks them (several words, no identifier or
/// period), taken in turn by the question figure.
const QUESTIONS: [&str; 5] = [
    "why did we pin hyper",
    "when did we switch the queue",
    "how do we handle retries",
    "why was the test flaky",
    "what did we decide about caching",
];

/// `reps` fresh `cairn search --json --no-refresh` runs (ms), taking
/// `queries` in turn, each required to find something.
fn searches_found(
    cairn: &Path,
    s: &Setup,
    queries: &[&str],
    reps: usize,
) -> anyhow::Result<Vec<f64>> {
    searches_found_with(cairn, s, queries, reps, &[])
}

/// [`searches_found`] with the search flags `filters`.
fn searches_found_with(
    cairn: &Path,
    s: &Setup,
    queries: &[&str],
    reps: usize,
    filters: &[&str],
) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::new();
    for i in 0..reps.max(1) {
        let q = queries[i % queries.len()];
        let mut args = vec!["search", "--json", "--no-refresh"];
        args.extend(filters);
        args.extend(["--", q]);
        let (ms, out) = time_cairn(cairn, s, &args)?;
        anyhow::ensure!(
            !hit_sessions(&out)?.is_empty(),
            "{q:?} {filters:?} found nothing"
        );
        times.push(ms);
    }
    Ok(times)
}

/// The day `days` before the last day of the scratch home's history (its
/// most recently active session's), as `--since` takes it.
fn recent_date(s: &Setup, days: i64) -> anyhow::Result<String> {
    let db = s.cairn_home.join("cairn.db");
    let store = cairn_node::store::Store::open_read_only(&db)
        .with_context(|| format!("opening {}", db.display()))?;
    let newest = store
        .recent_sessions(&cairn_node::store::RecentFilter {
            limit: 1,
            ..Default::default()
        })?
        .first()
        .and_then(|s| s.last_ms)
        .context("the scratch home holds no dated session")?;
    let day = chrono::DateTime::from_timestamp_millis(newest - days * 86_400_000)
        .context("a session's time out of range")?;
    Ok(day.format("%Y-%m-%d").to_string())
}

/// `reps` fresh `cairn search --json` runs (ms), each for another needle
/// with `flags` before it, each answer checked against the needle's session.
fn rare_searches(
    cairn: &Path,
    s: &Setup,
    needles: &[Needle],
    reps: usize,
    flags: &[&str],
) -> anyhow::Result<Vec<f64>> {
    let mut ms = Vec::new();
    for i in 0..reps.max(1) {
        let n = &needles[(i * 7919 + needles.len() / 2) % needles.len()];
        let mut args = vec!["search", "--json"];
        args.extend(flags);
        args.extend(["--", n.word.as_str()]);
        let (t, out) = time_cairn(cairn, s, &args)?;
        let got = hit_sessions(&out)?;
        anyhow::ensure!(
            got.iter()
                .any(|g| g.contains(&n.session) || n.session.contains(g.as_str())),
            "needle {} should find session {}, got {got:?}",
            n.word,
            n.session
        );
        ms.push(t);
    }
    Ok(ms)
}

/// A transcript of the scratch home's own that the bench grows, outside
/// the corpus (which is only read): a Copilot CLI session, which cairn
/// reads line by line from `~/.copilot/session-state/<id>/events.jsonl`.
struct Grown {
    path: PathBuf,
    lines: usize,
}

/// The grown transcript's session id.
const GROWN_SESSION: &str = "b3c4d5e6-0000-4000-8000-00000000beef";

impl Grown {
    fn new(home: &Path) -> anyhow::Result<Grown> {
        let dir = home.join(".copilot/session-state").join(GROWN_SESSION);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("events.jsonl");
        let start = serde_json::json!({
            "type": "session.start", "id": "ev-0", "timestamp": "2026-01-01T00:00:00.000Z",
            "data": {"sessionId": GROWN_SESSION, "context": {"cwd": "/bench"}}
        });
        std::fs::write(&path, format!("{start}\n"))?;
        Ok(Grown { path, lines: 0 })
    }

    /// Appends a user message holding a word no other line holds, and
    /// returns that word.
    fn append(&mut self) -> anyhow::Result<String> {
        use std::io::Write;
        self.lines += 1;
        let word = format!("benchgrowth{}q{}", std::process::id(), self.lines);
        let line = serde_json::json!({
            "type": "user.message", "id": format!("ev-{}", self.lines),
            "timestamp": "2026-01-01T00:00:01.000Z",
            "data": {"content": format!("note {word} for the bench")}
        });
        let mut f = std::fs::OpenOptions::new().append(true).open(&self.path)?;
        writeln!(f, "{line}")?;
        Ok(word)
    }
}

/// `reps` fresh `cairn search --json` runs (ms), each right after a line
/// was appended to `grown`, for the word only that line holds: each
/// answer must be the grown session, so the refresh did read the line.
fn searches_after_writes(
    cairn: &Path,
    s: &Setup,
    grown: &mut Grown,
    reps: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut ms = Vec::new();
    for _ in 0..reps.max(1) {
        let word = grown.append()?;
        let (t, out) = time_cairn(cairn, s, &["search", "--json", "--", &word])?;
        let got = hit_sessions(&out)?;
        anyhow::ensure!(
            got.iter().any(|g| g == GROWN_SESSION),
            "the line just written ({word}) was not found: {got:?}"
        );
        ms.push(t);
    }
    Ok(ms)
}

/// A `cairn serve` for the scratch home, on a loopback port the system
/// picks and without LAN discovery; stopped when dropped.
struct Daemon(std::process::Child);

impl Daemon {
    /// Starts it and waits (at most a minute) until it serves the home,
    /// then (at most ten) until its first indexing pass is done, so the
    /// searches measure a daemon that runs, not one starting up.
    fn start(cairn: &Path, s: &Setup) -> anyhow::Result<Daemon> {
        let mut cmd = command(
            cairn,
            s,
            &["serve", "--listen", "127.0.0.1:0", "--no-discovery"],
        );
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut d = Daemon(
            cmd.spawn()
                .with_context(|| format!("cannot start {} serve", cairn.display()))?,
        );
        let home = &s.cairn_home;
        d.wait_until(60, "start serving", || cairn_node::daemon::is_serving(home))?;
        d.wait_until(600, "finish its first pass", || {
            cairn_node::daemon::running_state(home)
                .and_then(|st| cairn_node::daemon::last_pass(home, &st))
                .is_some()
        })?;
        Ok(d)
    }

    /// Its resident memory now and the part of it that is its own (not
    /// pages of mapped files), in MB (Linux only: read from `/proc`).
    fn rss_mb(&self) -> Option<(f64, Option<f64>)> {
        let rss = crate::measure::proc_status_mb(self.0.id(), "VmRSS:")?;
        Some((rss, crate::measure::proc_status_mb(self.0.id(), "RssAnon:")))
    }

    /// What `writes` lines an agent appends to a transcript (`grown`) cost
    /// the daemon, each waited for (at most ten seconds) until a pass of
    /// the daemon added it: each such pass's time (ms), and the daemon's
    /// CPU time over all of them divided by `writes` (`None` where `/proc`
    /// cannot tell; `/proc` counts in 10 ms ticks, hence the mean over
    /// many). What a user's daemon also does now and then falls in that
    /// window as it would for them: a full-text segment merge (about a
    /// second of CPU at 1 GB), a backstop walk of every store (every 30 s).
    fn writes(
        &mut self,
        s: &Setup,
        grown: &mut Grown,
        writes: usize,
    ) -> anyhow::Result<(Vec<f64>, Option<f64>)> {
        let pid = self.0.id();
        let home = s.cairn_home.clone();
        let last = || {
            cairn_node::daemon::running_state(&home)
                .and_then(|st| cairn_node::daemon::last_pass(&home, &st))
        };
        let before = crate::measure::proc_cpu_ms(pid);
        let mut passes = Vec::new();
        for _ in 0..writes {
            let seen = last().map_or(0, |p| p.finished_ms);
            grown.append()?;
            self.wait_until(10, "read an appended line", || {
                last().is_some_and(|p| p.finished_ms > seen && p.report.added > 0)
            })?;
            if let Some(p) = last() {
                passes.push(p.took_ms as f64);
            }
        }
        let after = crate::measure::proc_cpu_ms(pid);
        let cpu = before
            .zip(after)
            .map(|(b, a)| (a - b) / writes.max(1) as f64);
        Ok((passes, cpu))
    }

    /// Waits (at most `secs` seconds) until `done`; fails if the daemon
    /// exits first or the time runs out.
    fn wait_until(&mut self, secs: u64, what: &str, done: impl Fn() -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + std::time::Duration::from_secs(secs);
        while !done() {
            if let Some(status) = self.0.try_wait()? {
                bail!("cairn serve exited with {status} before it could {what}");
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "cairn serve did not {what} within {secs} s"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `reps` fresh runs of `cairn index --quiet`, each after `before`, as a
/// figure (median and p95, ms).
fn index_runs(
    cairn: &Path,
    s: &Setup,
    reps: usize,
    name: &'static str,
    target: &'static str,
    mut before: impl FnMut(),
) -> anyhow::Result<Figure> {
    let mut ms = Vec::new();
    for _ in 0..reps.max(1) {
        before();
        ms.push(time_cairn(cairn, s, &["index", "--quiet"])?.0);
    }
    Ok(Figure::timings(name, &mut ms, target))
}

fn count_files(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => count_files(&e.path()),
            Ok(t) if t.is_file() => 1,
            _ => 0,
        })
        .sum()
}
