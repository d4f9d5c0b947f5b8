//! Prompt files: a TrustGraph template object (`prompt`, `response-type`, `schema`) plus optional
//! Kerf keys. A bare TrustGraph template object is a valid prompt file. `object-schema` (the key
//! TrustGraph's own shipped jsonl prompts use) is read like `schema` and kept under its own name
//! when the file is written or exported: TrustGraph's `PromptManager` ignores that key, so in
//! production those replies are not validated, and silently renaming it would change what
//! production does. Loading says so (a warning), and so does `kerf lint` (provider `trustgraph`).
//!
//! Loading is forgiving where it is safe and strict where it matters: an unknown key is a warning
//! (a typo should not stop a run, but must be visible); a key with the wrong type is an error that
//! names the key and its line.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result, read_text};

/// How a reply is turned into objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ResponseType {
    /// The reply as is.
    #[default]
    Text,
    /// One JSON value; `schema` describes the whole value (typically an array).
    Json,
    /// One JSON object per line; `schema` describes each line.
    Jsonl,
    /// LightRAG-style delimited records; `schema` (optional) describes each record as an object.
    Delimited,
}

impl ResponseType {
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseType::Text => "text",
            ResponseType::Json => "json",
            ResponseType::Jsonl => "jsonl",
            ResponseType::Delimited => "delimited",
        }
    }

    pub const ALL: [ResponseType; 4] = [
        ResponseType::Text,
        ResponseType::Json,
        ResponseType::Jsonl,
        ResponseType::Delimited,
    ];
}

impl std::str::FromStr for ResponseType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ResponseType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "unknown response type `{s}` (expected text, json, jsonl or delimited)"
                ))
            })
    }
}

impl std::fmt::Display for ResponseType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The key a prompt file keeps its schema under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaKey {
    /// `schema`: TrustGraph validates replies with it.
    #[default]
    Schema,
    /// `object-schema`: TrustGraph ignores it (no validation in production); Kerf validates.
    ObjectSchema,
}

impl SchemaKey {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKey::Schema => "schema",
            SchemaKey::ObjectSchema => "object-schema",
        }
    }

    /// The key a prompt file's JSON object keeps its schema under.
    pub fn of(map: &Map<String, Value>) -> SchemaKey {
        if map.contains_key("object-schema") && !map.contains_key("schema") {
            SchemaKey::ObjectSchema
        } else {
            SchemaKey::Schema
        }
    }
}

/// `map` with the key `from` renamed to `to` where it stands (the other keys keep their order).
pub fn rename_key(map: Map<String, Value>, from: &str, to: &str) -> Map<String, Value> {
    map.into_iter()
        .map(|(k, v)| {
            if k == from {
                (to.to_string(), v)
            } else {
                (k, v)
            }
        })
        .collect()
}

/// What TrustGraph does with a prompt whose schema is under `object-schema`.
pub const OBJECT_SCHEMA_IGNORED: &str = "TrustGraph ignores `object-schema`: in production this prompt's replies are not validated; rename it to `schema` to validate them";

/// Post-processing applied to every accepted object, after parsing (see the parsers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostRules {
    /// Fields that must be present after the other rules; an object without one is dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ensure: Vec<String>,
    /// Fields removed from every object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// Fields copied into every object from the run's variables (e.g. a document id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passthrough: Vec<String>,
    /// Convert strings to numbers/booleans where the schema asks for those types (`"0.9"` → `0.9`).
    /// A value that cannot be converted drops the object (kind `coerce`), it is never guessed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coerce: bool,
}

impl PostRules {
    pub fn is_empty(&self) -> bool {
        self.ensure.is_empty()
            && self.drop.is_empty()
            && self.passthrough.is_empty()
            && !self.coerce
    }
}

/// A named delimiter set for the `delimited` response type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DelimiterPreset {
    /// LightRAG's current format: one record per line, `entity<|#|>name<|#|>type<|#|>description`,
    /// `relation<|#|>source<|#|>target<|#|>keywords<|#|>description`, ending `<|COMPLETE|>`.
    #[default]
    Lightrag,
    /// LightRAG's older format: `("entity"<|>name<|>type<|>description)` records separated by `##`.
    LightragLegacy,
}

