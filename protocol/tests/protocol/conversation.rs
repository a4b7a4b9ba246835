//! The sync conversation state machine, scripted event by event on a
//! virtual clock: orderings, bounds, hostile sizes, and property tests over
//! random event sequences checking its invariants.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_protocol::{
    Action, ApplyResult, Batch, BatchError, Conversation, ConversationConfig, ConversationError,
    Event, Finished, Hello, LogStub, MAX_BATCH_ENTRIES, MAX_WATERMARKS, Message, NodeId,
    OriginName, PlanLimits, Pull, RefuseCode, StubKind, Watermark,
};
use proptest::prelude::*;

pub fn id(b: u8) -> NodeId {
    NodeId([b; 20])
}

pub fn wm(origin: u8, epoch: u64, seq: u64) -> Watermark {
    Watermark {
        origin: id(origin),
        epoch,
        seq,
    }
}

const PEER: u8 = 0xee;
const SEC: Duration = Duration::from_secs(1);

pub fn cfg() -> ConversationConfig {
    ConversationConfig {
        limits: PlanLimits {
            max_pulls: 2,
            max_records: 10,
            max_bytes: 1 << 20,
        },
        msg_timeout: 30 * SEC,
        max_duration: 600 * SEC,
        max_messages: 1000,
    }
}

/// A batch answering `pull` with `n` stubs (seqs after it), `more` as given.
pub fn stubs(pull: &Pull, n: u64, more: bool) -> Batch {
    Batch {
        origin: pull.origin,
        epoch: pull.epoch,
        after_seq: pull.after_seq,
        last_seq: pull.after_seq + n,
        more,
        records: vec![],
        tombstones: vec![],
        stubs: (pull.after_seq + 1..=pull.after_seq + n)
            .map(|seq| LogStub {
                seq,
                hash: [seq as u8; 32],
                kind: StubKind::Withheld,
            })
            .collect(),
        origin_key: vec![],
        seals: vec![],
    }
}

fn remote(entries: Vec<Watermark>) -> Event {
    Event::Received(Message::Watermarks {
        entries,
        names: vec![],
    })
}

fn bye() -> Event {
    Event::Received(Message::Bye {
        reason: "done".to_owned(),
    })
}

fn applied(local: Vec<Watermark>) -> Event {
    Event::Applied {
        result: ApplyResult::Applied,
        local,
    }
}

/// One conversation and its virtual clock.
struct Script {
    conv: Conversation,
    now: Duration,
    timer: Option<Duration>,
}

impl Script {
    fn start(cfg: ConversationConfig, local: Vec<Watermark>) -> (Script, Vec<Action>) {
        let conv = Conversation::new(cfg, id(PEER), Duration::ZERO, local, vec![]);
        let mut s = Script {
            conv,
            now: Duration::ZERO,
            timer: None,
        };
        let a = s.drain();
        (s, a)
    }

    fn drain(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        while let Some(a) = self.conv.poll_action() {
            if let Action::ArmTimer { at } = a {
                self.timer = Some(at);
            }
            out.push(a);
        }
        out
    }

    fn ev(&mut self, e: Event) -> Vec<Action> {
        self.conv.handle(self.now, e);
        self.drain()
    }

    /// Moves the clock to the armed timer and fires it.
    fn fire(&mut self) -> Vec<Action> {
        let at = self.timer.expect("a timer is armed");
        self.now = self.now.max(at);
        self.ev(Event::Timer)
    }
}

fn sent(actions: &[Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn pulls(actions: &[Action]) -> Vec<Pull> {
    sent(actions)
        .into_iter()
        .filter_map(|m| match m {
            Message::Pull(p) => Some(p),
            _ => None,
        })
        .collect()
}

fn applies(actions: &[Action]) -> Vec<(Pull, Batch)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Apply { pull, batch } => Some((*pull, batch.clone())),
            _ => None,
        })
        .collect()
}

fn says_bye(actions: &[Action]) -> bool {
    sent(actions)
        .iter()
        .any(|m| matches!(m, Message::Bye { .. }))
}

fn outcome(actions: &[Action]) -> Option<Result<Finished, ConversationError>> {
    let i = actions.iter().position(|a| matches!(a, Action::Done(_)))?;
    assert_eq!(i, actions.len() - 1, "Done is the last action: {actions:?}");
    match &actions[i] {
        Action::Done(r) => Some(r.clone()),
        _ => None,
    }
}

#[test]
fn the_first_actions_send_our_watermarks_and_arm_the_message_timer() {
    let (s, a) = Script::start(cfg(), vec![wm(1, 1, 4)]);
    assert_eq!(
        a,
        vec![
            Action::Send(Message::Watermarks {
                entries: vec![wm(1, 1, 4)],
                names: vec![],
            }),
            Action::ArmTimer { at: 30 * SEC },
        ]
    );
    assert!(!s.conv.is_done());
    assert_eq!(s.conv.messages(), 1);
}

