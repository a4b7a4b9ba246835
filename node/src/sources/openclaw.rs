//! OpenClaw (formerly Clawdbot): pi-format JSONL per session, append-only.
//!
//! `${OPENCLAW_STATE_DIR:-~/.openclaw}/agents/<agentId>/sessions/<id>.jsonl`
//! (older installs: `~/.clawdbot/agents/…`). Beside them sit `sessions.json`
//! (an index), `<id>.checkpoint.<uuid>.jsonl` snapshots and
//! `.deleted`/`.reset`/`.bak` archives, none of which are read. The format is
//! pi v3 (header with `cwd`, `message` lines with `user`/`assistant`/
//! `toolResult`), so the reader is [`super::pi::new_parser`]; a session whose
//! header has no `cwd` gets no project.

use std::path::{Path, PathBuf};

use super::common::walk_stores;
use super::{Locations, Reader, Source, SourceFile};

/// The OpenClaw source.
pub struct OpenClaw;

fn state_dirs(loc: &Locations) -> Vec<PathBuf> {
    vec![
        loc.var_or("OPENCLAW_STATE_DIR", loc.home.join(".openclaw")),
        loc.home.join(".clawdbot"),
    ]
}

/// A live session transcript: `<id>.jsonl`, not a checkpoint or an archive.
fn is_session(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let in_sessions = p
        .parent()
        .and_then(|d| d.file_name())
        .is_some_and(|n| n == "sessions");
    in_sessions && name.ends_with(".jsonl") && !name.contains(".checkpoint.")
}

impl Source for OpenClaw {
    fn agent(&self) -> &'static str {
        "openclaw"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["OPENCLAW_STATE_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        state_dirs(loc)
            .into_iter()
            .map(|d| d.join("agents"))
            .collect()
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        self.roots(loc)
            .iter()
            .flat_map(|d| walk_stores(d, 2, &is_session, Reader::Lines(super::pi::new_parser)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_checkpoints_archives_and_the_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = dir.path().join(".openclaw/agents/main/sessions");
        std::fs::create_dir_all(&s).expect("mkdir");
        for f in [
            "a.jsonl",
            "a.checkpoint.1234.jsonl",
            "b.jsonl.deleted",
            "c.jsonl.bak",
            "sessions.json",
        ] {
            std::fs::write(s.join(f), b"{}\n").expect("write");
        }
        let found = OpenClaw.discover(&Locations::under_home(dir.path()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].path.ends_with("a.jsonl"));
        let mut loc = Locations::under_home(Path::new("/nonexistent"));
        loc.vars
            .insert("OPENCLAW_STATE_DIR".into(), dir.path().join(".openclaw"));
        assert_eq!(OpenClaw.discover(&loc).len(), 1);
    }
}
