//! Agent history sources: where each coding agent keeps its sessions and how
//! to turn them into [`Record`]s.
//!
//! One file per agent. Each implements [`Source`]: it discovers the stores
//! the agent wrote (from [`Locations`], never from the process environment)
//! and says which [`Reader`] reads them. Parsing is pure; tailing, offsets and
//! watermarks belong to `crate::indexer`. Adding an agent is one file plus
//! one line in [`registry`].
//!
//! Sources never write anything and never create files: a missing store is
//! simply not discovered.

pub mod aider;
pub mod claude;
pub mod codex;
pub mod common;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod notes;
pub mod opencode;
pub mod pi;

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
    /// `$AIDER_CHAT_HISTORY_FILE`, if set.
    pub aider_history_file: Option<PathBuf>,
    /// The node's own notes file (written by `cairn remember`).
    pub notes_file: PathBuf,
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
            aider_history_file: None,
            notes_file: xdg_data.join("cairn/notes.jsonl"),
        }
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
}

/// An agent whose history cairn reads.
pub trait Source: Send + Sync {
    /// The stable agent id (`claude-code`, `codex`, ...), used in records and on the CLI.
    fn agent(&self) -> &'static str;
    /// Finds the agent's stores under the given locations. Missing folders are not an error.
    fn discover(&self, loc: &Locations) -> Vec<SourceFile>;
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
        Box::new(notes::Notes),
    ]
}
