//! Fixed sample values: one or more per message, used by the golden tests
//! and the fuzz seed corpus.

use std::net::SocketAddr;

use cairn_protocol::{
    Batch, ForgetTarget, Hello, LogStub, Message, NodeId, OriginName, PairAccept, PairRequest,
    PairingCode, Pull, RefuseCode, StubKind, Tombstone, Watermark, WireRecord, record::Hash32,
};

pub fn node(n: u8) -> NodeId {
    NodeId([n; 20])
}

pub fn record(seq: u64, text: &str) -> WireRecord {
    let mut r = WireRecord {
        seq,
        hash: [0; 32],
        agent: "claude-code".into(),
        session_id: "s-1".into(),
        parent_session: None,
        project: Some("/home/dev/acme".into()),
        role: "user".into(),
        time_ms: Some(1_767_225_600_000 + seq as i64),
        text: text.into(),
        files: vec![],
    };
    r.hash = r.content_hash();
    r
}

pub fn hash_of(r: &WireRecord) -> Hash32 {
    r.content_hash()
}

/// `(golden file stem, message)`, one per variant plus richer shapes.
pub fn messages() -> Vec<(&'static str, Message)> {
    let mut tool = record(2, "Edit src/lib.rs: pin hyper to 0.14, привет, 你好");
    tool.role = "tool_call".into();
    tool.parent_session = Some("s-0".into());
    tool.files = vec!["src/lib.rs".into(), "Cargo.toml".into()];
    tool.hash = tool.content_hash();
    let forgotten = record(3, "forgotten");
    vec![
        (
            "hello",
            Message::Hello(Hello {
                major: 1,
                minor: 0,
                min_minor: 0,
                node_id: node(1),
                node_name: "laptop".into(),
                software: "cairn 0.1.0".into(),
                instance: 0x0123_4567_89ab_cdef,
                features: vec!["zstd".into()],
            }),
        ),
        (
            "refuse",
            Message::Refuse {
                code: RefuseCode::Incompatible,
                reason: "peer needs at least 1.2, this node speaks up to 1.0; upgrade this node"
                    .into(),
            },
        ),
        (
            "watermarks",
            Message::Watermarks {
                entries: vec![
                    Watermark {
                        origin: node(1),
                        epoch: 7,
                        seq: 42,
                    },
                    Watermark {
                        origin: node(2),
                        epoch: 9,
                        seq: 0,
                    },
                ],
                names: vec![],
            },
        ),
        (
            "watermarks_named",
            Message::Watermarks {
                entries: vec![Watermark {
                    origin: node(1),
                    epoch: 7,
                    seq: 42,
                }],
                names: vec![OriginName {
                    origin: node(1),
                    name: "laptop".into(),
                }],
            },
        ),
        (
            "watermarks_empty",
            Message::Watermarks {
                entries: vec![],
                names: vec![],
            },
        ),
        (
            "pull",
            Message::Pull(Pull {
                origin: node(1),
                epoch: 7,
                after_seq: 40,
                max_records: 1000,
                max_bytes: 4_128_768,
            }),
        ),
        (
            "batch",
            Message::Batch(Batch {
                origin: node(1),
                epoch: 7,
                after_seq: 0,
                last_seq: 4,
                more: true,
                records: vec![
                    record(1, "we pinned hyper to 0.14 because 1.0 broke the proxy"),
                    tool,
                ],
                tombstones: vec![Tombstone::new(
                    4,
                    node(1),
                    1_767_225_700_000,
                    ForgetTarget::Record {
                        hash: hash_of(&forgotten),
                    },
                )],
                stubs: vec![LogStub {
                    seq: 3,
                    hash: hash_of(&forgotten),
                    kind: StubKind::Forgotten,
                }],
                origin_key: vec![],
                seals: vec![],
            }),
        ),
        (
            "batch_sealed",
            Message::Batch({
                let mut key = cairn_protocol::seal::P256_SPKI_PREFIX.to_vec();
                key.push(4);
                key.extend([0x5a; 64]);
                Batch {
                    origin: NodeId::from_spki(&key),
                    epoch: 7,
                    after_seq: 2,
                    last_seq: 3,
                    more: false,
                    records: vec![record(3, "sealed by its origin")],
                    tombstones: vec![],
                    stubs: vec![],
                    origin_key: key,
                    seals: vec![cairn_protocol::Seal {
                        first: 1,
                        last: 4,
                        sig: [0x33; 64],
                        before: vec![[1; 32], [2; 32]],
                        after: vec![[4; 32]],
                    }],
                }
            }),
        ),
        (
            "batch_empty",
            Message::Batch(Batch {
                origin: node(1),
                epoch: 7,
                after_seq: 42,
                last_seq: 42,
                more: false,
                records: vec![],
                tombstones: vec![],
                stubs: vec![],
                origin_key: vec![],
                seals: vec![],
            }),
        ),
        (
            "batch_forget_session_project",
            Message::Batch(Batch {
                origin: node(2),
                epoch: 9,
                after_seq: 10,
                last_seq: 13,
                more: false,
                records: vec![],
                tombstones: vec![
                    Tombstone::new(
                        11,
                        node(2),
                        1_767_225_800_000,
                        ForgetTarget::Session {
                            agent: "codex".into(),
                            session_id: "rollout-1".into(),
                        },
                    ),
                    Tombstone::new(
                        12,
                        node(2),
                        1_767_225_800_001,
                        ForgetTarget::Project {
                            project: "/home/dev/secret-project".into(),
                        },
                    ),
                ],
                stubs: vec![LogStub {
                    seq: 13,
                    hash: [0xab; 32],
                    kind: StubKind::Withheld,
                }],
                origin_key: vec![],
                seals: vec![],
            }),
        ),
        ("ping", Message::Ping { nonce: 99 }),
        ("pong", Message::Pong { nonce: 99 }),
        (
            "bye",
            Message::Bye {
                reason: "shutting down".into(),
            },
        ),
        (
            "pair_request",
            Message::PairRequest(PairRequest {
                secret_proof: [0x11; 32],
                joiner_node_id: node(3),
                joiner_name: "desktop".into(),
                joiner_serve_port: None,
            }),
        ),
        (
            "pair_accept",
            Message::PairAccept(PairAccept {
                secret_proof: [0x22; 32],
                inviter_node_id: node(1),
                inviter_name: "laptop".into(),
                inviter_serve_port: None,
            }),
        ),
    ]
}

/// A fixed pairing code (v4 + v6 addresses, 16-byte secret).
pub fn pairing_code() -> PairingCode {
    let addrs: Vec<SocketAddr> = vec![
        "192.168.1.20:7447".parse().unwrap(),
        "[fd7a:115c:a1e0::1]:7447".parse().unwrap(),
    ];
    PairingCode::new(addrs, [0x5a; 32], &[0x42; 16], 1_767_226_000).unwrap()
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 && i % 32 == 0 {
            s.push('\n');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s.push('\n');
    s
}

pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}
