//! `cairn ui` at the HTTP level: the real binary serving a fixture home on
//! loopback, spoken to with a hand-written HTTP/1.1 client (so the `Host`
//! header and cookies are exactly what each test says).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::util::{TestHome, planted_secrets};

pub const DEADLINE: Duration = Duration::from_secs(30);

/// A running `cairn ui --no-open`, killed when dropped.
pub struct UiProc {
    child: Child,
    /// The address it printed (with the token).
    pub url: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The access token.
    pub token: String,
}

impl Drop for UiProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl UiProc {
    /// Starts `cairn ui --no-open --listen 127.0.0.1:0` in `home` and waits
    /// (bounded) for the address line.
    pub fn start(home: &TestHome) -> UiProc {
        let mut child = home
            .cmd(&["ui", "--no-open", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cairn ui");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let url = match rx.recv_timeout(DEADLINE) {
            Ok(u) => u,
            Err(_) => {
                let _ = child.kill();
                panic!("cairn ui printed no address within {DEADLINE:?}");
            }
        };
        let rest = url.strip_prefix("http://").expect("http URL");
        let (hostport, query) = rest.split_once("/?token=").expect("URL carries a token");
        let addr: SocketAddr = hostport.parse().expect("socket address in URL");
        assert!(addr.ip().is_loopback(), "{url}");
        UiProc {
            child,
            addr,
            token: query.to_owned(),
            url,
        }
    }

    /// The `Host` a browser would send.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// GET with the right host and the token cookie.
    pub fn get(&self, path: &str) -> Response {
        let cookie = format!("cairn_ui_{}={}", self.addr.port(), self.token);
        request(self.addr, "GET", path, Some(&self.host()), Some(&cookie))
    }

    /// GET a JSON answer that must succeed.
    pub fn json(&self, path: &str) -> serde_json::Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{path}: bad JSON ({e}): {}", r.body))
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request over a fresh connection, as a page from another
/// site would send it (`Origin: http://evil.example`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: Option<&str>,
    cookie: Option<&str>,
) -> Response {
    let mut head = String::new();
    if let Some(h) = host {
        head.push_str(&format!("Host: {h}\r\n"));
    }
    if let Some(c) = cookie {
        head.push_str(&format!("Cookie: {c}\r\n"));
    }
    head.push_str("Origin: http://evil.example\r\n");
    send(addr, method, path, &head)
}

/// A plain GET with only a `Host` header.
pub fn plain_get(addr: SocketAddr, path: &str, host: &str) -> Response {
    send(addr, "GET", path, &format!("Host: {host}\r\n"))
}

fn send(addr: SocketAddr, method: &str, path: &str, headers: &str) -> Response {
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let req = format!(
        "{method} {path} HTTP/1.1\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).expect("send");
    // Read the head, then the body by its length (or to the end).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        // A signal to this process (another test's child stopping)
        // interrupts a read with a timeout; that is no answer yet.
        let n = match s.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.expect("read answer"),
        };
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if let Some(len) = len {
                while raw.len() < end + 4 + len {
                    let n = match s.read(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        r => r.expect("read body"),
                    };
                    assert!(n > 0, "connection closed mid-body");
                    raw.extend_from_slice(&buf[..n]);
                }
                break;
            }
            if n == 0 {
                break;
            }
        } else if n == 0 {
            break;
        }
        if n == 0 {
            break;
        }
    }
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8(body).expect("utf-8 body"),
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[..eol])
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .expect("chunk size");
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

/// Every path the server answers (pages, assets, API), plus an unknown one.
const PATHS: [&str; 12] = [
    "/",
    "/app.js",
    "/app.css",
    "/favicon.svg",
    "/api/overview",
    "/api/search?q=rounding",
    "/api/session?id=3d0c9a52",
    "/api/recent",
    "/api/machines",
    "/api/activity",
    "/api/handoff?id=3d0c9a52",
    "/no/such/page",
];

