//! LightRAG-style delimited records. Current form (the default): one record per line,
//! `entity<|#|>name<|#|>type<|#|>description`, `relation<|#|>source<|#|>target<|#|>keywords<|#|>description`,
//! ending `<|COMPLETE|>`. Older form: `("entity"<|>name<|>type<|>description)` records separated by
//! `##`. Records become objects with a `type` field (the record's tag) and named fields.
//!
//! With the completion delimiter missing the reply counts as cut off, and a last record with no
//! record delimiter after it is dropped as `truncated` — it may have lost fields or characters.
//!
//! As LightRAG reads them: the tags `relation` and `relationship` name the same record (models
//! write both; the object keeps the format's own tag), and the completion delimiter separates
//! records like the record delimiter does, so records a model writes after it are read too —
//! the report says so in a note.

use serde_json::{Map, Value};

use super::Acceptor;
use super::lines::{LineCounter, excerpt, floor_char_boundary, is_fence};
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
                    (
                        "entity".into(),
                        names(&["entity_name", "entity_type", "entity_description"]),
                    ),
                    (
                        "relation".into(),
                        names(&[
                            "source_entity",
                            "target_entity",
                            "relationship_keywords",
                            "relationship_description",
                        ]),
                    ),
                ],
            },
            DelimiterPreset::LightragLegacy => DelimitedFormat {
                tuple: "<|>".into(),
                record: "##".into(),
                completion: "<|COMPLETE|>".into(),
                records: vec![
                    (
                        "entity".into(),
                        names(&["entity_name", "entity_type", "entity_description"]),
                    ),
                    (
                        "relationship".into(),
                        names(&[
                            "source_entity",
                            "target_entity",
                            "relationship_description",
                            "relationship_keywords",
                            "relationship_strength",
                        ]),
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
            f.records = records
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        Ok(f)
    }
}

/// LightRAG reads `relation` and `relationship` as one record tag.
const RELATION_TAGS: [&str; 2] = ["relation", "relationship"];

impl DelimitedFormat {
    /// The record type a tag names: the same tag (any case), else its LightRAG synonym
    /// (`relation` ↔ `relationship`).
    fn record_for(&self, tag: &str) -> Option<&(String, Vec<String>)> {
        let is_relation = |t: &str| RELATION_TAGS.iter().any(|r| r.eq_ignore_ascii_case(t));
        self.records
            .iter()
            .find(|(t, _)| t.eq_ignore_ascii_case(tag))
            .or_else(|| {
                self.records
                    .iter()
                    .find(|(t, _)| is_relation(tag) && is_relation(t))
            })
    }
}

impl Default for DelimitedFormat {
    fn default() -> Self {
        Self::preset(DelimiterPreset::Lightrag)
    }
}

pub(crate) fn parse(text: &str, format: &DelimitedFormat, acceptor: &Acceptor<'_>) -> ParseReport {
    let mut scan = Scanner::default();
    let mut report = ParseReport::default();
    scan.run(text, format, true, acceptor, &mut report);
    scan.finish(&mut report);
    report
}

/// Where a delimited scan stands; feed it the whole text so far each time (resumable, like the
/// JSONL scanner: a record is taken only once its terminator has arrived).
#[derive(Debug, Default, Clone)]
pub(crate) struct Scanner {
    pos: usize,
    /// The completion delimiter has been seen: the reply was not cut off.
    complete: bool,
    /// Where the next completion delimiter (at or after `pos`) starts, once found; and how far
    /// it has been searched for.
    completion_at: Option<usize>,
    searched: usize,
    /// Records accepted after the first completion delimiter, and the line of the first.
    after_completion: usize,
    after_completion_line: usize,
    /// The text ended inside a record (dropped as `truncated`), even after a completion delimiter.
    cut_at_end: bool,
    lines: LineCounter,
    /// No record delimiter and no newline starts in `text[pos..clear_to]`: a record waited on is
    /// searched for its end only in the text that arrived since (so a long record still open
    /// costs each byte once, not once per feed).
    clear_to: usize,
}

impl Scanner {
    pub fn run(
        &mut self,
        text: &str,
        format: &DelimitedFormat,
        at_eof: bool,
        acceptor: &Acceptor<'_>,
        report: &mut ParseReport,
    ) {
        if self.completion_at.is_none() {
            // Search only the new text (with an overlap for a delimiter split across feeds).
            let from = floor_char_boundary(
                text,
                self.searched
                    .saturating_sub(format.completion.len())
                    .max(self.pos),
            );
            self.completion_at = text[from..].find(&format.completion).map(|i| from + i);
            self.searched = text.len();
        }
        loop {
            let pos = self.pos;
            let rest = &text[pos..];
            let from = floor_char_boundary(text, self.clear_to.max(pos));
            // Records end at the record delimiter; when that is not a newline, a newline ends a
            // record too (models often put `##` and a newline, or only the newline).
            let mut end: Option<(usize, usize, bool)> = text[from..]
                .find(&format.record)
                .map(|i| (from + i, format.record.len(), false));
            if format.record != "\n"
                && let Some(i) = memchr::memchr(b'\n', &text.as_bytes()[from..])
                && end.is_none_or(|(e, _, _)| from + i < e)
            {
                end = Some((from + i, 1, false));
            }
            if end.is_none() {
                // A delimiter may yet be completed by text to come: search again from where
                // its first byte could be.
                self.clear_to = text.len() - (format.record.len() - 1).min(text.len());
            }
            if let Some(c) = self.completion_at
                && end.is_none_or(|(e, _, _)| c <= e)
            {
                end = Some((c, format.completion.len(), true));
            }
            match end {
                Some((at, len, is_completion)) => {
                    let accepted = report.objects.len();
                    let line = take_record(
                        &text[pos..at],
                        pos,
                        Some(at + len),
                        format,
                        text,
                        &mut self.lines,
                        acceptor,
                        report,
                    );
                    if self.complete && report.objects.len() > accepted {
                        if self.after_completion == 0 {
                            self.after_completion_line = line;
                        }
                        self.after_completion += report.objects.len() - accepted;
                    }
                    self.pos = at + len;
                    if is_completion {
                        // LightRAG splits on the completion delimiter as on the record
                        // delimiter: what follows is read too. Look for the next one.
                        self.complete = true;
                        let from = self.pos;
                        self.completion_at =
                            text[from..].find(&format.completion).map(|i| from + i);
                        self.searched = text.len();
                    }
                }
                None => {
                    if at_eof {
                        // After the completion delimiter, a last piece that is no record (a
                        // separator line of `#`, a sentence) cannot be a cut one: it is prose.
                        // Before it, the reply is cut off whatever its last piece.
                        let cut = !self.complete || could_be_record(rest, format);
                        let dropped = report.dropped.len();
                        take_record(
                            rest,
                            pos,
                            (!cut).then_some(text.len()),
                            format,
                            text,
                            &mut self.lines,
                            acceptor,
                            report,
                        );
                        self.cut_at_end = cut && report.dropped.len() > dropped;
                        self.pos = text.len();
                    }
                    return;
                }
            }
        }
    }

    /// No completion delimiter by the end: the reply counts as cut off. Records read after it
    /// are worth a note (LightRAG reads them too).
    pub fn finish(&self, report: &mut ParseReport) {
        if !self.complete || self.cut_at_end {
            report.truncated = true;
        }
        if self.after_completion > 0 {
            report.notes.push(format!(
                "{} record(s) after the completion delimiter (from line {}): read, as LightRAG reads them",
                self.after_completion, self.after_completion_line
            ));
        }
    }
}

/// Whether `piece`, the text after the last delimiter, could be a record cut short: it opens
/// like one (a parenthesis or quote of the older form), holds a field delimiter, or is (the
/// beginning of) a record tag. A line of `#` or of prose is none of these.
fn could_be_record(piece: &str, format: &DelimitedFormat) -> bool {
    let p = piece.trim();
    if p.is_empty() {
        return false;
    }
    if p.starts_with(['(', '"']) || p.contains(&format.tuple) {
        return true;
    }
    let head = p.to_ascii_lowercase();
    format.records.iter().any(|(tag, _)| {
        let tag = tag.to_ascii_lowercase();
        head.starts_with(&tag) || tag.starts_with(&head)
    }) || RELATION_TAGS
        .iter()
        .any(|t| head.starts_with(*t) || t.starts_with(head.as_str()))
}

#[allow(clippy::too_many_arguments)]
fn take_record(
    raw: &str,
    at: usize,
    terminator_end: Option<usize>,
    format: &DelimitedFormat,
    text: &str,
    lines: &mut LineCounter,
    acceptor: &Acceptor<'_>,
    report: &mut ParseReport,
) -> usize {
    let record = raw.trim();
    if record.is_empty() || is_fence(record) {
        return 0;
    }
    let start = at + (raw.len() - raw.trim_start().len());
    let line = lines.line_at(text, start);
    let terminated = terminator_end.map(|end| (start, end));
    take_fields(record, line, terminated, format, acceptor, report);
    line
}

fn take_fields(
    record: &str,
    line: usize,
    terminated: Option<(usize, usize)>,
    format: &DelimitedFormat,
    acceptor: &Acceptor<'_>,
    report: &mut ParseReport,
) {
    // Where the record starts, and where its terminator ends.
    let Some(span) = terminated else {
        report.drop(
            line,
            DropKind::Truncated,
            format!(
                "last record has no delimiter after it (cut off?): {}",
                excerpt(record)
            ),
        );
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
    let Some((tag, names)) = format.record_for(&tag) else {
        let known = format
            .records
            .iter()
            .map(|(t, _)| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ");
        report.drop(
            line,
            DropKind::UnknownRecord,
            format!(
                "record type `{tag}` is not one of {known}: {}",
                excerpt(record)
            ),
        );
        return;
    };
    if values.len() != names.len() {
        report.drop(
            line,
            DropKind::FieldCount,
            format!(
                "`{tag}` record has {} field(s) after the tag, expected {} ({}): {}",
                values.len(),
                names.len(),
                names.join(", "),
                excerpt(record)
            ),
        );
        return;
    }
    // Exactly its fields: a report keeps every record's map.
    let mut object = Map::with_capacity(names.len() + 1);
    object.insert("type".into(), Value::String(tag.clone()));
    for (name, value) in names.iter().zip(values) {
        object.insert(name.clone(), Value::String(value));
    }
    acceptor.accept(report, line, span, Value::Object(object));
}

/// Trim a field and the quotes LightRAG's older form puts around it.
fn clean(field: &str) -> String {
    let f = field.trim();
    let f = f
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(f);
    f.trim().to_string()
}
