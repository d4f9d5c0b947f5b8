//! Runs of the real bundled model. One at a time (a lock): parallel runs on a small machine
//! would only measure contention.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use kerf_core::{Prompt, ResponseType};
use kerf_llama::{GpuLayers, LocalConfig, LocalProvider};
use kerf_llm::{CancelToken, Constraint, Event, Finish, FinishReason, Provider, Request};
use serde_json::Map;

use crate::repo;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A run's details as the history and `--json` keep them (the shape other tools read).
fn shown(d: &kerf_llm::RunDetails) -> serde_json::Value {
    serde_json::to_value(d).unwrap()
}

fn lock() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bundled model: `KERF_TEST_MODEL`, else the data directory's copy (`kerf models fetch`).
fn model() -> PathBuf {
    let p = std::env::var_os("KERF_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            kerf_llama::models::default_model_path(&kerf_llama::models::models_dir())
        });
    assert!(
        p.is_file(),
        "the test model is missing at {}: run `kerf models fetch` (the README's test command does)",
        p.display()
    );
    p
}

fn provider() -> LocalProvider {
    LocalProvider::new(LocalConfig::new(model()))
}

fn prompt(name: &str) -> Prompt {
    Prompt::load(&repo().join("prompts").join(name)).unwrap()
}

/// The rendered request for a shipped prompt on its sample input.
fn request(p: &Prompt, max_tokens: u32, constrained: bool) -> Request {
    let input = std::fs::read_to_string(p.sample_input_path().unwrap()).unwrap();
    let mut vars = Map::new();
    vars.insert(p.file.input_variable().to_string(), input.into());
    let r = p.render(&Map::new(), &vars).unwrap();
    let mut req = Request::new(r.system.as_deref(), &r.user);
    req.max_tokens = max_tokens;
    if constrained {
        req.constraint = match p.file.response_type {
            ResponseType::Jsonl => Constraint::Jsonl(p.file.schema.clone().unwrap()),
            _ => Constraint::Json(p.file.schema.clone().unwrap()),
        };
    }
    req
}

fn run(p: &LocalProvider, req: &Request) -> (Finish, String, Vec<String>) {
    let mut text = String::new();
    let mut warnings = Vec::new();
    let finish = p
        .run_blocking(req, &CancelToken::new(), &mut |e| match e {
            Event::Text(t) => text.push_str(t),
            Event::Warning(w) => warnings.push(w.to_string()),
        })
        .unwrap();
    (finish, text, warnings)
}

#[test]
fn constrained_jsonl_of_a_oneof_union_parses_and_validates_every_time() {
    let _g = lock();
    let p = prompt("agent-kg-extract.json");
    let provider = provider();
    let mut objects = 0;
    for seed in 0..10u64 {
        let mut req = request(&p, 160, true);
        req.temperature = Some(0.8);
        req.seed = Some(seed);
        let (finish, text, _) = run(&provider, &req);
        assert_eq!(shown(&finish.details)["constraint"]["engine"], "llguidance");
        let report = p.parse(&text, &Map::new());
        // Every complete line is an object of one branch of the union; only a line the budget
        // cut off may be dropped, and only as truncated.
        for d in &report.dropped {
            assert_eq!(
                (finish.reason, d.kind.as_str()),
                (FinishReason::Length, "truncated"),
                "seed {seed}: {d:?}\n{text}"
            );
        }
        let complete_lines = text.lines().filter(|l| !l.trim().is_empty()).count()
            - usize::from(finish.reason == FinishReason::Length && !text.ends_with('\n'));
        assert_eq!(report.objects.len(), complete_lines, "seed {seed}:\n{text}");
        for o in &report.objects {
            assert!(
                o["type"] == "definition" || o["type"] == "relationship",
                "{o}"
            );
        }
        objects += report.objects.len();
    }
    assert!(objects >= 10, "ten runs yielded only {objects} objects");
}

