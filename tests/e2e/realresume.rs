//! `cairn resume` into real coding agents: each agent, installed from its
//! package registry (as `../shared/realagents/install_npm.sh` does), is
//! started by `cairn resume` in a pseudo-terminal against the scripted
//! model (`../shared/realagents/fakellm.py`, on loopback), and the agent's
//! first turn sent to the model (its first request that offers tools; side
//! requests such as opencode's title come first and are skipped) must hold
//! every decision of the session's brief.
//!
//! Runs when `CAIRN_REALAGENTS` names an install folder (with
//! `npm/<agent>/node_modules/.bin/<agent>`, or `venv-<agent>/bin/<agent>`
//! for the Python agents of `../shared/realagents/install_py.sh`) and
//! python3 is there; prints a SKIPPED line otherwise. How to run it: `docs/resume.md`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{TestHome, cairn_bin};

/// Runs a command in a pseudo-terminal, answers the terminal queries TUIs
/// send at start (cursor position, colours, device attributes), and ends it
/// when the stop file appears or the time is up.
const PTY_DRIVER: &str = r#"
import os, pty, select, signal, sys, time
stop, secs, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
answers = {b"\x1b[6n": b"\x1b[24;80R", b"\x1b]10;?": b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\",
           b"\x1b]11;?": b"\x1b]11;rgb:0000/0000/0000\x1b\\", b"\x1b[c": b"\x1b[?62;22c",
           b"\x1b[0c": b"\x1b[?62;22c", b"\x1b[18t": b"\x1b[8;24;80t"}
end = time.time() + secs
while time.time() < end and not os.path.exists(stop):
    r, _, _ = select.select([fd], [], [], 0.2)
    if fd in r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        for q, a in answers.items():
            if q in data:
                os.write(fd, a)
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        break
    time.sleep(1)
"#;

struct Agent {
    /// The program, installed as `npm/<name>/node_modules/.bin/<name>` or
    /// `venv-<name>/bin/<name>` under `CAIRN_REALAGENTS`.
    name: &'static str,
    /// The agent cairn is asked to start (`--agent`).
    agent: &'static str,
    /// Arguments for the agent after `--`.
    args: &'static [&'static str],
    /// Writes the agent's config for the scripted model at `url` into `home`
    /// (the project folder is the third argument); returns the environment
    /// the agent needs besides.
    setup: fn(&Path, &str, &Path) -> Vec<(&'static str, String)>,
}

fn setup_pi(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".pi/agent");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = format!(
        r#"{{ "providers": {{ "fake": {{ "baseUrl": "{url}/v1", "api": "openai-completions", "apiKey": "sk-fake",
  "compat": {{ "supportsDeveloperRole": false, "supportsReasoningEffort": false }},
  "models": [ {{ "id": "fake-model", "name": "Fake Model" }} ] }} }} }}"#
    );
    std::fs::write(dir.join("models.json"), cfg).expect("pi config");
    Vec::new()
}

fn setup_codex(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".codex");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = format!(
        "model = \"fake-model\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\
         [model_providers.fake]\nname = \"Fake\"\nbase_url = \"{url}/v1\"\nenv_key = \"FAKE_API_KEY\"\nwire_api = \"responses\"\n"
    );
    std::fs::write(dir.join("config.toml"), cfg).expect("codex config");
    vec![("FAKE_API_KEY", "sk-fake".to_owned())]
}

fn setup_opencode(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".config/opencode");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = format!(
        r#"{{ "$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
  "model": "fake/fake-model", "small_model": "fake/fake-model",
  "provider": {{ "fake": {{ "npm": "@ai-sdk/openai-compatible", "name": "Fake",
    "options": {{ "baseURL": "{url}/v1", "apiKey": "sk-fake" }},
    "models": {{ "fake-model": {{ "name": "Fake Model", "tool_call": true }} }} }} }},
  "permission": {{ "bash": "allow", "edit": "allow" }} }}"#
    );
    std::fs::write(dir.join("opencode.json"), cfg).expect("opencode config");
    Vec::new()
}

/// Kilo's CLI, an opencode fork: the same config, in `~/.config/kilo/kilo.json`.
fn setup_kilo(home: &Path, url: &str, proj: &Path) -> Vec<(&'static str, String)> {
    setup_opencode(home, url, proj);
    let dir = home.join(".config/kilo");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::rename(
        home.join(".config/opencode/opencode.json"),
        dir.join("kilo.json"),
    )
    .expect("kilo config");
    Vec::new()
}

fn setup_kimi(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".kimi");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = format!(
        "default_model = \"fake\"\n[models.fake]\nprovider = \"fake\"\nmodel = \"fake-model\"\n\
         max_context_size = 128000\n[providers.fake]\ntype = \"openai_legacy\"\n\
         base_url = \"{url}/v1\"\napi_key = \"sk-fake\"\n"
    );
    std::fs::write(dir.join("config.toml"), cfg).expect("kimi config");
    Vec::new()
}

