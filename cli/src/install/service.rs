//! The background service that runs `cairn serve`: a systemd user unit on
//! Linux, a launchd agent on macOS. Building the file and the commands is
//! pure ([`plan`]); running them goes through the service manager's own
//! command line ([`Runner`]), which `CAIRN_SERVICE_CTL` replaces (tests
//! point it at a script that records its arguments, so nothing touches the
//! real system).

use std::path::PathBuf;
use std::process::Command;

/// The systemd unit's file name.
pub const SYSTEMD_UNIT: &str = "cairn.service";
/// The launchd agent's label (and plist file stem).
pub const LAUNCHD_LABEL: &str = "dev.cairn.serve";
/// Environment variable naming the program used instead of `systemctl` or
/// `launchctl`.
pub const CTL_ENV: &str = "CAIRN_SERVICE_CTL";

/// Which service manager runs the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// systemd, as a user unit.
    Systemd,
    /// launchd, as a per-user agent.
    Launchd,
}

impl Manager {
    /// The manager of this operating system, if cairn knows one.
    pub fn native() -> Option<Manager> {
        if cfg!(target_os = "macos") {
            Some(Manager::Launchd)
        } else if cfg!(target_os = "linux") {
            Some(Manager::Systemd)
        } else {
            None
        }
    }

    /// The command-line tool that drives it.
    pub fn ctl(self) -> &'static str {
        match self {
            Manager::Systemd => "systemctl",
            Manager::Launchd => "launchctl",
        }
    }
}

