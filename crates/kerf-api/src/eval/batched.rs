//! An eval by batch: the same plan and cells as an online eval, measured by the batch driver
//! ([`crate::experiments::batch`]) for the providers that have a batch API (or, for a server
//! without one, a `vllm run-batch` file), and online for the rest — [`submit`] stores and sends,
//! [`status`] asks where the batches stand, [`collect`] folds what ended and reports, [`resume`]
//! sends again what has no finished result.

use std::path::Path;
use std::time::Duration;

use kerf_llm::CancelToken;
use kerf_store::{Batch, BatchState, Status, Store};

use super::flow::{Ending, Finished, StartInput};
use super::{Eval, Options, Pace, Progress};
use crate::error::{ApiError, Code, Result};
use crate::experiments::batch::{self, Folded};
pub use crate::experiments::batch::{Delivery, Way};
use crate::experiments::plan::Size;
use crate::experiments::{ExperimentKind, lifecycle};
use crate::runs::Chosen;
use crate::workbench::Workbench;

/// An eval handed to batches.
pub struct Submitted {
    pub experiment: i64,
    /// The batches sent (or written) now.
    pub batches: Vec<Batch>,
    /// Each provider's way, in the eval's order.
    pub ways: Vec<(String, Way)>,
    /// The online providers' pass, when some went online.
    pub online: Option<Finished>,
}

/// Where a collect leaves an eval.
pub struct Collected {
    pub finished: Finished,
    pub batches: Vec<Batch>,
    /// What this collect folded.
    pub folded: Folded,
    /// Requests still with a provider.
    pub awaiting: usize,
    /// Cells whose request got no reply (expired, errored, cancelled), with why.
    pub failed: Vec<FailedCell>,
}

/// A cell a batch gave no reply for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, ts_rs::TS)]
pub struct FailedCell {
    pub prompt: String,
    pub provider: String,
    pub max_tokens: u32,
    pub row: String,
    pub run: i64,
    pub code: String,
    pub error: String,
}

impl Collected {
    /// As the window receives it.
    pub fn wire(self) -> super::wire::EvalCollected {
        let not_whole = self.not_whole();
        super::wire::EvalCollected {
            report: self.finished.report.for_window(),
            batches: self.batches,
            folded: self.folded.settled,
            awaiting: self.awaiting,
            failed: self.failed,
            not_whole,
        }
    }

    /// Why the eval is not whole yet, and what finishes it (`None`: whole).
    pub fn not_whole(&self) -> Option<String> {
        let id = self.finished.report.experiment;
        if self.awaiting > 0 {
            Some(format!(
                "eval {id} is partial: {} request(s) still with the provider; `kerf eval collect {id} --wait` folds them as their batches end",
                self.awaiting
            ))
        } else if !self.failed.is_empty() || self.finished.report.pending > 0 {
            Some(format!(
                "eval {id} is not whole: {} cell(s) without a finished result ({} expired, errored or cancelled); `kerf eval resume {id}` sends them again as a new batch",
                self.finished.report.pending,
                self.failed.len()
            ))
        } else {
            None
        }
    }
}

/// Which providers an eval sends by batch, and where a batch file is written.
#[derive(Debug, Clone, Copy)]
pub enum Asked<'a> {
    /// Each that has a batch API (`kerf eval --batch`), and with a batch file each
    /// OpenAI-compatible server without one (`--batch-file FILE`).
    EachThatCan { file: Option<&'a Path> },
    /// As the window asks, by provider name (one not named goes online).
    ByName {
        ways: &'a std::collections::HashMap<String, Delivery>,
        file: Option<&'a Path>,
    },
}

impl<'a> Asked<'a> {
    /// Where the batch file is written, when one is.
    pub fn file(self) -> Option<&'a Path> {
        match self {
            Asked::EachThatCan { file } | Asked::ByName { file, .. } => file,
        }
    }
}

