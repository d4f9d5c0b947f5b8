//! Comparing output formats under real budgets: every prompt (a JSONL prompt and its JSON-array
//! twin, or any two) on every provider (one, or several side by side: two models on the same
//! prompt) at every `max_tokens` budget, constrained and not, each run recorded in the history
//! under one experiment; then one reply of each prompt on each provider swept at the model's
//! token boundaries (`sweep_best` says which). `kerf compare` prints it; the desktop's Compare screen
//! draws it.

use std::path::Path;

use kerf_core::sweep::Sweep;
use kerf_core::{DropCounts, ResponseType};
use kerf_llm::{CancelToken, FinishReason};
use kerf_store::{CellKey, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::charts::{Axis, BudgetCurve, BudgetPoint, Chart, Scale, Ticks};
use crate::error::{ApiError, Code, Result};
use crate::experiments::cells::{self, Cell, CellEnd, Hooks, Ran};
use crate::experiments::pass::{self, Kept, Plan, When};
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::{CompareSpec, SpecContender, SpecPrompt, SpecSettings};
use crate::experiments::{ExperimentKind, ExperimentSpec, Subject, lifecycle};

pub use crate::experiments::sweep::token_unit;
pub use crate::experiments::{ConstrainMode, variants};
use crate::runs::{Chosen, Outcomes, Rendering, RunParams, RunSettings};

mod relay;
mod report;
mod resume;
pub mod sides;
pub mod wire;

use relay::Relay;
pub use report::{Report, ReportProvider, ReportRow, ReportSweep};
use resume::stored_row;
pub use resume::{Resumption, resume_in_window, resumption};

use std::collections::BTreeMap;

use wire::{CellText, CompareProgress};

/// One prompt in a compare: the subject, rendered with the shared input.
pub struct Contender {
    pub subject: Subject,
    pub rendering: Rendering,
    /// As the compare's spec and cells name it: its file, or a draft's name.
    pub name: String,
}

impl Contender {
    pub fn new(subject: Subject, rendering: Rendering) -> Self {
        let name = subject
            .source
            .path
            .clone()
            .unwrap_or_else(|| subject.source.name.clone());
        Contender {
            subject,
            rendering,
            name,
        }
    }
}

/// A compare as a front end starts one.
pub struct CompareJob<'a> {
    pub contenders: &'a [Contender],
    pub budgets: &'a [u32],
    pub constrain: ConstrainMode,
    pub settings: &'a RunSettings,
    /// Requests in flight at once (cloud providers; the local engine runs one at a time).
    pub concurrency: usize,
    /// What the person starting it allowed (a compare over 2,000 requests needs it).
    pub allowed: Allowance,
}

/// Requests in flight at once when a compare is not told (the local engine runs one at a time).
pub const DEFAULT_CONCURRENCY: usize = 4;

/// A cell of a compare: which contender, on which provider (indexes), at which budget,
/// constrained or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    contender: usize,
    provider: usize,
    budget: u32,
    constrained: bool,
}

