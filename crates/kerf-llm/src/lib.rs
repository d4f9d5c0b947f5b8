//! The provider contract every model backend implements — the local llama.cpp engine now, cloud
//! APIs later — so `kerf run`, `kerf compare` and the desktop app drive them all the same way.
//!
//! A [`Request`] (messages, budget, sampling, stop strings, an output [`Constraint`]) goes to
//! [`Provider::run`], an async run that reports [`Event`]s as text arrives and returns the
//! [`Finish`]: why it stopped, token usage and timings. A [`CancelToken`] stops a run between
//! tokens; dropping the future stops it too. Runs are driven on the process's one runtime
//! ([`runtime`]).

pub mod cloud;
pub mod details;
pub mod http;
pub mod prices;
pub mod providers;
pub mod ratelimit;
pub mod runtime;
pub mod scripted;
pub mod secrets;
pub mod sse;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// What the output is held to while it is generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Constraint {
    None,
    /// One JSON value valid against this schema.
    Json(Value),
    /// Any number of lines, each one JSON object valid against this schema (one line each).
    Jsonl(Value),
    /// A llama.cpp GBNF grammar (root rule `root`).
    Gbnf(String),
    /// A Lark grammar in llguidance's dialect.
    Lark(String),
}

impl Constraint {
    pub fn name(&self) -> &'static str {
        match self {
            Constraint::None => "none",
            Constraint::Json(_) => "json",
            Constraint::Jsonl(_) => "jsonl",
            Constraint::Gbnf(_) => "gbnf",
            Constraint::Lark(_) => "lark",
        }
    }
}

/// One run: what to send and how to sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    /// Sampling temperature; `None` sends none (the provider's default; greedy on the local
    /// engine). OpenAI's reasoning models refuse the parameter, and Google advises against 0 on
    /// Gemini 3, so Kerf sends it only when the user set it.
    pub temperature: Option<f32>,
    /// Nucleus sampling; `None` sends none.
    pub top_p: Option<f32>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub constraint: Constraint,
    /// How hard a reasoning model thinks (OpenAI's `reasoning_effort` / `reasoning.effort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The most tokens a thinking model may spend thinking (Gemini's `thinkingBudget`; 0 turns
    /// thinking off where the model allows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
}

/// OpenAI's reasoning effort levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ReasoningEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl std::str::FromStr for ReasoningEffort {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(ReasoningEffort::None),
            "minimal" => Ok(ReasoningEffort::Minimal),
            "low" => Ok(ReasoningEffort::Low),
            "medium" => Ok(ReasoningEffort::Medium),
            "high" => Ok(ReasoningEffort::High),
            other => Err(format!(
                "unknown reasoning effort `{other}` (one of: none, minimal, low, medium, high)"
            )),
        }
    }
}

