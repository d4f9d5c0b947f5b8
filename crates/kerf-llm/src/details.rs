//! What a provider actually did for a run, in terms the user can check: where a local model ran
//! and how much of it was offloaded, which constraint engine ran and why, how a cloud request
//! went. Kept with the run (as JSON, in this shape) and shown by both front ends.

use serde::{Deserialize, Serialize};

use crate::providers::{Api, Kind, Structured};

/// A run's details: the local engine's, a cloud provider's, or (a provider that reports neither,
/// such as the scripted one in tests) only its name. Serialised without a tag, as its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum RunDetails {
    Local(LocalDetails),
    Cloud(CloudDetails),
    Other { provider: String },
}

/// The local engine's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LocalDetails {
    /// `llama.cpp`.
    pub engine: String,
    /// The GGUF file.
    pub model: String,
    /// The model was already loaded in this process (no load time).
    pub model_reused: bool,
    pub load_seconds: f64,
    /// The context window, in tokens.
    pub context: u32,
    pub threads: i32,
    pub flash_attention: FlashAttention,
    pub offload: Offload,
    /// Seconds from the run's start to its first decode: the chat template, tokenizing, the
    /// context's creation (kept apart, so prompt tok/s is the engine's). Absent in runs recorded
    /// before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub setup_seconds: Option<f64>,
    /// Absent when the run stopped before generating (cancelled during the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub constraint: Option<ConstraintRun>,
}

/// The flash-attention setting a local run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum FlashAttention {
    /// llama.cpp decides.
    Auto,
    On,
    Off,
}

impl From<Option<bool>> for FlashAttention {
    fn from(setting: Option<bool>) -> Self {
        match setting {
            None => FlashAttention::Auto,
            Some(true) => FlashAttention::On,
            Some(false) => FlashAttention::Off,
        }
    }
}

/// Where a local model ran: what llama.cpp says it did, not what was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Offload {
    /// The GPU layers asked for (`auto`, `none`, `all` or a count).
    pub requested: String,
    pub offloaded_layers: u32,
    pub total_layers: u32,
    /// `CPU`, or the name and description of each GPU the model's layers went to.
    pub device: String,
    /// The ggml backend that ran the offloaded layers (`CUDA`, `Vulkan`, …), or the CPU backend
    /// (with the variant for this CPU's instruction set, `CPU (haswell)`, in a build that loads
    /// its backends at run time). Absent in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub backend: Option<String>,
    /// How layers were spread over the GPUs. Absent in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub split_mode: Option<SplitMode>,
    /// Every backend device llama.cpp found.
    pub devices: Vec<Device>,
}

impl Offload {
    /// Where the run's layers ran, in one phrase (`CUDA0 (NVIDIA H100) on CUDA`, `CPU on CPU
    /// (haswell)`): what two runs are compared by, since greedy output differs between devices.
    pub fn ran_on(&self) -> String {
        match &self.backend {
            Some(b) => format!("{} on {b}", self.device),
            None => self.device.clone(),
        }
    }
}

/// How llama.cpp spreads a model over several GPUs (its `split_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum SplitMode {
    /// Layers (and their KV cache) spread over every GPU: llama.cpp's default.
    Layer,
    /// Rows of each tensor spread over every GPU.
    Row,
    /// One GPU, the main one, holds every offloaded layer.
    None,
}

impl SplitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SplitMode::Layer => "layer",
            SplitMode::Row => "row",
            SplitMode::None => "none",
        }
    }
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            "none" => Ok(SplitMode::None),
            other => Err(format!(
                "`{other}` is not a split mode (use `layer`, `row` or `none`)"
            )),
        }
    }
}

/// A backend device llama.cpp can run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Device {
    pub index: usize,
    pub name: String,
    pub description: String,
    pub backend: String,
    /// `cpu`, `gpu`, `igpu`, `accelerator` or `unknown`.
    pub kind: String,
    pub memory_total: usize,
    pub memory_free: usize,
}

/// Which constraint engine held the reply to its schema or grammar, and why that one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConstraintRun {
    /// What was asked: `none`, `json`, `jsonl`, `gbnf` or `lark` (`Constraint::name`).
    pub kind: String,
    pub engine: ConstraintEngine,
    /// Why this engine: asked for, or why llguidance could not take the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub why: Option<String>,
}

