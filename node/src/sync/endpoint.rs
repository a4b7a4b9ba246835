//! The QUIC endpoint: binding, dialing and accepting authenticated peers,
//! and reading and writing framed messages on a stream.
//!
//! Owns the quinn `Endpoint`, its transport limits (keep-alive, idle
//! timeout, flow-control windows, stream counts), the mapping from a TLS
//! handshake to the peer's [`NodeId`], bounded frame I/O and the `Hello`
//! exchange that opens every sync connection. Never touches the database or
//! the peer table: who is allowed is an [`AllowList`] passed in, and what to
//! do with a connection is the caller's business.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use cairn_protocol::{
    ALPN_PAIR, ALPN_SYNC, FrameDecoder, FrameError, Hello, Message, NodeId, RefuseCode,
    SpkiFingerprint, VersionError, encode_frame, negotiate,
};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

use super::tls::{self, AllowList, ClientPolicy, NodeCert, TlsError};

/// Keep-alive interval: well below the idle timeout, so NAT bindings and
/// quiet long-lived connections survive, and a path that died is noticed
/// within the idle timeout (a few tiny packets a second per peer at most).
pub const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// Idle timeout of a connection (the effective value is the smaller of
/// both sides'): after this long without a packet from the peer the
/// connection is over and the daemon dials again.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(8);
/// Default time to wait for one message.
pub const RECV_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time to wait for a QUIC + TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read from a stream at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Per-stream receive window: one full frame plus slack.
const STREAM_WINDOW: u32 = (cairn_protocol::MAX_FRAME + 1024 * 1024) as u32;
/// Per-connection receive window.
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;
/// Bidirectional streams a peer may open at once.
const MAX_BIDI_STREAMS: u32 = 4;

/// What an endpoint accepts from callers.
#[derive(Debug, Clone)]
pub enum Role {
    /// Dials only; refuses every incoming connection.
    ClientOnly,
    /// Accepts sync connections (ALPN `cairn/1`) from allowed keys.
    Sync(AllowList),
    /// Accepts pairing connections (ALPN `cairn-pair/1`) from any key.
    Pairing,
}

/// Failures binding, dialing or accepting.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The certificate or TLS configuration could not be made.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The UDP socket could not be bound.
    #[error("bind udp {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// quinn refused to start dialing (bad address, endpoint closed).
    #[error("dial {addr}")]
    Dial {
        /// The peer's address.
        addr: SocketAddr,
        /// What quinn said.
        #[source]
        source: quinn::ConnectError,
    },
    /// The QUIC or TLS handshake failed: the peer's key is not the pinned
    /// one, ours is not paired there, no common ALPN, or no answer.
    #[error("handshake with {addr}")]
    Handshake {
        /// The peer's address.
        addr: SocketAddr,
        /// What quinn said (a TLS alert, a timeout, a reset).
        #[source]
        source: quinn::ConnectionError,
    },
    /// The handshake did not finish in time.
    #[error("handshake with {addr}: no answer within {after:?}")]
    HandshakeTimeout {
        /// The peer's address.
        addr: SocketAddr,
        /// How long we waited.
        after: Duration,
    },
    /// The handshake finished without a usable peer certificate or ALPN
    /// (not expected with the configurations made here).
    #[error("handshake with {addr}: no usable peer identity")]
    NoPeerIdentity {
        /// The peer's address.
        addr: SocketAddr,
    },
    /// A sync connection from a key that is not (or no longer) paired.
    #[error("refuse {peer} at {addr}: not paired")]
    NotPaired {
        /// The peer's id.
        peer: NodeId,
        /// Its address.
        addr: SocketAddr,
    },
}

impl EndpointError {
    /// The remote address the failure concerns, if any.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            EndpointError::Tls(_) => None,
            EndpointError::Bind { addr, .. }
            | EndpointError::Dial { addr, .. }
            | EndpointError::Handshake { addr, .. }
            | EndpointError::HandshakeTimeout { addr, .. }
            | EndpointError::NoPeerIdentity { addr }
            | EndpointError::NotPaired { addr, .. } => Some(*addr),
        }
    }

    /// Whether what answered is not the peer at all: this side of the
    /// handshake ended it (a key other than the pinned one, or something
    /// that is not a cairn node). A peer that refuses this node's key does
    /// so after its own was accepted, and closes the connection itself.
    pub fn is_stranger(&self) -> bool {
        matches!(
            self,
            EndpointError::Handshake {
                source: quinn::ConnectionError::TransportError(_),
                ..
            }
        )
    }

    /// Whether the failure says the peer presented a key we do not accept,
    /// or refused ours (a TLS certificate alert), as opposed to the network.
    pub fn is_auth_failure(&self) -> bool {
        match self {
            EndpointError::NotPaired { .. } => true,
            EndpointError::Handshake { source, .. } => matches!(
                source,
                quinn::ConnectionError::TransportError(_)
                    | quinn::ConnectionError::ConnectionClosed(_)
            ),
            _ => false,
        }
    }
}

