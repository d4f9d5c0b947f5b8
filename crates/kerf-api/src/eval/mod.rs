//! Evaluations: every prompt × budget × constraint × repeat × dataset row, run as one
//! experiment in the history and scored against the rows' expected records.
//!
//! - [`begin`] checks the dataset against the prompts (nothing is written if a row is wrong),
//!   starts the experiment and keeps the rows; [`stored`] reads an eval back for `resume` and
//!   `rescore`.
//! - [`run_cells`] runs the cells that still need a run, many in flight (the provider's rate
//!   limiter paces them; the local engine runs one at a time). Each cell is written with its run
//!   as it begins, so a cell whose run finished — ok or cut by its budget, both measurements — is
//!   never bought again, whether the eval was stopped with Ctrl-C or killed.
//! - [`report`] scores the stored replies ([`Report`] is what `kerf eval --json` prints and
//!   what the history keeps as the experiment's result).
//! - [`flow`] — the use cases both front ends call: start (or a dry run), resume, and a pass
//!   that runs what remains and says how the eval stands; [`threshold`] — CI's minimums.

pub mod analysis;
pub mod flow;
pub mod html;
pub mod lines;
pub mod report;
pub mod tests;
pub mod threshold;
pub mod wire;

use std::cell::RefCell;
use std::collections::BTreeSet;

use kerf_core::Prompt;
use kerf_core::eval::dataset::{self, Dataset, Row};
use kerf_llm::CancelToken;
use kerf_store::{EvalCell, Store};
use serde::Serialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};
use crate::experiments::cells::{self, Cell, Hooks, Ran, Runner};
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::SpecSettings;
use crate::experiments::{ConstrainMode, ExperimentKind, ExperimentSpec, Subject, variants};
use crate::runs::{Chosen, PromptSource, Rendering, RunParams, RunSettings};

pub use flow::{Ending, Finished, StartInput};
pub use lines::{CellLine, SummaryLine};
pub use report::{Options, Replies, Report, compare_reports, report};
pub use threshold::{Metric, Threshold};

pub use crate::experiments::spec::{DEFAULT_CONCURRENCY, EvalSpec, SpecPrompt};

/// An eval as it starts or resumes: its prompts, rows and matrix.
pub struct Eval {
    pub experiment: i64,
    pub spec: EvalSpec,
    pub subjects: Vec<Subject>,
    pub rows: Vec<Row>,
    /// What every cell runs with (each cell sets its budget and constraint).
    pub params: RunParams,
}

/// The matrix's axes besides prompts and rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan<'a> {
    pub budgets: &'a [u32],
    pub constrain: ConstrainMode,
    /// Runs of each cell (1 or more).
    pub repeat: u32,
    /// Reuse an earlier eval's reply for a cell when it ended on its own and everything that
    /// shaped it (prompt version, input, provider, model, parameters, repeat index) is the same.
    pub cache: bool,
    /// Requests in flight at once (1 or more).
    pub concurrency: usize,
    /// What the person starting it allowed (an eval over 2,000 requests needs it).
    pub allowed: Allowance,
}

/// How [`run_cells`] goes about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Requests in flight at once (cloud providers; the local engine runs one at a time).
    pub concurrency: usize,
    /// Run again the cells whose run failed (otherwise they stay failed).
    pub retry_errors: bool,
}

/// Where an eval stands, as it goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, TS)]
#[ts(rename = "EvalProgress")]
pub struct Progress {
    /// Cells finished in this pass (ok, cut by their budget, or failed).
    pub done: usize,
    /// Cells this pass runs.
    pub total: usize,
    pub failed: usize,
    /// Cells already measured before this pass (a resume's).
    pub skipped: usize,
    /// Cells of this pass measured by an earlier eval's reply (`--cache`), bought for nothing.
    pub cached: usize,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    /// The last notice a run gave (a rate-limit wait, a retry), if any.
    pub notice: Option<String>,
}

