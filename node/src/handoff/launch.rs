//! How each coding agent's command line takes a first prompt, for
//! `cairn resume`: the program, where the prompt goes, and whether the
//! agent stays interactive after answering it. Also the prompt wrapped
//! around a brief and POSIX shell quoting for `--dry-run`.
//!
//! Pure data and string building: finding programs on `PATH`, reading them
//! and starting them is the CLI's business. Only prompt arguments checked
//! against an agent's installed release (`--help`, or a real run against a
//! scripted model) or its source at a named commit are listed (see
//! [`LAUNCHERS`] and `docs/resume.md`); the agents cairn reads but cannot
//! start say why in [`NOT_RESUMABLE`]. Programs two agents share (`kimi`)
//! are told apart by [`identify`].

/// Where an agent takes its first prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptArg {
    /// As the last positional argument: `claude "PROMPT"`.
    Positional,
    /// After a flag: `gemini -i "PROMPT"`.
    Flag(&'static str),
}

/// One agent `cairn resume` can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    /// The agent id as cairn records it (`claude-code`, `kimi-cli`, ...).
    pub agent: &'static str,
    /// The program to run.
    pub program: &'static str,
    /// Arguments that always come first (a subcommand such as `run`).
    pub lead: &'static [&'static str],
    /// Where the prompt goes.
    pub prompt: PromptArg,
    /// True when the agent keeps the conversation open after the first
    /// answer; false when it answers once and exits (continue it with its
    /// own resume flag).
    pub interactive: bool,
    /// Where the prompt argument was checked.
    pub verified: &'static str,
}

