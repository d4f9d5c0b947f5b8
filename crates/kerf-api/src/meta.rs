//! The closed lists the window offers, declared once here and sent to it (the desktop's `meta`
//! command), so no screen keeps its own copy: each provider kind's structured-output modes and
//! defaults, the export targets with their labels, the run statuses, the response types, the
//! experiment kinds, the constraint modes and the run panel's defaults.

use kerf_core::ResponseType;
use kerf_llm::providers::{Kind, Structured};
use kerf_store::Status;
use serde::Serialize;
use ts_rs::TS;

use crate::experiments::{ConstrainMode, ExperimentKind};
use crate::export::ExportTarget;
use crate::runs::wire::RunOptions;

/// Everything the window's lists are made of.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub provider_kinds: Vec<ProviderKindMeta>,
    pub export_targets: Vec<ExportTargetMeta>,
    pub run_statuses: Vec<Status>,
    pub response_types: Vec<ResponseType>,
    pub experiment_kinds: Vec<ExperimentKind>,
    /// Which passes a compare or eval gives each prompt.
    pub constrain_modes: Vec<ConstrainMode>,
    /// What the run panel starts with.
    pub run_defaults: RunOptions,
    /// The user's home folder (`HOME`), which the window shows paths under as `~/…`.
    pub home: Option<String>,
}

/// A provider kind as the Providers screen offers it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ProviderKindMeta {
    pub kind: Kind,
    /// Its name in the list.
    pub label: String,
    /// The structured-output modes it takes, `auto` first.
    pub modes: Vec<Structured>,
    pub default_base_url: String,
    /// The environment variable its key falls back to.
    pub key_env: String,
    /// A model of its own service, shown as an example.
    pub example_model: String,
}

/// An export target and its name in the list.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ExportTargetMeta {
    pub target: ExportTarget,
    pub label: String,
    pub description: String,
}

/// The lists, from the types that own them.
pub fn meta() -> Meta {
    Meta {
        provider_kinds: Kind::ALL
            .into_iter()
            .map(|kind| ProviderKindMeta {
                kind,
                label: match kind {
                    Kind::Openai => "OpenAI-compatible",
                    Kind::Anthropic => "Anthropic",
                    Kind::Gemini => "Gemini",
                }
                .into(),
                modes: kind.modes().to_vec(),
                default_base_url: kind.default_base_url().into(),
                key_env: kind.key_env().into(),
                example_model: kind.example_model().into(),
            })
            .collect(),
        // The Export screen exports prompts; chunker settings come from the CLI.
        export_targets: ExportTarget::ALL
            .into_iter()
            .filter(|t| t.takes_prompts())
            .map(|target| ExportTargetMeta {
                target,
                label: target.label().into(),
                description: target.description().into(),
            })
            .collect(),
        run_statuses: Status::ALL.to_vec(),
        response_types: ResponseType::ALL.to_vec(),
        experiment_kinds: ExperimentKind::ALL.to_vec(),
        constrain_modes: vec![
            ConstrainMode::Both,
            ConstrainMode::Auto,
            ConstrainMode::None,
        ],
        run_defaults: RunOptions::default(),
        home: std::env::home_dir()
            .filter(|h| h.is_absolute() && h.parent().is_some())
            .map(|h| h.display().to_string()),
    }
}
