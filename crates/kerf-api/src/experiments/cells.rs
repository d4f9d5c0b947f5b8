//! The one cell runner: every plan's cells — a compare's, an eval's, a prompt file's tests —
//! run through [`run_cells`], which drives [`crate::runs::run`] `width` at a time on the
//! caller's thread (`FuturesUnordered`: run futures call back into the caller, so they are not
//! `Send`), the provider's rate limiter pacing them. Plans differ in which cells they make and
//! what they do with each end; how a cell runs is here once.

use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use kerf_llm::CancelToken;
use kerf_store::{EvalCell, Store};

use super::Subject;
use crate::error::Result;
use crate::runs::{Chosen, Rendering, RunEvent, RunParams, RunResult};

/// How a plan's cells are run: where they are recorded, on which provider, how many at once.
pub struct Runner<'a> {
    /// The history the runs are kept in (`None`: not recorded).
    pub store: Option<&'a Store>,
    pub provider: &'a Chosen,
    /// The experiment the runs belong to.
    pub experiment: Option<i64>,
    /// Requests in flight at once (see [`width`]).
    pub width: usize,
    /// Whether a prompt that opts in gets its repair loop: an experiment measures each reply as
    /// it came (off); a prompt's tests run as a run of it would (on).
    pub repair: bool,
    /// Measure an eval cell by an earlier eval's reply when one ended on its own and
    /// everything that shaped it is the same (`kerf eval --cache`).
    pub cache: bool,
}

/// One cell: a subject, rendered, run with its parameters.
pub struct Cell<'a> {
    pub subject: &'a Subject,
    pub rendering: Rendering,
    pub params: RunParams,
    /// The eval cell this run measures (kept with the run as it begins).
    pub eval_cell: Option<EvalCell>,
}

/// How a cell was measured.
pub enum Ran {
    /// By its own run.
    Run(Box<RunResult>),
    /// By an earlier eval's run (`cache`): its id.
    Cached(i64),
}

/// A cell's end: how it was measured (or the error that stopped it), and how long it took.
pub struct CellEnd {
    pub ran: Result<Ran>,
    pub seconds: f64,
}

/// What a plan hears while its cells run, besides each end.
pub struct Hooks<'h, K> {
    /// A cell is about to start.
    pub on_start: &'h dyn Fn(&K),
    /// A run gave a notice (a rate-limit wait, a retry, a fallback).
    pub on_warning: &'h dyn Fn(&K, &str),
    /// A run's reply grew by this text (a repair starts its reply over: `on_warning` is not
    /// told; plans that show text run without repair).
    pub on_text: &'h dyn Fn(&K, &str),
}

impl<K> Default for Hooks<'_, K> {
    fn default() -> Self {
        Hooks {
            on_start: &|_| {},
            on_warning: &|_, _| {},
            on_text: &|_, _| {},
        }
    }
}

/// Run `cells` (each keyed by what the plan needs to place its end), `runner.width` at a time,
/// handing each end to `on_done` as it comes (in the order they end). A cell whose
/// preparation failed (it did not render) ends with that error without a request. Stops
/// starting cells when `cancel` fires; the runs in flight see the same token and end as
/// cancelled. `on_done` returning an error stops at once (the runs in flight are dropped) and
/// is the error returned. Cells are taken from `cells` only as they start, so a plan may make
/// them lazily.
pub fn run_cells<'c, K>(
    runner: &Runner<'_>,
    cells: impl IntoIterator<Item = (K, Result<Cell<'c>>)>,
    cancel: &CancelToken,
    hooks: Hooks<'_, K>,
    mut on_done: impl FnMut(K, CellEnd) -> Result<()>,
) -> Result<()> {
    kerf_llm::runtime::block_on(in_flight(
        runner.width,
        cells,
        cancel,
        |(key, cell)| {
            (hooks.on_start)(&key);
            async move {
                let t = Instant::now();
                let ran = match cell {
                    Ok(cell) => {
                        let mut on_event = |e: RunEvent<'_>| match e {
                            RunEvent::Warning(w) => (hooks.on_warning)(&key, w),
                            RunEvent::Text(t) => (hooks.on_text)(&key, t),
                            RunEvent::Repair { .. } => {}
                        };
                        one(runner, cell, cancel, &mut on_event).await
                    }
                    Err(e) => Err(e),
                };
                let end = CellEnd {
                    ran,
                    seconds: t.elapsed().as_secs_f64(),
                };
                (key, end)
            }
        },
        |(key, end)| on_done(key, end),
    ))
}

async fn one(
    runner: &Runner<'_>,
    cell: Cell<'_>,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> Result<Ran> {
    let Cell {
        subject,
        rendering,
        params,
        eval_cell,
    } = cell;
    // An eval's reply is kept as a measurement the cache may reuse: it records what the server
    // serves (asked once per provider), and the cache matches on it.
    if let (Some(_), Chosen::Cloud(p)) = (&eval_cell, runner.provider) {
        p.served_model().await;
    }
    let mut job = subject.job(&rendering, runner.provider, &params);
    job.meta.experiment = runner.experiment;
    job.repair = runner.repair;
    if let (true, Some(store), Some(experiment), Some(c)) =
        (runner.cache, runner.store, runner.experiment, &eval_cell)
    {
        let new = crate::runs::new_run(store, &job.meta, &params, runner.provider)?;
        if let Some(run) = store.cached_eval_run(&new, c.repeat, &runner.provider.endpoint())? {
            store.put_eval_cell(experiment, c, run)?;
            return Ok(Ran::Cached(run));
        }
    }
    job.meta.eval_cell = eval_cell;
    crate::runs::run(runner.store, &job, cancel, on_event)
        .await
        .map(|r| Ran::Run(Box::new(r)))
}

/// Requests a provider takes at once: `concurrency` (at least 1), except the local engine,
/// which runs one at a time.
pub fn width(provider: &Chosen, concurrency: usize) -> usize {
    match provider {
        Chosen::Local(_) => 1,
        _ => concurrency.max(1),
    }
}

/// Drive `start(item)` for every item, `width` at a time, handing each outcome to `on_done` as
/// it ends (in the order they end). Stops starting items when `cancel` fires, and lets the ones
/// in flight end (they see the same token). `on_done` returning an error stops at once: the
/// futures in flight are dropped, and the error is returned.
pub(crate) async fn in_flight<T, F: std::future::Future>(
    width: usize,
    items: impl IntoIterator<Item = T>,
    cancel: &CancelToken,
    mut start: impl FnMut(T) -> F,
    mut on_done: impl FnMut(F::Output) -> Result<()>,
) -> Result<()> {
    let mut queue = items.into_iter();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < width.max(1) && !cancel.is_cancelled() {
            let Some(item) = queue.next() else {
                break;
            };
            running.push(start(item));
        }
        let Some(done) = running.next().await else {
            return Ok(());
        };
        on_done(done)?;
    }
}
