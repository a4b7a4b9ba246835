//! Building and checking batches.

use cairn_protocol::{
    Batch, BatchBuilder, BatchError, BuildError, ForgetTarget, LogEntry, LogStub, NodeId, Pull,
    Pushed, RecordError, StubKind, Tombstone, check_batch, next_pull,
};

use crate::samples::{node, record};

fn pull(after: u64, max_records: u32, max_bytes: u32) -> Pull {
    Pull {
        origin: node(1),
        epoch: 7,
        after_seq: after,
        max_records,
        max_bytes,
    }
}

fn entries(from: u64, to: u64) -> Vec<LogEntry> {
    (from..=to)
        .map(|seq| match seq % 3 {
            0 => LogEntry::Stub(LogStub {
                seq,
                hash: [seq as u8; 32],
                kind: StubKind::Forgotten,
            }),
            1 => LogEntry::Record(record(seq, &format!("record {seq}"))),
            _ => LogEntry::Tombstone(Tombstone::new(
                seq,
                node(1),
                seq as i64,
                ForgetTarget::Record { hash: [1; 32] },
            )),
        })
        .collect()
}

fn build(p: &Pull, log: Vec<LogEntry>, sender_max: u64) -> Batch {
    let mut b = BatchBuilder::new(p);
    for e in log {
        if let Pushed::Full(_) = b.push(e).unwrap() {
            break;
        }
    }
    b.finish(sender_max)
}

#[test]
fn builder_output_passes_the_check_and_resumes() {
    let p = pull(0, 4, u32::MAX);
    let b = build(&p, entries(1, 10), 10);
    assert_eq!((b.after_seq, b.last_seq, b.more), (0, 4, true));
    check_batch(&p, &b).unwrap();
    let p2 = next_pull(&p, &b).unwrap();
    assert_eq!(p2.after_seq, 4);
    let b2 = build(&p2, entries(5, 10), 10);
    check_batch(&p2, &b2).unwrap();
    let p3 = next_pull(&p2, &b2).unwrap();
    let b3 = build(&p3, entries(9, 10), 10);
    check_batch(&p3, &b3).unwrap();
    assert_eq!((b3.last_seq, b3.more), (10, false));
    assert_eq!(next_pull(&p3, &b3), None);
}

#[test]
fn exact_multiple_of_the_batch_size_ends_without_more() {
    // atuin#3913: the page boundary case.
    let p = pull(0, 5, u32::MAX);
    let b = build(&p, entries(1, 5), 5);
    assert_eq!((b.last_seq, b.more), (5, false));
    check_batch(&p, &b).unwrap();
}

#[test]
fn nothing_new_is_an_empty_final_batch() {
    let p = pull(5, 10, u32::MAX);
    let b = build(&p, vec![], 5);
    assert_eq!((b.last_seq, b.more), (5, false));
    check_batch(&p, &b).unwrap();
}

#[test]
fn byte_budget_limits_but_always_makes_progress() {
    let p = pull(0, 1000, 1);
    let b = build(&p, entries(1, 3), 3);
    assert_eq!(
        b.last_seq, 1,
        "one entry even though it exceeds the byte budget"
    );
    assert!(b.more);
    let mut builder = BatchBuilder::new(&p);
    assert_eq!(
        builder.push(entries(2, 2).remove(0)),
        Err(BuildError::NotNext {
            expected: 1,
            got: 2
        })
    );
}

#[test]
fn oversized_entry_is_refused_by_the_builder() {
    let mut r = record(1, "");
    r.text = "x".repeat(cairn_protocol::MAX_BATCH_BYTES);
    let mut b = BatchBuilder::new(&pull(0, 10, u32::MAX));
    assert!(matches!(
        b.push(LogEntry::Record(r)),
        Err(BuildError::EntryTooLarge { seq: 1, .. })
    ));
}

#[test]
fn check_rejects_bad_batches() {
    let p = pull(0, 10, u32::MAX);
    let good = build(&p, entries(1, 6), 6);
    check_batch(&p, &good).unwrap();

    let mut b = good.clone();
    b.epoch = 8;
    assert_eq!(check_batch(&p, &b), Err(BatchError::WrongLog));

    let mut b = good.clone();
    b.origin = NodeId([9; 20]);
    assert_eq!(check_batch(&p, &b), Err(BatchError::WrongLog));

    let mut b = good.clone();
    b.after_seq = 1;
    assert_eq!(
        check_batch(&p, &b),
        Err(BatchError::WrongStart {
            expected: 0,
            got: 1
        })
    );

    let small = pull(0, 5, u32::MAX);
    assert_eq!(
        check_batch(&small, &good),
        Err(BatchError::TooMany { count: 6, max: 5 })
    );

    let mut b = good.clone();
    b.stubs.clear(); // seqs 3 and 6 missing
    assert_eq!(
        check_batch(&p, &b),
        Err(BatchError::Gap {
            expected: 3,
            found: Some(4)
        })
    );

    let mut b = good.clone();
    b.last_seq = 7;
    assert_eq!(
        check_batch(&p, &b),
        Err(BatchError::Gap {
            expected: 7,
            found: None
        })
    );

    let mut b = good.clone();
    b.records.reverse();
    assert!(matches!(check_batch(&p, &b), Err(BatchError::Order { .. })));

    let mut b = good.clone();
    let dup = b.records[0].clone();
    b.records.insert(0, dup);
    assert!(matches!(check_batch(&p, &b), Err(BatchError::Order { .. })));

    let mut b = good.clone();
    b.records[0].text = "tampered".into();
    assert!(matches!(
        check_batch(&p, &b),
        Err(BatchError::Entry(RecordError::HashMismatch { seq: 1, .. }))
    ));

    let mut b = good.clone();
    b.tombstones[0] = Tombstone::new(2, node(2), 2, ForgetTarget::Record { hash: [1; 32] });
    assert_eq!(
        check_batch(&p, &b),
        Err(BatchError::ForeignTombstone { seq: 2 })
    );

    let mut b = good.clone();
    b.tombstones[0].created_ms += 1;
    assert!(matches!(
        check_batch(&p, &b),
        Err(BatchError::Entry(RecordError::TombstoneIdMismatch {
            seq: 2
        }))
    ));

    let empty_more = Batch {
        records: vec![],
        tombstones: vec![],
        stubs: vec![],
        origin_key: vec![],
        seals: vec![],
        last_seq: 0,
        more: true,
        ..good.clone()
    };
    assert_eq!(check_batch(&p, &empty_more), Err(BatchError::NoProgress));

    // A seq range that would overflow is a gap, not a panic.
    let top = pull(u64::MAX, 10, u32::MAX);
    let b = Batch {
        after_seq: u64::MAX,
        last_seq: u64::MAX,
        records: vec![record(u64::MAX, "x")],
        tombstones: vec![],
        stubs: vec![],
        origin_key: vec![],
        seals: vec![],
        more: false,
        ..good
    };
    assert!(matches!(check_batch(&top, &b), Err(BatchError::Gap { .. })));
}
