//! Linux network namespaces for a hub and two laptops behind their own
//! NAT routers, shared by the e2e test (`tests/e2e/sync.rs`) and the sync
//! bench (`cairn-bench sync --hub`), which include this file by path.
//! Plain std; needs root, iproute2 and iptables.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip ARGS`, or says what failed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    run_tool("ip", args)
}

pub fn run_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{tool}`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A hub namespace and two laptops, each behind its own masquerading
/// router namespace: laptop → router → hub works, nothing opens a flow
/// into a laptop, and the laptops have no route to each other. Deleted on drop.
pub struct NatHub {
    tag: u32,
    names: Vec<String>,
    /// The hub's namespace.
    pub hub: String,
    /// The laptops' namespaces.
    pub laptops: [String; 2],
    /// The hub's service address, routed to by both routers.
    pub hub_ip: String,
    /// Each laptop's LAN: (router side, laptop side) addresses, prefix /24;
    /// the laptop side is its current address.
    pub lans: [(String, String); 2],
}

/// Namespaces need root; `id -u` says so without unsafe libc calls.
pub fn require_root() -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run `id`: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not running as root".to_owned());
    }
    Ok(())
}

impl NatHub {
    /// Builds the namespaces, or says why it cannot (not root, no iptables).
    pub fn create() -> Result<NatHub, String> {
        require_root()?;
        run_tool("iptables", &["-V"]).map_err(|e| format!("iptables is missing ({e})"))?;
        // Unique among the test threads of one process too (names and
        // veths share the root namespace while they are built).
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let tag = std::process::id() % 10_000 * 10 + NEXT.fetch_add(1, Ordering::Relaxed) % 10;
        let n = std::process::id() % 200 + 20;
        let ns = |s: &str| format!("cn{s}-{tag}");
        let t = NatHub {
            tag,
            names: ["hub", "r1", "r2", "l1", "l2"]
                .iter()
                .map(|s| ns(s))
                .collect(),
            hub: ns("hub"),
            laptops: [ns("l1"), ns("l2")],
            hub_ip: format!("10.{n}.0.1"),
            lans: [
                (format!("10.{}.1.1", n + 1), format!("10.{}.1.2", n + 1)),
                (format!("10.{}.2.1", n + 1), format!("10.{}.2.2", n + 1)),
            ],
        };
        for name in &t.names {
            ip(&["netns", "add", name])?;
        }
        ip(&["-n", &t.hub, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            &t.hub,
            "addr",
            "add",
            &format!("{}/32", t.hub_ip),
            "dev",
            "lo",
        ])?;
        for (i, side) in ["1", "2"].iter().enumerate() {
            let (router, laptop) = (ns(&format!("r{side}")), ns(&format!("l{side}")));
            let (hw, rw) = (format!("ch{side}{tag}"), format!("cw{side}{tag}"));
            let (ri, le) = (format!("ci{side}{tag}"), format!("ce{side}{tag}"));
            let (hub_side, router_wan) = (format!("10.{n}.{side}.1"), format!("10.{n}.{side}.2"));
            let (router_lan, laptop_ip) = t.lans[i].clone();
            // hub <-> router (the "internet")
            ip(&["link", "add", &hw, "type", "veth", "peer", "name", &rw])?;
            ip(&["link", "set", &hw, "netns", &t.hub])?;
            ip(&["link", "set", &rw, "netns", &router])?;
            ip(&[
                "-n",
                &t.hub,
                "addr",
                "add",
                &format!("{hub_side}/24"),
                "dev",
                &hw,
            ])?;
            ip(&["-n", &t.hub, "link", "set", &hw, "up"])?;
            ip(&[
                "-n",
                &router,
                "addr",
                "add",
                &format!("{router_wan}/24"),
                "dev",
                &rw,
            ])?;
            ip(&["-n", &router, "link", "set", &rw, "up"])?;
            ip(&["-n", &router, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &router,
                "route",
                "add",
                &format!("{}/32", t.hub_ip),
                "via",
                &hub_side,
            ])?;
            // router <-> laptop (the home LAN)
            ip(&["link", "add", &ri, "type", "veth", "peer", "name", &le])?;
            ip(&["link", "set", &ri, "netns", &router])?;
            ip(&["link", "set", &le, "netns", &laptop])?;
            ip(&[
                "-n",
                &router,
                "addr",
                "add",
                &format!("{router_lan}/24"),
                "dev",
                &ri,
            ])?;
            ip(&["-n", &router, "link", "set", &ri, "up"])?;
            ip(&[
                "-n",
                &laptop,
                "addr",
                "add",
                &format!("{laptop_ip}/24"),
                "dev",
                &le,
            ])?;
            ip(&["-n", &laptop, "link", "set", &le, "up"])?;
            ip(&["-n", &laptop, "link", "set", "lo", "up"])?;
            ip(&["-n", &laptop, "route", "add", "default", "via", &router_lan])?;
            // The router forwards and masquerades; nothing opens a flow inward.
            run_tool(
                "ip",
                &[
                    "netns",
                    "exec",
                    &router,
                    "sysctl",
                    "-qw",
                    "net.ipv4.ip_forward=1",
                ],
            )?;
            let ipt = |args: &[&str]| {
                let mut v = vec!["netns", "exec", &router, "iptables"];
                v.extend_from_slice(args);
                run_tool("ip", &v)
            };
            ipt(&[
                "-t",
                "nat",
                "-A",
                "POSTROUTING",
                "-o",
                &rw,
                "-j",
                "MASQUERADE",
            ])?;
            ipt(&[
                "-A",
                "FORWARD",
                "-i",
                &rw,
                "-m",
                "conntrack",
                "--ctstate",
                "NEW",
                "-j",
                "DROP",
            ])?;
        }
        Ok(t)
    }

    /// Moves laptop `i` to another address on its LAN (as after a DHCP renewal).
    pub fn readdress(&mut self, i: usize, new_ip: &str) -> Result<(), String> {
        // Deleting the old address takes the default route (and any
        // secondary address of the subnet) with it, so it goes first.
        self.unplug(i)?;
        self.plug(i, new_ip)
    }

    /// Takes laptop `i` off its LAN: its address (and so its route) goes.
    pub fn unplug(&self, i: usize) -> Result<(), String> {
        let old_cidr = format!("{}/24", self.lans[i].1);
        ip(&[
            "-n",
            &self.laptops[i],
            "addr",
            "del",
            &old_cidr,
            "dev",
            &self.lan_dev(i),
        ])
    }

    /// Puts laptop `i` back on its LAN at `new_ip`, with its default route.
    pub fn plug(&mut self, i: usize, new_ip: &str) -> Result<(), String> {
        let laptop = &self.laptops[i];
        let router_lan = &self.lans[i].0;
        let new_cidr = format!("{new_ip}/24");
        ip(&[
            "-n",
            laptop,
            "addr",
            "add",
            &new_cidr,
            "dev",
            &self.lan_dev(i),
        ])?;
        ip(&[
            "-n", laptop, "route", "replace", "default", "via", router_lan,
        ])?;
        self.lans[i].1 = new_ip.to_owned();
        Ok(())
    }

    fn lan_dev(&self, i: usize) -> String {
        format!("ce{}{}", i + 1, self.tag)
    }
}

impl Drop for NatHub {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
