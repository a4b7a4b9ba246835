//! Property tests: every message survives encode → frame → decode unchanged,
//! the frame header equals the body length, and arbitrary chunking of a
//! stream of frames does not change what the decoder yields.

use cairn_protocol::{
    Batch, FrameDecoder, Hello, LogStub, Message, NodeId, PairAccept, PairRequest, Pull,
    RefuseCode, StubKind, Tombstone, Watermark, WireRecord, encode_frame, encode_message,
    record::ForgetTarget,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn node_id() -> impl Strategy<Value = NodeId> {
    any::<[u8; 20]>().prop_map(NodeId)
}

fn text() -> impl Strategy<Value = String> {
    ".{0,40}"
}

fn record() -> impl Strategy<Value = WireRecord> {
    (
        any::<u64>(),
        any::<[u8; 32]>(),
        (
            text(),
            text(),
            proptest::option::of(text()),
            proptest::option::of(text()),
        ),
        (
            text(),
            proptest::option::of(any::<i64>()),
            text(),
            vec(text(), 0..4),
        ),
    )
        .prop_map(
            |(
                seq,
                hash,
                (agent, session_id, parent_session, project),
                (role, time_ms, text, files),
            )| {
                WireRecord {
                    seq,
                    hash,
                    agent,
                    session_id,
                    parent_session,
                    project,
                    role,
                    time_ms,
                    text,
                    files,
                }
            },
        )
}

fn target() -> impl Strategy<Value = ForgetTarget> {
    prop_oneof![
        (text(), text())
            .prop_map(|(agent, session_id)| ForgetTarget::Session { agent, session_id }),
        text().prop_map(|project| ForgetTarget::Project { project }),
        any::<[u8; 32]>().prop_map(|hash| ForgetTarget::Record { hash }),
    ]
}

fn tombstone() -> impl Strategy<Value = Tombstone> {
    (
        any::<u64>(),
        any::<[u8; 32]>(),
        node_id(),
        any::<i64>(),
        target(),
    )
        .prop_map(|(seq, id, origin, created_ms, target)| Tombstone {
            seq,
            id,
            origin,
            created_ms,
            target,
        })
}

fn stub() -> impl Strategy<Value = LogStub> {
    (any::<u64>(), any::<[u8; 32]>(), any::<bool>()).prop_map(|(seq, hash, f)| LogStub {
        seq,
        hash,
        kind: if f {
            StubKind::Forgotten
        } else {
            StubKind::Withheld
        },
    })
}

fn refuse_code() -> impl Strategy<Value = RefuseCode> {
    prop_oneof![
        Just(RefuseCode::Incompatible),
        Just(RefuseCode::NotPaired),
        Just(RefuseCode::PairingFailed),
        Just(RefuseCode::Busy),
        Just(RefuseCode::ProtocolViolation),
        Just(RefuseCode::Other),
    ]
}

pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            (any::<u16>(), any::<u16>(), any::<u16>()),
            node_id(),
            text(),
            text(),
            any::<u64>(),
            vec(text(), 0..4)
        )
            .prop_map(
                |((major, minor, min_minor), node_id, node_name, software, instance, features)| {
                    Message::Hello(Hello {
                        major,
                        minor,
                        min_minor,
                        node_id,
                        node_name,
                        software,
                        instance,
                        features,
                    })
                }
            ),
        (refuse_code(), text()).prop_map(|(code, reason)| Message::Refuse { code, reason }),
        vec((node_id(), any::<u64>(), any::<u64>()), 0..8).prop_map(|v| Message::Watermarks {
            entries: v
                .into_iter()
                .map(|(origin, epoch, seq)| Watermark { origin, epoch, seq })
                .collect(),
            names: Vec::new(),
        }),
        (
            node_id(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(origin, epoch, after_seq, max_records, max_bytes)| Message::Pull(Pull {
                    origin,
                    epoch,
                    after_seq,
                    max_records,
                    max_bytes
                })
            ),
        (
            (
                node_id(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<bool>()
            ),
            vec(record(), 0..4),
            vec(tombstone(), 0..3),
            vec(stub(), 0..3)
        )
            .prop_map(
                |((origin, epoch, after_seq, last_seq, more), records, tombstones, stubs)| {
                    Message::Batch(Batch {
                        origin,
                        epoch,
                        after_seq,
                        last_seq,
                        more,
                        records,
                        tombstones,
                        stubs,
                        origin_key: vec![],
                        seals: vec![],
                    })
                }
            ),
        any::<u64>().prop_map(|nonce| Message::Ping { nonce }),
        any::<u64>().prop_map(|nonce| Message::Pong { nonce }),
        text().prop_map(|reason| Message::Bye { reason }),
        (any::<[u8; 32]>(), node_id(), text(), any::<Option<u16>>()).prop_map(
            |(secret_proof, joiner_node_id, joiner_name, joiner_serve_port)| {
                Message::PairRequest(PairRequest {
                    secret_proof,
                    joiner_node_id,
                    joiner_name,
                    joiner_serve_port,
                })
            }
        ),
        (any::<[u8; 32]>(), node_id(), text(), any::<Option<u16>>()).prop_map(
            |(secret_proof, inviter_node_id, inviter_name, inviter_serve_port)| {
                Message::PairAccept(PairAccept {
                    secret_proof,
                    inviter_node_id,
                    inviter_name,
                    inviter_serve_port,
                })
            }
        ),
    ]
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(msg in message()) {
        let frame = encode_frame(&msg).unwrap();
        let body = encode_message(&msg).unwrap();
        let announced = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        prop_assert_eq!(announced, body.len());
        prop_assert_eq!(frame.len(), 4 + body.len());
        prop_assert_eq!(&frame[4..], &body[..]);
        let mut d = FrameDecoder::new();
        d.push(&frame).unwrap();
        prop_assert_eq!(d.pop().unwrap(), Some(msg));
        prop_assert_eq!(d.pop().unwrap(), None);
        prop_assert_eq!(d.buffered(), 0);
        d.finish().unwrap();
    }

    #[test]
    fn chunking_does_not_change_the_stream(
        msgs in vec(message(), 1..5),
        cuts in vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let stream: Vec<u8> = msgs.iter().flat_map(|m| encode_frame(m).unwrap()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for w in points.windows(2) {
            d.push(&stream[w[0]..w[1]]).unwrap();
            while let Some(m) = d.pop().unwrap() {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
        d.finish().unwrap();
    }
}
