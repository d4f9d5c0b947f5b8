//! `kerf render`: show exactly what a prompt sends.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Value, json};

use crate::Outcome;
use crate::output::{print_json, read_input, read_json, vars};

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
    /// The prompt file.
    pub prompt: PathBuf,
    /// The input document (`-` for standard input); bound to the prompt's input variable (default `text`).
    #[arg(long, conflicts_with = "sample")]
    pub input: Option<PathBuf>,
    /// Use the sample input shipped with the prompt (its `sample-input` key).
    #[arg(long)]
    pub sample: bool,
    /// Run variables as NAME=VALUE (JSON values are parsed: --var 'types=["a","b"]').
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A JSON object of global terms (TrustGraph's global terms).
    #[arg(long)]
    pub terms: Option<PathBuf>,
    /// List the variables the templates read (and which the prompt's terms supply), then stop.
    #[arg(long)]
    pub list_vars: bool,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
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
    let global = match &args.terms {
        Some(path) => match read_json(path)? {
            Value::Object(m) => m,
            _ => {
                return Err(kerf_core::Error::Usage(format!(
                    "{}: global terms must be a JSON object",
                    path.display()
                ))
                .into());
            }
        },
        None => Default::default(),
    };
    let mut run_vars = serde_json::Map::new();
    let input_path = if args.sample {
        Some(prompt.sample_input_path().ok_or_else(|| {
            kerf_core::Error::Usage(format!(
                "{}: the prompt has no `sample-input`",
                args.prompt.display()
            ))
        })?)
    } else {
        args.input.clone()
    };
    if let Some(path) = &input_path {
        run_vars.insert(
            prompt.file.input_variable().to_string(),
            Value::String(read_input(path)?),
        );
    }
    run_vars.extend(vars(&args.vars)?);
    let rendered = prompt.render(&global, &run_vars)?;
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
