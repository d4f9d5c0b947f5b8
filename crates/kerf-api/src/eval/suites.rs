//! `kerf test`: the suites of tests prompt files carry (`tests`), run on one provider or
//! several side by side and held to their minimums. Each test is a dataset row
//! ([`dataset::from_tests`]): checked, rendered and scored exactly as an eval's rows are.

use kerf_core::eval::dataset::{self, Dataset};
use kerf_core::eval::{Scores, score};
use kerf_llm::{CancelToken, FinishReason};
use std::collections::BTreeMap;

use kerf_core::prompt::PromptTest;
use kerf_store::{CellKey, Store};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::rendering;
use crate::error::{ApiError, Code, Result};
use crate::experiments::cells::{self, Cell, CellEnd, Hooks, Ran};
use crate::experiments::pass::{self, Kept, Plan};
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::{SpecPrompt, SpecSettings, TestSpec};
use crate::experiments::{ExperimentKind, ExperimentSpec, Subject, lifecycle};
use crate::runs::{Chosen, RunParams};

/// How a test came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(rename = "TestVerdict")]
pub enum Verdict {
    /// Measured, and every minimum reached.
    Passed,
    /// Measured, and a minimum missed.
    Failed,
    /// Not measured: the run failed.
    Error,
}

/// One test's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TestResult {
    /// The prompt's id.
    pub prompt: String,
    pub name: String,
    /// The provider the test ran on, by the name it was given (empty in tests stored before
    /// it was kept: their experiment's one provider).
    #[serde(default)]
    pub provider: String,
    pub verdict: Verdict,
    pub max_tokens: u32,
    /// The run's id in the history (none with `--no-history`).
    pub run: Option<i64>,
    pub finish_reason: Option<FinishReason>,
    pub objects: usize,
    /// Null when the run failed.
    pub scores: Option<Scores>,
    /// The minimums missed, as people read them (`recall 0.500 < 0.8`).
    pub missed: Vec<String>,
    /// Why the run failed.
    pub error: Option<String>,
}

/// Every test's outcome, provider by provider, each in the files' order: what `kerf test --json`
/// prints and the history keeps as the experiment's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TestReport {
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub tests: Vec<TestResult>,
}

impl TestReport {
    fn of(tests: Vec<TestResult>) -> Self {
        let count = |v: Verdict| tests.iter().filter(|r| r.verdict == v).count();
        TestReport {
            passed: count(Verdict::Passed),
            failed: count(Verdict::Failed),
            errors: count(Verdict::Error),
            tests,
        }
    }
}

/// What the window sends to run prompt files' tests: `kerf test`'s arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TestsInput {
    pub prompts: Vec<String>,
    /// The model, its settings, and the budget of tests that set no `max-tokens`.
    pub options: crate::runs::wire::RunOptions,
    /// The providers side by side, by name (absent or empty: the options' provider alone).
    #[serde(default)]
    #[ts(optional)]
    pub providers: Option<Vec<String>>,
    /// Tests in flight at once (default 4; the local engine runs one at a time).
    #[serde(default)]
    #[ts(optional)]
    pub concurrency: Option<u32>,
    /// The person confirmed a run of more than 2,000 requests.
    #[serde(default)]
    #[ts(optional)]
    pub confirmed: Option<bool>,
}

/// Each prompt file loaded and its tests checked against it (every problem named), before
/// anything runs: the suites of a [`TestJob`].
pub fn load(paths: &[std::path::PathBuf]) -> Result<Vec<(Subject, Dataset)>> {
    paths
        .iter()
        .map(|path| {
            let subject = Subject::load(path)?;
            let data = check(&subject)?;
            Ok((subject, data))
        })
        .collect()
}

/// The tests `input` names, planned and run as `kerf test` runs them (a `test` experiment in
/// `history`, held to each test's minimums): the window's `tests_start`.
pub fn run_input(
    wb: &crate::workbench::Workbench,
    history: Option<&Store>,
    input: &TestsInput,
    cancel: &CancelToken,
    on_done: &mut dyn FnMut(&TestResult),
) -> Result<TestReport> {
    let paths: Vec<std::path::PathBuf> = input.prompts.iter().map(Into::into).collect();
    let suites = load(&paths)?;
    let settings = input.options.settings()?;
    let names = input.providers.clone().unwrap_or_default();
    let providers = crate::runs::providers(wb, &settings, &names)?;
    let params = params(settings, input.options.max_tokens);
    let job = TestJob {
        suites: &suites,
        params: &params,
        concurrency: input
            .concurrency
            .map_or(super::DEFAULT_CONCURRENCY, |n| n as usize),
    };
    let allowed = Allowance {
        max_requests: None,
        yes: input.confirmed == Some(true),
    };
    let size = plan(&job, &providers, allowed)?;
    run(history, &job, &providers, &size, cancel, on_done)
}

