//! Agent history sources: where each coding agent keeps its sessions and how
//! to turn them into [`Record`]s.
//!
//! One file per agent (or family of agents). Each implements [`Source`]: it
//! discovers the stores the agent wrote (from [`Locations`], never from the
//! process environment) and says which [`Reader`] reads them. Parsing is
//! pure; tailing, offsets and watermarks belong to `crate::indexer`. Adding
//! an agent is one file, its `mod` line and its entry in [`registry`]: the
//! source names the environment variables it honours ([`Source::env_vars`],
//! captured by the CLI into [`Locations::vars`]), the folders it looks in
//! ([`Source::roots`], which the daemon watches and `cairn sources` lists),
//! and the stores it found but cannot read ([`Source::unreadable`]).
//!
//! Sources never write or create an agent's files (agent databases are
//! opened read-only): a missing store is simply not discovered. The one
//! file a source writes is cairn's own notes file ([`notes`]).

pub mod aider;
pub mod amp;
pub mod antigravity;
pub mod blocks;
pub mod claude;
pub mod claude_desktop;
pub mod code_puppy;
pub mod codex;
pub mod common;
pub mod continue_dev;
pub mod copilot;
pub mod crush;
pub mod cursor;
pub mod db;
pub mod factory;
pub mod gemini;
pub mod goose;
pub mod gptme;
pub mod hermes;
pub mod kimi;
pub mod kimi_cli;
pub mod kiro;
pub mod layout;
pub mod md5;
pub mod nanocoder;
pub mod notes;
pub mod omp;
pub mod openclaw;
pub mod opencode;
pub mod openhands;
pub mod pi;
pub mod qwen;
pub mod unreadable;
pub mod vibe;
pub mod vscode_chat;
pub mod vscode_tasks;
pub mod walk;
pub mod zed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::record::Record;

/// Resolved locations of every agent's store. Built once from the
/// environment and config by the caller (the CLI), so tests and multiple
/// nodes in one process can point each source anywhere.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    /// The user's home directory (`$HOME`).
    pub home: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`, default `~/.claude`.
    pub claude_dir: PathBuf,
    /// `$CODEX_HOME`, default `~/.codex`.
    pub codex_home: PathBuf,
    /// The folder holding `.gemini`: `$GEMINI_CLI_HOME` or `$HOME`.
    pub gemini_home: PathBuf,
    /// `$XDG_DATA_HOME`, default `~/.local/share`.
    pub xdg_data_home: PathBuf,
    /// `$XDG_CONFIG_HOME`, default `~/.config`.
    pub xdg_config_home: PathBuf,
    /// `$CURSOR_CONFIG_DIR` (the IDE's `User` folder's parent), default
    /// `$XDG_CONFIG_HOME/Cursor` (Linux) or `~/Library/Application Support/Cursor`.
    pub cursor_config_dir: PathBuf,
    /// Copilot CLI home: `~/.copilot`.
    pub copilot_home: PathBuf,
    /// pi home: `~/.pi`.
    pub pi_home: PathBuf,
    /// Extra project roots whose `.aider.chat.history.md` is read, from config.
    pub aider_roots: Vec<PathBuf>,
    /// Project folders holding a per-project store, found without
    /// configuration (see [`crate::projects`]).
    pub project_dirs: Vec<PathBuf>,
    /// The file that remembers them, in the node's home; `None`: none are
    /// looked for.
    pub projects_file: Option<PathBuf>,
    /// `$AIDER_CHAT_HISTORY_FILE`, if set.
    pub aider_history_file: Option<PathBuf>,
    /// The node's own notes file (written by `cairn remember`).
    pub notes_file: PathBuf,
    /// The agents' own environment overrides that are set, by variable name
    /// (only variables some source lists in [`Source::env_vars`]).
    pub vars: BTreeMap<String, PathBuf>,
}

impl Locations {
    /// Every location derived from one home directory, the way an agent
    /// resolves them when no override is set.
    pub fn under_home(home: &Path) -> Locations {
        let xdg_data = home.join(".local/share");
        let xdg_config = home.join(".config");
        Locations {
            home: home.to_path_buf(),
            claude_dir: home.join(".claude"),
            codex_home: home.join(".codex"),
            gemini_home: home.to_path_buf(),
            cursor_config_dir: xdg_config.join("Cursor"),
            xdg_data_home: xdg_data.clone(),
            xdg_config_home: xdg_config,
            copilot_home: home.join(".copilot"),
            pi_home: home.join(".pi"),
            aider_roots: Vec::new(),
            project_dirs: Vec::new(),
            projects_file: None,
            aider_history_file: None,
            notes_file: xdg_data.join("cairn/notes.jsonl"),
            vars: BTreeMap::new(),
        }
    }

    /// An agent's environment override, when set.
    pub fn var(&self, name: &str) -> Option<&Path> {
        self.vars.get(name).map(PathBuf::as_path)
    }

    /// The variable's folder when set, else `default`.
    pub fn var_or(&self, name: &str, default: PathBuf) -> PathBuf {
        self.var(name).map_or(default, Path::to_path_buf)
    }

    /// Project folders where project-local stores (`.aider.chat.history.md`,
    /// `.crush/`, `.opencode/`) live: those of the config file (`[sources]
    /// project_roots`), then those found ([`Locations::project_dirs`]).
    pub fn project_roots(&self) -> Vec<PathBuf> {
        let mut v = self.aider_roots.clone();
        v.extend(
            self.project_dirs
                .iter()
                .filter(|d| !self.aider_roots.contains(d))
                .cloned(),
        );
        v
    }

    /// macOS's per-user application data folder, `~/Library/Application Support`.
    /// Probed on every platform: on Linux it simply does not exist.
    pub fn app_support(&self) -> PathBuf {
        self.home.join("Library/Application Support")
    }

    /// An application's config folder on Linux (`$XDG_CONFIG_HOME/<name>`)
    /// and on macOS (`~/Library/Application Support/<name>`).
    pub fn app_config_dirs(&self, name: &str) -> Vec<PathBuf> {
        vec![
            self.xdg_config_home.join(name),
            self.app_support().join(name),
        ]
    }

    /// The `User` folders of every VS Code-family editor on Linux and macOS
    /// (Code, Insiders, VSCodium, Cursor, Windsurf, Kiro), where extensions
    /// keep `globalStorage/` and `workspaceStorage/`.
    pub fn vscode_user_dirs(&self) -> Vec<PathBuf> {
        const HOSTS: [&str; 6] = [
            "Code",
            "Code - Insiders",
            "VSCodium",
            "Cursor",
            "Windsurf",
            "Kiro",
        ];
        let mut v = Vec::new();
        for host in HOSTS {
            for d in self.app_config_dirs(host) {
                v.push(d.join("User"));
            }
        }
        v
    }
}