impl CompareJob<'_> {
    /// The compare's cells, budget by budget, prompt by prompt, provider by provider,
    /// constrained first.
    fn cells(&self, budgets: &[u32], providers: &[Chosen]) -> Vec<At> {
        let mut cells = Vec::new();
        for &budget in budgets {
            for (contender, c) in self.contenders.iter().enumerate() {
                for (provider, p) in providers.iter().enumerate() {
                    for constrained in variants(self.constrain, &c.subject.prompt, p) {
                        cells.push(At {
                            contender,
                            provider,
                            budget,
                            constrained,
                        });
                    }
                }
            }
        }
        cells
    }

    /// The cell `at` is in the history: its contender by name, on its provider, at its budget
    /// and constraint (a compare has one input: no row).
    fn key(&self, at: &At, providers: &[Chosen]) -> CellKey {
        cells::key(
            &providers[at.provider],
            &self.contenders[at.contender].name,
            at.budget,
            at.constrained,
            0,
            "",
        )
    }

    /// What the compare will send, checked against the limits, before anything is stored.
    pub fn plan(&self, providers: &[Chosen]) -> Result<Size> {
        self.remaining(providers, &BTreeMap::new())
    }

    /// What the compare will send for the cells not `measured` yet (a resume's pass), checked
    /// as [`CompareJob::plan`] checks a start.
    fn remaining(&self, providers: &[Chosen], measured: &BTreeMap<CellKey, i64>) -> Result<Size> {
        if self.budgets.is_empty() || self.budgets.contains(&0) {
            return Err(ApiError::new(
                Code::Usage,
                "give one or more token budgets, each above 0",
            ));
        }
        plan::check_providers(providers)?;
        if self.contenders.len() * providers.len() < 2 {
            return Err(ApiError::new(
                Code::Usage,
                "give two prompts to compare (a prompt and its twin, or any two), or one prompt and two providers",
            ));
        }
        // A prompt given twice would be two contenders with one name: their cells would share
        // keys, and the second would take the first's place in the history.
        let mut names = std::collections::BTreeSet::new();
        if let Some(c) = self.contenders.iter().find(|c| !names.insert(&c.name)) {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "prompt `{}` is given twice: compare two prompts, or one prompt on two providers",
                    c.name
                ),
            ));
        }
        plan::check_concurrency(self.concurrency)?;
        RunParams {
            settings: self.settings.clone(),
            max_tokens: 1,
            constrain: false,
        }
        .check(self.budgets)?;
        let mut budgets = self.budgets.to_vec();
        budgets.sort_unstable();
        budgets.dedup();
        let plan = ComparePlan {
            job: self,
            providers,
            cells: self.cells(&budgets, providers),
        };
        let size = pass::size(&plan, ExperimentKind::Compare, measured)?;
        plan::check_allowed(&size, self.allowed)?;
        Ok(size)
    }
}

/// One run of a compare.
pub struct Row {
    pub run_id: Option<i64>,
    /// Index into the job's subjects.
    pub subject: usize,
    /// Index into the compare's providers.
    pub provider: usize,
    pub max_tokens: u32,
    pub constrained: bool,
    pub seconds: f64,
    pub out: Outcomes,
}

impl Row {
    /// Truncated exactly when the reply was cut short (its budget ran out, or the stream was
    /// cut), whatever the parser made of the text: prose cut by `max_tokens` is truncated too.
    pub fn truncated(&self) -> bool {
        self.out.finish.reason.cut_short()
    }
}

/// One format's reply swept at every token.
pub struct FormatSweep {
    /// Index into the job's subjects.
    pub subject: usize,
    /// Index into the compare's providers.
    pub provider: usize,
    /// Index into the rows: the reply swept.
    pub row: usize,
    /// No reply of this format ended on its own: the one swept was cut by its budget.
    pub cut_by_budget: bool,
    pub sweep: Sweep,
}

/// A compare's result.
pub struct Compared {
    /// The first provider's model.
    pub model: String,
    /// Each provider's name and model, in the compare's order.
    pub providers: Vec<(String, String)>,
    pub experiment: Option<i64>,
    pub rows: Vec<Row>,
    /// One per format that has a reply (see `sweep_best`).
    pub sweeps: Vec<FormatSweep>,
}

