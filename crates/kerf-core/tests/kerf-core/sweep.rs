//! Sweeps: the value at every cut equals a re-parse of the prefix (property tests against the
//! naive re-parse), in bytes, chars and tokens; and the metrics.

use kerf_core::prompt::{DelimiterPreset, PostRules};
use kerf_core::sweep::{self, Unit, byte_curve};
use kerf_core::{CancelToken, CompiledSchema, DelimitedFormat, Parser, ResponseType};
use proptest::prelude::*;
use serde_json::Map;

use crate::support::*;

pub(crate) fn floor(text: &str, mut c: usize) -> usize {
    while !text.is_char_boundary(c) {
        c -= 1;
    }
    c
}

/// Assert the curve equals the naive re-parse at every byte cut.
pub(crate) fn assert_exact(parser: &Parser, text: &str) {
    assert_exact_with(parser, text, &Map::new());
}

/// The same with the run's variables (for `passthrough`).
pub(crate) fn assert_exact_with(
    parser: &Parser,
    text: &str,
    vars: &Map<String, serde_json::Value>,
) {
    let vars = vars.clone();
    let curve = byte_curve(parser, text, &vars, &CancelToken::new()).unwrap();
    for c in 0..=text.len() {
        let naive = parser.parse(&text[..floor(text, c)], &vars).objects.len();
        assert_eq!(curve.at(c), naive, "cut at byte {c} of {text:?}");
    }
}

pub(crate) fn jsonl_piece() -> impl Strategy<Value = String> {
    let n = 0..100u32;
    prop_oneof![
        4 => n.clone().prop_map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"déf {i}\"}}")),
        1 => Just("{\"entity\": \"only\"}".to_string()),
        1 => Just("{\"entity\": oops}".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"A\"".to_string()),
        1 => n.clone().prop_map(|i| format!("{{\n  \"entity\": \"p{i}\",\n  \"definition\": \"pretty\"\n}}")),
        1 => prop_oneof![Just("```jsonl"), Just("```"), Just("~~~")].prop_map(str::to_string),
        1 => Just("Here are the results:".to_string()),
        1 => n.clone().prop_map(|i| format!("{}. {{\"entity\": \"l{i}\", \"definition\": \"x\"}}", i % 9 + 1)),
        1 => Just("{\"entity\": \"a\", \"definition\": \"A\"} {\"entity\": \"b\", \"definition\": \"B\"},".to_string()),
        1 => prop_oneof![Just("["), Just("]"), Just("],"), Just("")].prop_map(str::to_string),
        1 => Just("42".to_string()),
        1 => Just("{\"entity\": \"x\", \"definition\": \"bad \u{1} char\"}".to_string()),
    ]
}

pub(crate) fn reply(piece: BoxedStrategy<String>, max: usize) -> impl Strategy<Value = String> {
    (
        prop::collection::vec(piece, 0..max),
        any::<bool>(),
        any::<bool>(),
        0..40usize,
    )
        .prop_map(|(pieces, crlf, bom, cut)| {
            let mut t = pieces.join(if crlf { "\r\n" } else { "\n" });
            if bom {
                t.insert(0, '\u{feff}');
            }
            // Sometimes the reply itself was cut off somewhere in its last stretch.
            if cut > 0 && t.len() > cut {
                let c = floor(&t, t.len() - cut);
                t.truncate(c);
            }
            t
        })
}

