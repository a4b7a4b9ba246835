//! Arbitrary bytes as a frame body: must never panic; whatever decodes must
//! re-encode and decode to the same message.
#![no_main]

use cairn_protocol::{decode_message, encode_message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = decode_message(data) {
        let again = encode_message(&msg).expect("a decoded message re-encodes");
        assert_eq!(decode_message(&again).expect("re-encoded decodes"), msg);
    }
});
