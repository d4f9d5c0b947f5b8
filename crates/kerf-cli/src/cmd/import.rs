//! `kerf import`: TrustGraph prompt configs back into prompt files.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use crate::Outcome;
use crate::output::print_json;

/// Import a TrustGraph prompt bundle (or one template object) as Kerf prompt files.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf import prompt-config.json --out-dir my-prompts/
  kerf import template.json --id extract-definitions --out-dir my-prompts/

Each template becomes <out-dir>/<id>.json; nothing is written unless every template compiles and,\nwithout --force, none of the files exists. The same import as the desktop's Prompts screen (kerf-api).")]
pub struct Args {
    /// A bundle (keys system, template-index, template.<id>) or a single template object.
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