fn jsonl_parser() -> Parser {
    parser(ResponseType::Jsonl, Some(definition_schema()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn jsonl_sweep_equals_reparse(text in reply(jsonl_piece().boxed(), 12)) {
        assert_exact(&jsonl_parser(), &text);
    }

    #[test]
    fn jsonl_sweep_without_schema_equals_reparse(text in reply(jsonl_piece().boxed(), 12)) {
        assert_exact(&Parser::new(ResponseType::Jsonl), &text);
    }

    #[test]
    fn delimited_sweep_equals_reparse(text in reply(delimited_piece().boxed(), 10), legacy in any::<bool>()) {
        let preset = if legacy { DelimiterPreset::LightragLegacy } else { DelimiterPreset::Lightrag };
        let text = if legacy { text.replace("<|#|>", "<|>").replace('\n', "##\n") } else { text };
        assert_exact(&Parser::new(ResponseType::Delimited).with_delimiters(DelimitedFormat::preset(preset)), &text);
    }

    #[test]
    fn strict_json_sweep_equals_reparse(text in json_reply()) {
        let schema = serde_json::json!({"type": "array", "items": definition_schema()});
        assert_exact(&parser(ResponseType::Json, Some(schema)), &text);
        assert_exact(&Parser::new(ResponseType::Json), &text);
    }

    #[test]
    /// `kerf parse` of every byte prefix equals the sweep at that byte, on text with 2-, 3- and
    /// 4-byte characters: a prefix that ends inside a character is a cut reply (the incomplete
    /// character dropped, `truncated`, a note), never invalid UTF-8.
    fn parse_of_every_byte_prefix_equals_the_sweep(text in reply(multibyte_piece().boxed(), 8)) {
        let p = jsonl_parser();
        let vars = Map::new();
        let curve = byte_curve(&p, &text, &vars, &CancelToken::new()).unwrap();
        let bytes = text.as_bytes();
        for c in 0..=bytes.len() {
            let reply = kerf_core::error::decode_reply(bytes[..c].to_vec(), "prefix").unwrap();
            let mut report = p.parse(&reply.text, &vars);
            reply.mark(&mut report);
            prop_assert_eq!(report.objects.len(), curve.at(c), "cut at byte {} of {:?}", c, text);
            let inside = !text.is_char_boundary(c);
            prop_assert_eq!(reply.cut_bytes > 0, inside);
            if inside {
                prop_assert!(report.truncated && !report.notes.is_empty());
            }
        }
    }

    #[test]
    fn char_and_token_units_equal_reparse(text in reply(jsonl_piece().boxed(), 8)) {
        let p = jsonl_parser();
        let vars = Map::new();
        let curve = byte_curve(&p, &text, &vars, &CancelToken::new()).unwrap();
        // Chars: cut after k characters.
        let s = sweep::Sweep::new(&curve, &text, &Unit::Char);
        let offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).chain(std::iter::once(text.len())).collect();
        prop_assert_eq!(s.length, offsets.len() - 1);
        for (k, &b) in offsets.iter().enumerate() {
            prop_assert_eq!(s.at(k), p.parse(&text[..b], &vars).objects.len());
        }
        // Tokens: cut after k tokens (a cut inside a character counts as the boundary before it).
        let unit = sweep::token_unit("o200k_base", &text).unwrap();
        let Unit::Token { boundaries, .. } = &unit else { unreachable!() };
        let s = sweep::Sweep::new(&curve, &text, &unit);
        prop_assert_eq!(s.at(0), p.parse("", &vars).objects.len());
        for (k, &b) in boundaries.iter().enumerate() {
            prop_assert_eq!(s.at(k + 1), p.parse(&text[..floor(&text, b)], &vars).objects.len());
        }
    }
}

fn multibyte_piece() -> impl Strategy<Value = String> {
    let n = 0..100u32;
    prop_oneof![
        2 => jsonl_piece(),
        2 => n.clone().prop_map(|i| format!("{{\"entity\": \"日本{i}\", \"definition\": \"😀 é ß {i}\"}}")),
        1 => Just("{\"entity\": \"Ωmega\", \"definition\": \"€\"}".to_string()),
        1 => Just("Voilà — les résultats :".to_string()),
    ]
}

pub(crate) fn delimited_piece() -> impl Strategy<Value = String> {
    let n = 0..100u32;
    prop_oneof![
        4 => n.clone().prop_map(|i| format!("entity<|#|>E{i}<|#|>person<|#|>désc {i}")),
        2 => n.clone().prop_map(|i| format!("relation<|#|>E{i}<|#|>F{i}<|#|>kw<|#|>why")),
        1 => Just("entity<|#|>short<|#|>person".to_string()),
        1 => Just("event<|#|>x<|#|>y".to_string()),
        1 => Just("Some prose".to_string()),
        1 => Just("```".to_string()),
        1 => Just("<|COMPLETE|>".to_string()),
        1 => Just(String::new()),
    ]
}

pub(crate) fn json_reply() -> impl Strategy<Value = String> {
    let element =
        (0..50u32).prop_map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}"));
    let bad = Just("{\"entity\": \"x\"}".to_string());
    let items = prop::collection::vec(prop_oneof![4 => element, 1 => bad], 0..5);
    (
        items,
        any::<bool>(),
        prop_oneof![
            Just(""),
            Just("Sure:\n"),
            Just("```json\n"),
            Just("Here:\n```\n"),
            Just("  ")
        ],
        prop_oneof![
            Just(""),
            Just("\n```"),
            Just("\n```\nDone."),
            Just("  \n"),
            Just(" thanks"),
            Just("é"),
            Just(" \u{fffd}x")
        ],
        prop_oneof![
            Just(None),
            Just(Some("42")),
            Just(Some("-3.5e2")),
            Just(Some("\"s\""))
        ],
        0..30usize,
    )
        .prop_map(|(items, pretty, pre, post, scalar, cut)| {
            let value = match scalar {
                Some(s) => s.to_string(),
                None if pretty => format!("[\n  {}\n]", items.join(",\n  ")),
                None => format!("[{}]", items.join(", ")),
            };
            let mut t = format!("{pre}{value}{post}");
            if cut > 0 && t.len() > cut && cut % 3 == 0 {
                let c = floor(&t, t.len() - cut);
                t.truncate(c);
            }
            t
        })
}

