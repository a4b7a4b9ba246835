//! `cairn handoff` and `cairn resume` on the fixture home: a brief for every
//! fixture session of every agent and for every recording of a real release
//! under `fixtures/agents/` (its project, decisions and open ends, the byte
//! bound, no planted secret), `resume --dry-run` for every agent
//! with a prompt argument (the printed command run through a real shell),
//! a real exec into a stand-in agent, and the clear errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_node::handoff::launch::{LAUNCHERS, PromptArg, sharing};
use cairn_node::store::{SessionInfo, Store};

use crate::util::{TestHome, agent_fixtures, copy_tree, planted_secrets, recorded_releases};

/// Every stored session of an indexed home.
fn sessions(home: &TestHome) -> Vec<SessionInfo> {
    let db = home.cairn_home().join("cairn.db");
    let store = Store::open_read_only(&db).expect("open the index read-only");
    store.find_sessions("", 10_000).expect("sessions")
}

fn indexed() -> TestHome {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    home
}

#[test]
fn every_fixture_session_gets_a_bounded_brief_without_secrets() {
    let home = indexed();
    let all = sessions(&home);
    assert!(all.len() >= 30, "only {} sessions", all.len());
    let secrets = planted_secrets();
    // Per agent: sessions briefed, and how many of them name a decision.
    let mut by_agent: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for s in &all {
        let handle = format!("{}:{}", s.agent, s.session_id);
        let v = home.json(&["handoff", "--json", &handle]);
        let text = v["text"].as_str().expect("text");
        assert!(text.len() <= 8192, "{handle}: {} bytes", text.len());
        assert_eq!(v["max_bytes"], 8192);
        assert_eq!(v["session"]["agent"], s.agent.as_str(), "{handle}");
        assert_eq!(v["session"]["session_id"], s.session_id.as_str());
        assert_eq!(v["session"]["machine"], s.machine.as_str());
        if let Some(p) = &s.project {
            assert!(text.contains(&format!("project: {p}")), "{handle}:\n{text}");
        }
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{handle} leaks {secret}");
        }
        assert!(text.contains("## Left open"), "{handle}");
        assert!(
            text.contains(&format!("cairn show {}", s.session_id)),
            "{handle}"
        );
        let decisions = v["decisions"].as_array().expect("decisions").len();
        let e = by_agent.entry(s.agent.clone()).or_default();
        e.0 += 1;
        e.1 += usize::from(decisions > 0);
        // The plain text is the same brief.
        let plain = home.ok(&["handoff", &handle]);
        assert_eq!(plain, text, "{handle}");
    }
    // Every agent read has at least one session whose brief names a decision
    // (each agent's fixture plants one).
    let without: Vec<&String> = by_agent
        .iter()
        .filter(|(_, (_, d))| *d == 0)
        .map(|(a, _)| a)
        .collect();
    assert!(
        without.is_empty(),
        "no decision found for {without:?}: {by_agent:?}"
    );
}

