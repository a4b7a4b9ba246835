//! TLS identities with pinned peer keys.
//!
//! Owns the node's self-signed certificate (made with rcgen from the
//! identity key, on each start: it is cheap and nothing depends on its bytes
//! but the key) and the rustls configurations: TLS 1.3 only, the `ring`
//! provider (no process-wide provider state), both sides present
//! certificates, and custom verifiers that ignore names, CA chains and
//! validity dates and accept a peer only when the blake3 fingerprint of its
//! SubjectPublicKeyInfo is allowed. An unpaired key is therefore refused
//! inside the handshake, before any application data. Handshake signatures
//! (`CertificateVerify`) are always checked with the provider's algorithms,
//! so presenting someone else's public certificate gets nobody in.
//!
//! Never reads files and never touches sockets: `endpoint` wraps these
//! configurations in quinn.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, RwLock};

use cairn_protocol::{SpkiFingerprint, spki_fingerprint};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// Name put in the certificate and sent as SNI. Ignored by both verifiers:
/// peers are known by key, not by name.
pub const CERT_NAME: &str = "cairn.invalid";

/// Failures building certificates or TLS configurations.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not make the self-signed certificate.
    #[error("make the node certificate")]
    Certificate(#[source] rcgen::Error),
    /// rustls rejected the configuration (key type, versions).
    #[error("build the {side} tls configuration")]
    Config {
        /// `"server"` or `"client"`.
        side: &'static str,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
    /// The configuration has no cipher suite QUIC can use.
    #[error("build the {side} quic crypto configuration")]
    Quic {
        /// `"server"` or `"client"`.
        side: &'static str,
        /// What quinn said.
        #[source]
        source: quinn::crypto::rustls::NoInitialCipherSuite,
    },
}

/// The node's certificate and private key, ready for rustls.
pub struct NodeCert {
    cert: CertificateDer<'static>,
    key_der: Vec<u8>,
    fingerprint: SpkiFingerprint,
}

impl fmt::Debug for NodeCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCert")
            .field(
                "node_id",
                &cairn_protocol::NodeId::from_fingerprint(&self.fingerprint),
            )
            .finish_non_exhaustive()
    }
}

impl NodeCert {
    /// A self-signed certificate for this key pair (the node's identity key).
    pub fn new(key: &rcgen::KeyPair) -> Result<NodeCert, TlsError> {
        let params = rcgen::CertificateParams::new(vec![CERT_NAME.to_owned()])
            .map_err(TlsError::Certificate)?;
        let cert = params.self_signed(key).map_err(TlsError::Certificate)?;
        let spki = rcgen::PublicKeyData::subject_public_key_info(key);
        Ok(NodeCert {
            cert: cert.der().clone(),
            key_der: key.serialize_der(),
            fingerprint: spki_fingerprint(&spki),
        })
    }

    /// The blake3 fingerprint of this node's SubjectPublicKeyInfo.
    pub fn fingerprint(&self) -> SpkiFingerprint {
        self.fingerprint
    }

    /// The certificate DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// Which peer keys a node accepts: the peer table's fingerprints, asked at
/// every handshake (so a pairing or an unpairing takes effect at once).
#[derive(Clone)]
pub struct AllowList(Arc<dyn Fn(&SpkiFingerprint) -> bool + Send + Sync>);

impl fmt::Debug for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AllowList(..)")
    }
}

impl AllowList {
    /// Allows what `f` says.
    pub fn from_fn(f: impl Fn(&SpkiFingerprint) -> bool + Send + Sync + 'static) -> AllowList {
        AllowList(Arc::new(f))
    }

    /// Allows exactly these keys.
    pub fn fixed(keys: impl IntoIterator<Item = SpkiFingerprint>) -> AllowList {
        let set: HashSet<SpkiFingerprint> = keys.into_iter().collect();
        AllowList::from_fn(move |fp| set.contains(fp))
    }