/// Run the compare, recorded as one experiment when `history` is given (finished with its
/// result, or its error). Its plan is checked first ([`CompareJob::plan`]) and handed to
/// `on_plan` before anything is stored or sent; `on_progress` hears as each run starts and
/// ends.
pub fn compare(
    history: Option<&Store>,
    job: &CompareJob<'_>,
    providers: &[Chosen],
    cancel: &CancelToken,
    on_plan: &mut dyn FnMut(&Size),
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Compared> {
    let size = job.plan(providers)?;
    on_plan(&size);
    let mut budgets = job.budgets.to_vec();
    budgets.sort_unstable();
    budgets.dedup();
    let Some(store) = history else {
        return run_all(
            None,
            job,
            &budgets,
            providers,
            &BTreeMap::new(),
            cancel,
            on_progress,
        );
    };
    // The settings every cell shares, in the history's stored form (what `kerf history
    // rerun` reads a run's back from), not any front end's flags.
    let shared = RunParams {
        settings: job.settings.clone(),
        max_tokens: 0,
        constrain: false,
    };
    let spec = ExperimentSpec::Compare(CompareSpec {
        prompts: job.contenders.iter().map(|c| c.name.clone()).collect(),
        contenders: job
            .contenders
            .iter()
            .map(|c| {
                Ok(SpecContender {
                    prompt: SpecPrompt::keep(store, &c.subject)?,
                    input: store.put_input(
                        &Value::Object(c.rendering.vars.clone()),
                        &Value::Object(c.rendering.terms.clone()),
                    )?,
                })
            })
            .collect::<Result<_>>()?,
        max_tokens: budgets.clone(),
        constrain: job.constrain,
        providers: providers
            .iter()
            .map(|p| SpecSettings::of(p, &shared))
            .collect(),
        concurrency: job.concurrency,
        plan: Some(size),
    });
    let running = lifecycle::begin(store, &spec)?;
    let result = run_all(
        Some(&running),
        job,
        &budgets,
        providers,
        &BTreeMap::new(),
        cancel,
        on_progress,
    );
    settle(&running, result, job.contenders)
}

/// End a compare's pass with its report (or why it stopped) and hand its result back.
fn settle(
    running: &lifecycle::Running<'_>,
    result: Result<Compared>,
    contenders: &[Contender],
) -> Result<Compared> {
    running.settle(match &result {
        Ok(c) => lifecycle::End::Done(lifecycle::Outcome::of(&c.report(contenders))?),
        Err(e) => lifecycle::End::of_error(e),
    })?;
    result
}

/// A compare's cells as a pass runs them: each ends as a [`Row`].
struct ComparePlan<'a> {
    job: &'a CompareJob<'a>,
    providers: &'a [Chosen],
    cells: Vec<At>,
}

impl Plan for ComparePlan<'_> {
    type At = usize;
    type Out = Row;

    fn providers(&self) -> &[Chosen] {
        self.providers
    }

    fn concurrency(&self) -> usize {
        self.job.concurrency
    }

    fn cells(&self, provider: usize) -> Box<dyn Iterator<Item = (usize, CellKey)> + '_> {
        Box::new(
            self.cells
                .iter()
                .enumerate()
                .filter(move |(_, a)| a.provider == provider)
                .map(|(at, a)| (at, self.job.key(a, self.providers))),
        )
    }

    fn cell(&self, at: usize, key: CellKey) -> Result<Cell<'_>> {
        let a = self.cells[at];
        let c = &self.job.contenders[a.contender];
        Ok(Cell {
            subject: &c.subject,
            rendering: c.rendering.clone(),
            params: RunParams {
                settings: RunSettings {
                    provider: self.providers[a.provider].name(),
                    ..self.job.settings.clone()
                },
                max_tokens: a.budget,
                constrain: a.constrained,
            },
            key: Some(key),
        })
    }

    fn cost(&self, at: usize, _: &CellKey) -> Result<pass::Cost> {
        let a = &self.cells[at];
        let r = &self.job.contenders[a.contender].rendering.rendered;
        Ok(pass::Cost {
            input_bytes: (r.user.len() + r.system.as_ref().map_or(0, String::len)) as u64,
            max_tokens: a.budget,
            ..pass::Cost::default()
        })
    }

    fn ended(&self, at: usize, _: CellKey, end: CellEnd) -> Result<Row> {
        let Ran::Run(done) = end.ran? else {
            return Err(ApiError::new(Code::Internal, "a compare cell has no cache"));
        };
        let a = self.cells[at];
        Ok(Row {
            run_id: done.history_id,
            subject: a.contender,
            provider: a.provider,
            max_tokens: a.budget,
            constrained: a.constrained,
            seconds: end.seconds,
            out: done.out,
        })
    }

    fn kept(&self) -> Kept {
        Kept::Raw
    }

    fn ended_before(&self, at: usize, reply: &kerf_store::StoredReply) -> Result<Row> {
        let a = &self.cells[at];
        Ok(stored_row(a, &self.job.contenders[a.contender], reply))
    }
}

