//! A cut document's line: its chunk cells gathered into one line of the report ([`gather`]),
//! and, once its chunk replies are merged and scored, what the chunks did — which were cut by
//! the budget and what was lost with them, which expected records no chunk holds whole
//! ([`chunk_figures`]) — and each line's chunks summed ([`summary`]).

use std::ops::Range;

use kerf_core::eval::Counts;
use kerf_core::eval::locate::{Words, record_span};
use kerf_core::eval::mentions::SpanCounts;
use kerf_store::StoredReply;

use super::*;
use crate::eval::lines::{ChunkFigures, ChunkSummary, ObjectSpan, PassLine};
use crate::eval::replies::Document;

/// An eval's cells gathered per document: each `(the document's key, its chunk cells)`, the
/// key's chunk and pass 0, in key order.
pub(super) fn gather(outcomes: Vec<StoredReply>) -> Vec<(kerf_store::CellKey, Vec<StoredReply>)> {
    let mut by_document: BTreeMap<kerf_store::CellKey, Vec<StoredReply>> = BTreeMap::new();
    for o in outcomes {
        let key = kerf_store::CellKey {
            chunk: 0,
            pass: 0,
            ..o.cell.cell.clone()
        };
        by_document.entry(key).or_default().push(o);
    }
    by_document.into_iter().collect()
}

impl CellLine {
    /// Document `key`'s line from its chunk `cells`, before its replies are merged: measured
    /// when every one of its `requests` (each chunk's each pass) is, cut by its budget when
    /// any was; its costs summed. A document stopped between chunks is not measured: the
    /// chunks never sent have no cell to say so.
    pub(crate) fn of_document(
        key: &kerf_store::CellKey,
        cells: &[StoredReply],
        requests: usize,
        experiment: i64,
    ) -> CellLine {
        let measured: Vec<&StoredReply> = cells.iter().filter(|c| c.cell.finished()).collect();
        let whole = measured.len() == cells.len() && cells.len() >= requests;
        let cut: Vec<&StoredReply> = measured
            .iter()
            .copied()
            .filter(|c| c.cell.status == Some(Status::Truncated))
            .collect();
        let status = if whole {
            Some(if cut.is_empty() {
                Status::Ok
            } else {
                Status::Truncated
            })
        } else if cells.iter().any(|c| c.cell.status == Some(Status::Error)) {
            Some(Status::Error)
        } else {
            cells
                .iter()
                .find(|c| !c.cell.finished())
                .and_then(|c| c.cell.status)
        };
        let mut line = CellLine::of(key, None, status);
        line.chunk_size = Some(key.chunk_size);
        line.context_chars = Some(key.context_chars);
        line.finish_reason = whole.then_some(if cut.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::Length
        });
        let sum = |f: fn(&StoredReply) -> Option<i64>| -> Option<i64> {
            measured.iter().filter_map(|c| f(c)).reduce(|a, b| a + b)
        };
        line.completion_tokens = sum(|c| c.completion_tokens);
        let costs: Vec<f64> = measured.iter().filter_map(|c| c.cost_usd).collect();
        line.cost_usd = (!costs.is_empty()).then(|| costs.iter().sum());
        line.started_at = cells.iter().filter_map(|c| c.started_at).min();
        // From its first request to its last one's end: its chunks run side by side, so the
        // sum of their times is not how long the document took. Without every start (a
        // history that kept none), the sum.
        let ends: Option<Vec<(i64, f64)>> = measured
            .iter()
            .map(|c| Some((c.started_at?, c.seconds?)))
            .collect();
        line.seconds = match (ends, line.started_at) {
            (Some(ends), Some(first)) if !ends.is_empty() => ends
                .iter()
                .map(|&(start, s)| (start - first) as f64 / 1000.0 + s)
                .reduce(f64::max),
            _ => measured
                .iter()
                .filter_map(|c| c.seconds)
                .reduce(|a, b| a + b),
        };
        line.cached = measured
            .iter()
            .any(|c| c.cell.run.is_some() && c.run_experiment != Some(experiment));
        let mut runs: Vec<(u32, u32, i64)> = measured
            .iter()
            .filter_map(|c| Some((c.cell.cell.chunk, c.cell.cell.pass, c.cell.run?)))
            .collect();
        runs.sort_by_key(|&(chunk, pass, _)| (pass, chunk));
        line.chunk_runs = runs;
        line.requests = measured
            .iter()
            .filter(|c| c.run_experiment == Some(experiment))
            .filter_map(|c| {
                let (start, s) = (c.started_at?, c.seconds?);
                Some((
                    c.cell.run?,
                    start,
                    start + ((s * 1000.0).round() as i64).max(0),
                ))
            })
            .collect();
        let mut cut_chunks: Vec<u32> = cut.iter().map(|c| c.cell.cell.chunk + 1).collect();
        cut_chunks.sort_unstable();
        cut_chunks.dedup();
        line.chunks = Some(ChunkFigures {
            chunks: cells
                .iter()
                .map(|c| c.cell.cell.chunk + 1)
                .max()
                .unwrap_or(0),
            requests: cells.len() as u32,
            cut: cut.len() as u32,
            cut_chunks,
            prompt_tokens: sum(|c| c.prompt_tokens).unwrap_or(0),
            ..ChunkFigures::default()
        });
        line
    }

    /// Fill in what the merge of this document's chunk replies (`doc`) gave: each record's
    /// place, what was folded, the counts after each pass.
    pub(crate) fn merged(&mut self, m: &Matcher, doc: Document) {
        let Document {
            merged, by_passes, ..
        } = doc;
        let spans = SpanCounts::of(&merged.mentions);
        if let Some(f) = self.chunks.as_mut() {
            f.folded = merged.folded;
            f.spans = spans;
        }
        // Grounded in its own chunk (or its context), not anywhere in the document: a record
        // whose words are elsewhere in the document was not read from the text it was sent.
        self.ungrounded = Some(spans.not_found);
        self.spans = merged
            .objects
            .iter()
            .zip(merged.mentions)
            .map(|(o, mention)| ObjectSpan {
                identity: identity(m, o),
                mention,
            })
            .collect();
        self.by_passes = by_passes;
    }
}

