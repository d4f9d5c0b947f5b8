//! Response parsers, one per response type, all returning the same [`ParseReport`].
//!
//! Every parser sends each candidate object through one [`Acceptor`]: coerce (if the prompt asks),
//! validate against the schema, then the post-processing rules (`passthrough`, `drop`, `ensure`).
//! So a rule behaves the same whatever the format, and every refusal becomes a reported drop.

mod delimited;
mod json;
mod jsonl;
pub(crate) mod lines;
mod stream;
mod value;

pub use delimited::DelimitedFormat;
pub(crate) use json::{salvage_curve, value_end};
pub use stream::StreamParser;

use serde_json::{Map, Number, Value};

use crate::prompt::{PostRules, ResponseType};
use crate::report::{DropKind, ParseReport};
use crate::schema::{self, CompiledSchema};

/// Everything needed to parse replies of one prompt: built once, used for many replies.
#[derive(Debug)]
pub struct Parser {
    response_type: ResponseType,
    schema: Option<CompiledSchema>,
    /// For `json`: the schema of one array element, for salvage's element-by-element validation.
    items: Option<CompiledSchema>,
    salvage: bool,
    post: PostRules,
    delimited: DelimitedFormat,
}

impl Parser {
    pub fn new(response_type: ResponseType) -> Self {
        Parser {
            response_type,
            schema: None,
            items: None,
            salvage: false,
            post: PostRules::default(),
            delimited: DelimitedFormat::default(),
        }
    }

    /// Validate against `schema` (of the whole value for `json`, of each object otherwise).
    pub fn with_schema(mut self, schema: CompiledSchema) -> Self {
        self.items = schema::items_schema(schema.raw())
            .and_then(|items| CompiledSchema::compile(&items, "schema items").ok());
        self.schema = Some(schema);
        self
    }

    /// For `json`: recover what can be recovered instead of failing.
    pub fn with_salvage(mut self, salvage: bool) -> Self {
        self.salvage = salvage;
        self
    }

    pub fn with_post(mut self, post: PostRules) -> Self {
        self.post = post;
        self
    }

    pub fn with_delimiters(mut self, format: DelimitedFormat) -> Self {
        self.delimited = format;
        self
    }

    pub fn response_type(&self) -> ResponseType {
        self.response_type
    }

    pub fn schema(&self) -> Option<&CompiledSchema> {
        self.schema.as_ref()
    }

    /// The schema of one record: of an array's element for `json` (of the whole value when it
    /// is not an array schema), of each object otherwise.
    pub fn item_schema(&self) -> Option<&CompiledSchema> {
        match self.response_type {
            ResponseType::Json => self.items.as_ref().or(self.schema.as_ref()),
            _ => self.schema.as_ref(),
        }
    }

    /// Parse one reply. `vars` are the run's variables (for the `passthrough` rule).
    pub fn parse(&self, text: &str, vars: &Map<String, Value>) -> ParseReport {
        let stripped = text.strip_prefix('\u{feff}').unwrap_or(text);
        let acceptor = Acceptor {
            schema: self.schema.as_ref(),
            post: &self.post,
            vars,
        };
        let mut report = match self.response_type {
            ResponseType::Text => ParseReport {
                objects: [Value::String(stripped.to_string())].into_iter().collect(),
                ends: [stripped.len()].into_iter().collect(),
                starts: [0].into_iter().collect(),
                ..Default::default()
            },
            ResponseType::Json if self.salvage => json::salvage(stripped, self, vars),
            ResponseType::Json => json::strict(stripped, self, vars),
            ResponseType::Jsonl => jsonl::parse(stripped, &acceptor),
            ResponseType::Delimited => delimited::parse(stripped, &self.delimited, &acceptor),
        };
        // Offsets are into the text as given, BOM included.
        let bom = text.len() - stripped.len();
        report.ends.shift_from(0, bom);
        report.starts.shift_from(0, bom);
        report
    }

    pub fn salvage(&self) -> bool {
        self.salvage
    }

    /// Where each of `report`'s accepted objects sits in `text` (the reply `report` was parsed
    /// from, with the same `vars`): the byte range of its own text — a JSONL object from its
    /// opening to its closing brace, a delimited record with its terminator, an element of a
    /// JSON array from its first to its last character. A window highlights them; sweeps use
    /// `ends` alone.
    ///
    /// For strict `json` the report records where the whole value lies (every element counts
    /// only once the value is complete); the elements' own ranges are found here by walking the
    /// array again, each element taken or left as the parse did (the same post rules).
    pub fn spans(
        &self,
        text: &str,
        vars: &Map<String, Value>,
        report: &ParseReport,
    ) -> Vec<(usize, usize)> {
        if self.response_type == ResponseType::Json && !self.salvage && !report.objects.is_empty() {
            let stripped = text.strip_prefix('\u{feff}').unwrap_or(text);
            let bom = text.len() - stripped.len();
            let acceptor = Acceptor {
                schema: None,
                post: &self.post,
                vars,
            };
            if let Some(spans) = json::strict_spans(stripped, &acceptor)
                && spans.len() == report.objects.len()
            {
                return spans.into_iter().map(|(s, e)| (s + bom, e + bom)).collect();
            }
        }
        report.starts.iter().zip(report.ends.iter()).collect()
    }
}

/// The one path every candidate object takes into a report.
pub(crate) struct Acceptor<'a> {
    pub schema: Option<&'a CompiledSchema>,
    pub post: &'a PostRules,
    pub vars: &'a Map<String, Value>,
}