fn run_all(
    running: Option<&lifecycle::Running<'_>>,
    job: &CompareJob<'_>,
    budgets: &[u32],
    providers: &[Chosen],
    measured: &BTreeMap<CellKey, i64>,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Compared> {
    let plan = ComparePlan {
        job,
        providers,
        cells: job.cells(budgets, providers),
    };
    let cells = &plan.cells;
    let total = cells.len() as u32;
    let several = providers.len() > 1;
    let label = |at: usize| {
        let a = &cells[at];
        format!(
            "{}{} · {} tokens{}",
            job.contenders[a.contender].subject.prompt.id(),
            if several {
                format!(" on {}", providers[a.provider].name())
            } else {
                String::new()
            },
            a.budget,
            if a.constrained { " · constrained" } else { "" }
        )
    };
    // Heard as runs start, stream and end; the cells run many at once, on this thread.
    let relay = std::cell::RefCell::new(Relay::new(on_progress));
    let tell = |done: u32, label: String| relay.borrow_mut().tell(done, total, label);
    let cell_of = |at: usize| {
        let a = cells[at];
        CellText {
            cell: at as u32,
            prompt: a.contender as u32,
            provider: a.provider as u32,
            max_tokens: a.budget,
            constrained: a.constrained,
            text: String::new(),
            objects: Vec::new(),
        }
    };
    let mut ended: Vec<(usize, Row)> = Vec::with_capacity(cells.len());
    let passed = pass::run(
        &plan,
        running,
        measured,
        cancel,
        Hooks {
            on_start: &|&at| {
                let done = relay.borrow().done;
                tell(done, label(at));
            },
            on_text: &|&at, t| {
                let contender = &job.contenders[cells[at].contender];
                relay.borrow_mut().text(total, at, t, contender, cell_of)
            },
            ..Hooks::default()
        },
        &mut |_| {},
        &mut |at, when, row| {
            relay.borrow_mut().ended(total, at, &row);
            ended.push((at, row));
            match when {
                // Measured before (a resume): counted done, not announced.
                When::Before => relay.borrow_mut().done = ended.len() as u32,
                When::Now => tell(ended.len() as u32, label(at)),
            }
            Ok(())
        },
    )?;
    if !passed.whole() {
        // Cancelled between cells: none was in flight to say so.
        return Err(ApiError::new(Code::Cancelled, "stopped"));
    }
    // In the plan's order, whatever order they ended in.
    ended.sort_by_key(|(at, _)| *at);
    let rows: Vec<Row> = ended.into_iter().map(|(_, r)| r).collect();
    tell(rows.len() as u32, "sweeping the complete replies".into());
    let sweeps = sweep_best(job.contenders, &rows, providers, cancel)?;
    Ok(Compared {
        model: providers
            .first()
            .map(|p| p.as_provider().model())
            .unwrap_or_default(),
        providers: providers
            .iter()
            .map(|p| (p.name(), p.as_provider().model()))
            .collect(),
        experiment: running.map(|r| r.id),
        rows,
        sweeps,
    })
}

/// Each format's sweep on each provider, of the reply that shows the most: the one with the most accepted objects
/// among those that ended on their own; if none of those has objects, the longest reply that
/// has some (cut by its budget); if none has any, the longest that ended on its own, else the
/// longest (cut by its budget). Never a reply with 0 objects while another has some. Cuts fall
/// at the model's token boundaries (a cloud model's approximated by o200k_base).
fn sweep_best(
    contenders: &[Contender],
    rows: &[Row],
    providers: &[Chosen],
    cancel: &CancelToken,
) -> Result<Vec<FormatSweep>> {
    let mut sweeps = Vec::new();
    for (pi, provider) in providers.iter().enumerate() {
        let tokenizer = provider
            .gguf()
            .map_or_else(|| "o200k_base".to_string(), |p| p.display().to_string());
        sweep_on(contenders, rows, (pi, &tokenizer), cancel, &mut sweeps)?;
    }
    Ok(sweeps)
}

/// [`sweep_best`] on provider `pi`, its replies cut with `tokenizer`.
fn sweep_on(
    contenders: &[Contender],
    rows: &[Row],
    (pi, tokenizer): (usize, &str),
    cancel: &CancelToken,
    sweeps: &mut Vec<FormatSweep>,
) -> Result<()> {
    {
        for (i, c) in contenders.iter().enumerate() {
            let Some(at) = best_reply(rows, i, pi) else {
                continue;
            };
            let r = &rows[at];
            let unit = token_unit(tokenizer, &r.out.raw)?;
            let sweep = kerf_core::sweep::sweep(
                &c.subject.prompt.parser,
                &r.out.raw,
                &c.rendering.vars,
                &unit,
                cancel,
            )?;
            sweeps.push(FormatSweep {
                subject: i,
                provider: pi,
                row: at,
                cut_by_budget: r.out.finish.reason != FinishReason::Stop,
                sweep,
            });
        }
    }
    Ok(())
}

/// The row of `subject` on provider `provider` to sweep (see `sweep_best`).
pub fn best_reply(rows: &[Row], subject: usize, provider: usize) -> Option<usize> {
    let mine = || {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| r.subject == subject && r.provider == provider)
    };
    let finished = |r: &Row| r.out.finish.reason == FinishReason::Stop;
    let objects = |r: &Row| r.out.report.objects.len();
    mine()
        .filter(|(_, r)| finished(r) && objects(r) > 0)
        .max_by_key(|(_, r)| (objects(r), r.out.raw.len(), r.constrained))
        .or_else(|| {
            mine()
                .filter(|(_, r)| objects(r) > 0)
                .max_by_key(|(_, r)| (r.out.raw.len(), objects(r), r.constrained))
        })
        .or_else(|| {
            mine()
                .filter(|(_, r)| finished(r))
                .max_by_key(|(_, r)| (r.out.raw.len(), r.constrained))
        })
        .or_else(|| mine().max_by_key(|(_, r)| (r.out.raw.len(), r.constrained)))
        .map(|(at, _)| at)
}