    /// Allows whatever the shared set holds at handshake time.
    pub fn shared(set: Arc<RwLock<HashSet<SpkiFingerprint>>>) -> AllowList {
        AllowList::from_fn(move |fp| set.read().map(|s| s.contains(fp)).unwrap_or(false))
    }

    /// Whether this key may connect.
    pub fn allows(&self, fp: &SpkiFingerprint) -> bool {
        (self.0)(fp)
    }
}

/// Which client keys a server accepts.
#[derive(Debug, Clone)]
pub enum ClientPolicy {
    /// Only keys on the allow-list (ALPN `cairn/1`).
    Pinned(AllowList),
    /// Any key that proves possession of its private key (ALPN
    /// `cairn-pair/1`: the joiner's key is learned through the pairing
    /// exchange that follows, never trusted from the handshake alone).
    AnyKey,
}

/// The crypto provider every configuration uses: `ring`, explicitly, so
/// no process-level default is needed or consulted.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The fingerprint of the SubjectPublicKeyInfo inside a certificate.
pub fn cert_fingerprint(cert: &CertificateDer<'_>) -> Result<SpkiFingerprint, rustls::Error> {
    let parsed = ParsedCertificate::try_from(cert)?;
    Ok(spki_fingerprint(parsed.subject_public_key_info().as_ref()))
}

/// A rustls server configuration: TLS 1.3, client certificates required and
/// checked by `policy`, the given ALPN names.
pub fn server_config(
    cert: &NodeCert,
    alpns: &[&[u8]],
    policy: ClientPolicy,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = provider();
    let verifier = PinnedClientVerifier {
        policy,
        algs: provider.signature_verification_algorithms,
    };
    let cfg_err = |source| TlsError::Config {
        side: "server",
        source,
    };
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(cfg_err)?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(vec![cert.cert.clone()], cert.key())
        .map_err(cfg_err)?;
    cfg.alpn_protocols = alpns.iter().map(|a| a.to_vec()).collect();
    Ok(cfg)
}

/// A rustls client configuration: TLS 1.3, presents this node's
/// certificate, accepts only a server whose key has fingerprint `expected`,
/// offers exactly one ALPN name.
pub fn client_config(
    cert: &NodeCert,
    alpn: &[u8],
    expected: SpkiFingerprint,
) -> Result<rustls::ClientConfig, TlsError> {
    let provider = provider();
    let verifier = PinnedServerVerifier {
        expected,
        algs: provider.signature_verification_algorithms,
    };
    let cfg_err = |source| TlsError::Config {
        side: "client",
        source,
    };
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(cfg_err)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(vec![cert.cert.clone()], cert.key())
        .map_err(cfg_err)?;
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Ok(cfg)
}

/// The error a verifier returns for a key it does not accept.
fn not_allowed() -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure)
}

fn no_tls12() -> rustls::Error {
    rustls::Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOffered)
}