/// Delimiters for the `delimited` response type. Unset fields come from the preset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delimiters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<DelimiterPreset>,
    /// Between the fields of a record (LightRAG's `tuple_delimiter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuple: Option<String>,
    /// Between records (LightRAG's `record_delimiter`; a newline in the current format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// After the last record (LightRAG's `completion_delimiter`); its absence means the reply was cut off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<String>,
    /// Record types: the tag that starts a record, and the names of its fields after the tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<BTreeMap<String, Vec<String>>>,
}

/// A prompt file as written on disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(
    title = "Kerf prompt file",
    description = "A TrustGraph prompt template object plus optional Kerf keys."
)]
pub struct PromptFile {
    /// Identifier (TrustGraph's template id). Defaults to the file name without `.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the prompt is for, shown in lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The user-turn template (minijinja; TrustGraph's Jinja-style syntax).
    pub prompt: String,
    /// How the reply is parsed. TrustGraph's values are `text`, `json` and `jsonl`.
    #[serde(rename = "response-type", default)]
    pub response_type: ResponseType,
    /// JSON Schema: of the whole value for `json`, of each line for `jsonl`, of each record for
    /// `delimited`. `object-schema` is read the same way (and kept: see `schema_key`).
    #[serde(
        default,
        alias = "object-schema",
        skip_serializing_if = "Option::is_none"
    )]
    pub schema: Option<Value>,
    /// Which key the schema was read from, and is written back under.
    #[serde(skip)]
    pub schema_key: SchemaKey,
    /// The system-turn template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Default template variables (merged after global terms, before the run's variables).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(with = "BTreeMap<String, Value>")]
    pub terms: Map<String, Value>,
    /// For `json`: recover what can be recovered (see `kerf parse --salvage`) instead of failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salvage: Option<bool>,
    /// Post-processing rules applied to every accepted object.
    #[serde(default, skip_serializing_if = "PostRules::is_empty")]
    pub post: PostRules,
    /// Delimiters for the `delimited` response type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delimiters: Option<Delimiters>,
    /// The id of a prompt that does the same extraction in another output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<String>,
    /// A sample input document, relative to the prompt file.
    #[serde(
        rename = "sample-input",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub sample_input: Option<String>,
    /// The template variable that receives the input document (default `text`).
    #[serde(
        rename = "input-variable",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub input_variable: Option<String>,
    /// Validate, then re-ask (TypeChat / Instructor style): when a reply fails parsing or its
    /// schema and was not cut off by its budget, the problems go back to the model as a
    /// follow-up turn, up to `max-attempts` replies in all. A truncated reply is never repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
    /// How records are matched when scored against expected ones (`kerf score`, `kerf eval`).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_spec: Option<crate::eval::MatchSpec>,
    /// Tests for CI (`kerf test`): documents, the records each should yield, and the figures
    /// the reply must reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<PromptTest>,
}

/// One test a prompt file carries: a document (or variables), the records a correct reply
/// holds, and the least precision / recall / F1 it must score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptTest {
    /// Unique within the file; names the test in reports and JUnit.
    pub name: String,
    /// The document, for the prompt's input variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Other variables (or the input variable itself).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub vars: Map<String, Value>,
    /// The records a correct reply holds (in the prompt's record shape; `aliases` allowed).
    #[serde(default)]
    pub expected: Vec<Value>,
    /// The least figures the reply must score; none given: the reply must only be measured.
    #[serde(default, skip_serializing_if = "Minimums::is_empty")]
    pub min: Minimums,
    /// The output token budget (default: the command's `--max-tokens`).
    #[serde(
        rename = "max-tokens",
        alias = "max_tokens",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

/// The `min` key of a prompt test: each figure from 0 to 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Minimums {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub precision: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub recall: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub f1: Option<f64>,
}

impl Minimums {
    pub fn is_empty(&self) -> bool {
        self.precision.is_none() && self.recall.is_none() && self.f1.is_none()
    }

    /// Each figure asked for.
    pub fn each(&self) -> impl Iterator<Item = (crate::eval::score::Metric, f64)> {
        use crate::eval::score::Metric;
        [
            (Metric::Precision, self.precision),
            (Metric::Recall, self.recall),
            (Metric::F1, self.f1),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
    }
}

/// The `repair` key of a prompt file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Repair {
    /// Replies in all, the first included (2 = one repair).
    #[serde(rename = "max-attempts", alias = "max_attempts")]
    #[schemars(range(min = 1, max = 10))]
    pub max_attempts: u32,
}

