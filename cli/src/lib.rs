//! The `cairn` command line: clap definitions, human and `--json`
//! renderers, and the error-to-exit-code table. Every command is a function
//! in [`cmd`], so tests can call them directly.
//!
//! More than a front end: the commands decide whether a running daemon or
//! this process does the work, [`install`] edits agents' configs and sets
//! up the background service, `cmd::doctor` inspects the machine, and
//! [`heap`] tunes the allocator for the command at hand. The process's
//! environment is read here and handed to the library as `config::Env`.

pub mod args;
pub mod cmd;
pub mod heap;
pub mod install;
pub mod output;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Exit code for success.
pub const EXIT_OK: u8 = 0;
/// Exit code for a search that found nothing (as grep and ripgrep do).
pub const EXIT_NO_MATCH: u8 = 1;
/// Exit code for a failed command (bad input, unreadable database, ...).
pub const EXIT_ERROR: u8 = 2;

/// Returned by a command that ran fine but found nothing: exit status 1,
/// nothing printed to stderr.
#[derive(Debug)]
pub struct NoMatch;

impl std::fmt::Display for NoMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no matches")
    }
}

impl std::error::Error for NoMatch {}

/// Runs the CLI with the given arguments and returns the process exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    match parse(args) {
        Ok(cli) => run_parsed(cli),
        Err(code) => code,
    }
}

/// Parses the arguments; on a mistake (or `--help`, `--version`) prints
/// what clap says and returns the exit code to end with.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, ExitCode> {
    Cli::try_parse_from(args).map_err(|e| {
        let _ = e.print();
        ExitCode::from(if e.use_stderr() { EXIT_ERROR } else { EXIT_OK })
    })
}

/// Runs parsed arguments and returns the process exit code.
pub fn run_parsed(cli: Cli) -> ExitCode {
    init_logging(cli.verbose);
    cairn_node::store::set_upgrade_notice(upgrade_notice);
    let result = match cli.command {
        Command::Index(a) => cmd::index::run(&cli.global, &a),
        Command::Search(a) => cmd::search::run(&cli.global, &a),
        Command::Show(a) => cmd::show::run(&cli.global, &a),
        Command::Handoff(a) => cmd::handoff::run(&cli.global, &a),
        Command::Resume(a) => cmd::resume::run(&cli.global, &a),
        Command::Sources(a) => cmd::sources::run(&cli.global, &a),
        Command::Status(a) => cmd::status::run(&cli.global, &a),
        Command::Doctor(a) => cmd::doctor::run(&cli.global, &a),
        Command::Remember(a) => cmd::remember::run(&cli.global, &a),
        Command::Forget(a) => cmd::forget::run(&cli.global, &a),
        Command::Pair(a) => cmd::pair::run(&cli.global, &a),
        Command::Peers(a) => cmd::pair::run_peers(&cli.global, &a),
        Command::Unpair(a) => cmd::pair::run_unpair(&cli.global, &a),
        Command::Scope(a) => cmd::scope::run(&cli.global, &a),
        Command::Sync(a) => cmd::sync::run(&cli.global, &a),
        Command::Serve(a) => cmd::serve::run(&cli.global, &a),
        Command::Mcp => cmd::mcp::run(&cli.global),
        Command::Install(a) => cmd::install::run(&cli.global, &a),
        Command::Uninstall(a) => cmd::install::run_uninstall(&cli.global, &a),
        Command::Hook(a) => cmd::hook::run(&cli.global, &a),
        Command::Demo(a) => cmd::demo::run(&a),
        Command::Ui(a) => cmd::ui::run(&cli.global, &a),
        Command::Completions(a) => cmd::docs::completions(&a),
        Command::Man(a) => cmd::docs::man(&a),
    };
    match result {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_OK),
        Err(e) if e.downcast_ref::<NoMatch>().is_some() => ExitCode::from(EXIT_NO_MATCH),
        Err(e) => {
            eprintln!("cairn: error: {}", error_text(&e));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// An error and its causes, joined by ": " as `{:#}` joins them, leaving
/// out a cause the text before it already says (a message that quotes its
/// source, SQLite's "Error code 26: file is not a database" after "file
/// is not a database"), so each fact is printed once.
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        let bare = text
            .strip_prefix("Error code ")
            .and_then(|rest| rest.split_once(": "))
            .map_or(text.as_str(), |(_, message)| message);
        if !out.contains(bare) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Says on a terminal that the first command after an update rewrites the
/// index (a large one takes a minute or more), so the wait is not a hang.
fn upgrade_notice(db: &std::path::Path, from: u32, to: u32) {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!(
            "cairn: upgrading the index {} from format {from} to {to}: this happens once after an update and takes a while on a large index",
            db.display()
        );
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "error",
        1 => "warn",
        2 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("CAIRN_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // No colour codes in a journal, a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::error_text;

    /// A message that quotes its source, and SQLite's coded form of the
    /// same words, are said once; a cause not yet said is kept.
    #[test]
    fn each_cause_of_an_error_is_said_once() {
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some("file is not a database".into()),
        );
        let e = anyhow::Error::new(sqlite)
            .context("x.db is not a readable cairn database (file is not a database)")
            .context("cannot open the cairn node in /h");
        assert_eq!(
            format!("{e:#}").matches("file is not a database").count(),
            3,
            "the chain as anyhow prints it"
        );
        assert_eq!(
            error_text(&e),
            "cannot open the cairn node in /h: x.db is not a readable cairn database (file is not a database)"
        );
        let io = std::io::Error::other("no space left on device");
        let e = anyhow::Error::new(io).context("could not write x.db-vectors");
        assert_eq!(
            error_text(&e),
            "could not write x.db-vectors: no space left on device"
        );
    }
}
