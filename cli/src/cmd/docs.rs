//! `cairn completions SHELL` and `cairn man`: generated from the clap
//! definitions, so they never drift from the real flags.

use anyhow::Context;
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::output;

/// Prints the completion script for a shell.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "cairn", &mut buf);
    write_out(&buf)
}

/// Prints the top-level man page, or writes every page into `--dir`.
pub fn man(args: &ManArgs) -> anyhow::Result<()> {
    let cmd = Cli::command();
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
            let mut out = output::stdout();
            output::line(&mut out, &format!("man pages written to {}", dir.display()))
        }
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            write_out(&buf)
        }
    }
}

fn write_out(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = output::stdout();
    out.write_all(bytes)?;
    out.flush()?;
    Ok(())
}
