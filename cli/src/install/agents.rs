//! The catalogue of agents cairn can wire: where each keeps its MCP config,
//! how its entry looks, and how to tell the agent is installed. Data only.

use std::path::PathBuf;

use cairn_node::sources::Locations;
use cairn_node::sources::vscode_tasks::cline_data;
use serde_json::json;

use super::target::{Edit, HOOK_ARGS, NAME, Target, What};

/// Where things are on this machine, and the binary to run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`, when set.
    pub claude_config_dir: Option<PathBuf>,
    /// The agents' resolved locations.
    pub locations: Locations,
    /// Absolute path of the cairn binary.
    pub bin: String,
    /// `$CLINE_MCP_SETTINGS_PATH`, when set: where the Cline CLI reads its
    /// MCP servers instead of its data folder.
    pub cline_mcp_settings: Option<PathBuf>,
}

/// One agent cairn can wire.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Agent id.
    pub id: &'static str,
    /// Whether it looks installed here (any of its hosts).
    pub detected: bool,
    /// The MCP server entry.
    pub mcp: Target,
    /// Whether the host that reads `mcp` looks installed.
    pub mcp_detected: bool,
    /// The MCP entries of the agent's other hosts, each reading its own
    /// config (the Cline CLI beside the extension), with whether that host
    /// looks installed.
    pub also: Vec<(Target, bool)>,
    /// The session-start hook, for agents that have one.
    pub hook: Option<Target>,
}

impl Agent {
    /// The MCP entries `cairn install` writes: those of every host that
    /// looks installed, else (the agent asked for by name before any of
    /// its hosts has run) every host's, so whichever runs first finds
    /// cairn.
    pub fn wanted_mcp(&self) -> Vec<&Target> {
        let mut v: Vec<&Target> = self.mcp_detected.then_some(&self.mcp).into_iter().collect();
        v.extend(self.also.iter().filter(|(_, d)| *d).map(|(t, _)| t));
        if v.is_empty() {
            v = self.all_mcp().collect();
        }
        v
    }

    /// Every MCP entry the agent may have, installed or not: what
    /// `cairn uninstall` removes and `cairn status` looks for.
    pub fn all_mcp(&self) -> impl Iterator<Item = &Target> {
        std::iter::once(&self.mcp).chain(self.also.iter().map(|(t, _)| t))
    }
}

/// The SessionStart hook entry running `cairn hook session-start`, in the
/// form Claude Code defined and Gemini CLI, Codex and droid read: `timeout`
/// in the agent's own unit.
fn session_start_hook(agent: &'static str, path: PathBuf, bin: &str, timeout: u64) -> Target {
    Target {
        agent,
        what: What::SessionStartHook,
        path,
        edit: Edit::JsonHook {
            path: vec!["hooks", "SessionStart"],
            value: json!({"hooks": [{"type": "command", "command": format!("{} {HOOK_ARGS}", shell_word(bin)), "timeout": timeout}]}),
        },
    }
}

/// What a user must still do after `target` was added, if anything.
pub fn note_after_install(target: &Target) -> Option<&'static str> {
    match (target.agent, target.what) {
        ("codex", What::SessionStartHook) => Some(
            "Codex runs it once trusted: its next start asks (\"Hooks need review\", Trust all and continue)",
        ),
        _ => None,
    }
}

/// Agents whose histories cairn reads but that it cannot wire yet, and why.
pub const UNSUPPORTED: &[(&str, &str)] = &[
    ("aider", "aider has no MCP client"),
    (
        "pi",
        "pi has no MCP client configuration cairn knows how to write",
    ),
    ("omp", "oh-my-pi's MCP configuration is not documented"),
    ("openclaw", "OpenClaw's MCP configuration is not documented"),
    (
        "kimi-code",
        "Kimi Code's MCP configuration is not documented",
    ),
];

/// The config folder of a desktop app: the Linux or macOS one that exists,
/// else this platform's default.
fn app_dir(loc: &Locations, name: &str) -> PathBuf {
    let dirs = loc.app_config_dirs(name);
    if let Some(d) = dirs.iter().find(|d| d.exists()) {
        return d.clone();
    }
    if cfg!(target_os = "macos") {
        dirs[1].clone()
    } else {
        dirs[0].clone()
    }
}

