//! Google Gemini `streamGenerateContent` (server-sent events with `alt=sse`), with
//! `responseMimeType: application/json` and the schema as `responseJsonSchema` (JSON Schema,
//! only `const` rewritten) or, in the fallback `response_schema` mode, `responseSchema`
//! rewritten into Gemini's older OpenAPI subset. The lint's findings are shown before sending.

use kerf_core::lint;
use serde_json::{Value, json};

use super::{
    Built, CloudProvider, Reply, apply_rewrite, base_details, built, event_json, headers,
    set_sampling, split_system, url,
};
use crate::providers::Structured;
use crate::sse::SseEvent;
use crate::{Constraint, Error, FinishReason, Request, Result, Role, Usage};

pub(crate) fn build(
    p: &CloudProvider,
    req: &Request,
    mode: Structured,
    why: &str,
) -> Result<Built> {
    let (system, turns) = split_system(req);
    let contents: Vec<Value> = turns
        .iter()
        .map(|m| {
            json!({"role": if m.role == Role::Assistant { "model" } else { "user" }, "parts": [{"text": m.content}]})
        })
        .collect();
    let mut config = json!({"maxOutputTokens": req.max_tokens});
    set_sampling(&mut config, req, "temperature", "topP");
    if let Some(b) = req.thinking_budget {
        config["thinkingConfig"] = json!({"thinkingBudget": b});
    }
    if let Some(seed) = req.seed {
        config["seed"] = json!(seed);
    }
    if !req.stop.is_empty() {
        config["stopSequences"] = json!(req.stop);
    }
    let mut details = base_details(p, mode, why);
    let mut warnings = Vec::new();
    if req.reasoning_effort.is_some() {
        warnings.push(
            "--reasoning-effort is OpenAI's; Gemini takes --thinking-budget (not sent)".into(),
        );
    }
    match (mode, &req.constraint) {
        (Structured::JsonSchema, Constraint::Json(schema)) => {
            config["responseMimeType"] = json!("application/json");
            config["responseJsonSchema"] = apply_rewrite(
                lint::gemini_json_schema(schema),
                "responseJsonSchema",
                &mut details,
                &mut warnings,
            );
        }
        (Structured::ResponseSchema, Constraint::Json(schema)) => {
            let rewrite = lint::gemini_schema(schema);
            if rewrite.too_large {
                let why = rewrite
                    .findings
                    .first()
                    .map(|f| f.message.clone())
                    .unwrap_or_default();
                return Err(Error::Request(format!(
                    "{}: the schema cannot be sent to Gemini: {why}",
                    p.def.name
                )));
            }
            config["responseMimeType"] = json!("application/json");
            config["responseSchema"] =
                apply_rewrite(rewrite, "responseSchema", &mut details, &mut warnings);
        }
        (Structured::JsonObject, _) => config["responseMimeType"] = json!("application/json"),
        (Structured::None | Structured::Auto, _) | (_, Constraint::None) => {}
        _ => {
            return Err(Error::Request(format!(
                "{}: Gemini takes none, json_object (JSON without a schema), json_schema (responseJsonSchema) or response_schema, not `{}`",
                p.def.name,
                mode.as_str()
            )));
        }
    }
    let mut body = json!({"contents": contents, "generationConfig": config});
    if let Some(system) = system {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    built(
        // The key goes in a header, never in the URL (URLs end up in error messages).
        url(
            p,
            &format!("models/{}:streamGenerateContent?alt=sse", p.def.model),
        ),
        headers(p, "x-goog-api-key", false),
        &body,
        details,
        warnings,
    )
}

fn reason(s: &str) -> FinishReason {
    match s {
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        _ => FinishReason::Stop,
    }
}

/// One `GenerateContentResponse` (a streamed piece or the whole reply).
fn read(v: &Value, r: &mut Reply) {
    if let Some(block) = v
        .pointer("/promptFeedback/blockReason")
        .and_then(Value::as_str)
    {
        r.finish = Some(FinishReason::ContentFilter);
        r.error = Some(format!("the prompt was blocked ({block})"));
    }
    if let Some(c) = v.pointer("/candidates/0") {
        if let Some(parts) = c.pointer("/content/parts").and_then(Value::as_array) {
            for part in parts {
                // Thought summaries are not the reply.
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if let Some(t) = part.get("text").and_then(Value::as_str)
                    && !t.is_empty()
                {
                    r.text.push_str(t);
                    r.deltas += 1;
                }
            }
        }
        if let Some(f) = c.get("finishReason").and_then(Value::as_str) {
            r.finish = Some(reason(f));
        }
    }
    if let Some(u) = v.get("usageMetadata") {
        if let Some(why) = super::unreadable_counts(
            u,
            &[
                "promptTokenCount",
                "candidatesTokenCount",
                "thoughtsTokenCount",
            ],
        ) {
            r.usage_unreadable = Some(why);
        }
        let n = |k: &str| super::token_count(u, k);
        let thoughts = n("thoughtsTokenCount");
        r.usage = Some(Usage {
            prompt_tokens: n("promptTokenCount").unwrap_or(0),
            completion_tokens: n("candidatesTokenCount")
                .unwrap_or(0)
                .saturating_add(thoughts.unwrap_or(0)),
            reasoning_tokens: thoughts,
        });
    }
}

pub(crate) fn read_event(ev: &SseEvent, r: &mut Reply) -> std::result::Result<(), String> {
    if ev.data.trim().is_empty() {
        return Ok(());
    }
    let v = event_json(&ev.data)?;
    if let Some(e) = v.get("error") {
        r.error = Some(format!(
            "the provider reported an error mid-stream: {}",
            e.get("message").and_then(Value::as_str).unwrap_or("?")
        ));
        r.done = true;
        return Ok(());
    }
    read(&v, r);
    Ok(())
}

pub(crate) fn read_whole(v: &Value, r: &mut Reply) -> std::result::Result<(), String> {
    // A non-streamed call answers one object; some proxies answer the stream as a JSON array.
    match v {
        Value::Array(items) => items.iter().for_each(|i| read(i, r)),
        _ => read(v, r),
    }
    Ok(())
}
