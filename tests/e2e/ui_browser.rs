//! The browse page in a real browser: headless Chromium driven over the
//! DevTools protocol (a WebSocket, JSON commands) against `cairn ui` on a
//! fixture home paired with a second node. Asserts on the page's content;
//! screenshots go to `target/tmp/ui-screenshots/` for people to look at.
//! Skips loudly when no Chromium is installed (`.ci/run` installs it).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::ui::{DEADLINE, UiProc, plain_get, three_in_a_line};
use crate::util::TestHome;

/// The browser binary: `$CAIRN_CHROMIUM`, else the usual names on `PATH`.
fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAIRN_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A headless Chromium with a throwaway profile, killed when dropped.
struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    devtools: SocketAddr,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    fn start(bin: &Path) -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let child = std::process::Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1100,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        // Chromium writes its DevTools port into the profile once it listens.
        let port_file = profile.path().join("DevToolsActivePort");
        let port = wait_for("chromium's DevTools port", || {
            let s = std::fs::read_to_string(&port_file).ok()?;
            s.lines().next()?.trim().parse::<u16>().ok()
        });
        Browser {
            child,
            _profile: profile,
            devtools: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// Connects to the first page target.
    fn page(&self) -> Cdp {
        let ws_url = wait_for("a page target", || {
            let r = plain_get(self.devtools, "/json/list", "127.0.0.1");
            let v: Value = serde_json::from_str(&r.body).ok()?;
            v.as_array()?
                .iter()
                .find(|t| t["type"] == "page")
                .and_then(|t| t["webSocketDebuggerUrl"].as_str())
                .map(str::to_owned)
        });
        let stream = TcpStream::connect(self.devtools).expect("connect to DevTools");
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("read timeout");
        let (ws, _) = tungstenite::client(ws_url.as_str(), stream).expect("DevTools WebSocket");
        Cdp { ws, next_id: 0 }
    }
}

/// Polls `f` until it gives a value, for at most [`DEADLINE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

/// A DevTools protocol session with one page.
struct Cdp {
    ws: tungstenite::WebSocket<TcpStream>,
    next_id: u64,
}

impl Cdp {
    /// Sends a command and returns its result (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({ "id": id, "method": method, "params": params });
        self.ws
            .send(tungstenite::Message::text(msg.to_string()))
            .expect("send DevTools command");
        loop {
            // A signal to this process (another test's child stopping)
            // interrupts a read with a timeout; read again.
            let m = match self.ws.read() {
                Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::Interrupted => {
                    continue;
                }
                r => r.expect("DevTools answer"),
            };
            let tungstenite::Message::Text(t) = m else {
                continue;
            };
            let v: Value = serde_json::from_str(t.as_str()).expect("DevTools JSON");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method} failed: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates a JavaScript expression in the page and returns its value.
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "page threw on {expr}: {r}"
        );
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is truthy in the page (a throw, e.g. while a
    /// reload has not built the page yet, counts as not yet).
    fn wait_true(&mut self, what: &str, expr: &str) {
        let guarded =
            format!("(() => {{ try {{ return !!({expr}); }} catch (e) {{ return false; }} }})()");
        wait_for(what, || {
            let v = self.eval(&guarded);
            (v.as_bool() == Some(true)).then_some(())
        });
    }

    fn text(&mut self, selector: &str) -> String {
        let expr = format!(
            "(() => {{ const e = document.querySelector({}); return e ? e.innerText : null; }})()",
            serde_json::to_string(selector).expect("selector")
        );
        self.eval(&expr).as_str().unwrap_or_default().to_owned()
    }

    fn screenshot(&mut self, name: &str) -> PathBuf {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .expect("base64 PNG");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(name);
        std::fs::write(&path, png).expect("write screenshot");
        path
    }
}

/// The browser, or a loud skip message.
fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        eprintln!(
            "\n*** SKIPPED {test}: no Chromium found (install the `chromium` package, \
             or set CAIRN_CHROMIUM); .ci/run installs it ***\n"
        );
    }
    found
}

