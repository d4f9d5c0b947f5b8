//! LightRAG delimited records, current and older forms.

use kerf_core::prompt::DelimiterPreset;
use kerf_core::{DelimitedFormat, Parser, ResponseType::Delimited};
use rstest::rstest;
use serde_json::{Map, json};

use crate::support::*;

fn parse_with(preset: DelimiterPreset, text: &str) -> kerf_core::ParseReport {
    Parser::new(Delimited)
        .with_delimiters(DelimitedFormat::preset(preset))
        .parse(text, &Map::new())
}

#[test]
fn current_format_complete() {
    let text = "entity<|#|>Flannan Isles<|#|>geo<|#|>Islands off Scotland\nrelation<|#|>James Ducat<|#|>Flannan Isles<|#|>keeper<|#|>He kept the light\n<|COMPLETE|>";
    let r = parse_with(DelimiterPreset::Lightrag, text);
    assert_eq!(
        r.objects,
        vec![
            json!({"type": "entity", "entity_name": "Flannan Isles", "entity_type": "geo", "entity_description": "Islands off Scotland"}),
            json!({"type": "relation", "source_entity": "James Ducat", "target_entity": "Flannan Isles", "relationship_keywords": "keeper", "relationship_description": "He kept the light"}),
        ]
    );
    assert!(r.dropped.is_empty());
    assert!(!r.truncated);
}

#[test]
fn missing_completion_drops_the_unterminated_last_record() {
    let text = "entity<|#|>A<|#|>person<|#|>first\nentity<|#|>B<|#|>person<|#|>sec";
    let r = parse_with(DelimiterPreset::Lightrag, text);
    assert_eq!(r.objects.len(), 1);
    assert_eq!(drops(&r), vec![(2, "truncated")]);
    assert!(r.truncated);
}

#[test]
fn missing_completion_after_a_full_line_keeps_every_record() {
    let r = parse_with(
        DelimiterPreset::Lightrag,
        "entity<|#|>A<|#|>person<|#|>first\n",
    );
    assert_eq!(r.objects.len(), 1);
    assert!(r.dropped.is_empty());
    assert!(
        r.truncated,
        "no completion delimiter: the reply counts as cut off"
    );
}

/// LightRAG reads `relation` and `relationship` as one tag; the object keeps the format's own.
#[rstest]
#[case::current_relation(
    DelimiterPreset::Lightrag,
    "relation<|#|>A<|#|>B<|#|>kw<|#|>why\n<|COMPLETE|>",
    "relation"
)]
#[case::current_relationship(
    DelimiterPreset::Lightrag,
    "relationship<|#|>A<|#|>B<|#|>kw<|#|>why\n<|COMPLETE|>",
    "relation"
)]
#[case::current_any_case(
    DelimiterPreset::Lightrag,
    "Relationship<|#|>A<|#|>B<|#|>kw<|#|>why\n<|COMPLETE|>",
    "relation"
)]
#[case::legacy_relationship(
    DelimiterPreset::LightragLegacy,
    "(\"relationship\"<|>A<|>B<|>why<|>kw<|>9)##<|COMPLETE|>",
    "relationship"
)]
#[case::legacy_relation(
    DelimiterPreset::LightragLegacy,
    "(\"relation\"<|>A<|>B<|>why<|>kw<|>9)##<|COMPLETE|>",
    "relationship"
)]
fn relation_and_relationship_are_one_tag(
    #[case] preset: DelimiterPreset,
    #[case] text: &str,
    #[case] tag: &str,
) {
    let r = parse_with(preset, text);
    assert!(r.dropped.is_empty(), "{:?}", r.dropped);
    assert_eq!(r.objects.len(), 1);
    let objects = r.objects.to_vec();
    assert_eq!(objects[0]["type"], json!(tag));
    assert_eq!(objects[0]["source_entity"], json!("A"));
    assert!(!r.truncated);
}

/// Records after the completion delimiter: read (as LightRAG does), with a note, not a drop; a
/// last record cut mid-field stays `truncated` wherever it is.
#[rstest]
#[case::one_after(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nentity<|#|>B<|#|>person<|#|>late\n",
    2, vec![], false, Some("1 record(s) after the completion delimiter (from line 3)")
)]
#[case::two_after_and_a_second_completion(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nentity<|#|>B<|#|>person<|#|>late\nrelationship<|#|>A<|#|>B<|#|>kw<|#|>d\n<|COMPLETE|>",
    3, vec![], false, Some("2 record(s) after the completion delimiter (from line 3)")
)]
#[case::same_line(
    "entity<|#|>A<|#|>person<|#|>first<|COMPLETE|>entity<|#|>B<|#|>person<|#|>late\n",
    2, vec![], false, Some("1 record(s) after the completion delimiter (from line 1)")
)]
#[case::cut_after_completion(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nentity<|#|>B<|#|>per",
    1, vec![(3, "truncated")], true, None
)]
#[case::cut_mid_field_without_completion(
    "entity<|#|>A<|#|>person<|#|>first\nentity<|#|>B<|#|>person<|#|>sec",
    1, vec![(2, "truncated")], true, None
)]
#[case::only_prose_after(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nThat is all.\n",
    1, vec![(3, "prose")], false, None
)]
// Review 2, item 19: LightRAG's own examples end with a separator line after the completion
// delimiter, no newline after it. A line that is no record cannot be a cut record.
#[case::a_separator_line_last(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\n######################",
    1, vec![(3, "prose")], false, None
)]
#[case::prose_last_without_a_newline(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nThat is all.",
    1, vec![(3, "prose")], false, None
)]
// A record cut before its first field delimiter is still a cut record.
#[case::a_tag_cut_after_completion(
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>\nenti",
    1, vec![(3, "truncated")], true, None
)]
fn records_after_the_completion_delimiter(
    #[case] text: &str,
    #[case] objects: usize,
    #[case] dropped: Vec<(usize, &str)>,
    #[case] truncated: bool,
    #[case] note: Option<&str>,
) {
    let r = parse_with(DelimiterPreset::Lightrag, text);
    assert_eq!(r.objects.len(), objects, "{:?}", r.objects);
    assert_eq!(drops(&r), dropped);
    assert_eq!(r.truncated, truncated);
    match note {
        Some(n) => assert!(r.notes.iter().any(|x| x.contains(n)), "{:?}", r.notes),
        None => assert!(r.notes.is_empty(), "{:?}", r.notes),
    }
}

