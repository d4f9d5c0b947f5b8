//! Experiments from the use-case layer (no terminal, no window): every plan kind through the one
//! cell runner on a scripted provider, in milliseconds; the limits a plan is held to, refused
//! with nothing stored; the desktop's Compare running its cells at once against a loopback
//! server; one prompt version for a file whichever front end runs it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kerf_api::compare::{self, ConstrainMode, wire::CompareInput};
use kerf_api::eval::suites::Verdict;
use kerf_api::eval::wire::EvalInput;
use kerf_api::eval::{self, Pace, Plan};
use kerf_api::experiments::plan::{Allowance, MAX_CONCURRENCY, MAX_REPEAT};
use kerf_api::experiments::{ExperimentKind, ExperimentSpec, Subject};
use kerf_api::runs::wire::RunOptions;
use kerf_api::runs::{Chosen, RunParams, RunSettings};
use kerf_api::workbench::Workbench;
use kerf_api::{ApiError, Code};
use kerf_core::eval::dataset::{self, Dataset};
use kerf_llm::CancelToken;
use kerf_llm::scripted::{Reply, Scripted};
use kerf_store::Store;

use crate::server::{Act, Latch, Server};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn subject(name: &str) -> Subject {
    Subject::load(&repo().join("prompts").join(name)).unwrap()
}

/// The shipped dataset's first `rows` rows.
fn rows(rows: usize) -> Dataset {
    let mut d = dataset::load(&repo().join("datasets/knowledge-graph.jsonl")).unwrap();
    d.rows.truncate(rows);
    d
}

fn scripted(replies: usize) -> Chosen {
    let reply = r#"{"type":"definition","entity":"Photosynthesis","definition":"The process by which green plants turn light energy into chemical energy"}"#;
    Chosen::Scripted(Box::new(Scripted::new(
        (0..replies).map(|_| Reply::text(reply, 16)),
    )))
}

/// Each test's name and verdict, in the report's order.
fn verdicts(report: &kerf_api::eval::suites::TestReport) -> Vec<(&str, Verdict)> {
    report
        .tests
        .iter()
        .map(|r| (r.name.as_str(), r.verdict))
        .collect()
}

fn params() -> RunParams {
    RunParams {
        settings: RunSettings {
            provider: "scripted".into(),
            ..RunSettings::default()
        },
        max_tokens: 0,
        constrain: false,
    }
}

fn plan(budgets: &[u32], repeat: u32, concurrency: usize, allowed: Allowance) -> Plan<'_> {
    Plan {
        budgets,
        constrain: ConstrainMode::None,
        repeat,
        cache: false,
        concurrency,
        adaptive: false,
        allowed,
        vars: &[],
        chunking: None,
    }
}

fn begin(store: &Store, p: &Plan<'_>, provider: &Chosen) -> kerf_api::Result<eval::Eval> {
    eval::begin(
        store,
        rows(2),
        vec![subject("agent-kg-extract.json")],
        p,
        params(),
        std::slice::from_ref(provider),
        &mut |_| {},
    )
}

#[test]
fn an_eval_runs_through_the_cell_runner_and_knows_its_size_first() {
    let store = Store::in_memory().unwrap();
    let provider = scripted(8);
    let mut announced = Vec::new();
    let e = eval::begin(
        &store,
        rows(2),
        vec![
            subject("agent-kg-extract.json"),
            subject("agent-kg-extract-array.json"),
        ],
        &plan(&[64, 256], 1, 4, Allowance::default()),
        params(),
        std::slice::from_ref(&provider),
        &mut |size| announced.push(size.clone()),
    )
    .unwrap();
    // Announced once, before a request: 2 prompts × 2 budgets × 2 rows.
    let Chosen::Scripted(s) = &provider else {
        unreachable!()
    };
    assert_eq!(announced.len(), 1);
    let size = &announced[0];
    assert_eq!(size.kind, ExperimentKind::Eval);
    assert_eq!((size.cells, size.requests), (8, 8));
    assert_eq!(size.output_tokens_max, 4 * (64 + 256));
    assert!(size.input_tokens_max > 8 * 200, "{size:?}");
    assert_eq!(size.cost_max_usd, None, "a scripted provider has no price");
    assert!(s.requests().is_empty(), "nothing sent while planning");
    assert_eq!(e.spec.plan.as_ref(), Some(size), "the spec keeps the plan");
    let mut last = None;
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&provider),
        Pace {
            concurrency: 4,
            adaptive: false,
            retry_errors: false,
            live: false,
        },
        &CancelToken::new(),
        &mut |p| last = Some(p.clone()),
    )
    .unwrap();
    let last = last.unwrap();
    assert_eq!((last.done, last.total, last.failed), (8, 8, 0));
    assert_eq!(s.requests().len(), 8);
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    assert_eq!(report.cells.len(), 8);
    assert!(report.cells.iter().all(|c| c.run.is_some()));
    // The JSONL prompt found, at each budget, the one record the reply holds for the
    // photosynthesis row; the array prompt's parser took nothing from a JSONL reply.
    let tp: Vec<(&str, u32, u64)> = report
        .summary
        .iter()
        .map(|l| (l.prompt.as_str(), l.max_tokens, l.micro.tp))
        .collect();
    assert_eq!(
        tp,
        [
            ("agent-kg-extract", 64, 1),
            ("agent-kg-extract", 256, 1),
            ("agent-kg-extract-array", 64, 0),
            ("agent-kg-extract-array", 256, 0),
        ]
    );
}

