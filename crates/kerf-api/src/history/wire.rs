//! What the History screen receives, built `From` the history's results (the same ones
//! `kerf history` prints).

use kerf_store::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use super::{Detail, RunDiff};
use crate::error::Result;
use crate::runs::wire::Drop;

/// One row of the History screen.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    pub id: i64,
    pub status: Status,
    pub prompt: String,
    pub prompt_version: String,
    pub provider: String,
    pub model: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub objects: Option<i64>,
    pub dropped: Option<i64>,
    pub truncated: Option<bool>,
    pub finish_reason: Option<kerf_llm::FinishReason>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub max_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub attempts: i64,
    pub experiment: Option<i64>,
    pub rerun_of: Option<i64>,
    pub tags: Vec<String>,
    pub note: Option<String>,
    pub error: Option<String>,
    /// How long the run took, start to end (none while it runs, or when it was interrupted).
    pub seconds: Option<f64>,
}

impl From<kerf_store::RunSummary> for RunRow {
    fn from(s: kerf_store::RunSummary) -> Self {
        RunRow {
            id: s.id,
            status: s.status,
            prompt: s.prompt,
            prompt_version: s.prompt_version,
            provider: s.provider,
            model: s.model,
            created_at: s.created_at,
            objects: s.objects,
            dropped: s.dropped,
            truncated: s.truncated,
            finish_reason: s.finish_reason,
            prompt_tokens: s.prompt_tokens,
            completion_tokens: s.completion_tokens,
            max_tokens: s.max_tokens,
            cost_usd: s.cost_usd,
            attempts: s.attempts,
            experiment: s.experiment,
            rerun_of: s.rerun_of,
            tags: s.tags,
            note: s.note,
            error: s.error,
            seconds: s.seconds,
        }
    }
}

/// A stored run in full (the History screen's detail pane).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunDetail {
    pub row: RunRow,
    pub prompt_path: Option<String>,
    pub prompt_text: String,
    pub system: Option<String>,
    pub user: String,
    pub raw: String,
    #[ts(type = "Record<string, unknown>")]
    pub params: Value,
    #[ts(type = "unknown[]")]
    pub objects: Vec<Value>,
    pub dropped: Vec<Drop>,
    #[ts(type = "Record<string, unknown>")]
    pub vars: Value,
}

impl From<Detail> for RunDetail {
    fn from(d: Detail) -> Self {
        let rec = d.record;
        let report = rec.report.clone().unwrap_or_default();
        RunDetail {
            prompt_path: d.version.path,
            prompt_text: d.version.text,
            system: rec.system,
            user: rec.user,
            raw: rec.raw,
            params: rec.params,
            objects: report.objects.to_vec(),
            dropped: report.dropped.iter().map(Drop::from).collect(),
            vars: rec.input.vars,
            row: rec.summary.into(),
        }
    }
}

/// The History screen's filters (every one optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase", default)]
pub struct HistoryFilter {
    pub prompt: Option<String>,
    pub status: Option<Status>,
    pub provider: Option<String>,
    /// YYYY-MM-DD, RFC 3339, or an age such as `7d`.
    pub since: Option<String>,
    pub until: Option<String>,
    pub tag: Option<String>,
    pub experiment: Option<i64>,
    pub limit: Option<u32>,
}

impl HistoryFilter {
    /// The History screen's rows for this filter, newest first.
    pub fn rows(&self, store: &kerf_store::Store) -> Result<Vec<RunRow>> {
        Ok(store
            .list(&self.filter()?)?
            .into_iter()
            .map(RunRow::from)
            .collect())
    }

    /// The runs this filter names (ages and dates read against now, as `kerf history` reads
    /// its flags), at most `limit` (200 unless given).
    pub fn filter(&self) -> Result<kerf_store::Filter> {
        super::Query {
            prompt: self.prompt.clone(),
            status: self.status,
            provider: self.provider.clone(),
            model: None,
            since: self.since.clone(),
            until: self.until.clone(),
            tag: self.tag.clone(),
            experiment: self.experiment,
            limit: Some(self.limit.unwrap_or(200) as usize),
        }
        .filter(&|field| field.to_string())
    }
}

/// A stored experiment (a compare, eval, sweep or test) in the History list.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentRow {
    pub id: i64,
    pub kind: crate::experiments::ExperimentKind,
    /// `running`, `submitted` (awaited from a provider's batch), `ok`, `error` or `interrupted`
    /// (its process stopped).
    pub status: kerf_store::Status,
    pub created_at: String,
    pub runs: i64,
    pub note: Option<String>,
    /// Where it stands, in the History list's words.
    pub state: ExperimentState,
    /// Cells planned (an eval's matrix, a compare's or a test's plan), when known.
    pub cells: Option<u64>,
    /// Its headline figures in a few words (`best F1 0.512: p @ 512`, `3 passed, 1 failed`).
    pub headline: Option<String>,
    /// Where its batches stand, as last heard (none: it sent no batch).
    pub batches: Option<BatchTally>,
}

/// An experiment's batches summed: how many, how many ended, and their request counts as the
/// providers last reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct BatchTally {
    pub batches: u32,
    /// Batches whose provider says they ended (folded or not).
    pub ended: u32,
    /// Requests sent in them.
    pub requests: u64,
    /// The requests' counts summed over the batches that reported some.
    pub counts: kerf_store::Counts,
}

