//! Cloud and server providers behind the [`Provider`] contract: one streaming driver (transport,
//! SSE, cancellation, interruption, timings) and, per wire protocol, how to build the request
//! and read its events (`openai`, `anthropic`, `gemini`).

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::details::{CloudDetails, RunDetails, StructuredRun};
use crate::http::{self, Chunk, HttpConfig, HttpRequest};
use crate::providers::{Kind, ProviderDef, Structured, schema_hash};
use crate::ratelimit;
use crate::secrets::{self, Key};
use crate::sse::{self, SseError, SseEvent};
use crate::{
    CancelToken, Constraint, Error, Event, Finish, FinishReason, Provider, Request, Result,
    RunFuture, Timings, Usage,
};

mod anthropic;
pub mod batch;
mod gemini;
mod openai;
mod probing;
mod responses;
mod wire;

pub use probing::{probe, rfc3339_now};
pub(crate) use wire::*;

/// Turns a schema into llama.cpp's GBNF (`jsonl`: one object per line): the `grammar` mode's
/// grammar. The converter is llama.cpp's own, so it comes from the engine crate, which the
/// front ends plug in here.
pub type GrammarFn = fn(&Value, bool) -> Result<String>;

/// A configured cloud or server provider with its key resolved.
pub struct CloudProvider {
    pub def: ProviderDef,
    key: Option<Key>,
    pub http: HttpConfig,
    /// What writes the `grammar` mode's grammar (`None`: the mode is refused with a clear error).
    pub grammar: Option<GrammarFn>,
    /// What the server says it serves under this model name, asked once (see
    /// [`CloudProvider::served_model`]).
    served: tokio::sync::OnceCell<Option<String>>,
}

/// Anthropic models with native structured outputs: all but those released before them (the
/// Claude 3 family, and Opus/Sonnet 4.0 and Opus 4.1).
fn anthropic_native_outputs(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let older = [
        "claude-3",
        "claude-2",
        "claude-instant",
        "claude-opus-4-0",
        "claude-sonnet-4-0",
        "claude-opus-4-1",
        "claude-opus-4-2025",
        "claude-sonnet-4-2025",
    ];
    !older.iter().any(|o| m.starts_with(o))
}

impl std::fmt::Debug for CloudProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudProvider")
            .field("def", &self.def)
            .field("key", &self.key)
            .finish()
    }
}

impl CloudProvider {
    /// The provider with its key looked up (keyring, then environment); an `auth` error if it
    /// needs one and none is found.
    pub fn new(def: ProviderDef) -> Result<Self> {
        let key = secrets::key_for(&def)?;
        Ok(Self::with_key(def, key))
    }

    pub fn with_key(def: ProviderDef, key: Option<Key>) -> Self {
        CloudProvider {
            def,
            key,
            http: HttpConfig::default(),
            grammar: None,
            served: tokio::sync::OnceCell::new(),
        }
    }

    /// The model an OpenAI-compatible server (any base URL but OpenAI's own) serves under this
    /// provider's model name: its entry in `GET /models`, stable fields only (`id`, `owned_by`,
    /// `root`, `parent`, `max_model_len`, llama-server's `meta` with the file's size and
    /// parameters — not `created` or vLLM's `permission`, which change with every request), as
    /// compact JSON. A server restarted with another model under the same name and URL answers
    /// differently, so eval replies cached from it are not reused (`kerf eval --cache`). Asked
    /// once per provider; `None` for the cloud services (their model names are versioned) and
    /// for a server without the endpoint.
    pub async fn served_model(&self) -> Option<String> {
        let own_service = self.def.base_url.trim_end_matches('/')
            == self.def.kind.default_base_url().trim_end_matches('/');
        if self.def.kind != crate::providers::Kind::Openai || own_service {
            return None;
        }
        // Cells in flight at once wait for the one answer.
        self.served
            .get_or_init(|| async {
                let headers = headers(self, "authorization", true);
                crate::http::get_json(&self.http, &url(self, "models"), &headers)
                    .await
                    .ok()
                    .and_then(|list| served_entry(&list, &self.def.model))
                    // Kept with every run: a server that echoes the key gets it redacted.
                    .map(|served| self.redact(&served))
            })
            .await
            .clone()
    }

