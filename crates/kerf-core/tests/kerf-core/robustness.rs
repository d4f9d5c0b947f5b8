//! Bad input: never a panic, always a report or a clear error.

use kerf_core::{DropKind, ResponseType};
use serde_json::Map;

use crate::support::*;

#[test]
fn arbitrary_text_in_every_parser() {
    let nasty = [
        "",
        "\u{feff}",
        "{",
        "}",
        "[",
        "]",
        "[[[[",
        "]]]]",
        "```",
        "``",
        "{\"a\":",
        "\"unterminated",
        "{\"a\": \"\u{1F600}\"",
        "é{ü}ß",
        "\0\0\0",
        ",,,,",
        "- ",
        "1. ",
        "<|COMPLETE|>",
        "(\"entity\"<|>",
        "{}\n{}\n{",
        "[{}, {}, {",
        "{\"a\": [1, 2,\n{\"b\": 1}\n{\"c\": 2}",
    ];
    for t in ResponseType::ALL {
        for salvage in [false, true] {
            let p = parser(t, None).with_salvage(salvage);
            for text in nasty {
                let r = p.parse(text, &Map::new());
                for d in &r.dropped {
                    assert!(
                        d.line >= 1 && d.line <= text.lines().count().max(1),
                        "{t} {text:?}: line {}",
                        d.line
                    );
                }
            }
        }
    }
}

#[test]
fn deeply_nested_json_is_a_drop_not_a_stack_overflow() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    for t in [ResponseType::Json, ResponseType::Jsonl] {
        let r = parser(t, None).parse(&deep, &Map::new());
        assert!(r.objects.is_empty() || t == ResponseType::Json);
        let _ = r;
    }
    let deep_obj = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
    let r = parse(ResponseType::Jsonl, None, &deep_obj);
    assert!(r.objects.is_empty());
    assert_eq!(
        r.dropped[0].kind.as_str(),
        "invalid_json",
        "serde_json's recursion limit is reported"
    );
    let r = parser(ResponseType::Json, None)
        .with_salvage(true)
        .parse(&deep_obj, &Map::new());
    assert!(r.objects.is_empty());
}

#[test]
fn long_single_line_parses_in_linear_time_shape() {
    // A 5 MB line of objects: every object recovered, no quadratic blow-up in the line scan.
    let one = r#"{"entity": "x", "definition": "y"} "#;
    let text = one.repeat(5_000_000 / one.len());
    let r = parse(ResponseType::Jsonl, Some(definition_schema()), &text);
    assert_eq!(r.objects.len(), 5_000_000 / one.len());
    assert!(r.dropped.is_empty());
}

#[test]
fn fifty_megabyte_single_line_parses_and_sweeps() {
    // One 50 MB line of objects (no newline at all): every object recovered, and the sweep's
    // final count agrees, with its curve built from that one parse.
    let one = r#"{"entity": "x", "definition": "y"},"#;
    let n = 50_000_000 / one.len();
    let text = one.repeat(n);
    let p = parser(ResponseType::Jsonl, Some(definition_schema()));
    let curve =
        kerf_core::sweep::byte_curve(&p, &text, &Map::new(), &kerf_core::CancelToken::new())
            .unwrap();
    assert_eq!(curve.at(text.len()), n);
    assert_eq!(
        curve.at(one.len() - 1),
        1,
        "the first object counts from its closing brace"
    );
    assert_eq!(curve.steps.len(), n + 1);
}

#[test]
fn sweeps_of_hostile_input_are_results_not_panics() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let deep_obj = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
    for t in [
        ResponseType::Json,
        ResponseType::Jsonl,
        ResponseType::Delimited,
    ] {
        for text in [
            deep.as_str(),
            deep_obj.as_str(),
            "\u{0}\u{1}\u{fffd}",
            "```",
            "<|COMPLETE|>",
        ] {
            let c = kerf_core::sweep::byte_curve(
                &parser(t, None),
                text,
                &Map::new(),
                &kerf_core::CancelToken::new(),
            )
            .unwrap();
            assert_eq!(
                c.at(text.len()),
                parser(t, None).parse(text, &Map::new()).objects.len()
            );
        }
    }
}

