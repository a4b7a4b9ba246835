//! The sync conversation as a pure state machine (sans-IO).
//!
//! Owns the rules of one sync session after the `Hello` exchange
//! (docs/wire-format.md), for both roles: send our `Watermarks`, read the
//! peer's, plan pulls from the difference, serve the peer's pulls, hand
//! every batch that answers one of our pulls to the store, ask for the
//! next range of a batch with `more`, re-plan a log whose pull went stale,
//! say `Bye` when nothing is left to pull, and end when both sides said
//! `Bye`. Every conversation is bounded in messages and in time.
//!
//! The machine does no I/O and reads no clock: a driver (the node's
//! `sync::session`) feeds it [`Event`]s, each with the current time, and
//! performs the [`Action`]s it asks for, in order:
//!
//! | event in                         | typical actions out                         |
//! |----------------------------------|---------------------------------------------|
//! | [`Event::Received`] `Watermarks` | [`Action::NoteNames`], `Send(Pull)`… or `Send(Bye)` |
//! | [`Event::Received`] `Pull`       | [`Action::Serve`]                           |
//! | [`Event::Served`]                | `Send(Batch)`                               |
//! | [`Event::Received`] `Batch`      | `Send(Pull)` (when `more`), [`Action::Apply`] |
//! | [`Event::Applied`]               | `Send(Pull)`… or `Send(Bye)`                |
//! | [`Event::Timer`]                 | [`Action::Done`] when a bound passed        |
//! | [`Event::Closed`]                | [`Action::Done`]                            |
//!
//! [`Action::ArmTimer`] follows whenever the next deadline moves, and
//! [`Action::Done`] is always the last action.
//!
//! Time is a [`Duration`] since an origin the driver picks (a virtual
//! clock in tests). The whole conversation must end within
//! `max_duration` of [`Conversation::new`]; while the machine waits for
//! the peer (no serve or apply outstanding) each message must arrive
//! within `msg_timeout`; the messages sent and received are counted
//! against `max_messages`.
//!
//! Invariants (checked by the property tests in
//! `tests/protocol/conversation.rs`):
//! - an [`Action::Apply`] only ever carries a batch that answers a pull
//!   this machine sent and that no earlier batch answered, for the same
//!   log and start, spanning at most the pull's `max_records` seqs;
//! - a pull's `after_seq` is a watermark the driver reported, or the end of
//!   a batch handed to [`Action::Apply`]; the machine never claims to hold
//!   more of a log than that;
//! - every conversation ends with exactly one [`Action::Done`]: when both
//!   sides said `Bye`, at the message bound, at the time bound, when the
//!   peer stalls past `msg_timeout`, or at the first protocol violation;
//!   after it, events are ignored and no action follows.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use crate::batch::{BatchError, next_pull};
use crate::ids::NodeId;
use crate::limits::{MAX_BATCH_ENTRIES, MAX_WATERMARKS};
use crate::message::{Batch, Message, OriginName, Pull, RefuseCode, Watermark};
use crate::plan::{PlanLimits, plan_pulls_where, total_behind};

/// The bounds of one conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversationConfig {
    /// Pull sizes and how many pulls may be in flight.
    pub limits: PlanLimits,
    /// Time allowed for each expected message while nothing local is pending.
    pub msg_timeout: Duration,
    /// Time allowed for the whole conversation.
    pub max_duration: Duration,
    /// Most messages (sent plus received) in one conversation.
    pub max_messages: u64,
}

/// Something that happened, fed to [`Conversation::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer sent this message.
    Received(Message),
    /// The oldest outstanding [`Action::Serve`] produced this batch.
    Served(Batch),
    /// The oldest outstanding [`Action::Apply`] finished.
    Applied {
        /// How it went.
        result: ApplyResult,
        /// This node's watermarks right after it (the next pulls are
        /// planned from them, so logs another session advanced meanwhile
        /// are not pulled twice).
        local: Vec<Watermark>,
    },
    /// The armed timer fired.
    Timer,
    /// The peer finished its stream (no more messages will come).
    Closed,
}

