//! Comparing output formats under real budgets: every prompt (a JSONL prompt and its JSON-array
//! twin, or any two) at every `max_tokens` budget, constrained and not, each run recorded in the
//! history under one experiment; then one reply of each format swept at the model's token
//! boundaries (`sweep_best` says which). `kerf compare` prints it; the desktop's Compare screen
//! draws it.

use std::path::Path;

use kerf_core::Prompt;
use kerf_core::sweep::{Sweep, Unit};
use kerf_llm::{CancelToken, FinishReason};
use kerf_store::Store;
use serde_json::{Map, Value, json};

use crate::error::Result;
use crate::runs::{
    Chosen, Outcomes, PromptSource, Rendering, RunJob, RunMeta, RunParams, RunSettings,
};
use crate::wire::{CompareProgress, CompareRow, Comparison, SweepCurve};

/// Which passes each prompt gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstrainMode {
    /// With and without its schema constraint (where it has one).
    Both,
    /// Constrained where it can be.
    Auto,
    None,
}

impl ConstrainMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "both" => Some(Self::Both),
            "auto" => Some(Self::Auto),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Both => "both",
            Self::Auto => "auto",
            Self::None => "none",
        }
    }
}

/// The passes a prompt gets: constrained and/or not, as asked and as the provider allows. A
/// cloud provider with no structured mode for the prompt's format gets only the unconstrained
/// pass: a "constrained" row would be the same request under a false label.
pub fn variants(mode: ConstrainMode, prompt: &Prompt, provider: &Chosen) -> Vec<bool> {
    let can = provider.can_constrain(prompt);
    match mode {
        ConstrainMode::Both if can => vec![true, false],
        ConstrainMode::Auto if can => vec![true],
        _ => vec![false],
    }
}

/// One prompt in a compare: compiled, as the history keeps it, rendered with the shared input.
pub struct Subject {
    pub prompt: Prompt,
    pub source: PromptSource,
    pub rendering: Rendering,
}

/// A compare as a front end starts one.
pub struct CompareJob<'a> {
    pub subjects: &'a [Subject],
    pub budgets: &'a [u32],
    pub constrain: ConstrainMode,
    pub settings: &'a RunSettings,
    /// What the history keeps as the experiment's spec, besides prompts, budgets and model.
    pub extra_spec: Map<String, Value>,
}

/// One run of a compare.
pub struct Row {
    pub run_id: Option<i64>,
    /// Index into the job's subjects.
    pub subject: usize,
    pub max_tokens: u32,
    pub constrained: bool,
    pub seconds: f64,
    pub out: Outcomes,
}

impl Row {
    /// Truncated exactly when the reply was cut short (its budget ran out, or the stream was
    /// cut), whatever the parser made of the text: prose cut by `max_tokens` is truncated too.
    pub fn truncated(&self) -> bool {
        self.out.finish.reason.cut_short()
    }
}

/// One format's reply swept at every token.
pub struct FormatSweep {
    /// Index into the job's subjects.
    pub subject: usize,
    /// Index into the rows: the reply swept.
    pub row: usize,
    /// No reply of this format ended on its own: the one swept was cut by its budget.
    pub cut_by_budget: bool,
    pub sweep: Sweep,
}

/// A compare's result.
pub struct Compared {
    pub model: String,
    pub experiment: Option<i64>,
    pub rows: Vec<Row>,
    /// One per format that has a reply (see `sweep_best`).
    pub sweeps: Vec<FormatSweep>,
}

/// Token cuts from a named tiktoken vocabulary, or from a GGUF model's own tokenizer (a path
/// ending in `.gguf`: cuts fall where that model's tokens end).
pub fn token_unit(tokenizer: &str, text: &str) -> Result<Unit> {
    if tokenizer.ends_with(".gguf") {
        let path = Path::new(tokenizer);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| tokenizer.to_string());
        return Ok(Unit::Token {
            name,
            boundaries: kerf_llama::token_boundaries(path, text)?,
        });
    }
    Ok(kerf_core::sweep::token_unit(tokenizer, text)?)
}

