//! The peer table: which nodes this node is paired with, and what it knows
//! about them.
//!
//! Owns `peers.db` in the node's home, a small SQLite database of its own:
//! per peer its node id, name, key fingerprint (hex of the blake3 of its
//! SubjectPublicKeyInfo), dial addresses, when it was paired, last seen and
//! last synced, how many records came from it, and its scope (which
//! projects may be sent to it; none = all). The TLS allow-list is derived
//! from it: a removed peer's key is refused from then on.
//!
//! Every change goes through [`PeerTable::modify`], which reads the table
//! and writes it back inside one `BEGIN IMMEDIATE` transaction, so changes
//! made at the same time by the daemon's sessions, `cairn pair`, `cairn
//! unpair` and `cairn scope` (threads or processes) queue up behind each
//! other and none is lost. Each change that alters the table bumps a
//! generation number the daemon polls ([`PeerTable::generation`]).
//!
//! A `peers.json` left by an older cairn is imported once, in the same
//! kind of transaction (a flag in the database makes it once only), and
//! renamed to `peers.json.migrated`.
//!
//! It is a database beside `cairn.db` rather than tables inside it: the
//! peer table is read and changed by processes that never open the node
//! (`cairn status`, `cairn doctor`, the browse page) and by short
//! bookkeeping writes during sync sessions, which must not wait behind
//! an indexing pass's long write transaction; and its schema evolves
//! apart from the record store's migrations.
//!
//! Never opens sockets.

use std::collections::HashSet;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_protocol::{NodeId, SpkiFingerprint};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// File name of the peer table database inside the node's home.
pub const PEERS_DB: &str = "peers.db";
/// File name of the JSON peer table older versions kept (imported once).
pub const PEERS_FILE: &str = "peers.json";
/// What an imported `peers.json` is renamed to.
pub const PEERS_FILE_MIGRATED: &str = "peers.json.migrated";
/// Format version of `peers.json` (and of the database schema).
pub const PEERS_VERSION: u32 = 1;
/// Largest `peers.json` read (a hand-edited or hostile file cannot exhaust memory).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// How long a change waits for another process's change to the table.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Meta key of the change counter.
const GENERATION: &str = "generation";
/// Meta key set once `peers.json` was imported.
const JSON_IMPORTED: &str = "json_imported";
/// Most dial addresses remembered per peer (newest first).
pub const MAX_ADDRESSES: usize = 8;
/// Shortest node id prefix accepted when looking a peer up.
pub const MIN_ID_PREFIX: usize = 4;

/// Failures reading, writing or querying the peer table.
#[derive(Debug, thiserror::Error)]
pub enum PeersError {
    /// Reading or writing a file failed.
    #[error("access peer table {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The peer database could not be opened, read or written.
    #[error("peer table {path}: {source}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is larger than any real peer table.
    #[error("peer table {path} is {len} bytes, more than the {max} allowed")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The cap.
        max: u64,
    },
    /// The file is not valid JSON for a peer table.
    #[error("parse peer table {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What serde said, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A newer format than this build reads.
    #[error(
        "peer table {path} has format version {version}; this cairn reads {PEERS_VERSION} (a newer cairn wrote it)"
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
    },
    /// An entry whose fingerprint is not 64 hex digits or does not give its node id.
    #[error("peer table {path}: entry {index} has an invalid fingerprint")]
    BadEntry {
        /// The file.
        path: PathBuf,
        /// Position of the entry.
        index: usize,
    },
    /// No peer matches.
    #[error("no paired peer matches {query:?}: see `cairn peers`")]
    NotFound {
        /// The name or id prefix given.
        query: String,
    },
    /// More than one peer matches.
    #[error("{query:?} matches {count} peers; give more of the node id")]
    Ambiguous {
        /// The name or id prefix given.
        query: String,
        /// How many matched.
        count: usize,
    },
}