/// Claude Code: onboarding done, the fake key approved and the project
/// trusted, so the TUI opens straight onto the prompt.
fn setup_claude(home: &Path, url: &str, proj: &Path) -> Vec<(&'static str, String)> {
    let key = "sk-ant-fake-0123456789abcdefghij";
    let state = serde_json::json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": { "approved": [&key[key.len() - 20..]], "rejected": [] },
        "projects": { proj.display().to_string(): {
            "hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true } },
    });
    std::fs::write(home.join(".claude.json"), state.to_string()).expect("claude state");
    vec![
        ("ANTHROPIC_BASE_URL", url.to_owned()),
        ("ANTHROPIC_API_KEY", key.to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
    ]
}

fn setup_gemini(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = r#"{ "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false }, "telemetry": { "enabled": false },
  "general": { "disableAutoUpdate": true } }"#;
    std::fs::write(dir.join("settings.json"), cfg).expect("gemini settings");
    vec![
        ("GEMINI_API_KEY", "fake-key".to_owned()),
        ("GOOGLE_GEMINI_BASE_URL", url.to_owned()),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true".to_owned()),
    ]
}

fn setup_qwen(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".qwen");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = r#"{ "security": { "auth": { "selectedType": "openai" } },
  "privacy": { "usageStatisticsEnabled": false }, "telemetry": { "enabled": false } }"#;
    std::fs::write(dir.join("settings.json"), cfg).expect("qwen settings");
    vec![
        ("OPENAI_BASE_URL", format!("{url}/v1")),
        ("OPENAI_API_KEY", "sk-fake".to_owned()),
        ("OPENAI_MODEL", "fake-model".to_owned()),
    ]
}

fn setup_vibe(home: &Path, url: &str, _proj: &Path) -> Vec<(&'static str, String)> {
    let dir = home.join(".vibe");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = format!(
        "active_model = \"fake\"\nenable_telemetry = false\nenable_update_checks = false\n\
         [[providers]]\nname = \"fake\"\napi_base = \"{url}/v1\"\napi_key_env_var = \"FAKE_API_KEY\"\n\
         backend = \"generic\"\n[[models]]\nname = \"fake-model\"\nprovider = \"fake\"\nalias = \"fake\"\n"
    );
    std::fs::write(dir.join("config.toml"), cfg).expect("vibe config");
    vec![("FAKE_API_KEY", "sk-fake".to_owned())]
}

const AGENTS: &[Agent] = &[
    Agent {
        name: "pi",
        agent: "pi",
        args: &["--provider", "fake", "--model", "fake-model"],
        setup: setup_pi,
    },
    Agent {
        name: "codex",
        agent: "codex",
        args: &["--dangerously-bypass-approvals-and-sandbox"],
        setup: setup_codex,
    },
    Agent {
        name: "opencode",
        agent: "opencode",
        args: &[],
        setup: setup_opencode,
    },
    Agent {
        name: "kilo",
        agent: "kilo",
        args: &[],
        setup: setup_kilo,
    },
    Agent {
        name: "claude",
        agent: "claude-code",
        args: &["--model", "claude-sonnet-4-5"],
        setup: setup_claude,
    },
    Agent {
        name: "gemini",
        agent: "gemini",
        args: &["-m", "gemini-2.5-flash"],
        setup: setup_gemini,
    },
    Agent {
        name: "qwen",
        agent: "qwen",
        args: &[],
        setup: setup_qwen,
    },
    Agent {
        name: "vibe",
        agent: "vibe",
        args: &["--trust"],
        setup: setup_vibe,
    },
    // Kimi CLI's `kimi` (told apart from Kimi Code's by cairn).
    Agent {
        name: "kimi",
        agent: "kimi-cli",
        args: &[],
        setup: setup_kimi,
    },
];

/// How long one agent may take to send its first turn (a TUI on a loaded
/// 2-core machine can take minutes to start).
const AGENT_DEADLINE: Duration = Duration::from_secs(300);

/// True when a request offers the model tools: an agent's own turn, not a
/// side request (a title, a summary) sent before it.
fn offers_tools(v: &serde_json::Value) -> bool {
    v.get("tools")
        .and_then(|t| t.as_array())
        .is_some_and(|t| !t.is_empty())
}

