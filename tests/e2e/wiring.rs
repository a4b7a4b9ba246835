//! cairn's MCP wiring as the real clients took it: for each agent release
//! under `fixtures/agents/<agent>/<release>/wiring/` (recorded by
//! `tools/realagents/wiring.sh`: `cairn install --agent A` in a throwaway
//! HOME, then one run against a scripted model that calls cairn's search),
//! what the release offered the model and sent back, and that today's
//! `cairn install` still writes the entry that recording used.
//!
//! Each entry of [`WIRED`] is written from the recorded `wiring.json`; a
//! changed install (command, args, key, file) fails here until the agent is
//! re-recorded. Targets no recorder can run are listed in [`UNVERIFIED`]
//! with the evidence their wiring rests on; every target `cairn install
//! --help` names must be in one table or the other.

use std::path::Path;

use serde_json::Value;

use crate::util::{TestHome, agent_fixtures, cairn_bin, recorded_releases, same_recordings};

/// One recorded wiring run, written from its `wiring.json`.
struct Wired {
    /// `<agent>/<release>` under `fixtures/agents`.
    dir: &'static str,
    /// The id given to `cairn install --agent`.
    agent: &'static str,
    /// The name cairn's search had among the tools the agent first offered,
    /// or `None` when the agent held cairn's tools back behind a tool
    /// search of its own.
    offered: Option<&'static str>,
    /// The name the first request gave cairn's search outside its tool
    /// list (a deferred tool, named in the prompt), or the group holding
    /// it, when it did.
    listed: Option<&'static str>,
    /// Every tool the scripted model called, in order, to reach cairn's
    /// search.
    calls: &'static [&'static str],
    /// Whether cairn's answer came back to the model in the next request.
    passed: bool,
}

const WIRED: &[Wired] = &[
    // Defers MCP tools: lists them by name, the model fetches the schema
    // with ToolSearch, then calls the tool.
    Wired {
        dir: "claude-code/2.1.332",
        agent: "claude-code",
        offered: None,
        listed: Some("mcp__cairn__search"),
        calls: &["ToolSearch", "mcp__cairn__search"],
        passed: true,
    },
    // 2.1.337 the same way; it also names the conversation to cairn in
    // the server's environment (`CLAUDE_CODE_SESSION_ID`).
    Wired {
        dir: "claude-code/2.1.337",
        agent: "claude-code",
        offered: None,
        listed: Some("mcp__cairn__search"),
        calls: &["ToolSearch", "mcp__cairn__search"],
        passed: true,
    },
    // The CLI's own settings file (`~/.cline/data/settings/`).
    Wired {
        dir: "cline/3.0.65",
        agent: "cline",
        offered: Some("cairn__search"),
        listed: None,
        calls: &["cairn__search"],
        passed: true,
    },
    // cairn's tools grouped under the `mcp__cairn` namespace; the model
    // calls `search` in it.
    Wired {
        dir: "codex/0.171.0",
        agent: "codex",
        offered: Some("mcp__cairn/search"),
        listed: None,
        calls: &["mcp__cairn__search"],
        passed: true,
    },
    Wired {
        dir: "gemini/0.61.0",
        agent: "gemini",
        offered: Some("mcp_cairn_search"),
        listed: None,
        calls: &["mcp_cairn_search"],
        passed: true,
    },
    // Kimi CLI offers MCP tools under their own names.
    Wired {
        dir: "kimi-cli/1.51.0",
        agent: "kimi-cli",
        offered: Some("search"),
        listed: None,
        calls: &["search"],
        passed: true,
    },
    Wired {
        dir: "opencode/1.18.33",
        agent: "opencode",
        offered: Some("cairn_search"),
        listed: None,
        calls: &["cairn_search"],
        passed: true,
    },
    // Defers MCP tools: tool_search shows the schema, tool_call runs it.
    Wired {
        dir: "qwen/0.24.4",
        agent: "qwen",
        offered: None,
        listed: Some("mcp__cairn__search"),
        calls: &["tool_search", "tool_call"],
        passed: true,
    },
    // Copilot CLI (offline, BYOK provider) offers MCP tools as
    // `<server>-<tool>`.
    Wired {
        dir: "copilot/1.0.102",
        agent: "copilot",
        offered: Some("cairn-search"),
        listed: None,
        calls: &["cairn-search"],
        passed: true,
    },
    // The Kilo CLI reads `mcp` in its own `~/.config/kilo/kilo.json` (the
    // IDE extension's file, which install wrote alone before, it ignores).
    Wired {
        dir: "kilo/7.7.7",
        agent: "kilo",
        offered: Some("cairn_search"),
        listed: None,
        calls: &["cairn_search"],
        passed: true,
    },
    // droid (BYOK custom model) defers MCP tools, named `<server>___<tool>`
    // in the first request; the model loads it with ToolSearch.
    Wired {
        dir: "factory/0.225.2",
        agent: "factory",
        offered: None,
        listed: Some("cairn___search"),
        calls: &["ToolSearch", "cairn___search"],
        passed: true,
    },
    // Continue's CLI reads `mcpServers:` in ~/.continue/config.yaml and
    // offers MCP tools under their own names.
    Wired {
        dir: "continue/1.5.47",
        agent: "continue",
        offered: Some("search"),
        listed: None,
        calls: &["search"],
        passed: true,
    },
    // The OpenHands CLI reads `mcpServers` in ~/.openhands/mcp.json and
    // offers MCP tools under their own names, each with a required
    // `security_risk` of its own.
    Wired {
        dir: "openhands/1.16.0",
        agent: "openhands",
        offered: Some("search"),
        listed: None,
        calls: &["search"],
        passed: true,
    },
    // Mistral Vibe 3 names cairn's tools as the group `mcp_cairn`; the model
    // finds the search with search_tool_functions and calls it from a
    // run_typescript program.
    Wired {
        dir: "vibe/3.0.2",
        agent: "vibe",
        offered: None,
        listed: Some("mcp_cairn"),
        calls: &["search_tool_functions", "run_typescript"],
        passed: true,
    },
];

