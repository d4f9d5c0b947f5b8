//! Incremental parsing: any chunking gives exactly the whole-text report, and a snapshot after
//! any chunk is exactly the parse of the text so far.

use kerf_core::prompt::DelimiterPreset;
use kerf_core::{DelimitedFormat, ParseReport, Parser, ResponseType, StreamParser};
use proptest::prelude::*;
use serde_json::Map;

use crate::support::*;
use crate::sweep::{delimited_piece, json_reply, jsonl_piece, reply};

/// Split `text` at the given fractions (on character boundaries).
fn chunks(text: &str, cuts: &[u16]) -> Vec<String> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| crate::sweep::floor(text, *c as usize * text.len() / u16::MAX as usize))
        .collect();
    at.push(0);
    at.push(text.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2)
        .map(|w| text[w[0]..w[1]].to_string())
        .collect()
}

fn same(a: &ParseReport, b: &ParseReport) -> Result<(), TestCaseError> {
    prop_assert_eq!(&a.objects, &b.objects);
    prop_assert_eq!(&a.dropped, &b.dropped);
    prop_assert_eq!(a.truncated, b.truncated);
    prop_assert_eq!(&a.ends, &b.ends);
    Ok(())
}

fn check(parser: &Parser, text: &str, cuts: &[u16]) -> Result<(), TestCaseError> {
    let vars = Map::new();
    let whole = parser.parse(text, &vars);
    let mut s = StreamParser::new(parser, vars.clone());
    for chunk in chunks(text, cuts) {
        s.feed(&chunk);
        // After every chunk: the snapshot is the parse of the text so far, and what was
        // committed is a prefix of it.
        let so_far = parser.parse(s.text(), &vars);
        same(&s.snapshot(), &so_far)?;
        prop_assert!(so_far.objects.starts_with(&s.committed().objects));
    }
    same(&s.finish(), &whole)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn jsonl_any_chunking(text in reply(jsonl_piece().boxed(), 12), cuts in prop::collection::vec(any::<u16>(), 0..12)) {
        check(&parser(ResponseType::Jsonl, Some(definition_schema())), &text, &cuts)?;
    }

    #[test]
    fn jsonl_byte_by_byte(text in reply(jsonl_piece().boxed(), 6)) {
        let cuts: Vec<u16> = (0..text.len()).map(|i| ((i * u16::MAX as usize) / text.len().max(1)) as u16).collect();
        check(&Parser::new(ResponseType::Jsonl), &text, &cuts)?;
    }

    #[test]
    fn delimited_any_chunking(text in reply(delimited_piece().boxed(), 10), legacy in any::<bool>(), cuts in prop::collection::vec(any::<u16>(), 0..12)) {
        let preset = if legacy { DelimiterPreset::LightragLegacy } else { DelimiterPreset::Lightrag };
        let text = if legacy { text.replace("<|#|>", "<|>").replace('\n', "##\n") } else { text };
        check(&Parser::new(ResponseType::Delimited).with_delimiters(DelimitedFormat::preset(preset)), &text, &cuts)?;
    }

    #[test]
    fn json_any_chunking(text in json_reply(), salvage in any::<bool>(), cuts in prop::collection::vec(any::<u16>(), 0..8)) {
        let schema = serde_json::json!({"type": "array", "items": definition_schema()});
        check(&parser(ResponseType::Json, Some(schema)).with_salvage(salvage), &text, &cuts)?;
    }
}

#[test]
fn objects_appear_as_lines_complete() {
    let p = parser(ResponseType::Jsonl, Some(definition_schema()));
    let mut s = StreamParser::new(&p, Map::new());
    s.feed("{\"entity\": \"a\", \"defini");
    assert!(s.snapshot().objects.is_empty());
    assert!(
        s.snapshot().truncated,
        "if the reply ended here it would be cut off"
    );
    s.feed("tion\": \"A\"}\n{\"entity\"");
    assert_eq!(s.committed().objects, vec![def("a", "A")]);
    s.feed(": \"b\", \"definition\": \"B\"}");
    assert_eq!(s.snapshot().objects.len(), 2);
    let r = s.finish();
    assert_eq!(r.objects, vec![def("a", "A"), def("b", "B")]);
    assert!(!r.truncated);
}

// ---------------------------------------------------------------------------------------------
// Objects and records still open across many feeds (issue 36, item 11): the scanners follow
// them as they arrive instead of re-reading them from their start, and must still give exactly
// the whole-text report.

