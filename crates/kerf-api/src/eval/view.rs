//! What the window's Evaluate screen shows beyond the report: a dataset previewed before an eval
//! is planned ([`preview`]: its rows, their expected records and every problem at its row), and
//! one cell opened ([`cell`]: expected and extracted records side by side, each marked; the raw
//! reply with each accepted record's span and the cut; the document with each record's
//! grounding spans). Both read what the CLI reads — the dataset through [`dataset::scan`] and
//! the prompts' [`Checker`], a cell through the history and the report's own scoring — so the
//! window shows what `kerf eval` and its HTML report decide, never a second opinion.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kerf_core::eval::Grounding;
use kerf_core::eval::dataset::{self, Checker, Row};
use kerf_core::eval::locate::{Words, places};
use kerf_core::{Error as CoreError, ResponseType};
use kerf_llm::RunDetails;
use kerf_store::{Status, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use super::report::{GroundIn, Reader, reread_reply, score_line};
use super::{CellLine, Eval};
use crate::error::{ApiError, Code, Result};
use crate::experiments::Subject;
use crate::experiments::cells::Ran;
use crate::text::Utf16;

/// Rows a preview lists at most (every row is still read and checked).
pub const PREVIEW_ROWS: usize = 500;
/// Problems a preview lists at most, and rows with problems past [`PREVIEW_ROWS`]: a hostile
/// dataset of a million bad rows is counted, not held.
pub const PREVIEW_PROBLEMS: usize = 2_000;
/// Characters of a row's document a preview shows.
const EXCERPT_CHARS: usize = 400;

/// A dataset as the Evaluate screen previews it before an eval is planned.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DatasetPreview {
    pub path: String,
    /// Rows read (a line that is not a row is not counted).
    pub rows: usize,
    /// The first rows, in the dataset's order ([`PREVIEW_ROWS`] at most), then any later row
    /// with a problem.
    pub shown: Vec<PreviewRow>,
    /// Every problem, as `kerf eval` names it, each at its row or line where it has one
    /// ([`PREVIEW_PROBLEMS`] at most).
    pub problems: Vec<DatasetProblem>,
    /// Problems found in all, listed or not.
    pub problems_total: usize,
    /// The prompts the rows were checked against (their ids), if any were given.
    pub prompts: Vec<String>,
}

/// One row of a preview.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PreviewRow {
    pub id: String,
    pub file: String,
    /// 1-based line in `file` (0: the file is the row, as in a folder of documents).
    pub line: usize,
    /// The start of the document.
    pub excerpt: String,
    /// The document's length in characters.
    pub chars: usize,
    /// The row's variables besides its document, by name.
    pub vars: Vec<String>,
    /// Expected records: one set for every prompt (under `""`), or a set per prompt id.
    #[ts(type = "Record<string, unknown[]>")]
    pub expected: BTreeMap<String, Vec<Value>>,
    /// Problems of this row (also in the preview's `problems`).
    pub problems: Vec<String>,
}

/// One problem of a dataset, where it is.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DatasetProblem {
    /// The row's id, when the problem is a row's.
    pub row: Option<String>,
    /// The 1-based line it names in the dataset file (or in `file`), when it names one.
    pub line: Option<usize>,
    /// The problem as the CLI prints it: `FILE:LINE, row ID: what is wrong`.
    pub message: String,
}