/// Wiring targets the recorder cannot run, with what each rests on.
const UNVERIFIED: &[(&str, &str)] = &[
    (
        "cursor",
        "desktop app, no headless run: docs.cursor.com/context/model-context-protocol",
    ),
    (
        "claude-desktop",
        "desktop app: modelcontextprotocol.io/quickstart/user",
    ),
    (
        "vscode",
        "IDE extension (Copilot Chat): code.visualstudio.com/docs/copilot/customization/mcp-servers",
    ),
    (
        "roo",
        "IDE extension: docs.roocode.com/features/mcp/using-mcp-in-roo",
    ),
    (
        "goose",
        "not on the registries; cairn prints a snippet: block.github.io/goose/docs/getting-started/using-extensions",
    ),
    ("zed", "desktop editor: zed.dev/docs/ai/mcp"),
    (
        "windsurf",
        "desktop editor: docs.windsurf.com/windsurf/cascade/mcp",
    ),
    ("kiro", "desktop editor: kiro.dev/docs/mcp/configuration/"),
    (
        "crush",
        "its npm package downloads the binary from the web: github.com/charmbracelet/crush#mcps",
    ),
    (
        "amp",
        "needs an Amp account (server-side threads): ampcode.com/manual#mcp",
    ),
    ("antigravity", "desktop editor: antigravity.google/docs/mcp"),
    (
        "hermes",
        "cairn prints a snippet; Hermes 0.19.0's own loader (`tools.mcp_tool.discover_mcp_tools`, \
         `mcp` extra) registered mcp__cairn__search from it: github.com/NousResearch/hermes-agent",
    ),
];

/// What cairn's answer to the scripted search holds: the decision the
/// recorder indexed before the run.
const ANSWER: &str = "walrus cache stays at 64 MB";

