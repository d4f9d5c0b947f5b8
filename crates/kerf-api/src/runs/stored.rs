//! A run's parameters in the form the history keeps them ([`StoredParams`]): readable keys, every
//! setting included, so the History screen and `kerf history diff` compare them key by key and an
//! experiment's spec carries the settings its cells share.

use kerf_llm::ReasoningEffort;
use kerf_llm::details::SplitMode;
use kerf_llm::providers::Structured;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The stored form of a run's parameters (`RunParams`, version `params_version`). Written whole
/// by `RunParams::stored`; read back through `RunParams::from_stored`, which also knows the
/// forms recorded before this one (every key here is optional on the way in: a spec stored
/// before a setting existed reads as that setting's default).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, TS)]
pub struct StoredParams {
    pub params_version: Option<u64>,
    pub max_tokens: Option<u32>,
    /// `auto` (held to the schema where the format and provider allow) or `none`.
    pub constrain: Option<StoredConstrain>,
    /// The model asked for (a GGUF path, or a cloud model id instead of the provider's own).
    pub requested_model: Option<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub thinking_budget: Option<u32>,
    pub seed: Option<u64>,
    #[serde(default)]
    pub stop: Vec<String>,
    pub structured: Option<Structured>,
    /// `auto`, `none`, `all` or a count of layers.
    pub gpu_layers: Option<String>,
    pub main_gpu: Option<i32>,
    /// `layer`, `row` or `none`; absent when not asked for (and in runs recorded before it).
    pub split_mode: Option<SplitMode>,
    pub threads: Option<i32>,
    pub context: Option<u32>,
    /// `on`, `off` or `auto`.
    pub flash_attn: Option<String>,
    pub chat_template: Option<String>,
    #[serde(default)]
    pub gbnf: bool,
    pub max_requests: Option<u32>,
    pub max_run_tokens: Option<u64>,
}

/// Whether a stored run was held to its prompt's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum StoredConstrain {
    Auto,
    None,
}