/// One paired peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// Node id: the first 20 bytes of the fingerprint (base32 text, 32
    /// characters, in JSON).
    #[serde(with = "crate::hex::node_id_text")]
    pub node_id: NodeId,
    /// Human name, as the peer announced it.
    pub name: String,
    /// The blake3 fingerprint of the peer's key (64 hex digits in JSON).
    #[serde(with = "crate::hex::fixed32")]
    pub fingerprint: SpkiFingerprint,
    /// Addresses to dial, most recent first.
    #[serde(default)]
    pub addresses: Vec<SocketAddr>,
    /// Host names to dial (`name:port`), resolved each time it is dialed,
    /// so a machine whose address changes is still found by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The address the peer last connected from (may be an ephemeral port).
    #[serde(default)]
    pub last_addr: Option<SocketAddr>,
    /// When the pairing was made (Unix ms).
    pub paired_at_ms: i64,
    /// Last time a connection with it was authenticated (Unix ms).
    #[serde(default)]
    pub last_seen_ms: Option<i64>,
    /// Last time a sync round with it finished (Unix ms).
    #[serde(default)]
    pub last_sync_ms: Option<i64>,
    /// Records received from it, in total.
    #[serde(default)]
    pub records_received: u64,
    /// Projects (path prefixes) whose records may be sent to it; `None` = all.
    #[serde(default)]
    pub scope: Option<Vec<String>>,
}

impl Peer {
    /// A newly paired peer.
    pub fn new(
        fingerprint: &SpkiFingerprint,
        name: &str,
        addresses: Vec<SocketAddr>,
        now_ms: i64,
    ) -> Peer {
        let mut addresses = addresses;
        addresses.truncate(MAX_ADDRESSES);
        Peer {
            node_id: NodeId::from_fingerprint(fingerprint),
            name: name.to_owned(),
            fingerprint: *fingerprint,
            addresses,
            hosts: Vec::new(),
            last_addr: None,
            paired_at_ms: now_ms,
            last_seen_ms: None,
            last_sync_ms: None,
            records_received: 0,
            scope: None,
        }
    }

    /// The key fingerprint (always there: entries are checked when read;
    /// an `Option` for the callers written when it was text).
    pub fn fingerprint_bytes(&self) -> Option<SpkiFingerprint> {
        Some(self.fingerprint)
    }

    /// The node id (always there, like [`Peer::fingerprint_bytes`]).
    pub fn id(&self) -> Option<NodeId> {
        Some(self.node_id)
    }

    /// The short, human-checkable id: `abcd-efgh`.
    pub fn short_id(&self) -> String {
        crate::identity::short_id(&self.node_id.to_string())
    }

    /// Remembers `addr` as the first address to dial (moving it to the front).
    pub fn remember_address(&mut self, addr: SocketAddr) {
        self.addresses.retain(|a| *a != addr);
        self.addresses.insert(0, addr);
        self.addresses.truncate(MAX_ADDRESSES);
    }
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    peers: Vec<Peer>,
}

/// The peer table of one node: a snapshot read from its home's `peers.db`.
#[derive(Debug, Clone)]
pub struct PeerTable {
    path: PathBuf,
    peers: Vec<Peer>,
}

impl PeerTable {
    /// Where the peer table of the node with this home lives.
    pub fn path_in(home: &Path) -> PathBuf {
        home.join(PEERS_DB)
    }

    /// Reads the table in `home` (empty if there is none yet; nothing is
    /// created then). Imports a `peers.json` left by an older cairn first.
    pub fn load(home: &Path) -> Result<PeerTable, PeersError> {
        let path = PeerTable::path_in(home);
        if !path.exists() && !home.join(PEERS_FILE).exists() {
            return Ok(PeerTable {
                path,
                peers: Vec::new(),
            });
        }
        let mut db = Db::open(home)?;
        let tx = db.begin(TransactionBehavior::Deferred)?;
        let peers = read_peers(&tx, &path)?;
        Ok(PeerTable { path, peers })
    }

    /// Reads the table, applies `f` and writes the result back, all in one
    /// write transaction: a change made meanwhile by another thread or
    /// process waits for this one (and this one for it), so none is lost.
    /// Nothing is written when `f` fails or changes nothing.
    pub fn modify<T>(
        home: &Path,
        f: impl FnOnce(&mut PeerTable) -> Result<T, PeersError>,
    ) -> Result<T, PeersError> {
        let path = PeerTable::path_in(home);
        let mut db = Db::open(home)?;
        let tx = db.begin(TransactionBehavior::Immediate)?;
        let before = read_peers(&tx, &path)?;
        let mut t = PeerTable {
            path: path.clone(),
            peers: before.clone(),
        };
        let out = f(&mut t)?;
        if t.peers != before {
            write_peers(&tx, &t.peers).map_err(|e| db_err(&path, e))?;
            bump_generation(&tx).map_err(|e| db_err(&path, e))?;
            tx.commit().map_err(|e| db_err(&path, e))?;
        }
        Ok(out)
    }

