//! Running a prompt: choosing the model, the request, the repair loop, and recording the run in
//! the history as it streams. [`run`] is the one place a run is assembled; the window's run of a
//! draft ([`run_draft`]), a compare's cells and both front ends' reruns all go through it.
//!
//! - [`wire`] — what the window sends and receives ([`wire::RunOptions`], [`wire::RunMessage`],
//!   [`wire::RunDone`]).
//! - [`relay_run`] — a run's events as the window takes them, coalesced.
//! - `settings` — what a run is asked ([`RunSettings`], [`RunParams`]), its settings declared
//!   once in `declared` ([`run_settings!`](crate::run_settings)); `chosen` — the provider it
//!   goes to ([`Chosen`]).

mod chosen;
pub(crate) mod declared;
mod patch;
mod relay;
mod settings;
mod subject;
pub mod wire;

pub use crate::prompts::constraint_for;
pub use chosen::Chosen;
pub use declared::{FlashAttn, SettingsPatch, StoredConstrain, StoredParams};
pub use kerf_llama::{GpuLayers, SplitMode};
pub use patch::Overrides;
pub use relay::relay_run;
pub use settings::*;
pub use subject::Subject;
// What a front end names of a run without reaching below this crate.
pub use kerf_llm::details::{CloudDetails, LocalDetails};
pub use kerf_llm::prices::Cost;
pub use kerf_llm::providers::Structured;
pub use kerf_llm::{CancelToken, Finish, FinishReason, ReasoningEffort, RunDetails};

use std::path::PathBuf;

use kerf_core::{ParseReport, Prompt, Rendered, ResponseType};
use kerf_llama::{LocalConfig, LocalProvider};
use kerf_llm::cloud::CloudProvider;
use kerf_llm::{Constraint, Event, Message, Provider, Request, Role};
use kerf_store::{NewRun, RunEnd, Store};
use serde_json::{Map, Value, json};

use crate::error::Result;

