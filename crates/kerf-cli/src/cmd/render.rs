//! `kerf render`: show exactly what a prompt sends.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Value, json};

use crate::Outcome;
use crate::output::print_json;

/// Render a prompt's system and user turns with terms and variables merged as TrustGraph does.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf render prompts/extract-definitions.json --sample
  kerf render prompts/extract-definitions.json --input doc.txt --var language=English
  kerf render prompts/extract-rows.json --sample --list-vars
  kerf render prompts/agent-kg-extract.json --input doc.txt --terms global-terms.json --json

Terms merge in TrustGraph's order: --terms (global), then the prompt's `terms`, then --input/--var.
An undefined variable is an error naming the template, line and variable.")]
pub struct Args {
    /// The prompt file, or the id of a shipped or own prompt (`agent-kg-extract`).
    pub prompt: PathBuf,
    #[command(flatten)]
    pub input: super::InputArgs,
    /// List the variables the templates read (and which the prompt's terms supply), then stop.
    #[arg(long)]
    pub list_vars: bool,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

pub fn run(mut args: Args, wb: &kerf_api::workbench::Workbench) -> Result<Outcome> {
    args.prompt = wb.find_prompt(&args.prompt);
    let prompt = super::load_prompt(&args.prompt)?;
    if args.list_vars {
        let mut all = prompt.user.variables();
        if let Some(s) = &prompt.system {
            all.extend(s.variables());
        }
        all.sort();
        all.dedup();
        let rows: Vec<Value> = all
            .iter()
            .map(|v| json!({"name": v, "from_terms": prompt.file.terms.contains_key(v), "input": v == prompt.file.input_variable()}))
            .collect();
        if args.json {
            print_json(&json!({"variables": rows}));
        } else {
            for r in &rows {
                let note = if r["input"] == true {
                    "  (the input document)"
                } else if r["from_terms"] == true {
                    "  (default in the prompt's terms)"
                } else {
                    ""
                };
                crate::outln!("{}{note}", r["name"].as_str().unwrap_or_default());
            }
        }
        return Ok(Outcome::Ok);
    }
    let rendered = args.input.render(&prompt, &args.prompt)?.rendered;
    if args.json {
        print_json(
            &json!({"id": prompt.id(), "system": rendered.system, "user": rendered.user, "variables": prompt.input_variables()}),
        );
    } else {
        if let Some(s) = &rendered.system {
            crate::outln!("--- system ---\n{s}");
        }
        crate::outln!("--- user ---\n{}", rendered.user);
    }
    Ok(Outcome::Ok)
}
