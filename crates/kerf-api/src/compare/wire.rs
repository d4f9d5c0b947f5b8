//! What the Compare screen sends and draws: built from the compare's [`super::Report`], the
//! same result `kerf compare --json` prints.

use kerf_core::ResponseType;
use kerf_llm::FinishReason;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::sides::Side;
use super::{ConstrainMode, Report, ReportRow, ReportSweep};
use crate::charts::Chart;
use crate::runs::wire::RunOptions;

/// One run of a compare: a prompt at a budget, constrained or not.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareRow {
    pub prompt: String,
    /// The provider it ran on (empty in compares stored before it was kept).
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub objects: u32,
    pub dropped: u32,
    /// Drops by kind, e.g. "2 truncated, 1 schema".
    pub dropped_summary: String,
    pub truncated: bool,
    pub finish_reason: FinishReason,
    pub completion_tokens: u32,
    pub seconds: f64,
    pub history_id: Option<i64>,
}

impl From<&ReportRow> for CompareRow {
    fn from(r: &ReportRow) -> Self {
        CompareRow {
            prompt: r.prompt.clone(),
            provider: r.provider.clone(),
            response_type: r.response_type,
            max_tokens: r.max_tokens,
            constrained: r.constrained,
            objects: r.objects as u32,
            dropped: r.dropped.total() as u32,
            dropped_summary: r.dropped.to_string(),
            truncated: r.truncated,
            finish_reason: r.finish_reason,
            completion_tokens: r.completion_tokens,
            seconds: r.seconds,
            history_id: r.history_id,
        }
    }
}

/// A format's longest complete reply, cut at every unit.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SweepCurve {
    pub prompt: String,
    /// The provider the reply came from (empty in compares stored before it was kept).
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    /// No reply of this format ended on its own: the one swept was cut by its budget.
    pub cut_by_budget: bool,
    /// The swept run in the history (the side-by-side view opens it).
    pub history_id: Option<i64>,
    /// Objects in the whole reply.
    pub total: u32,
    /// `(units emitted, objects recovered)`, at every point where the count changes.
    pub points: Vec<(u32, u32)>,
    /// Units in the whole reply.
    pub length: u32,
    /// Mean fraction of objects recovered over all cuts.
    pub score: f64,
    pub unit: String,
}

impl From<&ReportSweep> for SweepCurve {
    fn from(f: &ReportSweep) -> Self {
        let w = &f.sweep;
        SweepCurve {
            prompt: f.prompt.clone(),
            provider: f.provider.clone(),
            response_type: f.response_type,
            max_tokens: f.max_tokens,
            constrained: f.constrained,
            cut_by_budget: f.cut_by_budget,
            history_id: f.history_id,
            total: w.total as u32,
            points: w
                .points
                .iter()
                .map(|&(u, n)| (u as u32, n as u32))
                .collect(),
            length: w.length as u32,
            score: w.score,
            unit: w.unit.clone(),
        }
    }
}

/// A compare's result: every row, and each format's sweep.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub model: String,
    /// The providers side by side, in the compare's order (one for most compares).
    pub providers: Vec<String>,
    pub experiment: Option<i64>,
    pub rows: Vec<CompareRow>,
    pub sweeps: Vec<SweepCurve>,
    /// Objects recovered against the budget, a line per prompt and pass.
    pub budget_chart: Chart,
    /// Each format's best reply cut at every token (none when no reply had objects).
    pub sweep_chart: Option<Chart>,
}

impl From<&Report> for Comparison {
    fn from(r: &Report) -> Self {
        Comparison {
            model: r.model.clone(),
            providers: r.providers.iter().map(|p| p.provider.clone()).collect(),
            experiment: r.experiment,
            rows: r.rows.iter().map(CompareRow::from).collect(),
            sweeps: r.sweeps.iter().map(SweepCurve::from).collect(),
            budget_chart: r.budget_chart(),
            sweep_chart: r.sweep_chart(),
        }
    }
}

/// What a compare is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareInput {
    /// Two or more prompt files (or one, with two or more providers).
    pub prompts: Vec<String>,
    /// The providers side by side, by name (absent or empty: the options' provider alone).
    #[serde(default)]
    #[ts(optional)]
    pub providers: Option<Vec<String>>,
    pub input: String,
    pub budgets: Vec<u32>,
    pub constrain: ConstrainMode,
    pub options: RunOptions,
    /// Requests in flight at once (cloud providers; default 4; the local engine runs one at a
    /// time).
    #[serde(default)]
    #[ts(optional)]
    pub concurrency: Option<u32>,
    /// The person confirmed a compare of more than 2,000 requests.
    #[serde(default)]
    #[ts(optional)]
    pub confirmed: Option<bool>,
    /// Each prompt's run variables beyond the input, by prompt file (over the prompt's terms;
    /// values as a run sends them).
    #[serde(default)]
    #[ts(optional, type = "Record<string, Record<string, unknown>>")]
    pub vars: Option<std::collections::HashMap<String, serde_json::Map<String, serde_json::Value>>>,
}

/// What a compare reports as it goes: each cell as it starts and ends, the text of its reply as
/// it streams with each object its format accepts as it is accepted, and each cell's end.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareProgress {
    pub done: u32,
    pub total: u32,
    pub label: String,
    /// Reply text that arrived since the last message (absent on a start or an end).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub text: Option<CellText>,
    /// A cell's reply ended (present on that cell's end only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ended: Option<CellEnded>,
}

