//! The bench behind `cairn-bench`: corpus generation and measurements.
//!
//! Its own crate so that `cargo install --path cli` installs `cairn` alone;
//! it measures the `cairn` binary it finds next to itself (or `--cairn`).

mod corpus;
mod floor;
mod machine;
mod measure;
pub mod recall;
mod replay;
pub mod sync;
mod sync_hub;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Measures cold indexing, incremental appends, search latency, index size and peak RSS.
#[derive(Debug, Parser)]
#[command(name = "cairn-bench")]
pub struct BenchArgs {
    /// Corpus size in MB of agent history.
    #[arg(long, default_value_t = 1024)]
    pub size_mb: u64,
    /// Size of the one large transcript the append test grows, in MB.
    #[arg(long, default_value_t = 100)]
    pub big_mb: u64,
    /// Cold-index runs (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Repetitions of each search and append measurement.
    #[arg(long, default_value_t = 11)]
    pub reps: usize,
    /// Work folder (default: a temporary folder, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep an existing corpus in --dir instead of regenerating it.
    #[arg(long)]
    pub reuse: bool,
    /// The cairn binary to measure (default: the one next to this bench).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// Measure on this corpus instead of generating one: the output folder
    /// of `../shared/bench/gencorpus.py OUT SIZE_MB` (`claude/`, `codex/`,
    /// `needles.tsv`). It is only read; the index goes to --dir.
    #[arg(long, value_name = "OUT")]
    pub corpus: Option<PathBuf>,
    /// With --corpus: turn the meaning tier off in the scratch home
    /// (`[search] semantic = false`) and measure the lexical index alone.
    /// By default the figures are those of cairn's default configuration,
    /// meaning tier on, as a user runs it.
    #[arg(long)]
    pub lexical: bool,
    /// Print the figures as JSON too.
    #[arg(long)]
    pub json: bool,
}

/// Entry point of `cairn-bench`.
pub fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("sync") {
        return sync::main();
    }
    if std::env::args().nth(1).as_deref() == Some("recall") {
        return recall::main();
    }
    if std::env::args().nth(1).as_deref() == Some("floor") {
        return floor::main();
    }
    let args = BenchArgs::parse();
    let cairn = match &args.cairn {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("bench binary has no folder")?
            .join("cairn"),
    };
    anyhow::ensure!(
        cairn.is_file(),
        "no cairn binary at {}; build it first (cargo build --release -p cairn -p cairn-bench)",
        cairn.display()
    );
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("cairn-bench-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    if let Some(corpus) = &args.corpus {
        return replay::run(
            &cairn,
            corpus,
            &dir,
            args.runs,
            args.reps,
            !args.lexical,
            args.json,
        );
    }
    let home = dir.join("home");
    let corpus_bytes = if args.reuse && home.is_dir() {
        // The node's own data lives under the same home: leave it out.
        let _ = std::fs::remove_dir_all(home.join(".local/share/cairn"));
        corpus::size_of(&home)
    } else {
        let _ = std::fs::remove_dir_all(&home);
        eprintln!(
            "generating {} MB corpus in {} ...",
            args.size_mb,
            home.display()
        );
        corpus::generate(&home, args.size_mb * 1_000_000, args.big_mb * 1_000_000)?
    };
    measure::run(&cairn, &home, corpus_bytes, &args)
}
