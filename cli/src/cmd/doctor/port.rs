//! Who holds a UDP port, for `cairn doctor`: the sockets bound to it (from
//! `/proc/net/udp` and `/proc/net/udp6`, which list the sockets of this
//! network namespace with their inodes) and the processes whose open file
//! descriptors are those sockets. Linux only; elsewhere nothing is known
//! and the checks say less.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

use cairn_node::daemon::ServeState;
use cairn_node::sync::DEFAULT_PORT;

use super::{Check, Level, check as finding};

/// The sync port: the running daemon's (and whether it is really the one
/// holding it), or whether the default port is free for one.
pub(super) fn check(serving: Option<&ServeState>) -> Check {
    match serving {
        Some(st) => daemon_port(st),
        None => free_port(),
    }
}

fn daemon_port(st: &ServeState) -> Check {
    let addr = st.listen_addr;
    let port = addr.port();
    let held = holders(port, Some(st.pid));
    let ours = match &held {
        Holders::Held { by } => by.iter().any(|h| h.pid == st.pid),
        Holders::Unknown => true,
        Holders::Free => false,
    };
    if !ours {
        let (summary, fix) = match &held {
            Holders::Free => (
                format!(
                    "serve.json says cairn serve (pid {}) listens on UDP {addr}, but no socket holds UDP {port}: the daemon does not answer other machines",
                    st.pid
                ),
                format!(
                    "restart it: `systemctl --user restart cairn`, or stop pid {} and run `cairn serve`",
                    st.pid
                ),
            ),
            Holders::Held { by } if !by.is_empty() => (
                format!(
                    "UDP {port} is held by {}, not by cairn serve (pid {}): other machines that dial this one reach that program",
                    describe(by),
                    st.pid
                ),
                format!(
                    "stop that program, or move cairn to another port (`cairn serve --listen 0.0.0.0:{}`; peers learn it when it dials them)",
                    port.wrapping_add(2)
                ),
            ),
            _ => (
                format!(
                    "UDP {port} is held by a program of another user, not by cairn serve (pid {})",
                    st.pid
                ),
                "find it with `sudo ss -ulpn` and stop it, or move cairn to another port with `cairn serve --listen`".to_owned(),
            ),
        };
        return finding("port", Level::Problem, summary, Some(fix));
    }
    let who = match held {
        Holders::Held { .. } => format!("cairn serve (pid {}) holds UDP {addr}", st.pid),
        _ => format!("cairn serve listens on UDP {addr}"),
    };
    if addr.ip().is_loopback() {
        return finding(
            "port",
            Level::Warn,
            format!("{who}: only this machine can reach it"),
            Some(format!(
                "run it with `--listen 0.0.0.0:{port}` so other machines can dial it"
            )),
        );
    }
    finding(
        "port",
        Level::Ok,
        format!("{who}; machines that dial this one need UDP {port} open in its firewall"),
        None,
    )
}

fn free_port() -> Check {
    let err = match UdpSocket::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, DEFAULT_PORT))) {
        Ok(_) => {
            return finding(
                "port",
                Level::Ok,
                format!("UDP {DEFAULT_PORT} is free for cairn serve"),
                None,
            );
        }
        Err(e) => e,
    };
    let by = match holders(DEFAULT_PORT, None) {
        Holders::Held { by } if !by.is_empty() => {
            let cairn = by.iter().any(|h| h.name == "cairn");
            format!(
                " (held by {}{})",
                describe(&by),
                if cairn {
                    ": a `cairn pair` waiting for its code to be used, or a cairn serve of another home"
                } else {
                    ""
                }
            )
        }
        Holders::Held { .. } => " (held by a program of another user)".to_owned(),
        _ => String::new(),
    };
    finding(
        "port",
        Level::Problem,
        format!(
            "UDP {DEFAULT_PORT}, where cairn serve listens by default, is not available{by}: {err}"
        ),
        Some(format!(
            "stop what holds it, or run `cairn serve --listen 0.0.0.0:{}` (peers learn the new port when it dials them)",
            DEFAULT_PORT + 2
        )),
    )
}

/// A process holding the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Holder {
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub name: String,
}

/// What is known about a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holders {
    /// This system does not say (not Linux, or `/proc` unreadable).
    Unknown,
    /// No socket is bound to it.
    Free,
    /// Sockets are bound to it; `by` lists the processes that could be
    /// seen holding them (processes of other users cannot be).
    Held { by: Vec<Holder> },
}

/// Most table bytes read, and most descriptors looked at in one scan.
const MAX_TABLE_BYTES: u64 = 16 * 1024 * 1024;
const MAX_FDS: usize = 200_000;