/// The `globalStorage/<extension>` folder of a VS Code-family extension:
/// the first editor that has it, else VS Code's own.
fn extension_dir(loc: &Locations, extension: &str) -> PathBuf {
    loc.vscode_user_dirs()
        .into_iter()
        .map(|u| u.join("globalStorage").join(extension))
        .find(|d| d.exists())
        .unwrap_or_else(|| {
            app_dir(loc, "Code")
                .join("User/globalStorage")
                .join(extension)
        })
}

/// An `mcpServers.cairn` JSON entry.
fn mcp_servers(agent: &'static str, path: PathBuf, value: serde_json::Value) -> Target {
    Target {
        agent,
        what: What::McpServer,
        path,
        edit: Edit::JsonMember {
            path: vec!["mcpServers", NAME],
            prefer: None,
            value,
        },
    }
}

fn exists(p: &std::path::Path) -> bool {
    p.exists()
}

/// Every agent cairn can wire, in display order.
pub fn all(ctx: &Ctx) -> Vec<Agent> {
    let loc = &ctx.locations;
    let bin = ctx.bin.as_str();
    let mut out = Vec::new();

    // Claude Code: user-scope servers in ~/.claude.json (inside
    // $CLAUDE_CONFIG_DIR when set); hooks in <claude dir>/settings.json.
    let claude_json = match &ctx.claude_config_dir {
        Some(d) => d.join(".claude.json"),
        None => ctx.home.join(".claude.json"),
    };
    let detected = exists(&claude_json) || exists(&loc.claude_dir);
    out.push(Agent {
        id: "claude-code",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "claude-code",
            what: What::McpServer,
            path: claude_json,
            edit: Edit::JsonMember {
                path: vec!["mcpServers", NAME],
                prefer: None,
                value: json!({"type": "stdio", "command": bin, "args": ["mcp"], "env": {}}),
            },
        },
        hook: Some(session_start_hook(
            "claude-code",
            loc.claude_dir.join("settings.json"),
            bin,
            5,
        )),
    });

    // Codex: [mcp_servers.cairn] in $CODEX_HOME/config.toml.
    let detected = exists(&loc.codex_home);
    out.push(Agent {
        id: "codex",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "codex",
            what: What::McpServer,
            path: loc.codex_home.join("config.toml"),
            edit: Edit::TomlServer {
                parent: "mcp_servers",
                command: bin.to_owned(),
                args: vec!["mcp"],
            },
        },
        // Codex reads Claude Code's form of hook from $CODEX_HOME/hooks.json
        // (0.171.0: hooks on by default, timeout in seconds) and runs a new
        // one once the user has reviewed it ([`note_after_install`]).
        hook: Some(session_start_hook(
            "codex",
            loc.codex_home.join("hooks.json"),
            bin,
            5,
        )),
    });

    // Cursor: global servers in ~/.cursor/mcp.json.
    let cursor = ctx.home.join(".cursor");
    let detected = exists(&cursor) || exists(&loc.cursor_config_dir);
    out.push(Agent {
        id: "cursor",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "cursor",
            what: What::McpServer,
            path: cursor.join("mcp.json"),
            edit: Edit::JsonMember {
                path: vec!["mcpServers", NAME],
                prefer: None,
                value: json!({"command": bin, "args": ["mcp"]}),
            },
        },
        hook: None,
    });

    // Gemini CLI: ~/.gemini/settings.json (under $GEMINI_CLI_HOME when set).
    let gemini = loc.gemini_home.join(".gemini");
    let detected = exists(&gemini);
    out.push(Agent {
        id: "gemini",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "gemini",
            what: What::McpServer,
            path: gemini.join("settings.json"),
            edit: Edit::JsonMember {
                path: vec!["mcpServers", NAME],
                prefer: None,
                value: json!({"command": bin, "args": ["mcp"]}),
            },
        },
        // Gemini CLI runs Claude Code's form of SessionStart hook and adds
        // its `additionalContext` (0.61.0; its timeout is in milliseconds).
        hook: Some(session_start_hook(
            "gemini",
            gemini.join("settings.json"),
            bin,
            5000,
        )),
    });

    // opencode: "mcp" in $XDG_CONFIG_HOME/opencode/opencode.json (or .jsonc);
    // v2 configs keep servers under "mcp.servers".
    let oc_dir = loc.xdg_config_home.join("opencode");
    let oc_json = oc_dir.join("opencode.json");
    let oc_jsonc = oc_dir.join("opencode.jsonc");
    let oc_file = if !exists(&oc_json) && exists(&oc_jsonc) {
        oc_jsonc
    } else {
        oc_json
    };
    let detected = exists(&oc_dir) || exists(&loc.xdg_data_home.join("opencode"));
    out.push(Agent {
        id: "opencode",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "opencode",
            what: What::McpServer,
            path: oc_file,
            edit: Edit::JsonMember {
                path: vec!["mcp", NAME],
                prefer: Some(vec!["mcp", "servers"]),
                value: json!({"type": "local", "command": [bin, "mcp"], "enabled": true}),
            },
        },
        hook: None,
    });

    // Copilot CLI: ~/.copilot/mcp-config.json.
    let detected = exists(&loc.copilot_home);
    out.push(Agent {
        id: "copilot",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "copilot",
            what: What::McpServer,
            path: loc.copilot_home.join("mcp-config.json"),
            edit: Edit::JsonMember {
                path: vec!["mcpServers", NAME],
                prefer: None,
                value: json!({"type": "local", "command": bin, "args": ["mcp"], "tools": ["*"]}),
            },
        },
        hook: None,
    });
    more(ctx, &mut out);
    out
}