/// The agents `cairn resume` starts, in the order tried when the session's
/// own agent is not installed. `verified` names the release (or the source
/// commit, when the release cannot be installed here) the prompt argument
/// was checked against; `docs/resume.md` holds the same table with how.
pub const LAUNCHERS: &[Launcher] = &[
    Launcher {
        agent: "claude-code",
        program: "claude",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`claude --help` (2.1.197): `claude [options] [command] [prompt]`, an interactive session unless -p; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "codex",
        program: "codex",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`codex --help` (0.171.0): `codex [OPTIONS] [PROMPT]`, forwarded to the interactive CLI; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "gemini",
        program: "gemini",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "`gemini --help` (0.61.0): `-i, --prompt-interactive` executes the prompt and continues interactively; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "qwen",
        program: "qwen",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "`qwen --help` (0.15.10): `-i, --prompt-interactive` (a bare positional prompt is one-shot there); a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "opencode",
        program: "opencode",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: true,
        verified: "`opencode --help` (1.18.33): the default command starts the TUI, `--prompt` is its prompt; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "pi",
        program: "pi",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`pi --help` (0.73.1): `pi [options] [@files...] [messages...]`, interactive unless -p; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "omp",
        program: "omp",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`omp --help` (18.2.3): `omp [MESSAGES]` \"Messages to send\", interactive unless -p/--print",
    },
    Launcher {
        agent: "continue",
        program: "cn",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`cn --help` (1.5.47): `cn [options] [command] [prompt]`, an interactive session unless -p",
    },
    Launcher {
        agent: "cline",
        program: "cline",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`cline --help` (3.0.65): `cline [options] [command] [prompt]`, starts in act mode",
    },
    Launcher {
        agent: "vibe",
        program: "vibe",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`vibe --help` (3.0.2): `[INITIAL_PROMPT]` \"Initial prompt for the interactive session\" (`-p` is headless); a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "copilot",
        program: "copilot",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "`copilot --help` (1.0.102): `-i, --interactive <prompt>` starts interactive mode and executes the prompt",
    },
    Launcher {
        agent: "cursor",
        program: "cursor-agent",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "Cursor CLI overview (cursor.com/docs/cli/overview): `cursor-agent \"PROMPT\"` starts the interactive agent with that prompt; `-p` is print mode",
    },
    Launcher {
        agent: "goose",
        program: "goose",
        lead: &["run", "--interactive"],
        prompt: PromptArg::Flag("--text"),
        interactive: true,
        verified: "block/goose `crates/goose-cli/src/cli.rs`: `goose run --text TEXT`, `-s/--interactive` continues in interactive mode after the initial input",
    },
    Launcher {
        agent: "kilo",
        program: "kilo",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: true,
        verified: "`kilo --help` (7.7.9): `kilo [project]` starts the TUI, `--prompt` is its prompt; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "openhands",
        program: "openhands",
        lead: &[],
        prompt: PromptArg::Flag("-t"),
        interactive: true,
        verified: "`openhands --help` (1.16.0): `-t, --task` \"Initial task text to seed the conversation with\" (`--headless` is one-shot)",
    },
    Launcher {
        agent: "factory",
        program: "droid",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`droid --help` (0.225.2): `droid [options] [command] [prompt...]`, the interactive TUI (`droid exec` is the non-interactive one)",
    },
    Launcher {
        agent: "kimi-cli",
        program: "kimi",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: true,
        verified: "`kimi --help` (kimi-cli 1.51.0): `--prompt` \"User prompt to the agent\"; without --print the shell UI runs it first and stays open; a real resume sent the brief in its first request",
    },
    Launcher {
        agent: "openclaw",
        program: "openclaw",
        lead: &["tui"],
        prompt: PromptArg::Flag("--message"),
        interactive: true,
        verified: "openclaw/openclaw `src/cli/tui-cli.ts` @388699e3: `openclaw tui --message TEXT` sends an initial message after connecting to the Gateway (2026.9.6 needs Node >= 24.16: not installable here)",
    },
    Launcher {
        agent: "kimi-code",
        program: "kimi",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: false,
        verified: "MoonshotAI/kimi-code `apps/kimi-code/src/cli/commands.ts` @d723cc47 (0.38.0): no positional prompt; `-p, --prompt` runs one prompt non-interactively; continue with `kimi --continue`",
    },
    Launcher {
        agent: "aider",
        program: "aider",
        lead: &[],
        prompt: PromptArg::Flag("--message"),
        interactive: false,
        verified: "`aider --help` (0.86.2): `--message` sends one message, processes the reply, then exits (disables chat mode)",
    },
    Launcher {
        agent: "amp",
        program: "amp",
        lead: &[],
        prompt: PromptArg::Flag("-x"),
        interactive: false,
        verified: "`amp --help` (0.0.1790142911): `-x, --execute [message]` runs the prompt, prints the last message and exits (an interactive start takes its message on stdin only)",
    },
    Launcher {
        agent: "antigravity",
        program: "agy",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: false,
        verified: "google-antigravity/antigravity-cli `examples/completions/agy.bash` @8679d0fb: `-p --prompt`, `-c --continue`, no interactive-prompt flag; its issue #318 calls `agy -p` print mode",
    },
    Launcher {
        agent: "hermes",
        program: "hermes",
        lead: &["chat"],
        prompt: PromptArg::Flag("-q"),
        interactive: false,
        verified: "`hermes chat --help` (0.19.0): `-q, --query` \"Single query (non-interactive mode)\"",
    },
    Launcher {
        agent: "crush",
        program: "crush",
        lead: &["run"],
        prompt: PromptArg::Positional,
        interactive: false,
        verified: "charmbracelet/crush `crush run --help`: runs a single prompt in non-interactive mode and exits",
    },
    Launcher {
        agent: "gptme",
        program: "gptme",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`gptme --help` (0.35.1): `gptme [OPTIONS] [PROMPTS]...`, \"If PROMPTS are provided, a new conversation will be started with it\"; interactive unless `--non-interactive`",
    },
    Launcher {
        agent: "nanocoder",
        program: "nanocoder",
        lead: &["run"],
        prompt: PromptArg::Positional,
        interactive: false,
        verified: "`nanocoder --help` (1.30.0): the interactive start takes no prompt; `run` \"Run in non-interactive mode\" with the prompt after it (as recorded in fixtures/agents/nanocoder/1.30.0)",
    },
    Launcher {
        agent: "code-puppy",
        program: "code-puppy",
        lead: &[],
        prompt: PromptArg::Flag("-p"),
        interactive: false,
        verified: "`code-puppy --help` (0.0.946): `-p, --prompt PROMPT` \"Execute a single prompt and exit (no interactive mode)\"; `-i` takes no prompt",
    },
];

/// Agents cairn reads but cannot start with a prompt, and why.
pub const NOT_RESUMABLE: &[(&str, &str)] = &[
    (
        "claude-desktop",
        "Claude Desktop is a desktop app with no command line to start",
    ),
    (
        "roo",
        "Roo Code is a VS Code extension with no command line to start",
    ),
    (
        "kiro",
        "no prompt argument of kiro-cli has been verified against a release",
    ),
    (
        "windsurf",
        "Windsurf is an editor with no command-line prompt",
    ),
    ("trae", "Trae is an editor with no command-line prompt"),
    (
        "plandex",
        "cairn cannot read Plandex sessions (they live on its server)",
    ),
    (
        "vscode",
        "no command-line prompt argument of VS Code's chat has been verified against a release",
    ),
    (
        "zed",
        "Zed's `zed` command opens folders and files; it takes no prompt",
    ),
    ("notes", "notes are cairn's own, not a coding agent's"),
];

