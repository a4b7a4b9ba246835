//! What the command line calls for sync, so its command files only parse
//! arguments, call these and print: one sync round now ([`sync_once`]),
//! pairing ([`invite`], [`join`]), scope ([`set_scope`]), unpairing
//! ([`unpair`]) and the peer list with how far behind each is
//! ([`list_peers`]), and whether each peer answers now ([`probe_peers`]).
//!
//! The "endpoint + hello + shared node" wiring a node needs to run sync
//! sessions outside the daemon lives here once, in [`Station`]; the calls
//! that need a runtime start their own (the CLI is not async).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use cairn_protocol::{Hello, PairingCode};

use super::endpoint::{Endpoint, EndpointError, Role};
use super::pairing::{self, Advertise, HANDSHAKE_TIMEOUT, Inviter, LocalNode, PairError, Paired};
use super::peers::{Peer, PeerTable, PeersError};
use super::session::{
    self, SessionConfig, SessionReport, SharedNode, SyncError, local_hello, new_instance,
};
use super::tls::AllowList;
use super::{DEFAULT_PORT, runtime};
use crate::clock::now_unix;
use crate::config::Config;
use crate::node::Node;
use crate::store::Store;

/// Failures of the façade's calls.
#[derive(Debug, thiserror::Error)]
pub enum FacadeError {
    /// No tokio runtime could be started.
    #[error("start the network runtime")]
    Runtime(#[source] std::io::Error),
    /// The peer table could not be read or changed.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// An endpoint could not be bound.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The node could not describe itself, or a session failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// Pairing failed.
    #[error(transparent)]
    Pair(#[from] PairError),
    /// There is nobody to sync with.
    #[error("no paired machines: run `cairn pair` here and `cairn pair CODE` on the other one")]
    NoPeers,
    /// No peer connected to a [`Station`] in time.
    #[error("no paired machine connected within {0:?}")]
    NoConnection(Duration),
    /// The peer's entry holds a key that does not parse.
    #[error("peer {query:?} has an unreadable key in the peer table")]
    UnreadableKey {
        /// The name or id given.
        query: String,
    },
}

/// How a [`Station`] takes part in sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StationRole {
    /// Only dials (an ephemeral port, no incoming connections).
    Dialer,
    /// Also accepts connections from the keys in the peer table as it is
    /// when bound.
    Listener,
}

/// A node ready to run sync sessions: its endpoint, its `Hello` and the
/// node shared between the sessions. Build and use it inside a tokio
/// runtime.
pub struct Station {
    endpoint: Arc<Endpoint>,
    node: SharedNode,
    home: PathBuf,
    hello: Hello,
    cfg: SessionConfig,
}

impl Station {
    /// Binds `listen` for `node`; `dial_timeout` bounds each handshake.
    pub fn bind(
        node: Node,
        listen: SocketAddr,
        role: StationRole,
        dial_timeout: Duration,
    ) -> Result<Station, FacadeError> {
        let home = node.config().home.clone();
        let hello = local_hello(&node, new_instance())?;
        let role = match role {
            StationRole::Dialer => Role::ClientOnly,
            StationRole::Listener => {
                let allowed = PeerTable::load(&home)?.allowed_fingerprints();
                Role::Sync(AllowList::shared(Arc::new(RwLock::new(allowed))))
            }
        };
        let mut endpoint = Endpoint::bind(listen, node.identity().key(), role)?;
        endpoint.set_handshake_timeout(dial_timeout);
        Ok(Station {
            endpoint: Arc::new(endpoint),
            node: Arc::new(Mutex::new(node)),
            home,
            hello,
            cfg: SessionConfig::default(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.endpoint.local_addr()
    }

    /// The node, shared with the sessions.
    pub fn node(&self) -> &SharedNode {
        &self.node
    }

    /// Dials `peer`, runs one session and notes the outcome in the peer table.
    pub async fn sync_peer(&self, peer: &Peer) -> Result<SessionReport, SyncError> {
        session::sync_peer(
            &self.endpoint,
            &self.node,
            &self.home,
            peer,
            &self.hello,
            &self.cfg,
        )
        .await
    }

    /// Waits (at most `within`) for one paired machine to connect and
    /// answers its session.
    pub async fn serve_one(&self, within: Duration) -> Result<SessionReport, FacadeError> {
        let conn = tokio::time::timeout(within, self.endpoint.accept())
            .await
            .map_err(|_| FacadeError::NoConnection(within))?
            .ok_or(FacadeError::NoConnection(within))??;
        Ok(session::serve_connection(conn, &self.node, &self.home, &self.hello, &self.cfg).await?)
    }

    /// Stops the endpoint; waits up to `linger` so the last frames of
    /// finished sessions reach their peers.
    pub async fn close(&self, linger: Duration) {
        self.endpoint.close();
        if !linger.is_zero() {
            self.endpoint.wait_idle(linger).await;
        }
    }
}

/// What became of one peer in [`sync_once`].
#[derive(Debug)]
pub struct PeerOutcome {
    /// The peer, as the table held it before the round.
    pub peer: Peer,
    /// Its session's report, or why none ran.
    pub result: Result<SessionReport, SyncError>,
}

/// One sync round now with every paired machine, or the one `query` names
/// (name or node id prefix): every peer and every known address is dialed
/// at once, each handshake bounded by `dial_timeout`, so offline peers cost
/// that long, once. Outcomes come back in peer-table order.
pub fn sync_once(
    node: Node,
    query: Option<&str>,
    dial_timeout: Duration,
) -> Result<Vec<PeerOutcome>, FacadeError> {
    let table = PeerTable::load(&node.config().home)?;
    let peers: Vec<Peer> = match query {
        Some(q) => vec![table.find(q)?.clone()],
        None => table.peers().to_vec(),
    };
    if peers.is_empty() {
        return Err(FacadeError::NoPeers);
    }
    let rt = runtime().map_err(FacadeError::Runtime)?;
    let station = {
        let _guard = rt.enter();
        Arc::new(Station::bind(
            node,
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            StationRole::Dialer,
            dial_timeout,
        )?)
    };
    let results = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in peers.iter().cloned().enumerate() {
            let station = Arc::clone(&station);
            set.spawn(async move { (i, station.sync_peer(&p).await) });
        }
        let mut out = Vec::new();
        while let Some(j) = set.join_next().await {
            if let Ok(v) = j {
                out.push(v);
            }
        }
        out.sort_by_key(|(i, _)| *i);
        let any_synced = out.iter().any(|(_, r)| r.is_ok());
        // Let the last frames of finished sessions reach their peers.
        let linger = if any_synced {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        station.close(linger).await;
        out
    });
    Ok(results
        .into_iter()
        .filter_map(|(i, result)| {
            peers.get(i).map(|p| PeerOutcome {
                peer: p.clone(),
                result,
            })
        })
        .collect())
}

/// Whether each of `peers` answers a handshake now, all at once, each bounded
/// by `timeout`: the address that answered, or why none did. No session runs
/// (what `cairn doctor` asks). Results come back in the order given.
pub fn probe_peers(
    node: &Node,
    peers: &[Peer],
    timeout: Duration,
) -> Result<Vec<Result<SocketAddr, SyncError>>, FacadeError> {
    let rt = runtime().map_err(FacadeError::Runtime)?;
    let endpoint = {
        let _guard = rt.enter();
        let mut e = Endpoint::bind(
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            node.identity().key(),
            Role::ClientOnly,
        )?;
        e.set_handshake_timeout(timeout);
        Arc::new(e)
    };
    let mut results = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in peers.iter().cloned().enumerate() {
            let endpoint = Arc::clone(&endpoint);
            set.spawn(async move { (i, session::probe(&endpoint, &p).await) });
        }
        let mut out = Vec::new();
        while let Some(j) = set.join_next().await {
            if let Ok(v) = j {
                out.push(v);
            }
        }
        out
    });
    endpoint.close();
    results.sort_by_key(|(i, _)| *i);
    Ok(results.into_iter().map(|(_, r)| r).collect())
}

/// An open pairing window: the code to show, then [`Invitation::wait`].
pub struct Invitation {
    // Dropped before the runtime it was bound in.
    inviter: Inviter,
    rt: tokio::runtime::Runtime,
}

impl Invitation {
    /// The one-time code.
    pub fn code(&self) -> &PairingCode {
        self.inviter.code()
    }

