//! Anthropic's Messages API, streamed. Structured output through native structured outputs
//! (`output_config.format`, generally available, no beta header) or a forced strict tool
//! (`tool_choice` of the one tool whose `input_schema` is the schema; the reply is the tool
//! input's JSON as it streams). Both take the schema rewritten into Anthropic's subset
//! ([`lint::anthropic_strict`]); the reply is validated against the original afterwards.

use kerf_core::lint;
use serde_json::{Value, json};

use super::{
    Built, CloudProvider, Reply, apply_rewrite, base_details, built, event_json, headers,
    set_sampling, system_and_turns, url,
};
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Usage};

const TOOL: &str = "kerf_reply";
pub(crate) const VERSION: &str = "2023-06-01";

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    let (system, messages) = system_and_turns(req);
    let mut body = json!({
        "model": p.def.model,
        "max_tokens": req.max_tokens,
        "messages": messages,
        "stream": true,
    });
    set_sampling(&mut body, req, "temperature", "top_p");
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
    if req.reasoning_effort.is_some() || req.thinking_budget.is_some() {
        warnings.push(
            "--reasoning-effort and --thinking-budget are OpenAI's and Gemini's; not sent to Anthropic"
                .into(),
        );
    }
    match (mode, &req.constraint) {
        (Structured::Tool | Structured::JsonSchema, Constraint::Json(schema)) => {
            let schema = apply_rewrite(
                lint::anthropic_strict(schema),
                "Anthropic",
                &mut details,
                &mut warnings,
            );
            if mode == Structured::Tool {
                body["tools"] = json!([{
                    "name": TOOL,
                    "description": "Record the extracted data. Call it exactly once with everything extracted.",
                    "input_schema": schema,
                    "strict": true,
                }]);
                body["tool_choice"] = json!({"type": "tool", "name": TOOL});
            } else {
                body["output_config"] =
                    json!({"format": {"type": "json_schema", "schema": schema}});
            }
        }
        (Structured::None | Structured::Auto, _) | (_, Constraint::None) => {}
        _ => {
            return Err(Error::Request(format!(
                "{}: Anthropic takes none, json_schema (native structured outputs) or tool, not `{}`",
                p.def.name,
                mode.as_str()
            )));
        }
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
    if let Some(why) = super::unreadable_counts(
        u,
        &[
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ],
    ) {
        r.usage_unreadable = Some(why);
    }
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
