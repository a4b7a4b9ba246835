//! `cairn install` and `cairn uninstall`: add (or remove) cairn's MCP
//! server entry, and optionally its session-start hook, in each agent's own
//! config, and the background service that runs `cairn serve`.
//! Presentation only; the editing lives in [`crate::install`].

use anyhow::{Context, bail};
use cairn_node::config::Env;
use serde::Serialize;

use crate::args::{GlobalArgs, InstallArgs, UninstallArgs};
use crate::install::service::{self, Manager, Plan, RunError, Runner, ServiceCtx};
use crate::install::{self, Action, Agent, Change, Ctx, Target, UNSUPPORTED, What};
use crate::output;

/// Where the agents' configs are, and the absolute path of this binary.
pub fn ctx(global: &GlobalArgs) -> anyhow::Result<Ctx> {
    let env = Env::capture(|k| std::env::var(k).ok());
    let cfg = super::config(global)?;
    let home = env
        .home
        .clone()
        .context("HOME is not set: cannot find the agents' configs")?;
    let exe = std::env::current_exe().context("cannot tell where the cairn binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let bin = exe
        .to_str()
        .context("the cairn binary's path is not valid UTF-8")?
        .to_owned();
    Ok(Ctx {
        home,
        claude_config_dir: env.claude_config_dir,
        locations: cfg.locations,
        bin,
        cline_mcp_settings: std::env::var_os("CLINE_MCP_SETTINGS_PATH")
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from),
    })
}

/// The agents named on the command line (all of them when none is).
fn select(ctx: &Ctx, names: &[String]) -> anyhow::Result<Vec<Agent>> {
    let agents = install::all(ctx);
    if names.is_empty() {
        return Ok(agents);
    }
    let mut out = Vec::new();
    for n in names {
        if let Some((_, why)) = UNSUPPORTED.iter().find(|(id, _)| id == n) {
            bail!("{n} is not supported yet: {why}");
        }
        match agents.iter().find(|a| a.id == n) {
            Some(a) => out.push(a.clone()),
            None => {
                let known: Vec<&str> = agents.iter().map(|a| a.id).collect();
                bail!("unknown agent {n:?}; cairn can wire {}", known.join(", "));
            }
        }
    }
    Ok(out)
}

/// Runs `cairn install`.
pub fn run(global: &GlobalArgs, args: &InstallArgs) -> anyhow::Result<()> {
    let ctx = ctx(global)?;
    let explicit = !args.agents.is_empty();
    let agents: Vec<Agent> = select(&ctx, &args.agents)?
        .into_iter()
        .filter(|a| explicit || a.detected)
        .collect();
    let mut out = output::stdout();
    if agents.is_empty() {
        output::line(
            &mut out,
            "no supported agent found on this machine; use --agent NAME to wire one anyway",
        )?;
    }
    let mut targets: Vec<Target> = Vec::new();
    for a in &agents {
        targets.extend(a.wanted_mcp().into_iter().cloned());
        if args.hooks {
            match &a.hook {
                Some(h) => targets.push(h.clone()),
                None if explicit => output::line(
                    &mut out,
                    &format!("{:<12} no session-start hook support yet", a.id),
                )?,
                None => {}
            }
        }
    }
    let ok = apply_all(&mut out, &targets, Action::Install, args.dry_run)?;
    if !explicit {
        for (id, why) in UNSUPPORTED {
            output::line(&mut out, &format!("{id:<12} not supported yet: {why}"))?;
        }
    }
    let service_ok = if args.no_service {
        true
    } else {
        install_service(&mut out, global, args.dry_run)?
    };
    if !ok {
        bail!("some agent configs were left untouched (see above)");
    }
    if !service_ok {
        bail!(
            "the background service could not be started (see above); `cairn serve` runs it by hand"
        );
    }
    Ok(())
}

