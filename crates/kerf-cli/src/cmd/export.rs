//! `kerf export`: prompts in production shapes.

use std::path::PathBuf;

use anyhow::Result;
use clap::builder::{PossibleValue, TypedValueParser};
use kerf_api::export::ExportTarget;

use crate::Outcome;
use crate::output::write_file;

/// `--to`: kerf-api's export targets, each with its description (one list, no copy here).
fn targets() -> impl TypedValueParser<Value = ExportTarget> {
    clap::builder::PossibleValuesParser::new(
        ExportTarget::ALL.map(|t| PossibleValue::new(t.as_str()).help(t.description())),
    )
    .try_map(|name| ExportTarget::parse(&name).ok_or(format!("unknown export target `{name}`")))
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
    #[arg(long, value_parser = targets())]
    pub to: ExportTarget,
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The bundle's global system template (default: the prompts' own, or TrustGraph's "Be helpful.").
    #[arg(long)]
    pub system: Option<String>,
}

pub fn run(args: Args) -> Result<Outcome> {
    let exported = kerf_api::export::export(&args.prompts, args.to, args.system.as_deref())?;
    for n in &exported.notes {
        crate::errln!("kerf: note: {n}");
    }
    match &args.out {
        Some(path) => {
            write_file(path, &exported.text)?;
            crate::errln!("kerf: wrote {}", path.display());
        }
        None => crate::out!("{}", exported.text),
    }
    Ok(Outcome::Ok)
}
