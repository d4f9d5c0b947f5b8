//! One pass over a plan, for every kind: the cells measured in an earlier pass read back from
//! their runs (where the plan wants them), the rest run through the one cell runner, a lane per
//! provider, and every cell's result handed to the caller as it comes. A compare, an eval and a
//! prompt file's tests are each a [`Plan`] — which cells, what a cell's end means — and differ
//! in nothing else here; a start is a pass with nothing measured, a resume one with what the
//! history holds ([`super::lifecycle::measured`]).

use std::collections::BTreeMap;

use kerf_llm::CancelToken;
use kerf_store::{CellKey, StoredReply};

use serde_json::{Map, Value};

use super::cells::{self, Cell, CellEnd, Hooks, Lane, Layer, Runner};
use super::lifecycle::Running;
use super::plan::Size;
use super::{ExperimentKind, Subject};
use crate::error::Result;
use crate::runs::Chosen;

/// A kind's plan as a pass runs it.
pub trait Plan {
    /// Where a cell's result goes (its place in the plan's own order).
    type At: Copy;
    /// What one cell gives the plan: measured now, or read back from an earlier pass.
    type Out;

    /// The providers, a lane each.
    fn providers(&self) -> &[Chosen];
    /// Requests in flight at once per provider (the local engine takes one at a time).
    fn concurrency(&self) -> usize;
    /// Whether the number in flight is found by itself per provider, up to
    /// [`concurrency`](Self::concurrency) (`--concurrency auto`).
    fn adaptive(&self) -> bool {
        false
    }
    /// Every cell of provider `provider` (an index into [`providers`](Self::providers)), in the
    /// plan's order: its place and its key. Taken lazily as cells start.
    fn cells(&self, provider: usize) -> Box<dyn Iterator<Item = (Self::At, CellKey)> + '_>;
    /// The cell at `at`, ready to run (rendered as it starts: a large plan is never held
    /// rendered). An error ends the cell without a request.
    fn cell(&self, at: Self::At, key: CellKey) -> Result<Cell<'_>>;
    /// What reading a reply of the cell at `at` needs: its subject and its variables (a batch's
    /// fold reads thousands). By default from the cell made ready to run; a plan that has them
    /// without rendering the prompt gives them so.
    fn reading(&self, at: Self::At, key: CellKey) -> Result<(&Subject, Map<String, Value>)> {
        let c = self.cell(at, key)?;
        Ok((c.subject, c.rendering.vars))
    }
    /// What the cell at `at` (keyed `key`) may spend at most (what [`size`] adds up).
    fn cost(&self, at: Self::At, key: &CellKey) -> Result<Cost>;
    /// A cell's end as the plan takes it (`key`: the cell's); an error stops the pass at once.
    fn ended(&self, at: Self::At, key: CellKey, end: CellEnd) -> Result<Self::Out>;
    /// What the pass reads back of the cells measured before.
    fn kept(&self) -> Kept {
        Kept::Nothing
    }
    /// A cell measured before, from what its run kept ([`kept`](Self::kept) is not `Nothing`).
    fn ended_before(&self, at: Self::At, reply: &StoredReply) -> Result<Self::Out> {
        let _ = (at, reply);
        Err(crate::error::ApiError::new(
            crate::error::Code::Internal,
            "this plan reads back nothing of the cells measured before",
        ))
    }
    /// Whether a prompt that asks for its repair loop gets it: an experiment measures each
    /// reply as it came (no); a prompt's tests run as a run of it would (yes).
    fn repair(&self) -> bool {
        false
    }
    /// Ask a server what it serves under the model's name before the first cell, so every run
    /// records it (an eval's resume and reply cache match on it).
    fn served_model(&self) -> bool {
        false
    }
    /// Whether a cell whose reply a self-hosted server broke off is sent again at once (see
    /// [`cells::Runner::resend_broken`]): an eval's cells, whose text nobody watches live (a
    /// compare shows each reply as it streams, and a reply that starts over would show twice).
    fn resend_broken(&self) -> bool {
        false
    }
    /// What the plan puts before each run (an eval's reply cache).
    fn layer(&self) -> Option<&dyn Layer> {
        None
    }
}

/// What one cell may spend at most: its request's text, its budget, the repairs it may send
/// and the run's token ceiling over them (see [`Size::add`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    pub input_bytes: u64,
    pub max_tokens: u32,
    pub repairs: u32,
    pub max_run_tokens: u64,
}