    /// A number that changes whenever the table in `home` changes (`None`
    /// while there is no table or it cannot be read). Cheap enough to poll.
    pub fn generation(home: &Path) -> Option<u64> {
        let path = PeerTable::path_in(home);
        if !path.exists() {
            return None;
        }
        let db = Db::open(home).ok()?;
        meta_u64(&db.conn, GENERATION).ok().map(|g| g.unwrap_or(0))
    }

    /// The database this table was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every peer, in pairing order.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// Every peer, for changing in place inside [`PeerTable::modify`].
    pub fn peers_mut(&mut self) -> &mut [Peer] {
        &mut self.peers
    }

    /// Adds a peer, or updates the one with the same key (name, addresses;
    /// its counters and scope are kept). Returns the stored entry.
    pub fn upsert(&mut self, peer: Peer) -> &Peer {
        let pos = match self
            .peers
            .iter()
            .position(|p| p.fingerprint == peer.fingerprint)
        {
            Some(i) => {
                let old = &mut self.peers[i];
                old.name = peer.name;
                for a in peer.addresses.into_iter().rev() {
                    old.remember_address(a);
                }
                if peer.last_addr.is_some() {
                    old.last_addr = peer.last_addr;
                }
                for h in peer.hosts {
                    if !old.hosts.contains(&h) {
                        old.hosts.push(h);
                    }
                }
                old.hosts.truncate(MAX_ADDRESSES);
                i
            }
            None => {
                self.peers.push(peer);
                self.peers.len() - 1
            }
        };
        &self.peers[pos]
    }

    /// The peer with this key.
    pub fn by_fingerprint(&self, fp: &SpkiFingerprint) -> Option<&Peer> {
        self.peers.iter().find(|p| p.fingerprint == *fp)
    }

    /// The peer with this key, for updating.
    pub fn by_fingerprint_mut(&mut self, fp: &SpkiFingerprint) -> Option<&mut Peer> {
        self.peers.iter_mut().find(|p| p.fingerprint == *fp)
    }

    /// The peer with this node id.
    pub fn by_id(&self, id: &NodeId) -> Option<&Peer> {
        self.peers.iter().find(|p| p.node_id == *id)
    }

    /// The one peer whose name is `query` (case-insensitive), or whose node
    /// id starts with `query` (at least 4 characters; a `-` as printed in
    /// the short id is ignored).
    pub fn find(&self, query: &str) -> Result<&Peer, PeersError> {
        let i = self.find_index(query)?;
        Ok(&self.peers[i])
    }

    fn find_index(&self, query: &str) -> Result<usize, PeersError> {
        let q = query.trim();
        let by_name: Vec<usize> = (0..self.peers.len())
            .filter(|&i| self.peers[i].name.eq_ignore_ascii_case(q))
            .collect();
        let matches = if by_name.is_empty() {
            let prefix = q.replace('-', "").to_ascii_lowercase();
            if prefix.len() < MIN_ID_PREFIX {
                Vec::new()
            } else {
                (0..self.peers.len())
                    .filter(|&i| self.peers[i].node_id.to_string().starts_with(&prefix))
                    .collect()
            }
        } else {
            by_name
        };
        match matches.as_slice() {
            [i] => Ok(*i),
            [] => Err(PeersError::NotFound {
                query: q.to_owned(),
            }),
            many => Err(PeersError::Ambiguous {
                query: q.to_owned(),
                count: many.len(),
            }),
        }
    }

    /// Removes (unpairs) the one peer [`PeerTable::find`] gives for `query`.
    pub fn remove(&mut self, query: &str) -> Result<Peer, PeersError> {
        let i = self.find_index(query)?;
        Ok(self.peers.remove(i))
    }

    /// The keys allowed to open sync connections: exactly the paired peers'.
    pub fn allowed_fingerprints(&self) -> HashSet<SpkiFingerprint> {
        self.peers.iter().map(|p| p.fingerprint).collect()
    }

    /// Notes an authenticated connection from `fp` at `addr`. A daemon
    /// dials from its listening socket, so a connection from a port the
    /// peer is known to listen on, at an address not known yet, means the
    /// machine moved: that address becomes the first to dial.
    pub fn record_seen(&mut self, fp: &SpkiFingerprint, addr: SocketAddr, now_ms: i64) {
        if let Some(p) = self.by_fingerprint_mut(fp) {
            p.last_seen_ms = Some(now_ms);
            p.last_addr = Some(addr);
            let listens_there = p.addresses.iter().any(|a| a.port() == addr.port());
            if listens_there && !p.addresses.contains(&addr) {
                p.remember_address(addr);
            }
        }
    }