#[test]
fn every_endpoint_demands_the_token_and_this_host() {
    let home = TestHome::seeded();
    let ui = UiProc::start(&home);
    let good_cookie = format!("cairn_ui_{}={}", ui.addr.port(), ui.token);
    let host = ui.host();
    let port = ui.addr.port();
    for path in PATHS {
        let expected = if path.starts_with("/no/") { 404 } else { 200 };
        let ok = ui.get(path);
        assert_eq!(ok.status, expected, "{path} with token: {}", ok.body);
        for &h in &[
            host.as_str(),
            &format!("localhost:{port}"),
            &format!("[::1]:{port}"),
        ] {
            let r = request(ui.addr, "GET", path, Some(h), Some(&good_cookie));
            assert_eq!(r.status, expected, "{path} with Host {h}");
        }
        // No token at all, a wrong one, or a near miss.
        let r = request(ui.addr, "GET", path, Some(&host), None);
        assert_eq!(r.status, 401, "{path} without token");
        let wrong = format!("cairn_ui_{port}={}", "0".repeat(ui.token.len()));
        let r = request(ui.addr, "GET", path, Some(&host), Some(&wrong));
        assert_eq!(r.status, 401, "{path} with a wrong token");
        // The right token under another port's cookie name is not this server's.
        let other = format!("cairn_ui_{}={}", port.wrapping_add(1), ui.token);
        let r = request(ui.addr, "GET", path, Some(&host), Some(&other));
        assert_eq!(r.status, 401, "{path} with another server's cookie");
        let sep = if path.contains('?') { '&' } else { '?' };
        let r = request(
            ui.addr,
            "GET",
            &format!("{path}{sep}token=nottheone"),
            Some(&host),
            None,
        );
        assert_eq!(r.status, 401, "{path} with a wrong URL token");
        // DNS rebinding: the right token but a foreign name (or port, or none).
        for bad in [
            "evil.example",
            &format!("evil.example:{port}"),
            &format!("127.0.0.1:{}", port.wrapping_add(1)),
            "127.0.0.1",
        ] {
            let r = request(ui.addr, "GET", path, Some(bad), Some(&good_cookie));
            assert_eq!(r.status, 403, "{path} with Host {bad}");
        }
        let r = request(ui.addr, "GET", path, None, Some(&good_cookie));
        assert_eq!(r.status, 403, "{path} without Host");
        // Read-only: nothing but GET/HEAD.
        for m in ["POST", "PUT", "DELETE", "PATCH"] {
            let r = request(ui.addr, m, path, Some(&host), Some(&good_cookie));
            assert_eq!(r.status, 405, "{m} {path}");
        }
        // No permissive CORS, strict content policy everywhere.
        for r in [&ok, &request(ui.addr, "GET", path, Some(&host), None)] {
            assert!(
                r.headers
                    .iter()
                    .all(|(k, _)| !k.starts_with("access-control-")),
                "{path}: {:?}",
                r.headers
            );
            let csp = r.header("content-security-policy").unwrap_or_default();
            assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
            assert_eq!(r.header("cache-control"), Some("no-store"), "{path}");
        }
    }
    // The token in the URL becomes an HttpOnly, SameSite=Strict cookie and
    // the browser is sent back to the same place without it.
    let r = request(
        ui.addr,
        "GET",
        &format!("/?token={}", ui.token),
        Some(&host),
        None,
    );
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/"));
    let cookie = r.header("set-cookie").expect("cookie");
    assert!(cookie.starts_with(&good_cookie), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    let r = request(
        ui.addr,
        "GET",
        &format!("/api/recent?token={}&agent=codex", ui.token),
        Some(&host),
        None,
    );
    assert_eq!(r.header("location"), Some("/api/recent?agent=codex"));
    // The page loads nothing from elsewhere.
    for asset in ["/", "/app.js", "/app.css"] {
        let body = ui.get(asset).body;
        for needle in ["http://", "https://", "//cdn", "@import"] {
            let found = body
                .match_indices(needle)
                .any(|(i, _)| !body[i..].starts_with("http://www.w3.org/"));
            assert!(!found, "{asset} refers to {needle}");
        }
    }
}

#[test]
fn absolute_form_targets_are_refused() {
    let home = TestHome::seeded();
    let ui = UiProc::start(&home);
    let cookie = format!("cairn_ui_{}={}", ui.addr.port(), ui.token);
    let host = ui.host();
    for path in ["/", "/api/overview", "/api/search?q=rounding"] {
        // The origin form is answered...
        let ok = request(ui.addr, "GET", path, Some(&host), Some(&cookie));
        assert_eq!(ok.status, 200, "{path}: {}", ok.body);
        // ...the absolute form, as a browser sends to a proxy only, is
        // not, even with the right Host, cookie or token.
        for authority in [host.clone(), format!("localhost:{}", ui.addr.port())] {
            for scheme in ["http", "https"] {
                let target = format!("{scheme}://{authority}{path}");
                let r = request(ui.addr, "GET", &target, Some(&host), Some(&cookie));
                assert_eq!(r.status, 400, "{target}: {}", r.body);
                assert!(r.body.contains("absolute-form"), "{target}: {}", r.body);
                assert!(!r.body.contains("\"records\""), "{target}: {}", r.body);
                let csp = r.header("content-security-policy").unwrap_or_default();
                assert!(csp.contains("default-src 'none'"), "{target}: {csp}");
            }
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let target = format!("http://{host}{path}{sep}token={}", ui.token);
        let r = request(ui.addr, "GET", &target, Some(&host), None);
        assert_eq!(r.status, 400, "{target}: {}", r.body);
        assert_eq!(r.header("set-cookie"), None, "{target}");
    }
}

#[test]
fn refuses_to_listen_beyond_loopback() {
    let home = TestHome::seeded();
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8080"] {
        let out = home.run(&["ui", "--no-open", "--listen", addr]);
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("loopback"), "{addr}: {err}");
        assert!(out.stdout.is_empty(), "{addr}: no address printed");
    }
}