    /// What the code dials: host names first, then addresses.
    pub fn dials(&self) -> Vec<String> {
        let code = self.inviter.code();
        code.hosts()
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .chain(code.addrs().iter().map(ToString::to_string))
            .collect()
    }

    /// Where the pairing endpoint listens.
    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.inviter.local_addr()
    }

    /// Waits for one successful pairing, the expiry, or too many failed
    /// proofs; the window closes either way.
    pub fn wait(self) -> Result<Paired, FacadeError> {
        let Invitation { inviter, rt } = self;
        Ok(rt.block_on(inviter.run())?)
    }
}

/// Opens a pairing window of `window` for `node` on `listen`, or by
/// default on the serve port (any free port if a daemon holds it); the
/// code names `advertise` (else the bound address).
pub fn invite(
    node: &Node,
    serve_port: Option<u16>,
    listen: Option<SocketAddr>,
    advertise: &[Advertise],
    window: Duration,
) -> Result<Invitation, FacadeError> {
    let rt = runtime().map_err(FacadeError::Runtime)?;
    let local = LocalNode::of(node, serve_port);
    let now = now_unix();
    let inviter = {
        let _guard = rt.enter();
        match listen {
            Some(listen) => Inviter::open(local, listen, advertise, window, now)?,
            None => {
                let fixed = SocketAddr::from((Ipv4Addr::UNSPECIFIED, DEFAULT_PORT));
                match Inviter::open(local, fixed, advertise, window, now) {
                    Err(PairError::Endpoint(EndpointError::Bind { .. })) => {
                        let any = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
                        Inviter::open(local, any, advertise, window, now)?
                    }
                    other => other?,
                }
            }
        }
    };
    Ok(Invitation { inviter, rt })
}

