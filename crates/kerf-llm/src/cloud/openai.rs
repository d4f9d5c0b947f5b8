//! OpenAI chat completions, as OpenAI and the compatible servers (DeepSeek, vLLM, Ollama,
//! LM Studio, llama.cpp's and llama-cpp-python's servers) speak it.

use kerf_core::lint;
use serde_json::{Value, json};

use super::{
    Built, CloudProvider, Reply, apply_rewrite, base_details, built, event_json, headers,
    set_sampling, url,
};
use crate::details::CloudDetails;
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Role, Usage};

/// The name OpenAI's `json_schema` wants: `[A-Za-z0-9_-]{1,64}`.
pub(super) const SCHEMA_NAME: &str = "kerf_reply";

/// The conversation as OpenAI's messages (chat completions' `messages`, the Responses API's
/// `input`).
pub(super) fn messages(req: &Request) -> Vec<Value> {
    req.messages
        .iter()
        .map(|m| {
            json!({"role": match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            }, "content": m.content})
        })
        .collect()
}

/// The `json_schema` mode's schema, rewritten for strict mode, with each change as a warning.
pub(super) fn strict_schema(
    schema: &Value,
    details: &mut CloudDetails,
    warnings: &mut Vec<String>,
) -> Value {
    apply_rewrite(
        lint::openai_strict(schema),
        "strict mode",
        details,
        warnings,
    )
}

/// OpenAI refuses a `json_object` request whose messages never say "JSON" (a 400); other
/// servers do not care. On OpenAI's own API that is an error before sending, elsewhere a
/// warning.
pub(super) fn json_word_check(
    p: &CloudProvider,
    req: &Request,
    warnings: &mut Vec<String>,
) -> Result<()> {
    if req
        .messages
        .iter()
        .any(|m| m.content.to_ascii_lowercase().contains("json"))
    {
        return Ok(());
    }
    let why = "json_object mode needs the word \"JSON\" in the messages (OpenAI refuses the request otherwise): say in the prompt that the reply is JSON";
    if p.def.is_openai_itself() {
        return Err(Error::Request(format!("{}: {why}", p.def.name)));
    }
    warnings.push(why.to_string());
    Ok(())
}

/// Thinking budgets are Gemini's; OpenAI's models take a reasoning effort instead.
pub(super) fn thinking_budget_ignored(req: &Request, warnings: &mut Vec<String>) {
    if req.thinking_budget.is_some() {
        warnings.push(
            "--thinking-budget is Gemini's; OpenAI's reasoning models take --reasoning-effort (not sent)".into(),
        );
    }
}

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    // OpenAI's own API: `max_tokens` is deprecated there and refused by its reasoning models.
    let budget_key = if p.def.max_completion_tokens || p.def.is_openai_itself() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let mut body = json!({
        "model": p.def.model,
        "messages": messages(req),
        "stream": true,
        "stream_options": {"include_usage": true},
        budget_key: req.max_tokens,
    });
    set_sampling(&mut body, req, "temperature", "top_p");
    if let Some(e) = req.reasoning_effort {
        body["reasoning_effort"] = json!(e.as_str());
    }
    if let Some(seed) = req.seed {
        body["seed"] = json!(seed);
    }
    if !req.stop.is_empty() {
        body["stop"] = json!(req.stop);
    }
    let mut details = base_details(p, mode, why);
    let mut warnings = Vec::new();
    thinking_budget_ignored(req, &mut warnings);
    match (mode, &req.constraint) {
        (Structured::JsonObject, _) => {
            json_word_check(p, req, &mut warnings)?;
            body["response_format"] = json!({"type": "json_object"});
        }
        (Structured::JsonObjectSchema, Constraint::Json(schema)) => {
            json_word_check(p, req, &mut warnings)?;
            body["response_format"] = json!({"type": "json_object", "schema": schema});
        }
        (Structured::JsonSchema, Constraint::Json(schema)) => {
            let schema = strict_schema(schema, &mut details, &mut warnings);
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "strict": true, "schema": schema},
            });
        }
        (Structured::Grammar, Constraint::Json(schema) | Constraint::Jsonl(schema)) => {
            let jsonl = matches!(req.constraint, Constraint::Jsonl(_));
            let write = p.grammar.ok_or_else(|| {
                Error::Constraint(format!(
                    "{}: the grammar mode needs llama.cpp's schema-to-grammar converter, which this build lacks (build with the engine feature)",
                    p.def.name
                ))
            })?;
            let grammar = write(schema, jsonl)?;
            // llama.cpp's server reads `grammar`; vLLM reads `structured_outputs.grammar`
            // (xgrammar takes GBNF). Each ignores the other's field.
            body["grammar"] = json!(grammar);
            body["structured_outputs"] = json!({"grammar": grammar});
        }
        (Structured::Tool | Structured::ResponseSchema, _) => {
            return Err(Error::Request(format!(
                "{}: the `{}` mode is {}'s; OpenAI-compatible providers take none, json_object, json_object_schema, json_schema or grammar",
                p.def.name,
                mode.as_str(),
                if mode == Structured::Tool {
                    "Anthropic"
                } else {
                    "Gemini"
                }
            )));
        }
        _ => {}
    }
    built(
        url(p, "chat/completions"),
        headers(p, "authorization", true),
        &body,
        details,
        warnings,
    )
}

