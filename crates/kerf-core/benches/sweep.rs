//! Sweeps and streaming, so regressions show: a byte sweep of 1k / 10k / 100k-object JSONL
//! replies (linear growth expected), a 10k-object reply fed to the streaming parser in
//! 64-byte chunks (what a live run does), and one open 100 KB JSONL object (and one 100 KB
//! delimited record) fed in 4-byte pieces (issue 36, item 11: was quadratic, 5.1 s in a debug
//! build; target under 50 ms).
//!
//! Run: `cargo bench -p kerf-core --bench sweep`

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kerf_core::sweep::{Unit, sweep};
use kerf_core::{Parser, ResponseType, StreamParser};
use serde_json::Map;

fn reply(n: usize) -> String {
    (0..n)
        .map(common::union_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn bench(c: &mut Criterion) {
    let parser = common::union_parser();
    let vars = Map::new();
    let mut g = c.benchmark_group("sweep_every_byte_jsonl");
    g.sample_size(10);
    for n in [1_000, 10_000, 100_000] {
        let text = reply(n);
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| {
                let s = sweep(
                    &parser,
                    text,
                    &vars,
                    &Unit::Byte,
                    &kerf_core::CancelToken::new(),
                )
                .expect("sweep");
                assert_eq!(s.total, n);
            })
        });
    }
    g.finish();

    let text = reply(10_000);
    let mut g = c.benchmark_group("stream_10k_objects_64b_chunks");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("feed_then_finish", |b| {
        b.iter(|| {
            let mut s = StreamParser::new(&parser, Map::new());
            let mut at = 0;
            while at < text.len() {
                let next = (at + 64).min(text.len());
                s.feed(&text[at..next]);
                at = next;
            }
            assert_eq!(s.finish().objects.len(), 10_000);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("stream_open_100kb_4b_pieces");
    g.sample_size(10);
    let (jsonl, delimited) = (
        Parser::new(ResponseType::Jsonl),
        Parser::new(ResponseType::Delimited),
    );
    for (name, parser, text) in [
        ("jsonl_object", &jsonl, open_object(100_000)),
        ("delimited_record", &delimited, open_record(100_000)),
    ] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut s = StreamParser::new(parser, Map::new());
                let mut at = 0;
                while at < text.len() {
                    let next = (at + 4).min(text.len());
                    s.feed(&text[at..next]);
                    at = next;
                }
                assert_eq!(s.finish().objects.len(), 1);
            })
        });
    }
    g.finish();
}

/// One JSONL object of about `bytes` bytes, open until its last byte: many members whose
/// strings hold braces and escaped quotes.
fn open_object(bytes: usize) -> String {
    let mut t = String::from("{\"type\": \"definition\", \"notes\": [");
    let mut i = 0;
    while t.len() < bytes {
        t.push_str(&format!(
            "{{\"n\": {i}, \"s\": \"a {{brace}} and a \\\"quote\\\"\"}}, "
        ));
        i += 1;
    }
    t.push_str("{}]}\n");
    t
}

/// One delimited record of about `bytes` bytes (a long description), open until its newline.
fn open_record(bytes: usize) -> String {
    let mut t = String::from("entity<|#|>Ada Lovelace<|#|>person<|#|>");
    while t.len() < bytes {
        t.push_str("a long description of the entity, ");
    }
    t.push_str("\n<|COMPLETE|>");
    t
}

criterion_group!(benches, bench);
criterion_main!(benches);
