//! A [`Node`]: one machine's cairn, built from a resolved [`Config`]. It
//! ties the identity, the store, the redactor and the sources together and
//! is what the CLI (and later the daemon and the MCP server) talk to.

use crate::config::Config;
use crate::identity::{Identity, IdentityError};
use crate::indexer::{self, IndexContext, IndexError, IndexReport, Progress};
use crate::redact::{RedactionCounts, Redactor};
use crate::search::{self, Hit, Query, SearchError, SearchOptions};
use crate::sources::notes;
use crate::store::{Store, StoreError, StoreStats};

/// Failures of node operations.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The identity key could not be loaded or made.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Indexing failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// Searching failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// Writing a note failed.
    #[error("failed to write note to {path}: {source}")]
    Note {
        /// The notes file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A note with no text.
    #[error("a note needs some text")]
    EmptyNote,
}

/// One machine's cairn.
pub struct Node {
    config: Config,
    identity: Identity,
    store: Store,
    redactor: Redactor,
}

impl Node {
    /// Opens the node's database (creating the home, key and database on first run).
    pub fn open(config: Config) -> Result<Node, NodeError> {
        let identity = Identity::load_or_create(&config.identity_path)?;
        let store = Store::open(&config.db_path)?;
        store.upsert_node(identity.id(), &config.node_name)?;
        Ok(Node {
            config,
            identity,
            store,
            redactor: Redactor::new(),
        })
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This node's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The store, for read queries.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs one incremental indexing pass.
    pub fn index(
        &mut self,
        now_ms: i64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<IndexReport, NodeError> {
        self.index_until(now_ms, None, progress)
    }

    /// Runs an indexing pass that stops taking on new work at `deadline`
    /// (newest stores first); what is left is read by the next pass.
    pub fn index_until(
        &mut self,
        now_ms: i64,
        deadline: Option<std::time::Instant>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<IndexReport, NodeError> {
        let ctx = IndexContext {
            locations: &self.config.locations,
            disabled: &self.config.disabled,
            redactor: &self.redactor,
            origin: self.identity.id(),
            now_ms,
            deadline,
        };
        Ok(indexer::index_all(&mut self.store, &ctx, progress)?)
    }

    /// Searches the merged memory.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>, NodeError> {
        Ok(search::search(&self.store, &Query::parse(query), opts)?)
    }

    /// Stores a durable note (redacted first) and indexes it at once.
    /// Returns the kinds of secret that were removed from it.
    pub fn remember(
        &mut self,
        text: &str,
        project: Option<&str>,
        now_ms: i64,
    ) -> Result<RedactionCounts, NodeError> {
        if text.trim().is_empty() {
            return Err(NodeError::EmptyNote);
        }
        let mut counts = RedactionCounts::new();
        let clean = self.redactor.redact(text, &mut counts).into_owned();
        let path = self.config.locations.notes_file.clone();
        notes::append(&path, project, &clean, now_ms)
            .map_err(|source| NodeError::Note { path, source })?;
        // Index just the notes: a note must not wait for a pass over every agent.
        let others: Vec<String> = crate::sources::registry()
            .iter()
            .map(|s| s.agent().to_owned())
            .filter(|a| a != notes::AGENT)
            .collect();
        let ctx = IndexContext {
            locations: &self.config.locations,
            disabled: &others,
            redactor: &self.redactor,
            origin: self.identity.id(),
            now_ms,
            deadline: None,
        };
        indexer::index_all(&mut self.store, &ctx, &mut |_| {})?;
        Ok(counts)
    }

    /// Store totals.
    pub fn stats(&self) -> Result<StoreStats, NodeError> {
        Ok(self.store.stats()?)
    }
}
