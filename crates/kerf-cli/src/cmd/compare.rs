//! `kerf compare`: two formats of one extraction under real output-token budgets.

use std::path::PathBuf;

use anyhow::Result;
use kerf_api::compare::{CompareJob, Contender, Report, ReportRow, compare};
use kerf_api::experiments::ExperimentKind;
use kerf_api::workbench::Workbench;
use kerf_core::sweep::Sweep;

use super::run::{ModelArgs, interrupt_token};
use crate::Outcome;
use crate::output::print_json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConstrainMode {
    /// Each format with and without its schema constraint (where it has one).
    Both,
    /// Constrained where the provider can hold the format to its schema, unconstrained where
    /// it cannot.
    Auto,
    /// Never constrained.
    None,
}

/// Run two formats of one extraction (e.g. a JSONL prompt and its JSON-array twin) at several
/// output budgets, side by side: what each yields when the budget cuts it off.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf compare prompts/agent-kg-extract.json prompts/agent-kg-extract-array.json --sample
  kerf compare prompts/extract-definitions.json prompts/extract-definitions-array.json --input doc.txt --max-tokens 32,64,128 --json
  kerf compare prompts/agent-kg-extract.json --sample --provider openai,local   one prompt, two models
  kerf compare --resume                     take the latest interrupted compare up again

Each budget runs each prompt constrained to its schema where the provider can constrain (--constrain
auto, the default; --constrain both adds the unconstrained run beside it, none leaves it out), on each provider (several side by side: --provider A,B; then one prompt is enough).
Then each format's longest reply that finished on its own is swept at the model's token boundaries,
on each provider. --json prints {\"model\", \"providers\": [{\"provider\", \"model\"}], \"rows\": [{\"prompt\",
\"provider\", \"response_type\", \"max_tokens\", \"constrained\", \"objects\", \"dropped\", \"truncated\",
\"finish_reason\", \"completion_tokens\", \"seconds\"}, …], \"sweeps\": […]}.")]
pub struct Args {
    /// The prompts to compare (two or more, usually a prompt and its twin; one is enough with
    /// two or more providers): files, or the ids of shipped or own prompts.
    #[arg(num_args = 1.., required_unless_present = "resume", conflicts_with = "resume")]
    pub prompts: Vec<PathBuf>,
    #[command(flatten)]
    pub resume: super::ResumeArgs,
    #[command(flatten)]
    pub input: super::InputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output token budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512")]
    pub max_tokens: Vec<u32>,
    #[arg(long, value_enum, default_value = "auto")]
    pub constrain: ConstrainMode,
    /// Runs in flight at once (cloud providers, within their rate limits; the local engine
    /// runs one at a time).
    #[arg(long, default_value_t = kerf_api::compare::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    #[command(flatten)]
    pub allow: super::AllowArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, wb: &Workbench, globals: &crate::record::Globals) -> Result<Outcome> {
    if let Some(id) = args.resume.resume {
        return resume(&args, id, wb, globals);
    }
    let mut contenders = Vec::new();
    for path in &args.prompts {
        let path = &wb.find_prompt(path);
        let subject = super::load_subject(path)?;
        let rendering = args.input.render(&subject.prompt, path)?;
        contenders.push(Contender::new(subject, rendering));
    }
    let settings = args.model.settings();
    let providers = kerf_api::runs::providers(wb, &settings, &args.model.providers)?;
    let job = CompareJob {
        contenders: &contenders,
        budgets: &args.max_tokens,
        constrain: args.constrain.into(),
        settings: &settings,
        concurrency: args.concurrency,
        allowed: args.allow.allowance(),
    };
    let size = job.plan(&providers)?;
    super::announce(&size);
    if args.allow.dry_run {
        return Ok(Outcome::Ok);
    }
    let history = crate::record::open(wb, globals)?;
    let progress = progress_bar(args.json);
    let compared = compare(
        history.as_ref(),
        &job,
        &providers,
        &interrupt_token(),
        &mut |_| {},
        &mut |p| {
            progress.set_length(p.total as u64);
            progress.set_position(p.done as u64);
            progress.set_message(p.label);
        },
    );
    progress.finish_and_clear();
    show(&compared?.report(&contenders), args.json)
}

