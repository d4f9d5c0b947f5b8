//! `kerf export`: prompts in production shapes.

use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use kerf_core::export::{self, Exported};

use crate::Outcome;
use crate::output::write_file;

#[derive(Clone, Copy, ValueEnum)]
pub enum Target {
    /// TrustGraph config bundle for config type `prompt` (system, template-index, template.<id>).
    TrustgraphBundle,
    /// One TrustGraph template object.
    TrustgraphTemplate,
    /// OpenAI `response_format` (json_schema, strict), after the strict-mode rewrite.
    Openai,
    /// Anthropic forced tool use: `tools` + `tool_choice`.
    Anthropic,
}

/// Export prompt files for production use.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf export prompts/*.json --to trustgraph-bundle --out prompt-config.json
  kerf export prompts/agent-kg-extract.json --to openai
  kerf export prompts/extract-definitions.json --to anthropic

Writes the JSON to standard output unless --out is given; what changed on the way is listed on standard error.")]
pub struct Args {
    /// Prompt files (several for a bundle).
    #[arg(required = true)]
    pub prompts: Vec<PathBuf>,
    #[arg(long, value_enum)]
    pub to: Target,
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The bundle's global system template (default: the prompts' own, or TrustGraph's "Be helpful.").
    #[arg(long)]
    pub system: Option<String>,
}

pub fn run(args: Args) -> Result<Outcome> {
    let mut files = Vec::new();
    for p in &args.prompts {
        // Compile too: an export of a prompt whose template or schema is broken helps nobody.
        files.push(super::load_prompt(p)?.file);
    }
    let single = |what: &str| -> Result<&kerf_core::PromptFile> {
        match files.as_slice() {
            [one] => Ok(one),
            _ => Err(kerf_core::Error::Usage(format!(
                "--to {what} takes exactly one prompt file (use trustgraph-bundle for several)"
            ))
            .into()),
        }
    };
    let exported: Exported = match args.to {
        Target::TrustgraphBundle => export::trustgraph::bundle(&files, args.system.as_deref())?,
        Target::TrustgraphTemplate => {
            export::trustgraph::template_object(single("trustgraph-template")?)
        }
        Target::Openai => export::provider::openai(single("openai")?),
        Target::Anthropic => export::provider::anthropic(single("anthropic")?),
    };
    for n in &exported.notes {
        eprintln!("kerf: note: {n}");
    }
    let mut text = serde_json::to_string_pretty(&exported.value)?;
    text.push('\n');
    match &args.out {
        Some(path) => {
            write_file(path, &text)?;
            eprintln!("kerf: wrote {}", path.display());
        }
        None => crate::out!("{text}"),
    }
    Ok(Outcome::Ok)
}