/// What every test runs with, from either front end: `settings`, `max_tokens` for tests that set
/// none, and each reply held to its prompt's schema where the format and provider allow.
pub fn params(settings: crate::runs::RunSettings, max_tokens: u32) -> RunParams {
    RunParams {
        settings,
        max_tokens,
        constrain: true,
    }
}

/// Prompt files' tests to run: each suite a prompt and its tests, checked ([`check`]).
pub struct TestJob<'a> {
    pub suites: &'a [(Subject, Dataset)],
    /// What every test runs with; a test's own `max-tokens` replaces the budget.
    pub params: &'a RunParams,
    /// Tests in flight at once (cloud providers; the local engine runs one at a time).
    pub concurrency: usize,
}

/// The subject's tests as a dataset, checked against its prompt (every problem named) and each
/// rendered, before anything runs.
pub fn check(subject: &Subject) -> Result<Dataset> {
    let p = &subject.prompt;
    let path = p
        .path
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(p.id()));
    if p.file.tests.is_empty() {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "{}: prompt `{}` has no `tests` (add {{\"name\", \"input\", \"expected\", \"min\"}} objects under `tests`)",
                path.display(),
                p.id()
            ),
        ));
    }
    let data = dataset::from_tests(&path, &p.file.tests);
    dataset::check(&data, &[p])?;
    for row in &data.rows {
        rendering(p, &serde_json::Map::new(), row).map_err(|e| ApiError {
            message: format!("{}: {}", row.place(), e.message),
            ..e
        })?;
    }
    Ok(data)
}

/// What the tests of every suite will send, checked against the limits (each test's
/// `max-tokens` as a run's budget is), before any is run.
pub fn plan(job: &TestJob<'_>, providers: &[Chosen], allowed: Allowance) -> Result<Size> {
    remaining(job, providers, &BTreeMap::new(), allowed)
}

/// What the tests will send for the cells not `measured` yet (a resume's pass), checked as
/// [`plan`] checks a start.
fn remaining(
    job: &TestJob<'_>,
    providers: &[Chosen],
    measured: &BTreeMap<CellKey, i64>,
    allowed: Allowance,
) -> Result<Size> {
    let TestJob {
        suites,
        params,
        concurrency,
    } = *job;
    plan::check_concurrency(concurrency)?;
    plan::check_providers(providers)?;
    // Each test's budget, checked as a run's is, named by its place.
    for (subject, data) in suites {
        for (test, row) in subject.prompt.file.tests.iter().zip(&data.rows) {
            params
                .check(&[test.max_tokens.unwrap_or(params.max_tokens)])
                .map_err(|e| ApiError {
                    message: format!("{}: {}", row.place(), e.message),
                    ..e
                })?;
        }
    }
    // Every provider runs every test: a part each.
    let size = pass::size(
        &TestPlan::new(job, providers),
        ExperimentKind::Test,
        measured,
    )?;
    plan::check_allowed(&size, allowed)?;
    Ok(size)
}

/// The cell a test is on `provider`: its prompt, its budget, constrained as every test is, its
/// name as the row.
fn key(
    provider: &Chosen,
    subject: &Subject,
    test: &PromptTest,
    row: &dataset::Row,
    params: &RunParams,
) -> CellKey {
    cells::key(
        provider,
        subject.prompt.id(),
        test.max_tokens.unwrap_or(params.max_tokens),
        params.constrain,
        0,
        &row.id,
    )
}