/// Read the dataset at `path` as an eval reads it, each row checked against `prompts` (none:
/// only the dataset's own problems), and keep the first [`PREVIEW_ROWS`] rows with every
/// problem; `set`, per prompt, names the variables set for every row (a row need not give
/// them). A dataset that cannot be read at all (no such file, not a dataset) is an error; a
/// dataset with problems is a preview that lists them.
pub fn preview(path: &Path, prompts: &[PathBuf], set: &[Vec<String>]) -> Result<DatasetPreview> {
    let subjects = prompts
        .iter()
        .map(|p| Subject::load(p))
        .collect::<Result<Vec<_>>>()?;
    let loaded: Vec<&kerf_core::Prompt> = subjects.iter().map(|s| &s.prompt).collect();
    let checker =
        Checker::new(&loaded).with_set(set.iter().map(|s| s.iter().cloned().collect()).collect());
    let mut shown = Vec::new();
    let mut problems = Vec::new();
    let (mut rows, mut total) = (0, 0);
    let scanned = dataset::scan::<CoreError>(path, &mut |row: Row| {
        rows += 1;
        let mut found = Vec::new();
        if !loaded.is_empty() {
            checker.row(&row, &mut found);
        }
        total += found.len();
        for message in &found {
            if problems.len() < PREVIEW_PROBLEMS {
                problems.push(DatasetProblem {
                    row: Some(row.id.clone()),
                    line: (row.line > 0).then_some(row.line),
                    message: message.clone(),
                });
            }
        }
        if shown.len() < PREVIEW_ROWS
            || (!found.is_empty() && shown.len() < PREVIEW_ROWS + PREVIEW_PROBLEMS)
        {
            shown.push(preview_row(&row, found, &loaded));
        }
        Ok(())
    });
    match scanned {
        Ok(_) => {}
        Err(CoreError::Dataset {
            place,
            problems: own,
        }) => {
            // The dataset's own problems (bad JSON, unknown keys, duplicate ids): each names
            // its file and line, which the rows shown are matched to.
            total += own.len();
            for message in own.into_iter().take(PREVIEW_PROBLEMS) {
                let line = line_of(&message, &place);
                let row = line.and_then(|l| {
                    shown
                        .iter_mut()
                        .find(|r| r.line == l && message.starts_with(&r.file))
                });
                let id = row.map(|r| {
                    r.problems.push(message.clone());
                    r.id.clone()
                });
                problems.push(DatasetProblem {
                    row: id,
                    line,
                    message,
                });
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(DatasetPreview {
        path: path.display().to_string(),
        rows,
        shown,
        problems,
        problems_total: total,
        prompts: subjects.iter().map(|s| s.prompt.id().to_string()).collect(),
    })
}

/// The line a problem names: the number after `FILE:` at its start.
fn line_of(message: &str, place: &str) -> Option<usize> {
    let rest = message.strip_prefix(place).unwrap_or(message);
    let rest = match rest.strip_prefix(':') {
        Some(r) => r,
        // A folder's problems name the document inside it.
        None => rest.split_once(':')?.1,
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&n| n > 0)
}

fn preview_row(row: &Row, problems: Vec<String>, prompts: &[&kerf_core::Prompt]) -> PreviewRow {
    let document = prompts
        .first()
        .and_then(|p| row.document(p))
        .or(row.input.as_deref())
        .unwrap_or_default();
    let input_vars: Vec<&str> = prompts.iter().map(|p| p.file.input_variable()).collect();
    let expected = match &row.expected {
        None => BTreeMap::new(),
        Some(dataset::Expected::All(v)) => BTreeMap::from([(String::new(), v.clone())]),
        Some(dataset::Expected::ByPrompt(by)) => by.clone(),
    };
    PreviewRow {
        id: row.id.clone(),
        file: row.file.clone(),
        line: row.line,
        excerpt: document.chars().take(EXCERPT_CHARS).collect(),
        chars: document.chars().count(),
        vars: row
            .vars
            .keys()
            .filter(|k| !input_vars.contains(&k.as_str()))
            .cloned()
            .collect(),
        expected,
        problems,
    }
}

/// A cell of an eval's matrix, as the window names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CellKey {
    pub row: String,
    pub prompt: String,
    /// The provider whose cell it is (absent: the eval's first).
    #[serde(default)]
    #[ts(optional)]
    pub provider: Option<String>,
    pub max_tokens: u32,
    pub constrained: bool,
    pub repeat: u32,
    /// A cut document's line: the size it was cut at, and the context each chunk was given.
    #[serde(default)]
    #[ts(optional)]
    pub chunk_size: Option<u32>,
    #[serde(default)]
    #[ts(optional)]
    pub context_chars: Option<u32>,
}

/// How a record fared in its cell's scoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Paired with a record on the other side, every identity field equal.
    Matched,
    /// Paired below exact equality (matching's `fuzzy`).
    Partial,
    /// Expected and not extracted.
    Missed,
    /// Extracted and not expected.
    Spurious,
    /// The row has no expected records for this prompt: nothing to score against.
    Unscored,
}

/// A span `[start, end)` in a text, in UTF-16 units: the page slices its string with it.
pub type Span = [u32; 2];

/// One record of an opened cell.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct MarkedRecord {
    #[ts(type = "unknown")]
    pub object: Value,
    pub mark: Mark,
    /// The index of the record it was paired with, on the other side.
    pub pair: Option<usize>,
    /// Extracted records: where the record sits in the raw reply (`None` when the reply was
    /// unwrapped from a key before it was parsed, or for expected records).
    pub reply_span: Option<Span>,
    /// Extracted records: each grounding field and where the document has it.
    pub grounding: Vec<GroundPlace>,
    /// Extracted records: whether every grounding field is found in the document (`None`: the
    /// row has no document).
    pub grounded: Option<bool>,
    /// A cut document's extracted records: where the merge placed the record in the document,
    /// how, and which chunk and pass found it first.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub mention: Option<MentionPlace>,
}