#[test]
fn a_compare_and_a_prompts_tests_run_through_the_same_runner() {
    // Compare: 2 prompts × 3 budgets, on the scripted provider, recorded as one experiment.
    let store = Store::in_memory().unwrap();
    let provider = scripted(6);
    let contenders: Vec<compare::Contender> =
        ["agent-kg-extract.json", "agent-kg-extract-array.json"]
            .iter()
            .map(|name| {
                let subject = subject(name);
                let rendering = kerf_api::runs::Rendering::of_input(
                    &subject.prompt,
                    "Photosynthesis turns light into chemical energy.",
                    &serde_json::Map::new(),
                )
                .unwrap();
                compare::Contender::new(subject, rendering)
            })
            .collect();
    let settings = params().settings;
    let job = compare::CompareJob {
        contenders: &contenders,
        budgets: &[256, 64, 128],
        constrain: ConstrainMode::None,
        settings: &settings,
        concurrency: 3,
        allowed: Allowance::default(),
    };
    let mut sizes = Vec::new();
    let compared = compare::compare(
        Some(&store),
        &job,
        std::slice::from_ref(&provider),
        &CancelToken::new(),
        &mut |s| sizes.push(s.clone()),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(sizes.len(), 1);
    assert_eq!(
        (sizes[0].kind, sizes[0].cells),
        (ExperimentKind::Compare, 6)
    );
    let report = compared.report(&contenders);
    // Rows in the plan's order (budget, then prompt), whatever order the cells ended in.
    let order: Vec<(u32, &str)> = report
        .rows
        .iter()
        .map(|r| (r.max_tokens, r.prompt.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (64, "agent-kg-extract"),
            (64, "agent-kg-extract-array"),
            (128, "agent-kg-extract"),
            (128, "agent-kg-extract-array"),
            (256, "agent-kg-extract"),
            (256, "agent-kg-extract-array"),
        ]
    );
    let e = store.experiment(report.experiment.unwrap()).unwrap();
    assert_eq!(e.summary.kind, kerf_store::ExperimentKind::Compare);
    assert_eq!(e.run_list.len(), 6);
    // Its cells are kept as an eval's are, one record each, each pointing at its run, under the
    // provider and model that ran it; a compare's one input is no row.
    let cells = store.cells(e.summary.id).unwrap();
    let keys: Vec<(&str, u32, &str)> = cells
        .iter()
        .map(|c| {
            (
                Path::new(&c.cell.prompt)
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap(),
                c.cell.max_tokens,
                c.cell.row.as_str(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        // In key order: by the contender's file (`…-array.json` sorts before `….json`).
        [
            ("agent-kg-extract-array", 64, ""),
            ("agent-kg-extract-array", 128, ""),
            ("agent-kg-extract-array", 256, ""),
            ("agent-kg-extract", 64, ""),
            ("agent-kg-extract", 128, ""),
            ("agent-kg-extract", 256, ""),
        ]
    );
    assert!(cells.iter().all(|c| c.cell.provider == provider.name()
        && c.cell.model == provider.as_provider().model()
        && !c.cell.constrained
        && c.finished()));
    let runs: std::collections::BTreeSet<i64> = cells.iter().filter_map(|c| c.run).collect();
    assert_eq!(
        runs,
        e.run_list.iter().map(|r| r.id).collect(),
        "each cell points at one of the compare's runs"
    );
    // Its spec reads back as the typed record the window and `history show` use.
    match ExperimentSpec::read(e.summary.id, e.summary.kind, &e.spec).unwrap() {
        ExperimentSpec::Compare(c) => {
            assert_eq!(c.max_tokens, [64, 128, 256]);
            assert_eq!(c.concurrency, 3);
            assert_eq!(c.providers.len(), 1);
            assert_eq!(c.providers[0].provider, provider.name());
            assert_eq!(c.plan.as_ref(), Some(&sizes[0]));
            assert_eq!(c.providers[0].run_params().unwrap().settings, settings);
        }
        other => panic!("a compare's spec read as {:?}", other.kind()),
    }

    // Tests: a prompt file's tests, planned then run (repair as the prompt asks).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("defs.json");
    std::fs::write(
        &path,
        serde_json::json!({
            "prompt": "Define the terms in: {{ text }}",
            "response-type": "jsonl",
            "tests": [
                {"name": "one", "input": "Photosynthesis.", "expected": [
                    {"type": "definition", "entity": "Photosynthesis",
                     "definition": "The process by which green plants turn light energy into chemical energy"}],
                 "min": {"recall": 1.0}},
                {"name": "two", "input": "Light.", "expected": [{"entity": "Light"}],
                 "min": {"recall": 1.0}, "max-tokens": 32}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let s = Subject::load(&path).unwrap();
    let data = eval::suites::check(&s).unwrap();
    let suites = vec![(s, data)];
    let provider = scripted(2);
    let test_params = RunParams {
        max_tokens: 512,
        ..params()
    };
    let job = eval::suites::TestJob {
        suites: &suites,
        params: &test_params,
        concurrency: 2,
    };
    let size =
        eval::suites::plan(&job, std::slice::from_ref(&provider), Allowance::default()).unwrap();
    assert_eq!(
        (size.kind, size.cells, size.requests),
        (ExperimentKind::Test, 2, 2)
    );
    assert_eq!(size.output_tokens_max, 512 + 32);
    let report = eval::suites::run(
        Some(&store),
        &job,
        std::slice::from_ref(&provider),
        &size,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        verdicts(&report),
        [("one", Verdict::Passed), ("two", Verdict::Failed)]
    );
    assert_eq!((report.passed, report.failed, report.errors), (1, 1, 0));
    // The tests are one experiment of their own, its runs and verdicts kept.
    let id = store
        .latest_experiment(kerf_store::ExperimentKind::Test)
        .unwrap()
        .expect("a test experiment");
    let e = store.experiment(id).unwrap();
    assert_eq!((e.summary.status.as_str(), e.run_list.len()), ("ok", 2));
    // A test is a cell of its prompt, its name the row, at its own budget.
    let cells: Vec<(String, u32, Option<kerf_store::Status>)> = store
        .cells(id)
        .unwrap()
        .into_iter()
        .map(|c| (c.cell.row, c.cell.max_tokens, c.status))
        .collect();
    assert_eq!(
        cells,
        // In key order: the budget before the row.
        [
            ("two".to_string(), 32, Some(kerf_store::Status::Ok)),
            ("one".to_string(), 512, Some(kerf_store::Status::Ok)),
        ]
    );
    match ExperimentSpec::read(id, e.summary.kind, &e.spec).unwrap() {
        ExperimentSpec::Test(t) => {
            assert_eq!((t.tests, t.max_tokens, t.concurrency), (2, 512, 2));
            assert_eq!(t.prompts.len(), 1);
            assert_eq!(t.plan, Some(size));
        }
        other => panic!("a test's spec read as {:?}", other.kind()),
    }
    assert_eq!(e.result.unwrap()["failed"], 1);
}

#[test]
fn a_sweep_of_two_replies_is_one_experiment_with_a_typed_spec() {
    use kerf_api::experiments::spec::CutUnit;
    use kerf_api::experiments::sweep::{self, Reply, SweepReport};
    let store = Store::in_memory().unwrap();
    let jsonl = "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n";
    let array = "[{\"a\":1},{\"a\":2},{\"a\":3}]";
    let replies = vec![
        Reply {
            name: "lines".into(),
            parser: kerf_core::Parser::new(kerf_core::ResponseType::Jsonl),
            text: jsonl.into(),
        },
        Reply {
            name: "array".into(),
            parser: kerf_core::Parser::new(kerf_core::ResponseType::Json),
            text: array.into(),
        },
    ];
    let mut steps = Vec::new();
    let (sweeps, report) = sweep::sweep(
        Some(&store),
        &replies,
        CutUnit::Byte,
        "o200k_base",
        &CancelToken::new(),
        &mut |r, step| steps.push((r.name.clone(), step)),
    )
    .unwrap();
    assert_eq!(steps.len(), 4, "two steps per reply");
    // Every object of both replies counted once whole.
    assert_eq!((sweeps[0].total, sweeps[1].total), (3, 3));
    assert!(
        sweeps.iter().all(|s| s.score > 0.0 && s.score < 1.0),
        "a cut before the end loses objects: {sweeps:?}"
    );
    let SweepReport::Compare { compare } = &report else {
        panic!("two replies are compared")
    };
    assert_eq!(compare[1].name, "array");
    let id = store
        .latest_experiment(kerf_store::ExperimentKind::Sweep)
        .unwrap()
        .expect("kept");
    let e = store.experiment(id).unwrap();
    match ExperimentSpec::read(id, e.summary.kind, &e.spec).unwrap() {
        ExperimentSpec::Sweep(spec) => {
            assert_eq!(spec.unit, CutUnit::Byte);
            assert_eq!(spec.replies[0].bytes, jsonl.len());
            assert_eq!(spec.replies[1].response_type, kerf_core::ResponseType::Json);
        }
        other => panic!("a sweep's spec read as {:?}", other.kind()),
    }
    assert_eq!(e.result.unwrap(), serde_json::to_value(&report).unwrap());
}

/// The error's code and message, for a plan that must be refused.
fn refused<T>(r: kerf_api::Result<T>) -> ApiError {
    match r {
        Ok(_) => panic!("the plan was accepted"),
        Err(e) => e,
    }
}

#[test]
fn each_limit_refuses_the_plan_with_its_flag_and_stores_nothing() {
    let store = Store::in_memory().unwrap();
    let provider = scripted(0);
    let none = Allowance::default();
    let budgets = [64];

    let e = refused(begin(
        &store,
        &plan(&budgets, MAX_REPEAT + 1, 4, none),
        &provider,
    ));
    assert_eq!(e.code, Code::Usage);
    assert!(e.message.contains("--repeat 101"), "{}", e.message);
    let e = refused(begin(
        &store,
        &plan(&budgets, 4_294_967_295, 4, none),
        &provider,
    ));
    assert!(e.message.contains("--repeat 4294967295"), "{}", e.message);

    let e = refused(begin(
        &store,
        &plan(&budgets, 1, MAX_CONCURRENCY + 1, none),
        &provider,
    ));
    assert!(e.message.contains("--concurrency 257"), "{}", e.message);
    let e = refused(begin(&store, &plan(&budgets, 1, 0, none), &provider));
    assert!(e.message.contains("--concurrency 0"), "{}", e.message);

    // 2 rows × 11 budgets × 100 repeats = 2,200 requests: past 2,000 it must be allowed.
    let many: Vec<u32> = (1..=11).map(|b| b * 8).collect();
    let e = refused(begin(&store, &plan(&many, 100, 4, none), &provider));
    assert_eq!(e.code, Code::PlanTooLarge);
    // The window asks with the size the error carries.
    assert_eq!(e.details.as_ref().unwrap()["requests"], 2_200);
    assert!(
        e.message.contains("2,200 requests") && e.message.contains("--allow-requests 2200"),
        "{}",
        e.message
    );
    let low = Allowance {
        max_requests: Some(2_199),
        yes: false,
    };
    let e = refused(begin(&store, &plan(&many, 100, 4, low), &provider));
    assert!(
        e.message.contains("more than --allow-requests 2,199"),
        "{}",
        e.message
    );
    // A plan too large to hold is refused before a row is rendered.
    let huge: Vec<u32> = (1..=5_001).collect();
    let yes = Allowance {
        max_requests: None,
        yes: true,
    };
    let e = refused(begin(&store, &plan(&huge, 100, 4, yes), &provider));
    assert!(e.message.contains("1,000,200 cells"), "{}", e.message);
    // A budget one run may not spend.
    let e = refused(begin(&store, &plan(&[200_000], 1, 4, none), &provider));
    assert!(
        e.message
            .contains("--max-tokens 200000 is above --max-run-tokens 100000"),
        "{}",
        e.message
    );
    assert!(
        store.experiments(None).unwrap().is_empty(),
        "a refused plan leaves nothing behind"
    );
    let Chosen::Scripted(s) = &provider else {
        unreachable!()
    };
    assert!(s.requests().is_empty());

    // Allowed, the same large plan starts.
    let enough = Allowance {
        max_requests: Some(2_200),
        yes: false,
    };
    let e = begin(&store, &plan(&many, 100, 4, enough), &provider).unwrap();
    assert_eq!(e.spec.plan.as_ref().map(|p| p.requests), Some(2_200));
}

/// A workbench whose provider `srv` is `server`, an OpenAI-compatible server needing no key.
fn workbench_with(server: &Server) -> (tempfile::TempDir, Workbench) {
    let dir = tempfile::tempdir().unwrap();
    let wb = Workbench::at(
        &dir.path().join("data"),
        &dir.path().join("config"),
        &dir.path().join("models"),
        None,
    );
    let mut def = kerf_llm::providers::ProviderDef::new(
        "srv",
        kerf_llm::providers::Kind::Openai,
        Some(&server.base_url()),
        "loopback",
    );
    def.no_key = true;
    kerf_llm::providers::Registry::update(&wb.providers, |r| {
        r.upsert(def);
        Ok(())
    })
    .unwrap();
    (dir, wb)
}

/// An OpenAI chat completion streamed: one JSONL record, then the end.
fn completion(entity: &str) -> Vec<Vec<u8>> {
    let content = serde_json::to_string(&format!(
        "{{\"type\":\"definition\",\"entity\":\"{entity}\",\"definition\":\"a thing\"}}"
    ))
    .unwrap();
    vec![
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{content}}}}}]}}\n\n")
            .into_bytes(),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n"
            .as_bytes()
            .to_vec(),
    ]
}

/// The window's Compare of the two shipped formats at three budgets: six cells.
fn compare_input(concurrency: u32) -> CompareInput {
    let prompts = ["agent-kg-extract.json", "agent-kg-extract-array.json"];
    CompareInput {
        providers: None,
        prompts: prompts
            .iter()
            .map(|p| repo().join("prompts").join(p).display().to_string())
            .collect(),
        input: "Photosynthesis turns light into chemical energy.".into(),
        budgets: vec![64, 128, 256],
        constrain: ConstrainMode::None,
        options: RunOptions {
            provider: "srv".into(),
            model: None,
            max_tokens: 0,
            constrain: false,
            temperature: None,
            seed: None,
            gpu_layers: "auto".into(),
            max_requests: 10,
            max_run_tokens: 100_000,
        },
        concurrency: Some(concurrency),
        confirmed: None,
        vars: None,
    }
}

#[test]
fn the_windows_compare_has_all_six_cells_in_flight_at_once() {
    // Each reply's end waits until the test lets go, which it does only once the server holds
    // all six requests: a compare that ran its cells one at a time would leave five unsent.
    let latch = Latch::default();
    let server = Server::start(
        (0..6)
            .map(|i| Act::sse(200, completion(&format!("E{i}"))).last_waits_for(&latch))
            .collect(),
    );
    let (_dir, wb) = workbench_with(&server);
    let report = std::thread::scope(|scope| {
        let compare = scope.spawn(|| {
            compare::compare_files(&wb, &compare_input(6), &CancelToken::new(), &mut |_| {})
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.requests().len() < 6 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let together = server.requests().len();
        latch.open();
        let report = compare.join().unwrap();
        assert_eq!(together, 6, "requests in flight at once");
        report
    })
    .unwrap();
    assert_eq!(report.rows.len(), 6);
    // The reply is one JSONL record: the JSONL prompt keeps it at every budget.
    let jsonl: Vec<usize> = report
        .rows
        .iter()
        .filter(|r| r.prompt == "agent-kg-extract")
        .map(|r| r.objects)
        .collect();
    assert_eq!(jsonl, [1, 1, 1], "{:?}", report.rows);
    assert_eq!(report.sweeps.len(), 2);
}

#[test]
fn the_windows_compare_of_six_300_ms_cells_takes_about_one_cell() {
    // The figure the issue asks for: six cells whose server answers after 300 ms each. One at a
    // time they take at least 1.8 s; at once, about 300 ms. Printed, not asserted against a
    // clock (the in-flight test above proves the overlap whatever the machine's speed).
    let server = Server::start(
        (0..6)
            .map(|i| {
                Act::sse(200, completion(&format!("E{i}"))).delay_head(Duration::from_millis(300))
            })
            .collect(),
    );
    let (_dir, wb) = workbench_with(&server);
    let start = Instant::now();
    let mut cells_done = None;
    let report = compare::compare_files(&wb, &compare_input(6), &CancelToken::new(), &mut |p| {
        if p.done == 6 && cells_done.is_none() {
            cells_done = Some(start.elapsed());
        }
    })
    .unwrap();
    let cells = cells_done.unwrap();
    println!(
        "the window's compare: 6 cells of 300 ms each ran in {} ms (one at a time: at least 1800 ms); with the sweeps, {} ms",
        cells.as_millis(),
        start.elapsed().as_millis()
    );
    assert_eq!(report.rows.len(), 6);
}

#[test]
fn a_prompt_file_is_one_version_from_the_window_and_from_the_cli() {
    let path = repo().join("prompts/agent-kg-extract.json");
    // The CLI: the file as it is on disk.
    let cli = Subject::load(&path).unwrap();
    assert_eq!(cli.source.text, std::fs::read_to_string(&path).unwrap());
    // The window: the file opened as a draft, compiled, unchanged.
    let doc = kerf_api::prompts::open(&path).unwrap();
    let path_str = path.display().to_string();
    let prompt = kerf_api::prompts::compile_draft(&doc.draft, Some(&path_str)).unwrap();
    let window = Subject::of(prompt, Some(&path_str));
    assert_eq!(window.source.text, cli.source.text);
    let store = Store::in_memory().unwrap();
    let version = |s: &Subject| {
        store
            .put_prompt_version(
                &s.source.name,
                s.source.path.as_deref(),
                s.prompt.file.response_type.as_str(),
                &s.source.text,
            )
            .unwrap()
    };
    assert_eq!(version(&window), version(&cli));
    // An edited draft is what ran: its own composed text, another version.
    let mut edited = doc.draft.clone();
    edited.template.push_str("\nBe brief.");
    let prompt = kerf_api::prompts::compile_draft(&edited, Some(&path_str)).unwrap();
    let draft = Subject::of(prompt, Some(&path_str));
    assert!(draft.source.text.contains("Be brief."));
    assert_ne!(version(&draft), version(&cli));
}

#[test]
fn the_windows_tests_run_as_kerf_test_runs_them_and_are_one_experiment() {
    // One test whose expected record the server's reply holds, one whose it does not.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("defs.json");
    std::fs::write(
        &path,
        serde_json::json!({
            "prompt": "Define the terms in: {{ text }}",
            "response-type": "jsonl",
            "tests": [
                {"name": "found", "input": "Photosynthesis.",
                 "expected": [{"type": "definition", "entity": "E0", "definition": "a thing"}],
                 "min": {"recall": 1.0}},
                {"name": "missed", "input": "Light.",
                 "expected": [{"type": "definition", "entity": "Light", "definition": "a thing"}],
                 "min": {"recall": 1.0}}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        Act::sse(200, completion("E0")),
        Act::sse(200, completion("E1")),
    ]);
    let (_dir, wb) = workbench_with(&server);
    // As the window sends it: the run panel's defaults with the provider picked.
    let mut options = kerf_api::meta::meta().run_defaults;
    options.provider = "srv".into();
    let input = eval::suites::TestsInput {
        providers: None,
        prompts: vec![path.display().to_string()],
        options,
        concurrency: Some(1),
        confirmed: None,
    };
    let store = wb.store_required().unwrap();
    let mut heard = Vec::new();
    let report =
        eval::suites::run_input(&wb, Some(&store), &input, &CancelToken::new(), &mut |r| {
            heard.push(r.name.clone())
        })
        .unwrap();
    assert_eq!(
        verdicts(&report),
        [("found", Verdict::Passed), ("missed", Verdict::Failed)]
    );
    assert_eq!(heard.len(), 2, "each result is sent as it ends");
    assert_eq!(server.requests().len(), 2);
    let id = store
        .latest_experiment(kerf_store::ExperimentKind::Test)
        .unwrap()
        .expect("kept");
    assert_eq!(store.experiment(id).unwrap().run_list.len(), 2);
}

/// A scripted model that names the first shipped long document's first entity, `replies` times.
fn halvorsen(replies: usize) -> Chosen {
    let reply = r#"{"type":"definition","entity":"Halvorsen Group","definition":"A group that agreed to acquire Brightwave Analytics"}"#;
    Chosen::Scripted(Box::new(Scripted::new(
        (0..replies).map(|_| Reply::text(reply, 24)),
    )))
}

/// An eval of the first `rows` shipped long documents, each cut by the recursive chunker at
/// `sizes` (overlap 50), at 256 tokens, one at a time: begun, nothing run.
fn cut_eval(store: &Store, rows: usize, sizes: &[u32], provider: &Chosen) -> eval::Eval {
    let mut docs = dataset::load(&repo().join("datasets/long-documents.jsonl")).unwrap();
    docs.rows.truncate(rows);
    let chunking = eval::chunked::Chunking {
        chunker: kerf_core::chunk::Chunker::Recursive,
        sizes: sizes.to_vec(),
        overlap: 50,
        passes: 1,
        context_chars: vec![0],
    };
    eval::begin(
        store,
        docs,
        vec![subject("agent-kg-extract.json")],
        &Plan {
            chunking: Some(&chunking),
            ..plan(&[256], 1, 1, Allowance::default())
        },
        params(),
        std::slice::from_ref(provider),
        &mut |_| {},
    )
    .unwrap()
}

/// The window's view of a Japanese document cut by the token chunker, whose small windows split
/// characters: every window is drawn where its whole characters are (in the page's UTF-16
/// units), and the record its reply holds is placed at the name, found as written.
#[test]
fn every_token_window_is_drawn_where_its_whole_characters_are() {
    let store = Store::in_memory().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = "東京は日本の首都であり、世界有数の大都市である。大阪は関西地方の中心都市で、商業の町として知られる。京都はかつての都で、多くの寺院が残っている。名古屋は中部地方の工業都市で、自動車産業が盛んである。札幌は北海道の中心都市で、雪まつりが有名である。";
    let data = dir.path().join("jp.jsonl");
    let row = serde_json::json!({"id": "cities", "input": text, "expected": {"agent-kg-extract": [
        {"type": "definition", "entity": "京都", "definition": "かつての都"}]}});
    std::fs::write(&data, format!("{row}\n")).unwrap();
    let chunking = eval::chunked::Chunking {
        chunker: kerf_core::chunk::Chunker::Token,
        sizes: vec![24],
        overlap: 8,
        passes: 1,
        context_chars: vec![0],
    };
    let reply = r#"{"type":"definition","entity":"京都","definition":"かつての都"}"#;
    let provider = Chosen::Scripted(Box::new(Scripted::new(
        (0..64).map(|_| Reply::text(reply, 24)),
    )));
    let e = eval::begin(
        &store,
        dataset::load(&data).unwrap(),
        vec![subject("agent-kg-extract.json")],
        &Plan {
            chunking: Some(&chunking),
            ..plan(&[256], 1, 1, Allowance::default())
        },
        params(),
        std::slice::from_ref(&provider),
        &mut |_| {},
    )
    .unwrap();
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&provider),
        ONE_AT_A_TIME,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    let line = &report.cells[0];
    let key = eval::wire::CellKey {
        row: line.row.clone(),
        prompt: line.prompt.clone(),
        provider: Some(line.provider.clone()),
        max_tokens: line.max_tokens,
        constrained: line.constrained,
        repeat: line.repeat,
        chunk_size: line.chunk_size,
        context_chars: line.context_chars,
    };
    let view = eval::view::cell(&store, &e, &key).unwrap();
    let units: Vec<u16> = text.encode_utf16().collect();
    let at = |[s, t]: [u32; 2]| String::from_utf16(&units[s as usize..t as usize]).unwrap();
    let cut = kerf_core::chunk::chunk(text, &chunking.settings(24)).unwrap();
    assert!(
        cut.iter().any(|c| c.start.is_none()),
        "some window splits a character"
    );
    assert_eq!(view.chunks.len(), cut.len());
    for (place, c) in view.chunks.iter().zip(&cut) {
        let drawn = at(place
            .span
            .unwrap_or_else(|| panic!("window {} has no place", c.index)));
        // Its text is what is drawn, with the U+FFFD of the characters it splits around it.
        assert!(
            !drawn.is_empty() && c.text.trim_matches('\u{fffd}') == drawn,
            "window {}: {drawn:?} in {:?}",
            c.index,
            c.text
        );
    }
    // The reply's record (every window's reply names it) is placed at the name, once: each
    // window not holding it grounds it nowhere, so it is not found there.
    let placed: Vec<String> = view
        .extracted
        .iter()
        .filter_map(|r| r.mention.as_ref())
        .filter(|m| m.status == kerf_core::eval::mentions::SpanStatus::Exact)
        .map(|m| at(m.span.unwrap()))
        .collect();
    assert_eq!(placed, ["京都"], "{:?}", view.extracted);
}

const ONE_AT_A_TIME: Pace = Pace {
    concurrency: 1,
    adaptive: false,
    retry_errors: false,
    live: false,
};

/// A cut document reaches the window's matrix once, as its last chunk ends: its chunks merged
/// and scored as the report scores that document.
#[test]
fn the_window_sees_each_cut_document_once_its_last_chunk_ends() {
    let store = Store::in_memory().unwrap();
    let provider = halvorsen(64);
    let e = cut_eval(&store, 2, &[2000, 4000], &provider);
    let mut live = Vec::new();
    let mut ended = 0;
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&provider),
        Pace {
            live: true,
            ..ONE_AT_A_TIME
        },
        &CancelToken::new(),
        &mut |p| {
            ended = p.done;
            live.extend(p.cell.clone());
        },
    )
    .unwrap();
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    assert_eq!(report.cells.len(), 4, "two documents at two sizes");
    assert!(ended > 4, "{ended} chunk cells, more than the documents");
    assert_eq!(live.len(), 4, "one line per document and size: {live:?}");
    for cell in &live {
        let reported = report
            .cells
            .iter()
            .find(|c| c.row == cell.row && c.chunk_size == cell.chunk_size)
            .unwrap();
        let figures = |c: &eval::lines::CellLine| {
            (
                c.status,
                c.objects,
                c.tp,
                c.fp,
                c.fn_,
                c.f1,
                c.chunks
                    .as_ref()
                    .map(|f| (f.chunks, f.requests, f.cut, f.folded)),
                c.spans.len(),
            )
        };
        assert_eq!(
            figures(cell),
            figures(reported),
            "{} at {:?}",
            cell.row,
            cell.chunk_size
        );
        assert!(cell.chunks.as_ref().unwrap().chunks > 1, "{cell:?}");
    }
    // The chunk-size study's charts: recall, and tokens per document, at each size, a curve per
    // prompt and budget; and the budget chart a curve per chunk size.
    let charts = report.chunk_size_charts();
    let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Recall against the chunk size",
            "Tokens per document against the chunk size"
        ]
    );
    assert_eq!(charts[0].xs, [2000.0, 4000.0]);
    assert_eq!(charts[0].x.label, "chunk size, characters (log scale)");
    assert_eq!(charts[0].series.len(), 1);
    assert_eq!(charts[0].series[0].name, "agent-kg-extract @ 256");
    let at = |size: u32| {
        report
            .summary
            .iter()
            .find(|l| l.chunk_size == Some(size))
            .unwrap()
    };
    assert_eq!(
        charts[0].series[0].ys,
        [at(2000).micro.recall, at(4000).micro.recall]
    );
    let tokens = |size: u32| {
        let c = at(size).chunks.as_ref().unwrap();
        Some(c.prompt_tokens_per_document + c.completion_tokens_per_document)
    };
    assert_eq!(charts[1].series[0].ys, [tokens(2000), tokens(4000)]);
    let budget = report.budget_charts();
    let names: Vec<&str> = budget[0].series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["agent-kg-extract ✂2000", "agent-kg-extract ✂4000"]);
}

