//! The asking side: one request to the daemon's search socket, bounded in
//! time and size.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{MAX_REPLY, MAX_TOKEN, Reply, Request, SOCKET_FILE, TOKEN_FILE, WireError};
use crate::search::{Page, SearchOptions};

/// How long the daemon may take to answer. A search takes milliseconds;
/// past this the asker searches on its own.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why the daemon gave no page.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// No socket or token, or the connection failed.
    #[error("cannot reach the daemon's search socket: {0}")]
    Io(#[from] std::io::Error),
    /// A frame that could not be read.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The daemon would not answer.
    #[error("the daemon did not answer: {0}")]
    Refused(String),
    /// The daemon's search failed.
    #[error("the daemon's search failed: {0}")]
    Failed(String),
}

/// Asks the daemon of `home` (the node's data folder) for the page a
/// search of `db_path` for `query` gives, with `semantic` saying whether
/// the meaning tier is on.
pub fn ask(
    home: &Path,
    db_path: &Path,
    query: &str,
    opts: &SearchOptions,
    offset: usize,
    semantic: bool,
) -> Result<Page, AskError> {
    let mut token = String::new();
    std::fs::File::open(home.join(TOKEN_FILE))?
        .take(MAX_TOKEN)
        .read_to_string(&mut token)?;
    let request = Request::new(
        token.trim().to_owned(),
        db_path.to_path_buf(),
        query,
        opts,
        offset,
        semantic,
    );
    let mut stream = UnixStream::connect(home.join(SOCKET_FILE))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    stream.write_all(&super::frame(&request)?)?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header)?;
    let len = super::body_len(header, MAX_REPLY)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    match super::unframe(&body)? {
        Reply::Page(page) => Ok(page),
        Reply::Refused(why) => Err(AskError::Refused(why)),
        Reply::Failed(why) => Err(AskError::Failed(why)),
    }
}