#[test]
fn nothing_new_costs_one_watermark_exchange_then_bye() {
    let (mut s, _) = Script::start(cfg(), vec![wm(1, 1, 4)]);
    let a = s.ev(remote(vec![wm(1, 1, 4)]));
    assert_eq!(
        sent(&a),
        vec![Message::Bye {
            reason: "done".to_owned()
        }]
    );
    let a = s.ev(bye());
    assert_eq!(outcome(&a), Some(Ok(Finished::default())));
    assert!(s.conv.is_done());
    assert_eq!(s.conv.messages(), 4);
    // Nothing after the end.
    assert!(s.ev(bye()).is_empty());
    assert!(s.ev(Event::Timer).is_empty());
}

#[test]
fn more_is_followed_by_the_next_pull_before_the_batch_is_applied() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let a = s.ev(remote(vec![wm(1, 1, 25)]));
    let p = pulls(&a);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].after_seq, p[0].max_records), (0, 10));
    assert!(!says_bye(&a));

    let mut pull = p[0];
    let mut wmark = 0;
    for (n, more) in [(10, true), (10, true), (5, false)] {
        let batch = stubs(&pull, n, more);
        let a = s.ev(Event::Received(Message::Batch(batch.clone())));
        let next = pulls(&a);
        if more {
            assert_eq!(next.len(), 1, "{a:?}");
            assert_eq!(next[0].after_seq, batch.last_seq);
            // The continuation is sent before the Apply.
            let send_at = a
                .iter()
                .position(|x| matches!(x, Action::Send(Message::Pull(_))));
            let apply_at = a.iter().position(|x| matches!(x, Action::Apply { .. }));
            assert!(send_at < apply_at, "{a:?}");
        } else {
            assert!(next.is_empty());
        }
        assert_eq!(applies(&a), vec![(pull, batch.clone())]);
        wmark = batch.last_seq;
        let a = s.ev(applied(vec![wm(1, 1, wmark)]));
        if more {
            // The log is already being pulled: nothing new, no Bye.
            assert!(sent(&a).is_empty(), "{a:?}");
            pull = next[0];
        } else {
            assert!(says_bye(&a), "{a:?}");
        }
    }
    assert_eq!(wmark, 25);
    let a = s.ev(bye());
    assert_eq!(
        outcome(&a),
        Some(Ok(Finished {
            behind_before: 25,
            peer_behind: 0
        }))
    );
}

#[test]
fn a_batch_after_the_peers_bye_is_still_applied() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let a = s.ev(remote(vec![wm(1, 1, 3)]));
    let p = pulls(&a)[0];
    // The peer has nothing to pull and says so before answering us.
    assert!(
        s.ev(bye())
            .iter()
            .all(|a| matches!(a, Action::ArmTimer { .. }))
    );
    let batch = stubs(&p, 3, false);
    let a = s.ev(Event::Received(Message::Batch(batch.clone())));
    assert_eq!(applies(&a), vec![(p, batch)]);
    let a = s.ev(applied(vec![wm(1, 1, 3)]));
    assert!(says_bye(&a));
    assert!(matches!(outcome(&a), Some(Ok(_))), "{a:?}");
}

#[test]
fn a_batch_after_our_bye_is_unasked() {
    let (mut s, _) = Script::start(cfg(), vec![wm(1, 1, 3)]);
    let a = s.ev(remote(vec![wm(1, 1, 3)]));
    assert!(says_bye(&a));
    let late = stubs(
        &Pull {
            origin: id(1),
            epoch: 1,
            after_seq: 3,
            max_records: 10,
            max_bytes: 1,
        },
        1,
        false,
    );
    let a = s.ev(Event::Received(Message::Batch(late)));
    assert!(applies(&a).is_empty());
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::UnaskedBatch {
            origin: id(1),
            after_seq: 3
        }))
    );
}

#[test]
fn a_duplicate_batch_is_unasked_and_never_applied_twice() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30)])))[0];
    let batch = stubs(&p, 10, true);
    let a = s.ev(Event::Received(Message::Batch(batch.clone())));
    assert_eq!(applies(&a).len(), 1);
    s.ev(applied(vec![wm(1, 1, 10)]));
    let a = s.ev(Event::Received(Message::Batch(batch)));
    assert!(applies(&a).is_empty());
    let err = outcome(&a).expect("done").expect_err("unasked");
    assert!(err.peer_at_fault());
    assert!(matches!(
        err,
        ConversationError::UnaskedBatch { after_seq: 0, .. }
    ));
}