/// Why one line, row or file could not be turned into records. These are
/// counted per source and never stop the rest of the scan.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The line is not valid JSON (or not the JSON shape expected).
    #[error("malformed json at byte {offset}: {source}")]
    Json {
        /// Byte offset of the line in its file.
        offset: u64,
        /// The decoder's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// The input parsed but lacks something the format requires.
    #[error("unexpected shape at byte {offset}: {what}")]
    Shape {
        /// Byte offset (or row id) of the bad input.
        offset: u64,
        /// What was missing or wrong, e.g. "message without role".
        what: &'static str,
    },
    /// The text is not UTF-8.
    #[error("invalid utf-8 at byte {offset}")]
    Utf8 {
        /// Byte offset of the line.
        offset: u64,
    },
}

/// Why a whole store could not be read this pass (it is retried next pass).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A filesystem error on the store.
    #[error("failed to read {path}: {source}")]
    Io {
        /// The store.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A SQLite store that could not be opened or queried (locked, corrupt, foreign schema).
    #[error("failed to query {path}: {source}")]
    Sqlite {
        /// The store.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A store in a layout or version cairn does not understand (a
    /// database without the tables its reader knows, say). The message
    /// starts with [`layout::NOT_UNDERSTOOD`], which is how a stored error
    /// is told apart from a store that failed for a passing reason.
    #[error("found, not understood: {what} ({path})")]
    NotUnderstood {
        /// The store.
        path: PathBuf,
        /// What cairn found there, in a few words.
        what: String,
    },
}

/// What a parser produced from some input: the records, plus the errors of
/// the lines or rows it had to skip.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Records in source order.
    pub records: Vec<Record>,
    /// Skipped input, one entry per bad line or row.
    pub errors: Vec<ParseError>,
}

/// A parser for an append-only JSON-lines file, fed one complete line at a time.
///
/// The indexer reads the file from its last safe offset (the end of the last
/// complete line) and calls [`LineParser::line`] for every complete line; a
/// torn last line is never passed in. When it resumes mid-file it first
/// passes the file's first line with `out` discarded, so parsers that learn
/// the session identity from a header line (Codex, pi, Copilot) have it.
pub trait LineParser: Send {
    /// Parses one line (without its trailing newline) that starts at byte `offset`.
    fn line(&mut self, line: &[u8], offset: u64, out: &mut Vec<Record>) -> Result<(), ParseError>;

