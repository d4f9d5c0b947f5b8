//! `kerf parse` throughput on a 10 MB JSONL reply with the shipped oneOf schema
//! (agent-kg-extract), against plain serde_json parsing of the same bytes.
//! Target (issue 2): Kerf ≥ half of serde_json's throughput.
//!
//! Run: `cargo bench -p kerf-core --bench parse`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kerf_core::{CompiledSchema, Parser, ResponseType};
use serde_json::{Map, Value};

fn reply(target_bytes: usize) -> String {
    let mut out = String::with_capacity(target_bytes + 256);
    let mut i = 0u64;
    while out.len() < target_bytes {
        if i % 2 == 0 {
            out.push_str(&format!(
                "{{\"type\": \"definition\", \"entity\": \"entity {i}\", \"definition\": \"A molecule or process described in paragraph {i} of the source text\"}}\n"
            ));
        } else {
            out.push_str(&format!(
                "{{\"type\": \"relationship\", \"subject\": \"entity {i}\", \"predicate\": \"located in\", \"object\": \"compartment {}\", \"object-entity\": true}}\n",
                i % 17
            ));
        }
        i += 1;
    }
    out
}

fn bench(c: &mut Criterion) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas/agent-kg-extract.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(root).expect("schema")).expect("json");
    let parser = Parser::new(ResponseType::Jsonl)
        .with_schema(CompiledSchema::compile(&schema, "bench").expect("compiles"));
    let text = reply(10 * 1024 * 1024);
    let vars = Map::new();
    let expected = text.lines().count();
    assert_eq!(parser.parse(&text, &vars).objects.len(), expected);

    let mut g = c.benchmark_group("parse_10mb_jsonl_oneof");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10);
    g.bench_function("serde_json_values", |b| {
        b.iter(|| {
            let n = serde_json::Deserializer::from_str(&text)
                .into_iter::<Value>()
                .filter(|v| v.is_ok())
                .count();
            assert_eq!(n, expected);
        })
    });
    // The fair baseline keeps the values, as a parser's caller does (TrustGraph returns a list).
    g.bench_function("serde_json_values_collected", |b| {
        b.iter(|| {
            let v: Vec<Value> = serde_json::Deserializer::from_str(&text)
                .into_iter::<Value>()
                .filter_map(Result::ok)
                .collect();
            assert_eq!(v.len(), expected);
        })
    });
    let unvalidated = Parser::new(ResponseType::Jsonl);
    g.bench_function("kerf_parse_jsonl_no_schema", |b| {
        b.iter(|| {
            let r = unvalidated.parse(&text, &vars);
            assert_eq!(r.objects.len(), expected);
        })
    });
    g.bench_function("kerf_parse_jsonl_validated", |b| {
        b.iter(|| {
            let r = parser.parse(&text, &vars);
            assert_eq!(r.objects.len(), expected);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
