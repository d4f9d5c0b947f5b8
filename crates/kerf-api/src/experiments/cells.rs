//! The one cell runner: every plan's cells — a compare's, an eval's, a prompt file's tests —
//! run through [`run_cells`], which drives [`crate::runs::run`] on the caller's thread
//! (`FuturesUnordered`: run futures call back into the caller, so they are not `Send`). A plan
//! hands its cells over in [`Lane`]s, one per provider: each lane keeps its own number in
//! flight and its provider's rate limiter paces it, so a slow provider holds back only its own
//! cells while the others' go on. Plans differ in which cells they make and what they do with
//! each end; how a cell runs is here once. Every cell has a key ([`CellKey`]), kept with its
//! run as the run begins, so any plan's finished cells are known to a later process; a plan may
//! put a [`Layer`] before the runs (an eval's reply cache).

use std::time::Instant;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use kerf_llm::CancelToken;
use kerf_store::{CellKey, NewRun, Store};

use super::Subject;
use crate::error::Result;
use crate::runs::{Chosen, Rendering, RunEvent, RunParams, RunResult};

/// How a plan's cells are run: where they are recorded and how each is measured (which
/// provider and how many at once is each [`Lane`]'s).
pub struct Runner<'a> {
    /// The history the runs are kept in (`None`: not recorded).
    pub store: Option<&'a Store>,
    /// The experiment the runs belong to.
    pub experiment: Option<i64>,
    /// Whether a prompt that opts in gets its repair loop: an experiment measures each reply as
    /// it came (off); a prompt's tests run as a run of it would (on).
    pub repair: bool,
    /// Ask a server what it serves under the model's name (once per provider) before the
    /// first cell, so every run records it: an eval's resume and reply cache match on it.
    pub served_model: bool,
    /// Send a cell again when a provider with no price (a self-hosted server, a router in
    /// front of several) broke off its reply mid-stream: a server killed while it decodes ends
    /// the stream with an error, and a router has by then taken it out of rotation, so the
    /// request sent again lands on one that lives. Up to [`RESENDS`] times, after a pause;
    /// the broken run stays in the history, the cell takes the new one. A priced provider's
    /// broken cell is left for `kerf eval resume --retry-errors`: sending it again buys it
    /// again, which is the person's call.
    pub resend_broken: bool,
    /// What the plan puts before each run (`None`: every cell is a request).
    pub layer: Option<&'a dyn Layer>,
}

/// A provider's share of a plan: its cells, run `width` at a time (see [`width`]) beside the
/// other lanes'. Cells are taken from `cells` only as they start, so a plan may make them
/// lazily.
pub struct Lane<'a, I> {
    pub provider: &'a Chosen,
    pub width: Width,
    pub cells: I,
}

impl<'a, I> Lane<'a, I> {
    /// `cells` on `provider`, `concurrency` at a time (one at a time on the local engine);
    /// `adaptive`: as many as the provider takes, up to `concurrency`.
    pub fn new(provider: &'a Chosen, concurrency: usize, adaptive: bool, cells: I) -> Self {
        Lane {
            provider,
            width: width(provider, concurrency, adaptive),
            cells,
        }
    }
}

/// How many of a lane's cells may be in flight at once.
#[derive(Clone)]
pub enum Width {
    Fixed(usize),
    /// Found by itself: the provider's adaptive window (shared by every run of it in this
    /// process, fed by its answers and refusals), up to `ceiling`.
    Auto {
        limiter: std::sync::Arc<kerf_llm::ratelimit::Limiter>,
        ceiling: usize,
    },
}

impl Width {
    /// The number now (at least 1).
    pub fn now(&self) -> usize {
        match self {
            Width::Fixed(n) => (*n).max(1),
            Width::Auto { limiter, ceiling } => limiter.window().limit(*ceiling),
        }
    }
}

