//! Measures what decoding hostile input allocates, with a counting global
//! allocator (per thread, so parallel tests do not disturb each other).
//!
//! The promise: decoding never allocates past the cap. A frame
//! header is checked before anything is reserved, a CBOR length prefix never
//! pre-allocates, and every sequence has an element cap.
#![expect(
    unsafe_code,
    reason = "a GlobalAlloc wrapper is the only way to observe allocations"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use cairn_protocol::{
    Batch, FrameDecoder, FrameError, MAX_BATCH_ENTRIES, MAX_FILES_PER_RECORD, MAX_FRAME, Message,
    NodeId, WireRecord, decode_message, encode_message,
};

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: defers every operation to `System` unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak bytes allocated above the starting level while `f` runs.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get) - start;
    (out, peak.max(0) as usize)
}

#[test]
fn a_4_gib_header_allocates_nothing() {
    let mut d = FrameDecoder::new();
    let (r, peak) = peak_during(|| d.push(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]));
    assert!(matches!(r, Err(FrameError::TooLarge { .. })));
    assert_eq!(peak, 0, "refused before allocating");
}

#[test]
fn cbor_length_prefixes_do_not_preallocate() {
    // {"bye": {"reason": <text claiming 4 GiB - 1>}} followed by 8 bytes.
    let mut huge_text = vec![0xa1, 0x63, b'b', b'y', b'e', 0xa1, 0x66];
    huge_text.extend_from_slice(b"reason");
    huge_text.extend_from_slice(&[0x7a, 0xff, 0xff, 0xff, 0xff]);
    huge_text.extend_from_slice(b"12345678");
    // {"watermarks": {"entries": <array claiming 2^32 - 1 entries>}}
    let mut huge_array = vec![0xa1, 0x6a];
    huge_array.extend_from_slice(b"watermarks");
    huge_array.extend_from_slice(&[0xa1, 0x67]);
    huge_array.extend_from_slice(b"entries");
    huge_array.extend_from_slice(&[0x9a, 0xff, 0xff, 0xff, 0xff]);
    for body in [huge_text, huge_array] {
        let (r, peak) = peak_during(|| decode_message(&body));
        assert!(r.is_err());
        assert!(
            peak < 64 * 1024,
            "peak {peak} bytes for a {}-byte body",
            body.len()
        );
    }
}

#[test]
fn worst_case_batch_stays_within_the_documented_bound() {
    // The most memory per wire byte: records full of empty file names.
    let record = WireRecord {
        seq: 1,
        hash: [0; 32],
        agent: String::new(),
        session_id: String::new(),
        parent_session: None,
        project: None,
        role: String::new(),
        time_ms: None,
        text: String::new(),
        files: vec![String::new(); MAX_FILES_PER_RECORD],
    };
    let msg = Message::Batch(Batch {
        origin: NodeId([0; 20]),
        epoch: 0,
        after_seq: 0,
        last_seq: 0,
        more: false,
        records: vec![record; MAX_BATCH_ENTRIES],
        tombstones: vec![],
        stubs: vec![],
        origin_key: vec![],
        seals: vec![],
    });
    let body = encode_message(&msg).unwrap();
    assert!(body.len() <= MAX_FRAME);
    let (r, peak) = peak_during(|| decode_message(&body));
    assert_eq!(r.unwrap(), msg);
    // docs/wire-format.md: decoding one frame takes at most
    // 2 x MAX_FRAME + 8 MiB, whatever the bytes.
    let bound = 2 * MAX_FRAME + 8 * 1024 * 1024;
    assert!(peak <= bound, "peak {peak} > {bound}");
}
