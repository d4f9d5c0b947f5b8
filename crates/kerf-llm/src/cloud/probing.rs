//! Probing a provider (`kerf providers probe`): which structured-output modes it honours for a
//! schema, each tried with a small request and its reply checked against the schema.

use super::*;

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