/// A cut document's chunks run side by side, and the in-flight chart counts its requests, not
/// the document's one line: the first three chunks held at the server at once are three in
/// flight.
#[test]
fn the_in_flight_chart_counts_a_cut_documents_requests() {
    let docs = dataset::load(&repo().join("datasets/long-documents.jsonl")).unwrap();
    let text = docs.rows[0].input.clone().unwrap();
    let settings = kerf_core::chunk::ChunkSettings {
        chunker: kerf_core::chunk::Chunker::Recursive,
        size: 1000,
        overlap: 50,
    };
    let chunks = kerf_core::chunk::chunk(&text, &settings).unwrap().len();
    assert!(chunks > 3, "{chunks} chunks");
    // Asked first which model it serves (it has no list); then each of the first three
    // replies ends only once the server holds all three requests.
    let latch = Latch::default();
    let server = Server::start(
        std::iter::once(Act::status(404, "{}"))
            .chain((0..chunks).map(|i| {
                let act = Act::sse(200, completion(&format!("E{i}")));
                if i < 3 {
                    act.last_waits_for(&latch)
                } else {
                    act
                }
            }))
            .collect(),
    );
    let (_dir, wb) = workbench_with(&server);
    let provider = RunSettings {
        provider: "srv".into(),
        ..RunSettings::default()
    }
    .provider(&wb)
    .unwrap();
    let store = Store::in_memory().unwrap();
    let e = cut_eval(&store, 1, &[1000], &provider);
    std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(60);
            let asked = || {
                let sent = server.requests();
                sent.iter()
                    .filter(|r| r.path.ends_with("/chat/completions"))
                    .count()
            };
            while asked() < 3 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let together = asked();
            latch.open();
            together
        });
        eval::run_cells(
            &store,
            &e,
            std::slice::from_ref(&provider),
            Pace {
                concurrency: 3,
                ..ONE_AT_A_TIME
            },
            &CancelToken::new(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(watch.join().unwrap(), 3, "requests in flight at once");
    });
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    assert_eq!(report.cells.len(), 1, "one document at one size");
    assert_eq!(report.cells[0].requests.len(), chunks);
    let flight = report.flight_chart().expect("timed requests make a chart");
    let peak = flight.series[0]
        .ys
        .iter()
        .flatten()
        .fold(0.0, |a: f64, b| a.max(*b));
    assert_eq!(peak, 3.0, "{:?}", flight.series[0].ys);
}