    /// [`CloudProvider::served_model`] when it was asked already.
    pub fn served_model_known(&self) -> Option<String> {
        self.served.get().cloned().flatten()
    }
}

/// The stable fields of the entry for `model` in an OpenAI `GET /models` list (or of its only
/// entry: llama-server answers whatever model a request names with the one it loaded).
fn served_entry(list: &Value, model: &str) -> Option<String> {
    let data = list.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or(match data.as_slice() {
            [only] => Some(only),
            _ => None,
        })?;
    let stable: serde_json::Map<String, Value> =
        ["id", "owned_by", "root", "parent", "max_model_len", "meta"]
            .into_iter()
            .filter_map(|k| Some((k.to_string(), entry.get(k)?.clone())))
            .collect();
    (!stable.is_empty()).then(|| Value::Object(stable).to_string())
}

impl CloudProvider {
    /// Where the key came from, for the run's record (never the key).
    pub fn key_source(&self) -> Option<String> {
        self.key.as_ref().map(|k| k.source.to_string())
    }

    /// The structured-output mode a run with `constraint` uses, and why. A probe run with the
    /// prompt's own schema (`kerf providers probe --prompt`) speaks for runs of that schema;
    /// otherwise the toy probe, otherwise each kind's default.
    pub fn mode_for(&self, constraint: &Constraint) -> (Structured, String) {
        let (schema, jsonl) = match constraint {
            Constraint::Json(s) => (s, false),
            Constraint::Jsonl(s) => (s, true),
            _ => return (Structured::None, "no constraint asked for".into()),
        };
        let kind = self.def.kind;
        let hash = schema_hash(if jsonl { "jsonl" } else { "json" }, schema);
        let probe = self.def.probe_for(Some(&hash));
        let probed = |what: &str| match probe.is_some_and(|p| p.schema.is_some()) {
            true => format!("probed with this prompt's schema: {what}"),
            false => format!("probed: {what}"),
        };
        if jsonl {
            // Only a grammar holds JSONL on a server, and only OpenAI-compatible servers take one.
            return match (self.def.structured, kind) {
                (Structured::Grammar, _) => (Structured::Grammar, "configured".into()),
                (Structured::Auto, Kind::Openai)
                    if probe.is_some_and(|p| p.honours(Structured::Grammar)) =>
                {
                    (
                        Structured::Grammar,
                        probed("the server holds replies to a grammar, line by line"),
                    )
                }
                (_, Kind::Openai) => (
                    Structured::None,
                    "JSONL is held line by line only by a grammar (`--structured grammar`: llama.cpp's server, vLLM); no probe says this server honours one, so the prompt alone asks for one object per line".into(),
                ),
                _ => (
                    Structured::None,
                    "Anthropic and Gemini have no mode that holds JSONL: the prompt alone asks for one object per line".into(),
                ),
            };
        }
        if self.def.structured != Structured::Auto {
            return (self.def.structured, "configured".into());
        }
        let honours = |m| probe.is_some_and(|p| p.honours(m));
        match kind {
            Kind::Openai => match probe {
                Some(_) if honours(Structured::JsonSchema) => (
                    Structured::JsonSchema,
                    probed("the server honours json_schema"),
                ),
                Some(_) if honours(Structured::JsonObjectSchema) => (
                    Structured::JsonObjectSchema,
                    probed(
                        "the server rejects or ignores json_schema but holds json_object to a schema",
                    ),
                ),
                Some(_) if honours(Structured::Grammar) => (
                    Structured::Grammar,
                    probed("the server takes no JSON schema but holds replies to a grammar"),
                ),
                Some(_) if honours(Structured::JsonObject) => (
                    Structured::JsonObject,
                    probed("the server honours only json_object (any object, not the schema)"),
                ),
                Some(_) => (
                    Structured::None,
                    probed("the server honours no structured-output mode"),
                ),
                None => (Structured::JsonSchema, "default (not probed)".into()),
            },
            Kind::Anthropic => match probe {
                Some(_) if honours(Structured::JsonSchema) => (
                    Structured::JsonSchema,
                    probed("native structured outputs honoured"),
                ),
                Some(_) if honours(Structured::Tool) => (
                    Structured::Tool,
                    probed("native structured outputs not honoured; a forced strict tool is"),
                ),
                Some(_) => (
                    Structured::None,
                    probed("neither native outputs nor a forced tool honoured"),
                ),
                None if anthropic_native_outputs(&self.def.model) => (
                    Structured::JsonSchema,
                    "default: native structured outputs (output_config.format)".into(),
                ),
                None => (
                    Structured::Tool,
                    "default: a forced strict tool (this model predates native structured outputs)"
                        .into(),
                ),
            },
            Kind::Gemini => match probe {
                Some(_) if honours(Structured::JsonSchema) => (
                    Structured::JsonSchema,
                    probed("responseJsonSchema honoured"),
                ),
                Some(_) if honours(Structured::ResponseSchema) => (
                    Structured::ResponseSchema,
                    probed("responseJsonSchema not honoured; the older responseSchema is"),
                ),
                Some(_) => (Structured::None, probed("no schema mode honoured")),
                None => (Structured::JsonSchema, "default: responseJsonSchema".into()),
            },
        }
    }

