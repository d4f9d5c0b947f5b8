//! Running a prompt: choosing the model, the request, the repair loop, and recording the run in
//! the history as it streams. [`run`] is the one place a run is assembled; the window's run of a
//! draft ([`run_draft`]), a compare's cells and both front ends' reruns all go through it.
//!
//! - [`wire`] — what the window sends and receives ([`wire::RunOptions`], [`wire::RunMessage`],
//!   [`wire::RunDone`]).
//! - [`relay_run`] — a run's events as the window takes them, coalesced.

mod patch;
mod relay;
mod stored;
mod subject;
pub mod wire;

pub use crate::prompts::constraint_for;
pub use patch::Overrides;
pub use relay::relay_run;
pub use stored::{StoredConstrain, StoredParams};
pub use subject::Subject;
// What a front end names of a run without reaching below this crate.
pub use kerf_llm::details::{CloudDetails, LocalDetails};
pub use kerf_llm::prices::Cost;
pub use kerf_llm::providers::Structured;
pub use kerf_llm::{CancelToken, Finish, FinishReason, ReasoningEffort, RunDetails};

use std::path::PathBuf;

use kerf_core::{ParseReport, Prompt, Rendered, ResponseType};
use kerf_llama::{GpuLayers, LocalConfig, LocalProvider, SplitMode};
use kerf_llm::cloud::CloudProvider;
use kerf_llm::{Constraint, Event, Message, Provider, Request, Role};
use kerf_store::{NewRun, RunEnd, Store};
use serde_json::{Map, Value, json};

use crate::error::Result;

/// Which model runs a prompt, and how it samples: what `kerf run`'s model flags and the app's
/// run panel both fill in.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// `local` (llama.cpp), or the name of a configured provider.
    pub provider: String,
    /// Local: a GGUF path (default: the bundled model). Cloud: a model id instead of the
    /// provider's configured one.
    pub model: Option<String>,
    /// Cloud: the structured-output mode (`None`: the provider's own setting).
    pub structured: Option<Structured>,
    /// `None`: not sent (the provider's default; greedy on the local engine).
    pub temperature: Option<f32>,
    /// `None`: not sent.
    pub top_p: Option<f32>,
    /// Cloud reasoning models: OpenAI's reasoning effort.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Cloud thinking models: Gemini's thinking budget, in tokens.
    pub thinking_budget: Option<u32>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub gpu_layers: GpuLayers,
    /// The GPU that holds the model (0 = the first); given, it must exist.
    pub main_gpu: Option<u32>,
    /// How layers spread over several GPUs (`None`: `none` with a main GPU, else `layer`).
    pub split_mode: Option<SplitMode>,
    pub threads: Option<i32>,
    /// Flash attention: `None` lets llama.cpp decide.
    pub flash_attention: Option<bool>,
    pub context: Option<u32>,
    pub chat_template: Option<String>,
    /// Constrain with llama.cpp's GBNF sampler instead of llguidance.
    pub gbnf: bool,
    /// What one run may spend at most, repairs included.
    pub limits: RunLimits,
}

/// Ceilings on what one run may spend, whatever its prompt file asks for: a repair loop re-sends
/// the growing conversation, each time a paid request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLimits {
    /// Requests in one run, the first and each repair together (default 10). The prompt's
    /// `repair.max-attempts` applies too: the lower one wins.
    pub max_requests: u32,
    /// Tokens in one run, every request's prompt and reply together (default 100,000). A repair
    /// that could pass it (what was spent, plus the conversation re-sent, plus its `max_tokens`)
    /// is not sent, and the run says so.
    pub max_run_tokens: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_requests: 10,
            max_run_tokens: 100_000,
        }
    }
}

