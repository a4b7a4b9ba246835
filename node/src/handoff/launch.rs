//! How each coding agent's command line takes a first prompt, for
//! `cairn resume`: the program, where the prompt goes, and whether the
//! agent stays interactive after answering it. Also the prompt wrapped
//! around a brief and POSIX shell quoting for `--dry-run`.
//!
//! Pure data and string building: finding programs on `PATH` and starting
//! them is the CLI's business. Only prompt arguments checked against the
//! agent's own `--help` or documentation are listed (see [`LAUNCHERS`]).

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
/// own agent is not installed.
pub const LAUNCHERS: &[Launcher] = &[
    Launcher {
        agent: "claude-code",
        program: "claude",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`claude --help` (2.1.197): `claude [options] [command] [prompt]`, interactive unless -p; CLI reference: `claude \"query\"` starts the REPL with it",
    },
    Launcher {
        agent: "codex",
        program: "codex",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`codex --help` (0.171.0): `codex [OPTIONS] [PROMPT]`, forwarded to the interactive CLI",
    },
    Launcher {
        agent: "gemini",
        program: "gemini",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "`gemini --help` (0.61.0): `-i, --prompt-interactive` executes the prompt and continues interactively",
    },
    Launcher {
        agent: "qwen",
        program: "qwen",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "`qwen --help` (0.15.10): `-i, --prompt-interactive` (a bare positional prompt is one-shot there)",
    },
    Launcher {
        agent: "opencode",
        program: "opencode",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: true,
        verified: "`opencode --help` (1.18.33): the default command starts the TUI, `--prompt` is its prompt",
    },
    Launcher {
        agent: "pi",
        program: "pi",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "`pi --help` (0.73.x): `pi [options] [@files...] [messages...]`, interactive unless -p",
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
        verified: "`cline --help` (3.0.65): `cline [options] [command] [prompt]`, an interactive session in act mode",
    },
    Launcher {
        agent: "vibe",
        program: "vibe",
        lead: &[],
        prompt: PromptArg::Positional,
        interactive: true,
        verified: "mistralai/mistral-vibe `vibe/cli/entrypoint.py` @025ba238: positional `PROMPT`, the initial prompt of the interactive session (`-p` is one-shot)",
    },
    Launcher {
        agent: "copilot",
        program: "copilot",
        lead: &[],
        prompt: PromptArg::Flag("-i"),
        interactive: true,
        verified: "GitHub Copilot CLI command reference (github/docs): `-i PROMPT`, `--interactive=PROMPT` starts an interactive session and runs the prompt",
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
        verified: "Kilo CLI reference (kilo.ai/docs, an opencode fork): `kilo --prompt PROMPT` starts the TUI with that prompt",
    },
    Launcher {
        agent: "openhands",
        program: "openhands",
        lead: &[],
        prompt: PromptArg::Flag("-t"),
        interactive: true,
        verified: "`openhands --help` (OpenHands CLI): `openhands -t \"TASK\"` starts CLI mode with an initial task message (`--headless` is one-shot)",
    },
    Launcher {
        agent: "kimi-cli",
        program: "kimi",
        lead: &[],
        prompt: PromptArg::Flag("--prompt"),
        interactive: false,
        verified: "Kimi Code CLI `kimi` command reference: `--prompt` runs one prompt and exits; continue with `kimi --continue`",
    },
    Launcher {
        agent: "aider",
        program: "aider",
        lead: &[],
        prompt: PromptArg::Flag("--message"),
        interactive: false,
        verified: "aider options: `--message` sends one message, processes the reply, then exits",
    },
    Launcher {
        agent: "amp",
        program: "amp",
        lead: &[],
        prompt: PromptArg::Flag("-x"),
        interactive: false,
        verified: "Amp manual (ampcode.com/manual): `amp -x \"PROMPT\"` (`--execute`) runs the prompt, prints the final message and exits",
    },
    Launcher {
        agent: "factory",
        program: "droid",
        lead: &["exec"],
        prompt: PromptArg::Positional,
        interactive: false,
        verified: "Factory Droid CLI docs: `droid exec \"TASK\"` runs headless and exits (`droid` alone is the interactive TUI)",
    },
    Launcher {
        agent: "hermes",
        program: "hermes",
        lead: &["chat"],
        prompt: PromptArg::Flag("-q"),
        interactive: false,
        verified: "hermes-agent's argparse epilog: `hermes chat -q \"Hello\"` is single query mode",
    },
    Launcher {
        agent: "crush",
        program: "crush",
        lead: &["run"],
        prompt: PromptArg::Positional,
        interactive: false,
        verified: "charmbracelet/crush `crush run --help`: runs a single prompt in non-interactive mode and exits",
    },
];

/// The launcher of a cairn agent id or a program name.
pub fn launcher(name: &str) -> Option<&'static Launcher> {
    LAUNCHERS
        .iter()
        .find(|l| l.agent == name || l.program == name)
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
    fn every_launcher_is_unique_and_known_to_the_sources() {
        let known: Vec<&str> = crate::sources::registry()
            .iter()
            .map(|s| s.agent())
            .collect();
        for (i, l) in LAUNCHERS.iter().enumerate() {
            assert!(known.contains(&l.agent), "{} is not a cairn agent", l.agent);
            assert!(!l.verified.is_empty());
            assert!(
                LAUNCHERS[i + 1..]
                    .iter()
                    .all(|o| o.agent != l.agent && o.program != l.program)
            );
            assert_eq!(launcher(l.agent), Some(l));
            assert_eq!(launcher(l.program), Some(l));
        }
        assert_eq!(launcher("vim"), None);
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