#[test]
fn a_brief_holds_what_the_session_did_and_says_what_it_cut() {
    let home = indexed();
    let v = home.json(&["handoff", "--json", "6f1c2a9e"]);
    let decisions: Vec<&str> = v["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter_map(|d| d["text"].as_str())
        .collect();
    assert!(
        decisions.iter().any(|d| d.contains("pinned hyper to 0.14")),
        "{decisions:?}"
    );
    // The Chinese half of the planted decision is its own sentence.
    assert!(
        decisions.iter().any(|d| d.contains("不升级 hyper")),
        "{decisions:?}"
    );
    assert_eq!(v["goal"]["at"], 0);
    assert!(v["files"].as_array().expect("files").iter().any(|f| {
        f["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("Cargo.toml"))
    }));
    assert_eq!(v["commands"][0]["outcome"], "ok");
    assert!(
        v["open"]["last_request"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("proxy host in the README"))
    );
    assert_eq!(v["omitted"], serde_json::json!([]));

    // A failed tool call is an open end: the copilot edit whose reload hook failed.
    let v = home.json(&["handoff", "--json", "e0a1b2c3"]);
    let errors = v["open"]["unresolved_errors"].as_array().expect("errors");
    assert!(
        errors
            .iter()
            .any(|e| e["error"].as_str().is_some_and(|t| t.contains("failed"))),
        "{v}"
    );

    // The smallest bound is kept, and what was cut is named.
    let sid = "ses_5a1f0c2e8ffeQm3k";
    let full = home.json(&["handoff", "--json", sid]);
    let full_len = full["text"].as_str().expect("text").len();
    assert!(full_len > 1024, "{full_len}");
    let small = home.json(&["handoff", "--json", "--max-bytes", "1024", sid]);
    let text = small["text"].as_str().expect("text");
    assert!(text.len() <= 1024, "{}", text.len());
    assert!(text.contains("Left out to fit 1024 bytes"), "{text}");
    assert!(!small["omitted"].as_array().expect("omitted").is_empty());

    // Clear errors: unknown session, too small a bound.
    let out = home.run(&["handoff", "no-such-session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session id starts with"));
    let out = home.run(&["handoff", "--max-bytes", "10", sid]);
    assert_eq!(out.status.code(), Some(2));
}

/// `../shared/real-histories/recorded`: what today's agent releases wrote
/// for one run against the scripted model (a prompt, `echo hello`, and a
/// planted decision about the quokka library).
fn recorded_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/real-histories/recorded");
    d.is_dir().then_some(d)
}

#[test]
fn briefs_of_the_recorded_real_agent_sessions_hold_their_decision() {
    let Some(dir) = recorded_dir() else {
        eprintln!(
            "SKIPPED briefs_of_the_recorded_real_agent_sessions: ../shared/real-histories/recorded is absent"
        );
        return;
    };
    let mut read = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read recorded")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for rec in entries {
        let name = rec
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        let home = TestHome::empty();
        // aider writes into the project (its git root), not HOME.
        let aider = rec.join("_project_proj-aider");
        copy_tree(if aider.is_dir() { &aider } else { &rec }, home.path());
        home.ok(&["index", "--quiet"]);
        let all = sessions(&home);
        if all.is_empty() {
            eprintln!("recorded {name}: no session read by cairn (not briefed)");
            continue;
        }
        let mut decided = false;
        for s in &all {
            let handle = format!("{}:{}", s.agent, s.session_id);
            let v = home.json(&["handoff", "--json", &handle]);
            let text = v["text"].as_str().expect("text");
            assert!(text.len() <= 8192, "{name}: {} bytes", text.len());
            if let Some(p) = &s.project {
                assert!(
                    text.contains(p.as_str()),
                    "{name}: project missing:\n{text}"
                );
            }
            decided |= v["decisions"]
                .as_array()
                .expect("decisions")
                .iter()
                .any(|d| {
                    d["text"]
                        .as_str()
                        .is_some_and(|t| t.contains("quokka library to 2.3"))
                });
            // The one command every recording ran never reads as a failure.
            for c in v["commands"].as_array().expect("commands") {
                if c["command"]
                    .as_str()
                    .is_some_and(|t| t.contains("echo hello"))
                {
                    assert_ne!(c["outcome"], "failed", "{name}: {c}");
                }
            }
            assert!(text.contains("## Left open"), "{name}");
        }
        assert!(
            decided,
            "{name}: the planted decision is not among the brief's decisions"
        );
        read.push(name);
    }
    eprintln!("recorded sessions briefed: {read:?}");
    assert!(read.len() >= 10, "only {read:?}");
}

/// The fake tokens the recorded sessions planted (`fixtures/agents/README.md`):
/// cairn redacts them before anything is stored.
const RECORDED_SECRETS: &[&str] = &[
    "ghp_R3c0rdedAgentS3cretQuokka2026xYz1234",
    "ghp_Sc3nari0TwoTurnWalrus2026abcdEFGH567",
];

