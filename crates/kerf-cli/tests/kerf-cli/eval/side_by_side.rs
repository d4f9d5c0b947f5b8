//! Several models in one eval: two loopback servers, one that extracts every expected record
//! and one that always leaves each document's last record out, run side by side as providers
//! `srv` and `weak`. Every figure is worked out by hand from the rows; each server must see
//! exactly its own requests, and a slow one must hold back only its own cells.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{Again, Model, add_server, kerf_in, repo, rows, setup, stderr, stdout_json};

const PROMPTS: [&str; 2] = [
    "prompts/agent-kg-extract.json",
    "prompts/agent-kg-extract-array.json",
];

/// `kerf eval` of the three rows with both prompts on `srv` and `weak` (`providers`, as given),
/// at 40 and 1000 tokens, unconstrained, `width` in flight per provider; then `extra`.
fn args(data: &std::path::Path, providers: &[&str], width: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["eval".into(), data.display().to_string()];
    for p in PROMPTS {
        a.extend(["--prompt".into(), p.into()]);
    }
    for p in providers {
        a.extend(["--provider".into(), (*p).into()]);
    }
    a.extend(
        [
            "--max-tokens",
            "40,1000",
            "--constrain",
            "none",
            "--concurrency",
            width,
        ]
        .map(String::from),
    );
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Every request one server should see: each row at each budget in each format, once.
fn each_request_once() -> Vec<String> {
    let mut all = Vec::new();
    for r in rows() {
        for budget in [40, 1000] {
            for format in ["jsonl", "array"] {
                all.push(format!("{}|{budget}|{format}", r["id"].as_str().unwrap()));
            }
        }
    }
    all.sort();
    all
}

fn line<'v>(v: &'v Value, prompt: &str, provider: &str, budget: u64) -> &'v Value {
    v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["prompt"] == prompt && l["provider"] == provider && l["max_tokens"] == budget)
        .unwrap_or_else(|| panic!("no line {prompt} on {provider} at {budget}: {v}"))
}