/// Feed `text` in pieces of `size` bytes (widened to character boundaries); after every `every`th
/// piece, check the snapshot against the parse of the text so far and the committed objects and
/// drops against it; at the end, the report of the whole text.
fn check_pieces(parser: &Parser, text: &str, size: usize, every: usize) {
    let vars = Map::new();
    let mut s = StreamParser::new(parser, vars.clone());
    let (mut at, mut n) = (0, 0);
    while at < text.len() {
        let mut next = (at + size).min(text.len());
        while !text.is_char_boundary(next) {
            next += 1;
        }
        s.feed(&text[at..next]);
        at = next;
        n += 1;
        if n % every == 0 || at == text.len() {
            let so_far = parser.parse(s.text(), &vars);
            assert_eq!(
                s.snapshot(),
                so_far,
                "snapshot after {at} bytes of {text:?}"
            );
            assert!(so_far.objects.starts_with(&s.committed().objects));
            assert!(so_far.dropped.starts_with(&s.committed().dropped));
        }
    }
    assert_eq!(
        s.finish(),
        parser.parse(text, &vars),
        "{text:?} in {size}-byte pieces"
    );
}

/// One JSONL object of about `bytes` bytes whose strings hold braces, brackets, escaped quotes
/// and backslashes, spread over several lines.
fn long_object(bytes: usize) -> String {
    let mut o = String::from("{\"entity\": \"long\", \"definition\": \"d\", \"notes\": [\n");
    let mut i = 0;
    while o.len() < bytes {
        o.push_str(&format!(
            "  {{\"n\": {i}, \"s\": \"}} ] {{ [ \\\" \\\\\", \"t\": \"\\\\\\\"}}\\\\\"}},\n"
        ));
        i += 1;
    }
    o.push_str("  {}\n]}");
    o
}

#[test]
fn jsonl_long_object_in_4_byte_pieces_is_the_whole_parse() {
    let object = long_object(20_000);
    let text = format!(
        "{{\"entity\": \"a\", \"definition\": \"A\"}}\n{object}\n{{\"entity\": \"b\", \"definition\": \"B\"}}\n"
    );
    let p = parser(ResponseType::Jsonl, Some(definition_schema()));
    check_pieces(&p, &text, 4, 97);
    let r = p.parse(&text, &Map::new());
    assert_eq!(r.objects.len(), 3, "{:?}", r.dropped);
    // Cut inside the long object: its text so far is dropped as cut off, as when parsed whole.
    let cut = &text[..text.len() / 2];
    check_pieces(&p, cut, 4, 97);
    assert!(p.parse(cut, &Map::new()).truncated);
}

#[test]
fn jsonl_broken_object_then_more_lines_in_small_pieces() {
    // A syntax error the bracket lexer cannot see: the object never closes, and every line
    // after it holds an object of its own.
    let mut text = String::from("{\"entity\": \"a\", \"definition\": oops\n");
    for i in 0..200 {
        text.push_str(&format!(
            "{{\"entity\": \"e{i}\", \"definition\": \"{{ d{i} }}\"}}\n"
        ));
    }
    let p = parser(ResponseType::Jsonl, Some(definition_schema()));
    for size in [1, 3, 4, 7] {
        check_pieces(&p, &text, size, 13);
    }
    let whole = p.parse(&text, &Map::new());
    assert_eq!(drops(&whole), vec![(1, "invalid_json")]);
    assert_eq!(whole.objects.len(), 200);
    // While the reply streams, the drop and the objects after it are committed (not only at
    // the end): the broken object is read again as its text keeps growing.
    let mut s = StreamParser::new(&p, Map::new());
    let last_line = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    for chunk in text.as_bytes()[..last_line].chunks(4) {
        s.feed(std::str::from_utf8(chunk).unwrap());
    }
    assert_eq!(drops(s.committed()), vec![(1, "invalid_json")]);
    assert!(
        s.committed().objects.len() >= 100,
        "{}",
        s.committed().objects.len()
    );
}

#[test]
fn jsonl_strings_with_brackets_and_escapes_split_at_every_position() {
    let text = concat!(
        "{\"entity\": \"}{\", \"definition\": \"a \\\" } \\\\\"}\n",
        "{\"entity\": \"[\\\\\", \"definition\": \"\\\"{\\\"\", \"x\": {\"y\": [\"]\", \"}\"]}}",
        " {\"entity\": \"é}\", \"definition\": \"\\u007d\"}\n",
        "{\"entity\": \"cut\", \"definition\": \"\\\"}\n",
        "{\"entity\": \"z\", \"definition\": \"Z\"}"
    );
    let p = parser(ResponseType::Jsonl, Some(definition_schema()));
    let vars = Map::new();
    let whole = p.parse(text, &vars);
    assert_eq!(whole.objects.len(), 4, "{:?}", whole.dropped);
    assert_eq!(drops(&whole), vec![(3, "invalid_json")]);
    for a in (0..=text.len()).filter(|&a| text.is_char_boundary(a)) {
        // Two pieces split at `a`, and three with the second one byte (or character) long.
        let mut b = (a + 1).min(text.len());
        while !text.is_char_boundary(b) {
            b += 1;
        }
        for cuts in [vec![a], vec![a, b]] {
            let mut s = StreamParser::new(&p, vars.clone());
            let mut from = 0;
            for &c in cuts.iter().chain([text.len()].iter()) {
                s.feed(&text[from..c]);
                assert_eq!(s.snapshot(), p.parse(s.text(), &vars), "cuts {cuts:?}");
                from = c;
            }
            assert_eq!(s.finish(), whole, "cuts {cuts:?}");
        }
    }
    check_pieces(&p, text, 1, 1);
}

