//! JSON Schemas: compile (after a meta-schema check whose errors point into the schema), validate
//! with errors that carry the instance's JSON pointer, and diagnose discriminated unions.
//!
//! A *discriminated union* is a `oneOf`/`anyOf` whose branches each pin the `type` field to one
//! value (`"type": {"const": "relationship"}`). For such a schema an object that fails is reported
//! against the branch its `type` names — "`/object-entity`: expected boolean, got string" — rather
//! than "matches none of oneOf", and an unknown `type` is reported as such, with the known values.
//! The same branch selection is the fast path: a valid object is checked against one branch only.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The field that discriminates union branches (TrustGraph's convention).
pub const DISCRIMINATOR: &str = "type";

/// One schema violation: where in the instance, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the validated value ("" is the value itself).
    pub pointer: String,
    pub message: String,
    /// Not a violation found but a check that could not finish (a `pattern` past the regex
    /// step limit).
    pub unchecked: bool,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{p}: {}", self.message)
    }
}

/// The drop kind for `violations`: `unchecked` when any check could not finish (the value may
/// well be valid), else `schema`.
pub fn drop_kind(violations: &[Violation]) -> crate::DropKind {
    if violations.iter().any(|v| v.unchecked) {
        crate::DropKind::Unchecked
    } else {
        crate::DropKind::Schema
    }
}

/// Join violations into one line for a drop's detail.
pub fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A compiled schema, ready to validate many values.
pub struct CompiledSchema {
    raw: Value,
    validator: jsonschema::Validator,
    union: Option<Union>,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

struct Union {
    keyword: &'static str,
    branches: Vec<Branch>,
    /// The root holds nothing but the union and metadata, so the selected branch alone decides.
    branch_decides: bool,
}

struct Branch {
    tag: String,
    validator: jsonschema::Validator,
    /// The branch as written (with the root's definitions), for coercion and export.
    schema: Value,
}

/// Root keys that do not constrain instances (besides the union itself).
const METADATA_KEYS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "examples",
    "$defs",
    "definitions",
];

impl CompiledSchema {
    /// Check `schema` against its meta-schema (draft 2020-12 unless `$schema` names another),
    /// then compile it. `place` names the file or key the schema came from, for errors.
    pub fn compile(schema: &Value, place: &str) -> Result<Self> {
        check_meta(schema, place)?;
        let validator = build_validator(schema, place)?;
        let union = detect_union(schema, place)?;
        Ok(CompiledSchema {
            raw: schema.clone(),
            validator,
            union,
        })
    }

    /// The schema as given.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// The branch values of a discriminated union (`["definition", "relationship"]`), if any.
    pub fn union_tags(&self) -> Vec<&str> {
        self.union
            .as_ref()
            .map(|u| u.branches.iter().map(|b| b.tag.as_str()).collect())
            .unwrap_or_default()
    }

