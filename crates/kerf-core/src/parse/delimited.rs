//! LightRAG-style delimited records. Current form (the default): one record per line,
//! `entity<|#|>name<|#|>type<|#|>description`, `relation<|#|>source<|#|>target<|#|>keywords<|#|>description`,
//! ending `<|COMPLETE|>`. Older form: `("entity"<|>name<|>type<|>description)` records separated by
//! `##`. Records become objects with a `type` field (the record's tag) and named fields.
//!
//! With the completion delimiter missing the reply counts as cut off, and a last record with no
//! record delimiter after it is dropped as `truncated` — it may have lost fields or characters.

use serde_json::{Map, Value};

use super::Acceptor;
use super::lines::{LineIndex, excerpt, is_fence};
use crate::error::{Error, Result};
use crate::prompt::{DelimiterPreset, Delimiters};
use crate::report::{DropKind, ParseReport};

/// A resolved delimiter set.
#[derive(Debug, Clone, PartialEq)]
pub struct DelimitedFormat {
    pub tuple: String,
    pub record: String,
    pub completion: String,
    /// Record tag → field names after the tag.
    pub records: Vec<(String, Vec<String>)>,
}

fn names(fields: &[&str]) -> Vec<String> {
    fields.iter().map(|s| s.to_string()).collect()
}

impl DelimitedFormat {
    pub fn preset(preset: DelimiterPreset) -> Self {
        match preset {
            DelimiterPreset::Lightrag => DelimitedFormat {
                tuple: "<|#|>".into(),
                record: "\n".into(),
                completion: "<|COMPLETE|>".into(),
                records: vec![
                    ("entity".into(), names(&["entity_name", "entity_type", "entity_description"])),
                    ("relation".into(), names(&["source_entity", "target_entity", "relationship_keywords", "relationship_description"])),
                ],
            },
            DelimiterPreset::LightragLegacy => DelimitedFormat {
                tuple: "<|>".into(),
                record: "##".into(),
                completion: "<|COMPLETE|>".into(),
                records: vec![
                    ("entity".into(), names(&["entity_name", "entity_type", "entity_description"])),
                    (
                        "relationship".into(),
                        names(&["source_entity", "target_entity", "relationship_description", "relationship_keywords", "relationship_strength"]),
                    ),
                    ("content_keywords".into(), names(&["high_level_keywords"])),
                ],
            },
        }
    }

    /// Resolve a prompt file's `delimiters` key: the preset, with any field overridden.
    pub fn from_delimiters(d: &Delimiters, place: &str) -> Result<Self> {
        let mut f = Self::preset(d.preset.unwrap_or_default());
        let check = |name: &str, v: &Option<String>| -> Result<Option<String>> {
            match v {
                Some(s) if s.is_empty() => Err(Error::PromptFile {
                    place: place.into(),
                    message: format!("key `delimiters.{name}`: must not be empty"),
                }),
                other => Ok(other.clone()),
            }
        };
        if let Some(t) = check("tuple", &d.tuple)? {
            f.tuple = t;
        }
        if let Some(r) = check("record", &d.record)? {
            f.record = r;
        }
        if let Some(c) = check("completion", &d.completion)? {
            f.completion = c;
        }
        if let Some(records) = &d.records {
            f.records = records.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        }
        Ok(f)
    }
}

impl Default for DelimitedFormat {
    fn default() -> Self {
        Self::preset(DelimiterPreset::Lightrag)
    }
}

pub(crate) fn parse(text: &str, format: &DelimitedFormat, acceptor: &Acceptor<'_>) -> ParseReport {
    let mut report = ParseReport::default();
    let lines = LineIndex::new(text);
    let (body, complete) = match text.find(&format.completion) {
        Some(i) => (&text[..i], true),
        None => (text, false),
    };
    if !complete {
        report.truncated = true;
    }
    // Records: split on the record delimiter; when that is not a newline, records on separate
    // lines count as separate too (models often put `##` and a newline, or only the newline).
    // Each piece: (offset, text, where its terminator ends — None when unterminated).
    let completion_end = complete.then(|| body.len() + format.completion.len());
    let mut pieces: Vec<(usize, &str, Option<usize>)> = Vec::new();
    let mut start = 0;
    for (i, _) in body.match_indices(format.record.as_str()) {
        pieces.push((start, &body[start..i], Some(i + format.record.len())));
        start = i + format.record.len();
    }
    pieces.push((start, &body[start..], completion_end));
    for (offset, piece, terminator_end) in pieces {
        let mut sub: Vec<(usize, &str, Option<usize>)> = Vec::new();
        if format.record == "\n" {
            sub.push((offset, piece, terminator_end));
        } else {
            let mut s = 0;
            for (i, _) in piece.match_indices('\n') {
                sub.push((offset + s, &piece[s..i], Some(offset + i + 1)));
                s = i + 1;
            }
            sub.push((offset + s, &piece[s..], terminator_end));
        }
        for (at, record, terminator_end) in sub {
            take_record(record, at, terminator_end, format, &lines, acceptor, &mut report);
        }
    }
    report
}

fn take_record(
    raw: &str,
    at: usize,
    terminator_end: Option<usize>,
    format: &DelimitedFormat,
    lines: &LineIndex,
    acceptor: &Acceptor<'_>,
    report: &mut ParseReport,
) {
    let record = raw.trim();
    if record.is_empty() || is_fence(record) {
        return;
    }
    let line = lines.line_of(at + (raw.len() - raw.trim_start().len()));
    let Some(end) = terminator_end else {
        report.drop(line, DropKind::Truncated, format!("last record has no delimiter after it (cut off?): {}", excerpt(record)));
        return;
    };
    // The older form wraps each record in parentheses.
    let inner = match record.strip_prefix('(') {
        Some(r) => r.strip_suffix(')').unwrap_or(r),
        None => record,
    };
    if !inner.contains(&format.tuple) {
        report.drop(line, DropKind::Prose, excerpt(record));
        return;
    }
    let mut fields = inner.split(format.tuple.as_str()).map(clean);
    let tag = fields.next().unwrap_or_default();
    let values: Vec<String> = fields.collect();
    let Some((tag, names)) = format.records.iter().find(|(t, _)| t.eq_ignore_ascii_case(&tag)) else {
        let known = format.records.iter().map(|(t, _)| format!("`{t}`")).collect::<Vec<_>>().join(", ");
        report.drop(line, DropKind::UnknownRecord, format!("record type `{tag}` is not one of {known}: {}", excerpt(record)));
        return;
    };
    if values.len() != names.len() {
        report.drop(
            line,
            DropKind::FieldCount,
            format!("`{tag}` record has {} field(s) after the tag, expected {} ({}): {}", values.len(), names.len(), names.join(", "), excerpt(record)),
        );
        return;
    }
    let mut object = Map::new();
    object.insert("type".into(), Value::String(tag.clone()));
    for (name, value) in names.iter().zip(values) {
        object.insert(name.clone(), Value::String(value));
    }
    acceptor.accept(report, line, end, Value::Object(object));
}

/// Trim a field and the quotes LightRAG's older form puts around it.
fn clean(field: &str) -> String {
    let f = field.trim();
    let f = f.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(f);
    f.trim().to_string()
}