#[test]
fn constrained_json_is_one_valid_value() {
    let _g = lock();
    let p = prompt("agent-kg-extract-array.json");
    let (finish, text, _) = run(&provider(), &request(&p, 400, true));
    assert_eq!(finish.reason, FinishReason::Stop, "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).expect("one JSON value");
    assert!(p.parser.schema().unwrap().is_valid(&value), "{text}");
    let report = p.parse(&text, &Map::new());
    assert!(report.dropped.is_empty() && !report.truncated, "{report:?}");
}

#[test]
fn a_small_budget_stops_exactly_there_and_jsonl_keeps_its_complete_lines() {
    let _g = lock();
    let provider = provider();
    let jsonl = prompt("agent-kg-extract.json");
    let array = prompt("agent-kg-extract-array.json");
    for budget in [16u32, 80] {
        let (f, text, _) = run(&provider, &request(&jsonl, budget, true));
        assert_eq!(f.reason, FinishReason::Length, "{text}");
        assert_eq!(f.usage.completion_tokens, budget);
        let report = jsonl.parse(&text, &Map::new());
        assert_eq!(report.objects.len(), text.matches('\n').count(), "{text}");
        if budget == 80 {
            assert!(
                !report.objects.is_empty(),
                "80 tokens hold a whole line:\n{text}"
            );
        }
        let (f, text, _) = run(&provider, &request(&array, budget, true));
        assert_eq!(f.reason, FinishReason::Length);
        assert_eq!(f.usage.completion_tokens, budget);
        let report = array.parse(&text, &Map::new());
        assert!(report.objects.is_empty() && report.truncated, "{text}");
    }
}

#[test]
fn cancellation_stops_within_one_token_and_the_model_is_reused() {
    let _g = lock();
    let provider = provider();
    let p = prompt("agent-kg-extract.json");
    let req = request(&p, 200, false);
    // Warm (or reuse) the model, then run again: the second run reports the reuse.
    let _ = run(&provider, &request(&p, 2, false));
    let cancel = CancelToken::new();
    let mut seen = 0u32;
    let mut at_cancel = None;
    let f = provider
        .run_blocking(&req, &cancel, &mut |e| {
            if let Event::Text(_) = e {
                seen += 1;
                if seen == 5 {
                    cancel.cancel();
                    at_cancel = Some(seen);
                }
            }
        })
        .unwrap();
    assert_eq!(f.reason, FinishReason::Cancelled);
    assert_eq!(shown(&f.details)["model_reused"], true);
    // Text events come per token (or fewer, when a character spans tokens): no token was
    // generated after the one whose text triggered the cancel.
    assert!(f.usage.completion_tokens >= 5, "{f:?}");
    assert!(f.usage.completion_tokens <= 5 + 3, "{f:?}");
    assert_eq!(seen, at_cancel.unwrap());
}

#[test]
fn bad_requests_are_clear_errors() {
    let _g = lock();
    // A context too small for the prompt: the counts are in the message.
    let mut config = LocalConfig::new(model());
    config.context = Some(64);
    let p = prompt("agent-kg-extract.json");
    let err = LocalProvider::new(config)
        .run_blocking(&request(&p, 32, false), &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "context_overflow");
    assert!(err.to_string().contains("context holds 64"), "{err}");

    // Security review, finding 12: `--max-tokens 4294967295` overflowed the context sum.
    let err = provider()
        .run_blocking(
            &request(&p, u32::MAX, false),
            &CancelToken::new(),
            &mut |_| {},
        )
        .unwrap_err();
    assert_eq!(err.code(), "context_overflow", "{err}");
    assert!(err.to_string().contains("4294967295"), "{err}");

    // A Lark grammar llguidance cannot read.
    let mut req = Request::new(None, "Say yes.");
    req.constraint = Constraint::Lark("start: ((".into());
    let err = provider()
        .run_blocking(&req, &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "constraint");

    // A model file that is not a model, and one cut short.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake.gguf");
    std::fs::write(&fake, "not a model at all").unwrap();
    let err = LocalProvider::new(LocalConfig::new(fake))
        .run_blocking(&Request::new(None, "hi"), &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("not a GGUF"), "{err}");
    let cut = dir.path().join("cut.gguf");
    let bytes = std::fs::read(model()).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = LocalProvider::new(LocalConfig::new(cut))
        .run_blocking(&Request::new(None, "hi"), &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("truncated GGUF"), "{err}");

    // A model larger than this machine's memory: refused from its size, before llama.cpp maps it.
    let huge = dir.path().join("huge.gguf");
    crate::gguf::sparse_gguf(&huge, 1 << 40);
    let err = LocalProvider::new(LocalConfig::new(huge))
        .run_blocking(&Request::new(None, "hi"), &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "model");
    assert!(
        err.to_string().contains("too large for this machine"),
        "{err}"
    );
}

/// A schema llguidance refuses (it does not implement `uniqueItems`) still constrains the run:
/// through llama.cpp's GBNF sampler, with a warning that says which engine and why.
#[test]
fn a_schema_llguidance_rejects_falls_back_to_gbnf_and_says_why() {
    let _g = lock();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "topic": {"type": "string", "maxLength": 40},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3, "uniqueItems": true}
        },
        "required": ["topic", "tags"],
        "additionalProperties": false
    });
    let mut req = Request::new(
        Some("Reply with JSON only."),
        "Describe photosynthesis as a topic and up to three tags.",
    );
    req.max_tokens = 120;
    req.constraint = Constraint::Json(schema.clone());
    let (f, text, warnings) = run(&provider(), &req);
    let details = shown(&f.details);
    let c = &details["constraint"];
    assert_eq!(c["engine"], "gbnf", "{c}");
    assert!(c["why"].as_str().unwrap().contains("uniqueItems"), "{c}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("llguidance cannot compile this schema") && w.contains("GBNF")),
        "{warnings:?}"
    );
    assert_eq!(f.reason, FinishReason::Stop, "{text}");
    let value: serde_json::Value = serde_json::from_str(&text).expect("one JSON value");
    // GBNF cannot express uniqueness either; everything else in the schema holds.
    let mut without_unique = schema;
    without_unique["properties"]["tags"]
        .as_object_mut()
        .unwrap()
        .remove("uniqueItems");
    let schema = kerf_core::schema::CompiledSchema::compile(&without_unique, "test").unwrap();
    assert!(schema.is_valid(&value), "{text} does not match the schema");
}

