//! LAN discovery: paired machines on the same network find each other
//! without configured addresses, over mDNS / DNS-SD (the `mdns-sd` crate,
//! which runs its own thread and sockets on UDP 5353).
//!
//! A running daemon ([`run`]) announces one `_cairn._udp.local.` instance
//! whose names and TXT entry carry only a digest of its node id, with the
//! sync port and its addresses, and browses for the others. An instance
//! whose digest is a paired peer's gives that peer's current addresses:
//! they are remembered in the peer table as dial candidates (the sync
//! rounds keep the one that answers with the pinned key at the front) and
//! the daemon is told ("peer X seen"), so it syncs with that peer at once,
//! even if it had given up on its old addresses for a while. Announcements
//! of strangers, of this node itself, and malformed ones are counted and
//! otherwise ignored. What it found is written to `discovery.json` in the
//! node's home for `cairn doctor`.
//!
//! The pure half (digest, TXT, parsing, matching) is [`announcement`].

pub mod announcement;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent, ServiceInfo};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use self::announcement::{Digest, Heard, Matcher, Recent, SERVICE_TYPE, Tally, Verdict, epoch_of};
use super::peers::PeerTable;
use crate::clock::{now_ms, now_unix};

/// File in the node's home where the daemon says what discovery found.
pub const STATUS_FILE: &str = "discovery.json";
/// Largest status file read.
const MAX_STATUS_BYTES: u64 = 256 * 1024;
/// The peer table is re-read for matching at most this often.
const MATCHER_REFRESH: Duration = Duration::from_secs(2);
/// The status file is rewritten at most this often when only counters moved.
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// Pause before browsing again after the crate ended a subscription.
const REBROWSE_AFTER: Duration = Duration::from_secs(1);
/// How often the mDNS thread looks for changed interface addresses.
const IP_CHECK_SECS: u32 = 1;
/// Most peers listed in the status file.
const MAX_FOUND: usize = 256;

/// What discovery is doing, as written to [`STATUS_FILE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's process id.
    pub pid: u32,
    /// When this was written (Unix ms).
    pub updated_ms: i64,
    /// Whether this daemon announces and browses.
    pub active: bool,
    /// Why not, when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_reason: Option<String>,
    /// The kind of reason, when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<Off>,
    /// The digest it announces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The sync port it announces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Paired peers heard on the LAN, by node id.
    #[serde(default)]
    pub found: Vec<Found>,
    /// Announcements heard, by kind.
    #[serde(default)]
    pub tally: Tally,
}

/// Why a daemon runs without discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Off {
    /// Turned off by the config or `--no-discovery`.
    Config,
    /// The daemon listens on a loopback address.
    Loopback,
    /// mDNS could not be started (no sockets, no multicast).
    Failed,
}

/// A paired peer heard on the LAN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// Its node id.
    pub node_id: String,
    /// Where it said it listens.
    pub addrs: Vec<SocketAddr>,
    /// When it was last heard (Unix ms).
    pub seen_ms: i64,
}

/// The status file of the node with this home.
pub fn status_path(home: &Path) -> PathBuf {
    home.join(STATUS_FILE)
}

