//! `cairn-bench recall`: how often search puts the right session first.
//!
//! Reads an evaluation set (`fixtures/recall/` by default, see its README),
//! writes every session as the agent's own JSONL (Claude Code or Codex) into
//! a temporary home, indexes it with a real node, asks every question and
//! prints, per category and per split (`tune` / `holdout`): R@1, R@5, MRR
//! and the median search latency (in-process, warm, on this machine).
//!
//! ```text
//! cargo run --release -p cairn-bench -- recall
//! cairn-bench recall --misses            # also list the questions not found first
//! cairn-bench recall --haystack DIR     # the set among a gencorpus.py history
//! ```
//!
//! With `--haystack` (or `--haystack-index`, a copy of a data folder that
//! already indexed it) the set's sessions are found among thousands of
//! others: what recall is at the scale people's histories reach.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use cairn_node::config::{Config, Env};
use cairn_node::node::{IndexRequest, Node};
use cairn_node::search::SearchOptions;
use clap::Parser;
use serde::Serialize;
use serde_json::json;

/// Recall figures over a hand-written evaluation set.
#[derive(Debug, Parser)]
#[command(name = "cairn-bench recall")]
pub struct RecallArgs {
    /// The evaluation set: a folder with `*.txt` sessions and `questions.tsv`.
    #[arg(long)]
    pub set: Option<PathBuf>,
    /// "Now" for the search, as a date (the set's histories end in late 2025).
    #[arg(long, default_value = "2025-12-01")]
    pub now: String,
    /// Sessions asked for per question (R@5 and MRR look at these).
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Only questions of this split (tune or holdout).
    #[arg(long)]
    pub split: Option<String>,
    /// List every question whose session was not ranked first.
    #[arg(long)]
    pub misses: bool,
    /// Print the figures as JSON too.
    #[arg(long)]
    pub json: bool,
    /// Words only: leave out the meaning (semantic) tier.
    #[arg(long)]
    pub lexical: bool,
    /// Ask every question with `--agent` set to its session's agent: the
    /// filtered search's recall (the haystack's agents are about evenly
    /// split, so the filter keeps much of the noise).
    #[arg(long)]
    pub by_agent: bool,
    /// Index this history first, as noise the set's sessions must be found
    /// in: a folder with `claude/` and `codex/`, as `gencorpus.py` writes.
    #[arg(long, conflicts_with = "haystack_index")]
    pub haystack: Option<PathBuf>,
    /// Start from a copy of this cairn data folder, which already indexed
    /// the noise (saves indexing a large haystack on every run).
    #[arg(long)]
    pub haystack_index: Option<PathBuf>,
    /// Keep the temporary home and data folder (printed at the end), to
    /// ask a miss again with `cairn search`.
    #[arg(long)]
    pub keep: bool,
    /// Use this embedding table file instead of the built-in one (a
    /// candidate from `tools/embed/`). Not with a haystack index made
    /// with another table: its vectors would mean nothing.
    #[arg(long, conflicts_with = "haystack_index")]
    pub table: Option<PathBuf>,
    /// Write the built-in table's neighbour list (query expansion, see
    /// `node/assets/embed/neighbours.txt` and docs/embeddings.md) to this
    /// file and stop: the set is not read. Takes a release build tens of
    /// seconds.
    #[arg(long, conflicts_with_all = ["table", "haystack", "haystack_index"])]
    pub write_neighbours: Option<PathBuf>,
    /// Write each question's ranked sessions to this file, a line a
    /// question: id, split, category, wanted label, then `label:score`
    /// for each session found (tab-separated), for studying a ranking
    /// change offline.
    #[arg(long)]
    pub ranks: Option<PathBuf>,
}

/// One message of an evaluation session.
#[derive(Debug, Clone)]
struct Message {
    kind: char,
    time_ms: Option<i64>,
    text: String,
}

/// One evaluation session.
#[derive(Debug, Clone)]
struct Session {
    label: String,
    agent: String,
    project: String,
    messages: Vec<Message>,
}

/// One question with the session that answers it.
#[derive(Debug, Clone)]
struct Question {
    id: String,
    split: String,
    category: String,
    session: String,
    text: String,
}