/// The providers `names` names, each built with `settings` under its own name (no names:
/// `settings.provider` alone). A model given with several providers would be a guess at which
/// one it is for: refused.
pub fn providers(
    wb: &crate::workbench::Workbench,
    settings: &RunSettings,
    names: &[String],
) -> Result<Vec<Chosen>> {
    if names.len() > 1 && settings.model.is_some() {
        return Err(crate::ApiError::new(
            crate::Code::Usage,
            "--model names one provider's model: with several providers, give each model a provider of its own (`kerf providers add NAME --model MODEL`)",
        ));
    }
    if names.is_empty() {
        return Ok(vec![settings.provider(wb)?]);
    }
    names
        .iter()
        .map(|name| {
            RunSettings {
                provider: name.clone(),
                ..settings.clone()
            }
            .provider(wb)
        })
        .collect()
}

impl Default for RunSettings {
    /// The bundled model, no sampling parameters set (greedy there, so reruns are comparable).
    fn default() -> Self {
        RunSettings {
            provider: "local".into(),
            model: None,
            structured: None,
            temperature: None,
            top_p: None,
            reasoning_effort: None,
            thinking_budget: None,
            seed: None,
            stop: Vec::new(),
            gpu_layers: GpuLayers::Auto,
            main_gpu: None,
            split_mode: None,
            threads: None,
            flash_attention: None,
            context: None,
            chat_template: None,
            gbnf: false,
            limits: RunLimits::default(),
        }
    }
}

impl RunSettings {
    /// The provider these settings name, ready to run: a configured one is looked up in the
    /// workbench's providers file, the local model in its models folder (never a default behind
    /// the caller's back).
    pub fn provider(&self, wb: &crate::workbench::Workbench) -> Result<Chosen> {
        if self.provider != "local" {
            let registry = kerf_llm::providers::Registry::load(&wb.providers)?;
            let mut def = registry.get(&self.provider)?.clone();
            if let Some(m) = &self.model {
                def.model = m.clone();
            }
            if let Some(s) = self.structured {
                def.structured = s;
            }
            return Ok(Chosen::Cloud(Box::new(crate::providers::cloud_provider(
                def,
            )?)));
        }
        let model = kerf_llama::models::resolve(
            &wb.models,
            self.model.as_deref().map(std::path::Path::new),
        )?;
        let mut config = LocalConfig::new(model);
        config.gpu_layers = self.gpu_layers;
        config.main_gpu = self.main_gpu;
        config.split_mode = self.split_mode;
        config.threads = self.threads;
        config.flash_attention = self.flash_attention;
        config.context = self.context;
        config.chat_template = self.chat_template.clone();
        config.prefer_gbnf = self.gbnf;
        Ok(Chosen::Local(LocalProvider::new(config)))
    }

    /// A request for the rendered prompt under these sampling settings.
    pub fn request(&self, rendered: &Rendered, max_tokens: u32) -> Request {
        let mut r = Request::new(rendered.system.as_deref(), &rendered.user);
        r.max_tokens = max_tokens;
        r.temperature = self.temperature;
        r.top_p = self.top_p;
        r.reasoning_effort = self.reasoning_effort;
        r.thinking_budget = self.thinking_budget;
        r.seed = self.seed;
        r.stop = self.stop.clone();
        r
    }
}

/// Everything that reproduces a run: the model and how it samples, its budget, and whether the
/// reply is held to the schema. `kerf run`'s flags and the window's run panel both fill one in;
/// the history keeps it ([`to_stored`](Self::to_stored)); a rerun, from either front end, starts
/// from [`from_stored`](Self::from_stored) and applies its overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct RunParams {
    pub settings: RunSettings,
    pub max_tokens: u32,
    /// Hold the reply to the prompt's schema where its format and the provider allow it.
    pub constrain: bool,
}

impl RunParams {
    /// The stored form's version (`params_version`; runs recorded before it have none).
    pub const VERSION: u64 = 1;

    /// The request for `rendered` (a rendering of `prompt`) under these parameters.
    pub fn request(&self, prompt: &Prompt, rendered: &Rendered) -> Request {
        let mut r = self.settings.request(rendered, self.max_tokens);
        if self.constrain {
            r.constraint = constraint_for(prompt);
        }
        r
    }