/// Reads [`STATUS_FILE`] (`None` if absent, unreadable or malformed).
pub fn read_status(home: &Path) -> Option<Status> {
    let f = std::fs::File::open(status_path(home)).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_STATUS_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write_status(home: &Path, st: &Status) {
    let path = status_path(home);
    let tmp = home.join(format!(".{STATUS_FILE}.{}.tmp", std::process::id()));
    let r = (|| {
        let json = serde_json::to_vec_pretty(st).map_err(std::io::Error::other)?;
        let mut f = crate::home::private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&json)?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(error = %e, "cannot write the discovery status");
    }
}

/// Removes the status file (the daemon stops).
pub fn clear_status(home: &Path) {
    let _ = std::fs::remove_file(status_path(home));
}

fn inactive(home: &Path, off: Off, why: String) {
    tracing::info!(reason = %why, "LAN discovery off");
    write_status(
        home,
        &Status {
            pid: std::process::id(),
            updated_ms: now_ms(),
            active: false,
            inactive_reason: Some(why),
            off: Some(off),
            digest: None,
            port: None,
            found: Vec::new(),
            tally: Tally::default(),
        },
    );
}

/// The mDNS thread and what it announces; shuts the thread down (saying
/// goodbye on the LAN first) when the discovery task ends or is aborted.
struct Running {
    mdns: ServiceDaemon,
    /// The instance announced now.
    fullname: Option<String>,
    home: PathBuf,
}

impl Running {
    /// Announces node `own_id` for `epoch` on `port`, withdrawing the
    /// previous announcement; returns the digest announced.
    fn announce(&mut self, own_id: &str, epoch: u64, port: u16) -> Result<Digest, mdns_sd::Error> {
        let own = Digest::of_node_id(own_id, epoch);
        let txt = announcement::txt_entries(&own);
        let info = ServiceInfo::new(
            SERVICE_TYPE,
            &own.instance_name(),
            &own.host_name(),
            (),
            port,
            txt.as_slice(),
        )?
        .enable_addr_auto();
        if let Some(old) = self.fullname.take() {
            let _ = self.mdns.unregister(&old);
        }
        let fullname = info.get_fullname().to_owned();
        self.mdns.register(info)?;
        self.fullname = Some(fullname);
        Ok(own)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(f) = &self.fullname {
            let _ = self.mdns.unregister(f);
        }
        let _ = self.mdns.shutdown();
        clear_status(&self.home);
    }
}

/// Unless `enabled` is false, announces this daemon (node `own_id`, sync endpoint bound at `bound`)
/// on the LAN and browses for its paired peers until the task is aborted.
/// Each time a paired peer is heard at addresses other than the last ones
/// (the first time included), the addresses go into the peer table and
/// `seen` is called with its node id. Never fails: problems are logged, and a
/// daemon bound to loopback (nothing on the LAN could dial it) or without
/// mDNS sockets runs without discovery.
pub async fn run(
    home: PathBuf,
    own_id: String,
    bound: SocketAddr,
    enabled: bool,
    seen: impl Fn(&str) + Send,
) {
    if !enabled {
        inactive(
            &home,
            Off::Config,
            "turned off (`[sync] discovery = false` or `cairn serve --no-discovery`)".to_owned(),
        );
        return;
    }
    if bound.ip().is_loopback() {
        inactive(
            &home,
            Off::Loopback,
            format!("the daemon listens on {bound}, which only this machine can reach"),
        );
        return;
    }
    let mdns = match ServiceDaemon::new() {
        Ok(d) => d,
        Err(e) => {
            inactive(&home, Off::Failed, format!("mDNS is unavailable: {e}"));
            return;
        }
    };
    let v4 = bound.is_ipv4();
    let mut only: Vec<IfKind> = vec![IfKind::LoopbackV4, IfKind::LoopbackV6];
    only.push(if v4 { IfKind::IPv6 } else { IfKind::IPv4 });
    let _ = mdns.disable_interface(only);
    // Notice this machine's new addresses (and announce them) within a second.
    let _ = mdns.set_ip_check_interval(IP_CHECK_SECS);
    if !bound.ip().is_unspecified() {
        // Listening on one address: announce and browse on its interface only.
        let _ = mdns.disable_interface(IfKind::All);
        let _ = mdns.enable_interface(IfKind::Addr(bound.ip()));
    }
    let mut epoch = epoch_of(now_unix());
    let mut running = Running {
        mdns: mdns.clone(),
        fullname: None,
        home: home.clone(),
    };
    let own = match running.announce(&own_id, epoch, bound.port()) {
        Ok(d) => d,
        Err(e) => {
            drop(running);
            inactive(
                &home,
                Off::Failed,
                format!("cannot announce on the LAN: {e}"),
            );
            return;
        }
    };
    let mut events = match mdns.browse(SERVICE_TYPE) {
        Ok(rx) => rx,
        Err(e) => {
            drop(running);
            inactive(&home, Off::Failed, format!("cannot browse the LAN: {e}"));
            return;
        }
    };
    tracing::info!(digest = %own, port = bound.port(), "LAN discovery on");

    let mut state = Browse {
        home: home.clone(),
        own_id,
        v4,
        matcher: None,
        recent: Recent::default(),
        found: BTreeMap::new(),
        status: Status {
            pid: std::process::id(),
            updated_ms: now_ms(),
            active: true,
            inactive_reason: None,
            off: None,
            digest: Some(own.to_string()),
            port: Some(bound.port()),
            found: Vec::new(),
            tally: Tally::default(),
        },
        written: None,
        dirty: true,
    };
    state.flush(true);
    let mut tick = tokio::time::interval(STATUS_EVERY);
    // Runs until aborted (or the mDNS thread goes away).
    loop {
        tokio::select! {
            ev = events.recv_async() => {
                let Ok(ev) = ev else {
                    // The crate ends a subscription whose queue overflowed
                    // (a flood of announcements): browse again after a pause.
                    // If its thread is gone, browsing fails and discovery stops.
                    tokio::time::sleep(REBROWSE_AFTER).await;
                    match mdns.browse(SERVICE_TYPE) {
                        Ok(rx) => {
                            tracing::info!("LAN browsing interrupted; started again");
                            events = rx;
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "LAN discovery stopped: the mDNS thread ended");
                            return;
                        }
                    }
                };
                if let ServiceEvent::ServiceResolved(r) = ev {
                    let txt: Vec<(&str, Option<&[u8]>)> = r
                        .get_properties()
                        .iter()
                        .map(|p| (p.key(), p.val()))
                        .collect();
                    let addrs: Vec<IpAddr> = r.get_addresses().iter().map(|a| a.to_ip_addr()).collect();
                    let heard = Heard {
                        fullname: r.get_fullname(),
                        port: r.get_port(),
                        txt,
                        addrs,
                    };
                    if let Some(id) = state.hear(&heard) {
                        seen(&id);
                    }
                }
            }
            _ = tick.tick() => {
                // A new hour: announce the new digest in place of the old.
                let now = epoch_of(now_unix());
                if now != epoch {
                    epoch = now;
                    match running.announce(&state.own_id, epoch, bound.port()) {
                        Ok(d) => {
                            state.status.digest = Some(d.to_string());
                            state.dirty = true;
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot announce the new LAN digest"),
                    }
                }
                state.flush(false);
            }
        }
    }
}

/// The browsing side's state.
struct Browse {
    home: PathBuf,
    own_id: String,
    v4: bool,
    matcher: Option<(Matcher, Instant)>,
    recent: Recent,
    found: BTreeMap<String, Found>,
    status: Status,
    written: Option<Instant>,
    dirty: bool,
}

impl Browse {
    /// The matcher, rebuilt from the peer table when it is older than
    /// [`MATCHER_REFRESH`] (the old one is kept if the table is unreadable).
    fn matcher(&mut self) -> &Matcher {
        let epoch = epoch_of(now_unix());
        let stale = self
            .matcher
            .as_ref()
            .is_none_or(|(m, at)| at.elapsed() >= MATCHER_REFRESH || m.epoch() != epoch);
        if stale {
            match PeerTable::load(&self.home) {
                Ok(t) => {
                    let ids: Vec<String> =
                        t.peers().iter().map(|p| p.node_id.to_string()).collect();
                    let m = Matcher::new(&self.own_id, ids.iter().map(String::as_str), epoch);
                    self.recent.retain(|id| ids.iter().any(|p| p == id));
                    self.found.retain(|id, _| ids.contains(id));
                    self.matcher = Some((m, Instant::now()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "peer table unreadable; LAN matches use the last one read");
                }
            }
        }
        let own_id = &self.own_id;
        &self
            .matcher
            .get_or_insert_with(|| (Matcher::new(own_id, [], epoch), Instant::now()))
            .0
    }

    /// Takes in one announcement; returns the node id of a paired peer to
    /// sync with now, after remembering its addresses.
    fn hear(&mut self, h: &Heard<'_>) -> Option<String> {
        let seen = match announcement::parse(h, self.v4) {
            Ok(s) => s,
            Err(why) => {
                self.status.tally.malformed += 1;
                self.dirty = true;
                tracing::debug!(reason = %why, "ignored a malformed LAN announcement");
                return None;
            }
        };
        let id = match self.matcher().classify(&seen.digest) {
            Verdict::Own => return None,
            Verdict::Unknown => {
                self.status.tally.unknown += 1;
                self.dirty = true;
                return None;
            }
            Verdict::Peer(id) => id.to_owned(),
        };
        self.status.tally.peers += 1;
        self.found.insert(
            id.clone(),
            Found {
                node_id: id.clone(),
                addrs: seen.addrs.clone(),
                seen_ms: now_ms(),
            },
        );
        self.dirty = true;
        if !self.recent.should_report(&id, &seen.addrs) {
            return None;
        }
        let remembered = PeerTable::modify(&self.home, |t| {
            let fp = id
                .parse()
                .ok()
                .and_then(|nid| t.by_id(&nid))
                .and_then(|p| p.fingerprint_bytes());
            if let Some(p) = fp.and_then(|fp| t.by_fingerprint_mut(&fp)) {
                for a in seen.addrs.iter().rev() {
                    p.remember_address(*a);
                }
            }
            Ok(())
        });
        if let Err(e) = remembered {
            tracing::warn!(peer = %id, error = %e, "cannot remember a LAN address");
        }
        tracing::info!(peer = %id, addrs = ?seen.addrs, "paired peer heard on the LAN");
        self.flush(true);
        Some(id)
    }

    /// Rewrites the status file if something changed and `now` is asked
    /// for or [`STATUS_EVERY`] has passed.
    fn flush(&mut self, now: bool) {
        let due = now || self.written.is_none_or(|w| w.elapsed() >= STATUS_EVERY);
        if !self.dirty || !due {
            return;
        }
        self.status.updated_ms = now_ms();
        self.status.found = self.found.values().take(MAX_FOUND).cloned().collect();
        write_status(&self.home, &self.status);
        self.written = Some(Instant::now());
        self.dirty = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_file_round_trips_and_junk_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_status(dir.path()), None);
        let st = Status {
            pid: 7,
            updated_ms: 1,
            active: true,
            inactive_reason: None,
            off: None,
            digest: Some("0123456789abcdef".to_owned()),
            port: Some(7878),
            found: vec![Found {
                node_id: "x".to_owned(),
                addrs: vec!["10.0.0.2:7878".parse().expect("addr")],
                seen_ms: 2,
            }],
            tally: Tally {
                peers: 1,
                unknown: 2,
                malformed: 3,
            },
        };
        write_status(dir.path(), &st);
        assert_eq!(read_status(dir.path()), Some(st));
        std::fs::write(status_path(dir.path()), b"{nope").expect("write");
        assert_eq!(read_status(dir.path()), None);
        clear_status(dir.path());
        assert!(!status_path(dir.path()).exists());
    }

    #[tokio::test]
    async fn a_daemon_on_loopback_says_why_discovery_is_off_and_returns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let addr: SocketAddr = "127.0.0.1:7878".parse().expect("addr");
        run(dir.path().to_path_buf(), "a".repeat(32), addr, true, |_| {
            panic!("nothing is heard")
        })
        .await;
        let st = read_status(dir.path()).expect("status");
        assert!(!st.active);
        assert_eq!(st.off, Some(Off::Loopback));
        assert!(
            st.inactive_reason
                .expect("reason")
                .contains("127.0.0.1:7878")
        );
        let any: SocketAddr = "0.0.0.0:7878".parse().expect("addr");
        run(dir.path().to_path_buf(), "a".repeat(32), any, false, |_| {
            panic!("nothing is heard")
        })
        .await;
        let st = read_status(dir.path()).expect("status");
        assert_eq!(st.off, Some(Off::Config));
        assert!(!st.active && st.inactive_reason.expect("reason").contains("turned off"));
    }

    fn table_with_peer(home: &Path) -> (String, cairn_protocol::SpkiFingerprint) {
        let fp = [7u8; 32];
        let peer = crate::sync::peers::Peer::new(&fp, "desk", Vec::new(), 1);
        let id = peer.node_id.to_string();
        PeerTable::modify(home, |t| {
            t.upsert(peer);
            Ok(())
        })
        .expect("save");
        (id, fp)
    }

    fn browse(home: &Path) -> Browse {
        Browse {
            home: home.to_path_buf(),
            own_id: "a".repeat(32),
            v4: true,
            matcher: None,
            recent: Recent::default(),
            found: BTreeMap::new(),
            status: Status {
                pid: 1,
                updated_ms: 0,
                active: true,
                inactive_reason: None,
                off: None,
                digest: None,
                port: None,
                found: Vec::new(),
                tally: Tally::default(),
            },
            written: None,
            dirty: false,
        }
    }

    #[test]
    fn a_paired_peer_heard_is_remembered_reported_once_and_listed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (id, fp) = table_with_peer(dir.path());
        let mut b = browse(dir.path());
        let d = Digest::of_node_id(&id, epoch_of(now_unix())).to_string();
        let name = format!("{d}.{SERVICE_TYPE}");
        let h = Heard {
            fullname: &name,
            port: 7878,
            txt: vec![("v", Some(b"1".as_slice())), ("d", Some(d.as_bytes()))],
            addrs: vec!["10.20.30.40".parse().expect("ip")],
        };
        assert_eq!(b.hear(&h), Some(id.clone()));
        let t = PeerTable::load(dir.path()).expect("load");
        let p = t.by_fingerprint(&fp).expect("peer");
        assert_eq!(p.addresses, vec!["10.20.30.40:7878".parse().expect("addr")]);
        // The same announcement again is not reported again right away.
        assert_eq!(b.hear(&h), None);
        // A stranger, this node itself and junk are counted, never reported.
        let own = Digest::of_node_id(&"a".repeat(32), epoch_of(now_unix())).to_string();
        let own_name = format!("{own}.{SERVICE_TYPE}");
        let mine = Heard {
            fullname: &own_name,
            txt: vec![("v", Some(b"1".as_slice())), ("d", Some(own.as_bytes()))],
            ..h.clone()
        };
        assert_eq!(b.hear(&mine), None);
        let other = Digest::of_node_id(&"c".repeat(32), epoch_of(now_unix())).to_string();
        let other_name = format!("{other}.{SERVICE_TYPE}");
        let stranger = Heard {
            fullname: &other_name,
            txt: vec![("v", Some(b"1".as_slice())), ("d", Some(other.as_bytes()))],
            ..h.clone()
        };
        assert_eq!(b.hear(&stranger), None);
        assert_eq!(b.hear(&Heard::default()), None);
        assert_eq!(
            b.status.tally,
            Tally {
                peers: 2,
                unknown: 1,
                malformed: 1
            }
        );
        b.flush(true);
        let st = read_status(dir.path()).expect("status");
        assert_eq!(st.found.len(), 1);
        assert_eq!(st.found[0].node_id, id);
        // The stranger's address never reached the peer table.
        let t = PeerTable::load(dir.path()).expect("load");
        assert_eq!(t.peers().len(), 1);
    }
}