    fn redact(&self, text: &str) -> String {
        secrets::redact(text, self.key.as_ref())
    }

    fn redact_error(&self, e: Error) -> Error {
        let r = |s: String| self.redact(&s);
        match e {
            Error::Http { status, message } => Error::Http {
                status,
                message: r(message),
            },
            Error::Timeout(m) => Error::Timeout(r(m)),
            Error::Network(m) => Error::Network(r(m)),
            Error::Protocol(m) => Error::Protocol(r(m)),
            other => other,
        }
    }
}

/// What a wire protocol contributes: its request, and how to read what comes back.
pub(crate) struct Built {
    pub http: HttpRequest,
    /// What the run did, in this provider's terms (mode, rewrites, wrapper key).
    pub details: CloudDetails,
    /// Notices to show before the reply (lint findings of a schema rewrite).
    pub warnings: Vec<String>,
}

/// A wire protocol: how to build its request, and how to read its streamed events or a whole
/// (non-streamed) reply. Everything else (transport, SSE, timings, the finish) is `drive`'s.
pub(crate) struct Protocol {
    build: fn(&CloudProvider, &Request, Structured, &str) -> Result<Built>,
    read_event: fn(&SseEvent, &mut Reply) -> std::result::Result<(), String>,
    read_whole: fn(&Value, &mut Reply) -> std::result::Result<(), String>,
}

impl Protocol {
    fn of(def: &ProviderDef) -> Protocol {
        match def.kind {
            Kind::Openai if def.responses_api() => Protocol {
                build: responses::build,
                read_event: responses::read_event,
                read_whole: responses::read_whole,
            },
            Kind::Openai => Protocol {
                build: openai::build,
                read_event: openai::read_event,
                read_whole: openai::read_whole,
            },
            Kind::Anthropic => Protocol {
                build: anthropic::build,
                read_event: anthropic::read_event,
                read_whole: anthropic::read_whole,
            },
            Kind::Gemini => Protocol {
                build: gemini::build,
                read_event: gemini::read_event,
                read_whole: gemini::read_whole,
            },
        }
    }
}

/// The state of one streamed reply, filled in by the protocol's event reader.
#[derive(Default)]
pub(crate) struct Reply {
    /// Text that arrived and is not yet handed on (each event's, until `drive` passes it on).
    pub text: String,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// A refusal's text (OpenAI), reported as the reply with reason `refusal`.
    pub refusal: String,
    /// An error the provider reported inside the stream.
    pub error: Option<String>,
    pub done: bool,
    /// Content-bearing events seen (a token count estimate when usage is missing).
    pub deltas: u32,
    /// Why the provider's usage could not be read (a count that is no number, an event after
    /// the reply's end that is not JSON): the usage is then unknown, not 0.
    pub usage_unreadable: Option<String>,
}

