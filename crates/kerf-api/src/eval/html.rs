//! An eval as one self-contained HTML page (`kerf eval report --html`, and the window's "Save
//! the HTML report"): the summary, F1 and recall
//! against the budget (the report's charts as SVG, inline), budget advice, repeats, comparisons,
//! the drop-reason histogram with its rows, and every row's expected and extracted records side
//! by side, marked matched / partial / missed / spurious. A minijinja template, auto-escaped.
//!
//! The page is written as it is made ([`write`]): the figures first, then each row, each of its
//! cells' records read back from the history as the cell is written and let go after — the
//! page of an eval whose replies weigh gigabytes is never held whole, nor more than one reply
//! of it. The template is one file, `report.html`, cut at its row and cell loops into the pieces
//! written in turn (a test holds the pieces to the whole template, byte for byte).

use kerf_core::eval::score::without_aliases;
use serde_json::{Value, json};

use super::report::Reader;
use super::{CellLine, Eval, Report};
use crate::error::{ApiError, Code, Result};
use kerf_store::Store;

const TEMPLATE: &str = include_str!("report.html");

/// `report` (of `eval`) as one HTML page, nothing fetched and no script.
pub fn html(store: &Store, eval: &Eval, report: &Report) -> Result<String> {
    let mut out = Vec::new();
    write(store, eval, report, &mut out)?;
    String::from_utf8(out).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}

/// Write `report` (of `eval`) to `out` as one HTML page, a row at a time: each cell's records
/// are read back from `store` as the cell is written.
pub fn write(
    store: &Store,
    eval: &Eval,
    report: &Report,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let pieces = Pieces::of(TEMPLATE)?;
    let env = environment(&pieces)?;
    let context = minijinja::Value::from_serialize(head_context(report)?);
    let render = |name: &str, ctx: minijinja::Value, out: &mut dyn std::io::Write| {
        env.get_template(name)
            .and_then(|t| t.render_captured_to(ctx, &mut *out).map(|_| ()))
            .map_err(|e| ApiError::new(Code::Internal, format!("the HTML report: {e:#}")))
    };
    render("head", context.clone(), out)?;
    // The first repeat of every cell, by row, in the report's order.
    let mut by_row: std::collections::HashMap<&str, Vec<&CellLine>> = Default::default();
    for c in report.cells.iter().filter(|c| c.repeat == 0) {
        by_row.entry(c.row.as_str()).or_default().push(c);
    }
    let reader = Reader::new(store, eval, report.replies);
    let none = Vec::new();
    for (seq, id) in eval.rows.iter().enumerate() {
        let cells = by_row.get(id.as_str()).unwrap_or(&none);
        let heads: Vec<Value> = cells.iter().map(|c| cell_head(c)).collect();
        let row = minijinja::Value::from_serialize(json!({"id": id, "cells": heads}));
        render(
            "row",
            minijinja::context! { row, first => seq == 0, ..context.clone() },
            out,
        )?;
        if !cells.is_empty() {
            let row = eval.row(store, seq)?;
            for c in cells {
                let expected = eval
                    .subjects
                    .iter()
                    .find(|s| s.prompt.id() == c.prompt)
                    .and_then(|s| row.expected_for(&s.prompt))
                    .map(|(e, _)| e)
                    .unwrap_or_default();
                let extracted = reader.objects(c)?;
                let mut side = side_by_side(c, expected, &extracted);
                drop(extracted);
                if let (Some(size), Some(si)) = (c.chunk_size, reader.subject(&c.prompt))
                    && let Some(text) = row.document(&eval.subjects[si].prompt)
                {
                    let chunks = eval.chunks(si, seq, &row, size)?;
                    side["document"] = document_view(text, &chunks, c);
                }
                let c = minijinja::Value::from_serialize(&side);
                render("cell", minijinja::context! { c, ..context.clone() }, out)?;
            }
        }
        render("row_end", context.clone(), out)?;
    }
    render("tail", context, out)?;
    Ok(())
}