#[test]
fn briefs_of_every_recorded_release_hold_project_decisions_and_open_ends() {
    let releases = recorded_releases("home");
    assert!(releases.len() >= 15, "only {releases:?}");
    let mut secrets = planted_secrets();
    secrets.extend(RECORDED_SECRETS.iter().map(|s| (*s).to_owned()));
    for rel in &releases {
        // The two-turn scenario plants two decisions and ends on the walrus
        // question; the subagent scenario decides the platypus build; the
        // one-turn session plants the quokka decision.
        let (decided, last_asked): (&[&str], &str) = if rel.ends_with("-subagent") {
            (&["platypus build runs nightly"], "platypus")
        } else if rel.ends_with("-turns") {
            (
                &[
                    "quokka fixtures in tests/data",
                    "walrus cache stays at 64 MB",
                ],
                "walrus",
            )
        } else {
            (&["quokka library to 2.3"], "quokka")
        };
        let home = TestHome::empty();
        copy_tree(&agent_fixtures().join(rel).join("home"), home.path());
        home.ok(&["index", "--quiet"]);
        let all = sessions(&home);
        assert!(!all.is_empty(), "{rel}: no session read");
        let mut found: Vec<&str> = Vec::new();
        let mut asked = false;
        for s in &all {
            let handle = format!("{}:{}", s.agent, s.session_id);
            let v = home.json(&["handoff", "--json", &handle]);
            let text = v["text"].as_str().expect("text");
            assert!(text.len() <= 8192, "{rel}: {} bytes", text.len());
            assert_eq!(v["omitted"], serde_json::json!([]), "{rel}: cut at 8 KB");
            let project = s
                .project
                .as_deref()
                .unwrap_or_else(|| panic!("{rel}: no project"));
            assert!(
                text.contains(&format!("project: {project}")),
                "{rel}: project missing:\n{text}"
            );
            for secret in &secrets {
                assert!(!text.contains(secret.as_str()), "{rel} leaks {secret}");
            }
            // Hermes and OpenClaw mask the token themselves (`ghp_R3...1234`):
            // a prefix followed by a token's worth of characters is a leak.
            let leaked = text.match_indices("ghp_").any(|(i, _)| {
                text[i + 4..]
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .count()
                    >= 20
            });
            assert!(!leaked, "{rel}: a token got in:\n{text}");
            assert!(text.contains("## Left open"), "{rel}");
            for d in v["decisions"].as_array().expect("decisions") {
                let t = d["text"].as_str().expect("text");
                found.extend(decided.iter().filter(|want| t.contains(**want)));
            }
            asked |= v["open"]["last_request"]["text"]
                .as_str()
                .is_some_and(|t| t.contains(last_asked));
        }
        for want in decided {
            assert!(
                found.contains(want),
                "{rel}: no brief names the decision {want:?}"
            );
        }
        assert!(asked, "{rel}: no brief leaves the last request open");
    }
}

/// A stand-in for an agent: writes its arguments (NUL-separated) and its
/// working folder to `<name>.args` / `<name>.cwd` beside itself.
#[cfg(unix)]
fn stand_in(bin: &Path, name: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = bin.join(name);
    let script = format!(
        "#!/bin/sh\nprintf '%s\\0' \"$@\" > '{dir}/{name}.args'\npwd > '{dir}/{name}.cwd'\n",
        dir = bin.display()
    );
    std::fs::write(&p, script).expect("write stand-in");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[cfg(unix)]
fn recorded_args(bin: &Path, name: &str) -> Vec<String> {
    let raw = std::fs::read(bin.join(format!("{name}.args"))).expect("stand-in ran");
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8(a.to_vec()).expect("utf-8 args"))
        .collect()
}