/// Pairs `node` with the machine that made `code`.
pub fn join(node: &Node, serve_port: Option<u16>, code: &str) -> Result<Paired, FacadeError> {
    let rt = runtime().map_err(FacadeError::Runtime)?;
    Ok(rt.block_on(pairing::join(
        LocalNode::of(node, serve_port),
        code,
        now_unix(),
        HANDSHAKE_TIMEOUT,
    ))?)
}

/// Sets which projects (path prefixes; `None` = all) the peer `query`
/// names may receive. Returns the updated entry.
pub fn set_scope(
    home: &Path,
    query: &str,
    scope: Option<Vec<String>>,
) -> Result<Peer, FacadeError> {
    PeerTable::modify(home, |t| {
        let Some(fp) = t.find(query)?.fingerprint_bytes() else {
            return Ok(None);
        };
        Ok(t.by_fingerprint_mut(&fp).map(|p| {
            p.scope = scope;
            p.clone()
        }))
    })?
    .ok_or_else(|| FacadeError::UnreadableKey {
        query: query.to_owned(),
    })
}

/// Unpairs the peer `query` names; its key is refused from then on.
pub fn unpair(home: &Path, query: &str) -> Result<Peer, PeersError> {
    PeerTable::modify(home, |t| t.remove(query))
}

/// A paired machine and how far behind this node was after the last
/// session with it.
#[derive(Debug, Clone)]
pub struct PeerStatus {
    /// The peer-table entry.
    pub peer: Peer,
    /// Entries it held that this node still lacked (`None` before the first
    /// session, or without a database).
    pub behind: Option<u64>,
    /// What this node refused from it, and what limited the last session.
    pub trust: Option<session::TrustNote>,
}

