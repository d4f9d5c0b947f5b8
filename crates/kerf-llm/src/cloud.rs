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
mod gemini;
mod openai;
mod responses;

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
    let posted = http::post(&p.http, &built.http, cancel, &mut |r| {
        let note = p.redact(&format!(
            "retry {} in {:.1} s after {}",
            r.attempt,
            r.delay.as_secs_f64(),
            r.why
        ));
        if r.refused {
            limiter.refused(&note);
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
            if let Error::Http { status, message } = &e
                && http::is_refusal(*status)
            {
                limiter.refused(&p.redact(&format!("HTTP {status}: {message}")));
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
            if !self.supports(&request.constraint) {
                return Err(Error::Constraint(format!(
                    "{} (a {} provider) cannot hold output to a {} grammar; grammars run on the local engine",
                    self.def.name,
                    self.def.kind.as_str(),
                    request.constraint.name()
                )));
            }
            let (mode, why) = self.mode_for(&request.constraint);
            let protocol = Protocol::of(&self.def);
            let built = (protocol.build)(self, request, mode, &why)?;
            drive(self, request, built, cancel, on_event, &protocol).await
        })
    }
}

/// Headers every protocol sends, plus the key under the protocol's own header.
pub(crate) fn headers(p: &CloudProvider, key_header: &str, bearer: bool) -> Vec<(String, String)> {
    let mut h = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
    ];
    if let Some(k) = &p.key {
        let v = if bearer {
            format!("Bearer {}", k.expose())
        } else {
            k.expose().to_string()
        };
        h.push((key_header.to_string(), v));
    }
    h
}

pub(crate) fn url(p: &CloudProvider, path: &str) -> String {
    format!("{}/{}", p.def.base_url.trim_end_matches('/'), path)
}

