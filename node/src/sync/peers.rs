//! The peer table: which nodes this node is paired with, and what it knows
//! about them.
//!
//! Owns `peers.json` in the node's home: per peer its node id, name, key
//! fingerprint (hex of the blake3 of its SubjectPublicKeyInfo), dial
//! addresses, when it was paired, last seen and last synced, how many
//! records came from it, and its scope (which projects may be sent to it;
//! none = all). The file is written atomically (temp file, fsync, rename)
//! with mode 0600 and read with a size cap. The TLS allow-list is derived
//! from it: a removed peer's key is refused from then on.
//!
//! Never opens sockets or the database.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cairn_protocol::{NodeId, SpkiFingerprint};
use serde::{Deserialize, Serialize};

/// File name of the peer table inside the node's home.
pub const PEERS_FILE: &str = "peers.json";
/// Format version written into the file.
pub const PEERS_VERSION: u32 = 1;
/// Largest peer table read (a hand-edited or hostile file cannot exhaust memory).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Most dial addresses remembered per peer (newest first).
pub const MAX_ADDRESSES: usize = 8;
/// Shortest node id prefix accepted when looking a peer up.
pub const MIN_ID_PREFIX: usize = 4;

/// Failures reading, writing or querying the peer table.
#[derive(Debug, thiserror::Error)]
pub enum PeersError {
    /// Reading or writing the file failed.
    #[error("access peer table {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
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
    #[error("peer table {path} has format version {version}; this cairn reads {PEERS_VERSION}")]
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
    /// Node id (base32, 32 characters): the first 20 bytes of the fingerprint.
    pub node_id: String,
    /// Human name, as the peer announced it.
    pub name: String,
    /// Hex of the blake3 fingerprint of the peer's key (64 characters).
    pub fingerprint: String,
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
            node_id: NodeId::from_fingerprint(fingerprint).to_string(),
            name: name.to_owned(),
            fingerprint: hex(fingerprint),
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

    /// The key fingerprint as bytes (`None` if the entry is malformed).
    pub fn fingerprint_bytes(&self) -> Option<SpkiFingerprint> {
        unhex(&self.fingerprint)
    }

    /// The node id as the wire type (`None` if malformed).
    pub fn id(&self) -> Option<NodeId> {
        self.node_id.parse().ok()
    }

