//! `kerf export`: prompts in production shapes.

use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use kerf_api::export::ExportTarget;

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
    /// The GBNF grammar llama.cpp constrains decoding with (for a server that takes a grammar).
    Gbnf,
    /// The Lark grammar llguidance constrains decoding with.
    Lark,
}

/// Export prompt files for production use.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf export prompts/*.json --to trustgraph-bundle --out prompt-config.json
  kerf export prompts/agent-kg-extract.json --to openai
  kerf export prompts/extract-definitions.json --to anthropic
  kerf export prompts/agent-kg-extract.json --to gbnf --out agent-kg.gbnf

Writes to standard output unless --out is given; what changed on the way is listed on standard error.
The same export as the desktop's Export screen (kerf-api).")]
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

impl From<Target> for ExportTarget {
    fn from(t: Target) -> Self {
        match t {
            Target::TrustgraphBundle => ExportTarget::TrustgraphBundle,
            Target::TrustgraphTemplate => ExportTarget::TrustgraphTemplate,
            Target::Openai => ExportTarget::Openai,
            Target::Anthropic => ExportTarget::Anthropic,
            Target::Gbnf => ExportTarget::Gbnf,
            Target::Lark => ExportTarget::Lark,
        }
    }
}

pub fn run(args: Args) -> Result<Outcome> {
    let exported = kerf_api::export::export(&args.prompts, args.to.into(), args.system.as_deref())?;
    for n in &exported.notes {
        eprintln!("kerf: note: {n}");
    }
    match &args.out {
        Some(path) => {
            write_file(path, &exported.text)?;
            eprintln!("kerf: wrote {}", path.display());
        }
        None => crate::out!("{}", exported.text),
    }
    Ok(Outcome::Ok)
}
