//! Prompts in production shapes: a TrustGraph config bundle or template object, a provider's
//! structured-output request, or the grammar the local engine constrains with. `kerf export`
//! and the Export screen both call [`export`].

use std::path::Path;

use kerf_core::Prompt;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};

pub mod wire;

use wire::ExportView;

/// Where an export goes (each target's [`description`](ExportTarget::description) says what it
/// is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "kebab-case")]
pub enum ExportTarget {
    TrustgraphBundle,
    TrustgraphTemplate,
    TrustgraphChunking,
    Openai,
    Anthropic,
    Gbnf,
    Lark,
}

impl ExportTarget {
    pub const ALL: [ExportTarget; 7] = [
        ExportTarget::TrustgraphBundle,
        ExportTarget::TrustgraphTemplate,
        ExportTarget::TrustgraphChunking,
        ExportTarget::Openai,
        ExportTarget::Anthropic,
        ExportTarget::Gbnf,
        ExportTarget::Lark,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportTarget::TrustgraphBundle => "trustgraph-bundle",
            ExportTarget::TrustgraphTemplate => "trustgraph-template",
            ExportTarget::TrustgraphChunking => "trustgraph-chunking",
            ExportTarget::Openai => "openai",
            ExportTarget::Anthropic => "anthropic",
            ExportTarget::Gbnf => "gbnf",
            ExportTarget::Lark => "lark",
        }
    }

    /// The target's name in the window's list.
    pub fn label(self) -> &'static str {
        match self {
            ExportTarget::TrustgraphBundle => "TrustGraph prompt config (bundle)",
            ExportTarget::TrustgraphTemplate => "TrustGraph template object",
            ExportTarget::TrustgraphChunking => "TrustGraph chunker settings (flow parameters)",
            ExportTarget::Openai => "OpenAI response_format",
            ExportTarget::Anthropic => "Anthropic tool schema",
            ExportTarget::Gbnf => "GBNF grammar (llama.cpp)",
            ExportTarget::Lark => "Lark grammar (llguidance)",
        }
    }

    /// What the target is, in a line (`kerf export --help` lists them).
    pub fn description(self) -> &'static str {
        match self {
            ExportTarget::TrustgraphBundle => {
                "TrustGraph config bundle for config type `prompt` (system, template-index, template.<id>)"
            }
            ExportTarget::TrustgraphTemplate => "One TrustGraph template object",
            ExportTarget::TrustgraphChunking => {
                "A chunker's settings as a TrustGraph flow takes them: the `chunk-size` and `chunk-overlap` flow parameters and the chunker processor (no prompt; give --chunk-size)"
            }
            ExportTarget::Openai => {
                "OpenAI `response_format` (json_schema, strict), after the strict-mode rewrite"
            }
            ExportTarget::Anthropic => "Anthropic forced tool use: `tools` + `tool_choice`",
            ExportTarget::Gbnf => {
                "The GBNF grammar llama.cpp constrains decoding with (for a server that takes a grammar)"
            }
            ExportTarget::Lark => "The Lark grammar llguidance constrains decoding with",
        }
    }

    /// Whether the target exports prompts (every target but the chunker settings).
    pub fn takes_prompts(self) -> bool {
        self != ExportTarget::TrustgraphChunking
    }

    /// The target named `name` (its `as_str`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl std::fmt::Display for ExportTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Prompt files in a production shape. A bundle takes several prompts; every other target one.