/// What a run reports while it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent<'a> {
    /// More reply text.
    Text(&'a str),
    /// A notice worth showing (a fallback taken, a setting ignored).
    Warning(&'a str),
    /// A reply failed and goes back with its problems: which attempt starts, of how many.
    Repair {
        attempt: usize,
        max: usize,
        problems: String,
    },
}

/// One reply: how it ended, what came back, what the parser made of it.
pub struct Attempt {
    pub finish: Finish,
    pub raw: String,
    pub report: ParseReport,
}

impl Attempt {
    /// This reply as the run's last, after the `earlier` ones.
    fn last(self, earlier: Vec<Attempt>) -> Outcomes {
        Outcomes {
            finish: self.finish,
            raw: self.raw,
            report: self.report,
            earlier,
        }
    }
}

/// One finished run: its last reply, and the earlier ones a repair loop sent back.
pub struct Outcomes {
    pub finish: Finish,
    pub raw: String,
    pub report: ParseReport,
    /// Replies before the last, oldest first (empty without `repair`).
    pub earlier: Vec<Attempt>,
}

/// Whether a reply goes back for repair: it ended on its own (a reply cut by its budget, a
/// cancel or a broken stream is never repaired) and something in it was dropped for a reason
/// the model can fix (see `DropKind::is_repairable`).
fn needs_repair(a: &Attempt) -> bool {
    a.finish.reason == FinishReason::Stop && a.report.dropped.iter().any(|d| d.kind.is_repairable())
}

/// The follow-up turn of a repair: what was wrong, where.
fn repair_turn(report: &ParseReport) -> String {
    let problems: Vec<String> = report
        .dropped
        .iter()
        .filter(|d| d.kind.is_repairable())
        .map(|d| format!("- line {}: {}: {}", d.line, d.kind.as_str(), d.detail))
        .collect();
    format!(
        "Your reply could not be used as it is:\n{}\n\nReply again with the complete, corrected output only, in the same format.",
        problems.join("\n")
    )
}

/// The live phase of a run ([`run`]'s second): send `request` to `provider` and parse the
/// reply with `prompt`'s parser as it streams. With `repair` and a prompt that opts in
/// (`repair: {max-attempts}`), a reply that fails parsing or validation goes back with its
/// problems, up to the prompt's attempt count and within `limits`.
#[allow(clippy::too_many_arguments)] // the run's parts; grouped by issue 18's RunParams
pub async fn stream(
    chosen: &Chosen,
    prompt: &Prompt,
    request: &Request,
    vars: &Map<String, Value>,
    repair: bool,
    limits: RunLimits,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> Result<Outcomes> {
    let max_attempts = match (repair, prompt.file.repair) {
        // Checked on load (1–10); clamped again here, as every repair is a paid request.
        (true, Some(r)) => r
            .max_attempts
            .clamp(
                kerf_core::prompt::Repair::MIN_ATTEMPTS,
                kerf_core::prompt::Repair::MAX_ATTEMPTS,
            )
            .min(limits.max_requests.max(1)) as usize,
        _ => 1,
    };
    let provider = chosen.as_provider();
    let fold_case = matches!(chosen, Chosen::Cloud(p) if p.def.fold_enum_case);
    let mut spent: u64 = 0;
    let mut request = request.clone();
    let mut earlier: Vec<Attempt> = Vec::new();
    loop {
        let mut raw = String::new();
        let finish = provider
            .run(&request, cancel, &mut |e| match e {
                Event::Text(t) => {
                    raw.push_str(t);
                    on_event(RunEvent::Text(t));
                }
                Event::Warning(w) => on_event(RunEvent::Warning(w)),
            })
            .await?;
        let mut finish = finish;
        let (report, notes) =
            read_reply(prompt, &raw, finish.details.wrapped_in(), fold_case, vars);
        if fold_case {
            for n in &notes {
                on_event(RunEvent::Warning(&format!("enum case corrected: {n}")));
            }
            if let kerf_llm::RunDetails::Cloud(c) = &mut finish.details {
                c.case_folded = notes;
            }
        }
        let attempt = Attempt {
            finish,
            raw,
            report,
        };
        let used = &attempt.finish.usage;
        spent += u64::from(used.prompt_tokens) + u64::from(used.completion_tokens);
        if earlier.len() + 1 >= max_attempts || !needs_repair(&attempt) {
            return Ok(attempt.last(earlier));
        }
        // The repair re-sends this conversation and the reply, plus its own turn (a token per
        // four bytes: a cautious estimate), and may use its whole budget.
        let turn = repair_turn(&attempt.report);
        let next = u64::from(used.prompt_tokens)
            + u64::from(used.completion_tokens)
            + (turn.len() as u64).div_ceil(4)
            + u64::from(request.max_tokens);
        if spent + next > limits.max_run_tokens {
            on_event(RunEvent::Warning(&format!(
                "no repair sent: {spent} tokens spent, and the next request could take up to {next} more, past this run's ceiling of {} tokens (--max-run-tokens)",
                limits.max_run_tokens
            )));
            return Ok(attempt.last(earlier));
        }
        on_event(RunEvent::Repair {
            attempt: earlier.len() + 2,
            max: max_attempts,
            problems: attempt.report.drop_summary(),
        });
        request
            .messages
            .push(Message::new(Role::Assistant, attempt.raw.clone()));
        request.messages.push(Message::new(Role::User, turn));
        earlier.push(attempt);
    }
}

/// A reply to a schema the provider needed wrapped (OpenAI strict mode takes only object roots,
/// so an array schema is sent as `{"items": [...]}`): the value under the wrapper key, as the
/// prompt's parser expects it. `None` when nothing was wrapped or the reply is not a whole
/// wrapped object (a cut-off reply is parsed as it came).
/// A reply as Kerf reads it: taken out of the key a cloud run wrapped a non-object schema in,
/// its enum values' case corrected when the provider asks (`fold_case`; each correction is
/// returned), then parsed against the prompt. A run reads its reply through this, and
/// `kerf eval rescore` reads stored replies again through it, so both see the same objects.
pub fn read_reply(
    prompt: &Prompt,
    raw: &str,
    wrapped_in: Option<&str>,
    fold_case: bool,
    vars: &Map<String, Value>,
) -> (ParseReport, Vec<String>) {
    let mut text = unwrapped(raw, wrapped_in);
    let mut notes = Vec::new();
    if fold_case {
        let (folded, n) = case_folded(prompt, text.as_deref().unwrap_or(raw));
        notes = n;
        text = folded.or(text);
    }
    (prompt.parse(text.as_deref().unwrap_or(raw), vars), notes)
}

fn unwrapped(raw: &str, wrapped_in: Option<&str>) -> Option<String> {
    let key = wrapped_in?;
    let v: Value = serde_json::from_str(raw.trim()).ok()?;
    v.get(key).map(|inner| inner.to_string())
}

/// A reply with its enum/const values' letter case corrected against the prompt's schema (the
/// provider's opt-in `fold_enum_case`), and each correction; `None` when nothing changed. JSON
/// is folded whole (when it parses), JSONL line by line with the line schema.
fn case_folded(prompt: &Prompt, text: &str) -> (Option<String>, Vec<String>) {
    let Some(schema) = &prompt.file.schema else {
        return (None, Vec::new());
    };
    let mut notes = Vec::new();
    let folded = match prompt.file.response_type {
        ResponseType::Json => match serde_json::from_str::<Value>(text.trim()) {
            Ok(mut v) => {
                notes = kerf_core::schema::fold_enum_case(schema, &mut v);
                v.to_string()
            }
            Err(_) => return (None, notes),
        },
        ResponseType::Jsonl => {
            let lines: Vec<String> = text
                .split('\n')
                .enumerate()
                .map(|(i, line)| match serde_json::from_str::<Value>(line) {
                    Ok(mut v) => {
                        let found = kerf_core::schema::fold_enum_case(schema, &mut v);
                        if found.is_empty() {
                            return line.to_string();
                        }
                        notes.extend(found.into_iter().map(|n| format!("line {}: {n}", i + 1)));
                        v.to_string()
                    }
                    Err(_) => line.to_string(),
                })
                .collect();
            lines.join("\n")
        }
        _ => return (None, notes),
    };
    (if notes.is_empty() { None } else { Some(folded) }, notes)
}

/// A prompt as the history keeps it: its id, where it came from, and its exact text.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSource {
    pub name: String,
    pub path: Option<String>,
    pub text: String,
}

impl PromptSource {
    /// A compiled prompt as it runs: its file's composed text (what actually ran, saved or not).
    pub fn of(prompt: &Prompt, path: Option<&str>) -> Self {
        PromptSource {
            name: prompt.id().to_string(),
            path: path.map(String::from),
            text: prompt.file.to_json_string(),
        }
    }
}

/// A prompt rendered for a run: the turns, and what they were rendered from (kept in the history
/// so a run can be repeated exactly).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendering {
    pub rendered: Rendered,
    /// The run's variables: the input document and every --var.
    pub vars: Map<String, Value>,
    /// Global terms (TrustGraph's).
    pub terms: Map<String, Value>,
}

