//! `kerf score`: one document's extracted records against the expected ones.

use std::path::PathBuf;

use anyhow::Result;
use kerf_core::eval::dataset::read_records;
use kerf_core::eval::{Grounding, ScoreReport, Scores, score};

use crate::Outcome;
use crate::output::{compact, print_json};

/// Score extracted records against expected ones: precision, recall and F1 per record type,
/// with one-to-one matching on each type's identity fields.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf score --prompt prompts/agent-kg-extract.json --expected gold.jsonl --actual reply-objects.jsonl
  kerf score --prompt prompts/agent-kg-extract.json --expected gold.jsonl --actual out.jsonl --input doc.txt --json
  kerf score --prompt prompts/lightrag-extract-delimited.json --explain

Each file holds the records of one document, one JSON object per line. An expected record may
carry \"aliases\": {\"field\": [\"other name\", ...]}. The prompt's `match` key sets the identity
fields per record type, normalisation and the fuzzy threshold; --explain prints what applies.

With --json, prints one object: {\"tp\", \"fp\", \"fn\", \"precision\", \"recall\", \"f1\",
\"by_type\": {TYPE: {\"tp\", \"fp\", \"fn\", \"precision\", \"recall\", \"f1\"}},
\"matched\": [{\"expected\", \"actual\", \"similarity\"}], \"partial\": [...], \"missed\": [...],
\"spurious\": [...], \"ungrounded\": [...] (with --input), \"agreement\": {\"TYPE:FIELD\": mean}}.
Precision is null when nothing was extracted, recall when nothing was expected, F1 only when both
are empty. Exits 0 once scored; 1 when an expected record fails the prompt's record schema.")]
pub struct Args {
    /// The prompt whose records these are (its record schema and `match` settings apply).
    #[arg(long)]
    pub prompt: PathBuf,
    /// The expected records, one JSON object per line.
    #[arg(long, required_unless_present = "explain")]
    pub expected: Option<PathBuf>,
    /// The extracted records, one JSON object per line.
    #[arg(long, required_unless_present = "explain")]
    pub actual: Option<PathBuf>,
    /// The document: extracted records whose names are not in it are listed as ungrounded.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Print how records are matched (identity fields per type and why), then exit.
    #[arg(long)]
    pub explain: bool,
    /// Print the scores as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
    let prompt = super::load_prompt(&args.prompt)?;
    let matcher = prompt.matcher();
    if args.explain {
        if args.json {
            print_json(&serde_json::to_value(&matcher)?);
        } else {
            crate::out!("{}", matcher.explain());
        }
        if args.expected.is_none() {
            return Ok(Outcome::Ok);
        }
    }
    let (Some(expected_path), Some(actual_path)) = (&args.expected, &args.actual) else {
        anyhow::bail!(kerf_core::Error::Usage(
            "--expected and --actual are both needed to score".into()
        ));
    };
    let expected = read_records(expected_path, Some(&prompt))?;
    let actual = read_records(actual_path, None)?;
    let scored = score(&matcher, &expected, &actual);
    let ungrounded = match &args.input {
        Some(path) => {
            let text = kerf_core::error::read_text(path)?;
            Some(Grounding::new(&matcher, &text).ungrounded(&matcher, &actual))
        }
        None => None,
    };
    let report = ScoreReport::new(&scored, &expected, &actual, ungrounded.as_deref());
    if args.json {
        print_json(&serde_json::to_value(&report)?);
    } else {
        print_human(&report);
    }
    Ok(Outcome::Ok)
}

/// A figure as a person reads it: three decimals, or `–` for null.
pub fn figure(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), |v| format!("{v:.3}"))
}

fn line(label: &str, s: &Scores) -> String {
    format!(
        "{label:<16} {:>4} {:>4} {:>4}  {:>9} {:>6} {:>6}",
        s.tp,
        s.fp,
        s.fn_,
        figure(s.precision),
        figure(s.recall),
        figure(s.f1)
    )
}

fn print_human(r: &ScoreReport) {
    crate::outln!(
        "{:<16} {:>4} {:>4} {:>4}  {:>9} {:>6} {:>6}",
        "type",
        "tp",
        "fp",
        "fn",
        "precision",
        "recall",
        "F1"
    );
    for (t, s) in &r.by_type {
        crate::outln!("{}", line(t, s));
    }
    crate::outln!("{}", line("all", &r.scores));
    if !r.agreement.is_empty() {
        let parts: Vec<String> = r
            .agreement
            .iter()
            .map(|(f, a)| format!("{f} {}", figure(*a)))
            .collect();
        crate::outln!(
            "agreement of matched pairs (not in F1): {}",
            parts.join(", ")
        );
    }
    let list = |title: &str, items: Vec<String>| {
        if !items.is_empty() {
            crate::outln!("{title} ({}):", items.len());
            for i in items {
                crate::outln!("  {i}");
            }
        }
    };
    list(
        "partial (matched below exact)",
        r.partial
            .iter()
            .map(|p| {
                format!(
                    "{:.3}  {}  ~  {}",
                    p.similarity,
                    compact(&p.expected, 50),
                    compact(&p.actual, 50)
                )
            })
            .collect(),
    );
    list("missed", r.missed.iter().map(|o| compact(o, 110)).collect());
    list(
        "spurious",
        r.spurious.iter().map(|o| compact(o, 110)).collect(),
    );
    list(
        "repeats (not scored again)",
        r.repeats.iter().map(|o| compact(o, 110)).collect(),
    );
    if let Some(u) = &r.ungrounded {
        list(
            "ungrounded (not found in the input)",
            u.iter().map(|o| compact(o, 110)).collect(),
        );
    }
}