/// Found by the `parse_jsonl` fuzz target: a line report pointing past the last line.
#[test]
fn fuzz_crash_parse_jsonl_22d39acc() {
    let data: &[u8] = &[
        0x0a, 0x7e, 0x0a, 0x7b, 0x22, 0xb0, 0xb0, 0x5c, 0x75, 0x00, 0xf6, 0x7b, 0x46, 0xc3, 0xdf,
        0xff, 0xff, 0xf4, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0xff, 0xfc, 0xff, 0xfc, 0x0a, 0x76,
        0x7a, 0x64, 0x4f, 0xa3, 0x4f, 0xd8, 0x26,
    ];
    let text = String::from_utf8_lossy(data);
    for schema in [None, Some(union_schema())] {
        let r = parse(ResponseType::Jsonl, schema, &text);
        let lines = text.split('\n').count();
        assert_eq!(r.objects.len(), r.ends.len());
        for d in &r.dropped {
            assert!(d.line >= 1 && d.line <= lines, "{d:?}");
        }
    }
}

/// The `stream_vs_whole` fuzz harness, for regression inputs.
fn stream_vs_whole(data: &[u8]) {
    use kerf_core::prompt::DelimiterPreset;
    use kerf_core::{DelimitedFormat, Parser, StreamParser};
    let parser = match data[0] % 8 {
        0 => Parser::new(ResponseType::Jsonl),
        1 => parser(ResponseType::Jsonl, Some(union_schema())),
        2 => Parser::new(ResponseType::Json),
        3 => parser(
            ResponseType::Json,
            Some(serde_json::json!({"type": "array", "items": union_schema()})),
        ),
        4 => Parser::new(ResponseType::Json).with_salvage(true),
        5 => parser(
            ResponseType::Json,
            Some(serde_json::json!({"type": "array", "items": union_schema()})),
        )
        .with_salvage(true),
        6 => Parser::new(ResponseType::Delimited),
        _ => Parser::new(ResponseType::Delimited)
            .with_delimiters(DelimitedFormat::preset(DelimiterPreset::LightragLegacy)),
    };
    let sizes = &data[1..4];
    let text = String::from_utf8_lossy(&data[4..]).into_owned();
    let vars = Map::new();
    let whole = parser.parse(&text, &vars);
    let mut s = StreamParser::new(&parser, Map::new());
    let (mut at, mut i) = (0, 0);
    while at < text.len() {
        let mut next = (at + 1 + sizes[i % 3] as usize % 17).min(text.len());
        while !text.is_char_boundary(next) {
            next += 1;
        }
        s.feed(&text[at..next]);
        assert_eq!(
            s.snapshot(),
            parser.parse(s.text(), &vars),
            "after {next} bytes of {text:?}"
        );
        at = next;
        i += 1;
    }
    assert_eq!(s.finish(), whole);
}

/// Found by the `stream_vs_whole` fuzz target.
#[test]
fn fuzz_crash_stream_vs_whole() {
    stream_vs_whole(&[0x87, 0xc2, 0x3c, 0xc2, 0xfb, 0xcd, 0xc7, 0x5b, 0xbd, 0xc3]);
    stream_vs_whole(&[
        0xbf, 0xfe, 0x5c, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0xf4, 0xb2,
    ]);
}

/// Found by the `sweep_vs_reparse` fuzz target: a multi-byte character right after a bare number;
/// then (2026-11-25) after a bare literal, which the whole text's value stream refuses while the
/// prefix that ends at the word is that literal.
#[test]
fn fuzz_crash_sweep_after_bare_number() {
    for text in [
        "2\u{fffd}J",
        "4\u{fffd}\n",
        "[]\u{e9}",
        "{} é",
        "null\u{fffd}",
        "truex",
        "false \u{fffd}",
        "nul",
    ] {
        crate::sweep::assert_exact(&kerf_core::Parser::new(ResponseType::Json), text);
    }
}

