//! OpenAI's Responses API (`POST /responses`), streamed: the only API some OpenAI models are
//! served on (the `-pro` reasoning models, Codex), and where reasoning effort is
//! `reasoning.effort`. Structured output is `text.format`; the system text goes in `instructions`.

use serde_json::{Value, json};

use super::openai::{SCHEMA_NAME, json_word_check, strict_schema, thinking_budget_ignored};
use super::{
    Built, CloudProvider, Reply, base_details, built, event_json, headers, set_sampling,
    system_and_turns, url,
};
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Usage};

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    let (system, input) = system_and_turns(req);
    let mut body = json!({
        "model": p.def.model,
        "input": input,
        "max_output_tokens": req.max_tokens,
        "stream": true,
        // Kerf keeps its own history; nothing is left stored at OpenAI.
        "store": false,
    });
    if let Some(system) = system {
        body["instructions"] = json!(system);
    }
    set_sampling(&mut body, req, "temperature", "top_p");
    if let Some(e) = req.reasoning_effort {
        body["reasoning"] = json!({"effort": e.as_str()});
    }
    let mut details = base_details(p, mode, why);
    let mut warnings = Vec::new();
    thinking_budget_ignored(req, &mut warnings);
    if req.seed.is_some() {
        warnings.push("the Responses API takes no seed (not sent)".into());
    }
    if !req.stop.is_empty() {
        warnings.push("the Responses API takes no stop sequences (not sent)".into());
    }
    match (mode, &req.constraint) {
        (Structured::JsonObject, _) => {
            json_word_check(p, req, &mut warnings)?;
            body["text"] = json!({"format": {"type": "json_object"}});
        }
        (Structured::JsonSchema, Constraint::Json(schema)) => {
            let schema = strict_schema(schema, &mut details, &mut warnings);
            body["text"] = json!({"format": {
                "type": "json_schema", "name": SCHEMA_NAME, "strict": true, "schema": schema,
            }});
        }
        (Structured::None | Structured::Auto, _) | (_, Constraint::None) => {}
        _ => {
            return Err(Error::Request(format!(
                "{}: the Responses API takes none, json_object or json_schema, not `{}`",
                p.def.name,
                mode.as_str()
            )));
        }
    }
    details.api = Some(crate::providers::Api::Responses);
    built(
        url(p, "responses"),
        headers(p, "authorization", true),
        &body,
        details,
        warnings,
    )
}

fn usage(u: &Value) -> Usage {
    let n = |k: &str| super::token_count(u, k);
    Usage {
        prompt_tokens: n("input_tokens").unwrap_or(0),
        completion_tokens: n("output_tokens").unwrap_or(0),
        reasoning_tokens: n("/output_tokens_details/reasoning_tokens"),
    }
}

/// A finished (or stopped) response object: its end, usage and error.
fn read_response(resp: &Value, r: &mut Reply) {
    if let Some(u) = resp.get("usage").filter(|u| u.is_object()) {
        r.usage = Some(usage(u));
        if let Some(why) = super::unreadable_counts(
            u,
            &[
                "input_tokens",
                "output_tokens",
                "/output_tokens_details/reasoning_tokens",
            ],
        ) {
            r.usage_unreadable = Some(why);
        }
    }
    match resp.get("status").and_then(Value::as_str) {
        Some("completed") => r.finish = Some(FinishReason::Stop),
        Some("incomplete") => {
            let why = resp
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .unwrap_or("");
            r.finish = Some(match why {
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Length, // max_output_tokens
            });
        }
        Some("failed") => {
            let e = resp.get("error").unwrap_or(&Value::Null);
            r.error = Some(format!(
                "the response failed: {} ({})",
                e.get("message").and_then(Value::as_str).unwrap_or("?"),
                e.get("code").and_then(Value::as_str).unwrap_or("error")
            ));
        }
        Some("cancelled") => r.finish = Some(FinishReason::Cancelled),
        _ => {}
    }
}

pub(crate) fn read_event(ev: &SseEvent, r: &mut Reply) -> std::result::Result<(), String> {
    if ev.data.trim().is_empty() {
        return Ok(());
    }
    let v = event_json(&ev.data)?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or(&ev.event);
    match kind {
        "response.output_text.delta" => {
            if let Some(t) = v.get("delta").and_then(Value::as_str)
                && !t.is_empty()
            {
                r.text.push_str(t);
                r.deltas += 1;
            }
        }
        "response.refusal.delta" => {
            if let Some(t) = v.get("delta").and_then(Value::as_str) {
                r.refusal.push_str(t);
            }
        }
        "response.completed" | "response.incomplete" | "response.failed" => {
            read_response(v.get("response").unwrap_or(&Value::Null), r);
            r.done = true;
        }
        "error" => {
            r.error = Some(format!(
                "the provider reported an error mid-stream: {} ({})",
                v.get("message").and_then(Value::as_str).unwrap_or("?"),
                v.get("code").and_then(Value::as_str).unwrap_or("error")
            ));
            r.done = true;
        }
        // response.created / in_progress, output_item and content_part events, reasoning
        // summaries: not the reply.
        _ => {}
    }
    Ok(())
}

pub(crate) fn read_whole(v: &Value, r: &mut Reply) -> std::result::Result<(), String> {
    let output = v
        .get("output")
        .and_then(Value::as_array)
        .ok_or("the reply has no `output`")?;
    for item in output.iter().filter(|i| i["type"] == "message") {
        for part in item["content"].as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("output_text") => r.text.push_str(part["text"].as_str().unwrap_or("")),
                Some("refusal") => r.refusal.push_str(part["refusal"].as_str().unwrap_or("")),
                _ => {}
            }
        }
    }
    r.deltas = 1;
    read_response(v, r);
    Ok(())
}
