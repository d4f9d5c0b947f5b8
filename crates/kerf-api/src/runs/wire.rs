//! What the window sends to start a run and receives while it streams and when it ends.

use kerf_llama::GpuLayers;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use super::{Chosen, RunEvent, RunLimits, RunParams, RunResult, RunSettings, SettingsPatch};
use crate::error::{ApiError, Code, Result};
use crate::prompts::wire::PromptDraft;

/// The run panel's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunOptions {
    /// `local`, or a configured provider's name.
    pub provider: String,
    /// Local: a GGUF path (`None`: the bundled model). Cloud: a model id.
    pub model: Option<String>,
    pub max_tokens: u32,
    /// Hold the reply to the prompt's schema where the format allows it.
    pub constrain: bool,
    /// `None`: not sent (the provider's default; greedy on the local model).
    pub temperature: Option<f32>,
    #[ts(type = "number | null")]
    pub seed: Option<u64>,
    /// `auto`, `none`, `all` or a count.
    pub gpu_layers: String,
    /// The most requests one run may make, repairs included.
    pub max_requests: u32,
    /// The most tokens one run may spend, every request's prompt and reply together.
    #[ts(type = "number")]
    pub max_run_tokens: u64,
}

/// The budget of a run that names none (`kerf run`'s `--max-tokens` default and the run
/// panel's first value).
pub const DEFAULT_MAX_TOKENS: u32 = 512;

impl Default for RunOptions {
    /// What the run panel starts with: the bundled model, greedy, held to the schema, within
    /// the same per-run ceilings as the CLI's defaults.
    fn default() -> Self {
        let limits = RunLimits::default();
        RunOptions {
            provider: "local".into(),
            model: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            constrain: true,
            temperature: None,
            seed: None,
            gpu_layers: "auto".into(),
            max_requests: limits.max_requests,
            max_run_tokens: limits.max_run_tokens,
        }
    }
}

impl RunOptions {
    /// The run panel's settings as the run use case takes them.
    pub fn settings(&self) -> Result<RunSettings> {
        let gpu_layers: GpuLayers = self.gpu_layers.parse().map_err(|e: String| {
            ApiError::new(
                Code::Usage,
                format!("GPU layers `{}`: {e}", self.gpu_layers),
            )
        })?;
        let mut settings = RunSettings {
            provider: self.provider.clone(),
            model: self.model.clone().filter(|m| !m.is_empty()),
            ..RunSettings::default()
        };
        SettingsPatch {
            temperature: self.temperature,
            seed: self.seed,
            gpu_layers: Some(gpu_layers),
            max_requests: Some(self.max_requests),
            max_run_tokens: Some(self.max_run_tokens),
            ..SettingsPatch::default()
        }
        .apply(&mut settings);
        Ok(settings)
    }

    /// The run panel's settings as a run's parameters.
    pub fn params(&self) -> Result<RunParams> {
        Ok(RunParams {
            settings: self.settings()?,
            max_tokens: self.max_tokens,
            constrain: self.constrain,
        })
    }
}

/// What a run is given: the prompt (a draft, so unsaved edits run as they are), where it lives,
/// the input document and extra variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    pub draft: PromptDraft,
    /// The prompt file's path (`None`: a prompt never saved).
    pub path: Option<String>,
    /// The input document (bound to the prompt's input variable).
    pub input: String,
    #[ts(type = "Record<string, unknown>")]
    pub vars: Map<String, Value>,
}

/// What a streaming run sends the window (over a Tauri channel), one message per event.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum RunMessage {
    /// More reply text.
    Text { text: String },
    /// A notice worth showing.
    Warning { message: String },
    /// A reply failed and goes back with its problems.
    Repair {
        attempt: u32,
        max: u32,
        problems: String,
    },
    /// Objects accepted and pieces dropped since the last message, as lines complete (a reply
    /// parsed as a whole, such as a JSON array, reports them when it ends).
    Objects {
        #[ts(type = "unknown[]")]
        objects: Vec<Value>,
        dropped: Vec<Drop>,
    },
}

impl From<RunEvent<'_>> for RunMessage {
    fn from(e: RunEvent<'_>) -> Self {
        match e {
            RunEvent::Text(t) => RunMessage::Text { text: t.into() },
            RunEvent::Warning(w) => RunMessage::Warning { message: w.into() },
            RunEvent::Repair {
                attempt,
                max,
                problems,
            } => RunMessage::Repair {
                attempt: attempt as u32,
                max: max as u32,
                problems,
            },
        }
    }
}

/// A dropped piece of a reply.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Drop {
    pub line: u32,
    pub kind: kerf_core::DropKind,
    pub detail: String,
}

impl From<&kerf_core::Dropped> for Drop {
    fn from(d: &kerf_core::Dropped) -> Self {
        Drop {
            line: d.line as u32,
            kind: d.kind,
            detail: d.detail.clone(),
        }
    }
}

/// A finished run as the Run screen shows it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunDone {
    pub history_id: Option<i64>,
    pub provider: String,
    pub model: String,
    #[ts(type = "unknown[]")]
    pub objects: Vec<Value>,
    pub dropped: Vec<Drop>,
    pub truncated: bool,
    pub finish_reason: kerf_llm::FinishReason,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Of `completion_tokens`, those a reasoning model spent thinking (when it says).
    pub reasoning_tokens: Option<u32>,
    pub seconds: f64,
    pub tokens_per_second: f64,
    pub first_token_seconds: Option<f64>,
    pub cost_usd: Option<f64>,
    /// What ran where: the local engine's device and offloaded layers, the constraint engine,
    /// a cloud provider's structured-output mode.
    pub details: kerf_llm::RunDetails,
    pub error: Option<String>,
    pub raw: String,
}

impl RunDone {
    /// A finished run on `provider`, as the window shows it.
    pub fn of(result: &RunResult, provider: &Chosen) -> Self {
        let (out, f) = (&result.out, &result.out.finish);
        RunDone {
            history_id: result.history_id,
            provider: provider.name(),
            model: provider.as_provider().model(),
            objects: out.report.objects.to_vec(),
            dropped: out.report.dropped.iter().map(Drop::from).collect(),
            truncated: out.report.truncated,
            finish_reason: f.reason,
            prompt_tokens: f.usage.prompt_tokens,
            completion_tokens: f.usage.completion_tokens,
            reasoning_tokens: f.usage.reasoning_tokens,
            seconds: f.timings.total_seconds,
            tokens_per_second: f.timings.tokens_per_second,
            first_token_seconds: f.timings.first_token_seconds,
            cost_usd: result.cost.as_ref().map(|c| c.usd),
            details: f.details.clone(),
            error: f.error.clone(),
            raw: out.raw.clone(),
        }
    }
}
