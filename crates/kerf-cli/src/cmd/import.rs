//! `kerf import`: TrustGraph prompt configs back into prompt files.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use crate::Outcome;
use crate::output::print_json;

/// Import a TrustGraph prompt bundle (or one template object) as Kerf prompt files, or read back
/// a chunker's settings (`kerf export --to trustgraph-chunking`).
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf import prompt-config.json --out-dir my-prompts/
  kerf import template.json --id extract-definitions --out-dir my-prompts/

Each template becomes <out-dir>/<id>.json; nothing is written unless every template compiles and,\nwithout --force, none of the files exists. The same import as the desktop's Prompts screen (kerf-api).")]
pub struct Args {
    /// A bundle (keys system, template-index, template.<id>), a single template object, or
    /// chunker settings (keys processor, parameters).
    pub file: PathBuf,
    /// Where to write the prompt files.
    #[arg(long, default_value = ".")]
    pub out_dir: PathBuf,
    /// The id for a single template (default: the file name).
    #[arg(long)]
    pub id: Option<String>,
    /// Overwrite existing prompt files.
    #[arg(long)]
    pub force: bool,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
    // Chunker settings (what `kerf export --to trustgraph-chunking` writes) are read back and
    // shown as the flags that cut the same way; no file is written.
    if let Ok(text) = std::fs::read_to_string(&args.file)
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
        && kerf_core::export::chunking::is_chunking(&value)
    {
        let s = kerf_api::export::read_chunking(&args.file)?;
        if args.json {
            print_json(&json!({"chunking": s}));
        } else {
            crate::outln!(
                "{}: TrustGraph's {} chunker at {} {} with an overlap of {} — cut the same way with `--chunker {} --chunk-size {} --chunk-overlap {}` (kerf chunk, kerf eval) or `--chunk-settings {}` (kerf eval)",
                args.file.display(),
                s.chunker,
                s.size,
                s.chunker.unit(),
                s.overlap,
                s.chunker,
                s.size,
                s.overlap,
                args.file.display()
            );
        }
        return Ok(Outcome::Ok);
    }
    let written =
        kerf_api::prompts::import(&args.file, &args.out_dir, args.id.as_deref(), args.force)?;
    let written: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    if args.json {
        print_json(&json!({"written": written}));
    } else {
        for w in &written {
            crate::outln!("wrote {w}");
        }
    }
    Ok(Outcome::Ok)
}