/// The system text (all system messages, joined) and the other turns, for protocols that take
/// the system prompt apart from the conversation (Anthropic, Gemini).
pub(crate) fn split_system(req: &Request) -> (Option<String>, Vec<&crate::Message>) {
    let (system, turns): (Vec<&crate::Message>, Vec<&crate::Message>) = req
        .messages
        .iter()
        .partition(|m| m.role == crate::Role::System);
    let system = (!system.is_empty()).then(|| {
        system
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    (system, turns)
}

/// A schema rewrite applied to a run: its findings become the run's warnings (tagged by what
/// each means at `target`), its change count and wrapper key go into the details, and the
/// rewritten schema is returned to send.
pub(crate) fn apply_rewrite(
    rewrite: kerf_core::lint::Rewrite,
    target: &str,
    details: &mut CloudDetails,
    warnings: &mut Vec<String>,
) -> Value {
    use kerf_core::lint::Severity;
    for f in &rewrite.findings {
        let tag = match f.severity {
            Severity::Note => continue,
            Severity::Ignored => format!("not enforced by {target}"),
            Severity::Rewrite => format!("rewritten for {target}"),
            Severity::Error => format!("{target} may reject"),
        };
        warnings.push(format!(
            "{tag}: {} `{}`: {}",
            f.pointer, f.keyword, f.message
        ));
    }
    if let Some(key) = rewrite.wrapped_in {
        details.wrapped_in = Some(key.to_string());
    }
    details.structured.changes = Some(rewrite.findings.len());
    rewrite.schema
}

/// The system text apart, and the other turns as `{role, content}` with Anthropic's and the
/// Responses API's two roles (`user`, `assistant`).
pub(crate) fn system_and_turns(req: &Request) -> (Option<String>, Vec<Value>) {
    let (system, turns) = split_system(req);
    let turns = turns
        .iter()
        .map(|m| {
            json!({"role": if m.role == crate::Role::Assistant { "assistant" } else { "user" }, "content": m.content})
        })
        .collect();
    (system, turns)
}

/// The sampling parameters the user set, under this protocol's names for temperature and top-p
/// (none is sent unset: OpenAI's reasoning models refuse them, Gemini 3 is advised against 0).
pub(crate) fn set_sampling(into: &mut Value, req: &Request, temperature: &str, top_p: &str) {
    if let Some(t) = req.temperature {
        into[temperature] = json!(t);
    }
    if let Some(t) = req.top_p {
        into[top_p] = json!(t);
    }
}

/// A finished request: the JSON body serialised, posted to `url` with `headers`.
pub(crate) fn built(
    url: String,
    headers: Vec<(String, String)>,
    body: &Value,
    details: CloudDetails,
    warnings: Vec<String>,
) -> Result<Built> {
    let body = serde_json::to_vec(body).map_err(|e| Error::Request(e.to_string()))?;
    Ok(Built {
        http: HttpRequest {
            url,
            headers,
            body: body.into(),
        },
        details,
        warnings,
    })
}

/// The run's details every protocol starts from: which protocol, where, and the structured-output
/// mode with the reason it was chosen.
pub(crate) fn base_details(p: &CloudProvider, mode: Structured, why: &str) -> CloudDetails {
    CloudDetails {
        protocol: p.def.kind,
        api: None,
        base_url: p.def.base_url.clone(),
        structured: StructuredRun {
            mode,
            why: why.to_string(),
            changes: None,
        },
        provider: p.def.name.clone(),
        model: p.def.model.clone(),
        key_source: None,
        retries: Vec::new(),
        streamed: None,
        first_byte_seconds: None,
        usage_source: None,
        wrapped_in: None,
        rate_limit_wait_seconds: None,
        case_folded: Vec::new(),
        served_model: p.served_model_known(),
    }
}

/// A token count from a usage object: a whole number, also written `10.0` or `"10"` (servers
/// differ). A count past `u32::MAX` (a broken or hostile server) is held at `u32::MAX` rather
/// than wrapped or overflowing into a panic. `None` when absent or unreadable
/// ([`unreadable_counts`] tells which).
pub(crate) fn token_count(usage: &Value, key: &str) -> Option<u32> {
    count_of(usage.pointer(key).or_else(|| usage.get(key))?).ok()
}

fn count_of(v: &Value) -> std::result::Result<u32, ()> {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(n), _) => Ok(clamp(n)),
            (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f.is_finite() => {
                Ok(if f >= f64::from(u32::MAX) {
                    u32::MAX
                } else {
                    f as u32
                })
            }
            _ => Err(()),
        },
        Value::String(s) => s.trim().parse::<u64>().map(clamp).map_err(|_| ()),
        _ => Err(()),
    }
}

/// Of `keys`, those present in `usage` whose value is no token count (`-5`, `1.5`, `"ten"`,
/// an object): the usage cannot be trusted, and is kept as unknown rather than as 0.
pub(crate) fn unreadable_counts(usage: &Value, keys: &[&str]) -> Option<String> {
    let bad: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            let v = usage.pointer(k).or_else(|| usage.get(*k))?;
            count_of(v).is_err().then(|| {
                let shown: String = v.to_string().chars().take(40).collect();
                format!("{} = {shown}", k.trim_start_matches('/'))
            })
        })
        .collect();
    (!bad.is_empty()).then(|| bad.join(", "))
}

/// An event's `data` as JSON, or what it was instead.
pub(crate) fn event_json(data: &str) -> std::result::Result<Value, String> {
    serde_json::from_str(data).map_err(|e| {
        let shown: String = data.chars().take(80).collect();
        format!("data is not JSON ({e}): `{shown}`")
    })
}

/// The modes a probe tries for a kind, asking for `jsonl` or JSON.
fn probe_modes(kind: Kind, jsonl: bool) -> &'static [Structured] {
    match (kind, jsonl) {
        (Kind::Openai, true) => &[Structured::None, Structured::Grammar],
        (_, true) => &[Structured::None],
        (Kind::Openai, false) => &[
            Structured::None,
            Structured::JsonObject,
            Structured::JsonObjectSchema,
            Structured::JsonSchema,
            Structured::Grammar,
        ],
        (Kind::Anthropic, false) => &[Structured::None, Structured::Tool, Structured::JsonSchema],
        (Kind::Gemini, false) => &[
            Structured::None,
            Structured::JsonSchema,
            Structured::ResponseSchema,
        ],
    }
}

