//! Arbitrary text as a pairing code: must never panic; whatever parses must
//! re-encode to a code that parses to the same value.
#![no_main]

use cairn_protocol::PairingCode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(code) = PairingCode::parse(&text) {
        assert_eq!(PairingCode::parse(&code.encode()), Ok(code));
    }
});
