//! Which fields make two records the same record: a prompt's `match` key, or the defaults read
//! from its schema. `kerf score --explain` prints what [`Matcher::explain`] says.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::CompiledSchema;

/// The discriminator of a union prompt's records.
pub const DISCRIMINATOR: &str = "type";

/// The key of `keys` (and `ground`) that applies to every record type not named, and to the
/// records of a prompt without a discriminator.
pub const ANY_TYPE: &str = "*";

/// A prompt file's `match` key: how its records are matched when scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// Identity fields per value of the discriminator (`type`); `*` for every other type, or for a
    /// prompt without one. A type not named here gets the defaults (`kerf score --explain`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, Vec<String>>,
    /// Compare after Unicode NFKC, case folding, collapsing whitespace and punctuation and
    /// removing a leading article (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
    /// The similarity every identity field of a pair must reach (normalised Levenshtein, 0 to 1;
    /// default 1, exact after normalisation). Pairs matched below 1 are also listed as partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub fuzzy: Option<f64>,
    /// Fields looked up in the input to call a record grounded, per type like `keys` (default:
    /// the string identity fields, except those naming a relation or a category: `predicate`, `relation…`, `…type`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground: BTreeMap<String, Vec<String>>,
    /// The similarity a grounding lookup accepts when the exact text is not in the input
    /// (default 0.85: an inflection or a typo still counts as present).
    #[serde(
        rename = "ground-fuzzy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub ground_fuzzy: Option<f64>,
    /// What an extracted record with the same identity as one before it counts as: `spurious`
    /// (the default: one record the row expects once, found twice, is a false positive) or
    /// `once` (not scored again — as a knowledge graph keeps a triple once however often it is
    /// extracted; a long document's chunks find the same record in several places).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
}

/// How an extracted record that repeats an earlier one's identity is scored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Repeats {
    /// Scored as any other: beyond what the row expects, a false positive.
    #[default]
    Spurious,
    /// Not scored again: neither a match nor a false positive.
    Once,
}

impl MatchSpec {
    /// The first value out of range, as `(key, value)`.
    pub fn out_of_range(&self) -> Option<(&'static str, f64)> {
        [("fuzzy", self.fuzzy), ("ground-fuzzy", self.ground_fuzzy)]
            .into_iter()
            .find_map(|(k, v)| v.filter(|v| !(0.0..=1.0).contains(v)).map(|v| (k, v)))
    }
}

/// Words in a field's name that make a string field free text, not identity: it says something
/// about the record rather than naming it, and two correct extractions word it differently.
const FREE_TEXT_WORDS: &[&str] = &[
    "description",
    "definition",
    "summary",
    "explanation",
    "text",
    "comment",
    "comments",
    "reason",
    "reasoning",
    "rationale",
    "note",
    "notes",
    "evidence",
    "quote",
    "context",
    "keywords",
];

/// Words in a number field's name that make it a graded judgement, not identity.
const JUDGEMENT_WORDS: &[&str] = &[
    "confidence",
    "score",
    "strength",
    "weight",
    "probability",
    "certainty",
];

/// A string longer than this (`maxLength`) is free text whatever its name.
const FREE_TEXT_MAX_LENGTH: u64 = 200;

/// Words in a field's name that keep it out of grounding by default: a relation (a model
/// paraphrases "was employed by" as "worked for") or a category the prompt supplies
/// (`entity_type: organization` is rarely a word of the text).
const UNGROUNDED_WORDS: &[&str] = &[
    "predicate",
    "relation",
    "relationship",
    "verb",
    "type",
    "kind",
    "category",
    "class",
    "label",
];

fn name_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn has_word(name: &str, words: &[&str]) -> bool {
    name_words(name).iter().any(|w| words.contains(&w.as_str()))
}

/// Where a type's identity fields came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// The prompt's `match.keys`.
    Declared,
    /// The schema's required scalar fields, free text and judgements left out.
    Schema,
    /// No schema for the type: each expected object's own scalar fields, free text left out.
    Objects,
}

/// How one record type is matched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeRule {
    /// The identity fields (empty with [`KeySource::Objects`]: read from each expected object).
    pub keys: Vec<String>,
    pub source: KeySource,
    /// Fields looked up in the input for grounding (empty with [`KeySource::Objects`]: the
    /// identity strings of each object).
    pub ground: Vec<String>,
    /// Fields the defaults left out, each with why (for `--explain`).
    pub left_out: Vec<(String, String)>,
}