/// What `kerf providers probe` sends: a small request per structured-output mode, to find out
/// which ones the server really honours (some reject a mode, some accept it and ignore it).
///
/// Without `target`, a one-field toy schema. With a prompt's constraint (`--prompt`), that
/// prompt's own schema, rewritten for each mode as a run would send it: "honoured" then means
/// the reply was valid against the original schema (for JSONL, every whole line), so `auto`
/// can trust it for runs of that prompt. The verdict carries the schema's hash.
pub async fn probe(
    p: &CloudProvider,
    target: Option<&Constraint>,
    cancel: &CancelToken,
) -> crate::providers::Probe {
    let toy = json!({
        "type": "object",
        "properties": {"probe": {"type": "string", "enum": ["kerf"]}},
        "required": ["probe"],
        "additionalProperties": false
    });
    let (constraint, jsonl) = match target {
        Some(c @ Constraint::Jsonl(_)) => (c.clone(), true),
        Some(c @ Constraint::Json(_)) => (c.clone(), false),
        _ => (Constraint::Json(toy.clone()), false),
    };
    let own_schema = match (&constraint, target.is_some()) {
        (Constraint::Json(s) | Constraint::Jsonl(s), true) => Some(s.clone()),
        _ => None,
    };
    let validator = own_schema
        .as_ref()
        .and_then(|s| kerf_core::schema::CompiledSchema::compile(s, "the prompt's schema").ok());
    let mut results = Vec::new();
    for &mode in probe_modes(p.def.kind, jsonl) {
        let mut def = p.def.clone();
        def.structured = mode;
        let probe_provider = CloudProvider {
            def,
            key: p.key.clone(),
            // One attempt per mode: some servers answer a mode they refuse with a 500.
            http: HttpConfig {
                max_retries: 0,
                ..p.http.clone()
            },
            grammar: p.grammar,
            served: tokio::sync::OnceCell::new(),
        };
        let user = match (&own_schema, jsonl) {
            (None, _) => "Reply with exactly one word: hello",
            (Some(_), false) => {
                "Reply with one short example of data in the required JSON shape, nothing else."
            }
            (Some(_), true) => {
                "Reply with two short example records, one JSON object per line, nothing else."
            }
        };
        let mut req = Request::new(Some("You are a terse assistant."), user);
        req.max_tokens = if own_schema.is_some() { 512 } else { 48 };
        // A self-hosted server samples at its own default (llama-server: 0.8), so the same probe
        // could pass once and fail the next time on a long string; greedy decoding makes the
        // verdict repeatable. OpenAI's own reasoning models refuse `temperature`, and the
        // hosted APIs' defaults are not what decides a mode: only servers get it.
        if p.def.kind == crate::providers::Kind::Openai && !p.def.is_openai_itself() {
            req.temperature = Some(0.0);
        }
        if mode != Structured::None {
            req.constraint = constraint.clone();
        }
        // A connection dropped under the request (a server closing a kept-alive connection as
        // it is reused, a fresh-clone test run saw it once) says nothing about the mode: it is
        // asked once more before it is judged. A probe is a few hundred tokens, and the verdict
        // decides what `auto` sends from then on.
        let mut text = String::new();
        let mut again = false;
        let outcome = loop {
            text.clear();
            let outcome = probe_provider
                .run(&req, cancel, &mut |e| {
                    if let Event::Text(t) = e {
                        text.push_str(t);
                    }
                })
                .await;
            if !again && matches!(outcome, Err(Error::Network(_))) && !cancel.is_cancelled() {
                again = true;
                continue;
            }
            break outcome;
        };
        let (result, detail) = match outcome {
            // A 4xx refuses the request; some servers (llama-cpp-python) answer a validation
            // failure with a 500 whose message names the field.
            Err(Error::Http { status, message })
                if (400..500).contains(&status)
                    || message.contains("response_format")
                    || message.contains(mode.as_str()) =>
            {
                ("rejected", format!("HTTP {status}: {message}"))
            }
            Err(e) => ("failed", e.to_string()),
            Ok(f) if f.reason == FinishReason::Error || f.reason == FinishReason::Interrupted => (
                "failed",
                f.error.unwrap_or_else(|| f.reason.as_str().into()),
            ),
            Ok(f) => {
                let shown: String = text.chars().take(60).collect();
                let wrapped = match &f.details {
                    RunDetails::Cloud(c) => c.wrapped_in.clone(),
                    _ => None,
                };
                let obeyed = match (mode, &validator) {
                    (Structured::None, _) => !text.trim().is_empty(),
                    // Asked for a word, a reply that opens an object was forced to (a budget
                    // may cut the object before it closes).
                    (Structured::JsonObject, None) => text.trim_start().starts_with('{'),
                    (_, None) => {
                        serde_json::from_str::<Value>(text.trim()).ok()
                            == Some(json!({"probe": "kerf"}))
                    }
                    (_, Some(v)) => obeys(
                        v,
                        &text,
                        jsonl,
                        wrapped.as_deref(),
                        f.reason == FinishReason::Length,
                    ),
                };
                (
                    if obeyed { "honoured" } else { "ignored" },
                    format!("{} · reply {shown:?}", f.reason.as_str()),
                )
            }
        };
        let detail = if again {
            format!("asked again after a dropped connection · {detail}")
        } else {
            detail
        };
        // One line, short: servers' error messages can carry whole tracebacks.
        let mut detail = detail.split_whitespace().collect::<Vec<_>>().join(" ");
        if detail.chars().count() > 200 {
            detail = format!("{}…", detail.chars().take(200).collect::<String>());
        }
        results.push(crate::providers::ModeProbe {
            mode,
            result: result.into(),
            detail: p.redact(&detail),
        });
    }
    crate::providers::Probe {
        at: rfc3339_now(),
        model: p.def.model.clone(),
        schema: own_schema.map(|s| schema_hash(if jsonl { "jsonl" } else { "json" }, &s)),
        modes: results,
    }
}