/// Run the tests of every suite (a prompt and its checked tests, from [`check`]) on each of
/// `providers`, side by side, `concurrency` at a time each (the local engine one at a time), each run at its own `max-tokens` or
/// the job's budget, with the repair loop its prompt asks for (a test runs as a run of the prompt
/// would). With a `history`, the tests are one experiment there (its spec keeps `size`, the plan
/// announced) and each test's run belongs to it. `on_done` sees each result as it ends; the
/// report lists them in the files' order. Ctrl-C (`cancel`) stops starting tests, lets those in
/// flight end, and returns `cancelled`.
pub fn run(
    history: Option<&Store>,
    job: &TestJob<'_>,
    providers: &[Chosen],
    size: &Size,
    cancel: &CancelToken,
    on_done: &mut dyn FnMut(&TestResult),
) -> Result<TestReport> {
    let Some(store) = history else {
        return run_tests(None, job, providers, &BTreeMap::new(), cancel, on_done);
    };
    let spec = ExperimentSpec::Test(TestSpec {
        prompts: job
            .suites
            .iter()
            .map(|(s, _)| SpecPrompt::keep(store, s))
            .collect::<Result<_>>()?,
        tests: job.suites.iter().map(|(_, d)| d.rows.len()).sum(),
        max_tokens: job.params.max_tokens,
        providers: providers
            .iter()
            .map(|p| SpecSettings::of(p, job.params))
            .collect(),
        concurrency: job.concurrency,
        plan: Some(size.clone()),
    });
    let running = lifecycle::begin(store, &spec)?;
    running.settled(run_tests(
        Some(&running),
        job,
        providers,
        &BTreeMap::new(),
        cancel,
        on_done,
    ))
}

/// Tests `id` as the history keeps them, ready to be taken up again: each prompt version it ran
/// with its tests checked again (from the version's own text: the file may have changed since),
/// what every test runs with, its providers built again from the spec.
struct Stored {
    suites: Vec<(Subject, Dataset)>,
    params: RunParams,
    providers: Vec<Chosen>,
    concurrency: usize,
}

fn stored(wb: &crate::workbench::Workbench, store: &Store, id: i64) -> Result<Stored> {
    let ExperimentSpec::Test(spec) = lifecycle::spec_of(store, id, ExperimentKind::Test)? else {
        return Err(ApiError::new(
            Code::StoreCorrupt,
            format!("test {id}'s spec is not a test's"),
        ));
    };
    let suites = spec
        .prompts
        .iter()
        .map(|p| {
            let subject = p.load(store, &format!("test {id}'s prompt"))?;
            let data = check(&subject)?;
            Ok((subject, data))
        })
        .collect::<Result<Vec<_>>>()?;
    let first = SpecSettings::first(&spec.providers, &format!("test {id}"))?;
    Ok(Stored {
        suites,
        params: first.run_params()?,
        providers: crate::experiments::spec::providers(wb, &spec.providers)?,
        concurrency: spec.concurrency,
    })
}

/// The tests of experiment `id`, ready to be taken up again where they stopped (Ctrl-C, a
/// killed process): built again from the history, each provider checked to be where the tests'
/// runs came from, what remains sized against the same bounds as a start — nothing claimed,
/// stored or sent yet ([`Resumption::size`] is what `--dry-run` announces).
pub struct Resumption {
    id: i64,
    stored: Stored,
    measured: BTreeMap<CellKey, i64>,
    size: Size,
}

/// The tests of experiment `id` as a [`Resumption`].
pub fn resumption(
    wb: &crate::workbench::Workbench,
    store: &Store,
    id: i64,
    input: lifecycle::ResumeInput,
) -> Result<Resumption> {
    let stored = stored(wb, store, id)?;
    let measured =
        lifecycle::resumable(store, id, ExperimentKind::Test, &stored.providers, &input)?;
    let size = remaining(&stored.job(), &stored.providers, &measured, input.allowed)?;
    Ok(Resumption {
        id,
        stored,
        measured,
        size,
    })
}

impl Stored {
    fn job(&self) -> TestJob<'_> {
        TestJob {
            suites: &self.suites,
            params: &self.params,
            concurrency: self.concurrency,
        }
    }
}

impl Resumption {
    /// What the pass will send: the tests not measured before.
    pub fn size(&self) -> &Size {
        &self.size
    }

    /// The providers the tests run on, in the spec's order.
    pub fn providers(&self) -> &[Chosen] {
        &self.stored.providers
    }

    /// Claim the tests and run what remains: those measured before are not run again (a
    /// failed one is); the report holds every test, as a whole run's does.
    pub fn run(
        self,
        store: &Store,
        cancel: &CancelToken,
        on_done: &mut dyn FnMut(&TestResult),
    ) -> Result<TestReport> {
        let running = lifecycle::take_up(store, self.id, ExperimentKind::Test)?;
        running.settled(run_tests(
            Some(&running),
            &self.stored.job(),
            &self.stored.providers,
            &self.measured,
            cancel,
            on_done,
        ))
    }
}

