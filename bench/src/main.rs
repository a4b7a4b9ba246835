//! `cairn-bench`: generates a realistic agent-history corpus and measures the
//! `cairn` binary on it, printing medians (never asserting on time).
//!
//! ```text
//! cargo build --release -p cairn -p cairn-bench
//! target/release/cairn-bench --size-mb 1024 --runs 3
//! ```

fn main() -> anyhow::Result<()> {
    cairn_bench::main()
}
