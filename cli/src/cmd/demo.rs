//! `cairn demo`: the whole thing on any machine, even one with no agent
//! history. Two nodes ("laptop" and "desktop") start in throwaway homes,
//! each seeded with half of the embedded fixture histories (eight agents,
//! planted decisions and fake secrets). Each indexes its own history, they
//! pair over loopback with a one-time code, sync once over QUIC with mutual
//! TLS, and then each answers questions from the other's history, naming
//! the machine an answer came from. Everything is removed afterwards.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow};
use cairn_node::config::{Config, Env};
use cairn_node::node::{IndexRequest, Node};
use cairn_node::search::{Hit, SearchOptions};
use cairn_node::sync::facade::{self, Station, StationRole};
use cairn_node::sync::peers::PeerTable;
use cairn_node::sync::session::{SessionReport, SharedNode};
use serde::Serialize;

use crate::args::DemoArgs;
use crate::output;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/demo_fixtures.rs"));
}

/// Fixture folders that go to the laptop; the rest go to the desktop.
const LAPTOP_PARTS: &[&str] = &[
    ".claude/",
    ".codex/",
    ".aider.chat.history.md",
    "projects/",
    ".pi/",
];

/// (asked on, question): each is answered from the other machine's history.
const QUESTIONS: &[(&str, &str)] = &[
    ("desktop", "why did we pin hyper?"),
    ("desktop", "job queue redis"),
    ("desktop", "почему отключили кэширование"),
    ("laptop", "which search engine did we pick and why"),
    ("laptop", "为什么选择 tantivy"),
    ("laptop", "src/webhooks/payment.ts retries"),
];

#[derive(Serialize)]
struct Answer {
    asked_on: &'static str,
    query: &'static str,
    hits: Vec<Hit>,
}

#[derive(Serialize)]
struct DemoOutput {
    laptop_records: u64,
    desktop_records: u64,
    redactions: u64,
    sync: SessionReport,
    answers: Vec<Answer>,
}

/// Runs `cairn demo`.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("cairn-demo-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let (laptop_dir, desktop_dir) = (dir.path().join("laptop"), dir.path().join("desktop"));
    lay_fixtures(&laptop_dir, &desktop_dir)?;
    let now = super::now_ms();
    let mut laptop = open(&laptop_dir, "laptop")?;
    let mut desktop = open(&desktop_dir, "desktop")?;
    laptop.index(IndexRequest::new(now))?;
    desktop.index(IndexRequest::new(now))?;
    let (laptop_records, desktop_records) = (laptop.stats()?.records, desktop.stats()?.records);
    let redactions: u64 = [&laptop, &desktop]
        .iter()
        .map(|n| {
            n.stats().map(|s| {
                s.agents
                    .values()
                    .flat_map(|a| a.redactions.values())
                    .sum::<u64>()
            })
        })
        .sum::<Result<u64, _>>()?;

    let report = pair_and_sync(laptop, desktop)?;
    let (laptop, desktop) = report.1;

    let mut answers = Vec::new();
    for (on, q) in QUESTIONS {
        let node = if *on == "laptop" { &laptop } else { &desktop };
        let guard = node.lock().map_err(|_| anyhow!("node lock poisoned"))?;
        let opts = SearchOptions {
            limit: 1,
            now_ms: super::now_ms(),
            ..SearchOptions::default()
        };
        answers.push(Answer {
            asked_on: on,
            query: q,
            hits: guard.search(q, &opts)?,
        });
    }
    if args.json {
        return output::json(&DemoOutput {
            laptop_records,
            desktop_records,
            redactions,
            sync: report.0,
            answers,
        });
    }
    let mut out = output::stdout();
    output::line(
        &mut out,
        &format!(
            "cairn demo: two machines in {}\n  laptop indexed {laptop_records} records (Claude Code, Codex, aider, pi), desktop {desktop_records} (Gemini, Copilot, opencode, Cursor); {redactions} secrets redacted before storage",
            dir.path().display()
        ),
    )?;
    output::line(
        &mut out,
        &format!(
            "  paired over loopback with a one-time code, synced over QUIC + mutual TLS: laptop received {} records, sent {}",
            report.0.records_received, report.0.records_sent
        ),
    )?;
    for a in &answers {
        output::line(&mut out, "")?;
        output::line(&mut out, &format!("[{}] ? {}", a.asked_on, a.query))?;
        match a.hits.first() {
            None => output::line(&mut out, "  (no match)")?,
            Some(h) => {
                output::line(
                    &mut out,
                    &format!(
                        "  answered from {}'s history · {} · {}",
                        h.machine,
                        h.agent,
                        h.project.as_deref().unwrap_or("-")
                    ),
                )?;
                output::line(&mut out, &shown_answer(h))?;
            }
        }
    }
    output::line(&mut out, "")?;
    output::line(
        &mut out,
        "Your own history: `cairn index`, then `cairn search -- \"your question\"`. Two machines: see README.",
    )?;
    Ok(())
}