/// Every string in a JSON value, joined: what a model reads of a request.
fn strings(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The request bodies the scripted model logged, in arrival order.
fn bodies(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Ends the processes a test started whose program lies under `dir` (an
/// agent's helper daemon installed into the test home), by their ids.
fn end_processes_under(dir: &Path) {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("exe")).is_ok_and(|exe| exe.starts_with(dir)) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// A TCP port on loopback that was free a moment ago (the scripted model
/// speaks HTTP; `sync::free_port` probes UDP, for QUIC).
fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn resume_hands_the_brief_to_real_agents_first_request() {
    let Some(ra) = std::env::var_os("CAIRN_REALAGENTS").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED resume_hands_the_brief_to_real_agents: set CAIRN_REALAGENTS to an install made like ../shared/realagents/install_npm.sh"
        );
        return;
    };
    let fakellm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realagents/fakellm.py");
    if !fakellm.is_file() || Command::new("python3").arg("-V").output().is_err() {
        eprintln!(
            "SKIPPED resume_hands_the_brief_to_real_agents: no ../shared/realagents/fakellm.py or python3"
        );
        return;
    }
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let brief = home.json(&["handoff", "--json", "6f1c2a9e"]);
    let decisions: Vec<String> = brief["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .map(|d| d["text"].as_str().expect("text").to_owned())
        .collect();
    assert!(decisions.len() >= 2, "{decisions:?}");

    let work = tempfile::tempdir().expect("tmp");
    let driver = work.path().join("ptydrive.py");
    std::fs::write(&driver, PTY_DRIVER).expect("driver");
    let proj = work.path().join("proj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    let port = free_tcp_port();
    let url = format!("http://127.0.0.1:{port}");
    let logs = work.path().join("fake");
    let _server = Server(
        Command::new("python3")
            .arg(&fakellm)
            .args(["--port", &port.to_string()])
            .arg("--log")
            .arg(logs.join("log.jsonl"))
            .arg("--bodies")
            .arg(logs.join("bodies"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the scripted model"),
    );
    let up = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < up, "the scripted model did not start");
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut ran = Vec::new();
    for a in AGENTS {
        let installed = [
            ra.join("npm").join(a.name).join("node_modules/.bin"),
            ra.join(format!("venv-{}", a.name)).join("bin"),
        ]
        .into_iter()
        .find(|b| b.join(a.name).is_file());
        let Some(bin) = installed else {
            eprintln!(
                "{} is not installed under {}: not run",
                a.name,
                ra.display()
            );
            continue;
        };
        // The agent runs in a HOME of its own: the fixture home holds
        // hand-made stores of the agents (an `opencode.db`, ...) that a real
        // release would try to open or migrate. cairn finds its data through
        // CAIRN_HOME.
        let agent_home = work.path().join(format!("home-{}", a.name));
        std::fs::create_dir_all(&agent_home).expect("mkdir");
        let env = (a.setup)(&agent_home, &url, &proj);
        let _ = std::fs::remove_dir_all(logs.join("bodies"));
        let stop = work.path().join(format!("stop-{}", a.name));
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut args: Vec<String> = vec![
            stop.display().to_string(),
            AGENT_DEADLINE.as_secs().to_string(),
            cairn_bin().display().to_string(),
            "resume".into(),
            "6f1c2a9e".into(),
            "--agent".into(),
            a.agent.into(),
            "--cd".into(),
            proj.display().to_string(),
            "--".into(),
        ];
        args.extend(a.args.iter().map(|s| s.to_string()));
        let mut drive = Command::new("python3")
            .arg(&driver)
            .args(&args)
            .env_clear()
            .env("HOME", &agent_home)
            .env("CAIRN_HOME", home.cairn_home())
            .env("PATH", &path)
            .env("TERM", "xterm-256color")
            .env("HOSTNAME", "testbox")
            .env("CAIRN_LOG", "error")
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the pty driver");
        // Wait for the agent's first turn sent to the model.
        let deadline = Instant::now() + AGENT_DEADLINE;
        let first = loop {
            let turn = bodies(&logs.join("bodies")).into_iter().find_map(|f| {
                let raw = std::fs::read(f).ok()?;
                let v = serde_json::from_slice::<serde_json::Value>(&raw).ok()?;
                offers_tools(&v).then_some(v)
            });
            if turn.is_some() {
                break turn;
            }
            if Instant::now() > deadline || drive.try_wait().ok().flatten().is_some() {
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        std::fs::write(&stop, "").expect("stop file");
        let _ = drive.wait();
        end_processes_under(&agent_home);
        let first =
            first.unwrap_or_else(|| panic!("{}: no turn of its own reached the model", a.name));
        let mut seen = String::new();
        strings(&first, &mut seen);
        for d in &decisions {
            assert!(
                seen.contains(d.as_str()),
                "{}: the first request lacks {d:?}",
                a.name
            );
        }
        eprintln!(
            "{}: its first turn held all {} decisions of the brief",
            a.name,
            decisions.len()
        );
        ran.push(a.name);
    }
    assert!(
        ran.len() >= 2,
        "only {ran:?} ran; install pi, codex and opencode under CAIRN_REALAGENTS"
    );
}