/// Where a cut document's record was placed ([`kerf_core::eval::mentions::Mention`], its span
/// in UTF-16 units of the document).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct MentionPlace {
    pub chunk: u32,
    pub pass: u32,
    pub span: Option<Span>,
    pub status: kerf_core::eval::mentions::SpanStatus,
    /// Other mentions folded into it.
    pub merged: u32,
}

/// One chunk of a cut document, as the document view draws it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ChunkPlace {
    /// From 1.
    pub index: u32,
    /// The document's characters it holds whole, in UTF-16 units: its place (for a token
    /// window that splits a character, without the character it splits at either end; `None`:
    /// not known).
    pub span: Option<Span>,
    /// Its reply (some pass's) was cut by the budget.
    pub cut: bool,
}

/// A grounding field of a record and its place in the document (`None`: not found).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GroundPlace {
    pub field: String,
    pub span: Option<Span>,
}

/// One cell opened: what the Evaluate screen shows when a cell of the matrix is clicked.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CellView {
    /// The cell, scored as the report scores it.
    pub line: CellLine,
    pub response_type: ResponseType,
    pub expected: Vec<MarkedRecord>,
    pub extracted: Vec<MarkedRecord>,
    /// The reply as received (`None`: the cell has no finished run).
    pub reply: Option<String>,
    /// Where the reply was cut by its budget (its end), when it was (UTF-16 units).
    pub cut: Option<u32>,
    /// Where the last accepted record ends: what lies after it gave nothing.
    pub parsed_to: Option<u32>,
    /// The row's document.
    pub document: Option<String>,
    /// Why pieces of the reply were dropped, one line each (`line N: reason`).
    pub drops: Vec<String>,
    /// A cut document's chunks, in order (empty for a whole document): consecutive chunks
    /// whose spans overlap share that text.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<ChunkPlace>>", optional)]
    pub chunks: Vec<ChunkPlace>,
}

