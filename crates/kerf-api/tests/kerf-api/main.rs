//! The use cases without a window or a terminal: over `Store::in_memory()`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod experiments;
#[path = "../../../kerf-llm/tests/kerf-llm/isolation.rs"]
mod isolation;
mod providers;
mod runs;
#[path = "../../../kerf-llm/tests/kerf-llm/server.rs"]
mod server;
mod sides;
mod workbench;

use kerf_api::Code;
use kerf_store::{NewRun, RunEnd, Store};
use serde_json::json;

#[test]
fn every_code_round_trips_through_its_name_and_serializes_as_it() {
    for &c in Code::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), json!(c.as_str()));
    }
    let e: kerf_api::ApiError = kerf_store::Error::NotFound {
        what: "run",
        id: "9".into(),
    }
    .into();
    assert_eq!(e.code, Code::NotFound);
    assert_eq!(
        serde_json::to_value(&e).unwrap(),
        json!({"code": "not_found", "message": "run 9 is not in the history"})
    );
}

/// A run of `prompt` on the input `doc` on the local model, about to start.
fn new_run(store: &Store, prompt: &str, params: serde_json::Value) -> NewRun {
    NewRun {
        prompt_version: store
            .put_prompt_version("kg", None, "jsonl", prompt)
            .unwrap(),
        input: store
            .put_input(&json!({"text": "doc"}), &json!({}))
            .unwrap(),
        experiment: None,
        rerun_of: None,
        cell: None,
        provider: "local".into(),
        model: "m.gguf".into(),
        model_sha256: None,
        params,
        system: None,
        user: "u".into(),
    }
}

fn stored(store: &Store, prompt: &str, params: serde_json::Value, raw: &str) -> i64 {
    let loaded = kerf_core::PromptFile::from_json_str(prompt, "p").unwrap();
    let parsed = kerf_core::Prompt::compile(loaded.file, "p")
        .unwrap()
        .parse(raw, &Default::default());
    let w = store.begin_run(&new_run(store, prompt, params)).unwrap();
    w.finish(RunEnd {
        report: Some(std::borrow::Cow::Owned(parsed)),
        ..RunEnd::new(kerf_llm::FinishReason::Stop, raw)
    })
    .unwrap()
}

#[test]
fn a_diff_names_the_prompt_change_the_parameters_and_the_objects() {
    let store = Store::in_memory().unwrap();
    let p1 = r#"{"prompt": "Extract {{text}}", "response-type": "jsonl"}"#;
    let p2 = r#"{"prompt": "Extract every entity in {{text}}", "response-type": "jsonl"}"#;
    let a = stored(
        &store,
        p1,
        json!({"max_tokens": 64, "argv": ["--x"]}),
        "{\"type\": \"d\", \"entity\": \"DNA\", \"definition\": \"a molecule\"}\n{\"type\": \"d\", \"entity\": \"RNA\", \"definition\": \"a copy\"}\n",
    );
    let b = stored(
        &store,
        p2,
        json!({"max_tokens": 128, "argv": ["--y"]}),
        "{\"type\": \"d\", \"entity\": \"DNA\", \"definition\": \"the genetic molecule\"}\n{\"type\": \"d\", \"entity\": \"RNA\", \"definition\": \"a copy\"}\n{\"type\": \"d\", \"entity\": \"cell\", \"definition\": \"a unit\"}\n",
    );
    let d = kerf_api::history::diff(&store, a, b).unwrap();
    assert!(!d.prompt.same);
    assert!(
        d.prompt
            .diff
            .as_ref()
            .unwrap()
            .contains("+{\"prompt\": \"Extract every entity in {{text}}\""),
        "{:?}",
        d.prompt.diff
    );
    assert!(d.input.same);
    assert_eq!(d.params.len(), 1, "argv is the CLI's own: {:?}", d.params);
    assert_eq!(
        (d.params[0].name.as_str(), &d.params[0].a, &d.params[0].b),
        ("max_tokens", &json!(64), &json!(128))
    );
    assert_eq!(d.objects.unchanged, 1);
    assert_eq!(d.objects.changed.len(), 1);
    assert_eq!(
        d.objects.added,
        vec![json!({"type": "d", "entity": "cell", "definition": "a unit"})]
    );
    assert_eq!((d.a.objects, d.b.objects), (Some(2), Some(3)));
    let missing = kerf_api::history::diff(&store, a, 99).unwrap_err();
    assert_eq!(missing.code, Code::NotFound);
}

