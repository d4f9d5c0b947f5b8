//! Where each accepted object sits in its reply (`Parser::spans`): the text of every span reads
//! back as the object the parse accepted, spans come in order without overlapping, and a streamed
//! parse records the same places as a whole one.

use kerf_core::{DelimitedFormat, Parser, ResponseType, StreamParser};
use proptest::prelude::*;
use rstest::rstest;
use serde_json::{Map, Value, json};

use crate::support::*;
use crate::sweep::{json_reply, jsonl_piece, reply, salvage_reply};

/// Every span's text reads back as the accepted object, in order, each within what made it count.
fn assert_spans_read_back(p: &Parser, text: &str) -> Result<(), TestCaseError> {
    let vars = Map::new();
    let report = p.parse(text, &vars);
    let spans = p.spans(text, &vars, &report);
    prop_assert_eq!(spans.len(), report.objects.len());
    let mut after = 0;
    for (i, (&(s, e), end)) in spans.iter().zip(report.ends.iter()).enumerate() {
        prop_assert!(
            s >= after && s < e && e <= end,
            "span {i} {s}..{e} (end {end}) of {text:?}"
        );
        let read: Value = serde_json::from_str(&text[s..e])
            .map_err(|err| TestCaseError::fail(format!("span {i} {:?}: {err}", &text[s..e])))?;
        prop_assert_eq!(
            Some(read),
            report.objects.get(i),
            "span {} of {:?}",
            i,
            text
        );
        after = e;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn jsonl_spans_read_back(text in reply(jsonl_piece().boxed(), 12)) {
        assert_spans_read_back(&parser(ResponseType::Jsonl, Some(definition_schema())), &text)?;
    }

    #[test]
    fn strict_json_spans_are_the_elements(text in json_reply()) {
        let schema = json!({"type": "array", "items": definition_schema()});
        assert_spans_read_back(&parser(ResponseType::Json, Some(schema)), &text)?;
        assert_spans_read_back(&Parser::new(ResponseType::Json), &text)?;
    }

    #[test]
    fn salvage_spans_are_in_order_inside_the_text(text in salvage_reply()) {
        let p = parser(ResponseType::Json, Some(json!({"type": "array", "items": definition_schema()}))).with_salvage(true);
        let report = p.parse(&text, &Map::new());
        let spans = p.spans(&text, &Map::new(), &report);
        prop_assert_eq!(spans.len(), report.objects.len());
        let mut after = 0;
        for (s, e) in spans {
            prop_assert!(s >= after && s < e && e <= text.len() && text.is_char_boundary(s));
            after = e;
        }
    }

    #[test]
    fn streamed_starts_equal_whole_starts(text in reply(jsonl_piece().boxed(), 10), size in 1usize..17) {
        let p = parser(ResponseType::Jsonl, Some(definition_schema()));
        let mut s = StreamParser::new(&p, Map::new());
        let mut at = 0;
        while at < text.len() {
            let mut next = (at + size).min(text.len());
            while !text.is_char_boundary(next) {
                next += 1;
            }
            s.feed(&text[at..next]);
            at = next;
        }
        prop_assert_eq!(s.finish().starts, p.parse(&text, &Map::new()).starts);
    }
}

#[rstest]
#[case::jsonl_in_prose(ResponseType::Jsonl, "Here:\n{\"a\": 1}\nnot json\n  {\"b\": [2]} {\"c\": 3}\n", vec!["{\"a\": 1}", "{\"b\": [2]}", "{\"c\": 3}"])]
#[case::jsonl_array_line(ResponseType::Jsonl, "[{\"a\": 1}, {\"b\": 2}]\n", vec!["{\"a\": 1}", "{\"b\": 2}"])]
#[case::strict_array(ResponseType::Json, "```json\n[ {\"a\": 1},\n  {\"b\": 2} ]\n```\n", vec!["{\"a\": 1}", "{\"b\": 2}"])]
#[case::strict_object(ResponseType::Json, "  {\"a\": [1, 2]}\n", vec!["{\"a\": [1, 2]}"])]
#[case::strict_after_bom(ResponseType::Json, "\u{feff}[{\"é\": 1}, {\"b\": 2}]", vec!["{\"é\": 1}", "{\"b\": 2}"])]
#[case::strict_cut_off(ResponseType::Json, "[{\"a\": 1}, {\"b\"", vec![])]
fn spans_cover_each_object(
    #[case] t: ResponseType,
    #[case] text: &str,
    #[case] expected: Vec<&str>,
) {
    let p = Parser::new(t);
    let report = p.parse(text, &Map::new());
    let texts: Vec<&str> = p
        .spans(text, &Map::new(), &report)
        .into_iter()
        .map(|(s, e)| &text[s..e])
        .collect();
    assert_eq!(texts, expected);
}

#[test]
fn strict_spans_leave_out_what_the_post_rules_dropped() {
    let file: kerf_core::prompt::PostRules =
        serde_json::from_value(json!({"ensure": ["entity"]})).unwrap();
    let p = Parser::new(ResponseType::Json).with_post(file);
    let text = "[{\"entity\": \"a\"}, {\"other\": 1}, {\"entity\": \"c\"}]";
    let report = p.parse(text, &Map::new());
    assert_eq!(report.objects.len(), 2);
    let spans = p.spans(text, &Map::new(), &report);
    let texts: Vec<&str> = spans.iter().map(|&(s, e)| &text[s..e]).collect();
    assert_eq!(texts, ["{\"entity\": \"a\"}", "{\"entity\": \"c\"}"]);
}

#[test]
fn delimited_spans_run_from_the_tag_to_the_terminator() {
    let p = Parser::new(ResponseType::Delimited).with_delimiters(DelimitedFormat::default());
    let text = "prose\nentity<|#|>Ada<|#|>person<|#|>a mathematician\nrelation<|#|>Ada<|#|>Babbage<|#|>worked with<|#|>notes\n";
    let report = p.parse(text, &Map::new());
    let texts: Vec<&str> = p
        .spans(text, &Map::new(), &report)
        .into_iter()
        .map(|(s, e)| &text[s..e])
        .collect();
    assert_eq!(report.objects.len(), texts.len());
    for t in &texts {
        assert!(
            t.starts_with("entity") || t.starts_with("relation"),
            "{t:?}"
        );
        assert!(t.ends_with('\n'), "{t:?}");
    }
}
