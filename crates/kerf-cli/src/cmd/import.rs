//! `kerf import`: TrustGraph prompt configs back into prompt files.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use crate::Outcome;
use crate::output::{print_json, read_json, write_file};

/// Import a TrustGraph prompt bundle (or one template object) as Kerf prompt files.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf import prompt-config.json --out-dir my-prompts/
  kerf import template.json --id extract-definitions --out-dir my-prompts/

Each template becomes <out-dir>/<id>.json; existing files are not overwritten unless --force.")]
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
    let value = read_json(&args.file)?;
    let default_id = args
        .id
        .clone()
        .or_else(|| {
            args.file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "prompt".into());
    let prompts = kerf_core::export::trustgraph::import(
        &value,
        &default_id,
        &args.file.display().to_string(),
    )?;
    let mut written = Vec::new();
    for p in &prompts {
        // Each imported prompt must compile, or the import is refused before anything is written.
        kerf_core::Prompt::compile(
            p.clone(),
            &format!("{} template `{}`", args.file.display(), p.id()),
        )?;
    }
    for p in &prompts {
        let path = args.out_dir.join(format!("{}.json", p.id()));
        if path.exists() && !args.force {
            return Err(kerf_core::Error::Usage(format!(
                "{} exists (use --force to overwrite)",
                path.display()
            ))
            .into());
        }
        write_file(&path, &p.to_json_string())?;
        written.push(path.display().to_string());
    }
    if args.json {
        print_json(&json!({"written": written}));
    } else {
        for w in &written {
            crate::outln!("wrote {w}");
        }
    }
    Ok(Outcome::Ok)
}
