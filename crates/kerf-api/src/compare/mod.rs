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
use kerf_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::charts::{Axis, BudgetCurve, BudgetPoint, Chart, Scale, Ticks};
use crate::error::{ApiError, Code, Result};
use crate::experiments::cells::{self, Cell, Hooks, Lane, Ran, Runner};
use crate::experiments::plan::{self, Allowance, Size};
use crate::experiments::spec::{CompareSpec, SpecSettings};
use crate::experiments::{ExperimentKind, ExperimentSpec, Subject};

pub use crate::experiments::sweep::token_unit;
pub use crate::experiments::{ConstrainMode, variants};
use crate::runs::{Chosen, Outcomes, Rendering, RunParams, RunSettings};

pub mod sides;
pub mod wire;

use std::collections::HashMap;
use std::time::Instant;

use kerf_core::StreamParser;

use crate::text::Utf16Cursor;
use wire::{CellEnded, CellText, CompareProgress, PlacedObject};

/// One prompt in a compare: the subject, rendered with the shared input.
pub struct Contender {
    pub subject: Subject,
    pub rendering: Rendering,
}

impl Contender {
    /// The contender as the compare's spec and cells name it: its file, or a draft's name.
    fn name(&self) -> String {
        self.subject
            .source
            .path
            .clone()
            .unwrap_or_else(|| self.subject.source.name.clone())
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

    /// What the compare will send, checked against the limits, before anything is stored.
    pub fn plan(&self, providers: &[Chosen]) -> Result<Size> {
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
    let experiment = match history {
        Some(store) => {
            // The settings every cell shares, in the history's stored form (what `kerf history
            // rerun` reads a run's back from), not any front end's flags.
            let shared = RunParams {
                settings: job.settings.clone(),
                max_tokens: 0,
                constrain: false,
            };
            let spec = ExperimentSpec::Compare(CompareSpec {
                prompts: job.contenders.iter().map(Contender::name).collect(),
                max_tokens: budgets.clone(),
                constrain: job.constrain,
                providers: providers
                    .iter()
                    .map(|p| SpecSettings::of(p, &shared))
                    .collect(),
                concurrency: job.concurrency,
                plan: Some(size),
            });
            Some(spec.begin(store)?)
        }
        None => None,
    };
    let result = run_all(
        history,
        job,
        &budgets,
        providers,
        experiment,
        cancel,
        on_progress,
    );
    if let (Some(store), Some(id)) = (history, experiment) {
        match &result {
            Ok(c) => {
                let report = serde_json::to_value(c.report(job.contenders))
                    .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
                store.finish_experiment(id, &report, None)?
            }
            Err(e) => store.finish_experiment(id, &Value::Null, Some(&e.message))?,
        }
    }
    result
}

fn run_all(
    history: Option<&Store>,
    job: &CompareJob<'_>,
    budgets: &[u32],
    providers: &[Chosen],
    experiment: Option<i64>,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Compared> {
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
    let runner = Runner {
        store: history,
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
                .filter(move |(_, a)| a.provider == pi)
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
                        // A compare has one input: its cells have no row.
                        key: Some(cells::key(
                            provider,
                            &c.name(),
                            a.budget,
                            a.constrained,
                            0,
                            "",
                        )),
                    };
                    (at, Ok(cell))
                });
            Lane::new(provider, job.concurrency, cells)
        })
        .collect();
    let mut ended: Vec<(usize, Row)> = Vec::with_capacity(plan.len());
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
            Ok(Contender { subject, rendering })
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
