//! TrustGraph prompt configuration: export and lossless import.
//!
//! TrustGraph's prompt manager reads, per template, `prompt`, `response-type` and `schema`, and a
//! global `system` template. Kerf keys it does not know (description, per-prompt system, terms,
//! post-processing rules, delimiters, …) travel in a `kerf` object inside each template, which
//! TrustGraph ignores and Kerf's import reads back — so export → import is lossless.
//! A `delimited` prompt is exported as `response-type: text` (TrustGraph has no such type; the
//! reply goes to downstream code as text), with the real type kept in `kerf`.

use serde_json::{Map, Value, json};

use super::Exported;
use crate::error::{Error, Result};
use crate::prompt::{PromptFile, ResponseType};

/// TrustGraph's default system prompt, used when a config has none.
pub const DEFAULT_SYSTEM: &str = "Be helpful.";

/// Keys TrustGraph reads from a template object.
const TG_KEYS: &[&str] = &["prompt", "response-type", "schema"];

/// The template object for one prompt (as TrustGraph stores it under `template.<id>`).
pub fn template_object(p: &PromptFile) -> Exported {
    let mut notes = Vec::new();
    let mut full = match serde_json::to_value(p) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    full.remove("id");
    let mut out = Map::new();
    out.insert("prompt".into(), json!(p.prompt));
    let tg_type = match p.response_type {
        ResponseType::Delimited => {
            notes.push(format!(
                "{}: TrustGraph has no `delimited` response type; exported as `text` (the kerf key keeps the real type)",
                p.id()
            ));
            ResponseType::Text
        }
        t => t,
    };
    out.insert("response-type".into(), json!(tg_type.as_str()));
    // Under the key the prompt uses: `object-schema` stays `object-schema` (TrustGraph ignores
    // it; renaming it here would turn validation on in production without anyone deciding so).
    if let Some(s) = &p.schema {
        out.insert(p.schema_key.as_str().into(), s.clone());
    }
    for k in TG_KEYS {
        full.remove(*k);
    }
    if p.response_type == ResponseType::Delimited {
        full.insert("response-type".into(), json!("delimited"));
    }
    // Always present, so import can tell a Kerf export from a foreign template.
    out.insert("kerf".into(), Value::Object(full));
    Exported {
        value: Value::Object(out),
        notes,
    }
}

/// The config bundle for TrustGraph's config type `prompt`.
pub fn bundle(prompts: &[PromptFile], system: Option<&str>) -> Result<Exported> {
    let mut notes = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for p in prompts {
        if ids.iter().any(|i| i == p.id()) {
            return Err(Error::Export {
                place: p.id().into(),
                target: "trustgraph-bundle".into(),
                message: "two prompts share this id".into(),
            });
        }
        ids.push(p.id().into());
    }
    let system = match system {
        Some(s) => s.to_string(),
        None => {
            let mut systems: Vec<&str> =
                prompts.iter().filter_map(|p| p.system.as_deref()).collect();
            systems.dedup();
            match systems.as_slice() {
                [] => DEFAULT_SYSTEM.to_string(),
                [one] => one.to_string(),
                [first, ..] => {
                    notes.push(format!(
                        "the prompts have different system templates; TrustGraph has one global system template, so the first is used (each prompt keeps its own under `kerf.system`): {:?}",
                        first
                    ));
                    first.to_string()
                }
            }
        }
    };
    let mut out = Map::new();
    out.insert("system".into(), Value::String(encode(&json!(system))));
    out.insert("template-index".into(), Value::String(encode(&json!(ids))));
    for p in prompts {
        let t = template_object(p);
        notes.extend(t.notes);
        out.insert(
            format!("template.{}", p.id()),
            Value::String(encode(&t.value)),
        );
    }
    Ok(Exported {
        value: Value::Object(out),
        notes,
    })
}

fn encode(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Import a bundle (`template.<id>` keys) or a single template object (`prompt` key; its id from
/// `default_id`). `place` names the source in errors.
pub fn import(value: &Value, default_id: &str, place: &str) -> Result<Vec<PromptFile>> {
    let Value::Object(map) = value else {
        return Err(Error::Import {
            place: place.into(),
            message: "expected a JSON object (a TrustGraph prompt bundle or template)".into(),
        });
    };
    if map.contains_key("prompt") {
        return Ok(vec![from_template(value, default_id, None, place)?]);
    }
    let system = match map.get("system") {
        Some(Value::String(s)) => {
            Some(
                serde_json::from_str::<String>(s).map_err(|e| Error::Import {
                    place: format!("{place} key `system`"),
                    message: format!("not a JSON-encoded string: {e}"),
                })?,
            )
        }
        Some(_) => {
            return Err(Error::Import {
                place: format!("{place} key `system`"),
                message: "expected a JSON-encoded string".into(),
            });
        }
        None => None,
    };
    let index: Option<Vec<String>> = match map.get("template-index") {
        Some(Value::String(s)) => Some(serde_json::from_str(s).map_err(|e| Error::Import {
            place: format!("{place} key `template-index`"),
            message: format!("not a JSON-encoded list of ids: {e}"),
        })?),
        _ => None,
    };
    let mut ids: Vec<String> = map
        .keys()
        .filter_map(|k| k.strip_prefix("template."))
        .map(str::to_string)
        .collect();
    if let Some(index) = &index {
        // Keep the index's order; templates missing from the index come after.
        ids.sort_by_key(|id| index.iter().position(|i| i == id).unwrap_or(usize::MAX));
    }
    if ids.is_empty() {
        return Err(Error::Import {
            place: place.into(),
            message: "no `template.<id>` keys: not a TrustGraph prompt bundle".into(),
        });
    }
    let mut out = Vec::new();
    for id in ids {
        let key = format!("template.{id}");
        let raw = &map[&key];
        let template: Value = match raw {
            Value::String(s) => serde_json::from_str(s).map_err(|e| Error::Import {
                place: format!("{place} key `{key}`"),
                message: format!("not a JSON-encoded template object: {e}"),
            })?,
            Value::Object(_) => raw.clone(),
            _ => {
                return Err(Error::Import {
                    place: format!("{place} key `{key}`"),
                    message: "expected a JSON-encoded template object".into(),
                });
            }
        };
        out.push(from_template(
            &template,
            &id,
            system.as_deref(),
            &format!("{place} key `{key}`"),
        )?);
    }
    Ok(out)
}

fn from_template(t: &Value, id: &str, system: Option<&str>, place: &str) -> Result<PromptFile> {
    let Value::Object(m) = t else {
        return Err(Error::Import {
            place: place.into(),
            message: "a template must be a JSON object".into(),
        });
    };
    let mut fields = Map::new();
    for k in ["prompt", "response-type", "schema", "object-schema"] {
        if let Some(v) = m.get(k) {
            fields.insert(k.into(), v.clone());
        }
    }
    let is_kerf = match m.get("kerf") {
        Some(Value::Object(extra)) => {
            for (k, v) in extra {
                fields.insert(k.clone(), v.clone());
            }
            true
        }
        _ => false,
    };
    fields.insert("id".into(), json!(id));
    if !is_kerf && let Some(s) = system.filter(|s| *s != DEFAULT_SYSTEM) {
        fields.insert("system".into(), json!(s));
    }
    let loaded = PromptFile::from_value(Value::Object(fields), place, None)?;
    Ok(loaded.file)
}