/// Run the compare, recorded as one experiment when `history` is given (finished with its
/// result, or its error). `on_progress` hears before each run.
pub fn compare(
    history: Option<&Store>,
    job: &CompareJob<'_>,
    provider: &Chosen,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Compared> {
    let mut budgets = job.budgets.to_vec();
    budgets.sort_unstable();
    budgets.dedup();
    let experiment = match history {
        Some(store) => {
            let mut spec = json!({
                "prompts": job.subjects.iter()
                    .map(|s| s.source.path.clone().unwrap_or_else(|| s.source.name.clone()))
                    .collect::<Vec<_>>(),
                "max_tokens": budgets,
                "constrain": job.constrain.as_str(),
                "provider": provider.name(),
                "model": provider.as_provider().model(),
            });
            if let Value::Object(m) = &mut spec {
                m.extend(job.extra_spec.clone());
            }
            Some(store.begin_experiment("compare", &spec)?)
        }
        None => None,
    };
    let result = run_all(
        history,
        job,
        &budgets,
        provider,
        experiment,
        cancel,
        on_progress,
    );
    if let (Some(store), Some(id)) = (history, experiment) {
        match &result {
            Ok(c) => store.finish_experiment(id, &c.to_json(job.subjects), None)?,
            Err(e) => store.finish_experiment(id, &Value::Null, Some(&e.message))?,
        }
    }
    result
}

fn run_all(
    history: Option<&Store>,
    job: &CompareJob<'_>,
    budgets: &[u32],
    provider: &Chosen,
    experiment: Option<i64>,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Compared> {
    let total: usize = budgets.len()
        * job
            .subjects
            .iter()
            .map(|s| variants(job.constrain, &s.prompt, provider).len())
            .sum::<usize>();
    let mut rows: Vec<Row> = Vec::new();
    for &budget in budgets {
        for (i, s) in job.subjects.iter().enumerate() {
            for constrained in variants(job.constrain, &s.prompt, provider) {
                on_progress(CompareProgress {
                    done: rows.len() as u32,
                    total: total as u32,
                    label: format!(
                        "{} · {budget} tokens{}",
                        s.prompt.id(),
                        if constrained { " · constrained" } else { "" }
                    ),
                });
                let params = RunParams {
                    settings: job.settings.clone(),
                    max_tokens: budget,
                    constrain: constrained,
                };
                let run = RunJob {
                    meta: RunMeta {
                        prompt: &s.source,
                        response_type: s.prompt.file.response_type.to_string(),
                        rendering: &s.rendering,
                        experiment,
                        rerun_of: None,
                    },
                    provider,
                    prompt: &s.prompt,
                    params: &params,
                    repair: false,
                };
                let t = std::time::Instant::now();
                let done = crate::runs::run(history, &run, cancel, &mut |_| {})?;
                rows.push(Row {
                    run_id: done.history_id,
                    subject: i,
                    max_tokens: budget,
                    constrained,
                    seconds: t.elapsed().as_secs_f64(),
                    out: done.out,
                });
            }
        }
    }
    on_progress(CompareProgress {
        done: rows.len() as u32,
        total: total as u32,
        label: "sweeping the complete replies".into(),
    });
    let sweeps = sweep_best(job.subjects, &rows, provider, cancel)?;
    Ok(Compared {
        model: provider.as_provider().model(),
        experiment,
        rows,
        sweeps,
    })
}

/// Each format's sweep, of the reply that shows the most: the one with the most accepted objects
/// among those that ended on their own; if none of those has objects, the longest reply that
/// has some (cut by its budget); if none has any, the longest that ended on its own, else the
/// longest (cut by its budget). Never a reply with 0 objects while another has some. Cuts fall
/// at the model's token boundaries (a cloud model's approximated by o200k_base).
fn sweep_best(
    subjects: &[Subject],
    rows: &[Row],
    provider: &Chosen,
    cancel: &CancelToken,
) -> Result<Vec<FormatSweep>> {
    let tokenizer = provider
        .gguf()
        .map_or_else(|| "o200k_base".to_string(), |p| p.display().to_string());
    let mut sweeps = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        let Some(at) = best_reply(rows, i) else {
            continue;
        };
        let r = &rows[at];
        let unit = token_unit(&tokenizer, &r.out.raw)?;
        let sweep = kerf_core::sweep::sweep(
            &s.prompt.parser,
            &r.out.raw,
            &s.rendering.vars,
            &unit,
            cancel,
        )?;
        sweeps.push(FormatSweep {
            subject: i,
            row: at,
            cut_by_budget: r.out.finish.reason != FinishReason::Stop,
            sweep,
        });
    }
    Ok(sweeps)
}

/// The row of `subject` to sweep (see `sweep_best`).
pub fn best_reply(rows: &[Row], subject: usize) -> Option<usize> {
    let mine = || {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| r.subject == subject)
    };
    let finished = |r: &Row| r.out.finish.reason == FinishReason::Stop;
    let objects = |r: &Row| r.out.report.objects.len();
    mine()
        .filter(|(_, r)| finished(r) && objects(r) > 0)
        .max_by_key(|(_, r)| (objects(r), r.out.raw.len(), r.constrained))
        .or_else(|| {
            mine()
                .filter(|(_, r)| objects(r) > 0)
                .max_by_key(|(_, r)| (r.out.raw.len(), objects(r), r.constrained))
        })
        .or_else(|| {
            mine()
                .filter(|(_, r)| finished(r))
                .max_by_key(|(_, r)| (r.out.raw.len(), r.constrained))
        })
        .or_else(|| mine().max_by_key(|(_, r)| (r.out.raw.len(), r.constrained)))
        .map(|(at, _)| at)
}