/// The page rendered whole from `report` and its `rows` (each `{"id", "cells": [side by
/// side, …]}`): how it was made before it was written a piece at a time, which the tests hold
/// [`write`] to.
#[cfg(test)]
pub(super) fn whole(report: &Report, rows: Vec<Value>) -> Result<String> {
    let mut context = head_context(report)?;
    context["rows"] = Value::Array(rows);
    let mut env = minijinja::Environment::new();
    add_figures(&mut env);
    env.template_from_named_str("eval-report.html", TEMPLATE)
        .and_then(|t| t.render(context))
        .map_err(|e| ApiError::new(Code::Internal, format!("the HTML report: {e:#}")))
}

/// The page's figures: everything but the rows.
fn head_context(report: &Report) -> Result<Value> {
    let repeated = report.summary.iter().any(|l| l.repeats.is_some());
    let mut charts = report.budget_charts();
    charts.extend(report.chunk_size_charts());
    charts.extend(report.flight_chart());
    charts.extend(report.latency_chart());
    let charts = charts
        .iter()
        .map(|c| crate::charts::svg(c, 760, 380))
        .collect::<Result<Vec<_>>>()?;
    let drop_chart = report
        .drop_chart()
        .map(|c| crate::charts::svg(&c, 760, 380))
        .transpose()?;
    // The report but its cells: the page draws each cell as it comes to it ([`write`]), and a
    // long document's cells (their records' places) are tens of megabytes.
    let r = json!({
        "experiment": report.experiment,
        "summary": report.summary,
        "dataset": report.dataset,
        "rows": report.rows,
        "repeat": report.repeat,
        "provider": report.provider,
        "model": report.model,
        "providers": report.providers,
        "pending": report.pending,
        "cached": report.cached,
        "advice": report.advice,
        "drops": report.drops,
        "comparisons": report.comparisons,
        "vars": report.vars,
        "chunking": report.chunking,
    });
    Ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "r": r,
        "several": report.providers.len() > 1,
        "charts": charts,
        "band_note": if repeated {
            "Shaded: F1's range over the repeats. Points: every repeat pooled."
        } else {
            "Shaded: F1's 95% bootstrap interval over the rows."
        },
        "drop_chart": drop_chart,
    }))
}

/// The template cut at its loops over rows and over a row's cells: `head`, then per row `row`,
/// per cell `cell`, `row_end`; then `tail`.
struct Pieces {
    head: String,
    row: String,
    cell: String,
    row_end: String,
    tail: String,
}

/// A `{% … %}` tag of the template: where it starts and ends, and what it says.
struct Tag<'t> {
    start: usize,
    end: usize,
    text: &'t str,
}

impl Pieces {
    /// Cut `template` at `{% for row in rows %}` … `{% endfor %}` and, inside it, at the loop
    /// over `row.cells` that writes the cells (the second one: the first writes the row's
    /// summary line). The row loop's `loop.first` becomes `first`.
    fn of(template: &str) -> Result<Pieces> {
        let broken = |what: &str| {
            ApiError::new(
                Code::Internal,
                format!("the HTML report's template: {what}"),
            )
        };
        let mut tags = Vec::new();
        let mut at = 0;
        while let Some(i) = template[at..].find("{%") {
            let start = at + i;
            let Some(j) = template[start..].find("%}") else {
                break;
            };
            let end = start + j + 2;
            let text =
                template[start + 2..end - 2].trim_matches(|c: char| c == '-' || c.is_whitespace());
            tags.push(Tag { start, end, text });
            at = end;
        }
        // The `endfor` closing the `for` at `tags[i]`.
        let closing = |i: usize| -> Option<usize> {
            let mut depth = 0;
            for (k, t) in tags.iter().enumerate().skip(i) {
                if t.text.starts_with("for ") {
                    depth += 1;
                } else if t.text == "endfor" {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
            }
            None
        };
        let rows = tags
            .iter()
            .position(|t| t.text == "for row in rows")
            .ok_or_else(|| broken("no loop over the rows"))?;
        let rows_end = closing(rows).ok_or_else(|| broken("the rows' loop is not closed"))?;
        let cells = tags[rows..rows_end]
            .iter()
            .enumerate()
            .filter(|(_, t)| t.text == "for c in row.cells")
            .map(|(k, _)| rows + k)
            .nth(1)
            .ok_or_else(|| broken("no loop writing a row's cells"))?;
        let cells_end = closing(cells).ok_or_else(|| broken("the cells' loop is not closed"))?;
        let row = &template[tags[rows].end..tags[cells].start];
        if row.matches("loop.first").count() != 1 || !row.contains("{% if loop.first %}") {
            return Err(broken("the row loop's `loop.first` is not where it was"));
        }
        let tail = &template[tags[rows_end].end..];
        Ok(Pieces {
            head: template[..tags[rows].start].to_string(),
            row: row.replace("{% if loop.first %}", "{% if first %}"),
            cell: template[tags[cells].end..tags[cells_end].start].to_string(),
            row_end: template[tags[cells_end].end..tags[rows_end].start].to_string(),
            // As the whole template ends: without its last newline.
            tail: tail
                .strip_suffix("\r\n")
                .or_else(|| tail.strip_suffix('\n'))
                .unwrap_or(tail)
                .to_string(),
        })
    }
}

/// The report template's functions for figures: three decimals, signed, one decimal, dollars,
/// seconds; `–` for a figure that is missing.
fn add_figures(env: &mut minijinja::Environment<'_>) {
    env.add_function("fig", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:.3}"))
    });
    env.add_function("signed", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:+.3}"))
    });
    env.add_function("one", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:.1}"))
    });
    env.add_function("money", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("${v:.5}"))
    });
    env.add_function("seconds", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:.2} s"))
    });
}

