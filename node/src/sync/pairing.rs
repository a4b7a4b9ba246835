//! Pairing two nodes from the command line: `cairn pair` on machine A
//! (the inviter) and `cairn pair <code>` on machine B (the joiner).
//!
//! Owns the pairing window and both sides of the exchange on ALPN
//! `cairn-pair/1`. The inviter binds an endpoint that accepts any client
//! key, prints a one-time code (addresses to dial, its key fingerprint, a
//! fresh 20-byte secret, an expiry) and waits for one successful pairing,
//! the expiry, or [`MAX_FAILED_ATTEMPTS`] failed proofs, whichever comes
//! first; then it stops listening, so a code works once. The joiner pins
//! the inviter's key from the code in TLS, sends `PairRequest` with a proof
//! over a transcript binding both keys and this connection's TLS exporter,
//! checks the inviter's `PairAccept` proof the same way, stores the
//! inviter and sends `Bye`; the inviter stores the joiner only after that.
//! The threat model is in `cairn_protocol::pairing`: without the code a
//! man in the middle can neither pose as A (B pins A's key) nor as B (A
//! needs the secret proof bound to B's key and to this TLS session).
//!
//! Never logs the code or the secret. Reads the clock only through the
//! `now` arguments and the tokio timer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_protocol::pairing::{Transcript, pair_accept, pair_request, verify_pair_accept};
use cairn_protocol::{
    ALPN_PAIR, FrameDecoder, Message, NodeId, PairingCode, RefuseCode, SpkiFingerprint,
};

pub use super::endpoint::HANDSHAKE_TIMEOUT;
use super::endpoint::{
    Endpoint, EndpointError, PeerConnection, Role, SessionError, recv_msg, refuse, send_msg,
};
use super::peers::{Peer, PeerTable, PeersError};
use super::{DEFAULT_PORT, clean_name};
use crate::clock::now_ms;

/// How long a code stays valid unless `--timeout` says otherwise.
pub const DEFAULT_PAIR_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Failed proofs after which the window closes (the code is burnt).
pub const MAX_FAILED_ATTEMPTS: u32 = 3;
/// Bytes of one-time secret in a code (160 bits).
pub const SECRET_LEN: usize = 20;
/// Time allowed for each message of the pairing exchange.
pub const MSG_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest frame accepted on the pairing ALPN.
const MAX_PAIR_FRAME: usize = 16 * 1024;
/// TLS exporter label the pairing proofs bind (see `cairn_protocol::pairing::Transcript`).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-cairn-pair";

/// What pairing needs to know about this node.
#[derive(Debug, Clone, Copy)]
pub struct LocalNode<'a> {
    /// The identity key (the TLS key).
    pub key: &'a rcgen::KeyPair,
    /// This node's human name, sent to the peer.
    pub name: &'a str,
    /// The node's home, where the peer table (`peers.db`) lives.
    pub home: &'a Path,
    /// The port this node's running `cairn serve` listens on, told to the
    /// other side so it can dial back once the pairing port is closed.
    pub serve_port: Option<u16>,
}