/// Where the service file goes and what it runs.
pub fn service_ctx(global: &GlobalArgs) -> anyhow::Result<ServiceCtx> {
    let env = Env::capture(|k| std::env::var(k).ok());
    let cfg = super::config(global)?;
    let home = env
        .home
        .clone()
        .context("HOME is not set: cannot tell where the service file goes")?;
    let bin = ctx(global)?.bin;
    let moved_home = global.home.is_some() || env.cairn_home.is_some();
    let moved_config = global.config.is_some() || env.cairn_config.is_some();
    Ok(ServiceCtx {
        xdg_config_home: env
            .xdg_config_home
            .clone()
            .unwrap_or_else(|| home.join(".config")),
        home,
        bin,
        cairn_home: moved_home.then(|| absolute(&cfg.home)),
        config: if moved_config {
            cfg.config_path.as_deref().map(absolute)
        } else {
            None
        },
    })
}

fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// This system's service plan and the tool that drives it (`None` where
/// cairn knows no service manager).
pub fn service_plan(global: &GlobalArgs) -> anyhow::Result<Option<(Plan, Runner)>> {
    let Some(manager) = Manager::native() else {
        return Ok(None);
    };
    let sctx = service_ctx(global)?;
    let plan = service::plan(manager, &sctx);
    let runner = Runner::new(manager, std::env::var(service::CTL_ENV).ok());
    Ok(Some((plan, runner)))
}

fn describe(m: Manager) -> &'static str {
    match m {
        Manager::Systemd => "systemd user unit",
        Manager::Launchd => "launchd agent",
    }
}

/// Writes and starts the service; false when starting it failed.
fn install_service(
    out: &mut impl std::io::Write,
    global: &GlobalArgs,
    dry_run: bool,
) -> anyhow::Result<bool> {
    let Some((plan, runner)) = service_plan(global)? else {
        output::line(
            out,
            "service      no service manager cairn knows here: run `cairn serve` under your own supervisor",
        )?;
        return Ok(true);
    };
    let head = format!(
        "{:<12} {:<18} {}",
        "service",
        describe(plan.manager),
        plan.path.display()
    );
    if dry_run {
        output::line(out, &format!("{head}  would write:"))?;
        for l in plan.contents.lines() {
            output::line(out, &format!("    {l}"))?;
        }
        for c in &plan.start {
            output::line(
                out,
                &format!("  then run: {} {}", runner.program(), c.join(" ")),
            )?;
        }
        return Ok(true);
    }
    let changed =
        service::write(&plan).with_context(|| format!("cannot write {}", plan.path.display()))?;
    for c in &plan.start {
        match runner.run(c) {
            Ok(()) => {}
            Err(RunError::Missing { program }) => {
                output::line(
                    out,
                    &format!(
                        "{head}  written, not started: `{program}` is not available here; run `cairn serve` yourself"
                    ),
                )?;
                return Ok(true);
            }
            Err(e) => {
                output::line(out, &format!("{head}  written, not started"))?;
                eprintln!("cairn: error: {e}");
                return Ok(false);
            }
        }
    }
    let verb = if changed {
        "installed and started"
    } else {
        "already installed; started"
    };
    output::line(out, &format!("{head}  {verb} (runs `cairn serve`)"))?;
    Ok(true)
}

/// Stops the service and removes its file; false when stopping failed.
fn uninstall_service(
    out: &mut impl std::io::Write,
    global: &GlobalArgs,
    dry_run: bool,
) -> anyhow::Result<bool> {
    let Some((plan, runner)) = service_plan(global)? else {
        return Ok(true);
    };
    let head = format!(
        "{:<12} {:<18} {}",
        "service",
        describe(plan.manager),
        plan.path.display()
    );
    if !plan.path.exists() {
        output::line(out, &format!("{head}  not installed"))?;
        return Ok(true);
    }
    if dry_run {
        for c in &plan.stop {
            output::line(
                out,
                &format!("{head}  would run: {} {}", runner.program(), c.join(" ")),
            )?;
        }
        output::line(out, &format!("{head}  would remove"))?;
        return Ok(true);
    }
    let mut ok = true;
    for c in &plan.stop {
        match runner.run(c) {
            Ok(()) | Err(RunError::Missing { .. }) => {}
            Err(e) => {
                ok = false;
                eprintln!("cairn: error: {e}");
            }
        }
    }
    std::fs::remove_file(&plan.path)
        .with_context(|| format!("cannot remove {}", plan.path.display()))?;
    if plan.manager == Manager::Systemd {
        // Forget the removed unit; failure here changes nothing that matters.
        let _ = runner.run(&["--user".to_owned(), "daemon-reload".to_owned()]);
    }
    output::line(out, &format!("{head}  stopped and removed"))?;
    Ok(ok)
}