impl BatchTally {
    /// `batches` summed (`None`: there are none).
    pub fn of(batches: &[kerf_store::Batch]) -> Option<BatchTally> {
        if batches.is_empty() {
            return None;
        }
        let mut t = BatchTally::default();
        for b in batches {
            t.batches += 1;
            t.ended += u32::from(matches!(
                b.state,
                kerf_store::BatchState::Ended | kerf_store::BatchState::Folded
            ));
            t.requests += b.requests;
            if let Some(c) = b.counts {
                t.counts.total += c.total;
                t.counts.processing += c.processing;
                t.counts.succeeded += c.succeeded;
                t.counts.errored += c.errored;
                t.counts.expired += c.expired;
                t.counts.canceled += c.canceled;
            }
        }
        Some(t)
    }
}

/// Where an experiment stands, as History lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentState {
    /// A process is running it now.
    Running,
    /// Handed to a provider that answers later (a batch API).
    Submitted,
    /// Stopped, or ended with cells left: an eval's resume finishes it.
    Unfinished,
    /// Ended with an error.
    Failed,
    Done,
}

impl ExperimentState {
    fn of(status: Status, pending: Option<u64>) -> ExperimentState {
        match status {
            Status::Running => ExperimentState::Running,
            Status::Submitted => ExperimentState::Submitted,
            Status::Interrupted | Status::Truncated => ExperimentState::Unfinished,
            Status::Error => ExperimentState::Failed,
            Status::Ok if pending.is_some_and(|n| n > 0) => ExperimentState::Unfinished,
            Status::Ok => ExperimentState::Done,
        }
    }
}

/// The few words History shows of an experiment's figures (see
/// [`kerf_store::ExperimentSummary::figures`]).
fn headline(
    kind: crate::experiments::ExperimentKind,
    figures: &kerf_store::Figures,
) -> Option<String> {
    use crate::experiments::ExperimentKind as K;
    match kind {
        K::Eval => {
            let several = figures
                .lines
                .iter()
                .filter_map(|l| l.provider.as_deref())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1;
            let best = figures
                .lines
                .iter()
                .filter_map(|l| Some((l.f1?, l)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let mut words = best.map(|(f1, l)| {
                format!(
                    "best F1 {f1:.3}: {}{} @ {}{}",
                    l.prompt,
                    match (&l.provider, several) {
                        (Some(p), true) => format!(" on {p}"),
                        _ => String::new(),
                    },
                    l.max_tokens,
                    if l.constrained { " constrained" } else { "" }
                )
            });
            if let Some(p) = figures.pending.filter(|&p| p > 0) {
                let left = format!("{p} cell(s) left");
                words = Some(match words {
                    Some(w) => format!("{w} · {left}"),
                    None => left,
                });
            }
            words
        }
        K::Test => Some(format!(
            "{} passed, {} failed, {} errors",
            figures.passed?, figures.failed?, figures.errors?
        )),
        K::Compare => figures.rows.map(|r| format!("{r} row(s)")),
        K::Sweep => None,
    }
}

impl From<kerf_store::ExperimentSummary> for ExperimentRow {
    fn from(e: kerf_store::ExperimentSummary) -> Self {
        ExperimentRow {
            id: e.id,
            kind: e.kind,
            status: e.status,
            created_at: e.created_at,
            runs: e.runs,
            note: e.note,
            state: ExperimentState::of(e.status, e.figures.pending),
            cells: e.cells,
            headline: headline(e.kind, &e.figures),
            batches: None,
        }
    }
}

/// Two stored runs compared (see `kerf history diff`).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunDiffView {
    pub a: i64,
    pub b: i64,
    pub prompt_name: String,
    /// A unified diff of the prompt files' text (`None`: the same version).
    pub prompt_diff: Option<String>,
    pub input_diff: Option<String>,
    pub params: Vec<ParamChangeView>,
    pub unchanged: u32,
    #[ts(type = "unknown[]")]
    pub added: Vec<Value>,
    #[ts(type = "unknown[]")]
    pub removed: Vec<Value>,
    pub changed: Vec<ChangedObject>,
    pub outcome_a: String,
    pub outcome_b: String,
    /// Where each run ran, when two local runs ran on different devices (their output may
    /// differ for that alone).
    pub devices: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ParamChangeView {
    pub name: String,
    #[ts(type = "unknown")]
    pub a: Value,
    #[ts(type = "unknown")]
    pub b: Value,
}

/// An object in both runs whose fields differ.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ChangedObject {
    #[ts(type = "unknown")]
    pub a: Value,
    #[ts(type = "unknown")]
    pub b: Value,
    pub fields: Vec<String>,
}

impl From<&RunDiff> for RunDiffView {
    fn from(d: &RunDiff) -> Self {
        let outcome = |o: &super::Outcome| {
            format!(
                "{} · {} object(s), {} dropped · {} · {} tokens",
                o.status.as_str(),
                o.objects.unwrap_or(0),
                o.dropped.unwrap_or(0),
                o.finish_reason.map_or("-", |r| r.as_str()),
                o.completion_tokens.unwrap_or(0)
            )
        };
        RunDiffView {
            a: d.a.id,
            b: d.b.id,
            prompt_name: d.prompt_name.clone(),
            prompt_diff: d.prompt.diff.clone(),
            input_diff: d.input.diff.clone(),
            params: d
                .params
                .iter()
                .map(|p| ParamChangeView {
                    name: p.name.clone(),
                    a: p.a.clone(),
                    b: p.b.clone(),
                })
                .collect(),
            unchanged: d.objects.unchanged as u32,
            added: d.objects.added.clone(),
            removed: d.objects.removed.clone(),
            changed: d
                .objects
                .changed
                .iter()
                .map(|(x, y)| ChangedObject {
                    fields: kerf_core::diff::changed_fields(x, y)
                        .into_iter()
                        .map(|(k, _, _)| k)
                        .collect(),
                    a: x.clone(),
                    b: y.clone(),
                })
                .collect(),
            outcome_a: outcome(&d.a),
            outcome_b: outcome(&d.b),
            devices: d.devices.clone(),
        }
    }
}
