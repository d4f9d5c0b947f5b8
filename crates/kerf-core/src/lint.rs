//! Provider lint: what a schema uses that a provider's structured-output mode rejects, silently
//! ignores, or that Kerf's export must rewrite — and the OpenAI strict-mode rewrite itself.
//!
//! The rules follow each provider's documented subset:
//! - **openai** (`response_format: json_schema`, `strict: true`): the root must be an object and
//!   not a union; every object needs `additionalProperties: false` and every property listed in
//!   `required`; `oneOf` is not accepted (`anyOf` is); `allOf`, `not`, `if`/`then`/`else`,
//!   `dependentSchemas` and `patternProperties` are not supported; string length, object size and
//!   `uniqueItems`/`contains` constraints are not supported; at most 10 levels of nesting.
//! - **anthropic** (forced tool use): `input_schema` must be an object at the root; constraints are
//!   not enforced while generating (Kerf validates after).
//! - **gemini** (`responseSchema`, an OpenAPI 3.0 subset): `type`, `format`, `description`,
//!   `nullable`, `enum`, `properties`, `required`, `propertyOrdering`, `items`, `minItems`,
//!   `maxItems`, `minimum`, `maximum`, `anyOf`; anything else (`oneOf`, `const`, `$ref`,
//!   `additionalProperties`, type arrays) is rejected or ignored.
//! - **trustgraph** (the production side of a prompt: TrustGraph's `PromptManager`): it validates
//!   replies with the full JSON Schema, so a schema's keywords need no finding; the prompt file's
//!   shape can (`prompt_file`: a schema under `object-schema` is never used in production).
//! - **llama.cpp** (GBNF from `json_schema_to_grammar`, or llguidance): unanchored `pattern`s,
//!   `not`/`if`/`dependentSchemas` are unsupported; `additionalProperties` left open is treated
//!   differently by the two engines; unbounded strings let greedy decoding spend the budget.

use serde::Serialize;
use serde_json::{Map, Value, json};

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
                    let required: Vec<&str> = m
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
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
        }
        Provider::Anthropic => {
            if !root_is_plain_object(schema) {
                add(
                    Severity::Rewrite,
                    "",
                    "type",
                    "a tool's `input_schema` must be an object at the root; the export wraps it"
                        .into(),
                );
            }
            walk(schema, "", 0, &mut |node, p, _| {
                let Some(m) = node.as_object() else { return };
                for k in [
                    "minLength",
                    "maxLength",
                    "pattern",
                    "minimum",
                    "maximum",
                    "multipleOf",
                    "minItems",
                    "maxItems",
                ] {
                    if m.contains_key(k) {
                        add(
                            Severity::Ignored,
                            p,
                            k,
                            format!(
                                "`{k}` is not enforced during generation with forced tool use; Kerf validates it after the reply"
                            ),
                        );
                    }
                }
            });
        }
        Provider::Gemini => {
            walk(schema, "", 0, &mut |node, p, _| {
                let Some(m) = node.as_object() else { return };
                for (k, v) in m {
                    if GEMINI_KEYWORDS.contains(&k.as_str()) {
                        if k == "type" && v.is_array() {
                            add(Severity::Error, p, k, "type arrays (`[\"string\", \"null\"]`) are not accepted; use a single type with `nullable: true`".into());
                        }
                        continue;
                    }
                    let hint = match k.as_str() {
                        "oneOf" => " (use `anyOf`)",
                        "const" => " (use `enum` with one value)",
                        "$ref" | "$defs" | "definitions" => " (inline the definitions)",
                        "additionalProperties" => {
                            " (Gemini cannot forbid extra properties; Kerf's validation will)"
                        }
                        _ => "",
                    };
                    let severity = if matches!(
                        k.as_str(),
                        "$schema" | "$id" | "$comment" | "examples" | "default"
                    ) {
                        Severity::Ignored
                    } else {
                        Severity::Error
                    };
                    add(
                        severity,
                        p,
                        k,
                        format!("`{k}` is outside Gemini's response-schema subset{hint}"),
                    );
                }
            });
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
    out
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

/// A schema rewritten for a provider, with every change it made.
#[derive(Debug, Clone, Serialize)]
pub struct Rewrite {
    pub schema: Value,
    /// Changes and blockers, as lint findings (`rewrite` = changed, `error` = blocker kept as is).
    pub findings: Vec<Finding>,
    /// The key a non-object root was wrapped under (the reply's value is found there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrapped_in: Option<&'static str>,
    /// The rewrite stopped at `MAX_REWRITE_NODES` (recursive `$ref`s inlined): `schema` is not
    /// the schema's meaning and must not be sent. A finding (`error`) says so.
    #[serde(skip)]
    pub too_large: bool,
}

/// The most subschemas a rewrite writes. Inlining `$ref`s multiplies them: a ~300-byte schema
/// that refers to itself from several properties grew to 2.9 GB before this limit.
pub const MAX_REWRITE_NODES: usize = 10_000;

impl Rewrite {
    pub fn blockers(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
    }
}

/// Wrap a non-object root in an object under `key`, moving definitions to the new root so local
/// `$ref`s keep resolving.
pub fn wrap_root(schema: &Value, key: &str) -> Value {
    let mut inner = schema.clone();
    let mut root = Map::new();
    root.insert("type".into(), json!("object"));
    if let Value::Object(m) = &mut inner {
        m.remove("$schema");
        for defs in ["$defs", "definitions"] {
            if let Some(d) = m.remove(defs) {
                root.insert(defs.into(), d);
            }
        }
    }
    root.insert("properties".into(), json!({ key: inner }));
    root.insert("required".into(), json!([key]));
    root.insert("additionalProperties".into(), json!(false));
    Value::Object(root)
}

/// The wrapper key for a root that is not an object: `items` for arrays, `value` otherwise.
pub fn wrap_key(schema: &Value) -> &'static str {
    if schema.get("type").and_then(Value::as_str) == Some("array") {
        "items"
    } else {
        "value"
    }
}