fn evidence(w: &Wired) -> Value {
    let p = agent_fixtures().join(w.dir).join("wiring/wiring.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// What the recording shows, against what its entry claims.
fn check_recording(w: &Wired) -> Vec<String> {
    let ev = evidence(w);
    let mut problems = Vec::new();
    if ev["agent"] != w.agent {
        problems.push(format!("recorded for {}, not {}", ev["agent"], w.agent));
    }
    let first = strings(&ev["offered_first"]);
    if let Some(name) = w.offered
        && !first.contains(&name)
    {
        problems.push(format!(
            "{name:?} not among the tools first offered: {first:?}"
        ));
    }
    let named = strings(&ev["mentioned_first"]);
    if let Some(name) = w.listed
        && !named.contains(&name)
    {
        problems.push(format!(
            "{name:?} not named in the first request: {named:?}"
        ));
    }
    if w.offered.is_none() && w.listed.is_none() {
        problems.push("the entry shows no sign the agent loaded cairn".to_owned());
    }
    let calls = strings(&ev["calls"]);
    if calls != w.calls {
        problems.push(format!("the model called {calls:?}, want {:?}", w.calls));
    }
    let result = ev["result"].as_str().unwrap_or_default();
    let passed = ev["answer_passed"] == true && result.contains(ANSWER);
    if passed != w.passed {
        problems.push(format!(
            "answer passed on: recorded {passed}, entry says {}; result {result:?}",
            w.passed
        ));
    }
    problems
}

/// A TOML value as JSON, for comparing entries.
fn toml_json(item: &toml_edit::Item) -> Value {
    use toml_edit::Value as T;
    fn value(v: &T) -> Value {
        match v {
            T::String(s) => Value::from(s.value().as_str()),
            T::Integer(i) => Value::from(*i.value()),
            T::Float(f) => Value::from(*f.value()),
            T::Boolean(b) => Value::from(*b.value()),
            T::Datetime(d) => Value::from(d.value().to_string()),
            T::Array(a) => Value::Array(a.iter().map(value).collect()),
            T::InlineTable(t) => {
                Value::Object(t.iter().map(|(k, v)| (k.to_owned(), value(v))).collect())
            }
        }
    }
    match item {
        // An array of tables of named items (Vibe's `[[mcp_servers]]`), keyed
        // by name as the recorder keys it.
        toml_edit::Item::ArrayOfTables(a) => Value::Object(
            a.iter()
                .map(|t| {
                    let name = t.get("name").and_then(|n| n.as_str()).unwrap_or_default();
                    (
                        name.to_owned(),
                        toml_json(&toml_edit::Item::Table(t.clone())),
                    )
                })
                .collect(),
        ),
        toml_edit::Item::Value(v) => value(v),
        toml_edit::Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_owned(), toml_json(v)))
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// The member at `key` in a config file, binary path written `{CAIRN}`.
fn entry_at(file: &Path, format: &str, key: &[&str]) -> Result<Value, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("{} not written: {e}", file.display()))?;
    let text = text.replace(&cairn_bin().to_string_lossy().into_owned(), "{CAIRN}");
    if format == "yaml" {
        // A named item of a top-level list (Continue's `mcpServers`).
        let [list, name] = key else {
            return Err(format!("unexpected YAML key {key:?}"));
        };
        let (command, args) = cairn::install::yaml::entry(&text, list, name)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .ok_or_else(|| format!("{} has no {list} item named {name}", file.display()))?;
        return Ok(serde_json::json!({"name": name, "command": command, "args": args}));
    }
    let mut v = if format == "toml" {
        let doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| format!("{}: {e}", file.display()))?;
        toml_json(doc.as_item())
    } else {
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?
    };
    for k in key {
        v = v
            .get(*k)
            .cloned()
            .ok_or_else(|| format!("{} has no {}", file.display(), key.join(".")))?;
    }
    Ok(v)
}

