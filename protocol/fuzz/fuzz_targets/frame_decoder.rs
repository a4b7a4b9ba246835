//! Arbitrary bytes, split at an arbitrary point, through the frame decoder:
//! must never panic and never buffer more than it was given.
#![no_main]

use cairn_protocol::FrameDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut d = FrameDecoder::new();
    for chunk in [&data[..split], &data[split..]] {
        if d.push(chunk).is_err() {
            return;
        }
        assert!(d.buffered() <= data.len());
        while let Ok(Some(_)) = d.pop() {}
    }
    let _ = d.finish();
});
