//! What an experiment was asked, as the history keeps it: one typed record for every kind
//! ([`ExperimentSpec`]), written when the experiment begins and read back by `resume`, `rescore`
//! and the window. Its JSON is the `spec` column; the `kind` column says which variant it is.

use kerf_core::ResponseType;
use kerf_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use super::plan::Size;
use super::{ConstrainMode, ExperimentKind, Subject};
use crate::error::{ApiError, Code, Result};
use crate::runs::{Chosen, RunParams, StoredParams};

/// What an experiment was asked: which prompts, on which model, over which axes, and what its
/// plan was announced to cost. One type for every kind, so the window reads any experiment the
/// way the CLI wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExperimentSpec {
    Compare(CompareSpec),
    Eval(EvalSpec),
    Sweep(SweepSpec),
    Test(TestSpec),
}

/// The model side of an experiment that calls one: the provider and model its cells ran on, and
/// the parameters they share (each cell sets its own budget and constraint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SpecSettings {
    pub provider: String,
    pub model: String,
    /// In the history's stored form (absent from compares recorded before it was kept).
    #[serde(default)]
    pub params: StoredParams,
}

impl SpecSettings {
    pub fn of(provider: &Chosen, params: &RunParams) -> Self {
        SpecSettings {
            provider: provider.name(),
            model: provider.as_provider().model(),
            params: params.stored(),
        }
    }

    /// The first of an experiment's providers, whose settings its cells share (a spec that
    /// names none was not written by Kerf: an error naming `whose`).
    pub fn first<'s>(providers: &'s [SpecSettings], whose: &str) -> Result<&'s SpecSettings> {
        providers.first().ok_or_else(|| {
            ApiError::new(
                Code::StoreCorrupt,
                format!("{whose}'s spec names no provider"),
            )
        })
    }

    /// The parameters every cell starts from, read back the way a stored run's are.
    pub fn run_params(&self) -> Result<RunParams> {
        let params = serde_json::to_value(&self.params)
            .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
        RunParams::from_stored(&params, &self.provider, &self.model)
    }
}

/// The providers `settings` name, built again in their order from what the spec keeps (a
/// resume runs on them).
pub fn providers(
    wb: &crate::workbench::Workbench,
    settings: &[SpecSettings],
) -> Result<Vec<Chosen>> {
    settings
        .iter()
        .map(|s| s.run_params()?.settings.provider(wb))
        .collect()
}

/// A prompt as a spec names it: its id, file, and the exact version that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SpecPrompt {
    pub id: String,
    pub path: Option<String>,
    /// The prompt version's id in the history (the SHA-256 of its text).
    pub version: String,
    /// Variables set for every row the prompt renders, beneath each row's own (an eval's
    /// `--var`, the window's form); specs stored before these were kept set none.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[ts(optional, type = "Record<string, unknown>")]
    pub vars: serde_json::Map<String, Value>,
}

impl SpecPrompt {
    /// The prompt version this names, compiled from the history's text (the file may have
    /// changed since), as a subject again; errors name it as `whose`'s prompt.
    pub fn load(&self, store: &Store, whose: &str) -> Result<Subject> {
        let version = store.prompt_version(&self.version)?;
        let place = format!(
            "{whose} `{}` (version {})",
            self.id,
            &self.version[..12.min(self.version.len())]
        );
        let mut loaded = kerf_core::PromptFile::from_json_str(&version.text, &place)?;
        // A file without an `id` took its file's name when it ran: the text alone does not
        // say it, the spec does (without it, the cells it keyed would not be found again).
        loaded.file.id.get_or_insert_with(|| self.id.clone());
        let mut prompt = kerf_core::Prompt::compile(loaded.file, &place)?;
        prompt.path = self.path.as_ref().map(std::path::PathBuf::from);
        Ok(Subject {
            prompt,
            source: crate::runs::PromptSource {
                name: version.name,
                path: version.path,
                text: version.text,
            },
        })
    }

    /// `subject` as a spec names it, its text kept in the history as a prompt version (the same
    /// text from either front end is the same version).
    pub fn keep(store: &Store, subject: &Subject) -> Result<Self> {
        Ok(SpecPrompt {
            id: subject.prompt.id().to_string(),
            // Absolute, so `rescore` finds the file from anywhere.
            path: subject.source.path.as_deref().map(|p| {
                std::fs::canonicalize(p).map_or(p.to_string(), |c| c.display().to_string())
            }),
            version: store.put_prompt_version(
                &subject.source.name,
                subject.source.path.as_deref(),
                subject.prompt.file.response_type.as_str(),
                &subject.source.text,
            )?,
            vars: serde_json::Map::new(),
        })
    }
}

/// Formats side by side under real budgets (`kerf compare`, the window's Compare).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct CompareSpec {
    /// Each contender's prompt file (or its name, for a draft from the window).
    pub prompts: Vec<String>,
    /// Each contender's prompt version and input, in `prompts`' order: what taking the compare
    /// up again renders (compares kept before these were have none, and cannot be resumed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(optional, as = "Option<Vec<SpecContender>>")]
    pub contenders: Vec<SpecContender>,
    pub max_tokens: Vec<u32>,
    pub constrain: ConstrainMode,
    /// The provider its cells ran on (compares are kept as every kind is, with a list of
    /// providers; those stored before had its fields at the spec's top level: read back by
    /// [`ExperimentSpec::read`]).
    pub providers: Vec<SpecSettings>,
    /// Requests in flight at once (compares recorded before it was kept ran one at a time).
    #[serde(default = "one")]
    pub concurrency: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Size>,
}

