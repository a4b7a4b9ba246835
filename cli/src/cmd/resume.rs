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
/// installed of [`LAUNCHERS`]. A program two agents share (`kimi`) is
/// started as the agent it turns out to be.
fn choose(
    asked: Option<&str>,
    own: &str,
    path_var: &std::ffi::OsStr,
    dry_run: bool,
) -> anyhow::Result<(&'static Launcher, Option<PathBuf>)> {
    let names = || {
        let mut seen: Vec<&str> = Vec::new();
        for l in LAUNCHERS {
            if !seen.contains(&l.program) {
                seen.push(l.program);
            }
        }
        seen.join(", ")
    };
    if let Some(a) = asked {
        if let Some(why) = launch::not_resumable(a) {
            bail!("{a} cannot be resumed: no prompt argument ({why})");
        }
        let shared = launch::sharing(a);
        if launch::launcher(a).is_none() && shared.len() > 1 {
            let agents = shared.iter().map(|l| l.agent).collect::<Vec<_>>();
            let Some(p) = find_on_path(a, path_var) else {
                bail!(
                    "{a} is the program of {}, and it is not installed here; pass --agent {}",
                    agents.join(" and "),
                    agents.join(" or --agent ")
                );
            };
            let Some(l) = launch::identify(a, &resolved(&p), &head(&p)) else {
                bail!(
                    "{a} is the program of {}, and cairn cannot tell which one {} is; pass --agent {}",
                    agents.join(" and "),
                    p.display(),
                    agents.join(" or --agent ")
                );
            };
            return Ok((l, Some(p)));
        }
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
        return Ok(match installed {
            Some(p) => (as_installed(l, &p), Some(p)),
            None => (l, None),
        });
    }
    if let Some(l) = launch::launcher(own)
        && let Some(p) = find_on_path(l.program, path_var)
    {
        return Ok((as_installed(l, &p), Some(p)));
    }
    for l in LAUNCHERS {
        if let Some(p) = find_on_path(l.program, path_var) {
            let l = as_installed(l, &p);
            match (launch::launcher(own), launch::not_resumable(own)) {
                (Some(o), _) => eprintln!(
                    "cairn: the session's agent ({}) is not installed here; using {}",
                    o.program, l.program
                ),
                (None, Some(why)) => eprintln!(
                    "cairn: the session's agent ({own}) cannot be resumed: no prompt argument ({why}); using {}",
                    l.program
                ),
                (None, None) => eprintln!(
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

/// `l`, or the agent sharing its program that the installed file at `p`
/// turns out to be (saying so when they differ or cannot be told apart).
fn as_installed(l: &'static Launcher, p: &Path) -> &'static Launcher {
    if launch::sharing(l.program).len() < 2 {
        return l;
    }
    match launch::identify(l.program, &resolved(p), &head(p)) {
        Some(found) if found.agent != l.agent => {
            eprintln!(
                "cairn: {} here is {} (not {}); starting it as {}",
                p.display(),
                found.agent,
                l.agent,
                found.agent
            );
            found
        }
        Some(found) => found,
        None => {
            eprintln!(
                "cairn: cannot tell which agent {} is; starting it as {}",
                p.display(),
                l.agent
            );
            l
        }
    }
}

/// The path with symlinks followed (as given when that fails).
fn resolved(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The first 4 KB of a file (empty when it cannot be read).
fn head(p: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(p) {
        let _ = f.take(4096).read_to_end(&mut buf);
    }
    buf
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
        // An agent cairn reads but cannot start says so.
        let e = choose(Some("roo"), "pi", path, true).expect_err("roo");
        assert!(
            e.to_string()
                .contains("roo cannot be resumed: no prompt argument"),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn kimi_starts_as_the_kimi_that_is_installed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let path = bin.as_os_str();
        // Not installed: the bare program cannot be told apart.
        let e = choose(Some("kimi"), "codex", path, true).expect_err("ambiguous");
        assert!(
            e.to_string()
                .contains("--agent kimi-cli or --agent kimi-code"),
            "{e}"
        );
        // Kimi Code's install folder, linked onto PATH.
        let code = dir.path().join(".kimi-code/bin");
        std::fs::create_dir_all(&code).expect("mkdir");
        std::fs::write(code.join("kimi"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(code.join("kimi"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::os::unix::fs::symlink(code.join("kimi"), bin.join("kimi")).expect("link");
        let (l, _) = choose(Some("kimi"), "codex", path, false).expect("kimi");
        assert_eq!(l.agent, "kimi-code");
        // A Kimi CLI session, and Kimi Code installed: started as Kimi Code.
        let (l, p) = choose(None, "kimi-cli", path, false).expect("own");
        assert_eq!((l.agent, p.is_some()), ("kimi-code", true));
        let (l, _) = choose(Some("kimi-cli"), "codex", path, false).expect("asked");
        assert_eq!(l.agent, "kimi-code");
        // Kimi CLI's Python script.
        std::fs::remove_file(bin.join("kimi")).expect("rm");
        std::fs::write(
            bin.join("kimi"),
            "#!/venv/bin/python\nfrom kimi_cli.__main__ import main\n",
        )
        .expect("write");
        std::fs::set_permissions(bin.join("kimi"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let (l, _) = choose(Some("kimi"), "codex", path, false).expect("kimi");
        assert_eq!((l.agent, l.interactive), ("kimi-cli", true));
    }
}