/// The way each of `providers` goes as `asked`. An eval none of whose providers goes by batch
/// is a usage error, and so is a batch file asked for with no path to write it to.
fn ways_for(providers: &[Chosen], asked: Asked) -> Result<Vec<Way>> {
    let ways = match asked {
        Asked::EachThatCan { file } => batch::ways(providers, file.is_some()),
        Asked::ByName { ways: by, file } => {
            let each: Vec<Delivery> = providers
                .iter()
                .map(|p| by.get(&p.name()).copied().unwrap_or_default())
                .collect();
            let ways = batch::ways_asked(providers, &each)?;
            if file.is_none() && ways.contains(&Way::Batch(kerf_store::BatchApi::File)) {
                return Err(ApiError::new(
                    Code::Usage,
                    "a batch file was asked for: give the path to write it to",
                ));
            }
            ways
        }
    };
    if !ways.iter().any(|w| w.by_batch()) {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "no provider of this eval has a batch API ({}): OpenAI, Anthropic and Gemini do; a server that offers OpenAI's (a LiteLLM proxy) needs `\"batch_api\": true`; for vLLM write a file with --batch-file FILE",
                providers
                    .iter()
                    .map(Chosen::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(ways)
}

/// The way each provider of eval `id` went when it was sent, so a resume sends it the same
/// way: by the batch API its batches went to, by a batch file again (written to `file`, which
/// must then be given), online when it sent no batch.
fn ways_sent(
    store: &Store,
    id: i64,
    providers: &[Chosen],
    file: Option<&Path>,
) -> Result<Vec<Way>> {
    let sent = store.batches(id)?;
    providers
        .iter()
        .map(|p| {
            let name = p.name();
            Ok(match sent.iter().find(|b| b.provider == name).map(|b| b.api) {
                Some(kerf_store::BatchApi::File) if file.is_none() => {
                    return Err(ApiError::new(
                        Code::Usage,
                        format!(
                            "eval {id} wrote {name}'s requests to a batch file: give --batch-file FILE to write those without a result again"
                        ),
                    ));
                }
                Some(api) => Way::Batch(api),
                None => Way::Online,
            })
        })
        .collect()
}

/// Start an eval whose batch providers' cells go to their batch APIs (`file`: the batch file
/// for a server without one): the plan checked and announced (each provider's part saying how
/// it goes, at the batch price), the experiment stored, one `submitted` run per request stored,
/// then each batch sent; the online providers' cells run now. No completion request is sent
/// for a batch provider.
pub fn submit(
    wb: &Workbench,
    store: &Store,
    input: &StartInput,
    asked: Asked,
    cancel: &CancelToken,
    on_plan: &mut dyn FnMut(&Size),
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Submitted> {
    let loaded = input.load(wb)?;
    let ways = ways_for(&loaded.providers, asked)?;
    let batched: Vec<bool> = ways.iter().map(|w| w.by_batch()).collect();
    let (eval, providers) = input.begin(store, loaded, &mut |s: &Size| {
        on_plan(&s.clone().batched(&batched))
    })?;
    let plan = super::cell_plan(store, &eval, &providers, input.concurrency, None);
    let batches = batch::submit(
        &plan,
        store,
        eval.experiment,
        &ways,
        &Default::default(),
        asked.file(),
    )?;
    let online = run_online(store, &eval, &providers, &batched, cancel, on_progress)?;
    store.submit_experiment(eval.experiment)?;
    Ok(Submitted {
        experiment: eval.experiment,
        batches,
        ways: providers.iter().map(Chosen::name).zip(ways).collect(),
        online,
    })
}

/// The online providers' remaining cells, run now (none: `None`).
fn run_online(
    store: &Store,
    eval: &Eval,
    providers: &[Chosen],
    batched: &[bool],
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Option<Finished>> {
    if batched.iter().all(|b| *b) {
        return Ok(None);
    }
    let online: Vec<bool> = batched.iter().map(|b| !b).collect();
    let pace = Pace {
        concurrency: eval.spec.concurrency,
        adaptive: eval.spec.adaptive,
        retry_errors: false,
        live: false,
    };
    let ran = super::run_cells_on(
        store,
        eval,
        providers,
        Some(online),
        pace,
        cancel,
        on_progress,
    );
    let report = super::report(store, eval, Options::default())?;
    ran?;
    Ok(Some(Finished {
        report,
        ending: if cancel.is_cancelled() {
            Ending::Stopped
        } else {
            Ending::Whole
        },
    }))
}

/// Eval `id`'s batches as their providers report them now (an unsent one is sent).
pub fn status(wb: &Workbench, store: &Store, id: i64) -> Result<Vec<Batch>> {
    let e = super::stored(store, id)?;
    let providers = e.providers(wb)?;
    let plan = super::cell_plan(store, &e, &providers, 1, None);
    let batches = batch::poll(&plan, store, id)?;
    if batches.is_empty() {
        return Err(no_batch(id));
    }
    Ok(batches)
}

fn no_batch(id: i64) -> ApiError {
    ApiError::new(
        Code::Usage,
        format!("eval {id} sent no batch (it ran online): `kerf eval show {id}` reports it"),
    )
}

/// Fold every ended batch of eval `id` into its cells (with `results`, a `vllm run-batch`
/// output file into its file batches), then report it as an online eval is reported — whole
/// (the experiment settled), or partial, saying so. With `wait`, polls every `wait` until no
/// request is with a provider; `on_batches` hears each poll.
pub fn collect(
    wb: &Workbench,
    store: &Store,
    id: i64,
    wait: Option<Duration>,
    results: Option<&Path>,
    options: Options,
    on_batches: &mut dyn FnMut(&[Batch]),
) -> Result<Collected> {
    let e = super::stored(store, id)?;
    if store.batches(id)?.is_empty() {
        return Err(no_batch(id));
    }
    let providers = e.providers(wb)?;
    let plan = super::cell_plan(store, &e, &providers, 1, None);
    let mut folded = Folded::default();
    let mut results = results;
    let batches = loop {
        let batches = batch::poll(&plan, store, id)?;
        on_batches(&batches);
        let f = batch::fold(&plan, store, id, results.take())?;
        folded.settled += f.settled;
        folded.unknown += f.unknown;
        folded.failed.extend(f.failed);
        let running = store.batches(id)?.into_iter().any(|b| {
            matches!(b.state, BatchState::Unsent | BatchState::Running)
                && b.api != kerf_store::BatchApi::File
        });
        match wait {
            Some(every) if running => std::thread::sleep(every),
            _ => break store.batches(id)?,
        }
    };
    let awaiting = store.submitted_of(id)?.len();
    let finished = if awaiting == 0 {
        let report = super::finish(store, &e, false, options)?;
        let failed: usize = report.summary.iter().map(|l| l.failed).sum();
        Finished {
            ending: if failed > 0 || report.pending > 0 {
                Ending::NotWhole {
                    pending: report.pending,
                    failed,
                }
            } else {
                Ending::Whole
            },
            report,
        }
    } else {
        let report = super::report(store, &e, options)?;
        Finished {
            ending: Ending::NotWhole {
                pending: report.pending,
                failed: 0,
            },
            report,
        }
    };
    Ok(Collected {
        failed: failed_cells(store, id)?,
        finished,
        batches,
        folded,
        awaiting,
    })
}

/// The cells of eval `id` whose run failed, with why.
fn failed_cells(store: &Store, id: i64) -> Result<Vec<FailedCell>> {
    let mut out = Vec::new();
    for c in store.cells(id)? {
        let (Some(run), Some(Status::Error)) = (c.run, c.status) else {
            continue;
        };
        let r = store.run(run)?;
        out.push(FailedCell {
            prompt: c.cell.prompt,
            provider: c.cell.provider,
            max_tokens: c.cell.max_tokens,
            row: c.cell.row,
            run,
            code: r.error_code.clone().unwrap_or_default(),
            error: r.summary.error.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

/// What a [`resume`] of eval `id` would send again, at most, with nothing folded, stored or
/// sent (`kerf eval resume --dry-run`): its cells without a finished result, requests still
/// in a batch included.
pub fn dry_run_resume(wb: &Workbench, store: &Store, id: i64, file: bool) -> Result<Size> {
    let e = super::stored(store, id)?;
    let providers = e.providers(wb)?;
    let ways = ways_sent(store, id, &providers, file.then_some(Path::new("")))?;
    let batched: Vec<bool> = ways.iter().map(|w| w.by_batch()).collect();
    Ok(e.remaining(store, &providers, true)?.batched(&batched))
}

/// Take eval `id` up again by batch: what ended is folded, then every cell without a finished
/// result and not still with a provider is sent again as a new batch (under its same id);
/// online providers' remaining cells run now. Returns the new batches.
pub fn resume(
    wb: &Workbench,
    store: &Store,
    id: i64,
    file: Option<&Path>,
    cancel: &CancelToken,
    on_plan: &mut dyn FnMut(&Size),
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<Batch>> {
    let e = super::stored(store, id)?;
    let providers = e.providers(wb)?;
    lifecycle::check_endpoints(store, id, ExperimentKind::Eval, &providers, false)?;
    let ways = ways_sent(store, id, &providers, file)?;
    let plan = super::cell_plan(store, &e, &providers, 1, None);
    batch::poll(&plan, store, id)?;
    batch::fold(&plan, store, id, None)?;
    let batched: Vec<bool> = ways.iter().map(|w| w.by_batch()).collect();
    on_plan(&e.remaining(store, &providers, true)?.batched(&batched));
    let measured = lifecycle::measured(store, id, false)?;
    let made = batch::submit(&plan, store, id, &ways, &measured, file)?;
    if batched.iter().any(|b| !b) {
        lifecycle::take_up(store, id, ExperimentKind::Eval)?;
        run_online(store, &e, &providers, &batched, cancel, on_progress)?;
        if store.submitted_of(id)?.is_empty() {
            // Nothing awaited: the online pass ended the eval, as an online resume does.
            super::finish(store, &e, cancel.is_cancelled(), Options::default())?;
        }
    }
    if !store.submitted_of(id)?.is_empty() {
        store.submit_experiment(id)?;
    }
    Ok(made)
}
