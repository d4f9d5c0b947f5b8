//! `kerf parse` throughput on a 10 MB JSONL reply with the shipped oneOf schema
//! (agent-kg-extract), against plain serde_json parsing of the same bytes.
//! Target (issue 2): Kerf ≥ half of serde_json's throughput.
//!
//! Run: `cargo bench -p kerf-core --bench parse`

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kerf_core::{Parser, ResponseType};
use serde_json::{Map, Value};

fn reply(target_bytes: usize) -> String {
    let mut out = String::with_capacity(target_bytes + 256);
    let mut i = 0;
    while out.len() < target_bytes {
        out.push_str(&common::union_line(i));
        out.push('\n');
        i += 1;
    }
    out
}

fn bench(c: &mut Criterion) {
    let parser = common::union_parser();
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
