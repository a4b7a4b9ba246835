//! The local browse page (`cairn ui`): an HTTP server on loopback that
//! serves a small embedded HTML/CSS/JS page and read-only JSON answers
//! from the same store functions the CLI uses (search, show, status,
//! peers), plus the browse reads of `store::browse`.
//!
//! Security rules (see [`guard`]): binds to loopback only, answers only to
//! a `Host` that names this server, demands a random token on every
//! request (URL once, then an `HttpOnly; SameSite=Strict` cookie), sends
//! no CORS headers and a strict content policy, accepts only GET/HEAD, and
//! opens the database read-only.

mod api;
mod assets;
pub mod guard;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::get;

use crate::store::{Store, StoreError};

/// Failures of the browse server.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// A listen address that is not loopback.
    #[error(
        "the browse page listens on loopback only (127.0.0.1, ::1); {addr} is not a loopback address"
    )]
    NotLoopback {
        /// The refused address.
        addr: SocketAddr,
    },
    /// Binding or serving failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed after the bind.
    #[error("the browse server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness for the token.
    #[error("no randomness for the access token: {0}")]
    Random(String),
}

/// What the browse server needs to know about the node it shows.
#[derive(Debug, Clone)]
pub struct UiContext {
    /// The node's data folder (peer table, `serve.json`).
    pub home: PathBuf,
    /// The database, opened read-only.
    pub db_path: PathBuf,
    /// This node's id.
    pub node_id: String,
    /// This node's name.
    pub node_name: String,
    /// Where agent histories were looked for (shown when none was found).
    pub checked: Vec<PathBuf>,
    /// Whether search uses the meaning tier (`[search] semantic`).
    pub semantic: bool,
}

/// Shared by every request.
pub(crate) struct UiState {
    pub(crate) ctx: UiContext,
    pub(crate) store: Mutex<Store>,
    pub(crate) token: String,
    pub(crate) port: u16,
}

/// A bound, not yet serving, browse server.
pub struct UiServer {
    listener: tokio::net::TcpListener,
    state: Arc<UiState>,
    addr: SocketAddr,
}

impl UiServer {
    /// Binds `addr` (loopback only) and opens the database read-only.
    /// Must be called inside a tokio runtime.
    pub async fn bind(addr: SocketAddr, ctx: UiContext) -> Result<UiServer, UiError> {
        if !guard::bind_allowed(&addr) {
            return Err(UiError::NotLoopback { addr });
        }
        let store = Store::open_read_only(&ctx.db_path)?;
        let token = guard::new_token().map_err(|e| UiError::Random(e.to_string()))?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| UiError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| UiError::Bind { addr, source })?;
        Ok(UiServer {
            listener,
            addr: bound,
            state: Arc::new(UiState {
                ctx,
                store: Mutex::new(store),
                token,
                port: bound.port(),
            }),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address to open: it carries the token once.
    pub fn url(&self) -> String {
        let host = match self.addr {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        format!(
            "http://{host}:{}/?token={}",
            self.addr.port(),
            self.state.token
        )
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), UiError> {
        let app = router(self.state);
        axum::serve(self.listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(UiError::Serve)
    }
}

fn router(state: Arc<UiState>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/favicon.svg", get(assets::icon))
        .route("/api/overview", get(api::overview))
        .route("/api/search", get(api::search))
        .route("/api/session", get(api::session))
        .route("/api/recent", get(api::recent))
        .route("/api/machines", get(api::machines))
        .route("/api/activity", get(api::activity))
        .route("/api/handoff", get(api::handoff))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::check,
        ))
        .with_state(state)
}