/// Runs `cairn uninstall`: removes cairn's entries (and hooks) wherever
/// they are, and (unless `--agent` narrows it) the background service.
pub fn run_uninstall(global: &GlobalArgs, args: &UninstallArgs) -> anyhow::Result<()> {
    let ctx = ctx(global)?;
    let agents = select(&ctx, &args.agents)?;
    let mut targets = Vec::new();
    for a in &agents {
        targets.extend(a.all_mcp().cloned());
        targets.extend(a.hook.clone());
    }
    let mut out = output::stdout();
    let ok = apply_all(&mut out, &targets, Action::Uninstall, args.dry_run)?;
    // `--agent` narrows the run to those agents; the service stays.
    let service_ok = if args.agents.is_empty() {
        uninstall_service(&mut out, global, args.dry_run)?
    } else {
        true
    };
    if !ok {
        bail!("some agent configs were left untouched (see above)");
    }
    if !service_ok {
        bail!("the background service could not be stopped (see above)");
    }
    Ok(())
}

/// Applies every target, printing one line each (and diffs for changes in a
/// dry run). Returns false when any config was left untouched by an error.
fn apply_all(
    out: &mut impl std::io::Write,
    targets: &[Target],
    action: Action,
    dry_run: bool,
) -> anyhow::Result<bool> {
    let mut ok = true;
    for t in targets {
        let head = format!(
            "{:<12} {:<18} {}",
            t.agent,
            t.what.label(),
            t.path.display()
        );
        match install::apply(t, action, dry_run) {
            Ok(Change::Unchanged) => {
                let state = match action {
                    Action::Install => "already wired",
                    Action::Uninstall => "not wired",
                };
                output::line(out, &format!("{head}  {state}"))?;
            }
            Ok(Change::Changed { diff, backup }) => {
                let verb = match (action, dry_run) {
                    (Action::Install, false) => "added",
                    (Action::Install, true) => "would add",
                    (Action::Uninstall, false) => "removed",
                    (Action::Uninstall, true) => "would remove",
                };
                let backup = backup
                    .map(|b| format!(" (original saved as {})", b.display()))
                    .unwrap_or_default();
                output::line(out, &format!("{head}  {verb}{backup}"))?;
                if let (Action::Install, Some(note)) = (action, install::note_after_install(t)) {
                    output::line(out, &format!("{:<12} {note}", ""))?;
                }
                if dry_run {
                    output::line(out, diff.trim_end())?;
                }
            }
            Ok(Change::Manual { instructions }) => {
                output::line(out, &format!("{head}  to do by hand: {instructions}"))?;
            }
            Err(e) => {
                ok = false;
                output::line(out, &format!("{head}  error"))?;
                eprintln!("cairn: error: {e:#}");
            }
        }
    }
    if dry_run {
        output::line(out, "dry run: nothing was written")?;
    }
    Ok(ok)
}

/// One "wired into" line of `cairn status`.
#[derive(Debug, Serialize)]
pub struct Wired {
    /// Agent id.
    pub agent: &'static str,
    /// What the entry is.
    pub what: What,
    /// The config file.
    pub path: String,
    /// The command the entry runs.
    pub command: String,
}

/// Which agents' configs contain cairn's entries.
pub fn wired(ctx: &Ctx) -> Vec<Wired> {
    let mut out = Vec::new();
    for a in install::all(ctx) {
        for t in a.all_mcp().chain(a.hook.as_ref()) {
            let Ok(Some(text)) = install::read(&t.path) else {
                continue;
            };
            if let Ok(Some(command)) = t.wired(&text) {
                out.push(Wired {
                    agent: t.agent,
                    what: t.what,
                    path: t.path.display().to_string(),
                    command,
                });
            }
        }
    }
    out
}