/// A cut document stopped between its chunks is not scored from the chunks it had: its line
/// waits for the rest (`kerf eval resume`), and is scored whole once they have run.
#[test]
fn a_document_stopped_between_its_chunks_is_not_scored_until_the_rest_run() {
    let store = Store::in_memory().unwrap();
    let first = halvorsen(16);
    let e = cut_eval(&store, 1, &[2000], &first);
    let pace = ONE_AT_A_TIME;
    // Stopped as its first chunk ends: nothing else in flight, the rest never sent.
    let cancel = CancelToken::new();
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&first),
        pace,
        &cancel,
        &mut |p| {
            if p.done == 1 {
                cancel.cancel();
            }
        },
    )
    .unwrap();
    let report = eval::finish(&store, &e, true, eval::Options::default()).unwrap();
    let line = &report.cells[0];
    let chunks = line.chunks.as_ref().unwrap();
    assert_eq!(chunks.requests, 1, "{line:?}");
    assert!(!line.measured() && line.tp.is_none(), "{line:?}");
    // The rest run: the same document, scored from all its chunks.
    let rest = halvorsen(16);
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&rest),
        pace,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    let line = &report.cells[0];
    assert!(line.measured() && line.tp.is_some(), "{line:?}");
    assert!(line.chunks.as_ref().unwrap().requests > 1, "{line:?}");
}