/// Open cell `key` of eval `eval`: read its row and its run's reply back from the history, and
/// score it as the report does.
pub fn cell(store: &Store, eval: &Eval, key: &CellKey) -> Result<CellView> {
    let reader = Reader::new(store, eval, super::Replies::Stored);
    let not_found = |what: &str| {
        ApiError::new(
            Code::NotFound,
            format!("eval {} has no {what}", eval.experiment),
        )
    };
    let si = reader
        .subject(&key.prompt)
        .ok_or_else(|| not_found(&format!("prompt `{}`", key.prompt)))?;
    let seq = reader
        .seq(&key.row)
        .ok_or_else(|| not_found(&format!("row `{}`", key.row)))?;
    let subject = &eval.subjects[si];
    let prompt = &subject.prompt;
    let m = prompt.matcher();
    let provider = match &key.provider {
        None => eval.spec.providers.first(),
        Some(name) => eval
            .provider_index(name)
            .and_then(|i| eval.spec.providers.get(i)),
    }
    .ok_or_else(|| {
        not_found(&format!(
            "provider `{}`",
            key.provider.as_deref().unwrap_or_default()
        ))
    })?;
    // The cell as the history keys it (a cut document: its first chunk's first pass).
    let stored_key = kerf_store::CellKey {
        prompt: key.prompt.clone(),
        provider: provider.provider.clone(),
        model: provider.model.clone(),
        max_tokens: key.max_tokens,
        constrained: key.constrained,
        repeat: key.repeat,
        chunk_size: key.chunk_size.unwrap_or(0),
        context_chars: key.context_chars.unwrap_or(0),
        chunk: 0,
        pass: 0,
        row: key.row.clone(),
    };
    if key.chunk_size.is_some() {
        let cells = store.eval_document_outcomes(eval.experiment, &stored_key)?;
        if cells.is_empty() {
            return Err(not_found("such cell"));
        }
        return document_cell(store, eval, &reader, (si, seq), stored_key, cells);
    }
    let stored = store
        .eval_outcome(eval.experiment, &stored_key)?
        .ok_or_else(|| not_found("such cell"))?;
    let mut line = CellLine::unscored(&stored, eval.experiment);
    let row = eval.row(store, seq)?;
    let document = row.document(prompt).map(str::to_string);
    let expected_records = expected_of(&row, prompt);
    let mut view = CellView::opened(prompt, document.clone(), line.clone(), Vec::new());
    let Some(run) = line.run.filter(|_| line.measured()) else {
        view.expected = expected_records
            .into_iter()
            .map(|o| plain(o, Mark::Missed))
            .collect();
        return Ok(view);
    };
    let reply = reader.reply(run, si, &row)?;
    let objects = score_line(
        &mut line,
        &m,
        prompt,
        &row,
        &reply.report,
        GroundIn::Document,
    );
    view.drops = reply
        .report
        .dropped
        .iter()
        .map(|d| format!("line {}: {} ({})", d.line, d.kind, d.detail))
        .collect();
    drop(reply);
    let body = store.eval_reply(run, true)?;
    let wrapped = body
        .details
        .as_ref()
        .and_then(|d| serde_json::from_value::<RunDetails>(d.clone()).ok())
        .is_some_and(|d| d.wrapped_in().is_some());
    let raw = body.raw.unwrap_or_default();
    // Where each record ends: the history keeps the parse's records, not their offsets, so the
    // raw reply is read again as its run read it (the same records, or no spans).
    let vars = eval.vars_for(si, &row);
    let again = reread_reply(prompt, &vars, Some(&raw), body.details);
    let ends: Vec<usize> = again.ends.iter().collect();
    // Offsets of a reply unwrapped from a key are into the unwrapped text, not the raw one.
    let in_reply = Utf16::new(&raw);
    let spans: Vec<Option<Span>> = if wrapped || again.objects.len() != objects.len() {
        vec![None; objects.len()]
    } else {
        prompt
            .parser
            .spans(&raw, &vars, &again)
            .into_iter()
            .map(|(s, e)| Some([in_reply.at(s), in_reply.at(e)]))
            .collect()
    };
    let words = document.as_deref().map(|d| Words::new(&m, d));
    let in_document = Utf16::new(document.as_deref().unwrap_or_default());
    let ungrounded: Option<Vec<usize>> = document
        .as_deref()
        .map(|d| Grounding::new(&m, d).ungrounded(&m, &objects));
    let (expected, x_marks, x_pair) = marked(&line, expected_records, objects.len());
    view.expected = expected;
    view.extracted = objects
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let grounding = words
                .as_ref()
                .map(|w| {
                    places(&m, w, &o)
                        .into_iter()
                        .map(|p| GroundPlace {
                            field: p.field,
                            span: p
                                .span
                                .map(|r| [in_document.at(r.start), in_document.at(r.end)]),
                        })
                        .collect()
                })
                .unwrap_or_default();
            MarkedRecord {
                mark: x_marks[i],
                pair: x_pair[i],
                reply_span: spans.get(i).copied().flatten(),
                grounding,
                grounded: ungrounded.as_ref().map(|u| !u.contains(&i)),
                object: o,
                mention: None,
            }
        })
        .collect();
    view.cut = (line.finish_reason == Some(kerf_llm::FinishReason::Length))
        .then(|| in_reply.at(raw.len()));
    view.parsed_to = ends.last().map(|&e| in_reply.at(e));
    view.reply = Some(raw);
    view.line = line;
    Ok(view)
}

impl CellView {
    /// A cell opened, before its records are read: its line, its document, its chunks.
    fn opened(
        prompt: &kerf_core::Prompt,
        document: Option<String>,
        line: CellLine,
        chunks: Vec<ChunkPlace>,
    ) -> CellView {
        CellView {
            response_type: prompt.file.response_type,
            expected: Vec::new(),
            extracted: Vec::new(),
            reply: None,
            cut: None,
            parsed_to: None,
            document,
            drops: Vec::new(),
            line,
            chunks,
        }
    }
}

/// Row `row`'s expected records for `prompt` (none when it has none).
fn expected_of(row: &Row, prompt: &kerf_core::Prompt) -> Vec<Value> {
    row.expected_for(prompt)
        .map(|(e, _)| e.to_vec())
        .unwrap_or_default()
}

fn plain(object: Value, mark: Mark) -> MarkedRecord {
    MarkedRecord {
        object,
        mark,
        pair: None,
        reply_span: None,
        grounding: Vec::new(),
        grounded: None,
        mention: None,
    }
}