/// Drive one streamed run: post, decode SSE (or a whole JSON reply if the server ignored
/// `stream`), hand text to `on_event`, and end with the truthful reason.
async fn drive(
    p: &CloudProvider,
    request: &Request,
    built: Built,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(Event<'_>),
    protocol: &Protocol,
) -> Result<Finish> {
    let start = Instant::now();
    for w in &built.warnings {
        on_event(Event::Warning(w));
    }
    let mut details = built.details;
    details.key_source = p.key_source();
    // The provider's rate limit: what a request counts against it up front is about its
    // prompt (a token per four bytes) plus its whole budget.
    let limiter = ratelimit::for_provider(&p.def.name, &p.def.base_url, p.def.rate_limits);
    let prompt_bytes: usize = request.messages.iter().map(|m| m.content.len()).sum();
    let tokens = u32::try_from(prompt_bytes / 4)
        .unwrap_or(u32::MAX)
        .saturating_add(request.max_tokens);
    // Cancelled before any reply: a finish with nothing received.
    let nothing = |details| {
        Ok(finish(
            FinishReason::Cancelled,
            Reply::default(),
            start,
            None,
            None,
            details,
        ))
    };
    let Some(waited) = limiter.admit(tokens, cancel).await else {
        return nothing(details);
    };
    if waited >= std::time::Duration::from_millis(100) {
        let (limits, source) = limiter.limits();
        on_event(Event::Warning(&format!(
            "waited {:.1} s for {}'s rate limit ({}, {})",
            waited.as_secs_f64(),
            p.def.name,
            describe_limits(&limits),
            match source {
                ratelimit::LimitSource::Learned => "announced by the API",
                _ => "configured",
            }
        )));
        details.rate_limit_wait_seconds = Some(waited.as_secs_f64());
    }
    // A provider that refused the last requests, every run's counted, gets no more.
    if let Some(refusing) = limiter.refusing(&p.def.name) {
        return Err(p.redact_error(refusing));
    }
    let mut retry_notes = Vec::new();
    let sent_at = Instant::now();
    let posted = http::post(&p.http, &built.http, cancel, &mut |r| {
        let note = p.redact(&format!(
            "retry {} in {:.1} s after {}",
            r.attempt,
            r.delay.as_secs_f64(),
            r.why
        ));
        if r.refused {
            limiter.refused(&note);
            limiter.window().overloaded();
        }
        on_event(Event::Warning(&note));
        retry_notes.push(note);
    })
    .await;
    details.retries = retry_notes;
    let mut resp = match posted {
        Ok(r) => r,
        Err(Error::Cancelled) => return nothing(details),
        Err(e) => {
            let refused = match &e {
                Error::Http { status, message } if http::is_refusal(*status) => {
                    Some(format!("HTTP {status}: {message}"))
                }
                e if http::never_reached(e) => Some(e.to_string()),
                _ => None,
            };
            if let Some(why) = refused {
                limiter.refused(&p.redact(&why));
                limiter.window().overloaded();
            } else if let Error::Network(_) = &e {
                limiter.window().overloaded();
            }
            return Err(name_rejected_parameter(p, request, p.redact_error(e)));
        }
    };
    limiter.answered();
    limiter.learn(&resp.headers);
    let head_at = Instant::now();
    let mut reply = Reply::default();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    // A server may echo the key into the reply itself: what is shown and kept is redacted as
    // it streams (a few characters held back until they cannot be a piece of the key).
    let mut redactor = crate::secrets::Redactor::new(p.key.as_ref());
    // Whether any text but blanks came (a budget spent on reasoning leaves none).
    let mut wrote = false;
    // The text each event adds is handed on and let go: the caller keeps the reply (a reply cut
    // at 64 MiB was once held here too).
    let mut emit = |reply: &mut Reply,
                    on_event: &mut dyn FnMut(Event<'_>),
                    first: &mut Option<Instant>,
                    last: &mut Instant| {
        if !reply.text.is_empty() {
            let now = Instant::now();
            first.get_or_insert(now);
            *last = now;
            wrote |= !reply.text.trim().is_empty();
            let released = redactor.push(&reply.text);
            if !released.is_empty() {
                on_event(Event::Text(&released));
            }
            reply.text.clear();
        }
    };
    let mut cut: Option<String> = None;
    if resp.content_type.starts_with("application/json") {
        // The server ignored `stream: true` (some do): one whole reply.
        let body = resp
            .read_to_end(cancel)
            .await
            .map_err(|e| p.redact_error(e))?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| {
            Error::Protocol(format!(
                "{}: the reply is not JSON ({e}): {}",
                p.def.name,
                p.redact(&http::error_message(&body))
            ))
        })?;
        (protocol.read_whole)(&v, &mut reply)
            .map_err(|e| Error::Protocol(format!("{}: {e}", p.def.name)))?;
        emit(&mut reply, on_event, &mut first, &mut last);
        details.streamed = Some(false);
    } else {
        let mut events = std::pin::pin!(sse::events(resp.into_stream(cancel)));
        while let Some(ev) = events.next().await {
            match ev {
                Ok(ev) => {
                    if let Err(e) = (protocol.read_event)(&ev, &mut reply) {
                        // After the reply's end (its finish reason came), an event that cannot
                        // be read is the usage that follows: the reply stands, its usage is
                        // unknown.
                        if reply.finish.is_some() {
                            reply.usage_unreadable =
                                Some(format!("event {} of the stream: {e}", ev.number));
                            continue;
                        }
                        cut = Some(format!("event {} of the stream: {e}", ev.number));
                        break;
                    }
                    emit(&mut reply, on_event, &mut first, &mut last);
                }
                Err(SseError::Malformed(e)) => cut = Some(format!("malformed event stream: {e}")),
                Err(SseError::Body(Chunk::Cancelled)) => {
                    reply.finish = Some(FinishReason::Cancelled)
                }
                // Kerf's own limit, not the server's failure: a finished (truncated)
                // measurement, which a resume must not buy again.
                Err(SseError::Body(limit @ Chunk::TooLarge(_))) => {
                    reply.finish = Some(FinishReason::SizeLimit);
                    on_event(Event::Warning(&limit.to_string()));
                }
                Err(SseError::Body(Chunk::Idle(d))) => {
                    cut = Some(format!(
                        "the stream stalled: no byte for {} s",
                        d.as_secs_f64()
                    ));
                }
                Err(SseError::Body(other)) => cut = Some(format!("the stream broke off: {other}")),
            }
            if reply.done {
                break;
            }
        }
        details.streamed = Some(true);
    }
    // The adaptive window hears the time to the first text, not to the headers: a server (or a
    // router in front of one) answers the headers of a request it has queued for a free slot,
    // and only the first token shows the wait.
    if !matches!(reply.finish, Some(FinishReason::Cancelled)) {
        limiter
            .window()
            .answered(first.unwrap_or_else(Instant::now).duration_since(sent_at));
    }
    if !reply.refusal.is_empty() {
        reply.text.push_str(&reply.refusal);
        emit(&mut reply, on_event, &mut first, &mut last);
        reply.finish = Some(FinishReason::Refusal);
    }
    let rest = redactor.finish();
    if !rest.is_empty() {
        on_event(Event::Text(&rest));
    }
    if let Some(why) = &reply.usage_unreadable {
        on_event(Event::Warning(&p.redact(&format!(
            "the provider's token usage could not be read ({why}): the tokens are counted from the streamed pieces and the cost is unknown"
        ))));
    }
    let (reason, error) = match (&cut, reply.finish, &reply.error) {
        (_, Some(FinishReason::Cancelled), _) => (FinishReason::Cancelled, None),
        (Some(why), _, _) => (FinishReason::Interrupted, Some(p.redact(why))),
        (None, _, Some(e)) => (FinishReason::Error, Some(p.redact(e))),
        (None, Some(r), None) => (r, None),
        (None, None, None) => (
            FinishReason::Interrupted,
            Some("the stream ended without a finish reason".to_string()),
        ),
    };
    details.first_byte_seconds = Some(head_at.duration_since(start).as_secs_f64());
    if let Some(note) = budget_went_to_reasoning(reason, &reply, wrote, request.max_tokens) {
        on_event(Event::Warning(&note));
    }
    Ok(finish(
        reason,
        reply,
        start,
        first.map(|f| (f, last)),
        error,
        details,
    ))
}

/// A reply cut by its budget with nothing in it, from a model that reasoned: the budget went to
/// reasoning (OpenAI counts reasoning tokens against `max_completion_tokens`).
fn budget_went_to_reasoning(
    reason: FinishReason,
    reply: &Reply,
    wrote: bool,
    budget: u32,
) -> Option<String> {
    let reasoning = reply.usage.and_then(|u| u.reasoning_tokens)?;
    (reason == FinishReason::Length && !wrote && reasoning > 0).then(|| {
        format!(
            "the budget went to reasoning: {reasoning} of {budget} tokens were spent reasoning and none reached the reply; raise --max-tokens or lower --reasoning-effort"
        )
    })
}

/// The sampling parameters a request sends only when set, as the wire names them, with the flag
/// that sets each.
const OPTIONAL_PARAMETERS: &[(&str, &str)] = &[
    ("temperature", "--temperature"),
    ("top_p", "--top-p"),
    ("topP", "--top-p"),
    ("seed", "--seed"),
    ("reasoning_effort", "--reasoning-effort"),
    ("reasoning.effort", "--reasoning-effort"),
    ("thinkingBudget", "--thinking-budget"),
];

/// A 400 that names a parameter this request set (OpenAI's reasoning models answer
/// "Unsupported parameter: 'temperature'…"): the error says which one, and how to leave it out.
fn name_rejected_parameter(p: &CloudProvider, request: &Request, e: Error) -> Error {
    let Error::Http { status, message } = e else {
        return e;
    };
    let set = |flag: &str| match flag {
        "--temperature" => request.temperature.is_some(),
        "--top-p" => request.top_p.is_some(),
        "--seed" => request.seed.is_some(),
        "--reasoning-effort" => request.reasoning_effort.is_some(),
        "--thinking-budget" => request.thinking_budget.is_some(),
        _ => false,
    };
    let named = OPTIONAL_PARAMETERS.iter().find(|(wire, flag)| {
        set(flag)
            && (message.contains(&format!("'{wire}'"))
                || message.contains(&format!("`{wire}`"))
                || message.contains(&format!("\"{wire}\""))
                || message.contains(&format!("{wire} ")))
    });
    match named {
        Some((wire, flag)) if status == 400 || status == 422 => Error::Http {
            status,
            message: format!(
                "the model `{}` rejected the parameter `{wire}`: run without {flag} (Kerf sends it only when set) · {message}",
                p.def.model
            ),
        },
        _ if status == 400
            && message.contains("max_tokens")
            && message.contains("max_completion_tokens") =>
        {
            Error::Http {
                status,
                message: format!(
                    "the model `{}` takes its budget as `max_completion_tokens`: set `\"max_completion_tokens\": true` on the provider (kerf providers add … --max-completion-tokens) · {message}",
                    p.def.model
                ),
            }
        }
        _ => Error::Http { status, message },
    }
}

/// `500 requests/min, 30000 tokens/min`.
fn describe_limits(l: &ratelimit::RateLimits) -> String {
    let mut parts = Vec::new();
    if let Some(r) = l.requests_per_minute {
        parts.push(format!("{r} requests/min"));
    }
    if let Some(t) = l.tokens_per_minute {
        parts.push(format!("{t} tokens/min"));
    }
    parts.join(", ")
}

fn finish(
    reason: FinishReason,
    reply: Reply,
    start: Instant,
    span: Option<(Instant, Instant)>,
    error: Option<String>,
    mut details: CloudDetails,
) -> Finish {
    let usage = match (reply.usage, &reply.usage_unreadable) {
        (_, Some(why)) => {
            details.usage_source = Some(format!(
                "unreadable ({why}): completion_tokens counts streamed deltas"
            ));
            Usage {
                prompt_tokens: 0,
                completion_tokens: reply.deltas,
                reasoning_tokens: None,
            }
        }
        (Some(u), None) => {
            details.usage_source = Some("provider".into());
            u
        }
        (None, None) => {
            details.usage_source =
                Some("none reported: completion_tokens counts streamed deltas".into());
            Usage {
                prompt_tokens: 0,
                completion_tokens: reply.deltas,
                reasoning_tokens: None,
            }
        }
    };
    let gen_seconds = span.map_or(0.0, |(f, l)| l.duration_since(f).as_secs_f64());
    Finish {
        reason,
        usage,
        timings: Timings {
            first_token_seconds: span.map(|(f, _)| f.duration_since(start).as_secs_f64()),
            prompt_tokens_per_second: 0.0,
            tokens_per_second: if gen_seconds > 0.0 && usage.completion_tokens > 1 {
                f64::from(usage.completion_tokens - 1) / gen_seconds
            } else {
                0.0
            },
            constraint_seconds: 0.0,
            total_seconds: start.elapsed().as_secs_f64(),
        },
        error,
        details: RunDetails::Cloud(details),
    }
}

impl Provider for CloudProvider {
    fn name(&self) -> &str {
        &self.def.name
    }

    fn model(&self) -> String {
        self.def.model.clone()
    }

    fn supports(&self, constraint: &Constraint) -> bool {
        matches!(
            constraint,
            Constraint::None | Constraint::Json(_) | Constraint::Jsonl(_)
        )
    }

    fn run<'a>(
        &'a self,
        request: &'a Request,
        cancel: &'a CancelToken,
        on_event: &'a mut dyn FnMut(Event<'_>),
    ) -> RunFuture<'a> {
        Box::pin(async move {
            let (built, protocol) = self.built(request)?;
            drive(self, request, built, cancel, on_event, &protocol).await
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use serde_json::json;

    use super::served_entry;

    /// `GET /models` as llama-server and vLLM answer it: what changes with every answer (the
    /// time, vLLM's permission ids) is left out; a list naming several models and not this one
    /// says nothing.
    #[test]
    fn the_served_model_is_the_entrys_stable_fields() {
        let llama = |created: u64| {
            json!({"object": "list", "data": [{"id": "qwen.gguf", "object": "model",
                "created": created, "owned_by": "llamacpp", "meta": {"n_params": 494032768}}]})
        };
        let a = served_entry(&llama(1), "anything").unwrap();
        assert_eq!(a, served_entry(&llama(2), "anything").unwrap());
        assert_eq!(
            a,
            r#"{"id":"qwen.gguf","owned_by":"llamacpp","meta":{"n_params":494032768}}"#
        );
        let vllm = |perm: &str| {
            json!({"data": [
                {"id": "other", "root": "other"},
                {"id": "Qwen/Qwen2.5-7B", "created": 5, "root": "/models/qwen", "max_model_len": 32768,
                 "permission": [{"id": perm}]}]})
        };
        assert_eq!(
            served_entry(&vllm("modelperm-1"), "Qwen/Qwen2.5-7B"),
            served_entry(&vllm("modelperm-2"), "Qwen/Qwen2.5-7B"),
        );
        assert_eq!(served_entry(&vllm("p"), "missing"), None);
        assert_eq!(served_entry(&json!({"error": "no"}), "x"), None);
    }
}