/// Whether a probe's reply obeyed the prompt's own schema: the whole reply (unwrapped if the
/// mode wrapped a non-object root) valid; for JSONL, every whole line valid, and at least one —
/// or, when the budget (`cut`) ended the reply inside its first record, that record a valid
/// JSON object so far. A small model under a grammar can spend any budget inside one string
/// (`"1.1.1.1…`); a server ignoring the grammar answers prose, which is no JSON prefix.
fn obeys(
    schema: &kerf_core::schema::CompiledSchema,
    text: &str,
    jsonl: bool,
    wrapped_in: Option<&str>,
    cut: bool,
) -> bool {
    if jsonl {
        // A budget may cut the last line: only lines that ended count.
        let (whole, rest): (Vec<&str>, &str) = match text.rfind('\n') {
            Some(end) => (
                text[..end]
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .collect(),
                &text[end + 1..],
            ),
            None => (Vec::new(), text),
        };
        let valid = whole
            .iter()
            .all(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| schema.is_valid(&v)));
        let cut_inside_first = cut
            && whole.is_empty()
            && rest.trim_start().starts_with('{')
            && serde_json::from_str::<Value>(rest).is_err_and(|e| e.is_eof());
        return valid && (!whole.is_empty() || cut_inside_first);
    }
    let Ok(mut v) = serde_json::from_str::<Value>(text.trim()) else {
        return false;
    };
    if let Some(key) = wrapped_in {
        v = v.get(key).cloned().unwrap_or(Value::Null);
    }
    schema.is_valid(&v)
}

/// Now, as RFC 3339 in UTC.
pub fn rfc3339_now() -> String {
    kerf_core::time::rfc3339(kerf_core::time::now_ms())
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