impl Rendering {
    /// `prompt` rendered for one input document (bound to its input variable) and extra
    /// variables, with no global terms.
    pub fn of_input(prompt: &Prompt, input: &str, vars: &Map<String, Value>) -> Result<Self> {
        let mut run_vars = Map::new();
        run_vars.insert(
            prompt.file.input_variable().to_string(),
            Value::String(input.to_string()),
        );
        run_vars.extend(vars.clone());
        Ok(Rendering {
            rendered: prompt.render(&Map::new(), &run_vars)?,
            vars: run_vars,
            terms: Map::new(),
        })
    }

    /// `prompt` rendered with a run's variables and global terms as the history kept them.
    pub fn of_vars(
        prompt: &Prompt,
        vars: Map<String, Value>,
        terms: Map<String, Value>,
    ) -> Result<Self> {
        Ok(Rendering {
            rendered: prompt.render(&terms, &vars)?,
            vars,
            terms,
        })
    }
}

/// Everything about a run but its reply and parameters: what the history needs to start one.
pub struct RunMeta<'a> {
    pub prompt: &'a PromptSource,
    pub response_type: ResponseType,
    pub rendering: &'a Rendering,
    pub experiment: Option<i64>,
    pub rerun_of: Option<i64>,
    /// The cell of `experiment` this run measures.
    pub cell: Option<kerf_store::CellKey>,
}

