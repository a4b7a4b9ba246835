//! Version negotiation table.

use cairn_protocol::{
    ALPN_PAIR, ALPN_SYNC, Hello, NodeId, PROTOCOL_MAJOR, VersionError, negotiate,
};

fn hello(major: u16, min_minor: u16, minor: u16) -> Hello {
    let mut h = Hello::current(NodeId([0; 20]), "n", "cairn test", 0);
    h.major = major;
    h.min_minor = min_minor;
    h.minor = minor;
    h
}

#[test]
fn negotiation_table() {
    use VersionError as E;
    // (local (major, min, max), remote (major, min, max), expected)
    type Row = (
        (u16, u16, u16),
        (u16, u16, u16),
        Result<u16, fn(&VersionError) -> bool>,
    );
    let rows: Vec<Row> = vec![
        ((1, 0, 0), (1, 0, 0), Ok(0)),
        ((1, 0, 3), (1, 0, 1), Ok(1)),
        ((1, 0, 1), (1, 0, 3), Ok(1)),
        ((1, 2, 5), (1, 0, 9), Ok(5)),
        ((1, 2, 5), (1, 5, 5), Ok(5)),
        (
            (1, 2, 5),
            (1, 0, 1),
            Err(|e| matches!(e, E::PeerTooOld { .. })),
        ),
        (
            (1, 0, 1),
            (1, 2, 5),
            Err(|e| matches!(e, E::PeerTooNew { .. })),
        ),
        (
            (1, 0, 0),
            (2, 0, 0),
            Err(|e| {
                matches!(
                    e,
                    E::MajorMismatch {
                        local: 1,
                        remote: 2
                    }
                )
            }),
        ),
        (
            (1, 0, 0),
            (1, 3, 1),
            Err(|e| matches!(e, E::EmptyRange { side: "peer", .. })),
        ),
        (
            (1, 4, 1),
            (1, 0, 9),
            Err(|e| {
                matches!(
                    e,
                    E::EmptyRange {
                        side: "this node",
                        ..
                    }
                )
            }),
        ),
    ];
    for (i, (l, r, want)) in rows.into_iter().enumerate() {
        let got = negotiate(&hello(l.0, l.1, l.2), &hello(r.0, r.1, r.2));
        match (&got, want) {
            (Ok(a), Ok(b)) => assert_eq!(*a, b, "row {i}"),
            (Err(e), Err(check)) => assert!(check(e), "row {i}: {e:?}"),
            _ => panic!("row {i}: got {got:?}"),
        }
    }
}

#[test]
fn negotiation_is_symmetric_when_it_succeeds() {
    for a in 0..4u16 {
        for b in a..5 {
            for c in 0..4u16 {
                for d in c..5 {
                    let (x, y) = (hello(1, a, b), hello(1, c, d));
                    if let (Ok(p), Ok(q)) = (negotiate(&x, &y), negotiate(&y, &x)) {
                        assert_eq!(p, q);
                    } else {
                        assert!(negotiate(&x, &y).is_err() && negotiate(&y, &x).is_err());
                    }
                }
            }
        }
    }
}

#[test]
fn errors_read_as_advice() {
    let e = negotiate(&hello(1, 0, 1), &hello(1, 2, 5)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "negotiate protocol version: peer needs at least 1.2, this node speaks up to 1.1; upgrade this node"
    );
    let e = negotiate(&hello(1, 2, 5), &hello(1, 0, 1)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "negotiate protocol version: peer speaks up to 1.1, this node needs at least 1.2; upgrade the peer"
    );
}

#[test]
fn alpn_names_carry_the_major() {
    let major = PROTOCOL_MAJOR.to_string();
    assert!(ALPN_SYNC.ends_with(format!("/{major}").as_bytes()));
    assert!(ALPN_PAIR.ends_with(format!("/{major}").as_bytes()));
    assert_ne!(ALPN_SYNC, ALPN_PAIR);
    let h = Hello::current(NodeId([0; 20]), "n", "s", 0);
    assert_eq!(negotiate(&h, &h), Ok(cairn_protocol::PROTOCOL_MINOR));
}