/// The window's Evaluate screen: its matrix fills in from each cell as it ends, scored as the
/// report scores it; an opened cell shows its records marked, the record's place in the reply
/// and its name's place in the document.
#[test]
fn the_window_sees_each_cell_scored_as_it_ends_and_opens_one_as_the_report_scores_it() {
    let store = Store::in_memory().unwrap();
    let provider = scripted(2);
    let e = eval::begin(
        &store,
        rows(2),
        vec![subject("agent-kg-extract.json")],
        &plan(&[256], 1, 1, Allowance::default()),
        params(),
        std::slice::from_ref(&provider),
        &mut |_| {},
    )
    .unwrap();
    let mut live = Vec::new();
    eval::run_cells(
        &store,
        &e,
        std::slice::from_ref(&provider),
        Pace {
            concurrency: 1,
            adaptive: false,
            retry_errors: false,
            live: true,
        },
        &CancelToken::new(),
        &mut |p| live.extend(p.cell.clone()),
    )
    .unwrap();
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    assert_eq!(live.len(), 2, "one scored cell per end");
    for cell in &live {
        let reported = report
            .cells
            .iter()
            .find(|c| c.row == cell.row && c.prompt == cell.prompt)
            .unwrap();
        assert_eq!(
            (
                cell.run,
                cell.objects,
                cell.tp,
                cell.fp,
                cell.fn_,
                cell.f1,
                cell.status
            ),
            (
                reported.run,
                reported.objects,
                reported.tp,
                reported.fp,
                reported.fn_,
                reported.f1,
                reported.status
            ),
            "row {}",
            cell.row
        );
    }
    // The photosynthesis row: the one record the reply holds is expected there.
    let matched = report.cells.iter().find(|c| c.tp == Some(1)).unwrap();
    let key = eval::wire::CellKey {
        row: matched.row.clone(),
        prompt: matched.prompt.clone(),
        provider: Some(matched.provider.clone()),
        max_tokens: matched.max_tokens,
        constrained: matched.constrained,
        repeat: matched.repeat,
        chunk_size: None,
        context_chars: None,
    };
    let view = eval::view::cell(&store, &e, &key).unwrap();
    assert_eq!(view.line.f1, matched.f1);
    assert_eq!(view.extracted.len(), 1);
    let x = &view.extracted[0];
    assert_eq!(x.mark, eval::wire::Mark::Matched);
    let pair = x.pair.unwrap();
    assert_eq!(view.expected[pair].mark, eval::wire::Mark::Matched);
    assert_eq!(view.expected[pair].pair, Some(0));
    assert!(
        view.expected
            .iter()
            .enumerate()
            .all(|(i, r)| i == pair || r.mark == eval::wire::Mark::Missed)
    );
    // Its place in the reply is the whole record, as the model wrote it.
    let reply = view.reply.as_deref().unwrap();
    // Spans are UTF-16 units, the page's string indices (here, ASCII: bytes too).
    let [s, t] = x.reply_span.unwrap().map(|o| o as usize);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&reply[s..t]).unwrap(),
        x.object
    );
    // Its name's place in the document is the name.
    let document = view.document.as_deref().unwrap();
    assert_eq!(x.grounded, Some(true));
    let place = x.grounding.iter().find(|g| g.field == "entity").unwrap();
    let [s, t] = place.span.unwrap().map(|o| o as usize);
    assert_eq!(document[s..t].to_lowercase(), "photosynthesis");
    assert_eq!(view.cut, None, "the reply ended on its own");
    // History lists it with its state, size and best line.
    let listed: Vec<kerf_api::history::wire::ExperimentRow> =
        kerf_api::history::experiments(&store, None)
            .unwrap()
            .into_iter()
            .map(Into::into)
            .collect();
    let row = listed.iter().find(|r| r.id == e.experiment).unwrap();
    assert_eq!(row.kind, ExperimentKind::Eval);
    assert_eq!(row.state, kerf_api::history::wire::ExperimentState::Done);
    assert_eq!(row.cells, Some(2));
    let best = report.summary[0].micro.f1.unwrap();
    assert_eq!(
        row.headline.as_deref(),
        Some(format!("best F1 {best:.3}: agent-kg-extract @ 256").as_str())
    );
}