/// A compare's contender as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SpecContender {
    pub prompt: SpecPrompt,
    /// The input it was rendered with (its id in the history: the variables and terms).
    pub input: String,
}

fn one() -> usize {
    1
}

/// Prompts over a dataset, scored against its expected records (`kerf eval`): all `resume`
/// needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct EvalSpec {
    pub dataset: String,
    pub prompts: Vec<SpecPrompt>,
    pub max_tokens: Vec<u32>,
    pub constrain: ConstrainMode,
    pub repeat: u32,
    /// The models side by side, each a provider (named once) with its model and parameters;
    /// evals stored before this was kept had one, its fields at the spec's top level (read back
    /// here by [`ExperimentSpec::read`]).
    pub providers: Vec<SpecSettings>,
    /// The matrix's size: prompts × providers × budgets × constraint variants × repeats × rows.
    pub cells: usize,
    /// Reuse replies earlier evals bought for the same cell (`--cache`; a resume keeps it).
    #[serde(default)]
    pub cache: bool,
    /// Requests in flight at once (`--concurrency`); a resume keeps it unless told otherwise.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// The number in flight was found by itself, up to `concurrency` (`--concurrency auto`);
    /// evals stored before it was kept ran at a fixed number.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[ts(as = "Option<bool>", optional)]
    pub adaptive: bool,
    /// What the eval was announced to cost before its first request (evals stored before it
    /// was kept have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Size>,
    /// How each document was cut before the prompt saw it (absent: whole, one request each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub chunking: Option<Chunking>,
}

/// How an eval cuts its documents: each document is cut at every size, each chunk sent as its
/// own request (`passes` times, with each context), and a document's chunks merged before it is
/// scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct Chunking {
    pub chunker: kerf_core::chunk::Chunker,
    /// The sizes to cut at, in the chunker's unit (characters or tokens), ascending.
    pub sizes: Vec<u32>,
    /// What each chunk shares with the one before, in the same unit.
    pub overlap: u32,
    /// Requests per chunk, their records merged (1 or more).
    pub passes: u32,
    /// The characters of the chunk before given to each chunk as marked context, ascending (0:
    /// none).
    pub context_chars: Vec<u32>,
}

/// Requests in flight at once when none is given (and for evals stored before the spec kept it).
pub const DEFAULT_CONCURRENCY: usize = 4;
/// The most requests in flight `--concurrency auto` grows to per provider.
pub const AUTO_CEILING: usize = 64;

fn default_concurrency() -> usize {
    DEFAULT_CONCURRENCY
}

/// Replies cut at every offset (`kerf sweep`): which replies (by name, size and hash) and how
/// they were cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SweepSpec {
    pub replies: Vec<SweptReply>,
    pub unit: CutUnit,
    /// The tokenizer of token cuts (a vocabulary's name or a GGUF model's path).
    pub tokenizer: String,
}

/// One reply a sweep cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SweptReply {
    pub name: String,
    pub bytes: usize,
    pub response_type: ResponseType,
    pub sha256: String,
}

/// Where a sweep may cut a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum CutUnit {
    /// Every byte (a cut inside a character counts as the boundary before it).
    Byte,
    Char,
    /// A tokenizer's token boundaries.
    Token,
}

/// A prompt file's own tests, held to their minimums (`kerf test`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TestSpec {
    pub prompts: Vec<SpecPrompt>,
    /// Tests in all, over every prompt.
    pub tests: usize,
    /// The budget of tests that set no `max-tokens`.
    pub max_tokens: u32,
    /// The providers the tests ran on, side by side (tests stored before this was kept ran on
    /// one, its fields at the spec's top level: read back by [`ExperimentSpec::read`]).
    pub providers: Vec<SpecSettings>,
    pub concurrency: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Size>,
}

impl ExperimentSpec {
    pub fn kind(&self) -> ExperimentKind {
        match self {
            Self::Compare(_) => ExperimentKind::Compare,
            Self::Eval(_) => ExperimentKind::Eval,
            Self::Sweep(_) => ExperimentKind::Sweep,
            Self::Test(_) => ExperimentKind::Test,
        }
    }

    /// Start the experiment in `store` under this spec; its runs name the returned id.
    pub fn begin(&self, store: &Store) -> Result<i64> {
        let spec = crate::runs::declared::typed_json(self)
            .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
        Ok(store.begin_experiment(self.kind(), &spec)?)
    }

    /// Experiment `id`'s spec as stored under `kind` (specs recorded before the spec carried its
    /// kind are read by the column's). A spec Kerf did not write is an error naming the
    /// experiment.
    pub fn read(id: i64, kind: ExperimentKind, spec: &Value) -> Result<Self> {
        let mut spec = spec.clone();
        if let Value::Object(map) = &mut spec {
            map.entry("kind")
                .or_insert_with(|| Value::from(kind.as_str()));
            // A compare, an eval or tests of one provider, as Kerf kept them before several could
            // run side by side: its provider, model and parameters at the top level.
            if kind != ExperimentKind::Sweep && !map.contains_key("providers") {
                let one: serde_json::Map<String, Value> = ["provider", "model", "params"]
                    .into_iter()
                    .filter_map(|k| map.remove(k).map(|v| (k.to_string(), v)))
                    .collect();
                map.insert("providers".into(), Value::from(vec![Value::Object(one)]));
            }
        }
        serde_json::from_value(spec).map_err(|err| {
            ApiError::new(
                Code::StoreCorrupt,
                format!("experiment {id}'s spec is not what Kerf wrote: {err}"),
            )
        })
    }
}