#[test]
fn a_batch_for_a_range_never_pulled_is_unasked() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30)])))[0];
    for wrong in [
        Pull { after_seq: 5, ..p },
        Pull { epoch: 2, ..p },
        Pull { origin: id(2), ..p },
    ] {
        let mut t = Script::start(cfg(), vec![]).0;
        t.ev(remote(vec![wm(1, 1, 30)]));
        let a = t.ev(Event::Received(Message::Batch(stubs(&wrong, 1, false))));
        assert!(applies(&a).is_empty(), "{wrong:?}");
        assert!(
            matches!(
                outcome(&a),
                Some(Err(ConversationError::UnaskedBatch { .. }))
            ),
            "{a:?}"
        );
    }
    // Before any watermarks, a batch is simply out of order.
    let mut t = Script::start(cfg(), vec![]).0;
    let a = t.ev(Event::Received(Message::Batch(stubs(&p, 1, false))));
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::Unexpected {
            expected: "watermarks",
            got: "batch"
        }))
    );
}

#[test]
fn a_stale_pull_is_planned_again_from_the_fresh_watermark() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 8)])))[0];
    let a = s.ev(Event::Received(Message::Batch(stubs(&p, 8, false))));
    assert_eq!(applies(&a).len(), 1);
    // The store said stale and holds 5 now (another session got there).
    let a = s.ev(Event::Applied {
        result: ApplyResult::Stale,
        local: vec![wm(1, 1, 5)],
    });
    let again = pulls(&a);
    assert_eq!(again.len(), 1, "{a:?}");
    assert_eq!((again[0].after_seq, again[0].max_records), (5, 3));
    assert!(!says_bye(&a));
}

#[test]
fn logs_another_session_advanced_are_not_pulled_again() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 4), wm(2, 1, 4), wm(3, 1, 4)])));
    assert_eq!(p.len(), 2, "two in flight");
    let a = s.ev(Event::Received(Message::Batch(stubs(&p[0], 4, false))));
    assert_eq!(applies(&a).len(), 1);
    // Meanwhile a crossing session brought log 3 completely.
    let a = s.ev(applied(vec![wm(1, 1, 4), wm(3, 1, 4)]));
    assert!(pulls(&a).is_empty(), "{a:?}");
    assert!(!says_bye(&a), "log 2 still in flight");
    s.ev(Event::Received(Message::Batch(stubs(&p[1], 4, false))));
    let a = s.ev(applied(vec![wm(1, 1, 4), wm(2, 1, 4), wm(3, 1, 4)]));
    assert!(says_bye(&a));
}

#[test]
fn a_log_the_peer_says_is_exhausted_is_not_pulled_again() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 9)])))[0];
    // The peer announced 9 but only serves 4 (e.g. it lost the rest).
    s.ev(Event::Received(Message::Batch(stubs(&p, 4, false))));
    let a = s.ev(applied(vec![wm(1, 1, 4)]));
    assert!(pulls(&a).is_empty());
    assert!(says_bye(&a));
}

#[test]
fn pulls_are_served_in_order_and_answered_with_the_batch() {
    let (mut s, _) = Script::start(cfg(), vec![wm(1, 1, 9)]);
    s.ev(remote(vec![]));
    let p1 = Pull {
        origin: id(1),
        epoch: 1,
        after_seq: 0,
        max_records: 4,
        max_bytes: 100,
    };
    let p2 = Pull { after_seq: 4, ..p1 };
    let a = s.ev(Event::Received(Message::Pull(p1)));
    assert_eq!(
        a.iter()
            .filter(|x| !matches!(x, Action::ArmTimer { .. }))
            .cloned()
            .collect::<Vec<_>>(),
        vec![Action::Serve(p1)]
    );
    // While serving, no message deadline runs.
    assert_eq!(s.timer, Some(600 * SEC));
    let a = s.ev(Event::Received(Message::Pull(p2)));
    assert!(a.contains(&Action::Serve(p2)));
    let b1 = stubs(&p1, 4, true);
    let a = s.ev(Event::Served(b1.clone()));
    assert_eq!(sent(&a), vec![Message::Batch(b1)]);
    let b2 = stubs(&p2, 4, true);
    let a = s.ev(Event::Served(b2.clone()));
    assert_eq!(sent(&a), vec![Message::Batch(b2)]);
    // A Served with nothing outstanding is ignored.
    assert!(sent(&s.ev(Event::Served(stubs(&p1, 1, false)))).is_empty());
    // A ping is answered; a pong ignored.
    let a = s.ev(Event::Received(Message::Ping { nonce: 7 }));
    assert_eq!(sent(&a), vec![Message::Pong { nonce: 7 }]);
    assert!(sent(&s.ev(Event::Received(Message::Pong { nonce: 1 }))).is_empty());
    let a = s.ev(bye());
    assert!(matches!(outcome(&a), Some(Ok(_))), "{a:?}");
}