/// How applying a batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyResult {
    /// Stored, watermark advanced.
    Applied,
    /// Not applied: the batch starts past what this node holds (the pull
    /// was planned from a stale watermark). The log is planned again.
    Stale,
    /// Not applied: the batch was bad or the store failed. Ends the
    /// conversation with [`ConversationError::ApplyFailed`]; the driver
    /// keeps the details.
    Failed,
    /// Not applied: the receiver refused this log's entries (an origin or
    /// seal that does not check out). The log is not pulled again in this
    /// conversation; the others go on, and the driver reports the reason.
    Refused,
    /// Not applied: the receiver takes nothing more from this peer in this
    /// conversation (a per-peer limit). No further pull is sent; batches
    /// already asked for are still answered with this, then `Bye`.
    Halt,
}

/// Something the driver must do, taken from [`Conversation::poll_action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this message to the peer.
    Send(Message),
    /// Remember these names for origins (announced by the peer for logs
    /// it holds; the peer's own entry is already filtered out). No event
    /// answers it.
    NoteNames(Vec<OriginName>),
    /// Answer the peer's pull from the store; answer with [`Event::Served`].
    Serve(Pull),
    /// Apply `batch`, which answers `pull`, to the store (checking it
    /// fully); answer with [`Event::Applied`].
    Apply {
        /// The pull it answers.
        pull: Pull,
        /// The batch.
        batch: Batch,
    },
    /// Deliver [`Event::Timer`] at this time (replaces any earlier timer).
    ArmTimer {
        /// When.
        at: Duration,
    },
    /// The conversation is over; nothing follows.
    Done(Result<Finished, ConversationError>),
}

/// What a conversation that ended well learned at the watermark exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finished {
    /// Entries the peer held that this node lacked.
    pub behind_before: u64,
    /// Entries this node held that the peer lacked.
    pub peer_behind: u64,
}

