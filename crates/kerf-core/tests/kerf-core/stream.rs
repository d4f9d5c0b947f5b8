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