/// Rewrite `schema` into one OpenAI's strict mode accepts, listing every change and blocker.
pub fn openai_strict(schema: &Value) -> Rewrite {
    let findings = lint(schema, Provider::Openai);
    let wrapped_in = (!root_is_plain_object(schema)).then(|| wrap_key(schema));
    let mut out = match wrapped_in {
        None => schema.clone(),
        Some(key) => wrap_root(schema, key),
    };
    if let Value::Object(m) = &mut out {
        m.remove("$schema");
    }
    strictify(&mut out);
    Rewrite {
        schema: out,
        findings,
        wrapped_in,
        too_large: false,
    }
}

fn strictify(node: &mut Value) {
    let Value::Object(m) = node else { return };
    if let Some(branches) = m.remove("oneOf") {
        m.insert("anyOf".into(), branches);
    }
    for k in OPENAI_DROPPED {
        m.remove(*k);
    }
    if is_object_schema(m) {
        m.insert("additionalProperties".into(), Value::Bool(false));
        let mut required: Vec<Value> = m
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            for (name, prop) in props.iter_mut() {
                if !required.iter().any(|r| r.as_str() == Some(name)) {
                    make_nullable(prop);
                    required.push(Value::String(name.clone()));
                }
            }
        }
        if m.contains_key("properties") {
            m.insert("required".into(), Value::Array(required));
        }
    }
    for (key, child) in m.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                if let Value::Object(sub) = child {
                    sub.values_mut().for_each(strictify);
                }
            }
            "items" | "additionalProperties" => strictify(child),
            "anyOf" | "prefixItems" => {
                if let Value::Array(a) = child {
                    a.iter_mut().for_each(strictify);
                }
            }
            _ => {}
        }
    }
}

fn make_nullable(prop: &mut Value) {
    let Value::Object(m) = prop else { return };
    match m.get_mut("type") {
        Some(Value::String(t)) => {
            let t = t.clone();
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) => {
            if !ts.iter().any(|t| t == "null") {
                ts.push(json!("null"));
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(m));
            m.insert("anyOf".into(), json!([inner, {"type": "null"}]));
            return;
        }
    }
    if let Some(Value::Array(values)) = m.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

/// Rewrite `schema` into Gemini's response-schema subset (an OpenAPI 3.0 dialect): local `$ref`s
/// inlined, `oneOf` as `anyOf`, `const` as a one-value `enum`, `["T", "null"]` as `T` with
/// `nullable`, every other keyword outside the subset dropped. The findings are the lint's: what
/// Gemini would have rejected or ignored, now rewritten or left to Kerf's validation after the
/// reply.
pub fn gemini_schema(schema: &Value) -> Rewrite {
    fn convert(root: &Value, node: &Value, depth: usize, budget: &mut usize) -> Value {
        let node = crate::schema::resolve_local_ref(root, node).unwrap_or(node);
        let Value::Object(m) = node else {
            return node.clone();
        };
        // A recursive schema cannot be inlined forever: past this depth, any value.
        if depth > 12 || *budget == 0 {
            return json!({});
        }
        *budget -= 1;
        let mut out = Map::new();
        for (k, v) in m {
            match k.as_str() {
                "oneOf" | "anyOf" => {
                    let branches: Vec<Value> = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .map(|b| convert(root, b, depth + 1, budget))
                                .collect()
                        })
                        .unwrap_or_default();
                    out.insert("anyOf".into(), Value::Array(branches));
                }
                "const" => {
                    out.insert("enum".into(), json!([v]));
                }
                "type" => match v {
                    Value::Array(ts) => {
                        let non_null: Vec<&Value> = ts.iter().filter(|t| *t != "null").collect();
                        if let Some(t) = non_null.first() {
                            out.insert("type".into(), (*t).clone());
                        }
                        if non_null.len() < ts.len() {
                            out.insert("nullable".into(), json!(true));
                        }
                    }
                    _ => {
                        out.insert("type".into(), v.clone());
                    }
                },
                "properties" => {
                    let props: Map<String, Value> = v
                        .as_object()
                        .map(|p| {
                            p.iter()
                                .map(|(name, s)| {
                                    (name.clone(), convert(root, s, depth + 1, budget))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    out.insert("properties".into(), Value::Object(props));
                }
                "items" => {
                    out.insert("items".into(), convert(root, v, depth + 1, budget));
                }
                k if GEMINI_KEYWORDS.contains(&k) => {
                    out.insert(k.into(), v.clone());
                }
                _ => {}
            }
        }
        Value::Object(out)
    }
    let mut budget = MAX_REWRITE_NODES;
    let rewritten = convert(schema, schema, 0, &mut budget);
    let mut findings = lint(schema, Provider::Gemini);
    let too_large = budget == 0;
    if too_large {
        findings.insert(
            0,
            Finding {
                provider: Provider::Gemini,
                severity: Severity::Error,
                pointer: "/".into(),
                keyword: "$ref".into(),
                message: format!(
                    "inlining its `$ref`s for Gemini's subset takes more than {MAX_REWRITE_NODES} subschemas (a recursive schema): simplify it or use a mode without a schema"
                ),
            },
        );
    }
    Rewrite {
        schema: rewritten,
        findings,
        wrapped_in: None,
        too_large,
    }
}
