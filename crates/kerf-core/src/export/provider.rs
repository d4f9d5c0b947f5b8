//! Provider request shapes: OpenAI's `response_format` and Anthropic's forced tool.

use serde_json::{Value, json};

use super::Exported;
use crate::lint::{self, Severity};
use crate::prompt::{PromptFile, ResponseType};

/// The schema of the whole reply a provider should produce for this prompt. JSONL has no
/// structured-output equivalent anywhere: its line schema becomes an array of lines.
fn reply_schema(p: &PromptFile, notes: &mut Vec<String>) -> Value {
    let schema = p.schema.clone().unwrap_or(json!({}));
    match p.response_type {
        ResponseType::Jsonl | ResponseType::Delimited => {
            notes.push(format!(
                "{}: `{}` has no structured-output equivalent; the per-line schema is exported as an array of items (the reply will be one JSON value, so it loses JSONL's truncation resilience)",
                p.id(),
                p.response_type
            ));
            let mut arr = json!({"type": "array", "items": schema});
            hoist_definitions(&mut arr);
            arr
        }
        _ => schema,
    }
}

/// Keep definitions at the root of the new document so local `$ref`s still resolve.
fn hoist_definitions(arr: &mut Value) {
    let Some(items) = arr.get_mut("items").and_then(Value::as_object_mut) else {
        return;
    };
    let defs: Vec<(String, Value)> = ["$defs", "definitions"]
        .iter()
        .filter_map(|k| items.remove(*k).map(|v| (k.to_string(), v)))
        .collect();
    items.remove("$schema");
    if let Value::Object(root) = arr {
        for (k, v) in defs {
            root.insert(k, v);
        }
    }
}

/// A name a provider accepts: `[A-Za-z0-9_-]{1,64}`.
fn api_name(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() { "extraction".into() } else { s }
}

/// OpenAI `response_format` for structured outputs, strict.
pub fn openai(p: &PromptFile) -> Exported {
    let mut notes = Vec::new();
    let schema = reply_schema(p, &mut notes);
    let rewrite = lint::openai_strict(&schema);
    for f in &rewrite.findings {
        let tag = if f.severity == Severity::Error {
            "blocker"
        } else {
            "changed"
        };
        notes.push(format!(
            "{tag}: {} `{}`: {}",
            f.pointer, f.keyword, f.message
        ));
    }
    let mut js = json!({"name": api_name(p.id()), "strict": true, "schema": rewrite.schema});
    if let Some(d) = &p.description {
        js["description"] = json!(d);
    }
    Exported {
        value: json!({"type": "json_schema", "json_schema": js}),
        notes,
    }
}

/// Anthropic forced tool use: `tools` with one strict tool whose `input_schema` is the reply
/// schema in Anthropic's subset ([`lint::anthropic_strict`]), and the `tool_choice` that forces
/// it. The same schema is what native structured outputs (`output_config.format`) take.
pub fn anthropic(p: &PromptFile) -> Exported {
    let mut notes = Vec::new();
    let schema = reply_schema(p, &mut notes);
    let rewrite = lint::anthropic_strict(&schema);
    for f in &rewrite.findings {
        notes.push(format!(
            "{}: {} `{}`: {}",
            if f.severity == Severity::Error {
                "blocker"
            } else {
                "changed"
            },
            f.pointer,
            f.keyword,
            f.message
        ));
    }
    let input_schema = rewrite.schema;
    let name = api_name(p.id());
    let description = p
        .description
        .clone()
        .unwrap_or_else(|| format!("Record the result of the `{}` extraction.", p.id()));
    Exported {
        value: json!({
            "tools": [{"name": name, "description": description, "input_schema": input_schema, "strict": true}],
            "tool_choice": {"type": "tool", "name": name}
        }),
        notes,
    }
}
