//! Post-processing rules: ensure, drop, passthrough, coerce — in every format.

use kerf_core::prompt::PostRules;
use kerf_core::{CompiledSchema, Parser, ResponseType};
use rstest::rstest;
use serde_json::{Map, Value, json};

fn scored() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}, "score": {"type": "number"}, "n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["name"]})
}

fn parser(t: ResponseType, post: PostRules) -> Parser {
    Parser::new(t)
        .with_schema(CompiledSchema::compile(&scored(), "s").unwrap())
        .with_post(post)
}

#[rstest]
#[case::number(r#"{"name": "a", "score": "0.9"}"#, json!({"name": "a", "score": 0.9}))]
#[case::integer(r#"{"name": "a", "n": " 12 "}"#, json!({"name": "a", "n": 12}))]
#[case::boolean(r#"{"name": "a", "ok": "True"}"#, json!({"name": "a", "ok": true}))]
#[case::already_typed(r#"{"name": "a", "score": 1}"#, json!({"name": "a", "score": 1}))]
fn coerce_converts_where_the_schema_says(#[case] line: &str, #[case] expected: Value) {
    let r = parser(
        ResponseType::Jsonl,
        PostRules {
            coerce: true,
            ..Default::default()
        },
    )
    .parse(line, &Map::new());
    assert_eq!(r.objects, vec![expected], "{:?}", r.dropped);
}

#[test]
fn coerce_never_guesses() {
    let r = parser(
        ResponseType::Jsonl,
        PostRules {
            coerce: true,
            ..Default::default()
        },
    )
    .parse(r#"{"name": "a", "score": "high"}"#, &Map::new());
    assert!(r.objects.is_empty());
    assert_eq!(r.dropped[0].kind.as_str(), "coerce");
    assert_eq!(
        r.dropped[0].detail,
        "/score: cannot coerce \"high\" to number"
    );
}

#[test]
fn without_coerce_a_string_number_fails_the_schema() {
    let r = parser(ResponseType::Jsonl, PostRules::default())
        .parse(r#"{"name": "a", "score": "0.9"}"#, &Map::new());
    assert_eq!(r.dropped[0].kind.as_str(), "schema");
}

#[test]
fn passthrough_drop_ensure() {
    let post = PostRules {
        passthrough: vec!["doc_id".into()],
        drop: vec!["n".into()],
        ensure: vec!["score".into()],
        coerce: false,
    };
    let vars = json!({"doc_id": "d-7", "other": 1})
        .as_object()
        .cloned()
        .unwrap();
    let text = "{\"name\": \"a\", \"score\": 1, \"n\": 3}\n{\"name\": \"b\", \"n\": 4}";
    let r = parser(ResponseType::Jsonl, post).parse(text, &vars);
    assert_eq!(
        r.objects,
        vec![json!({"name": "a", "score": 1, "doc_id": "d-7"})]
    );
    assert_eq!(r.dropped.len(), 1);
    assert_eq!(
        (
            r.dropped[0].line,
            r.dropped[0].kind.as_str(),
            r.dropped[0].detail.as_str()
        ),
        (2, "missing_field", "ensure: missing `score`")
    );
}

#[test]
fn rules_apply_to_json_array_elements_too() {
    let schema = json!({"type": "array", "items": scored()});
    let post = PostRules {
        coerce: true,
        passthrough: vec!["doc".into()],
        ..Default::default()
    };
    let p = Parser::new(ResponseType::Json)
        .with_schema(CompiledSchema::compile(&schema, "s").unwrap())
        .with_post(post);
    let vars = json!({"doc": 1}).as_object().cloned().unwrap();
    let r = p.parse(r#"[{"name": "a", "score": "2.5"}]"#, &vars);
    assert_eq!(
        r.objects,
        vec![json!({"name": "a", "score": 2.5, "doc": 1})],
        "{:?}",
        r.dropped
    );
    let r = p.with_salvage(true).parse(
        r#"[{"name": "a", "score": "2.5"}, {"name": "b", "score": "x"}]"#,
        &vars,
    );
    assert_eq!(
        r.objects,
        vec![json!({"name": "a", "score": 2.5, "doc": 1})]
    );
    assert_eq!(r.dropped[0].kind.as_str(), "coerce");
}

#[test]
fn rules_apply_to_delimited_records() {
    let schema = json!({"type": "object", "properties": {"type": {"const": "person"}, "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["type", "name", "age"]});
    let d: kerf_core::prompt::Delimiters =
        serde_json::from_value(json!({"tuple": "|", "records": {"person": ["name", "age"]}}))
            .unwrap();
    let p = Parser::new(ResponseType::Delimited)
        .with_delimiters(kerf_core::DelimitedFormat::from_delimiters(&d, "t").unwrap())
        .with_schema(CompiledSchema::compile(&schema, "s").unwrap())
        .with_post(PostRules {
            coerce: true,
            ..Default::default()
        });
    let r = p.parse("person|Ada|36\nperson|Bob|old\n<|COMPLETE|>", &Map::new());
    assert_eq!(
        r.objects,
        vec![json!({"type": "person", "name": "Ada", "age": 36})]
    );
    assert_eq!(
        r.dropped[0].detail,
        "/age: cannot coerce \"old\" to integer"
    );
}

#[test]
fn ensure_drops_json_array_elements_in_order() {
    let post = PostRules {
        ensure: vec!["score".into()],
        drop: vec!["n".into()],
        ..Default::default()
    };
    let text = r#"[{"name": "a", "score": 1, "n": 0}, {"name": "b"}, {"name": "c", "score": 2}, {"name": "d", "n": 1}]"#;
    for salvage in [false, true] {
        let r = Parser::new(ResponseType::Json)
            .with_post(post.clone())
            .with_salvage(salvage)
            .parse(text, &Map::new());
        assert_eq!(
            r.objects,
            vec![
                json!({"name": "a", "score": 1}),
                json!({"name": "c", "score": 2})
            ]
        );
        let details: Vec<&str> = r.dropped.iter().map(|d| d.detail.as_str()).collect();
        assert_eq!(details, ["ensure: missing `score`"; 2]);
        assert_eq!(r.ends.len(), 2);
    }
}