/// The Compare screen's run: every prompt file at every budget on the run panel's model, then
/// the sweeps.
pub fn compare_files(
    wb: &crate::workbench::Workbench,
    input: &wire::CompareInput,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(wire::CompareProgress),
) -> Result<Report> {
    let store = wb.store()?;
    let names = input.providers.clone().unwrap_or_default();
    if input.prompts.len() < 2 && names.len() < 2 {
        return Err(ApiError::new(
            Code::Usage,
            "pick two prompts to compare (a prompt and its twin, or any two), or two providers",
        ));
    }
    let contenders = input
        .prompts
        .iter()
        .map(|path| {
            let subject = Subject::load(Path::new(path))?;
            let none = Map::new();
            let vars = input
                .vars
                .as_ref()
                .and_then(|v| v.get(path))
                .unwrap_or(&none);
            let rendering = Rendering::of_input(&subject.prompt, &input.input, vars)?;
            Ok(Contender::new(subject, rendering))
        })
        .collect::<Result<Vec<_>>>()?;
    let settings = input.options.settings()?;
    let providers = crate::runs::providers(wb, &settings, &names)?;
    let job = CompareJob {
        contenders: &contenders,
        budgets: &input.budgets,
        constrain: input.constrain,
        settings: &settings,
        concurrency: input
            .concurrency
            .map_or(DEFAULT_CONCURRENCY, |n| n as usize),
        allowed: Allowance {
            max_requests: None,
            yes: input.confirmed == Some(true),
        },
    };
    let compared = compare(
        store.as_ref(),
        &job,
        &providers,
        cancel,
        &mut |_| {},
        on_progress,
    )?;
    Ok(compared.report(&contenders))
}
