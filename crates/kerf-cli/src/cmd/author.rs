//! `kerf new` and `kerf twin`: prompt files written for the user (the same code as the desktop's
//! New and Make twin, kerf-api's `prompts::author`).

use std::path::PathBuf;

use anyhow::Result;
use kerf_api::prompts::author::Written;
use kerf_core::ResponseType;
use serde_json::json;

use crate::Outcome;
use crate::output::print_json;

/// The formats a new prompt answers in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line: what a cut reply held stays readable.
    Jsonl,
    /// One JSON array of objects.
    Json,
    /// LightRAG-style delimited records.
    Delimited,
}

impl From<Format> for ResponseType {
    fn from(f: Format) -> Self {
        match f {
            Format::Jsonl => ResponseType::Jsonl,
            Format::Json => ResponseType::Json,
            Format::Delimited => ResponseType::Delimited,
        }
    }
}

/// Write a new prompt file: instructions that list the item's keys, the schema, a sample input.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf new people --twin
  kerf new invoices --format json --schema invoice.schema.json
  kerf new my-prompts/places.json --format delimited

NAME is a prompt id (written as NAME.json here) or a path ending in .json. The schema is the\n\
item's (for --format json an array schema also does). The prompt reads its input from\n\
{{ text }}; its sample input is inputs/NAME.txt beside it (Kerf's sample text unless that file\n\
exists). With --twin, the other format's twin is written too, each naming the other, ready for\n\
`kerf compare NAME.json NAME-array.json`.")]
pub struct NewArgs {
    /// The prompt's id, or the path of the file to write.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// How the model answers.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// A JSON Schema for the items (default: a name and a description).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Write the other format's twin too (JSONL ↔ JSON array).
    #[arg(long)]
    pub twin: bool,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

/// Write the other format's twin of a prompt: JSONL ↔ JSON array, the same items.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf twin my-prompts/people.json
  kerf twin prompts/extract-topics.json -o my-prompts/topics-array.json

The twin answers in the other format with the same item schema (wrapped in, or taken out of, an\n\
array); the sentences of the instructions that name the format are reworded (one is added when\n\
none does); it names its source in `twin`, and a source that names no twin yet names it back.\n\
Its id is its file's name. Every change is listed.")]
pub struct TwinArgs {
    /// A JSONL prompt file, or a JSON one whose schema is an array.
    pub prompt: PathBuf,
    /// Where to write it (default: <twin id>.json beside the prompt).
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Machine-readable output (JSON on standard output).
    #[arg(long)]
    pub json: bool,
}

fn say(written: &[Written], json: bool) {
    if json {
        print_json(&json!({ "written": written }));
        return;
    }
    for w in written {
        crate::outln!("wrote {} ({}, id {})", w.path, w.response_type, w.id);
        for c in &w.changes {
            crate::outln!("  {c}");
        }
        if let Some(s) = &w.source_updated {
            crate::outln!("  {s} now names it as its twin");
        }
    }
}

pub fn run_new(args: NewArgs) -> Result<Outcome> {
    let path = if args.name.ends_with(".json") {
        PathBuf::from(&args.name)
    } else {
        PathBuf::from(format!("{}.json", args.name))
    };
    let written = kerf_api::prompts::author::write_new(
        &path,
        args.format.into(),
        args.schema.as_deref(),
        args.twin,
        args.force,
    )?;
    say(&written, args.json);
    if !args.json {
        let next = match &written[..] {
            [one, two] => format!("kerf compare {} {}", one.path, two.path),
            _ => format!("kerf run {} --sample", path.display()),
        };
        crate::outln!("next: kerf check {}; {next}", path.display());
    }
    Ok(Outcome::Ok)
}

pub fn run_twin(args: TwinArgs) -> Result<Outcome> {
    let written =
        kerf_api::prompts::author::write_twin(&args.prompt, args.out.as_deref(), args.force, true)?;
    say(std::slice::from_ref(&written), args.json);
    if !args.json {
        let (jsonl, array) = match written.response_type {
            ResponseType::Json => (args.prompt.display().to_string(), written.path.clone()),
            _ => (written.path.clone(), args.prompt.display().to_string()),
        };
        crate::outln!("next: kerf compare {jsonl} {array}");
    }
    Ok(Outcome::Ok)
}