/// Found by the `sweep_vs_reparse` fuzz target on salvage sweeps: a form feed (blank to Rust's
/// `trim`, not to JSON) before a number element, then a multi-byte character.
#[test]
fn fuzz_crash_salvage_sweep_form_feed_before_number() {
    let array = serde_json::json!({"type": "array", "items": {"type": "object"}});
    for (text, schema) in [
        ("[\u{c}3\u{fffd}g\u{fffd}", None),
        (" {0\u{c}0:\0\0\0", Some(array.clone())),
        // A key position holding a nested value: cut off, the walk ends quietly; broken, it drops.
        (
            ".{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{u{{{{{{{{{{{{{{{{[.[\nU\u{fffd}\u{fffd}",
            None,
        ),
        // 2026-11-25, on the device's 16 cores: an array of arrays cut after an empty inner one.
        ("[[\n[]\u{fffd}", None),
        // 2026-11-25: a bare literal then a character that cannot follow a value; the prefix
        // that ends at the word is that literal (salvage keeps a bare scalar).
        ("null\u{fffd}eni", None),
        ("true\u{e9}", Some(array.clone())),
        // And one inside an array: `[true` keeps it, `[true\u{fffd}` breaks it.
        ("[true\u{fffd}", None),
        ("[1, null\u{e9}, false]", None),
        // 2026-11-25: a form feed before an array's first element. The read breaks at it, but
        // the walk stepped over it and read the element, so the whole text chose the array
        // (0 objects) where the sweep kept the object cut open after it (1).
        ("[\u{c}\"{\"", Some(array.clone())),
    ]
    .into_iter()
    .map(|(t, s)| (t.to_string(), s))
    // 2026-11-26: a number that only a prefix has out of range. serde says "number out of
    // range" as soon as the digits so far overflow, so the prefix ending at the 309th digit read
    // as broken (and salvage took the inner array's `1`) where the sweep saw it cut off. A text
    // that ends inside a number is cut off; the number breaks the text only once it ends.
    .chain([
        (
            format!("[[[1,21{}8{}{}138,2]]", "9".repeat(38), "9".repeat(8), "0".repeat(259)),
            None,
        ),
        (format!("[[1,{}e-5]]", "9".repeat(312)), None),
        (format!("[{{\"entity\": \"a\", \"n\": {}e-5}}]", "9".repeat(312)), Some(array.clone())),
    ]) {
        let p = match schema {
            Some(s) => kerf_core::Parser::new(ResponseType::Json)
                .with_schema(kerf_core::CompiledSchema::compile(&s, "t").unwrap()),
            None => kerf_core::Parser::new(ResponseType::Json),
        }
        .with_salvage(true);
        crate::sweep::assert_exact(&p, &text);
    }
}

/// A reply that ends inside a number was cut there, whatever serde says of the digits so far
/// ("number out of range" once they overflow): truncated in every JSON reader, not invalid JSON.
/// A whole number out of range is still invalid.
#[test]
fn a_reply_cut_inside_a_number_is_truncated_even_when_its_digits_overflow() {
    let digits = "9".repeat(320);
    let kind = |p: &kerf_core::Parser, t: &str| {
        let r = p.parse(t, &Default::default());
        (
            r.objects.len(),
            r.dropped.iter().map(|d| d.kind).collect::<Vec<_>>(),
        )
    };
    let strict = kerf_core::Parser::new(ResponseType::Json);
    let salvage = kerf_core::Parser::new(ResponseType::Json).with_salvage(true);
    let jsonl = kerf_core::Parser::new(ResponseType::Jsonl);
    let cut = format!("[{{\"a\": 1}}, {{\"n\": {digits}");
    assert_eq!(kind(&strict, &cut), (0, vec![DropKind::Truncated]));
    assert_eq!(kind(&salvage, &cut), (1, vec![DropKind::Truncated]));
    let cut = "{\"a\": 1}\n{\"n\": 1e400";
    assert_eq!(kind(&jsonl, cut), (1, vec![DropKind::Truncated]));
    // Blanks after the number, then the end: the object is still cut off, not broken.
    assert_eq!(
        kind(&jsonl, &format!("{cut}  ")),
        (1, vec![DropKind::Truncated])
    );
    // Ended, the number is broken.
    let whole = format!("[{{\"a\": 1}}, {{\"n\": {digits}}}]");
    assert_eq!(kind(&strict, &whole), (0, vec![DropKind::InvalidJson]));
    assert_eq!(kind(&salvage, &whole), (1, vec![DropKind::InvalidJson]));
    assert_eq!(
        kind(&jsonl, "{\"a\": 1}\n{\"n\": 1e400}\n"),
        (1, vec![DropKind::InvalidJson])
    );
    // Digits that overflow, brought back in range by the exponent: a number like any other.
    let fine = format!("[{{\"n\": {digits}e-30}}]");
    assert_eq!(kind(&strict, &fine), (1, vec![]));
}