/// The tests of every suite on every provider, as a pass runs them: each ends as its verdict
/// (an error there — a cancel — is the test's, and the pass goes on to let the others end).
struct TestPlan<'a> {
    job: &'a TestJob<'a>,
    providers: &'a [Chosen],
    /// Every test, in the files' order: its prompt, the test, its row.
    tests: Vec<(&'a Subject, &'a PromptTest, &'a dataset::Row)>,
}

impl<'a> TestPlan<'a> {
    /// Every test of every suite, in the files' order, on each of `providers`.
    fn new(job: &'a TestJob<'a>, providers: &'a [Chosen]) -> Self {
        TestPlan {
            job,
            providers,
            tests: job
                .suites
                .iter()
                .flat_map(|(subject, data)| {
                    subject
                        .prompt
                        .file
                        .tests
                        .iter()
                        .zip(&data.rows)
                        .map(move |(test, row)| (subject, test, row))
                })
                .collect(),
        }
    }

    fn max_tokens(&self, test: &PromptTest) -> u32 {
        test.max_tokens.unwrap_or(self.job.params.max_tokens)
    }

    fn verdict(&self, (pi, i): (usize, usize), measured: Result<Measured>) -> Result<TestResult> {
        let (subject, test, _) = self.tests[i];
        verdict(
            subject,
            test,
            self.max_tokens(test),
            &self.providers[pi],
            measured,
        )
    }
}

impl Plan for TestPlan<'_> {
    /// Its provider, its test.
    type At = (usize, usize);
    type Out = Result<TestResult>;

    fn providers(&self) -> &[Chosen] {
        self.providers
    }

    fn concurrency(&self) -> usize {
        self.job.concurrency
    }

    fn cells(&self, provider: usize) -> Box<dyn Iterator<Item = ((usize, usize), CellKey)> + '_> {
        let p = &self.providers[provider];
        Box::new(
            self.tests
                .iter()
                .enumerate()
                .map(move |(i, (subject, test, row))| {
                    ((provider, i), key(p, subject, test, row, self.job.params))
                }),
        )
    }

    fn cell(&self, (_, i): (usize, usize), key: CellKey) -> Result<Cell<'_>> {
        // Each test is a row of its prompt's.
        let (subject, test, row) = self.tests[i];
        Ok(Cell {
            subject,
            rendering: rendering(&subject.prompt, &serde_json::Map::new(), row)?,
            params: RunParams {
                max_tokens: self.max_tokens(test),
                ..self.job.params.clone()
            },
            key: Some(key),
        })
    }

    fn cost(&self, (_, i): (usize, usize), _: &CellKey) -> Result<pass::Cost> {
        let (subject, test, row) = self.tests[i];
        let p = &subject.prompt;
        // A test runs with the repair loop its prompt asks for, within the run's request limit.
        let repairs = p.file.repair.map_or(0, |r| {
            r.max_attempts
                .clamp(
                    kerf_core::prompt::Repair::MIN_ATTEMPTS,
                    kerf_core::prompt::Repair::MAX_ATTEMPTS,
                )
                .min(self.job.params.settings.max_requests.max(1))
                - 1
        });
        let r = rendering(p, &serde_json::Map::new(), row)?;
        Ok(pass::Cost {
            input_bytes: (r.rendered.user.len() + r.rendered.system.as_ref().map_or(0, String::len))
                as u64,
            max_tokens: self.max_tokens(test),
            repairs,
            max_run_tokens: self.job.params.settings.max_run_tokens,
        })
    }

    fn ended(&self, at: (usize, usize), _: CellKey, end: CellEnd) -> Result<Result<TestResult>> {
        Ok(self.verdict(at, Measured::of(end)))
    }

    fn kept(&self) -> Kept {
        Kept::Parsed
    }

    fn ended_before(
        &self,
        at: (usize, usize),
        reply: &kerf_store::StoredReply,
    ) -> Result<Result<TestResult>> {
        Ok(Ok(self.verdict(at, Ok(Measured::stored(reply)))?))
    }

    fn repair(&self) -> bool {
        true
    }
}

