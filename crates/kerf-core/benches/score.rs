//! Scoring a dataset: 10,000 documents of 50 expected and 50 extracted records each (half
//! definitions, half relationships), the records varied the way real extractions differ from
//! the gold — other case, punctuation, a leading article, a paraphrased definition, a missed
//! record, a spurious one, a duplicate. The target: the whole set in at most 1 s.
//!
//! Then the hostile documents of issue 36 (item 9), each to score in under 1 s and 200 MB:
//! one invented 3.6 KB name grounded in a 12 KB document, 5,000 and 10,000 identical records on
//! both sides, and 10,000 × 10,000 distinct names matched fuzzily.
//!
//! Run: `cargo bench -p kerf-core --bench score`
//!
//! And the dense groups of issue 58, each within 1 s and 200 MB: 2,000 numbered names found
//! exactly at `fuzzy` 0 and 0.8, 10,000 at 0.8; and 2,000 names with no exact pair at `fuzzy: 0`
//! (one group of 4 million candidate pairs, solved within the flow's bound).
//!
//! One hostile case once, for its peak memory (run the bench binary itself under
//! `/usr/bin/time -v`, not cargo): `KERF_SCORE_ONCE=grounding|identical-5000|identical-10000|fuzzy-10000|numbered-2000-fuzzy-0|numbered-2000-fuzzy-0.8|numbered-10000-fuzzy-0.8|no-exact-2000-fuzzy-0`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use kerf_core::Prompt;
use kerf_core::eval::{Grounding, MatchSpec, Matcher, Tally, score, score_all};
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

fn prompt() -> Prompt {
    Prompt::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../prompts/agent-kg-extract.json"
    )))
    .expect("prompt")
}

fn bench(c: &mut Criterion) {
    let m = prompt().matcher();
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

/// xorshift64: the hostile documents are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tor", "vas", "el", "qui", "dra", "sen", "po", "lu", "bar", "nif",
    "ost", "gre", "ya", "zum", "che", "wil", "fa", "dor", "im", "ser", "ta", "vo", "nor", "pix",
    "hal", "ju", "cle", "mon", "ri", "sta", "bu", "gan", "ex", "thi", "ol", "pra",
];

/// A made-up word of two to four syllables.
fn word(rng: &mut Rng) -> String {
    (0..2 + rng.below(3))
        .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
        .collect()
}