#[test]
fn metrics_of_a_jsonl_and_an_array_reply() {
    let lines: Vec<String> = (0..4)
        .map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}"))
        .collect();
    let jsonl = lines.join("\n");
    let array = format!("[{}]", lines.join(",\n"));
    let vars = Map::new();
    let l = sweep::sweep(
        &jsonl_parser(),
        &jsonl,
        &vars,
        &Unit::Byte,
        &CancelToken::new(),
    )
    .unwrap();
    let a = sweep::sweep(
        &parser(
            ResponseType::Json,
            Some(serde_json::json!({"type": "array", "items": definition_schema()})),
        ),
        &array,
        &vars,
        &Unit::Byte,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(l.total, 4);
    assert_eq!(a.total, 4);
    // JSONL: a step after each line's closing brace; the array: nothing until the very end.
    let line_len = lines[0].len();
    assert_eq!(
        l.points,
        vec![
            (0, 0),
            (line_len, 1),
            (2 * line_len + 1, 2),
            (3 * line_len + 2, 3),
            (4 * line_len + 3, 4)
        ]
    );
    assert_eq!(a.points, vec![(0, 0), (array.len(), 4)]);
    assert_eq!(l.first_object(), Some(line_len));
    assert_eq!(a.first_object(), Some(array.len()));
    assert_eq!(a.median(), 0);
    assert_eq!(l.median(), 2);
    // Score: mean over all cuts 0..=len of recovered/total.
    let expected: f64 =
        (0..=jsonl.len()).map(|c| l.at(c) as f64 / 4.0).sum::<f64>() / (jsonl.len() + 1) as f64;
    assert!((l.score - expected).abs() < 1e-12);
    assert!((a.score - 1.0 / (array.len() + 1) as f64).abs() < 1e-12);
    assert!(l.score > 0.3 && a.score < 0.01, "{} {}", l.score, a.score);
}

#[test]
fn text_sweeps_and_unknown_tokenizers_are_refused_with_reasons() {
    let vars = Map::new();
    assert!(
        byte_curve(
            &Parser::new(ResponseType::Text),
            "x",
            &vars,
            &CancelToken::new()
        )
        .is_err()
    );
    assert!(
        sweep::token_unit("gpt2", "x")
            .unwrap_err()
            .to_string()
            .contains("o200k_base")
    );
}