/// Inodes of the sockets bound to local `port` in a table of the
/// `/proc/net/udp` format (a header line, then one socket per line:
/// slot, `local_address` as `HEXIP:HEXPORT`, …, the inode in column 10).
/// Lines that do not parse are skipped.
pub(super) fn inodes_in_table(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local = cols.get(1)?;
            let (_, hex_port) = local.rsplit_once(':')?;
            let p = u16::from_str_radix(hex_port, 16).ok()?;
            let inode: u64 = cols.get(9)?.parse().ok()?;
            (p == port && inode != 0).then_some(inode)
        })
        .collect()
}

/// The inode in a descriptor link such as `socket:[12345]`.
pub(super) fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Who holds UDP `port` here. The process `first` (the daemon named in
/// `serve.json`) is looked at first; when it holds the port no other is.
#[cfg(target_os = "linux")]
pub(super) fn holders(port: u16, first: Option<u32>) -> Holders {
    use std::io::Read;
    let mut inodes = HashSet::new();
    let mut read_any = false;
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(f) = std::fs::File::open(table) else {
            continue;
        };
        let mut text = String::new();
        if f.take(MAX_TABLE_BYTES).read_to_string(&mut text).is_ok() {
            read_any = true;
            inodes.extend(inodes_in_table(&text, port));
        }
    }
    if !read_any {
        return Holders::Unknown;
    }
    if inodes.is_empty() {
        return Holders::Free;
    }
    let mut budget = MAX_FDS;
    if let Some(pid) = first
        && let Some(h) = holder(pid, &inodes, &mut budget)
    {
        return Holders::Held { by: vec![h] };
    }
    let mut by = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if Some(pid) == first {
                continue;
            }
            if let Some(h) = holder(pid, &inodes, &mut budget) {
                by.push(h);
            }
            if budget == 0 {
                break;
            }
        }
    }
    Holders::Held { by }
}

/// Elsewhere `/proc` does not tell.
#[cfg(not(target_os = "linux"))]
pub(super) fn holders(_port: u16, _first: Option<u32>) -> Holders {
    Holders::Unknown
}

/// `pid` if one of its descriptors is one of the `inodes` sockets.
#[cfg(target_os = "linux")]
fn holder(pid: u32, inodes: &HashSet<u64>, budget: &mut usize) -> Option<Holder> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    for fd in fds.flatten() {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        let Ok(link) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if socket_inode(&link.to_string_lossy()).is_some_and(|i| inodes.contains(&i)) {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default();
            return Some(Holder { pid, name });
        }
    }
    None
}

/// "cairn (pid 12), nc (pid 40)".
pub(super) fn describe(by: &[Holder]) -> String {
    by.iter()
        .map(|h| {
            if h.name.is_empty() {
                format!("pid {}", h.pid)
            } else {
                format!("{} (pid {})", h.name, h.pid)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  151: 00000000:1EC6 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 40123 2 0000000000000000 0
  152: 0100007F:1EC6 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 40124 2 0000000000000000 0
  200: 00000000:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 555 2 0000000000000000 0
 garbage line
  201: 00000000:ZZZZ 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 9 2 0 0
  202: 00000000:1EC6 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 0 2 0 0
";

    #[test]
    fn the_sockets_on_a_port_are_read_from_the_proc_table() {
        assert_eq!(inodes_in_table(TABLE, 7878), vec![40123, 40124]);
        assert_eq!(inodes_in_table(TABLE, 5353), vec![555]);
        assert!(inodes_in_table(TABLE, 1).is_empty());
        assert!(inodes_in_table("", 7878).is_empty());
        let v6 = "hdr\n 1: 00000000000000000000000000000000:1EC6 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 777 2 0 0\n";
        assert_eq!(inodes_in_table(v6, 7878), vec![777]);
    }

    #[test]
    fn descriptor_links_name_their_socket() {
        assert_eq!(socket_inode("socket:[40123]"), Some(40123));
        assert_eq!(socket_inode("pipe:[40123]"), None);
        assert_eq!(socket_inode("socket:[x]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_socket_this_process_binds_is_found_held_by_it() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let port = sock.local_addr().expect("addr").port();
        let me = std::process::id();
        match holders(port, Some(me)) {
            Holders::Held { by } => assert_eq!(by.first().map(|h| h.pid), Some(me), "{by:?}"),
            other => panic!("{other:?}"),
        }
        // Found by the full scan too.
        match holders(port, None) {
            Holders::Held { by } => assert!(by.iter().any(|h| h.pid == me), "{by:?}"),
            other => panic!("{other:?}"),
        }
        drop(sock);
        assert_eq!(holders(port, None), Holders::Free);
    }
}