impl Repair {
    pub const MIN_ATTEMPTS: u32 = 1;
    pub const MAX_ATTEMPTS: u32 = 10;
}

/// Whether `rel` is a relative path that stays inside its base folder: no root, no drive or
/// UNC prefix, no `..` (either separator counts, so a file written on Windows is judged the same).
pub fn is_inside_relative(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with(['/', '\\'])
        && !rel.contains(':')
        && rel.split(['/', '\\']).all(|part| part != "..")
}

/// The sample input `rel` of a prompt in `dir`, or `None` when it would leave that folder (a path
/// that is not `is_inside_relative`, or a symbolic link pointing out of it).
pub fn resolve_sample_input(dir: &Path, rel: &str) -> Option<std::path::PathBuf> {
    if !is_inside_relative(rel) {
        return None;
    }
    let joined = dir.join(rel);
    match (joined.canonicalize(), dir.canonicalize()) {
        (Ok(real), Ok(base)) if !real.starts_with(&base) => None,
        _ => Some(joined),
    }
}

/// A prompt file and what loading it noticed.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: PromptFile,
    /// Non-fatal findings (unknown keys), each naming the key and line.
    pub warnings: Vec<String>,
}

/// The JSON Schema of the prompt-file format (published as `schemas/kerf-prompt-file.schema.json`).
pub fn prompt_file_json_schema() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(PromptFile)).unwrap_or(Value::Null);
    // serde aliases are invisible to schemars: publish `object-schema` too, so editors accept it.
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
        && let Some(s) = props.get("schema").cloned()
    {
        props.insert("object-schema".into(), s);
    }
    schema
}

fn known_keys() -> &'static [String] {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        prompt_file_json_schema()
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    })
}

impl PromptFile {
    /// Tests one prompt file may carry (`tests`).
    pub const MAX_TESTS: usize = 1_000;

    /// Load a prompt file from disk; the id defaults to the file stem.
    pub fn load(path: &Path) -> Result<Loaded> {
        Ok(Self::load_with_text(path)?.0)
    }

    /// [`load`](Self::load), with the text it was read from: one read, so the file that runs
    /// and the text the history keeps for it cannot differ.
    pub fn load_with_text(path: &Path) -> Result<(Loaded, String)> {
        let text = read_text(path)?;
        let mut loaded = Self::from_json_str(&text, &path.display().to_string())?;
        if loaded.file.id.is_none() {
            loaded.file.id = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        }
        Ok((loaded, text))
    }

