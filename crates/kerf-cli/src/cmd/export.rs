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
  kerf export --to trustgraph-chunking --chunk-size 1000 --chunk-overlap 50 --out flow-params.json

Writes to standard output unless --out is given; what changed on the way is listed on standard error.
The same export as the desktop's Export screen (kerf-api).")]
pub struct Args {
    /// Prompt files (several for a bundle; none for trustgraph-chunking).
    pub prompts: Vec<PathBuf>,
    #[arg(long, value_parser = targets())]
    pub to: ExportTarget,
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The bundle's global system template (default: the prompts' own, or TrustGraph's "Be helpful.").
    #[arg(long)]
    pub system: Option<String>,
    /// trustgraph-chunking: the chunk size, in the chunker's unit.
    #[arg(long, value_name = "N")]
    pub chunk_size: Option<usize>,
    /// trustgraph-chunking: the chunker [default: recursive].
    #[arg(long, value_enum)]
    pub chunker: Option<super::chunk::ChunkerArg>,
    /// trustgraph-chunking: the overlap [default: 50, a deployed flow's].
    #[arg(long, value_name = "N")]
    pub chunk_overlap: Option<usize>,
}

pub fn run(args: Args) -> Result<Outcome> {
    use kerf_api::{ApiError, Code};
    let chunk_flags =
        args.chunk_size.is_some() || args.chunker.is_some() || args.chunk_overlap.is_some();
    let exported = if args.to.takes_prompts() {
        if args.prompts.is_empty() {
            anyhow::bail!(ApiError::new(
                Code::Usage,
                format!("--to {}: give one or more prompt files", args.to)
            ));
        }
        if chunk_flags {
            anyhow::bail!(ApiError::new(
                Code::Usage,
                "--chunk-size, --chunker and --chunk-overlap go with --to trustgraph-chunking"
            ));
        }
        kerf_api::export::export(&args.prompts, args.to, args.system.as_deref())?
    } else {
        if !args.prompts.is_empty() {
            anyhow::bail!(ApiError::new(
                Code::Usage,
                "--to trustgraph-chunking exports a chunker's settings, not prompts: leave the prompt files out"
            ));
        }
        let Some(size) = args.chunk_size else {
            anyhow::bail!(ApiError::new(
                Code::Usage,
                "--to trustgraph-chunking: give --chunk-size"
            ));
        };
        kerf_api::export::chunking(&kerf_core::chunk::ChunkSettings {
            chunker: args
                .chunker
                .unwrap_or(super::chunk::ChunkerArg::Recursive)
                .into(),
            size,
            overlap: args.chunk_overlap.unwrap_or(50),
        })?
    };
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