#[test]
fn browse_page_in_headless_chromium() {
    let Some(chromium) = chromium_or_skip("browse_page_in_headless_chromium") else {
        return;
    };
    // fixture-laptop ↔ beta ↔ gamma: gamma is a relayed origin here.
    let (a, _b, _c, _serve) = three_in_a_line();
    let ui = UiProc::start(&a.home);
    let browser = Browser::start(&chromium);
    let mut page = browser.page();
    page.call("Page.enable", json!({}));
    page.call("Page.navigate", json!({ "url": ui.url }));
    page.wait_true(
        "the search box",
        "document.querySelector('#q') !== null && location.search === ''",
    );
    // The token moved from the URL into a cookie that scripts cannot read.
    assert_eq!(page.eval("document.cookie"), json!(""));

    // Search for a planted fact by typing it.
    page.eval("document.querySelector('#q').focus()");
    page.call("Input.insertText", json!({ "text": "float64 rounding" }));
    page.wait_true(
        "search results",
        "document.querySelectorAll('article.hit').length > 0",
    );
    let results = page.text("#results");
    assert!(results.contains("opencode"), "{results}");
    assert!(results.contains("on fixture-laptop"), "{results}");
    let marks = page.eval(
        "[...document.querySelectorAll('#results mark')].map(m => m.textContent.toLowerCase())",
    );
    assert!(
        marks
            .as_array()
            .is_some_and(|m| m.contains(&json!("rounding"))),
        "highlighted: {marks}"
    );
    assert!(
        page.eval("location.hash")
            .as_str()
            .unwrap_or_default()
            .contains("q=float64"),
        "the query is in the address, so it can be shared or reloaded"
    );
    page.screenshot("search.png");

    // Open the session: the match is highlighted, focused and in view.
    page.eval("document.querySelector('article.hit a.title').click()");
    page.wait_true(
        "the session transcript",
        "document.querySelector('.rec.focus') !== null",
    );
    let focus = page.text(".rec.focus");
    assert!(
        focus.contains("integer cents because float64 rounding"),
        "{focus}"
    );
    let focus_marks = page.eval(
        "[...document.querySelectorAll('.rec.focus mark')].map(m => m.textContent.toLowerCase()).sort()",
    );
    assert_eq!(focus_marks, json!(["float64", "rounding"]));
    assert_eq!(
        page.eval(
            "(() => { const r = document.querySelector('.rec.focus').getBoundingClientRect(); \
             return r.top >= 0 && r.bottom <= window.innerHeight; })()"
        ),
        json!(true),
        "the match is scrolled into view"
    );
    let roles = page.eval("[...document.querySelectorAll('.rec')].map(r => r.className)");
    let roles = roles.to_string();
    assert!(
        roles.contains("rec user") && roles.contains("rec tool_call"),
        "{roles}"
    );
    assert_eq!(
        page.eval("document.querySelector('.rec.tool_call details').open"),
        json!(false),
        "tool calls are folded"
    );
    page.screenshot("session.png");

    // "copy handoff" copies the session's brief; the resume command is shown.
    page.eval(
        "window.__copied = null; if (navigator.clipboard) { navigator.clipboard.writeText = \
         (t) => { window.__copied = t; return Promise.resolve(); }; }",
    );
    page.eval("document.querySelector('.handoff button').click()");
    page.wait_true(
        "the handoff brief copied (or shown to copy by hand)",
        "window.__copied !== null || document.querySelector('.copybox') !== null",
    );
    let copied = page.eval(
        "window.__copied !== null ? window.__copied : document.querySelector('.copybox').value",
    );
    let copied = copied.as_str().unwrap_or_default();
    assert!(
        copied.contains("# Handoff: opencode session") && copied.contains("integer cents"),
        "{copied}"
    );
    assert!(
        page.text(".handoff").contains("cairn resume 3d0c9a52"),
        "the resume command is on the session view"
    );

    // The machines page shows the paired peer in the picture and the table.
    page.eval("location.hash = '#/machines'");
    page.wait_true(
        "the machines table",
        "document.querySelector('table#machines') !== null",
    );
    let table = page.text("table#machines");
    assert!(
        table.contains("fixture-laptop") && table.contains("beta"),
        "{table}"
    );
    assert!(
        table.contains("peer") && table.contains("this machine"),
        "{table}"
    );
    let graph = page
        .eval("[...document.querySelectorAll('svg.graph text')].map(t => t.textContent).join('|')");
    let graph = graph.as_str().unwrap_or_default();
    assert!(
        graph.contains("beta") && graph.contains("gamma") && graph.contains("synced"),
        "{graph}"
    );
    assert!(!graph.contains("never synced"), "{graph}");
    assert_eq!(
        page.eval("document.querySelectorAll('svg.graph line.link').length"),
        json!(2),
        "one link to the peer, one dashed to the relayed origin"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('svg.graph line.link.relayed').length"),
        json!(1)
    );
    assert!(
        table.contains("gamma") && table.contains("relayed"),
        "{table}"
    );
    page.screenshot("machines.png");

    // Activity: the period is always in the address, survives a reload,
    // the axis shows the range's real dates and the bars stay readable.
    activity_view(&mut page);
    page.eval("location.hash = '#/recent?since='");
    page.wait_true(
        "recent sessions",
        "document.querySelectorAll('#recent .row').length > 5",
    );

    // A narrow window: nothing wider than the screen.
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 380, "height": 800, "deviceScaleFactor": 1, "mobile": true }),
    );
    page.eval("location.hash = '#/search?q=rounding'");
    page.wait_true(
        "narrow search results",
        "document.querySelectorAll('article.hit').length > 0",
    );
    let overflow = page.eval("document.documentElement.scrollWidth - window.innerWidth");
    assert!(
        overflow.as_i64().is_some_and(|o| o <= 0),
        "no sideways scrolling at 380 px: {overflow}"
    );
    let path = page.screenshot("search-narrow.png");
    eprintln!(
        "screenshots in {}",
        path.parent().unwrap_or(&path).display()
    );
    drop(browser);
}

