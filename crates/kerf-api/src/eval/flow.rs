//! The eval's use cases as both front ends call them: [`start`] (or [`dry_run`]), [`resume`],
//! then [`go`], which runs what remains, ends the experiment with its report and says how the
//! eval stands ([`Ending`]). The CLI parses flags into a [`StartInput`] and prints what comes
//! back; the window will fill in the same input.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kerf_llm::CancelToken;
use kerf_store::Store;
use serde_json::{Map, Value};

use super::wire::{EvalInput, EvalPlan, EvalShown};
use super::{Eval, Options, Pace, Plan, Progress, Report, Rows};
use crate::error::{ApiError, Code, Result};
use crate::experiments::plan::{Allowance, Size};
use crate::experiments::{ConstrainMode, ExperimentKind, Subject, lifecycle};
use crate::runs::{Chosen, RunParams, RunSettings};
use crate::workbench::Workbench;

/// An eval to start: the dataset, the prompts and the matrix's axes.
#[derive(Debug, Clone)]
pub struct StartInput {
    /// A `.jsonl` or `.csv` file, or a folder of `.txt` documents.
    pub dataset: PathBuf,
    /// The first N rows only.
    pub limit: Option<usize>,
    pub prompts: Vec<PathBuf>,
    pub settings: RunSettings,
    /// The providers side by side, by name, each run with `settings` under its own name; empty:
    /// `settings.provider` alone.
    pub providers: Vec<String>,
    pub max_tokens: Vec<u32>,
    pub constrain: ConstrainMode,
    pub repeat: u32,
    pub cache: bool,
    /// Requests in flight at once per provider: with `adaptive`, the most (`--concurrency
    /// auto` finds the number below it).
    pub concurrency: usize,
    pub adaptive: bool,
    pub allowed: Allowance,
    /// Variables set for every row beneath the row's own, per prompt in `prompts`' order
    /// (`--var` sets the same for each; the window's form, each its own). A name no prompt it
    /// is set for reads is an error; each prompt keeps those it reads.
    pub vars: Vec<Map<String, Value>>,
    /// Cut each document into chunks, a request each (`--chunk-size`; checked as the eval is
    /// planned).
    pub chunking: Option<super::chunked::Chunking>,
}

/// The dataset, prompts, provider and parameters a [`StartInput`] names, loaded and checked
/// (the dataset is read a row at a time when the eval is planned, and again as it begins).
pub(super) struct Loaded {
    dataset: Rows,
    subjects: Vec<Subject>,
    /// Per subject, the variables set for its rows that it reads.
    vars: Vec<Map<String, Value>>,
    pub(super) providers: Vec<Chosen>,
    params: RunParams,
    /// The cut asked for, checked.
    chunking: Option<super::chunked::Chunking>,
}