/// Failures of one message exchange on a stream.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Reading from the stream failed (connection lost, reset).
    #[error("read from peer")]
    Read(#[source] quinn::ReadError),
    /// Writing to the stream failed.
    #[error("write to peer")]
    Write(#[source] quinn::WriteError),
    /// Opening or accepting the stream failed.
    #[error("open stream")]
    Stream(#[source] quinn::ConnectionError),
    /// The peer sent bytes that are not a valid frame (too large, garbage).
    #[error("peer sent an invalid frame")]
    Frame(#[source] FrameError),
    /// A message of ours could not be encoded (too large).
    #[error("encode message")]
    Encode(#[source] cairn_protocol::EncodeError),
    /// No complete message within the time limit.
    #[error("no message from peer within {after:?}")]
    Timeout {
        /// The limit.
        after: Duration,
    },
    /// The peer finished the stream where a message was expected.
    #[error("peer closed the stream")]
    Closed,
    /// The peer refused the session and said why.
    #[error("peer refused: {reason} ({code:?})")]
    Refused {
        /// Its code.
        code: RefuseCode,
        /// Its explanation, for the user.
        reason: String,
    },
    /// No common protocol version: we refused the peer.
    #[error(transparent)]
    Version(#[from] VersionError),
    /// A message that is not legal at this point.
    #[error("peer sent {got} where {expected} was expected")]
    Unexpected {
        /// What the protocol allows here.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// The peer's Hello claims a node id its TLS key does not give.
    #[error("peer claims node id {claimed} but its key gives {actual}")]
    NodeIdMismatch {
        /// From the Hello.
        claimed: NodeId,
        /// From TLS.
        actual: NodeId,
    },
}

impl SessionError {
    /// Whether the peer closed the connection because it does not accept
    /// this node's key: a TLS alert right after the handshake (QUIC crypto
    /// error codes 0x100..=0x1ff) or the listener's "not paired" close.
    pub fn is_refusal(&self) -> bool {
        let conn = match self {
            SessionError::Read(quinn::ReadError::ConnectionLost(c))
            | SessionError::Write(quinn::WriteError::ConnectionLost(c))
            | SessionError::Stream(c) => c,
            _ => return false,
        };
        match conn {
            quinn::ConnectionError::ConnectionClosed(close) => {
                (0x100..=0x1ff).contains(&u64::from(close.error_code))
            }
            quinn::ConnectionError::ApplicationClosed(close) => {
                close.error_code == quinn::VarInt::from_u32(2)
            }
            _ => false,
        }
    }
}

/// Whose fault a session failure is: decides between dropping a peer and
/// retrying later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The peer misbehaved or refused: do not retry at once.
    Peer,
    /// The network or this node: retry with backoff.
    Transient,
}

impl SessionError {
    /// Whose fault it is.
    pub fn blame(&self) -> Blame {
        match self {
            SessionError::Read(_)
            | SessionError::Write(_)
            | SessionError::Stream(_)
            | SessionError::Timeout { .. }
            | SessionError::Closed
            | SessionError::Encode(_) => Blame::Transient,
            SessionError::Refused { code, .. } if code.is_retryable() => Blame::Transient,
            _ => Blame::Peer,
        }
    }
}

/// A connection whose peer passed the TLS checks.
#[derive(Debug, Clone)]
pub struct PeerConnection {
    conn: quinn::Connection,
    fingerprint: SpkiFingerprint,
    alpn: Vec<u8>,
}

impl PeerConnection {
    /// The peer's node id (from its TLS key).
    pub fn peer_id(&self) -> NodeId {
        NodeId::from_fingerprint(&self.fingerprint)
    }

    /// The blake3 fingerprint of the peer's key.
    pub fn fingerprint(&self) -> SpkiFingerprint {
        self.fingerprint
    }

    /// The negotiated ALPN name.
    pub fn alpn(&self) -> &[u8] {
        &self.alpn
    }

    /// The peer's current address.
    pub fn remote_address(&self) -> SocketAddr {
        self.conn.remote_address()
    }

    /// The underlying quinn connection.
    pub fn quinn(&self) -> &quinn::Connection {
        &self.conn
    }

    /// Closes the connection with an application code and a short reason.
    pub fn close(&self, code: u32, reason: &[u8]) {
        self.conn.close(quinn::VarInt::from_u32(code), reason);
    }

    fn from_quinn(conn: quinn::Connection) -> Option<PeerConnection> {
        let certs = conn
            .peer_identity()?
            .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
            .ok()?;
        let fingerprint = tls::cert_fingerprint(certs.first()?).ok()?;
        let alpn = conn
            .handshake_data()?
            .downcast::<quinn::crypto::rustls::HandshakeData>()
            .ok()?
            .protocol?;
        Some(PeerConnection {
            conn,
            fingerprint,
            alpn,
        })
    }
}

/// A bound QUIC endpoint with this node's certificate.
#[derive(Debug)]
pub struct Endpoint {
    inner: quinn::Endpoint,
    cert: Arc<NodeCert>,
    role: Role,
    handshake_timeout: Duration,
}

fn transport(idle: Duration) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.keep_alive_interval(Some(KEEP_ALIVE.min(idle / 2)))
        .max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok())
        .stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW))
        .receive_window(quinn::VarInt::from_u32(
            CONNECTION_WINDOW.max(STREAM_WINDOW),
        ))
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(MAX_BIDI_STREAMS))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    Arc::new(t)
}

