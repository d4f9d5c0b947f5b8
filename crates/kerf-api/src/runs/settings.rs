//! What a run is asked: which provider and model, how it samples, its limits
//! ([`RunSettings`]), and its budget and constraint on top ([`RunParams`]) — checked, and read
//! back from the history's stored form.

use super::*;

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