/// Check `dataset` against the prompts (every problem named) and the plan against the limits,
/// rendering every row with every prompt: what the eval will send, before anything is stored
/// or bought.
pub fn plan(
    dataset: &Dataset,
    subjects: &[Subject],
    plan: &Plan<'_>,
    params: &RunParams,
    provider: &Chosen,
) -> Result<Size> {
    let Plan {
        budgets,
        constrain,
        repeat,
        concurrency,
        allowed,
        ..
    } = *plan;
    if budgets.is_empty() || budgets.contains(&0) {
        return Err(ApiError::new(
            Code::Usage,
            "give one or more token budgets, each above 0",
        ));
    }
    plan::check_repeat(repeat)?;
    plan::check_concurrency(concurrency)?;
    params.check_budgets(budgets)?;
    let mut ids = BTreeSet::new();
    for s in subjects {
        if !ids.insert(s.prompt.id()) {
            return Err(ApiError::new(
                Code::Usage,
                format!("prompt `{}` is given twice", s.prompt.id()),
            ));
        }
    }
    let prompts: Vec<&Prompt> = subjects.iter().map(|s| &s.prompt).collect();
    dataset::check(dataset, &prompts)?;
    let budgets = sorted(budgets);
    // The matrix's size is known before anything is rendered: a plan too large is refused
    // before it costs memory.
    let variants_of: Vec<usize> = subjects
        .iter()
        .map(|s| variants(constrain, &s.prompt, provider).len())
        .collect();
    let per_row: u64 = variants_of.iter().sum::<usize>() as u64 * budgets.len() as u64;
    plan::check_cells(
        per_row
            .saturating_mul(u64::from(repeat))
            .saturating_mul(dataset.rows.len() as u64),
    )?;
    // Every row renders with every prompt before anything is bought; what it renders to is
    // the plan's input bound.
    let mut size = Size::new(ExperimentKind::Eval);
    for (s, &n) in subjects.iter().zip(&variants_of) {
        for row in &dataset.rows {
            let r = rendering(&s.prompt, row).map_err(|e| ApiError {
                message: format!("{}: prompt `{}`: {}", row.place(), s.prompt.id(), e.message),
                ..e
            })?;
            let bytes = r.rendered.user.len() + r.rendered.system.as_ref().map_or(0, String::len);
            for &b in &budgets {
                size.add(n as u64 * u64::from(repeat), bytes as u64, b, 0, 0);
            }
        }
    }
    let size = size.priced(provider)?;
    plan::check_allowed(&size, allowed)?;
    Ok(size)
}

fn sorted(budgets: &[u32]) -> Vec<u32> {
    let mut budgets = budgets.to_vec();
    budgets.sort_unstable();
    budgets.dedup();
    budgets
}

/// Check the eval's [`plan`] (nothing written when a row or a limit is wrong), hand its size
/// to `on_plan`, then start the eval: the experiment, its spec and its rows.
pub fn begin(
    store: &Store,
    dataset: Dataset,
    subjects: Vec<Subject>,
    plan: &Plan<'_>,
    params: RunParams,
    provider: &Chosen,
    on_plan: &mut dyn FnMut(&Size),
) -> Result<Eval> {
    let size = self::plan(&dataset, &subjects, plan, &params, provider)?;
    on_plan(&size);
    let Plan {
        budgets,
        constrain,
        repeat,
        cache,
        concurrency,
        ..
    } = *plan;
    let budgets = sorted(budgets);
    let spec = EvalSpec {
        cells: size.cells as usize,
        dataset: dataset.path.display().to_string(),
        prompts: subjects
            .iter()
            .map(|s| SpecPrompt::keep(store, s))
            .collect::<Result<_>>()?,
        max_tokens: budgets,
        constrain,
        repeat,
        settings: SpecSettings::of(provider, &params),
        cache,
        concurrency,
        plan: Some(size),
    };
    let experiment = ExperimentSpec::Eval(spec.clone()).begin(store)?;
    let rows: Vec<(String, Value)> = dataset
        .rows
        .iter()
        .map(|r| Ok((r.id.clone(), to_json(r)?)))
        .collect::<Result<_>>()?;
    store.put_eval_rows(experiment, &rows)?;
    Ok(Eval {
        experiment,
        spec,
        subjects,
        rows: dataset.rows,
        params,
    })
}

fn to_json<T: Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}