    /// The branches of a discriminated union, each with its tag and its schema as written.
    pub fn union_branches(&self) -> Vec<(&str, &Value)> {
        self.union
            .as_ref()
            .map(|u| {
                u.branches
                    .iter()
                    .map(|b| (b.tag.as_str(), &b.schema))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The schema that applies to `value` for coercion: the selected union branch, or the root.
    pub fn schema_for(&self, value: &Value) -> &Value {
        if let Some(u) = &self.union
            && let Some(b) = u.select(value)
        {
            return &b.schema;
        }
        &self.raw
    }

    /// Whether `value` is valid, without building error messages.
    pub fn is_valid(&self, value: &Value) -> bool {
        if let Some(u) = &self.union
            && u.branch_decides
            && let Some(b) = u.select(value)
        {
            return b.validator.is_valid(value);
        }
        self.validator.is_valid(value)
    }

    /// Validate `value`; on failure, every violation with its JSON pointer.
    pub fn validate(&self, value: &Value) -> std::result::Result<(), Vec<Violation>> {
        // The common case first: a yes/no check is much cheaper than collecting errors.
        if self.is_valid(value) {
            return Ok(());
        }
        if let Some(u) = &self.union
            && u.branch_decides
            && let Some(b) = u.select(value)
        {
            return check(&b.validator, value).map_err(|v| b.annotate(v));
        }
        let Err(violations) = check(&self.validator, value) else {
            return Ok(());
        };
        // A failing member of a discriminated union: say which branch, and why.
        if let Some(u) = &self.union {
            if let Some(b) = u.select(value) {
                if let Err(branch) = check(&b.validator, value) {
                    return Err(b.annotate(branch));
                }
                return Err(violations);
            }
            if value.is_object() {
                return Err(vec![u.unknown_tag(value)]);
            }
        }
        Err(violations)
    }
}

impl Branch {
    /// Say which branch the violations were checked against.
    fn annotate(&self, violations: Vec<Violation>) -> Vec<Violation> {
        violations
            .into_iter()
            .map(|v| Violation {
                message: format!("{} (as `{}`)", v.message, self.tag),
                ..v
            })
            .collect()
    }
}

impl Union {
    fn select(&self, value: &Value) -> Option<&Branch> {
        let tag = value.get(DISCRIMINATOR)?.as_str()?;
        self.branches.iter().find(|b| b.tag == tag)
    }

    fn unknown_tag(&self, value: &Value) -> Violation {
        let known = self
            .branches
            .iter()
            .map(|b| format!("`{}`", b.tag))
            .collect::<Vec<_>>()
            .join(", ");
        match value.get(DISCRIMINATOR) {
            None => Violation {
                pointer: String::new(),
                message: format!(
                    "missing `{DISCRIMINATOR}` field; expected one of {known} ({})",
                    self.keyword
                ),
                unchecked: false,
            },
            Some(other) => Violation {
                pointer: format!("/{DISCRIMINATOR}"),
                message: format!("unknown {DISCRIMINATOR} {other}; expected one of {known}"),
                unchecked: false,
            },
        }
    }
}

fn check(
    validator: &jsonschema::Validator,
    value: &Value,
) -> std::result::Result<(), Vec<Violation>> {
    let violations: Vec<Violation> = validator
        .iter_errors(value)
        .map(|e| Violation {
            pointer: e.instance_path().as_str().to_string(),
            message: message_of(&e),
            unchecked: matches!(
                e.kind(),
                jsonschema::error::ValidationErrorKind::BacktrackLimitExceeded { .. }
            ),
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// Plain-words messages for the common failures; the crate's own text for the rest.
fn message_of(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    match e.kind() {
        K::BacktrackLimitExceeded { .. } => format!(
            "could not check `pattern` {}: the regular expression took more steps than allowed (a backtracking pattern; simplify it)",
            e.schema_path().as_str()
        ),
        K::Type { kind } => {
            let expected = match kind {
                jsonschema::error::TypeKind::Single(t) => t.to_string(),
                jsonschema::error::TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!("expected {expected}, got {}", json_type(e.instance()))
        }
        K::Required { property } => format!("missing required field {property}"),
        K::AdditionalProperties { unexpected } => {
            // The names are the value's: each quoted short, at most 10 of them.
            let mut names: Vec<String> = unexpected
                .iter()
                .take(10)
                .map(|u| format!("`{}`", crate::error::quoted(u)))
                .collect();
            if unexpected.len() > 10 {
                names.push(format!("and {} more", unexpected.len() - 10));
            }
            format!("unexpected field(s) {}", names.join(", "))
        }
        K::Constant { expected_value } => {
            format!("expected {expected_value}, got {}", short(e.instance()))
        }
        K::Enum { options } => format!("expected one of {options}, got {}", short(e.instance())),
        // jsonschema's own message quotes the whole value (a 1 MB string that is too long, say):
        // quoted short instead.
        _ => e.masked_with(short(e.instance())).to_string(),
    }
}

fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => format!("string {}", short(v)),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// `v` as JSON, cut after 60 characters: written only that far (a value may be megabytes).
fn short(v: &Value) -> String {
    /// Takes bytes until it has `room`, then refuses, ending the write.
    struct Head {
        text: Vec<u8>,
        room: usize,
    }
    impl std::io::Write for Head {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::other("enough"));
            }
            let n = buf.len().min(self.room);
            self.text.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // 60 characters are at most 240 bytes; one more tells a cut value.
    let mut head = Head {
        text: Vec::new(),
        room: 241,
    };
    let _ = serde_json::to_writer(&mut head, v);
    let s = String::from_utf8_lossy(&head.text);
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.into_owned()
    }
}

fn check_meta(schema: &Value, place: &str) -> Result<()> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(Error::Schema {
            place: place.into(),
            pointer: "/".into(),
            message: format!(
                "a schema must be an object or a boolean, not {}",
                json_type(schema)
            ),
        });
    }
    let meta = jsonschema::meta::validator_for(schema).map_err(|e| Error::Schema {
        place: place.into(),
        pointer: "/$schema".into(),
        message: format!("unknown meta-schema: {e}"),
    })?;
    let errors: Vec<String> = meta
        .iter_errors(schema)
        .map(|e| {
            let p = e.instance_path().as_str();
            format!("{}: {}", if p.is_empty() { "/" } else { p }, message_of(&e))
        })
        .collect();
    if let Some(first) = errors.first() {
        let (pointer, message) = first.split_once(": ").unwrap_or(("/", first));
        let mut message = message.to_string();
        if errors.len() > 1 {
            message.push_str(&format!(
                " (and {} more: {})",
                errors.len() - 1,
                errors[1..].join("; ")
            ));
        }
        return Err(Error::Schema {
            place: place.into(),
            pointer: pointer.into(),
            message,
        });
    }
    Ok(())
}

/// Whether `pattern` compiles for a linear-time engine (the `regex` crate: no lookaround, no
/// backreferences). Patterns that do not need backtracking features are checked in time linear
/// in the value; the others go to a backtracking engine with a step limit (`kerf lint` names them).
pub fn pattern_is_linear(pattern: &str) -> bool {
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&serde_json::json!({"pattern": pattern}))
        .is_ok()
}

/// The steps a backtracking `pattern` may take on one value before it is left `unchecked`: a
/// millisecond or so (the engine's own default, 1,000,000, let `^(a|aa)+\1$` cost ~95 ms a
/// value, 9.5 s per 100 objects). Ordinary patterns on ordinary values take a few hundred.
pub const BACKTRACK_STEPS: usize = 10_000;

fn build_validator(schema: &Value, place: &str) -> Result<jsonschema::Validator> {
    let options = || {
        let mut options = jsonschema::options();
        if schema.get("$schema").is_none() {
            options = options.with_draft(jsonschema::Draft::Draft202012);
        }
        options
    };
    // A linear-time engine when every pattern allows it: a backtracking pattern then costs
    // nothing per value (issue 36 measured 3.9 s per 100 objects with the backtracking engine).
    // A schema with a pattern that needs lookaround or backreferences keeps the backtracking
    // engine, whose step limit drops what it cannot decide as `unchecked`.
    if let Ok(v) = options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
    {
        return Ok(v);
    }
    options()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_STEPS),
        )
        .build(schema)
        .map_err(|e| Error::Schema {
            place: place.into(),
            pointer: {
                let p = e.schema_path().as_str().to_string();
                if p.is_empty() { "/".into() } else { p }
            },
            message: e.to_string(),
        })
}