impl Compared {
    /// The result as `kerf compare --json` prints it and the history keeps it.
    pub fn to_json(&self, subjects: &[Subject]) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let p = &subjects[r.subject].prompt;
                let dropped: Map<String, Value> = r
                    .out
                    .report
                    .drop_counts()
                    .iter()
                    .map(|(k, n)| (k.as_str().to_string(), json!(n)))
                    .collect();
                json!({
                    "prompt": p.id(),
                    "response_type": p.file.response_type.to_string(),
                    "max_tokens": r.max_tokens,
                    "constrained": r.constrained,
                    "objects": r.out.report.objects.len(),
                    "dropped": dropped,
                    "truncated": r.truncated(),
                    "finish_reason": r.out.finish.reason.as_str(),
                    "completion_tokens": r.out.finish.usage.completion_tokens,
                    "seconds": r.seconds,
                    "history_id": r.run_id,
                })
            })
            .collect();
        let sweeps: Vec<Value> = self
            .sweeps
            .iter()
            .map(|f| {
                let (p, r, w) = (&subjects[f.subject].prompt, &self.rows[f.row], &f.sweep);
                json!({
                    "prompt": p.id(),
                    "response_type": p.file.response_type.to_string(),
                    "max_tokens": r.max_tokens,
                    "constrained": r.constrained,
                    "cut_by_budget": f.cut_by_budget,
                    "total": w.total, "points": w.points, "score": w.score, "unit": w.unit,
                })
            })
            .collect();
        json!({"model": self.model, "experiment": self.experiment, "rows": rows, "sweeps": sweeps})
    }

    /// The result as the Compare screen draws it.
    pub fn view(&self, subjects: &[Subject]) -> Comparison {
        Comparison {
            model: self.model.clone(),
            experiment: self.experiment,
            rows: self
                .rows
                .iter()
                .map(|r| {
                    let p = &subjects[r.subject].prompt;
                    CompareRow {
                        prompt: p.id().into(),
                        response_type: p.file.response_type.to_string(),
                        max_tokens: r.max_tokens,
                        constrained: r.constrained,
                        objects: r.out.report.objects.len() as u32,
                        dropped: r.out.report.dropped.len() as u32,
                        dropped_summary: r.out.report.drop_summary(),
                        truncated: r.truncated(),
                        finish_reason: r.out.finish.reason.as_str().into(),
                        completion_tokens: r.out.finish.usage.completion_tokens,
                        seconds: r.seconds,
                        history_id: r.run_id,
                    }
                })
                .collect(),
            sweeps: self
                .sweeps
                .iter()
                .map(|f| {
                    let (p, r, w) = (&subjects[f.subject].prompt, &self.rows[f.row], &f.sweep);
                    SweepCurve {
                        prompt: p.id().into(),
                        response_type: p.file.response_type.to_string(),
                        max_tokens: r.max_tokens,
                        constrained: r.constrained,
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
                })
                .collect(),
        }
    }
}
