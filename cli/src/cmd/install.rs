//! `cairn install` and `cairn uninstall`: add (or remove) cairn's MCP
//! server entry, and optionally its session-start hook, in each agent's own
//! config. Presentation only; the editing lives in [`crate::install`].

use anyhow::{Context, bail};
use cairn_node::config::Env;
use serde::Serialize;

use crate::args::{GlobalArgs, InstallArgs, UninstallArgs};
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
        targets.push(a.mcp.clone());
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
    if !ok {
        bail!("some agent configs were left untouched (see above)");
    }
    Ok(())
}

/// Runs `cairn uninstall`: removes cairn's entries (and hooks) wherever they are.
pub fn run_uninstall(global: &GlobalArgs, args: &UninstallArgs) -> anyhow::Result<()> {
    let ctx = ctx(global)?;
    let agents = select(&ctx, &args.agents)?;
    let mut targets = Vec::new();
    for a in &agents {
        targets.push(a.mcp.clone());
        targets.extend(a.hook.clone());
    }
    let mut out = output::stdout();
    if !apply_all(&mut out, &targets, Action::Uninstall, args.dry_run)? {
        bail!("some agent configs were left untouched (see above)");
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
                if dry_run {
                    output::line(out, diff.trim_end())?;
                }
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
        for t in std::iter::once(&a.mcp).chain(a.hook.as_ref()) {
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