/// Every paired machine, in pairing order; never writes (the database is
/// opened read-only, and only if it exists).
pub fn list_peers(config: &Config) -> Result<Vec<PeerStatus>, PeersError> {
    let table = PeerTable::load(&config.home)?;
    let store = Store::open_read_only(&config.db_path).ok();
    Ok(table
        .peers()
        .iter()
        .map(|p| PeerStatus {
            behind: store
                .as_ref()
                .and_then(|s| session::behind(s, &p.node_id.to_string())),
            trust: store
                .as_ref()
                .and_then(|s| session::trust_note(s, &p.node_id.to_string())),
            peer: p.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Env;

    fn node_in(dir: &Path, name: &str) -> Node {
        let env = Env {
            home: Some(dir.to_path_buf()),
            hostname: Some(name.to_owned()),
            ..Env::default()
        };
        Node::open(Config::resolve(&env, None).expect("config")).expect("open node")
    }

    #[test]
    fn pair_scope_sync_and_unpair_through_the_facade() {
        let (da, db) = (
            tempfile::tempdir().expect("tempdir"),
            tempfile::tempdir().expect("tempdir"),
        );
        let (mut a, b) = (node_in(da.path(), "alpha"), node_in(db.path(), "beta"));
        let (a_home, b_home) = (a.config().home.clone(), b.config().home.clone());
        a.remember("we chose the marmot protocol", None, 1_700_000_000_000)
            .expect("note");

        // Pair over loopback: the window waits on its own thread.
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let inv = invite(&a, None, Some(loopback), &[], Duration::from_secs(30)).expect("invite");
        let code = inv.code().encode();
        assert_eq!(inv.dials().len(), 1);
        let waiter = std::thread::spawn(move || inv.wait());
        let joined = join(&b, None, &code).expect("join");
        let invited = waiter.join().expect("thread").expect("invited");
        assert_eq!(joined.peer.name, "alpha");
        assert_eq!(invited.peer.name, "beta");

        // Scope, then a sync round: beta dials alpha's station.
        let scoped = set_scope(&a_home, "beta", Some(vec!["/nowhere".into()])).expect("scope");
        assert_eq!(scoped.scope, Some(vec!["/nowhere".to_owned()]));
        let scoped = set_scope(&a_home, "beta", None).expect("scope all");
        assert_eq!(scoped.scope, None);
        assert!(matches!(
            set_scope(&a_home, "nobody", None),
            Err(FacadeError::Peers(PeersError::NotFound { .. }))
        ));

        let rt = runtime().expect("runtime");
        let report = rt.block_on(async {
            let station = Station::bind(a, loopback, StationRole::Listener, Duration::from_secs(5))
                .expect("bind");
            let addr = station.local_addr().expect("addr");
            PeerTable::modify(&b_home, |t| {
                for p in t.peers_mut() {
                    p.addresses = vec![addr];
                }
                Ok(())
            })
            .expect("point beta at alpha's station");
            let (served, synced) = tokio::join!(
                station.serve_one(Duration::from_secs(10)),
                tokio::task::spawn_blocking(move || sync_once(b, None, Duration::from_secs(5)))
            );
            served.expect("served");
            station.close(Duration::ZERO).await;
            synced.expect("task").expect("sync once")
        });
        assert_eq!(report.len(), 1);
        let got = report[0].result.as_ref().expect("synced");
        assert!(got.records_received >= 1, "{got:?}");
        let cfg_b = node_in(db.path(), "beta").config().clone();
        let listed = list_peers(&cfg_b).expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].behind, Some(0));
        assert!(listed[0].peer.last_sync_ms.is_some());

        let gone = unpair(&b_home, "alpha").expect("unpair");
        assert_eq!(gone.name, "alpha");
        assert!(list_peers(&cfg_b).expect("list").is_empty());
        let b = node_in(db.path(), "beta");
        assert!(matches!(
            sync_once(b, None, Duration::from_secs(1)),
            Err(FacadeError::NoPeers)
        ));
    }
}