    /// Called after the last complete line of this pass: flush anything buffered.
    fn finish(&mut self, _out: &mut Vec<Record>) {}
}

/// A watermark into a database store: opaque to the indexer, meaningful to the reader.
pub type Watermark = Option<String>;

/// What a database reader found since a watermark.
#[derive(Debug, Default)]
pub struct DbBatch {
    /// New or changed records, plus skipped rows.
    pub parsed: Parsed,
    /// The watermark to resume from next time.
    pub watermark: Watermark,
}

impl DbBatch {
    /// Nothing read: resume from `watermark` next time.
    pub fn nothing(watermark: &Watermark) -> DbBatch {
        DbBatch {
            parsed: Parsed::default(),
            watermark: watermark.clone(),
        }
    }
}

/// How the indexer reads one discovered store.
#[derive(Clone, Copy)]
pub enum Reader {
    /// An append-only JSON-lines file, read incrementally from a byte offset.
    Lines(fn(&Path) -> Box<dyn LineParser>),
    /// A file that is rewritten as a whole (JSON documents, Markdown logs):
    /// re-parsed entirely when it changes.
    Whole(fn(&Path, &[u8]) -> Parsed),
    /// A SQLite database, opened read-only and read from a watermark.
    Database(fn(&Path, &Watermark) -> Result<DbBatch, SourceError>),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reader::Lines(_) => "Lines",
            Reader::Whole(_) => "Whole",
            Reader::Database(_) => "Database",
        })
    }
}

/// One store a source found on disk.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Absolute path of the file or database.
    pub path: PathBuf,
    /// How to read it.
    pub reader: Reader,
    /// Its size and mtime when the walk that found it took them (see
    /// [`common::walk_stores`]); `None` when the source named it without a
    /// walk, and the indexer stats it itself.
    pub stat: Option<Stat>,
}

impl SourceFile {
    /// A store whose size and mtime are not known yet.
    pub fn new(path: PathBuf, reader: Reader) -> SourceFile {
        SourceFile {
            path,
            reader,
            stat: None,
        }
    }
}

/// A file's size and modification time, the two things a pass compares
/// with what it last read to tell whether a store changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the Unix epoch (0 when unknown).
    pub mtime_ns: i64,
}

impl Stat {
    /// The size and mtime in `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        Stat {
            size: meta.len(),
            mtime_ns,
        }
    }
}

/// A store that is on disk but that cairn cannot read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file or folder found.
    pub path: PathBuf,
    /// Why it cannot be read, in a few words ("encrypted by the editor",
    /// "2 entries in a layout cairn does not read: unified/, x.json").
    pub reason: String,
    /// Whether no reader could read it, or this cairn does not know its layout.
    pub kind: UnreadableKind,
    /// The agent's release or schema version that wrote it, when the store says.
    pub release: Option<String>,
}

/// Why a found store is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnreadableKind {
    /// Encrypted, or kept on a server: no release of cairn will read it.
    Closed,
    /// A layout or version this cairn does not know: a newer reader may.
    NotUnderstood,
}

impl Unreadable {
    /// A store no reader can read (encrypted, kept on a server).
    pub fn closed(path: PathBuf, reason: &str) -> Unreadable {
        Unreadable {
            path,
            reason: reason.to_owned(),
            kind: UnreadableKind::Closed,
            release: None,
        }
    }

    /// A store in a layout or version this cairn does not know.
    pub fn not_understood(path: PathBuf, what: String, release: Option<String>) -> Unreadable {
        Unreadable {
            path,
            reason: what,
            kind: UnreadableKind::NotUnderstood,
            release,
        }
    }
}