/// Find a discriminated union at the root: every branch of `oneOf`/`anyOf` pins `type` to one
/// distinct string. Branches given as local `$ref`s are followed.
fn detect_union(schema: &Value, place: &str) -> Result<Option<Union>> {
    let Some(root) = schema.as_object() else {
        return Ok(None);
    };
    let (keyword, branches) = match (root.get("oneOf"), root.get("anyOf")) {
        (Some(Value::Array(b)), None) => ("oneOf", b),
        (None, Some(Value::Array(b))) => ("anyOf", b),
        _ => return Ok(None),
    };
    let mut out: Vec<Branch> = Vec::new();
    for (i, branch) in branches.iter().enumerate() {
        let resolved = resolve_local_ref(schema, branch).unwrap_or(branch);
        let Some(tag) = pinned_tag(resolved) else {
            return Ok(None);
        };
        if out.iter().any(|b| b.tag == tag) {
            return Ok(None);
        }
        // Compile the branch on its own, carrying the root's definitions so its `$ref`s resolve.
        let mut standalone = resolved.as_object().cloned().unwrap_or_default();
        for key in ["$schema", "$defs", "definitions"] {
            if let Some(v) = root.get(key) {
                standalone
                    .entry(key.to_string())
                    .or_insert_with(|| v.clone());
            }
        }
        if refs_outside_definitions(&Value::Object(standalone.clone())) {
            return Ok(None);
        }
        let standalone = Value::Object(standalone);
        let validator = build_validator(&standalone, &format!("{place} (branch /{keyword}/{i})"))?;
        out.push(Branch {
            tag,
            validator,
            schema: standalone,
        });
    }
    if out.is_empty() {
        return Ok(None);
    }
    let branch_decides = root
        .keys()
        .all(|k| k == keyword || METADATA_KEYS.contains(&k.as_str()));
    Ok(Some(Union {
        keyword,
        branches: out,
        branch_decides,
    }))
}

