//! `cairn resume`: starts a coding agent in the session's project folder
//! with the session's handoff brief as its first prompt, through the
//! agent's own prompt argument (`cairn_node::handoff::launch`).
//!
//! On Unix cairn replaces itself with the agent (`exec`): the agent owns the
//! terminal and its signals as if the user had typed the command, and no
//! cairn process stays behind holding the database open. Elsewhere it
//! starts the agent, waits, and exits with the agent's status.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cairn_node::handoff::launch::{self, LAUNCHERS, Launcher};
use cairn_node::mcp::sanitize;
use serde::Serialize;

use crate::args::{GlobalArgs, ResumeArgs};
use crate::output;

/// What `--dry-run --json` prints.
#[derive(Serialize)]
struct Plan<'a> {
    /// The cairn agent id started.
    agent: &'a str,
    /// The program, and its full path when it is installed here.
    program: &'a str,
    installed: Option<String>,
    /// The folder it starts in.
    cwd: String,
    /// The exact arguments (the prompt last, or after its flag).
    argv: &'a [String],
    /// The same as one shell-quoted line, `cd` included.
    command: String,
    /// When the brief was too long for an argument: the file it was written to.
    brief_file: Option<String>,
    /// Whether the agent stays interactive after the first answer.
    interactive: bool,
}

/// Runs `cairn resume`.
pub fn run(global: &GlobalArgs, args: &ResumeArgs) -> anyhow::Result<()> {
    let node = super::open(global)?;
    let session = cairn_node::handoff::find_session(node.store(), &args.session)?;
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let (l, installed) = choose(
        args.agent.as_deref(),
        &session.agent,
        &path_var,
        args.dry_run,
    )?;
    let cwd = folder(args.cd.as_deref(), &session)?;
    let brief =
        cairn_node::handoff::session_brief(node.store(), &session, args.max_bytes as usize)?;
    // Fenced as recalled memory: cairn leaves the fenced block out when it
    // reads the new session back, so the brief is not indexed twice.
    let fenced = sanitize::wrap(&sanitize::recalled(&brief.text));
    let mut prompt = launch::prompt_with_brief(&fenced);
    let mut brief_file = None;
    if prompt.len() > launch::PROMPT_ARG_MAX {
        let dir = node.config().home.join("handoff");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let name: String = session
            .session_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let file = dir.join(format!("{name}.md"));
        std::fs::write(&file, &brief.text)
            .with_context(|| format!("cannot write {}", file.display()))?;
        eprintln!(
            "cairn: the brief ({} bytes) is too long for a command-line argument; the prompt points {} at {}",
            brief.text.len(),
            l.program,
            file.display()
        );
        prompt = launch::prompt_with_file(&file.display().to_string());
        brief_file = Some(file.display().to_string());
    }
    let argv = launch::argv(l, &args.agent_args, &prompt);
    if !l.interactive {
        eprintln!(
            "cairn: {} answers the brief once and exits (its prompt option is one-shot); continue with its own resume option",
            l.program
        );
    }
    let command = format!(
        "cd {} && {}",
        launch::shell_quote(&cwd.display().to_string()),
        launch::shell_line(&argv)
    );
    if args.dry_run {
        if installed.is_none() {
            eprintln!("cairn: note: {} is not on PATH here", l.program);
        }
        if args.json {
            return output::json(&Plan {
                agent: l.agent,
                program: l.program,
                installed: installed.map(|p| p.display().to_string()),
                cwd: cwd.display().to_string(),
                argv: &argv,
                command,
                brief_file,
                interactive: l.interactive,
            });
        }
        println!("{command}");
        return Ok(());
    }
    let Some(program) = installed else {
        bail!("{} is not installed here (not on PATH)", l.program);
    };
    eprintln!(
        "cairn: starting {} in {} with the handoff brief of {}:{} ({} bytes)",
        l.program,
        cwd.display(),
        session.agent,
        session.session_id,
        brief.text.len()
    );
    // Nothing of cairn's stays open in the agent's process.
    drop(node);
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&argv[1..]).current_dir(&cwd);
    start(cmd, l.program)
}

#[cfg(unix)]
fn start(mut cmd: std::process::Command, program: &str) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    // Only returns when the exec failed.
    let e = cmd.exec();
    Err(e).with_context(|| format!("cannot start {program}"))
}

