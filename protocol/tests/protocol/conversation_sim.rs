//! Machines wired back to back: conversation state machines, each with an
//! in-memory fake store and a serial driver (one serve or apply at a time,
//! as the node's driver does), exchanging messages over in-order links on
//! a virtual clock. A seeded scheduler interleaves the sides; every run
//! must end well on both sides with the stores converged, and no store may
//! ever hold more of a log than some store held at the start.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use cairn_protocol::{
    Action, ApplyResult, Batch, Conversation, ConversationConfig, ConversationError, Event,
    Finished, LogStub, MAX_BATCH_ENTRIES, Message, NodeId, PlanLimits, Pull, StubKind, Watermark,
    check_batch,
};
use proptest::prelude::*;

use crate::conversation::{cfg, id, wm};

type Log = (NodeId, u64);

/// A store reduced to what the conversation sees: per log, how far it is
/// held (every seq up to the watermark; entries are stubs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FakeStore {
    held: BTreeMap<Log, u64>,
}

impl FakeStore {
    fn new(logs: &[Watermark]) -> FakeStore {
        let mut s = FakeStore::default();
        for w in logs {
            let e = s.held.entry((w.origin, w.epoch)).or_insert(0);
            *e = (*e).max(w.seq);
        }
        s
    }

    fn watermarks(&self) -> Vec<Watermark> {
        self.held
            .iter()
            .filter(|&(_, &seq)| seq > 0)
            .map(|(&(origin, epoch), &seq)| Watermark { origin, epoch, seq })
            .collect()
    }