/// The local date `back` days before today, as the browser's own clock
/// and time zone give it (not the page's day numbers), `YYYY-MM-DD`.
fn local_date(page: &mut Cdp, back: i64) -> String {
    let v = page.eval(&format!(
        "(() => {{ const t = new Date(); t.setDate(t.getDate() - {back}); \
         const p = (n) => String(n).padStart(2, '0'); \
         return t.getFullYear() + '-' + p(t.getMonth() + 1) + '-' + p(t.getDate()); }})()"
    ));
    v.as_str().expect("a date").to_owned()
}

/// The activity page (gamma's note, written today, is in every period).
fn activity_view(page: &mut Cdp) {
    const SEL: &str = "document.querySelector('select[name=days]')";
    // Reached without a period: the default one is written into the address.
    page.eval("location.hash = '#/activity'");
    page.wait_true(
        "the activity page with its period in the address",
        &format!(
            "location.hash === '#/activity?days=30' && {SEL}.value === '30' \
             && document.querySelector('svg.chart') !== null"
        ),
    );
    for (days, per) in [(30, "a day"), (90, "a day"), (365, "a week")] {
        // Chosen in the selector, as a person does.
        page.eval(&format!(
            "(() => {{ const s = {SEL}; s.value = '{days}'; s.dispatchEvent(new Event('change')); }})()"
        ));
        page.wait_true(
            &format!("the {days}-day period in the address"),
            &format!(
                "location.hash === '#/activity?days={days}' \
                 && document.querySelector('#range').textContent.includes('one bar {per}') \
                 && document.querySelectorAll('svg.chart rect.bar-seg').length > 0"
            ),
        );
        // The axis ends on the range's real first and last dates.
        let ends = page.eval(
            "[...document.querySelector('svg.chart').querySelectorAll('text.date.first, text.date.last')].map(t => t.textContent)",
        );
        let (first, last) = (local_date(page, days - 1), local_date(page, 0));
        assert_eq!(ends, json!([first, last]), "{days} days");
        let range = page.text("#range");
        assert!(range.contains(&first) && range.contains(&last), "{range}");
        // Dates between the ends too, and every bar wide enough to see
        // and to point at.
        let ticks = page
            .eval("document.querySelector('svg.chart').querySelectorAll('text.date.tick').length");
        assert!(
            ticks.as_u64().is_some_and(|n| n >= 2),
            "{days} days: {ticks} ticks"
        );
        let narrowest = page.eval(
            "Math.min(...[...document.querySelectorAll('svg.chart rect.bar-seg')].map(r => r.getBoundingClientRect().width))",
        );
        assert!(
            narrowest.as_f64().is_some_and(|w| w >= 3.0),
            "{days} days: a bar {narrowest} px wide"
        );
        page.screenshot(&format!("activity-{days}.png"));
    }
    // A reload keeps the period, and so does a later visit without one.
    page.call("Page.reload", json!({}));
    page.wait_true(
        "the period after a reload",
        &format!("location.hash === '#/activity?days=365' && {SEL}.value === '365' && document.querySelector('svg.chart') !== null"),
    );
    page.eval("location.hash = '#/machines'");
    page.wait_true(
        "the machines page",
        "document.querySelector('table#machines') !== null",
    );
    page.eval("location.hash = '#/activity'");
    page.wait_true(
        "the last period chosen, back in the address",
        &format!("location.hash === '#/activity?days=365' && {SEL}.value === '365'"),
    );
}

