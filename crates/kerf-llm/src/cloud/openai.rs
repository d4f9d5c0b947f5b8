//! OpenAI chat completions, as OpenAI and the compatible servers (DeepSeek, vLLM, Ollama,
//! LM Studio, llama.cpp's and llama-cpp-python's servers) speak it.

use kerf_core::lint::{self, Severity};
use serde_json::{Value, json};

use super::{Built, CloudProvider, Reply, base_details, built, event_json, headers, url};
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Role, Usage};

/// The name OpenAI's `json_schema` wants: `[A-Za-z0-9_-]{1,64}`.
const SCHEMA_NAME: &str = "kerf_reply";

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            json!({"role": match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            }, "content": m.content})
        })
        .collect();
    let budget_key = if p.def.max_completion_tokens {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let mut body = json!({
        "model": p.def.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        budget_key: req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
    });
    if let Some(seed) = req.seed {
        body["seed"] = json!(seed);
    }
    if !req.stop.is_empty() {
        body["stop"] = json!(req.stop);
    }
    let mut details = base_details(p, mode, why);
    let mut warnings = Vec::new();
    match (mode, &req.constraint) {
        (Structured::JsonObject, _) => body["response_format"] = json!({"type": "json_object"}),
        (Structured::JsonObjectSchema, Constraint::Json(schema)) => {
            body["response_format"] = json!({"type": "json_object", "schema": schema});
        }
        (Structured::JsonSchema, Constraint::Json(schema)) => {
            let rewrite = lint::openai_strict(schema);
            for f in &rewrite.findings {
                let tag = if f.severity == Severity::Error {
                    "the server may reject"
                } else {
                    "rewritten for strict mode"
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
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "strict": true, "schema": rewrite.schema},
            });
        }
        (Structured::Tool, _) => {
            return Err(Error::Request(format!(
                "{}: the `tool` mode is Anthropic's; OpenAI-compatible providers take none, json_object or json_schema",
                p.def.name
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
    Ok(())
}
