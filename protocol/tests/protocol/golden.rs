//! Golden byte vectors: one frame per message under `tests/golden/*.hex`,
//! compared byte for byte. A changed vector is a deliberate wire-format
//! change. `CAIRN_BLESS=1 cargo test -p cairn-protocol --test protocol golden`
//! rewrites them and the fuzz seed corpus.

use std::path::{Path, PathBuf};

use cairn_protocol::{decode_message, encode_frame};

use crate::samples::{hex, messages, pairing_code, unhex};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn blessing() -> bool {
    std::env::var_os("CAIRN_BLESS").is_some_and(|v| v == "1")
}

#[test]
fn every_message_matches_its_golden_vector() {
    let mut failures = Vec::new();
    for (name, msg) in messages() {
        let frame = encode_frame(&msg).expect("encode sample");
        let path = golden_dir().join(format!("{name}.hex"));
        if blessing() {
            std::fs::write(&path, hex(&frame)).expect("write golden");
            for (target, bytes) in [
                ("frame_decoder", &frame[..]),
                ("message_decoder", &frame[4..]),
            ] {
                std::fs::create_dir_all(corpus_dir(target)).expect("mkdir corpus");
                std::fs::write(corpus_dir(target).join(name), bytes).expect("write seed");
            }
            continue;
        }
        let want =
            unhex(&std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("read {}: {e} (run with CAIRN_BLESS=1)", path.display())
            }));
        if frame != want {
            failures.push(name);
        }
        // Old bytes still decode to the same value (reader compatibility).
        let decoded = decode_message(&want[4..]).expect("decode golden");
        assert_eq!(decoded, msg, "{name}: golden bytes decode to another value");
    }
    assert!(
        failures.is_empty(),
        "encoding changed for {failures:?}; if deliberate, rerun with CAIRN_BLESS=1 and review the diff"
    );
}

#[test]
fn no_stale_golden_files() {
    let names: Vec<String> = messages()
        .iter()
        .map(|(n, _)| format!("{n}.hex"))
        .chain(["pairing_code.txt".to_owned()])
        .collect();
    for entry in std::fs::read_dir(golden_dir()).expect("read golden dir") {
        let file = entry.expect("dir entry").file_name();
        let file = file.to_string_lossy();
        assert!(names.iter().any(|n| *n == file), "stale golden file {file}");
    }
}

#[test]
fn pairing_code_matches_its_golden_text() {
    let text = pairing_code().encode();
    let path = golden_dir().join("pairing_code.txt");
    if blessing() {
        std::fs::write(&path, format!("{text}\n")).expect("write golden");
        std::fs::create_dir_all(corpus_dir("pairing_code")).expect("mkdir corpus");
        std::fs::write(corpus_dir("pairing_code").join("valid"), &text).expect("write seed");
        return;
    }
    let want = std::fs::read_to_string(&path).expect("read pairing golden");
    assert_eq!(text, want.trim_end());
}
