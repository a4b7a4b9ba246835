//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// cairn: the memory of your coding agents, searchable from any of your machines.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, propagate_version = true)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// More log output on stderr (-v warnings, -vv info, -vvv debug); CAIRN_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The node's data folder (database, key, notes) [env: CAIRN_HOME; default: $XDG_DATA_HOME/cairn].
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Config file [env: CAIRN_CONFIG; default: $XDG_CONFIG_HOME/cairn/config.toml].
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read new agent history into the index (incremental; a progress bar on a terminal).
    Index(IndexArgs),
    /// Search everything your agents said and did.
    Search(SearchArgs),
    /// Print one session's transcript (an id prefix is enough).
    Show(ShowArgs),
    /// A brief to continue a session from: goal, decisions, files, commands, open ends (≤ 8 KB).
    Handoff(HandoffArgs),
    /// Continue a session in a coding agent, with its handoff brief as the first prompt.
    Resume(ResumeArgs),
    /// List the agent stores found on this machine, with counts.
    Sources(JsonArgs),
    /// Records, sessions, skipped lines, redactions and database size.
    Status(JsonArgs),
    /// Check the service, index freshness, agent wiring, peers, ports and permissions, and say how to fix problems.
    Doctor(JsonArgs),
    /// Store a durable note, searchable like any session.
    Remember(RememberArgs),
    /// Forget a session, a project or the records matching a query, here and on every paired machine.
    Forget(ForgetArgs),
    /// Pair with another machine: `cairn pair` prints a one-time code, `cairn pair CODE` uses it.
    Pair(PairArgs),
    /// List the paired machines and the machines relayed through them; refuse or allow a relayed one.
    Peers(PeersArgs),
    /// Remove a paired machine; its key is refused from then on.
    Unpair(UnpairArgs),
    /// Choose which projects' records a paired machine may receive (all by default).
    Scope(ScopeArgs),
    /// Run one sync round with the paired machines now and print what moved.
    Sync(SyncArgs),
    /// Keep this machine in sync: index new history as it is written and replicate with paired machines.
    Serve(ServeArgs),
    /// Two throwaway machines with sample histories: index, pair, sync over QUIC, search across them.
    Demo(DemoArgs),
    /// Serve the memory to coding agents over MCP on stdin/stdout.
    Mcp,
    /// Wire cairn's MCP server (and optionally hooks) into your coding agents' configs.
    Install(InstallArgs),
    /// Remove exactly what `cairn install` added to the agents' configs.
    Uninstall(UninstallArgs),
    /// Agent hook entry points (fail open: no output and exit 0 on any problem).
    Hook(HookArgs),
    /// Browse the memory in your web browser: search, sessions, recent, machines, activity (local only).
    Ui(UiArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    Completions(CompletionsArgs),
    /// Print cairn's man page, or write one page per command into a folder.
    Man(ManArgs),
}

impl Command {
    /// Whether the command reads a little and exits: a search, a
    /// transcript or an agent's hook, answered in milliseconds. (A search
    /// may index new history first, for at most two seconds.)
    pub fn is_short_read(&self) -> bool {
        matches!(
            self,
            Command::Search(_) | Command::Show(_) | Command::Handoff(_) | Command::Hook(_)
        )
    }

    /// How the process's heap is set up for this command (see
    /// [`crate::heap`]).
    pub fn heap_use(&self) -> crate::heap::Use {
        match self {
            Command::Serve(_) => crate::heap::Use::Serve,
            c if c.is_short_read() => crate::heap::Use::ShortRead,
            _ => crate::heap::Use::LongOrLarge,
        }
    }
}

