#![no_main]
//! Delimited parsing (current and legacy LightRAG forms) of arbitrary text.
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for sel in [6u8, 7] {
        let r = common::parser(sel).parse(&text, &Default::default());
        common::check_report(&text, &r);
    }
});