impl Endpoint {
    /// Binds a UDP socket at `addr` (`127.0.0.1:0` in tests; see
    /// [`Endpoint::local_addr`] for the port) with this node's key.
    /// Must be called inside a tokio runtime.
    pub fn bind(
        addr: SocketAddr,
        key: &rcgen::KeyPair,
        role: Role,
    ) -> Result<Endpoint, EndpointError> {
        let cert = Arc::new(NodeCert::new(key)?);
        let server = match &role {
            Role::ClientOnly => None,
            Role::Sync(allow) => Some(server_config(
                &cert,
                ALPN_SYNC,
                ClientPolicy::Pinned(allow.clone()),
            )?),
            Role::Pairing => Some(server_config(&cert, ALPN_PAIR, ClientPolicy::AnyKey)?),
        };
        let bind = |source| EndpointError::Bind { addr, source };
        let inner = match server {
            Some(s) => quinn::Endpoint::server(s, addr).map_err(bind)?,
            None => quinn::Endpoint::client(addr).map_err(bind)?,
        };
        Ok(Endpoint {
            inner,
            cert,
            role,
            handshake_timeout: HANDSHAKE_TIMEOUT,
        })
    }

    /// A client-only endpoint on an ephemeral port of the family that can
    /// reach `peer`.
    pub fn bind_client_for(
        peer: SocketAddr,
        key: &rcgen::KeyPair,
    ) -> Result<Endpoint, EndpointError> {
        let any = match peer.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        Endpoint::bind(SocketAddr::new(any, 0), key, Role::ClientOnly)
    }

    /// Changes how long [`Endpoint::connect`] waits for a handshake.
    pub fn set_handshake_timeout(&mut self, after: Duration) {
        self.handshake_timeout = after;
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.inner.local_addr()
    }

    /// This node's key fingerprint, as peers see it.
    pub fn fingerprint(&self) -> SpkiFingerprint {
        self.cert.fingerprint()
    }

