//! Every agent cairn reads, end to end: the fixture home holds a session per
//! agent with a planted fact (found first for a natural question) and a
//! planted secret (never stored); `cairn sources` and `cairn status` count
//! every agent; a home with no history says where it looked.

use std::collections::BTreeSet;

use crate::util::TestHome;

/// (question, agent that must answer first, text its session must hold).
const FACTS: &[(&str, &str, &str)] = &[
    ("why typst for invoice pdf", "crush", "eight times faster"),
    (
        "avatar cache QuotaExceededError safari",
        "omp",
        "IndexedDB rather than localStorage",
    ),
    ("backup cron logrotate overlap", "openclaw", "03:17"),
    (
        "oklch dark theme muddy",
        "claude-desktop",
        "oklch instead of hsl",
    ),
    (
        "orders consumer loses messages on restart",
        "goose",
        "manual ack",
    ),
    (
        "product search deep pages time out",
        "qwen",
        "keyset cursors",
    ),
    ("nested settings INI config", "kimi-code", "INI to TOML"),
    ("thumbnail worker memory imagemagick", "kimi-cli", "libvips"),
    (
        "double click login two sessions",
        "cline",
        "debounces submit",
    ),
    ("feature flag change needs redeploy", "roo", "Unleash"),
    ("android release R8 minify fails", "kilo", "Gradle 8.7"),
    ("graphql SDL resolvers drift", "continue", "Pothos"),
    (
        "terraform state corrupted concurrent applies",
        "factory",
        "DynamoDB locking",
    ),
    ("scraper blocked ip", "vibe", "robots.txt"),
    ("qdrant cluster embeddings overkill", "vibe", "pgvector"),
    ("telegram bot drops messages restart", "hermes", "webhooks"),
    ("weekly digest tokyo sunday", "hermes", "own timezone"),
    (
        "end-to-end suite forty minutes",
        "openhands",
        "three shards",
    ),
    ("lerna bootstrap slow", "amp", "pnpm workspaces"),
    ("photo uploads time out", "antigravity", "presigned URLs"),
    (
        "nightly export collides with backup csv truncated",
        "kiro",
        "02:30 UTC",
    ),
];

/// Agents the fixture home has records for, beyond these facts' agents.
const OTHERS: &[&str] = &[
    "claude-code",
    "codex",
    "gemini",
    "aider",
    "copilot",
    "opencode",
    "cursor",
    "pi",
];

#[test]
fn every_agents_planted_fact_is_found_first() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    for (query, agent, needle) in FACTS {
        home.assert_found_first(query, agent, needle);
    }
}

/// `cairn sources --json` lists every agent with records; `cairn status`
/// counts records per agent, and the two agree.
#[test]
fn sources_and_status_count_every_agent() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let sources = home.json(&["sources", "--json"]);
    let with_records: BTreeSet<&str> = sources["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter(|a| a["records"].as_u64().unwrap_or(0) > 0)
        .filter_map(|a| a["agent"].as_str())
        .collect();
    let want: BTreeSet<&str> = FACTS
        .iter()
        .map(|f| f.1)
        .chain(OTHERS.iter().copied())
        .collect();
    for a in &want {
        assert!(
            with_records.contains(a),
            "{a} has no records: {with_records:?}"
        );
    }
    let status = home.json(&["status", "--json"]);
    let per_agent = status["agents"].as_object().expect("agents");
    for a in &want {
        let n = per_agent
            .get(*a)
            .and_then(|v| v["records"].as_u64())
            .unwrap_or(0);
        assert!(n > 0, "status has no records for {a}: {per_agent:#?}");
    }
}

/// With no history anywhere, `cairn sources` names every agent and the
/// paths it checked.
#[test]
fn empty_home_lists_every_agent_and_where_it_looked() {
    let home = TestHome::empty();
    let out = home.ok(&["sources"]);
    assert!(out.contains("no agent history found"), "{out}");
    let json = home.json(&["sources", "--json"]);
    let agents = json["agents"].as_array().expect("agents");
    for a in FACTS.iter().map(|f| f.1).chain(OTHERS.iter().copied()) {
        let entry = agents
            .iter()
            .find(|x| x["agent"] == a)
            .unwrap_or_else(|| panic!("{a} missing from {json:#}"));
        let checked = entry["checked"].as_array().expect("checked");
        assert!(!checked.is_empty(), "{a} checked nothing");
        assert!(
            out.contains(&format!("{a}: ")),
            "{a} not in text output:\n{out}"
        );
    }
}