    /// The one check of what a run is asked to do, for every front end and every rerun, before
    /// anything is sent or stored: each budget above 0 and within what one run may spend (a
    /// first request's `max_tokens` above `--max-run-tokens` could spend past it on its own),
    /// and the sampling settings within their ranges (`NaN` once went out as "unset").
    pub fn check(&self, budgets: &[u32]) -> Result<()> {
        let usage = |message: String| {
            Err(crate::error::ApiError::new(
                crate::error::Code::Usage,
                message,
            ))
        };
        let s = &self.settings;
        let ceiling = s.limits.max_run_tokens;
        if budgets.contains(&0) {
            return usage("--max-tokens 0: a budget must be at least 1 token".into());
        }
        if let Some(b) = budgets.iter().find(|&&b| u64::from(b) > ceiling) {
            return usage(format!(
                "--max-tokens {b} is above --max-run-tokens {ceiling}: one request could spend more than the run may; raise --max-run-tokens or lower the budget"
            ));
        }
        if let Some(t) = s.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return usage(format!(
                "--temperature {t}: give a number from 0 to 2 (0 is greedy)"
            ));
        }
        if let Some(p) = s.top_p
            && !(0.0..=1.0).contains(&p)
        {
            return usage(format!("--top-p {p}: give a number from 0 to 1"));
        }
        if s.threads.is_some_and(|t| t < 1) {
            return usage(format!(
                "--threads {}: give 1 or more",
                s.threads.unwrap_or_default()
            ));
        }
        if s.context == Some(0) {
            return usage("--context 0: give a context of 1 token or more".into());
        }
        if s.limits.max_requests == 0 {
            return usage("--max-requests 0: a run needs at least 1 request".into());
        }
        Ok(())
    }

    /// The parameters as the history keeps them: readable keys (the History screen and
    /// `history diff` compare them), every setting included.
    pub fn stored(&self) -> StoredParams {
        let s = &self.settings;
        // f32 settings as typed (0.7, not 0.699999988…).
        let f = |x: f32| x.to_string().parse::<f64>().ok();
        StoredParams {
            params_version: Some(Self::VERSION),
            max_tokens: Some(self.max_tokens),
            constrain: Some(if self.constrain {
                StoredConstrain::Auto
            } else {
                StoredConstrain::None
            }),
            requested_model: s.model.clone(),
            temperature: s.temperature.and_then(f),
            top_p: s.top_p.and_then(f),
            reasoning_effort: s.reasoning_effort,
            thinking_budget: s.thinking_budget,
            seed: s.seed,
            stop: s.stop.clone(),
            structured: s.structured,
            gpu_layers: Some(gpu_layers_name(s.gpu_layers)),
            main_gpu: s.main_gpu.and_then(|g| i32::try_from(g).ok()),
            split_mode: s.split_mode,
            threads: s.threads,
            context: s.context,
            flash_attn: Some(flash_attn_name(s.flash_attention).to_string()),
            chat_template: s.chat_template.clone(),
            gbnf: s.gbnf,
            max_requests: Some(s.limits.max_requests),
            max_run_tokens: Some(s.limits.max_run_tokens),
        }
    }

    /// [`stored`](Self::stored) as the JSON a run's row keeps.
    pub fn to_stored(&self) -> Value {
        serde_json::to_value(self.stored()).unwrap_or(Value::Null)
    }

    /// The parameters of a stored run (`provider` and `model` are the run's columns). Runs
    /// recorded before the stored form was versioned are read through the same keys, with the
    /// CLI's `argv` for the two settings only it kept (`--main-gpu`, `--chat-template`) and
    /// today's defaults for what they did not record. A key that is present but of the wrong
    /// shape is an error naming it, never a silent default.
    pub fn from_stored(params: &Value, provider: &str, model: &str) -> crate::Result<RunParams> {
        use crate::error::{ApiError, Code};
        let bad = |key: &str| {
            ApiError::new(
                Code::StoreCorrupt,
                format!(
                    "the stored run parameter `{key}` is not what Kerf wrote: {}",
                    params[key]
                ),
            )
        };
        // A key: absent or null is `None`; present, it must parse.
        fn get<T: serde::de::DeserializeOwned>(params: &Value, key: &str) -> Option<Option<T>> {
            match params.get(key) {
                None | Some(Value::Null) => Some(None),
                Some(v) => serde_json::from_value(v.clone()).ok().map(Some),
            }
        }
        macro_rules! field {
            ($key:literal) => {
                get(params, $key).ok_or_else(|| bad($key))?
            };
        }
        let argv: Vec<String> = get(params, "argv").flatten().unwrap_or_default();
        let flag = |name: &str| {
            argv.iter()
                .position(|a| a == name)
                .and_then(|i| argv.get(i + 1).cloned())
        };
        let defaults = RunSettings::default();
        let requested_model: Option<String> = match params.get("requested_model") {
            // Before: the model column, which for a local run is the GGUF path that ran.
            None => (provider != "local" || !model.is_empty()).then(|| model.to_string()),
            Some(_) => field!("requested_model"),
        };
        let structured: Option<String> = field!("structured");
        let gpu_layers: Option<String> = field!("gpu_layers");
        let flash: Option<String> = field!("flash_attn");
        let constrain: Option<String> = field!("constrain");
        let settings = RunSettings {
            provider: provider.to_string(),
            model: requested_model,
            structured: structured
                .map(|m| m.parse().map_err(|_| bad("structured")))
                .transpose()?,
            temperature: field!("temperature"),
            top_p: field!("top_p"),
            reasoning_effort: field!("reasoning_effort"),
            thinking_budget: field!("thinking_budget"),
            seed: field!("seed"),
            stop: field!("stop").unwrap_or_default(),
            gpu_layers: gpu_layers
                .map(|g| g.parse().map_err(|_| bad("gpu_layers")))
                .transpose()?
                .unwrap_or(defaults.gpu_layers),
            main_gpu: match field!("main_gpu") {
                // Runs recorded before the split mode was kept stored 0, the default, whether or
                // not it was asked for: read as not asked.
                Some(0i32) if params.get("split_mode").is_none() => None,
                Some(n) => Some(u32::try_from(n).map_err(|_| bad("main_gpu"))?),
                None => flag("--main-gpu")
                    .and_then(|n| n.parse().ok())
                    .or(defaults.main_gpu),
            },
            split_mode: field!("split_mode"),
            threads: field!("threads"),
            flash_attention: match flash.as_deref() {
                None => None,
                Some(f) => parse_flash_attn(f).ok_or_else(|| bad("flash_attn"))?,
            },
            context: field!("context"),
            chat_template: match params.get("chat_template") {
                Some(_) => field!("chat_template"),
                None => flag("--chat-template"),
            },
            gbnf: field!("gbnf").unwrap_or(defaults.gbnf),
            limits: RunLimits {
                max_requests: field!("max_requests").unwrap_or(defaults.limits.max_requests),
                max_run_tokens: field!("max_run_tokens").unwrap_or(defaults.limits.max_run_tokens),
            },
        };
        Ok(RunParams {
            settings,
            max_tokens: field!("max_tokens").unwrap_or(512),
            constrain: match constrain.as_deref() {
                Some("auto") | None => true,
                Some("none") => false,
                Some(_) => return Err(bad("constrain")),
            },
        })
    }
}

