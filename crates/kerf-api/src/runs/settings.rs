//! What a run is asked: which provider and model, how it samples, its limits
//! ([`RunSettings`]), and its budget and constraint on top ([`RunParams`]) — checked, and read
//! back from the history's stored form.

use super::*;

pub use super::declared::RunSettings;

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
    /// The declared defaults of `max_requests` and `max_run_tokens` (10 and 100,000).
    fn default() -> Self {
        RunSettings::default().limits()
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

impl RunSettings {
    /// What one run may spend at most.
    pub fn limits(&self) -> RunLimits {
        RunLimits {
            max_requests: self.max_requests,
            max_run_tokens: self.max_run_tokens,
        }
    }

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
        config.flash_attention = self.flash_attn.enabled();
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
        let ceiling = s.max_run_tokens;
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
        if s.max_requests == 0 {
            return usage("--max-requests 0: a run needs at least 1 request".into());
        }
        Ok(())
    }

    /// The parameters as the history keeps them: readable keys (the History screen and
    /// `history diff` compare them), every setting included.
    pub fn stored(&self) -> StoredParams {
        StoredParams::of(&self.settings, self.max_tokens, self.constrain)
    }

    /// [`stored`](Self::stored) as the JSON a run's row keeps.
    pub fn to_stored(&self) -> Value {
        super::declared::typed_json(&self.stored()).unwrap_or(Value::Null)
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
        let argv: Vec<String> = params
            .get("argv")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let flag = |name: &str| {
            argv.iter()
                .position(|a| a == name)
                .and_then(|i| argv.get(i + 1).cloned())
        };
        let given = |key: &str| params.get(key).is_some_and(|v| !v.is_null());
        let mut settings = RunSettings {
            provider: provider.to_string(),
            model: match params.get("requested_model") {
                // Before: the model column, which for a local run is the GGUF path that ran.
                None => (provider != "local" || !model.is_empty()).then(|| model.to_string()),
                Some(Value::Null) => None,
                Some(Value::String(m)) => Some(m.clone()),
                Some(_) => return Err(bad("requested_model")),
            },
            ..RunSettings::default()
        };
        SettingsPatch::from_stored(params)
            .map_err(bad)?
            .apply(&mut settings);
        if !given("main_gpu") {
            // Runs recorded before the stored form kept it: the CLI's argv.
            settings.main_gpu = flag("--main-gpu").and_then(|n| n.parse().ok());
        } else if settings.main_gpu == Some(0) && params.get("split_mode").is_none() {
            // Runs recorded before the split mode was kept stored 0, the default, whether or
            // not it was asked for: read as not asked.
            settings.main_gpu = None;
        }
        if params.get("chat_template").is_none() {
            settings.chat_template = flag("--chat-template");
        }
        let constrain = match params.get("constrain") {
            None | Some(Value::Null) => true,
            Some(c) if c == "auto" => true,
            Some(c) if c == "none" => false,
            Some(_) => return Err(bad("constrain")),
        };
        let max_tokens = match params.get("max_tokens") {
            None | Some(Value::Null) => 512,
            Some(m) => m
                .as_u64()
                .and_then(|m| u32::try_from(m).ok())
                .ok_or_else(|| bad("max_tokens"))?,
        };
        Ok(RunParams {
            settings,
            max_tokens,
            constrain,
        })
    }
}
