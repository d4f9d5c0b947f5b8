#![no_main]
//! The sweep's value at every byte cut equals a re-parse of the prefix.
mod common;
use kerf_core::sweep::byte_curve;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() || data.len() > 600 {
        return;
    }
    let sel = data[0];
    let parser = common::parser(sel);
    let text = String::from_utf8_lossy(&data[1..]).into_owned();
    let vars = Default::default();
    let curve = byte_curve(parser, &text, &vars, &kerf_core::CancelToken::new()).expect("sweepable");
    for c in 0..=text.len() {
        let mut b = c;
        while !text.is_char_boundary(b) {
            b -= 1;
        }
        assert_eq!(curve.at(c), parser.parse(&text[..b], &vars).objects.len(), "cut {c}");
    }
});
