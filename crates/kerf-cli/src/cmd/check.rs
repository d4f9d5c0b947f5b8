//! `kerf check`: load and compile prompt files and schemas, as CI would.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::json;

use crate::Outcome;
use crate::output::{print_json, read_json};

/// Check prompt files and JSON Schemas: every prompt loads, its templates compile and its schema
/// compiles; every schema passes its meta-schema.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf check prompts/ schemas/
  kerf check prompts/agent-kg-extract.json --json

Files ending in .schema.json are checked as schemas; other .json files as prompt files. Exits 1 if any fails.")]
pub struct Args {
    /// Files or folders (folders: every .json file inside, not recursive).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

fn check_one(path: &Path) -> Result<Vec<String>> {
    let (schema, mut warnings) = if path.to_string_lossy().ends_with(".schema.json") {
        let schema = read_json(path)?;
        kerf_core::CompiledSchema::compile(&schema, &path.display().to_string())?;
        (Some(schema), Vec::new())
    } else {
        let prompt = kerf_core::Prompt::load(path)?;
        (prompt.file.schema.clone(), prompt.warnings)
    };
    // What a provider's run would refuse, said before any run does.
    for f in schema.iter().flat_map(kerf_core::lint::refusals) {
        warnings.push(format!(
            "{} at {}: {}",
            f.provider.as_str(),
            f.pointer,
            f.message
        ));
    }
    Ok(warnings)
}

pub fn run(args: Args) -> Result<Outcome> {
    let mut files = Vec::new();
    for p in &args.paths {
        if p.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| kerf_core::Error::io(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(p.clone());
        }
    }
    let mut results = Vec::new();
    let mut failed = 0;
    for f in &files {
        match check_one(f) {
            Ok(warnings) => results
                .push(json!({"file": f.display().to_string(), "ok": true, "warnings": warnings})),
            Err(e) => {
                failed += 1;
                results.push(json!({"file": f.display().to_string(), "ok": false, "error": format!("{e:#}")}));
            }
        }
    }
    if args.json {
        print_json(&json!({"files": results, "failed": failed}));
    } else {
        for r in &results {
            let file = r["file"].as_str().unwrap_or_default();
            if r["ok"] == true {
                crate::outln!("ok    {file}");
                for w in r["warnings"].as_array().into_iter().flatten() {
                    crate::outln!("      warning: {}", w.as_str().unwrap_or_default());
                }
            } else {
                crate::outln!("FAIL  {}", r["error"].as_str().unwrap_or_default());
            }
        }
        crate::outln!("{} file(s) checked, {failed} failed", files.len());
    }
    Ok(if failed > 0 {
        Outcome::InputFailed
    } else {
        Outcome::Ok
    })
}
