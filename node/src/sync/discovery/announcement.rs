//! What a cairn daemon says on the LAN and how it reads what others say:
//! the pure half of LAN discovery (no sockets, no clocks, no files).
//!
//! A daemon announces one DNS-SD service instance of type
//! [`SERVICE_TYPE`]. Its instance name, its host name and its one
//! meaningful TXT entry all carry the same [`Digest`]: a keyed blake3 hash
//! of the node id and the current hour ([`epoch_of`]), cut to 8 bytes, so
//! the tag changes every hour and a machine cannot be followed from one
//! network to the next by it. Nothing else is announced: no machine name,
//! no user name, no path, not the node id itself. The SRV record gives the
//! sync port, the A/AAAA records the addresses.
//!
//! A browsing daemon turns each resolved instance into a [`Heard`] value,
//! checks it with [`parse`] (anything malformed is rejected with a reason,
//! never a panic) and sorts it with a [`Matcher`] built from its own node
//! id and its paired peers' ids: its own announcement, a paired peer, or a
//! stranger. [`Recent`] decides when a peer seen again is worth reporting.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// The DNS-SD service type cairn daemons announce and browse.
pub const SERVICE_TYPE: &str = "_cairn._udp.local.";
/// TXT key of the format version.
pub const TXT_VERSION: &str = "v";
/// TXT key of the node-id digest.
pub const TXT_DIGEST: &str = "d";
/// The only format version read and written.
pub const VERSION: &str = "1";
/// Bytes of the blake3 output kept in a digest.
pub const DIGEST_BYTES: usize = 8;
/// Most addresses taken from one announcement.
pub const MAX_ADDRS: usize = 4;
/// Most TXT entries looked at (a real announcement has two).
const MAX_TXT: usize = 16;
/// Length of one digest epoch: the announced tag changes this often.
pub const EPOCH_SECS: u64 = 3600;
/// blake3 key-derivation context: the digest is not a plain hash of the id.
const CONTEXT: &str = "cairn 2026 LAN discovery: node id digest v1";

/// The digest epoch of a Unix time in seconds (the hour since 1970).
pub fn epoch_of(unix_secs: u64) -> u64 {
    unix_secs / EPOCH_SECS
}

/// A short digest of a node id in one epoch, announced instead of the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; DIGEST_BYTES]);

impl Digest {
    /// The digest of a node id (the base32 text form) in `epoch`.
    pub fn of_node_id(node_id: &str, epoch: u64) -> Digest {
        let mut material = Vec::with_capacity(node_id.len() + 8);
        material.extend_from_slice(node_id.as_bytes());
        material.extend_from_slice(&epoch.to_le_bytes());
        let full = blake3::derive_key(CONTEXT, &material);
        let mut out = [0u8; DIGEST_BYTES];
        out.copy_from_slice(&full[..DIGEST_BYTES]);
        Digest(out)
    }

    /// The DNS-SD instance name: the digest itself.
    pub fn instance_name(&self) -> String {
        self.to_string()
    }

    /// The host name the daemon announces its addresses under.
    pub fn host_name(&self) -> String {
        format!("cairn-{self}.local.")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex::encode(&self.0))
    }
}

impl FromStr for Digest {
    type Err = Malformed;

    /// Exactly 16 lowercase hex digits.
    fn from_str(s: &str) -> Result<Digest, Malformed> {
        let b = s.as_bytes();
        if b.len() != 2 * DIGEST_BYTES {
            return Err(Malformed::Digest);
        }
        let nib = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut out = [0u8; DIGEST_BYTES];
        for (i, o) in out.iter_mut().enumerate() {
            let hi = nib(b[2 * i]).ok_or(Malformed::Digest)?;
            let lo = nib(b[2 * i + 1]).ok_or(Malformed::Digest)?;
            *o = (hi << 4) | lo;
        }
        Ok(Digest(out))
    }
}

/// The TXT entries of this node's announcement.
pub fn txt_entries(digest: &Digest) -> Vec<(&'static str, String)> {
    vec![
        (TXT_VERSION, VERSION.to_owned()),
        (TXT_DIGEST, digest.to_string()),
    ]
}

