//! The history at scale: list and filter over 100,000 stored runs (target ≤ 50 ms a query), and
//! what recording costs a streaming run (a batch written per flush, nothing per token).
//!
//! `cargo bench -p kerf-store` (`npm run bench:history`); figures in the README.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use kerf_core::run::{FinishReason, Usage};
use kerf_store::{Filter, NewRun, RunEnd, Status, Store};
use serde_json::json;

const RUNS: i64 = 100_000;
const DAY_MS: i64 = 86_400_000;
const START_MS: i64 = 1_787_443_200_000; // 2026-08-23: 90 days of history before the last run

/// A history of RUNS runs over 90 days: 5 prompts, 4 providers, statuses in realistic shares,
/// a ~1 KB reply each, 1% tagged.
fn populated(path: &std::path::Path) -> Store {
    let t = Arc::new(AtomicI64::new(START_MS));
    let clock = t.clone();
    let store =
        Store::open_with_clock(path, Arc::new(move || clock.load(Ordering::SeqCst))).unwrap();
    let versions: Vec<String> = (0..5)
        .map(|i| {
            store
                .put_prompt_version(
                    &format!("prompt-{i}"),
                    None,
                    "jsonl",
                    &format!("{{\"prompt\": \"Extract {{{{text}}}} ({i})\", \"response-type\": \"jsonl\"}}"),
                )
                .unwrap()
        })
        .collect();
    let inputs: Vec<String> = (0..50)
        .map(|i| {
            store
                .put_input(&json!({"text": format!("document {i}")}), &json!({}))
                .unwrap()
        })
        .collect();
    let providers = ["local", "openai", "anthropic", "gemini"];
    let reply = "{\"type\": \"definition\", \"entity\": \"DNA\", \"definition\": \"a molecule\"}\n"
        .repeat(14);
    let mut seed: u64 = 42;
    let mut rnd = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    for i in 0..RUNS {
        t.store(START_MS + i * (90 * DAY_MS / RUNS), Ordering::SeqCst);
        let r = rnd();
        let w = store
            .begin_run(&NewRun {
                prompt_version: versions[(r % 5) as usize].clone(),
                input: inputs[(r % 50) as usize].clone(),
                experiment: None,
                rerun_of: None,
                cell: None,
                provider: providers[(r / 5 % 4) as usize].into(),
                model: "model-x".into(),
                model_sha256: None,
                params: json!({"max_tokens": 512, "temperature": 0.0}),
                system: None,
                user: "Extract document".into(),
            })
            .unwrap();
        let finish = match r / 20 % 20 {
            0..=13 => FinishReason::Stop,
            14..=17 => FinishReason::Length,
            18 => FinishReason::Cancelled,
            _ => FinishReason::Error,
        };
        let id = w
            .finish(RunEnd {
                usage: Usage {
                    prompt_tokens: 500,
                    completion_tokens: 300,
                    reasoning_tokens: None,
                },
                ..RunEnd::new(finish, reply.clone())
            })
            .unwrap();
        if r % 100 == 0 {
            store.tag(id, "baseline").unwrap();
        }
    }
    store
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let store = populated(&dir.path().join("history.sqlite"));
    let size = std::fs::metadata(dir.path().join("history.sqlite")).map_or(0, |m| m.len());
    eprintln!(
        "populated {RUNS} runs in {:.1}s ({} MB)",
        started.elapsed().as_secs_f64(),
        size / 1_000_000
    );
    let last_week = START_MS + 83 * DAY_MS;
    let queries: Vec<(&str, Filter)> = vec![
        (
            "newest 30",
            Filter {
                limit: Some(30),
                ..Filter::default()
            },
        ),
        (
            "status truncated, 30",
            Filter {
                status: Some(Status::Truncated),
                limit: Some(30),
                ..Filter::default()
            },
        ),
        (
            "provider + prompt, 30",
            Filter {
                provider: Some("gemini".into()),
                prompt: Some("prompt-3".into()),
                limit: Some(30),
                ..Filter::default()
            },
        ),
        (
            "since a week, 30",
            Filter {
                since: Some(last_week),
                limit: Some(30),
                ..Filter::default()
            },
        ),
        (
            "tag, all (~1,000)",
            Filter {
                tag: Some("baseline".into()),
                ..Filter::default()
            },
        ),
        (
            "interrupted in a week, all",
            Filter {
                status: Some(Status::Interrupted),
                since: Some(last_week),
                ..Filter::default()
            },
        ),
        (
            "model substring, 30",
            Filter {
                model: Some("del-x".into()),
                limit: Some(30),
                ..Filter::default()
            },
        ),
    ];
    let mut g = c.benchmark_group("history list over 100k runs");
    for (name, f) in &queries {
        g.bench_function(*name, |b| b.iter(|| black_box(store.list(f).unwrap())));
    }
    g.bench_function("show one run", |b| {
        b.iter(|| black_box(store.run(RUNS / 2).unwrap()))
    });
    g.finish();

    // Recording while a run streams: a token's text is buffered (no write); a batch is written
    // as one transaction at most every 100 ms.
    let mut g = c.benchmark_group("recording a streaming run");
    let run = NewRun {
        prompt_version: store
            .list(&Filter {
                limit: Some(1),
                ..Filter::default()
            })
            .unwrap()[0]
            .prompt_version
            .clone(),
        input: store.run(1).unwrap().input.id,
        experiment: None,
        rerun_of: None,
        cell: None,
        provider: "local".into(),
        model: "m".into(),
        model_sha256: None,
        params: json!({}),
        system: None,
        user: "u".into(),
    };
    let mut w = store.begin_run(&run).unwrap();
    w.push("first").unwrap();
    g.bench_function("push a token (buffered)", |b| {
        b.iter(|| w.push(black_box(" token")).unwrap())
    });
    g.bench_function("flush a batch (one transaction)", |b| {
        b.iter(|| {
            w.push("{\"type\": \"definition\", \"entity\": \"DNA\"}\n")
                .unwrap();
            w.flush().unwrap()
        })
    });
    g.finish();
    drop(w);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
