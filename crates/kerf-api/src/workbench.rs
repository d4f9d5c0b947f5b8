//! The desktop app's use cases over a [`Workbench`] (its folders and history): models, a run
//! streamed with its objects as lines complete, a compare, the history's list/detail/diff/rerun,
//! and export. Each takes and returns [`crate::wire`] types; the Tauri commands only unpack and
//! forward. Every one works without a window (see the kerf-api tests).

use std::path::{Path, PathBuf};

use kerf_core::Prompt;
use kerf_core::parse::StreamParser;
use kerf_llama::GpuLayers;
use kerf_llm::CancelToken;
use kerf_store::Store;
use serde_json::{Map, Value};

use crate::compare::{CompareJob, ConstrainMode, Subject};
use crate::error::{ApiError, Code, Result};
use crate::prompts::PromptDir;
use crate::runs::{
    Outcomes, PromptSource, Rendering, RunEvent, RunJob, RunMeta, RunParams, RunSettings,
};
use crate::wire::{
    ChangedObject, CompareInput, CompareProgress, Comparison, DeviceInfo, Drop, ExperimentRow,
    ExportView, HistoryFilter, Models, ParamChangeView, RunDetail, RunDiffView, RunDone, RunInput,
    RunMessage, RunOptions, RunRow,
};

/// Where the app finds prompts, keeps its history and its providers.
#[derive(Debug, Clone)]
pub struct Workbench {
    pub prompt_dirs: Vec<PromptDir>,
    /// The history file (`None`: runs are not recorded).
    pub history: Option<PathBuf>,
    /// The providers' definitions (`providers.json`).
    pub providers: PathBuf,
}

impl Workbench {
    /// Kerf's shipped `prompts/` (when `shipped` is given) and the user's folder in the data
    /// directory; the history in the data directory.
    pub fn new(shipped: Option<PathBuf>) -> Self {
        let mut prompt_dirs = Vec::new();
        if let Some(p) = shipped {
            prompt_dirs.push(PromptDir {
                label: "shipped".into(),
                path: p,
            });
        }
        prompt_dirs.push(PromptDir {
            label: "user".into(),
            path: kerf_core::dirs::data_dir().join("prompts"),
        });
        Workbench {
            prompt_dirs,
            history: Some(kerf_store::default_path()),
            providers: kerf_llm::providers::Registry::default_path(),
        }
    }

    /// The user's prompt folder: where imported prompts go.
    pub fn user_prompts(&self) -> Result<&Path> {
        self.prompt_dirs
            .iter()
            .find(|d| d.label == "user")
            .map(|d| d.path.as_path())
            .ok_or_else(|| ApiError::new(Code::Usage, "this workbench has no user prompt folder"))
    }

    /// A connection to the history (each caller its own: a run streams through one while the
    /// History screen reads through another).
    pub fn store(&self) -> Result<Option<Store>> {
        self.history
            .as_deref()
            .map(Store::open)
            .transpose()
            .map_err(Into::into)
    }

    /// The history, for screens that cannot work without it.
    pub fn store_required(&self) -> Result<Store> {
        self.store()?
            .ok_or_else(|| ApiError::new(Code::Usage, "this workbench keeps no history"))
    }
}

/// The run panel's settings as the run use case takes them.
pub fn settings(o: &RunOptions) -> Result<RunSettings> {
    let gpu_layers: GpuLayers = o.gpu_layers.parse().map_err(|e: String| {
        ApiError::new(Code::Usage, format!("GPU layers `{}`: {e}", o.gpu_layers))
    })?;
    Ok(RunSettings {
        provider: o.provider.clone(),
        model: o.model.clone().filter(|m| !m.is_empty()),
        temperature: o.temperature,
        seed: o.seed,
        gpu_layers,
        limits: crate::runs::RunLimits {
            max_requests: o.max_requests,
            max_run_tokens: o.max_run_tokens,
        },
        ..RunSettings::default()
    })
}

/// The run panel's settings as a run's parameters.
pub fn params(o: &RunOptions) -> Result<RunParams> {
    Ok(RunParams {
        settings: settings(o)?,
        max_tokens: o.max_tokens,
        constrain: o.constrain,
    })
}

