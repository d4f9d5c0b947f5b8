//! Reading the history back: what changed between two runs.

use kerf_store::{RunRecord, Store};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::Result;

/// One side of a diff: how the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub id: i64,
    pub status: kerf_store::Status,
    pub finish_reason: Option<String>,
    pub objects: Option<i64>,
    pub dropped: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub created_at: String,
}

/// A text that may differ: `diff` is a unified diff, `None` when the two are the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextChange {
    pub same: bool,
    pub diff: Option<String>,
}

/// A parameter that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamChange {
    pub name: String,
    pub a: Value,
    pub b: Value,
}

/// What changed from run `a` to run `b`: the prompt text, the input, the parameters (provider
/// and model included), the outcome, and the object sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    pub a: Outcome,
    pub b: Outcome,
    /// The two prompt version ids, and the diff of their texts.
    pub prompt_versions: (String, String),
    pub prompt_name: String,
    pub prompt: TextChange,
    pub input: TextChange,
    pub params: Vec<ParamChange>,
    pub objects: kerf_core::diff::ObjectDiff,
}

fn outcome(r: &RunRecord) -> Outcome {
    let s = &r.summary;
    Outcome {
        id: s.id,
        status: s.status,
        finish_reason: s.finish_reason.clone(),
        objects: s.objects,
        dropped: s.dropped,
        completion_tokens: s.completion_tokens,
        created_at: s.created_at.clone(),
    }
}

fn text_change(a: &str, b: &str, name_a: &str, name_b: &str) -> TextChange {
    let diff = (a != b).then(|| {
        similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .context_radius(2)
            .header(name_a, name_b)
            .to_string()
    });
    TextChange {
        same: diff.is_none(),
        diff,
    }
}

/// Not compared: the CLI's flags (kept by runs recorded before `RunParams`) and the stored
/// form's version (a record's shape, not a setting).
const PRIVATE_PARAMS: [&str; 2] = ["argv", "params_version"];

/// Compare two stored runs.
pub fn diff(store: &Store, a: i64, b: i64) -> Result<RunDiff> {
    let (x, y) = (store.run(a)?, store.run(b)?);
    let (vx, vy) = (
        store.prompt_version(&x.summary.prompt_version)?,
        store.prompt_version(&y.summary.prompt_version)?,
    );
    let prompt = text_change(
        &vx.text,
        &vy.text,
        &format!("run {a} prompt"),
        &format!("run {b} prompt"),
    );
    let pretty = |r: &RunRecord| {
        serde_json::to_string_pretty(&json!({"vars": r.input.vars, "terms": r.input.terms}))
            .unwrap_or_default()
            + "\n"
    };
    let input = text_change(
        &pretty(&x),
        &pretty(&y),
        &format!("run {a} input"),
        &format!("run {b} input"),
    );
    let mut params: Vec<ParamChange> = Vec::new();
    for (name, va, vb) in [
        ("provider", &x.summary.provider, &y.summary.provider),
        ("model", &x.summary.model, &y.summary.model),
    ] {
        if va != vb {
            params.push(ParamChange {
                name: name.into(),
                a: json!(va),
                b: json!(vb),
            });
        }
    }
    for (name, va, vb) in kerf_core::diff::changed_fields(&x.params, &y.params) {
        if !PRIVATE_PARAMS.contains(&name.as_str()) {
            params.push(ParamChange { name, a: va, b: vb });
        }
    }
    let none = Vec::new();
    let objects = kerf_core::diff::objects(
        x.report.as_ref().map_or(&none, |r| &r.objects),
        y.report.as_ref().map_or(&none, |r| &r.objects),
    );
    Ok(RunDiff {
        a: outcome(&x),
        b: outcome(&y),
        prompt_versions: (vx.id, vy.id),
        prompt_name: vx.name,
        prompt,
        input,
        params,
        objects,
    })
}