#[test]
fn gpu_offload_reports_what_happened() {
    let _g = lock();
    let devices = kerf_llama::devices().unwrap();
    assert!(devices.iter().any(|d| d.kind == "cpu"), "{devices:?}");
    let has_gpu = devices.iter().any(|d| d.kind == "gpu" || d.kind == "igpu");
    let mut config = LocalConfig::new(model());
    config.gpu_layers = GpuLayers::All;
    let (f, _, warnings) = run(&LocalProvider::new(config), &Request::new(None, "Hi"));
    let details = shown(&f.details);
    let offload = &details["offload"];
    assert_eq!(offload["requested"], "all");
    if has_gpu {
        assert!(
            offload["offloaded_layers"].as_u64().unwrap() > 0,
            "{offload}"
        );
    } else {
        // Asked for the GPU on a machine without one: said so, ran on the CPU.
        assert_eq!(offload["offloaded_layers"], 0);
        assert_eq!(offload["device"], "CPU");
        assert!(
            warnings.iter().any(|w| w.contains("running on the CPU")),
            "{warnings:?}"
        );
    }
}

#[test]
fn gbnf_constraint_also_holds_and_costs_more() {
    let _g = lock();
    let p = prompt("agent-kg-extract.json");
    let mut config = LocalConfig::new(model());
    config.prefer_gbnf = true;
    let (f, text, _) = run(&LocalProvider::new(config), &request(&p, 60, true));
    assert_eq!(shown(&f.details)["constraint"]["engine"], "gbnf");
    let report = p.parse(&text, &Map::new());
    for d in &report.dropped {
        assert_eq!(d.kind.as_str(), "truncated", "{d:?}\n{text}");
    }
    assert!(f.timings.constraint_seconds > 0.0);
}

#[test]
fn the_models_tokenizer_tiles_the_text() {
    let text = "{\"type\": \"definition\", \"entity\": \"chlorophyll\", \"definition\": \"a green pigment — naïve café\"}\n";
    let b = kerf_llama::token_boundaries(&model(), text).unwrap();
    assert_eq!(*b.last().unwrap(), text.len());
    assert!(b.windows(2).all(|w| w[0] < w[1]));
    assert!(b.len() > 10 && b.len() < text.len());
}
