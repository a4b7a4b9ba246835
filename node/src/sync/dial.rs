//! Reaching a paired peer: where to dial it (its remembered addresses, the
//! address it last connected from, its host names resolved at dial time,
//! the default port on each of those hosts), and a probe that completes
//! the handshake without a session (`cairn doctor`). Dialing all candidates
//! at once is `Endpoint::connect_any`; this module picks the candidates
//! and turns the failures into one [`SyncError`].

use std::net::SocketAddr;
use std::time::Duration;

use cairn_protocol::ALPN_SYNC;

use super::DEFAULT_PORT;
use super::endpoint::{Endpoint, EndpointError, PeerConnection};
use super::error::SyncError;
use super::peers::Peer;

/// Most dial candidates tried per peer.
const MAX_DIAL_CANDIDATES: usize = 12;

/// Where to dial `peer`: its remembered addresses, the address it last
/// connected from, then the default serve port on each of those hosts
/// (a pairing made on another port still finds the daemon). Only
/// addresses of the family `family_of` can reach are kept.
pub fn dial_candidates(peer: &Peer, family_of: SocketAddr) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    let mut push = |a: SocketAddr| {
        if a.is_ipv4() == family_of.is_ipv4() && !out.contains(&a) && a.port() != 0 {
            out.push(a);
        }
    };
    for a in &peer.addresses {
        push(*a);
    }
    if let Some(a) = peer.last_addr {
        push(a);
    }
    let known: Vec<SocketAddr> = peer
        .addresses
        .iter()
        .copied()
        .chain(peer.last_addr)
        .collect();
    for a in known {
        push(SocketAddr::new(a.ip(), DEFAULT_PORT));
    }
    out.truncate(MAX_DIAL_CANDIDATES);
    out
}

/// How long resolving a peer's host names may take before dialing.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Resolves `hosts` (`name:port`) now, keeping addresses of `family_of`'s
/// family; names that do not resolve in time are skipped (and logged).
pub async fn resolve_hosts(hosts: &[String], family_of: SocketAddr) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    let mut set = tokio::task::JoinSet::new();
    for h in hosts.iter().take(MAX_DIAL_CANDIDATES) {
        let h = h.clone();
        set.spawn(async move {
            let r = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(h.clone())).await;
            (h, r)
        });
    }
    // Bounded: one result per name, each bounded by the timeout.
    while let Some(joined) = set.join_next().await {
        let Ok((h, r)) = joined else { continue };
        match r {
            Ok(Ok(addrs)) => {
                for a in addrs {
                    if a.is_ipv4() == family_of.is_ipv4() && !out.contains(&a) {
                        out.push(a);
                    }
                }
            }
            Ok(Err(e)) => tracing::debug!(host = %h, error = %e, "host name did not resolve"),
            Err(_) => tracing::debug!(host = %h, "host name resolution timed out"),
        }
    }
    out
}

