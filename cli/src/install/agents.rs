//! The catalogue of agents cairn can wire: where each keeps its MCP config,
//! how its entry looks, and how to tell the agent is installed. Data only.

use std::path::PathBuf;

use cairn_node::sources::Locations;
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
}

/// One agent cairn can wire.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Agent id.
    pub id: &'static str,
    /// Whether it looks installed here.
    pub detected: bool,
    /// The MCP server entry.
    pub mcp: Target,
    /// The session-start hook, for agents that have one.
    pub hook: Option<Target>,
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
    (
        "vibe",
        "Mistral Vibe keeps MCP servers in a TOML array of tables cairn does not edit yet",
    ),
    (
        "hermes",
        "Hermes keeps MCP servers in a YAML config cairn does not edit yet",
    ),
    (
        "openhands",
        "OpenHands keeps MCP servers in a TOML array cairn does not edit yet",
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
    out.push(Agent {
        id: "claude-code",
        detected: exists(&claude_json) || exists(&loc.claude_dir),
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
        hook: Some(Target {
            agent: "claude-code",
            what: What::SessionStartHook,
            path: loc.claude_dir.join("settings.json"),
            edit: Edit::JsonHook {
                path: vec!["hooks", "SessionStart"],
                value: json!({"hooks": [{"type": "command", "command": format!("{} {HOOK_ARGS}", shell_word(bin)), "timeout": 5}]}),
            },
        }),
    });

    // Codex: [mcp_servers.cairn] in $CODEX_HOME/config.toml.
    out.push(Agent {
        id: "codex",
        detected: exists(&loc.codex_home),
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
        hook: None,
    });

    // Cursor: global servers in ~/.cursor/mcp.json.
    let cursor = ctx.home.join(".cursor");
    out.push(Agent {
        id: "cursor",
        detected: exists(&cursor) || exists(&loc.cursor_config_dir),
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
    out.push(Agent {
        id: "gemini",
        detected: exists(&gemini),
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
        hook: None,
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
    out.push(Agent {
        id: "opencode",
        detected: exists(&oc_dir) || exists(&loc.xdg_data_home.join("opencode")),
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
    out.push(Agent {
        id: "copilot",
        detected: exists(&loc.copilot_home),
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

    // Continue: mcpServers in config.yaml; printed, never rewritten.
    let cont = loc.var_or("CONTINUE_GLOBAL_DIR", home.join(".continue"));
    push(
        "continue",
        exists(&cont),
        Target {
            agent: "continue",
            what: What::McpServer,
            path: cont.join("config.yaml"),
            edit: Edit::Snippet {
                snippet: format!(
                    "mcpServers:\n  - name: cairn\n    command: {bin}\n    args:\n      - mcp\n"
                ),
                marker: "- name: cairn",
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
        mcp_servers("kimi-cli", kimi.join("mcp.json"), plain),
    );
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
