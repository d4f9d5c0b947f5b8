//! `kerf lint`: what a schema uses that each provider rejects or silently ignores.

use std::path::PathBuf;

use anyhow::Result;
use kerf_core::lint::{self, Provider, Severity};
use serde_json::json;

use crate::Outcome;
use crate::output::print_json;

/// Lint a JSON Schema (or a prompt file's schema) for each provider's structured-output mode.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf lint prompts/agent-kg-extract.json
  kerf lint schemas/agent-kg-extract.schema.json --provider openai --provider gemini --json

Severities: error (rejected, no faithful rewrite), rewrite (rejected as written; `kerf export` rewrites it),
ignored (accepted but not enforced), note. Exits 1 when the schema is invalid or any finding is an error.")]
pub struct Args {
    /// A JSON Schema file, or a prompt file (its `schema` is linted).
    pub file: PathBuf,
    /// Providers to lint for: openai, anthropic, gemini, llama.cpp, trustgraph (default: all).
    #[arg(long = "provider", value_name = "NAME")]
    pub providers: Vec<String>,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
    let providers: Vec<Provider> = if args.providers.is_empty() {
        Provider::ALL.to_vec()
    } else {
        args.providers
            .iter()
            .map(|p| {
                Provider::parse(p).ok_or_else(|| {
                    kerf_core::Error::Usage(format!(
                        "unknown provider `{p}` (expected openai, anthropic, gemini, llama.cpp or trustgraph)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let (schema, prompt) = super::load_schema_or_prompt(&args.file)?;
    // The schema itself must be valid before provider rules mean anything.
    kerf_core::CompiledSchema::compile(&schema, &args.file.display().to_string())?;
    let findings: Vec<lint::Finding> = providers
        .iter()
        .flat_map(|p| match &prompt {
            // A prompt file: its schema, and what its own shape means (`object-schema`).
            Some(prompt) => lint::prompt_file(&prompt.file, *p),
            None => lint::lint(&schema, *p),
        })
        .collect();
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if args.json {
        print_json(&json!({"findings": findings, "errors": errors}));
    } else {
        for p in &providers {
            let mine: Vec<&lint::Finding> = findings.iter().filter(|f| f.provider == *p).collect();
            if mine.is_empty() {
                crate::outln!("{}: ok", p.as_str());
                continue;
            }
            crate::outln!("{}:", p.as_str());
            for f in mine {
                let sev = match f.severity {
                    Severity::Error => "error",
                    Severity::Rewrite => "rewrite",
                    Severity::Ignored => "ignored",
                    Severity::Note => "note",
                };
                crate::outln!("  {sev:<8} {:<40} {}", f.pointer, f.message);
            }
        }
    }
    Ok(if errors > 0 {
        Outcome::InputFailed
    } else {
        Outcome::Ok
    })
}
