//! Provider lint: what a schema uses that a provider's structured-output mode rejects, silently
//! ignores, or that Kerf must rewrite before sending — and the rewrites themselves
//! ([`openai_strict`], [`anthropic_strict`], [`gemini_json_schema`], [`gemini_schema`]). Whatever
//! a rewrite relaxes, Kerf still enforces: every reply is validated against the prompt's original
//! schema.
//!
//! The rules follow each provider's documented subset:
//! - **openai** (`response_format: json_schema`, `strict: true`): the root must be an object and
//!   not a union; every object needs `additionalProperties: false` and every property listed in
//!   `required`; `oneOf` is not accepted (`anyOf` is); `allOf`, `not`, `if`/`then`/`else`,
//!   `dependentSchemas` and `patternProperties` are not supported; string length, object size,
//!   `prefixItems` and `uniqueItems`/`contains` are not supported; `format` only from
//!   [`OPENAI_FORMATS`]; at most 10 levels of nesting, 5,000 properties, 1,000 enum values and
//!   120,000 characters of names and values in all.
//! - **anthropic** (native `output_config.format` and strict tools share one subset): the root
//!   must be an object; every object needs `additionalProperties: false`; `oneOf` is not accepted
//!   (`anyOf` is); numeric bounds, string length, `maxItems` and `minItems` above 1 are rejected
//!   with a 400; `format` only from [`ANTHROPIC_FORMATS`]; at most 24 optional properties and 16
//!   union-typed properties in a schema.
//! - **gemini** (`responseJsonSchema`, the default): JSON Schema with `$ref`/`$defs`, `anyOf`,
//!   `oneOf`, `additionalProperties`, type arrays, `prefixItems` and bounds; `const` is not
//!   supported (a one-value `enum` is); other keywords are ignored. The fallback `responseSchema`
//!   is an OpenAPI 3.0 subset: `type`, `format`, `description`, `nullable`, `enum`, `properties`,
//!   `required`, `propertyOrdering`, `items`, `minItems`, `maxItems`, `minimum`, `maximum`,
//!   `anyOf` only ([`gemini_schema`] rewrites into it).
//! - **trustgraph** (the production side of a prompt: TrustGraph's `PromptManager`): it validates
//!   replies with the full JSON Schema, so a schema's keywords need no finding; the prompt file's
//!   shape can (`prompt_file`: a schema under `object-schema` is never used in production).
//! - **llama.cpp** (GBNF from `json_schema_to_grammar`, or llguidance): unanchored `pattern`s,
//!   `not`/`if`/`dependentSchemas` are unsupported; `additionalProperties` left open is treated
//!   differently by the two engines; unbounded strings let greedy decoding spend the budget.

use serde::Serialize;
use serde_json::{Map, Value, json};

mod rewrite;

pub use rewrite::*;

/// A structured-output target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "LintTarget"))]
pub enum Provider {
    Openai,
    Anthropic,
    Gemini,
    #[serde(rename = "llama.cpp")]
    Llamacpp,
    /// TrustGraph's prompt manager, where the prompt runs in production.
    Trustgraph,
}

impl Provider {
    pub const ALL: [Provider; 5] = [
        Provider::Openai,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Llamacpp,
        Provider::Trustgraph,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Openai => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Llamacpp => "llama.cpp",
            Provider::Trustgraph => "trustgraph",
        }
    }

    pub fn parse(s: &str) -> Option<Provider> {
        match s {
            "openai" => Some(Provider::Openai),
            "anthropic" => Some(Provider::Anthropic),
            "gemini" => Some(Provider::Gemini),
            "llama.cpp" | "llamacpp" | "llama" | "local" => Some(Provider::Llamacpp),
            "trustgraph" => Some(Provider::Trustgraph),
            _ => None,
        }
    }
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Severity {
    /// Worth knowing; nothing breaks.
    Note,
    /// Accepted but not enforced by the provider (Kerf still validates after the reply).
    Ignored,
    /// Rejected as written; Kerf's export rewrites it (`kerf export --to …` shows the result).
    Rewrite,
    /// Rejected, and no faithful rewrite exists: a blocker.
    Error,
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub provider: Provider,
    pub severity: Severity,
    /// JSON pointer into the schema.
    pub pointer: String,
    pub keyword: String,
    pub message: String,
}

