//! The vocabulary of a run's end, shared by every crate that runs, records or shows one: why it
//! ended, the tokens it used and where the time went. Pure data (the providers in kerf-llm
//! produce it, kerf-store keeps it, kerf-api and the window show it).

use serde::{Deserialize, Serialize};

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum FinishReason {
    /// The model ended its reply (end-of-generation token, a stop string, or the grammar closed).
    Stop,
    /// The token budget ran out: the reply is truncated.
    Length,
    Cancelled,
    /// The provider withheld or cut the reply for its content policy.
    ContentFilter,
    /// The model declined (OpenAI's `refusal`); the refusal text is the reply.
    Refusal,
    /// The stream broke off part-way (network, idle timeout, server): the text received is kept.
    Interrupted,
    Error,
    /// Kerf's own limit on a reply's size (`KERF_MAX_REPLY_MIB`) cut it: like a token budget, a
    /// finished measurement of a truncated reply (asking again would buy the same bytes), not a
    /// broken stream.
    SizeLimit,
}

impl FinishReason {
    /// The reply stopped before the model ended it: its budget ran out, or the stream was cut
    /// (cancelled, broken off, or withheld part-way). Its text is truncated whatever a parser
    /// made of it.
    pub fn cut_short(self) -> bool {
        matches!(
            self,
            FinishReason::Length
                | FinishReason::Cancelled
                | FinishReason::Interrupted
                | FinishReason::ContentFilter
                | FinishReason::SizeLimit
        )
    }

    pub const ALL: [FinishReason; 8] = [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Cancelled,
        FinishReason::ContentFilter,
        FinishReason::Refusal,
        FinishReason::Interrupted,
        FinishReason::Error,
        FinishReason::SizeLimit,
    ];

    /// A reason as it is written (`stop`, `content_filter`, …); `None` for any other text.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Refusal => "refusal",
            FinishReason::Interrupted => "interrupted",
            FinishReason::Error => "error",
            FinishReason::SizeLimit => "size_limit",
        }
    }
}

/// The tokens a run used, as the provider counted them (or the local engine did).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    /// Every generated token, reasoning included (what the provider bills as output).
    pub completion_tokens: u32,
    /// Of `completion_tokens`, those spent on hidden reasoning (reasoning models only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

/// Where the time went, in seconds.
///
/// Every field defaults when absent, so a run recorded by an earlier Kerf reads back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// From the start of the run (prompt processing included) to the first generated token.
    pub first_token_seconds: Option<f64>,
    /// Prompt tokens processed per second.
    pub prompt_tokens_per_second: f64,
    /// Generated tokens per second, from the first generated token to the last.
    pub tokens_per_second: f64,
    /// Time spent computing and applying the constraint's token masks.
    pub constraint_seconds: f64,
    pub total_seconds: f64,
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which batch interface an experiment's requests went through (kept with each batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum BatchApi {
    /// OpenAI's Batch API (`/v1/files` + `/v1/batches`), or a server that offers it.
    Openai,
    /// Anthropic's Message Batches.
    Anthropic,
    /// Gemini's batch mode (`batchGenerateContent`).
    Gemini,
    /// A file for `vllm run-batch`, written here and folded back from its output file.
    File,
}

impl BatchApi {
    pub const ALL: [BatchApi; 4] = [
        BatchApi::Openai,
        BatchApi::Anthropic,
        BatchApi::Gemini,
        BatchApi::File,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchApi::Openai => "openai",
            BatchApi::Anthropic => "anthropic",
            BatchApi::Gemini => "gemini",
            BatchApi::File => "file",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// Where a batch stands, as Kerf follows it (the provider's own word is
/// [`Batch::remote_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "BatchState"))]
pub enum BatchState {
    /// Stored; the provider has not (as far as this history knows) accepted it yet.
    Unsent,
    /// The provider holds it (validating, in progress, finalizing); a file waits for its output.
    Running,
    /// The provider is done with it (completed, expired or cancelled): its results can be read.
    Ended,
    /// The provider refused it whole (a validation failure): no request in it was answered.
    Failed,
    /// Its results are folded into its runs.
    Folded,
}

impl BatchState {
    pub const ALL: [BatchState; 5] = [
        BatchState::Unsent,
        BatchState::Running,
        BatchState::Ended,
        BatchState::Failed,
        BatchState::Folded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Unsent => "unsent",
            BatchState::Running => "running",
            BatchState::Ended => "ended",
            BatchState::Failed => "failed",
            BatchState::Folded => "folded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// A batch's request counts as its provider last reported them (Anthropic holds every request
/// at `processing` until the whole batch has ended).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "BatchCounts"))]
pub struct BatchCounts {
    pub total: u64,
    pub processing: u64,
    pub succeeded: u64,
    pub errored: u64,
    pub expired: u64,
    pub canceled: u64,
}
