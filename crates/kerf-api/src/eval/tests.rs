//! `kerf test`: the tests a prompt file carries (`tests`), run on a provider and held to their
//! minimums. Each test is a dataset row ([`dataset::from_tests`]): checked, rendered and scored
//! exactly as an eval's rows are.

use kerf_core::eval::dataset::{self, Dataset};
use kerf_core::eval::{Scores, score};
use kerf_llm::{CancelToken, FinishReason};
use kerf_store::Store;
use serde::Serialize;

use super::{Subject, rendering};
use crate::error::{ApiError, Code, Result};
use crate::runs::{Chosen, RunJob, RunParams};

/// How a test came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Measured, and every minimum reached.
    Passed,
    /// Measured, and a minimum missed.
    Failed,
    /// Not measured: the run failed.
    Error,
}

/// One test's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestResult {
    /// The prompt's id.
    pub prompt: String,
    pub name: String,
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
        rendering(p, row).map_err(|e| ApiError {
            message: format!("{}: {}", row.place(), e.message),
            ..e
        })?;
    }
    Ok(data)
}

/// Run `subject`'s tests one after another on `provider` (kept in `history` when given), each
/// at its own `max-tokens` or `params`' budget.
pub fn run(
    history: Option<&Store>,
    subject: &Subject,
    data: &Dataset,
    provider: &Chosen,
    params: &RunParams,
    cancel: &CancelToken,
    on_done: &mut dyn FnMut(&TestResult),
) -> Result<Vec<TestResult>> {
    let p = &subject.prompt;
    let matcher = p.matcher();
    let mut out = Vec::new();
    for (test, row) in p.file.tests.iter().zip(&data.rows) {
        if cancel.is_cancelled() {
            return Err(ApiError::new(Code::Cancelled, "stopped"));
        }
        let params = RunParams {
            max_tokens: test.max_tokens.unwrap_or(params.max_tokens),
            ..params.clone()
        };
        let rendering = rendering(p, row)?;
        let job = RunJob::new(p, &subject.source, &rendering, provider, &params);
        let mut result = TestResult {
            prompt: p.id().to_string(),
            name: test.name.clone(),
            verdict: Verdict::Error,
            max_tokens: params.max_tokens,
            run: None,
            finish_reason: None,
            objects: 0,
            scores: None,
            missed: Vec::new(),
            error: None,
        };
        match kerf_llm::runtime::block_on(crate::runs::run(history, &job, cancel, &mut |_| {})) {
            Err(e) if e.code == Code::Cancelled => return Err(e),
            Err(e) => result.error = Some(e.to_string()),
            Ok(r) => {
                result.run = r.history_id;
                result.finish_reason = Some(r.out.finish.reason);
                if matches!(
                    r.out.finish.reason,
                    FinishReason::Stop | FinishReason::Length
                ) {
                    let s = score(&matcher, &test.expected, &r.out.report.objects)
                        .counts
                        .scores();
                    result.objects = r.out.report.objects.len();
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
                    result.error = Some(r.out.finish.error.clone().unwrap_or_else(|| {
                        format!("the run ended with {:?}", r.out.finish.reason)
                    }));
                }
            }
        }
        on_done(&result);
        out.push(result);
    }
    Ok(out)
}