#[cfg(unix)]
fn bin_with_every_agent(home: &TestHome) -> PathBuf {
    let bin = home.path().join("fake-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for l in LAUNCHERS {
        stand_in(&bin, l.program);
    }
    bin
}

#[cfg(unix)]
#[test]
fn resume_dry_run_prints_a_command_a_shell_runs_as_is_for_every_agent() {
    let home = indexed();
    let bin = bin_with_every_agent(&home);
    let proj = home.path().join("acme copy");
    std::fs::create_dir_all(&proj).expect("mkdir");
    let proj_s = proj.to_str().expect("utf-8 path");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    for l in LAUNCHERS {
        // A program two agents share (`kimi`) is asked for by agent id.
        let asked = if sharing(l.program).len() > 1 {
            l.agent
        } else {
            l.program
        };
        let args = [
            "resume",
            "6f1c2a9e",
            "--agent",
            asked,
            "--cd",
            proj_s,
            "--dry-run",
            "--json",
        ];
        let out = home.cmd(&args).env("PATH", &path).output().expect("run");
        assert!(
            out.status.success(),
            "{}: {}",
            l.program,
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("plan JSON");
        let argv: Vec<String> = plan["argv"]
            .as_array()
            .expect("argv")
            .iter()
            .map(|a| a.as_str().expect("str").to_owned())
            .collect();
        assert_eq!(argv[0], l.program);
        assert_eq!(argv[1..=l.lead.len()], *l.lead, "{argv:?}");
        if let PromptArg::Flag(f) = l.prompt {
            assert_eq!(argv[argv.len() - 2], f, "{}", l.program);
            assert_eq!(argv.len(), l.lead.len() + 3, "{argv:?}");
        } else {
            assert_eq!(argv.len(), l.lead.len() + 2, "{argv:?}");
        }
        let prompt = argv.last().expect("prompt");
        assert!(prompt.contains("pinned hyper to 0.14"), "{}", l.program);
        assert!(prompt.contains("Continue the coding session"), "{prompt}");
        assert_eq!(plan["cwd"], proj_s);
        assert_eq!(plan["interactive"], l.interactive);
        assert!(
            plan["installed"]
                .as_str()
                .is_some_and(|p| p.starts_with(bin.to_str().expect("bin")))
        );

        // The text form is one line a POSIX shell runs: the stand-in gets
        // exactly the same arguments, in the project folder.
        let line = home
            .cmd(&args[..args.len() - 1])
            .env("PATH", &path)
            .output()
            .expect("run");
        assert!(line.status.success());
        let line = String::from_utf8(line.stdout).expect("utf-8");
        assert_eq!(line.trim_end(), plan["command"].as_str().expect("command"));
        let ran = std::process::Command::new("sh")
            .arg("-c")
            .arg(line.trim_end())
            .env("PATH", &path)
            .status()
            .expect("sh");
        assert!(ran.success(), "{line}");
        assert_eq!(recorded_args(&bin, l.program), argv[1..], "{}", l.program);
        let cwd = std::fs::read_to_string(bin.join(format!("{}.cwd", l.program))).expect("cwd");
        assert_eq!(cwd.trim_end(), proj_s);
    }
}

#[cfg(unix)]
#[test]
fn resume_starts_the_agent_with_the_brief_and_says_what_it_needs() {
    let home = indexed();
    let bin = home.path().join("only-pi");
    std::fs::create_dir_all(&bin).expect("mkdir");
    stand_in(&bin, "pi");
    // Only the stand-in: an agent installed on this machine (in /usr/bin)
    // must not be picked before it.
    let path = bin.display().to_string();
    let proj = home.path().join("work");
    std::fs::create_dir_all(&proj).expect("mkdir");
    let proj_s = proj.to_str().expect("utf-8");

    // The session's own agent (claude) is not installed: the first installed
    // one starts, in --cd, with the brief (fenced as recalled memory) as
    // its prompt, extra arguments before it.
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--cd", proj_s, "--", "--model", "m1"])
        .env("PATH", &path)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("not installed here; using pi"), "{err}");
    let args = recorded_args(&bin, "pi");
    assert_eq!(args[..2], ["--model", "m1"]);
    assert!(args[2].contains("pinned hyper to 0.14"), "{args:?}");
    assert!(args[2].contains("<recalled_memory"), "{args:?}");
    let cwd = std::fs::read_to_string(bin.join("pi.cwd")).expect("cwd");
    assert_eq!(cwd.trim_end(), proj_s);

    // The project folder of another machine: say where it ran, ask for --cd.
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--dry-run"])
        .env("PATH", &path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/home/dev/acme") && err.contains("--cd"),
        "{err}"
    );
    // A --cd that is not a folder.
    let gone = home.path().join("no-such-folder");
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--dry-run", "--cd"])
        .arg(&gone)
        .env("PATH", &path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a folder"),
        "{out:?}"
    );
    // An agent cairn reads but cannot start says why.
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--cd", proj_s, "--agent", "roo"])
        .env("PATH", &path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be resumed: no prompt argument"),
        "{out:?}"
    );
    // An agent cairn cannot hand a prompt to, and one not installed.
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--cd", proj_s, "--agent", "vim"])
        .env("PATH", &path)
        .output()
        .expect("run");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("claude, codex"),
        "{out:?}"
    );
    let out = home
        .cmd(&["resume", "6f1c2a9e", "--cd", proj_s, "--agent", "codex"])
        .env("PATH", &path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not installed"),
        "{out:?}"
    );
}