    /// Dials `addr` expecting the key `expected` and speaking `alpn`.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        expected: &SpkiFingerprint,
        alpn: &[u8],
    ) -> Result<PeerConnection, EndpointError> {
        let rustls_cfg = tls::client_config(&self.cert, alpn, *expected)?;
        let quic = QuicClientConfig::try_from(rustls_cfg).map_err(|source| TlsError::Quic {
            side: "client",
            source,
        })?;
        let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
        cfg.transport_config(transport(IDLE_TIMEOUT));
        let connecting = self
            .inner
            .connect_with(cfg, addr, tls::CERT_NAME)
            .map_err(|source| EndpointError::Dial { addr, source })?;
        let conn = match tokio::time::timeout(self.handshake_timeout, connecting).await {
            Err(_) => {
                return Err(EndpointError::HandshakeTimeout {
                    addr,
                    after: self.handshake_timeout,
                });
            }
            Ok(Err(source)) => return Err(EndpointError::Handshake { addr, source }),
            Ok(Ok(c)) => c,
        };
        let peer =
            PeerConnection::from_quinn(conn).ok_or(EndpointError::NoPeerIdentity { addr })?;
        if peer.fingerprint != *expected {
            // The verifier already enforced this; kept so no path skips it.
            peer.close(1, b"unexpected key");
            return Err(EndpointError::NoPeerIdentity { addr });
        }
        tracing::debug!(peer = %peer.peer_id(), remote = %addr, "connected");
        Ok(peer)
    }

    /// Dials every address in `addrs` at once, expecting the key `expected`
    /// and speaking `alpn`; the first handshake that completes wins and the
    /// others are abandoned. Each attempt has the handshake timeout, so a
    /// peer whose addresses are all dead costs one timeout, not one per
    /// address. On failure, every address's error in the order they ended.
    pub async fn connect_any(
        &self,
        addrs: &[SocketAddr],
        expected: &SpkiFingerprint,
        alpn: &[u8],
    ) -> Result<(PeerConnection, SocketAddr), Vec<EndpointError>> {
        let rustls_cfg =
            tls::client_config(&self.cert, alpn, *expected).map_err(|e| vec![e.into()])?;
        let quic = QuicClientConfig::try_from(rustls_cfg).map_err(|source| {
            vec![EndpointError::from(TlsError::Quic {
                side: "client",
                source,
            })]
        })?;
        let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
        cfg.transport_config(transport(IDLE_TIMEOUT));
        let mut failures = Vec::new();
        let mut attempts = tokio::task::JoinSet::new();
        for &addr in addrs {
            match self.inner.connect_with(cfg.clone(), addr, tls::CERT_NAME) {
                Ok(connecting) => {
                    let after = self.handshake_timeout;
                    attempts.spawn(
                        async move { (addr, tokio::time::timeout(after, connecting).await) },
                    );
                }
                Err(source) => failures.push(EndpointError::Dial { addr, source }),
            }
        }
        // Bounded: one result per spawned attempt, each bounded by the timeout.
        while let Some(joined) = attempts.join_next().await {
            let Ok((addr, outcome)) = joined else {
                continue;
            };
            let conn = match outcome {
                Err(_) => {
                    failures.push(EndpointError::HandshakeTimeout {
                        addr,
                        after: self.handshake_timeout,
                    });
                    continue;
                }
                Ok(Err(source)) => {
                    failures.push(EndpointError::Handshake { addr, source });
                    continue;
                }
                Ok(Ok(c)) => c,
            };
            let Some(peer) = PeerConnection::from_quinn(conn) else {
                failures.push(EndpointError::NoPeerIdentity { addr });
                continue;
            };
            if peer.fingerprint != *expected {
                // The verifier already enforced this; kept so no path skips it.
                peer.close(1, b"unexpected key");
                failures.push(EndpointError::NoPeerIdentity { addr });
                continue;
            }
            // Dropping the other attempts abandons their handshakes.
            attempts.abort_all();
            tracing::debug!(peer = %peer.peer_id(), remote = %addr, "connected");
            return Ok((peer, addr));
        }
        Err(failures)
    }

    /// Waits for the next incoming connection and its handshake. `None`
    /// once the endpoint is closed. A failed handshake (an unpaired key, a
    /// wrong ALPN, a dropped peer) is returned as an error; call again for
    /// the next connection.
    pub async fn accept(&self) -> Option<Result<PeerConnection, EndpointError>> {
        let incoming = self.inner.accept().await?;
        let addr = incoming.remote_address();
        let conn = match incoming.await {
            Ok(c) => c,
            Err(source) => return Some(Err(EndpointError::Handshake { addr, source })),
        };
        let Some(peer) = PeerConnection::from_quinn(conn.clone()) else {
            conn.close(quinn::VarInt::from_u32(1), b"no identity");
            return Some(Err(EndpointError::NoPeerIdentity { addr }));
        };
        // The verifier already checked the allow-list; checked again here so
        // an unpairing between handshake and now still takes effect.
        if let Role::Sync(allow) = &self.role
            && !allow.allows(&peer.fingerprint)
        {
            peer.close(2, b"not paired");
            return Some(Err(EndpointError::NotPaired {
                peer: peer.peer_id(),
                addr,
            }));
        }
        tracing::debug!(peer = %peer.peer_id(), remote = %addr, "accepted");
        Some(Ok(peer))
    }

    /// Closes every connection and stops accepting.
    pub fn close(&self) {
        self.inner.close(quinn::VarInt::from_u32(0), b"bye");
    }

    /// Waits (at most `limit`) until every connection has been closed
    /// cleanly, so the last messages are delivered.
    pub async fn wait_idle(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.inner.wait_idle()).await;
    }
}