/// A run as the history would keep it (its prompt version and input stored): what
/// [`begin`] starts, and what `kerf eval --cache` looks an earlier reply up by.
pub(crate) fn new_run(
    store: &Store,
    meta: &RunMeta<'_>,
    params: &RunParams,
    provider: &Chosen,
) -> Result<NewRun> {
    let version = store.put_prompt_version(
        &meta.prompt.name,
        meta.prompt.path.as_deref(),
        meta.response_type.as_str(),
        &meta.prompt.text,
    )?;
    let input = store.put_input(
        &Value::Object(meta.rendering.vars.clone()),
        &Value::Object(meta.rendering.terms.clone()),
    )?;
    let model_sha256 = match provider.gguf() {
        Some(path) if path.is_file() => Some(store.model_sha256(&path)?),
        _ => None,
    };
    Ok(NewRun {
        prompt_version: version,
        input,
        experiment: meta.experiment,
        rerun_of: meta.rerun_of,
        cell: meta.cell.clone(),
        provider: provider.name(),
        model: provider.as_provider().model(),
        model_sha256,
        params: params.to_stored(),
        system: meta.rendering.rendered.system.clone(),
        user: meta.rendering.rendered.user.clone(),
    })
}

/// A run made ready to send: its request, and (with a history) the record that starts it —
/// what [`prepare`] makes of a job.
pub struct Prepared {
    pub request: Request,
    /// What the history keeps of the run as it begins (its prompt version and input stored);
    /// `None` without a history.
    pub new_run: Option<NewRun>,
}

/// The first phase of a run: check the job ([`RunParams::check`]: a budget of 0 or above
/// `--max-run-tokens`, a sampling setting out of range are refused),
/// build the request from its parameters, and (with a history) store the prompt version and
/// input the run will name. Nothing is sent, and the run is not begun: a live run begins it
/// now ([`run`]), a batch hands it to a provider first.
pub fn prepare(history: Option<&Store>, job: &RunJob<'_>) -> Result<Prepared> {
    job.params.check(&[job.params.max_tokens])?;
    let new_run = history
        .map(|store| new_run(store, &job.meta, job.params, job.provider))
        .transpose()?;
    Ok(Prepared {
        request: job.params.request(job.prompt, &job.meta.rendering.rendered),
        new_run,
    })
}

/// The last phase of a run: how it is kept, from what came back — its last reply, report,
/// usage, timings, details, the replies a repair loop sent back, and its estimated cost (from
/// the price table, where the provider's model is in it). A live run ends its writer with it;
/// a submitted run is settled with it by whichever process hears the answer
/// (`Store::settle_run`).
pub fn settle<'o>(
    provider: &Chosen,
    out: &'o Outcomes,
) -> Result<(RunEnd<'o>, Option<kerf_llm::prices::Cost>)> {
    let cost = provider.cost(&out.finish)?;
    Ok((run_end(out, cost.as_ref()), cost))
}