fn without_score(mut hits: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    for h in &mut hits {
        // The age factor uses "now", which differs between two calls.
        h.as_object_mut().expect("hit object").remove("score");
    }
    hits
}

#[test]
fn search_and_session_answer_what_the_cli_answers() {
    let home = TestHome::seeded();
    let ui = UiProc::start(&home);
    let cases: [(&str, &[(&str, &str)]); 6] = [
        ("rounding", &[]),
        ("float64 rounding", &[("agent", "opencode")]),
        ("retries", &[("since", "3000d")]),
        ("cron schedule", &[("role", "user")]),
        (
            "openssl",
            &[("project", "webshop"), ("machine", "fixture-laptop")],
        ),
        ("kafka", &[("role", "user,assistant")]),
    ];
    let mut seen_sessions = Vec::new();
    for (q, filters) in cases {
        let mut args = vec!["search", "--json", "--no-refresh", "-n", "20"];
        let mut qs = format!("q={}&limit=20", enc(q));
        for (k, v) in filters {
            if *k == "role" {
                for r in v.split(',') {
                    args.extend(["--role", r]);
                }
            } else {
                args.push(match *k {
                    "agent" => "--agent",
                    "since" => "--since",
                    "project" => "--project",
                    _ => "--machine",
                });
                args.push(v);
            }
            qs.push_str(&format!("&{k}={}", enc(v)));
        }
        args.extend(["--", q]);
        let cli: serde_json::Value =
            serde_json::from_str(&home.search_out(&args)).expect("search JSON");
        let cli = cli["hits"].as_array().expect("hits").clone();
        let web = ui.json(&format!("/api/search?{qs}"))["hits"]
            .as_array()
            .expect("hits")
            .clone();
        assert_eq!(
            without_score(web),
            without_score(cli.clone()),
            "query {q:?} {filters:?}"
        );
        for h in &cli {
            seen_sessions.push(h["session_id"].as_str().expect("id").to_owned());
        }
    }
    assert!(
        seen_sessions.len() >= 4,
        "the queries find something: {seen_sessions:?}"
    );
    seen_sessions.sort();
    seen_sessions.dedup();
    for id in &seen_sessions {
        for (offset, limit) in [(0, 1000), (1, 2)] {
            let cli = home.json(&[
                "show",
                id,
                "--json",
                "--no-pager",
                "--offset",
                &offset.to_string(),
                "--limit",
                &limit.to_string(),
            ]);
            let web = ui.json(&format!(
                "/api/session?id={}&offset={offset}&limit={limit}",
                enc(id)
            ));
            assert_eq!(web["session"], cli["session"], "session {id}");
            assert_eq!(
                web["records"], cli["records"],
                "records of {id} at {offset}"
            );
        }
        // A prefix resolves like `cairn show`.
        let web = ui.json(&format!("/api/session?id={}", enc(&id[..8])));
        assert_eq!(web["session"]["session_id"], id.as_str());
    }
    // The match is marked and chosen as the focus.
    let web = ui.json("/api/session?id=3d0c9a52&q=float64%20rounding");
    let focus = web["focus"].as_u64().expect("focus") as usize;
    let text = web["records"][focus]["text"].as_str().expect("text");
    assert!(text.contains("float64 rounding"), "{text}");
    assert!(
        web["matched"]
            .as_array()
            .expect("matched")
            .contains(&serde_json::json!(focus))
    );
    // A long session opens on the page holding the best match.
    let web = ui.json("/api/session?id=3d0c9a52&q=float64%20rounding&limit=2");
    let total = web["total"].as_u64().expect("total") as usize;
    let offset = web["offset"].as_u64().expect("offset") as usize;
    let focus = web["focus"].as_u64().expect("focus on this page") as usize;
    assert!(
        offset > 0 && offset.is_multiple_of(2) && offset < total,
        "{web}"
    );
    let text = web["records"][focus]["text"].as_str().expect("text");
    assert!(text.contains("float64 rounding"), "{text}");
    // Recent sessions filter like search does.
    let recent = ui.json("/api/recent?agent=codex&limit=1000");
    let rs = recent["sessions"].as_array().expect("sessions");
    assert!(
        !rs.is_empty() && rs.iter().all(|s| s["agent"] == "codex"),
        "{recent}"
    );
    let times: Vec<i64> = rs.iter().filter_map(|s| s["last_ms"].as_i64()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let recent = ui.json("/api/recent?project=webshop&limit=1000");
    let rs = recent["sessions"].as_array().expect("sessions");
    assert!(
        !rs.is_empty()
            && rs
                .iter()
                .all(|s| s["project"].as_str().is_some_and(|p| p.contains("webshop"))),
        "{recent}"
    );
    // Unknown sessions and bad filters are readable errors, not crashes.
    assert_eq!(ui.get("/api/session?id=zzzz-no-such").status, 404);
    assert_eq!(ui.get("/api/session").status, 400);
    assert_eq!(ui.get("/api/search?q=x&role=wizard").status, 400);
    assert_eq!(ui.get("/api/search?q=x&since=soon").status, 400);
    assert_eq!(ui.get("/api/recent?limit=notanumber").status, 400);
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[test]
fn no_planted_secret_in_any_page_or_answer() {
    let home = TestHome::seeded();
    let ui = UiProc::start(&home);
    let secrets = planted_secrets();
    let mut bodies = Vec::new();
    for path in ["/", "/app.js", "/app.css", "/api/overview", "/api/machines"] {
        bodies.push((path.to_owned(), ui.get(path).body));
    }
    for days in ["7", "30", "366"] {
        let p = format!("/api/activity?days={days}");
        bodies.push((p.clone(), ui.json(&p).to_string()));
    }
    let recent = ui.json("/api/recent?limit=1000");
    bodies.push(("/api/recent".into(), recent.to_string()));
    let sessions = recent["sessions"].as_array().expect("sessions");
    assert!(sessions.len() >= 10, "the fixture home has many sessions");
    for s in sessions {
        let id = s["session_id"].as_str().expect("id");
        let p = format!(
            "/api/session?id={}&limit=1000&q=token%20key%20password",
            enc(id)
        );
        bodies.push((p.clone(), ui.json(&p).to_string()));
    }
    // Searching for the secrets themselves, or words around them, finds
    // only redacted text.
    for q in [
        "token", "key", "password", "secret", "api", "aws", "REDACTED",
    ] {
        let p = format!("/api/search?limit=100&q={}", enc(q));
        bodies.push((p.clone(), ui.json(&p).to_string()));
    }
    for q in &secrets {
        // The answer echoes the query's own words for highlighting; only
        // what comes from the memory (the hits) is checked here.
        let p = format!("/api/search?limit=100&q={}", enc(q));
        bodies.push((p.clone(), ui.json(&p)["hits"].to_string()));
    }
    assert!(
        bodies.iter().any(|(_, b)| b.contains("[REDACTED:")),
        "redacted markers show where secrets were"
    );
    for (path, body) in &bodies {
        for s in &secrets {
            assert!(!body.contains(s.as_str()), "{path} leaks a planted secret");
        }
    }
}

/// A test home that always runs as the machine `name`.
pub struct Named {
    pub home: TestHome,
    pub name: &'static str,
}

impl Named {
    pub fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.home.cmd(args);
        c.env("HOSTNAME", self.name);
        c
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().expect("run cairn");
        assert!(
            out.status.success(),
            "{}: cairn {args:?} failed\n{}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).expect("JSON")
    }
}

/// Kills a child when dropped.
pub struct Reap(pub Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `inviter` runs `cairn pair --listen LISTEN`, `joiner` uses the code.
pub fn pair(inviter: &Named, joiner: &Named, listen: &str) {
    let mut child = inviter
        .cmd(&["pair", "--listen", listen, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cairn pair");
    let stdout = child.stdout.take().expect("stdout");
    let mut child = Reap(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(DEADLINE).expect("pairing code in time");
    let v: serde_json::Value = serde_json::from_str(&first).expect("code line");
    let code = v["code"].as_str().expect("code").to_owned();
    let joined = joiner.json(&["pair", &code, "--json"]);
    assert_eq!(joined["paired"]["name"], inviter.name);
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.0.try_wait().expect("try_wait") {
            assert!(st.success(), "the inviter exits cleanly after pairing");
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the inviter never exited");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Three machines in a line over loopback QUIC, through the real CLI:
/// `fixture-laptop` (the seeded home) ↔ `beta` (serving) ↔ `gamma`.
/// gamma's note reaches fixture-laptop only through beta, so on
/// fixture-laptop gamma is a relayed origin. Returns the three and beta's
/// daemon (kept running while the caller needs it).
pub fn three_in_a_line() -> (Named, Named, Named, Reap) {
    let a = Named {
        home: TestHome::seeded(),
        name: "fixture-laptop",
    };
    let b = Named {
        home: TestHome::empty(),
        name: "beta",
    };
    let c = Named {
        home: TestHome::empty(),
        name: "gamma",
    };
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    pair(&b, &a, &listen);
    pair(&b, &c, &listen);
    c.ok(&["remember", "gamma keeps the okapi build farm notes"]);
    let serve = Reap(
        b.cmd(&["serve", "--listen", &listen])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cairn serve"),
    );
    let start = std::time::Instant::now();
    while b.json(&["status", "--json"])["listen_addr"].as_str() != Some(listen.as_str()) {
        assert!(start.elapsed() < DEADLINE, "beta's daemon never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    // gamma → beta, then fixture-laptop ↔ beta (which now holds gamma's log).
    c.ok(&["sync"]);
    a.ok(&["index", "--quiet"]);
    a.ok(&["sync"]);
    let hits = a.json(&["search", "--json", "--no-refresh", "--", "okapi"]);
    assert_eq!(hits["hits"][0]["machine"], "gamma", "{hits}");
    (a, b, c, serve)
}

#[test]
fn machines_answer_shows_peers_sync_state_and_relayed_origins() {
    let (a, _b, _c, _serve) = three_in_a_line();
    let ui = UiProc::start(&a.home);
    let v = ui.json("/api/machines");
    let ms = v["machines"].as_array().expect("machines");
    let by = |name: &str| {
        ms.iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))
    };
    let me = by("fixture-laptop");
    assert_eq!(me["relation"], "self");
    assert!(me["records"].as_u64().is_some_and(|n| n > 50), "{me}");
    let beta = by("beta");
    assert_eq!(beta["relation"], "peer");
    assert!(beta["last_sync_ms"].as_i64().is_some(), "{beta}");
    assert!(beta["last_seen_ms"].as_i64().is_some(), "{beta}");
    assert_eq!(beta["behind"], 0, "{beta}");
    assert!(
        beta["records_received"].as_u64().is_some_and(|n| n >= 1),
        "{beta}"
    );
    assert!(
        beta["addresses"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("127.0.0.1:")),
        "{beta}"
    );
    let gamma = by("gamma");
    assert_eq!(gamma["relation"], "relayed");
    assert_eq!(gamma["records"], 1, "{gamma}");
    // The same peers as `cairn peers --json`.
    let cli = a.json(&["peers", "--json"]);
    let p = &cli["peers"][0];
    for k in [
        "node_id",
        "name",
        "last_sync_ms",
        "last_seen_ms",
        "records_received",
        "behind",
    ] {
        assert_eq!(beta[k], p[k], "{k}");
    }
    // The overview and the activity count gamma's note as gamma's.
    let o = ui.json("/api/overview");
    assert!(
        o["machines"]
            .as_array()
            .expect("machines")
            .contains(&serde_json::json!("gamma"))
    );
    let act = ui.json("/api/activity?days=2");
    assert!(
        act["by_machine"]
            .as_array()
            .expect("by machine")
            .iter()
            .any(|d| d["key"] == "gamma" && d["records"] == 1),
        "{act}"
    );
}