impl Acceptor<'_> {
    /// Coerce, validate, post-process, and either accept `value` (its text `start..end`) or
    /// record why not.
    pub fn accept(
        &self,
        report: &mut ParseReport,
        line: usize,
        (start, end): (usize, usize),
        value: Value,
    ) {
        if let Some(value) = self.check(report, line, value) {
            report.objects.push(&value);
            report.ends.push(end);
            report.starts.push(start);
        }
    }

    /// [`Acceptor::accept`] without keeping the value: the value to accept, or `None` with the
    /// reason recorded in `report`.
    pub fn check(&self, report: &mut ParseReport, line: usize, mut value: Value) -> Option<Value> {
        if let Some(s) = self.schema {
            if self.post.coerce {
                let target = s.schema_for(&value).clone();
                if let Err(detail) = coerce(&mut value, &target) {
                    report.drop(line, DropKind::Coerce, detail);
                    return None;
                }
            }
            if let Err(violations) = s.validate(&value) {
                report.drop(
                    line,
                    schema::drop_kind(&violations),
                    schema::describe(&violations),
                );
                return None;
            }
        }
        match self.post_process(&mut value) {
            Ok(()) => Some(value),
            Err(detail) => {
                report.drop(line, DropKind::MissingField, detail);
                None
            }
        }
    }

    /// The rules that apply after validation: passthrough, drop, ensure.
    pub fn finish(
        &self,
        report: &mut ParseReport,
        line: usize,
        (start, end): (usize, usize),
        mut value: Value,
    ) {
        match self.post_process(&mut value) {
            Ok(()) => {
                report.objects.push(&value);
                report.ends.push(end);
                report.starts.push(start);
            }
            Err(detail) => report.drop(line, DropKind::MissingField, detail),
        }
    }

    /// [`Acceptor::finish`] for the elements of an array, in order, each element's value
    /// dropped as soon as its text is kept. Each element counts from the text `span` (the
    /// whole value).
    pub fn finish_all(
        &self,
        report: &mut ParseReport,
        line: usize,
        span: (usize, usize),
        items: Vec<Value>,
    ) {
        for value in items {
            self.finish(report, line, span, value);
        }
    }

    /// Passthrough and drop applied to `value`; the `ensure` rule's refusal, if any.
    fn post_process(&self, value: &mut Value) -> Result<(), String> {
        if let Value::Object(map) = value {
            for key in &self.post.passthrough {
                if let Some(v) = self.vars.get(key) {
                    map.insert(key.clone(), v.clone());
                }
            }
            for key in &self.post.drop {
                map.shift_remove(key);
            }
        }
        let missing: Vec<&String> = self
            .post
            .ensure
            .iter()
            .filter(|k| value.get(k.as_str()).is_none())
            .collect();
        if !missing.is_empty() {
            let names = missing
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(format!("ensure: missing {names}"));
        }
        Ok(())
    }
}

/// Convert string values to the number/integer/boolean the schema asks for, in place. Only
/// top-level fields of an object are touched; a field whose schema also allows strings is left.
pub(crate) fn coerce(value: &mut Value, schema: &Value) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    for (key, field) in map.iter_mut() {
        let Value::String(s) = field else { continue };
        let Some(prop) = schema::property_schema(schema, key) else {
            continue;
        };
        let types: Vec<&str> = match prop.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if types.contains(&"string")
            || !types
                .iter()
                .any(|t| matches!(*t, "number" | "integer" | "boolean"))
        {
            continue;
        }
        let t = s.trim();
        let converted = if types.contains(&"integer") {
            t.parse::<i64>().ok().map(|n| Value::Number(n.into()))
        } else {
            None
        }
        .or_else(|| {
            if types.contains(&"number") {
                t.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(Number::from_f64)
                    .map(Value::Number)
            } else {
                None
            }
        })
        .or_else(|| {
            if types.contains(&"boolean") {
                match t.to_ascii_lowercase().as_str() {
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    _ => None,
                }
            } else {
                None
            }
        });
        match converted {
            Some(v) => *field = v,
            None => {
                return Err(format!(
                    "/{key}: cannot coerce {} to {}",
                    Value::String(s.clone()),
                    types.join(" or ")
                ));
            }
        }
    }
    Ok(())
}

/// Where serde_json's error `e`, reported at byte `at`, breaks `text` (the text read, ending where
/// the read ended). serde says a number is out of range at the digit where it gave up: inside the
/// number, or at its last digit when the text ends there. But a text that ends inside a number was
/// cut there (more digits, or an `e-5`, could follow), and a prefix's number can be out of range
/// where the whole reply's is not. So an out-of-range number breaks the text at its own end, where
/// each reader's "only blanks after the break: cut off" takes over. Without this, a reply cut
/// inside a long number read as broken JSON, and a sweep's cut there disagreed with its re-parse.
pub(crate) fn break_at(text: &str, at: usize, e: &serde_json::Error) -> usize {
    let number = |b: &u8| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-');
    let Some(rest) = text.as_bytes().get(at..) else {
        return at;
    };
    // Only a number can be out of range; most errors are elsewhere, and need no message built.
    if !rest.first().is_some_and(number) || !e.to_string().starts_with("number out of range") {
        return at;
    }
    at + rest.iter().take_while(|b| number(b)).count()
}