/// How a finished run is kept: its last reply, report, usage, and the replies a repair loop
/// sent back.
pub(crate) fn run_end<'o>(out: &'o Outcomes, cost: Option<&kerf_llm::prices::Cost>) -> RunEnd<'o> {
    let f = &out.finish;
    RunEnd {
        finish_reason: f.reason,
        raw: std::borrow::Cow::Borrowed(&out.raw),
        report: Some(std::borrow::Cow::Borrowed(&out.report)),
        usage: f.usage,
        usage_reported: f.usage_reported(),
        timings: f.timings,
        details: serde_json::to_value(&f.details).unwrap_or_default(),
        cost: cost.map(|c| {
            json!({"usd": c.usd, "matched": c.matched, "source": c.source,
                   "input_per_million": c.price.input, "output_per_million": c.price.output})
        }),
        earlier: out
            .earlier
            .iter()
            .map(|a| {
                json!({"finish_reason": a.finish.reason.as_str(), "usage": a.finish.usage,
                       "raw": a.raw, "objects": a.report.objects.len(),
                       "dropped": a.report.dropped.len()})
            })
            .collect(),
        error: f
            .error
            .as_ref()
            .map(|e| ("provider".to_string(), e.clone())),
    }
}

/// A run as a front end starts one: the one place a run is assembled (its request, limits and
/// stored parameters all come from `params`).
pub struct RunJob<'a> {
    pub meta: RunMeta<'a>,
    pub provider: &'a Chosen,
    pub prompt: &'a Prompt,
    pub params: &'a RunParams,
    /// Whether a prompt that opts in gets its repair loop.
    pub repair: bool,
}

impl<'a> RunJob<'a> {
    /// A run of `prompt` on `provider`, rendered as `rendering`, with `params`: recorded on its
    /// own (not an experiment's cell, not a rerun), with the repair loop its prompt asks for.
    /// Callers that are one of those set [`RunMeta::experiment`], [`RunMeta::rerun_of`] or
    /// [`repair`](Self::repair) on what this returns.
    pub fn new(
        prompt: &'a Prompt,
        source: &'a PromptSource,
        rendering: &'a Rendering,
        provider: &'a Chosen,
        params: &'a RunParams,
    ) -> Self {
        RunJob {
            meta: RunMeta {
                prompt: source,
                response_type: prompt.file.response_type,
                rendering,
                experiment: None,
                rerun_of: None,
                cell: None,
            },
            provider,
            prompt,
            params,
            repair: true,
        }
    }
}

/// A finished run: what came back, its estimated cost, and its id in the history.
pub struct RunResult {
    pub out: Outcomes,
    pub cost: Option<kerf_llm::prices::Cost>,
    pub history_id: Option<i64>,
}

impl RunResult {
    /// The run as `kerf run --json` prints it (kept exactly): its parse report's fields, then
    /// how it finished, the raw reply, who answered (`provider`'s name and model), its details,
    /// cost, every reply of a repair loop oldest first (`attempts`; the last is the run), and
    /// its id in the history.
    pub fn json(&self, provider: &Chosen) -> Result<Value> {
        fn to<T: serde::Serialize>(v: &T) -> Result<Value> {
            serde_json::to_value(v).map_err(|e| {
                crate::error::ApiError::new(crate::error::Code::Internal, e.to_string())
            })
        }
        let (out, f) = (&self.out, &self.out.finish);
        let mut v = to(&out.report)?;
        if let Value::Object(m) = &mut v {
            m.insert("finish_reason".into(), json!(f.reason.as_str()));
            m.insert("usage".into(), to(&f.usage)?);
            m.insert("timings".into(), to(&f.timings)?);
            m.insert("raw".into(), json!(out.raw));
            m.insert("provider".into(), json!(provider.as_provider().name()));
            m.insert("model".into(), json!(provider.as_provider().model()));
            m.insert("error".into(), json!(f.error));
            m.insert("details".into(), to(&f.details)?);
            m.insert("cost".into(), to(&self.cost)?);
            let attempts: Vec<Value> = out
                .earlier
                .iter()
                .map(|a| (&a.finish, &a.raw, &a.report))
                .chain(std::iter::once((&out.finish, &out.raw, &out.report)))
                .map(|(f, raw, r)| {
                    json!({"finish_reason": f.reason.as_str(), "usage": f.usage, "raw": raw,
                           "objects": r.objects.len(), "dropped": r.dropped.len()})
                })
                .collect();
            m.insert("attempts".into(), json!(attempts));
            m.insert("history_id".into(), json!(self.history_id));
        }
        Ok(v)
    }
}