fn usage(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    let n = |k: &str| super::token_count(u, k);
    Some(Usage {
        prompt_tokens: n("prompt_tokens").unwrap_or(0),
        completion_tokens: n("completion_tokens").unwrap_or(0),
        reasoning_tokens: n("/completion_tokens_details/reasoning_tokens"),
    })
}

fn reason(s: &str) -> FinishReason {
    match s {
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        // `stop`, `tool_calls`, `function_call`, and servers' own words for a natural end.
        _ => FinishReason::Stop,
    }
}

fn provider_error(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    Some(
        e.get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    )
}

/// One `data:` event of a streamed completion.
pub(crate) fn read_event(ev: &SseEvent, r: &mut Reply) -> std::result::Result<(), String> {
    let data = ev.data.trim();
    if data == "[DONE]" {
        r.done = true;
        return Ok(());
    }
    if data.is_empty() {
        return Ok(());
    }
    let v = event_json(data)?;
    if let Some(e) = provider_error(&v) {
        r.error = Some(format!("the provider reported an error mid-stream: {e}"));
        r.done = true;
        return Ok(());
    }
    if let Some(u) = usage(&v) {
        r.usage = Some(u);
    }
    unreadable(&v, r);
    if let Some(choice) = v.get("choices").and_then(|c| c.get(0)) {
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str)
            && !t.is_empty()
        {
            r.text.push_str(t);
            r.deltas += 1;
        }
        if let Some(t) = delta.get("refusal").and_then(Value::as_str) {
            r.refusal.push_str(t);
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            r.finish = Some(reason(f));
        }
    }
    Ok(())
}

/// A whole (non-streamed) completion.
pub(crate) fn read_whole(v: &Value, r: &mut Reply) -> std::result::Result<(), String> {
    if let Some(e) = provider_error(v) {
        r.error = Some(e);
        return Ok(());
    }
    let choice = v
        .pointer("/choices/0")
        .ok_or("the reply has no `choices[0]`")?;
    if let Some(t) = choice.pointer("/message/content").and_then(Value::as_str) {
        r.text.push_str(t);
        r.deltas = 1;
    }
    if let Some(t) = choice.pointer("/message/refusal").and_then(Value::as_str) {
        r.refusal.push_str(t);
    }
    r.finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(reason);
    r.usage = usage(v);
    unreadable(v, r);
    Ok(())
}

/// A usage object whose counts are no numbers: unknown, not 0.
fn unreadable(v: &Value, r: &mut Reply) {
    if let Some(u) = v.get("usage").filter(|u| u.is_object())
        && let Some(why) = super::unreadable_counts(
            u,
            &[
                "prompt_tokens",
                "completion_tokens",
                "/completion_tokens_details/reasoning_tokens",
            ],
        )
    {
        r.usage_unreadable = Some(why);
    }
}