    /// The short, human-checkable id: `abcd-efgh`.
    pub fn short_id(&self) -> String {
        crate::identity::short_id(&self.node_id)
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

/// The peer table of one node, loaded from and saved to its home.
#[derive(Debug, Clone)]
pub struct PeerTable {
    path: PathBuf,
    peers: Vec<Peer>,
}

impl PeerTable {
    /// Where the peer table of the node with this home lives.
    pub fn path_in(home: &Path) -> PathBuf {
        home.join(PEERS_FILE)
    }

    /// Loads the table in `home` (empty if there is no file yet).
    pub fn load(home: &Path) -> Result<PeerTable, PeersError> {
        let path = PeerTable::path_in(home);
        let io = |source| PeersError::Io {
            path: path.clone(),
            source,
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(PeerTable {
                    path,
                    peers: Vec::new(),
                });
            }
            Err(e) => return Err(io(e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(PeersError::TooLarge {
                path,
                len: bytes.len() as u64,
                max: MAX_FILE_BYTES,
            });
        }
        let parsed: File = serde_json::from_slice(&bytes).map_err(|source| PeersError::Parse {
            path: path.clone(),
            source,
        })?;
        if parsed.version != PEERS_VERSION {
            return Err(PeersError::Version {
                path,
                version: parsed.version,
            });
        }
        for (index, p) in parsed.peers.iter().enumerate() {
            let ok = p
                .fingerprint_bytes()
                .is_some_and(|fp| NodeId::from_fingerprint(&fp).to_string() == p.node_id);
            if !ok {
                return Err(PeersError::BadEntry { path, index });
            }
        }
        Ok(PeerTable {
            path,
            peers: parsed.peers,
        })
    }

    /// Loads the table, applies `f`, saves it, and returns what `f` returned.
    pub fn modify<T>(
        home: &Path,
        f: impl FnOnce(&mut PeerTable) -> Result<T, PeersError>,
    ) -> Result<T, PeersError> {
        let mut t = PeerTable::load(home)?;
        let out = f(&mut t)?;
        t.save()?;
        Ok(out)
    }

    /// Writes the table atomically: a 0600 temp file beside it, fsync, rename.
    pub fn save(&self) -> Result<(), PeersError> {
        let io = |source| PeersError::Io {
            path: self.path.clone(),
            source,
        };
        let file = File {
            version: PEERS_VERSION,
            peers: self.peers.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&file).map_err(|source| PeersError::Parse {
            path: self.path.clone(),
            source,
        })?;
        json.push(b'\n');
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!(".{PEERS_FILE}.{}.tmp", std::process::id()));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let write = (|| {
            let mut f = opts.open(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            // Make the rename itself durable.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if write.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        write.map_err(io)
    }

    /// The file this table is saved to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every peer, in pairing order.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
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
        let h = hex(fp);
        self.peers.iter().find(|p| p.fingerprint == h)
    }

    /// The peer with this key, for updating.
    pub fn by_fingerprint_mut(&mut self, fp: &SpkiFingerprint) -> Option<&mut Peer> {
        let h = hex(fp);
        self.peers.iter_mut().find(|p| p.fingerprint == h)
    }

    /// The peer with this node id.
    pub fn by_id(&self, id: &NodeId) -> Option<&Peer> {
        let s = id.to_string();
        self.peers.iter().find(|p| p.node_id == s)
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
                    .filter(|&i| self.peers[i].node_id.starts_with(&prefix))
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
        self.peers
            .iter()
            .filter_map(Peer::fingerprint_bytes)
            .collect()
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

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Parses 64 hex digits into a fingerprint.
pub fn unhex(s: &str) -> Option<SpkiFingerprint> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nib = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nib(b[2 * i])? << 4) | nib(b[2 * i + 1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(n: u8) -> SpkiFingerprint {
        cairn_protocol::spki_fingerprint(&[n; 10])
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn hex_round_trip() {
        let f = fp(1);
        assert_eq!(unhex(&hex(&f)), Some(f));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"g".repeat(64)), None);
    }

    #[test]
    fn missing_file_is_an_empty_table_and_save_load_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load empty");
        assert!(t.peers().is_empty());
        t.upsert(Peer::new(
            &fp(1),
            "laptop",
            vec![addr("10.0.0.2:7878")],
            1000,
        ));
        t.upsert(Peer::new(&fp(2), "desktop", vec![], 2000));
        t.record_seen(&fp(1), addr("10.0.0.9:5000"), 3000);
        t.record_sync(&fp(1), 42, 3500);
        t.save().expect("save");
        let back = PeerTable::load(dir.path()).expect("load");
        assert_eq!(back.peers(), t.peers());
        let laptop = back.by_fingerprint(&fp(1)).expect("laptop");
        assert_eq!(laptop.records_received, 42);
        assert_eq!(laptop.last_seen_ms, Some(3000));
        assert_eq!(laptop.last_sync_ms, Some(3500));
        assert_eq!(laptop.last_addr, Some(addr("10.0.0.9:5000")));
        assert_eq!(laptop.id(), Some(NodeId::from_fingerprint(&fp(1))));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(back.path())
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // No temp file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(PEERS_FILE)]);
    }

    #[test]
    fn a_connection_from_a_new_address_on_the_listening_port_is_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load");
        t.upsert(Peer::new(&fp(1), "laptop", vec![addr("10.0.0.2:7878")], 1));
        // A one-off `cairn sync` from an ephemeral port: only last_addr.
        t.record_seen(&fp(1), addr("10.0.0.2:40001"), 2);
        assert_eq!(t.peers()[0].addresses, vec![addr("10.0.0.2:7878")]);
        assert_eq!(t.peers()[0].last_addr, Some(addr("10.0.0.2:40001")));
        // Its daemon, now on another network, dials from its listening port.
        t.record_seen(&fp(1), addr("192.168.7.5:7878"), 3);
        assert_eq!(
            t.peers()[0].addresses,
            vec![addr("192.168.7.5:7878"), addr("10.0.0.2:7878")]
        );
    }

    #[test]
    fn host_names_survive_a_round_trip_and_merge_on_upsert() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load");
        let mut hub = Peer::new(&fp(3), "hub", vec![], 1);
        hub.hosts = vec!["hub.example.net:7878".to_owned()];
        t.upsert(hub.clone());
        hub.hosts = vec!["hub.example.net:7878".to_owned(), "hub.lan:7878".to_owned()];
        t.upsert(hub);
        t.save().expect("save");
        let back = PeerTable::load(dir.path()).expect("load");
        assert_eq!(
            back.peers()[0].hosts,
            ["hub.example.net:7878", "hub.lan:7878"]
        );
    }

    #[test]
    fn upsert_updates_the_same_key_and_keeps_counters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load");
        t.upsert(Peer::new(&fp(1), "old", vec![addr("10.0.0.2:7878")], 1));
        t.record_sync(&fp(1), 5, 2);
        t.upsert(Peer::new(&fp(1), "new", vec![addr("10.0.0.3:7878")], 9));
        assert_eq!(t.peers().len(), 1);
        let p = &t.peers()[0];
        assert_eq!(p.name, "new");
        assert_eq!(p.paired_at_ms, 1);
        assert_eq!(p.records_received, 5);
        assert_eq!(
            p.addresses,
            vec![addr("10.0.0.3:7878"), addr("10.0.0.2:7878")]
        );
    }

    #[test]
    fn find_by_name_or_id_prefix_and_unpair_removes_from_allow_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load");
        t.upsert(Peer::new(&fp(1), "laptop", vec![], 1));
        t.upsert(Peer::new(&fp(2), "desktop", vec![], 1));
        let id = t.peers()[1].node_id.clone();
        assert_eq!(t.find("LAPTOP").expect("by name").name, "laptop");
        assert_eq!(t.find(&id[..6]).expect("by prefix").name, "desktop");
        let short = t.peers()[1].short_id();
        assert_eq!(t.find(&short).expect("by short id").name, "desktop");
        assert!(matches!(t.find("ab"), Err(PeersError::NotFound { .. })));
        assert!(matches!(t.find("nobody"), Err(PeersError::NotFound { .. })));
        assert!(t.allowed_fingerprints().contains(&fp(1)));
        let gone = t.remove("laptop").expect("remove");
        assert_eq!(gone.name, "laptop");
        assert_eq!(t.allowed_fingerprints(), HashSet::from([fp(2)]));
        t.save().expect("save");
        let back = PeerTable::load(dir.path()).expect("load");
        assert!(!back.allowed_fingerprints().contains(&fp(1)));
    }