#[test]
fn wrong_field_count_and_unknown_records_and_prose() {
    let text = "Here you go:\nentity<|#|>A<|#|>person\nevent<|#|>x<|#|>y\nentity<|#|>B<|#|>person<|#|>ok\n<|COMPLETE|>";
    let r = parse_with(DelimiterPreset::Lightrag, text);
    assert_eq!(r.objects.len(), 1);
    assert_eq!(
        drops(&r),
        vec![(1, "prose"), (2, "field_count"), (3, "unknown_record")]
    );
    assert!(
        r.dropped[1].detail.contains("expected 3"),
        "{}",
        r.dropped[1].detail
    );
}

#[test]
fn legacy_format_with_hashes_and_newlines() {
    let text = "(\"entity\"<|>\"Ada Lovelace\"<|>\"person\"<|>\"Mathematician\")##\n(\"relationship\"<|>\"Ada Lovelace\"<|>\"Charles Babbage\"<|>\"Worked together\"<|>\"collaboration\"<|>9)##\n(\"content_keywords\"<|>\"computing, mathematics\")<|COMPLETE|>";
    let r = parse_with(DelimiterPreset::LightragLegacy, text);
    assert_eq!(r.dropped, vec![]);
    let objects = r.objects.to_vec();
    assert_eq!(
        objects[0],
        json!({"type": "entity", "entity_name": "Ada Lovelace", "entity_type": "person", "entity_description": "Mathematician"})
    );
    assert_eq!(objects[1]["relationship_strength"], json!("9"));
    assert_eq!(
        objects[2],
        json!({"type": "content_keywords", "high_level_keywords": "computing, mathematics"})
    );
}

#[test]
fn legacy_cut_off() {
    let text = "(\"entity\"<|>\"A\"<|>\"person\"<|>\"x\")##(\"entity\"<|>\"B\"<|>\"per";
    let r = parse_with(DelimiterPreset::LightragLegacy, text);
    assert_eq!(r.objects.len(), 1);
    assert_eq!(drops(&r), vec![(1, "truncated")]);
}

#[test]
fn records_validate_against_the_shipped_schema() {
    let schema = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/lightrag-record.schema.json")).unwrap(),
    )
    .unwrap();
    let p = parser(Delimited, Some(schema));
    let r = p.parse(
        "entity<|#|><|#|>person<|#|>empty name\nentity<|#|>A<|#|>person<|#|>ok\n<|COMPLETE|>",
        &Map::new(),
    );
    assert_eq!(r.objects.len(), 1);
    assert_eq!(drops(&r), vec![(1, "schema")]);
    assert!(
        r.dropped[0].detail.starts_with("/entity_name"),
        "{}",
        r.dropped[0].detail
    );
}

#[test]
fn custom_delimiters_from_a_prompt_file() {
    let d: kerf_core::prompt::Delimiters =
        serde_json::from_value(json!({"tuple": " | ", "records": {"person": ["name", "role"]}}))
            .unwrap();
    let f = DelimitedFormat::from_delimiters(&d, "test").unwrap();
    let r = Parser::new(Delimited)
        .with_delimiters(f)
        .parse("person | Ada | programmer\n<|COMPLETE|>", &Map::new());
    assert_eq!(
        r.objects,
        vec![json!({"type": "person", "name": "Ada", "role": "programmer"})]
    );
}

/// Review 2, item 19, in LightRAG's own shape: its prompt asks the model to "output
/// {completion_delimiter}######################" when finished, so the run of `#` follows the
/// completion delimiter on the same line — in the older form an odd run leaves one `#` after the
/// last `##`. Neither form's reply is cut off.
#[rstest]
#[case::current(
    DelimiterPreset::Lightrag,
    "entity<|#|>A<|#|>person<|#|>first\n<|COMPLETE|>######################"
)]
#[case::older_even(
    DelimiterPreset::LightragLegacy,
    "(\"entity\"<|>A<|>person<|>first)##<|COMPLETE|>######################"
)]
#[case::older_odd(
    DelimiterPreset::LightragLegacy,
    "(\"entity\"<|>A<|>person<|>first)##<|COMPLETE|>#######################"
)]
fn lightrags_closing_separator_is_not_a_cut_record(
    #[case] preset: DelimiterPreset,
    #[case] text: &str,
) {
    let r = parse_with(preset, text);
    assert_eq!(r.objects.len(), 1, "{:?}", r.objects);
    assert!(!r.truncated, "{:?}", r.dropped);
    assert!(
        r.dropped.iter().all(|d| d.kind.as_str() == "prose"),
        "{:?}",
        r.dropped
    );
}