/// A prompt's matching rules, ready to score with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matcher {
    /// `type` when records are told apart by it.
    pub discriminator: Option<String>,
    /// Per record type; [`ANY_TYPE`] for the rest.
    pub types: BTreeMap<String, TypeRule>,
    pub normalize: bool,
    pub fuzzy: f64,
    pub ground_fuzzy: f64,
    pub repeats: Repeats,
}

impl Matcher {
    /// The rules for records of `item` (the schema of one record: a union on `type`, one object
    /// schema, or none), with `spec` laid over the defaults.
    pub fn new(spec: &MatchSpec, item: Option<&CompiledSchema>) -> Matcher {
        let branches: Vec<(String, Value)> = item
            .map(|s| {
                s.union_branches()
                    .into_iter()
                    .map(|(t, b)| (t.to_string(), b.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let discriminator = (!branches.is_empty() || spec.keys.keys().any(|k| k != ANY_TYPE))
            .then(|| DISCRIMINATOR.to_string());
        let mut types = BTreeMap::new();
        for (tag, branch) in &branches {
            types.insert(tag.clone(), rule(spec, tag, Some(branch)));
        }
        for tag in spec.keys.keys().chain(spec.ground.keys()) {
            if !types.contains_key(tag) && tag != ANY_TYPE {
                types.insert(tag.clone(), rule(spec, tag, None));
            }
        }
        let root = if branches.is_empty() {
            item.map(|s| s.raw())
        } else {
            None
        };
        types.insert(ANY_TYPE.into(), rule(spec, ANY_TYPE, root));
        Matcher {
            discriminator,
            types,
            normalize: spec.normalize.unwrap_or(true),
            fuzzy: spec.fuzzy.unwrap_or(1.0),
            ground_fuzzy: spec.ground_fuzzy.unwrap_or(0.85),
            repeats: spec.repeats.unwrap_or_default(),
        }
    }

    /// The record type of `object`: its discriminator value, or [`ANY_TYPE`].
    pub fn type_of<'a>(&self, object: &'a Value) -> &'a str {
        self.discriminator
            .as_deref()
            .and_then(|d| object.get(d))
            .and_then(Value::as_str)
            .unwrap_or(ANY_TYPE)
    }

    /// The rule for records of type `t`.
    pub fn rule(&self, t: &str) -> &TypeRule {
        self.types
            .get(t)
            .or_else(|| self.types.get(ANY_TYPE))
            .expect("Matcher::new always adds the `*` rule")
    }

    /// The identity fields of `object` under `rule` (its own scalar fields when the type has no
    /// schema).
    pub fn keys_of<'r>(&self, rule: &'r TypeRule, object: &Value) -> Cow<'r, [String]> {
        if rule.source != KeySource::Objects {
            return Cow::Borrowed(&rule.keys);
        }
        let keys: Vec<String> = object
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, v)| {
                        Some(k.as_str()) != self.discriminator.as_deref()
                            && k.as_str() != "aliases"
                            && matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
                            && !(v.is_string() && has_word(k, FREE_TEXT_WORDS))
                            && !(v.is_number() && has_word(k, JUDGEMENT_WORDS))
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        Cow::Owned(keys)
    }

    /// The grounding fields of `object` under `rule`.
    pub fn ground_of(&self, rule: &TypeRule, object: &Value) -> Vec<String> {
        if rule.source != KeySource::Objects {
            return rule.ground.clone();
        }
        self.keys_of(rule, object)
            .iter()
            .filter(|k| {
                object.get(k.as_str()).is_some_and(Value::is_string)
                    && !has_word(k, UNGROUNDED_WORDS)
            })
            .cloned()
            .collect()
    }

