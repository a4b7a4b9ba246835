//! Claude Desktop's Code and Cowork tabs: Claude Code transcripts that the
//! desktop app keeps in its own folder.
//!
//! The app folder is `~/.config/Claude` on Linux and
//! `~/Library/Application Support/Claude` on macOS. Cowork sessions live in
//! `local-agent-mode-sessions/<account>/<org>/local_<id>/.claude/projects/<slug>/<uuid>.jsonl`
//! (beside an `audit.jsonl` stream that is not read); Code-tab sessions keep
//! a `local_<id>.json` record in `claude-code-sessions/…` that points at a
//! transcript in `~/.claude/projects`, which the `claude-code` source
//! already reads, so only transcripts inside the app folder are read here.
//! The format is Claude Code's JSONL, read by [`super::claude::parser`] from
//! the last safe offset. The chat tab keeps its history on Anthropic's
//! servers and is not on disk.

use std::path::{Path, PathBuf};

use super::common::{has_suffix, walk_stores};
use super::{Locations, Reader, Source, SourceFile};

/// The Claude Desktop source.
pub struct ClaudeDesktop;

fn app_dirs(loc: &Locations) -> Vec<PathBuf> {
    loc.app_config_dirs("Claude")
}

/// A transcript: a `.jsonl` inside a `projects` folder of an embedded `.claude`.
fn is_transcript(p: &Path) -> bool {
    has_suffix(p, ".jsonl")
        && p.components().any(|c| c.as_os_str() == ".claude")
        && p.components().any(|c| c.as_os_str() == "projects")
}

impl Source for ClaudeDesktop {
    fn agent(&self) -> &'static str {
        "claude-desktop"
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        app_dirs(loc)
            .into_iter()
            .flat_map(|d| {
                [
                    d.join("local-agent-mode-sessions"),
                    d.join("claude-code-sessions"),
                ]
            })
            .collect()
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        self.roots(loc)
            .iter()
            .flat_map(|d| walk_stores(d, 9, &is_transcript, Reader::Lines(super::claude::parser)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cowork_transcripts_not_audit_logs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir
            .path()
            .join("Library/Application Support/Claude/local-agent-mode-sessions/acct/org/local_1");
        let t = base.join(".claude/projects/-work/0f0e.jsonl");
        std::fs::create_dir_all(t.parent().expect("parent")).expect("mkdir");
        std::fs::write(&t, b"{}\n").expect("write");
        std::fs::write(base.join("audit.jsonl"), b"{}\n").expect("write");
        let found = ClaudeDesktop.discover(&Locations::under_home(dir.path()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, t);
    }
}