/// The committed TypeScript bindings are what the Rust types generate. After changing a wire
/// type: `KERF_BLESS=1 cargo test -p kerf-api bindings` (never run in CI).
#[test]
fn bindings_match_the_rust_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/ipc/bindings");
    let bless = std::env::var_os("KERF_BLESS").is_some();
    let mut drifted = Vec::new();
    let generated = kerf_api::bindings::bindings().unwrap();
    // A declaration no Rust type generates any more is drift too: the UI could still import it.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !generated.iter().any(|(n, _)| *n == name) {
            drifted.push(format!("{name} (no longer generated)"));
        }
    }
    for (name, text) in generated {
        let path = dir.join(&name);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            drifted.push(name);
        }
    }
    assert!(
        drifted.is_empty(),
        "ui/src/ipc/bindings drifted from the Rust wire types: {drifted:?}; run `KERF_BLESS=1 cargo test -p kerf-api bindings` and commit"
    );
}

#[test]
fn wire_types_serialize_as_their_bindings_say() {
    let store = Store::in_memory().unwrap();
    let id = stored(
        &store,
        r#"{"prompt": "{{text}}", "response-type": "jsonl"}"#,
        json!({"max_tokens": 9}),
        "{\"a\": 1}\n",
    );
    let row: kerf_api::history::wire::RunRow =
        store.list(&Default::default()).unwrap().remove(0).into();
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(v["id"], id);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["maxTokens"], 9);
    assert_eq!(v["promptVersion"].as_str().unwrap().len(), 64);
    let m: kerf_api::runs::wire::RunMessage = kerf_api::runs::RunEvent::Text("hi").into();
    assert_eq!(
        serde_json::to_value(m).unwrap(),
        json!({"kind": "text", "text": "hi"})
    );
}

/// Issue 18: one typed `RunParams` is what the history keeps. Every setting comes back as it
/// went in, and a stored key of the wrong shape is an error naming it, not a default.
#[test]
fn run_params_round_trip_through_the_history_every_setting_included() {
    use kerf_api::runs::{RunParams, RunSettings};
    let params = RunParams {
        settings: RunSettings {
            provider: "srv".into(),
            model: Some("gpt-x".into()),
            structured: Some("json_schema".parse().unwrap()),
            temperature: Some(0.7),
            top_p: Some(0.9),
            reasoning_effort: Some(kerf_llm::ReasoningEffort::Low),
            thinking_budget: Some(256),
            seed: Some(42),
            stop: vec!["\n\n".into(), "END".into()],
            gpu_layers: "12".parse().unwrap(),
            main_gpu: Some(1),
            split_mode: Some(kerf_llama::SplitMode::Row),
            threads: Some(3),
            flash_attn: kerf_api::runs::FlashAttn::Off,
            context: Some(4096),
            chat_template: Some("chatml".into()),
            gbnf: true,
            max_requests: 4,
            max_run_tokens: 9_000,
        },
        max_tokens: 777,
        constrain: false,
    };
    let stored = params.to_stored();
    assert_eq!(stored["params_version"], 1);
    assert_eq!(stored["temperature"], 0.7, "f32 settings are kept as typed");
    assert_eq!(
        RunParams::from_stored(&stored, "srv", "gpt-x-2026").unwrap(),
        params
    );
    let mut bad = stored.clone();
    bad["top_p"] = json!("high");
    let e = RunParams::from_stored(&bad, "srv", "m").unwrap_err();
    assert_eq!(e.code, Code::StoreCorrupt);
    assert!(e.message.contains("`top_p`"), "{}", e.message);
}

