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
use crate::experiments::cells::{self, Cell, Hooks, Lane, Ran, Runner};
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::{CompareSpec, SpecContender, SpecPrompt, SpecSettings};
use crate::experiments::{ExperimentKind, ExperimentSpec, Subject, lifecycle};

pub use crate::experiments::sweep::token_unit;
pub use crate::experiments::{ConstrainMode, variants};
use crate::runs::{Chosen, Outcomes, Rendering, RunParams, RunSettings};

pub mod sides;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use kerf_core::StreamParser;

use crate::text::Utf16Cursor;
use wire::{CellEnded, CellText, CompareProgress, PlacedObject};

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
        let mut sizes = vec![Size::new(ExperimentKind::Compare); providers.len()];
        for at in self.cells(&budgets, providers) {
            if measured.contains_key(&self.key(&at, providers)) {
                continue;
            }
            let r = &self.contenders[at.contender].rendering.rendered;
            let bytes = r.user.len() + r.system.as_ref().map_or(0, String::len);
            sizes[at.provider].add(1, bytes as u64, at.budget, 0, 0);
        }
        let size = Size::of_parts(ExperimentKind::Compare, sizes, providers)?;
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
        Ok(c) => lifecycle::End::Done(
            serde_json::to_value(c.report(contenders))
                .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?,
        ),
        Err(e) => lifecycle::End::of_error(e),
    })?;
    result
}

/// Compare `id` as the history keeps it, ready to be taken up again: each contender's prompt
/// version rendered again with its kept input, named as its cells are; its budgets, constraint
/// and concurrency; its providers built again from the spec.
struct Stored {
    contenders: Vec<Contender>,
    budgets: Vec<u32>,
    constrain: ConstrainMode,
    settings: RunSettings,
    providers: Vec<Chosen>,
    concurrency: usize,
}

