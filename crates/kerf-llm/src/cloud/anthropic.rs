//! Anthropic's Messages API, streamed. Structured output through a forced tool (`tool_choice` of
//! the one tool whose `input_schema` is the prompt's schema; the reply is the tool input's JSON
//! as it streams) or, on models that support it, the native `output_format` JSON schema.

use kerf_core::lint;
use serde_json::{Value, json};

use super::{
    Built, CloudProvider, Reply, base_details, built, event_json, headers, split_system, url,
};
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Role, Usage};

const TOOL: &str = "kerf_reply";
const VERSION: &str = "2023-06-01";
/// The beta that enables `output_format` (native JSON-schema output).
const STRUCTURED_BETA: &str = "structured-outputs-2025-11-13";

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    let (system, turns) = split_system(req);
    let messages: Vec<Value> = turns
        .iter()
        .map(|m| {
            json!({"role": if m.role == Role::Assistant { "assistant" } else { "user" }, "content": m.content})
        })
        .collect();
    let mut body = json!({
        "model": p.def.model,
        "max_tokens": req.max_tokens,
        "messages": messages,
        "stream": true,
        "temperature": req.temperature,
    });
    // Newer models refuse both temperature and top_p; send top_p only when it means something.
    if req.top_p < 1.0 {
        body["top_p"] = json!(req.top_p);
    }
    if let Some(system) = system {
        body["system"] = json!(system);
    }
    if !req.stop.is_empty() {
        body["stop_sequences"] = json!(req.stop);
    }
    let mut details = base_details(p, mode, why);
    let mut hdrs = headers(p, "x-api-key", false);
    hdrs.push(("anthropic-version".into(), VERSION.into()));
    let mut warnings = Vec::new();
    match (mode, &req.constraint) {
        (Structured::Tool, Constraint::Json(schema)) => {
            // A tool's input is an object: any other root is wrapped, and unwrapped after.
            let input_schema = if schema.get("type").and_then(Value::as_str) == Some("object") {
                schema.clone()
            } else {
                let key = lint::wrap_key(schema);
                details.wrapped_in = Some(key.to_string());
                lint::wrap_root(schema, key)
            };
            for f in lint::lint(schema, lint::Provider::Anthropic) {
                warnings.push(format!("{} `{}`: {}", f.pointer, f.keyword, f.message));
            }
            body["tools"] = json!([{
                "name": TOOL,
                "description": "Record the extracted data. Call it exactly once with everything extracted.",
                "input_schema": input_schema,
            }]);
            body["tool_choice"] = json!({"type": "tool", "name": TOOL});
        }
        (Structured::JsonSchema, Constraint::Json(schema)) => {
            body["output_format"] = json!({"type": "json_schema", "schema": schema});
            hdrs.push(("anthropic-beta".into(), STRUCTURED_BETA.into()));
        }
        (Structured::JsonObject | Structured::JsonObjectSchema, _) => {
            return Err(Error::Request(format!(
                "{}: Anthropic has no json_object mode; use tool or json_schema",
                p.def.name
            )));
        }
        _ => {}
    }
    built(url(p, "messages"), hdrs, &body, details, warnings)
}

fn reason(s: &str) -> FinishReason {
    match s {
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::Refusal,
        // end_turn, stop_sequence, tool_use, pause_turn
        _ => FinishReason::Stop,
    }
}

fn add_usage(r: &mut Reply, u: &Value) {
    let mut usage = r.usage.unwrap_or(Usage {
        prompt_tokens: 0,
        completion_tokens: 0,
        reasoning_tokens: None,
    });
    let n = |k: &str| super::token_count(u, k);
    if let Some(i) = n("input_tokens") {
        usage.prompt_tokens = i
            .saturating_add(n("cache_read_input_tokens").unwrap_or(0))
            .saturating_add(n("cache_creation_input_tokens").unwrap_or(0));
    }
    if let Some(o) = n("output_tokens") {
        usage.completion_tokens = o;
    }
    r.usage = Some(usage);
}

pub(crate) fn read_event(ev: &SseEvent, r: &mut Reply) -> std::result::Result<(), String> {
    if ev.data.trim().is_empty() {
        return Ok(());
    }
    let v = event_json(&ev.data)?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or(&ev.event);
    match kind {
        "message_start" => {
            if let Some(u) = v.pointer("/message/usage") {
                add_usage(r, u);
            }
        }
        "content_block_delta" => {
            let d = v.get("delta").unwrap_or(&Value::Null);
            let piece = match d.get("type").and_then(Value::as_str) {
                Some("text_delta") => d.get("text").and_then(Value::as_str),
                Some("input_json_delta") => d.get("partial_json").and_then(Value::as_str),
                _ => None, // thinking, signatures: not the reply
            };
            if let Some(t) = piece
                && !t.is_empty()
            {
                r.text.push_str(t);
                r.deltas += 1;
            }
        }
        "message_delta" => {
            if let Some(s) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                r.finish = Some(reason(s));
            }
            if let Some(u) = v.get("usage") {
                add_usage(r, u);
            }
        }
        "message_stop" => r.done = true,
        "error" => {
            let e = v.get("error").unwrap_or(&v);
            r.error = Some(format!(
                "the provider reported an error mid-stream: {} ({})",
                e.get("message").and_then(Value::as_str).unwrap_or("?"),
                e.get("type").and_then(Value::as_str).unwrap_or("error")
            ));
            r.done = true;
        }
        _ => {} // ping, content_block_start/stop
    }
    Ok(())
}

pub(crate) fn read_whole(v: &Value, r: &mut Reply) -> std::result::Result<(), String> {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("the reply has no `content`")?;
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => r
                .text
                .push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => r
                .text
                .push_str(&b.get("input").unwrap_or(&Value::Null).to_string()),
            _ => {}
        }
    }
    r.deltas = 1;
    r.finish = v.get("stop_reason").and_then(Value::as_str).map(reason);
    if let Some(u) = v.get("usage") {
        add_usage(r, u);
    }
    Ok(())
}