/// Security review, finding 13: a backtracking `pattern` hit the regex engine's step limit and
/// the object was dropped as a `schema` violation, though nothing about it was wrong. It is now
/// dropped as `unchecked`, naming the pattern to simplify; a repair would not be asked for.
#[test]
fn a_pattern_past_the_regex_step_limit_is_unchecked_not_invalid() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^(a|a)*\\1b$"}}});
    let p = parser(kerf_core::ResponseType::Jsonl, Some(schema));
    // 40 `a`s then `c`: no match, found only after trying every way to split the `a`s.
    let slow = format!("{{\"code\": \"{}c\"}}", "a".repeat(40));
    let r = p.parse(
        &format!("{slow}\n{{\"code\": \"aab\"}}\n{{\"code\": \"c\"}}\n"),
        &Map::new(),
    );
    assert_eq!(r.objects, vec![serde_json::json!({"code": "aab"})]);
    let kinds: Vec<&str> = r.dropped.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, vec!["unchecked", "schema"], "{:?}", r.dropped);
    assert!(
        r.dropped[0].detail.contains("could not check `pattern`")
            && r.dropped[0].detail.contains("/properties/code/pattern"),
        "{}",
        r.dropped[0].detail
    );
    assert!(!kerf_core::DropKind::Unchecked.is_repairable());
}

/// A backtracking pattern (a backreference: no linear-time engine takes it) is held to
/// `BACKTRACK_STEPS` a value, not the engine's million: `^(a|aa)+\1$` on 20 `a`s and a `b`
/// takes some tens of thousands of steps, which the old limit let run to a decided `schema`
/// drop (~95 ms a value at the limit); now it is `unchecked` within the bound.
#[test]
fn a_backreference_pattern_is_held_to_the_step_bound() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^(a|aa)+\\1$"}}});
    assert!(!kerf_core::schema::pattern_is_linear("^(a|aa)+\\1$"));
    let p = parser(kerf_core::ResponseType::Jsonl, Some(schema));
    let slow = format!("{{\"code\": \"{}b\"}}", "a".repeat(20));
    let r = p.parse(&format!("{slow}\n{{\"code\": \"aa\"}}\n"), &Map::new());
    assert_eq!(r.objects, vec![serde_json::json!({"code": "aa"})]);
    let kinds: Vec<&str> = r.dropped.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, vec!["unchecked"], "{:?}", r.dropped);
}

