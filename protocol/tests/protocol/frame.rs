//! Framing limits and decoder robustness.
//!
//! The `*_never_panics` properties feed hostile bytes to the decoders and
//! assert only that they return (an `Ok` or an `Err`) instead of panicking
//! or overflowing the stack; that is the whole property.

use cairn_protocol::{
    DecodeError, EncodeError, FrameDecoder, FrameError, MAX_FRAME, MAX_WATERMARKS, Message, NodeId,
    Watermark, decode_message, encode_frame, frame::encode_frame_with_max,
};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::samples::messages;

#[test]
fn header_claiming_4_gib_is_refused_before_any_body_arrives() {
    let mut d = FrameDecoder::new();
    let err = d.push(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]).unwrap_err();
    assert!(matches!(
        err,
        FrameError::TooLarge {
            len: 0xffff_ffff,
            max: MAX_FRAME
        }
    ));
    assert_eq!(d.buffered(), 0, "nothing of the hostile frame is kept");
    assert!(matches!(d.push(b"more"), Err(FrameError::Poisoned)));
    assert!(matches!(d.pop(), Err(FrameError::Poisoned)));
}

#[test]
fn oversize_header_split_across_pushes_is_refused_when_complete() {
    let len = (MAX_FRAME as u32 + 1).to_be_bytes();
    let mut d = FrameDecoder::new();
    d.push(&len[..2]).unwrap();
    assert_eq!(d.pop().unwrap(), None);
    let err = d.push(&len[2..]).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { len, .. } if len == MAX_FRAME as u64 + 1));
}

#[test]
fn oversize_second_frame_is_refused_in_the_same_push() {
    let mut bytes = encode_frame(&Message::Ping { nonce: 1 }).unwrap();
    bytes.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut d = FrameDecoder::new();
    assert!(matches!(d.push(&bytes), Err(FrameError::TooLarge { .. })));
}

#[test]
fn exactly_the_cap_is_accepted_one_over_is_not() {
    let mut d = FrameDecoder::with_max(16);
    d.push(&16u32.to_be_bytes()).unwrap();
    let mut d = FrameDecoder::with_max(16);
    assert!(matches!(
        d.push(&17u32.to_be_bytes()),
        Err(FrameError::TooLarge { len: 17, max: 16 })
    ));
}

#[test]
fn encoder_refuses_oversize_bodies() {
    let msg = Message::Bye {
        reason: "x".repeat(100),
    };
    assert!(matches!(
        encode_frame_with_max(&msg, 50),
        Err(EncodeError::TooLarge { max: 50, .. })
    ));
    let huge = Message::Bye {
        reason: "x".repeat(MAX_FRAME),
    };
    assert!(matches!(
        encode_frame(&huge),
        Err(EncodeError::TooLarge { max: MAX_FRAME, .. })
    ));
}

#[test]
fn partial_frame_buffers_only_what_arrived() {
    let frame = encode_frame(&Message::Bye {
        reason: "y".repeat(10_000),
    })
    .unwrap();
    let mut d = FrameDecoder::new();
    d.push(&frame[..100]).unwrap();
    assert_eq!(d.pop().unwrap(), None);
    assert_eq!(d.buffered(), 100);
    assert!(matches!(
        d.finish(),
        Err(FrameError::Truncated { buffered: 100 })
    ));
    d.push(&frame[100..]).unwrap();
    assert!(matches!(d.pop().unwrap(), Some(Message::Bye { .. })));
    d.finish().unwrap();
}

#[test]
fn empty_and_garbage_bodies_are_typed_errors() {
    let mut d = FrameDecoder::new();
    d.push(&[0, 0, 0, 0]).unwrap();
    assert!(matches!(
        d.pop(),
        Err(FrameError::Message(DecodeError::Cbor(_)))
    ));
    assert!(matches!(d.pop(), Err(FrameError::Poisoned)));
}

#[test]
fn trailing_bytes_inside_a_frame_are_refused() {
    let mut body = cairn_protocol::encode_message(&Message::Ping { nonce: 5 }).unwrap();
    body.push(0);
    assert!(matches!(
        decode_message(&body),
        Err(DecodeError::TrailingBytes { extra: 1 })
    ));
}

#[test]
fn unknown_message_variant_is_an_error_not_a_panic() {
    // {"teleport": 1}
    let body = [
        0xa1, 0x68, b't', b'e', b'l', b'e', b'p', b'o', b'r', b't', 0x01,
    ];
    assert!(matches!(decode_message(&body), Err(DecodeError::Cbor(_))));
}

#[test]
fn unknown_fields_are_ignored() {
    // {"ping": {"nonce": 7, "extra": "x"}}: a newer minor may add fields.
    let body = [
        0xa1, 0x64, b'p', b'i', b'n', b'g', 0xa2, 0x65, b'n', b'o', b'n', b'c', b'e', 0x07, 0x65,
        b'e', b'x', b't', b'r', b'a', 0x61, b'x',
    ];
    assert_eq!(decode_message(&body).unwrap(), Message::Ping { nonce: 7 });
}

