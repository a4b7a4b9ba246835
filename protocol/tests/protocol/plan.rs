//! Pull planning and watermark arithmetic, table-driven.

use cairn_protocol::{
    MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, NodeId, PlanLimits, Pull, Watermark, contiguous_max, lags,
    plan_pulls, plan_pulls_where,
};

fn w(origin: u8, epoch: u64, seq: u64) -> Watermark {
    Watermark {
        origin: NodeId([origin; 20]),
        epoch,
        seq,
    }
}

fn pull(origin: u8, epoch: u64, after_seq: u64, max_records: u32) -> Pull {
    Pull {
        origin: NodeId([origin; 20]),
        epoch,
        after_seq,
        max_records,
        max_bytes: MAX_BATCH_BYTES as u32,
    }
}

#[test]
fn contiguous_max_table() {
    let rows: &[(u64, &[u64], u64)] = &[
        (0, &[], 0),
        (0, &[1, 2, 3], 3),
        (0, &[2, 3], 0),
        (3, &[4, 5, 7], 5),
        (3, &[1, 2, 3, 4], 4),
        (3, &[4, 4, 5], 5),
        (u64::MAX - 1, &[u64::MAX], u64::MAX),
        (u64::MAX, &[u64::MAX], u64::MAX),
    ];
    for (i, (wm, seqs, want)) in rows.iter().enumerate() {
        assert_eq!(contiguous_max(*wm, seqs.iter().copied()), *want, "row {i}");
    }
}

#[test]
fn plan_table() {
    let big = PlanLimits {
        max_pulls: 100,
        ..PlanLimits::default()
    };
    let m = MAX_BATCH_ENTRIES as u32;
    type Row = (&'static str, Vec<Watermark>, Vec<Watermark>, Vec<Pull>);
    let rows: Vec<Row> = vec![
        ("both empty", vec![], vec![], vec![]),
        ("in sync", vec![w(1, 1, 5)], vec![w(1, 1, 5)], vec![]),
        (
            "we are ahead: the peer pulls",
            vec![w(1, 1, 9)],
            vec![w(1, 1, 5)],
            vec![],
        ),
        ("only we hold it", vec![w(2, 1, 3)], vec![], vec![]),
        (
            "peer ahead",
            vec![w(1, 1, 5)],
            vec![w(1, 1, 8)],
            vec![pull(1, 1, 5, 3)],
        ),
        (
            "unknown log starts at 0",
            vec![],
            vec![w(3, 4, 2)],
            vec![pull(3, 4, 0, 2)],
        ),
        (
            "peer's empty log is not pulled",
            vec![],
            vec![w(3, 4, 0)],
            vec![],
        ),
        (
            "another epoch is another log",
            vec![w(1, 1, 50)],
            vec![w(1, 2, 1)],
            vec![pull(1, 2, 0, 1)],
        ),
        (
            "exactly one batch behind",
            vec![w(1, 1, 0)],
            vec![w(1, 1, u64::from(m))],
            vec![pull(1, 1, 0, m)],
        ),
        (
            "one over a batch still asks for a full batch",
            vec![w(1, 1, 0)],
            vec![w(1, 1, u64::from(m) + 1)],
            vec![pull(1, 1, 0, m)],
        ),
        (
            "ordered by origin then epoch, whatever the input order",
            vec![],
            vec![w(9, 1, 1), w(2, 7, 1), w(2, 3, 1)],
            vec![pull(2, 3, 0, 1), pull(2, 7, 0, 1), pull(9, 1, 0, 1)],
        ),
        (
            "repeated remote keys take the highest",
            vec![],
            vec![w(1, 1, 2), w(1, 1, 7), w(1, 1, 4)],
            vec![pull(1, 1, 0, 7)],
        ),
        (
            "huge lag is capped, not overflowed",
            vec![],
            vec![w(1, 1, u64::MAX)],
            vec![pull(1, 1, 0, m)],
        ),
    ];
    for (name, local, remote, want) in rows {
        assert_eq!(plan_pulls(&local, &remote, &big), want, "{name}");
    }
}

#[test]
fn plan_is_bounded_and_deterministic() {
    let remote: Vec<Watermark> = (0..50u8).rev().map(|o| w(o, 1, 10)).collect();
    let limits = PlanLimits {
        max_pulls: 3,
        max_records: 4,
        max_bytes: 1000,
    };
    let got = plan_pulls(&[], &remote, &limits);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].origin, NodeId([0; 20]));
    assert_eq!(got[2].origin, NodeId([2; 20]));
    assert!(
        got.iter()
            .all(|p| p.max_records == 4 && p.max_bytes == 1000)
    );
    // Out-of-range limits are clamped to the protocol's.
    let wild = PlanLimits {
        max_pulls: 1,
        max_records: 0,
        max_bytes: u32::MAX,
    };
    let got = plan_pulls(&[], &remote, &wild);
    assert_eq!(got[0].max_records, 1);
    assert_eq!(got[0].max_bytes, MAX_BATCH_BYTES as u32);
}

#[test]
fn filter_and_lags() {
    let local = [w(1, 1, 2)];
    let remote = [w(1, 1, 5), w(2, 1, 1)];
    let l = lags(&local, &remote);
    assert_eq!(l.len(), 2);
    assert_eq!((l[0].local, l[0].remote, l[0].behind()), (2, 5, 3));
    let only_two = plan_pulls_where(&local, &remote, &PlanLimits::default(), |lag| {
        lag.origin == NodeId([2; 20])
    });
    assert_eq!(only_two, vec![pull(2, 1, 0, 1)]);
}