/// [`run`] for a caller with no runtime of its own (the CLI): driven on Kerf's.
pub fn run_blocking(
    history: Option<&Store>,
    job: &RunJob<'_>,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> Result<RunResult> {
    kerf_llm::runtime::block_on(run(history, job, cancel, on_event))
}

/// A run, in its three phases: [`prepare`] (the request, and the record that begins it),
/// [`stream`] (the live path and the repair loop), [`settle`] (how it is kept). Kept in the
/// history as it streams (when `history` is given): written as `running` before the first
/// token, text appended in batches, ended with its report. A history write that fails (a full
/// disk) stops the run and is the error returned; a run that fails is kept as `error` with
/// what arrived. Synchronous callers drive it with `kerf_llm::runtime::block_on`.
pub async fn run(
    history: Option<&Store>,
    job: &RunJob<'_>,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> Result<RunResult> {
    let Prepared { request, new_run } = prepare(history, job)?;
    let mut writer = match (history, &new_run) {
        (Some(store), Some(new)) => Some(store.begin_run(new)?),
        _ => None,
    };
    let mut store_error: Option<kerf_store::Error> = None;
    let result = stream(
        job.provider,
        job.prompt,
        &request,
        &job.meta.rendering.vars,
        job.repair,
        job.params.settings.limits(),
        cancel,
        &mut |e| {
            if let (RunEvent::Text(t), Some(w), None) = (&e, writer.as_mut(), &store_error)
                && let Err(err) = w.push(t)
            {
                store_error = Some(err);
                cancel.cancel();
            }
            on_event(e);
        },
    )
    .await;
    if let Some(e) = store_error {
        if let Some(w) = writer {
            let _ = w.fail(e.code(), &e.to_string());
        }
        return Err(e.into());
    }
    match result {
        Ok(out) => {
            let (end, cost) = settle(job.provider, &out)?;
            let history_id = match writer {
                Some(w) => Some(w.finish(end)?),
                None => None,
            };
            Ok(RunResult {
                out,
                cost,
                history_id,
            })
        }
        Err(e) => {
            if let Some(w) = writer {
                let _ = w.fail(e.code.as_str(), &e.message);
            }
            Err(e)
        }
    }
}

/// Run a draft on the chosen model (the window's Run): the reply streams as
/// [`wire::RunMessage::Text`], the objects of each completed line as
/// [`wire::RunMessage::Objects`]; recorded in the workbench's history as it goes. Cancel keeps
/// what arrived (finish reason `cancelled`).
pub fn run_draft(
    wb: &crate::workbench::Workbench,
    input: &wire::RunInput,
    options: &wire::RunOptions,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(wire::RunMessage),
) -> Result<wire::RunDone> {
    let store = wb.store()?;
    let prompt = crate::prompts::compile_draft(&input.draft, input.path.as_deref())?;
    // Kept as the CLI keeps the same file: one prompt version, wherever it ran.
    let subject = Subject::of(prompt, input.path.as_deref());
    let rendering = Rendering::of_input(&subject.prompt, &input.input, &input.vars)?;
    let params = options.params()?;
    let provider = params.settings.provider(wb)?;
    let job = subject.job(&rendering, &provider, &params);
    relay_run(&job, store.as_ref(), cancel, on_message)
}