/// Runs recorded before `RunParams` are read through a converter: the CLI's old `params` (with
/// the two settings only its `argv` kept), the window's, and the committed v1 fixture's.
#[test]
fn run_params_of_runs_recorded_before_them() {
    use kerf_api::runs::RunParams;
    let cli = json!({"max_tokens": 96, "constrain": "none", "temperature": 0.5, "top_p": 0.8,
        "seed": 7, "stop": ["X"], "structured": null, "gpu_layers": "all", "threads": 2,
        "context": 2048, "flash_attn": "on", "gbnf": false, "max_requests": 3,
        "max_run_tokens": 5000,
        "argv": ["--provider", "local", "--model", "/m/a.gguf", "--main-gpu", "1",
                 "--chat-template", "llama3", "--temperature", "0.5"]});
    let p = RunParams::from_stored(&cli, "local", "/m/a.gguf").unwrap();
    assert_eq!((p.max_tokens, p.constrain), (96, false));
    let s = &p.settings;
    assert_eq!(s.model.as_deref(), Some("/m/a.gguf"));
    assert_eq!(
        (s.temperature, s.top_p, s.seed),
        (Some(0.5), Some(0.8), Some(7))
    );
    assert_eq!(s.stop, vec!["X".to_string()]);
    assert_eq!(
        (s.threads, s.context, s.flash_attn),
        (Some(2), Some(2048), kerf_api::runs::FlashAttn::On)
    );
    assert_eq!(
        (s.main_gpu, s.chat_template.as_deref()),
        (Some(1), Some("llama3"))
    );
    assert_eq!((s.max_requests, s.max_run_tokens), (3, 5000));

    // Before the split mode was kept, every run stored `main_gpu: 0` whether or not it was
    // asked for: read as not asked (a GPU named would now turn split mode `none` on).
    let v1 = json!({"params_version": 1, "max_tokens": 10, "constrain": "none", "main_gpu": 0});
    let p = RunParams::from_stored(&v1, "local", "").unwrap();
    assert_eq!((p.settings.main_gpu, p.settings.split_mode), (None, None));
    let v1 = json!({"params_version": 1, "max_tokens": 10, "constrain": "none", "main_gpu": 2});
    let p = RunParams::from_stored(&v1, "local", "").unwrap();
    assert_eq!(p.settings.main_gpu, Some(2));

    // The window's runs kept five settings and no argv; the rest are today's defaults.
    let window = json!({"max_tokens": 200, "constrain": "auto", "temperature": 0.3, "seed": null,
        "gpu_layers": "none"});
    let p = RunParams::from_stored(&window, "srv", "gpt-4o-mini").unwrap();
    assert_eq!(p.settings.provider, "srv");
    assert_eq!(p.settings.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(
        (p.max_tokens, p.constrain, p.settings.temperature),
        (200, true, Some(0.3))
    );

    // The oldest committed history file.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v1.sqlite");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../kerf-store/tests/kerf-store/fixtures/v1.sqlite"),
        &copy,
    )
    .unwrap();
    let store = Store::open(&copy).unwrap();
    let rec = store.run(1).unwrap();
    let p = RunParams::from_stored(&rec.params, &rec.summary.provider, &rec.summary.model).unwrap();
    assert_eq!(p.max_tokens, 64);
    assert_eq!(p.settings.model.as_deref(), Some("/models/m.gguf"));
    assert_eq!(p.settings.temperature, Some(0.0));
}

