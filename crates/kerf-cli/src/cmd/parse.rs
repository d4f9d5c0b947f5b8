//! `kerf parse`: turn a reply into objects, with every drop reported.

use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use kerf_core::{ParseReport, ResponseType};

use crate::Outcome;
use crate::output::{print_json_streamed, read_reply, shorten, vars};

#[derive(Clone, Copy, ValueEnum)]
pub enum TypeArg {
    Text,
    Json,
    Jsonl,
    Delimited,
}

impl From<TypeArg> for ResponseType {
    fn from(t: TypeArg) -> Self {
        match t {
            TypeArg::Text => ResponseType::Text,
            TypeArg::Json => ResponseType::Json,
            TypeArg::Jsonl => ResponseType::Jsonl,
            TypeArg::Delimited => ResponseType::Delimited,
        }
    }
}

/// Parse an LLM reply into objects, reporting every dropped piece with its line and reason.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf parse reply.txt --type jsonl --prompt prompts/agent-kg-extract.json
  kerf parse reply.txt --type json --schema schemas/definitions-array.schema.json --salvage --json
  cat reply.txt | kerf parse - --type delimited --json

With --json, prints one object: {\"objects\": [...], \"dropped\": [{\"line\", \"kind\", \"detail\"}], \"truncated\": bool}.
Exits 1 when nothing usable was recovered (no objects and at least one drop), or with --fail-on-drop when anything was dropped.")]
pub struct Args {
    /// The reply to parse (`-` for standard input).
    pub file: PathBuf,
    #[command(flatten)]
    pub reply: super::ReplyArgs,
    /// Run variables (for the prompt's passthrough rule), as NAME=VALUE.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Print only the one-line summary (counts), not the objects: for scripts and benchmarks.
    #[arg(long, conflicts_with = "json")]
    pub summary: bool,
    /// Exit 1 when any piece was dropped.
    #[arg(long)]
    pub fail_on_drop: bool,
    /// Print the report as JSON: {"objects", "dropped", "truncated"}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
    let run_vars = vars(&args.vars)?;
    let parser = args.reply.parser()?;
    let reply = read_reply(&args.file)?;
    let mut report = parser.parse(&reply.text, &run_vars);
    reply.mark(&mut report);
    let text = reply.text;
    if args.json {
        // Written as it is serialised: the report's objects are never all held as values.
        print_json_streamed(&report);
    } else {
        print_human(
            &args.file.display().to_string(),
            parser.response_type(),
            &report,
            !args.summary,
        );
    }
    let failed = report.failed() || (args.fail_on_drop && !report.dropped.is_empty());
    // The process ends right after this: freeing a large report object by object would only
    // make the user wait (about a fifth of the run on 100k objects).
    std::mem::forget(report);
    std::mem::forget(text);
    Ok(if failed {
        Outcome::InputFailed
    } else {
        Outcome::Ok
    })
}

fn print_human(name: &str, t: ResponseType, r: &ParseReport, details: bool) {
    crate::outln!(
        "{name}: {t}, {} object(s) accepted, {}",
        r.objects.len(),
        crate::output::dropped_phrase(r, ", reply was CUT OFF")
    );
    if !details {
        return;
    }
    // Each object's compact JSON is what the report holds: no value is built to print it.
    for (i, o) in r.objects.raws().enumerate() {
        crate::outln!("  {:>4}  {}", i + 1, shorten(o.to_string(), 110));
    }
    if !r.dropped.is_empty() {
        crate::outln!("dropped:");
        crate::output::print_drops(r, "  ");
    }
    for note in &r.notes {
        crate::outln!("note: {note}");
    }
}