/// Replies salvage has to dig out: prose with stray brackets, fences, arrays with bad, cut-off
/// and number elements, objects with arrays under their keys (LightRAG's JSON shape).
pub(crate) fn salvage_reply() -> impl Strategy<Value = String> {
    let element = prop_oneof![
        5 => (0..50u32).prop_map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}")),
        1 => Just("{\"entity\": \"x\"}".to_string()),
        1 => Just("{\"entity\": oops}".to_string()),
        1 => Just("{\"entity\": \"a\", \"definition\": \"A\"} {\"entity\": \"b\"}".to_string()),
        1 => prop_oneof![Just("12"), Just("-3.5e2"), Just("1.x"), Just("true")].prop_map(str::to_string),
        1 => Just("{\n  \"entity\": \"p\",\n  \"definition\": \"pretty\"\n}".to_string()),
        1 => Just("\"bad \u{1} string\"".to_string()),
        // Numbers a cut can put out of range, or that are out of range whole.
        1 => prop_oneof![
            Just(format!("{}e-5", "9".repeat(312))),
            Just(format!("[1, {}]", "9".repeat(312))),
            Just("1e400".to_string())
        ],
    ];
    let items = prop::collection::vec(element, 0..5);
    let value = (items.clone(), items, any::<bool>(), 0..4u8).prop_map(|(a, b, pretty, shape)| {
        let sep = if pretty { ",\n  " } else { ", " };
        match shape {
            0 | 1 => format!("[{}]", a.join(sep)),
            2 => format!(
                "{{\"entities\": [{}],{}\"relationships\": [{}], \"n\": 12}}",
                a.join(sep),
                if pretty { "\n" } else { " " },
                b.join(sep)
            ),
            _ => "{\"entity\": \"solo\", \"definition\": \"one\", \"n\": 7}".to_string(),
        }
    });
    (
        value,
        prop_oneof![
            Just(""),
            Just("Sure:\n"),
            Just("Look at [1] and {x}: "),
            Just("[\"a\"] then "),
            Just("```json\n"),
            Just("Here:\n```\n"),
            Just("  ")
        ],
        prop_oneof![
            Just(""),
            Just("\n```"),
            Just("\n```\nDone [2]."),
            Just(" and {\"entity\": \"z\"}"),
            Just(" thanks"),
            Just("é")
        ],
        prop_oneof![5 => Just(None), 1 => Just(Some("42")), 1 => Just(Some("\"s\"")), 1 => Just(Some("nul"))],
        0..40usize,
    )
        .prop_map(|(value, pre, post, scalar, cut)| {
            let body = scalar.map(str::to_string).unwrap_or(value);
            let mut t = format!("{pre}{body}{post}");
            if cut > 0 && t.len() > cut && cut % 2 == 0 {
                let c = floor(&t, t.len() - cut);
                t.truncate(c);
            }
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn salvage_json_sweep_equals_reparse(text in salvage_reply(), bom in any::<bool>()) {
        let text = if bom { format!("\u{feff}{text}") } else { text };
        let array = serde_json::json!({"type": "array", "items": definition_schema()});
        assert_exact(&parser(ResponseType::Json, Some(array)).with_salvage(true), &text);
        let lightrag = serde_json::json!({"type": "object", "properties": {
            "entities": {"type": "array", "items": definition_schema()},
            "relationships": {"type": "array", "items": definition_schema()},
            "n": {"type": "integer", "maximum": 5}}, "required": ["entities"]});
        assert_exact(&parser(ResponseType::Json, Some(lightrag)).with_salvage(true), &text);
        assert_exact(&Parser::new(ResponseType::Json).with_salvage(true), &text);
    }
}

/// Replies whose value is one object: members valid and not, repeated keys, nested values, arrays
/// under keys, numbers and literals a cut can shorten, broken keys and values.
fn object_reply() -> impl Strategy<Value = String> {
    let element =
        (0..9u32).prop_map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}"));
    let member = prop_oneof![
        3 => (0..9u32).prop_map(|i| format!("\"entity\": \"e{i}\"")),
        2 => Just("\"definition\": \"a pigment\"".to_string()),
        2 => prop_oneof![Just("3"), Just("12"), Just("-0.5e1"), Just("true"), Just("null")]
            .prop_map(|v| format!("\"n\": {v}")),
        1 => prop_oneof![Just(format!("{}e-5", "9".repeat(312))), Just("1e400".to_string())]
            .prop_map(|v| format!("\"n\": {v}")),
        1 => Just("\"nested\": {\"a\": [1, {\"b\": \"}\"}], \"c\": null}".to_string()),
        2 => prop::collection::vec(element, 0..3)
            .prop_map(|es| format!("\"entities\": [{}]", es.join(", "))),
        1 => Just("\"doc\": \"from the reply\"".to_string()),
        1 => Just("\"entity\": oops".to_string()),
        1 => Just("\"k\" 1".to_string()),
        1 => Just("7: 1".to_string()),
        1 => Just("\"s\": \"bad \u{1} char\"".to_string()),
    ];
    (
        prop::collection::vec(member, 0..7),
        any::<bool>(),
        prop_oneof![Just(""), Just("Sure:\n"), Just("```json\n")],
        prop_oneof![Just(""), Just("\n```"), Just(" thanks")],
        0..30usize,
    )
        .prop_map(|(members, pretty, pre, post, cut)| {
            let sep = if pretty { ",\n  " } else { ", " };
            let mut t = format!("{pre}{{{}}}{post}", members.join(sep));
            if cut > 0 && t.len() > cut && cut % 2 == 0 {
                let c = floor(&t, t.len() - cut);
                t.truncate(c);
            }
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The object sweep resumes one walk instead of re-parsing each prefix; it must still equal
    /// the re-parse, under a schema with required keys and with every post rule.
    #[test]
    fn salvage_object_sweep_equals_reparse(text in object_reply()) {
        let schema = serde_json::json!({"type": "object", "properties": {
            "entity": {"type": "string"},
            "n": {"type": "integer", "maximum": 5},
            "entities": {"type": "array", "items": definition_schema()}},
            "required": ["entity", "entities"]});
        let mut vars = Map::new();
        vars.insert("doc".into(), "d-1".into());
        for post in [
            PostRules::default(),
            PostRules { ensure: vec!["definition".into(), "doc".into()], ..Default::default() },
            PostRules { ensure: vec!["entity".into(), "n".into()], drop: vec!["n".into()], ..Default::default() },
            PostRules { ensure: vec!["doc".into()], passthrough: vec!["doc".into()], ..Default::default() },
        ] {
            let p = parser(ResponseType::Json, Some(schema.clone())).with_salvage(true).with_post(post.clone());
            assert_exact_with(&p, &text, &vars);
            let p = Parser::new(ResponseType::Json).with_salvage(true).with_post(post);
            assert_exact_with(&p, &text, &vars);
        }
    }
}

/// Security review, finding 8: the salvage sweep of an object reply re-parsed the whole prefix at
/// every member (a 27 KB flat object took 84 s, 8,000 keys over 120 s) and froze Compare. It
/// now resumes one walk, so 20,000 keys sweep like any reply of that length (well under a
/// second; the deadline below only catches a return of the quadratic cost, which would take
/// hours here). It is checked exact on a stretch of cuts as well.
#[test]
fn the_salvage_sweep_of_a_large_object_is_linear() {
    let members: Vec<String> = (0..20_000)
        .map(|i| format!("\"key{i}\": \"value {i}\""))
        .collect();
    let text = format!("{{{}", members.join(", "));
    let salvage = || Parser::new(ResponseType::Json).with_salvage(true);
    let (tx, rx) = std::sync::mpsc::channel();
    let t = text.clone();
    std::thread::spawn(move || {
        let _ = tx.send(
            byte_curve(&salvage(), &t, &Map::new(), &CancelToken::new()).map(|c| c.at(t.len())),
        );
    });
    let whole = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("the sweep of a 20,000-key object did not finish")
        .unwrap();
    assert_eq!(whole, 1, "the cut object is recovered");
    let small = &text[..members[..40].join(", ").len() + 1];
    assert_exact(&salvage(), small);
}

/// Security review, finding 8: a sweep could not be stopped. It now checks its token between
/// the prefixes it evaluates: cancelled before it starts it evaluates nothing, and cancelled from
/// another thread while it runs it ends with `cancelled` at its next check.
///
/// The cancel comes at a known check of the sweep's own, not at a wall-clock moment (a moment
/// could fall after the sweep had ended): `byte_curve` asks its token through
/// `byte_curve_until`'s predicate, and here that predicate, at its Nth question, lets the other
/// thread cancel the token and waits until it has before answering with the token's state.
#[test]
fn a_sweep_stops_when_cancelled() {
    use std::cell::Cell;
    use std::sync::mpsc;
    // A safety net only: every wait below ends as soon as the other side has acted.
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);
    let members: Vec<String> = (0..2_000)
        .map(|i| format!("\"key{i}\": \"value {i}\""))
        .collect();
    let text = format!("{{{}", members.join(", "));
    let p = Parser::new(ResponseType::Json).with_salvage(true);
    let vars = Map::new();
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = byte_curve(&p, &text, &vars, &cancel).unwrap_err();
    assert_eq!(e.code(), "cancelled");

    // Not cancelled: the whole curve, and how many times the sweep asked.
    let asked = Cell::new(0usize);
    let whole = sweep::byte_curve_until(&p, &text, &vars, &|| {
        asked.set(asked.get() + 1);
        false
    })
    .unwrap();
    assert_eq!(whole.at(text.len()), 1, "the cut object is recovered");
    let checks = asked.get();
    assert!(
        checks > members.len(),
        "{checks} checks for {} members: the sweep does not check between the prefixes it evaluates",
        members.len()
    );

    // Cancelled at its first check, its first in the walk, half-way, its last in the walk, and
    // the one before it returns.
    for at in [1, 2, checks / 2, checks - 1, checks] {
        let cancel = CancelToken::new();
        let (reached, on_reached) = mpsc::channel::<()>();
        let (cancelled, on_cancelled) = mpsc::channel::<()>();
        let stop_button = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                on_reached
                    .recv_timeout(DEADLINE)
                    .expect("the sweep never reached the check");
                cancel.cancel();
                cancelled.send(()).unwrap();
            })
        };
        let asked = Cell::new(0usize);
        let r = sweep::byte_curve_until(&p, &text, &vars, &|| {
            asked.set(asked.get() + 1);
            if asked.get() == at {
                reached.send(()).unwrap();
                on_cancelled
                    .recv_timeout(DEADLINE)
                    .expect("the other thread did not cancel");
            }
            cancel.is_cancelled()
        });
        stop_button.join().unwrap();
        assert_eq!(
            r.map(|c| c.steps.len()).unwrap_err().code(),
            "cancelled",
            "cancelled at check {at} of {checks}"
        );
        // It stopped there: at most the checks on its way out followed, not the rest of the walk.
        assert!(
            asked.get() - at <= 3,
            "cancelled at check {at} of {checks}, it went on to check {}",
            asked.get()
        );
    }
}