/// One resolved service instance as the mDNS library hands it over.
#[derive(Debug, Clone, Default)]
pub struct Heard<'a> {
    /// `instance._cairn._udp.local.`
    pub fullname: &'a str,
    /// The SRV port.
    pub port: u16,
    /// TXT entries: key and value (`None` for a key without `=`).
    pub txt: Vec<(&'a str, Option<&'a [u8]>)>,
    /// The A/AAAA addresses.
    pub addrs: Vec<IpAddr>,
}

/// Why an announcement was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not an instance of [`SERVICE_TYPE`].
    #[error("not a cairn service name")]
    Name,
    /// A version other than [`VERSION`], or none.
    #[error("unknown or missing version")]
    Version,
    /// The digest is not 16 lowercase hex digits, or appears twice.
    #[error("bad digest")]
    Digest,
    /// The instance name is not the TXT digest.
    #[error("instance name and digest differ")]
    Mismatch,
    /// Port 0.
    #[error("no port")]
    Port,
    /// No address a peer could be dialed at.
    #[error("no usable address")]
    NoAddress,
    /// More TXT entries than any real announcement has.
    #[error("too many TXT entries")]
    TooManyEntries,
}

/// A well-formed announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Whose it is.
    pub digest: Digest,
    /// Where its daemon listens (at most [`MAX_ADDRS`], sorted).
    pub addrs: Vec<SocketAddr>,
}

/// Whether an announced address can be dialed by a daemon whose endpoint
/// is of the family `v4`: same family, a unicast address of another
/// machine (not loopback, unspecified, multicast or broadcast), and not an
/// IPv6 link-local address (it needs a scope the dial cannot give).
pub fn usable(ip: IpAddr, v4: bool) -> bool {
    if ip.is_ipv4() != v4 || ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return false;
    }
    match ip {
        IpAddr::V4(a) => !(a.is_broadcast() || a.is_link_local()),
        IpAddr::V6(a) => !a.is_unicast_link_local(),
    }
}

/// Checks an announcement: the name is `<digest>.` + [`SERVICE_TYPE`],
/// version [`VERSION`], one TXT digest equal to the instance name, a port,
/// and at least one address [`usable`] for an endpoint of family `v4`.
pub fn parse(h: &Heard<'_>, v4: bool) -> Result<Seen, Malformed> {
    let instance = h
        .fullname
        .strip_suffix(SERVICE_TYPE)
        .and_then(|s| s.strip_suffix('.'))
        .ok_or(Malformed::Name)?;
    if h.txt.len() > MAX_TXT {
        return Err(Malformed::TooManyEntries);
    }
    let mut version = None;
    let mut digest = None;
    for (k, v) in &h.txt {
        // DNS-SD keys are case-insensitive; the first of a repeated key counts.
        if k.eq_ignore_ascii_case(TXT_VERSION) && version.is_none() {
            version = Some(*v);
        } else if k.eq_ignore_ascii_case(TXT_DIGEST) {
            if digest.is_some() {
                return Err(Malformed::Digest);
            }
            digest = Some(*v);
        }
    }
    if version != Some(Some(VERSION.as_bytes())) {
        return Err(Malformed::Version);
    }
    let digest: Digest = digest
        .flatten()
        .and_then(|v| std::str::from_utf8(v).ok())
        .ok_or(Malformed::Digest)?
        .parse()?;
    if instance != digest.to_string() {
        return Err(Malformed::Mismatch);
    }
    if h.port == 0 {
        return Err(Malformed::Port);
    }
    let mut ips: Vec<IpAddr> = h
        .addrs
        .iter()
        .copied()
        .filter(|ip| usable(*ip, v4))
        .collect();
    ips.sort();
    ips.dedup();
    ips.truncate(MAX_ADDRS);
    if ips.is_empty() {
        return Err(Malformed::NoAddress);
    }
    Ok(Seen {
        digest,
        addrs: ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, h.port))
            .collect(),
    })
}

/// Whose announcement it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// This node's own.
    Own,
    /// A paired peer's, by node id.
    Peer(&'a str),
    /// Nobody this node is paired with.
    Unknown,
}

