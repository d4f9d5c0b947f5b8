//! A rerun's changes as a typed patch: each field the person gave replaces one setting of the
//! stored [`RunParams`]; what they did not give stays as it ran. The CLI's `kerf history rerun`
//! flags fill one in field by field (no round trip through `kerf run`'s argv, so a value that
//! begins with `-` — a stop sequence `-->`, a negative seed offset — is a value, not a flag).

use kerf_llama::{GpuLayers, SplitMode};
use kerf_llm::ReasoningEffort;
use kerf_llm::providers::Structured;

use super::RunParams;

/// Settings to change on a stored run; `None` keeps the stored one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub structured: Option<Structured>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub thinking_budget: Option<u32>,
    pub seed: Option<u64>,
    /// Replaces every stored stop sequence (`Some(vec![])` clears them).
    pub stop: Option<Vec<String>>,
    pub gpu_layers: Option<GpuLayers>,
    pub main_gpu: Option<u32>,
    pub split_mode: Option<SplitMode>,
    pub threads: Option<i32>,
    /// `Some(None)`: let llama.cpp decide.
    pub flash_attention: Option<Option<bool>>,
    pub context: Option<u32>,
    pub chat_template: Option<String>,
    pub gbnf: Option<bool>,
    pub max_requests: Option<u32>,
    pub max_run_tokens: Option<u64>,
    pub max_tokens: Option<u32>,
    pub constrain: Option<bool>,
}

impl Overrides {
    /// `params` with every given field replaced. A new provider drops a stored model id and
    /// structured mode (they named the old provider's model and modes) unless given too.
    pub fn apply(self, params: &mut RunParams) {
        let s = &mut params.settings;
        if let Some(p) = self.provider
            && p != s.provider
        {
            s.provider = p;
            s.model = None;
            s.structured = None;
        }
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = self.$field { s.$field = Some(v); } )* };
        }
        set!(
            model,
            structured,
            temperature,
            top_p,
            reasoning_effort,
            thinking_budget,
            seed,
            threads,
            context,
            chat_template
        );
        if let Some(v) = self.stop {
            s.stop = v;
        }
        if let Some(v) = self.gpu_layers {
            s.gpu_layers = v;
        }
        if let Some(v) = self.main_gpu {
            s.main_gpu = Some(v);
        }
        if let Some(v) = self.split_mode {
            s.split_mode = Some(v);
        }
        if let Some(v) = self.flash_attention {
            s.flash_attention = v;
        }
        if let Some(v) = self.gbnf {
            s.gbnf = v;
        }
        if let Some(v) = self.max_requests {
            s.limits.max_requests = v;
        }
        if let Some(v) = self.max_run_tokens {
            s.limits.max_run_tokens = v;
        }
        if let Some(v) = self.max_tokens {
            params.max_tokens = v;
        }
        if let Some(v) = self.constrain {
            params.constrain = v;
        }
    }
}