/// One cell: a subject, rendered, run with its parameters.
pub struct Cell<'a> {
    pub subject: &'a Subject,
    pub rendering: Rendering,
    pub params: RunParams,
    /// The point of the experiment's matrix this run measures (kept with the run as it
    /// begins; `None` outside an experiment).
    pub key: Option<CellKey>,
}

/// The key of a cell of `provider`: its prompt as the spec names it, its budget, constraint,
/// repeat and row (chunk and pass 0: a plan of whole documents, one pass).
pub fn key(
    provider: &Chosen,
    prompt: &str,
    max_tokens: u32,
    constrained: bool,
    repeat: u32,
    row: &str,
) -> CellKey {
    CellKey {
        prompt: prompt.to_string(),
        provider: provider.name(),
        model: provider.as_provider().model(),
        max_tokens,
        constrained,
        repeat,
        chunk_size: 0,
        context_chars: 0,
        chunk: 0,
        pass: 0,
        row: row.to_string(),
    }
}

/// What a plan may put before its cells' runs: a run already in the history that measures a
/// cell, so no request is sent for it (an eval's reply cache, `kerf eval --cache`).
pub trait Layer {
    /// A run already in the history that measures `key` as `run` would, if there is one.
    fn measured(
        &self,
        store: &Store,
        key: &CellKey,
        run: &NewRun,
        provider: &Chosen,
    ) -> Result<Option<i64>>;
}

