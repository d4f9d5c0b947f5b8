//! Writing prompt files: a new one from a schema ([`new_prompt`]), and the other format's twin
//! of one that exists ([`twin`]) — JSONL ↔ JSON array, the same item schema, the instructions'
//! wording adjusted — so the two can be compared at once.
//!
//! Both work on the file's JSON object, not on [`PromptFile`]: a twin keeps every key of its
//! source it does not change (tests, match rules, post rules, keys a later Kerf adds), in the
//! source's order.

use serde_json::{Map, Value, json};

use crate::prompt::{PromptFile, ResponseType};
use crate::{Error, Result};

/// A twin, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Twin {
    /// The twin's prompt file.
    pub file: Map<String, Value>,
    pub id: String,
    pub response_type: ResponseType,
    /// What was changed from the source, in words, to show the user.
    pub changes: Vec<String>,
}

/// The instructions' sentences that name the format, JSONL form first. The longest come first,
/// so a whole requirement is replaced before the phrase inside it. They are Kerf's own prompts'
/// wording (and [`new_prompt`]'s): a prompt worded otherwise gets a sentence appended instead.
const WORDING: [(&str, &str); 5] = [
    (
        "- Output one JSON object per line, and nothing else: no array brackets, no commas between lines, no Markdown fences, no explanations.\n- Write each object on a single line.",
        "- Output a single JSON array of objects, and nothing else: no Markdown fences, no explanations.",
    ),
    (
        "Output the result as one JSON object per line.",
        "Output the result as a JSON array of objects.",
    ),
    ("Example lines:", "Example element:"),
    ("one JSON object per line", "a JSON array of objects"),
    ("JSON Lines", "a JSON array"),
];

/// The sentence appended when no sentence of the source names its format.
fn appended(to: ResponseType) -> &'static str {
    match to {
        ResponseType::Jsonl => {
            "Output one JSON object per line, and nothing else: no array brackets, no commas between lines, no Markdown fences, no explanations."
        }
        _ => {
            "Output a single JSON array of objects, and nothing else: no Markdown fences, no explanations."
        }
    }
}

const JSONL_TAG: &str = "(JSONL: truncation-resilient)";
const ARRAY_TAG: &str = "(JSON array twin: all-or-nothing when cut off)";

/// The id a twin of `id` gets: `ID-array` for a JSON array twin; for a JSONL twin, the id
/// without its `-array`, else `ID-jsonl`.
pub fn twin_id(id: &str, to: ResponseType) -> String {
    match to {
        ResponseType::Json => format!("{id}-array"),
        _ => id
            .strip_suffix("-array")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{id}-jsonl")),
    }
}

fn usage(place: &str, message: impl std::fmt::Display) -> Error {
    Error::PromptFile {
        place: place.into(),
        message: message.to_string(),
    }
}

