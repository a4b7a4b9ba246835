//! The browse page's access rules, as pure functions plus one middleware:
//! loopback binds only, request targets in origin form only (`/path`, never
//! `http://host/path`, which browsers send to proxies alone), a `Host`
//! header naming this very server (no DNS rebinding), and a random token (from the URL once, then from an
//! `HttpOnly; SameSite=Strict` cookie) on every request.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::UiState;

/// Name of the cookie that carries the token of the server on `port`.
/// Browsers keep cookies per host, not per port, so the port is in the
/// name: two browse servers side by side do not overwrite each other's.
pub fn cookie_name(port: u16) -> String {
    format!("cairn_ui_{port}")
}

/// Headers every answer carries: no caching, no sniffing, no framing, no
/// referrer, and a content policy that allows nothing from elsewhere.
pub const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-resource-policy", "same-origin"),
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
];

/// Whether a listen address is acceptable: loopback only.
pub fn bind_allowed(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The `Host` values this server answers to on `port`.
pub fn allowed_hosts(port: u16) -> [String; 3] {
    [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ]
}

/// Whether a `Host` header names this server (exactly, with its port).
pub fn host_allowed(host: Option<&str>, port: u16) -> bool {
    host.is_some_and(|h| {
        let h = h.trim().to_ascii_lowercase();
        allowed_hosts(port).contains(&h)
    })
}

/// Whether a request target is in origin form (`/path?query`), the only
/// form a browser sends to a server it does not use as a proxy. The
/// absolute form (`http://host:port/path`) is for proxies: answering it
/// would make this page reachable under whatever authority the target
/// names, checked by nothing but the `Host` header beside it.
pub fn origin_form(uri: &Uri) -> bool {
    uri.scheme().is_none() && uri.authority().is_none() && uri.path().starts_with('/')
}

/// Equality that takes the same time wherever the strings differ.
pub fn same_token(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token in a `Cookie` header for the server on `port`, if any.
pub fn cookie_token(headers: &HeaderMap, port: u16) -> Option<String> {
    let name = cookie_name(port);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The `token` parameter of a query string, if any, and the query without it.
pub fn split_token(query: Option<&str>) -> (Option<String>, String) {
    let mut token = None;
    let mut rest = Vec::new();
    for kv in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        match kv.split_once('=') {
            Some(("token", v)) => token = Some(v.to_owned()),
            _ => rest.push(kv),
        }
    }
    (token, rest.join("&"))
}

/// A fresh token: 32 random bytes as hex.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut r = (status, why).into_response();
    add_security_headers(&mut r);
    r
}

/// Adds [`SECURITY_HEADERS`] to a response.
pub fn add_security_headers(r: &mut Response) {
    for (k, v) in SECURITY_HEADERS {
        r.headers_mut().insert(k, HeaderValue::from_static(v));
    }
}

/// The middleware in front of every route: checks the method, `Host` and
/// token; a valid token in the URL becomes a cookie and the URL is
/// reloaded without it, so it does not linger in the address bar or history.
pub(crate) async fn check(State(state): State<Arc<UiState>>, req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::GET && req.method() != axum::http::Method::HEAD {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "read-only\n");
    }
    if !origin_form(req.uri()) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "absolute-form request target refused: this server is not a proxy; ask for the path alone (GET /...)\n",
        );
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if !host_allowed(host, state.port) {
        return refuse(StatusCode::FORBIDDEN, "unexpected Host header\n");
    }
    let (url_token, rest) = split_token(req.uri().query());
    if let Some(t) = url_token {
        if !same_token(&t, &state.token) {
            return refuse(StatusCode::UNAUTHORIZED, "wrong token\n");
        }
        let target = if rest.is_empty() {
            req.uri().path().to_owned()
        } else {
            format!("{}?{rest}", req.uri().path())
        };
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            cookie_name(state.port),
            state.token
        );
        let mut r = StatusCode::SEE_OTHER.into_response();
        if let (Ok(loc), Ok(c)) = (
            HeaderValue::from_str(&target),
            HeaderValue::from_str(&cookie),
        ) {
            r.headers_mut().insert(header::LOCATION, loc);
            r.headers_mut().insert(header::SET_COOKIE, c);
        }
        add_security_headers(&mut r);
        return r;
    }
    match cookie_token(req.headers(), state.port) {
        Some(t) if same_token(&t, &state.token) => {
            let mut r = next.run(req).await;
            add_security_headers(&mut r);
            r
        }
        _ => refuse(
            StatusCode::UNAUTHORIZED,
            "open the address `cairn ui` printed (it carries the token)\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_only_to_loopback() {
        for ok in ["127.0.0.1:0", "127.0.0.2:8080", "[::1]:7879"] {
            assert!(bind_allowed(&ok.parse().expect("addr")), "{ok}");
        }
        for bad in ["0.0.0.0:0", "[::]:0", "192.168.1.4:80", "10.0.0.1:1"] {
            assert!(!bind_allowed(&bad.parse().expect("addr")), "{bad}");
        }
    }

    #[test]
    fn host_must_name_this_server() {
        assert!(host_allowed(Some("127.0.0.1:4321"), 4321));
        assert!(host_allowed(Some("LOCALHOST:4321"), 4321));
        assert!(host_allowed(Some("[::1]:4321"), 4321));
        assert!(!host_allowed(Some("127.0.0.1:4322"), 4321));
        assert!(!host_allowed(Some("127.0.0.1"), 4321));
        assert!(!host_allowed(Some("evil.example:4321"), 4321));
        assert!(!host_allowed(Some("localhost.evil.example:4321"), 4321));
        assert!(!host_allowed(None, 4321));
    }

    #[test]
    fn only_origin_form_targets_are_answered() {
        for ok in ["/", "/api/search?q=x", "//double/slash"] {
            assert!(origin_form(&ok.parse().expect("uri")), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:4321/",
            "http://127.0.0.1:4321/api/overview?token=t",
            "https://localhost:4321/app.js",
            "127.0.0.1:4321",
            "*",
        ] {
            assert!(!origin_form(&bad.parse().expect("uri")), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_and_split() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "abcd"));
        assert_eq!(
            split_token(Some("q=x&token=t1&agent=codex")),
            (Some("t1".into()), "q=x&agent=codex".into())
        );
        assert_eq!(split_token(None), (None, String::new()));
        let t = new_token().expect("random");
        assert_eq!(t.len(), 64);
        assert_ne!(t, new_token().expect("random"));
    }

    #[test]
    fn cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; cairn_ui_81=other; cairn_ui_80=tok; b=2"),
        );
        assert_eq!(cookie_token(&h, 80).as_deref(), Some("tok"));
        assert_eq!(cookie_token(&h, 81).as_deref(), Some("other"));
        assert_eq!(cookie_token(&h, 8), None);
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("cairn_ui_80x=tok"));
        assert_eq!(cookie_token(&h, 80), None);
    }
}
