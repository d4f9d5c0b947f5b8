//! `kerf sweep`: what a cut-off reply yields at every offset.

use std::path::{Path, PathBuf};

use anyhow::Result;
use kerf_api::charts::Chart;
use kerf_api::experiments::spec::CutUnit;
use kerf_api::experiments::sweep::{Reply, Step};
use kerf_core::sweep::Sweep;

use super::parse::TypeArg;
use crate::Outcome;
use crate::output::{print_json, read_json, read_reply, write_file};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum UnitArg {
    Byte,
    Char,
    Token,
}

/// Simulate truncation of a complete reply at every offset: objects recovered vs where it was cut.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf sweep reply.jsonl --prompt prompts/agent-kg-extract.json
  kerf sweep reply.txt --type jsonl --schema schemas/agent-kg-extract.schema.json --unit token --tokenizer o200k_base --json
  kerf sweep --compare jsonl-reply.txt:jsonl:prompts/agent-kg-extract.json array-reply.txt:json:prompts/agent-kg-extract-array.json
  kerf sweep reply.txt --prompt prompts/extract-definitions.json --csv curve.csv --svg curve.svg

With --json, prints one object: {\"total\": objects in the full reply, \"points\": [[offset, objects], …] (offset 0,
every offset where the count changes, the final offset), \"score\": mean over all cuts of recovered/total, \"unit\"}.
The value at every cut equals what `kerf parse` returns for the reply cut there.")]
pub struct Args {
    /// The complete reply (`-` for standard input). Not used with --compare.
    #[arg(required_unless_present = "compare")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub reply: super::ReplyArgs,
    /// Cut unit: byte (cuts inside a character count as the boundary before it), char, or token.
    #[arg(long, value_enum, default_value = "byte")]
    pub unit: UnitArg,
    /// Tokenizer for --unit token: o200k_base (default), cl100k_base, or a GGUF model's path
    /// (cuts at that model's token boundaries).
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// Compare formats: FILE:TYPE[:SCHEMA_OR_PROMPT] … (curves on one normalised axis).
    #[arg(long, num_args = 1.., value_name = "FILE:TYPE[:SCHEMA]")]
    pub compare: Vec<String>,
    /// Write an SVG chart of the curve(s): objects recovered vs fraction of the reply emitted.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the curve(s) as CSV: format, offset, fraction, objects (one row per change point).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print {"total", "points", "score", "unit"} (with --compare: {"compare": [{"name", "sweep"}, …]}).
    #[arg(long)]
    pub json: bool,
}

/// `FILE:TYPE[:SCHEMA_OR_PROMPT]`; a third part that is a prompt file supplies schema and rules.
fn subject_from_spec(spec: &str) -> Result<Reply> {
    let parts: Vec<&str> = spec.splitn(3, ':').collect();
    let (file, t) = match parts.as_slice() {
        [f, t, ..] => (*f, *t),
        _ => {
            return Err(kerf_core::Error::Usage(format!(
                "--compare `{spec}`: expected FILE:TYPE[:SCHEMA_OR_PROMPT]"
            ))
            .into());
        }
    };
    let t = match t {
        "json" => TypeArg::Json,
        "jsonl" => TypeArg::Jsonl,
        "delimited" => TypeArg::Delimited,
        other => {
            return Err(kerf_core::Error::Usage(format!(
                "--compare `{spec}`: unknown type `{other}` (json, jsonl or delimited)"
            ))
            .into());
        }
    };
    let parser = match parts.get(2) {
        Some(extra) => {
            let path = Path::new(extra);
            let is_prompt = read_json(path)?
                .get("prompt")
                .is_some_and(|p| p.is_string());
            if is_prompt {
                super::parser_for(Some(t.into()), None, Some(path), false)?
            } else {
                super::parser_for(Some(t.into()), Some(path), None, false)?
            }
        }
        None => super::parser_for(Some(t.into()), None, None, false)?,
    };
    Ok(Reply {
        name: format!("{file} ({})", parser.response_type()),
        parser,
        text: read_reply(Path::new(file))?.text,
    })
}

/// Replies at least this large get a progress bar.
const PROGRESS_FROM_BYTES: u64 = 8 * 1024 * 1024;

impl From<UnitArg> for CutUnit {
    fn from(u: UnitArg) -> Self {
        match u {
            UnitArg::Byte => CutUnit::Byte,
            UnitArg::Char => CutUnit::Char,
            UnitArg::Token => CutUnit::Token,
        }
    }
}