/// Eval `experiment` as the history keeps it: the prompt versions it ran (compiled), its rows
/// and parameters.
pub fn stored(store: &Store, experiment: i64) -> Result<Eval> {
    let e = store.experiment(experiment)?;
    if e.summary.kind != "eval" {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "experiment {experiment} is a {}, not an eval",
                e.summary.kind
            ),
        ));
    }
    let corrupt = |what: &str, err: String| {
        ApiError::new(
            Code::StoreCorrupt,
            format!("eval {experiment}'s {what} is not what Kerf wrote: {err}"),
        )
    };
    let ExperimentSpec::Eval(spec) = ExperimentSpec::read(experiment, &e.summary.kind, &e.spec)?
    else {
        return Err(corrupt("spec", "not an eval's".into()));
    };
    let subjects = spec
        .prompts
        .iter()
        .map(|p| {
            let version = store.prompt_version(&p.version)?;
            let place = format!(
                "eval {experiment}'s prompt `{}` (version {})",
                p.id,
                &p.version[..12.min(p.version.len())]
            );
            let loaded = kerf_core::PromptFile::from_json_str(&version.text, &place)?;
            let mut prompt = Prompt::compile(loaded.file, &place)?;
            prompt.path = p.path.as_ref().map(std::path::PathBuf::from);
            Ok(Subject {
                prompt,
                source: PromptSource {
                    name: version.name,
                    path: version.path,
                    text: version.text,
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = store
        .eval_rows(experiment)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<Row>(v)
                .map_err(|err| corrupt(&format!("row {i}"), err.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    let params = spec.settings.run_params()?;
    Ok(Eval {
        experiment,
        spec,
        subjects,
        rows,
        params,
    })
}

/// Give each of `eval`'s prompts the `match` settings its file has now (`kerf eval rescore`):
/// the prompts' ids whose settings differ from those the eval ran with. A prompt whose file
/// is gone, or no longer a valid prompt, is an error naming it.
pub fn rematch(eval: &mut Eval) -> Result<Vec<String>> {
    let mut changed = Vec::new();
    for (s, p) in eval.subjects.iter_mut().zip(&eval.spec.prompts) {
        let Some(path) = &p.path else {
            continue;
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ApiError::new(
                Code::NotFound,
                format!(
                    "{path}: prompt `{}`'s file cannot be read ({e}); rescore takes its current `match` from it",
                    p.id
                ),
            )
        })?;
        let loaded = kerf_core::PromptFile::from_json_str(&text, path)?;
        let now = Prompt::compile(loaded.file, path)?.file.match_spec;
        if now != s.prompt.file.match_spec {
            changed.push(p.id.clone());
            s.prompt.file.match_spec = now;
        }
    }
    Ok(changed)
}

impl Eval {
    /// The settings the eval's cells run with (a resume builds its provider from them).
    pub fn settings(&self) -> &RunSettings {
        &self.params.settings
    }

    /// The cells a pass runs, with their prompts' indexes (those without a finished run; failed
    /// ones only when `retry_errors`), and how many it skips as already measured.
    fn todo(
        &self,
        store: &Store,
        provider: &Chosen,
        retry_errors: bool,
    ) -> Result<(usize, Vec<(usize, EvalCell)>)> {
        let stored = store.eval_cells(self.experiment)?;
        let keep: BTreeSet<&EvalCell> = stored
            .iter()
            .filter(|c| {
                c.finished() || (!retry_errors && c.status == Some(kerf_store::Status::Error))
            })
            .map(|c| &c.cell)
            .collect();
        let matrix = self.matrix(provider);
        let skipped = matrix.iter().filter(|(_, c)| keep.contains(c)).count();
        let todo = matrix
            .into_iter()
            .filter(|(_, c)| !keep.contains(c))
            .collect();
        Ok((skipped, todo))
    }

    /// What a pass over the cells still to run will send, at most: a resume announces it before
    /// its first request, as a start does.
    pub fn remaining(&self, store: &Store, provider: &Chosen, retry_errors: bool) -> Result<Size> {
        let (_, todo) = self.todo(store, provider, retry_errors)?;
        let rows: std::collections::HashMap<&str, &Row> =
            self.rows.iter().map(|r| (r.id.as_str(), r)).collect();
        let mut size = Size::new(ExperimentKind::Eval);
        for (subject, cell) in &todo {
            let r = rendering(&self.subjects[*subject].prompt, rows[cell.row.as_str()])?;
            let bytes = r.rendered.user.len() + r.rendered.system.as_ref().map_or(0, String::len);
            size.add(1, bytes as u64, cell.max_tokens, 0, 0);
        }
        size.priced(provider)
    }

    /// Every cell of the matrix, with its prompt's index: prompt × budget × constraint variant
    /// (as `provider` allows) × repeat × row.
    pub fn matrix(&self, provider: &Chosen) -> Vec<(usize, EvalCell)> {
        let mut cells = Vec::new();
        for (i, s) in self.subjects.iter().enumerate() {
            for &max_tokens in &self.spec.max_tokens {
                for constrained in variants(self.spec.constrain, &s.prompt, provider) {
                    for repeat in 0..self.spec.repeat {
                        for row in &self.rows {
                            cells.push((
                                i,
                                EvalCell {
                                    prompt: s.prompt.id().to_string(),
                                    max_tokens,
                                    constrained,
                                    repeat,
                                    row: row.id.clone(),
                                },
                            ));
                        }
                    }
                }
            }
        }
        cells
    }
}

/// A prompt rendered for one row: its variables (the document under the input variable).
pub(crate) fn rendering(prompt: &Prompt, row: &Row) -> Result<Rendering> {
    let vars = row.vars_for(prompt);
    Ok(Rendering {
        rendered: prompt.render(&Map::new(), &vars)?,
        vars,
        terms: Map::new(),
    })
}

/// Run every cell of `eval` that still needs a run: all of them at first; on a resume, those
/// never started or cut off (and, with `retry_errors`, those that failed). Stops starting cells
/// when `cancel` fires; the runs in flight end as cancelled and stay to be run again.
pub fn run_cells(
    store: &Store,
    eval: &Eval,
    provider: &Chosen,
    pace: Pace,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<()> {
    plan::check_concurrency(pace.concurrency)?;
    let (skipped, todo) = eval.todo(store, provider, pace.retry_errors)?;
    let progress = RefCell::new(Progress {
        total: todo.len(),
        skipped,
        ..Progress::default()
    });
    on_progress(&progress.borrow());
    let rows: std::collections::HashMap<&str, &Row> =
        eval.rows.iter().map(|r| (r.id.as_str(), r)).collect();
    let runner = Runner {
        store: Some(store),
        provider,
        experiment: Some(eval.experiment),
        width: cells::width(provider, pace.concurrency),
        // Each reply measured as it came.
        repair: false,
        cache: eval.spec.cache,
    };
    // Rendered as each cell starts: a large matrix is never held rendered.
    let cells = todo.into_iter().map(|(subject, cell)| {
        let s = &eval.subjects[subject];
        let prepared = rendering(&s.prompt, rows[cell.row.as_str()]).map(|rendering| Cell {
            subject: s,
            rendering,
            params: RunParams {
                max_tokens: cell.max_tokens,
                constrain: cell.constrained,
                ..eval.params.clone()
            },
            eval_cell: Some(cell),
        });
        ((), prepared)
    });
    cells::run_cells(
        &runner,
        cells,
        cancel,
        Hooks {
            on_warning: &|_, w| progress.borrow_mut().notice = Some(w.to_string()),
            ..Hooks::default()
        },
        |(), end| {
            {
                let mut p = progress.borrow_mut();
                p.done += 1;
                match &end.ran {
                    Ok(Ran::Cached(_)) => p.cached += 1,
                    Ok(Ran::Run(r)) => {
                        let u = &r.out.finish.usage;
                        p.prompt_tokens += u64::from(u.prompt_tokens);
                        p.completion_tokens += u64::from(u.completion_tokens);
                        p.cost_usd += r.cost.as_ref().map_or(0.0, |c| c.usd);
                        if r.out.finish.reason == kerf_llm::FinishReason::Error {
                            p.failed += 1;
                        }
                    }
                    Err(e)
                        if matches!(
                            e.code,
                            Code::StoreFull | Code::StoreCorrupt | Code::StoreIo | Code::Store
                        ) =>
                    {
                        // The history cannot keep what is bought: stop buying.
                        cancel.cancel();
                        return Err(e.clone());
                    }
                    Err(_) => p.failed += 1,
                }
            }
            on_progress(&progress.borrow());
            Ok(())
        },
    )
}

/// Score what `eval` has and end its experiment with that report: `ok`, or `interrupted` when
/// it was `stopped` before every cell ran (`kerf eval resume` finishes it).
pub fn finish(store: &Store, eval: &Eval, stopped: bool, options: Options) -> Result<Report> {
    let report = report(store, eval, options)?;
    let value = to_json(&report)?;
    if stopped {
        store.interrupt_experiment(
            eval.experiment,
            &value,
            "stopped before every cell ran; `kerf eval resume` finishes it",
        )?;
    } else {
        store.finish_experiment(eval.experiment, &value, None)?;
    }
    Ok(report)
}
