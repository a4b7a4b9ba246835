//! Arbitrary bytes as a peer's messages (frames decoded from the input)
//! interleaved with arbitrary local outcomes and clock moves, through the
//! conversation state machine: must never panic, must say `Done` at most
//! once and nothing after it, and must be done once its time is up.
#![no_main]

use std::time::Duration;

use cairn_protocol::{
    Action, ApplyResult, Conversation, ConversationConfig, Event, FrameDecoder, NodeId, PlanLimits,
    Watermark,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let cfg = ConversationConfig {
        limits: PlanLimits {
            max_pulls: usize::from(control % 4),
            max_records: u32::from(control % 16) + 1,
            max_bytes: 1 << 20,
        },
        msg_timeout: Duration::from_secs(30),
        max_duration: Duration::from_secs(600),
        max_messages: u64::from(control),
    };
    let local = vec![Watermark {
        origin: NodeId([control; 20]),
        epoch: 1,
        seq: u64::from(control),
    }];
    let mut conv = Conversation::new(cfg, NodeId([0xee; 20]), Duration::ZERO, local, vec![]);
    let mut now = Duration::ZERO;
    let mut dones = 0;
    let mut drain = |conv: &mut Conversation| {
        while let Some(a) = conv.poll_action() {
            assert_eq!(dones, 0, "an action after Done");
            if matches!(a, Action::Done(_)) {
                dones += 1;
            }
        }
    };
    drain(&mut conv);
    let mut decoder = FrameDecoder::new();
    if decoder.push(rest).is_err() {
        return;
    }
    let mut step = 0u64;
    while let Ok(Some(msg)) = decoder.pop() {
        step += 1;
        conv.handle(now, Event::Received(msg));
        drain(&mut conv);
        // Local outcomes and time, chosen by the step number and the control byte.
        let local = vec![Watermark {
            origin: NodeId([control; 20]),
            epoch: 1,
            seq: step,
        }];
        let event = match (u64::from(control) + step) % 5 {
            0 => Event::Applied {
                result: ApplyResult::Applied,
                local,
            },
            1 => Event::Applied {
                result: ApplyResult::Stale,
                local,
            },
            2 => Event::Timer,
            _ => continue,
        };
        now += Duration::from_secs(step % 40);
        conv.handle(now, event);
        drain(&mut conv);
    }
    conv.handle(now.max(cfg.max_duration), Event::Timer);
    drain(&mut conv);
    assert!(conv.is_done());
});