/// How a cell was measured.
pub enum Ran {
    /// By its own run.
    Run(Box<RunResult>),
    /// By a run the plan's [`Layer`] found (an earlier eval's): its id.
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

/// Run every lane's cells (each keyed by what the plan needs to place its end), each lane
/// `width` at a time and all lanes together, handing each end to `on_done` as it comes (in the
/// order they end). A cell whose preparation failed (it did not render) ends with that error
/// without a request. Stops starting cells when `cancel` fires; the runs in flight see the same
/// token and end as cancelled. `on_done` returning an error stops at once (the runs in flight
/// are dropped) and is the error returned.
pub fn run_cells<'c, K, I>(
    runner: &Runner<'_>,
    lanes: Vec<Lane<'c, I>>,
    cancel: &CancelToken,
    hooks: Hooks<'_, K>,
    mut on_done: impl FnMut(K, CellEnd) -> Result<()>,
) -> Result<()>
where
    I: Iterator<Item = (K, Result<Cell<'c>>)>,
{
    let providers: Vec<&Chosen> = lanes.iter().map(|l| l.provider).collect();
    let queues = lanes.into_iter().map(|l| (l.width, l.cells)).collect();
    kerf_llm::runtime::block_on(in_flight(
        queues,
        cancel,
        |lane, (key, cell)| {
            (hooks.on_start)(&key);
            let provider = providers[lane];
            async move {
                let t = Instant::now();
                let ran = match cell {
                    Ok(cell) => {
                        let mut on_event = |e: RunEvent<'_>| match e {
                            RunEvent::Warning(w) => (hooks.on_warning)(&key, w),
                            RunEvent::Text(t) => (hooks.on_text)(&key, t),
                            RunEvent::Repair { .. } => {}
                        };
                        one(runner, provider, cell, cancel, &mut on_event).await
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
    provider: &Chosen,
    cell: Cell<'_>,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> Result<Ran> {
    let Cell {
        subject,
        rendering,
        params,
        key,
    } = cell;
    if let (true, Chosen::Cloud(p)) = (runner.served_model, provider) {
        p.served_model().await;
    }
    let mut job = subject.job(&rendering, provider, &params);
    job.meta.experiment = runner.experiment;
    job.repair = runner.repair;
    if let (Some(layer), Some(store), Some(experiment), Some(k)) =
        (runner.layer, runner.store, runner.experiment, &key)
    {
        let new = crate::runs::new_run(store, &job.meta, &params, provider)?;
        if let Some(run) = layer.measured(store, k, &new, provider)? {
            store.put_cell(experiment, k, run)?;
            return Ok(Ran::Cached(run));
        }
    }
    job.meta.cell = key;
    let mut sent = 0;
    loop {
        let r = crate::runs::run(runner.store, &job, cancel, on_event).await?;
        let finish = &r.out.finish;
        let broken = matches!(
            finish.reason,
            kerf_llm::FinishReason::Error | kerf_llm::FinishReason::Interrupted
        );
        // The price table is read only for a broken reply (most cells are not).
        let again = runner.resend_broken
            && broken
            && sent < RESENDS
            && !cancel.is_cancelled()
            && matches!(provider, Chosen::Cloud(_))
            && provider.price()?.is_none();
        if !again {
            return Ok(Ran::Run(Box::new(r)));
        }
        sent += 1;
        let wait = RESEND_PAUSE * sent;
        on_event(RunEvent::Warning(&format!(
            "the server broke off the reply ({}); sending it again in {} s ({sent} of {RESENDS})",
            finish.error.as_deref().unwrap_or("no reason given"),
            wait.as_secs()
        )));
        if !kerf_llm::runtime::pause(wait, cancel).await {
            return Ok(Ran::Run(Box::new(r)));
        }
    }
}

/// How many times a cell a server broke off is sent again ([`Runner::resend_broken`]).
pub const RESENDS: u32 = 2;
/// The pause before the first resend (the next waits twice as long): a router's health
/// checks take the dead server out of rotation within a couple of seconds.
const RESEND_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// Requests a provider takes at once: `concurrency` (at least 1), except the local engine,
/// which runs one at a time; `adaptive`, a cloud or server provider's: what its window allows
/// now, up to `concurrency`.
pub fn width(provider: &Chosen, concurrency: usize, adaptive: bool) -> Width {
    match provider {
        Chosen::Local(_) => Width::Fixed(1),
        Chosen::Cloud(c) if adaptive => Width::Auto {
            limiter: kerf_llm::ratelimit::for_provider(
                &c.def.name,
                &c.def.base_url,
                c.def.rate_limits,
            ),
            ceiling: concurrency.max(1),
        },
        _ => Width::Fixed(concurrency.max(1)),
    }
}

/// Drive `start(lane, item)` for every item of every lane, each lane `width` at a time, the
/// lanes side by side (taken in turn, so every lane starts at once), handing each outcome to
/// `on_done` as it ends (in the order they end). Stops starting items when `cancel` fires, and
/// lets the ones in flight end (they see the same token). `on_done` returning an error stops at
/// once: the futures in flight are dropped, and the error is returned.
pub(crate) async fn in_flight<T, F: std::future::Future>(
    lanes: Vec<(Width, impl Iterator<Item = T>)>,
    cancel: &CancelToken,
    mut start: impl FnMut(usize, T) -> F,
    mut on_done: impl FnMut(F::Output) -> Result<()>,
) -> Result<()> {
    // Per lane: how many it may have in flight, its items still to start, how many are in
    // flight now.
    let mut lanes: Vec<(Width, _, usize)> = lanes
        .into_iter()
        // Not fused: a lane that ran dry is asked again after each end, since a staged plan's
        // next cells come from ends (`stages::run_staged`); a lane over a collection keeps
        // saying `None`.
        .map(|(width, items)| (width, items, 0))
        .collect();
    let mut running = FuturesUnordered::new();
    loop {
        let mut started = true;
        while started && !cancel.is_cancelled() {
            started = false;
            for (lane, (width, items, now)) in lanes.iter_mut().enumerate() {
                if *now < width.now()
                    && let Some(item) = items.next()
                {
                    *now += 1;
                    started = true;
                    running.push(start(lane, item).map(move |out| (lane, out)));
                }
            }
        }
        let Some((lane, done)) = running.next().await else {
            return Ok(());
        };
        lanes[lane].2 -= 1;
        on_done(done)?;
    }
}