fn pinned_tag(branch: &Value) -> Option<String> {
    let prop = branch.get("properties")?.get(DISCRIMINATOR)?;
    if let Some(Value::String(s)) = prop.get("const") {
        return Some(s.clone());
    }
    match prop.get("enum") {
        Some(Value::Array(values)) if values.len() == 1 => values[0].as_str().map(str::to_string),
        _ => None,
    }
}

/// Follow a `{"$ref": "#/…"}` within the same document.
pub fn resolve_local_ref<'a>(root: &'a Value, node: &'a Value) -> Option<&'a Value> {
    let r = node.get("$ref")?.as_str()?;
    let pointer = r.strip_prefix('#')?;
    root.pointer(pointer)
}

fn refs_outside_definitions(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, v)| {
            (k == "$ref"
                && v.as_str().is_some_and(|r| {
                    !(r.starts_with("#/$defs/") || r.starts_with("#/definitions/"))
                }))
                || refs_outside_definitions(v)
        }),
        Value::Array(a) => a.iter().any(refs_outside_definitions),
        _ => false,
    }
}

/// The schema of one element of an array schema (`items`, following a local `$ref`), with the
/// root's definitions carried along so it compiles on its own.
pub fn items_schema(schema: &Value) -> Option<Value> {
    let items = schema.get("items")?;
    let items = resolve_local_ref(schema, items).unwrap_or(items);
    Some(with_definitions(schema, items))
}

/// The schema of property `key` of an object schema, if it is declared.
pub fn property_schema(schema: &Value, key: &str) -> Option<Value> {
    let prop = schema.get("properties")?.get(key)?;
    let prop = resolve_local_ref(schema, prop).unwrap_or(prop);
    Some(with_definitions(schema, prop))
}

fn with_definitions(root: &Value, sub: &Value) -> Value {
    let Some(sub_map) = sub.as_object() else {
        return sub.clone();
    };
    let mut out: Map<String, Value> = sub_map.clone();
    if let Some(root) = root.as_object() {
        for key in ["$schema", "$defs", "definitions"] {
            if let Some(v) = root.get(key) {
                out.entry(key.to_string()).or_insert_with(|| v.clone());
            }
        }
    }
    Value::Object(out)
}