/// Issue 18: codes come from the lower crates by variant (an exhaustive match, no lookup by name
/// falling back to `internal`), and each is spelled as the crate itself prints it.
#[test]
fn every_lower_error_has_its_own_code_spelled_as_its_crate_prints_it() {
    let s = String::new;
    let core = [
        kerf_core::Error::io("f", std::io::Error::other("x")),
        kerf_core::Error::Utf8 {
            place: s(),
            offset: 0,
        },
        kerf_core::Error::Json {
            place: s(),
            line: 1,
            column: 1,
            message: s(),
        },
        kerf_core::Error::PromptFile {
            place: s(),
            message: s(),
        },
        kerf_core::Error::Schema {
            place: s(),
            pointer: s(),
            message: s(),
        },
        kerf_core::Error::TemplateSyntax {
            name: s(),
            line: None,
            message: s(),
        },
        kerf_core::Error::TemplateUndefined {
            name: s(),
            line: None,
            variable: s(),
        },
        kerf_core::Error::TemplateRender {
            name: s(),
            line: None,
            message: s(),
        },
        kerf_core::Error::Import {
            place: s(),
            message: s(),
        },
        kerf_core::Error::Export {
            place: s(),
            target: s(),
            message: s(),
        },
        kerf_core::Error::Usage(s()),
        kerf_core::Error::Cancelled,
    ];
    for e in &core {
        assert_eq!(Code::from(e).as_str(), e.code(), "{e:?}");
    }
    let llm = [
        kerf_llm::Error::Unavailable(s()),
        kerf_llm::Error::Model {
            path: s(),
            message: s(),
        },
        kerf_llm::Error::Constraint(s()),
        kerf_llm::Error::ContextOverflow {
            prompt_tokens: 1,
            max_tokens: 1,
            context: 1,
        },
        kerf_llm::Error::Request(s()),
        kerf_llm::Error::Engine(s()),
        kerf_llm::Error::Http {
            status: 500,
            message: s(),
        },
        kerf_llm::Error::Timeout(s()),
        kerf_llm::Error::Network(s()),
        kerf_llm::Error::Auth(s()),
        kerf_llm::Error::Protocol(s()),
        kerf_llm::Error::Config(s()),
        kerf_llm::Error::Cancelled,
    ];
    for e in &llm {
        assert_eq!(Code::from(e).as_str(), e.code(), "{e:?}");
    }
    let store = [
        kerf_store::Error::Newer {
            path: s(),
            found: 9,
            known: 1,
        },
        kerf_store::Error::Corrupt {
            path: s(),
            message: s(),
        },
        kerf_store::Error::Full {
            path: s(),
            message: s(),
        },
        kerf_store::Error::Io {
            path: s(),
            message: s(),
        },
        kerf_store::Error::NotFound {
            what: "run",
            id: s(),
        },
        kerf_store::Error::Sqlite {
            path: s(),
            message: s(),
        },
    ];
    for e in &store {
        assert_eq!(Code::from(e).as_str(), e.code(), "{e:?}");
    }
}

/// Issue 18, item 4: the store marks a dead process's run interrupted and keeps its text; the
/// history's opener parses that text with the prompt version the run ran (the store compiles no
/// prompt), once, and a later open leaves the report alone.
#[test]
fn a_run_whose_process_died_is_parsed_with_its_prompt_when_the_history_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let prompt = r#"{"prompt": "Extract {{text}}", "response-type": "jsonl", "schema": {"type": "object",
        "required": ["entity"], "properties": {"entity": {"type": "string"}}}}"#;
    let store = kerf_api::history::open(&path).unwrap();
    let mut w = store
        .begin_run(&new_run(&store, prompt, json!({})))
        .unwrap();
    w.push("{\"entity\": \"DNA\"}\n{\"name\": \"x\"}\n{\"ent")
        .unwrap();
    let id = w.id();
    // The process dies: no end is written and its owner lock goes with the store.
    std::mem::forget(w);
    drop(store);

    let store = kerf_api::history::open(&path).unwrap();
    let run = store.run(id).unwrap();
    assert_eq!(run.summary.status, kerf_store::Status::Interrupted);
    assert_eq!(run.raw, "{\"entity\": \"DNA\"}\n{\"name\": \"x\"}\n{\"ent");
    assert_eq!(run.summary.objects, Some(1), "what arrived is parsed");
    assert_eq!(
        run.summary.dropped,
        Some(2),
        "the object the schema refuses and the cut one"
    );
    assert_eq!(run.summary.truncated, Some(true));
    let report = run.report.unwrap();
    assert_eq!(report.objects, vec![json!({"entity": "DNA"})]);
    assert!(store.runs_without_report().unwrap().is_empty());
    drop(store);
    let again = kerf_api::history::open(&path).unwrap();
    assert_eq!(again.run(id).unwrap().report, Some(report));
}