/// One line of `--ranks`: the question's id, split, category and wanted
/// label, then `label:score` for each session found, tab-separated.
fn ranks_line(q: &Question, found: &[(&str, f64)]) -> String {
    let mut line = format!("{}\t{}\t{}\t{}", q.id, q.split, q.category, q.session);
    for (label, score) in found {
        line.push_str(&format!("\t{label}:{score}"));
    }
    line.push('\n');
    line
}

/// Parses `## label agent project`, `@ date time` / `@ none` and `X: text` lines.
fn parse_sessions(text: &str, out: &mut Vec<Session>) -> anyhow::Result<()> {
    let mut clock: Option<i64> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_prefix("## ") {
            let parts: Vec<&str> = head.split_whitespace().collect();
            let [label, agent, project] = parts[..] else {
                bail!("line {}: expected `## label agent project`", n + 1);
            };
            out.push(Session {
                label: label.to_owned(),
                agent: agent.to_owned(),
                project: project.to_owned(),
                messages: Vec::new(),
            });
            clock = None;
        } else if let Some(at) = line.strip_prefix("@ ") {
            clock = if at.trim() == "none" {
                None
            } else {
                let t = chrono::NaiveDateTime::parse_from_str(at.trim(), "%Y-%m-%d %H:%M")
                    .with_context(|| format!("line {}: bad time {at:?}", n + 1))?;
                Some(t.and_utc().timestamp_millis())
            };
        } else {
            let Some((kind, body)) = line.split_once(": ") else {
                bail!("line {}: expected `U: text`", n + 1);
            };
            let kind = match kind {
                "U" => 'U',
                "A" => 'A',
                "C" => 'C',
                "T" => 'T',
                _ => bail!("line {}: unknown speaker {kind:?}", n + 1),
            };
            let session = out
                .last_mut()
                .with_context(|| format!("line {}: message before any session", n + 1))?;
            session.messages.push(Message {
                kind,
                time_ms: clock,
                text: body.to_owned(),
            });
            clock = clock.map(|t| t + 120_000);
        }
    }
    Ok(())
}

fn parse_questions(text: &str) -> anyhow::Result<Vec<Question>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let [id, split, category, session, text] = f[..] else {
            bail!(
                "questions.tsv line {}: expected 5 tab-separated fields",
                n + 1
            );
        };
        out.push(Question {
            id: id.to_owned(),
            split: split.to_owned(),
            category: category.to_owned(),
            session: session.to_owned(),
            text: text.to_owned(),
        });
    }
    Ok(out)
}

/// A stable UUID-shaped session id for a label.
fn session_uuid(label: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let g = h.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        g >> 52,
        g & 0xffff_ffff_ffff
    )
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Writes one session as a Claude Code transcript.
fn write_claude(home: &Path, s: &Session, sid: &str) -> anyhow::Result<()> {
    let slug = s.project.replace('/', "-");
    let dir = home.join(".claude/projects").join(slug);
    std::fs::create_dir_all(&dir)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{sid}.jsonl")))?);
    let mut parent: Option<String> = None;
    let mut tool = 0u32;
    for (i, m) in s.messages.iter().enumerate() {
        let uuid = format!("{sid}-{i}");
        let mut v = json!({"parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": s.project, "sessionId": sid, "version": "2.1.0", "gitBranch": "main", "uuid": uuid});
        if let Some(t) = m.time_ms {
            v["timestamp"] = json!(rfc3339(t));
        }
        match m.kind {
            'U' => {
                v["type"] = json!("user");
                v["message"] = json!({"role": "user", "content": m.text});
            }
            'A' => {
                v["type"] = json!("assistant");
                v["message"] = json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": m.text}]});
            }
            'C' => {
                tool += 1;
                v["type"] = json!("assistant");
                v["message"] = json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "tool_use", "id": format!("toolu_{tool}"), "name": "Bash",
                                 "input": {"command": m.text}}]});
            }
            _ => {
                v["type"] = json!("user");
                v["message"] = json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": format!("toolu_{tool}"), "content": m.text}]});
            }
        }
        serde_json::to_writer(&mut f, &v)?;
        f.write_all(b"\n")?;
        parent = Some(uuid);
    }
    f.flush()?;
    Ok(())
}

