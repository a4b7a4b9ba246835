//! Pairing codes (round trip, tamper detection, expiry) and proofs.

use std::net::SocketAddr;

use cairn_protocol::pairing::{
    CODE_PREFIX, Role, Transcript, pair_accept, pair_request, proof, verify_pair_accept,
    verify_pair_request, verify_proof,
};
use cairn_protocol::{NodeId, PairingCode, PairingError};
use proptest::prelude::*;

use crate::samples::pairing_code;

#[test]
fn code_round_trips_and_is_one_line() {
    let code = pairing_code();
    let text = code.encode();
    assert!(text.starts_with(CODE_PREFIX));
    assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    assert_eq!(PairingCode::parse(&text), Ok(code.clone()));
    // Whitespace around it and upper case are tolerated.
    assert_eq!(
        PairingCode::parse(&format!("  {}\n", text.to_uppercase())),
        Ok(code.clone())
    );
    assert_eq!(code.inviter_node_id(), NodeId([0x5a; 20]));
}

#[test]
fn debug_output_hides_the_secret() {
    let dbg = format!("{:?}", pairing_code());
    assert!(dbg.contains("16 bytes hidden"), "{dbg}");
    assert!(!dbg.contains("66, 66"), "{dbg}");
}

#[test]
fn every_single_character_change_is_detected() {
    let text = pairing_code().encode();
    let body_start = CODE_PREFIX.len();
    for i in body_start..text.len() {
        for replacement in ['a', 'q', '7'] {
            let mut t = text.clone().into_bytes();
            if t[i] == replacement as u8 {
                continue;
            }
            t[i] = replacement as u8;
            let t = String::from_utf8(t).unwrap();
            assert!(
                PairingCode::parse(&t).is_err(),
                "change at {i} to {replacement} accepted"
            );
        }
    }
}

#[test]
fn truncations_and_bad_input_are_typed_errors() {
    let text = pairing_code().encode();
    for cut in 0..text.len() {
        assert!(PairingCode::parse(&text[..cut]).is_err(), "cut at {cut}");
    }
    assert_eq!(PairingCode::parse("hello"), Err(PairingError::Prefix));
    assert_eq!(
        PairingCode::parse("cairn1-abc!"),
        Err(PairingError::Character { position: 3 })
    );
    assert_eq!(
        PairingCode::parse(&"x".repeat(600)),
        Err(PairingError::TooLong { len: 600 })
    );
    assert_eq!(PairingCode::parse("cairn1-"), Err(PairingError::Truncated));
}

#[test]
fn expiry_is_checked_against_the_time_passed_in() {
    let code = pairing_code();
    let text = code.encode();
    let exp = code.expires_unix();
    assert!(PairingCode::parse_at(&text, exp - 1).is_ok());
    assert_eq!(
        PairingCode::parse_at(&text, exp),
        Err(PairingError::Expired {
            expires_unix: exp,
            now_unix: exp
        })
    );
}

#[test]
fn construction_validates_fields() {
    let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
    assert_eq!(
        PairingCode::new(vec![], [0; 32], &[0; 16], 1),
        Err(PairingError::AddrCount { count: 0 })
    );
    assert_eq!(
        PairingCode::new(vec![a; 5], [0; 32], &[0; 16], 1),
        Err(PairingError::AddrCount { count: 5 })
    );
    assert_eq!(
        PairingCode::new(vec![a], [0; 32], &[0; 15], 1),
        Err(PairingError::SecretLength { len: 15 })
    );
    assert_eq!(
        PairingCode::new(vec![a], [0; 32], &[0; 33], 1),
        Err(PairingError::SecretLength { len: 33 })
    );
    assert!(PairingCode::new(vec![a; 4], [0; 32], &[0; 32], u64::MAX).is_ok());
}

fn transcript() -> Transcript {
    Transcript {
        inviter: [1; 32],
        joiner: [2; 32],
        channel_binding: [3; 32],
    }
}

#[test]
fn handshake_succeeds_with_the_right_secret() {
    let secret = [0x42u8; 16];
    let t = transcript();
    let req = pair_request(&secret, &t, "desktop");
    assert_eq!(
        verify_pair_request(&secret, &t, &req),
        Ok(NodeId::from_fingerprint(&t.joiner))
    );
    let acc = pair_accept(&secret, &t, "laptop");
    assert_eq!(
        verify_pair_accept(&secret, &t, &acc),
        Ok(NodeId::from_fingerprint(&t.inviter))
    );
}

