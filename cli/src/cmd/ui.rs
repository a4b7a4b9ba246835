//! `cairn ui`: the local browse page. The server lives in
//! `cairn_node::ui`; this module refreshes the index (bounded, like
//! `cairn search`), binds on loopback, prints the address and opens it in
//! the browser unless `--no-open`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use cairn_node::daemon;
use cairn_node::sources::Locations;
use cairn_node::ui::{UiContext, UiServer, guard};

use crate::args::{GlobalArgs, UiArgs};
use crate::output;

/// How long `cairn ui` may spend reading new history before it serves.
const REFRESH_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `cairn ui`.
pub fn run(global: &GlobalArgs, args: &UiArgs) -> anyhow::Result<()> {
    if !guard::bind_allowed(&args.listen) {
        bail!(
            "the browse page listens on loopback only (127.0.0.1 or [::1]); {} is not loopback",
            args.listen
        );
    }
    let mut node = super::open(global)?;
    // A running daemon keeps the index fresh already.
    if !args.no_refresh && !daemon::is_serving(&node.config().home) {
        let report = super::refresh(&mut node, true, Some(REFRESH_BUDGET))?;
        if report.deferred > 0 {
            eprintln!(
                "cairn: {} store(s) not indexed yet; the page shows what is. Run `cairn index` to finish.",
                report.deferred
            );
        } else if report.vectors_left {
            eprintln!(
                "cairn: some records have no meaning vectors yet; search by meaning covers the rest. Run `cairn index` to finish."
            );
        }
    }
    let cfg = node.config();
    let ctx = UiContext {
        home: cfg.home.clone(),
        db_path: cfg.db_path.clone(),
        node_id: node.identity().id().to_string(),
        node_name: cfg.node_name.clone(),
        checked: checked_paths(&cfg.locations, &cfg.disabled),
        semantic: cfg.semantic,
    };
    // The page reads through its own read-only connection.
    drop(node);
    let rt = daemon::runtime().context("start the runtime")?;
    rt.block_on(async {
        let server = UiServer::bind(args.listen, ctx).await?;
        let url = server.url();
        output::line(&mut output::stdout(), &url)?;
        eprintln!(
            "cairn ui: serving on {} (loopback only, read-only); Ctrl-C to stop",
            server.local_addr()
        );
        if !args.no_open {
            open_browser(&url);
        }
        server.serve(daemon::shutdown_signal()).await?;
        anyhow::Ok(())
    })
}

/// Every folder and file agent histories are looked for in (shown on the
/// page when nothing was found), as `cairn sources` lists them.
fn checked_paths(l: &Locations, disabled: &[String]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = cairn_node::sources::registry()
        .iter()
        .filter(|s| !disabled.iter().any(|d| d == s.agent()))
        .flat_map(|s| s.roots(l))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Opens `url` with the desktop's opener; prints a hint when there is none.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("cairn ui: could not run {opener}; open the address above in your browser");
    }
}