/// GGUF files, configured providers and llama.cpp's devices.
pub fn models(wb: &Workbench) -> Models {
    let local = kerf_llama::models::list()
        .into_iter()
        .filter(|(_, info)| info.is_ok())
        .map(|(p, _)| p.display().to_string())
        .collect();
    let providers = kerf_llm::providers::Registry::load(&wb.providers)
        .map(|r| r.providers.into_iter().map(|p| p.name).collect())
        .unwrap_or_default();
    let (devices, devices_error) = match kerf_llama::devices() {
        Ok(d) => (
            d.into_iter()
                .map(|d| DeviceInfo {
                    name: d.name,
                    description: d.description,
                    kind: d.kind,
                    memory_total: d.memory_total as u64,
                    memory_free: d.memory_free as u64,
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Models {
        local,
        providers,
        devices,
        engine: kerf_llama::ENGINE,
        devices_error,
    }
}

/// A compiled draft, or its first problem as an error the user can act on.
fn compiled(draft: &crate::wire::PromptDraft, path: Option<&str>) -> Result<Prompt> {
    let place = path.unwrap_or("draft");
    let mut prompt = crate::prompts::compile(draft, place).map_err(|problems| {
        let first = &problems[0];
        ApiError {
            details: serde_json::to_value(&problems).ok(),
            ..ApiError::new(
                first.code,
                format!("{} ({}): {}", place, first.part, first.message),
            )
        }
    })?;
    prompt.path = path.map(PathBuf::from);
    Ok(prompt)
}

/// The prompt as the history keeps it: the draft's composed text (what actually ran, saved or
/// not).
fn source_of(prompt: &Prompt, path: Option<&str>) -> PromptSource {
    PromptSource {
        name: prompt.id().to_string(),
        path: path.map(String::from),
        text: prompt.file.to_json_string(),
    }
}

fn render(prompt: &Prompt, input: &str, vars: &Map<String, Value>) -> Result<Rendering> {
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

/// Streams a run's events as [`RunMessage`]s, with the objects each completed line yields.
///
/// Messages are coalesced: a fast server sends hundreds of pieces a second (bench/desktop/run
/// streams ~600 a second) and each message is a callback in the window, so text and objects are
/// held and sent together at most every [`Relay::EVERY`] (about two frames: as fast as the
/// window can draw them) and whenever another event (a warning, a repair, the end) comes.
struct Relay<'a> {
    parser: StreamParser<'a>,
    sent_objects: usize,
    sent_drops: usize,
    text: String,
    objects: Vec<Value>,
    dropped: Vec<Drop>,
    flushed: std::time::Instant,
    on_message: &'a mut dyn FnMut(RunMessage),
}

impl<'a> Relay<'a> {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(33);

    fn new(parser: StreamParser<'a>, on_message: &'a mut dyn FnMut(RunMessage)) -> Self {
        Relay {
            parser,
            sent_objects: 0,
            sent_drops: 0,
            text: String::new(),
            objects: Vec::new(),
            dropped: Vec::new(),
            flushed: std::time::Instant::now(),
            on_message,
        }
    }

    /// Send what is held: the text first, so a line's objects never arrive before the line.
    fn flush(&mut self) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            (self.on_message)(RunMessage::Text { text });
        }
        if !self.objects.is_empty() || !self.dropped.is_empty() {
            let (objects, dropped) = (
                std::mem::take(&mut self.objects),
                std::mem::take(&mut self.dropped),
            );
            (self.on_message)(RunMessage::Objects { objects, dropped });
        }
        self.flushed = std::time::Instant::now();
    }

    fn event(&mut self, e: RunEvent<'_>) {
        match e {
            RunEvent::Text(t) => {
                self.parser.feed(t);
                self.text.push_str(t);
                let committed = self.parser.committed();
                self.objects
                    .extend_from_slice(&committed.objects[self.sent_objects..]);
                self.dropped
                    .extend(committed.dropped[self.sent_drops..].iter().map(Drop::from));
                self.sent_objects = committed.objects.len();
                self.sent_drops = committed.dropped.len();
                if self.flushed.elapsed() >= Self::EVERY {
                    self.flush();
                }
            }
            RunEvent::Repair { .. } => {
                self.flush();
                // The next reply starts over: its objects replace the failed one's.
                let (parser, vars) = (self.parser.parser(), self.parser.vars().clone());
                self.parser = StreamParser::new(parser, vars);
                self.sent_objects = 0;
                self.sent_drops = 0;
                (self.on_message)(e.into());
            }
            other => {
                self.flush();
                (self.on_message)(other.into())
            }
        }
    }
}

fn done(
    out: &Outcomes,
    provider: &crate::runs::Chosen,
    cost: Option<&kerf_llm::prices::Cost>,
    history_id: Option<i64>,
) -> RunDone {
    let f = &out.finish;
    RunDone {
        history_id,
        provider: provider.name(),
        model: provider.as_provider().model(),
        objects: out.report.objects.clone(),
        dropped: out.report.dropped.iter().map(Drop::from).collect(),
        truncated: out.report.truncated,
        finish_reason: f.reason.as_str().into(),
        prompt_tokens: f.usage.prompt_tokens,
        completion_tokens: f.usage.completion_tokens,
        seconds: f.timings.total_seconds,
        tokens_per_second: f.timings.tokens_per_second,
        first_token_seconds: f.timings.first_token_seconds,
        cost_usd: cost.map(|c| c.usd),
        details: f.details.clone(),
        error: f.error.clone(),
        raw: out.raw.clone(),
    }
}

/// Run a draft on the chosen model: the reply streams as [`RunMessage::Text`], the objects of
/// each completed line as [`RunMessage::Objects`]; recorded in the workbench's history as it
/// goes. Cancel keeps what arrived (finish reason `cancelled`).
pub fn run(
    wb: &Workbench,
    input: &RunInput,
    options: &RunOptions,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let store = wb.store()?;
    let prompt = compiled(&input.draft, input.path.as_deref())?;
    let source = source_of(&prompt, input.path.as_deref());
    let rendering = render(&prompt, &input.input, &input.vars)?;
    run_rendered(
        &prompt,
        &source,
        &rendering,
        &params(options)?,
        &wb.providers,
        store.as_ref(),
        None,
        cancel,
        on_message,
    )
}

#[allow(clippy::too_many_arguments)]
fn run_rendered(
    prompt: &Prompt,
    source: &PromptSource,
    rendering: &Rendering,
    params: &RunParams,
    registry: &Path,
    history: Option<&Store>,
    rerun_of: Option<i64>,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let provider = params.settings.provider(registry)?;
    let job = RunJob {
        meta: RunMeta {
            prompt: source,
            response_type: prompt.file.response_type.to_string(),
            rendering,
            experiment: None,
            rerun_of,
        },
        provider: &provider,
        prompt,
        params,
        repair: true,
    };
    relay_run(&job, history, cancel, on_message)
}

/// `job` run (and recorded in `history`), its events relayed as the window takes them: text
/// and objects coalesced as lines complete, the rest as they come.
pub fn relay_run(
    job: &RunJob<'_>,
    history: Option<&Store>,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let (prompt, rendering, provider) = (job.prompt, job.meta.rendering, job.provider);
    let mut relay = Relay::new(
        StreamParser::new(&prompt.parser, rendering.vars.clone()),
        on_message,
    );
    let result = crate::runs::run(history, job, cancel, &mut |e| relay.event(e));
    relay.flush();
    let result = result?;
    // A reply parsed as a whole (a JSON array) yields its objects only now.
    let objects = result.out.report.objects
        [relay.sent_objects.min(result.out.report.objects.len())..]
        .to_vec();
    let dropped: Vec<Drop> = result.out.report.dropped
        [relay.sent_drops.min(result.out.report.dropped.len())..]
        .iter()
        .map(Drop::from)
        .collect();
    if !objects.is_empty() || !dropped.is_empty() {
        (relay.on_message)(RunMessage::Objects { objects, dropped });
    }
    Ok(done(
        &result.out,
        provider,
        result.cost.as_ref(),
        result.history_id,
    ))
}

/// The compare screen's run: every prompt at every budget, then the sweeps.
pub fn compare(
    wb: &Workbench,
    input: &CompareInput,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Comparison> {
    let store = wb.store()?;
    let history = store.as_ref();
    if input.prompts.len() < 2 {
        return Err(ApiError::new(
            Code::Usage,
            "pick two prompts to compare (a prompt and its twin, or any two)",
        ));
    }
    if input.budgets.is_empty() || input.budgets.contains(&0) {
        return Err(ApiError::new(
            Code::Usage,
            "give one or more token budgets, each above 0",
        ));
    }
    let constrain = ConstrainMode::parse(&input.constrain).ok_or_else(|| {
        ApiError::new(
            Code::Usage,
            format!(
                "constrain `{}`: expected both, auto or none",
                input.constrain
            ),
        )
    })?;
    let subjects = input
        .prompts
        .iter()
        .map(|path| {
            let prompt = Prompt::load(Path::new(path))?;
            let text = std::fs::read_to_string(path)
                .map_err(|e| ApiError::new(Code::Io, format!("{path}: {e}")))?;
            let rendering = render(&prompt, &input.input, &Map::new())?;
            Ok(Subject {
                source: PromptSource {
                    name: prompt.id().to_string(),
                    path: Some(path.clone()),
                    text,
                },
                prompt,
                rendering,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let settings = settings(&input.options)?;
    let provider = settings.provider(&wb.providers)?;
    let job = CompareJob {
        subjects: &subjects,
        budgets: &input.budgets,
        constrain,
        settings: &settings,
        extra_spec: Map::new(),
    };
    let compared = crate::compare::compare(history, &job, &provider, cancel, on_progress)?;
    Ok(compared.view(&subjects))
}

/// The History screen's list, newest first.
pub fn list(store: &Store, filter: &HistoryFilter) -> Result<Vec<RunRow>> {
    let now = kerf_core::time::now_ms();
    let moment = |s: &Option<String>, what: &str| -> Result<Option<i64>> {
        s.as_deref()
            .filter(|t| !t.trim().is_empty())
            .map(|t| {
                kerf_core::time::parse_moment(t.trim(), now)
                    .map_err(|e| ApiError::new(Code::Usage, format!("{what}: {e}")))
            })
            .transpose()
    };
    let nonempty = |s: &Option<String>| s.clone().filter(|t| !t.trim().is_empty());
    let status = match nonempty(&filter.status) {
        Some(s) => Some(kerf_store::Status::parse(&s).ok_or_else(|| {
            ApiError::new(
                Code::Usage,
                format!("status `{s}`: expected running, ok, truncated, interrupted or error"),
            )
        })?),
        None => None,
    };
    let f = kerf_store::Filter {
        prompt: nonempty(&filter.prompt),
        status,
        provider: nonempty(&filter.provider),
        model: None,
        since: moment(&filter.since, "since")?,
        until: moment(&filter.until, "until")?,
        tag: nonempty(&filter.tag),
        experiment: filter.experiment,
        limit: Some(filter.limit.unwrap_or(200) as usize),
    };
    Ok(store.list(&f)?.into_iter().map(RunRow::from).collect())
}

/// Stored compares and sweeps, newest first.
pub fn experiments(store: &Store, limit: usize) -> Result<Vec<ExperimentRow>> {
    Ok(store
        .experiments(Some(limit))?
        .into_iter()
        .map(|e| ExperimentRow {
            id: e.id,
            kind: e.kind,
            status: e.status,
            created_at: e.created_at,
            runs: e.runs,
            note: e.note,
        })
        .collect())
}

/// A stored run in full.
pub fn detail(store: &Store, id: i64) -> Result<RunDetail> {
    let rec = store.run(id)?;
    let version = store.prompt_version(&rec.summary.prompt_version)?;
    let report = rec.report.clone().unwrap_or_default();
    Ok(RunDetail {
        prompt_path: version.path,
        prompt_text: version.text,
        system: rec.system,
        user: rec.user,
        raw: rec.raw,
        params: rec.params,
        objects: report.objects,
        dropped: report.dropped.iter().map(Drop::from).collect(),
        vars: rec.input.vars,
        row: rec.summary.into(),
    })
}

/// What changed between two stored runs.
pub fn diff(store: &Store, a: i64, b: i64) -> Result<RunDiffView> {
    let d = crate::history::diff(store, a, b)?;
    let outcome = |o: &crate::history::Outcome| {
        format!(
            "{} · {} object(s), {} dropped · {} · {} tokens",
            o.status.as_str(),
            o.objects.unwrap_or(0),
            o.dropped.unwrap_or(0),
            o.finish_reason.as_deref().unwrap_or("-"),
            o.completion_tokens.unwrap_or(0)
        )
    };
    Ok(RunDiffView {
        a,
        b,
        prompt_name: d.prompt_name.clone(),
        prompt_diff: d.prompt.diff.clone(),
        input_diff: d.input.diff.clone(),
        params: d
            .params
            .iter()
            .map(|p| ParamChangeView {
                name: p.name.clone(),
                a: p.a.clone(),
                b: p.b.clone(),
            })
            .collect(),
        unchanged: d.objects.unchanged as u32,
        added: d.objects.added.clone(),
        removed: d.objects.removed.clone(),
        changed: d
            .objects
            .changed
            .iter()
            .map(|(x, y)| ChangedObject {
                fields: kerf_core::diff::changed_fields(x, y)
                    .into_iter()
                    .map(|(k, _, _)| k)
                    .collect(),
                a: x.clone(),
                b: y.clone(),
            })
            .collect(),
        outcome_a: outcome(&d.a),
        outcome_b: outcome(&d.b),
    })
}

/// Run a stored run again: the same prompt version, input and settings (the model is always
/// called; nothing is taken from a cache).
pub fn rerun(
    wb: &Workbench,
    id: i64,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let store = wb.store_required()?;
    let rec = store.run(id)?;
    let version = store.prompt_version(&rec.summary.prompt_version)?;
    let place = format!("run {id}'s prompt");
    let loaded = kerf_core::PromptFile::from_json_str(&version.text, &place)?;
    let prompt = Prompt::compile(loaded.file, &place)?;
    let as_map = |v: &Value| v.as_object().cloned().unwrap_or_default();
    let (vars, terms) = (as_map(&rec.input.vars), as_map(&rec.input.terms));
    let rendering = Rendering {
        rendered: prompt.render(&terms, &vars)?,
        vars,
        terms,
    };
    let source = PromptSource {
        name: version.name,
        path: version.path,
        text: version.text,
    };
    // Every stored setting, whichever front end recorded the run (bug B: only five came back).
    let params = RunParams::from_stored(&rec.params, &rec.summary.provider, &rec.summary.model)?;
    run_rendered(
        &prompt,
        &source,
        &rendering,
        &params,
        &wb.providers,
        Some(&store),
        Some(id),
        cancel,
        on_message,
    )
}

/// Where an export goes.
pub const EXPORT_TARGETS: [&str; 6] = [
    "trustgraph-bundle",
    "trustgraph-template",
    "openai",
    "anthropic",
    "gbnf",
    "lark",
];

/// Prompt files in a production shape. A bundle takes several prompts; every other target one.
/// `system` is a bundle's global system template (default: the prompts' own, or TrustGraph's).
pub fn export<P: AsRef<Path>>(
    paths: &[P],
    target: &str,
    system: Option<&str>,
) -> Result<ExportView> {
    let mut files = Vec::new();
    for p in paths {
        // Compiled too: an export of a prompt whose template or schema is broken helps nobody.
        files.push(Prompt::load(p.as_ref())?.file);
    }
    let single = || -> Result<&kerf_core::PromptFile> {
        match files.as_slice() {
            [one] => Ok(one),
            _ => Err(ApiError::new(
                Code::Usage,
                format!("{target} takes exactly one prompt (a TrustGraph bundle takes several)"),
            )),
        }
    };
    let stem = match files.as_slice() {
        [one] => one.id().to_string(),
        _ => "prompts".to_string(),
    };
    use kerf_core::export;
    let (exported, ext) = match target {
        "trustgraph-bundle" => (export::trustgraph::bundle(&files, system)?, "json"),
        "trustgraph-template" => (export::trustgraph::template_object(single()?), "json"),
        "openai" => (export::provider::openai(single()?), "json"),
        "anthropic" => (export::provider::anthropic(single()?), "json"),
        "gbnf" | "lark" => {
            let file = single()?;
            let grammar = grammar(file, target)?;
            return Ok(ExportView {
                target: target.into(),
                text: grammar,
                notes: Vec::new(),
                file_name: format!("{stem}.{target}"),
            });
        }
        other => {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "unknown export target `{other}` (expected one of {})",
                    EXPORT_TARGETS.join(", ")
                ),
            ));
        }
    };
    let mut text = serde_json::to_string_pretty(&exported.value)
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    let suffix = match target {
        "trustgraph-bundle" => "prompt-config",
        "trustgraph-template" => "trustgraph",
        t => t,
    };
    Ok(ExportView {
        target: target.into(),
        text,
        notes: exported.notes,
        file_name: format!("{stem}.{suffix}.{ext}"),
    })
}

/// The grammar a prompt's schema constrains decoding with (llama.cpp's GBNF, or llguidance's
/// Lark): what the local engine runs, for a server that takes a grammar.
fn grammar(file: &kerf_core::PromptFile, kind: &str) -> Result<String> {
    let schema = file.schema.as_ref().ok_or_else(|| {
        ApiError::new(
            Code::Export,
            format!(
                "{}: a grammar needs the prompt's schema, and it has none",
                file.id()
            ),
        )
    })?;
    let jsonl = match file.response_type {
        kerf_core::ResponseType::Json => false,
        kerf_core::ResponseType::Jsonl => true,
        other => {
            return Err(ApiError::new(
                Code::Export,
                format!(
                    "{}: a {other} reply has no grammar (only json and jsonl do)",
                    file.id()
                ),
            ));
        }
    };
    Ok(if kind == "gbnf" {
        kerf_llama::grammar::gbnf(schema, jsonl)?
    } else {
        kerf_llama::grammar::lark(schema, jsonl)
    })
}