/// Correct, in place, each string in `value` that differs from its subschema's `enum` or
/// `const` only in letter case (and matches exactly one allowed value that way); every
/// correction as `POINTER: "was" → "now"`. For providers that do not guarantee the case of
/// enum values (Anthropic): opt-in, reported, and the reply as received is kept unchanged.
/// Union branches are tried in turn; the first whose constants agree after folding is used.
pub fn fold_enum_case(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    fold(schema, schema, value, "", &mut out, 0);
    out
}

fn allowed_strings(node: &Map<String, Value>) -> Vec<&str> {
    let mut allowed: Vec<&str> = node
        .get("enum")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(c) = node.get("const").and_then(Value::as_str) {
        allowed.push(c);
    }
    allowed
}

/// How many of `value`'s properties break their `enum`/`const` in branch `node` (shallow: what
/// tells a discriminated union's branches apart).
fn constant_mismatches(root: &Value, node: &Value, value: &Value) -> usize {
    let node = resolve_local_ref(root, node).unwrap_or(node);
    let (Some(props), Some(obj)) = (
        node.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) else {
        return 0;
    };
    props
        .iter()
        .filter(|(k, sub)| {
            let sub = resolve_local_ref(root, sub).unwrap_or(sub);
            let allowed = sub.as_object().map(allowed_strings).unwrap_or_default();
            match obj.get(k.as_str()).and_then(Value::as_str) {
                Some(s) => !allowed.is_empty() && !allowed.contains(&s),
                None => false,
            }
        })
        .count()
}

fn fold(
    root: &Value,
    node: &Value,
    value: &mut Value,
    pointer: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    // Recursive schemas: a reply is finite, but a `$ref` cycle on a scalar is not.
    if depth > 64 {
        return;
    }
    let node = resolve_local_ref(root, node).unwrap_or(node);
    let Value::Object(m) = node else { return };
    if let Value::String(s) = value {
        let allowed = allowed_strings(m);
        if !allowed.is_empty() && !allowed.contains(&s.as_str()) {
            let lower = s.to_lowercase();
            let same: Vec<&&str> = allowed
                .iter()
                .filter(|a| a.to_lowercase() == lower)
                .collect();
            if let [only] = same.as_slice() {
                let at = if pointer.is_empty() { "/" } else { pointer };
                out.push(format!("{at}: {s:?} → {only:?}"));
                *s = only.to_string();
            }
        }
    }
    if let Some(Value::Array(all)) = m.get("allOf") {
        for b in all {
            fold(root, b, value, pointer, out, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = m.get(key) else {
            continue;
        };
        for b in branches {
            let mut tried = value.clone();
            let mut notes = Vec::new();
            fold(root, b, &mut tried, pointer, &mut notes, depth + 1);
            if constant_mismatches(root, b, &tried) == 0 {
                *value = tried;
                out.extend(notes);
                break;
            }
        }
    }
    match value {
        Value::Object(obj) => {
            if let Some(props) = m.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if let Some(v) = obj.get_mut(k) {
                        let esc = k.replace('~', "~0").replace('/', "~1");
                        fold(root, sub, v, &format!("{pointer}/{esc}"), out, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = m.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    fold(root, sub, v, &format!("{pointer}/{i}"), out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn union_branch_is_blamed() {
        let s = CompiledSchema::compile(
            &json!({"oneOf": [
                {"type": "object", "properties": {"type": {"const": "a"}, "x": {"type": "string"}}, "required": ["type", "x"]},
                {"type": "object", "properties": {"type": {"const": "b"}, "y": {"type": "boolean"}}, "required": ["type", "y"]}
            ]}),
            "t",
        )
        .unwrap();
        let err = s.validate(&json!({"type": "b", "y": "yes"})).unwrap_err();
        assert_eq!(err[0].pointer, "/y");
        assert!(
            err[0].message.starts_with("expected boolean"),
            "{}",
            err[0].message
        );
        let err = s.validate(&json!({"type": "c"})).unwrap_err();
        assert!(
            err[0].message.contains("unknown type \"c\""),
            "{}",
            err[0].message
        );
    }
}
