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
];

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
    out
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