/// Maps digests back to the paired peers (and this node) they stand for.
/// A digest of the epoch before or after `epoch` matches too, so clocks a
/// little apart, or an announcement made just before the hour, still match.
#[derive(Debug, Clone)]
pub struct Matcher {
    epoch: u64,
    own: Vec<Digest>,
    peers: HashMap<Digest, String>,
    count: usize,
}

/// The epochs a matcher for `epoch` accepts.
fn around(epoch: u64) -> impl Iterator<Item = u64> {
    [epoch.wrapping_sub(1), epoch, epoch.wrapping_add(1)].into_iter()
}

impl Matcher {
    /// A matcher for this node (`own_id`) and its paired peers' node ids,
    /// in `epoch`.
    pub fn new<'a>(
        own_id: &str,
        peer_ids: impl IntoIterator<Item = &'a str>,
        epoch: u64,
    ) -> Matcher {
        let mut peers = HashMap::new();
        let mut count = 0;
        for id in peer_ids {
            count += 1;
            for e in around(epoch) {
                peers.insert(Digest::of_node_id(id, e), id.to_owned());
            }
        }
        Matcher {
            epoch,
            own: around(epoch)
                .map(|e| Digest::of_node_id(own_id, e))
                .collect(),
            peers,
            count,
        }
    }

    /// The epoch it was built for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many peers it knows.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it knows no peer.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Whose digest this is.
    pub fn classify(&self, d: &Digest) -> Verdict<'_> {
        if self.own.contains(d) {
            return Verdict::Own;
        }
        match self.peers.get(d) {
            Some(id) => Verdict::Peer(id),
            None => Verdict::Unknown,
        }
    }
}

/// What was last reported per peer, so a peer announcing the same
/// addresses over and over is reported once, and again only when its
/// addresses change (or after the daemon restarts).
#[derive(Debug, Default)]
pub struct Recent {
    last: HashMap<String, Vec<SocketAddr>>,
}

impl Recent {
    /// Whether `node_id` at `addrs` should be reported (a peer not
    /// reported yet, or at other addresses than last time); notes the
    /// report if so.
    pub fn should_report(&mut self, node_id: &str, addrs: &[SocketAddr]) -> bool {
        if self.last.get(node_id).is_some_and(|a| a == addrs) {
            return false;
        }
        self.last.insert(node_id.to_owned(), addrs.to_vec());
        true
    }

    /// Forgets peers that are no longer paired.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.last.retain(|id, _| keep(id));
    }

    /// The peers reported so far.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.last.keys().map(String::as_str)
    }
}