/// Why a conversation ended badly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversationError {
    /// The peer sent a message that is not legal at this point.
    #[error("peer sent {got} where {expected} was expected")]
    Unexpected {
        /// What was legal.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// The peer sent a batch that answers no outstanding pull.
    #[error("peer sent an unasked-for batch of {origin}'s log after seq {after_seq}")]
    UnaskedBatch {
        /// The batch's log.
        origin: NodeId,
        /// Where it starts.
        after_seq: u64,
    },
    /// The batch answers a pull but its shape cannot (too many entries,
    /// a range past the pull's size, or no progress with `more`).
    #[error("peer sent a batch that cannot answer its pull")]
    BadBatch(#[source] BatchError),
    /// The driver reported [`ApplyResult::Failed`].
    #[error("a batch could not be applied")]
    ApplyFailed,
    /// The peer refused and said why.
    #[error("peer refused: {reason} ({code:?})")]
    Refused {
        /// Its code.
        code: RefuseCode,
        /// Its explanation.
        reason: String,
    },
    /// The peer finished its stream before the conversation ended.
    #[error("peer closed the stream")]
    Closed,
    /// No message from the peer within `msg_timeout`.
    #[error("no message from peer within {after:?}")]
    Timeout {
        /// The limit.
        after: Duration,
    },
    /// The message or time bound was reached.
    #[error("conversation exceeded {messages} messages or {after:?}")]
    TooLong {
        /// The message bound.
        messages: u64,
        /// The time bound.
        after: Duration,
    },
}

impl ConversationError {
    /// Whether the peer broke the protocol (as opposed to the network,
    /// time, or this node failing).
    pub fn peer_at_fault(&self) -> bool {
        matches!(
            self,
            ConversationError::Unexpected { .. }
                | ConversationError::UnaskedBatch { .. }
                | ConversationError::BadBatch(_)
        )
    }
}

/// One sync conversation; see the module docs.
#[derive(Debug)]
pub struct Conversation {
    cfg: ConversationConfig,
    peer: NodeId,
    /// This node's watermarks, as last reported by the driver.
    local: Vec<Watermark>,
    /// The peer's, once its `Watermarks` arrived.
    remote: Option<Vec<Watermark>>,
    /// Our pulls not yet answered.
    outstanding: Vec<Pull>,
    /// Batches handed to the driver to apply, oldest first: the pull each
    /// answers and whether it said `more`.
    applying: VecDeque<(Pull, bool)>,
    /// The peer's pulls handed to the driver to serve, oldest first.
    serving: VecDeque<Pull>,
    /// Logs the peer said it holds nothing more of (a batch without `more`).
    exhausted: BTreeSet<(NodeId, u64)>,
    /// Logs whose batches the driver refused: not pulled again.
    refused: BTreeSet<(NodeId, u64)>,
    /// The driver takes nothing more from this peer: no pull is sent.
    halted: bool,
    we_said_bye: bool,
    peer_said_bye: bool,
    /// Messages sent plus received.
    messages: u64,
    /// End of the whole conversation.
    deadline: Duration,
    /// When the message we wait for is late (only while waiting for the peer).
    msg_deadline: Option<Duration>,
    /// The timer last asked for.
    armed: Option<Duration>,
    finished: Finished,
    done: bool,
    actions: VecDeque<Action>,
}

impl Conversation {
    /// Starts a conversation at `now`: queues our `Watermarks` (`local`,
    /// at most [`MAX_WATERMARKS`] of them, with the `names` we know for
    /// their origins) and the first timer. `peer` is the peer's node id.
    pub fn new(
        cfg: ConversationConfig,
        peer: NodeId,
        now: Duration,
        mut local: Vec<Watermark>,
        mut names: Vec<OriginName>,
    ) -> Conversation {
        local.truncate(MAX_WATERMARKS);
        names.truncate(MAX_WATERMARKS);
        let mut c = Conversation {
            cfg,
            peer,
            local: local.clone(),
            remote: None,
            outstanding: Vec::new(),
            applying: VecDeque::new(),
            serving: VecDeque::new(),
            exhausted: BTreeSet::new(),
            refused: BTreeSet::new(),
            halted: false,
            we_said_bye: false,
            peer_said_bye: false,
            messages: 0,
            deadline: now.saturating_add(cfg.max_duration),
            msg_deadline: None,
            armed: None,
            finished: Finished::default(),
            done: false,
            actions: VecDeque::new(),
        };
        c.send(Message::Watermarks {
            entries: local,
            names,
        });
        c.settle(now, false);
        c
    }

    /// Feeds one event that happened at `now`. Ignored once the
    /// conversation is done. A [`Event::Served`] or [`Event::Applied`]
    /// with nothing outstanding is ignored too.
    pub fn handle(&mut self, now: Duration, event: Event) {
        if self.done {
            return;
        }
        let timer = matches!(event, Event::Timer);
        match event {
            Event::Received(msg) => {
                if self.messages >= self.cfg.max_messages {
                    self.too_long();
                    return;
                }
                self.messages = self.messages.saturating_add(1);
                self.on_message(msg);
            }
            Event::Served(batch) => {
                if self.serving.pop_front().is_some() {
                    self.send(Message::Batch(batch));
                }
            }
            Event::Applied { result, local } => self.on_applied(result, local),
            Event::Timer => self.on_timer(now),
            Event::Closed => self.fail(ConversationError::Closed),
        }
        self.settle(now, timer);
    }

    /// Sends no pull from now on (the driver takes nothing more from this
    /// peer, e.g. a daily limit already reached); the peer's pulls are
    /// still served and the conversation ends with `Bye` as usual.
    pub fn stop_pulling(&mut self, now: Duration) {
        if self.done || self.halted {
            return;
        }
        self.halted = true;
        self.refill();
        self.settle(now, false);
    }

    /// The next action to perform, in order; `None` until the next event.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether [`Action::Done`] has been queued.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The peer's watermarks, once they arrived.
    pub fn remote(&self) -> Option<&[Watermark]> {
        self.remote.as_deref()
    }

    /// Messages sent plus received so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    fn send(&mut self, msg: Message) {
        self.messages = self.messages.saturating_add(1);
        self.actions.push_back(Action::Send(msg));
    }

    fn fail(&mut self, e: ConversationError) {
        if self.done {
            return;
        }
        // Nothing queued by the failing event is performed: no batch is
        // applied and no message sent after the decision to stop.
        self.actions.clear();
        self.actions.push_back(Action::Done(Err(e)));
        self.done = true;
    }

    fn too_long(&mut self) {
        self.fail(ConversationError::TooLong {
            messages: self.cfg.max_messages,
            after: self.cfg.max_duration,
        });
    }

    fn on_message(&mut self, msg: Message) {
        if self.remote.is_none() {
            match msg {
                Message::Watermarks { entries, names } => self.on_watermarks(entries, names),
                Message::Refuse { code, reason } => {
                    self.fail(ConversationError::Refused { code, reason });
                }
                other => self.fail(ConversationError::Unexpected {
                    expected: "watermarks",
                    got: other.name(),
                }),
            }
            return;
        }
        match msg {
            Message::Pull(pull) if !self.peer_said_bye => {
                self.serving.push_back(pull);
                self.actions.push_back(Action::Serve(pull));
            }
            Message::Batch(batch) => self.on_batch(batch),
            Message::Bye { .. } if !self.peer_said_bye => self.peer_said_bye = true,
            Message::Ping { nonce } => self.send(Message::Pong { nonce }),
            Message::Pong { .. } => {}
            Message::Refuse { code, reason } => {
                self.fail(ConversationError::Refused { code, reason });
            }
            other => {
                let expected = if self.peer_said_bye {
                    "batch or nothing after bye"
                } else {
                    "pull, batch or bye"
                };
                self.fail(ConversationError::Unexpected {
                    expected,
                    got: other.name(),
                });
            }
        }
    }

    fn on_watermarks(&mut self, entries: Vec<Watermark>, names: Vec<OriginName>) {
        // Names of machines reached only through this peer; the peer's own
        // name came with its Hello and is not overridden.
        let names: Vec<OriginName> = names
            .into_iter()
            .filter(|n| n.origin != self.peer && !n.name.trim().is_empty())
            .collect();
        if !names.is_empty() {
            self.actions.push_back(Action::NoteNames(names));
        }
        self.finished = Finished {
            behind_before: total_behind(&self.local, &entries),
            peer_behind: total_behind(&entries, &self.local),
        };
        self.remote = Some(entries);
        self.refill();
    }

    fn on_batch(&mut self, batch: Batch) {
        let Some(i) = self.outstanding.iter().position(|p| {
            p.origin == batch.origin && p.epoch == batch.epoch && p.after_seq == batch.after_seq
        }) else {
            self.fail(ConversationError::UnaskedBatch {
                origin: batch.origin,
                after_seq: batch.after_seq,
            });
            return;
        };
        let pull = self.outstanding.remove(i);
        if let Err(e) = check_shape(&pull, &batch) {
            self.fail(ConversationError::BadBatch(e));
            return;
        }
        // Ask for the next range before this one is applied, so the peer
        // reads it from its store while we write ours (not for a log the
        // driver refused, nor once it halted).
        let wanted = !self.halted && !self.refused.contains(&(pull.origin, pull.epoch));
        if let Some(next) = next_pull(&pull, &batch).filter(|_| wanted) {
            self.send(Message::Pull(next));
            self.outstanding.push(next);
        }
        self.applying.push_back((pull, batch.more));
        self.actions.push_back(Action::Apply { pull, batch });
    }

    fn on_applied(&mut self, result: ApplyResult, local: Vec<Watermark>) {
        let Some((pull, more)) = self.applying.pop_front() else {
            return;
        };
        match result {
            ApplyResult::Applied => {
                if !more {
                    self.exhausted.insert((pull.origin, pull.epoch));
                }
            }
            // Re-planned below from the fresh watermark.
            ApplyResult::Stale => {}
            ApplyResult::Failed => {
                self.fail(ConversationError::ApplyFailed);
                return;
            }
            ApplyResult::Refused => {
                self.refused.insert((pull.origin, pull.epoch));
            }
            ApplyResult::Halt => self.halted = true,
        }
        self.local = local;
        self.refill();
    }

    fn on_timer(&mut self, now: Duration) {
        if now >= self.deadline {
            self.too_long();
        } else if self.msg_deadline.is_some_and(|d| now >= d) {
            self.fail(ConversationError::Timeout {
                after: self.cfg.msg_timeout,
            });
        }
        // Early: the timer is armed again in `settle`.
        self.armed = None;
    }

    /// Plans and sends pulls up to the in-flight limit; says `Bye` when
    /// nothing is left to pull and nothing is in flight or being applied.
    fn refill(&mut self) {
        if self.we_said_bye || !self.applying.is_empty() {
            return;
        }
        let Some(remote) = &self.remote else {
            return;
        };
        let room = if self.halted {
            0
        } else {
            self.cfg
                .limits
                .max_pulls
                .max(1)
                .saturating_sub(self.outstanding.len())
        };
        if room > 0 {
            let limits = PlanLimits {
                max_pulls: room,
                ..self.cfg.limits
            };
            let (exhausted, refused, outstanding) =
                (&self.exhausted, &self.refused, &self.outstanding);
            let pulls = plan_pulls_where(&self.local, remote, &limits, |l| {
                !exhausted.contains(&(l.origin, l.epoch))
                    && !refused.contains(&(l.origin, l.epoch))
                    && !outstanding
                        .iter()
                        .any(|p| p.origin == l.origin && p.epoch == l.epoch)
            });
            for p in pulls {
                self.send(Message::Pull(p));
                self.outstanding.push(p);
            }
        }
        if self.outstanding.is_empty() {
            self.send(Message::Bye {
                reason: "done".to_owned(),
            });
            self.we_said_bye = true;
        }
    }

    /// After every event: ends the conversation when both sides are done
    /// or the message bound is reached while waiting for the peer, else
    /// moves the message deadline and arms the timer.
    fn settle(&mut self, now: Duration, after_timer: bool) {
        if self.done {
            return;
        }
        let idle = self.serving.is_empty() && self.applying.is_empty();
        if idle && self.we_said_bye && self.peer_said_bye {
            self.actions.push_back(Action::Done(Ok(self.finished)));
            self.done = true;
            return;
        }
        if idle && self.messages >= self.cfg.max_messages {
            self.too_long();
            return;
        }
        if !idle {
            self.msg_deadline = None;
        } else if !after_timer || self.msg_deadline.is_none() {
            self.msg_deadline = Some(now.saturating_add(self.cfg.msg_timeout));
        }
        let at = match self.msg_deadline {
            Some(m) => m.min(self.deadline),
            None => self.deadline,
        };
        if self.armed != Some(at) {
            self.armed = Some(at);
            self.actions.push_back(Action::ArmTimer { at });
        }
    }
}

/// The cheap part of [`crate::check_batch`], run before a batch is handed
/// on: its entries fit the pull, its range is no longer than the pull
/// allowed and makes progress when it says `more`. (The store runs the
/// full check, hashes included, when it applies.)
fn check_shape(pull: &Pull, batch: &Batch) -> Result<(), BatchError> {
    let max = (pull.max_records as usize).min(MAX_BATCH_ENTRIES);
    let count = batch
        .records
        .len()
        .saturating_add(batch.tombstones.len())
        .saturating_add(batch.stubs.len());
    if count > max {
        return Err(BatchError::TooMany { count, max });
    }
    let Some(span) = batch.last_seq.checked_sub(batch.after_seq) else {
        return Err(BatchError::Gap {
            expected: batch.after_seq.saturating_add(1),
            found: None,
        });
    };
    if span > max as u64 {
        return Err(BatchError::TooMany {
            count: usize::try_from(span).unwrap_or(usize::MAX),
            max,
        });
    }
    if span == 0 && batch.more {
        return Err(BatchError::NoProgress);
    }
    Ok(())
}