/// Client side: the server must present the pinned key.
#[derive(Debug)]
struct PinnedServerVerifier {
    expected: SpkiFingerprint,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !intermediates.is_empty() {
            return Err(not_allowed());
        }
        let fp = cert_fingerprint(end_entity)?;
        // Not secret: the fingerprint is public. Plain comparison is fine.
        if fp == self.expected {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(not_allowed())
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(no_tls12())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Server side: the client must present a certificate, and its key must
/// pass the policy.
#[derive(Debug)]
struct PinnedClientVerifier {
    policy: ClientPolicy,
    algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for PinnedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if !intermediates.is_empty() {
            return Err(not_allowed());
        }
        let fp = cert_fingerprint(end_entity)?;
        let ok = match &self.policy {
            ClientPolicy::Pinned(allow) => allow.allows(&fp),
            ClientPolicy::AnyKey => true,
        };
        if ok {
            Ok(ClientCertVerified::assertion())
        } else {
            tracing::warn!(
                peer = %cairn_protocol::NodeId::from_fingerprint(&fp),
                "refused a client key that is not paired"
            );
            Err(not_allowed())
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(no_tls12())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> rcgen::KeyPair {
        rcgen::KeyPair::generate().expect("generate key")
    }

    #[test]
    fn cert_fingerprint_is_the_identity_fingerprint() {
        let k = key();
        let cert = NodeCert::new(&k).expect("cert");
        let spki = rcgen::PublicKeyData::subject_public_key_info(&k);
        assert_eq!(cert.fingerprint(), spki_fingerprint(&spki));
        assert_eq!(
            cert_fingerprint(cert.cert_der()).expect("parse"),
            cert.fingerprint()
        );
        // The node id derived from the TLS key is the identity's node id.
        assert_eq!(
            cairn_protocol::NodeId::from_fingerprint(&cert.fingerprint()),
            crate::identity::node_id(&spki)
        );
    }

    #[test]
    fn garbage_certificate_is_an_error_not_a_panic() {
        let bad = CertificateDer::from(vec![0x30, 0x03, 0x01, 0x02]);
        assert!(matches!(
            cert_fingerprint(&bad),
            Err(rustls::Error::InvalidCertificate(_))
        ));
    }

    #[test]
    fn verifiers_accept_only_allowed_keys() {
        let (a, b) = (key(), key());
        let (ca, cb) = (NodeCert::new(&a).expect("a"), NodeCert::new(&b).expect("b"));
        let algs = provider().signature_verification_algorithms;
        let name = ServerName::try_from(CERT_NAME).expect("name");
        let server_side = PinnedServerVerifier {
            expected: ca.fingerprint(),
            algs,
        };
        assert!(
            server_side
                .verify_server_cert(ca.cert_der(), &[], &name, &[], UnixTime::now())
                .is_ok()
        );
        assert!(matches!(
            server_side.verify_server_cert(cb.cert_der(), &[], &name, &[], UnixTime::now()),
            Err(rustls::Error::InvalidCertificate(_))
        ));
        // A chain with intermediates is not how cairn nodes present themselves.
        assert!(
            server_side
                .verify_server_cert(
                    ca.cert_der(),
                    &[cb.cert_der().clone()],
                    &name,
                    &[],
                    UnixTime::now()
                )
                .is_err()
        );
        let client_side = PinnedClientVerifier {
            policy: ClientPolicy::Pinned(AllowList::fixed([cb.fingerprint()])),
            algs,
        };
        assert!(client_side.client_auth_mandatory());
        assert!(
            client_side
                .verify_client_cert(cb.cert_der(), &[], UnixTime::now())
                .is_ok()
        );
        assert!(
            client_side
                .verify_client_cert(ca.cert_der(), &[], UnixTime::now())
                .is_err()
        );
        let any = PinnedClientVerifier {
            policy: ClientPolicy::AnyKey,
            algs,
        };
        assert!(
            any.verify_client_cert(ca.cert_der(), &[], UnixTime::now())
                .is_ok()
        );
    }

    #[test]
    fn shared_allow_list_follows_changes() {
        let set = Arc::new(RwLock::new(HashSet::new()));
        let allow = AllowList::shared(set.clone());
        let fp = [7u8; 32];
        assert!(!allow.allows(&fp));
        set.write().expect("lock").insert(fp);
        assert!(allow.allows(&fp));
        set.write().expect("lock").remove(&fp);
        assert!(!allow.allows(&fp));
    }

    #[test]
    fn configs_build_for_quic() {
        let k = key();
        let c = NodeCert::new(&k).expect("cert");
        let s =
            server_config(&c, &[cairn_protocol::ALPN_SYNC], ClientPolicy::AnyKey).expect("server");
        assert_eq!(s.alpn_protocols, vec![cairn_protocol::ALPN_SYNC.to_vec()]);
        quinn::crypto::rustls::QuicServerConfig::try_from(s).expect("quic server");
        let cl = client_config(&c, cairn_protocol::ALPN_PAIR, [0; 32]).expect("client");
        quinn::crypto::rustls::QuicClientConfig::try_from(cl).expect("quic client");
    }
}