/// Every address to dial for `peer`: its host names resolved now, then
/// its stored addresses ([`dial_candidates`]).
pub async fn dial_targets(peer: &Peer, local: SocketAddr) -> Vec<SocketAddr> {
    let mut out = resolve_hosts(&peer.hosts, local).await;
    for a in dial_candidates(peer, local) {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out.truncate(2 * MAX_DIAL_CANDIDATES);
    out
}

/// Checks that `peer` answers with its pinned key and accepts this node's:
/// dials all its addresses at once ([`Endpoint::connect_any`]), completes
/// the handshake and closes without a session. Returns the address that
/// answered.
pub async fn probe(endpoint: &Endpoint, peer: &Peer) -> Result<SocketAddr, SyncError> {
    let (conn, addr) = connect(endpoint, peer).await?;
    // A refusal of our key arrives just after the handshake.
    let closed = tokio::time::timeout(PROBE_LINGER, conn.quinn().closed()).await;
    if let Ok(reason) = closed {
        // Code 2 is the listener's "not paired" (see `Endpoint::accept`).
        let not_paired = matches!(&reason, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == quinn::VarInt::from_u32(2));
        let source = EndpointError::Handshake {
            addr,
            source: reason,
        };
        if not_paired || source.is_auth_failure() {
            // Its key was the pinned one: the handshake completed.
            return Err(SyncError::Refused {
                name: peer.name.clone(),
                addr,
                stranger: false,
                source: Box::new(source),
            });
        }
    }
    conn.close(0, b"probe");
    Ok(addr)
}

/// Dials every candidate address of `peer` at once ([`dial_targets`],
/// [`Endpoint::connect_any`]) and completes the handshake with its pinned
/// key: the connection and the address that answered, or why none did.
pub async fn connect(
    endpoint: &Endpoint,
    peer: &Peer,
) -> Result<(PeerConnection, SocketAddr), SyncError> {
    let fp = peer.fingerprint_bytes().ok_or_else(|| SyncError::BadPeer {
        name: peer.name.clone(),
    })?;
    let local = endpoint
        .local_addr()
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
    let candidates = dial_targets(peer, local).await;
    endpoint
        .connect_any(&candidates, &fp, ALPN_SYNC)
        .await
        .map_err(|failures| dial_failure(peer, candidates, failures))
}

/// How long a probe waits after the handshake for the peer to refuse us.
const PROBE_LINGER: Duration = Duration::from_millis(300);

/// Whether `addr` is only a guess at where `peer`'s daemon may be: the
/// default port on a host it was known at ([`dial_candidates`]), not an
/// address it was paired or last seen at. When one of its host names is
/// on the default port, no address on that port is taken for a guess:
/// what the names resolved to is known only while dialing.
fn guessed(peer: &Peer, addr: SocketAddr) -> bool {
    let named = |h: &String| {
        h.rsplit_once(':')
            .is_some_and(|(_, port)| port.parse() == Ok(DEFAULT_PORT))
    };
    addr.port() == DEFAULT_PORT
        && !peer.addresses.contains(&addr)
        && peer.last_addr != Some(addr)
        && !peer.hosts.iter().any(named)
}

/// Turns the failures of every dial into one error: `Refused` when some
/// host answered with a refusal or another key, else `Unreachable`. A
/// stranger at a guessed address (another node, or not cairn, on the
/// default port of a host the peer was known at) says nothing of the
/// peer: it counts as no answer there.
pub(super) fn dial_failure(
    peer: &Peer,
    tried: Vec<SocketAddr>,
    mut failures: Vec<EndpointError>,
) -> SyncError {
    for e in &failures {
        tracing::debug!(peer = %peer.node_id, error = %e, "dial failed");
    }
    let telling = |e: &EndpointError| {
        e.is_auth_failure() && !(e.is_stranger() && e.addr().is_some_and(|a| guessed(peer, a)))
    };
    if let Some(i) = failures.iter().position(telling) {
        let source = failures.swap_remove(i);
        let addr = source.addr().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        return SyncError::Refused {
            name: peer.name.clone(),
            addr,
            stranger: source.is_stranger(),
            source: Box::new(source),
        };
    }
    SyncError::Unreachable {
        name: peer.name.clone(),
        tried,
        last: failures.pop().map(Box::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dial_candidates_try_known_addresses_then_the_default_port() {
        let fp = [7u8; 32];
        let mut p = Peer::new(&fp, "x", vec!["10.0.0.2:4000".parse().expect("addr")], 0);
        p.last_addr = Some("10.0.0.3:5000".parse().expect("addr"));
        p.addresses.push("[::1]:4000".parse().expect("addr"));
        let v4: SocketAddr = "0.0.0.0:0".parse().expect("addr");
        let got: Vec<String> = dial_candidates(&p, v4)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "10.0.0.2:4000",
                "10.0.0.3:5000",
                "10.0.0.2:7878",
                "10.0.0.3:7878"
            ]
        );
        let v6: SocketAddr = "[::]:0".parse().expect("addr");
        assert_eq!(dial_candidates(&p, v6).len(), 2);
    }

    /// A handshake this side ended: the key that answered is not the peer's.
    fn stranger(addr: &str) -> EndpointError {
        EndpointError::Handshake {
            addr: addr.parse().expect("addr"),
            source: quinn::ConnectionError::TransportError(
                quinn::TransportErrorCode::crypto(42).into(),
            ),
        }
    }

    /// A handshake the other side ended: it refused this node's key.
    fn refusal(addr: &str) -> EndpointError {
        EndpointError::Handshake {
            addr: addr.parse().expect("addr"),
            source: quinn::ConnectionError::ConnectionClosed(quinn::ConnectionClose {
                error_code: quinn::TransportErrorCode::crypto(42),
                frame_type: None,
                reason: Default::default(),
            }),
        }
    }

    fn silence(addr: &str) -> EndpointError {
        EndpointError::HandshakeTimeout {
            addr: addr.parse().expect("addr"),
            after: Duration::from_secs(3),
        }
    }

    fn verdict(peer: &Peer, failures: Vec<EndpointError>) -> &'static str {
        match dial_failure(peer, Vec::new(), failures) {
            SyncError::Refused { stranger: true, .. } => "a stranger",
            SyncError::Refused { .. } => "refused",
            SyncError::Unreachable { .. } => "unreachable",
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stranger_on_a_guessed_default_port_is_no_answer_from_the_peer() {
        let fp = [7u8; 32];
        let mut p = Peer::new(&fp, "x", vec!["127.0.0.1:4000".parse().expect("addr")], 0);
        p.last_addr = Some("127.0.0.1:5000".parse().expect("addr"));
        // Another node on the default port of the peer's host, nothing
        // where the peer was: the peer is unreachable.
        let guess = "127.0.0.1:7878";
        let quiet = || vec![silence("127.0.0.1:4000"), silence("127.0.0.1:5000")];
        let with = |e: EndpointError| quiet().into_iter().chain([e]).collect::<Vec<_>>();
        assert_eq!(verdict(&p, with(stranger(guess))), "unreachable");
        // The peer itself refusing this node there, or anyone answering
        // at an address the peer was paired or last seen at, still tells.
        // (said as a stranger when its key was not the peer's).
        assert_eq!(verdict(&p, with(refusal(guess))), "refused");
        assert_eq!(verdict(&p, with(stranger("127.0.0.1:4000"))), "a stranger");
        assert_eq!(verdict(&p, with(stranger("127.0.0.1:5000"))), "a stranger");
        // Paired at the default port, or named by a host name on it: not a guess.
        let mut at_default = p.clone();
        at_default.addresses.push(guess.parse().expect("addr"));
        assert_eq!(verdict(&at_default, with(stranger(guess))), "a stranger");
        let mut named = p.clone();
        named.hosts.push("box.local:7878".to_owned());
        assert_eq!(verdict(&named, with(stranger(guess))), "a stranger");
        assert_eq!(verdict(&p, quiet()), "unreachable");
    }

    #[test]
    fn a_refusal_and_a_stranger_are_told_apart_in_words() {
        let fp = [7u8; 32];
        let p = Peer::new(
            &fp,
            "laptop",
            vec!["10.0.0.2:4000".parse().expect("addr")],
            0,
        );
        let said = |e: EndpointError| dial_failure(&p, Vec::new(), vec![e]).to_string();
        assert_eq!(
            said(refusal("10.0.0.2:4000")),
            "laptop refused the connection at 10.0.0.2:4000 (not paired there any more?)"
        );
        assert_eq!(
            said(stranger("10.0.0.2:4000")),
            "laptop is not at 10.0.0.2:4000: a machine with another key answered there \
             (laptop moved, or was set up again with a new key?)"
        );
    }
}