/// Today's `cairn install --agent` against the entry the recording used.
fn check_install(w: &Wired) -> Vec<String> {
    let ev = evidence(w);
    let home = TestHome::empty();
    let configs = ev["config"].as_array().cloned().unwrap_or_default();
    if configs.is_empty() {
        return vec!["the recording names no config".to_owned()];
    }
    // The agent looks installed the way it did when recorded: the folders
    // of its config files exist.
    for c in &configs {
        let file = home.path().join(c["file"].as_str().unwrap_or_default());
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        // cairn adds to a YAML config but never creates one (Continue would
        // then load only cairn's entry): the user's config exists.
        if c["format"] == "yaml" {
            std::fs::write(&file, "name: Local Config\nversion: 1.0.0\nschema: v1\n")
                .expect("write");
        }
    }
    let out = home.run(&["install", "--agent", w.agent, "--no-service"]);
    if !out.status.success() {
        return vec![format!(
            "cairn install --agent {} failed: {}",
            w.agent,
            String::from_utf8_lossy(&out.stderr)
        )];
    }
    let mut problems = Vec::new();
    for c in &configs {
        let rel = c["file"].as_str().unwrap_or_default();
        let key: Vec<&str> = strings(&c["key"]);
        let format = c["format"].as_str().unwrap_or("json");
        match entry_at(&home.path().join(rel), format, &key) {
            Ok(got) if got == c["entry"] => {}
            Ok(got) => problems.push(format!(
                "cairn install --agent {} now writes {got} at {rel} {}, the recorded release \
                 loaded {}: re-record it (tools/realagents/wiring.sh)",
                w.agent,
                key.join("."),
                c["entry"]
            )),
            Err(e) => problems.push(format!(
                "cairn install --agent {} no longer writes the recorded {rel} {}: {e}",
                w.agent,
                key.join(".")
            )),
        }
    }
    problems
}

#[test]
fn every_wiring_recording_has_an_entry_and_loaded_cairn() {
    let on_disk = recorded_releases("wiring");
    let listed: Vec<&str> = WIRED.iter().map(|w| w.dir).collect();
    same_recordings("fixtures/agents/*/*/wiring and WIRED", &on_disk, &listed);
    let mut failures = Vec::new();
    for w in WIRED {
        let problems = check_recording(w);
        if !problems.is_empty() {
            eprintln!("---- {} ({})\n{}\n", w.dir, w.agent, problems.join("\n"));
            failures.push(w.dir);
        }
    }
    assert!(
        failures.is_empty(),
        "recordings not as their entries say: {failures:?}"
    );
}

#[test]
fn install_writes_the_entry_each_recorded_release_loaded() {
    let mut failures = Vec::new();
    for w in WIRED {
        let problems = check_install(w);
        if !problems.is_empty() {
            eprintln!("---- {} ({})\n{}\n", w.dir, w.agent, problems.join("\n"));
            failures.push(w.dir);
        }
    }
    assert!(
        failures.is_empty(),
        "install changed since recorded: {failures:?}"
    );
}

/// The targets `cairn install --help` names after "One of:": one word
/// each, comma-separated, a parenthesised note allowed after one.
fn install_targets() -> Vec<String> {
    let home = TestHome::empty();
    let help = home.ok(&["install", "--help"]);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, list) = flat
        .split_once("One of: ")
        .unwrap_or_else(|| panic!("`cairn install --help` lists no targets:\n{help}"));
    let mut plain = String::new();
    let mut depth = 0;
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for part in plain.split(',') {
        let words: Vec<&str> = part.split_whitespace().collect();
        if let Some(w) = words.first() {
            out.push(w.trim_end_matches(['.', ';']).to_owned());
        }
        if words.len() != 1 {
            break; // the list's last item, the help's next words after it
        }
    }
    out
}

#[test]
fn every_wiring_target_is_recorded_or_says_what_it_rests_on() {
    let targets = install_targets();
    assert!(targets.len() >= 22, "{targets:?}");
    let wired: Vec<&str> = WIRED.iter().map(|w| w.agent).collect();
    for t in &targets {
        let unverified = UNVERIFIED.iter().any(|(id, _)| id == t);
        assert!(
            wired.contains(&t.as_str()) != unverified,
            "wiring target {t}: {}",
            if unverified {
                "both recorded and listed as unverified"
            } else {
                "neither recorded (fixtures/agents/*/*/wiring) nor listed in UNVERIFIED"
            }
        );
    }
    for (id, _) in UNVERIFIED {
        assert!(
            targets.iter().any(|t| t == id),
            "UNVERIFIED names {id}, which is no wiring target"
        );
    }
}
