//! The rewrites: a schema made into what each provider's structured-output mode accepts
//! ([`openai_strict`], [`anthropic_strict`], [`gemini_json_schema`], [`gemini_schema`]), each
//! with the findings that say what it changed.

use super::*;

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
    strict_rewrite(schema, Provider::Openai, &mut openai_node)
}

/// Rewrite `schema` into Anthropic's structured-output subset (the same for native
/// `output_config.format` and a strict tool's `input_schema`): a non-object root wrapped, `oneOf`
/// as `anyOf`, every object closed with `additionalProperties: false`, and each keyword Anthropic
/// rejects moved into the node's `description` — the model still reads the constraint, and Kerf
/// enforces it by validating the reply against the original schema.
pub fn anthropic_strict(schema: &Value) -> Rewrite {
    strict_rewrite(schema, Provider::Anthropic, &mut anthropic_node)
}

/// Rewrite `schema` for Gemini's `responseJsonSchema`: only `const`, which it does not accept,
/// becomes a one-value `enum`; the rest of JSON Schema goes as written (what Gemini ignores, the
/// lint lists and Kerf validates after).
pub fn gemini_json_schema(schema: &Value) -> Rewrite {
    let mut out = schema.clone();
    if let Value::Object(m) = &mut out {
        m.remove("$schema");
    }
    rewrite_tree(&mut out, &mut |m| {
        if let Some(c) = m.remove("const") {
            m.insert("enum".into(), json!([c]));
        }
    });
    Rewrite {
        schema: out,
        findings: lint(schema, Provider::Gemini),
        wrapped_in: None,
        too_large: false,
    }
}

/// The strict dialects (OpenAI's, Anthropic's): wrap a non-object root, drop `$schema`, rewrite
/// every subschema with `node`, and report the lint's findings as the changes made.
fn strict_rewrite(
    schema: &Value,
    provider: Provider,
    node: &mut dyn FnMut(&mut Map<String, Value>),
) -> Rewrite {
    let findings = lint(schema, provider);
    let wrapped_in = (!root_is_plain_object(schema)).then(|| wrap_key(schema));
    let mut out = match wrapped_in {
        None => schema.clone(),
        Some(key) => wrap_root(schema, key),
    };
    if let Value::Object(m) = &mut out {
        m.remove("$schema");
    }
    rewrite_tree(&mut out, node);
    Rewrite {
        schema: out,
        findings,
        wrapped_in,
        too_large: false,
    }
}

/// Apply `f` to every subschema, parents before children (so what `f` adds, such as `items`
/// made from `prefixItems`, is visited too).
fn rewrite_tree(node: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Value::Object(m) = node else { return };
    f(m);
    for (key, child) in m.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                if let Value::Object(sub) = child {
                    sub.values_mut().for_each(|c| rewrite_tree(c, f));
                }
            }
            "items" | "additionalProperties" => rewrite_tree(child, f),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(a) = child {
                    a.iter_mut().for_each(|c| rewrite_tree(c, f));
                }
            }
            _ => {}
        }
    }
}

/// `oneOf` becomes `anyOf` (strict dialects accept only the latter).
fn one_of_as_any_of(m: &mut Map<String, Value>) {
    if let Some(branches) = m.remove("oneOf") {
        m.insert("anyOf".into(), branches);
    }
}

/// One subschema in OpenAI's strict dialect.
fn openai_node(m: &mut Map<String, Value>) {
    one_of_as_any_of(m);
    for k in OPENAI_DROPPED {
        m.remove(*k);
    }
    // A tuple: its members as the items' alternatives (the order is checked after the reply).
    if let Some(Value::Array(members)) = m.remove("prefixItems")
        && !m.contains_key("items")
    {
        m.insert("items".into(), json!({ "anyOf": members }));
    }
    if m.get("format")
        .is_some_and(|f| !f.as_str().is_some_and(|f| OPENAI_FORMATS.contains(&f)))
    {
        m.remove("format");
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
}

/// One subschema in Anthropic's dialect: rejected keywords become description text.
fn anthropic_node(m: &mut Map<String, Value>) {
    one_of_as_any_of(m);
    let rejected: Vec<String> = m
        .iter()
        .filter(|(k, v)| anthropic_unsupported(k, v).is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let mut moved = Vec::new();
    for k in rejected {
        if let Some(v) = m.remove(&k) {
            moved.push(format!("{k}: {v}"));
        }
    }
    if is_object_schema(m)
        && let Some(extra) = m.insert("additionalProperties".into(), Value::Bool(false))
        && extra != Value::Bool(false)
    {
        moved.push(format!("additionalProperties: {extra}"));
    }
    if !moved.is_empty() {
        let constraint = format!("Constraints: {}.", moved.join("; "));
        let description = match m.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {constraint}"),
            _ => constraint,
        };
        m.insert("description".into(), Value::String(description));
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

/// What Gemini's older `responseSchema` (an OpenAPI 3.0 subset) would reject or ignore in
/// `schema`: everything outside [`GEMINI_KEYWORDS`] and type arrays.
fn response_schema_findings(schema: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    walk(schema, "", 0, &mut |node, p, _| {
        let Some(m) = node.as_object() else { return };
        let mut add = |severity, keyword: &str, message: String| {
            out.push(Finding {
                provider: Provider::Gemini,
                severity,
                pointer: if p.is_empty() { "/".into() } else { p.into() },
                keyword: keyword.into(),
                message,
            })
        };
        for (k, v) in m {
            if GEMINI_KEYWORDS.contains(&k.as_str()) {
                if k == "type" && v.is_array() {
                    add(Severity::Rewrite, k, "type arrays are not accepted by `responseSchema`; Kerf sends one type with `nullable: true`".into());
                }
                continue;
            }
            let (severity, what) = match k.as_str() {
                "oneOf" => (Severity::Rewrite, "Kerf sends `anyOf`"),
                "const" => (Severity::Rewrite, "Kerf sends a one-value `enum`"),
                "$ref" | "$defs" | "definitions" => {
                    (Severity::Rewrite, "Kerf inlines the definitions")
                }
                "additionalProperties" => (
                    Severity::Ignored,
                    "Gemini cannot forbid extra properties there; Kerf's validation does",
                ),
                _ => (
                    Severity::Ignored,
                    "dropped; Kerf validates it after the reply",
                ),
            };
            add(
                severity,
                k,
                format!("`{k}` is outside `responseSchema`'s subset: {what}"),
            );
        }
    });
    out
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
    let mut findings = response_schema_findings(schema);
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
