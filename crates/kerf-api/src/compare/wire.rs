//! What the Compare screen sends and draws: built from the compare's [`super::Report`], the
//! same result `kerf compare --json` prints.

use kerf_core::ResponseType;
use kerf_llm::FinishReason;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{ConstrainMode, Report, ReportRow, ReportSweep};
use crate::charts::Chart;
use crate::runs::wire::RunOptions;

/// One run of a compare: a prompt at a budget, constrained or not.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareRow {
    pub prompt: String,
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
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    /// No reply of this format ended on its own: the one swept was cut by its budget.
    pub cut_by_budget: bool,
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
            response_type: f.response_type,
            max_tokens: f.max_tokens,
            constrained: f.constrained,
            cut_by_budget: f.cut_by_budget,
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
    /// Two or more prompt files.
    pub prompts: Vec<String>,
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
}

/// What a compare reports as it goes.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CompareProgress {
    pub done: u32,
    pub total: u32,
    pub label: String,
}
