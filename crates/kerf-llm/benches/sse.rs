//! The server-sent-events reader on one huge `data:` line that arrives without a newline in
//! 16 KiB pieces (how a misbehaving server or proxy sends a whole reply as one event): the cost
//! must grow linearly with the line. Issue 36 measured 27.6 s for 32 MB and 111 s for 200 MB
//! before the window that names a refused line stopped rescanning the line on every piece.
//!
//! `cargo bench -p kerf-llm --bench sse`; figures in the README.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

fn one_long_line(mib: usize) -> Vec<u8> {
    let mut body = b"data: ".to_vec();
    body.resize(6 + mib * (1 << 20), b'x');
    body.extend_from_slice(b"\n\n");
    body
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse");
    group.sample_size(10);
    for mib in [32, 200] {
        let body = one_long_line(mib);
        let pieces: Vec<&[u8]> = body.chunks(16 * 1024).collect();
        group.bench_function(format!("one {mib} MiB data line in 16 KiB pieces"), |b| {
            b.iter(|| {
                let (events, end) = kerf_llm::sse::decode(black_box(&pieces));
                end.unwrap();
                assert_eq!(events[0].data.len(), mib << 20);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