fn server_config(
    cert: &NodeCert,
    alpn: &[u8],
    policy: ClientPolicy,
) -> Result<quinn::ServerConfig, EndpointError> {
    let rustls_cfg = tls::server_config(cert, &[alpn], policy)?;
    let quic = QuicServerConfig::try_from(rustls_cfg).map_err(|source| TlsError::Quic {
        side: "server",
        source,
    })?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(quic));
    cfg.transport_config(transport(IDLE_TIMEOUT));
    Ok(cfg)
}

/// Writes one message as a frame.
pub async fn send_msg(send: &mut quinn::SendStream, msg: &Message) -> Result<(), SessionError> {
    let frame = encode_frame(msg).map_err(SessionError::Encode)?;
    send.write_all(&frame).await.map_err(SessionError::Write)
}

/// Reads the next message, waiting at most `timeout` in all. Reads in
/// chunks of at most 64 KiB and only while no complete frame is buffered,
/// so the decoder never holds more than one frame (capped at
/// [`cairn_protocol::MAX_FRAME`], checked before the body is buffered) plus
/// one chunk.
pub async fn recv_msg(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
    timeout: Duration,
) -> Result<Message, SessionError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        if let Some(msg) = decoder.pop().map_err(SessionError::Frame)? {
            return Ok(msg);
        }
        let read = tokio::time::timeout_at(deadline, recv.read(&mut chunk)).await;
        match read {
            Err(_) => return Err(SessionError::Timeout { after: timeout }),
            Ok(Err(e)) => return Err(SessionError::Read(e)),
            Ok(Ok(None)) => {
                decoder.finish().map_err(SessionError::Frame)?;
                return Err(SessionError::Closed);
            }
            Ok(Ok(Some(n))) => {
                let bytes = chunk.get(..n).unwrap_or_default();
                decoder.push(bytes).map_err(SessionError::Frame)?;
            }
        }
    }
}

/// A sync session's opening: the stream pair, the decoder, the peer's Hello
/// and the negotiated minor version.
#[derive(Debug)]
pub struct Session {
    /// Our half of the stream.
    pub send: quinn::SendStream,
    /// The peer's half.
    pub recv: quinn::RecvStream,
    /// Frames already read but not yet popped stay here.
    pub decoder: FrameDecoder,
    /// What the peer said about itself.
    pub peer_hello: Hello,
    /// The minor version both speak.
    pub minor: u16,
}

/// Opens (as the dialer) or accepts (as the listener) the session stream and
/// exchanges `Hello` both ways, each side sending at once. An incompatible
/// peer gets `Refuse { Incompatible }` with the readable reason and this
/// side returns [`SessionError::Version`]; a refusing peer's reason comes
/// back as [`SessionError::Refused`].
pub async fn open_session(
    conn: &PeerConnection,
    dialer: bool,
    local: &Hello,
    timeout: Duration,
) -> Result<Session, SessionError> {
    let opened = if dialer {
        tokio::time::timeout(timeout, conn.conn.open_bi()).await
    } else {
        tokio::time::timeout(timeout, conn.conn.accept_bi()).await
    };
    let (send, recv) = match opened {
        Err(_) => return Err(SessionError::Timeout { after: timeout }),
        Ok(r) => r.map_err(SessionError::Stream)?,
    };
    answer_session(conn, send, recv, local, timeout).await
}

