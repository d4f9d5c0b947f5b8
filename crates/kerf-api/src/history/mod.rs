//! The history's use cases: a stored run in full, what changed between two runs, and running a
//! stored run again. Both front ends call these and show the same results: the CLI prints them
//! (its `--json` is their serialisation), the History screen gets [`wire`] types built from
//! them.

use kerf_core::Prompt;
use kerf_llm::CancelToken;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::Result;
use crate::runs::wire::{RunDone, RunMessage};
use crate::runs::{Chosen, PromptSource, Rendering, RunJob, RunParams};
use crate::workbench::Workbench;

mod manage;
pub mod wire;

pub use crate::recovery::{open, parse_interrupted};
pub use manage::{
    CSV_COLUMNS, ExportFormat, Query, delete, experiment, experiment_rows, experiments, export,
    last, list, note, runs, tag,
};
// The history's records as a front end reads them, without reaching below this crate.
pub use kerf_store::{
    Batch, BatchApi, BatchState, Experiment, ExperimentSummary, Filter, PromptVersion, RunRecord,
    RunSummary, Status, Store,
};

use crate::recovery::compile_version;

/// A stored run in full, with the prompt version it ran. `kerf history show --json` is its
/// serialisation: the record's fields, then the version's `prompt_text` and `prompt_path`.
#[derive(Debug, Clone, PartialEq)]
pub struct Detail {
    pub record: RunRecord,
    pub version: PromptVersion,
}

impl Serialize for Detail {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            record: &'a RunRecord,
            prompt_text: &'a str,
            prompt_path: &'a Option<String>,
        }
        Shown {
            record: &self.record,
            prompt_text: &self.version.text,
            prompt_path: &self.version.path,
        }
        .serialize(s)
    }
}

/// Run `id` as the history keeps it.
pub fn detail(store: &Store, id: i64) -> Result<Detail> {
    let record = store.run(id)?;
    let version = store.prompt_version(&record.summary.prompt_version)?;
    Ok(Detail { record, version })
}

/// A stored run made ready to run again: the same prompt version, compiled, rendered with the
/// same variables and terms, and its parameters, whichever front end recorded it (bug A: the
/// CLI rebuilt a window run from flags only it writes; bug B: the window read back five
/// settings). A front end applies its overrides to [`params`](Self::params) and runs
/// [`job`](Self::job); nothing is taken from a cache.
pub struct Replay {
    pub id: i64,
    pub record: RunRecord,
    pub prompt: Prompt,
    pub source: PromptSource,
    pub rendering: Rendering,
    pub params: RunParams,
}

/// Run `id`, ready to run again.
pub fn replay(store: &Store, id: i64) -> Result<Replay> {
    let record = store.run(id)?;
    let version = store.prompt_version(&record.summary.prompt_version)?;
    let prompt = compile_version(&version, id)?;
    let as_map = |v: &Value| v.as_object().cloned().unwrap_or_else(Map::new);
    let (vars, terms) = (as_map(&record.input.vars), as_map(&record.input.terms));
    let rendering = Rendering {
        rendered: prompt.render(&terms, &vars)?,
        vars,
        terms,
    };
    let params = RunParams::from_stored(
        &record.params,
        &record.summary.provider,
        &record.summary.model,
    )?;
    Ok(Replay {
        id,
        source: PromptSource {
            name: version.name,
            path: version.path,
            text: version.text,
        },
        record,
        prompt,
        rendering,
        params,
    })
}

impl Replay {
    /// The rerun on `provider` (built from [`params`](Self::params), overrides applied),
    /// recorded as a rerun of the stored run.
    pub fn job<'a>(&'a self, provider: &'a Chosen) -> RunJob<'a> {
        let mut job = RunJob::new(
            &self.prompt,
            &self.source,
            &self.rendering,
            provider,
            &self.params,
        );
        job.meta.rerun_of = Some(self.id);
        job
    }
}

/// The History screen's Rerun: run `id` again with every stored setting, relayed as a run is.
pub fn rerun(
    wb: &Workbench,
    id: i64,
    cancel: &CancelToken,
    on_message: &mut dyn FnMut(RunMessage),
) -> Result<RunDone> {
    let store = wb.store_required()?;
    let replay = replay(&store, id)?;
    let provider = replay.params.settings.provider(wb)?;
    crate::runs::relay_run(&replay.job(&provider), Some(&store), cancel, on_message)
}

/// One side of a diff: how the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub id: i64,
    pub status: kerf_store::Status,
    pub finish_reason: Option<kerf_llm::FinishReason>,
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
    /// Where each of two local runs ran, when that differs: greedy output differs between a
    /// CPU and a GPU (seen: 6 objects against 5 at one budget), so a change may come from that
    /// alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<(String, String)>,
}

/// Where a local run ran (`CPU on CPU (haswell)`, `CUDA0 (NVIDIA H100) on CUDA`), from its
/// stored details; `None` for a cloud run or one that ended before it loaded a model.
pub fn ran_on(details: &Value) -> Option<String> {
    match serde_json::from_value::<kerf_llm::RunDetails>(details.clone()).ok()? {
        kerf_llm::RunDetails::Local(l) => Some(l.offload.ran_on()),
        _ => None,
    }
}

/// The two devices when two local runs ran on different ones.
pub fn different_devices(a: &Value, b: &Value) -> Option<(String, String)> {
    let (a, b) = (ran_on(a)?, ran_on(b)?);
    (a != b).then_some((a, b))
}

fn outcome(r: &RunRecord) -> Outcome {
    let s = &r.summary;
    Outcome {
        id: s.id,
        status: s.status,
        finish_reason: s.finish_reason,
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
    let values = |r: &Option<kerf_core::ParseReport>| {
        r.as_ref().map_or_else(Vec::new, |r| r.objects.to_vec())
    };
    let objects = kerf_core::diff::objects(&values(&x.report), &values(&y.report));
    Ok(RunDiff {
        a: outcome(&x),
        b: outcome(&y),
        prompt_versions: (vx.id, vy.id),
        prompt_name: vx.name,
        prompt,
        input,
        params,
        objects,
        devices: different_devices(&x.details, &y.details),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(device: &str, backend: Option<&str>) -> Value {
        let mut offload = json!({"requested": "auto", "offloaded_layers": 0, "total_layers": 31,
            "device": device, "devices": []});
        if let Some(b) = backend {
            offload["backend"] = json!(b);
        }
        json!({"engine": "llama.cpp", "model": "/m.gguf", "model_reused": false,
            "load_seconds": 0.1, "context": 2048, "threads": 2, "flash_attention": "auto",
            "offload": offload})
    }

    /// Two local runs from different devices are named (greedy output differs between them);
    /// the same device, a cloud run, or a run with no details are not.
    #[test]
    fn runs_from_different_devices_are_named() {
        let cpu = local("CPU", Some("CPU (haswell)"));
        let gpu = local("CUDA0 (NVIDIA H100)", Some("CUDA"));
        assert_eq!(
            different_devices(&cpu, &gpu),
            Some((
                "CPU on CPU (haswell)".to_string(),
                "CUDA0 (NVIDIA H100) on CUDA".to_string()
            ))
        );
        assert_eq!(different_devices(&cpu, &cpu.clone()), None);
        // A run recorded before the backend was kept still names its device.
        assert_eq!(ran_on(&local("CPU", None)).as_deref(), Some("CPU"));
        let cloud = json!({"provider": "scripted"});
        assert_eq!(different_devices(&cpu, &cloud), None);
        assert_eq!(different_devices(&cpu, &Value::Null), None);
    }
}