impl Request {
    /// A request from an optional system text and the user text, with Kerf's defaults: no
    /// sampling parameters (the provider's own; greedy on the local engine, so its reruns are
    /// comparable), 512 tokens, no constraint.
    pub fn new(system: Option<&str>, user: &str) -> Self {
        let mut messages = Vec::new();
        if let Some(s) = system.filter(|s| !s.trim().is_empty()) {
            messages.push(Message::new(Role::System, s));
        }
        messages.push(Message::new(Role::User, user));
        Request {
            messages,
            max_tokens: 512,
            temperature: None,
            top_p: None,
            seed: None,
            stop: Vec::new(),
            constraint: Constraint::None,
            reasoning_effort: None,
            thinking_budget: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finish {
    pub reason: FinishReason,
    pub usage: Usage,
    pub timings: Timings,
    /// For `error`: what went wrong after text had started to arrive.
    pub error: Option<String>,
    /// What the provider actually did (device, layers offloaded, which constraint engine ran and
    /// why; a cloud request's mode, retries and key source): shown to the user, kept with the run.
    pub details: RunDetails,
}

impl Finish {
    /// Whether `usage` is what the provider reported: a cloud reply whose usage was missing or
    /// unreadable has only an estimate of its completion tokens (the run's details say which),
    /// and its prompt tokens and cost are unknown, not 0.
    pub fn usage_reported(&self) -> bool {
        match &self.details {
            RunDetails::Cloud(d) => d.usage_source.as_deref() == Some("provider"),
            RunDetails::Local(_) | RunDetails::Other { .. } => true,
        }
    }
}

/// What a run reports while it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// More reply text (always whole UTF-8 characters).
    Text(&'a str),
    /// A notice worth showing the user (a fallback taken, a setting ignored).
    Warning(&'a str),
}

/// Stops a run between tokens (the core's token: the same one stops a sweep).
pub use kerf_core::cancel::CancelToken;

pub use details::RunDetails;
/// The run vocabulary lives in kerf-core (the history keeps it too); a provider speaks it.
pub use kerf_core::run::{FinishReason, Timings, Usage};

/// Errors a provider reports before or instead of a reply. Each has a stable code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider cannot run in this build or on this machine (says how to get it).
    #[error("{0}")]
    Unavailable(String),
    /// The model file is missing, not a model, damaged, or too large.
    #[error("{path}: {message}")]
    Model { path: String, message: String },
    /// The output constraint cannot be built.
    #[error("constraint: {0}")]
    Constraint(String),
    /// The prompt does not fit the context window.
    #[error(
        "the prompt is {prompt_tokens} tokens but the context holds {context} (with {max_tokens} more for the reply); shorten the input or raise the context size"
    )]
    ContextOverflow {
        prompt_tokens: u32,
        max_tokens: u32,
        context: u32,
    },
    /// A request the provider cannot serve as given.
    #[error("{0}")]
    Request(String),
    /// The engine failed part-way.
    #[error("{0}")]
    Engine(String),
    /// A cloud API answered with an error status (after any retries).
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// The provider refused this many requests in a row (429, 503, 529, retries included):
    /// Kerf stops sending to it rather than retry for hours.
    #[error(
        "{provider} refused the last {refusals} requests in a row (the last: {last}); Kerf stopped sending to it (KERF_MAX_REFUSALS); wait or check the account's limits, then go on"
    )]
    Refused {
        provider: String,
        refusals: u32,
        last: String,
    },
    /// Connecting, or the first byte, or a gap between chunks took too long.
    #[error("timeout: {0}")]
    Timeout(String),
    /// The network failed: refused, unreachable, reset.
    #[error("network: {0}")]
    Network(String),
    /// No API key for a provider that needs one (says where Kerf looked).
    #[error("{0}")]
    Auth(String),
    /// A reply Kerf cannot read (malformed event stream, unexpected JSON); names the place.
    #[error("{0}")]
    Protocol(String),
    /// Provider configuration: unknown name, bad kind, unreadable config file.
    #[error("{0}")]
    Config(String),
    /// The run was cancelled before any reply arrived.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unavailable(_) => "provider_unavailable",
            Error::Model { .. } => "model",
            Error::Constraint(_) => "constraint",
            Error::ContextOverflow { .. } => "context_overflow",
            Error::Request(_) => "request",
            Error::Engine(_) => "engine",
            Error::Http { .. } => "http",
            Error::Refused { .. } => "refused",
            Error::Timeout(_) => "timeout",
            Error::Network(_) => "network",
            Error::Auth(_) => "auth",
            Error::Protocol(_) => "protocol",
            Error::Config(_) => "provider_config",
            Error::Cancelled => "cancelled",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What [`Provider::run`] returns: a future on the caller's task (not `Send`: it calls back into
/// the caller's `on_event`), so many runs in flight are polled together on one task.
pub type RunFuture<'a> = futures_util::future::LocalBoxFuture<'a, Result<Finish>>;

/// A model backend.
pub trait Provider {
    /// A short name for reports (`local`, `openai`, …).
    fn name(&self) -> &str;
    /// The model this provider runs (a path or an id).
    fn model(&self) -> String;
    /// Whether it can hold output to `constraint`.
    fn supports(&self, constraint: &Constraint) -> bool;
    /// Run `request`, calling `on_event` as text arrives; return how it ended. A run cut short by
    /// the budget, a cancellation or a mid-stream failure still returns `Ok` with that reason, so
    /// the text received so far can be parsed. Dropping the future stops the run (a request is
    /// closed; the local engine stops at its next token).
    fn run<'a>(
        &'a self,
        request: &'a Request,
        cancel: &'a CancelToken,
        on_event: &'a mut dyn FnMut(Event<'_>),
    ) -> RunFuture<'a>;

    /// [`run`](Self::run) to its end on the calling thread, for synchronous callers (the CLI's
    /// one-run commands, tests); see [`runtime::block_on`].
    fn run_blocking(
        &self,
        request: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<Finish> {
        runtime::block_on(self.run(request, cancel, on_event))
    }
}