/// A node with its data in `data`, for a user whose home is `home`, on the
/// machine "bench", with the agents' folders in `vars` where they are not
/// under `home`.
fn open_node(home: &str, data: &str, vars: &[(&str, &str)]) -> anyhow::Result<Node> {
    let env = Env::capture(|k| match k {
        "HOME" => Some(home.to_owned()),
        "CAIRN_HOME" => Some(data.to_owned()),
        "HOSTNAME" => Some("bench".to_owned()),
        _ => vars
            .iter()
            .find(|(v, _)| *v == k)
            .map(|(_, x)| (*x).to_owned()),
    });
    Ok(Node::open(Config::resolve(&env, None)?)?)
}

/// Indexes the history in `dir` (`claude/`, `codex/`) into the node at
/// `data`, before the set: the set's sessions are then found among it.
fn index_haystack(dir: &Path, home: &str, data: &str, now_ms: i64) -> anyhow::Result<()> {
    for sub in ["claude", "codex"] {
        anyhow::ensure!(
            dir.join(sub).is_dir(),
            "{} has no {sub}/ folder; give a folder gencorpus.py wrote",
            dir.display()
        );
    }
    let claude = dir.join("claude").to_string_lossy().into_owned();
    let codex = dir.join("codex").to_string_lossy().into_owned();
    let started = Instant::now();
    let mut node = open_node(
        home,
        data,
        &[("CLAUDE_CONFIG_DIR", &claude), ("CODEX_HOME", &codex)],
    )?;
    let report = node.index(IndexRequest::new(now_ms))?;
    eprintln!(
        "haystack: {} records from {} stores in {:.1} s",
        report.added,
        report.stores,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Copies the files of the cairn data folder `src` (one that indexed a
/// haystack) into `dst`.
fn copy_index(src: &Path, dst: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        src.join("cairn.db").is_file(),
        "{} holds no cairn.db; give the data folder of a home that indexed the haystack",
        src.display()
    );
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        if e.file_type()?.is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name()))
                .with_context(|| format!("cannot copy {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Removes the coarse cells the haystack's own passes wrote (the derived
/// file `cairn.db-cells`, see ARCHITECTURE.md), so that the pass that
/// indexes the set writes them anew over the haystack and the set alike.
/// Cells of the haystack alone cover more than three quarters of the
/// sketch once the set is added, so they would stay, and every search
/// reads the entries past them (the set's) from the sketch: the set would
/// never be found through the cells, as the sessions of a settled history
/// are, and the share of the cells a question reads would seem not to
/// matter (at 10 GB a sixteenth kept R@1 at 85.5%, against 83.3% with the
/// set inside the cells).
fn drop_haystack_cells(data: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(data.join("cairn.db-cells")) {
        Ok(()) => {
            eprintln!("removed the haystack's cells: the set's pass writes them over both");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).context("cannot remove the haystack's cells"),
    }
}

/// Writes one session as a Codex rollout.
fn write_codex(home: &Path, s: &Session, sid: &str) -> anyhow::Result<()> {
    let start = s
        .messages
        .iter()
        .find_map(|m| m.time_ms)
        .context("codex sessions need a time")?;
    let t0 = chrono::DateTime::from_timestamp_millis(start).context("time out of range")?;
    let dir = home
        .join(".codex/sessions")
        .join(t0.format("%Y/%m/%d").to_string());
    std::fs::create_dir_all(&dir)?;
    let name = format!("rollout-{}-{sid}.jsonl", t0.format("%Y-%m-%dT%H-%M-%S"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
    let mut line = |v: serde_json::Value| -> anyhow::Result<()> {
        serde_json::to_writer(&mut f, &v)?;
        f.write_all(b"\n")?;
        Ok(())
    };
    line(json!({"timestamp": rfc3339(start), "type": "session_meta",
        "payload": {"id": sid, "timestamp": rfc3339(start), "cwd": s.project,
                    "originator": "codex_cli_rs", "cli_version": "0.58.0"}}))?;
    let mut call = 0u32;
    for m in &s.messages {
        let ts = rfc3339(m.time_ms.unwrap_or(start));
        let payload = match m.kind {
            'U' => json!({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": m.text}]}),
            'A' => json!({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": m.text}]}),
            'C' => {
                call += 1;
                let args = json!({"command": ["bash", "-lc", m.text]}).to_string();
                json!({"type": "function_call", "name": "shell", "arguments": args,
                       "call_id": format!("call_{call}")})
            }
            _ => json!({"type": "function_call_output", "call_id": format!("call_{call}"),
                        "output": m.text}),
        };
        line(json!({"timestamp": ts, "type": "response_item", "payload": payload}))?;
    }
    f.flush()?;
    Ok(())
}

/// Figures for one group of questions.
#[derive(Debug, Default, Serialize)]
pub struct Figures {
    /// Questions in the group.
    pub n: usize,
    /// Share with the right session first.
    pub r_at_1: f64,
    /// Share with the right session in the first five.
    pub r_at_5: f64,
    /// Mean reciprocal rank (0 when not in the list).
    pub mrr: f64,
    /// Median search time, ms.
    pub p50_ms: f64,
}

fn figures(rows: &[(usize, f64)]) -> Figures {
    // rank: 1-based, 0 = not found.
    let n = rows.len();
    if n == 0 {
        return Figures::default();
    }
    let r1 = rows.iter().filter(|(r, _)| *r == 1).count() as f64 / n as f64;
    let r5 = rows.iter().filter(|(r, _)| (1..=5).contains(r)).count() as f64 / n as f64;
    let mrr = rows
        .iter()
        .map(|(r, _)| if *r == 0 { 0.0 } else { 1.0 / *r as f64 })
        .sum::<f64>()
        / n as f64;
    let mut ms: Vec<f64> = rows.iter().map(|(_, t)| *t).collect();
    ms.sort_by(f64::total_cmp);
    Figures {
        n,
        r_at_1: r1,
        r_at_5: r5,
        mrr,
        p50_ms: ms[n / 2],
    }
}

/// The meaning-level categories written for issue 57 (`reword-noun`,
/// `reword-symptom`, `reword-whywhat`, `reword-lang`): kept out of
/// `ALL-but-semantic` so that figure stays comparable with earlier runs.
fn is_reworded(category: &str) -> bool {
    category.starts_with("reword-")
}

/// Entry point of `cairn-bench recall`.
pub fn main() -> anyhow::Result<()> {
    let args = RecallArgs::parse_from(std::env::args().skip(1));
    if let Some(path) = &args.write_neighbours {
        let list = cairn_node::search::neighbour_list(
            cairn_node::embed::builtin(),
            cairn_node::embed::BUILTIN_ID,
        );
        std::fs::write(path, &list).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "wrote {} words' neighbours to {}",
            list.lines().count() - 1,
            path.display()
        );
        return Ok(());
    }
    let set = args
        .set
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/recall"));
    let mut sessions = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&set)
        .with_context(|| format!("cannot read the evaluation set {}", set.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        parse_sessions(&text, &mut sessions).with_context(|| f.display().to_string())?;
    }
    let questions = parse_questions(&std::fs::read_to_string(set.join("questions.tsv"))?)?;
    if let Some(path) = &args.table {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read the table {}", path.display()))?;
        cairn_node::embed::install(Vec::leak(bytes))
            .with_context(|| format!("cannot use the table {}", path.display()))?;
    }
    let ids: HashMap<String, String> = sessions
        .iter()
        .map(|s| (s.label.clone(), session_uuid(&s.label)))
        .collect();
    for q in &questions {
        anyhow::ensure!(
            ids.contains_key(&q.session),
            "{}: no session {}",
            q.id,
            q.session
        );
    }

    let tmp = tempfile::Builder::new().prefix("cairn-recall-").tempdir()?;
    let home = tmp.path().join("home");
    for s in &sessions {
        let sid = &ids[&s.label];
        match s.agent.as_str() {
            "codex" => write_codex(&home, s, sid)?,
            _ => write_claude(&home, s, sid)?,
        }
    }
    let home_s = home.to_string_lossy().into_owned();
    let data = tmp.path().join("cairn");
    let data_s = data.to_string_lossy().into_owned();
    let now_ms = cairn_node::search::parse_since(&args.now, 0)
        .with_context(|| format!("cannot read --now {:?}", args.now))?;
    if let Some(src) = &args.haystack_index {
        copy_index(src, &data)?;
    }
    if let Some(dir) = &args.haystack {
        index_haystack(dir, &home_s, &data_s, now_ms)?;
    }
    drop_haystack_cells(&data)?;
    let mut node = open_node(&home_s, &data_s, &[])?;
    let report = node.index(IndexRequest::new(now_ms))?;
    let stats = node.stats()?;
    eprintln!(
        "indexed {} sessions, {} records ({} new)",
        sessions.len(),
        stats.records,
        report.added
    );

    let agents: HashMap<&str, &str> = sessions
        .iter()
        .map(|s| (s.label.as_str(), s.agent.as_str()))
        .collect();
    let opts = SearchOptions {
        limit: args.limit,
        now_ms,
        lexical_only: args.lexical,
        ..SearchOptions::default()
    };
    // (category, split) -> (rank, ms)
    let mut by_group: BTreeMap<(String, String), Vec<(usize, f64)>> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut ranks = String::new();
    let label_of: HashMap<&str, &str> = ids.iter().map(|(k, v)| (v.as_str(), k.as_str())).collect();
    for q in &questions {
        if args.split.as_ref().is_some_and(|s| *s != q.split) {
            continue;
        }
        let filtered;
        let opts = match args.by_agent {
            true => {
                filtered = SearchOptions {
                    agent: Some(agents[q.session.as_str()].to_owned()),
                    ..opts.clone()
                };
                &filtered
            }
            false => &opts,
        };
        let started = Instant::now();
        let hits = node.search(&q.text, opts)?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let want = &ids[&q.session];
        let rank = hits
            .iter()
            .position(|h| &h.session_id == want)
            .map_or(0, |i| i + 1);
        // The set's label of each session found; `-` for the haystack's.
        let found: Vec<(&str, f64)> = hits
            .iter()
            .map(|h| {
                (
                    label_of.get(h.session_id.as_str()).copied().unwrap_or("-"),
                    h.score,
                )
            })
            .collect();
        if args.ranks.is_some() {
            ranks.push_str(&ranks_line(q, &found));
        }
        if rank != 1 {
            misses.push(format!(
                "{} {} {} want {} rank {} got {}: {}",
                q.id,
                q.split,
                q.category,
                q.session,
                if rank == 0 {
                    "-".to_owned()
                } else {
                    rank.to_string()
                },
                found.first().map_or("-", |f| f.0),
                q.text
            ));
        }
        by_group
            .entry((q.category.clone(), q.split.clone()))
            .or_default()
            .push((rank, ms));
    }

    let mut table: Vec<(String, Figures)> = Vec::new();
    let splits = ["tune", "holdout"];
    let mut cats: Vec<String> = by_group.keys().map(|(c, _)| c.clone()).collect();
    cats.dedup();
    let collect = |pred: &dyn Fn(&str, &str) -> bool| -> Vec<(usize, f64)> {
        by_group
            .iter()
            .filter(|((c, s), _)| pred(c, s))
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    };
    for c in &cats {
        for s in splits {
            table.push((
                format!("{c}/{s}"),
                figures(&collect(&|cc, ss| cc == c && ss == s)),
            ));
        }
    }
    for s in splits {
        table.push((
            format!("reworded/{s}"),
            figures(&collect(&|cc, ss| is_reworded(cc) && ss == s)),
        ));
        table.push((
            format!("ALL-but-semantic/{s}"),
            figures(&collect(&|cc, ss| {
                cc != "semantic" && !is_reworded(cc) && ss == s
            })),
        ));
        table.push((format!("ALL/{s}"), figures(&collect(&|_, ss| ss == s))));
    }
    table.push(("ALL".to_owned(), figures(&collect(&|_, _| true))));
    table.retain(|(_, f)| f.n > 0);

    println!(
        "{:<28} {:>4} {:>6} {:>6} {:>6} {:>8}",
        "group", "n", "R@1", "R@5", "MRR", "p50 ms"
    );
    for (name, f) in &table {
        println!(
            "{:<28} {:>4} {:>5.1}% {:>5.1}% {:>6.3} {:>8.2}",
            name,
            f.n,
            f.r_at_1 * 100.0,
            f.r_at_5 * 100.0,
            f.mrr,
            f.p50_ms
        );
    }
    if args.misses {
        println!();
        for m in &misses {
            println!("{m}");
        }
    }
    if args.json {
        let map: BTreeMap<&str, &Figures> = table.iter().map(|(k, v)| (k.as_str(), v)).collect();
        println!("{}", serde_json::to_string_pretty(&map)?);
    }
    if let Some(path) = &args.ranks {
        std::fs::write(path, ranks).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.keep {
        drop(node);
        let kept = tmp.keep();
        eprintln!(
            "kept: HOME={} CAIRN_HOME={} (delete it when done)",
            kept.join("home").display(),
            kept.join("cairn").display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_set_parses_and_is_big_enough() {
        let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/recall");
        let mut sessions = Vec::new();
        for f in ["friends.txt", "personal.txt", "coding.txt"] {
            let text = std::fs::read_to_string(set.join(f)).expect("read");
            parse_sessions(&text, &mut sessions).expect(f);
        }
        let qs = parse_questions(&std::fs::read_to_string(set.join("questions.tsv")).expect("tsv"))
            .expect("questions");
        let labels: std::collections::HashSet<&str> =
            sessions.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels.len(), sessions.len(), "labels are unique");
        assert!(qs.iter().all(|q| labels.contains(q.session.as_str())));
        let asked: std::collections::HashSet<&str> =
            qs.iter().map(|q| q.session.as_str()).collect();
        assert!(qs.len() >= 300 && asked.len() >= 100);
        assert!(qs.iter().filter(|q| q.category == "semantic").count() >= 50);
        let reworded: Vec<&Question> = qs.iter().filter(|q| is_reworded(&q.category)).collect();
        let held = reworded.iter().filter(|q| q.split == "holdout").count();
        assert!(
            reworded.len() >= 60,
            "{} reworded questions",
            reworded.len()
        );
        assert!(
            held * 3 >= reworded.len() && held * 3 <= reworded.len() * 2,
            "{held} of {} reworded questions held out",
            reworded.len()
        );
        let ids: std::collections::HashSet<&str> = qs.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids.len(), qs.len(), "question ids are unique");
        assert!(qs.iter().any(|q| q.split == "holdout"));
        assert!(qs.iter().all(|q| q.split == "tune" || q.split == "holdout"));
    }

    /// The haystack's cells go and nothing else does; a haystack without
    /// cells is fine.
    #[test]
    fn the_haystack_s_cells_are_dropped_before_the_set_is_indexed() {
        let dir = tempfile::tempdir().expect("tmp");
        for f in ["cairn.db", "cairn.db-sketch", "cairn.db-cells"] {
            std::fs::write(dir.path().join(f), f).expect("write");
        }
        drop_haystack_cells(dir.path()).expect("drop");
        assert!(!dir.path().join("cairn.db-cells").exists());
        assert!(dir.path().join("cairn.db").exists());
        assert!(dir.path().join("cairn.db-sketch").exists());
        drop_haystack_cells(dir.path()).expect("no cells is fine");
    }

    #[test]
    fn a_ranks_line_names_the_question_then_each_session_found_in_order() {
        let q = Question {
            id: "q7".into(),
            split: "tune".into(),
            category: "semantic".into(),
            session: "k03".into(),
            text: "intermittent test".into(),
        };
        assert_eq!(
            ranks_line(&q, &[("u04", 0.12), ("-", 0.5), ("k03", 0.0856)]),
            "q7\ttune\tsemantic\tk03\tu04:0.12\t-:0.5\tk03:0.0856\n"
        );
        assert_eq!(ranks_line(&q, &[]), "q7\ttune\tsemantic\tk03\n");
    }

    #[test]
    fn uuids_are_stable_and_distinct() {
        assert_eq!(session_uuid("c01"), session_uuid("c01"));
        assert_ne!(session_uuid("c01"), session_uuid("c02"));
        assert_eq!(session_uuid("k35").len(), 36);
    }
}
