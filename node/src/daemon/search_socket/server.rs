//! The daemon's side: a Unix socket that answers searches from a
//! read-only connection kept open (so its page cache and the parsed
//! schema stay warm between questions, as does the embedding
//! vocabulary's map), which keeps its mappings of the vector file and
//! its sketch (see `store::mapped`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use super::{MAX_REQUEST, Reply, Request, SOCKET_FILE, TOKEN_FILE, WireError, same_token};
use crate::search::{self, Query};
use crate::store::{Store, StoreError};

/// Searches answered at once; a request beyond them is refused at once
/// (the asker searches on its own).
const AT_ONCE: usize = 4;
/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the reply may take to be taken.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The page cache of the kept connection, in KiB (SQLite's negative
/// `cache_size`): the pages a search touches stay in memory.
const CACHE_KIB: u32 = 64 * 1024;

/// Failures to set the socket up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The socket or the token file could not be made.
    #[error("cannot listen for searches on {path}: {source}")]
    Io {
        /// The socket or token file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness for the token.
    #[error("no randomness for the search token: {0}")]
    Random(String),
}

/// A bound search socket, not serving yet. Dropping it removes the socket
/// and the token file.
pub struct SearchSocket {
    listener: UnixListener,
    socket: PathBuf,
    token_file: PathBuf,
    state: Arc<State>,
}

struct State {
    token: String,
    db_path: PathBuf,
    store: Mutex<Store>,
    at_once: Arc<Semaphore>,
}

impl SearchSocket {
    /// Binds the socket in `home` (the node's data folder), which only
    /// the running daemon may do: the caller holds the home's serve lock,
    /// so a socket file left there is a dead daemon's and is replaced.
    /// Opens `db_path` read-only and writes a new token. Must be called
    /// inside a tokio runtime.
    pub fn bind(home: &Path, db_path: &Path) -> Result<SearchSocket, SocketError> {
        let socket = home.join(SOCKET_FILE);
        let token_file = home.join(TOKEN_FILE);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SocketError::Io { path, source }
        };
        // The kept store keeps its mappings of the flat files between
        // searches (`store::mapped`).
        let store = Store::open_read_only(db_path)?;
        store.set_cache_kib(CACHE_KIB)?;
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| SocketError::Random(e.to_string()))?;
        let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&socket)(e)),
            _ => {}
        }
        let listener = UnixListener::bind(&socket).map_err(io(&socket))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
                .map_err(io(&socket))?;
        }
        crate::home::write_private_atomic(&token_file, token.as_bytes())
            .map_err(io(&token_file))?;
        Ok(SearchSocket {
            listener,
            socket,
            token_file,
            state: Arc::new(State {
                token,
                db_path: db_path.to_path_buf(),
                store: Mutex::new(store),
                at_once: Arc::new(Semaphore::new(AT_ONCE)),
            }),
        })
    }

    /// Readies the meaning tier now, off the async threads, instead of at
    /// the first question: builds the embedding vocabulary's map (so each
    /// question is split with it, not with a pass over the vocabulary) and
    /// maps the vector file and its sketch (see `store::mapped`). For a daemon whose configuration turns the meaning
    /// tier on; searches that arrive meanwhile wait (a few tens of ms).
    pub fn ready_meaning_tier(&self) {
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            crate::embed::builtin().warm();
            let store = state.store.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = store.vector_scan(crate::embed::builtin().dim()) {
                tracing::debug!(error = %e, "cannot read the vector file ahead of searches");
            }
        });
    }

    /// Answers searches until the task is dropped or aborted.
    pub async fn serve(self) {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "search socket: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                if let Err(e) = answer(stream, state).await {
                    tracing::debug!(error = %e, "search socket: a request ended early");
                }
            });
        }
    }
}

impl Drop for SearchSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.token_file);
    }
}

/// Reads one request, answers it, closes.
async fn answer(mut stream: UnixStream, state: Arc<State>) -> std::io::Result<()> {
    let request = tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time"))?;
    let reply = match request {
        Err(e) => Reply::Refused(e.to_string()),
        Ok(req) if !same_token(&req.token, &state.token) => {
            Reply::Refused("wrong token".to_owned())
        }
        Ok(req) if req.db_path != state.db_path => {
            Reply::Refused("this daemon serves another database".to_owned())
        }
        Ok(req) => match Arc::clone(&state.at_once).try_acquire_owned() {
            Err(_) => Reply::Refused("busy".to_owned()),
            Ok(permit) => {
                let state = Arc::clone(&state);
                let searched = tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    search_on(&state, &req)
                })
                .await;
                match searched {
                    Ok(reply) => reply,
                    Err(e) => Reply::Failed(format!("the search stopped: {e}")),
                }
            }
        },
    };
    let bytes = super::frame(&reply).map_err(std::io::Error::other)?;
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "reply not taken in time"))?
}

async fn read_request(stream: &mut UnixStream) -> Result<Request, WireError> {
    let mut header = [0u8; 4];
    let io = |e: std::io::Error| WireError::Malformed(e.to_string());
    stream.read_exact(&mut header).await.map_err(io)?;
    let len = super::body_len(header, MAX_REQUEST)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.map_err(io)?;
    super::unframe(&body)
}