/// What a pass over `plan` will send at most for the cells not `measured` yet: a part per
/// provider, each priced and named. A start sizes with nothing measured, a resume with what the
/// history holds; the caller checks the total against what the person allowed.
pub fn size<P: Plan>(
    plan: &P,
    kind: ExperimentKind,
    measured: &BTreeMap<CellKey, i64>,
) -> Result<Size> {
    let providers = plan.providers();
    let mut parts = vec![Size::new(kind); providers.len()];
    for (p, part) in parts.iter_mut().enumerate() {
        for (at, key) in plan.cells(p) {
            if measured.contains_key(&key) {
                continue;
            }
            let c = plan.cost(at, &key)?;
            part.add(1, c.input_bytes, c.max_tokens, c.repairs, c.max_run_tokens);
        }
    }
    Size::of_parts(kind, parts, providers)
}

/// What a pass reads back of the cells an earlier pass measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Nothing: the plan's report reads the history itself (an eval's).
    Nothing,
    /// Each run's parse.
    Parsed,
    /// Each run's parse and its reply as received.
    Raw,
}

/// Whether a cell's result was measured in this pass or read back from an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Before,
    Now,
}

/// How a pass went: the plan's cells, those measured before (where the plan reads them back,
/// those read back), those that ended in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Passed {
    pub cells: usize,
    pub before: usize,
    pub ended: usize,
}

impl Passed {
    /// Every cell of the plan has a result (not stopped between cells).
    pub fn whole(&self) -> bool {
        self.before + self.ended >= self.cells
    }
}

/// Run one pass over `plan`: the cells in `measured` are not run again (read back first, if
/// the plan wants them); the rest run a lane per provider, every lane at once. `counted` hears
/// the plan's size (cells, measured before) before the first request; `on_out` each result as
/// it comes (an error from it stops the pass at once). Stops starting cells when `cancel`
/// fires: the pass then is not [`whole`](Passed::whole).
pub fn run<P: Plan>(
    plan: &P,
    running: Option<&Running<'_>>,
    measured: &BTreeMap<CellKey, i64>,
    cancel: &CancelToken,
    hooks: Hooks<'_, P::At>,
    counted: &mut dyn FnMut(&Passed),
    on_out: &mut dyn FnMut(P::At, When, P::Out) -> Result<()>,
) -> Result<Passed> {
    super::plan::check_concurrency(plan.concurrency())?;
    let providers = plan.providers();
    let mut passed = Passed::default();
    for p in 0..providers.len() {
        for (_, key) in plan.cells(p) {
            passed.cells += 1;
            if measured.contains_key(&key) {
                passed.before += 1;
            }
        }
    }
    counted(&passed);
    let kept = match (plan.kept(), running) {
        (Kept::Nothing, _) | (_, None) => None,
        _ if measured.is_empty() => None,
        (k, Some(r)) => Some(
            r.store
                .eval_replies(r.id, k == Kept::Raw)?
                .into_iter()
                .map(|c| (c.cell.cell.clone(), c))
                .collect::<BTreeMap<CellKey, StoredReply>>(),
        ),
    };
    if let Some(kept) = kept {
        // Only what was read back counts as had: a measured cell whose reply is missing leaves
        // the pass short, as a cell never run would.
        passed.before = 0;
        for p in 0..providers.len() {
            for (at, key) in plan.cells(p) {
                if let (Some(reply), true) = (kept.get(&key), measured.contains_key(&key)) {
                    on_out(at, When::Before, plan.ended_before(at, reply)?)?;
                    passed.before += 1;
                }
            }
        }
    }
    let runner = Runner {
        store: running.map(|r| r.store),
        experiment: running.map(|r| r.id),
        repair: plan.repair(),
        served_model: plan.served_model(),
        resend_broken: plan.resend_broken(),
        layer: plan.layer(),
    };
    // Each cell runs under its place and key (the plan hears both as it ends).
    let lanes = providers
        .iter()
        .enumerate()
        .map(|(p, provider)| {
            let cells: Box<dyn Iterator<Item = _>> = Box::new(
                plan.cells(p)
                    .filter(|(_, key)| !measured.contains_key(key))
                    .map(|(at, key)| ((at, key.clone()), plan.cell(at, key))),
            );
            Lane::new(provider, plan.concurrency(), plan.adaptive(), cells)
        })
        .collect();
    let keyed = Hooks {
        on_start: &|(at, _): &(P::At, CellKey)| (hooks.on_start)(at),
        on_warning: &|(at, _): &(P::At, CellKey), w: &str| (hooks.on_warning)(at, w),
        on_text: &|(at, _): &(P::At, CellKey), t: &str| (hooks.on_text)(at, t),
    };
    cells::run_cells(&runner, lanes, cancel, keyed, |(at, key), end| {
        passed.ended += 1;
        on_out(at, When::Now, plan.ended(at, key, end)?)
    })?;
    Ok(passed)
}