fn run_tests(
    running: Option<&lifecycle::Running<'_>>,
    job: &TestJob<'_>,
    providers: &[Chosen],
    measured: &BTreeMap<CellKey, i64>,
    cancel: &CancelToken,
    on_done: &mut dyn FnMut(&TestResult),
) -> Result<TestReport> {
    let plan = TestPlan::new(job, providers);
    let mut out = Vec::new();
    let mut stopped = None;
    let passed = pass::run(
        &plan,
        running,
        measured,
        cancel,
        Hooks::default(),
        &mut |_| {},
        &mut |at, _, result| {
            match result {
                Ok(result) => {
                    on_done(&result);
                    out.push((at, result));
                }
                Err(e) => stopped = Some(e),
            }
            Ok(())
        },
    )?;
    if let Some(e) = stopped {
        return Err(e);
    }
    if !passed.whole() {
        // Ctrl-C came between tests: none was in flight to report it.
        return Err(ApiError::new(Code::Cancelled, "stopped"));
    }
    out.sort_by_key(|(i, _)| *i);
    Ok(TestReport::of(out.into_iter().map(|(_, r)| r).collect()))
}

/// What a test's cell measured: its run, how it ended, the objects its reply gave.
struct Measured {
    run: Option<i64>,
    finish: FinishReason,
    objects: Vec<serde_json::Value>,
    error: Option<String>,
}

impl Measured {
    /// A cell's end as it ran (an error here is a run that failed, or a cancel).
    fn of(end: CellEnd) -> Result<Measured> {
        match end.ran? {
            Ran::Cached(_) => Err(ApiError::new(
                Code::Internal,
                "a test is never measured from a cache",
            )),
            Ran::Run(r) => Ok(Measured {
                run: r.history_id,
                finish: r.out.finish.reason,
                objects: r.out.report.objects.to_vec(),
                error: r.out.finish.error.clone(),
            }),
        }
    }

    /// A cell measured before, as its run kept it.
    fn stored(c: &kerf_store::StoredReply) -> Measured {
        Measured {
            run: c.cell.run,
            finish: c.finish_reason.unwrap_or(FinishReason::Error),
            objects: c
                .report
                .as_ref()
                .map(|r| r.objects.to_vec())
                .unwrap_or_default(),
            error: None,
        }
    }
}

/// One test's run held to its minimums. A failed run is a result (`error`); an error here
/// means it was cancelled (or could not render, which [`check`] rules out before any run).
fn verdict(
    subject: &Subject,
    test: &PromptTest,
    max_tokens: u32,
    provider: &Chosen,
    measured: Result<Measured>,
) -> Result<TestResult> {
    let p = &subject.prompt;
    let mut result = TestResult {
        prompt: p.id().to_string(),
        name: test.name.clone(),
        provider: provider.name(),
        verdict: Verdict::Error,
        max_tokens,
        run: None,
        finish_reason: None,
        objects: 0,
        scores: None,
        missed: Vec::new(),
        error: None,
    };
    let m = match measured {
        Err(e) if e.code == Code::Cancelled => return Err(e),
        Err(e) => {
            result.error = Some(e.to_string());
            return Ok(result);
        }
        Ok(m) => m,
    };
    result.run = m.run;
    result.finish_reason = Some(m.finish);
    if matches!(
        m.finish,
        FinishReason::Stop | FinishReason::Length | FinishReason::SizeLimit
    ) {
        let s = score(&p.matcher(), &test.expected, &m.objects)
            .counts
            .scores();
        result.objects = m.objects.len();
        for (metric, min) in test.min.each() {
            let got = metric.of(&s);
            if got.is_none_or(|v| v < min) {
                result.missed.push(format!(
                    "{} {} < {min}",
                    metric.name(),
                    got.map_or("null".into(), |v| format!("{v:.3}"))
                ));
            }
        }
        result.verdict = if result.missed.is_empty() {
            Verdict::Passed
        } else {
            Verdict::Failed
        };
        result.scores = Some(s);
    } else {
        result.error = Some(
            m.error
                .unwrap_or_else(|| format!("the run ended with {:?}", m.finish)),
        );
    }
    Ok(result)
}

impl crate::experiments::lifecycle::Reported for TestReport {
    fn figures(&self) -> kerf_store::Figures {
        kerf_store::Figures {
            passed: Some(self.passed as u64),
            failed: Some(self.failed as u64),
            errors: Some(self.errors as u64),
            ..kerf_store::Figures::default()
        }
    }
}
