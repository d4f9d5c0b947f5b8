//! What every wire protocol's module shares: the headers and URL of a request, its turns and
//! sampling in the protocol's terms, the request built with its details, and the counts and
//! events read back from a reply.

use super::*;

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