#[test]
fn empty_states_explain_and_memory_text_stays_text() {
    let Some(chromium) = chromium_or_skip("empty_states_explain_and_memory_text_stays_text") else {
        return;
    };
    let home = TestHome::empty();
    let ui = UiProc::start(&home);
    let browser = Browser::start(&chromium);
    let mut page = browser.page();
    page.call("Page.enable", json!({}));
    page.call(
        "Page.navigate",
        json!({ "url": format!("{}#/search?q=anything", ui.url) }),
    );
    page.wait_true(
        "the empty state",
        "document.querySelector('#results .empty') !== null",
    );
    let empty = page.text("#results");
    assert!(empty.contains("No agent history is indexed"), "{empty}");
    assert!(
        empty.contains(".claude") && empty.contains("cairn index"),
        "which paths were checked: {empty}"
    );
    page.eval("location.hash = '#/machines'");
    page.wait_true(
        "the machines page",
        "document.querySelector('table#machines') !== null",
    );
    let machines = page.text("main");
    assert!(
        machines.contains("No paired machines yet") && machines.contains("cairn pair CODE"),
        "{machines}"
    );
    page.eval("location.hash = '#/recent'");
    page.wait_true(
        "the recent page",
        "document.querySelector('#recent .empty') !== null",
    );
    page.screenshot("empty-recent.png");

    // Text that looks like markup is shown as text and never runs.
    let hostile = "<img src=x onerror=\"document.title='pwned'\"> <b>bold</b> hostile okapi note";
    home.ok(&["remember", hostile]);
    page.call("Page.reload", json!({}));
    page.wait_true(
        "the page after reload",
        "document.querySelector('#whoami').textContent.includes('1 records')",
    );
    page.eval("location.hash = '#/search?q=okapi'");
    page.wait_true(
        "the note found",
        "document.querySelectorAll('article.hit').length === 1",
    );
    let hit = page.text("article.hit");
    assert!(
        hit.contains("<img src=x") && hit.contains("<b>bold</b>"),
        "{hit}"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('main img, main b').length"),
        json!(0)
    );
    page.eval("document.querySelector('article.hit a.title').click()");
    page.wait_true(
        "the note's session",
        "document.querySelector('.rec.focus') !== null",
    );
    assert_eq!(
        page.eval("document.querySelectorAll('main img, main b').length"),
        json!(0)
    );
    assert_ne!(page.eval("document.title"), json!("pwned"));
    page.screenshot("hostile-text.png");
}