#[test]
fn the_browse_page_serves_the_handoff_and_the_resume_command() {
    let home = indexed();
    let ui = crate::ui::UiProc::start(&home);
    let cli = home.json(&["handoff", "--json", "6f1c2a9e"]);
    let web = ui.json("/api/handoff?id=6f1c2a9e");
    assert_eq!(web["brief"]["text"], cli["text"]);
    assert_eq!(
        web["resume"],
        "cairn resume 6f1c2a9e-4b7d-4e1a-9c3b-2d5e8f7a1b01"
    );
    assert_eq!(ui.get("/api/handoff?id=zzzz-no-such").status, 404);
    assert_eq!(ui.get("/api/handoff").status, 400);
    // The session view offers both.
    let js = ui.get("/app.js").body;
    assert!(
        js.contains("copy handoff") && js.contains("\"cairn resume \""),
        "app.js"
    );
}

/// The same session gives the same brief on a machine that received it
/// over sync (real nodes, real QUIC on loopback): no local path, clock or
/// row id of the machine that prints it gets in.
#[test]
fn a_synced_session_gives_the_same_brief_on_both_machines() {
    use crate::sync::{DEADLINE, free_port, pair, seeded_and_empty, wait_for};
    let (a, b, a_records) = seeded_and_empty();
    let port = free_port();
    let a_listen = format!("127.0.0.1:{port}");
    pair(&a, &b, &a_listen);
    let (_a_serve, _) = a.serve(&a_listen);
    let (_b_serve, _) = b.serve("127.0.0.1:0");
    let synced = wait_for(DEADLINE, || {
        let n = b.json(&["status", "--json"])["records"].as_u64()?;
        (n >= a_records).then_some(n)
    });
    assert_eq!(synced, Some(a_records), "B holds A's records");
    let mut compared = 0;
    for s in sessions(&a.home) {
        let handle = format!("{}:{}", s.agent, s.session_id);
        let on_a = a.json(&["handoff", "--json", &handle]);
        let on_b = b.json(&["handoff", "--json", &handle]);
        assert_eq!(on_a["text"], on_b["text"], "{handle}");
        assert_eq!(on_b["session"]["machine"], "fixture-laptop", "{handle}");
        compared += 1;
    }
    assert!(compared >= 30, "{compared}");
}