/// A dataset previewed: every row shown with its expected records, and each problem at the
/// row or line it names — a line that is not JSON, a row whose expected record breaks the
/// prompt's schema.
#[test]
fn a_dataset_preview_puts_each_problem_at_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.jsonl");
    std::fs::write(
        &path,
        concat!(
            "{\"id\": \"ok\", \"input\": \"Ada wrote the first program.\", \"expected\": [{\"type\": \"definition\", \"entity\": \"program\", \"definition\": \"instructions\"}]}\n",
            "{not json\n",
            "{\"id\": \"bad-record\", \"input\": \"Text.\", \"expected\": [{\"type\": \"definition\", \"entity\": 7}]}\n",
        ),
    )
    .unwrap();
    let preview =
        eval::view::preview(&path, &[repo().join("prompts/agent-kg-extract.json")], &[]).unwrap();
    assert_eq!(preview.shown.len(), 2, "{preview:#?}");
    assert_eq!(preview.shown[0].id, "ok");
    assert!(preview.shown[0].problems.is_empty());
    assert_eq!(preview.shown[0].expected[""].len(), 1);
    let bad = &preview.shown[1];
    assert_eq!((bad.id.as_str(), bad.line), ("bad-record", 3));
    assert!(!bad.problems.is_empty(), "{preview:#?}");
    let line2 = preview
        .problems
        .iter()
        .find(|p| p.line == Some(2))
        .expect("the line that is not JSON");
    assert_eq!(line2.row, None);
    assert!(line2.message.contains(":2"), "{}", line2.message);
    assert!(
        preview
            .problems
            .iter()
            .any(|p| p.row.as_deref() == Some("bad-record") && p.message.contains("/expected/0"))
    );
}

/// An eval of agent-kg-extract over the dataset's first two rows at 256 tokens, `repeat` times,
/// its cells run one at a time on `provider`.
fn eval_run_in_turn(store: &Store, provider: &Chosen, repeat: u32) -> eval::Eval {
    let e = eval::begin(
        store,
        rows(2),
        vec![subject("agent-kg-extract.json")],
        &plan(&[256], repeat, 1, Allowance::default()),
        params(),
        std::slice::from_ref(provider),
        &mut |_| {},
    )
    .unwrap();
    let pace = Pace {
        concurrency: 1,
        adaptive: false,
        retry_errors: false,
        live: false,
    };
    eval::run_cells(
        store,
        &e,
        std::slice::from_ref(provider),
        pace,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    e
}

/// With repeats, the Evaluate screen charts each line's F1 in each repeat.
#[test]
fn an_eval_with_repeats_charts_each_repeats_f1() {
    let store = Store::in_memory().unwrap();
    let e = eval_run_in_turn(&store, &scripted(4), 2);
    let report = eval::finish(&store, &e, false, eval::Options::default()).unwrap();
    let chart = report.repeat_chart().expect("two repeats make a chart");
    assert_eq!(chart.xs, [1.0, 2.0]);
    assert_eq!(chart.series.len(), 1);
    let by_repeat = &report.summary[0].repeats.as_ref().unwrap().f1_by_repeat;
    assert_eq!(&chart.series[0].ys, by_repeat);
    assert_eq!(chart.series[0].name, "agent-kg-extract @ 256");
    let shown = eval::flow::show(&store, e.experiment, eval::Options::default()).unwrap();
    assert!(shown.charts.contains(&chart));
    assert_eq!(shown.rows.len(), 2);

    // Run in turn, one request at a time: in flight never more than one, and at some moment
    // one; every timed run in one band of the run-time bars.
    let flight = report
        .flight_chart()
        .expect("timed runs make a flight chart");
    assert!(flight.stepped);
    let peak = flight.series[0]
        .ys
        .iter()
        .flatten()
        .fold(0.0, |a: f64, b| a.max(*b));
    assert_eq!(peak, 1.0, "{:?}", flight.series[0].ys);
    assert!(flight.xs.windows(2).all(|w| w[0] < w[1]));
    let times = report
        .latency_chart()
        .expect("timed runs make a run-time chart");
    let runs: f64 = times.series[0].ys.iter().flatten().sum();
    assert_eq!(
        runs as usize,
        report.cells.iter().filter(|c| c.seconds.is_some()).count()
    );
    assert!(runs >= 4.0);
    assert!(shown.charts.iter().any(|c| c.title == "Requests in flight"));
}

/// Why pieces were dropped, drawn: a group of bars per reason (most pieces first), a bar per
/// prompt, each bar the count the report gives; its categories are the reasons' wire names,
/// which the window's matrix filters by.
#[test]
fn the_drop_reasons_are_bars_of_the_reports_counts() {
    let store = Store::in_memory().unwrap();
    let good = r#"{"type":"definition","entity":"Photosynthesis","definition":"light into sugar"}"#;
    // Row 1: a line of prose, a whole line, a line cut by the budget. Row 2: a whole line and
    // a cut one.
    let provider = Chosen::Scripted(Box::new(Scripted::new([
        Reply::text(&format!("Here they are:\n{good}\n{{\"type\":\"defin"), 16)
            .ending(kerf_llm::FinishReason::Length),
        Reply::text(&format!("{good}\n{{\"type\":\"relationship\",\"subj"), 16)
            .ending(kerf_llm::FinishReason::Length),
    ])));
    let e = eval_run_in_turn(&store, &provider, 1);
    let shown = eval::flow::show(&store, e.experiment, eval::Options::default()).unwrap();
    let chart = shown.drop_chart.expect("pieces were dropped");
    assert_eq!(
        chart.categories.as_deref(),
        Some(&["truncated".to_string(), "prose".to_string()][..]),
        "{:#?}",
        shown.report.drops
    );
    assert_eq!(chart.series.len(), 1);
    assert_eq!(chart.series[0].name, "agent-kg-extract");
    assert_eq!(chart.series[0].ys, [Some(2.0), Some(1.0)]);
    let svg = kerf_api::charts::svg(&chart, 760, 380).unwrap();
    assert!(
        svg.contains("\ntruncated\n") && svg.contains("\nprose\n"),
        "{svg}"
    );
}

/// A dataset where every row is wrong is counted, not held: the preview lists the first
/// problems and rows, and says how many there are.
#[test]
fn a_preview_of_a_hostile_dataset_lists_a_bounded_share_of_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all-bad.jsonl");
    let rows: String = (0..5_000)
        .map(|i| {
            format!(
                "{{\"id\": \"r{i}\", \"input\": \"Text.\", \"expected\": [{{\"type\": \"definition\", \"entity\": {i}}}]}}\n"
            )
        })
        .collect();
    std::fs::write(&path, rows).unwrap();
    let preview =
        eval::view::preview(&path, &[repo().join("prompts/agent-kg-extract.json")], &[]).unwrap();
    assert_eq!(preview.rows, 5_000);
    assert_eq!(preview.problems.len(), eval::view::PREVIEW_PROBLEMS);
    assert!(
        preview.problems_total >= 5_000,
        "{}",
        preview.problems_total
    );
    assert_eq!(
        preview.shown.len(),
        eval::view::PREVIEW_ROWS + eval::view::PREVIEW_PROBLEMS
    );
    assert!(preview.shown.iter().all(|r| !r.problems.is_empty()));
}