/// Exchanges `Hello` on a stream already opened (by either side) and
/// returns the session, as [`open_session`] does.
pub async fn answer_session(
    conn: &PeerConnection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    local: &Hello,
    timeout: Duration,
) -> Result<Session, SessionError> {
    send_msg(&mut send, &Message::Hello(local.clone())).await?;
    let mut decoder = FrameDecoder::new();
    let peer_hello = match recv_msg(&mut recv, &mut decoder, timeout).await? {
        Message::Hello(h) => h,
        Message::Refuse { code, reason } => return Err(SessionError::Refused { code, reason }),
        other => {
            return Err(SessionError::Unexpected {
                expected: "hello",
                got: other.name(),
            });
        }
    };
    let actual = conn.peer_id();
    if peer_hello.node_id != actual {
        let err = SessionError::NodeIdMismatch {
            claimed: peer_hello.node_id,
            actual,
        };
        refuse(&mut send, RefuseCode::ProtocolViolation, &err.to_string()).await;
        return Err(err);
    }
    match negotiate(local, &peer_hello) {
        Ok(minor) => Ok(Session {
            send,
            recv,
            decoder,
            peer_hello,
            minor,
        }),
        Err(e) => {
            tracing::warn!(peer = %actual, software = %peer_hello.software, "incompatible peer");
            refuse(&mut send, RefuseCode::Incompatible, &e.to_string()).await;
            Err(SessionError::Version(e))
        }
    }
}

/// How long [`refuse`] waits for the peer to acknowledge the refusal.
const REFUSE_LINGER: Duration = Duration::from_secs(2);