#[test]
fn the_peer_may_not_pull_or_say_bye_after_its_bye() {
    for late in [
        Message::Pull(Pull {
            origin: id(1),
            epoch: 1,
            after_seq: 0,
            max_records: 1,
            max_bytes: 1,
        }),
        Message::Bye {
            reason: "again".to_owned(),
        },
    ] {
        let (mut s, _) = Script::start(cfg(), vec![]);
        s.ev(remote(vec![wm(1, 1, 3)]));
        s.ev(bye());
        let got = late.name();
        let a = s.ev(Event::Received(late));
        assert_eq!(
            outcome(&a),
            Some(Err(ConversationError::Unexpected {
                expected: "batch or nothing after bye",
                got
            }))
        );
    }
    let (mut s, _) = Script::start(cfg(), vec![]);
    s.ev(remote(vec![]));
    let a = s.ev(remote(vec![]));
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::Unexpected {
            expected: "pull, batch or bye",
            got: "watermarks"
        }))
    );
}

#[test]
fn refusals_hellos_and_closed_streams_end_the_conversation() {
    let refuse = Message::Refuse {
        code: RefuseCode::Busy,
        reason: "later".to_owned(),
    };
    let want = ConversationError::Refused {
        code: RefuseCode::Busy,
        reason: "later".to_owned(),
    };
    let (mut s, _) = Script::start(cfg(), vec![]);
    assert_eq!(
        outcome(&s.ev(Event::Received(refuse.clone()))),
        Some(Err(want.clone()))
    );
    let (mut s, _) = Script::start(cfg(), vec![]);
    s.ev(remote(vec![]));
    assert_eq!(
        outcome(&s.ev(Event::Received(refuse))),
        Some(Err(want.clone()))
    );
    assert!(!want.peer_at_fault());

    let (mut s, _) = Script::start(cfg(), vec![]);
    let hello = Hello::current(id(PEER), "peer", "test", 1);
    assert_eq!(
        outcome(&s.ev(Event::Received(Message::Hello(hello)))),
        Some(Err(ConversationError::Unexpected {
            expected: "watermarks",
            got: "hello"
        }))
    );

    let (mut s, _) = Script::start(cfg(), vec![]);
    s.ev(remote(vec![wm(1, 1, 2)]));
    assert_eq!(
        outcome(&s.ev(Event::Closed)),
        Some(Err(ConversationError::Closed))
    );
}

#[test]
fn a_failed_apply_ends_the_conversation_and_nothing_else_happens() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30)])))[0];
    s.ev(Event::Received(Message::Batch(stubs(&p, 10, true))));
    let a = s.ev(Event::Applied {
        result: ApplyResult::Failed,
        local: vec![],
    });
    assert_eq!(a, vec![Action::Done(Err(ConversationError::ApplyFailed))]);
}

#[test]
fn a_stalled_peer_times_out_after_the_message_timeout() {
    // Stalls before its watermarks.
    let (mut s, _) = Script::start(cfg(), vec![]);
    s.now = 29 * SEC;
    assert!(
        s.ev(Event::Timer)
            .iter()
            .all(|a| matches!(a, Action::ArmTimer { .. })),
        "an early timer only re-arms"
    );
    let a = s.fire();
    assert_eq!(s.now, 30 * SEC);
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::Timeout { after: 30 * SEC }))
    );

    // Stalls mid-way: every message moves the deadline.
    let (mut s, _) = Script::start(cfg(), vec![]);
    s.now = 20 * SEC;
    s.ev(remote(vec![wm(1, 1, 30)]));
    assert_eq!(s.timer, Some(50 * SEC));
    s.now = 45 * SEC;
    s.ev(Event::Received(Message::Ping { nonce: 1 }));
    assert_eq!(s.timer, Some(75 * SEC));
    let a = s.fire();
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::Timeout { after: 30 * SEC }))
    );
}

#[test]
fn local_work_does_not_count_against_the_peer_but_the_session_bound_does() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30)])))[0];
    s.ev(Event::Received(Message::Batch(stubs(&p, 10, true))));
    // Applying takes long: only the session deadline is armed.
    assert_eq!(s.timer, Some(600 * SEC));
    let a = s.fire();
    assert_eq!(
        outcome(&a),
        Some(Err(ConversationError::TooLong {
            messages: 1000,
            after: 600 * SEC
        }))
    );
}

#[test]
fn a_chatty_peer_runs_into_the_duration_bound() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    s.ev(remote(vec![wm(1, 1, 30)]));
    // Pings every 20 s forever: never late, never done.
    let mut steps = 0;
    while !s.conv.is_done() {
        steps += 1;
        assert!(steps < 100, "must end");
        s.now += 20 * SEC;
        if s.timer.is_some_and(|t| t <= s.now) {
            s.now = s.timer.unwrap_or_default();
            s.ev(Event::Timer);
        } else {
            s.ev(Event::Received(Message::Ping { nonce: steps }));
        }
    }
    assert_eq!(s.now, 600 * SEC, "ended exactly at the bound");
}