/// A plan of cells that depend on cells, as long documents will be: each document read in two
/// chunks, then a second pass that is shown the first pass's replies, then the document's
/// records merged into one row. On the one cell runner, two cells in flight.
struct TwoPasses<'c> {
    subject: &'c Subject,
    provider: &'c Chosen,
}

/// A cell's place in its document: its chunk and pass.
type ChunkPass = (u32, u32);

impl<'c> kerf_api::experiments::stages::Stages<'c> for TwoPasses<'c> {
    type Group = (String, [&'static str; 2]);
    type Key = ChunkPass;
    type Merged = Vec<serde_json::Value>;

    fn next(
        &self,
        (doc, chunks): &Self::Group,
        ended: &[(ChunkPass, kerf_api::experiments::cells::CellEnd)],
    ) -> Vec<(
        ChunkPass,
        kerf_api::Result<kerf_api::experiments::cells::Cell<'c>>,
    )> {
        let cell = |chunk: u32, pass: u32, text: String| {
            let rendering = kerf_api::runs::Rendering::of_input(
                &self.subject.prompt,
                &text,
                &serde_json::Map::new(),
            )?;
            Ok(kerf_api::experiments::cells::Cell {
                subject: self.subject,
                rendering,
                params: RunParams {
                    max_tokens: 64,
                    ..params()
                },
                key: Some(kerf_store::CellKey {
                    chunk,
                    pass,
                    ..kerf_api::experiments::cells::key(
                        self.provider,
                        "agent-kg-extract",
                        64,
                        false,
                        0,
                        doc,
                    )
                }),
            })
        };
        match ended.len() {
            // First pass: a cell per chunk.
            0 => (0..2)
                .map(|c| ((c, 0), cell(c, 0, chunks[c as usize].to_string())))
                .collect(),
            // Second pass: the whole document, with what the first pass found.
            2 => {
                let found: Vec<String> = ended
                    .iter()
                    .map(|(_, end)| match &end.ran {
                        Ok(kerf_api::experiments::cells::Ran::Run(r)) => r.out.raw.clone(),
                        _ => String::new(),
                    })
                    .collect();
                let text = format!(
                    "{} {}\n\nFound so far:\n{}",
                    chunks[0],
                    chunks[1],
                    found.join("\n")
                );
                vec![((0, 1), cell(0, 1, text))]
            }
            _ => Vec::new(),
        }
    }

    fn merge(
        &self,
        _: &Self::Group,
        ended: Vec<(ChunkPass, kerf_api::experiments::cells::CellEnd)>,
    ) -> kerf_api::Result<Vec<serde_json::Value>> {
        let mut records = Vec::new();
        for (_, end) in ended {
            if let kerf_api::experiments::cells::Ran::Run(r) = end.ran? {
                records.extend(r.out.report.objects.to_vec());
            }
        }
        Ok(records)
    }
}

#[test]
fn cells_that_depend_on_cells_run_stage_by_stage_and_merge_per_document() {
    use kerf_api::experiments::cells::Runner;
    use kerf_api::experiments::stages::{StagedLane, run_staged};
    let store = Store::in_memory().unwrap();
    let entities = [
        "Chloroplast",
        "Stroma",
        "Thylakoid",
        "Granum",
        "Lumen",
        "Calvin cycle",
    ];
    let provider = Chosen::Scripted(Box::new(Scripted::new(entities.iter().map(|e| {
        Reply::text(
            &format!(
                r#"{{"type":"definition","entity":"{e}","definition":"A part of a chloroplast"}}"#
            ),
            16,
        )
    }))));
    let subject = subject("agent-kg-extract.json");
    let experiment = store
        .begin_experiment(ExperimentKind::Test, &serde_json::json!({}))
        .unwrap();
    let runner = Runner {
        store: Some(&store),
        experiment: Some(experiment),
        repair: false,
        served_model: false,
        resend_broken: false,
        layer: None,
    };
    let plan = TwoPasses {
        subject: &subject,
        provider: &provider,
    };
    let docs = vec![
        (
            "leaf".to_string(),
            ["Chloroplasts hold stroma.", "Stroma holds thylakoids."],
        ),
        (
            "cell".to_string(),
            ["Thylakoids stack in grana.", "A lumen lies within."],
        ),
    ];
    let mut merged = Vec::new();
    run_staged(
        &runner,
        vec![StagedLane {
            provider: &provider,
            concurrency: 2,
            groups: docs,
        }],
        &plan,
        &CancelToken::new(),
        |(doc, _), records| {
            merged.push((doc, records.len()));
            Ok(())
        },
    )
    .unwrap();
    // Each document merged once, with a record from each of its three cells.
    merged.sort();
    assert_eq!(merged, [("cell".to_string(), 3), ("leaf".to_string(), 3)]);
    // Every cell kept with its chunk and pass; each second pass began after both of its
    // document's chunks had ended, and was sent what they found.
    let cells = store.cells(experiment).unwrap();
    assert_eq!(cells.len(), 6);
    for doc in ["leaf", "cell"] {
        let mine: Vec<_> = cells.iter().filter(|c| c.cell.row == doc).collect();
        let at = |chunk: u32, pass: u32| {
            mine.iter()
                .find(|c| (c.cell.chunk, c.cell.pass) == (chunk, pass))
                .and_then(|c| c.run)
                .unwrap_or_else(|| panic!("{doc}: no cell at chunk {chunk}, pass {pass}"))
        };
        let (first, second, merge) = (at(0, 0), at(1, 0), at(0, 1));
        // Begun after both (runs are numbered as they begin), and made of what they replied:
        // known only once they had ended.
        assert!(merge > first && merge > second, "{doc}");
        let sent = store.run(merge).unwrap().user;
        for run in [first, second] {
            let found = store.run(run).unwrap().raw;
            assert!(sent.contains(found.trim()), "{doc}: {sent}");
        }
    }
}

#[test]
fn the_windows_compare_sends_each_prompts_own_variables() {
    let server = Server::start(
        (0..2)
            .map(|i| Act::sse(200, completion(&format!("V{i}"))))
            .collect(),
    );
    let (dir, wb) = workbench_with(&server);
    let write = |name: &str, format: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            serde_json::json!({
                "prompt": "Topic: {{ topic }}. Format {{ fmt }}. Text: {{ text }}",
                "response-type": format,
                "terms": {"fmt": "from the terms"}
            })
            .to_string(),
        )
        .unwrap();
        p.display().to_string()
    };
    let (a, b) = (write("a.json", "jsonl"), write("b.json", "json"));
    let mut input = compare_input(1);
    input.prompts = vec![a.clone(), b.clone()];
    input.budgets = vec![64];
    let vars = |topic: &str| {
        serde_json::json!({ "topic": topic })
            .as_object()
            .unwrap()
            .clone()
    };
    input.vars = Some([(a, vars("botany")), (b, vars("geology"))].into());
    compare::compare_files(&wb, &input, &CancelToken::new(), &mut |_| {}).unwrap();
    let sent: Vec<String> = server
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(sent.len(), 2);
    for topic in ["Topic: botany. Format from the terms.", "Topic: geology."] {
        assert!(
            sent.iter().any(|b| b.contains(topic)),
            "{topic} in neither request: {sent:?}"
        );
    }
}