/// Visit every subschema with its JSON pointer and nesting depth (objects/arrays only).
fn walk<'a>(
    node: &'a Value,
    pointer: &str,
    depth: usize,
    visit: &mut dyn FnMut(&'a Value, &str, usize),
) {
    let Value::Object(map) = node else { return };
    visit(node, pointer, depth);
    let esc = |k: &str| k.replace('~', "~0").replace('/', "~1");
    for (key, child) in map {
        match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas" => {
                if let Value::Object(m) = child {
                    let nested = if key == "properties" {
                        depth + 1
                    } else {
                        depth
                    };
                    for (name, sub) in m {
                        walk(
                            sub,
                            &format!("{pointer}/{key}/{}", esc(name)),
                            nested,
                            visit,
                        );
                    }
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames" => {
                let nested = if key == "items" { depth + 1 } else { depth };
                walk(child, &format!("{pointer}/{key}"), nested, visit);
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(a) = child {
                    for (i, sub) in a.iter().enumerate() {
                        walk(sub, &format!("{pointer}/{key}/{i}"), depth, visit);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The property names an object schema lists in `required`.
fn required_names(node: &Map<String, Value>) -> Vec<&str> {
    node.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn is_object_schema(node: &Map<String, Value>) -> bool {
    node.contains_key("properties") || node.get("type").and_then(Value::as_str) == Some("object")
}

fn root_is_plain_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        && !["anyOf", "oneOf", "allOf"]
            .iter()
            .any(|k| schema.get(*k).is_some())
}

const OPENAI_BLOCKERS: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "patternProperties",
];
const OPENAI_DROPPED: &[&str] = &[
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
];
/// The `format` values OpenAI's strict mode accepts.
pub const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// OpenAI's documented size limits for one strict schema.
const OPENAI_MAX_PROPERTIES: usize = 5_000;
const OPENAI_MAX_ENUM_VALUES: usize = 1_000;
const OPENAI_MAX_CHARS: usize = 120_000;
/// An enum with more values than this may hold at most `OPENAI_MAX_BIG_ENUM_CHARS` characters.
const OPENAI_BIG_ENUM: usize = 250;
const OPENAI_MAX_BIG_ENUM_CHARS: usize = 15_000;

/// The `format` values Anthropic's structured outputs accept.
pub const ANTHROPIC_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];
/// Keywords Anthropic's schema compiler rejects with a 400 (or cannot compile).
const ANTHROPIC_REJECTED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "minContains",
    "maxContains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Anthropic's documented complexity limits for one schema.
pub const ANTHROPIC_MAX_OPTIONAL: usize = 24;
pub const ANTHROPIC_MAX_UNIONS: usize = 16;

/// What in a schema passes OpenAI's size limits for one strict schema: (keyword, message).
fn openai_size(schema: &Value) -> Vec<(&'static str, String)> {
    let (mut properties, mut enum_values, mut chars) = (0usize, 0usize, 0usize);
    let mut big_enums = Vec::new();
    let text_len = |v: &Value| match v {
        Value::String(s) => s.chars().count(),
        other => other.to_string().len(),
    };
    walk(schema, "", 0, &mut |node, p, _| {
        let Some(m) = node.as_object() else { return };
        for key in ["properties", "$defs", "definitions"] {
            if let Some(names) = m.get(key).and_then(Value::as_object) {
                if key == "properties" {
                    properties += names.len();
                }
                chars += names.keys().map(|k| k.chars().count()).sum::<usize>();
            }
        }
        if let Some(values) = m.get("enum").and_then(Value::as_array) {
            enum_values += values.len();
            let len: usize = values.iter().map(text_len).sum();
            chars += len;
            if values.len() > OPENAI_BIG_ENUM && len > OPENAI_MAX_BIG_ENUM_CHARS {
                big_enums.push((p.to_string(), values.len(), len));
            }
        }
        if let Some(c) = m.get("const") {
            chars += text_len(c);
        }
    });
    let mut out = Vec::new();
    if properties > OPENAI_MAX_PROPERTIES {
        out.push(("properties", format!("{properties} properties; strict mode allows at most {OPENAI_MAX_PROPERTIES} in one schema")));
    }
    if enum_values > OPENAI_MAX_ENUM_VALUES {
        out.push(("enum", format!("{enum_values} enum values; strict mode allows at most {OPENAI_MAX_ENUM_VALUES} in one schema")));
    }
    if chars > OPENAI_MAX_CHARS {
        out.push(("properties", format!("{chars} characters of property names, definition names, enum and const values; strict mode allows at most {OPENAI_MAX_CHARS}")));
    }
    for (p, n, len) in big_enums {
        out.push(("enum", format!("the enum at {p} has {n} values of {len} characters; past {OPENAI_BIG_ENUM} values strict mode allows at most {OPENAI_MAX_BIG_ENUM_CHARS} characters")));
    }
    out
}

/// Why Anthropic refuses `keyword: value` in a schema node, if it does.
fn anthropic_unsupported(keyword: &str, value: &Value) -> Option<String> {
    if ANTHROPIC_REJECTED.contains(&keyword) {
        return Some(format!(
            "`{keyword}` is rejected by Anthropic's schema subset"
        ));
    }
    match keyword {
        "minItems" if value.as_u64().is_some_and(|n| n > 1) => {
            Some(format!("`minItems: {value}`: only 0 or 1 is accepted"))
        }
        "format"
            if !value
                .as_str()
                .is_some_and(|f| ANTHROPIC_FORMATS.contains(&f)) =>
        {
            Some(format!("`format: {value}` is not one Anthropic accepts"))
        }
        _ => None,
    }
}

/// Keywords Gemini's `responseJsonSchema` reads (others are ignored).
const GEMINI_JSON_SCHEMA_KEYWORDS: &[&str] = &[
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "$schema",
    "definitions",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// How many optional and union-typed properties a schema has (Anthropic counts both).
struct Complexity {
    optional: usize,
    unions: usize,
}

fn complexity(schema: &Value) -> Complexity {
    let mut c = Complexity {
        optional: 0,
        unions: 0,
    };
    walk(schema, "", 0, &mut |node, _, _| {
        let Some(m) = node.as_object() else { return };
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            let required = required_names(m);
            c.optional += props
                .keys()
                .filter(|k| !required.contains(&k.as_str()))
                .count();
        }
        if m.contains_key("anyOf")
            || m.contains_key("oneOf")
            || m.get("type").is_some_and(Value::is_array)
        {
            c.unions += 1;
        }
    });
    c
}

const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "propertyOrdering",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "example",
];

/// Lint `schema` for one provider.
pub fn lint(schema: &Value, provider: Provider) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |severity, pointer: &str, keyword: &str, message: String| {
        out.push(Finding {
            provider,
            severity,
            pointer: if pointer.is_empty() {
                "/".into()
            } else {
                pointer.into()
            },
            keyword: keyword.into(),
            message,
        })
    };
    match provider {
        Provider::Openai => {
            if !root_is_plain_object(schema) {
                add(Severity::Rewrite, "", "type", "the root must be an object (not an array or a union); the export wraps it in an object".into());
            }
            walk(schema, "", 0, &mut |node, p, depth| {
                let Some(m) = node.as_object() else { return };
                if depth > 10 {
                    add(
                        Severity::Error,
                        p,
                        "properties",
                        format!("nested {depth} levels deep; OpenAI allows at most 10"),
                    );
                }
                for k in m.keys() {
                    if OPENAI_BLOCKERS.contains(&k.as_str()) {
                        add(
                            Severity::Error,
                            p,
                            k,
                            format!(
                                "`{k}` is not supported in strict mode and cannot be rewritten faithfully"
                            ),
                        );
                    } else if OPENAI_DROPPED.contains(&k.as_str()) {
                        add(
                            Severity::Rewrite,
                            p,
                            k,
                            format!(
                                "`{k}` is not supported in strict mode; the export removes it (Kerf still checks it after the reply)"
                            ),
                        );
                    }
                }
                if m.contains_key("oneOf") {
                    add(Severity::Rewrite, p, "oneOf", "`oneOf` is not supported; the export uses `anyOf` (equivalent when branches are discriminated by `type`)".into());
                }
                if m.contains_key("prefixItems") {
                    add(Severity::Rewrite, p, "prefixItems", "`prefixItems` (tuples) is not supported; Kerf sends `items` as an `anyOf` of the tuple's members and checks the order after the reply".into());
                }
                if let Some(f) = m.get("format")
                    && !f.as_str().is_some_and(|f| OPENAI_FORMATS.contains(&f))
                {
                    add(
                        Severity::Rewrite,
                        p,
                        "format",
                        format!(
                            "`format: {f}` is not one strict mode accepts ({}); Kerf removes it and checks it after the reply",
                            OPENAI_FORMATS.join(", ")
                        ),
                    );
                }
                if is_object_schema(m) {
                    if m.get("additionalProperties") != Some(&Value::Bool(false)) {
                        add(
                            Severity::Rewrite,
                            p,
                            "additionalProperties",
                            "every object needs `additionalProperties: false`; the export adds it"
                                .into(),
                        );
                    }
                    let required = required_names(m);
                    if let Some(props) = m.get("properties").and_then(Value::as_object) {
                        for name in props.keys().filter(|n| !required.contains(&n.as_str())) {
                            add(
                                Severity::Rewrite,
                                p,
                                "required",
                                format!(
                                    "optional property `{name}`: every property must be required; the export makes it required and nullable"
                                ),
                            );
                        }
                    }
                }
            });
            for problem in openai_size(schema) {
                add(Severity::Error, "", problem.0, problem.1);
            }
        }
        Provider::Anthropic => {
            if !root_is_plain_object(schema) {
                add(
                    Severity::Rewrite,
                    "",
                    "type",
                    "the root must be an object (not an array or a union); Kerf wraps it".into(),
                );
            }
            walk(schema, "", 0, &mut |node, p, _| {
                let Some(m) = node.as_object() else { return };
                for (k, v) in m {
                    if let Some(why) = anthropic_unsupported(k, v) {
                        add(
                            Severity::Rewrite,
                            p,
                            k,
                            format!(
                                "{why}; Kerf moves it into the `description` (the model still reads it) and checks it after the reply"
                            ),
                        );
                    }
                }
                if m.contains_key("oneOf") {
                    add(Severity::Rewrite, p, "oneOf", "`oneOf` is not supported; Kerf sends `anyOf` (equivalent when branches are discriminated by `type`)".into());
                }
                if is_object_schema(m) && m.get("additionalProperties") != Some(&Value::Bool(false))
                {
                    add(
                        Severity::Rewrite,
                        p,
                        "additionalProperties",
                        "every object needs `additionalProperties: false`; Kerf adds it".into(),
                    );
                }
            });
            let c = complexity(schema);
            if c.optional > ANTHROPIC_MAX_OPTIONAL {
                add(
                    Severity::Error,
                    "",
                    "required",
                    format!(
                        "{} optional properties; Anthropic compiles at most {ANTHROPIC_MAX_OPTIONAL} in one schema (make some required, or split the prompt)",
                        c.optional
                    ),
                );
            }
            if c.unions > ANTHROPIC_MAX_UNIONS {
                add(
                    Severity::Error,
                    "",
                    "anyOf",
                    format!(
                        "{} properties with union types (`anyOf`/`oneOf` or a type array); Anthropic compiles at most {ANTHROPIC_MAX_UNIONS} in one schema",
                        c.unions
                    ),
                );
            }
        }
        Provider::Gemini => {
            walk(schema, "", 0, &mut |node, p, _| {
                let Some(m) = node.as_object() else { return };
                for k in m.keys() {
                    if k == "const" {
                        add(Severity::Rewrite, p, k, "`const` is not supported by `responseJsonSchema`; Kerf sends a one-value `enum`".into());
                    } else if !GEMINI_JSON_SCHEMA_KEYWORDS.contains(&k.as_str()) {
                        add(
                            Severity::Ignored,
                            p,
                            k,
                            format!(
                                "`{k}` is ignored by `responseJsonSchema` (not enforced while generating; Kerf validates it after the reply)"
                            ),
                        );
                    }
                }
            });
            // What a run refuses, lint says: the `response_schema` mode's rewrite can explode.
            for f in refusals(schema) {
                add(f.severity, &f.pointer, &f.keyword, f.message);
            }
        }
        Provider::Llamacpp => {
            walk(schema, "", 0, &mut |node, p, _| {
                let Some(m) = node.as_object() else { return };
                for k in [
                    "not",
                    "if",
                    "dependentSchemas",
                    "uniqueItems",
                    "contains",
                    "multipleOf",
                ] {
                    if m.contains_key(k) {
                        add(
                            Severity::Ignored,
                            p,
                            k,
                            format!(
                                "`{k}` cannot be expressed in a grammar; decoding will not enforce it (Kerf validates after)"
                            ),
                        );
                    }
                }
                if let Some(pat) = m.get("pattern").and_then(Value::as_str)
                    && !(pat.starts_with('^') && pat.ends_with('$'))
                {
                    add(
                        Severity::Error,
                        p,
                        "pattern",
                        format!(
                            "llama.cpp's grammar converter needs patterns anchored with ^…$, got `{pat}`"
                        ),
                    );
                }
                if is_object_schema(m) && !m.contains_key("additionalProperties") {
                    add(Severity::Note, p, "additionalProperties", "not set: llguidance allows extra properties here, llama.cpp's GBNF converter forbids them; set it explicitly".into());
                }
                if m.get("type").and_then(Value::as_str) == Some("string")
                    && !m.contains_key("maxLength")
                    && !m.contains_key("enum")
                    && !m.contains_key("const")
                {
                    add(Severity::Note, p, "maxLength", "unbounded string: small models under greedy decoding can spend the whole budget inside one string; consider `maxLength`".into());
                }
            });
        }
        // TrustGraph validates with the whole of JSON Schema (python-jsonschema).
        Provider::Trustgraph => {}
    }
    // Kerf checks every reply against the schema whatever the provider: a pattern that needs
    // backtracking makes that check cost per value, up to the step limit.
    walk(schema, "", 0, &mut |node, p, _| {
        let Value::Object(m) = node else { return };
        let mut patterns: Vec<(String, &str)> = Vec::new();
        if let Some(pat) = m.get("pattern").and_then(Value::as_str) {
            patterns.push((p.to_string(), pat));
        }
        if let Some(Value::Object(props)) = m.get("patternProperties") {
            patterns.extend(
                props
                    .keys()
                    .map(|k| (format!("{p}/patternProperties"), k.as_str())),
            );
        }
        for (pointer, pat) in patterns {
            if !crate::schema::pattern_is_linear(pat) {
                out.push(Finding {
                    provider,
                    severity: Severity::Note,
                    pointer: if pointer.is_empty() { "/".into() } else { pointer },
                    keyword: if m.contains_key("pattern") && m["pattern"] == pat {
                        "pattern".into()
                    } else {
                        "patternProperties".into()
                    },
                    message: format!(
                        "`{}` needs backtracking (lookaround or a backreference): Kerf checks it with a backtracking engine, slowly on long values, and a value it cannot decide within its step limit is dropped as `unchecked`; without those features every pattern of the schema is checked in linear time",
                        crate::error::quoted(pat)
                    ),
                });
            }
        }
    });
    out
}

/// What a run refuses to send, whatever its mode allows otherwise: Gemini's `response_schema`
/// mode (and `auto`'s fallback to it) inlines `$ref`s, and a recursive schema passes
/// [`MAX_REWRITE_NODES`]. `kerf check` and `kerf lint --provider gemini` report these, so they
/// say what the run will say.
pub fn refusals(schema: &Value) -> Vec<Finding> {
    let rewrite = gemini_schema(schema);
    if !rewrite.too_large {
        return Vec::new();
    }
    rewrite
        .findings
        .into_iter()
        .filter(|f| f.severity == Severity::Error && f.keyword == "$ref")
        .map(|f| Finding {
            message: format!(
                "a Gemini run in `response_schema` mode refuses this schema: {}",
                f.message
            ),
            ..f
        })
        .collect()
}

/// Lint a prompt file for one provider: its schema (`lint`), and what the file's own shape means
/// there — a schema under `object-schema` is ignored by TrustGraph (replies not validated in
/// production; severity `ignored`, keyword `object-schema`).
pub fn prompt_file(file: &crate::PromptFile, provider: Provider) -> Vec<Finding> {
    let mut out = file
        .schema
        .as_ref()
        .map(|s| lint(s, provider))
        .unwrap_or_default();
    if provider == Provider::Trustgraph
        && file.schema.is_some()
        && file.schema_key == crate::prompt::SchemaKey::ObjectSchema
    {
        out.insert(
            0,
            Finding {
                provider,
                severity: Severity::Ignored,
                pointer: "/".into(),
                keyword: "object-schema".into(),
                message: crate::prompt::OBJECT_SCHEMA_IGNORED.into(),
            },
        );
    }
    out
}
