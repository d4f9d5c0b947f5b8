//! Scoring a dataset: 10,000 documents of 50 expected and 50 extracted records each (half
//! definitions, half relationships), the records varied the way real extractions differ from
//! the gold — other case, punctuation, a leading article, a paraphrased definition, a missed
//! record, a spurious one, a duplicate. The target: the whole set in at most 1 s.
//!
//! Run: `cargo bench -p kerf-core --bench score`

use criterion::{Criterion, criterion_group, criterion_main};
use kerf_core::Prompt;
use kerf_core::eval::{Tally, score_all};
use serde_json::{Value, json};

const ROWS: usize = 10_000;

fn gold(doc: usize, i: usize) -> Value {
    if i.is_multiple_of(2) {
        json!({"type": "definition", "entity": format!("Entity {doc}-{i}"),
               "definition": format!("The thing numbered {i} in document {doc}, described at some length")})
    } else {
        json!({"type": "relationship", "subject": format!("Entity {doc}-{}", i - 1),
               "predicate": format!("relates to {}", i % 7), "object": format!("Entity {doc}-{}", (i + 3) % 50),
               "object-entity": true})
    }
}

/// What a model extracted: 45 of the 50 in another surface form (5 missed), 2 duplicates and 3
/// inventions (5 spurious).
fn extracted(doc: usize, i: usize) -> Value {
    let mut v = gold(doc, i % 45);
    let surface = |s: &str| match i % 3 {
        0 => s.to_uppercase(),
        1 => format!("the {s}."),
        _ => format!("\"{s}\""),
    };
    if let Some(e) = v.get("entity").and_then(Value::as_str).map(surface) {
        v["entity"] = json!(e);
        v["definition"] = json!(format!("A paraphrase of definition {i}"));
    }
    if let Some(s) = v.get("subject").and_then(Value::as_str).map(surface) {
        v["subject"] = json!(s);
    }
    if i >= 47 {
        v = json!({"type": "definition", "entity": format!("Invented {doc}-{i}"), "definition": "not in the gold"});
    }
    v
}

fn bench(c: &mut Criterion) {
    let prompt = Prompt::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../prompts/agent-kg-extract.json"
    )))
    .expect("prompt");
    let m = prompt.matcher();
    let rows: Vec<(Vec<Value>, Vec<Value>)> = (0..ROWS)
        .map(|d| {
            (
                (0..50).map(|i| gold(d, i)).collect(),
                (0..50).map(|i| extracted(d, i)).collect(),
            )
        })
        .collect();
    let mut g = c.benchmark_group("score_10k_docs_50x50");
    g.sample_size(10);
    let documents: Vec<(&[Value], &[Value])> = rows
        .iter()
        .map(|(e, a)| (e.as_slice(), a.as_slice()))
        .collect();
    g.bench_function("exact_after_normalisation", |b| {
        b.iter(|| {
            let mut tally = Tally::default();
            for s in score_all(&m, &documents) {
                tally.add(&s);
            }
            let t = tally.totals();
            assert_eq!(
                (t.micro.tp, t.micro.fp, t.micro.fn_),
                (ROWS as u64 * 45, ROWS as u64 * 5, ROWS as u64 * 5)
            );
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