#[test]
fn the_windows_eval_renders_each_prompts_set_variables_beneath_each_rows_own() {
    let server = Server::start(
        (0..3)
            .map(|i| Act::sse(200, completion(&format!("V{i}"))))
            .collect(),
    );
    let (dir, wb) = workbench_with(&server);
    let prompt = dir.path().join("topical.json");
    std::fs::write(
        &prompt,
        serde_json::json!({
            "prompt": "Topic: {{ topic }}. Format {{ fmt }}. Text: {{ text }}",
            "response-type": "jsonl",
            "terms": {"fmt": "from the terms"}
        })
        .to_string(),
    )
    .unwrap();
    // The first row leaves `topic` to the form; the second gives its own.
    let data = dir.path().join("rows.jsonl");
    std::fs::write(
        &data,
        "{\"id\":\"r1\",\"input\":\"Stroma is a fluid.\",\"expected\":[]}\n\
         {\"id\":\"r2\",\"input\":\"Basalt is a rock.\",\"vars\":{\"topic\":\"geology\"},\"expected\":[]}\n",
    )
    .unwrap();
    let path = prompt.display().to_string();
    let set = |pairs: serde_json::Value| pairs.as_object().unwrap().clone();
    let input = |vars: serde_json::Value| EvalInput {
        dataset: data.display().to_string(),
        limit: None,
        prompts: vec![path.clone()],
        options: compare_input(1).options,
        providers: None,
        budgets: vec![64],
        constrain: ConstrainMode::None,
        repeat: None,
        cache: false,
        concurrency: Some(1),
        confirmed: None,
        vars: Some([(path.clone(), set(vars))].into()),
        ways: None,
        batch_file: None,
        chunking: None,
    };
    let store = wb.store_required().unwrap();

    // Without the form's value the first row misses `topic`: the plan names the row.
    let e = eval::flow::plan(&wb, &input(serde_json::json!({}))).unwrap_err();
    assert!(
        e.message.contains("row `r1`") && e.message.contains("missing variable `topic`"),
        "{}",
        e.message
    );
    // A value no prompt reads is refused, naming what they read.
    let e = eval::flow::plan(&wb, &input(serde_json::json!({"topc": "botany"}))).unwrap_err();
    assert!(
        e.message.contains("variable `topc` is read by no prompt") && e.message.contains("`topic`"),
        "{}",
        e.message
    );

    let input = input(serde_json::json!({"topic": "botany", "fmt": "as set"}));
    let finished = eval::flow::run(
        &wb,
        &store,
        &eval::StartInput::of(&input).unwrap(),
        &CancelToken::new(),
        eval::Options::default(),
        &mut |_| {},
        &mut |_| {},
    )
    .unwrap();
    let sent: Vec<String> = server
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|b| b.contains("messages"))
        .collect();
    assert_eq!(sent.len(), 2);
    // The form's values sit over the prompt's terms and under the row's own.
    for (text, topic) in [("Stroma", "botany"), ("Basalt", "geology")] {
        let want = format!("Topic: {topic}. Format as set. Text: {text}");
        assert!(
            sent.iter().any(|b| b.contains(&want)),
            "{want} in no request: {sent:?}"
        );
    }
    // The eval keeps them: its report names them, and the history's spec has them for a resume.
    let report = &finished.report;
    assert_eq!(report.vars["topical"]["topic"], "botany");
    let json = serde_json::to_value(report).unwrap();
    assert_eq!(json["vars"]["topical"]["fmt"], "as set");
    let kept = eval::stored(&store, report.experiment).unwrap();
    assert_eq!(kept.spec.prompts[0].vars["topic"], "botany");
    // Each cell's run stored the variables it was rendered with.
    let cell = eval::view::cell(
        &store,
        &kept,
        &eval::wire::CellKey {
            prompt: "topical".into(),
            row: "r2".into(),
            max_tokens: 64,
            constrained: false,
            repeat: 0,
            provider: None,
            chunk_size: None,
            context_chars: None,
        },
    )
    .unwrap();
    assert_eq!(cell.extracted.len(), 1, "{cell:?}");
    let run = store.run(cell.line.run.unwrap()).unwrap();
    assert_eq!(run.input.vars["topic"], "geology");
    assert_eq!(run.input.vars["fmt"], "as set");
    assert_eq!(run.input.vars["text"], "Basalt is a rock.");
}

/// The window's batch choice per provider: the plan offers each provider the ways it has, with
/// its cost online and by batch; a way a provider lacks is refused before anything is stored;
/// a batch file is written where the window says, its requests stored as awaited cells.
#[test]
fn the_windows_eval_offers_each_provider_its_ways_and_sends_it_the_way_chosen() {
    // Nothing may be sent online: a request reaching the server fails the eval.
    let server = Server::start(vec![]);
    let (dir, wb) = workbench_with(&server);
    let data = dir.path().join("rows.jsonl");
    std::fs::write(
        &data,
        "{\"id\":\"r1\",\"input\":\"Stroma is a fluid.\",\"expected\":[]}\n\
         {\"id\":\"r2\",\"input\":\"Basalt is a rock.\",\"expected\":[]}\n",
    )
    .unwrap();
    let file = dir.path().join("in.jsonl");
    let input =
        |ways: Option<(&str, eval::batched::Delivery)>, batch_file: Option<&Path>| EvalInput {
            dataset: data.display().to_string(),
            limit: None,
            prompts: vec![
                repo()
                    .join("prompts/agent-kg-extract.json")
                    .display()
                    .to_string(),
            ],
            options: compare_input(1).options,
            providers: None,
            budgets: vec![64],
            constrain: ConstrainMode::None,
            repeat: None,
            cache: false,
            concurrency: Some(1),
            confirmed: None,
            vars: None,
            ways: ways.map(|(p, d)| [(p.to_string(), d)].into()),
            batch_file: batch_file.map(|f| f.display().to_string()),
            chunking: None,
        };
    use eval::batched::Delivery;
    let plan = eval::flow::plan(&wb, &input(None, None)).unwrap();
    assert_eq!(plan.offers.len(), 1);
    let offer = &plan.offers[0];
    assert_eq!(
        (
            offer.provider.as_str(),
            offer.ways.as_slice(),
            offer.requests
        ),
        ("srv", &[Delivery::Online, Delivery::BatchFile][..], 2)
    );
    assert!(!plan.line.contains("by batch"), "{}", plan.line);
    let chosen = eval::flow::plan(&wb, &input(Some(("srv", Delivery::BatchFile)), None)).unwrap();
    assert!(
        chosen.line.contains("by batch, at half the online price"),
        "{}",
        chosen.line
    );

    let store = wb.store_required().unwrap();
    let submit = |i: &EvalInput| {
        let ways = i.ways.clone().unwrap_or_default();
        eval::batched::submit(
            &wb,
            &store,
            &eval::StartInput::of(i).unwrap(),
            eval::batched::Asked::ByName {
                ways: &ways,
                file: i.batch_file.as_deref().map(Path::new),
            },
            &CancelToken::new(),
            &mut |_| {},
            &mut |_| {},
        )
    };
    // A way the server lacks, and a batch file with nowhere to go: refused, nothing stored.
    let no_api = submit(&input(Some(("srv", Delivery::Batch)), None))
        .err()
        .unwrap();
    assert_eq!(no_api.code, Code::Usage);
    assert!(
        no_api.message.contains("srv has no batch API"),
        "{}",
        no_api.message
    );
    let no_path = submit(&input(Some(("srv", Delivery::BatchFile)), None))
        .err()
        .unwrap();
    assert!(
        no_path.message.contains("give the path"),
        "{}",
        no_path.message
    );
    assert!(
        store.experiments(None).unwrap().is_empty(),
        "a refused eval left an experiment"
    );

    let sent = submit(&input(Some(("srv", Delivery::BatchFile)), Some(&file))).unwrap();
    assert_eq!(sent.batches.len(), 1);
    assert_eq!(sent.batches[0].api, kerf_store::BatchApi::File);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l["url"] == "/v1/chat/completions"));
    assert_eq!(store.submitted_of(sent.experiment).unwrap().len(), 2);
    let shown = eval::flow::show(&store, sent.experiment, eval::Options::default()).unwrap();
    assert_eq!(shown.batches.len(), 1);
    let rows = kerf_api::history::experiment_rows(&store, None).unwrap();
    let tally = rows[0].batches.unwrap();
    assert_eq!((tally.batches, tally.ended, tally.requests), (1, 0, 2));
    assert_eq!(server.requests().len(), 0, "a request went online");
}
