//! Feeds every committed fuzz corpus and crash file through the decoders on
//! stable Rust, so a crash found by a fuzzing run stays fixed without nightly.
//!
//! Files live in `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/`; the
//! target name picks the decoder. The property is only "does not panic"
//! (plus the frame decoder never buffering more than it was given): these
//! inputs are arbitrary bytes, so no particular result is asserted.

use std::path::Path;

use cairn_protocol::{FrameDecoder, PairingCode, decode_message};

fn frame_decoder(data: &[u8]) {
    let mut d = FrameDecoder::new();
    // Push in uneven chunks to exercise header splits.
    for chunk in data.chunks(7) {
        if d.push(chunk).is_err() {
            return;
        }
        assert!(d.buffered() <= data.len());
        while let Ok(Some(_)) = d.pop() {}
    }
    let _ = d.finish();
}

fn message_decoder(data: &[u8]) {
    let _ = decode_message(data);
}

fn pairing_code(data: &[u8]) {
    let _ = PairingCode::parse(&String::from_utf8_lossy(data));
}

#[test]
fn committed_corpus_and_crashes_do_not_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut fed = 0;
    for kind in ["corpus", "artifacts"] {
        let Ok(targets) = std::fs::read_dir(root.join(kind)) else {
            continue;
        };
        for target in targets {
            let target = target.expect("read corpus dir entry").path();
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let run: fn(&[u8]) = match name.as_str() {
                "frame_decoder" => frame_decoder,
                "message_decoder" => message_decoder,
                "pairing_code" => pairing_code,
                other => panic!("corpus for unknown fuzz target {other}"),
            };
            for file in std::fs::read_dir(&target).expect("read corpus target") {
                let path = file.expect("read corpus file entry").path();
                let data = std::fs::read(&path).expect("read corpus file");
                run(&data);
                fed += 1;
            }
        }
    }
    assert!(fed >= 3, "expected committed seed files, fed {fed}");
}