    /// Notes a finished sync round with `fp` that brought `received` records.
    pub fn record_sync(&mut self, fp: &SpkiFingerprint, received: u64, now_ms: i64) {
        if let Some(p) = self.by_fingerprint_mut(fp) {
            p.last_sync_ms = Some(now_ms);
            p.records_received = p.records_received.saturating_add(received);
        }
    }
}

/// An open `peers.db`, created and migrated as needed.
struct Db {
    conn: Connection,
    path: PathBuf,
}

impl Db {
    /// Opens (creating 0600 if needed) the peer database of `home`, creates
    /// its schema and imports a leftover `peers.json` once.
    fn open(home: &Path) -> Result<Db, PeersError> {
        let path = PeerTable::path_in(home);
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| PeersError::Io { path: p, source }
        };
        crate::home::ensure(home).map_err(io(home))?;
        // Created here, 0600, so SQLite's WAL and shared-memory files
        // (which copy the database file's mode) are private too.
        crate::home::private_file()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        let dberr = |e| db_err(&path, e);
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(dberr)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(dberr)?;
        // Switching to WAL needs a moment without other writers; another
        // process that already switched it makes this a no-op.
        let mut tries = 0;
        loop {
            match conn.pragma_update(None, "journal_mode", "WAL") {
                Ok(()) => break,
                Err(e) if is_busy(&e) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(dberr(e)),
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(dberr)?;
        let mut db = Db { conn, path };
        db.migrate(home)?;
        Ok(db)
    }

    fn begin(&mut self, how: TransactionBehavior) -> Result<rusqlite::Transaction<'_>, PeersError> {
        let path = &self.path;
        self.conn
            .transaction_with_behavior(how)
            .map_err(|e| db_err(path, e))
    }

    /// Creates the schema (once) and imports `peers.json` (once).
    fn migrate(&mut self, home: &Path) -> Result<(), PeersError> {
        let path = self.path.clone();
        let dberr = |e| db_err(&path, e);
        let version: u32 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(dberr)?;
        if version > PEERS_VERSION {
            return Err(PeersError::Version { path, version });
        }
        let legacy = home.join(PEERS_FILE);
        if version == PEERS_VERSION && !legacy.exists() {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(dberr)?;
        // Re-read inside the write transaction: another process may have
        // migrated meanwhile.
        let version: u32 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(dberr)?;
        if version == 0 {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS meta (
                     key   TEXT PRIMARY KEY,
                     value INTEGER NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS peers (
                     pos              INTEGER NOT NULL,
                     fingerprint      TEXT PRIMARY KEY,
                     node_id          TEXT NOT NULL,
                     name             TEXT NOT NULL,
                     addresses        TEXT NOT NULL,
                     hosts            TEXT NOT NULL,
                     last_addr        TEXT,
                     paired_at_ms     INTEGER NOT NULL,
                     last_seen_ms     INTEGER,
                     last_sync_ms     INTEGER,
                     records_received INTEGER NOT NULL,
                     scope            TEXT
                 );",
            )
            .map_err(dberr)?;
            tx.pragma_update(None, "user_version", PEERS_VERSION)
                .map_err(dberr)?;
        }
        let imported = meta_u64(&tx, JSON_IMPORTED).map_err(dberr)?.is_some();
        let mut rename = false;
        if !imported && legacy.exists() {
            let peers = read_json(&legacy)?;
            write_peers(&tx, &peers).map_err(dberr)?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, 1)",
                params![JSON_IMPORTED],
            )
            .map_err(dberr)?;
            bump_generation(&tx).map_err(dberr)?;
            rename = true;
            tracing::info!(peers = peers.len(), "imported peers.json into peers.db");
        }
        tx.commit().map_err(dberr)?;
        if rename {
            let to = home.join(PEERS_FILE_MIGRATED);
            if let Err(e) = std::fs::rename(&legacy, &to) {
                // Harmless: the flag keeps it from being imported again.
                tracing::warn!(error = %e, "could not rename the imported peers.json");
            }
        }
        Ok(())
    }
}

fn db_err(path: &Path, source: rusqlite::Error) -> PeersError {
    PeersError::Db {
        path: path.to_path_buf(),
        source,
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn meta_u64(conn: &Connection, key: &str) -> Result<Option<u64>, rusqlite::Error> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
        r.get::<_, i64>(0)
    })
    .optional()
    .map(|v| v.map(|v| v as u64))
}