/// The pieces as templates, with the report's functions. Every piece keeps its last newline:
/// in the whole template, none of them ends it (the tail's is taken off when it is cut).
fn environment(pieces: &Pieces) -> Result<minijinja::Environment<'_>> {
    let mut env = minijinja::Environment::new();
    env.set_keep_trailing_newline(true);
    // Auto-escaped as `report.html` is: by the name's extension.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    add_figures(&mut env);
    for (name, source) in [
        ("head", &pieces.head),
        ("row", &pieces.row),
        ("cell", &pieces.cell),
        ("row_end", &pieces.row_end),
        ("tail", &pieces.tail),
    ] {
        env.add_template(name, source)
            .map_err(|e| ApiError::new(Code::Internal, format!("the HTML report: {e:#}")))?;
    }
    Ok(env)
}

/// What a row's summary line shows of a cell.
fn cell_head(c: &CellLine) -> Value {
    json!({"prompt": c.prompt, "provider": c.provider, "max_tokens": c.max_tokens, "constrained": c.constrained, "chunk_size": c.chunk_size, "f1": c.f1})
}

/// A cut document as the page draws it: its text in segments, cut at every chunk's ends and
/// every merged record's place, each segment's class (its chunk's band, `ov` where two chunks
/// share it, `rec` inside a record's place) and, where a chunk starts, its number and whether its
/// reply was cut.
fn document_view(text: &str, chunks: &[kerf_core::chunk::Chunk], c: &CellLine) -> Value {
    let cut: &[u32] = c.chunks.as_ref().map_or(&[], |f| &f.cut_chunks);
    let placed: Vec<(usize, usize, u32)> = chunks
        .iter()
        .filter_map(|k| k.held().map(|h| (h.start, h.end, k.index as u32)))
        .collect();
    let records: Vec<(usize, usize)> = c
        .spans
        .iter()
        .filter_map(|s| Some((s.mention.start?, s.mention.end?)))
        .collect();
    let chars: Vec<char> = text.chars().collect();
    // Drawn up to a bound, as the records are: a book drawn whole in every cell made pages of
    // hundreds of megabytes. The window draws the whole document.
    let drawn = chars.len().min(SHOWN_DOCUMENT_CHARS);
    let mut points: Vec<usize> = vec![0, drawn];
    points.extend(placed.iter().flat_map(|&(s, e, _)| [s, e]));
    points.extend(records.iter().flat_map(|&(s, e)| [s, e]));
    points.retain(|&p| p <= drawn);
    points.sort_unstable();
    points.dedup();
    // One sweep over the points: each segment costs what is open over it, not a look at every
    // chunk and record (a book has thousands of each).
    let chunk_spans: Vec<(usize, usize)> = placed.iter().map(|&(s, e, _)| (s, e)).collect();
    let mut in_chunks = Open::new(&chunk_spans);
    let mut in_records = Open::new(&records);
    let mut starts_at: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
    for &(s, _, i) in placed.iter().rev() {
        starts_at.insert(s, i);
    }
    let segments: Vec<Value> = points
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let covering: Vec<u32> = in_chunks.at(a).iter().map(|&k| placed[k].2).collect();
            let mut class = match covering.first() {
                Some(i) if i % 2 == 1 => "odd".to_string(),
                Some(_) => "even".to_string(),
                None => String::new(),
            };
            if covering.len() > 1 {
                class = "ov".into();
            }
            if !in_records.at(a).is_empty() {
                class.push_str(" rec");
            }
            let starts = starts_at.get(&a).copied();
            json!({
                "text": chars[a..b].iter().collect::<String>(),
                "class": class.trim(),
                "starts": starts,
                "cut": starts.is_some_and(|i| cut.contains(&i)),
            })
        })
        .collect();
    let more = if drawn < chars.len() {
        let left: usize = chars[drawn..].iter().map(|c| c.len_utf8()).sum();
        json!({"chars": chars.len() - drawn, "size": size(left)})
    } else {
        Value::Null
    };
    json!({"chunks": chunks.len(), "cut": !cut.is_empty(), "segments": segments, "more": more})
}