/// `on`, `off` or `auto` (llama.cpp decides): how a flash-attention setting is written.
pub fn flash_attn_name(f: Option<bool>) -> &'static str {
    match f {
        Some(true) => "on",
        Some(false) => "off",
        None => "auto",
    }
}

/// A flash-attention setting from its name (`None`: not one of `on`, `off`, `auto`).
pub fn parse_flash_attn(s: &str) -> Option<Option<bool>> {
    match s {
        "on" => Some(Some(true)),
        "off" => Some(Some(false)),
        "auto" => Some(None),
        _ => None,
    }
}

/// `auto`, `none`, `all` or a count: how a GPU-layers setting is written.
pub fn gpu_layers_name(g: GpuLayers) -> String {
    match g {
        GpuLayers::Auto => "auto".into(),
        GpuLayers::None => "none".into(),
        GpuLayers::All => "all".into(),
        GpuLayers::Count(n) => n.to_string(),
    }
}

/// The provider a run goes to: the local engine or a configured cloud/server one (or, in tests,
/// a transcript played back: see `kerf_llm::scripted`).
pub enum Chosen {
    Local(LocalProvider),
    Cloud(Box<CloudProvider>),
    Scripted(Box<kerf_llm::scripted::Scripted>),
}

impl Chosen {
    pub fn as_provider(&self) -> &dyn Provider {
        match self {
            Chosen::Local(p) => p,
            Chosen::Cloud(p) => p.as_ref(),
            Chosen::Scripted(p) => p.as_ref(),
        }
    }