/// Where each of `expected` stands in `doc`, in characters (`None`: not found there): the span
/// over its grounding fields' places.
pub(crate) fn expected_places(
    m: &Matcher,
    doc: &str,
    expected: &[Value],
) -> Vec<Option<Range<usize>>> {
    let words = Words::new(m, doc);
    // Bytes to characters, once for the document.
    let mut chars_before = vec![0usize; doc.len() + 1];
    let mut n = 0;
    for (i, b) in doc.bytes().enumerate() {
        chars_before[i] = n;
        if (b as i8) >= -0x40 {
            n += 1;
        }
    }
    chars_before[doc.len()] = n;
    expected
        .iter()
        .map(|o| record_span(m, &words, o).map(|s| chars_before[s.start]..chars_before[s.end]))
        .collect()
}

/// A cut document's figures that need its expected records' places (`expected`, from
/// [`expected_places`]) and its chunks: the expected records lost with a cut chunk, and those
/// no chunk holds whole.
pub(crate) fn chunk_figures(
    line: &mut CellLine,
    chunks: &[kerf_core::chunk::Chunk],
    expected: &[Option<Range<usize>>],
) {
    let found = matched(line);
    let Some(f) = line.chunks.as_mut() else {
        return;
    };
    let placed = kerf_core::chunk::Chunk::held;
    let cut: Vec<Range<usize>> = chunks
        .iter()
        .filter(|c| f.cut_chunks.contains(&(c.index as u32)))
        .filter_map(placed)
        .collect();
    let ranges: Vec<Range<usize>> = chunks.iter().filter_map(placed).collect();
    let mut lost = 0;
    let (mut boundary, mut boundary_found) = (0, 0);
    for (i, span) in expected.iter().enumerate() {
        let Some(span) = span else { continue };
        let is_found = found.contains(&i);
        if !is_found && cut.iter().any(|c| c.start < span.end && span.start < c.end) {
            lost += 1;
        }
        if !ranges.is_empty()
            && !ranges
                .iter()
                .any(|c| c.start <= span.start && span.end <= c.end)
        {
            boundary += 1;
            boundary_found += u64::from(is_found);
        }
    }
    f.missed_in_cut = line.scored.as_ref().map(|_| lost);
    f.at_boundary = boundary;
    f.at_boundary_found = boundary_found;
}