/// `system` is a bundle's global system template (default: the prompts' own, or TrustGraph's).
pub fn export<P: AsRef<Path>>(
    paths: &[P],
    target: ExportTarget,
    system: Option<&str>,
) -> Result<ExportView> {
    let mut files = Vec::new();
    for p in paths {
        // Compiled too: an export of a prompt whose template or schema is broken helps nobody.
        files.push(Prompt::load(p.as_ref())?.file);
    }
    let single = || -> Result<&kerf_core::PromptFile> {
        match files.as_slice() {
            [one] => Ok(one),
            _ => Err(ApiError::new(
                Code::Usage,
                format!("{target} takes exactly one prompt (a TrustGraph bundle takes several)"),
            )),
        }
    };
    let stem = match files.as_slice() {
        [one] => one.id().to_string(),
        _ => "prompts".to_string(),
    };
    use kerf_core::export;
    let exported = match target {
        ExportTarget::TrustgraphChunking => {
            return Err(ApiError::new(
                Code::Usage,
                "trustgraph-chunking exports a chunker's settings, not prompts: give --chunk-size (and --chunker, --chunk-overlap) instead of prompt files",
            ));
        }
        ExportTarget::TrustgraphBundle => export::trustgraph::bundle(&files, system)?,
        ExportTarget::TrustgraphTemplate => export::trustgraph::template_object(single()?),
        ExportTarget::Openai => export::provider::openai(single()?),
        ExportTarget::Anthropic => export::provider::anthropic(single()?),
        ExportTarget::Gbnf | ExportTarget::Lark => {
            let file = single()?;
            let grammar = grammar(file, target)?;
            return Ok(ExportView {
                target,
                text: grammar,
                notes: Vec::new(),
                file_name: format!("{stem}.{target}"),
            });
        }
    };
    let mut text = serde_json::to_string_pretty(&exported.value)
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    let suffix = match target {
        ExportTarget::TrustgraphBundle => "prompt-config",
        ExportTarget::TrustgraphChunking => "flow-parameters",
        ExportTarget::TrustgraphTemplate => "trustgraph",
        t => t.as_str(),
    };
    Ok(ExportView {
        target,
        text,
        notes: exported.notes,
        file_name: format!("{stem}.{suffix}.json"),
    })
}

/// A chunker's settings as a TrustGraph flow takes them ([`ExportTarget::TrustgraphChunking`]).
pub fn chunking(settings: &kerf_core::chunk::ChunkSettings) -> Result<ExportView> {
    let exported = kerf_core::export::chunking::export(settings)?;
    let mut text = serde_json::to_string_pretty(&exported.value)
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?;
    text.push('\n');
    Ok(ExportView {
        target: ExportTarget::TrustgraphChunking,
        text,
        notes: exported.notes,
        file_name: format!(
            "{}-{}.flow-parameters.json",
            settings.chunker.as_str(),
            settings.size
        ),
    })
}

/// Chunk settings read back from a file [`chunking`] wrote (or a flow's parameters).
pub fn read_chunking(path: &Path) -> Result<kerf_core::chunk::ChunkSettings> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ApiError::new(
            Code::NotFound,
            format!("{}: cannot be read: {e}", path.display()),
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ApiError::new(Code::Usage, format!("{}: not JSON: {e}", path.display())))?;
    Ok(kerf_core::export::chunking::import(
        &value,
        &path.display().to_string(),
    )?)
}

/// The grammar a prompt's schema constrains decoding with (llama.cpp's GBNF, or llguidance's
/// Lark): what the local engine runs, for a server that takes a grammar.
fn grammar(file: &kerf_core::PromptFile, kind: ExportTarget) -> Result<String> {
    let schema = file.schema.as_ref().ok_or_else(|| {
        ApiError::new(
            Code::Export,
            format!(
                "{}: a grammar needs the prompt's schema, and it has none",
                file.id()
            ),
        )
    })?;
    let jsonl = match file.response_type {
        kerf_core::ResponseType::Json => false,
        kerf_core::ResponseType::Jsonl => true,
        other => {
            return Err(ApiError::new(
                Code::Export,
                format!(
                    "{}: a {other} reply has no grammar (only json and jsonl do)",
                    file.id()
                ),
            ));
        }
    };
    Ok(if kind == ExportTarget::Gbnf {
        kerf_llama::grammar::gbnf(schema, jsonl)?
    } else {
        kerf_llama::grammar::lark(schema, jsonl)
    })
}