fn stored(wb: &crate::workbench::Workbench, store: &Store, id: i64) -> Result<Stored> {
    let ExperimentSpec::Compare(spec) = lifecycle::spec_of(store, id, ExperimentKind::Compare)?
    else {
        return Err(ApiError::new(
            Code::StoreCorrupt,
            format!("compare {id}'s spec is not a compare's"),
        ));
    };
    if spec.contenders.len() != spec.prompts.len() {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "compare {id} was kept by a Kerf that did not keep its prompts' text and input, so it cannot be taken up again: run the compare afresh"
            ),
        ));
    }
    let contenders = spec
        .contenders
        .iter()
        .zip(&spec.prompts)
        .map(|(c, name)| {
            let subject = c.prompt.load(store, &format!("compare {id}'s prompt"))?;
            let input = store.input(&c.input)?;
            let object = |v: Value| v.as_object().cloned().unwrap_or_default();
            let rendering =
                Rendering::of_vars(&subject.prompt, object(input.vars), object(input.terms))?;
            Ok(Contender {
                subject,
                rendering,
                name: name.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let first = spec.providers.first().ok_or_else(|| {
        ApiError::new(
            Code::StoreCorrupt,
            format!("compare {id}'s spec names no provider"),
        )
    })?;
    Ok(Stored {
        contenders,
        budgets: spec.max_tokens,
        constrain: spec.constrain,
        settings: first.run_params()?.settings,
        providers: crate::experiments::spec::providers(wb, &spec.providers)?,
        concurrency: spec.concurrency,
    })
}

/// Compare `id`, ready to be taken up again where it stopped (Ctrl-C, a killed process, a
/// provider that refused): built again from the history, each provider checked to be where its
/// runs came from, what remains sized against the same bounds as a start — nothing claimed,
/// stored or sent yet ([`Resumption::size`] is what `--dry-run` announces).
pub struct Resumption {
    id: i64,
    stored: Stored,
    allowed: Allowance,
    measured: BTreeMap<CellKey, i64>,
    size: Size,
}

/// Compare `id` as a [`Resumption`].
pub fn resumption(
    wb: &crate::workbench::Workbench,
    store: &Store,
    id: i64,
    input: lifecycle::ResumeInput,
) -> Result<Resumption> {
    let stored = stored(wb, store, id)?;
    lifecycle::check_endpoints(
        store,
        id,
        ExperimentKind::Compare,
        &stored.providers,
        input.endpoint_changed,
    )?;
    let measured = lifecycle::measured(store, id, false)?;
    let size = stored
        .job(input.allowed)
        .remaining(&stored.providers, &measured)?;
    Ok(Resumption {
        id,
        stored,
        allowed: input.allowed,
        measured,
        size,
    })
}

impl Stored {
    fn job(&self, allowed: Allowance) -> CompareJob<'_> {
        CompareJob {
            contenders: &self.contenders,
            budgets: &self.budgets,
            constrain: self.constrain,
            settings: &self.settings,
            concurrency: self.concurrency,
            allowed,
        }
    }
}

impl Resumption {
    /// What the pass will send: the cells not measured before.
    pub fn size(&self) -> &Size {
        &self.size
    }

    /// Claim the compare and run what remains; the cells measured before are not bought again,
    /// and the result holds every cell and sweeps as a whole compare's does. Returns the
    /// contenders too (the report names them).
    pub fn run(
        self,
        store: &Store,
        cancel: &CancelToken,
        on_progress: &mut dyn FnMut(CompareProgress),
    ) -> Result<(Compared, Vec<Contender>)> {
        let running = lifecycle::take_up(store, self.id, ExperimentKind::Compare)?;
        let s = &self.stored;
        let result = run_all(
            Some(&running),
            &s.job(self.allowed),
            &s.budgets,
            &s.providers,
            &self.measured,
            cancel,
            on_progress,
        );
        let compared = settle(&running, result, &s.contenders)?;
        Ok((compared, self.stored.contenders))
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
    let experiment = running.map(|r| r.id);
    let plan = job.cells(budgets, providers);
    let total = plan.len() as u32;
    let several = providers.len() > 1;
    let label = |at: &At| {
        format!(
            "{}{} · {} tokens{}",
            job.contenders[at.contender].subject.prompt.id(),
            if several {
                format!(" on {}", providers[at.provider].name())
            } else {
                String::new()
            },
            at.budget,
            if at.constrained {
                " · constrained"
            } else {
                ""
            }
        )
    };
    // Heard as runs start, stream and end; the cells run many at once, on this thread.
    let relay = std::cell::RefCell::new(Relay {
        done: 0,
        label: String::new(),
        on_progress,
        pending: None,
        sent: Instant::now(),
        streams: HashMap::new(),
    });
    let tell = |done: u32, label: String| relay.borrow_mut().tell(done, total, label);
    let cell_of = |at: usize| {
        let a = plan[at];
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
    // The cells measured before (a resume): their rows from what their runs kept.
    let mut ended: Vec<(usize, Row)> = Vec::with_capacity(plan.len());
    if let (Some(r), false) = (running, measured.is_empty()) {
        let kept: BTreeMap<CellKey, kerf_store::StoredReply> = r
            .store
            .eval_replies(r.id, true)?
            .into_iter()
            .map(|c| (c.cell.cell.clone(), c))
            .collect();
        for (at, a) in plan.iter().enumerate() {
            let key = job.key(a, providers);
            if let (Some(c), true) = (kept.get(&key), measured.contains_key(&key)) {
                let row = stored_row(a, &job.contenders[a.contender], c);
                relay.borrow_mut().ended(total, at, &row);
                ended.push((at, row));
            }
        }
        relay.borrow_mut().done = ended.len() as u32;
    }
    let runner = Runner {
        store: running.map(|r| r.store),
        experiment,
        // A compare measures each reply as it came.
        repair: false,
        served_model: false,
        layer: None,
    };
    // A lane per provider, each with its own requests in flight.
    let plan = &plan;
    let lanes = providers
        .iter()
        .enumerate()
        .map(|(pi, provider)| {
            let cells = plan
                .iter()
                .enumerate()
                .filter(move |(_, a)| {
                    a.provider == pi && !measured.contains_key(&job.key(a, providers))
                })
                .map(move |(at, a)| {
                    let c = &job.contenders[a.contender];
                    let cell = Cell {
                        subject: &c.subject,
                        rendering: c.rendering.clone(),
                        params: RunParams {
                            settings: RunSettings {
                                provider: provider.name(),
                                ..job.settings.clone()
                            },
                            max_tokens: a.budget,
                            constrain: a.constrained,
                        },
                        key: Some(job.key(a, providers)),
                    };
                    (at, Ok(cell))
                });
            Lane::new(provider, job.concurrency, cells)
        })
        .collect();
    cells::run_cells(
        &runner,
        lanes,
        cancel,
        Hooks {
            on_start: &|&at| {
                let done = relay.borrow().done;
                tell(done, label(&plan[at]));
            },
            on_text: &|&at, t| {
                let contender = &job.contenders[plan[at].contender];
                relay.borrow_mut().text(total, at, t, contender, cell_of)
            },
            ..Hooks::default()
        },
        |at, end| {
            let Ran::Run(done) = end.ran? else {
                return Err(ApiError::new(Code::Internal, "a compare cell has no cache"));
            };
            let a = plan[at];
            let row = Row {
                run_id: done.history_id,
                subject: a.contender,
                provider: a.provider,
                max_tokens: a.budget,
                constrained: a.constrained,
                seconds: end.seconds,
                out: done.out,
            };
            relay.borrow_mut().ended(total, at, &row);
            ended.push((at, row));
            tell(ended.len() as u32, label(&plan[at]));
            Ok(())
        },
    )?;
    if ended.len() < plan.len() {
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
        experiment,
        rows,
        sweeps,
    })
}

/// Cell `a`'s row as its run kept it (a resume): the reply as received, its parse (made again
/// with the contender's parser where the run kept none), how it ended.
fn stored_row(a: &At, c: &Contender, kept: &kerf_store::StoredReply) -> Row {
    let raw = kept.raw.clone().unwrap_or_default();
    let report = kept
        .report
        .clone()
        .unwrap_or_else(|| c.subject.prompt.parse(&raw, &c.rendering.vars));
    let details = kept
        .details
        .clone()
        .and_then(|d| serde_json::from_value(d).ok())
        .unwrap_or_else(|| kerf_llm::details::RunDetails::Other {
            provider: kept.cell.cell.provider.clone(),
        });
    Row {
        run_id: kept.cell.run,
        subject: a.contender,
        provider: a.provider,
        max_tokens: a.budget,
        constrained: a.constrained,
        seconds: kept.seconds.unwrap_or(0.0),
        out: Outcomes {
            finish: kerf_llm::Finish {
                reason: kept.finish_reason.unwrap_or(FinishReason::Error),
                usage: kerf_llm::Usage {
                    completion_tokens: kept
                        .completion_tokens
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    ..Default::default()
                },
                timings: Default::default(),
                error: None,
                details,
            },
            raw,
            report,
            earlier: Vec::new(),
        },
    }
}

/// Where a compare's progress goes: each start and end at once, the text of the cells as it
/// streams coalesced (at most one message every [`TEXT_EVERY`], and one before any other), with
/// the objects each cell's format accepts as they are accepted.
struct Relay<'p, 'c> {
    done: u32,
    label: String,
    on_progress: &'p mut dyn FnMut(CompareProgress),
    /// Text not yet sent, and the cell it belongs to.
    pending: Option<CellText>,
    sent: Instant,
    /// Each cell in flight, parsed as it streams.
    streams: HashMap<usize, LiveParse<'c>>,
}

/// A cell's reply parsed as it streams (kerf-core's incremental parser: what it has committed
/// is exactly what parsing the whole reply yields first), and how many of its objects were sent.
struct LiveParse<'c> {
    stream: StreamParser<'c>,
    sent: usize,
    units: Utf16Cursor,
}

impl<'c> LiveParse<'c> {
    fn new(contender: &'c Contender) -> Self {
        LiveParse {
            stream: StreamParser::new(
                &contender.subject.prompt.parser,
                contender.rendering.vars.clone(),
            ),
            sent: 0,
            units: Utf16Cursor::default(),
        }
    }

    /// `text` taken in; the objects it completed.
    fn feed(&mut self, text: &str) -> Vec<PlacedObject> {
        self.stream.feed(text);
        let committed = self.stream.committed();
        // From where the last feed left off (never a walk over every object so far).
        let spans: Vec<(usize, usize)> = committed
            .starts
            .iter_from(self.sent)
            .zip(committed.ends.iter_from(self.sent))
            .collect();
        let values: Vec<Value> = committed.objects.iter_from(self.sent).collect();
        self.sent += values.len();
        place(&mut self.units, self.stream.text(), spans, values)
    }

    /// The reply has ended: the objects the whole of it yields that were not yet sent, and how
    /// many it yields in all.
    fn end(self) -> (Vec<PlacedObject>, usize) {
        let LiveParse {
            stream,
            sent,
            mut units,
        } = self;
        let (parser, vars, text) = (
            stream.parser(),
            stream.vars().clone(),
            stream.text().to_string(),
        );
        let report = stream.finish();
        let spans = parser.spans(&text, &vars, &report);
        // Those sent while streaming are the whole reply's first: committed steps never change.
        let from = sent.min(spans.len());
        let placed = place(
            &mut units,
            &text,
            spans[from..].to_vec(),
            report.objects.iter_from(from),
        );
        (placed, report.objects.len())
    }
}

/// Objects at byte `spans` of `text`, as the window places and names them.
fn place(
    units: &mut Utf16Cursor,
    text: &str,
    spans: Vec<(usize, usize)>,
    values: impl IntoIterator<Item = Value>,
) -> Vec<PlacedObject> {
    spans
        .into_iter()
        .zip(values)
        .map(|((start, end), value)| PlacedObject {
            start: units.at(text, start),
            end: units.at(text, end),
            label: sides::label(&value),
        })
        .collect()
}

/// A window takes a message as a callback: a fast provider's pieces are sent together.
const TEXT_EVERY: std::time::Duration = std::time::Duration::from_millis(33);

impl<'c> Relay<'_, 'c> {
    fn tell(&mut self, done: u32, total: u32, label: String) {
        self.flush(total);
        self.done = done;
        self.label = label.clone();
        (self.on_progress)(CompareProgress {
            done,
            total,
            label,
            text: None,
            ended: None,
        });
    }

    fn text(
        &mut self,
        total: u32,
        at: usize,
        text: &str,
        contender: &'c Contender,
        cell: impl Fn(usize) -> CellText,
    ) {
        if self.pending.as_ref().is_some_and(|p| p.cell != at as u32) {
            self.flush(total);
        }
        let objects = self
            .streams
            .entry(at)
            .or_insert_with(|| LiveParse::new(contender))
            .feed(text);
        let pending = self.pending.get_or_insert_with(|| cell(at));
        pending.text.push_str(text);
        pending.objects.extend(objects);
        if self.sent.elapsed() >= TEXT_EVERY {
            self.flush(total);
        }
    }

    /// Cell `at` ended as `row`: its last text, then its end with the objects not yet named.
    fn ended(&mut self, total: u32, at: usize, row: &Row) {
        self.flush(total);
        let (objects, whole) = match self.streams.remove(&at) {
            Some(live) => live.end(),
            None => (Vec::new(), 0),
        };
        (self.on_progress)(CompareProgress {
            done: self.done,
            total,
            label: self.label.clone(),
            text: None,
            ended: Some(CellEnded {
                cell: at as u32,
                prompt: row.subject as u32,
                provider: row.provider as u32,
                history_id: row.run_id,
                objects,
                total: whole as u32,
                finish_reason: row.out.finish.reason,
                truncated: row.truncated(),
            }),
        });
    }

    fn flush(&mut self, total: u32) {
        if let Some(text) = self.pending.take() {
            self.sent = Instant::now();
            (self.on_progress)(CompareProgress {
                done: self.done,
                total,
                label: self.label.clone(),
                text: Some(text),
                ended: None,
            });
        }
    }
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

/// One run of a compare, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportRow {
    pub prompt: String,
    /// The provider it ran on, in a compare of several (empty, and left out of the JSON, in a
    /// compare of one: its output is what it always was).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub objects: usize,
    pub dropped: DropCounts,
    pub truncated: bool,
    pub finish_reason: FinishReason,
    pub completion_tokens: u32,
    pub seconds: f64,
    pub history_id: Option<i64>,
}

/// One format's reply swept, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSweep {
    pub prompt: String,
    /// The provider the reply came from, in a compare of several (as a row's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub cut_by_budget: bool,
    /// The swept run in the history.
    pub history_id: Option<i64>,
    /// The swept reply's length in tokens, as the model counted them (shown beside the curve;
    /// the row with the same prompt, budget and constraint has it too).
    #[serde(skip, default)]
    pub completion_tokens: u32,
    #[serde(flatten)]
    pub sweep: Sweep,
}