impl StartInput {
    /// The eval the window's `input` asks for, as `kerf eval` would start it.
    pub fn of(input: &EvalInput) -> Result<StartInput> {
        Ok(StartInput {
            dataset: PathBuf::from(&input.dataset),
            limit: input.limit.map(|n| n as usize),
            prompts: input.prompts.iter().map(PathBuf::from).collect(),
            settings: input.options.settings()?,
            providers: input.providers.clone().unwrap_or_default(),
            max_tokens: input.budgets.clone(),
            constrain: input.constrain,
            repeat: input.repeat.unwrap_or(1),
            cache: input.cache,
            // No number given: the number is found by itself, as `kerf eval` does.
            concurrency: input
                .concurrency
                .map_or(super::AUTO_CEILING, |n| n as usize),
            adaptive: input.concurrency.is_none(),
            allowed: Allowance {
                max_requests: None,
                yes: input.confirmed == Some(true),
            },
            vars: input
                .prompts
                .iter()
                .map(|p| {
                    input
                        .vars
                        .as_ref()
                        .and_then(|v| v.get(p))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect(),
            chunking: input.chunking.clone(),
        })
    }

    pub(super) fn load(&self, wb: &Workbench) -> Result<Loaded> {
        // Read when the eval is planned; its own problems come before any found here.
        let dataset = Rows::file(&self.dataset, self.limit);
        let subjects = self
            .prompts
            .iter()
            .map(|p| Subject::load(p))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| dataset.problems_first(e))?;
        let vars = self
            .vars_read(&subjects)
            .map_err(|e| dataset.problems_first(e))?;
        let providers = self.providers(wb).map_err(|e| dataset.problems_first(e))?;
        let chunking = self
            .chunking
            .clone()
            .map(super::chunked::Chunking::checked)
            .transpose()
            .map_err(|e| dataset.problems_first(e))?;
        Ok(Loaded {
            chunking,
            dataset,
            subjects,
            vars,
            providers,
            params: RunParams {
                settings: self.settings.clone(),
                max_tokens: 0,
                constrain: false,
            },
        })
    }

    /// Per subject, the variables set for it that it reads (its templates' or its terms'); a
    /// name none of the prompts it is set for reads is an error naming what they read.
    fn vars_read(&self, subjects: &[Subject]) -> Result<Vec<Map<String, Value>>> {
        let reads: Vec<BTreeSet<String>> = subjects
            .iter()
            .map(|s| {
                let p = &s.prompt;
                p.input_variables()
                    .into_iter()
                    .chain(p.file.terms.keys().cloned())
                    .collect()
            })
            .collect();
        let none = Map::new();
        let set = |i: usize| self.vars.get(i).unwrap_or(&none);
        for (i, _) in subjects.iter().enumerate() {
            for name in set(i).keys() {
                let read = (0..subjects.len())
                    .filter(|&j| set(j).contains_key(name))
                    .any(|j| reads[j].contains(name));
                if !read {
                    let all: BTreeSet<&String> = reads.iter().flatten().collect();
                    return Err(ApiError::new(
                        Code::Usage,
                        format!(
                            "variable `{name}` is read by no prompt it is set for (they read: {})",
                            all.iter()
                                .map(|v| format!("`{v}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
        }
        Ok((0..subjects.len())
            .map(|i| {
                set(i)
                    .iter()
                    .filter(|(k, _)| reads[i].contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect())
    }

    fn providers(&self, wb: &Workbench) -> Result<Vec<Chosen>> {
        crate::runs::providers(wb, &self.settings, &self.providers)
    }

    /// The plan, with the variables each prompt reads (its [`Loaded::vars`]).
    fn plan<'a>(
        &'a self,
        vars: &'a [Map<String, Value>],
        chunking: Option<&'a super::chunked::Chunking>,
    ) -> Plan<'a> {
        Plan {
            vars,
            budgets: &self.max_tokens,
            constrain: self.constrain,
            repeat: self.repeat,
            cache: self.cache,
            concurrency: self.concurrency,
            adaptive: self.adaptive,
            allowed: self.allowed,
            chunking,
        }
    }
}

/// The plan of the eval the window's `input` asks for, every row checked against every prompt,
/// nothing stored or sent.
pub fn plan(wb: &Workbench, input: &EvalInput) -> Result<EvalPlan> {
    let (size, warnings, providers) = sized(wb, &StartInput::of(input)?)?;
    let parts = if size.providers.is_empty() {
        vec![size.clone()]
    } else {
        size.providers.clone()
    };
    let offers = parts
        .iter()
        .zip(&providers)
        .map(|(part, p)| crate::eval::wire::Offer {
            provider: p.name(),
            ways: crate::experiments::batch::offered(p),
            requests: part.requests,
            online_usd: part.cost_max_usd,
            batch_usd: part
                .cost_max_usd
                .map(|c| c * crate::experiments::plan::BATCH_SHARE),
        })
        .collect();
    // The line says which parts go by batch, at the batch price.
    let asked = input.ways.clone().unwrap_or_default();
    let batched: Vec<bool> = providers
        .iter()
        .map(|p| {
            asked
                .get(&p.name())
                .is_some_and(|d| *d != crate::eval::wire::Delivery::Online)
        })
        .collect();
    let size = size.batched(&batched);
    Ok(EvalPlan {
        line: size.line(),
        size,
        warnings,
        offers,
    })
}

/// The eval's size, every row checked against every prompt, with nothing stored or sent
/// (`kerf eval --dry-run`); and the prompts' warnings, as a start has them in its subjects.
pub fn dry_run(wb: &Workbench, input: &StartInput) -> Result<(Size, Vec<String>)> {
    let (size, warnings, _) = sized(wb, input)?;
    Ok((size, warnings))
}

/// [`dry_run`]'s size and warnings, with the providers it priced.
fn sized(wb: &Workbench, input: &StartInput) -> Result<(Size, Vec<String>, Vec<Chosen>)> {
    let l = input.load(wb)?;
    let size = super::plan(
        &l.dataset,
        &l.subjects,
        &input.plan(&l.vars, l.chunking.as_ref()),
        &l.params,
        &l.providers,
    )?;
    let warnings = l
        .subjects
        .into_iter()
        .flat_map(|s| s.prompt.warnings)
        .collect();
    Ok((size, warnings, l.providers))
}

/// Check the eval's plan, hand its size to `on_plan`, and start it in `store`: ready for [`go`].
pub fn start(
    wb: &Workbench,
    store: &Store,
    input: &StartInput,
    on_plan: &mut dyn FnMut(&Size),
) -> Result<(Eval, Vec<Chosen>)> {
    input.begin(store, input.load(wb)?, on_plan)
}

impl StartInput {
    /// Begin the eval `loaded` from this input: its plan checked and handed to `on_plan`, then
    /// the experiment and its rows stored.
    pub(super) fn begin(
        &self,
        store: &Store,
        loaded: Loaded,
        on_plan: &mut dyn FnMut(&Size),
    ) -> Result<(Eval, Vec<Chosen>)> {
        let l = loaded;
        let e = super::begin(
            store,
            l.dataset,
            l.subjects,
            &self.plan(&l.vars, l.chunking.as_ref()),
            l.params,
            &l.providers,
            on_plan,
        )?;
        Ok((e, l.providers))
    }
}

/// Start an eval and run it whole: [`start`], then [`go`] at the concurrency it was started
/// with — what the window's `eval_start` does.
pub fn run(
    wb: &Workbench,
    store: &Store,
    input: &StartInput,
    cancel: &CancelToken,
    options: Options,
    on_plan: &mut dyn FnMut(&Size),
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Finished> {
    let (eval, providers) = start(wb, store, input, on_plan)?;
    let pace = Pace {
        concurrency: input.concurrency,
        adaptive: input.adaptive,
        retry_errors: false,
        // The window fills its matrix in as cells end.
        live: true,
    };
    go(store, &eval, &providers, pace, cancel, options, on_progress)
}

/// The eval `id` names, or the latest one.
pub fn which(store: &Store, id: Option<i64>) -> Result<i64> {
    match id {
        Some(id) => Ok(id),
        None => store
            .latest_experiment(ExperimentKind::Eval)?
            .ok_or_else(|| {
                ApiError::new(
                    Code::NotFound,
                    "the history has no eval yet (start one with `kerf eval DATASET --prompt P.json`)",
                )
            }),
    }
}

pub use crate::experiments::lifecycle::ResumeInput;

/// What a resume of eval `id` would send, with nothing claimed, stored or sent (`kerf eval
/// resume --dry-run`): the same checks as [`resume`], the endpoint's included.
pub fn dry_run_resume(wb: &Workbench, store: &Store, id: i64, input: ResumeInput) -> Result<Size> {
    Ok(prepared(wb, store, id, input)?.2)
}

/// Eval `id` as a resume takes it up: its providers built again and checked to be where its
/// runs came from, and what the pass will send.
fn prepared(
    wb: &Workbench,
    store: &Store,
    id: i64,
    input: ResumeInput,
) -> Result<(Eval, Vec<Chosen>, Size)> {
    let e = super::stored(store, id)?;
    // Requests still in a provider's batch would be bought a second time online.
    let awaited = store.submitted_of(id)?.len();
    if awaited > 0 {
        return Err(ApiError::new(
            Code::Conflict,
            format!(
                "eval {id} has {awaited} request(s) still in a provider's batch: `kerf eval collect {id}` folds them in; `kerf eval resume {id}` on the command line sends again what has no result"
            ),
        ));
    }
    let providers = e.providers(wb)?;
    lifecycle::check_endpoints(
        store,
        id,
        ExperimentKind::Eval,
        &providers,
        input.endpoint_changed,
    )?;
    let remaining = e.remaining(store, &providers, input.retry_errors)?;
    Ok((e, providers, remaining))
}

/// Take eval `id` up again where it stopped: its provider built from its stored settings and
/// checked to be where the eval's runs came from, what the pass will send checked against the
/// same bounds as a start and handed to `on_plan`, then claimed by this process (an eval
/// another live process runs is a conflict) — all before anything is sent.
pub fn resume(
    wb: &Workbench,
    store: &Store,
    id: i64,
    input: ResumeInput,
    on_plan: &mut dyn FnMut(&Size),
) -> Result<(Eval, Vec<Chosen>)> {
    let (e, providers, remaining) = prepared(wb, store, id, input)?;
    crate::experiments::plan::check_allowed(&remaining, input.allowed)?;
    lifecycle::take_up(store, id, ExperimentKind::Eval)?;
    on_plan(&remaining);
    Ok((e, providers))
}

/// How an eval stands after a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every cell measured.
    Whole,
    /// Stopped (Ctrl-C, or the window's Stop) with cells left.
    Stopped,
    /// Cells the pass could not measure (a failed or cut-off run): the eval's figures are not a
    /// result, and CI must not read them as one.
    NotWhole { pending: usize, failed: usize },
}

/// A pass's end: the eval's report and how it stands.
#[derive(Debug, Clone)]
pub struct Finished {
    pub report: Report,
    pub ending: Ending,
}

impl Finished {
    /// The error a stopped eval ends with, naming how to finish it.
    pub fn stopped(&self) -> Option<ApiError> {
        let id = self.report.experiment;
        (self.ending == Ending::Stopped).then(|| {
            ApiError::new(
                Code::Cancelled,
                format!(
                    "eval {id} stopped with {} cell(s) left; what finished is kept: `kerf eval resume {id}` runs the rest",
                    self.report.pending
                ),
            )
        })
    }

    /// Why the eval is not whole, and how to finish it (`None`: whole, or stopped).
    pub fn not_whole(&self) -> Option<String> {
        let id = self.report.experiment;
        match self.ending {
            Ending::NotWhole { pending, failed } => Some(format!(
                "eval {id} is not whole: {pending} cell(s) without a finished run ({failed} failed); `kerf eval resume {id}{}` runs them",
                if failed > 0 { " --retry-errors" } else { "" }
            )),
            _ => None,
        }
    }
}

/// Run what `eval` still needs at `pace`, then end its experiment with its report (`ok`, or
/// `interrupted` when stopped): `on_progress` hears as each cell ends. An error is one the pass
/// could not go on from (the history could not keep what was bought); the experiment is ended
/// first, so what finished is kept.
pub fn go(
    store: &Store,
    eval: &Eval,
    providers: &[Chosen],
    pace: Pace,
    cancel: &CancelToken,
    options: Options,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Finished> {
    let ran = super::run_cells(store, eval, providers, pace, cancel, on_progress);
    let stopped = cancel.is_cancelled();
    let report = super::finish(store, eval, stopped || ran.is_err(), options)?;
    ran?;
    let failed: usize = report.summary.iter().map(|l| l.failed).sum();
    let ending = if stopped {
        Ending::Stopped
    } else if failed > 0 || report.pending > 0 {
        Ending::NotWhole {
            pending: report.pending,
            failed,
        }
    } else {
        Ending::Whole
    };
    Ok(Finished { report, ending })
}

/// Eval `id` scored from the history, with its charts (`kerf eval show`; the window's
/// Evaluate screen opening an eval).
pub fn show(store: &Store, id: i64, options: Options) -> Result<EvalShown> {
    let e = super::stored(store, id)?;
    let report = super::report(store, &e, options)?;
    let mut charts = report.budget_charts();
    charts.extend(report.chunk_size_charts());
    charts.extend(report.repeat_chart());
    charts.extend(report.flight_chart());
    charts.extend(report.latency_chart());
    Ok(EvalShown {
        drop_chart: report.drop_chart(),
        charts,
        rows: e.rows.clone(),
        batches: store.batches(id)?,
        report,
    })
}

/// Write eval `id`'s HTML report to `path` (`kerf eval report --html`; the window's "Save the
/// HTML report"): written as it is made, each cell's records read back as it is written, and
/// complete or absent, as every file Kerf writes.
pub fn write_html(store: &Store, id: i64, path: &std::path::Path, options: Options) -> Result<()> {
    let e = super::stored(store, id)?;
    let report = super::report(store, &e, options)?;
    let mut file = std::io::BufWriter::new(kerf_core::files::AtomicFile::create(path)?);
    super::html::write(store, &e, &report, &mut file)?;
    file.into_inner()
        .map_err(|e| ApiError::from(kerf_core::Error::io(path, e.into_error())))?
        .commit()?;
    Ok(())
}

/// Evals `a` and `b` compared line by line (`kerf eval compare`): the paired F1 difference per
/// prompt × budget × constraint, and per row the records gained and lost. Two evals with no
/// line in common are a usage error naming them.
pub fn compare(store: &Store, a: i64, b: i64) -> Result<Vec<super::analysis::Comparison>> {
    let options = Options::default();
    let (ea, eb) = (super::stored(store, a)?, super::stored(store, b)?);
    let ra = super::report(store, &ea, options)?;
    let rb = super::report(store, &eb, options)?;
    let comparisons = super::compare_reports(store, (&ea, &ra), (&eb, &rb))?;
    if comparisons.is_empty() {
        return Err(ApiError::new(
            Code::Usage,
            format!("evals {a} and {b} share no prompt × budget × constraint line to compare"),
        ));
    }
    Ok(comparisons)
}

/// The providers of eval `id` compared line by line, as two evals are (`kerf eval compare ID`):
/// every other provider against the first, per prompt × budget × constraint, rows paired. An
/// eval of one provider is a usage error naming it.
pub fn compare_providers(store: &Store, id: i64) -> Result<Vec<super::analysis::Comparison>> {
    let e = super::stored(store, id)?;
    if e.spec.providers.len() < 2 {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "eval {id} ran on one provider: give a second eval to compare it with (`kerf eval compare {id} OTHER`), or start one with several (`--provider A,B`)"
            ),
        ));
    }
    let report = super::report(store, &e, Options::default())?;
    Ok(report
        .comparisons
        .into_iter()
        .filter(|c| c.a.provider != c.b.provider)
        .collect())
}

/// Resume eval `id` and run what remains at the concurrency it was started with, scoring each
/// cell as it ends (the window's "Resume"). Over the limit it is `PlanTooLarge` until the
/// person `confirmed` the count the error carries, as for a start.
pub fn resume_run(
    wb: &Workbench,
    store: &Store,
    id: i64,
    confirmed: bool,
    cancel: &CancelToken,
    on_plan: &mut dyn FnMut(&Size),
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Finished> {
    let input = ResumeInput {
        allowed: Allowance {
            max_requests: None,
            yes: confirmed,
        },
        ..ResumeInput::default()
    };
    let (eval, providers) = resume(wb, store, id, input, on_plan)?;
    let pace = Pace {
        concurrency: eval.spec.concurrency,
        adaptive: eval.spec.adaptive,
        retry_errors: false,
        live: true,
    };
    go(
        store,
        &eval,
        &providers,
        pace,
        cancel,
        Options::default(),
        on_progress,
    )
}