/// Just `--json`.
#[derive(Debug, Args)]
pub struct JsonArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn index`
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Print a JSON report instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `cairn search`
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Print `{"hits": [...]}` instead of text.
    #[arg(long)]
    pub json: bool,
    /// Sessions to show at most.
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
    /// Skip this many sessions (the next page: --offset 10 after the first 10).
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Only this agent, by its id (claude-code, codex, gemini, cursor, aider, notes, ...: `cairn sources` lists them).
    #[arg(long)]
    pub agent: Option<String>,
    /// Only sessions whose project path contains this.
    #[arg(long)]
    pub project: Option<String>,
    /// Only records from this machine (name or node id).
    #[arg(long)]
    pub machine: Option<String>,
    /// Only records newer than this: 90m, 36h, 7d, 2w, or a date like 2026-01-31.
    #[arg(long)]
    pub since: Option<String>,
    /// Only these roles: user, assistant, tool_call, tool_output, note (repeatable).
    #[arg(long)]
    pub role: Vec<String>,
    /// Only this session (id prefix).
    #[arg(long)]
    pub session: Option<String>,
    /// Answer from the index as it is, without reading new history first.
    #[arg(long)]
    pub no_refresh: bool,
    /// Words only: leave out the meaning (semantic) tier for this query.
    #[arg(long)]
    pub lexical: bool,
    /// What to look for: words, "quoted phrases", prefix*, paths, error text.
    /// Options may come before or after it; after `--` everything is the query
    /// (`-- -bash: cargo: not found`).
    #[arg(required = true)]
    pub query: Vec<String>,
}

/// `cairn handoff`
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// Session id, a unique prefix of it, or a search hit's handle (agent:id).
    pub session: String,
    /// Print the brief's sections as JSON (the text is in `text`).
    #[arg(long)]
    pub json: bool,
    /// Largest brief in bytes (at least 1024); what does not fit is named at its end.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1024..=1_048_576))]
    pub max_bytes: u64,
}

/// `cairn resume`
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Session id, a unique prefix of it, or a search hit's handle (agent:id).
    pub session: String,
    /// The agent to start, by cairn's agent id or its program (claude, codex, gemini, opencode,
    /// pi, ...; `docs/resume.md` lists them all)
    /// [default: the session's own agent if installed, else the first installed].
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Start the agent in this folder instead of the session's project folder.
    #[arg(long, value_name = "DIR")]
    pub cd: Option<PathBuf>,
    /// Print the exact command (shell-quoted) instead of running it.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the command as JSON.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    /// Largest brief in bytes (at least 1024).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1024..=1_048_576))]
    pub max_bytes: u64,
    /// Arguments for the agent itself, after `--` (e.g. `-- --model sonnet`).
    #[arg(last = true, allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
}

/// `cairn show`
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session id, or a unique prefix of it.
    pub session: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip this many records.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Print at most this many records.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
    /// Never pipe through a pager.
    #[arg(long)]
    pub no_pager: bool,
}

/// `cairn remember`
#[derive(Debug, Args)]
pub struct RememberArgs {
    /// The project this note belongs to (default: none, a global note).
    #[arg(long)]
    pub project: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The note (options may come before or after it; after `--` everything is the note).
    #[arg(required = true)]
    pub text: Vec<String>,
}

/// `cairn forget`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["session", "project", "query"])))]
pub struct ForgetArgs {
    /// Forget one session (a unique prefix of its id is enough).
    #[arg(long, value_name = "ID-PREFIX")]
    pub session: Option<String>,
    /// Forget every record whose project is exactly this path.
    #[arg(long, value_name = "PATH")]
    pub project: Option<String>,
    /// Forget every record containing all the words of this query.
    #[arg(long, value_name = "TEXT")]
    pub query: Option<String>,
    /// Only list what would be forgotten.
    #[arg(long, conflicts_with = "yes")]
    pub dry_run: bool,
    /// Really forget (it cannot be undone and reaches every paired machine).
    #[arg(long)]
    pub yes: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn pair`
#[derive(Debug, Args)]
pub struct PairArgs {
    /// The code printed by `cairn pair` on the other machine (omit it to make one here).
    pub code: Option<String>,
    /// Where to listen for the other machine [default: 0.0.0.0:7878, or a free port if taken].
    #[arg(long, value_name = "ADDR", conflicts_with = "code")]
    pub listen: Option<std::net::SocketAddr>,
    /// Address the other machine should dial, if not the listening one: IP:PORT or HOST:PORT, resolved when dialed (repeatable; port 0 = the bound port).
    #[arg(long, value_name = "ADDR", conflicts_with = "code")]
    pub advertise: Vec<cairn_node::sync::pairing::Advertise>,
    /// How long the code stays valid: 90s, 10m, 1h.
    #[arg(long, default_value = "10m", conflicts_with = "code")]
    pub timeout: String,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn peers`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("decide").args(["refuse_origin", "allow_origin"])))]
pub struct PeersArgs {
    /// Refuse a relayed machine (its name or a prefix of its node id, as
    /// `cairn peers` lists it): its records are deleted here and never
    /// accepted again, whoever relays them.
    #[arg(long, value_name = "ORIGIN")]
    pub refuse_origin: Option<String>,
    /// Accept a refused machine again (its records come back at the next sync).
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn unpair`
#[derive(Debug, Args)]
pub struct UnpairArgs {
    /// The peer's name, or a prefix of its node id (as `cairn peers` shows).
    pub peer: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn scope`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["project", "all"])))]
pub struct ScopeArgs {
    /// The peer's name, or a prefix of its node id (as `cairn peers` shows).
    pub peer: String,
    /// Send only records of projects under this path (repeatable); others leave as withheld stubs.
    #[arg(long)]
    pub project: Vec<String>,
    /// Send every project again.
    #[arg(long)]
    pub all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn sync`
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Only this peer (its name, or a prefix of its node id).
    #[arg(long, value_name = "NAME")]
    pub peer: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// UDP address to listen on for paired machines.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:7878")]
    pub listen: std::net::SocketAddr,
    /// Do not announce this machine or look for paired ones on the LAN
    /// (mDNS); `[sync] discovery = false` in the config does the same.
    #[arg(long)]
    pub no_discovery: bool,
}

/// `cairn demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `cairn install`
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Only this agent; repeatable. One of: claude-code, codex, cursor,
    /// gemini, opencode, copilot, claude-desktop, vscode, cline (the VS Code
    /// extension and the Cline CLI), roo, kilo, goose, zed, windsurf,
    /// continue, kiro, qwen, crush, amp, factory, antigravity, kimi-cli, openhands, vibe, hermes.
    #[arg(long = "agent", value_name = "NAME", conflicts_with = "all")]
    pub agents: Vec<String>,
    /// Every agent found on this machine (the default when no --agent is given).
    #[arg(long)]
    pub all: bool,
    /// Also add a session-start hook (Claude Code) that shows recent project decisions.
    #[arg(long)]
    pub hooks: bool,
    /// Show the exact changes without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not install the background service that runs `cairn serve`.
    #[arg(long)]
    pub no_service: bool,
}