/// The agents added with the wider set of readers; each config format as
/// its own documentation gives it (sources in docs/agents.md).
fn more(ctx: &Ctx, out: &mut Vec<Agent>) {
    let loc = &ctx.locations;
    let bin = ctx.bin.as_str();
    let home = &ctx.home;
    let plain = json!({"command": bin, "args": ["mcp"]});
    let stdio = json!({"type": "stdio", "command": bin, "args": ["mcp"]});
    let mut push = |id: &'static str, detected: bool, mcp: Target| {
        out.push(Agent {
            id,
            detected,
            mcp,
            mcp_detected: detected,
            also: Vec::new(),
            hook: None,
        });
    };

    // Claude Desktop: claude_desktop_config.json in its app folder.
    let claude = app_dir(loc, "Claude");
    push(
        "claude-desktop",
        exists(&claude),
        mcp_servers(
            "claude-desktop",
            claude.join("claude_desktop_config.json"),
            plain.clone(),
        ),
    );

    // VS Code: the user-level mcp.json, servers under "servers".
    let code_user = app_dir(loc, "Code").join("User");
    push(
        "vscode",
        exists(&code_user),
        Target {
            agent: "vscode",
            what: What::McpServer,
            path: code_user.join("mcp.json"),
            edit: Edit::JsonMember {
                path: vec!["servers", NAME],
                prefer: None,
                value: stdio.clone(),
            },
        },
    );

    // Cline, Roo Code, Kilo Code: the extension's own MCP settings file.
    for (id, ext, file) in [
        (
            "cline",
            "saoudrizwan.claude-dev",
            "settings/cline_mcp_settings.json",
        ),
        (
            "roo",
            "rooveterinaryinc.roo-cline",
            "settings/mcp_settings.json",
        ),
        ("kilo", "kilocode.kilo-code", "settings/mcp_settings.json"),
    ] {
        let dir = extension_dir(loc, ext);
        push(
            id,
            exists(&dir),
            mcp_servers(
                id,
                dir.join(file),
                json!({"command": bin, "args": ["mcp"], "disabled": false}),
            ),
        );
    }

    // Goose: extensions in a YAML file; printed, never rewritten.
    let goose = loc.xdg_config_home.join("goose");
    push(
        "goose",
        exists(&goose) || exists(&loc.xdg_data_home.join("goose")),
        Target {
            agent: "goose",
            what: What::McpServer,
            path: goose.join("config.yaml"),
            edit: Edit::Snippet {
                snippet: format!(
                    "extensions:\n  cairn:\n    enabled: true\n    type: stdio\n    name: cairn\n    cmd: {bin}\n    args: [mcp]\n    timeout: 300\n"
                ),
                marker: "cairn:",
            },
        },
    );

    // Hermes: `mcp_servers` in $HERMES_HOME/config.yaml, a YAML file cairn
    // has no safe editor for: the snippet is printed, as for Goose.
    let hermes = loc.var_or("HERMES_HOME", home.join(".hermes"));
    push(
        "hermes",
        exists(&hermes),
        Target {
            agent: "hermes",
            what: What::McpServer,
            path: hermes.join("config.yaml"),
            edit: Edit::Snippet {
                snippet: format!("mcp_servers:\n  cairn:\n    command: {bin}\n    args: [mcp]\n"),
                marker: "cairn:",
            },
        },
    );

    // Zed: "context_servers" in settings.json (JSON with comments).
    let zed = loc.xdg_config_home.join("zed");
    push(
        "zed",
        exists(&zed) || exists(&loc.xdg_data_home.join("zed")),
        Target {
            agent: "zed",
            what: What::McpServer,
            path: zed.join("settings.json"),
            edit: Edit::JsonMember {
                path: vec!["context_servers", NAME],
                prefer: None,
                value: json!({"source": "custom", "command": bin, "args": ["mcp"], "env": {}}),
            },
        },
    );

    // Windsurf: ~/.codeium/windsurf/mcp_config.json.
    let windsurf = home.join(".codeium/windsurf");
    push(
        "windsurf",
        exists(&windsurf),
        mcp_servers("windsurf", windsurf.join("mcp_config.json"), plain.clone()),
    );

    // Continue: the `mcpServers:` list in config.yaml, the only file its
    // CLI (`cn`) loads servers from without a flag.
    let cont = loc.var_or("CONTINUE_GLOBAL_DIR", home.join(".continue"));
    push(
        "continue",
        exists(&cont),
        Target {
            agent: "continue",
            what: What::McpServer,
            path: cont.join("config.yaml"),
            edit: Edit::YamlServer {
                key: "mcpServers",
                command: bin.to_owned(),
                args: vec!["mcp"],
            },
        },
    );

    // Kiro: ~/.kiro/settings/mcp.json.
    let kiro = home.join(".kiro");
    push(
        "kiro",
        exists(&kiro),
        mcp_servers("kiro", kiro.join("settings/mcp.json"), plain.clone()),
    );

    // Qwen Code: ~/.qwen/settings.json (Gemini CLI's shape).
    let qwen = home.join(".qwen");
    push(
        "qwen",
        exists(&qwen),
        mcp_servers("qwen", qwen.join("settings.json"), plain.clone()),
    );

    // Crush: "mcp" in $XDG_CONFIG_HOME/crush/crush.json.
    let crush = loc.xdg_config_home.join("crush");
    push(
        "crush",
        exists(&crush) || exists(&loc.xdg_data_home.join("crush")),
        Target {
            agent: "crush",
            what: What::McpServer,
            path: crush.join("crush.json"),
            edit: Edit::JsonMember {
                path: vec!["mcp", NAME],
                prefer: None,
                value: stdio.clone(),
            },
        },
    );

    // Amp: "amp.mcpServers" in $XDG_CONFIG_HOME/amp/settings.json.
    let amp = loc.xdg_config_home.join("amp");
    push(
        "amp",
        exists(&amp) || exists(&loc.xdg_data_home.join("amp")),
        Target {
            agent: "amp",
            what: What::McpServer,
            path: amp.join("settings.json"),
            edit: Edit::JsonMember {
                path: vec!["amp.mcpServers", NAME],
                prefer: None,
                value: plain.clone(),
            },
        },
    );

    // Factory Droid: ~/.factory/mcp.json.
    let factory = home.join(".factory");
    push(
        "factory",
        exists(&factory),
        mcp_servers("factory", factory.join("mcp.json"), stdio),
    );

    // Antigravity: ~/.gemini/antigravity/mcp_config.json.
    let ag = loc.gemini_home.join(".gemini/antigravity");
    push(
        "antigravity",
        exists(&ag),
        mcp_servers("antigravity", ag.join("mcp_config.json"), plain.clone()),
    );

    // Kimi CLI: ~/.kimi/mcp.json.
    let kimi = loc.var_or("KIMI_SHARE_DIR", home.join(".kimi"));
    push(
        "kimi-cli",
        exists(&kimi),
        mcp_servers("kimi-cli", kimi.join("mcp.json"), plain.clone()),
    );

    // The OpenHands CLI: `mcpServers` in its persistence folder's mcp.json
    // (what `openhands mcp add` writes; 1.16.0 reads it at each start).
    let openhands = loc.var_or("OPENHANDS_PERSISTENCE_DIR", home.join(".openhands"));
    push(
        "openhands",
        exists(&openhands),
        mcp_servers(
            "openhands",
            openhands.join("mcp.json"),
            json!({"command": bin, "args": ["mcp"], "transport": "stdio"}),
        ),
    );

    // Mistral Vibe: an item of [[mcp_servers]] in $VIBE_HOME/config.toml.
    let vibe = loc.var_or("VIBE_HOME", home.join(".vibe"));
    let detected = exists(&vibe);
    out.push(Agent {
        id: "vibe",
        detected,
        mcp_detected: detected,
        also: Vec::new(),
        mcp: Target {
            agent: "vibe",
            what: What::McpServer,
            path: vibe.join("config.toml"),
            edit: Edit::TomlListedServer {
                key: "mcp_servers",
                command: bin.to_owned(),
                args: vec!["mcp"],
            },
        },
        hook: None,
    });

    // Factory's droid runs Claude Code's form of SessionStart hook from its
    // settings.json (0.225.2; timeout in seconds).
    if let Some(a) = out.iter_mut().find(|a| a.id == "factory") {
        a.hook = Some(session_start_hook(
            "factory",
            factory.join("settings.json"),
            bin,
            5,
        ));
    }

    // The Cline CLI (and the SDK-based extension) read their own file:
    // `$CLINE_MCP_SETTINGS_PATH`, else `<data>/settings/cline_mcp_settings.json`
    // in the data folder its histories are in.
    let data = cline_data(loc);
    let cli_present = ctx.cline_mcp_settings.is_some() || exists(&data);
    let cli = mcp_servers(
        "cline",
        ctx.cline_mcp_settings
            .clone()
            .unwrap_or_else(|| data.join("settings/cline_mcp_settings.json")),
        json!({"command": bin, "args": ["mcp"], "disabled": false}),
    );
    if let Some(a) = out.iter_mut().find(|a| a.id == "cline") {
        a.detected |= cli_present;
        a.also.push((cli, cli_present));
    }

    // The Kilo CLI (opencode's code base) reads "mcp" in
    // `$XDG_CONFIG_HOME/kilo/kilo.json` (or `.jsonc`), not the extension's
    // file: Kilo CLI 7.7.7 lists and loads cairn from there
    // (fixtures/agents/kilo/7.7.7/wiring).
    let kilo_dir = loc.xdg_config_home.join("kilo");
    let kilo_json = kilo_dir.join("kilo.json");
    let kilo_jsonc = kilo_dir.join("kilo.jsonc");
    let kilo_file = if !exists(&kilo_json) && exists(&kilo_jsonc) {
        kilo_jsonc
    } else {
        kilo_json
    };
    let kilo_present = exists(&kilo_dir) || exists(&loc.xdg_data_home.join("kilo"));
    let kilo_cli = Target {
        agent: "kilo",
        what: What::McpServer,
        path: kilo_file,
        edit: Edit::JsonMember {
            path: vec!["mcp", NAME],
            prefer: None,
            value: json!({"type": "local", "command": [bin, "mcp"], "enabled": true}),
        },
    };
    if let Some(a) = out.iter_mut().find(|a| a.id == "kilo") {
        a.detected |= kilo_present;
        a.also.push((kilo_cli, kilo_present));
    }
}