impl<'a> LocalNode<'a> {
    /// The pairing view of an open node whose running `cairn serve`, if
    /// any, listens on `serve_port` (see `crate::daemon::running_state`).
    pub fn of(node: &'a crate::node::Node, serve_port: Option<u16>) -> LocalNode<'a> {
        LocalNode {
            key: node.identity().key(),
            name: &node.config().node_name,
            home: &node.config().home,
            serve_port,
        }
    }
}

/// Failures of pairing, on either side.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// The code is malformed, expired, or a proof did not verify.
    #[error(transparent)]
    Code(#[from] cairn_protocol::PairingError),
    /// Binding, dialing or the TLS handshake failed.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The exchange broke off (timeout, bad frame, connection lost).
    #[error("pairing exchange failed")]
    Session(#[from] SessionError),
    /// The peer table could not be read or written.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// No random secret could be drawn from the OS.
    #[error("draw a random pairing secret")]
    Random(#[source] getrandom::Error),
    /// The TLS exporter could not produce keying material.
    #[error("derive the channel binding from the tls session")]
    ChannelBinding,
    /// The other side refused and said why.
    #[error("the other machine refused: {reason}")]
    Refused {
        /// Its code.
        code: RefuseCode,
        /// Its explanation.
        reason: String,
    },
    /// None of the code's addresses answered with the right key.
    #[error("could not reach the inviting machine at any of {addrs} address(es)")]
    Unreachable {
        /// How many addresses were tried.
        addrs: usize,
        /// The last failure.
        #[source]
        last: EndpointError,
    },
    /// The code belongs to this very node.
    #[error("this code was made by this machine; run `cairn pair <code>` on the other one")]
    SelfPairing,
    /// The window ended without a successful pairing.
    #[error("no machine paired within {after:?}; run `cairn pair` again")]
    TimedOut {
        /// The window's length.
        after: Duration,
    },
    /// Too many wrong codes were tried: the code is burnt.
    #[error(
        "{failures} failed pairing attempts: the code is no longer valid; run `cairn pair` again"
    )]
    TooManyFailures {
        /// How many attempts failed.
        failures: u32,
    },
}

/// A pairing that was made: the peer as stored in this node's table.
#[derive(Debug, Clone)]
pub struct Paired {
    /// The stored entry.
    pub peer: Peer,
    /// The address the exchange ran over (the peer's side).
    pub remote: SocketAddr,
}

/// The inviting side: a bound pairing endpoint and its one-time code.
#[derive(Debug)]
pub struct Inviter {
    endpoint: Endpoint,
    code: PairingCode,
    name: String,
    home: PathBuf,
    fingerprint: SpkiFingerprint,
    ttl: Duration,
    serve_port: Option<u16>,
}

/// An address to put in a pairing code: an IP address, or a host name the
/// joiner resolves when it dials (port 0 = the bound port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advertise {
    /// `203.0.113.7:7879`, `[2001:db8::1]:7879`.
    Addr(SocketAddr),
    /// `hub.example.net:7879`.
    Host(String, u16),
}

impl std::str::FromStr for Advertise {
    type Err = String;

    /// `IP:PORT`, `[IPv6]:PORT` or `HOST:PORT`.
    fn from_str(s: &str) -> Result<Advertise, String> {
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(Advertise::Addr(a));
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} needs a port: HOST:PORT or IP:PORT"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s:?}: {port:?} is not a port number"))?;
        cairn_protocol::pairing::check_host(host).map_err(|e| e.to_string())?;
        Ok(Advertise::Host(host.to_owned(), port))
    }
}

impl Inviter {
    /// Binds `listen` for pairing and makes a code valid for `ttl` from
    /// `now_unix`. The code's addresses are `advertise` (host names first;
    /// a port of 0 means the bound port) or, when empty, the bound address; an unspecified
    /// bind (`0.0.0.0`, `[::]`) is replaced by this machine's primary
    /// address as the routing table gives it, else loopback.
    /// Must be called inside a tokio runtime.
    pub fn open(
        local: LocalNode<'_>,
        listen: SocketAddr,
        advertise: &[Advertise],
        ttl: Duration,
        now_unix: u64,
    ) -> Result<Inviter, PairError> {
        let endpoint = Endpoint::bind(listen, local.key, Role::Pairing)?;
        let bound = endpoint
            .local_addr()
            .map_err(|source| EndpointError::Bind {
                addr: listen,
                source,
            })?;
        let ips: Vec<SocketAddr> = advertise
            .iter()
            .filter_map(|a| match a {
                Advertise::Addr(a) => Some(*a),
                Advertise::Host(..) => None,
            })
            .collect();
        let hosts: Vec<(String, u16)> = advertise
            .iter()
            .filter_map(|a| match a {
                Advertise::Host(h, 0) => Some((h.clone(), bound.port())),
                Advertise::Host(h, p) => Some((h.clone(), *p)),
                Advertise::Addr(_) => None,
            })
            .take(cairn_protocol::MAX_PAIR_ADDRS)
            .collect();
        // Names alone are where to dial; otherwise the usual addresses.
        let addrs = if ips.is_empty() && !hosts.is_empty() {
            Vec::new()
        } else {
            let mut v = advertise_addrs(bound, &ips);
            v.truncate(cairn_protocol::MAX_PAIR_ADDRS - hosts.len());
            v
        };
        let mut secret = [0u8; SECRET_LEN];
        getrandom::fill(&mut secret).map_err(PairError::Random)?;
        let code = PairingCode::with_hosts(
            addrs,
            hosts,
            endpoint.fingerprint(),
            &secret,
            now_unix.saturating_add(ttl.as_secs()),
        )?;
        tracing::info!(listen = %bound, expires_unix = code.expires_unix(), "pairing window open");
        Ok(Inviter {
            fingerprint: endpoint.fingerprint(),
            endpoint,
            code,
            name: local.name.to_owned(),
            home: local.home.to_path_buf(),
            ttl,
            serve_port: local.serve_port,
        })
    }