/// Issue 36, item 6: a backtracking pattern cost 3.9 s per 100 objects before the step limit
/// gave up on it. A pattern that needs no backtracking feature is now checked by a linear-time
/// engine: decided (never `unchecked`), however the value is built; `kerf lint` names the
/// patterns that do need backtracking.
#[test]
fn a_pattern_without_backtracking_features_is_decided_in_linear_time() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^(a+)+$"}}});
    let p = parser(kerf_core::ResponseType::Jsonl, Some(schema.clone()));
    // The classic catastrophic case for a backtracking engine: many `a`s, then a mismatch.
    let slow = format!("{{\"code\": \"{}b\"}}", "a".repeat(5000));
    let r = p.parse(&format!("{slow}\n{{\"code\": \"aaa\"}}\n"), &Map::new());
    assert_eq!(r.objects, vec![serde_json::json!({"code": "aaa"})]);
    let kinds: Vec<&str> = r.dropped.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, vec!["schema"], "{:?}", r.dropped);
    assert!(kerf_core::schema::pattern_is_linear("^(a+)+$"));
    assert!(!kerf_core::schema::pattern_is_linear("^(a|a)*\\1b$"));
    let lint = |schema: &serde_json::Value| {
        kerf_core::lint::lint(schema, kerf_core::lint::Provider::Trustgraph)
            .into_iter()
            .filter(|f| f.message.contains("needs backtracking"))
            .map(|f| (f.pointer, f.keyword))
            .collect::<Vec<_>>()
    };
    assert!(lint(&schema).is_empty());
    let backtracking = serde_json::json!({"type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(?=a)\\w+$"}},
        "patternProperties": {"^(x)\\1$": {"type": "string"}}});
    assert_eq!(
        lint(&backtracking),
        vec![
            (
                "/patternProperties".to_string(),
                "patternProperties".to_string()
            ),
            ("/properties/code".to_string(), "pattern".to_string())
        ]
    );
}

/// Issue 36 item 12: a report holds its accepted objects as compact text with their ends as
/// small differences, not as `Value`s (80 bytes each before any heap, 88 with their end). A
/// 100,000-line `{}` reply — 3 bytes a line — is held in under 12 bytes an object, the buffers'
/// spare capacity included; the same objects read as one JSON array (strict, no schema: read
/// element by element) are held the same way. Not timed: sizes only.
#[test]
fn many_small_objects_are_held_compactly() {
    let n = 100_000;
    let held = |r: &kerf_core::ParseReport| r.objects.heap_bytes() + r.ends.heap_bytes();
    let lines = "{}\n".repeat(n);
    let r = parser(ResponseType::Jsonl, None).parse(&lines, &Map::new());
    assert_eq!((r.objects.len(), r.ends.len()), (n, n));
    assert!(held(&r) < 12 * n, "{} bytes for {n} objects", held(&r));
    assert_eq!(r.objects.raw(n - 1), Some("{}"));
    assert_eq!(r.ends.get(n - 1), Some(lines.len() - 1));

    let array = format!("[{}]", vec!["{}"; n].join(","));
    let a = parser(ResponseType::Json, None).parse(&array, &Map::new());
    assert_eq!(a.objects, r.objects);
    assert!(held(&a) < 12 * n, "{} bytes for {n} objects", held(&a));
    assert!(a.ends.iter().all(|e| e == array.len()));
}

/// Fuzzing, 2026-11-25 (`sweep_vs_reparse`): a JSONL line that is a JSON string with a `{` in
/// it. Cut before its closing quote, the `{}` in it was read as an object; whole, the line was a
/// string and had none: the sweep (from the whole reply's objects) said 0 where the cut parses to
/// 1. A string holding a `{` is now read as prose, so the object is there at every cut.
#[test]
fn fuzz_crash_jsonl_sweep_string_holding_an_object() {
    let p = kerf_core::Parser::new(ResponseType::Jsonl);
    let bytes = [
        0x22, 0x29, 0xe2, 0x2f, 0x29, 0x7b, 0x7d, 0xaf, 0x83, 0x83, 0x83, 0x5c, 0x72, 0x22, 0x83,
        0xff, 0x08, 0x83, 0x23, 0x7c, 0x3e, 0xa8, 0x83,
    ];
    let lossy = String::from_utf8_lossy(&bytes).into_owned();
    for text in [
        "\"{}\"",
        "\"{}\" and {}",
        "\"{}\"\n{\"a\": 1}\n",
        lossy.as_str(),
    ] {
        crate::sweep::assert_exact(&p, text);
    }
    // What each reads as: the object in the string counts; a string without one is still
    // reported as a string where an object was expected.
    let count = |t: &str| p.parse(t, &Default::default()).objects.len();
    assert_eq!(
        (count("\"{}"), count("\"{}\""), count("\"{}\" and {}")),
        (1, 1, 2)
    );
    let plain = p.parse("\"abc\"\n", &Default::default());
    assert_eq!(plain.dropped[0].kind, kerf_core::DropKind::NotObject);
}