pub fn run(
    args: Args,
    wb: &kerf_api::workbench::Workbench,
    globals: &crate::record::Globals,
) -> Result<Outcome> {
    // Opened first: a history that cannot be written fails before the work, not after it.
    let history = crate::record::open(wb, globals)?;
    let subjects: Vec<Reply> = if args.compare.is_empty() {
        let file = args.file.clone().unwrap_or_default();
        let parser = args.reply.parser()?;
        vec![Reply {
            name: format!("{} ({})", file.display(), parser.response_type()),
            parser,
            text: read_reply(&file)?.text,
        }]
    } else {
        args.compare
            .iter()
            .map(|s| subject_from_spec(s))
            .collect::<Result<_>>()?
    };
    // Long replies (tens of MB, or token units) take seconds: show progress on a terminal.
    let total_bytes: u64 = subjects.iter().map(|s| s.text.len() as u64).sum();
    let progress = if total_bytes >= PROGRESS_FROM_BYTES {
        indicatif::ProgressBar::new(subjects.len() as u64 * 2)
    } else {
        indicatif::ProgressBar::hidden()
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{spinner} sweeping [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let unit = CutUnit::from(args.unit);
    // Ctrl-C stops a long sweep between the prefixes it evaluates (exit code of `cancelled`).
    let (sweeps, report) = kerf_api::experiments::sweep::sweep(
        history.as_ref(),
        &subjects,
        unit,
        &args.tokenizer,
        &super::run::interrupt_token(),
        &mut |r, step| {
            progress.inc(1);
            progress.set_message(match step {
                Step::Cutting => format!("{}: cutting into {}s", r.name, unit_name(unit)),
                Step::Counting => format!("{}: parsing once, counting every cut", r.name),
            });
        },
    )?;
    progress.finish_and_clear();
    if let Some(path) = &args.csv {
        let mut csv = String::from("format,offset,fraction,objects\n");
        for (s, w) in subjects.iter().zip(&sweeps) {
            for &(o, n) in &w.points {
                csv.push_str(&format!(
                    "\"{}\",{o},{:.6},{n}\n",
                    s.name.replace('"', "\"\""),
                    fraction(o, w.length)
                ));
            }
        }
        write_file(path, &csv)?;
    }
    if let Some(path) = &args.svg {
        let curves: Vec<(String, &Sweep)> = subjects
            .iter()
            .zip(&sweeps)
            .map(|(s, w)| {
                (
                    format!("{}: {} objects, score {:.3}", s.name, w.total, w.score),
                    w,
                )
            })
            .collect();
        let chart = Chart::sweeps("Objects recovered if the reply is cut off", &curves);
        write_file(path, &kerf_api::charts::svg(&chart, 900, 520)?)?;
        if !args.json {
            crate::errln!("kerf: wrote {}", path.display());
        }
    }
    if args.json {
        print_json(&serde_json::to_value(&report)?);
    } else {
        let typed: Vec<(kerf_core::ResponseType, &Sweep)> = subjects
            .iter()
            .zip(&sweeps)
            .map(|(s, w)| (s.parser.response_type(), w))
            .collect();
        if let Some(h) = headline(&typed) {
            crate::outln!("{}", h.sentence());
        }
        let rows: Vec<(String, &Sweep)> = subjects
            .iter()
            .zip(&sweeps)
            .map(|(s, w)| (s.name.clone(), w))
            .collect();
        print_table(&rows);
    }
    Ok(Outcome::Ok)
}

/// The JSONL-vs-JSON-array sentence, when the sweeps are of one JSONL reply and one JSON reply
/// (the first of each).
pub fn headline(
    sweeps: &[(kerf_core::ResponseType, &Sweep)],
) -> Option<kerf_core::sweep::Headline> {
    use kerf_core::ResponseType;
    let of = |t: ResponseType| sweeps.iter().find(|(rt, _)| *rt == t).map(|(_, w)| *w);
    Some(kerf_core::sweep::Headline::of(
        of(ResponseType::Jsonl)?,
        of(ResponseType::Json)?,
        kerf_core::sweep::HEADLINE_FRACTION,
    ))
}

fn fraction(o: usize, length: usize) -> f64 {
    if length == 0 {
        1.0
    } else {
        o as f64 / length as f64
    }
}

/// A text sparkline of recovered/total over the normalised axis.
pub fn sparkline(w: &Sweep, width: usize) -> String {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    (0..width)
        .map(|i| {
            let f = (i + 1) as f64 / width as f64;
            let n = w.at_fraction(f);
            let level = if w.total == 0 {
                0
            } else {
                (n * 8).div_ceil(w.total).min(8)
            };
            BARS[level]
        })
        .collect()
}

/// The side-by-side table: one row per named curve, with its metrics and a sparkline.
pub fn print_table(rows: &[(String, &Sweep)]) {
    let name_w = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    crate::outln!(
        "{:<name_w$}  {:>6}  {:>6}  {:>8}  {:>10}  {:>4} {:>4} {:>4} {:>4}  curve (0 → 100% of the reply emitted)",
        "reply",
        "total",
        "score",
        "median",
        "first obj",
        "25%",
        "50%",
        "75%",
        "90%"
    );
    for (name, w) in rows {
        let first = w
            .first_object()
            .map(|o| format!("{:.0}%", 100.0 * fraction(o, w.length)))
            .unwrap_or_else(|| "never".into());
        crate::outln!(
            "{:<name_w$}  {:>6}  {:>6.3}  {:>8}  {:>10}  {:>4} {:>4} {:>4} {:>4}  |{}|",
            name,
            w.total,
            w.score,
            w.median(),
            first,
            w.at_fraction(0.25),
            w.at_fraction(0.5),
            w.at_fraction(0.75),
            w.at_fraction(0.9),
            sparkline(w, 40)
        );
    }
    if let Some((_, w)) = rows.first() {
        crate::outln!(
            "unit: {} ({} cuts); score = mean over every cut of objects recovered ÷ total",
            w.unit,
            w.length + 1
        );
    }
}

fn unit_name(u: CutUnit) -> &'static str {
    match u {
        CutUnit::Byte => "byte",
        CutUnit::Char => "char",
        CutUnit::Token => "token",
    }
}