#[test]
fn salvage_sweep_of_a_cut_array_counts_each_element_once_complete() {
    let elements: Vec<String> = (0..3)
        .map(|i| format!("{{\"entity\": \"e{i}\", \"definition\": \"d{i}\"}}"))
        .collect();
    // Cut inside the third element: salvage recovers two, strict none.
    let full = format!("Sure, see [1]:\n[{}]", elements.join(", "));
    let text = &full[..full.len() - 10];
    let vars = Map::new();
    let schema = serde_json::json!({"type": "array", "items": definition_schema()});
    let s = sweep::sweep(
        &parser(ResponseType::Json, Some(schema)).with_salvage(true),
        text,
        &vars,
        &Unit::Byte,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(s.total, 2);
    let first_end = full.find("d0\"}").unwrap() + 4;
    let second_end = full.find("d1\"}").unwrap() + 4;
    // The stray `[1]` is one element without a schema-valid value: nothing counts until the real
    // array's first element closes.
    assert_eq!(
        s.points,
        vec![(0, 0), (first_end, 1), (second_end, 2), (text.len(), 2)]
    );
}

#[test]
fn shipped_fixture_replies_sweep_exactly() {
    let root = repo();
    for (reply, prompt) in [
        (
            "tests/fixtures/replies/agent-kg-extract.cut.jsonl.txt",
            "prompts/agent-kg-extract.json",
        ),
        (
            "tests/fixtures/replies/agent-kg-extract-array.cut.json.txt",
            "prompts/agent-kg-extract-array.json",
        ),
        (
            "tests/fixtures/replies/lightrag.cut.delimited.txt",
            "prompts/lightrag-extract-delimited.json",
        ),
    ] {
        let p = kerf_core::Prompt::load(&root.join(prompt)).unwrap();
        let text = std::fs::read_to_string(root.join(reply)).unwrap();
        assert_exact(&p.parser, &text);
    }
    let _ = CompiledSchema::compile(&definition_schema(), "x").unwrap();
}