/// Where things go and what the service runs.
#[derive(Debug, Clone)]
pub struct ServiceCtx {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` (default `~/.config`).
    pub xdg_config_home: PathBuf,
    /// Absolute path of the cairn binary.
    pub bin: String,
    /// `--home` for the daemon, when not the default.
    pub cairn_home: Option<PathBuf>,
    /// `--config` for the daemon, when not the default.
    pub config: Option<PathBuf>,
}

/// The file to write and the commands around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The manager.
    pub manager: Manager,
    /// The unit or plist file.
    pub path: PathBuf,
    /// Its contents.
    pub contents: String,
    /// Arguments to the manager's tool that load and start it.
    pub start: Vec<Vec<String>>,
    /// Arguments that stop and unload it (before the file is removed).
    pub stop: Vec<Vec<String>>,
    /// Arguments whose success means "running".
    pub is_running: Vec<String>,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// The daemon's command line.
fn serve_args(ctx: &ServiceCtx) -> Vec<String> {
    let mut v = vec![ctx.bin.clone()];
    if let Some(h) = &ctx.cairn_home {
        v.push("--home".to_owned());
        v.push(h.display().to_string());
    }
    if let Some(c) = &ctx.config {
        v.push("--config".to_owned());
        v.push(c.display().to_string());
    }
    v.push("serve".to_owned());
    v
}

/// Quotes one systemd `ExecStart` word when it needs it.
fn systemd_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@,".contains(c))
    {
        w.to_owned()
    } else {
        let escaped = w
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('%', "%%");
        format!("\"{escaped}\"")
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The systemd user unit.
pub fn systemd_unit(ctx: &ServiceCtx) -> String {
    let exec: Vec<String> = serve_args(ctx).iter().map(|w| systemd_word(w)).collect();
    format!(
        "# Written by `cairn install`; `cairn uninstall` removes it.\n\
         [Unit]\n\
         Description=cairn: keep agent memory indexed and in sync with paired machines\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Environment=CAIRN_LOG=info\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" ")
    )
}

/// The launchd agent's property list.
pub fn launchd_plist(ctx: &ServiceCtx) -> String {
    let args: String = serve_args(ctx)
        .iter()
        .map(|a| format!("    <string>{}</string>\n", xml_escape(a)))
        .collect();
    let log = ctx.home.join("Library/Logs/cairn-serve.log");
    let log = xml_escape(&log.display().to_string());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <!-- Written by `cairn install`; `cairn uninstall` removes it. -->\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 <string>{LAUNCHD_LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n\
         {args}\
         \x20 </array>\n\
         \x20 <key>EnvironmentVariables</key>\n\
         \x20 <dict>\n\
         \x20   <key>CAIRN_LOG</key>\n\
         \x20   <string>info</string>\n\
         \x20 </dict>\n\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         \x20 <key>KeepAlive</key>\n\
         \x20 <dict>\n\
         \x20   <key>SuccessfulExit</key>\n\
         \x20   <false/>\n\
         \x20 </dict>\n\
         \x20 <key>ProcessType</key>\n\
         \x20 <string>Background</string>\n\
         \x20 <key>StandardErrorPath</key>\n\
         \x20 <string>{log}</string>\n\
         </dict>\n\
         </plist>\n"
    )
}

/// The file and commands for `manager`.
pub fn plan(manager: Manager, ctx: &ServiceCtx) -> Plan {
    match manager {
        Manager::Systemd => Plan {
            manager,
            path: ctx.xdg_config_home.join("systemd/user").join(SYSTEMD_UNIT),
            contents: systemd_unit(ctx),
            start: vec![
                strs(&["--user", "daemon-reload"]),
                strs(&["--user", "enable", "--now", SYSTEMD_UNIT]),
            ],
            stop: vec![strs(&["--user", "disable", "--now", SYSTEMD_UNIT])],
            is_running: strs(&["--user", "is-active", "--quiet", SYSTEMD_UNIT]),
        },
        Manager::Launchd => {
            let path = ctx
                .home
                .join("Library/LaunchAgents")
                .join(format!("{LAUNCHD_LABEL}.plist"));
            let p = path.display().to_string();
            Plan {
                manager,
                contents: launchd_plist(ctx),
                start: vec![vec!["load".to_owned(), "-w".to_owned(), p.clone()]],
                stop: vec![vec!["unload".to_owned(), "-w".to_owned(), p]],
                is_running: strs(&["list", LAUNCHD_LABEL]),
                path,
            }
        }
    }
}

/// Runs the manager's tool (or its stand-in from `CAIRN_SERVICE_CTL`).
#[derive(Debug, Clone)]
pub struct Runner {
    program: String,
}

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The tool is not installed (or not on PATH).
    #[error("`{program}` is not available here")]
    Missing {
        /// The tool.
        program: String,
    },
    /// The tool ran and failed.
    #[error("`{program} {args}` failed ({status}): {stderr}")]
    Failed {
        /// The tool.
        program: String,
        /// Its arguments, space-joined.
        args: String,
        /// The exit status.
        status: std::process::ExitStatus,
        /// The first line of what it printed on stderr.
        stderr: String,
    },
    /// The tool could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The tool.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Runner {
    /// The runner for `manager`, honouring `override_program` (the value
    /// of `CAIRN_SERVICE_CTL`).
    pub fn new(manager: Manager, override_program: Option<String>) -> Runner {
        Runner {
            program: override_program
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| manager.ctl().to_owned()),
        }
    }

    /// The program run.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Runs it with `args`; success means exit status 0.
    pub fn run(&self, args: &[String]) -> Result<(), RunError> {
        let out = Command::new(&self.program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    RunError::Missing {
                        program: self.program.clone(),
                    }
                } else {
                    RunError::Spawn {
                        program: self.program.clone(),
                        source,
                    }
                }
            })?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(300)
            .collect();
        Err(RunError::Failed {
            program: self.program.clone(),
            args: args.join(" "),
            status: out.status,
            stderr,
        })
    }
}

/// Whether the service file is there and whether the manager says it runs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServiceState {
    /// The manager.
    pub manager: Manager,
    /// The unit or plist file.
    pub path: String,
    /// The file exists.
    pub installed: bool,
    /// The manager reports it running (`None` when the manager could not be asked).
    pub running: Option<bool>,
}

/// Asks about the service described by `plan`.
pub fn state(plan: &Plan, runner: &Runner) -> ServiceState {
    let installed = plan.path.exists();
    let running = if installed {
        match runner.run(&plan.is_running) {
            Ok(()) => Some(true),
            Err(RunError::Failed { .. }) => Some(false),
            Err(_) => None,
        }
    } else {
        Some(false)
    };
    ServiceState {
        manager: plan.manager,
        path: plan.path.display().to_string(),
        installed,
        running,
    }
}

/// Writes the file (creating its folder; replacing an older version of
/// it) and returns whether its contents changed.
pub fn write(plan: &Plan) -> std::io::Result<bool> {
    if std::fs::read_to_string(&plan.path).is_ok_and(|old| old == plan.contents) {
        return Ok(false);
    }
    super::apply::write_atomic(&plan.path, &plan.contents)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ServiceCtx {
        ServiceCtx {
            home: PathBuf::from("/home/ann"),
            xdg_config_home: PathBuf::from("/home/ann/.config"),
            bin: "/home/ann/.cargo/bin/cairn".to_owned(),
            cairn_home: None,
            config: None,
        }
    }

    #[test]
    fn systemd_unit_runs_serve_and_restarts_on_failure() {
        let p = plan(Manager::Systemd, &ctx());
        assert_eq!(
            p.path,
            PathBuf::from("/home/ann/.config/systemd/user/cairn.service")
        );
        assert!(
            p.contents
                .contains("\nExecStart=/home/ann/.cargo/bin/cairn serve\n")
        );
        assert!(p.contents.contains("\nRestart=on-failure\n"));
        assert!(p.contents.contains("\nWantedBy=default.target\n"));
        assert_eq!(
            p.start.last().map(|v| v.join(" ")).as_deref(),
            Some("--user enable --now cairn.service")
        );
        assert_eq!(p.stop[0].join(" "), "--user disable --now cairn.service");
    }

    #[test]
    fn odd_paths_are_quoted_in_the_unit_and_escaped_in_the_plist() {
        let c = ServiceCtx {
            cairn_home: Some(PathBuf::from("/data/my cairn")),
            config: Some(PathBuf::from("/etc/c&<.toml")),
            ..ctx()
        };
        let unit = systemd_unit(&c);
        assert!(
            unit.contains(
                "ExecStart=/home/ann/.cargo/bin/cairn --home \"/data/my cairn\" --config \"/etc/c&<.toml\" serve\n"
            ),
            "{unit}"
        );
        let plist = launchd_plist(&c);
        assert!(plist.contains("<string>/data/my cairn</string>"), "{plist}");
        assert!(
            plist.contains("<string>/etc/c&amp;&lt;.toml</string>"),
            "{plist}"
        );
        assert!(plist.contains("<string>serve</string>"));
        assert_eq!(systemd_word("100%"), "\"100%%\"");
    }

    #[test]
    fn launchd_agent_lives_in_launch_agents_and_loads_with_launchctl() {
        let p = plan(Manager::Launchd, &ctx());
        assert_eq!(
            p.path,
            PathBuf::from("/home/ann/Library/LaunchAgents/dev.cairn.serve.plist")
        );
        assert!(p.contents.contains("<key>RunAtLoad</key>"));
        assert_eq!(p.start[0][0], "load");
        assert_eq!(p.stop[0][0], "unload");
        assert_eq!(p.is_running.join(" "), "list dev.cairn.serve");
    }

    #[test]
    fn runner_uses_the_override_and_reports_a_missing_tool() {
        assert_eq!(Runner::new(Manager::Systemd, None).program(), "systemctl");
        let r = Runner::new(
            Manager::Systemd,
            Some("/nonexistent/cairn-test-ctl".to_owned()),
        );
        assert!(matches!(r.run(&[]), Err(RunError::Missing { .. })));
    }
}
