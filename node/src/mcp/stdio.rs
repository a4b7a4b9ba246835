//! The MCP server's line transport: a thin filter between the client's
//! byte stream and rmcp.
//!
//! Every incoming line is screened ([`super::jsonrpc::screen`]): well-formed
//! messages go on to rmcp unchanged through an in-memory pipe, malformed
//! ones are answered here with the JSON-RPC error the specification names.
//! rmcp's answers and the filter's come back through one writer task, one
//! whole line at a time, so they never interleave. A line longer than
//! [`MAX_LINE`] is discarded unread and answered as an invalid request.

use rmcp::{ServerHandler, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::jsonrpc::{self, Screened};

/// Longest incoming line (one message) read, as rmcp's own default.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Lines queued for the writer before readers wait.
const QUEUE: usize = 64;

/// Why the transport stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client never completed the MCP handshake.
    #[error("failed to complete the MCP handshake: {0}")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The service task ended abnormally.
    #[error("the MCP service stopped abnormally: {0}")]
    Join(#[source] tokio::task::JoinError),
}

/// Serves `handler` over newline-delimited JSON-RPC on `input`/`output`
/// until the client closes `input`; every answer is written out before
/// this returns.
pub async fn serve_lines<H, R, W>(handler: H, input: R, output: W) -> Result<(), StdioError>
where
    H: ServerHandler,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_end, our_end) = tokio::io::duplex(64 * 1024);
    let (from_rmcp, to_rmcp) = tokio::io::split(our_end);
    let (tx, rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    let writer = tokio::spawn(write_lines(rx, output));
    let pump = tokio::spawn(pump_lines(from_rmcp, tx.clone()));
    let filter = tokio::spawn(filter_lines(input, to_rmcp, tx));
    let outcome = async {
        let running = handler
            .serve(rmcp_end)
            .await
            .map_err(|e| StdioError::Handshake(Box::new(e)))?;
        tracing::info!("mcp server ready");
        let reason = running.waiting().await.map_err(StdioError::Join)?;
        tracing::info!(?reason, "mcp server stopped");
        Ok(())
    }
    .await;
    // rmcp has dropped its end of the pipe: the pump ends, then the writer
    // drains what is queued and ends once the filter is done too.
    filter.abort();
    let _ = pump.await;
    let _ = filter.await;
    let _ = writer.await;
    outcome
}

/// Copies rmcp's output, line by line, into the writer's queue.
async fn pump_lines<R: AsyncRead + Unpin>(from: R, tx: mpsc::Sender<Vec<u8>>) {
    let mut from = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Writes queued lines to the client, flushing after each.
async fn write_lines<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(line) = rx.recv().await {
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            // The client is gone; keep draining so nobody blocks on the queue.
            while rx.recv().await.is_some() {}
            return;
        }
    }
}

/// Reads the client's lines, forwards the good ones to rmcp and answers
/// the rest; closes rmcp's input at the client's end of input.
async fn filter_lines<R, W>(input: R, mut to_rmcp: W, tx: mpsc::Sender<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_bounded_line(&mut input, &mut line).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong) => {
                tracing::warn!(max = MAX_LINE, "discarded an oversized MCP message");
                let reply = jsonrpc::error_line(
                    serde_json::Value::Null,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid request: message too large",
                );
                if send_line(&tx, reply).await.is_err() {
                    break;
                }
            }
            Ok(Line::Complete) => match jsonrpc::screen(&line) {
                Screened::Forward => {
                    line.push(b'\n');
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                }
                Screened::Reply(reply) => {
                    tracing::debug!("answered a malformed MCP message");
                    if send_line(&tx, reply).await.is_err() {
                        break;
                    }
                }
                Screened::Ignore => {}
            },
            Err(e) => {
                tracing::error!(error = %e, "reading MCP input failed");
                break;
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
}

async fn send_line(tx: &mpsc::Sender<Vec<u8>>, mut text: String) -> Result<(), ()> {
    text.push('\n');
    tx.send(text.into_bytes()).await.map_err(|_| ())
}

enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (without the newline), never
/// holding more than [`MAX_LINE`] bytes; a final line without a newline
/// counts as a line.
async fn read_bounded_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i);
        if !too_long {
            if buf.len() + take > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&available[..take]);
            }
        }
        let consumed = newline.map_or(take, |i| i + 1);
        input.consume(consumed);
        if newline.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}