/// Runs the search a request asks for, as `Node::search_page` would.
fn search_on(state: &State, req: &Request) -> Reply {
    let mut opts = match req.options() {
        Ok(o) => o,
        Err(e) => return Reply::Refused(e.to_string()),
    };
    opts.semantic = search::semantic::embedder_for(req.semantic, &req.query, &opts);
    let offset = usize::try_from(req.offset).unwrap_or(usize::MAX);
    let store = state.store.lock().unwrap_or_else(PoisonError::into_inner);
    match search::search_page(&store, &Query::parse(&req.query), &opts, offset) {
        Ok(page) => Reply::Page(page),
        Err(e) => Reply::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::search_socket::client::{AskError, ask};
    use crate::record::{Record, Role};
    use crate::search::SearchOptions;
    use std::io::{Read, Write};

    fn home_with_records() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("cairn.db");
        let mut store = Store::open(&db).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for (session, text) in [
            ("s1", "we pinned hyper to 0.14 because of the proxy bug"),
            ("s2", "switched the queue from redis to postgres"),
            ("s3", "hyper upgrade broke the build again"),
        ] {
            let mut r = Record::new("claude-code", session, Role::User, text);
            r.time_ms = Some(1_700_000_000_000);
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        (dir, db)
    }

    fn opts() -> SearchOptions {
        SearchOptions {
            limit: 10,
            now_ms: 1_764_547_200_000,
            ..SearchOptions::default()
        }
    }

    /// One raw exchange on the socket: `bytes` sent, the reply read.
    fn exchange(socket: &Path, bytes: &[u8]) -> Reply {
        let mut s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(bytes).expect("send");
        let mut header = [0u8; 4];
        s.read_exact(&mut header).expect("header");
        let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
        s.read_exact(&mut body).expect("body");
        super::super::unframe(&body).expect("reply")
    }

    #[test]
    fn the_socket_answers_what_a_search_here_answers_and_refuses_strangers() {
        let (dir, db) = home_with_records();
        let home = dir.path().to_path_buf();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let socket = rt
            .block_on(async { SearchSocket::bind(&home, &db) })
            .expect("bind");
        // As the daemon does with the meaning tier on (no vector file here).
        rt.block_on(async { socket.ready_meaning_tier() });
        let served = rt.spawn(socket.serve());
        let sock = home.join(SOCKET_FILE);
        {
            use std::os::unix::fs::PermissionsExt;
            for f in [&sock, &home.join(TOKEN_FILE)] {
                let mode = std::fs::metadata(f).expect("meta").permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "{}", f.display());
            }
        }

        // The page is the one this process finds, to the byte.
        let store = Store::open_read_only(&db).expect("open");
        for (q, lexical) in [("why did we pin hyper", false), ("queue", true)] {
            let mut o = opts();
            o.lexical_only = lexical;
            let got = ask(&home, &db, q, &o, 0, true).expect("served");
            o.semantic = crate::search::semantic::embedder_for(true, q, &o);
            let here = search::search_page(&store, &Query::parse(q), &o, 0).expect("here");
            assert!(!got.hits.is_empty(), "{q}");
            assert_eq!(
                serde_json::to_string(&got).expect("json"),
                serde_json::to_string(&here).expect("json"),
                "{q}"
            );
        }

        // Another database: refused, so the asker searches it itself.
        let other = home.join("other.db");
        assert!(matches!(
            ask(&home, &other, "hyper", &opts(), 0, true),
            Err(AskError::Refused(_))
        ));
        // A wrong token, an oversized frame, garbage: refused, and the
        // socket still answers afterwards.
        let mut req = super::super::Request::new(
            "not the token".into(),
            db.clone(),
            "hyper",
            &opts(),
            0,
            true,
        );
        let bytes = super::super::frame(&req).expect("frame");
        assert!(matches!(exchange(&sock, &bytes), Reply::Refused(_)));
        assert!(matches!(
            exchange(&sock, &(MAX_REQUEST + 1).to_be_bytes()),
            Reply::Refused(_)
        ));
        assert!(matches!(
            exchange(&sock, &[0, 0, 0, 3, 0xff, 0xff, 0xff]),
            Reply::Refused(_)
        ));
        req.token = std::fs::read_to_string(home.join(TOKEN_FILE)).expect("token");
        req.roles = vec!["root".into()];
        let bytes = super::super::frame(&req).expect("frame");
        assert!(matches!(exchange(&sock, &bytes), Reply::Refused(_)));
        assert!(ask(&home, &db, "hyper", &opts(), 0, true).is_ok());

        // Gone with the daemon: the socket and the token are removed.
        served.abort();
        rt.shutdown_timeout(Duration::from_secs(5));
        assert!(!sock.exists());
        assert!(!home.join(TOKEN_FILE).exists());
        assert!(matches!(
            ask(&home, &db, "hyper", &opts(), 0, true),
            Err(AskError::Io(_))
        ));
    }
}
