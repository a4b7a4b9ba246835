//! `cairn install` / `cairn uninstall` on a temporary `$HOME` with
//! pre-existing configs for every agent: entries added, every other byte
//! kept, a second run changes nothing, uninstall restores the originals,
//! malformed configs stay untouched.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::util::TestHome;

const CLAUDE_JSON: &str = "{\n  \"numStartups\": 12,\n  \"projects\": {\n    \"/home/dev/acme\": {\n      \"allowedTools\": []\n    }\n  },\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"stdio\",\n      \"command\": \"gh-mcp\",\n      \"args\": []\n    }\n  },\n  \"theme\": \"dark\"\n}\n";
const CLAUDE_SETTINGS: &str = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [{\"type\": \"command\", \"command\": \"echo pre\"}]\n      }\n    ]\n  }\n}\n";
const CODEX_TOML: &str = "# Codex settings\nmodel = \"o4-mini\"  # fast\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"--stdio\"]\n\n[profiles.deep]\nmodel = \"o3\"\n";
const CURSOR_JSON: &str = "{\"mcpServers\":{\"linear\":{\"url\":\"https://mcp.linear.app/sse\"}}}";
const GEMINI_JSON: &str =
    "{\n\t\"theme\": \"GitHub\",\n\t\"selectedAuthType\": \"oauth-personal\"\n}";
const OPENCODE_JSONC: &str = "// opencode config\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {},\n  \"theme\": \"tokyonight\", // trailing comma next\n}\n";
const COPILOT_JSON: &str = "{\n  \"mcpServers\": {}\n}\n";
const FACTORY_SETTINGS: &str = "{\n  \"customModels\": []\n}\n";

/// Every agent's config file with its original text.
fn plant(home: &TestHome) -> Vec<(PathBuf, &'static str)> {
    let h = home.path();
    let files = vec![
        (h.join(".claude.json"), CLAUDE_JSON),
        (h.join(".claude/settings.json"), CLAUDE_SETTINGS),
        (h.join(".codex/config.toml"), CODEX_TOML),
        (h.join(".cursor/mcp.json"), CURSOR_JSON),
        (h.join(".gemini/settings.json"), GEMINI_JSON),
        (h.join(".config/opencode/opencode.jsonc"), OPENCODE_JSONC),
        (h.join(".copilot/mcp-config.json"), COPILOT_JSON),
        (h.join(".factory/settings.json"), FACTORY_SETTINGS),
    ];
    for (p, text) in &files {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write config");
    }
    files
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn backup(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".cairn-backup");
    PathBuf::from(s)
}

/// `new` is `old` with one block inserted and nothing else changed.
fn assert_pure_insertion(old: &str, new: &str, what: &Path) {
    assert!(new.len() > old.len(), "{}: nothing added", what.display());
    let k = old
        .bytes()
        .zip(new.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let added = new.len() - old.len();
    assert_eq!(
        &new[k + added..],
        &old[k..],
        "{}: bytes other than the inserted block changed:\n{new}",
        what.display()
    );
}

fn bin() -> String {
    let p = crate::util::cairn_bin();
    p.canonicalize().unwrap_or(p).display().to_string()
}

#[test]
fn install_all_wires_every_agent_and_uninstall_restores_bytes() {
    let home = TestHome::empty();
    let files = plant(&home);
    let out = home.ok(&["install", "--all", "--hooks"]);
    assert!(out.contains("not supported yet: aider"), "{out}");
    let bin = bin();

    for (p, original) in &files {
        let now = read(p);
        assert_pure_insertion(original, &now, p);
        assert!(
            now.contains(&bin),
            "{} lacks the binary path:\n{now}",
            p.display()
        );
        assert_eq!(&read(&backup(p)), original, "backup of {}", p.display());
    }
    // The entries have each agent's own shape.
    let claude: Value = serde_json::from_str(&read(&files[0].0)).expect("claude json");
    assert_eq!(claude["mcpServers"]["cairn"]["command"], bin.as_str());
    assert_eq!(
        claude["mcpServers"]["cairn"]["args"],
        serde_json::json!(["mcp"])
    );
    assert_eq!(claude["mcpServers"]["github"]["command"], "gh-mcp");
    let settings: Value = serde_json::from_str(&read(&files[1].0)).expect("settings json");
    let hook = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .expect("hook command");
    assert_eq!(hook, format!("{bin} hook session-start"));
    // Gemini CLI's settings get the same hook (its timeout in ms) beside the server.
    let gemini: Value = serde_json::from_str(&read(&files[4].0)).expect("gemini json");
    assert_eq!(
        gemini["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        format!("{bin} hook session-start").as_str()
    );
    assert_eq!(
        gemini["hooks"]["SessionStart"][0]["hooks"][0]["timeout"],
        5000
    );
    assert_eq!(gemini["mcpServers"]["cairn"]["command"], bin.as_str());
    // Codex's hooks.json is made for it, and the user told to review it.
    let codex_hooks = home.path().join(".codex/hooks.json");
    let codex: Value = serde_json::from_str(&read(&codex_hooks)).expect("codex hooks json");
    assert_eq!(
        codex["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        format!("{bin} hook session-start").as_str()
    );
    assert!(out.contains("Hooks need review"), "{out}");
    // Factory's droid: the hook in its settings.json, the server in mcp.json.
    let droid: Value = serde_json::from_str(&read(&files[7].0)).expect("factory settings");
    assert_eq!(
        droid["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        format!("{bin} hook session-start").as_str()
    );
    assert!(read(&files[2].0).contains(&format!(
        "[mcp_servers.cairn]\ncommand = \"{bin}\"\nargs = [\"mcp\"]"
    )));
    let cursor: Value = serde_json::from_str(&read(&files[3].0)).expect("cursor json");
    assert_eq!(
        cursor["mcpServers"]["cairn"]["args"],
        serde_json::json!(["mcp"])
    );
    assert!(read(&files[5].0).contains(&format!("\"command\": [\"{bin}\", \"mcp\"]")));

    // A second run changes nothing.
    let snapshot: Vec<String> = files.iter().map(|(p, _)| read(p)).collect();
    let again = home.ok(&["install", "--all", "--hooks"]);
    assert!(again.contains("already wired"), "{again}");
    assert!(!again.contains("added"), "{again}");
    for ((p, _), before) in files.iter().zip(&snapshot) {
        assert_eq!(
            &read(p),
            before,
            "{} changed on the second run",
            p.display()
        );
    }

    // status shows what is wired where.
    let st = home.json(&["status", "--json"]);
    let wired: Vec<(String, String)> = st["wired"]
        .as_array()
        .expect("wired list")
        .iter()
        .map(|w| {
            (
                w["agent"].as_str().unwrap_or("").to_owned(),
                w["what"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for agent in [
        "claude-code",
        "codex",
        "cursor",
        "gemini",
        "opencode",
        "copilot",
    ] {
        assert!(
            wired.contains(&(agent.to_owned(), "mcp_server".to_owned())),
            "{agent}: {wired:?}"
        );
    }
    for agent in ["claude-code", "gemini", "codex", "factory"] {
        assert!(
            wired.contains(&(agent.to_owned(), "session_start_hook".to_owned())),
            "{agent}: {wired:?}"
        );
    }

    // uninstall gives back the original bytes, and a second uninstall is a no-op.
    home.ok(&["uninstall"]);
    for (p, original) in &files {
        assert_eq!(&read(p), original, "{} not restored", p.display());
    }
    assert!(
        !codex_hooks.exists(),
        "the hooks.json cairn made is removed"
    );
    let none = home.ok(&["uninstall"]);
    assert!(!none.contains("removed"), "{none}");
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["wired"], serde_json::json!([]));
}

#[test]
fn install_creates_missing_configs_and_uninstall_removes_them() {
    let home = TestHome::empty();
    std::fs::create_dir_all(home.path().join(".cursor")).expect("mkdir");
    let out = home.ok(&["install"]);
    assert!(out.contains("cursor"), "{out}");
    let mcp = home.path().join(".cursor/mcp.json");
    let v: Value = serde_json::from_str(&read(&mcp)).expect("json");
    assert_eq!(v["mcpServers"]["cairn"]["command"], bin().as_str());
    assert!(
        !backup(&mcp).exists(),
        "no backup of a file that did not exist"
    );
    // Undetected agents are left alone.
    assert!(!home.path().join(".claude.json").exists());
    assert!(!home.path().join(".codex").exists());
    home.ok(&["uninstall"]);
    assert!(!mcp.exists(), "a config cairn created goes away again");
}

#[test]
fn malformed_config_is_left_untouched_with_a_clear_error() {
    let home = TestHome::empty();
    let files = plant(&home);
    let broken = home.path().join(".gemini/settings.json");
    let bad = "{\n  \"theme\": \"GitHub\",\n  \"mcpServers\": {\n";
    std::fs::write(&broken, bad).expect("write broken");
    let codex = home.path().join(".codex/config.toml");
    std::fs::write(&codex, "model = \n").expect("write broken toml");
    let out = home.run(&["install", "--all"]);
    assert!(
        !out.status.success(),
        "install must fail when a config is broken"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".gemini/settings.json") && stderr.contains("line 4"),
        "{stderr}"
    );
    assert!(
        stderr.contains("config.toml") && stderr.contains("not valid TOML"),
        "{stderr}"
    );
    assert_eq!(read(&broken), bad);
    assert_eq!(read(&codex), "model = \n");
    assert!(!backup(&broken).exists());
    // The good configs were still wired.
    assert!(read(&files[3].0).contains("cairn"));
    let out = home.run(&["uninstall"]);
    assert!(!out.status.success());
    assert_eq!(read(&broken), bad);
}

#[test]
fn dry_run_shows_the_exact_change_and_writes_nothing() {
    let home = TestHome::empty();
    let files = plant(&home);
    let out = home.ok(&["install", "--agent", "claude-code", "--hooks", "--dry-run"]);
    assert!(out.contains("would add"), "{out}");
    assert!(
        out.contains(&format!(
            "+++ {}",
            home.path().join(".claude.json").display()
        )),
        "{out}"
    );
    assert!(out.contains("+    \"cairn\": {"), "{out}");
    assert!(out.contains("hook session-start"), "{out}");
    assert!(out.contains("dry run: nothing was written"), "{out}");
    for (p, original) in &files {
        assert_eq!(&read(p), original, "{} written in a dry run", p.display());
        assert!(!backup(p).exists());
    }
}

#[test]
fn install_honours_claude_config_dir_and_skips_hooks_unless_asked() {
    let home = TestHome::empty();
    let dir = home.path().join("elsewhere/claude");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let out = home
        .cmd(&["install", "--agent", "claude-code"])
        .env("CLAUDE_CONFIG_DIR", &dir)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&read(&dir.join(".claude.json"))).expect("json");
    assert_eq!(v["mcpServers"]["cairn"]["args"], serde_json::json!(["mcp"]));
    assert!(!home.path().join(".claude.json").exists());
    assert!(
        !dir.join("settings.json").exists(),
        "no hook without --hooks"
    );

    let out = home.run(&["install", "--agent", "aider"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not supported yet"));
    let out = home.run(&["install", "--agent", "emacs"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown agent"));
}

#[test]
fn the_installed_hook_command_runs_and_fails_open() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    home.ok(&["install", "--agent", "claude-code", "--hooks"]);
    let settings: Value =
        serde_json::from_str(&read(&home.path().join(".claude/settings.json"))).expect("json");
    let command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .expect("hook command")
        .to_owned();
    // Run it the way Claude Code does: through a shell, hook JSON on stdin.
    let mut child = std::process::Command::new("sh")
        .args(["-c", &command])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CAIRN_HOOK_BUDGET_MS", "20000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the hook command");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(br#"{"session_id":"s","cwd":"/home/dev/acme","hook_event_name":"SessionStart","source":"startup"}"#)
        .expect("write hook input");
    let out = child.wait_with_output().expect("hook output");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("hook JSON");
    assert!(
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .is_some_and(|c| c.contains("hyper"))
    );
}

/// Writes the stand-in for systemctl/launchctl that `TestHome::cmd` points
/// `CAIRN_SERVICE_CTL` at: it appends its arguments to `ctl.log`, says
/// "running" when a `running` flag file exists, and fails when a `fail`
/// flag file exists.
#[cfg(unix)]
fn fake_ctl(home: &TestHome) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let log = home.path().join("ctl.log");
    let script = format!(
        "#!/bin/sh\nd='{dir}'\necho \"$*\" >> \"$d/ctl.log\"\n\
         if [ -e \"$d/fail\" ]; then echo 'Failed to connect to bus' >&2; exit 1; fi\n\
         case \"$*\" in *is-active*|list*) [ -e \"$d/running\" ] || exit 3;; esac\nexit 0\n",
        dir = home.path().display()
    );
    let path = home.path().join("service-ctl");
    std::fs::write(&path, script).expect("write fake ctl");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    log
}

fn ctl_calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn install_sets_up_the_serve_service_and_uninstall_removes_it() {
    let home = TestHome::empty();
    let log = fake_ctl(&home);
    let unit = home.path().join(".config/systemd/user/cairn.service");

    // --dry-run shows the unit and the commands, and does nothing.
    let dry = home.ok(&["install", "--dry-run"]);
    assert!(dry.contains("would write:"), "{dry}");
    assert!(dry.contains(&format!("ExecStart={} serve", bin())), "{dry}");
    assert!(
        dry.contains("then run: ") && dry.contains("--user enable --now cairn.service"),
        "{dry}"
    );
    assert!(!unit.exists());
    assert!(ctl_calls(&log).is_empty(), "{:?}", ctl_calls(&log));

    // --no-service leaves it out.
    home.ok(&["install", "--no-service"]);
    assert!(!unit.exists());
    assert!(ctl_calls(&log).is_empty());
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["service"]["installed"], false, "{st}");
    assert_eq!(st["service"]["manager"], "systemd", "{st}");

    // install writes the unit and starts it through the manager.
    let out = home.ok(&["install"]);
    assert!(out.contains("installed and started"), "{out}");
    let text = read(&unit);
    assert!(
        text.contains(&format!("\nExecStart={} serve\n", bin())),
        "{text}"
    );
    assert!(text.contains("Restart=on-failure"), "{text}");
    assert_eq!(
        ctl_calls(&log),
        ["--user daemon-reload", "--user enable --now cairn.service"]
    );

    // status reports it, as the manager says.
    std::fs::write(home.path().join("running"), "").expect("flag");
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["service"]["installed"], true, "{st}");
    assert_eq!(st["service"]["running"], true, "{st}");
    assert_eq!(st["service"]["path"], unit.display().to_string(), "{st}");
    let text_status = home.ok(&["status"]);
    assert!(text_status.contains("service   running"), "{text_status}");
    std::fs::remove_file(home.path().join("running")).expect("flag");
    assert_eq!(
        home.json(&["status", "--json"])["service"]["running"],
        false
    );

    // A second install rewrites nothing and starts it again (idempotent).
    let again = home.ok(&["install"]);
    assert!(again.contains("already installed; started"), "{again}");

    // uninstall stops it and removes the unit.
    std::fs::write(&log, "").expect("reset log");
    let out = home.ok(&["uninstall"]);
    assert!(out.contains("stopped and removed"), "{out}");
    assert!(!unit.exists());
    let calls = ctl_calls(&log);
    assert_eq!(
        calls.first().map(String::as_str),
        Some("--user disable --now cairn.service"),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"--user daemon-reload".to_owned()),
        "{calls:?}"
    );
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["service"]["installed"], false, "{st}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_failing_service_manager_is_reported_and_a_missing_one_is_not_fatal() {
    let home = TestHome::empty();
    // No stand-in at all: the unit is written, the start is skipped, the run succeeds.
    let out = home.ok(&["install"]);
    assert!(out.contains("written, not started"), "{out}");
    assert!(
        home.path()
            .join(".config/systemd/user/cairn.service")
            .exists()
    );
    // A manager that fails: a clear error and a failing exit.
    fake_ctl(&home);
    std::fs::write(home.path().join("fail"), "").expect("flag");
    let out = home.run(&["install"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Failed to connect to bus"), "{err}");
    assert!(err.contains("could not be started"), "{err}");
}

/// The configs of the agents wired since the wider set of readers: JSON
/// files (some with content, some created), every other byte kept, a second
/// run changes nothing, uninstall restores the bytes; YAML configs get the
/// exact snippet printed and are never written.
#[test]
fn more_agents_are_wired_reversibly_and_yaml_gets_a_snippet() {
    let home = TestHome::empty();
    let h = home.path();
    let code = h.join(".config/Code/User");
    let existing: Vec<(PathBuf, &str)> = vec![
        (
            h.join(".config/Claude/claude_desktop_config.json"),
            "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"fs-mcp\", \"args\": []}\n  },\n  \"globalShortcut\": \"Alt+Space\"\n}\n",
        ),
        (
            code.join("mcp.json"),
            "{\n  // user servers\n  \"servers\": {},\n  \"inputs\": []\n}\n",
        ),
        (
            code.join("globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"),
            "{\n  \"mcpServers\": {}\n}",
        ),
        (
            h.join(".config/zed/settings.json"),
            "// Zed settings\n{\n  \"theme\": \"One Dark\",\n  \"vim_mode\": true, // yes\n}\n",
        ),
        (h.join(".qwen/settings.json"), "{\"theme\":\"Qwen Dark\"}\n"),
        (
            h.join(".config/amp/settings.json"),
            "{\n  \"amp.notifications.enabled\": false\n}\n",
        ),
        (
            h.join(".config/crush/crush.json"),
            "{\n  \"$schema\": \"https://charm.land/crush.json\",\n  \"options\": {\"debug\": false}\n}\n",
        ),
        (
            h.join(".vibe/config.toml"),
            "# vibe\nactive_model = \"devstral\"  # mine\n\n[[models]]\nname = \"devstral\"\nprovider = \"mistral\"\n",
        ),
    ];
    for (p, text) in &existing {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    // Agents present with no config yet: cairn creates one.
    let created = [
        h.join(
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
        ),
        h.join(".config/Code/User/globalStorage/kilocode.kilo-code/settings/mcp_settings.json"),
        h.join(".codeium/windsurf/mcp_config.json"),
        h.join(".kiro/settings/mcp.json"),
        h.join(".factory/mcp.json"),
        h.join(".gemini/antigravity/mcp_config.json"),
        h.join(".kimi/mcp.json"),
        h.join(".openhands/mcp.json"),
    ];
    for p in &created {
        // The agent's own folder (two levels up for the extension settings).
        let dir = if p.to_string_lossy().contains("globalStorage") {
            p.parent().and_then(Path::parent).expect("ext dir")
        } else if p.ends_with("settings/mcp.json") {
            p.parent().and_then(Path::parent).expect("kiro dir")
        } else {
            p.parent().expect("dir")
        };
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let goose_yaml =
        "# goose\nGOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n";
    let goose = h.join(".config/goose/config.yaml");
    std::fs::create_dir_all(goose.parent().expect("parent")).expect("mkdir");
    std::fs::write(&goose, goose_yaml).expect("write");
    std::fs::create_dir_all(h.join(".continue")).expect("mkdir");
    let hermes_yaml = "model: hermes-4\n";
    let hermes = h.join(".hermes/config.yaml");
    std::fs::create_dir_all(hermes.parent().expect("parent")).expect("mkdir");
    std::fs::write(&hermes, hermes_yaml).expect("write");

    let out = home.ok(&["install", "--no-service"]);
    let bin = bin();
    for (p, original) in &existing {
        let now = read(p);
        assert_pure_insertion(original, &now, p);
        assert!(now.contains(&bin), "{}:\n{now}", p.display());
        assert_eq!(&read(&backup(p)), original);
    }
    for p in &created {
        assert!(
            read(p).contains(&bin),
            "{} not created:\n{out}",
            p.display()
        );
    }
    let zed = read(&existing[3].0);
    assert!(zed.contains("\"context_servers\""), "{zed}");
    let amp = read(&existing[5].0);
    assert!(amp.contains("\"amp.mcpServers\""), "{amp}");
    let vibe = read(&existing[7].0);
    assert!(
        vibe.contains("[[mcp_servers]]\nname = \"cairn\"\ntransport = \"stdio\""),
        "{vibe}"
    );
    let vscode = read(&existing[1].0);
    assert!(vscode.contains("\"servers\": {\n    \"cairn\""), "{vscode}");
    // YAML: the snippet and its file are printed; the file is not touched.
    assert_eq!(read(&goose), goose_yaml);
    assert!(!backup(&goose).exists());
    assert!(out.contains("to do by hand"), "{out}");
    assert!(out.contains(&format!("cmd: {bin}")), "{out}");
    assert!(out.contains(&goose.display().to_string()), "{out}");
    assert!(out.contains("- name: cairn"), "{out}");
    // Hermes too: its `mcp_servers` snippet, its file untouched.
    assert_eq!(read(&hermes), hermes_yaml);
    assert!(out.contains(&hermes.display().to_string()), "{out}");
    assert!(
        out.contains(&format!(
            "mcp_servers:\n  cairn:\n    command: {bin}\n    args: [mcp]"
        )),
        "{out}"
    );
    // Continue without a config: the entry is printed, no file is made.
    assert!(!h.join(".continue/config.yaml").exists());

    // Idempotent.
    let snapshot: Vec<String> = existing.iter().map(|(p, _)| read(p)).collect();
    let again = home.ok(&["install", "--no-service"]);
    assert!(!again.contains(" added"), "{again}");
    for ((p, _), before) in existing.iter().zip(&snapshot) {
        assert_eq!(
            &read(p),
            before,
            "{} changed on the second run",
            p.display()
        );
    }
    // A snippet the user pasted counts as wired.
    let pasted = format!("{goose_yaml}  cairn:\n    cmd: {bin}\n    args: [mcp]\n");
    std::fs::write(&goose, &pasted).expect("write");
    let third = home.ok(&["install", "--agent", "goose", "--no-service"]);
    assert!(third.contains("already wired"), "{third}");

    // Reversible.
    let un = home.ok(&["uninstall"]);
    for (p, original) in &existing {
        assert_eq!(&read(p), original, "{} not restored", p.display());
    }
    for p in &created {
        assert!(!p.exists(), "{} left behind", p.display());
    }
    assert_eq!(read(&goose), pasted, "uninstall never rewrites YAML");
    assert!(un.contains("remove this entry from"), "{un}");
}

/// Continue's CLI reads `mcpServers:` in `~/.continue/config.yaml`: cairn
/// adds its item there keeping every other byte, once, shows it in a dry
/// run, removes it byte for byte, and refuses YAML it cannot edit safely.
#[test]
fn continue_config_yaml_gets_a_reversible_mcp_server_item() {
    let home = TestHome::empty();
    let cfg = home.path().join(".continue/config.yaml");
    std::fs::create_dir_all(cfg.parent().expect("parent")).expect("mkdir");
    let original = "# my assistant\nname: Local Config\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: m # main\n    provider: openai\n    model: gpt-4o\nmcpServers:\n  - name: other\n    command: npx\n    args: [\"-y\", other-mcp]\nrules:\n  - be brief\n";
    std::fs::write(&cfg, original).expect("write");
    let bin = bin();

    let dry = home.ok(&[
        "install",
        "--agent",
        "continue",
        "--dry-run",
        "--no-service",
    ]);
    assert!(dry.contains("would add"), "{dry}");
    assert!(dry.contains("+  - name: cairn"), "{dry}");
    assert_eq!(read(&cfg), original, "a dry run writes nothing");

    let out = home.ok(&["install", "--agent", "continue", "--no-service"]);
    assert!(out.contains("added"), "{out}");
    let now = read(&cfg);
    assert_pure_insertion(original, &now, &cfg);
    assert!(
        now.contains(&format!(
            "    args: [\"-y\", other-mcp]\n  - name: cairn\n    command: {bin}\n    args:\n      - mcp\nrules:\n"
        )),
        "{now}"
    );
    assert_eq!(read(&backup(&cfg)), original);
    let again = home.ok(&["install", "--agent", "continue", "--no-service"]);
    assert!(again.contains("already wired"), "{again}");
    assert_eq!(read(&cfg), now);
    let status: serde_json::Value =
        serde_json::from_str(&home.ok(&["status", "--json"])).expect("status json");
    let wired = status["wired"].as_array().expect("wired");
    assert!(
        wired
            .iter()
            .any(|w| w["agent"] == "continue" && w["command"] == format!("{bin} mcp")),
        "{wired:?}"
    );

    home.ok(&["uninstall", "--agent", "continue"]);
    assert_eq!(read(&cfg), original, "not restored byte for byte");

    // Flow style is refused with a reason; the file stays as it was.
    let flow = "name: c\nversion: 1.0.0\nschema: v1\nmcpServers: []\n";
    std::fs::write(&cfg, flow).expect("write");
    let out = home.run(&["install", "--agent", "continue", "--no-service"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the list is written inline"), "{stderr}");
    assert_eq!(read(&cfg), flow);
}

/// A malformed config of a newly wired agent is left byte for byte, with an
/// error naming the file; `--dry-run` writes nothing.
#[test]
fn more_agents_malformed_configs_and_dry_run() {
    let home = TestHome::empty();
    let zed = home.path().join(".config/zed/settings.json");
    std::fs::create_dir_all(zed.parent().expect("parent")).expect("mkdir");
    let bad = "{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n";
    std::fs::write(&zed, bad).expect("write");
    let out = home.run(&["install", "--agent", "zed", "--no-service"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("zed/settings.json"), "{stderr}");
    assert_eq!(read(&zed), bad);
    assert!(!backup(&zed).exists());

    let kiro = home.path().join(".kiro/settings/mcp.json");
    std::fs::create_dir_all(kiro.parent().expect("parent")).expect("mkdir");
    std::fs::write(&kiro, "{\"mcpServers\": {}}\n").expect("write");
    let dry = home.ok(&["install", "--agent", "kiro", "--dry-run", "--no-service"]);
    assert!(dry.contains("would add"), "{dry}");
    assert_eq!(read(&kiro), "{\"mcpServers\": {}}\n");
    let unknown = home.run(&["install", "--agent", "omp"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not supported yet"));
}

/// Cline reads its MCP servers from two files: the VS Code extension's
/// globalStorage settings and the Cline CLI's (and SDK extension's)
/// `<data>/settings/cline_mcp_settings.json`. `cairn install --agent cline`
/// wires each host that is present, uninstall removes both, and
/// `CLINE_MCP_SETTINGS_PATH` moves the CLI's.
#[test]
fn cline_install_wires_the_cli_beside_the_extension() {
    let home = TestHome::empty();
    let h = home.path();
    let ext = h.join(
        ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
    );
    let cli = h.join(".cline/data/settings/cline_mcp_settings.json");
    let cli_text =
        "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"fs-mcp\", \"args\": []}\n  }\n}\n";
    std::fs::create_dir_all(cli.parent().expect("parent")).expect("mkdir");
    std::fs::write(&cli, cli_text).expect("write");

    // Only the CLI is installed: its file alone is wired, by name or not.
    let out = home.ok(&["install", "--agent", "cline", "--no-service"]);
    let bin = bin();
    let now = read(&cli);
    assert_pure_insertion(cli_text, &now, &cli);
    let v: Value = serde_json::from_str(&now).expect("json");
    assert_eq!(v["mcpServers"]["cairn"]["command"], bin.as_str());
    assert_eq!(v["mcpServers"]["cairn"]["args"], serde_json::json!(["mcp"]));
    assert!(
        !ext.exists(),
        "extension file written without the extension:\n{out}"
    );
    let status = home.ok(&["status"]);
    assert!(status.contains(&cli.display().to_string()), "{status}");

    // The extension too: both wired, the CLI's already.
    std::fs::create_dir_all(ext.parent().and_then(Path::parent).expect("ext dir")).expect("mkdir");
    let out = home.ok(&["install", "--no-service"]);
    assert!(read(&ext).contains(&bin), "{out}");
    assert!(out.contains("already wired"), "{out}");

    // Uninstall removes both: the CLI's file back to its bytes.
    home.ok(&["uninstall", "--agent", "cline"]);
    assert_eq!(read(&cli), cli_text);
    assert!(!ext.exists());

    // CLINE_MCP_SETTINGS_PATH moves the CLI's file.
    let moved = h.join("cline-mcp.json");
    let out = home
        .cmd(&["install", "--agent", "cline", "--no-service"])
        .env("CLINE_MCP_SETTINGS_PATH", &moved)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    assert!(read(&moved).contains(&bin));
    assert_eq!(read(&cli), cli_text);
}