#[test]
fn a_chatty_peer_runs_into_the_message_bound() {
    let c = ConversationConfig {
        max_messages: 11,
        ..cfg()
    };
    let (mut s, _) = Script::start(c, vec![]);
    s.ev(remote(vec![wm(1, 1, 30)]));
    let mut last = vec![];
    for nonce in 0..100 {
        if s.conv.is_done() {
            break;
        }
        last = s.ev(Event::Received(Message::Ping { nonce }));
    }
    assert_eq!(
        outcome(&last),
        Some(Err(ConversationError::TooLong {
            messages: 11,
            after: 600 * SEC
        }))
    );
    // 2 watermarks + 1 pull + 4 pings + 4 pongs.
    assert_eq!(s.conv.messages(), 11);
}

#[test]
fn a_tiny_message_bound_ends_right_after_the_exchange() {
    let c = ConversationConfig {
        max_messages: 2,
        ..cfg()
    };
    let (mut s, _) = Script::start(c, vec![]);
    let a = s.ev(remote(vec![wm(1, 1, 1)]));
    assert!(
        matches!(outcome(&a), Some(Err(ConversationError::TooLong { .. }))),
        "{a:?}"
    );
}

#[test]
fn hostile_batch_shapes_are_refused_before_anything_is_applied() {
    let big = u64::MAX;
    type Shape = Box<dyn Fn(&Pull) -> Batch>;
    let cases: Vec<(&str, Shape, BatchError)> = vec![
        (
            "range past the pull's size",
            Box::new(move |p: &Pull| Batch {
                last_seq: big,
                more: true,
                ..stubs(p, 0, false)
            }),
            BatchError::TooMany {
                count: usize::try_from(big - 5).unwrap_or(usize::MAX),
                max: 10,
            },
        ),
        (
            "ends before it starts",
            Box::new(|p: &Pull| Batch {
                after_seq: p.after_seq,
                last_seq: 0,
                ..stubs(p, 0, false)
            }),
            BatchError::Gap {
                expected: 6,
                found: None,
            },
        ),
        (
            "empty but more",
            Box::new(|p: &Pull| stubs(p, 0, true)),
            BatchError::NoProgress,
        ),
        (
            "more entries than asked",
            Box::new(|p: &Pull| stubs(p, 11, false)),
            BatchError::TooMany { count: 11, max: 10 },
        ),
    ];
    for (what, make, want) in cases {
        let (mut s, _) = Script::start(cfg(), vec![wm(1, 1, 5)]);
        let p = pulls(&s.ev(remote(vec![wm(1, 1, big)])))[0];
        assert_eq!((p.after_seq, p.max_records), (5, 10));
        let a = s.ev(Event::Received(Message::Batch(make(&p))));
        assert!(applies(&a).is_empty(), "{what}");
        assert!(pulls(&a).is_empty(), "{what}: no continuation");
        let err = outcome(&a).expect(what).expect_err(what);
        assert_eq!(err, ConversationError::BadBatch(want), "{what}");
        assert!(err.peer_at_fault(), "{what}");
    }
}

#[test]
fn hostile_watermarks_and_pulls_stay_bounded() {
    // Far more local logs than one message carries.
    let many: Vec<Watermark> = (0..MAX_WATERMARKS as u64 + 50)
        .map(|i| Watermark {
            origin: id((i % 250) as u8),
            epoch: i,
            seq: u64::MAX,
        })
        .collect();
    let (mut s, a) = Script::start(cfg(), many.clone());
    match &a[0] {
        Action::Send(Message::Watermarks { entries, .. }) => {
            assert_eq!(entries.len(), MAX_WATERMARKS);
        }
        other => panic!("{other:?}"),
    }
    // The peer claims the maximum of everything; we only ever have
    // max_pulls in flight, each clamped.
    let remote_wm: Vec<Watermark> = (0..MAX_WATERMARKS as u64)
        .map(|i| Watermark {
            origin: id(200),
            epoch: i,
            seq: u64::MAX,
        })
        .collect();
    let a = s.ev(remote(remote_wm));
    let p = pulls(&a);
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|p| p.max_records == 10 && p.after_seq == 0));
    // A pull with absurd sizes is handed on as is (the store clamps it).
    let absurd = Pull {
        origin: id(1),
        epoch: 0,
        after_seq: u64::MAX,
        max_records: u32::MAX,
        max_bytes: u32::MAX,
    };
    assert!(
        s.ev(Event::Received(Message::Pull(absurd)))
            .contains(&Action::Serve(absurd))
    );
    // A batch at the very end of the seq space, correctly shaped, is fine.
    let near_end = Watermark {
        seq: u64::MAX - 10,
        ..remote_one(&p[0])
    };
    let mut t = Script::start(cfg(), vec![near_end]).0;
    let q = pulls(&t.ev(remote(vec![remote_one(&p[0])])))[0];
    assert_eq!(q.after_seq, u64::MAX - 10);
    let a = t.ev(Event::Received(Message::Batch(stubs(&q, 10, false))));
    assert_eq!(applies(&a).len(), 1);
    assert!(many.len() > MAX_WATERMARKS);
}

