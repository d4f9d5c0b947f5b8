//! The side-by-side view's data (`compare::sides`): a compare's two stored replies, a JSONL one
//! and a JSON array, with their token cuts, the sweep's curve and each object's place. What the
//! window reads off them at every token cut is what `parse(prefix)` gives and what the sweep
//! says; the text streamed while the compare ran is each run's reply.

use std::path::Path;

use kerf_api::compare::sides::{self, Side};
use kerf_api::compare::wire::{CompareProgress, ReplySide};
use kerf_api::compare::{self, ConstrainMode};
use kerf_api::experiments::Subject;
use kerf_api::experiments::plan::Allowance;
use kerf_api::runs::{Chosen, RunSettings};
use kerf_llm::CancelToken;
use kerf_llm::scripted::{Reply, Scripted};
use kerf_store::Store;
use serde_json::{Map, Value};

const JSONL: &str = "Here are the results:\n\
{\"type\": \"definition\", \"entity\": \"Café\", \"definition\": \"a place — ☕ for coffee\"}\n\
{\"type\": \"definition\", \"entity\": \"DNA 🧬\", \"definition\": \"a molecule\"}\n\
not json at all\n\
{\"type\": \"relationship\", \"subject\": \"DNA 🧬\", \"predicate\": \"is in\", \"object\": \"cell\", \"object-entity\": true} {\"type\": \"definition\", \"entity\": \"Cell\", \"definition\": \"a unit\"}\n\
{\"type\": \"definition\", \"entity\": \"cut";

const ARRAY: &str = "```json\n[\n  {\"type\": \"definition\", \"entity\": \"Café\", \"definition\": \"a place ☕\"},\n  \
{\"type\": \"relationship\", \"subject\": \"Café\", \"predicate\": \"serves\", \"object\": \"coffee\", \"object-entity\": false},\n  \
{\"type\": \"definition\", \"entity\": \"DNA 🧬\", \"definition\": \"a molecule\"}\n]\n```\n";

fn subject(name: &str) -> Subject {
    Subject::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../prompts")
            .join(name),
    )
    .unwrap()
}

/// A compare of the JSONL prompt and its array twin at one budget on a scripted provider that
/// answers `JSONL`, then `ARRAY`: its report, and every progress message.
fn compared(store: &Store) -> (compare::Report, Vec<CompareProgress>) {
    let contenders: Vec<compare::Contender> =
        ["agent-kg-extract.json", "agent-kg-extract-array.json"]
            .iter()
            .map(|name| {
                let subject = subject(name);
                let rendering =
                    kerf_api::runs::Rendering::of_input(&subject.prompt, "Cafés.", &Map::new())
                        .unwrap();
                compare::Contender::new(subject, rendering)
            })
            .collect();
    let provider = Chosen::Scripted(Box::new(Scripted::new([
        Reply::text(JSONL, 3),
        Reply::text(ARRAY, 5),
    ])));
    let settings = RunSettings {
        provider: "scripted".into(),
        ..RunSettings::default()
    };
    let job = compare::CompareJob {
        contenders: &contenders,
        budgets: &[400],
        constrain: ConstrainMode::None,
        settings: &settings,
        concurrency: 1,
        allowed: Allowance::default(),
    };
    let mut progress = Vec::new();
    let c = compare::compare(
        Some(store),
        &job,
        std::slice::from_ref(&provider),
        &CancelToken::new(),
        &mut |_| {},
        &mut |p| progress.push(p),
    )
    .unwrap();
    (c.report(&contenders), progress)
}

/// The count the window reads at UTF-16 offset `cut`: the last step at or before it.
fn count_at(steps: &[(u32, u32)], cut: u32) -> u32 {
    match steps.partition_point(|s| s.0 <= cut) {
        0 => 0,
        i => steps[i - 1].1,
    }
}