/// Spans `(start, end)` open at points asked in increasing order: those with `start <= a < end`,
/// by their index in the list. Between two consecutive cut points (every span's ends among
/// them) that is exactly the spans covering the segment from `a`.
struct Open<'s> {
    spans: &'s [(usize, usize)],
    by_start: Vec<usize>,
    next: usize,
    open: Vec<usize>,
}

impl<'s> Open<'s> {
    fn new(spans: &'s [(usize, usize)]) -> Open<'s> {
        let mut by_start: Vec<usize> = (0..spans.len()).collect();
        by_start.sort_by_key(|&k| spans[k].0);
        Open {
            spans,
            by_start,
            next: 0,
            open: Vec::new(),
        }
    }

    fn at(&mut self, a: usize) -> &[usize] {
        while let Some(&k) = self.by_start.get(self.next)
            && self.spans[k].0 <= a
        {
            let at = self.open.partition_point(|&o| o < k);
            self.open.insert(at, k);
            self.next += 1;
        }
        let spans = self.spans;
        self.open.retain(|&k| spans[k].1 > a);
        &self.open
    }
}

/// A cell's expected and extracted records, each with its mark.
pub(super) fn side_by_side(c: &CellLine, expected: &[Value], extracted: &[Value]) -> Value {
    let marks = |n: usize, default: &'static str| vec![default; n];
    let (expected_marks, extracted_marks) = match &c.scored {
        Some(s) => {
            let mut e = marks(expected.len(), "missed");
            let mut x = marks(extracted.len(), "spurious");
            for p in &s.matched {
                let mark = if p.is_partial() { "partial" } else { "matched" };
                if let Some(m) = e.get_mut(p.expected) {
                    *m = mark;
                }
                if let Some(m) = x.get_mut(p.actual) {
                    *m = mark;
                }
            }
            // A repeat not scored again (`match.repeats: once`): as the record it repeats when
            // that one matched, else not scored.
            for &(i, of) in &s.repeats {
                let mark = match x.get(of) {
                    Some(&m) if m != "spurious" => m,
                    _ => "unscored",
                };
                if let Some(m) = x.get_mut(i) {
                    *m = mark;
                }
            }
            (e, x)
        }
        None => (Vec::new(), marks(extracted.len(), "unscored")),
    };
    let expected_shown = if c.scored.is_some() { expected } else { &[] };
    let (expected, expected_more) = shown(expected_shown, &expected_marks);
    let (extracted, extracted_more) = shown(extracted, &extracted_marks);
    json!({
        "prompt": c.prompt, "provider": c.provider, "max_tokens": c.max_tokens, "constrained": c.constrained,
        "chunk_size": c.chunk_size, "context_chars": c.context_chars,
        "finish_reason": c.finish_reason, "run": c.run, "f1": c.f1,
        "tp": c.tp, "fp": c.fp, "fn": c.fn_,
        "expected": expected, "extracted": extracted,
        "expected_more": expected_more, "extracted_more": extracted_more,
    })
}

/// Records a cell shows in the page, at most: a reply cut at 64 MiB holds hundreds of
/// thousands, and eight such cells once made a 522 MB page. The rest is counted, and the page
/// points at the run that holds the whole reply.
const SHOWN_RECORDS: usize = 500;
/// Bytes of record text a cell shows, at most (each record's own text at most
/// [`SHOWN_RECORD_CHARS`] characters).
const SHOWN_BYTES: usize = 256 << 10;
const SHOWN_RECORD_CHARS: usize = 2_000;
/// Characters of a cut document a cell draws, at most.
const SHOWN_DOCUMENT_CHARS: usize = 256 << 10;

/// `records` with their `marks` as the page lists them, up to the bounds above; and what was
/// left out (`{records, size}`), if anything.
fn shown(records: &[Value], marks: &[&str]) -> (Vec<Value>, Value) {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (o, m) in records.iter().zip(marks) {
        if out.len() == SHOWN_RECORDS || bytes >= SHOWN_BYTES {
            break;
        }
        let mut text = without_aliases(o).to_string();
        if let Some((cut, _)) = text.char_indices().nth(SHOWN_RECORD_CHARS) {
            let left = text.len() - cut;
            text.truncate(cut);
            text.push_str(&format!("… ({} more)", size(left)));
        }
        bytes += text.len();
        out.push(json!({"text": text, "mark": m}));
    }
    let rest = &records[out.len().min(records.len())..];
    let more = if rest.is_empty() {
        Value::Null
    } else {
        let left: usize = rest.iter().map(|o| o.to_string().len()).sum();
        json!({"records": rest.len(), "size": size(left)})
    };
    (out, more)
}

/// A byte count as people read it: `812 bytes`, `4.2 KiB`, `63.9 MiB`.
fn size(bytes: usize) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} bytes"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::{Open, SHOWN_DOCUMENT_CHARS, document_view};

    /// A long document is drawn up to the bound, whole segments of it, and the rest counted.
    #[test]
    fn a_long_document_is_drawn_up_to_the_bound_and_the_rest_counted() {
        use kerf_core::chunk::{ChunkSettings, Chunker, chunk};
        let text = "Ada wrote notes on the engine. ".repeat(10_000);
        let chunks = chunk(
            &text,
            &ChunkSettings {
                chunker: Chunker::Recursive,
                size: 2000,
                overlap: 100,
            },
        )
        .unwrap();
        let key: kerf_store::CellKey = serde_json::from_value(serde_json::json!({
            "prompt": "p", "provider": "x", "model": "m", "max_tokens": 1024, "constrained": false,
            "repeat": 0, "chunk_size": 2000, "chunk": 0, "pass": 0, "row": "r"
        }))
        .unwrap();
        let line = crate::eval::lines::CellLine::of(&key, None, None);
        let view = document_view(&text, &chunks, &line);
        let drawn: String = view["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["text"].as_str().unwrap())
            .collect();
        assert_eq!(drawn.chars().count(), SHOWN_DOCUMENT_CHARS);
        assert!(text.starts_with(&drawn));
        let left = text.chars().count() - SHOWN_DOCUMENT_CHARS;
        assert_eq!(view["more"]["chars"], left);
        assert_eq!(view["more"]["size"], "46.7 KiB");
        assert_eq!(view["chunks"], chunks.len());
        // A short one is drawn whole.
        let short = document_view(&text[..5000], &chunks[..2], &line);
        assert!(short["more"].is_null());
    }

    /// The sweep gives, at every cut point, the spans covering the segment from it (those
    /// starting at or before it and ending after it), in their order: every span over 0..6 at
    /// once (empty and overlapping ones, ends past the last point among them), asked at every
    /// point in turn.
    #[test]
    fn the_open_spans_at_each_point_are_those_covering_its_segment() {
        let mut spans = Vec::new();
        for s in 0..6 {
            for e in s..8 {
                spans.push((s, e));
            }
        }
        // Not by start: as chunks and records arrive.
        spans.reverse();
        spans.rotate_left(7);
        let mut points: Vec<usize> = spans.iter().flat_map(|&(s, e)| [s, e]).collect();
        points.retain(|&p| p <= 6);
        points.sort_unstable();
        points.dedup();
        let mut open = Open::new(&spans);
        for w in points.windows(2) {
            let (a, b) = (w[0], w[1]);
            let covering: Vec<usize> = (0..spans.len())
                .filter(|&k| spans[k].0 <= a && b <= spans[k].1)
                .collect();
            assert_eq!(open.at(a), covering.as_slice(), "at {a}");
        }
    }
}