fn remote_one(p: &Pull) -> Watermark {
    Watermark {
        origin: p.origin,
        epoch: p.epoch,
        seq: u64::MAX,
    }
}

#[test]
fn origin_names_are_noted_except_the_peers_own_and_blank_ones() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let named = |o: u8, n: &str| OriginName {
        origin: id(o),
        name: n.to_owned(),
    };
    let a = s.ev(Event::Received(Message::Watermarks {
        entries: vec![],
        names: vec![named(1, "desk"), named(PEER, "me"), named(2, "  ")],
    }));
    assert_eq!(a[0], Action::NoteNames(vec![named(1, "desk")]));
}

// ---- Property tests over random event sequences ----

/// One step of a random history, abstract enough to reach deep states:
/// `Answer` answers one of the machine's outstanding pulls.
#[derive(Debug, Clone)]
enum Step {
    Watermarks(Vec<(u8, u64, u64)>),
    Answer {
        k: usize,
        n: u64,
        more: bool,
    },
    RandomBatch {
        origin: u8,
        epoch: u64,
        after: u64,
        n: u64,
        more: bool,
    },
    Pull {
        origin: u8,
        after: u64,
    },
    Served,
    Applied {
        result: u8,
        local: Vec<(u8, u64, u64)>,
    },
    Bye,
    Ping,
    Pong,
    Refuse,
    Closed,
    Wait(u64),
}

fn wms() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    prop::collection::vec((0u8..4, 1u64..3, 0u64..40), 0..6)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => wms().prop_map(Step::Watermarks),
        8 => (0usize..3, 0u64..14, any::<bool>()).prop_map(|(k, n, more)| Step::Answer { k, n, more }),
        1 => (0u8..4, 1u64..3, 0u64..40, 0u64..14, any::<bool>())
            .prop_map(|(origin, epoch, after, n, more)| Step::RandomBatch { origin, epoch, after, n, more }),
        2 => (0u8..4, 0u64..40).prop_map(|(origin, after)| Step::Pull { origin, after }),
        2 => Just(Step::Served),
        6 => (0u8..3, wms()).prop_map(|(result, local)| Step::Applied { result, local }),
        1 => Just(Step::Bye),
        1 => Just(Step::Ping),
        1 => Just(Step::Pong),
        1 => prop_oneof![Just(Step::Refuse), Just(Step::Closed)],
        2 => (0u64..40_000).prop_map(Step::Wait),
    ]
}

fn to_wms(v: &[(u8, u64, u64)]) -> Vec<Watermark> {
    v.iter().map(|&(o, e, s)| wm(o, e, s)).collect()
}

/// A machine under a random history, with what the checks remember.
struct Harness {
    cfg: ConversationConfig,
    conv: Conversation,
    now: Duration,
    /// What the machine may claim to hold, per log: the highest watermark
    /// reported to it and the end of every batch it handed to Apply.
    may_claim: BTreeMap<(NodeId, u64), u64>,
    /// Pulls sent and not yet answered by an Apply.
    unanswered: Vec<Pull>,
    messages: u64,
    dones: usize,
    timer: Option<Duration>,
}

impl Harness {
    fn claim(&mut self, w: &[Watermark]) {
        for w in w {
            let e = self.may_claim.entry((w.origin, w.epoch)).or_insert(0);
            *e = (*e).max(w.seq);
        }
    }