#[test]
fn a_man_in_the_middle_cannot_complete_pairing() {
    let secret = [0x42u8; 16];
    let t = transcript();
    let req = pair_request(&secret, &t, "desktop");
    // Without the code: any other secret fails.
    let guess = pair_request(&[0x43; 16], &t, "mallory");
    assert_eq!(
        verify_pair_request(&secret, &t, &guess),
        Err(PairingError::BadProof)
    );
    // A relayed proof on a second TLS session (different exporter) fails.
    let relayed = Transcript {
        channel_binding: [9; 32],
        ..t
    };
    assert_eq!(
        verify_pair_request(&secret, &relayed, &req),
        Err(PairingError::BadProof)
    );
    // Claiming the joiner's proof for another key fails.
    let other_key = Transcript {
        joiner: [7; 32],
        ..t
    };
    assert!(matches!(
        verify_pair_request(&secret, &other_key, &req),
        Err(PairingError::NodeIdMismatch { .. })
    ));
    let mut forged = req.clone();
    forged.joiner_node_id = NodeId::from_fingerprint(&other_key.joiner);
    assert_eq!(
        verify_pair_request(&secret, &other_key, &forged),
        Err(PairingError::BadProof)
    );
    // A joiner proof reflected back as the inviter's does not verify.
    assert_eq!(
        verify_proof(&secret, Role::Inviter, &t, &req.secret_proof),
        Err(PairingError::BadProof)
    );
    assert_ne!(
        proof(&secret, Role::Inviter, &t),
        proof(&secret, Role::Joiner, &t)
    );
}

proptest! {
    #[test]
    fn parse_never_panics(s in ".{0,200}") {
        // Property: returns without panicking. Nothing else is asserted.
        let _ = PairingCode::parse(&s);
        let _ = PairingCode::parse(&format!("{CODE_PREFIX}{s}"));
    }

    #[test]
    fn base32_bodies_never_panic(s in "[a-z2-7]{0,160}") {
        // Property: returns without panicking. Nothing else is asserted.
        let _ = PairingCode::parse(&format!("{CODE_PREFIX}{s}"));
    }

    #[test]
    fn any_valid_code_round_trips(
        addrs in proptest::collection::vec(any::<SocketAddr>(), 1..=4),
        fp in any::<[u8; 32]>(),
        secret in proptest::collection::vec(any::<u8>(), 16..=32),
        exp in any::<u64>(),
    ) {
        // Scope ids and flow info are not carried.
        let addrs: Vec<SocketAddr> = addrs.into_iter().map(|a| SocketAddr::new(a.ip(), a.port())).collect();
        let code = PairingCode::new(addrs, fp, &secret, exp).unwrap();
        prop_assert_eq!(PairingCode::parse(&code.encode()), Ok(code));
    }
}

#[test]
fn codes_carry_host_names_for_the_joiner_to_resolve() {
    let a: SocketAddr = "203.0.113.7:7879".parse().unwrap();
    let hosts = vec![("hub.example.net".to_owned(), 7879), ("nas".to_owned(), 7)];
    let code = PairingCode::with_hosts(vec![a], hosts.clone(), [9; 32], &[7; 20], 99).unwrap();
    let back = PairingCode::parse(&code.encode()).unwrap();
    assert_eq!(back, code);
    assert_eq!(back.hosts(), &hosts[..]);
    assert_eq!(back.addrs(), &[a]);
    // Names alone are enough.
    let only = PairingCode::with_hosts(vec![], hosts[..1].to_vec(), [9; 32], &[7; 16], 1).unwrap();
    assert_eq!(
        PairingCode::parse(&only.encode()).unwrap().hosts(),
        &hosts[..1]
    );
    // A code without names encodes exactly as before.
    let plain = PairingCode::new(vec![a], [9; 32], &[7; 16], 1).unwrap();
    let same = PairingCode::with_hosts(vec![a], vec![], [9; 32], &[7; 16], 1).unwrap();
    assert_eq!(plain.encode(), same.encode());
    // Limits: at most four entries in all, and real host names only.
    assert_eq!(
        PairingCode::with_hosts(vec![a; 3], hosts.clone(), [0; 32], &[0; 16], 1),
        Err(PairingError::AddrCount { count: 5 })
    );
    for bad in [
        "",
        "-lead.example",
        "a..b",
        "spa ce",
        "ünï",
        &"x".repeat(101),
    ] {
        assert!(
            matches!(
                PairingCode::with_hosts(vec![], vec![(bad.to_owned(), 1)], [0; 32], &[0; 16], 1),
                Err(PairingError::HostName { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn the_largest_code_with_names_still_parses() {
    let name = "h".repeat(cairn_protocol::pairing::MAX_HOST_LEN);
    let code = PairingCode::with_hosts(vec![], vec![(name, 65535); 4], [1; 32], &[2; 32], u64::MAX)
        .unwrap();
    assert_eq!(PairingCode::parse(&code.encode()), Ok(code));
}
