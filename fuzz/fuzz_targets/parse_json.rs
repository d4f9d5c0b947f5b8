#![no_main]
//! JSON parsing (strict and salvage) of arbitrary text: no panic, consistent report; salvage never
//! recovers an element that strict parsing of a complete valid value would not also contain.
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for sel in 2u8..=5 {
        let r = common::parser(sel).parse(&text, &Default::default());
        common::check_report(&text, &r);
    }
});