    /// Takes every queued action and checks it.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let cfg = self.cfg;
        let actions: Vec<Action> = std::iter::from_fn(|| self.conv.poll_action()).collect();
        let count = actions.len();
        // A continuation pull goes out just before the batch it follows is
        // handed to Apply, in the same step.
        for a in &actions {
            if let Action::Apply { batch, .. } = a {
                let e = self
                    .may_claim
                    .entry((batch.origin, batch.epoch))
                    .or_insert(0);
                *e = (*e).max(batch.last_seq);
            }
        }
        for a in actions {
            prop_assert!(self.dones == 0, "an action after Done: {a:?}");
            match a {
                Action::Send(m) => {
                    self.messages += 1;
                    if let Message::Pull(p) = m {
                        let held = self
                            .may_claim
                            .get(&(p.origin, p.epoch))
                            .copied()
                            .unwrap_or(0);
                        prop_assert!(p.after_seq <= held, "pull {p:?} claims past {held}");
                        prop_assert!(p.max_records >= 1 && p.max_records <= cfg.limits.max_records);
                        self.unanswered.push(p);
                    }
                }
                Action::Apply { pull, batch } => {
                    let i = self.unanswered.iter().position(|p| *p == pull);
                    prop_assert!(
                        i.is_some(),
                        "apply for a pull never sent or already answered: {pull:?}"
                    );
                    if let Some(i) = i {
                        self.unanswered.remove(i);
                    }
                    prop_assert_eq!(
                        (batch.origin, batch.epoch, batch.after_seq),
                        (pull.origin, pull.epoch, pull.after_seq)
                    );
                    prop_assert!(batch.last_seq >= batch.after_seq);
                    prop_assert!(batch.last_seq - batch.after_seq <= u64::from(pull.max_records));
                    prop_assert!(batch.stubs.len() <= pull.max_records as usize);
                }
                Action::ArmTimer { at } => {
                    prop_assert!(at >= self.now, "timer in the past");
                    prop_assert!(at <= cfg.max_duration);
                    self.timer = Some(at);
                }
                Action::Done(_) => self.dones += 1,
                Action::Serve(_) | Action::NoteNames(_) => {}
            }
        }
        let slack = cfg.limits.max_pulls.max(1) as u64 + 3;
        prop_assert!(
            count <= cfg.limits.max_pulls.max(1) + 6,
            "{count} actions for one event"
        );
        prop_assert!(
            self.messages <= cfg.max_messages + slack,
            "{} messages",
            self.messages
        );
        prop_assert_eq!(self.conv.is_done(), self.dones == 1);
        Ok(())
    }

    /// The event `s` stands for now, if any.
    fn event(&mut self, s: &Step) -> Option<Event> {
        let any_pull = |origin: u8, epoch: u64, after_seq: u64, max_records: u32| Pull {
            origin: id(origin),
            epoch,
            after_seq,
            max_records,
            max_bytes: 1,
        };
        Some(match s {
            Step::Watermarks(v) => remote(to_wms(v)),
            Step::Answer { k, n, more } => {
                let p = *self.unanswered.get(k % self.unanswered.len().max(1))?;
                Event::Received(Message::Batch(stubs(&p, *n, *more)))
            }
            Step::RandomBatch {
                origin,
                epoch,
                after,
                n,
                more,
            } => Event::Received(Message::Batch(stubs(
                &any_pull(*origin, *epoch, *after, 10),
                *n,
                *more,
            ))),
            Step::Pull { origin, after } => {
                Event::Received(Message::Pull(any_pull(*origin, 1, *after, 5)))
            }
            Step::Served => Event::Served(stubs(&any_pull(1, 1, 0, 3), 3, false)),
            Step::Applied { result, local } => {
                let local = to_wms(local);
                self.claim(&local);
                let result = match result {
                    0 => ApplyResult::Applied,
                    1 => ApplyResult::Stale,
                    _ => ApplyResult::Failed,
                };
                Event::Applied { result, local }
            }
            Step::Bye => bye(),
            Step::Ping => Event::Received(Message::Ping { nonce: 1 }),
            Step::Pong => Event::Received(Message::Pong { nonce: 1 }),
            Step::Refuse => Event::Received(Message::Refuse {
                code: RefuseCode::Other,
                reason: String::new(),
            }),
            Step::Closed => Event::Closed,
            Step::Wait(ms) => {
                self.now += Duration::from_millis(*ms);
                if self.timer.is_none_or(|t| t > self.now) {
                    return None;
                }
                Event::Timer
            }
        })
    }
}

/// Replays `steps` and checks the invariants after every one.
fn check_history(
    cfg: ConversationConfig,
    local: Vec<Watermark>,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let conv = Conversation::new(cfg, id(PEER), Duration::ZERO, local.clone(), vec![]);
    let mut h = Harness {
        cfg,
        conv,
        now: Duration::ZERO,
        may_claim: BTreeMap::new(),
        unanswered: Vec::new(),
        messages: 0,
        dones: 0,
        timer: None,
    };
    h.claim(&local);
    h.drain()?;
    for s in steps {
        let Some(event) = h.event(s) else { continue };
        if matches!(event, Event::Received(_)) && h.dones == 0 {
            h.messages += 1;
        }
        h.conv.handle(h.now, event);
        h.drain()?;
    }
    // Always terminates: at the latest when the session's time is up.
    h.now = h.now.max(cfg.max_duration);
    h.conv.handle(h.now, Event::Timer);
    h.drain()?;
    prop_assert!(h.conv.is_done());
    prop_assert_eq!(h.dones, 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_histories_keep_the_invariants(
        local in wms(),
        max_pulls in 0usize..4,
        max_records in 1u32..12,
        max_messages in 0u64..60,
        steps in prop::collection::vec(step(), 0..80),
    ) {
        let c = ConversationConfig {
            limits: PlanLimits { max_pulls, max_records, max_bytes: 1 << 20 },
            msg_timeout: 30 * SEC,
            max_duration: 600 * SEC,
            max_messages,
        };
        check_history(c, to_wms(&local), &steps)?;
    }
}

#[test]
fn batch_entries_bound_is_the_protocol_limit() {
    // A pull never asks for more than one batch may carry.
    let c = ConversationConfig {
        limits: PlanLimits {
            max_pulls: 1,
            max_records: u32::MAX,
            max_bytes: u32::MAX,
        },
        ..cfg()
    };
    let (mut s, _) = Script::start(c, vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, u64::MAX)])))[0];
    assert_eq!(p.max_records as usize, MAX_BATCH_ENTRIES);
}