    /// The code to show the user (`code().encode()` is the one-line text).
    pub fn code(&self) -> &PairingCode {
        &self.code
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.endpoint.local_addr()
    }

    /// Waits for one successful pairing, the end of the window, or too many
    /// failed attempts; then stops listening (the code is spent either way).
    pub async fn run(self) -> Result<Paired, PairError> {
        let deadline = tokio::time::Instant::now() + self.ttl;
        let mut failures = 0u32;
        // Bounded: every iteration either returns, counts a failure (at most
        // MAX_FAILED_ATTEMPTS) or consumes a connection attempt before the deadline.
        let result = loop {
            let incoming = match tokio::time::timeout_at(deadline, self.endpoint.accept()).await {
                Err(_) | Ok(None) => break Err(PairError::TimedOut { after: self.ttl }),
                Ok(Some(Err(e))) => {
                    tracing::debug!(error = %e, "pairing handshake failed");
                    continue;
                }
                Ok(Some(Ok(conn))) => conn,
            };
            match tokio::time::timeout_at(deadline, self.attempt(&incoming)).await {
                Err(_) => break Err(PairError::TimedOut { after: self.ttl }),
                Ok(Ok(paired)) => break Ok(paired),
                Ok(Err(Attempt::Failed(e))) => {
                    failures += 1;
                    tracing::warn!(peer = %incoming.peer_id(), remote = %incoming.remote_address(), failures, error = %e, "pairing attempt failed");
                    incoming.close(3, b"pairing failed");
                    if failures >= MAX_FAILED_ATTEMPTS {
                        break Err(PairError::TooManyFailures { failures });
                    }
                }
                Ok(Err(Attempt::Broken(e))) => {
                    tracing::debug!(error = %e, "pairing attempt broke off");
                    incoming.close(3, b"pairing failed");
                }
                Ok(Err(Attempt::Fatal(e))) => break Err(e),
            }
        };
        self.endpoint.close();
        self.endpoint.wait_idle(Duration::from_secs(2)).await;
        result
    }