/// The expected records marked as `line`'s scoring paired them, and each of its `extracted`
/// records' mark and pair.
fn marked(
    line: &CellLine,
    expected: Vec<Value>,
    extracted: usize,
) -> (Vec<MarkedRecord>, Vec<Mark>, Vec<Option<usize>>) {
    let (mut e_marks, mut x_marks, mut e_pair, mut x_pair) = match &line.scored {
        Some(_) => (
            vec![Mark::Missed; expected.len()],
            vec![Mark::Spurious; extracted],
            vec![None; expected.len()],
            vec![None; extracted],
        ),
        None => (
            Vec::new(),
            vec![Mark::Unscored; extracted],
            Vec::new(),
            vec![None; extracted],
        ),
    };
    if let Some(s) = &line.scored {
        for p in &s.matched {
            let mark = if p.is_partial() {
                Mark::Partial
            } else {
                Mark::Matched
            };
            if p.expected < e_marks.len() && p.actual < x_marks.len() {
                (e_marks[p.expected], e_pair[p.expected]) = (mark, Some(p.actual));
                (x_marks[p.actual], x_pair[p.actual]) = (mark, Some(p.expected));
            }
        }
        // A repeat not scored again (`match.repeats: once`): marked as the record it repeats
        // (paired with the same expected record) when that one matched, else not scored.
        for &(i, of) in &s.repeats {
            if i < x_marks.len() && of < x_marks.len() {
                (x_marks[i], x_pair[i]) = match x_marks[of] {
                    Mark::Spurious => (Mark::Unscored, None),
                    m => (m, x_pair[of]),
                };
            }
        }
    }
    let expected = expected
        .into_iter()
        .zip(e_marks.into_iter().zip(e_pair))
        .map(|(o, (mark, pair))| MarkedRecord {
            pair,
            ..plain(o, mark)
        })
        .collect();
    (expected, x_marks, x_pair)
}

/// A cut document's line opened (`doc_key`: its first chunk's first pass): its chunk replies merged as the
/// report merges them, its records marked, each extracted one with its place in the document,
/// and the chunks drawn over the document. No single reply: each chunk has its own.
fn document_cell(
    store: &Store,
    eval: &Eval,
    reader: &Reader<'_>,
    (si, seq): (usize, usize),
    doc_key: kerf_store::CellKey,
    cells: Vec<kerf_store::StoredReply>,
) -> Result<CellView> {
    let prompt = &eval.subjects[si].prompt;
    let m = prompt.matcher();
    let size = doc_key.chunk_size;
    let requests = eval.document_requests(si, seq, size);
    let mut line = CellLine::of_document(&doc_key, &cells, requests, eval.experiment);
    let row = eval.row(store, seq)?;
    let document = row.document(prompt).map(str::to_string);
    let text = document.as_deref().unwrap_or_default();
    // Characters (the chunks' and mentions' unit) to UTF-16 units (the page's).
    let mut units = Vec::with_capacity(text.len() + 1);
    let mut at = 0u32;
    for c in text.chars() {
        units.push(at);
        at += c.len_utf16() as u32;
    }
    units.push(at);
    let span = |s: Option<usize>, e: Option<usize>| -> Option<Span> {
        Some([*units.get(s?)?, *units.get(e?)?])
    };
    let chunks = eval.chunks(si, seq, &row, size)?;
    let cut: Vec<u32> = line
        .chunks
        .as_ref()
        .map(|f| f.cut_chunks.clone())
        .unwrap_or_default();
    let expected_records = expected_of(&row, prompt);
    let places = chunks
        .iter()
        .map(|c| ChunkPlace {
            index: c.index as u32,
            span: c.held().and_then(|h| span(Some(h.start), Some(h.end))),
            cut: cut.contains(&(c.index as u32)),
        })
        .collect();
    let mut view = CellView::opened(prompt, document.clone(), line.clone(), places);
    let expected = row.expected_for(prompt).map(|(e, _)| e);
    let Some(doc) = reader.document(&line, si, seq, &row, expected)? else {
        view.expected = expected_records
            .into_iter()
            .map(|o| plain(o, Mark::Missed))
            .collect();
        return Ok(view);
    };
    let objects = score_line(
        &mut line,
        &m,
        prompt,
        &row,
        &doc.reply.report,
        GroundIn::Chunks,
    );
    view.drops = doc
        .reply
        .report
        .dropped
        .iter()
        .map(|d| format!("line {}: {} ({})", d.line, d.kind, d.detail))
        .collect();
    let mentions = doc.merged.mentions.clone();
    line.merged(&m, doc);
    if let (Some(expected), Some(text)) = (expected, document.as_deref()) {
        let places = super::report::documents::expected_places(&m, text, expected);
        super::report::documents::chunk_figures(&mut line, &chunks, &places);
    }
    let (expected, x_marks, x_pair) = marked(&line, expected_records, objects.len());
    view.expected = expected;
    view.extracted = objects
        .into_iter()
        .zip(mentions)
        .enumerate()
        .map(|(i, (o, mn))| MarkedRecord {
            mark: x_marks[i],
            pair: x_pair[i],
            grounded: Some(mn.status != kerf_core::eval::mentions::SpanStatus::NotFound),
            mention: Some(MentionPlace {
                chunk: mn.chunk,
                pass: mn.pass,
                span: span(mn.start, mn.end),
                status: mn.status,
                merged: mn.merged,
            }),
            ..plain(o, x_marks[i])
        })
        .collect();
    view.line = line;
    Ok(view)
}

