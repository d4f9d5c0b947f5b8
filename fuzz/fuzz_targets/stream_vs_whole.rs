#![no_main]
//! Chunked (streaming) parsing gives exactly the whole-text report, and each snapshot is the
//! parse of the text so far. The first byte picks the parser, the next few the chunk sizes.
mod common;
use kerf_core::StreamParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let parser = common::parser(data[0]);
    let sizes = &data[1..4];
    let text = String::from_utf8_lossy(&data[4..]).into_owned();
    let vars = Default::default();
    let whole = parser.parse(&text, &vars);
    let mut s = StreamParser::new(parser, Default::default());
    let mut at = 0;
    let mut i = 0;
    while at < text.len() {
        let mut next = (at + 1 + sizes[i % 3] as usize % 17).min(text.len());
        while !text.is_char_boundary(next) {
            next += 1;
        }
        s.feed(&text[at..next]);
        assert_eq!(s.snapshot(), parser.parse(s.text(), &vars));
        at = next;
        i += 1;
    }
    assert_eq!(s.finish(), whole);
});