/// Why cairn cannot start `agent` with a prompt, when it is one it reads
/// but cannot start.
pub fn not_resumable(agent: &str) -> Option<&'static str> {
    NOT_RESUMABLE
        .iter()
        .find(|(a, _)| *a == agent)
        .map(|(_, why)| *why)
}

/// The launcher of a cairn agent id, or of a program only one agent uses.
/// `kimi` is the program of both Kimi CLI and Kimi Code: see [`identify`].
pub fn launcher(name: &str) -> Option<&'static Launcher> {
    if let Some(l) = LAUNCHERS.iter().find(|l| l.agent == name) {
        return Some(l);
    }
    let mut by_program = LAUNCHERS.iter().filter(|l| l.program == name);
    match (by_program.next(), by_program.next()) {
        (Some(l), None) => Some(l),
        _ => None,
    }
}

/// The launchers whose program is `program` (more than one for `kimi`).
pub fn sharing(program: &str) -> Vec<&'static Launcher> {
    LAUNCHERS.iter().filter(|l| l.program == program).collect()
}

/// Which agent an installed program shared by several agents is, from its
/// resolved path (symlinks followed) and the first bytes of the file.
///
/// `kimi`: Kimi Code installs under `~/.kimi-code/bin/` or as the npm package
/// `@moonshot-ai/kimi-code`; Kimi CLI (Python) is a script importing
/// `kimi_cli`, usually under a `kimi-cli` tool folder. `None` when neither
/// mark is there (or the program is not shared).
pub fn identify(program: &str, resolved: &str, head: &[u8]) -> Option<&'static Launcher> {
    if program != "kimi" {
        return None;
    }
    let has = |needle: &str| {
        resolved.contains(needle) || head.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    let agent = if has(".kimi-code") || has("@moonshot-ai/kimi-code") {
        "kimi-code"
    } else if has("kimi_cli") || has("kimi-cli") {
        "kimi-cli"
    } else {
        return None;
    };
    launcher(agent)
}

/// The largest prompt passed as one argument. Linux refuses a single
/// argument over 128 KiB (`MAX_ARG_STRLEN`); Windows a whole command line
/// over 32,767 characters. Above this the prompt names a file instead.
pub const PROMPT_ARG_MAX: usize = if cfg!(windows) { 24 * 1024 } else { 96 * 1024 };

/// The first prompt that hands a session over: a lead line, then the brief.
pub fn prompt_with_brief(brief_text: &str) -> String {
    format!(
        "Continue the coding session described below, which started in another session (possibly \
         another agent or machine). It is cairn's handoff brief, built from the recorded session \
         with secrets redacted. Check the current state of the files before acting, then carry on \
         with what was left open.\n\n{brief_text}"
    )
}

/// The first prompt when the brief is too long for an argument: where to read it.
pub fn prompt_with_file(path: &str) -> String {
    format!(
        "Continue the coding session described in the handoff brief at {path} (written by cairn \
         from the recorded session, secrets redacted). Read that file first, check the current \
         state of the files, then carry on with what was left open."
    )
}

/// The command line: the program, its lead arguments, the caller's extra
/// arguments, then the prompt.
pub fn argv(l: &Launcher, extra: &[String], prompt: &str) -> Vec<String> {
    let mut out = vec![l.program.to_owned()];
    out.extend(l.lead.iter().map(|a| (*a).to_owned()));
    out.extend(extra.iter().cloned());
    if let PromptArg::Flag(f) = l.prompt {
        out.push(f.to_owned());
    }
    out.push(prompt.to_owned());
    out
}