    /// Parse a prompt file's text. `place` names it in errors and warnings.
    pub fn from_json_str(text: &str, place: &str) -> Result<Loaded> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: Value = serde_json::from_str(text).map_err(|e| Error::json(place, &e))?;
        Self::from_value(value, place, Some(text))
    }

    /// Build a prompt file from a parsed JSON value (`source` is its text, to name lines).
    pub fn from_value(value: Value, place: &str, source: Option<&str>) -> Result<Loaded> {
        let Value::Object(mut map) = value else {
            return Err(Error::PromptFile {
                place: place.into(),
                message: format!(
                    "a prompt file must be a JSON object with at least a `prompt` key, not {}",
                    kind_of(&value)
                ),
            });
        };
        let at = |key: &str| {
            source
                .and_then(|s| key_line(s, key))
                .map(|l| format!(":{l}"))
                .unwrap_or_default()
        };
        let mut warnings = Vec::new();
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !known_keys().contains(k))
            .cloned()
            .collect();
        for key in unknown {
            warnings.push(format!("{place}{}: unknown key `{key}` ignored", at(&key)));
            map.remove(&key);
        }
        let schema_key = SchemaKey::of(&map);
        if schema_key == SchemaKey::ObjectSchema {
            warnings.push(format!(
                "{place}{}: {OBJECT_SCHEMA_IGNORED}",
                at("object-schema")
            ));
        }
        if !map.contains_key("prompt") {
            return Err(Error::PromptFile {
                place: place.into(),
                message: "missing key `prompt` (the template text)".into(),
            });
        }
        let mut file: PromptFile =
            serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
                let path = e.path().to_string();
                let top = path.split(['.', '[']).next().unwrap_or("").to_string();
                Error::PromptFile {
                    place: format!("{place}{}", at(&top)),
                    message: format!(
                        "key `{path}`: {}",
                        crate::error::strip_position(&e.inner().to_string())
                    ),
                }
            })?;
        file.schema_key = schema_key;
        // Bounds the schema promises but serde does not check: each repair is a paid request
        // re-sending the whole conversation.
        if let Some(r) = file.repair
            && !(Repair::MIN_ATTEMPTS..=Repair::MAX_ATTEMPTS).contains(&r.max_attempts)
        {
            return Err(Error::PromptFile {
                place: format!("{place}{}", at("repair")),
                message: format!(
                    "key `repair.max-attempts`: must be between {} and {} (replies in all), got {}",
                    Repair::MIN_ATTEMPTS,
                    Repair::MAX_ATTEMPTS,
                    r.max_attempts
                ),
            });
        }
        if let Some((key, v)) = file.match_spec.as_ref().and_then(|m| m.out_of_range()) {
            return Err(Error::PromptFile {
                place: format!("{place}{}", at("match")),
                message: format!("key `match.{key}`: must be between 0 and 1, got {v}"),
            });
        }
        if file.tests.len() > Self::MAX_TESTS {
            return Err(Error::PromptFile {
                place: format!("{place}{}", at("tests")),
                message: format!(
                    "key `tests`: {} tests, more than the {} one prompt file may hold (each is a paid request; an eval takes a dataset of any size)",
                    file.tests.len(),
                    Self::MAX_TESTS
                ),
            });
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, t) in file.tests.iter().enumerate() {
            let problem = if t.name.trim().is_empty() {
                Some("a test needs a `name`".to_string())
            } else if !names.insert(t.name.as_str()) {
                Some(format!("test name `{}` is used twice", t.name))
            } else if t.input.is_none() && t.vars.is_empty() {
                Some(format!("test `{}` has neither `input` nor `vars`", t.name))
            } else if t.max_tokens == Some(0) {
                Some(format!("test `{}`: `max-tokens` must be above 0", t.name))
            } else {
                t.min
                    .each()
                    .find(|(_, v)| !(0.0..=1.0).contains(v))
                    .map(|(k, v)| {
                        format!(
                            "test `{}`: `min.{}` must be between 0 and 1, got {v}",
                            t.name,
                            k.name()
                        )
                    })
            };
            if let Some(message) = problem {
                return Err(Error::PromptFile {
                    place: format!("{place}{}", at("tests")),
                    message: format!("/tests/{i}: {message}"),
                });
            }
        }
        // The sample input is read when the prompt is opened and sent with it: it must be a file
        // in the prompt's own folder, not any path on the machine.
        if let Some(rel) = &file.sample_input
            && !is_inside_relative(rel)
        {
            return Err(Error::PromptFile {
                place: format!("{place}{}", at("sample-input")),
                message: format!(
                    "key `sample-input`: must name a file inside the prompt's folder (a relative path without `..`), got `{rel}`"
                ),
            });
        }
        Ok(Loaded { file, warnings })
    }

    /// The prompt's id, or `"prompt"` when it has none.
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or("prompt")
    }

    /// The variable that receives the input document.
    pub fn input_variable(&self) -> &str {
        self.input_variable.as_deref().unwrap_or("text")
    }

    /// The prompt file as a JSON object, the schema under the key it was read from.
    pub fn to_value(&self) -> Map<String, Value> {
        let Ok(Value::Object(map)) = serde_json::to_value(self) else {
            return Map::new();
        };
        match self.schema_key {
            SchemaKey::Schema => map,
            // Renamed in place, so the key keeps its position.
            key => rename_key(map, "schema", key.as_str()),
        }
    }

    /// Serialise as a prompt file (pretty JSON, keys in a stable order, newline at the end).
    pub fn to_json_string(&self) -> String {
        let mut s =
            serde_json::to_string_pretty(&Value::Object(self.to_value())).unwrap_or_default();
        s.push('\n');
        s
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The 1-based line where `"key"` first appears as an object key in `text`.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let at = from + i;
        let rest = text[at + needle.len()..].trim_start();
        if rest.starts_with(':') {
            return Some(text[..at].bytes().filter(|&b| b == b'\n').count() + 1);
        }
        from = at + needle.len();
    }
    None
}