/// Sends `Refuse`, finishes the stream and waits (at most 2 s) until the
/// peer has acknowledged it, so closing the connection right after does
/// not discard the explanation. Best effort: the session is over either way.
pub async fn refuse(send: &mut quinn::SendStream, code: RefuseCode, reason: &str) {
    let msg = Message::Refuse {
        code,
        reason: reason.to_owned(),
    };
    if send_msg(send, &msg).await.is_ok() && send.finish().is_ok() {
        let _ = tokio::time::timeout(REFUSE_LINGER, send.stopped()).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::RwLock;

    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn key() -> rcgen::KeyPair {
        rcgen::KeyPair::generate().expect("generate key")
    }

    fn fp(k: &rcgen::KeyPair) -> SpkiFingerprint {
        cairn_protocol::spki_fingerprint(&rcgen::PublicKeyData::subject_public_key_info(k))
    }

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    fn hello(k: &rcgen::KeyPair, name: &str) -> Hello {
        Hello::current(NodeId::from_fingerprint(&fp(k)), name, "cairn test", 1)
    }

    /// A server on loopback that allows `allowed`.
    fn server(k: &rcgen::KeyPair, allowed: &[SpkiFingerprint]) -> Endpoint {
        Endpoint::bind(
            loopback(),
            k,
            Role::Sync(AllowList::fixed(allowed.iter().copied())),
        )
        .expect("bind server")
    }

    /// Dials `srv` from a fresh client endpoint with key `ck`, expecting
    /// the server's key `expect`; returns both sides' results.
    async fn dial(
        srv: &Endpoint,
        ck: &rcgen::KeyPair,
        expect: SpkiFingerprint,
    ) -> (
        Endpoint,
        Result<PeerConnection, EndpointError>,
        Option<Result<PeerConnection, EndpointError>>,
    ) {
        let addr = srv.local_addr().expect("addr");
        let mut cl = Endpoint::bind(loopback(), ck, Role::ClientOnly).expect("bind client");
        cl.set_handshake_timeout(T);
        let (c, s) = tokio::join!(cl.connect(addr, &expect, ALPN_SYNC), async {
            tokio::time::timeout(T, srv.accept()).await.ok().flatten()
        });
        (cl, c, s)
    }

    #[tokio::test]
    async fn mutually_pinned_keys_connect_and_exchange_hello() {
        let (a, b) = (key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (_cl, c, s) = dial(&srv, &b, fp(&a)).await;
        let c = c.expect("client connects");
        let s = s.expect("an incoming connection").expect("server accepts");
        assert_eq!(c.peer_id(), NodeId::from_fingerprint(&fp(&a)));
        assert_eq!(s.peer_id(), NodeId::from_fingerprint(&fp(&b)));
        assert_eq!(c.alpn(), ALPN_SYNC);
        assert_eq!(s.alpn(), ALPN_SYNC);

        let (ha, hb) = (hello(&a, "alpha"), hello(&b, "beta"));
        let (cs, ss) = tokio::join!(
            open_session(&c, true, &hb, T),
            open_session(&s, false, &ha, T)
        );
        let (mut cs, mut ss) = (cs.expect("client session"), ss.expect("server session"));
        assert_eq!(cs.peer_hello.node_name, "alpha");
        assert_eq!(ss.peer_hello.node_name, "beta");
        assert_eq!((cs.minor, ss.minor), (1, 1));

        // Frame helpers round-trip several messages, including a large one.
        let big = Message::Bye {
            reason: "x".repeat(200_000),
        };
        for m in [
            Message::Ping { nonce: 7 },
            big.clone(),
            Message::Pong { nonce: 8 },
        ] {
            send_msg(&mut cs.send, &m).await.expect("send");
            let got = recv_msg(&mut ss.recv, &mut ss.decoder, T)
                .await
                .expect("recv");
            assert_eq!(got, m);
        }
    }

    /// In TLS 1.3 the client's handshake completes before the server has
    /// checked the client's certificate, so a refused client sees either a
    /// failed handshake or a connection the server closes at once with a
    /// TLS (crypto) error, before any stream can carry data.
    async fn assert_client_refused(c: Result<PeerConnection, EndpointError>, me: &rcgen::KeyPair) {
        let conn = match c {
            Err(e) => {
                assert!(e.is_auth_failure(), "{e:?}");
                return;
            }
            Ok(conn) => conn,
        };
        let closed = tokio::time::timeout(T, conn.quinn().closed())
            .await
            .expect("the server closes the connection");
        match &closed {
            quinn::ConnectionError::ConnectionClosed(c) => {
                assert!(
                    format!("{:?}", c.error_code).contains("crypto")
                        || c.error_code.to_string().contains("TLS"),
                    "closed with a TLS alert: {closed:?}"
                );
            }
            other => panic!("expected a TLS close, got {other:?}"),
        }
        let err = open_session(&conn, true, &hello(me, "x"), T)
            .await
            .expect_err("no application data after refusal");
        assert_eq!(err.blame(), Blame::Transient, "{err:?}");
    }

    #[tokio::test]
    async fn unpaired_client_is_refused_in_the_handshake() {
        let (a, stranger) = (key(), key());
        let srv = server(&a, &[]);
        let (_cl, c, s) = dial(&srv, &stranger, fp(&a)).await;
        assert!(
            matches!(s, Some(Err(EndpointError::Handshake { .. }))),
            "the server yields no connection: {s:?}"
        );
        assert_client_refused(c, &stranger).await;
    }

    #[tokio::test]
    async fn client_refuses_a_server_with_another_key() {
        let (a, b, other) = (key(), key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (_cl, c, s) = dial(&srv, &b, fp(&other)).await;
        let err = c.expect_err("a server with an unexpected key must be refused");
        assert!(matches!(err, EndpointError::Handshake { .. }), "{err:?}");
        assert!(matches!(s, Some(Err(_))), "{s:?}");
    }

    #[tokio::test]
    async fn unpairing_takes_effect_for_the_next_connection() {
        let (a, b) = (key(), key());
        let set = Arc::new(RwLock::new(HashSet::from([fp(&b)])));
        let srv = Endpoint::bind(loopback(), &a, Role::Sync(AllowList::shared(set.clone())))
            .expect("bind");
        let (_c1, c, s) = dial(&srv, &b, fp(&a)).await;
        assert!(c.is_ok() && matches!(s, Some(Ok(_))));
        set.write().expect("lock").clear();
        let (_c2, c, s) = dial(&srv, &b, fp(&a)).await;
        assert!(matches!(s, Some(Err(_))), "{s:?}");
        assert_client_refused(c, &b).await;
    }

    /// A connected pair plus the server's accepted stream, with the client
    /// writing raw bytes.
    async fn raw_stream(
        bytes: &[u8],
    ) -> (Endpoint, Endpoint, quinn::SendStream, quinn::RecvStream) {
        let (a, b) = (key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (cl, c, s) = dial(&srv, &b, fp(&a)).await;
        let (c, s) = (c.expect("connect"), s.expect("incoming").expect("accept"));
        let (mut send, _recv) = c.quinn().open_bi().await.expect("open");
        send.write_all(bytes).await.expect("write raw");
        let (_ssend, srecv) = s.quinn().accept_bi().await.expect("accept stream");
        let (csend, _) = c.quinn().open_bi().await.expect("keep");
        (srv, cl, csend, srecv)
    }

    #[tokio::test]
    async fn oversized_frame_header_is_refused_before_allocating() {
        let mut bytes = u32::MAX.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 100]);
        let (_s, _c, _keep, mut recv) = raw_stream(&bytes).await;
        let mut dec = FrameDecoder::new();
        let err = recv_msg(&mut recv, &mut dec, T).await.expect_err("refused");
        assert!(
            matches!(err, SessionError::Frame(FrameError::TooLarge { len, .. }) if len == u64::from(u32::MAX)),
            "{err:?}"
        );
        assert_eq!(dec.buffered(), 0, "nothing of the oversized frame was kept");
        assert_eq!(err.blame(), Blame::Peer);
    }

    #[tokio::test]
    async fn garbage_frame_is_an_error_not_a_panic() {
        let mut bytes = 5u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0xff, 0x00, 0x13, 0x37, 0x42]);
        let (_s, _c, _keep, mut recv) = raw_stream(&bytes).await;
        let mut dec = FrameDecoder::new();
        let err = recv_msg(&mut recv, &mut dec, T).await.expect_err("refused");
        assert!(
            matches!(err, SessionError::Frame(FrameError::Message(_))),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn wrong_major_hello_gets_refuse_and_both_sides_explain() {
        let (a, b) = (key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (_cl, c, s) = dial(&srv, &b, fp(&a)).await;
        let (c, s) = (c.expect("connect"), s.expect("incoming").expect("accept"));
        let mut bad = hello(&b, "future");
        bad.major = 2;
        // The raw client sends its Hello and reads whatever comes back.
        let client = async {
            let (mut send, mut recv) = c.quinn().open_bi().await.expect("open");
            send_msg(&mut send, &Message::Hello(bad))
                .await
                .expect("send hello");
            let mut dec = FrameDecoder::new();
            let first = recv_msg(&mut recv, &mut dec, T)
                .await
                .expect("server hello");
            let second = recv_msg(&mut recv, &mut dec, T).await.expect("refuse");
            (first, second)
        };
        let ha = hello(&a, "alpha");
        let (client, server_side) = tokio::join!(client, open_session(&s, false, &ha, T));
        assert!(matches!(client.0, Message::Hello(_)));
        match client.1 {
            Message::Refuse { code, reason } => {
                assert_eq!(code, RefuseCode::Incompatible);
                assert!(reason.contains("upgrade"), "readable: {reason}");
            }
            other => panic!("expected refuse, got {other:?}"),
        }
        let err = server_side.expect_err("server refuses");
        assert!(
            matches!(
                err,
                SessionError::Version(VersionError::MajorMismatch {
                    local: 1,
                    remote: 2
                })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("upgrade"));
    }

    #[tokio::test]
    async fn minor_skew_without_overlap_fails_on_both_sides() {
        let (a, b) = (key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (_cl, c, s) = dial(&srv, &b, fp(&a)).await;
        let (c, s) = (c.expect("connect"), s.expect("incoming").expect("accept"));
        let mut newer = hello(&b, "newer");
        newer.minor = 9;
        newer.min_minor = 5;
        let older = hello(&a, "older");
        let (cr, sr) = tokio::join!(
            open_session(&c, true, &newer, T),
            open_session(&s, false, &older, T)
        );
        let (ce, se) = (cr.expect_err("client fails"), sr.expect_err("server fails"));
        assert!(
            matches!(ce, SessionError::Version(VersionError::PeerTooOld { .. })),
            "{ce:?}"
        );
        assert!(
            matches!(se, SessionError::Version(VersionError::PeerTooNew { .. })),
            "{se:?}"
        );
    }

    #[tokio::test]
    async fn hello_with_someone_elses_node_id_is_refused() {
        let (a, b) = (key(), key());
        let srv = server(&a, &[fp(&b)]);
        let (_cl, c, s) = dial(&srv, &b, fp(&a)).await;
        let (c, s) = (c.expect("connect"), s.expect("incoming").expect("accept"));
        let liar = hello(&a, "impostor"); // a's id on b's key
        let ha = hello(&a, "alpha");
        let (cr, sr) = tokio::join!(
            open_session(&c, true, &liar, T),
            open_session(&s, false, &ha, T)
        );
        assert!(
            matches!(sr, Err(SessionError::NodeIdMismatch { .. })),
            "{sr:?}"
        );
        assert!(cr.is_ok() || matches!(cr, Err(SessionError::Refused { .. })));
    }
}