/// A made-up name of one to three words.
fn name(rng: &mut Rng) -> String {
    (0..1 + rng.below(3))
        .map(|_| {
            let mut w = word(rng);
            w[..1].make_ascii_uppercase();
            w
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The grounding case: a 12 KB document of sentences over a 400-word vocabulary, and one
/// extracted definition whose name is 3.6 KB of the same words in another order (so no cheap
/// letter count tells it apart from the text): it is in the input neither exactly nor nearly.
fn grounding_case() -> (Matcher, String, Vec<Value>) {
    let mut rng = Rng(0x5eed_0001);
    let vocabulary: Vec<String> = (0..400).map(|_| word(&mut rng)).collect();
    let mut document = String::new();
    while document.len() < 12_000 {
        let n = 6 + rng.below(10);
        let sentence: Vec<&str> = (0..n)
            .map(|_| vocabulary[rng.below(vocabulary.len())].as_str())
            .collect();
        document.push_str(&sentence.join(" "));
        document.push_str(". ");
    }
    let mut invented = String::new();
    while invented.len() < 3_600 {
        if !invented.is_empty() {
            invented.push(' ');
        }
        invented.push_str(&vocabulary[rng.below(vocabulary.len())]);
    }
    let actual = vec![json!({"type": "definition", "entity": invented, "definition": "made up"})];
    (prompt().matcher(), document, actual)
}

fn run_grounding(m: &Matcher, document: &str, actual: &[Value]) {
    let g = Grounding::new(m, document);
    assert_eq!(
        g.ungrounded(m, actual),
        [0],
        "the invented name is not in the text"
    );
}

/// `n` copies of one record on each side (a model repeating itself, a gold file with repeats).
fn identical_case(n: usize) -> (Matcher, Vec<Value>, Vec<Value>) {
    let expected =
        vec![json!({"type": "definition", "entity": "Stroma", "definition": "fluid"}); n];
    let actual =
        vec![json!({"type": "definition", "entity": "the stroma", "definition": "a fluid"}); n];
    (prompt().matcher(), expected, actual)
}

fn run_identical(m: &Matcher, expected: &[Value], actual: &[Value]) {
    let s = score(m, expected, actual);
    assert_eq!(s.counts.tp as usize, expected.len());
}

/// 10,000 distinct made-up names expected and 10,000 extracted, matched at `fuzzy` 0.85: half
/// the extracted ones are gold names with one letter changed (a pair at 0.85 or above when the
/// name is long enough), the other half names of their own.
fn fuzzy_case() -> (Matcher, Vec<Value>, Vec<Value>) {
    let mut rng = Rng(0x5eed_0003);
    let mut seen = HashSet::new();
    let mut fresh = |rng: &mut Rng| loop {
        let n = name(rng);
        if seen.insert(n.to_lowercase()) {
            return n;
        }
    };
    let gold: Vec<String> = (0..10_000).map(|_| fresh(&mut rng)).collect();
    let mut extracted = Vec::with_capacity(10_000);
    for (i, g) in gold.iter().enumerate() {
        if i % 2 == 0 {
            let mut chars: Vec<char> = g.chars().collect();
            let at = rng.below(chars.len());
            chars[at] = if chars[at] == 'x' { 'y' } else { 'x' };
            extracted.push(chars.into_iter().collect::<String>());
        } else {
            extracted.push(fresh(&mut rng));
        }
    }
    let def = |n: &String| json!({"type": "definition", "entity": n, "definition": "x"});
    let p = prompt();
    let spec = MatchSpec {
        fuzzy: Some(0.85),
        ..MatchSpec::default()
    };
    let m = Matcher::new(&spec, p.parser.item_schema());
    (
        m,
        gold.iter().map(def).collect(),
        extracted.iter().map(def).collect(),
    )
}

fn run_fuzzy(m: &Matcher, expected: &[Value], actual: &[Value]) -> u64 {
    let s = score(m, expected, actual);
    assert!(s.counts.tp > 0 && s.counts.tp <= 5_000, "{:?}", s.counts);
    s.counts.tp
}

/// The dense groups of issue 58: `n` distinct names found exactly on both sides at `fuzzy`
/// (0: every pair a candidate), as numbered records (`Record number 17`: each within a letter
/// or two of its neighbours).
fn dense_case(n: usize, fuzzy: f64) -> (Matcher, Vec<Value>, Vec<Value>) {
    let records: Vec<Value> = (0..n)
        .map(|i| json!({"type": "definition", "entity": format!("Record number {i}"), "definition": "x"}))
        .collect();
    let p = prompt();
    let spec = MatchSpec {
        fuzzy: Some(fuzzy),
        ..MatchSpec::default()
    };
    (
        Matcher::new(&spec, p.parser.item_schema()),
        records.clone(),
        records,
    )
}

/// 2,000 distinct names on each side, none found exactly, at `fuzzy: 0` (every pair a
/// candidate, one group of 4 million pairs): the bound of the flow, not the optimum.
fn no_exact_case() -> (Matcher, Vec<Value>, Vec<Value>) {
    let (m, expected, _) = dense_case(2_000, 0.0);
    let actual = (0..2_000)
        .map(|i| json!({"type": "definition", "entity": format!("Other thing {i}"), "definition": "x"}))
        .collect();
    (m, expected, actual)
}

fn hostile(c: &mut Criterion) {
    let mut g = c.benchmark_group("score_hostile");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    let (m, document, actual) = grounding_case();
    g.bench_function("ground_invented_3.6kb_name_in_12kb", |b| {
        b.iter(|| run_grounding(&m, &document, &actual))
    });
    for n in [5_000, 10_000] {
        let (m, expected, actual) = identical_case(n);
        g.bench_function(format!("identical_{n}x{n}"), |b| {
            b.iter(|| run_identical(&m, &expected, &actual))
        });
    }
    let (m, expected, actual) = fuzzy_case();
    g.bench_function("fuzzy_10k_x_10k_distinct_names", |b| {
        b.iter(|| run_fuzzy(&m, &expected, &actual))
    });
    for (n, fuzzy) in [(2_000, 0.0), (2_000, 0.8), (10_000, 0.8)] {
        let (m, expected, actual) = dense_case(n, fuzzy);
        g.bench_function(format!("numbered_{n}_fuzzy_{fuzzy}"), |b| {
            b.iter(|| run_identical(&m, &expected, &actual))
        });
    }
    g.finish();
}

/// One hostile case, once, timed (for `/usr/bin/time -v`).
fn once(case: &str) {
    let start = Instant::now();
    match case {
        "grounding" => {
            let (m, document, actual) = grounding_case();
            let start = Instant::now();
            run_grounding(&m, &document, &actual);
            eprintln!("{case}: {:?}", start.elapsed());
        }
        "identical-5000" | "identical-10000" => {
            let n = if case == "identical-5000" {
                5_000
            } else {
                10_000
            };
            let (m, expected, actual) = identical_case(n);
            let start = Instant::now();
            run_identical(&m, &expected, &actual);
            eprintln!("{case}: {:?}", start.elapsed());
        }
        "fuzzy-10000" => {
            let (m, expected, actual) = fuzzy_case();
            let start = Instant::now();
            let tp = run_fuzzy(&m, &expected, &actual);
            eprintln!("{case}: {:?} ({tp} matched)", start.elapsed());
        }
        "numbered-2000-fuzzy-0" | "numbered-2000-fuzzy-0.8" | "numbered-10000-fuzzy-0.8" => {
            let (n, fuzzy) = match case {
                "numbered-2000-fuzzy-0" => (2_000, 0.0),
                "numbered-2000-fuzzy-0.8" => (2_000, 0.8),
                _ => (10_000, 0.8),
            };
            let (m, expected, actual) = dense_case(n, fuzzy);
            let start = Instant::now();
            run_identical(&m, &expected, &actual);
            eprintln!("{case}: {:?}", start.elapsed());
        }
        "no-exact-2000-fuzzy-0" => {
            let (m, expected, actual) = no_exact_case();
            let start = Instant::now();
            let s = score(&m, &expected, &actual);
            eprintln!("{case}: {:?} ({} matched)", start.elapsed(), s.counts.tp);
        }
        other => {
            eprintln!(
                "unknown case {other:?}: grounding, identical-5000, identical-10000, fuzzy-10000, numbered-2000-fuzzy-0, numbered-2000-fuzzy-0.8, numbered-10000-fuzzy-0.8, no-exact-2000-fuzzy-0"
            );
            std::process::exit(2);
        }
    }
    eprintln!("with setup: {:?}", start.elapsed());
}

criterion_group!(benches, bench, hostile);

fn main() {
    if let Ok(case) = std::env::var("KERF_SCORE_ONCE") {
        once(&case);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