/// Text of one cell's reply, to append to what came before it, and the objects its format
/// accepted in what has arrived so far that no earlier message named.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CellText {
    /// The cell's place in the compare's plan.
    pub cell: u32,
    /// Which prompt: its place in the compare's list (0 is the first).
    pub prompt: u32,
    /// Which provider: its place in the compare's list (0 is the first).
    pub provider: u32,
    pub max_tokens: u32,
    pub constrained: bool,
    pub text: String,
    /// Newly accepted objects, placed in the cell's whole reply so far (UTF-16 offsets from its
    /// first character). A JSONL or delimited reply yields each as its line or record
    /// completes; a JSON array yields none until it has ended (see [`CellEnded`]).
    pub objects: Vec<PlacedObject>,
}

/// One cell's reply has ended: the objects the whole reply yields that were not yet named
/// (a JSON array's every element; what the end of a JSONL reply settled), and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CellEnded {
    pub cell: u32,
    pub prompt: u32,
    /// Which provider: its place in the compare's list.
    pub provider: u32,
    /// The run in the history.
    pub history_id: Option<i64>,
    pub objects: Vec<PlacedObject>,
    /// Objects the whole reply yields (those named while streaming and `objects`).
    pub total: u32,
    pub finish_reason: FinishReason,
    /// Cut short (its budget ran out, or the stream was cut).
    pub truncated: bool,
}

/// One accepted object where it sits in its reply, as the window highlights it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PlacedObject {
    /// Where its text starts and ends, in UTF-16 code units (the window's string indices).
    pub start: u32,
    pub end: u32,
    /// A few of its values, to name it in a list.
    pub label: String,
}

/// A stored reply as the side-by-side view cuts it. Every offset is in UTF-16 code units (a
/// JavaScript string's indices into `text`); the counts are the sweep's own: the count after
/// `k` tokens is the count of the last step at or before `cuts[k]`.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ReplySide {
    pub history_id: i64,
    pub prompt: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub finish_reason: Option<FinishReason>,
    pub text: String,
    /// The cut unit, as the sweep names it (`token:o200k_base`, `token:MODEL.gguf`).
    pub unit: String,
    /// Where a cut after each token falls: `cuts[k]` ends the first `k` tokens; `cuts[0]` is 0.
    pub cuts: Vec<u32>,
    /// The sweep's curve: `(offset, objects)`, the count from that offset to the next step.
    pub steps: Vec<(u32, u32)>,
    /// The same curve in tokens, as `kerf sweep --unit token` prints it: `(tokens, objects)`
    /// where the count changes, ending at `(tokens in the reply, total)`.
    pub points: Vec<(u32, u32)>,
    /// Objects in the whole reply.
    pub total: u32,
    pub objects: Vec<PlacedObject>,
    /// Where a local run ran: two replies from different devices differ for that alone.
    pub ran_on: Option<String>,
}

/// Two replies side by side: a compare's two formats, or any two runs from History.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SideBySide {
    pub a: ReplySide,
    pub b: ReplySide,
}

/// Kerf's example pair as the Compare screen first shows it: a JSONL prompt and its JSON-array
/// twin, each with a complete example reply, cut anywhere by the scrubber; the sentence that says
/// what a cut does to each.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareExample {
    /// The two prompt files.
    pub jsonl: String,
    pub array: String,
    pub sides: SideBySide,
    /// "cut after 174 tokens (50% of the reply): JSONL keeps 4 of 10 objects, the JSON array 0
    /// of 10; resilience 0.44 vs 0.00".
    pub headline: String,
    /// Where the headline cuts both replies, after this many tokens (the scrubber starts
    /// there).
    pub cut: u32,
    pub jsonl_score: f64,
    pub array_score: f64,
}

impl From<&crate::compare::sides::Example> for CompareExample {
    fn from(e: &crate::compare::sides::Example) -> Self {
        CompareExample {
            jsonl: e.jsonl.display().to_string(),
            array: e.array.display().to_string(),
            sides: SideBySide::from(&e.sides),
            headline: e.headline.sentence(),
            cut: e.headline.cut as u32,
            jsonl_score: e.headline.jsonl_score,
            array_score: e.headline.array_score,
        }
    }
}

impl From<&(Side, Side)> for SideBySide {
    fn from((a, b): &(Side, Side)) -> Self {
        SideBySide {
            a: ReplySide::from(a),
            b: ReplySide::from(b),
        }
    }
}

impl From<&Side> for ReplySide {
    fn from(s: &Side) -> Self {
        let u = crate::text::Utf16::new(&s.text);
        let mut steps: Vec<(u32, u32)> = Vec::with_capacity(s.curve.steps.len());
        for &(o, n) in &s.curve.steps {
            let o = u.ceil(o);
            match steps.last_mut() {
                // Two steps inside one character: cuts see only the later.
                Some(last) if last.0 == o => last.1 = n as u32,
                _ => steps.push((o, n as u32)),
            }
        }
        ReplySide {
            history_id: s.run,
            prompt: s.prompt.clone(),
            response_type: s.response_type,
            max_tokens: s.max_tokens,
            constrained: s.constrained,
            finish_reason: s.finish_reason,
            text: s.text.clone(),
            unit: s.sweep.unit.clone(),
            cuts: s.cuts.iter().map(|&c| u.at(c)).collect(),
            steps,
            points: s
                .sweep
                .points
                .iter()
                .map(|&(k, n)| (k as u32, n as u32))
                .collect(),
            total: s.sweep.total as u32,
            objects: s
                .objects
                .iter()
                .map(|p| PlacedObject {
                    start: u.at(p.span.0),
                    end: u.at(p.span.1),
                    label: p.label.clone(),
                })
                .collect(),
            ran_on: s.ran_on.clone(),
        }
    }
}
