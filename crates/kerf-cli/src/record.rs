//! Recording into the history: every `kerf run`, `compare` and `sweep` is kept in Kerf's SQLite
//! history (`kerf history`) unless `--no-history` is given.

use anyhow::Result;
use kerf_core::Prompt;
use kerf_store::{NewRun, RunEnd, Store};
use serde_json::{Value, json};

use crate::cmd::Rendering;
use crate::cmd::run::{Chosen, Outcomes};

/// Options every command accepts (before or after the subcommand).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Globals {
    /// Kerf's data directory (models, history): instead of KERF_DATA_DIR or the platform's
    /// (~/.local/share/kerf on Linux).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// Do not record runs, compares or sweeps in the history.
    #[arg(long, global = true)]
    pub no_history: bool,
}

/// The history a command records into (`None` with --no-history).
pub fn open(globals: &Globals) -> Result<Option<Store>> {
    if globals.no_history {
        return Ok(None);
    }
    Ok(Some(Store::open(&kerf_store::default_path())?))
}

/// The history `kerf history` reads and edits.
pub fn open_for_reading() -> Result<Store> {
    Ok(Store::open(&kerf_store::default_path())?)
}

/// A prompt as the history keeps it: its id, where it came from, and its exact text.
pub struct PromptSource {
    pub name: String,
    pub path: Option<String>,
    pub text: String,
}

impl PromptSource {
    /// The prompt file at `path`, as it is on disk now.
    pub fn read(prompt: &Prompt, path: &std::path::Path) -> Result<Self> {
        Ok(PromptSource {
            name: prompt.id().to_string(),
            path: Some(path.display().to_string()),
            text: crate::output::read_input(path)?,
        })
    }
}

/// Everything about a run but its reply: what the history needs to start one.
pub struct RunMeta<'a> {
    pub prompt: &'a PromptSource,
    pub response_type: String,
    pub rendering: &'a Rendering,
    /// The model flags and budget, as `kerf run` would take them (see `ModelArgs::params`).
    pub params: Value,
    pub experiment: Option<i64>,
    pub rerun_of: Option<i64>,
}

/// Start a run in the history: its prompt version, input and everything that shapes its reply.
pub fn begin<'s>(
    store: &'s Store,
    meta: &RunMeta<'_>,
    provider: &Chosen,
) -> Result<kerf_store::RunWriter<'s>> {
    let version = store.put_prompt_version(
        &meta.prompt.name,
        meta.prompt.path.as_deref(),
        &meta.response_type,
        &meta.prompt.text,
    )?;
    let input = store.put_input(
        &Value::Object(meta.rendering.vars.clone()),
        &Value::Object(meta.rendering.terms.clone()),
    )?;
    let p = provider.as_provider();
    let model_sha256 = match provider.gguf() {
        Some(path) if path.is_file() => Some(store.model_sha256(&path)?),
        _ => None,
    };
    Ok(store.begin_run(&NewRun {
        prompt_version: version,
        input,
        experiment: meta.experiment,
        rerun_of: meta.rerun_of,
        provider: provider_name(provider),
        model: p.model(),
        model_sha256,
        params: meta.params.clone(),
        system: meta.rendering.rendered.system.clone(),
        user: meta.rendering.rendered.user.clone(),
    })?)
}

/// `local`, or the configured provider's name.
pub fn provider_name(provider: &Chosen) -> String {
    match provider {
        Chosen::Local(_) => "local".into(),
        Chosen::Cloud(p) => p.def.name.clone(),
    }
}

/// How a finished run is kept: its last reply, report, usage, and the replies a repair loop
/// sent back.
pub fn run_end(out: &Outcomes, cost: Option<&kerf_llm::prices::Cost>) -> RunEnd {
    let f = &out.finish;
    RunEnd {
        finish_reason: f.reason.as_str().into(),
        raw: out.raw.clone(),
        report: Some(out.report.clone()),
        usage: json!(f.usage),
        timings: json!(f.timings),
        details: f.details.clone(),
        cost: cost.map(|c| {
            json!({"usd": c.usd, "matched": c.matched, "source": c.source,
                   "input_per_million": c.price.input, "output_per_million": c.price.output})
        }),
        earlier: out
            .earlier
            .iter()
            .map(|a| {
                json!({"finish_reason": a.finish.reason.as_str(), "usage": a.finish.usage,
                       "raw": a.raw, "objects": a.report.objects.len(),
                       "dropped": a.report.dropped.len()})
            })
            .collect(),
        error: f
            .error
            .as_ref()
            .map(|e| ("provider".to_string(), e.clone())),
    }
}

/// The stable code of an error a run ended with (as `kerf` prints it).
pub fn error_code(err: &anyhow::Error) -> &'static str {
    if let Some(e) = err.downcast_ref::<kerf_llm::Error>() {
        return e.code();
    }
    if let Some(e) = err.downcast_ref::<kerf_core::Error>() {
        return e.code();
    }
    if let Some(e) = err.downcast_ref::<kerf_store::Error>() {
        return e.code();
    }
    "internal"
}