    fn serve(&self, pull: &Pull) -> Batch {
        let held = self
            .held
            .get(&(pull.origin, pull.epoch))
            .copied()
            .unwrap_or(0);
        let max = u64::from(pull.max_records.clamp(1, MAX_BATCH_ENTRIES as u32));
        let last = held
            .min(pull.after_seq.saturating_add(max))
            .max(pull.after_seq);
        Batch {
            origin: pull.origin,
            epoch: pull.epoch,
            after_seq: pull.after_seq,
            last_seq: last,
            more: last < held,
            records: vec![],
            tombstones: vec![],
            stubs: (pull.after_seq + 1..=last)
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

    /// The real receiver's rules, minus the records: the full batch
    /// check, stale when it starts past what is held, slots already held
    /// skipped, the watermark moved to the batch's end.
    fn apply(&mut self, pull: &Pull, batch: &Batch) -> ApplyResult {
        if check_batch(pull, batch).is_err() {
            return ApplyResult::Failed;
        }
        let held = self.held.entry((batch.origin, batch.epoch)).or_insert(0);
        if batch.after_seq > *held {
            return ApplyResult::Stale;
        }
        *held = (*held).max(batch.last_seq);
        ApplyResult::Applied
    }
}

/// A serve or apply the driver is busy with.
#[derive(Debug)]
enum Task {
    Serve(Pull),
    Apply(Pull, Batch),
}

/// One side of one session: a machine and its serial driver.
struct End {
    conv: Conversation,
    store: usize,
    inbox: VecDeque<Message>,
    task: Option<Task>,
    timer: Option<Duration>,
    outcome: Option<Result<Finished, ConversationError>>,
    applies: u64,
}

impl End {
    fn new(c: ConversationConfig, store: usize, peer: NodeId, stores: &[FakeStore]) -> End {
        End {
            conv: Conversation::new(c, peer, Duration::ZERO, stores[store].watermarks(), vec![]),
            store,
            inbox: VecDeque::new(),
            task: None,
            timer: None,
            outcome: None,
            applies: 0,
        }
    }

    /// Performs actions in order until the next serve or apply (which the
    /// driver awaits) or until there are none; returns the messages sent.
    fn drain(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while self.task.is_none() {
            let Some(a) = self.conv.poll_action() else {
                break;
            };
            match a {
                Action::Send(m) => out.push(m),
                Action::Serve(p) => self.task = Some(Task::Serve(p)),
                Action::Apply { pull, batch } => self.task = Some(Task::Apply(pull, batch)),
                Action::ArmTimer { at } => self.timer = Some(at),
                Action::NoteNames(_) => {}
                Action::Done(r) => {
                    assert!(self.outcome.is_none(), "one Done");
                    self.outcome = Some(r);
                    self.timer = None;
                }
            }
        }
        out
    }
}

/// Deterministic scheduling choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

struct Sim {
    stores: Vec<FakeStore>,
    ids: Vec<NodeId>,
    /// Sessions: pairs of ends, `.0` sending to `.1` and back.
    sessions: Vec<(End, End)>,
    now: Duration,
    rng: Rng,
    /// Per log, the most any store held at the start.
    truth: BTreeMap<Log, u64>,
}

impl Sim {
    fn new(stores: Vec<FakeStore>, seed: u64) -> Sim {
        let mut truth: BTreeMap<Log, u64> = BTreeMap::new();
        for s in &stores {
            for (&log, &seq) in &s.held {
                let e = truth.entry(log).or_insert(0);
                *e = (*e).max(seq);
            }
        }
        let ids = (0..stores.len()).map(|i| id(0xa0 + i as u8)).collect();
        Sim {
            stores,
            ids,
            sessions: Vec::new(),
            now: Duration::ZERO,
            rng: Rng(seed | 1),
            truth,
        }
    }

    /// Opens a session between stores `a` and `b`.
    fn connect(&mut self, c: ConversationConfig, a: usize, b: usize) {
        let mut x = End::new(c, a, self.ids[b], &self.stores);
        let mut y = End::new(c, b, self.ids[a], &self.stores);
        y.inbox.extend(x.drain());
        x.inbox.extend(y.drain());
        self.sessions.push((x, y));
    }

    /// Runs every open session to its end; returns their outcomes.
    fn run(
        &mut self,
    ) -> Vec<(
        Result<Finished, ConversationError>,
        Result<Finished, ConversationError>,
    )> {
        for _ in 0..1_000_000 {
            if self
                .sessions
                .iter()
                .all(|(x, y)| x.outcome.is_some() && y.outcome.is_some())
            {
                break;
            }
            // Everything that can happen now: (session, side).
            let mut ready = Vec::new();
            for (i, (x, y)) in self.sessions.iter().enumerate() {
                for (side, e) in [(0, x), (1, y)] {
                    if e.outcome.is_none() && (e.task.is_some() || !e.inbox.is_empty()) {
                        ready.push((i, side));
                    }
                }
            }
            self.now += Duration::from_millis(1);
            if ready.is_empty() {
                // Nothing can move: only a timer can (a stall).
                let next = self
                    .sessions
                    .iter_mut()
                    .flat_map(|(x, y)| [x, y])
                    .filter(|e| e.outcome.is_none())
                    .filter_map(|e| e.timer.map(|t| (t, e)))
                    .min_by_key(|(t, _)| *t);
                let Some((t, e)) = next else { break };
                self.now = self.now.max(t);
                e.conv.handle(self.now, Event::Timer);
                e.drain();
                continue;
            }
            let (i, side) = ready[self.rng.below(ready.len())];
            self.step(i, side);
        }
        self.sessions
            .drain(..)
            .map(|(x, y)| (x.outcome.expect("ended"), y.outcome.expect("ended")))
            .collect()
    }

    /// One move of one side: finish its task, or read its next message.
    fn step(&mut self, i: usize, side: usize) {
        let now = self.now;
        let (x, y) = &mut self.sessions[i];
        let (me, peer) = if side == 0 { (x, y) } else { (y, x) };
        let store = &mut self.stores[me.store];
        let event = match me.task.take() {
            Some(Task::Serve(p)) => Event::Served(store.serve(&p)),
            Some(Task::Apply(p, b)) => {
                assert!(b.last_seq <= self.truth.get(&(b.origin, b.epoch)).copied().unwrap_or(0));
                let result = store.apply(&p, &b);
                me.applies += 1;
                Event::Applied {
                    result,
                    local: store.watermarks(),
                }
            }
            None => match me.inbox.pop_front() {
                Some(m) => Event::Received(m),
                None => return,
            },
        };
        me.conv.handle(now, event);
        peer.inbox.extend(me.drain());
        // No store ever holds more of a log than existed.
        for (log, &seq) in &self.stores[me.store].held {
            assert!(
                seq <= self.truth.get(log).copied().unwrap_or(0),
                "{log:?} at {seq}"
            );
        }
    }

    fn converged(&self) -> bool {
        self.stores.iter().all(|s| {
            self.truth
                .iter()
                .all(|(log, &seq)| s.held.get(log).copied().unwrap_or(0) == seq)
        })
    }
}

fn store(logs: &[(u8, u64, u64)]) -> FakeStore {
    FakeStore::new(
        &logs
            .iter()
            .map(|&(o, e, s)| wm(o, e, s))
            .collect::<Vec<_>>(),
    )
}

fn small() -> ConversationConfig {
    ConversationConfig {
        limits: PlanLimits {
            max_pulls: 2,
            max_records: 7,
            max_bytes: 1 << 20,
        },
        ..cfg()
    }
}

#[test]
fn two_machines_exchange_both_ways_and_converge() {
    for seed in 0..50 {
        let a = store(&[(1, 1, 40), (3, 1, 5), (4, 2, 9)]);
        let b = store(&[(2, 1, 23), (3, 1, 12), (4, 1, 3)]);
        let mut sim = Sim::new(vec![a, b], seed);
        sim.connect(small(), 0, 1);
        let outcomes = sim.run();
        let (x, y) = &outcomes[0];
        assert_eq!(
            x,
            &Ok(Finished {
                behind_before: 23 + 7 + 3,
                peer_behind: 40 + 9
            })
        );
        assert_eq!(
            y,
            &Ok(Finished {
                behind_before: 40 + 9,
                peer_behind: 23 + 7 + 3
            })
        );
        assert!(sim.converged(), "seed {seed}: {:?}", sim.stores);
        // A second session moves nothing but the watermark exchange.
        sim.connect(small(), 1, 0);
        let again = sim.run();
        assert_eq!(again[0], (Ok(Finished::default()), Ok(Finished::default())));
    }
}

#[test]
fn crossing_sessions_between_the_same_two_machines_converge() {
    for seed in 0..50 {
        let a = store(&[(1, 1, 60), (3, 1, 5)]);
        let b = store(&[(2, 1, 33), (3, 1, 20)]);
        let mut sim = Sim::new(vec![a, b], seed);
        // Both dial at once: two sessions over the same stores.
        sim.connect(small(), 0, 1);
        sim.connect(small(), 1, 0);
        for (x, y) in sim.run() {
            assert!(x.is_ok() && y.is_ok(), "seed {seed}: {x:?} {y:?}");
        }
        assert!(sim.converged(), "seed {seed}: {:?}", sim.stores);
    }
}

#[test]
fn three_machines_relay_in_rounds() {
    let a = store(&[(1, 1, 15)]);
    let b = store(&[(2, 1, 4)]);
    let c = store(&[(3, 1, 9)]);
    let mut sim = Sim::new(vec![a, b, c], 7);
    // A line: A - B - C. The first round brings A's log to C only through B.
    for round in 0..3 {
        sim.connect(small(), 0, 1);
        sim.connect(small(), 1, 2);
        for (x, y) in sim.run() {
            assert!(x.is_ok() && y.is_ok(), "round {round}: {x:?} {y:?}");
        }
    }
    assert!(sim.converged(), "{:?}", sim.stores);
}

#[test]
fn a_peer_that_stops_answering_times_out_and_the_other_side_is_intact() {
    let a = store(&[]);
    let b = store(&[(2, 1, 30)]);
    let mut sim = Sim::new(vec![a, b], 3);
    sim.connect(small(), 0, 1);
    // B reads A's watermarks, then its process hangs: it never reads or
    // answers again.
    let (x, y) = &mut sim.sessions[0];
    let first = y.inbox.pop_front().expect("watermarks");
    y.conv.handle(Duration::ZERO, Event::Received(first));
    x.inbox.extend(y.drain());
    y.outcome = Some(Err(ConversationError::Closed));
    let outcomes = sim.run();
    assert_eq!(
        outcomes[0].0,
        Err(ConversationError::Timeout {
            after: small().msg_timeout
        })
    );
    // Nothing half-applied: A holds nothing of B's log.
    assert_eq!(sim.stores[0].held.get(&(id(2), 1)).copied().unwrap_or(0), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_stores_and_schedules_converge(
        a in prop::collection::vec((0u8..5, 1u64..3, 0u64..50), 0..6),
        b in prop::collection::vec((0u8..5, 1u64..3, 0u64..50), 0..6),
        max_pulls in 1usize..4,
        max_records in 1u32..9,
        crossing in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let c = ConversationConfig {
            limits: PlanLimits { max_pulls, max_records, max_bytes: 1 << 20 },
            ..cfg()
        };
        let mut sim = Sim::new(vec![store(&a), store(&b)], seed);
        sim.connect(c, 0, 1);
        if crossing {
            sim.connect(c, 1, 0);
        }
        for (x, y) in sim.run() {
            prop_assert!(x.is_ok(), "{:?}", x);
            prop_assert!(y.is_ok(), "{:?}", y);
        }
        prop_assert!(sim.converged(), "{:?}", sim.stores);
    }
}