#[cfg(not(unix))]
fn start(mut cmd: std::process::Command, program: &str) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {program}"))?;
    std::process::exit(status.code().unwrap_or(1));
}

/// The launcher to use and where its program is installed: the one asked
/// for, else the session's own agent when installed, else the first
/// installed of [`LAUNCHERS`].
fn choose(
    asked: Option<&str>,
    own: &str,
    path_var: &std::ffi::OsStr,
    dry_run: bool,
) -> anyhow::Result<(&'static Launcher, Option<PathBuf>)> {
    let names = || {
        LAUNCHERS
            .iter()
            .map(|l| l.program)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(a) = asked {
        let Some(l) = launch::launcher(a) else {
            bail!(
                "cairn cannot start {a:?} with a prompt; agents whose prompt argument it knows: {}",
                names()
            );
        };
        let installed = find_on_path(l.program, path_var);
        if installed.is_none() && !dry_run {
            bail!("{} is not installed here (not on PATH)", l.program);
        }
        return Ok((l, installed));
    }
    if let Some(l) = launch::launcher(own)
        && let Some(p) = find_on_path(l.program, path_var)
    {
        return Ok((l, Some(p)));
    }
    for l in LAUNCHERS {
        if let Some(p) = find_on_path(l.program, path_var) {
            match launch::launcher(own) {
                Some(o) => eprintln!(
                    "cairn: the session's agent ({}) is not installed here; using {}",
                    o.program, l.program
                ),
                None => eprintln!(
                    "cairn: cairn cannot hand a prompt to the session's agent ({own}); using {}",
                    l.program
                ),
            }
            return Ok((l, Some(p)));
        }
    }
    if dry_run && let Some(l) = launch::launcher(own) {
        return Ok((l, None));
    }
    bail!(
        "no coding agent that takes a prompt is installed here (looked for {} on PATH); install one or pass --agent",
        names()
    )
}

/// The folder to start in: `--cd`, else the session's project when it is a
/// folder on this machine.
fn folder(cd: Option<&Path>, s: &cairn_node::store::SessionInfo) -> anyhow::Result<PathBuf> {
    if let Some(d) = cd {
        if !d.is_dir() {
            bail!("--cd {}: not a folder", d.display());
        }
        return Ok(std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()));
    }
    match s.project.as_deref() {
        Some(p) if Path::new(p).is_dir() => Ok(PathBuf::from(p)),
        Some(p) => bail!(
            "the session ran in {p} on {}, which is not a folder on this machine; pass --cd DIR with your copy of the project",
            s.machine
        ),
        None => bail!(
            "the session has no recorded project folder (it ran on {}); pass --cd DIR",
            s.machine
        ),
    }
}

/// The full path of `program` in the folders of `path_var`, if it is an
/// executable file there.
fn find_on_path(program: &str, path_var: &std::ffi::OsStr) -> Option<PathBuf> {
    let exts: &[&str] = if cfg!(windows) {
        &[".exe", ".cmd", ".bat", ""]
    } else {
        &[""]
    };
    std::env::split_paths(path_var)
        .filter(|d| !d.as_os_str().is_empty())
        .flat_map(|d| exts.iter().map(move |e| d.join(format!("{program}{e}"))))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn fake_bin(dir: &Path, name: &str) {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    #[cfg(unix)]
    #[test]
    fn the_sessions_own_agent_wins_then_the_first_installed() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("codex"), "not executable").expect("write");
        fake_bin(dir.path(), "pi");
        fake_bin(dir.path(), "gemini");
        let path = dir.path().as_os_str();
        let (l, p) = choose(None, "pi", path, false).expect("own");
        assert_eq!((l.program, p.is_some()), ("pi", true));
        // codex is there but not executable: the first installed is gemini.
        let (l, _) = choose(None, "codex", path, false).expect("fallback");
        assert_eq!(l.program, "gemini");
        let (l, _) = choose(Some("pi"), "codex", path, false).expect("asked");
        assert_eq!(l.program, "pi");
        assert!(choose(Some("claude"), "pi", path, false).is_err());
        assert!(choose(Some("claude"), "pi", path, true).is_ok());
        let e = choose(Some("vim"), "pi", path, true).expect_err("unknown");
        assert!(e.to_string().contains("claude, codex"), "{e}");
        let empty = tempfile::tempdir().expect("tmp");
        assert!(choose(None, "cursor", empty.path().as_os_str(), false).is_err());
    }
}