#[test]
fn unknown_refuse_code_decodes_as_other() {
    let mut body = cairn_protocol::encode_message(&Message::Refuse {
        code: cairn_protocol::RefuseCode::Busy,
        reason: String::new(),
    })
    .unwrap();
    // "busy" -> "bzzz": same length, unknown to this build.
    let at = body.windows(4).position(|w| w == b"busy").unwrap();
    body[at..at + 4].copy_from_slice(b"bzzz");
    assert!(matches!(
        decode_message(&body).unwrap(),
        Message::Refuse {
            code: cairn_protocol::RefuseCode::Other,
            ..
        }
    ));
}

#[test]
fn element_caps_are_enforced_while_decoding() {
    let entry = Watermark {
        origin: NodeId([1; 20]),
        epoch: 1,
        seq: 1,
    };
    let ok = Message::Watermarks {
        entries: vec![entry; MAX_WATERMARKS],
        names: vec![],
    };
    let body = cairn_protocol::encode_message(&ok).unwrap();
    assert_eq!(decode_message(&body).unwrap(), ok);
    let over = Message::Watermarks {
        entries: vec![entry; MAX_WATERMARKS + 1],
        names: vec![],
    };
    let body = cairn_protocol::encode_message(&over).unwrap();
    assert!(matches!(decode_message(&body), Err(DecodeError::Cbor(_))));
    // Same with an indefinite-length array (no size hint up front).
    let mut indef = body.clone();
    let hdr = indef
        .windows(3)
        .position(|w| w == [0x99, 0x10, 0x01])
        .unwrap();
    indef.splice(hdr..hdr + 3, [0x9f]);
    indef.push(0xff); // "break": the array is the last item of both maps.
    assert!(matches!(decode_message(&indef), Err(DecodeError::Cbor(_))));
    indef.truncate(indef.len() - 1);
    let one = cairn_protocol::encode_message(&Message::Watermarks {
        entries: vec![entry],
        names: vec![],
    })
    .unwrap();
    let none = cairn_protocol::encode_message(&Message::Watermarks {
        entries: vec![],
        names: vec![],
    })
    .unwrap();
    let entry_len = one.len() - none.len();
    let mut under = indef[..indef.len() - entry_len].to_vec(); // drop one entry
    under.push(0xff);
    assert_eq!(decode_message(&under).unwrap(), ok);
}

#[test]
fn deeply_nested_input_does_not_overflow_the_stack() {
    // {"hello": [[[[...]]]]} 100k levels deep.
    let mut body = vec![0xa1, 0x65, b'h', b'e', b'l', b'l', b'o'];
    body.extend(std::iter::repeat_n(0x81, 100_000));
    body.push(0x00);
    assert!(decode_message(&body).is_err());
    // And as an ignored unknown field.
    let mut body = vec![
        0xa1, 0x64, b'p', b'i', b'n', b'g', 0xa2, 0x65, b'n', b'o', b'n', b'c', b'e', 0x07, 0x61,
        b'z',
    ];
    body.extend(std::iter::repeat_n(0x81, 100_000));
    body.push(0x00);
    assert!(decode_message(&body).is_err());
}

#[test]
fn every_truncation_of_every_sample_fails_cleanly() {
    for (name, msg) in messages() {
        let frame = encode_frame(&msg).unwrap();
        for cut in 0..frame.len() {
            // Body truncated but header intact: a decode error, never a value.
            if cut >= 4 {
                assert!(
                    decode_message(&frame[4..cut]).is_err(),
                    "{name} cut at {cut}"
                );
            }
            let mut d = FrameDecoder::new();
            d.push(&frame[..cut]).unwrap();
            assert_eq!(d.pop().unwrap(), None, "{name} cut at {cut}");
            assert!(d.finish().is_err() || cut == 0);
        }
    }
}

fn golden_frames() -> Vec<Vec<u8>> {
    messages()
        .iter()
        .map(|(_, m)| encode_frame(m).unwrap())
        .collect()
}

proptest! {
    #[test]
    fn decode_message_never_panics(bytes in vec(any::<u8>(), 0..2048)) {
        // Property: returns without panicking. Nothing else is asserted.
        let _ = decode_message(&bytes);
    }

    #[test]
    fn frame_decoder_never_panics(chunks in vec(vec(any::<u8>(), 0..64), 0..16)) {
        // Property: returns without panicking, and never buffers more than was pushed.
        let mut d = FrameDecoder::new();
        let mut pushed = 0;
        for c in &chunks {
            if d.push(c).is_err() {
                break;
            }
            pushed += c.len();
            prop_assert!(d.buffered() <= pushed);
            while let Ok(Some(_)) = d.pop() {}
        }
    }

    #[test]
    fn bit_flips_never_panic(i in any::<prop::sample::Index>(), flips in vec((any::<prop::sample::Index>(), 0u8..8), 1..4)) {
        // Property: a corrupted encoding decodes to something or fails; no panic.
        let frames = golden_frames();
        let mut f = frames[i.index(frames.len())].clone();
        for (at, bit) in flips {
            let at = at.index(f.len());
            f[at] ^= 1 << bit;
        }
        let _ = decode_message(&f[4..]);
        let mut d = FrameDecoder::new();
        if d.push(&f).is_ok() {
            let _ = d.pop();
        }
    }
}