fn bump_generation(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, 1)
         ON CONFLICT (key) DO UPDATE SET value = value + 1",
        [GENERATION],
    )
    .map(|_| ())
}

/// Every peer, in pairing order, each checked (its node id must be its
/// fingerprint's).
fn read_peers(conn: &Connection, path: &Path) -> Result<Vec<Peer>, PeersError> {
    let dberr = |e| db_err(path, e);
    let mut stmt = conn
        .prepare(
            "SELECT node_id, name, fingerprint, addresses, hosts, last_addr, paired_at_ms,
                    last_seen_ms, last_sync_ms, records_received, scope
             FROM peers ORDER BY pos",
        )
        .map_err(dberr)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                Peer {
                    node_id: NodeId([0; 20]),
                    name: r.get(1)?,
                    fingerprint: [0; 32],
                    addresses: Vec::new(),
                    hosts: Vec::new(),
                    last_addr: None,
                    paired_at_ms: r.get(6)?,
                    last_seen_ms: r.get(7)?,
                    last_sync_ms: r.get(8)?,
                    records_received: r.get::<_, i64>(9)?.max(0) as u64,
                    scope: None,
                },
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(10)?,
                r.get::<_, String>(0)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(dberr)?;
    let mut out = Vec::new();
    for (index, row) in rows.enumerate() {
        let (mut p, addresses, hosts, last_addr, scope, node_id, fingerprint) =
            row.map_err(dberr)?;
        let bad = || PeersError::BadEntry {
            path: path.to_path_buf(),
            index,
        };
        p.node_id = node_id.parse().map_err(|_| bad())?;
        p.fingerprint = crate::hex::decode32(&fingerprint).ok_or_else(bad)?;
        p.addresses = serde_json::from_str(&addresses).map_err(|_| bad())?;
        p.hosts = serde_json::from_str(&hosts).map_err(|_| bad())?;
        p.last_addr = match last_addr {
            Some(a) => Some(a.parse().map_err(|_| bad())?),
            None => None,
        };
        p.scope = match scope {
            Some(s) => Some(serde_json::from_str(&s).map_err(|_| bad())?),
            None => None,
        };
        if !entry_ok(&p) {
            return Err(bad());
        }
        out.push(p);
    }
    Ok(out)
}

/// Replaces the stored peers with `peers` (inside the caller's transaction).
fn write_peers(conn: &Connection, peers: &[Peer]) -> Result<(), rusqlite::Error> {
    conn.execute("DELETE FROM peers", [])?;
    let mut stmt = conn.prepare(
        "INSERT INTO peers (pos, node_id, name, fingerprint, addresses, hosts, last_addr,
                            paired_at_ms, last_seen_ms, last_sync_ms, records_received, scope)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for (pos, p) in peers.iter().enumerate() {
        stmt.execute(params![
            pos as i64,
            p.node_id.to_string(),
            p.name,
            crate::hex::encode(&p.fingerprint),
            json_list(&p.addresses),
            json_list(&p.hosts),
            p.last_addr.map(|a| a.to_string()),
            p.paired_at_ms,
            p.last_seen_ms,
            p.last_sync_ms,
            i64::try_from(p.records_received).unwrap_or(i64::MAX),
            p.scope.as_deref().map(json_list),
        ])?;
    }
    Ok(())
}

/// JSON text of a list column (lists of strings and addresses always
/// serialize).
fn json_list<T: Serialize>(v: &[T]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".to_owned())
}

fn entry_ok(p: &Peer) -> bool {
    NodeId::from_fingerprint(&p.fingerprint) == p.node_id
}

/// Reads an older cairn's `peers.json` (size-capped, version and entries checked).
fn read_json(path: &Path) -> Result<Vec<Peer>, PeersError> {
    let io = |source| PeersError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(PeersError::TooLarge {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            max: MAX_FILE_BYTES,
        });
    }
    let parsed: File = serde_json::from_slice(&bytes).map_err(|source| PeersError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    if parsed.version != PEERS_VERSION {
        return Err(PeersError::Version {
            path: path.to_path_buf(),
            version: parsed.version,
        });
    }
    for (index, p) in parsed.peers.iter().enumerate() {
        if !entry_ok(p) {
            return Err(PeersError::BadEntry {
                path: path.to_path_buf(),
                index,
            });
        }
    }
    Ok(parsed.peers)
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