/// One word quoted for a POSIX shell: as it is when only safe characters,
/// else in single quotes (a `'` inside becomes `'\''`).
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A command line as one shell-quoted string.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_read_is_either_started_or_says_why_not() {
        let known: Vec<&str> = crate::sources::registry()
            .iter()
            .map(|s| s.agent())
            .collect();
        for (i, l) in LAUNCHERS.iter().enumerate() {
            assert!(known.contains(&l.agent), "{} is not a cairn agent", l.agent);
            assert!(!l.verified.is_empty());
            assert!(LAUNCHERS[i + 1..].iter().all(|o| o.agent != l.agent));
            assert_eq!(launcher(l.agent), Some(l));
            // A program is its agent's name unless agents share it.
            match sharing(l.program).len() {
                1 => assert_eq!(launcher(l.program), Some(l)),
                _ => assert_eq!(launcher(l.program), None, "{}", l.program),
            }
            assert_eq!(not_resumable(l.agent), None, "{} is both", l.agent);
        }
        for a in &known {
            assert!(
                launcher(a).is_some() || not_resumable(a).is_some(),
                "{a}: neither a launcher nor a reason it has none"
            );
        }
        for (a, _) in NOT_RESUMABLE {
            assert!(known.contains(a), "{a} is not a cairn agent");
        }
        assert_eq!(launcher("vim"), None);
        assert!(not_resumable("roo").is_some_and(|w| w.contains("extension")));
    }

    #[test]
    fn kimi_is_told_apart_by_where_it_lives_and_what_it_imports() {
        let names: Vec<&str> = sharing("kimi").iter().map(|l| l.agent).collect();
        assert_eq!(names, ["kimi-cli", "kimi-code"]);
        let cli_script = b"#!/home/u/.local/share/uv/tools/kimi-cli/bin/python\nimport sys\nfrom kimi_cli.__main__ import main\n";
        let who = |path: &str, head: &[u8]| identify("kimi", path, head).map(|l| l.agent);
        assert_eq!(
            who(
                "/home/u/.local/share/uv/tools/kimi-cli/bin/kimi",
                cli_script
            ),
            Some("kimi-cli")
        );
        // A venv script elsewhere is known by its import alone.
        assert_eq!(
            who(
                "/opt/venv/bin/kimi",
                b"#!/opt/venv/bin/python\nfrom kimi_cli.__main__ import main\n"
            ),
            Some("kimi-cli")
        );
        // Kimi Code: the install script's folder, or npm's package.
        assert_eq!(
            who("/home/u/.kimi-code/bin/kimi", b"\x7fELF\x02\x01"),
            Some("kimi-code")
        );
        assert_eq!(
            who(
                "/usr/lib/node_modules/@moonshot-ai/kimi-code/dist/main.mjs",
                b"#!/usr/bin/env node\nimport './chunk.mjs';\n"
            ),
            Some("kimi-code")
        );
        assert_eq!(who("/usr/local/bin/kimi", b"\x7fELF\x02\x01"), None);
        // Kimi Code answers once; Kimi CLI's shell stays open.
        assert!(!launcher("kimi-code").expect("kimi-code").interactive);
        assert!(launcher("kimi-cli").expect("kimi-cli").interactive);
        assert_eq!(identify("claude", "/x/kimi-code/claude", b""), None);
    }

    #[test]
    fn the_docs_table_lists_every_launcher_as_built() {
        let doc = include_str!("../../../docs/resume.md");
        for l in LAUNCHERS {
            let line = doc
                .lines()
                .find(|r| r.starts_with(&format!("| {} |", l.agent)))
                .unwrap_or_else(|| panic!("docs/resume.md has no row for {}", l.agent));
            let shown = shell_line(&argv(l, &[], "PROMPT"));
            assert!(line.contains(&format!("`{shown}`")), "{}: {line}", l.agent);
        }
        for (a, _) in NOT_RESUMABLE {
            assert!(
                doc.lines().any(|r| r.starts_with(&format!("| {a} |"))),
                "docs/resume.md does not say why {a} cannot be resumed"
            );
        }
    }

    #[test]
    fn argv_puts_the_prompt_where_each_agent_takes_it() {
        let extra = vec!["--model".to_owned(), "x".to_owned()];
        let g = launcher("gemini").expect("gemini");
        assert_eq!(argv(g, &extra, "P"), ["gemini", "--model", "x", "-i", "P"]);
        let c = launcher("claude-code").expect("claude");
        assert_eq!(argv(c, &[], "P"), ["claude", "P"]);
        let o = launcher("opencode").expect("opencode");
        assert_eq!(argv(o, &[], "P"), ["opencode", "--prompt", "P"]);
        // A subcommand comes before the caller's arguments and the prompt.
        let goose = launcher("goose").expect("goose");
        assert_eq!(
            argv(goose, &extra, "P"),
            [
                "goose",
                "run",
                "--interactive",
                "--model",
                "x",
                "--text",
                "P"
            ]
        );
        let crush = launcher("crush").expect("crush");
        assert_eq!(argv(crush, &[], "P"), ["crush", "run", "P"]);
        let claw = launcher("openclaw").expect("openclaw");
        assert_eq!(argv(claw, &[], "P"), ["openclaw", "tui", "--message", "P"]);
        let cursor = launcher("cursor").expect("cursor");
        assert_eq!(argv(cursor, &[], "P"), ["cursor-agent", "P"]);
    }

    #[test]
    fn shell_quoting_survives_a_posix_shell() {
        assert_eq!(shell_quote("claude"), "claude");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's $HOME `x`"), r#"'it'\''s $HOME `x`'"#);
        let line = shell_line(&[
            "printf".into(),
            "%s|".into(),
            "a b".into(),
            "it's\n$x 😀".into(),
        ]);
        let Ok(out) = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output()
        else {
            eprintln!("SKIPPED shell round trip: no sh");
            return;
        };
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|it's\n$x 😀|");
    }
}