/// Quotes a path for a shell command line when it needs it.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(home: &std::path::Path) -> Ctx {
        Ctx {
            home: home.to_path_buf(),
            claude_config_dir: None,
            locations: Locations::under_home(home),
            bin: "/usr/bin/cairn".to_owned(),
            cline_mcp_settings: None,
        }
    }

    fn cline(ctx: &Ctx) -> Agent {
        all(ctx)
            .into_iter()
            .find(|a| a.id == "cline")
            .expect("cline")
    }

    fn paths(ts: Vec<&Target>) -> Vec<&std::path::Path> {
        ts.into_iter().map(|t| t.path.as_path()).collect()
    }

    #[test]
    fn cline_wires_the_extension_and_the_cli_each_where_present() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        let ext = h.join(".config/Code/User/globalStorage/saoudrizwan.claude-dev");
        let ext_file = ext.join("settings/cline_mcp_settings.json");
        let cli_file = h.join(".cline/data/settings/cline_mcp_settings.json");

        // Neither present (the CLI installed but not yet run): not
        // detected; asked for by name, both files.
        let a = cline(&ctx(h));
        assert!(!a.detected);
        assert_eq!(paths(a.wanted_mcp()), [ext_file.as_path(), &cli_file]);
        // Uninstall and status look in both, whatever is present.
        assert_eq!(
            a.all_mcp().map(|t| t.path.clone()).collect::<Vec<_>>(),
            [ext_file.clone(), cli_file.clone()]
        );

        // Only the CLI: its file alone.
        std::fs::create_dir_all(h.join(".cline/data")).expect("mkdir");
        let a = cline(&ctx(h));
        assert!(a.detected);
        assert_eq!(paths(a.wanted_mcp()), [cli_file.as_path()]);

        // Both.
        std::fs::create_dir_all(&ext).expect("mkdir");
        assert_eq!(
            paths(cline(&ctx(h)).wanted_mcp()),
            [ext_file.as_path(), &cli_file]
        );

        // The CLI's own overrides: its data folder, then the settings path.
        let mut c = ctx(h);
        let data = h.join("elsewhere/data");
        std::fs::create_dir_all(&data).expect("mkdir");
        c.locations
            .vars
            .insert("CLINE_DATA_DIR".into(), data.clone());
        assert_eq!(
            paths(cline(&c).wanted_mcp()),
            [
                ext_file.as_path(),
                &data.join("settings/cline_mcp_settings.json")
            ]
        );
        c.cline_mcp_settings = Some(h.join("mcp.json"));
        assert_eq!(
            paths(cline(&c).wanted_mcp()),
            [ext_file.as_path(), &h.join("mcp.json")]
        );
    }

    #[test]
    fn kilo_wires_the_cli_beside_the_extension() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        let kilo = |c: &Ctx| all(c).into_iter().find(|a| a.id == "kilo").expect("kilo");
        let ext_file =
            h.join(".config/Code/User/globalStorage/kilocode.kilo-code/settings/mcp_settings.json");
        let cli_file = h.join(".config/kilo/kilo.json");
        // Neither present: asked for by name, both files.
        let a = kilo(&ctx(h));
        assert!(!a.detected);
        assert_eq!(paths(a.wanted_mcp()), [ext_file.as_path(), &cli_file]);

        // Only the CLI's data folder: its own config alone.
        std::fs::create_dir_all(h.join(".local/share/kilo")).expect("mkdir");
        let a = kilo(&ctx(h));
        assert!(a.detected);
        assert_eq!(paths(a.wanted_mcp()), [cli_file.as_path()]);
        let Edit::JsonMember { path, value, .. } = &a.wanted_mcp()[0].edit else {
            panic!("not a JSON member");
        };
        assert_eq!(path, &["mcp", NAME]);
        assert_eq!(value["command"], json!(["/usr/bin/cairn", "mcp"]));

        // A `.jsonc` config alone is edited in place.
        std::fs::create_dir_all(h.join(".config/kilo")).expect("mkdir");
        std::fs::write(h.join(".config/kilo/kilo.jsonc"), "{}").expect("write");
        assert_eq!(
            paths(kilo(&ctx(h)).wanted_mcp()),
            [h.join(".config/kilo/kilo.jsonc").as_path()]
        );
    }

    #[test]
    fn install_help_names_every_wiring_target() {
        use clap::CommandFactory;
        let mut cmd = crate::args::Cli::command();
        let help = cmd
            .find_subcommand_mut("install")
            .expect("install")
            .render_long_help()
            .to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let agents = all(&ctx(dir.path()));
        assert!(agents.len() >= 22, "{}", agents.len());
        for a in agents {
            assert!(
                help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .any(|w| w == a.id),
                "`cairn install --help` does not name {}:\n{help}",
                a.id
            );
        }
    }
}