/// The twin of the prompt file `source` (its JSON object; `id` its id, `place` names it in
/// errors). A JSONL prompt's twin answers with one JSON array of the same items; a JSON prompt
/// whose schema is an array (`items`) gets the JSONL twin that answers one item per line. The
/// twin names its source in `twin`; its source is not changed here.
pub fn twin(source: &Map<String, Value>, id: &str, place: &str) -> Result<Twin> {
    let loaded = PromptFile::from_value(Value::Object(source.clone()), place, None)?;
    let from = loaded.file.response_type;
    let to = match from {
        ResponseType::Jsonl => ResponseType::Json,
        ResponseType::Json => ResponseType::Jsonl,
        other => {
            return Err(usage(
                place,
                format!(
                    "a `{other}` prompt has no twin: twins are JSONL and JSON-array prompts over the same items"
                ),
            ));
        }
    };
    let twin_id = twin_id(id, to);
    let mut changes = vec![format!("response-type {} → {}", from.as_str(), to.as_str())];
    let mut out = Map::new();
    let mut worded = false;
    for (key, value) in source {
        let value = match key.as_str() {
            "id" => json!(twin_id),
            "response-type" => json!(to.as_str()),
            "prompt" | "system" => match value.as_str() {
                Some(text) => {
                    let (text, n) = reword(text, to);
                    if n > 0 {
                        worded = true;
                        changes.push(format!("{key}: {n} sentence(s) naming the format reworded"));
                    }
                    json!(text)
                }
                None => value.clone(),
            },
            "schema" => {
                let (schema, dropped) = twin_schema(value, to, place)?;
                changes.push(match to {
                    ResponseType::Json => {
                        "schema: the same item schema, as the array's `items`".into()
                    }
                    _ => "schema: the array's `items`, one per line".into(),
                });
                changes.extend(dropped);
                schema
            }
            "description" => json!(describe(value.as_str().unwrap_or(""), id, to)),
            // A cut JSON array yields nothing to a strict JSON parser (production's); the JSONL
            // twin keeps the lines it had. The array twin shows the former.
            "salvage" if to == ResponseType::Jsonl => continue,
            "twin" => json!(id),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if !out.contains_key("twin") {
        out.insert("twin".into(), json!(id));
    }
    if !out.contains_key("id") {
        out.insert("id".into(), json!(twin_id));
    }
    if to == ResponseType::Json && !out.contains_key("salvage") {
        out.insert("salvage".into(), json!(false));
        changes.push(
            "salvage off: a cut array yields no objects, as a strict JSON parser gives".into(),
        );
    }
    if !worded && let Some(Value::String(prompt)) = out.get_mut("prompt") {
        let line = appended(to);
        prompt.push_str(if prompt.ends_with('\n') { "\n" } else { "\n\n" });
        prompt.push_str(line);
        prompt.push('\n');
        changes.push(format!(
            "prompt: no sentence named the format, so one was added: \"{line}\""
        ));
    }
    // The twin must load as its source did.
    PromptFile::from_value(
        Value::Object(out.clone()),
        &format!("the twin of {place}"),
        None,
    )?;
    Ok(Twin {
        file: out,
        id: twin_id,
        response_type: to,
        changes,
    })
}

/// `text` with every sentence that names the source's format in the twin's words, and how many
/// were changed.
fn reword(text: &str, to: ResponseType) -> (String, usize) {
    let mut text = text.to_string();
    let mut n = 0;
    for (jsonl, array) in WORDING {
        let (from, into) = match to {
            ResponseType::Json => (jsonl, array),
            _ => (array, jsonl),
        };
        let found = text.matches(from).count();
        if found > 0 {
            n += found;
            text = text.replace(from, into);
        }
    }
    (text, n)
}

fn describe(description: &str, id: &str, to: ResponseType) -> String {
    let (mine, theirs) = match to {
        ResponseType::Json => (JSONL_TAG, ARRAY_TAG),
        _ => (ARRAY_TAG, JSONL_TAG),
    };
    if let Some(head) = description.strip_suffix(mine) {
        return format!("{head}{theirs}");
    }
    let what = match to {
        ResponseType::Json => "JSON array twin",
        _ => "JSONL twin",
    };
    if description.is_empty() {
        format!("The {what} of {id}")
    } else {
        format!("{description} ({what} of {id})")
    }
}

/// Keys that belong at a schema document's root: they move with the root when items are
/// wrapped into an array or unwrapped from one, so `$ref`s to `#/$defs/…` keep resolving.
const ROOT_KEYS: [&str; 4] = ["$schema", "$id", "$defs", "definitions"];

fn twin_schema(schema: &Value, to: ResponseType, place: &str) -> Result<(Value, Vec<String>)> {
    let Value::Object(root) = schema else {
        return Err(usage(place, "key `schema`: a twin needs an object schema"));
    };
    match to {
        ResponseType::Json => {
            let mut item = root.clone();
            let mut array = Map::new();
            for key in ROOT_KEYS {
                if let Some(v) = item.shift_remove(key) {
                    array.insert(key.into(), v);
                }
            }
            if let Some(title) = item.get("title").and_then(Value::as_str) {
                array.insert("title".into(), json!(format!("{title} array")));
            }
            array.insert("type".into(), json!("array"));
            array.insert("items".into(), Value::Object(item));
            Ok((Value::Object(array), Vec::new()))
        }
        _ => {
            let items = match (root.get("type").and_then(Value::as_str), root.get("items")) {
                (Some("array"), Some(Value::Object(items))) => items,
                _ => {
                    return Err(usage(
                        place,
                        "key `schema`: the JSONL twin of a JSON prompt needs an array schema whose `items` is one object schema (`{\"type\": \"array\", \"items\": {…}}`)",
                    ));
                }
            };
            let mut item = Map::new();
            for key in ROOT_KEYS {
                if let Some(v) = root.get(key) {
                    item.insert(key.into(), v.clone());
                }
            }
            for (k, v) in items {
                item.insert(k.clone(), v.clone());
            }
            let dropped: Vec<String> = root
                .keys()
                .filter(|k| {
                    !ROOT_KEYS.contains(&k.as_str())
                        && !["type", "items", "title", "description"].contains(&k.as_str())
                })
                .map(|k| format!("schema: `{k}` dropped (JSONL has no array to bound)"))
                .collect();
            Ok((Value::Object(item), dropped))
        }
    }
}

/// The item schema `kerf new` uses when none is given: a named thing and what the text says of
/// it, the shape most extraction prompts start from.
pub fn default_item_schema(title: &str) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "title": title,
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "The name of the thing, as the text writes it"},
            "description": {"type": "string", "minLength": 1, "description": "What the text says about it"}
        },
        "required": ["name", "description"],
        "additionalProperties": false
    })
}

/// The sample input a new prompt is written with (Kerf's own short text on photosynthesis).
pub const SAMPLE_INPUT: &str = include_str!("../../../prompts/inputs/photosynthesis.txt");