    /// `local`, or the configured provider's name.
    pub fn name(&self) -> String {
        match self {
            Chosen::Local(_) => "local".into(),
            Chosen::Cloud(p) => p.def.name.clone(),
            Chosen::Scripted(p) => p.name().into(),
        }
    }

    /// Where its replies come from, as its runs' details record it: the cache
    /// (`kerf eval --cache`) reuses only replies from the same endpoint.
    pub fn endpoint(&self) -> kerf_store::Endpoint {
        match self {
            Chosen::Cloud(p) => kerf_store::Endpoint {
                protocol: Some(p.def.kind.as_str().to_string()),
                base_url: Some(p.def.base_url.clone()),
                served_model: p.served_model_known(),
            },
            Chosen::Local(_) | Chosen::Scripted(_) => kerf_store::Endpoint::default(),
        }
    }

    /// The GGUF file of a local run (its tokenizer cuts sweeps at the model's token boundaries).
    pub fn gguf(&self) -> Option<PathBuf> {
        match self {
            Chosen::Local(p) => Some(PathBuf::from(p.model())),
            Chosen::Cloud(_) | Chosen::Scripted(_) => None,
        }
    }

    /// Whether this provider can hold `prompt`'s output to its schema: llguidance locally; a
    /// structured-output mode the provider honours in the cloud (none for JSONL anywhere).
    pub fn can_constrain(&self, prompt: &Prompt) -> bool {
        let constraint = constraint_for(prompt);
        match self {
            Chosen::Cloud(p) => p.mode_for(&constraint).0 != Structured::None,
            Chosen::Local(_) => constraint != Constraint::None,
            Chosen::Scripted(p) => p.supports(&constraint),
        }
    }

    /// The price of this provider's model per million tokens, where the price table knows it
    /// (the local engine is free).
    pub fn price(&self) -> Result<Option<kerf_llm::prices::Price>> {
        let per_million = kerf_llm::Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 1_000_000,
            ..Default::default()
        };
        Ok(match self {
            Chosen::Cloud(p) => kerf_llm::prices::Prices::load()?
                .estimate(&p.def.model, &per_million)
                .map(|c| c.price),
            Chosen::Local(_) | Chosen::Scripted(_) => None,
        })
    }

    /// The estimated cost of a finished run from the price table (a local run costs nothing but
    /// electricity).
    pub fn cost(&self, f: &Finish) -> Result<Option<kerf_llm::prices::Cost>> {
        Ok(match self {
            // Usage the provider did not report (or that could not be read): the cost is
            // unknown, not the price of 0 prompt tokens.
            Chosen::Cloud(_) if !f.usage_reported() => None,
            Chosen::Cloud(p) => kerf_llm::prices::Prices::load()?.estimate(&p.def.model, &f.usage),
            Chosen::Local(_) | Chosen::Scripted(_) => None,
        })
    }
}

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
fn run_end<'o>(out: &'o Outcomes, cost: Option<&kerf_llm::prices::Cost>) -> RunEnd<'o> {
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
        job.params.settings.limits,
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