    async fn attempt(&self, conn: &PeerConnection) -> Result<Paired, Attempt> {
        let (mut send, mut recv) =
            match tokio::time::timeout(MSG_TIMEOUT, conn.quinn().accept_bi()).await {
                Err(_) => {
                    return Err(Attempt::Broken(
                        SessionError::Timeout { after: MSG_TIMEOUT }.into(),
                    ));
                }
                Ok(r) => r.map_err(|e| Attempt::Broken(SessionError::Stream(e).into()))?,
            };
        let mut dec = FrameDecoder::with_max(MAX_PAIR_FRAME);
        let req = match recv_msg(&mut recv, &mut dec, MSG_TIMEOUT).await {
            Ok(Message::PairRequest(r)) => r,
            Ok(other) => {
                refuse(
                    &mut send,
                    RefuseCode::ProtocolViolation,
                    "expected a pairing request",
                )
                .await;
                return Err(Attempt::Failed(
                    SessionError::Unexpected {
                        expected: "pair_request",
                        got: other.name(),
                    }
                    .into(),
                ));
            }
            Err(e) => return Err(Attempt::Failed(e.into())),
        };
        let t = Transcript {
            inviter: self.fingerprint,
            joiner: conn.fingerprint(),
            channel_binding: channel_binding(conn).map_err(Attempt::Broken)?,
        };
        if let Err(e) = cairn_protocol::pairing::verify_pair_request(self.code.secret(), &t, &req) {
            refuse(
                &mut send,
                RefuseCode::PairingFailed,
                "wrong pairing code: check it was copied whole, or run `cairn pair` again",
            )
            .await;
            return Err(Attempt::Failed(e.into()));
        }
        let mut accept = pair_accept(self.code.secret(), &t, &self.name);
        accept.inviter_serve_port = self.serve_port;
        send_msg(&mut send, &Message::PairAccept(accept))
            .await
            .map_err(|e| Attempt::Broken(e.into()))?;
        // The joiner says Bye once it has checked our proof and stored us.
        match recv_msg(&mut recv, &mut dec, MSG_TIMEOUT).await {
            Ok(Message::Bye { .. }) => {}
            Ok(other) => {
                return Err(Attempt::Failed(
                    SessionError::Unexpected {
                        expected: "bye",
                        got: other.name(),
                    }
                    .into(),
                ));
            }
            Err(e) => return Err(Attempt::Broken(e.into())),
        }
        let remote = conn.remote_address();
        // The joiner's daemon, if it runs, at the address it connected from.
        let dial_back = req
            .joiner_serve_port
            .filter(|p| *p != 0)
            .map(|p| vec![SocketAddr::new(remote.ip(), p)])
            .unwrap_or_default();
        let mut peer = Peer::new(
            &t.joiner,
            &clean_name(&req.joiner_name),
            dial_back,
            now_ms(),
        );
        peer.last_addr = Some(remote);
        let stored = PeerTable::modify(&self.home, |table| Ok(table.upsert(peer).clone()))
            .map_err(|e| Attempt::Fatal(e.into()))?;
        let _ = send.finish();
        conn.close(0, b"paired");
        tracing::info!(peer = %conn.peer_id(), remote = %remote, "paired");
        Ok(Paired {
            peer: stored,
            remote,
        })
    }
}

/// How one inviter-side attempt ended, when it did not pair.
enum Attempt {
    /// The peer did not prove the secret or broke the protocol: counts
    /// against [`MAX_FAILED_ATTEMPTS`].
    Failed(PairError),
    /// The connection broke off (timeout, reset): does not count.
    Broken(PairError),
    /// This node failed (peer table): ends the window.
    Fatal(PairError),
}

/// The joining side: dials the code's addresses, proves the secret, checks
/// the inviter's proof, stores the inviter. `now_unix` is checked against
/// the code's expiry before anything is sent.
pub async fn join(
    local: LocalNode<'_>,
    code_text: &str,
    now_unix: u64,
    handshake_timeout: Duration,
) -> Result<Paired, PairError> {
    let code = PairingCode::parse_at(code_text, now_unix)?;
    let own =
        cairn_protocol::spki_fingerprint(&rcgen::PublicKeyData::subject_public_key_info(local.key));
    if *code.inviter_fingerprint() == own {
        return Err(PairError::SelfPairing);
    }
    let (endpoint, conn) = dial_any(local.key, &code, handshake_timeout).await?;
    let result = join_on(local, &code, &conn).await;
    conn.close(0, b"done");
    endpoint.wait_idle(Duration::from_secs(2)).await;
    result
}