    #[test]
    fn ambiguous_name_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = PeerTable::load(dir.path()).expect("load");
        t.upsert(Peer::new(&fp(1), "box", vec![], 1));
        t.upsert(Peer::new(&fp(2), "box", vec![], 1));
        assert!(matches!(
            t.remove("box"),
            Err(PeersError::Ambiguous { count: 2, .. })
        ));
        assert_eq!(t.peers().len(), 2);
    }

    #[test]
    fn corrupt_or_tampered_files_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = PeerTable::path_in(dir.path());
        std::fs::write(&path, "{not json").expect("write");
        assert!(matches!(
            PeerTable::load(dir.path()),
            Err(PeersError::Parse { .. })
        ));
        std::fs::write(&path, r#"{"version": 99, "peers": []}"#).expect("write");
        assert!(matches!(
            PeerTable::load(dir.path()),
            Err(PeersError::Version { version: 99, .. })
        ));
        // A node id that does not belong to the fingerprint.
        let mut p = Peer::new(&fp(1), "x", vec![], 1);
        p.node_id = NodeId::from_fingerprint(&fp(2)).to_string();
        let file = serde_json::json!({"version": 1, "peers": [p]});
        std::fs::write(&path, file.to_string()).expect("write");
        assert!(matches!(
            PeerTable::load(dir.path()),
            Err(PeersError::BadEntry { index: 0, .. })
        ));
        let big = vec![b' '; (MAX_FILE_BYTES + 10) as usize];
        std::fs::write(&path, big).expect("write");
        assert!(matches!(
            PeerTable::load(dir.path()),
            Err(PeersError::TooLarge { .. })
        ));
    }
}