/// At every token cut: the window's count (its steps at its cut) is `parse(prefix)`'s count and
/// the sweep's value; the objects kept are the reply's first ones; and every object's span, read
/// back from the window's string, is that object.
fn assert_agrees(side: &Side, store: &Store) {
    let wire = ReplySide::from(side);
    let record = store.run(side.run).unwrap();
    let version = store
        .prompt_version(&record.summary.prompt_version)
        .unwrap();
    let file = kerf_core::PromptFile::from_json_str(&version.text, "p").unwrap();
    let prompt = kerf_core::Prompt::compile(file.file, "p").unwrap();
    let vars = record.input.vars.as_object().cloned().unwrap_or_default();
    let whole = prompt.parser.parse(&side.text, &vars).objects.to_vec();
    assert!(!whole.is_empty());
    assert_eq!(wire.total as usize, whole.len());
    assert_eq!(wire.cuts.len(), side.cuts.len());
    assert_eq!(wire.unit, "token:o200k_base");
    let utf16: Vec<u16> = side.text.encode_utf16().collect();
    let mut changes = 0;
    for (k, (&cut, &cut16)) in side.cuts.iter().zip(&wire.cuts).enumerate() {
        // The window's cut is the same place in its string.
        assert_eq!(
            String::from_utf16(&utf16[..cut16 as usize]).unwrap(),
            side.text[..cut],
            "cut {k}"
        );
        let prefix = prompt
            .parser
            .parse(&side.text[..cut], &vars)
            .objects
            .to_vec();
        let n = count_at(&wire.steps, cut16) as usize;
        assert_eq!(
            n,
            prefix.len(),
            "cut after {k} tokens: {:?}",
            &side.text[..cut]
        );
        assert_eq!(side.sweep.at(k), n, "the sweep after {k} tokens");
        assert_eq!(prefix, whole[..n], "the objects kept after {k} tokens");
        if side.response_type == kerf_core::ResponseType::Jsonl {
            // A JSONL object counts once its own text is in.
            let in_cut = wire.objects.iter().filter(|o| o.end <= cut16).count();
            assert_eq!(in_cut, n, "objects within the cut after {k} tokens");
        }
        if k > 0 && count_at(&wire.steps, wire.cuts[k - 1]) as usize != n {
            changes += 1;
        }
    }
    assert!(changes > 0, "the count never changed");
    assert_eq!(wire.objects.len(), whole.len());
    for (o, value) in wire.objects.iter().zip(&whole) {
        let text = String::from_utf16(&utf16[o.start as usize..o.end as usize]).unwrap();
        assert_eq!(&serde_json::from_str::<Value>(&text).unwrap(), value);
        assert!(!o.label.is_empty());
    }
}