/// A line's documents' chunk figures summed (`None`: not a cut document's line).
pub(super) fn summary(measured: &[&CellLine], passes: u32) -> Option<ChunkSummary> {
    let first = measured.first()?;
    first.chunk_size?;
    let figures: Vec<&ChunkFigures> = measured.iter().filter_map(|c| c.chunks.as_ref()).collect();
    let documents = figures.len();
    let per = |n: f64| {
        if documents == 0 {
            0.0
        } else {
            n / documents as f64
        }
    };
    let requests: u64 = figures.iter().map(|f| u64::from(f.requests)).sum();
    let at_boundary: u64 = figures.iter().map(|f| f.at_boundary).sum();
    let boundary_found: u64 = figures.iter().map(|f| f.at_boundary_found).sum();
    let mut by_passes = Vec::new();
    if passes > 1 {
        for k in 0..passes as usize {
            let mut counts = Counts::default();
            for c in measured {
                if let Some(p) = c.by_passes.get(k).or(c.by_passes.last()) {
                    counts.tp += p.tp;
                    counts.fp += p.fp;
                    counts.fn_ += p.fn_;
                }
            }
            by_passes.push(PassLine {
                passes: k as u32 + 1,
                micro: counts.scores(),
                requests_per_document: per(requests as f64) * (k as f64 + 1.0) / f64::from(passes),
            });
        }
    }
    Some(ChunkSummary {
        documents,
        chunks: figures.iter().map(|f| u64::from(f.chunks)).sum(),
        requests,
        cut: figures.iter().map(|f| u64::from(f.cut)).sum(),
        missed_in_cut: figures.iter().filter_map(|f| f.missed_in_cut).sum(),
        requests_per_document: per(requests as f64),
        prompt_tokens_per_document: per(figures.iter().map(|f| f.prompt_tokens as f64).sum()),
        completion_tokens_per_document: per(measured
            .iter()
            .filter_map(|c| c.completion_tokens)
            .map(|t| t as f64)
            .sum()),
        at_boundary,
        boundary_recall: (at_boundary > 0).then(|| boundary_found as f64 / at_boundary as f64),
        folded: figures.iter().map(|f| f.folded).sum(),
        spans: figures
            .iter()
            .fold(SpanCounts::default(), |a, f| a.plus(f.spans)),
        by_passes,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use kerf_store::{CellKey, Status, StoredCell, StoredReply};

    use super::*;

    /// A document's run time is from its first chunk's request to its last one's end: chunks
    /// that ran side by side are not added up; a history that kept no starts gives the sum.
    #[test]
    fn a_documents_time_runs_from_its_first_request_to_its_last_end() {
        let key = |chunk: u32| CellKey {
            prompt: "p".into(),
            provider: "fleet".into(),
            model: "m".into(),
            max_tokens: 1024,
            constrained: false,
            repeat: 0,
            chunk_size: 2000,
            context_chars: 0,
            chunk,
            pass: 0,
            row: "r".into(),
        };
        let reply = |chunk: u32, started_at: Option<i64>, seconds: f64| StoredReply {
            cell: StoredCell {
                cell: key(chunk),
                run: Some(i64::from(chunk) + 1),
                status: Some(Status::Ok),
            },
            finish_reason: Some(FinishReason::Stop),
            completion_tokens: Some(10),
            prompt_tokens: Some(100),
            cost_usd: None,
            run_experiment: Some(1),
            seconds: Some(seconds),
            started_at,
            report: None,
            raw: None,
            details: None,
        };
        // Three chunks at once from t = 10 s, the longest 2.5 s; then one more at t = 12 s.
        let cells = [
            reply(0, Some(10_000), 2.5),
            reply(1, Some(10_000), 1.0),
            reply(2, Some(10_001), 2.0),
            reply(3, Some(12_000), 1.5),
        ];
        let line = CellLine::of_document(&key(0), &cells, 4, 1);
        assert_eq!(line.started_at, Some(10_000));
        assert!(
            (line.seconds.unwrap() - 3.5).abs() < 1e-9,
            "{:?}",
            line.seconds
        );
        let kept_none = cells.map(|mut c| {
            c.started_at = None;
            c
        });
        let line = CellLine::of_document(&key(0), &kept_none, 4, 1);
        assert!(
            (line.seconds.unwrap() - 7.0).abs() < 1e-9,
            "{:?}",
            line.seconds
        );
    }
}
