//! Sweeps and streaming, so regressions show: a byte sweep of 1k / 10k / 100k-object JSONL
//! replies (linear growth expected), and a 10k-object reply fed to the streaming parser in
//! 64-byte chunks (what a live run does).
//!
//! Run: `cargo bench -p kerf-core --bench sweep`

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kerf_core::StreamParser;
use kerf_core::sweep::{Unit, sweep};
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
