//! Length-prefixed framing: a u32 big-endian body length, then one CBOR
//! [`Message`].
//!
//! Owns the frame layout, the size cap and the incremental decoder. The
//! length is checked against the cap as soon as its four bytes arrive, before
//! anything is reserved for the body, and the decoder only ever holds bytes
//! that actually arrived. Never does I/O: the node reads from QUIC and
//! pushes the bytes in.

use crate::limits::{FRAME_HEADER_LEN, MAX_FRAME};
use crate::message::Message;

/// Encoding a message failed.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The encoded body exceeds the frame cap.
    #[error("encode frame: body is {len} bytes, the cap is {max}")]
    TooLarge {
        /// Encoded body length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// The CBOR serializer failed (not expected for these types).
    #[error("encode frame: cbor serialization failed")]
    Cbor(#[source] ciborium::ser::Error<std::io::Error>),
}

/// A frame body did not decode to a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not valid CBOR for any message (includes unknown variants, missing
    /// fields and element caps exceeded).
    #[error("decode message: invalid cbor")]
    Cbor(#[source] ciborium::de::Error<std::io::Error>),
    /// A valid message followed by extra bytes inside the frame.
    #[error("decode message: {extra} trailing bytes after the message")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
}

/// The byte stream is not a valid sequence of frames. Fatal for the stream.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A header announced a body larger than the cap.
    #[error("decode frame: header announces {len} bytes, the cap is {max}")]
    TooLarge {
        /// Announced body length.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// The stream ended inside a frame.
    #[error("decode frame: stream ended {buffered} bytes into an unfinished frame")]
    Truncated {
        /// Bytes of the unfinished frame that did arrive.
        buffered: usize,
    },
    /// A complete frame whose body is not a message.
    #[error("decode frame")]
    Message(#[source] DecodeError),
    /// An earlier error already broke this stream.
    #[error("decode frame: stream already failed")]
    Poisoned,
}

/// Encodes one message as a frame: 4-byte big-endian length, CBOR body.
/// Refuses bodies over [`MAX_FRAME`].
pub fn encode_frame(msg: &Message) -> Result<Vec<u8>, EncodeError> {
    encode_frame_with_max(msg, MAX_FRAME)
}

/// [`encode_frame`] with a smaller cap (e.g. for the pairing ALPN).
pub fn encode_frame_with_max(msg: &Message, max: usize) -> Result<Vec<u8>, EncodeError> {
    let mut out = vec![0u8; FRAME_HEADER_LEN];
    ciborium::into_writer(msg, &mut out).map_err(EncodeError::Cbor)?;
    let len = out.len() - FRAME_HEADER_LEN;
    let max = max.min(MAX_FRAME);
    let Ok(len32) = u32::try_from(len) else {
        return Err(EncodeError::TooLarge { len, max });
    };
    if len > max {
        return Err(EncodeError::TooLarge { len, max });
    }
    out[..FRAME_HEADER_LEN].copy_from_slice(&len32.to_be_bytes());
    Ok(out)
}

/// The CBOR body of a message (no length prefix): what a frame carries.
pub fn encode_message(msg: &Message) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    ciborium::into_writer(msg, &mut out).map_err(EncodeError::Cbor)?;
    Ok(out)
}

/// Decodes one frame body into a message. The body must hold exactly one
/// message. Memory used is bounded by the element caps in [`crate::limits`].
pub fn decode_message(body: &[u8]) -> Result<Message, DecodeError> {
    let mut rest = body;
    let msg: Message = ciborium::from_reader(&mut rest).map_err(DecodeError::Cbor)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes { extra: rest.len() });
    }
    Ok(msg)
}

/// Incremental frame decoder: push bytes as they arrive, pop whole frames.
///
/// The length header is checked against the cap the moment it is complete,
/// before any room is reserved for the body; the buffer only ever grows by
/// bytes that were pushed. After any error the decoder is poisoned and
/// returns [`FrameError::Poisoned`]: a byte stream cannot be resynchronised.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Offset in `buf` of the first header not yet checked against the cap
    /// (may point past the end while a body is still arriving).
    next_hdr: usize,
    max: usize,
    poisoned: bool,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A decoder with the [`MAX_FRAME`] cap.
    pub fn new() -> FrameDecoder {
        FrameDecoder::with_max(MAX_FRAME)
    }

    /// A decoder with a smaller cap (never larger than [`MAX_FRAME`]).
    pub fn with_max(max: usize) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            next_hdr: 0,
            max: max.min(MAX_FRAME),
            poisoned: false,
        }
    }

    /// Bytes held (an unfinished frame plus any complete frames not yet popped).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Appends bytes. Fails at once if they complete a header that announces
    /// more than the cap, without buffering them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if self.poisoned {
            return Err(FrameError::Poisoned);
        }
        // Validate every header the new bytes complete before keeping them.
        let mut pos = self.next_hdr;
        let total = self.buf.len() + bytes.len();
        loop {
            if total < pos.saturating_add(FRAME_HEADER_LEN) {
                break;
            }
            let mut hdr = [0u8; FRAME_HEADER_LEN];
            for (i, b) in hdr.iter_mut().enumerate() {
                let at = pos + i;
                *b = match self.buf.get(at) {
                    Some(b) => *b,
                    None => bytes.get(at - self.buf.len()).copied().unwrap_or(0),
                };
            }
            let len = u32::from_be_bytes(hdr) as usize;
            if len > self.max {
                self.fail();
                return Err(FrameError::TooLarge {
                    len: len as u64,
                    max: self.max,
                });
            }
            pos += FRAME_HEADER_LEN + len;
        }
        self.next_hdr = pos;
        self.buf.reserve_exact(bytes.len());
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Pops the next complete frame body, if one has fully arrived.
    pub fn pop_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if self.poisoned {
            return Err(FrameError::Poisoned);
        }
        let Some(hdr) = self.buf.first_chunk::<FRAME_HEADER_LEN>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*hdr) as usize;
        if len > self.max {
            // Unreachable through `push`, kept so no input can bypass the cap.
            self.fail();
            return Err(FrameError::TooLarge {
                len: len as u64,
                max: self.max,
            });
        }
        if self.buf.len() - FRAME_HEADER_LEN < len {
            return Ok(None);
        }
        let body = self.buf[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len].to_vec();
        self.buf.drain(..FRAME_HEADER_LEN + len);
        self.next_hdr = self.next_hdr.saturating_sub(FRAME_HEADER_LEN + len);
        Ok(Some(body))
    }

    /// Pops and decodes the next complete frame, if one has fully arrived.
    pub fn pop(&mut self) -> Result<Option<Message>, FrameError> {
        match self.pop_frame()? {
            None => Ok(None),
            Some(body) => match decode_message(&body) {
                Ok(m) => Ok(Some(m)),
                Err(e) => {
                    self.fail();
                    Err(FrameError::Message(e))
                }
            },
        }
    }

    /// Call when the stream ended: fails if it ended inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.poisoned {
            return Err(FrameError::Poisoned);
        }
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated {
                buffered: self.buf.len(),
            })
        }
    }

    fn fail(&mut self) {
        self.poisoned = true;
        self.buf = Vec::new();
        self.next_hdr = 0;
    }
}