#[test]
fn two_models_in_one_eval_are_scored_each_on_its_own_requests() {
    let rows = rows();
    let strong = Model::start(rows.clone(), Duration::ZERO);
    let weak = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    let (dir, data) = setup(&strong, &rows);
    add_server(dir.path(), "weak", &weak.url(), "loopback-small");
    let argv = args(&data, &["srv,weak"], "4", &["--json"]);
    let o = kerf_in(
        dir.path(),
        &argv.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The plan counts each provider's requests before anything is sent.
    let e = stderr(&o);
    assert!(
        e.contains("eval plan: 24 cell(s) · 24 request(s) at most")
            && e.contains("srv: 12 request(s)")
            && e.contains("weak: 12 request(s)"),
        "{e}"
    );
    // Each server saw exactly its own requests: every row × budget × format, once.
    assert_eq!(strong.answered(), each_request_once());
    assert_eq!(weak.answered(), each_request_once());

    let v = stdout_json(&o);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 24);
    for p in ["srv", "weak"] {
        assert_eq!(
            cells.iter().filter(|c| c["provider"] == p).count(),
            12,
            "{p}"
        );
    }
    // One summary line per prompt × provider × budget × constraint.
    assert_eq!(v["summary"].as_array().unwrap().len(), 8);
    // At 1000 tokens nothing is cut. By hand: `srv` finds every expected record; `weak` every
    // one but each document's last, and invents none.
    let expected: Vec<u64> = rows
        .iter()
        .map(|r| r["expected"]["agent-kg-extract"].as_array().unwrap().len() as u64)
        .collect();
    let all: u64 = expected.iter().sum();
    let weak_tp: u64 = expected.iter().map(|n| n - 1).sum();
    let weak_fn = expected.len() as u64;
    let weak_recall = weak_tp as f64 / all as f64;
    let weak_f1 = 2.0 * weak_tp as f64 / (2 * weak_tp + weak_fn) as f64;
    for prompt in ["agent-kg-extract", "agent-kg-extract-array"] {
        let s = line(&v, prompt, "srv", 1000);
        assert_eq!(
            (&s["tp"], &s["fp"], &s["fn"]),
            (&all.into(), &0.into(), &0.into()),
            "{s}"
        );
        assert_eq!(s["f1"], 1.0, "{s}");
        let w = line(&v, prompt, "weak", 1000);
        assert_eq!(
            (&w["tp"], &w["fp"], &w["fn"]),
            (&weak_tp.into(), &0.into(), &weak_fn.into()),
            "{w}"
        );
        assert_eq!(w["precision"], 1.0, "{w}");
        assert!(
            (w["recall"].as_f64().unwrap() - weak_recall).abs() < 1e-9,
            "{w}"
        );
        assert!((w["f1"].as_f64().unwrap() - weak_f1).abs() < 1e-9, "{w}");
        for l in [s, w] {
            assert!(
                l["seconds_p50"].is_number() && l["seconds_p95"].is_number(),
                "{l}"
            );
        }
    }
    // Each provider's share: its model, its cells, its run times.
    let providers = v["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 2);
    assert_eq!(
        (&providers[0]["provider"], &providers[0]["model"]),
        (&"srv".into(), &"loopback".into())
    );
    assert_eq!(
        (&providers[1]["provider"], &providers[1]["model"]),
        (&"weak".into(), &"loopback-small".into())
    );
    for p in providers {
        assert_eq!(
            (&p["cells"], &p["measured"]),
            (&12.into(), &12.into()),
            "{p}"
        );
        let (p50, p95) = (
            p["seconds_p50"].as_f64().unwrap(),
            p["seconds_p95"].as_f64().unwrap(),
        );
        assert!(p50 <= p95, "{p}");
    }
    // The providers compared on the same rows: `weak` − `srv`.
    let c = v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["a"]["provider"] == "srv"
                && c["b"]["provider"] == "weak"
                && c["a"]["prompt"] == "agent-kg-extract"
                && c["a"]["max_tokens"] == 1000
        })
        .unwrap_or_else(|| panic!("no comparison of the providers: {}", v["comparisons"]));
    assert!(
        (c["f1_diff"].as_f64().unwrap() - (weak_f1 - 1.0)).abs() < 1e-9,
        "{c}"
    );
    assert_eq!((&c["worse"], &c["rows"]), (&3.into(), &3.into()), "{c}");

    let id = v["experiment"].as_i64().unwrap().to_string();
    // The table groups the lines by provider, each under its cost and run times.
    let o = kerf_in(dir.path(), &["eval", "show", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.contains("2 providers side by side"), "{text}");
    let (at_srv, at_weak) = (
        text.find("srv / loopback · 12 of 12 cell(s) measured"),
        text.find("weak / loopback-small · 12 of 12 cell(s) measured"),
    );
    assert!(
        matches!((at_srv, at_weak), (Some(a), Some(b)) if a < b),
        "{text}"
    );
    assert!(text.contains("run time p50"), "{text}");
    // So does the HTML report, with a table of the providers.
    let page = dir.path().join("eval.html");
    let o = kerf_in(
        dir.path(),
        &["eval", "report", &id, "--html", page.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("2 providers side by side"), "{html}");
    assert!(
        html.contains(
            "<td class=\"l\">weak</td><td class=\"l\">loopback-small</td><td>12 of 12</td>"
        ),
        "{html}"
    );
    assert!(
        html.contains("<tr class=\"group\"><th class=\"l\" colspan=\"16\">weak</th></tr>"),
        "{html}"
    );
    assert!(
        html.contains("agent-kg-extract on weak at 1000 tokens"),
        "{html}"
    );
    // `kerf eval compare` with one eval compares its providers as it compares two evals.
    let o = kerf_in(dir.path(), &["eval", "compare", &id, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cv = stdout_json(&o);
    let comparisons = cv["comparisons"].as_array().unwrap();
    // Two prompts × two budgets, `weak` against `srv`.
    assert_eq!(comparisons.len(), 4, "{cv}");
    assert!(
        comparisons
            .iter()
            .all(|c| c["a"]["provider"] == "srv" && c["b"]["provider"] == "weak"),
        "{cv}"
    );
    // The same flag twice, or a model with several providers: refused before anything is sent.
    let before = (strong.requests(), weak.requests());
    for (providers, extra, says) in [
        (
            &["srv", "srv"][..],
            &[][..],
            "provider `srv` is given twice",
        ),
        (
            &["srv", "weak"][..],
            &["--model", "m"][..],
            "--model names one provider's model",
        ),
    ] {
        let argv = args(&data, providers, "4", extra);
        let o = kerf_in(
            dir.path(),
            &argv.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    assert_eq!((strong.requests(), weak.requests()), before);
}

#[test]
fn a_slow_provider_holds_back_only_its_own_cells() {
    let rows = rows();
    let fast = Model::start(rows.clone(), Duration::ZERO);
    let slow = Model::start(rows.clone(), Duration::ZERO);
    // Every request to the slow server waits until the test lets it go.
    slow.hold_from(0);
    let (dir, data) = setup(&fast, &rows);
    add_server(dir.path(), "slow", &slow.url(), "loopback");
    let argv = args(&data, &["slow", "srv"], "2", &["--json"]);
    let child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(&argv)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two of the slow provider's cells are held in flight, its own width...
    slow.wait_held(2);
    // ...while the fast one runs all twelve of its own: the lanes do not share their places.
    let waited = std::time::Instant::now();
    while fast.requests() < 12 && waited.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fast.requests(), 12, "the fast provider was held back");
    assert_eq!(slow.requests(), 2, "the slow provider went past its width");
    slow.release();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        slow.peak() <= 2 && fast.peak() <= 2,
        "{} {}",
        slow.peak(),
        fast.peak()
    );
    let v = stdout_json(&o);
    assert_eq!(v["pending"], 0);
    assert_eq!(v["cells"].as_array().unwrap().len(), 24);
}

#[test]
fn a_killed_eval_of_two_providers_resumes_without_buying_a_cell_of_either_again() {
    let rows = rows();
    let a = Model::start(rows.clone(), Duration::ZERO);
    let b = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    // From the third request on, each server holds its replies: the kill lands with cells of
    // both providers done and two of each in flight.
    a.hold_from(2);
    b.hold_from(2);
    let (dir, data) = setup(&a, &rows);
    add_server(dir.path(), "weak", &b.url(), "loopback-small");
    let argv = args(&data, &["srv", "weak"], "2", &[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(&argv)
        .current_dir(repo())
        .env("KERF_CONFIG_DIR", dir.path())
        .env("KERF_DATA_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    a.wait_held(2);
    b.wait_held(2);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = (a.requests(), b.requests());
    assert_eq!(before, (4, 4), "two answered and two held on each");
    a.release();
    b.release();
    // One of the two names re-pointed at another server: the resume is refused, naming it,
    // before anything is sent to either.
    let moved = Model::start(rows.clone(), Duration::ZERO);
    add_server(dir.path(), "weak", &moved.url(), "loopback-small");
    let o = kerf_in(dir.path(), &["eval", "resume"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("ran on openai at {}", b.url()))
            && stderr(&o).contains(&format!(
                "provider `weak` now points at openai at {}",
                moved.url()
            )),
        "{}",
        stderr(&o)
    );
    assert_eq!((a.requests(), b.requests(), moved.requests()), (4, 4, 0));
    add_server(dir.path(), "weak", &b.url(), "loopback-small");
    let o = kerf_in(dir.path(), &["eval", "resume", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["pending"], 0);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 24);
    let mut keys: Vec<String> = cells
        .iter()
        .map(|c| {
            format!(
                "{}|{}|{}|{}",
                c["provider"], c["prompt"], c["max_tokens"], c["row"]
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 24, "every cell exactly once");
    // The two answered on each server before the kill were not bought again; the two held
    // were (their answers went to a process that was gone).
    assert_eq!((a.requests(), b.requests()), (14, 14));
    // The same figures as an eval never killed.
    assert_eq!(line(&v, "agent-kg-extract", "srv", 1000)["tp"], 9);
    assert_eq!(line(&v, "agent-kg-extract", "weak", 1000)["tp"], 6);
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_prompts_tests_run_on_two_models_each_held_to_its_minimums() {
    let rows = rows();
    let strong = Model::start(rows.clone(), Duration::ZERO);
    let weak = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    let (dir, _) = setup(&strong, &rows);
    add_server(dir.path(), "weak", &weak.url(), "loopback-small");
    let mut file: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    // Recall at least 0.8: `srv` finds every record; `weak` leaves each document's last out —
    // 2 of 3 (0.667) in the stroma row, 3 of 4 (0.75) in the thylakoid row.
    file["tests"] = serde_json::json!([
        {"name": "stroma", "input": rows[0]["input"], "expected": rows[0]["expected"]["agent-kg-extract"], "min": {"recall": 0.8}},
        {"name": "thylakoid", "input": rows[2]["input"], "expected": rows[2]["expected"]["agent-kg-extract"], "min": {"recall": 0.8}},
    ]);
    let prompt = dir.path().join("agent-kg-extract.json");
    std::fs::write(&prompt, file.to_string()).unwrap();
    let junit = dir.path().join("tests.xml");
    let args = [
        "test",
        prompt.to_str().unwrap(),
        "--provider",
        "srv,weak",
        "--junit",
        junit.to_str().unwrap(),
    ];
    let o = kerf_in(dir.path(), &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("test plan: 4 cell(s)")
            && e.contains("srv: 2 request(s)")
            && e.contains("weak: 2 request(s)"),
        "{e}"
    );
    let v = stdout_json(&o);
    assert_eq!(
        (&v["passed"], &v["failed"], &v["errors"]),
        (&2.into(), &2.into(), &0.into())
    );
    let got: Vec<(String, String, String, f64)> = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["provider"].as_str().unwrap().to_string(),
                t["name"].as_str().unwrap().to_string(),
                t["verdict"].as_str().unwrap().to_string(),
                t["scores"]["recall"].as_f64().unwrap(),
            )
        })
        .collect();
    let r = |found: f64, of: f64| found / of;
    assert_eq!(
        got,
        [
            ("srv".into(), "stroma".into(), "passed".into(), 1.0),
            ("srv".into(), "thylakoid".into(), "passed".into(), 1.0),
            ("weak".into(), "stroma".into(), "failed".into(), r(2.0, 3.0)),
            (
                "weak".into(),
                "thylakoid".into(),
                "failed".into(),
                r(3.0, 4.0)
            ),
        ]
    );
    // Each server ran each test once.
    assert_eq!((strong.requests(), weak.requests()), (2, 2));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="agent-kg-extract on srv" tests="2" skipped="0" errors="0" failures="0">"#)
            && xml.contains(r#"<testsuite name="agent-kg-extract on weak" tests="2" skipped="0" errors="0" failures="2">"#),
        "{xml}"
    );
    // The lines for people name each provider, then each provider's count.
    let o = kerf_in(dir.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("FAIL  agent-kg-extract on weak / stroma")
            && out.contains("srv: 2 passed, 0 failed, 0 could not run")
            && out.contains("weak: 0 passed, 2 failed, 0 could not run"),
        "{out}"
    );
}

#[test]
fn one_prompt_compared_on_two_models_is_one_compare_with_a_sweep_each() {
    let rows = rows();
    let strong = Model::start(rows.clone(), Duration::ZERO);
    let weak = Model::start_with(rows.clone(), Duration::ZERO, Again::Fewer);
    let (dir, _) = setup(&strong, &rows);
    add_server(dir.path(), "weak", &weak.url(), "loopback-small");
    let doc = dir.path().join("stroma.txt");
    std::fs::write(&doc, rows[0]["input"].as_str().unwrap()).unwrap();
    let args = [
        "compare",
        PROMPTS[0],
        "--input",
        doc.to_str().unwrap(),
        "--provider",
        "srv,weak",
        "--max-tokens",
        "1000",
        "--constrain",
        "none",
    ];
    let o = kerf_in(dir.path(), &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("srv: 1 request(s)") && stderr(&o).contains("weak: 1 request(s)"),
        "{}",
        stderr(&o)
    );
    let v = stdout_json(&o);
    assert_eq!(
        v["providers"],
        serde_json::json!([{"provider": "srv", "model": "loopback"}, {"provider": "weak", "model": "loopback-small"}])
    );
    // The stroma row holds 3 records: `srv` gives all of them, `weak` all but the last.
    let objects: Vec<(String, u64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap().to_string(),
                r["objects"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(objects, [("srv".to_string(), 3), ("weak".to_string(), 2)]);
    // Each model's reply swept: a curve each, ending at its own count.
    let sweeps: Vec<(String, u64)> = v["sweeps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["provider"].as_str().unwrap().to_string(),
                s["total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sweeps, [("srv".to_string(), 3), ("weak".to_string(), 2)]);
    assert_eq!((strong.requests(), weak.requests()), (1, 1));
    // One experiment whose cells name each provider.
    let e = v["experiment"].as_i64().unwrap();
    let store = kerf_store::Store::open(&dir.path().join(kerf_store::FILE_NAME)).unwrap();
    let cells: Vec<String> = store
        .cells(e)
        .unwrap()
        .into_iter()
        .map(|c| c.cell.provider)
        .collect();
    assert_eq!(cells, ["srv", "weak"]);
    // For people: each row names its model.
    let o = kerf_in(dir.path(), &args);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("models side by side: srv / loopback, weak / loopback-small")
            && out.contains("agent-kg-extract on weak (jsonl)"),
        "{out}"
    );
    // One prompt on one model has nothing to compare.
    let o = kerf_in(
        dir.path(),
        &[
            "compare",
            PROMPTS[0],
            "--input",
            doc.to_str().unwrap(),
            "--provider",
            "srv",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("or one prompt and two providers"),
        "{}",
        stderr(&o)
    );
    // The same prompt twice on one model is one prompt, not two: refused before anything is
    // sent or kept.
    let sent = (strong.requests(), weak.requests());
    let o = kerf_in(
        dir.path(),
        &[
            "compare",
            PROMPTS[0],
            PROMPTS[0],
            "--input",
            doc.to_str().unwrap(),
            "--provider",
            "srv",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("prompt `{}` is given twice", PROMPTS[0])),
        "{}",
        stderr(&o)
    );
    assert_eq!((strong.requests(), weak.requests()), sent);
}