async fn dial_any(
    key: &rcgen::KeyPair,
    code: &PairingCode,
    handshake_timeout: Duration,
) -> Result<(Endpoint, PeerConnection), PairError> {
    let mut last = None;
    // Names first (resolved now, both families), then the literal addresses.
    let names: Vec<String> = code
        .hosts()
        .iter()
        .map(|(h, p)| format!("{h}:{p}"))
        .collect();
    let mut candidates =
        crate::sync::session::resolve_hosts(&names, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
            .await;
    candidates.extend(
        crate::sync::session::resolve_hosts(&names, SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)))
            .await,
    );
    candidates.extend(code.addrs().iter().copied());
    let tried = candidates.len();
    for addr in candidates {
        let mut ep = Endpoint::bind_client_for(addr, key)?;
        ep.set_handshake_timeout(handshake_timeout);
        match ep
            .connect(addr, code.inviter_fingerprint(), ALPN_PAIR)
            .await
        {
            Ok(conn) => return Ok((ep, conn)),
            Err(e) => {
                tracing::debug!(remote = %addr, error = %e, "pairing dial failed");
                last = Some(e);
            }
        }
    }
    match last {
        Some(last) => Err(PairError::Unreachable { addrs: tried, last }),
        // PairingCode guarantees at least one address.
        None => Err(PairError::Code(cairn_protocol::PairingError::AddrCount {
            count: 0,
        })),
    }
}