/// `cairn uninstall`
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Only this agent; repeatable.
    #[arg(long = "agent", value_name = "NAME", conflicts_with = "all")]
    pub agents: Vec<String>,
    /// Every agent (the default when no --agent is given).
    #[arg(long)]
    pub all: bool,
    /// Show the exact changes without writing anything.
    #[arg(long)]
    pub dry_run: bool,
}

/// `cairn hook`
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The hook event.
    #[command(subcommand)]
    pub event: HookEvent,
}

/// Hook events cairn answers.
#[derive(Debug, Clone, Copy, Subcommand)]
pub enum HookEvent {
    /// Claude Code SessionStart: prints a digest of this project's recent decisions.
    SessionStart,
}

/// `cairn ui`
#[derive(Debug, Args)]
pub struct UiArgs {
    /// Loopback address to serve the page on (port 0 = any free port); other addresses are refused.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Print the address instead of opening a browser.
    #[arg(long)]
    pub no_open: bool,
    /// Show the index as it is, without reading new history first.
    #[arg(long)]
    pub no_refresh: bool,
}

/// `cairn completions`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `cairn man`
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `cairn.1` and one `cairn-COMMAND.1` per command into this folder instead of printing.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn command(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("cairn").chain(args.iter().copied()))
            .expect("parses")
            .command
    }

    #[test]
    fn searches_transcripts_and_hooks_are_short_reads() {
        for args in [
            &["search", "why did we pin hyper"][..],
            &["--home", "/tmp/h", "search", "--json", "--", "error"],
            &["show", "abc123"],
            &["hook", "session-start"],
        ] {
            assert!(command(args).is_short_read(), "{args:?}");
        }
        for args in [&["index"][..], &["serve"], &["sync"], &["mcp"], &["status"]] {
            assert!(!command(args).is_short_read(), "{args:?}");
        }
    }

    fn search(args: &[&str]) -> SearchArgs {
        match command(args) {
            Command::Search(s) => s,
            other => panic!("{args:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn options_after_the_query_are_options_and_words_after_two_dashes_are_words() {
        let s = search(&[
            "search", "flaky", "test", "--json", "-n", "2", "--agent", "codex",
        ]);
        assert_eq!(s.query, ["flaky", "test"]);
        assert!(s.json);
        assert_eq!((s.limit, s.agent.as_deref()), (2, Some("codex")));
        let s = search(&["search", "a", "--no-refresh", "b"]);
        assert_eq!(s.query, ["a", "b"]);
        assert!(s.no_refresh);
        let s = search(&["search", "--json", "--", "-bash:", "cargo:", "--json"]);
        assert_eq!(s.query, ["-bash:", "cargo:", "--json"]);
        assert!(s.json);
        // A word that looks like an option and is none is refused, with
        // clap's tip to put it after `--`, never searched as something else.
        let e = Cli::try_parse_from(["cairn", "search", "error", "-x"]).expect_err("refused");
        assert!(e.to_string().contains("use '-- -x'"), "{e}");
        match command(&[
            "remember",
            "we",
            "pin",
            "hyper",
            "--project",
            "/src/a",
            "--json",
        ]) {
            Command::Remember(r) => {
                assert_eq!(r.text, ["we", "pin", "hyper"]);
                assert_eq!(r.project.as_deref(), Some("/src/a"));
                assert!(r.json);
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn each_command_sets_its_heap_up_for_what_it_does() {
        use crate::heap::Use;
        for (args, want) in [
            (&["search", "why"][..], Use::ShortRead),
            (&["show", "abc123"], Use::ShortRead),
            (&["serve"], Use::Serve),
            (&["serve", "--listen", "127.0.0.1:0"], Use::Serve),
            (&["index"], Use::LongOrLarge),
            (&["mcp"], Use::LongOrLarge),
        ] {
            assert_eq!(command(args).heap_use(), want, "{args:?}");
        }
    }
}