/// An agent whose history cairn reads.
///
/// Records a reader produces are filed under this source's [`Source::agent`]
/// by the indexer, so a source may reuse another agent's parser (Crush reads
/// with opencode's, omp with pi's).
pub trait Source: Send + Sync {
    /// The stable agent id (`claude-code`, `codex`, ...), used in records and on the CLI.
    fn agent(&self) -> &'static str;
    /// Finds the agent's stores under the given locations. Missing folders are not an error.
    fn discover(&self, loc: &Locations) -> Vec<SourceFile>;
    /// Every folder or file this source looks in, whether or not it exists:
    /// the daemon watches those that exist, and `cairn sources` lists them
    /// as the paths checked. Never a whole home or project tree.
    fn roots(&self, loc: &Locations) -> Vec<PathBuf>;
    /// The environment variables this agent honours for its store's
    /// location; the CLI captures them into [`Locations::vars`].
    fn env_vars(&self) -> &'static [&'static str] {
        &[]
    }
    /// Stores that exist but cannot be read (encrypted, kept on a server).
    /// Stores found but not understood are found by [`layout::unread`],
    /// which adds these.
    fn unreadable(&self, _loc: &Locations) -> Vec<Unreadable> {
        Vec::new()
    }
    /// The folders that hold nothing but this agent's history, each entry
    /// of which some reader should understand: [`layout::not_understood`]
    /// reports those none does. Default: the [`Source::roots`].
    fn history_dirs(&self, loc: &Locations) -> Vec<PathBuf> {
        self.roots(loc)
    }
    /// Names of the agent's own bookkeeping inside its history folders
    /// (not history, never reported as not understood), matched against
    /// each part of a path below a history folder.
    fn not_history(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Every environment variable some source honours, sorted and deduplicated.
pub fn env_vars() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = registry()
        .iter()
        .flat_map(|s| s.env_vars().iter().copied())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The folders and files to watch for new history: every source's roots
/// that exist, sorted and deduplicated.
pub fn watch_roots(loc: &Locations, disabled: &[String]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = registry()
        .iter()
        .filter(|s| !disabled.iter().any(|d| d == s.agent()))
        .flat_map(|s| s.roots(loc))
        .filter(|p| p.exists())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The agent ids of every source not in `disabled`, in display order.
pub fn enabled_agents(disabled: &[String]) -> Vec<&'static str> {
    registry()
        .iter()
        .map(|s| s.agent())
        .filter(|a| !disabled.iter().any(|d| d == a))
        .collect()
}

/// Every source cairn knows, in display order.
pub fn registry() -> Vec<Box<dyn Source>> {
    vec![
        Box::new(claude::ClaudeCode),
        Box::new(codex::Codex),
        Box::new(gemini::Gemini),
        Box::new(aider::Aider),
        Box::new(copilot::Copilot),
        Box::new(opencode::OpenCode),
        Box::new(cursor::Cursor),
        Box::new(pi::Pi),
        Box::new(crush::Crush),
        Box::new(omp::Omp),
        Box::new(openclaw::OpenClaw),
        Box::new(claude_desktop::ClaudeDesktop),
        Box::new(goose::Goose),
        Box::new(qwen::Qwen),
        Box::new(kimi::KimiCode),
        Box::new(kimi_cli::KimiCli),
        Box::new(vscode_tasks::Cline),
        Box::new(vscode_tasks::Roo),
        Box::new(vscode_tasks::Kilo),
        Box::new(continue_dev::Continue),
        Box::new(factory::Factory),
        Box::new(vibe::Vibe),
        Box::new(hermes::Hermes),
        Box::new(openhands::OpenHands),
        Box::new(amp::Amp),
        Box::new(antigravity::Antigravity),
        Box::new(kiro::Kiro),
        Box::new(nanocoder::Nanocoder),
        Box::new(gptme::Gptme),
        Box::new(code_puppy::CodePuppy),
        Box::new(vscode_chat::VsCodeChat),
        Box::new(zed::Zed),
        Box::new(unreadable::Windsurf),
        Box::new(unreadable::Trae),
        Box::new(unreadable::Plandex),
        Box::new(notes::Notes),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_are_unique_and_every_source_names_where_it_looks() {
        let loc = Locations::under_home(Path::new("/h"));
        let mut ids: Vec<&str> = registry().iter().map(|s| s.agent()).collect();
        for s in registry() {
            assert!(!s.roots(&loc).is_empty(), "{} has no roots", s.agent());
            for r in s.roots(&loc) {
                assert_ne!(r, loc.home, "{} watches the whole home", s.agent());
            }
        }
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate agent id");
    }

    #[test]
    fn watch_roots_follow_the_registry_and_env_overrides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = dir.path();
        let goose = h.join("elsewhere/goose");
        std::fs::create_dir_all(goose.join("data/sessions")).expect("mkdir");
        std::fs::create_dir_all(h.join(".omp")).expect("mkdir");
        let mut loc = Locations::under_home(h);
        loc.vars.insert("GOOSE_PATH_ROOT".into(), goose.clone());
        let roots = watch_roots(&loc, &[]);
        assert!(roots.contains(&goose.join("data/sessions")), "{roots:?}");
        assert!(roots.contains(&h.join(".omp")), "{roots:?}");
        assert!(roots.iter().all(|r| r.exists()));
        let roots = watch_roots(&loc, &["omp".to_owned()]);
        assert!(!roots.contains(&h.join(".omp")));
        assert!(env_vars().contains(&"GOOSE_PATH_ROOT"));
    }
}
