#![no_main]
//! JSONL parsing of arbitrary text: no panic, consistent report.
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for sel in [0u8, 1] {
        let r = common::parser(sel).parse(&text, &Default::default());
        common::check_report(&text, &r);
    }
});