/// A compare's result as every front end reports it: `kerf compare --json` prints this, the
/// history keeps it as the experiment's result, and the Compare screen draws
/// [`wire::Comparison`], built from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The first provider's model.
    pub model: String,
    /// Each provider and its model, in the compare's order, in a compare of several (empty,
    /// and left out of the JSON, in a compare of one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ReportProvider>,
    pub experiment: Option<i64>,
    pub rows: Vec<ReportRow>,
    pub sweeps: Vec<ReportSweep>,
}

/// A provider of a compare and the model it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportProvider {
    pub provider: String,
    pub model: String,
}

/// A prompt's pass as a chart names it: `kg (jsonl, constrained)`, with its provider when the
/// compare has several (`kg on openai (jsonl)`).
fn pass_name(
    prompt: &str,
    provider: Option<&str>,
    response_type: ResponseType,
    constrained: bool,
) -> String {
    format!(
        "{prompt}{} ({response_type}{})",
        provider.map_or_else(String::new, |p| format!(" on {p}")),
        if constrained { ", constrained" } else { "" }
    )
}

impl Report {
    /// The provider to name beside a prompt: `provider` when the compare has several.
    fn named<'r>(&self, provider: &'r str) -> Option<&'r str> {
        (self.providers.len() > 1).then_some(provider)
    }

    /// Objects recovered against the budget: a line per prompt, provider and pass.
    pub fn budget_chart(&self) -> Chart {
        let mut curves = Vec::new();
        for r in &self.rows {
            BudgetCurve::add(
                &mut curves,
                pass_name(
                    &r.prompt,
                    self.named(&r.provider),
                    r.response_type,
                    r.constrained,
                ),
                BudgetPoint {
                    budget: r.max_tokens,
                    value: r.objects as f64,
                    band: None,
                },
            );
        }
        Chart::budgets(
            "Objects recovered vs max_tokens",
            Axis::new("objects", Scale::Linear, Ticks::Count),
            &curves,
        )
    }

    /// Each format's best reply cut at every unit (`None`: no reply had objects to sweep).
    pub fn sweep_chart(&self) -> Option<Chart> {
        let curves: Vec<(String, &Sweep)> = self
            .sweeps
            .iter()
            .map(|f| {
                let name = pass_name(
                    &f.prompt,
                    self.named(&f.provider),
                    f.response_type,
                    f.constrained,
                );
                // A reply that did not end on its own is labelled so: its curve stops where the
                // budget did.
                let name = if f.cut_by_budget {
                    format!("{name}, cut by its budget")
                } else {
                    name
                };
                (name, &f.sweep)
            })
            .collect();
        (!curves.is_empty()).then(|| {
            Chart::sweeps(
                "If each format's best reply were cut at every token",
                &curves,
            )
        })
    }
}