#[test]
fn the_window_reads_the_sweeps_counts_and_each_objects_place_at_every_token_cut() {
    let store = Store::in_memory().unwrap();
    let (report, progress) = compared(&store);
    let ids: Vec<i64> = report
        .sweeps
        .iter()
        .map(|s| s.history_id.unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    let models = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    let (a, b) = (
        sides::side(&store, models.path(), ids[0], &cancel).unwrap(),
        sides::side(&store, models.path(), ids[1], &cancel).unwrap(),
    );
    assert_eq!(
        (a.response_type, b.response_type),
        (
            kerf_core::ResponseType::Jsonl,
            kerf_core::ResponseType::Json
        )
    );
    assert_eq!((a.text.as_str(), b.text.as_str()), (JSONL, ARRAY));
    assert_eq!((a.objects.len(), b.objects.len()), (4, 3));
    assert_eq!(
        a.objects[0].label,
        "definition · Café · a place — ☕ for coffee"
    );
    // The compare swept these replies in the same tokens: the same curve.
    for (side, swept) in [(&a, &report.sweeps[0]), (&b, &report.sweeps[1])] {
        assert_eq!(side.sweep, swept.sweep);
    }
    assert_agrees(&a, &store);
    assert_agrees(&b, &store);
    // The strict array keeps nothing until its value is whole.
    let wire = ReplySide::from(&b);
    assert_eq!(count_at(&wire.steps, wire.cuts[wire.cuts.len() / 2]), 0);

    // While the compare ran, each cell's reply streamed in its order: all of it, to its prompt.
    let mut streamed = [String::new(), String::new()];
    for p in &progress {
        if let Some(t) = &p.text {
            streamed[t.prompt as usize].push_str(&t.text);
            assert_eq!(t.cell, t.prompt, "one budget: cell i is prompt i");
        }
    }
    assert_eq!(streamed, [JSONL.to_string(), ARRAY.to_string()]);

    // Each object was named as its format accepted it, placed where the stored run's view
    // places it: the JSONL reply's while it streamed, the array's only once it had ended.
    let mut while_streaming = [Vec::new(), Vec::new()];
    let mut at_end = [Vec::new(), Vec::new()];
    for p in &progress {
        if let Some(t) = &p.text {
            while_streaming[t.prompt as usize].extend(t.objects.iter().cloned());
        }
        if let Some(e) = &p.ended {
            let i = e.prompt as usize;
            assert!(at_end[i].is_empty(), "one end per cell");
            at_end[i].extend(e.objects.iter().cloned());
            assert_eq!(e.history_id, Some(ids[i]));
            assert_eq!(e.total as usize, [&a, &b][i].objects.len());
            let messages = progress.iter().filter(|q| q.ended.is_some()).count();
            assert_eq!(messages, 2);
        }
    }
    assert_eq!(
        (while_streaming[0].len(), at_end[0].len()),
        (4, 0),
        "each JSONL object as its line completed; the cut last line yields none"
    );
    assert!(
        while_streaming[1].is_empty(),
        "a strict array yields nothing before it ends"
    );
    assert_eq!(at_end[1].len(), 3);
    for (i, side) in [&a, &b].into_iter().enumerate() {
        let live: Vec<_> = while_streaming[i]
            .iter()
            .chain(&at_end[i])
            .cloned()
            .collect();
        assert_eq!(live, ReplySide::from(side).objects, "prompt {i}'s objects");
    }
    let json = serde_json::to_value(&progress[0]).unwrap();
    assert!(json.get("text").is_none(), "a start has no text: {json}");
}

/// History's "Open": a stored compare comes back as the Compare screen drew it when it ended
/// (the same table, sweeps and charts, from the result the history keeps), with its spec to run
/// it again; a stored sweep as its curves; one still running or failed says so.
#[test]
fn a_stored_compare_sweep_and_test_open_as_their_screens_show_them() {
    use kerf_api::compare::wire::Comparison;
    use kerf_api::opened::{self, OpenedExperiment};
    let store = Store::in_memory().unwrap();
    let (report, _) = compared(&store);
    let id = report.experiment.unwrap();
    match opened::open(&store, id).unwrap() {
        OpenedExperiment::Compare {
            id: got,
            spec,
            comparison,
        } => {
            assert_eq!(got, id);
            assert_eq!(comparison, Comparison::from(&report));
            assert_eq!(spec.max_tokens, vec![400]);
            assert_eq!(spec.prompts.len(), 2);
            assert!(spec.prompts[1].ends_with("agent-kg-extract-array.json"));
        }
        other => panic!("not a compare: {other:?}"),
    }

    // A sweep of the two replies, kept in the history as `kerf sweep` keeps it.
    let reply = |name: &str, prompt: &str, text: &str| kerf_api::experiments::sweep::Reply {
        name: name.into(),
        parser: subject(prompt).prompt.parser,
        text: text.into(),
    };
    let replies = [
        reply("a.jsonl", "agent-kg-extract.json", JSONL),
        reply("b.json", "agent-kg-extract-array.json", ARRAY),
    ];
    let (sweeps, _) = kerf_api::experiments::sweep::sweep(
        Some(&store),
        &replies,
        kerf_api::experiments::spec::CutUnit::Char,
        "o200k_base",
        &CancelToken::new(),
        &mut |_, _| {},
    )
    .unwrap();
    let swept = store
        .latest_experiment(kerf_store::ExperimentKind::Sweep)
        .unwrap()
        .unwrap();
    match opened::open(&store, swept).unwrap() {
        OpenedExperiment::Sweep { curves, chart, .. } => {
            let got: Vec<_> = curves
                .iter()
                .map(|c| (c.name.as_str(), c.total, c.length))
                .collect();
            assert_eq!(
                got,
                vec![
                    ("a.jsonl", 4, sweeps[0].length as u32),
                    ("b.json", 3, sweeps[1].length as u32)
                ]
            );
            assert_eq!(chart.series.len(), 2);
        }
        other => panic!("not a sweep: {other:?}"),
    }

    // Not done: no result to show, and the reason.
    let running = store
        .begin_experiment(
            kerf_store::ExperimentKind::Compare,
            &serde_json::to_value(opened_spec(&store, id)).unwrap(),
        )
        .unwrap();
    let e = opened::open(&store, running).unwrap_err();
    assert_eq!(e.code, kerf_api::Code::Conflict);
    assert!(e.message.contains("still running"), "{}", e.message);
    store
        .finish_experiment(
            running,
            "null",
            &Default::default(),
            Some("the model went away"),
        )
        .unwrap();
    let e = opened::open(&store, running).unwrap_err();
    assert!(e.message.contains("the model went away"), "{}", e.message);
    // Stopped before every cell ran: it says how to finish it.
    kerf_api::experiments::lifecycle::Running {
        store: &store,
        id: running,
        kind: kerf_store::ExperimentKind::Compare,
    }
    .settle(kerf_api::experiments::lifecycle::End::Stopped(
        kerf_api::experiments::lifecycle::Outcome::none(),
    ))
    .unwrap();
    let e = opened::open(&store, running).unwrap_err();
    assert!(
        e.message.contains(&format!(
            "has no result to show: stopped before every cell ran; `kerf compare --resume {running}` finishes it"
        )),
        "{}",
        e.message
    );
    assert_eq!(
        opened::open(&store, 999).unwrap_err().code,
        kerf_api::Code::NotFound
    );
}

/// The spec experiment `id` was stored with.
fn opened_spec(store: &Store, id: i64) -> Value {
    store.experiment(id).unwrap().spec
}

#[test]
fn a_run_not_in_the_history_is_not_found() {
    let store = Store::in_memory().unwrap();
    let e = sides::side(&store, Path::new("/nowhere"), 7, &CancelToken::new()).unwrap_err();
    assert_eq!(e.code, kerf_api::Code::NotFound);
}

#[test]
fn labels_name_an_object_by_its_first_values() {
    let v: Value = serde_json::json!({"type": "definition", "entity": "A\nB", "nested": {"x": 1}, "n": 3, "more": "x"});
    assert_eq!(sides::label(&v), "definition · A B · 3");
    let long = serde_json::json!({"d": "é".repeat(80)});
    assert_eq!(sides::label(&long), format!("{}…", "é".repeat(60)));
    assert_eq!(sides::label(&serde_json::json!([1, 2])), "[1,2]");
}

/// Kerf's example pair, as the Compare screen first shows it: the shipped prompt and its twin with
/// their example replies, each read off its sweep at the headline's cut — the JSONL reply keeps
/// part of its objects, the array none, and all of them at the end.
#[test]
fn the_example_pair_says_what_its_cut_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts");
    let wb = kerf_api::workbench::Workbench::at(
        &dir.path().join("data"),
        &dir.path().join("config"),
        &dir.path().join("models"),
        Some(shipped.clone()),
    );
    let e = sides::example(&wb, &CancelToken::new()).unwrap().unwrap();
    let (a, b) = &e.sides;
    assert_eq!(
        (a.prompt.as_str(), b.prompt.as_str()),
        ("agent-kg-extract", "agent-kg-extract-array")
    );
    let h = &e.headline;
    assert_eq!(h.cut, a.sweep.length.max(b.sweep.length) / 2);
    assert_eq!((h.jsonl_kept, h.array_kept), (a.sweep.at(h.cut), 0));
    assert!(h.jsonl_kept > 0 && h.jsonl_kept < h.jsonl_total, "{h:?}");
    assert_eq!((h.jsonl_total, h.array_total), (10, 10));
    assert_eq!(
        b.sweep.at(b.sweep.length),
        10,
        "the closed array has every object"
    );
    // The count at the cut is what parsing the reply cut there gives.
    let cut_a = &a.text[..a.cuts[h.cut]];
    let jsonl = kerf_core::Prompt::load(&shipped.join("agent-kg-extract.json")).unwrap();
    assert_eq!(
        jsonl.parser.parse(cut_a, &Map::new()).objects.len(),
        h.jsonl_kept
    );
    assert!(h.sentence().starts_with(&format!(
        "cut after {} tokens (50% of the reply): JSONL keeps {} of 10 objects, the JSON array 0 of 10; resilience 0.",
        h.cut, h.jsonl_kept
    )));
    // Without shipped prompts there is no example (and no error).
    let bare = kerf_api::workbench::Workbench::at(
        &dir.path().join("data"),
        &dir.path().join("config"),
        &dir.path().join("models"),
        None,
    );
    assert!(
        sides::example(&bare, &CancelToken::new())
            .unwrap()
            .is_none()
    );
}