/// A new prompt file `id` answering in `format`, for the items `schema` describes (an item
/// schema, or for `json` an array schema; `None`: [`default_item_schema`]). Its instructions
/// list the item's keys from the schema (each `oneOf` branch's for a union), it reads its input
/// from `{{ text }}`, and `sample` is its `sample-input`. It loads and compiles as written.
pub fn new_prompt(
    id: &str,
    format: ResponseType,
    schema: Option<Value>,
    sample: Option<&str>,
) -> Result<Map<String, Value>> {
    let place = format!("the new prompt {id}");
    let title = title_of(id);
    let schema = schema.unwrap_or_else(|| default_item_schema(&title));
    // The item schema, whatever was given.
    let item = match (
        schema.get("type").and_then(Value::as_str),
        schema.get("items"),
    ) {
        (Some("array"), Some(items @ Value::Object(_))) => {
            let mut item = items.as_object().cloned().unwrap_or_default();
            for key in ROOT_KEYS {
                if let Some(v) = schema.get(key) {
                    item.entry(key.to_string()).or_insert_with(|| v.clone());
                }
            }
            Value::Object(item)
        }
        _ => schema,
    };
    if !item.is_object() {
        return Err(usage(&place, "the schema must be a JSON object"));
    }
    let keys = describe_keys(&item);
    let mut map = Map::new();
    map.insert("id".into(), json!(id));
    let prompt = match format {
        ResponseType::Jsonl | ResponseType::Json => {
            let (how, requirement, example) = match format {
                ResponseType::Jsonl => (WORDING[1].0, WORDING[0].0, WORDING[2].0),
                _ => (WORDING[1].1, WORDING[0].1, WORDING[2].1),
            };
            map.insert(
                "description".into(),
                json!(format!(
                    "{title} {}",
                    if format == ResponseType::Jsonl {
                        JSONL_TAG
                    } else {
                        "(JSON array)"
                    }
                )),
            );
            format!(
                "Read the following text and extract every item it holds, as described below.\n\n{how} Each object has these keys:\n{keys}\nHere is the text:\n{{{{ text }}}}\n\nRequirements:\n{requirement}\n- Use only what the text says.\n{{% if examples %}}- {example}\n{{{{ examples }}}}\n{{% endif %}}",
            )
        }
        ResponseType::Delimited => {
            map.insert(
                "description".into(),
                json!(format!("{title} as delimited records")),
            );
            let fields = field_names(&item);
            let record = fields
                .iter()
                .map(|f| format!("{{{{ tuple_delimiter }}}}<{f}>"))
                .collect::<String>();
            map.insert(
                "delimiters".into(),
                json!({"preset": "lightrag", "records": {"record": fields}}),
            );
            format!(
                "Read the following text and extract every item it holds, as described below.\n\nFor each one, output a record on its own line:\nrecord{record}\n{keys}\nWhen finished, output {{{{ completion_delimiter }}}} on its own line.\n\nText:\n{{{{ text }}}}\n\nOutput:\n",
            )
        }
        ResponseType::Text => {
            return Err(usage(
                &place,
                "a new prompt answers in jsonl, json or delimited (text has no objects to compare)",
            ));
        }
    };
    map.insert("prompt".into(), json!(prompt));
    map.insert("response-type".into(), json!(format.as_str()));
    let schema = match format {
        ResponseType::Json => twin_schema(&item, ResponseType::Json, &place)?.0,
        _ => item,
    };
    map.insert("schema".into(), schema);
    map.insert(
        "system".into(),
        json!("You are a careful information-extraction assistant. You answer only in the requested format."),
    );
    if format == ResponseType::Delimited {
        map.insert(
            "terms".into(),
            json!({"tuple_delimiter": "<|#|>", "completion_delimiter": "<|COMPLETE|>"}),
        );
    } else {
        // Example items, one per line, when the user has some: the instructions show them.
        map.insert("terms".into(), json!({"examples": ""}));
    }
    if format == ResponseType::Json {
        map.insert("salvage".into(), json!(false));
    }
    if let Some(sample) = sample {
        map.insert("sample-input".into(), json!(sample));
    }
    crate::Prompt::from_loaded(
        PromptFile::from_value(Value::Object(map.clone()), &place, None)?,
        std::path::Path::new(&place),
    )?;
    Ok(map)
}

/// `agent-kg-extract` → `Agent kg extract`: a title for a prompt id.
fn title_of(id: &str) -> String {
    let words = id.replace(['-', '_'], " ");
    let mut chars = words.trim().chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => "Item".into(),
    }
}

fn field_names(item: &Value) -> Vec<String> {
    item.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// `- key: description` per property; a union's branches each under their title.
fn describe_keys(item: &Value) -> String {
    let lines = |schema: &Value| -> String {
        schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| {
                        let what = v
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .or_else(|| v.get("const").map(|c| format!("always {c}")))
                            .unwrap_or_else(|| "as the text gives it".into());
                        format!("- {k}: {what}\n")
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    match item
        .get("oneOf")
        .or_else(|| item.get("anyOf"))
        .and_then(Value::as_array)
    {
        Some(branches) => branches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let name = b
                    .get("title")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("Kind {}", i + 1));
                format!("{name}:\n{}", lines(b))
            })
            .collect(),
        None => lines(item),
    }
}