async fn join_on(
    local: LocalNode<'_>,
    code: &PairingCode,
    conn: &PeerConnection,
) -> Result<Paired, PairError> {
    let (mut send, mut recv) = conn.quinn().open_bi().await.map_err(SessionError::Stream)?;
    let t = Transcript {
        inviter: *code.inviter_fingerprint(),
        joiner: cairn_protocol::spki_fingerprint(&rcgen::PublicKeyData::subject_public_key_info(
            local.key,
        )),
        channel_binding: channel_binding(conn)?,
    };
    let mut req = pair_request(code.secret(), &t, local.name);
    req.joiner_serve_port = local.serve_port;
    send_msg(&mut send, &Message::PairRequest(req)).await?;
    let mut dec = FrameDecoder::with_max(MAX_PAIR_FRAME);
    let acc = match recv_msg(&mut recv, &mut dec, MSG_TIMEOUT).await {
        Ok(Message::PairAccept(a)) => a,
        Ok(Message::Refuse { code, reason }) => {
            return Err(PairError::Refused {
                code,
                reason: clean_reason(&reason),
            });
        }
        Ok(other) => {
            return Err(SessionError::Unexpected {
                expected: "pair_accept",
                got: other.name(),
            }
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    verify_pair_accept(code.secret(), &t, &acc)?;
    let remote = conn.remote_address();
    // The inviter's daemon first (the pairing port closes now), then the code's addresses.
    let mut addrs: Vec<SocketAddr> = acc
        .inviter_serve_port
        .filter(|p| *p != 0)
        .map(|p| SocketAddr::new(remote.ip(), p))
        .into_iter()
        .collect();
    addrs.extend(
        code.addrs()
            .iter()
            .filter(|a| !addrs.contains(a))
            .copied()
            .collect::<Vec<_>>(),
    );
    let mut peer = Peer::new(&t.inviter, &clean_name(&acc.inviter_name), addrs, now_ms());
    peer.last_addr = Some(remote);
    // The code's host names lead to the inviter's daemon after an address change.
    let daemon_port = acc
        .inviter_serve_port
        .filter(|p| *p != 0)
        .unwrap_or(DEFAULT_PORT);
    peer.hosts = code
        .hosts()
        .iter()
        .map(|(h, _)| format!("{h}:{daemon_port}"))
        .collect();
    let stored = PeerTable::modify(local.home, |table| Ok(table.upsert(peer).clone()))?;
    send_msg(
        &mut send,
        &Message::Bye {
            reason: "paired".to_owned(),
        },
    )
    .await?;
    let _ = send.finish();
    // Wait (bounded) for the inviter to close, so our Bye is delivered.
    let _ = tokio::time::timeout(MSG_TIMEOUT, conn.quinn().closed()).await;
    tracing::info!(peer = %NodeId::from_fingerprint(&t.inviter), remote = %remote, "paired");
    Ok(Paired {
        peer: stored,
        remote,
    })
}

fn channel_binding(conn: &PeerConnection) -> Result<[u8; 32], PairError> {
    let mut out = [0u8; 32];
    conn.quinn()
        .export_keying_material(&mut out, EXPORTER_LABEL, b"")
        .map_err(|_| PairError::ChannelBinding)?;
    Ok(out)
}

/// A peer-supplied refusal reason, made safe to print.
fn clean_reason(reason: &str) -> String {
    reason
        .chars()
        .filter(|c| !c.is_control())
        .take(300)
        .collect()
}

/// The addresses to put in a code for an endpoint bound at `bound`.
pub fn advertise_addrs(bound: SocketAddr, explicit: &[SocketAddr]) -> Vec<SocketAddr> {
    let with_port = |a: SocketAddr| {
        if a.port() == 0 {
            SocketAddr::new(a.ip(), bound.port())
        } else {
            a
        }
    };
    if !explicit.is_empty() {
        return explicit
            .iter()
            .take(cairn_protocol::MAX_PAIR_ADDRS)
            .map(|a| with_port(*a))
            .collect();
    }
    if !bound.ip().is_unspecified() {
        return vec![bound];
    }
    let ip = primary_ip(bound.ip()).unwrap_or(match bound.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    });
    vec![SocketAddr::new(ip, bound.port())]
}

/// The source address the routing table picks for off-machine traffic
/// (a UDP "connect" sends nothing; it only selects a route).
fn primary_ip(family: IpAddr) -> Option<IpAddr> {
    let (bind, probe): (SocketAddr, SocketAddr) = match family {
        IpAddr::V4(_) => (
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::from(([192, 0, 2, 1], DEFAULT_PORT)),
        ),
        IpAddr::V6(_) => (
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
            SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), DEFAULT_PORT)),
        ),
    };
    let sock = UdpSocket::bind(bind).ok()?;
    sock.connect(probe).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_unix;

    const HS: Duration = Duration::from_secs(5);

    struct Home {
        dir: tempfile::TempDir,
        key: rcgen::KeyPair,
        name: String,
    }

    impl Home {
        fn new(name: &str) -> Home {
            Home {
                dir: tempfile::tempdir().expect("tempdir"),
                key: rcgen::KeyPair::generate().expect("key"),
                name: name.to_owned(),
            }
        }

        fn local(&self) -> LocalNode<'_> {
            LocalNode {
                key: &self.key,
                name: &self.name,
                home: self.dir.path(),
                serve_port: None,
            }
        }

        fn fp(&self) -> SpkiFingerprint {
            cairn_protocol::spki_fingerprint(&rcgen::PublicKeyData::subject_public_key_info(
                &self.key,
            ))
        }

        fn peers(&self) -> PeerTable {
            PeerTable::load(self.dir.path()).expect("load peers")
        }
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    fn invite(a: &Home, ttl: Duration) -> Inviter {
        Inviter::open(a.local(), loopback(), &[], ttl, now_unix()).expect("open pairing window")
    }

    #[tokio::test]
    async fn pairing_stores_both_peers() {
        let (a, b) = (Home::new("alpha"), Home::new("beta"));
        let inv = invite(&a, Duration::from_secs(30));
        let code = inv.code().encode();
        assert!(code.starts_with("cairn1-"));
        assert_eq!(inv.code().addrs(), &[inv.local_addr().expect("addr")]);
        let (ra, rb) = tokio::join!(inv.run(), join(b.local(), &code, now_unix(), HS));
        let (pa, pb) = (ra.expect("inviter pairs"), rb.expect("joiner pairs"));
        assert_eq!(pa.peer.name, "beta");
        assert_eq!(pb.peer.name, "alpha");
        assert_eq!(pa.peer.id(), Some(NodeId::from_fingerprint(&b.fp())));
        assert_eq!(pb.peer.id(), Some(NodeId::from_fingerprint(&a.fp())));
        // Both tables hold the other, and only the other.
        let (ta, tb) = (a.peers(), b.peers());
        assert_eq!(ta.peers().len(), 1);
        assert_eq!(tb.peers().len(), 1);
        assert!(ta.allowed_fingerprints().contains(&b.fp()));
        assert!(tb.allowed_fingerprints().contains(&a.fp()));
        // The joiner remembers where to dial the inviter.
        assert_eq!(tb.peers()[0].addresses, pb.peer.addresses);
        assert_eq!(tb.peers()[0].addresses.len(), 1);
    }

    #[tokio::test]
    async fn running_daemons_tell_each_other_where_to_dial_back() {
        let (a, b) = (Home::new("alpha"), Home::new("beta"));
        let inviter_side = LocalNode {
            serve_port: Some(4242),
            ..a.local()
        };
        let joiner_side = LocalNode {
            serve_port: Some(5353),
            ..b.local()
        };
        let inv = Inviter::open(
            inviter_side,
            loopback(),
            &[],
            Duration::from_secs(30),
            now_unix(),
        )
        .expect("open pairing window");
        let pairing_addr = inv.local_addr().expect("addr");
        let code = inv.code().encode();
        let (ra, rb) = tokio::join!(inv.run(), join(joiner_side, &code, now_unix(), HS));
        let (pa, pb) = (ra.expect("inviter pairs"), rb.expect("joiner pairs"));
        // The joiner dials the inviter's daemon first, then the code's address.
        let ip = pairing_addr.ip();
        assert_eq!(pb.peer.addresses, [SocketAddr::new(ip, 4242), pairing_addr]);
        // The inviter learned where the joiner's daemon listens.
        assert_eq!(pa.peer.addresses, [SocketAddr::new(ip, 5353)]);
        assert_eq!(a.peers().peers()[0].addresses, [SocketAddr::new(ip, 5353)]);
    }

    #[tokio::test]
    async fn a_code_works_once() {
        let (a, b, c) = (Home::new("alpha"), Home::new("beta"), Home::new("gamma"));
        let inv = invite(&a, Duration::from_secs(30));
        let code = inv.code().encode();
        let (ra, rb) = tokio::join!(inv.run(), join(b.local(), &code, now_unix(), HS));
        ra.expect("first pairing");
        rb.expect("first pairing");
        // The window is closed: nobody answers at the code's address any more.
        let err = join(c.local(), &code, now_unix(), Duration::from_secs(1))
            .await
            .expect_err("second use refused");
        assert!(matches!(err, PairError::Unreachable { .. }), "{err:?}");
        assert!(c.peers().peers().is_empty());
        assert_eq!(
            a.peers().peers().len(),
            1,
            "only the first joiner was stored"
        );
    }

    #[tokio::test]
    async fn wrong_secret_is_refused_on_both_sides_and_the_window_survives() {
        let (a, b, m) = (Home::new("alpha"), Home::new("beta"), Home::new("mallory"));
        let inv = invite(&a, Duration::from_secs(30));
        let good = inv.code().clone();
        let forged = PairingCode::new(
            good.addrs().to_vec(),
            *good.inviter_fingerprint(),
            &[9u8; SECRET_LEN],
            good.expires_unix(),
        )
        .expect("forged code")
        .encode();
        let joiners = async {
            let bad = join(m.local(), &forged, now_unix(), HS).await;
            let ok = join(b.local(), &good.encode(), now_unix(), HS).await;
            (bad, ok)
        };
        let (ra, (bad, ok)) = tokio::join!(inv.run(), joiners);
        match bad.expect_err("wrong secret refused") {
            PairError::Refused { code, reason } => {
                assert_eq!(code, RefuseCode::PairingFailed);
                assert!(reason.contains("wrong pairing code"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(m.peers().peers().is_empty());
        ok.expect("the right code still works");
        let paired = ra.expect("inviter pairs with the right joiner");
        assert_eq!(paired.peer.name, "beta");
        let ta = a.peers();
        assert_eq!(ta.peers().len(), 1);
        assert!(!ta.allowed_fingerprints().contains(&m.fp()));
    }

    #[tokio::test]
    async fn repeated_wrong_codes_burn_the_window() {
        let (a, m) = (Home::new("alpha"), Home::new("mallory"));
        let inv = invite(&a, Duration::from_secs(30));
        let good = inv.code().clone();
        let guesses = async {
            let mut errs = Vec::new();
            for i in 0..MAX_FAILED_ATTEMPTS {
                let forged = PairingCode::new(
                    good.addrs().to_vec(),
                    *good.inviter_fingerprint(),
                    &[i as u8; SECRET_LEN],
                    good.expires_unix(),
                )
                .expect("forged")
                .encode();
                errs.push(join(m.local(), &forged, now_unix(), HS).await);
            }
            errs
        };
        let (ra, errs) = tokio::join!(inv.run(), guesses);
        assert!(
            errs.iter()
                .all(|e| matches!(e, Err(PairError::Refused { .. })))
        );
        assert!(matches!(
            ra,
            Err(PairError::TooManyFailures {
                failures: MAX_FAILED_ATTEMPTS
            })
        ));
        assert!(a.peers().peers().is_empty());
    }

    #[tokio::test]
    async fn expired_code_is_refused_on_both_sides() {
        let (a, b) = (Home::new("alpha"), Home::new("beta"));
        let inv = invite(&a, Duration::ZERO);
        let code = inv.code().encode();
        let ra = inv.run().await;
        assert!(matches!(ra, Err(PairError::TimedOut { .. })), "{ra:?}");
        let err = join(b.local(), &code, now_unix(), HS)
            .await
            .expect_err("expired");
        assert!(
            matches!(
                err,
                PairError::Code(cairn_protocol::PairingError::Expired { .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("expired"));
        assert!(a.peers().peers().is_empty() && b.peers().peers().is_empty());
    }

    #[tokio::test]
    async fn impostor_at_the_codes_address_is_refused_by_the_joiner() {
        let (a, b, m) = (Home::new("alpha"), Home::new("beta"), Home::new("mallory"));
        // Mallory listens where the code says A is, with her own key.
        let mitm = Endpoint::bind(loopback(), &m.key, Role::Pairing).expect("bind mitm");
        let code = PairingCode::new(
            vec![mitm.local_addr().expect("addr")],
            a.fp(),
            &[1u8; SECRET_LEN],
            now_unix() + 60,
        )
        .expect("code")
        .encode();
        let (rb, got) = tokio::join!(join(b.local(), &code, now_unix(), HS), async {
            tokio::time::timeout(HS, mitm.accept()).await.ok().flatten()
        });
        let err = rb.expect_err("b refuses the impostor");
        match &err {
            PairError::Unreachable { last, .. } => {
                assert!(matches!(last, EndpointError::Handshake { .. }), "{last:?}")
            }
            other => panic!("expected a handshake failure, got {other:?}"),
        }
        assert!(
            !matches!(got, Some(Ok(_))),
            "the impostor never gets a connection: {got:?}"
        );
        assert!(b.peers().peers().is_empty());
    }

    #[tokio::test]
    async fn a_node_cannot_pair_with_itself() {
        let a = Home::new("alpha");
        let inv = invite(&a, Duration::from_secs(5));
        let code = inv.code().encode();
        let err = join(a.local(), &code, now_unix(), HS)
            .await
            .expect_err("self");
        assert!(matches!(err, PairError::SelfPairing));
    }

    #[test]
    fn advertised_addresses() {
        let bound: SocketAddr = "0.0.0.0:4444".parse().expect("addr");
        let explicit: SocketAddr = "10.1.2.3:0".parse().expect("addr");
        assert_eq!(
            advertise_addrs(bound, &[explicit]),
            vec!["10.1.2.3:4444".parse::<SocketAddr>().expect("addr")]
        );
        let got = advertise_addrs(bound, &[]);
        assert_eq!(got.len(), 1);
        assert!(!got[0].ip().is_unspecified());
        assert_eq!(got[0].port(), 4444);
        let lo: SocketAddr = "127.0.0.1:5555".parse().expect("addr");
        assert_eq!(advertise_addrs(lo, &[]), vec![lo]);
    }
}