/// Announcements ignored and recognised since the daemon started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// From paired peers.
    pub peers: u64,
    /// From nodes this one is not paired with.
    pub unknown: u64,
    /// Ill-formed (wrong name, version, digest, port or addresses).
    pub malformed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    /// An epoch (some hour in 2026).
    const E: u64 = 493_000;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn heard<'a>(name: &'a str, digest: &'a str, addrs: &[&str]) -> Heard<'a> {
        Heard {
            fullname: name,
            port: 7878,
            txt: vec![("v", Some(b"1".as_slice())), ("d", Some(digest.as_bytes()))],
            addrs: addrs.iter().map(|a| ip(a)).collect(),
        }
    }

    #[test]
    fn the_digest_is_short_stable_keyed_and_round_trips() {
        let d = Digest::of_node_id(A, E);
        assert_eq!(d, Digest::of_node_id(A, E));
        assert_ne!(d, Digest::of_node_id(B, E));
        let text = d.to_string();
        assert_eq!(text.len(), 16);
        assert!(
            text.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(text.parse::<Digest>(), Ok(d));
        // Not a prefix of the plain hash, and the id itself is nowhere in it.
        // It changes every epoch, and the epochs line up with the hour.
        assert_ne!(d, Digest::of_node_id(A, E + 1));
        assert_eq!(epoch_of(E * EPOCH_SECS + EPOCH_SECS - 1), E);
        assert_eq!(epoch_of(E * EPOCH_SECS + EPOCH_SECS), E + 1);
        let plain = crate::hex::encode(blake3::hash(A.as_bytes()).as_bytes());
        assert!(!plain.starts_with(&text));
        assert!(!d.host_name().contains(A) && !d.instance_name().contains(A));
        assert!(d.host_name().ends_with(".local."));
    }

    #[test]
    fn our_own_announcement_parses_back() {
        let d = Digest::of_node_id(A, E);
        let name = format!("{}.{SERVICE_TYPE}", d.instance_name());
        let txt = txt_entries(&d);
        let h = Heard {
            fullname: &name,
            port: 7878,
            txt: txt.iter().map(|(k, v)| (*k, Some(v.as_bytes()))).collect(),
            addrs: vec![ip("192.168.1.20"), ip("10.0.0.5")],
        };
        let seen = parse(&h, true).expect("parses");
        assert_eq!(seen.digest, d);
        assert_eq!(
            seen.addrs,
            vec![
                "10.0.0.5:7878".parse().expect("addr"),
                "192.168.1.20:7878".parse().expect("addr")
            ]
        );
        // Only the version and the digest are announced.
        assert_eq!(txt.len(), 2);
        assert!(txt.iter().all(|(_, v)| !v.contains(A)));
    }

    #[test]
    fn only_dialable_addresses_of_the_endpoints_family_are_kept() {
        let d = Digest::of_node_id(A, E).to_string();
        let name = format!("{d}.{SERVICE_TYPE}");
        let h = heard(
            &name,
            &d,
            &[
                "127.0.0.1",
                "0.0.0.0",
                "224.0.0.251",
                "255.255.255.255",
                "169.254.3.4",
                "fe80::1",
                "::1",
                "2001:db8::7",
                "10.1.2.3",
            ],
        );
        let v4 = parse(&h, true).expect("v4");
        assert_eq!(v4.addrs, vec!["10.1.2.3:7878".parse().expect("addr")]);
        let v6 = parse(&h, false).expect("v6");
        assert_eq!(v6.addrs, vec!["[2001:db8::7]:7878".parse().expect("addr")]);
        let only_loopback = heard(&name, &d, &["127.0.0.1", "fe80::2"]);
        assert_eq!(parse(&only_loopback, true), Err(Malformed::NoAddress));
        // A flood of addresses is cut to a few.
        let many: Vec<String> = (1..=50).map(|i| format!("10.9.0.{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            parse(&heard(&name, &d, &many), true)
                .expect("many")
                .addrs
                .len(),
            MAX_ADDRS
        );
    }

    #[test]
    fn hostile_and_malformed_announcements_are_rejected_with_a_reason() {
        let d = Digest::of_node_id(A, E).to_string();
        let name = format!("{d}.{SERVICE_TYPE}");
        let ok = heard(&name, &d, &["10.0.0.9"]);
        assert!(parse(&ok, true).is_ok());

        let other_type = format!("{d}._http._tcp.local.");
        assert_eq!(
            parse(&heard(&other_type, &d, &["10.0.0.9"]), true),
            Err(Malformed::Name)
        );
        assert_eq!(
            parse(&heard(SERVICE_TYPE, &d, &["10.0.0.9"]), true),
            Err(Malformed::Name)
        );
        assert_eq!(
            parse(&heard("", &d, &["10.0.0.9"]), true),
            Err(Malformed::Name)
        );

        let other = Digest::of_node_id(B, E).to_string();
        assert_eq!(
            parse(&heard(&name, &other, &["10.0.0.9"]), true),
            Err(Malformed::Mismatch)
        );

        for bad in [
            "",
            "zz",
            &d.to_uppercase(),
            &format!("{d}0"),
            &d[..15],
            "ǅǅǅǅǅǅǅǅ",
        ] {
            let n = format!("{bad}.{SERVICE_TYPE}");
            assert_eq!(
                parse(&heard(&n, bad, &["10.0.0.9"]), true),
                Err(Malformed::Digest),
                "{bad:?}"
            );
        }

        let mut no_port = ok.clone();
        no_port.port = 0;
        assert_eq!(parse(&no_port, true), Err(Malformed::Port));

        let mut v2 = ok.clone();
        v2.txt[0] = ("v", Some(b"2".as_slice()));
        assert_eq!(parse(&v2, true), Err(Malformed::Version));
        let mut no_version = ok.clone();
        no_version.txt.remove(0);
        assert_eq!(parse(&no_version, true), Err(Malformed::Version));
        let mut bare_version = ok.clone();
        bare_version.txt[0] = ("v", None);
        assert_eq!(parse(&bare_version, true), Err(Malformed::Version));

        let mut no_digest = ok.clone();
        no_digest.txt.truncate(1);
        assert_eq!(parse(&no_digest, true), Err(Malformed::Digest));
        let mut bare_digest = ok.clone();
        bare_digest.txt[1] = ("d", None);
        assert_eq!(parse(&bare_digest, true), Err(Malformed::Digest));
        let mut not_utf8 = ok.clone();
        not_utf8.txt[1] = (
            "d",
            Some(b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0".as_slice()),
        );
        assert_eq!(parse(&not_utf8, true), Err(Malformed::Digest));
        let mut twice = ok.clone();
        twice.txt.push(("D", Some(other.as_bytes())));
        assert_eq!(parse(&twice, true), Err(Malformed::Digest));

        let mut stuffed = ok.clone();
        stuffed
            .txt
            .extend((0..40).map(|_| ("x", Some(b"y".as_slice()))));
        assert_eq!(parse(&stuffed, true), Err(Malformed::TooManyEntries));

        let mut huge = ok.clone();
        let big = vec![b'a'; 100_000];
        huge.txt[1] = ("d", Some(big.as_slice()));
        assert_eq!(parse(&huge, true), Err(Malformed::Digest));

        // Extra, unknown keys are fine (a later version may add some).
        let mut extra = ok.clone();
        extra.txt.push(("future", Some(b"thing".as_slice())));
        assert!(parse(&extra, true).is_ok());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parser() {
        // A cheap deterministic fuzz: every byte pattern through every field.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let name = format!("{text}.{SERVICE_TYPE}");
            let h = Heard {
                fullname: &name,
                port: next() as u16,
                txt: vec![("v", Some(b"1".as_slice())), ("d", Some(bytes.as_slice()))],
                addrs: vec![IpAddr::from((next() as u32).to_be_bytes())],
            };
            let _ = parse(&h, true);
            let _ = text.parse::<Digest>();
        }
    }

    #[test]
    fn the_matcher_knows_itself_its_peers_and_nobody_else() {
        let m = Matcher::new(A, [B], E);
        assert_eq!(m.classify(&Digest::of_node_id(A, E)), Verdict::Own);
        assert_eq!(m.classify(&Digest::of_node_id(B, E)), Verdict::Peer(B));
        let stranger = "cccccccccccccccccccccccccccccccc";
        assert_eq!(
            m.classify(&Digest::of_node_id(stranger, E)),
            Verdict::Unknown
        );
        assert_eq!(m.len(), 1);
        // A neighbouring hour still matches (clock skew, the turn of the
        // hour); further away it is a stranger's.
        assert_eq!(m.classify(&Digest::of_node_id(B, E - 1)), Verdict::Peer(B));
        assert_eq!(m.classify(&Digest::of_node_id(B, E + 1)), Verdict::Peer(B));
        assert_eq!(m.classify(&Digest::of_node_id(A, E + 1)), Verdict::Own);
        assert_eq!(m.classify(&Digest::of_node_id(B, E + 2)), Verdict::Unknown);
        assert_eq!(m.classify(&Digest::of_node_id(B, E - 2)), Verdict::Unknown);
        assert_eq!(m.epoch(), E);
        assert!(Matcher::new(A, [], E).is_empty());
    }

    #[test]
    fn a_peer_is_reported_when_new_and_when_moved_only() {
        let mut r = Recent::default();
        let here: Vec<SocketAddr> = vec!["10.0.0.2:7878".parse().expect("addr")];
        let there: Vec<SocketAddr> = vec!["10.0.7.2:7878".parse().expect("addr")];
        assert!(r.should_report(B, &here));
        assert!(!r.should_report(B, &here));
        assert!(r.should_report(B, &there));
        assert!(!r.should_report(B, &there));
        assert!(r.should_report(B, &here), "moving back counts as a move");
        assert!(r.should_report(A, &here));
        r.retain(|id| id == A);
        assert_eq!(r.ids().collect::<Vec<_>>(), vec![A]);
        assert!(r.should_report(B, &here), "a forgotten peer is new again");
    }
}