/// The line of the document whose chunk cell `cell` (of prompt `subject`, row `seq`) just
/// ended, once it was the document's last: its chunks' replies merged and scored as the report
/// scores them, for the window's matrix. `None` while a chunk of it is still to run, or when
/// one failed (the report says why, at the end).
pub(super) fn live_document(
    store: &Store,
    eval: &Eval,
    subject: usize,
    seq: usize,
    cell: &kerf_store::CellKey,
) -> Result<Option<CellLine>> {
    let doc_key = kerf_store::CellKey {
        chunk: 0,
        pass: 0,
        ..cell.clone()
    };
    let cells = store.eval_document_outcomes(eval.experiment, &doc_key)?;
    if cells.len() < eval.document_requests(subject, seq, cell.chunk_size)
        || !cells.iter().all(|c| c.cell.finished())
    {
        return Ok(None);
    }
    let reader = Reader::new(store, eval, super::Replies::Stored);
    Ok(Some(
        document_cell(store, eval, &reader, (subject, seq), doc_key, cells)?.line,
    ))
}

/// Cell `cell` (of prompt `subject`, row `seq`) as it just ended (`ran`), scored as the report
/// scores it from what the history now keeps: the window's matrix fills in from these. Its
/// `lost_to_cut` waits for the report (it needs the cell's siblings).
pub(super) fn live(
    store: &Store,
    eval: &Eval,
    subject: usize,
    seq: usize,
    cell: kerf_store::CellKey,
    ran: &Ran,
) -> Result<CellLine> {
    let (run, finish, completion_tokens, cost_usd, cached) = match ran {
        Ran::Run(r) => (
            r.history_id,
            Some(r.out.finish.reason),
            Some(i64::from(r.out.finish.usage.completion_tokens)),
            r.cost.as_ref().map(|c| c.usd),
            false,
        ),
        // The cache takes only replies that ended on their own.
        Ran::Cached(id) => (
            Some(*id),
            Some(kerf_llm::FinishReason::Stop),
            None,
            None,
            true,
        ),
    };
    let mut line = CellLine::of(&cell, run, finish.map(Status::for_finish));
    line.finish_reason = finish;
    line.completion_tokens = completion_tokens;
    line.cost_usd = cost_usd;
    line.cached = cached;
    if let Some(run) = line.run.filter(|_| line.measured()) {
        let prompt = &eval.subjects[subject].prompt;
        let row = eval.row(store, seq)?;
        let reply = Reader::new(store, eval, super::Replies::Stored).reply(run, subject, &row)?;
        score_line(
            &mut line,
            &prompt.matcher(),
            prompt,
            &row,
            &reply.report,
            GroundIn::Document,
        );
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_problem_is_placed_at_the_line_it_names() {
        assert_eq!(line_of("/d/x.jsonl:7: not JSON", "/d/x.jsonl"), Some(7));
        assert_eq!(
            line_of("/d/x.jsonl:12, row r3: bad", "/d/x.jsonl"),
            Some(12)
        );
        assert_eq!(line_of("/d/x.jsonl: no rows", "/d/x.jsonl"), None);
        assert_eq!(line_of("/d/docs/a.txt:3: bad", "/d/docs"), Some(3));
    }
}