    /// What `kerf score --explain` prints: per type, the identity fields and where they came
    /// from, the fields left out and why, the grounding fields, and the comparison settings.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let by = match &self.discriminator {
            Some(d) => format!("records are told apart by `{d}`"),
            None => "records have no discriminator: every record is type `*`".into(),
        };
        out.push_str(&format!(
            "{by}; values are compared {}; a pair matches when every identity field {}\n",
            if self.normalize {
                "after normalisation (NFKC, case folding, whitespace and punctuation collapsed, quotes and a leading article removed)"
            } else {
                "exactly as written"
            },
            if self.fuzzy >= 1.0 {
                "is equal".to_string()
            } else {
                format!("reaches similarity {} (normalised Levenshtein)", self.fuzzy)
            }
        ));
        for (t, r) in &self.types {
            if t == ANY_TYPE && self.types.len() > 1 && r.source == KeySource::Objects {
                continue;
            }
            let keys = match r.source {
                KeySource::Objects => {
                    "each expected object's own string, number and boolean fields, free text left out"
                        .to_string()
                }
                _ => r
                    .keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let from = match r.source {
                KeySource::Declared => "declared in the prompt's `match.keys`",
                KeySource::Schema => "the schema's required string, number and boolean fields",
                KeySource::Objects => "no schema for this type",
            };
            out.push_str(&format!("type `{t}`: identity {keys} ({from})\n"));
            for (f, why) in &r.left_out {
                out.push_str(&format!("  `{f}` left out: {why}\n"));
            }
            if r.source != KeySource::Objects {
                out.push_str(&format!(
                    "  grounding looks up: {}\n",
                    if r.ground.is_empty() {
                        "nothing".into()
                    } else {
                        r.ground
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            }
        }
        out.push_str(&format!(
            "non-identity fields of matched pairs are reported as agreement (Sørensen–Dice of character bigrams), never in F1; grounding accepts similarity {} when the exact text is not in the input\n",
            self.ground_fuzzy
        ));
        out
    }
}

/// The rule for type `tag`: declared keys, else the defaults from `schema` (a union branch or the
/// whole record schema), else per object.
fn rule(spec: &MatchSpec, tag: &str, schema: Option<&Value>) -> TypeRule {
    let declared = spec.keys.get(tag).or_else(|| spec.keys.get(ANY_TYPE));
    let declared_ground = spec.ground.get(tag).or_else(|| spec.ground.get(ANY_TYPE));
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let (keys, source, left_out) = match (declared, props) {
        (Some(keys), _) => (keys.clone(), KeySource::Declared, Vec::new()),
        (None, Some(props)) => {
            let required: Vec<&str> = schema
                .and_then(|s| s.get("required"))
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut keys = Vec::new();
            let mut left_out = Vec::new();
            for (name, p) in props {
                if name == DISCRIMINATOR {
                    continue;
                }
                match default_key(name, p, required.contains(&name.as_str())) {
                    Ok(()) => keys.push(name.clone()),
                    Err(why) => left_out.push((name.clone(), why)),
                }
            }
            (keys, KeySource::Schema, left_out)
        }
        (None, None) => (Vec::new(), KeySource::Objects, Vec::new()),
    };
    let ground = match declared_ground {
        Some(g) => g.clone(),
        None => keys
            .iter()
            .filter(|k| {
                !has_word(k, UNGROUNDED_WORDS)
                    && props
                        .and_then(|p| p.get(k.as_str()))
                        .is_none_or(|p| scalar_kind(p) == Some("string"))
            })
            .cloned()
            .collect(),
    };
    TypeRule {
        keys,
        source,
        ground,
        left_out,
    }
}

/// Whether property `name` (schema `p`) is a default identity field, else why not.
fn default_key(name: &str, p: &Value, required: bool) -> Result<(), String> {
    if !required {
        return Err("optional".into());
    }
    let kind = scalar_kind(p).ok_or_else(|| "not a string, number or boolean".to_string())?;
    let closed = p.get("enum").is_some() || p.get("const").is_some();
    if kind == "string" && !closed {
        if has_word(name, FREE_TEXT_WORDS) {
            return Err("free text (its name)".into());
        }
        if p.get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| m > FREE_TEXT_MAX_LENGTH)
        {
            return Err(format!("free text (maxLength over {FREE_TEXT_MAX_LENGTH})"));
        }
    }
    if kind == "number" && has_word(name, JUDGEMENT_WORDS) {
        return Err("a graded judgement (its name)".into());
    }
    Ok(())
}

/// `string`, `number` or `boolean` for a scalar property schema (by `type`, or by its `enum` /
/// `const` values), else `None`.
fn scalar_kind(p: &Value) -> Option<&'static str> {
    let of_type = |t: &str| match t {
        "string" => Some("string"),
        "number" | "integer" => Some("number"),
        "boolean" => Some("boolean"),
        _ => None,
    };
    match p.get("type") {
        Some(Value::String(t)) => of_type(t),
        Some(Value::Array(ts)) => {
            let kinds: Vec<_> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            (kinds.len() == 1).then(|| of_type(kinds[0])).flatten()
        }
        _ => {
            let v = p
                .get("const")
                .or_else(|| p.get("enum").and_then(|e| e.get(0)))?;
            match v {
                Value::String(_) => Some("string"),
                Value::Number(_) => Some("number"),
                Value::Bool(_) => Some("boolean"),
                _ => None,
            }
        }
    }
}