#[test]
fn a_refused_log_is_not_pulled_again_and_the_others_go_on() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30), wm(2, 1, 4)])));
    assert_eq!(p.len(), 2, "{p:?}");
    // Log 1 answers with more: its next pull goes out before the apply.
    let a = s.ev(Event::Received(Message::Batch(stubs(&p[0], 10, true))));
    assert_eq!(pulls(&a).len(), 1);
    let a = s.ev(Event::Applied {
        result: ApplyResult::Refused,
        local: vec![],
    });
    assert!(pulls(&a).is_empty(), "log 1 is not planned again: {a:?}");
    // The pull already in flight for log 1 is answered and not followed up.
    let next = Pull {
        after_seq: 10,
        ..p[0]
    };
    let a = s.ev(Event::Received(Message::Batch(stubs(&next, 10, true))));
    assert!(pulls(&a).is_empty(), "{a:?}");
    let a = s.ev(Event::Applied {
        result: ApplyResult::Stale,
        local: vec![],
    });
    assert!(pulls(&a).is_empty(), "{a:?}");
    // Log 2 still arrives and the conversation ends well.
    let a = s.ev(Event::Received(Message::Batch(stubs(&p[1], 4, false))));
    assert_eq!(applies(&a).len(), 1);
    let a = s.ev(applied(vec![wm(2, 1, 4)]));
    assert!(says_bye(&a), "{a:?}");
    let a = s.ev(bye());
    assert!(matches!(outcome(&a), Some(Ok(_))), "{a:?}");
}

#[test]
fn a_halt_stops_every_pull_and_ends_with_bye() {
    let (mut s, _) = Script::start(cfg(), vec![]);
    let p = pulls(&s.ev(remote(vec![wm(1, 1, 30), wm(2, 1, 30), wm(3, 1, 30)])));
    assert_eq!(p.len(), 2);
    let a = s.ev(Event::Received(Message::Batch(stubs(&p[0], 10, true))));
    assert_eq!(pulls(&a).len(), 1, "next range asked before the apply");
    let a = s.ev(Event::Applied {
        result: ApplyResult::Halt,
        local: vec![],
    });
    assert!(pulls(&a).is_empty() && !says_bye(&a), "{a:?}");
    // Log 2's answer: no follow-up pull although it says more.
    let a = s.ev(Event::Received(Message::Batch(stubs(&p[1], 10, true))));
    assert!(pulls(&a).is_empty(), "{a:?}");
    let a = s.ev(Event::Applied {
        result: ApplyResult::Halt,
        local: vec![],
    });
    assert!(pulls(&a).is_empty(), "{a:?}");
    let next = Pull {
        after_seq: 10,
        ..p[0]
    };
    let a = s.ev(Event::Received(Message::Batch(stubs(&next, 10, true))));
    assert!(pulls(&a).is_empty(), "{a:?}");
    let a = s.ev(Event::Applied {
        result: ApplyResult::Halt,
        local: vec![],
    });
    assert!(says_bye(&a), "nothing in flight: bye ({a:?})");
}

#[test]
fn a_conversation_told_to_stop_pulling_serves_and_says_bye() {
    let (mut s, _) = Script::start(cfg(), vec![wm(7, 1, 3)]);
    s.conv.stop_pulling(s.now);
    let _ = s.drain();
    let a = s.ev(remote(vec![wm(1, 1, 30)]));
    assert!(pulls(&a).is_empty(), "{a:?}");
    assert!(says_bye(&a), "{a:?}");
    // The peer's pulls are still served.
    let p = Pull {
        origin: id(7),
        epoch: 1,
        after_seq: 0,
        max_records: 10,
        max_bytes: 1 << 20,
    };
    let a = s.ev(Event::Received(Message::Pull(p)));
    assert!(a.iter().any(|x| matches!(x, Action::Serve(_))), "{a:?}");
}