/// `kerf compare --resume`: the compare's own prompts, input, providers and settings, from the
/// history; only its cells not measured before are sent.
fn resume(
    args: &Args,
    id: Option<i64>,
    wb: &Workbench,
    globals: &crate::record::Globals,
) -> Result<Outcome> {
    let (store, id) = args
        .resume
        .which(id, ExperimentKind::Compare, wb, globals)?;
    let resumption = kerf_api::compare::resumption(wb, &store, id, args.resume.input(&args.allow))?;
    super::announce(resumption.size());
    if args.allow.dry_run {
        return Ok(Outcome::Ok);
    }
    let progress = progress_bar(args.json);
    let ran = resumption.run(&store, &interrupt_token(), &mut |p| {
        progress.set_length(p.total as u64);
        progress.set_position(p.done as u64);
        progress.set_message(p.label);
    });
    progress.finish_and_clear();
    let (compared, contenders) = ran?;
    show(&compared.report(&contenders), args.json)
}

fn progress_bar(json: bool) -> indicatif::ProgressBar {
    let progress = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{spinner} running [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    progress
}

/// The same report the Compare screen draws and the history keeps: --json is its
/// serialisation, the table its rows.
fn show(report: &Report, json: bool) -> Result<Outcome> {
    if json {
        print_json(&serde_json::to_value(report)?);
        return Ok(Outcome::Ok);
    }
    let several = report.providers.len() > 1;
    print_rows(report);
    if !report.sweeps.is_empty() {
        let typed: Vec<(kerf_core::ResponseType, &Sweep)> = report
            .sweeps
            .iter()
            .map(|f| (f.response_type, &f.sweep))
            .collect();
        crate::outln!(
            "\nIf each format's best reply (most objects, ended on its own) had been cut at every token:"
        );
        if !several && let Some(h) = super::sweep::headline(&typed) {
            crate::outln!("{}", h.sentence());
        }
        let table: Vec<(String, &Sweep)> = report
            .sweeps
            .iter()
            .map(|f| {
                (
                    format!(
                        "{}{} ({}, {} tokens{}{})",
                        f.prompt,
                        if several {
                            format!(" on {}", f.provider)
                        } else {
                            String::new()
                        },
                        f.response_type,
                        f.completion_tokens,
                        if f.constrained { ", constrained" } else { "" },
                        if f.cut_by_budget {
                            ", cut by its budget"
                        } else {
                            ""
                        }
                    ),
                    &f.sweep,
                )
            })
            .collect();
        super::sweep::print_table(&table);
    }
    if let Some(e) = report.experiment {
        crate::outln!("\nhistory: experiment {e} (kerf history show e{e})");
    }
    Ok(Outcome::Ok)
}

impl From<ConstrainMode> for kerf_api::compare::ConstrainMode {
    fn from(m: ConstrainMode) -> Self {
        match m {
            ConstrainMode::Both => Self::Both,
            ConstrainMode::Auto => Self::Auto,
            ConstrainMode::None => Self::None,
        }
    }
}

fn print_rows(report: &Report) {
    let several = report.providers.len() > 1;
    if several {
        let each: Vec<String> = report
            .providers
            .iter()
            .map(|p| format!("{} / {}", p.provider, p.model))
            .collect();
        crate::outln!("models side by side: {}", each.join(", "));
    } else {
        crate::outln!("model: {}", report.model);
    }
    let name = |r: &ReportRow| {
        if several {
            format!("{} on {} ({})", r.prompt, r.provider, r.response_type)
        } else {
            format!("{} ({})", r.prompt, r.response_type)
        }
    };
    let name_w = report
        .rows
        .iter()
        .map(|r| name(r).chars().count())
        .max()
        .unwrap_or(10);
    crate::outln!(
        "{:>6}  {:<name_w$}  {:<11}  {:>7}  {:<24}  {:<9}  {:<6}  {:>6}  {:>6}",
        "budget",
        "prompt (format)",
        "constrained",
        "objects",
        "dropped",
        "truncated",
        "finish",
        "tokens",
        "time"
    );
    let mut last_budget = None;
    for r in &report.rows {
        if last_budget.is_some_and(|b| b != r.max_tokens) {
            crate::outln!("");
        }
        last_budget = Some(r.max_tokens);
        let drops = r.dropped.to_string();
        crate::outln!(
            "{:>6}  {:<name_w$}  {:<11}  {:>7}  {:<24}  {:<9}  {:<6}  {:>6}  {:>5.1}s",
            r.max_tokens,
            name(r),
            if r.constrained { "yes" } else { "no" },
            r.objects,
            if drops.is_empty() {
                "-".to_string()
            } else {
                drops
            },
            if r.truncated { "yes" } else { "no" },
            r.finish_reason.as_str(),
            r.completion_tokens,
            r.seconds
        );
    }
}