/// The engines that constrain a local model's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ConstraintEngine {
    None,
    /// llguidance: JSON Schema and Lark, about 5% slower generation.
    Llguidance,
    /// llama.cpp's GBNF sampler: about 2x slower.
    Gbnf,
}

impl ConstraintEngine {
    pub fn as_str(self) -> &'static str {
        match self {
            ConstraintEngine::None => "none",
            ConstraintEngine::Llguidance => "llguidance",
            ConstraintEngine::Gbnf => "gbnf",
        }
    }
}

/// A cloud provider's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CloudDetails {
    /// The API spoken.
    pub protocol: Kind,
    /// OpenAI: `responses` when the run went to the Responses API (absent: chat completions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub api: Option<Api>,
    pub base_url: String,
    pub structured: StructuredRun,
    /// The provider's configured name.
    pub provider: String,
    pub model: String,
    /// Where the key came from (an environment variable, the keyring), never the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub key_source: Option<String>,
    /// Each retry, with its wait and why.
    #[serde(default)]
    pub retries: Vec<String>,
    /// Whether the reply came as a stream (a server may ignore `stream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub streamed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub first_byte_seconds: Option<f64>,
    /// `provider`, or how the tokens were counted when the provider reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub usage_source: Option<String>,
    /// The key a non-object schema was wrapped in (the reply is unwrapped before parsing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub wrapped_in: Option<String>,
    /// How long the request waited for the provider's rate limit before it was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub rate_limit_wait_seconds: Option<f64>,
    /// Enum or const values whose letter case the reply got wrong and Kerf corrected (the
    /// provider's `fold_enum_case` setting), each as `POINTER: "was" → "now"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "ts", ts(as = "Option<Vec<String>>", optional))]
    pub case_folded: Vec<String>,
    /// What an OpenAI-compatible server said it serves under the model's name (its `GET /models`
    /// entry's stable fields), asked by evals: the cache reuses a reply only from the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub served_model: Option<String>,
}

/// The structured-output mode a cloud run used, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StructuredRun {
    pub mode: Structured,
    pub why: String,
    /// How many changes the provider's schema rewrite made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub changes: Option<usize>,
}

impl RunDetails {
    /// The key a cloud run wrapped a non-object schema in.
    pub fn wrapped_in(&self) -> Option<&str> {
        match self {
            RunDetails::Cloud(c) => c.wrapped_in.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// The details an earlier Kerf kept as loose JSON read back as the same variant, and write
    /// back as the same keys (the history and `--json` keep this shape).
    #[test]
    fn details_recorded_as_json_read_back_typed_and_keep_their_shape() {
        let local = json!({"engine": "llama.cpp", "model": "/m.gguf", "model_reused": false,
            "load_seconds": 0.4, "context": 2048, "threads": 2, "flash_attention": "auto",
            "offload": {"requested": "auto", "offloaded_layers": 0, "total_layers": 30,
                        "device": "CPU", "devices": []},
            "constraint": {"kind": "jsonl", "engine": "llguidance"}});
        let d: RunDetails = serde_json::from_value(local.clone()).unwrap();
        let RunDetails::Local(l) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(
            l.constraint.as_ref().unwrap().engine,
            ConstraintEngine::Llguidance
        );
        assert_eq!(serde_json::to_value(&d).unwrap(), local);

        let cloud = json!({"protocol": "anthropic", "base_url": "http://127.0.0.1:1",
            "structured": {"mode": "tool", "why": "asked for"}, "provider": "claude",
            "model": "m", "retries": [], "streamed": true, "usage_source": "provider",
            "wrapped_in": "items"});
        let d: RunDetails = serde_json::from_value(cloud.clone()).unwrap();
        assert_eq!(d.wrapped_in(), Some("items"));
        assert_eq!(serde_json::to_value(&d).unwrap(), cloud);

        let other: RunDetails = serde_json::from_value(json!({"provider": "scripted"})).unwrap();
        assert_eq!(
            other,
            RunDetails::Other {
                provider: "scripted".into()
            }
        );
    }
}