#[test]
fn delimited_long_record_in_small_pieces_is_the_whole_parse() {
    let long = "a long description with <|#|> no newline ".repeat(400);
    for (preset, text) in [
        (
            DelimiterPreset::Lightrag,
            format!(
                "entity<|#|>A<|#|>person<|#|>{long}\nentity<|#|>B<|#|>person<|#|>b\n<|COMPLETE|>"
            ),
        ),
        (
            DelimiterPreset::LightragLegacy,
            format!(
                "(\"entity\"<|>A<|>person<|>{long})##(\"entity\"<|>B<|>person<|>b)##<|COMPLETE|>"
            ),
        ),
    ] {
        let p =
            Parser::new(ResponseType::Delimited).with_delimiters(DelimitedFormat::preset(preset));
        for size in [1, 4, 5] {
            check_pieces(&p, &text, size, 101);
        }
    }
}

#[test]
fn delimited_delimiters_split_at_every_position() {
    let text = "(\"entity\"<|>A<|>person<|>a#)##(\"entity\"<|>B<|>person<|>b)#\n##(\"entity\"<|>C<|>person<|>c)<|COMPLETE|>(\"entity\"<|>D<|>person<|>d)##";
    let p = Parser::new(ResponseType::Delimited)
        .with_delimiters(DelimitedFormat::preset(DelimiterPreset::LightragLegacy));
    let vars = Map::new();
    let whole = p.parse(text, &vars);
    assert_eq!(whole.objects.len(), 4, "{:?}", whole.dropped);
    for a in 0..=text.len() {
        for b in a..=(a + 3).min(text.len()) {
            let mut s = StreamParser::new(&p, vars.clone());
            s.feed(&text[..a]);
            s.feed(&text[a..b]);
            assert_eq!(s.snapshot(), p.parse(&text[..b], &vars), "cuts {a}, {b}");
            s.feed(&text[b..]);
            assert_eq!(s.finish(), whole, "cuts {a}, {b}");
        }
    }
}

/// Pieces that keep an object open across many feeds: strings holding brackets and escaped
/// quotes, nested values, objects pretty-printed over lines, broken objects followed by more.
fn open_piece() -> impl Strategy<Value = String> {
    let n = 0..100u32;
    prop_oneof![
        3 => n.clone().prop_map(|i| format!("{{\"entity\": \"e{i} }}\", \"definition\": \"\\\"{{{i}\\\\\"}}")),
        1 => n.clone().prop_map(|i| format!("{{\"entity\": \"n{i}\", \"definition\": \"d\", \"x\": {{\"y\": [\"]\", {{}}, [[{i}]]]}}}}")),
        1 => n.clone().prop_map(|i| format!("{{\n  \"entity\": \"p{i}\",\n  \"definition\": \"{}\"\n}}", "[{".repeat(i as usize % 7))),
        1 => Just("{\"entity\": \"a\", \"definition\": oops".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"unterminated".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"A\"}]}".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"bad \\q escape\"}".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"A\" \"b\"}".to_string()),
        1 => Just("{{\"entity\": \"a\"}".to_string()),
        1 => Just("prose with a { brace".to_string()),
        1 => prop_oneof![Just("```jsonl"), Just("```"), Just("["), Just("],"), Just("")].prop_map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn jsonl_open_objects_in_small_pieces(
        text in reply(open_piece().boxed(), 10),
        size in 1usize..9,
    ) {
        let p = parser(ResponseType::Jsonl, Some(definition_schema()));
        let vars = Map::new();
        let mut s = StreamParser::new(&p, vars.clone());
        let mut at = 0;
        while at < text.len() {
            let mut next = (at + size).min(text.len());
            while !text.is_char_boundary(next) {
                next += 1;
            }
            s.feed(&text[at..next]);
            at = next;
            let so_far = p.parse(s.text(), &vars);
            same(&s.snapshot(), &so_far)?;
            prop_assert!(so_far.objects.starts_with(&s.committed().objects));
            prop_assert!(so_far.dropped.starts_with(&s.committed().dropped));
        }
        same(&s.finish(), &p.parse(&text, &vars))?;
    }
}