impl Compared {
    /// Provider `i`'s name, as a report row names it (none in a compare of one).
    fn provider_name(&self, i: usize) -> String {
        match self.providers.get(i) {
            Some((name, _)) if self.providers.len() > 1 => name.clone(),
            _ => String::new(),
        }
    }

    /// The result with each row and sweep named by its prompt and provider.
    pub fn report(&self, contenders: &[Contender]) -> Report {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let p = &contenders[r.subject].subject.prompt;
                ReportRow {
                    prompt: p.id().into(),
                    provider: self.provider_name(r.provider),
                    response_type: p.file.response_type,
                    max_tokens: r.max_tokens,
                    constrained: r.constrained,
                    objects: r.out.report.objects.len(),
                    dropped: r.out.report.drop_counts(),
                    truncated: r.truncated(),
                    finish_reason: r.out.finish.reason,
                    completion_tokens: r.out.finish.usage.completion_tokens,
                    seconds: r.seconds,
                    history_id: r.run_id,
                }
            })
            .collect();
        let sweeps = self
            .sweeps
            .iter()
            .map(|f| {
                let (p, r) = (&contenders[f.subject].subject.prompt, &self.rows[f.row]);
                ReportSweep {
                    prompt: p.id().into(),
                    provider: self.provider_name(f.provider),
                    response_type: p.file.response_type,
                    max_tokens: r.max_tokens,
                    constrained: r.constrained,
                    cut_by_budget: f.cut_by_budget,
                    history_id: r.run_id,
                    completion_tokens: r.out.finish.usage.completion_tokens,
                    sweep: f.sweep.clone(),
                }
            })
            .collect();
        Report {
            model: self.model.clone(),
            providers: self
                .providers
                .iter()
                .filter(|_| self.providers.len() > 1)
                .map(|(provider, model)| ReportProvider {
                    provider: provider.clone(),
                    model: model.clone(),
                })
                .collect(),
            experiment: self.experiment,
            rows,
            sweeps,
        }
    }
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
            let rendering = Rendering::of_input(&subject.prompt, &input.input, &Map::new())?;
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
