//! An eval too large to hold (issue 36, item 13): its report reads the cells' replies from the
//! history one at a time, and its dataset is read a row at a time from planning to the report.
//! Counted, not timed: [`super::report::held`] counts the replies a report holds at once, and
//! [`dataset::held`] the rows — each counter a thread's own, so tests running beside each other
//! do not mix. Before these, a report held every cell's reply and an eval every row.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use kerf_core::eval::dataset;
use kerf_llm::CancelToken;
use kerf_llm::scripted::{Reply, Scripted};
use kerf_store::Store;
use serde_json::{Value, json};

use super::report::held;
use super::{Options, Pace, Plan, Replies, Rows, html};
use crate::error::Code;
use crate::experiments::plan::Allowance;
use crate::experiments::{ConstrainMode, Subject};
use crate::runs::{Chosen, RunParams, RunSettings};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The JSONL prompt, and a copy of it under another id whose twin it is (so both score against
/// the same expected records, and the report compares them).
fn subjects(dir: &Path) -> Vec<Subject> {
    let path = repo().join("prompts/agent-kg-extract.json");
    let mut twin: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    twin["id"] = json!("agent-kg-extract-b");
    twin["twin"] = json!("agent-kg-extract");
    let twin_path = dir.join("agent-kg-extract-b.json");
    std::fs::write(&twin_path, twin.to_string()).unwrap();
    vec![
        Subject::load(&path).unwrap(),
        Subject::load(&twin_path).unwrap(),
    ]
}

/// `rows` rows of the shipped dataset, cycled (each id made unique), as a JSONL file.
fn dataset_file(dir: &Path, rows: usize) -> PathBuf {
    let shipped: Vec<Value> =
        std::fs::read_to_string(repo().join("datasets/knowledge-graph.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let text: String = (0..rows)
        .map(|n| {
            let mut row = shipped[n % shipped.len()].clone();
            row["id"] = json!(format!("{}-{n}", row["id"].as_str().unwrap()));
            format!("{row}\n")
        })
        .collect();
    let path = dir.join("data.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// Replies that differ from one request to the next (so repeats and prompts disagree on some
/// records): the photosynthesis row's first record, then one of three made-up ones.
fn scripted(replies: usize) -> Chosen {
    let reply = |i: usize| {
        format!(
            "{}\n{}\n",
            r#"{"type":"definition","entity":"Photosynthesis","definition":"The process by which green plants turn light energy into chemical energy"}"#,
            json!({"type": "definition", "entity": format!("Thing {}", i % 3), "definition": "Made up"})
        )
    };
    Chosen::Scripted(Box::new(Scripted::new(
        (0..replies).map(|i| Reply::text(&reply(i), 40)),
    )))
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

const BUDGETS: [u32; 2] = [64, 256];

fn plan(repeat: u32) -> Plan<'static> {
    Plan {
        budgets: &BUDGETS,
        adaptive: false,
        constrain: ConstrainMode::None,
        repeat,
        cache: false,
        concurrency: 4,
        allowed: Allowance {
            max_requests: None,
            yes: true,
        },
        vars: &[],
        chunking: None,
    }
}

/// An eval of `rows` rows × 2 prompts × 2 budgets × `repeat` repeats, run to its end.
fn ran(dir: &Path, store: &Store, rows: usize, repeat: u32) -> super::Eval {
    let cells = rows * 2 * BUDGETS.len() * repeat as usize;
    ran_on(dir, store, rows, repeat, &scripted(cells))
}

/// [`ran`] on `provider`.
fn ran_on(dir: &Path, store: &Store, rows: usize, repeat: u32, provider: &Chosen) -> super::Eval {
    let e = super::begin(
        store,
        Rows::file(&dataset_file(dir, rows), None),
        subjects(dir),
        &plan(repeat),
        params(),
        std::slice::from_ref(provider),
        &mut |_| {},
    )
    .unwrap();
    let pace = Pace {
        concurrency: 4,
        adaptive: false,
        retry_errors: false,
        live: false,
    };
    super::run_cells(
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

#[test]
fn a_report_holds_a_reply_at_a_time_and_a_comparison_two() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let e = ran(dir.path(), &store, 4, 3);
    held::reset();
    let stored = super::finish(&store, &e, false, Options::default()).unwrap();
    assert_eq!(stored.cells.len(), 48);
    assert!(stored.cells.iter().all(|c| c.measured() && c.tp.is_some()));
    assert!(stored.summary.iter().all(|l| l.repeats.is_some()));
    assert_eq!(stored.comparisons.len(), 2, "a line per budget");
    // Before, every cell's reply was held to the end: 48 here.
    assert_eq!(held::peak(), 2, "a cell's reply, or a comparison's two");
    assert_eq!(held::now(), 0);
    // Read again from the raw replies, the same figures (the parse is the same), and as few
    // replies held.
    held::reset();
    let reread = super::report(
        &store,
        &e,
        Options {
            replies: Replies::Reread,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(held::peak(), 2);
    assert_eq!(
        serde_json::to_value(&reread).unwrap(),
        serde_json::to_value(&stored).unwrap()
    );
    // The HTML page: a cell's records at a time.
    held::reset();
    let mut page = Vec::new();
    html::write(&store, &e, &stored, &mut page).unwrap();
    assert_eq!(held::peak(), 1);
    assert_eq!(held::now(), 0);
}

/// Per prompt, budget and row: each measured repeat's record identities and output.
type EveryRepeat = std::collections::BTreeMap<(String, u32, String), Vec<(Vec<String>, String)>>;

#[test]
fn the_figures_a_report_keeps_of_a_reply_are_what_scoring_all_at_once_gave() {
    use kerf_core::eval::{identity, score};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let e = ran(dir.path(), &store, 3, 2);
    let report = super::report(&store, &e, Options::default()).unwrap();
    // Every reply at once, scored the way the report did before it read them one at a time.
    let replies = store.eval_replies(e.experiment, false).unwrap();
    let mut sets = EveryRepeat::default();
    for r in &replies {
        let c = &r.cell.cell;
        let line = report
            .cells
            .iter()
            .find(|l| {
                l.prompt == c.prompt
                    && l.max_tokens == c.max_tokens
                    && l.repeat == c.repeat
                    && l.row == c.row
            })
            .unwrap();
        let s = &e.subjects[usize::from(c.prompt != "agent-kg-extract")].prompt;
        let row = e
            .row(&store, e.rows.iter().position(|id| *id == c.row).unwrap())
            .unwrap();
        let objects = &r.report.as_ref().unwrap().objects.to_vec();
        let (expected, _) = row.expected_for(s).unwrap();
        let scored = score(&s.matcher(), expected, objects);
        assert_eq!(line.objects, objects.len());
        assert_eq!(line.tp, Some(scored.counts.tp));
        assert_eq!(line.scored.as_ref().unwrap().matched, scored.matched);
        let ids: std::collections::BTreeSet<String> =
            objects.iter().map(|o| identity(&s.matcher(), o)).collect();
        sets.entry((c.prompt.clone(), c.max_tokens, c.row.clone()))
            .or_default()
            .push((
                ids.into_iter().collect(),
                Value::Array(objects.clone()).to_string(),
            ));
    }
    // Repeats: the Jaccard index and distinct outputs per row, figured from every reply at once.
    for l in &report.summary {
        let stats = l.repeats.as_ref().unwrap();
        let mut jaccards = Vec::new();
        let mut distinct = Vec::new();
        for ((prompt, budget, _), cells) in &sets {
            if *prompt != l.prompt || *budget != l.max_tokens {
                continue;
            }
            let as_sets: Vec<std::collections::BTreeSet<&str>> = cells
                .iter()
                .map(|(ids, _)| ids.iter().map(String::as_str).collect())
                .collect();
            jaccards.extend(kerf_core::eval::stats::mean_pairwise_jaccard(&as_sets));
            distinct.push(
                cells
                    .iter()
                    .map(|(_, out)| out.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len(),
            );
        }
        let mean = jaccards.iter().sum::<f64>() / jaccards.len() as f64;
        assert_eq!(stats.jaccard_mean, Some(mean), "{}", l.prompt);
        assert_eq!(
            stats.distinct_outputs_max,
            distinct.iter().copied().max().unwrap()
        );
    }
}

#[test]
fn the_html_report_is_its_whole_template_written_a_piece_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let e = ran(dir.path(), &store, 3, 2);
    let report = super::report(&store, &e, Options::default()).unwrap();
    let streamed = html::html(&store, &e, &report).unwrap();
    // The page as it was made before: every row's cells side by side in one context, the
    // whole template rendered at once.
    let reader = super::report::Reader::new(&store, &e, report.replies);
    let rows: Vec<Value> = e
        .rows
        .iter()
        .enumerate()
        .map(|(seq, id)| {
            let row = e.row(&store, seq).unwrap();
            let cells: Vec<Value> = report
                .cells
                .iter()
                .filter(|c| c.row == *id && c.repeat == 0)
                .map(|c| {
                    let s = e
                        .subjects
                        .iter()
                        .find(|s| s.prompt.id() == c.prompt)
                        .unwrap();
                    let expected = row
                        .expected_for(&s.prompt)
                        .map(|(e, _)| e)
                        .unwrap_or_default();
                    html::side_by_side(c, expected, &reader.objects(c).unwrap())
                })
                .collect();
            json!({"id": id, "cells": cells})
        })
        .collect();
    let whole = html::whole(&report, rows).unwrap();
    assert!(
        whole.contains("<li class=\"matched\">"),
        "the page shows records"
    );
    assert_eq!(streamed, whole);
}

#[test]
fn an_eval_holds_a_row_at_a_time_from_its_plan_to_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let path = dataset_file(dir.path(), 150);
    let subjects = subjects(dir.path());
    let cells = 150 * 2 * BUDGETS.len();
    let provider = scripted(cells);
    dataset::held::reset();
    let rows = Rows::file(&path, None);
    let size = super::plan(
        &rows,
        &subjects,
        &plan(1),
        &params(),
        std::slice::from_ref(&provider),
    )
    .unwrap();
    assert_eq!(size.cells, cells as u64);
    let first = super::plan(
        &Rows::file(&path, Some(100)),
        &subjects,
        &plan(1),
        &params(),
        std::slice::from_ref(&provider),
    );
    assert_eq!(first.unwrap().cells, 100 * 2 * BUDGETS.len() as u64);
    let e = super::begin(
        &store,
        rows,
        subjects,
        &plan(1),
        params(),
        std::slice::from_ref(&provider),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(e.rows.len(), 150);
    let pace = Pace {
        concurrency: 4,
        adaptive: false,
        retry_errors: false,
        live: false,
    };
    super::run_cells(
        &store,
        &e,
        std::slice::from_ref(&provider),
        pace,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    let report = super::finish(&store, &e, false, Options::default()).unwrap();
    assert_eq!(report.cells.iter().filter(|c| c.measured()).count(), cells);
    let left = e
        .remaining(&store, std::slice::from_ref(&provider), false)
        .unwrap();
    assert_eq!(left.cells, 0);
    // Before, the dataset was loaded whole (150 rows) and kept for the eval's life.
    assert!(
        dataset::held::peak() <= 2,
        "{} rows held at once",
        dataset::held::peak()
    );
    assert_eq!(dataset::held::now(), 0);
}

#[test]
fn a_dataset_that_changed_since_it_was_checked_keeps_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let path = dataset_file(dir.path(), 5);
    let provider = scripted(0);
    let subjects = subjects(dir.path());
    let rows = Rows::file(&path, None);
    let (_, checked) = super::planned(
        &rows,
        &subjects,
        &plan(1),
        &params(),
        std::slice::from_ref(&provider),
        true,
    )
    .unwrap();
    // The file changes between the check and the keeping.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("Photosynthesis", "Chemosynthesis")).unwrap();
    let experiment = store
        .begin_experiment(kerf_store::ExperimentKind::Eval, &json!({}))
        .unwrap();
    let e = super::keep_rows(&store, experiment, &rows, checked).unwrap_err();
    assert_eq!(e.code, Code::Conflict);
    assert!(e.message.contains("the dataset changed"), "{}", e.message);
    assert!(store.eval_row_ids(experiment).unwrap().is_empty());
    // Unchanged, it is kept.
    std::fs::write(&path, text).unwrap();
    let ids = super::keep_rows(&store, experiment, &rows, checked).unwrap();
    assert_eq!(ids.len(), 5);
    assert_eq!(store.eval_row_ids(experiment).unwrap(), ids);
}

/// A reply of thousands of records (a model that never stops, cut at 64 MiB, holds hundreds of
/// thousands) is not copied whole into the HTML page: each cell shows its first records up to
/// a bound, counts the rest, and names the run that holds the whole reply (eight such cells
/// once made a 522 MB page).
#[test]
fn the_html_report_shows_a_bounded_part_of_a_huge_reply_and_names_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let records = 3_000;
    let reply: String = (0..records)
        .map(|i| {
            format!(
                "{}\n",
                json!({"type": "definition", "entity": format!("Thing {i}"), "definition": "x".repeat(300)})
            )
        })
        .collect();
    let cells = 2 * BUDGETS.len();
    let provider = Chosen::Scripted(Box::new(Scripted::new(
        (0..cells).map(|_| Reply::text(&reply, 4096)),
    )));
    let e = ran_on(dir.path(), &store, 1, 1, &provider);
    let report = super::report(&store, &e, Options::default()).unwrap();
    let page = html::html(&store, &e, &report).unwrap();
    let shown = page.matches("<li class=\"spurious\">").count()
        + page.matches("<li class=\"matched\">").count()
        + page.matches("<li class=\"partial\">").count();
    assert!(shown < cells * records, "{shown} records listed");
    let per_cell = page.matches("more records (").count();
    assert_eq!(per_cell, cells, "each cell counts what it left out");
    for c in report.cells.iter() {
        let run = c.run.unwrap();
        assert!(
            page.contains(&format!("the whole reply is run {run} of the history")),
            "run {run} is named"
        );
    }
    // The page stays far below the replies it stands for.
    assert!(page.len() < cells * reply.len() / 4, "{} bytes", page.len());
}

/// A cell's score is kept with its run: opening the eval again (`eval show`, `report`, the
/// window) takes the kept scores and scores no document again, with the same figures; a
/// rescore with other `match` settings scores afresh (another key). Counted, not timed: an eval
/// row of 2,000 records once took 41 s to score on every open.
#[test]
fn opening_an_eval_again_takes_its_kept_scores() {
    use kerf_core::eval::score::compared;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::in_memory().unwrap();
    let mut e = ran(dir.path(), &store, 3, 1);
    compared::reset();
    let first = super::report(&store, &e, Options::default()).unwrap();
    let scored = compared::documents();
    assert_eq!(scored as usize, first.cells.len(), "each cell scored once");
    compared::reset();
    let again = super::report(&store, &e, Options::default()).unwrap();
    assert_eq!(compared::documents(), 0, "nothing scored again");
    assert_eq!(again, first);
    // Other `match` settings: scored afresh, then kept under their own key.
    e.subjects[0].prompt.file.match_spec =
        Some(serde_json::from_value(json!({"fuzzy": 0.5})).unwrap());
    compared::reset();
    super::report(&store, &e, Options::default()).unwrap();
    let prompt = e.subjects[0].prompt.id().to_string();
    let theirs = first.cells.iter().filter(|c| c.prompt == prompt).count();
    assert_eq!(compared::documents() as usize, theirs);
}