/// What the demo prints of a hit under its "answered from" line: the
/// reply that answers it when the best record is the user's own words
/// (often the question itself, or a question beside another matter, as in
/// the Gemini session where "search" matched "the search page still calls
/// the Maps API"), else the record itself. The question is on the line
/// above already.
fn shown_answer(h: &Hit) -> String {
    let shown = h.answer_snippet.as_ref().unwrap_or(&h.snippet);
    format!("  {}", output::printable(shown))
}

/// Splits the embedded fixture home between the two machines.
fn lay_fixtures(laptop: &Path, desktop: &Path) -> anyhow::Result<()> {
    for (rel, bytes) in embedded::FILES {
        let to_laptop = LAPTOP_PARTS.iter().any(|p| rel.starts_with(p));
        let is_config = rel.starts_with(".config/cairn/");
        for (home, wanted) in [
            (laptop, to_laptop || is_config),
            (desktop, !to_laptop || is_config),
        ] {
            if !wanted {
                continue;
            }
            let dest = home.join(rel);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&dest, bytes)
                .with_context(|| format!("cannot write {}", dest.display()))?;
        }
    }
    Ok(())
}

fn open(home: &Path, name: &str) -> anyhow::Result<Node> {
    // The fixture config names the machine; the demo names its two itself.
    let cfg_file = home.join(".config/cairn/config.toml");
    if let Ok(text) = std::fs::read_to_string(&cfg_file) {
        let renamed = text.replace("name = \"fixture-laptop\"", &format!("name = {name:?}"));
        std::fs::write(&cfg_file, renamed)?;
    }
    let env = Env {
        home: Some(home.to_path_buf()),
        hostname: Some(name.to_owned()),
        ..Env::default()
    };
    Ok(Node::open(Config::resolve(&env, None)?)?)
}

type Pair = (SharedNode, SharedNode);

/// Pairs the two nodes with a real one-time code, then runs one sync
/// session: the laptop dials the desktop's sync station.
fn pair_and_sync(laptop: Node, desktop: Node) -> anyhow::Result<(SessionReport, Pair)> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let handshake = Duration::from_secs(10);
    // The demo's homes are new: no daemon serves them.
    let invitation = facade::invite(&desktop, None, Some(loopback), &[], Duration::from_secs(60))?;
    let code = invitation.code().encode();
    let waiting = std::thread::spawn(move || invitation.wait());
    let joined = facade::join(&laptop, None, &code);
    waiting
        .join()
        .map_err(|_| anyhow!("the pairing window stopped"))?
        .context("pairing (desktop side)")?;
    let desktop_peer = joined.context("pairing (laptop side)")?.peer;
    let laptop_home = laptop.config().home.clone();

    let rt = cairn_node::sync::runtime().context("start the network runtime")?;
    rt.block_on(async {
        let server = Station::bind(desktop, loopback, StationRole::Listener, handshake)?;
        let client = Station::bind(laptop, loopback, StationRole::Dialer, handshake)?;
        // The laptop learned the desktop's pairing address; point it at the sync station.
        let server_addr = server.local_addr()?;
        let fp = desktop_peer
            .fingerprint_bytes()
            .ok_or_else(|| anyhow!("paired peer has no key"))?;
        let peer = PeerTable::modify(&laptop_home, |t| {
            Ok(t.by_fingerprint_mut(&fp).map(|p| {
                p.remember_address(server_addr);
                p.clone()
            }))
        })?
        .ok_or_else(|| anyhow!("the desktop is missing from the laptop's peer table"))?;
        let (served, dialed) = tokio::join!(server.serve_one(handshake), client.sync_peer(&peer));
        served.context("sync (desktop side)")?;
        let report = dialed.context("sync (laptop side)")?;
        client.close(Duration::ZERO).await;
        server.close(Duration::ZERO).await;
        Ok((report, (client.node().clone(), server.node().clone())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(role: &str, snippet: &str, answer: Option<&str>) -> Hit {
        Hit {
            session_id: "s1".into(),
            agent: "aider".into(),
            project: None,
            machine: "laptop".into(),
            role: role.into(),
            time: None,
            score: 1.0,
            snippet: snippet.into(),
            source: None,
            offset: None,
            matches: 1,
            title: None,
            record_id: 1,
            answer_snippet: answer.map(str::to_owned),
            answer_role: answer.map(|_| "assistant".to_owned()),
            answer_record_id: answer.map(|_| 2),
            answer_time: None,
        }
    }

    #[test]
    fn a_question_is_shown_as_its_answer() {
        let h = hit(
            "user",
            "почему мы отключили кэширование?",
            Some("Мы отключили кэширование, потому что прокси отдавал устаревшие цены."),
        );
        assert_eq!(
            shown_answer(&h),
            "  Мы отключили кэширование, потому что прокси отдавал устаревшие цены."
        );
    }

    #[test]
    fn a_reply_is_shown_as_it_is() {
        let h = hit("assistant", "Decision: we pinned hyper to 0.14", None);
        assert_eq!(shown_answer(&h), "  Decision: we pinned hyper to 0.14");
    }
}
