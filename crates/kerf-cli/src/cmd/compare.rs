//! `kerf compare`: two formats of one extraction under real output-token budgets.

use std::path::PathBuf;

use anyhow::Result;
use kerf_core::sweep::Sweep;
use kerf_llm::{FinishReason, Provider};
use serde_json::{Value, json};

use super::run::{Chosen, ModelArgs, Outcomes, constraint_for, interrupt_token, print_events};
use crate::Outcome;
use crate::output::print_json;
use kerf_api::runs::{RunJob, RunMeta};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConstrainMode {
    /// Each format with and without its schema constraint (where it has one).
    Both,
    Auto,
    None,
}

/// Run two formats of one extraction (e.g. a JSONL prompt and its JSON-array twin) at several
/// output budgets, side by side: what each yields when the budget cuts it off.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf compare prompts/agent-kg-extract.json prompts/agent-kg-extract-array.json --sample
  kerf compare prompts/extract-definitions.json prompts/extract-definitions-array.json --input doc.txt --max-tokens 32,64,128 --json

Each budget runs each prompt with and without its schema constraint (--constrain both, the default).
Then each format's longest reply that finished on its own is swept at the model's token boundaries.
--json prints {\"rows\": [{\"prompt\", \"response_type\", \"max_tokens\", \"constrained\", \"objects\", \"dropped\",
\"truncated\", \"finish_reason\", \"completion_tokens\", \"seconds\"}, …], \"sweeps\": […]}.")]
pub struct Args {
    /// The prompts to compare (two or more; usually a prompt and its twin).
    #[arg(num_args = 2.., required = true)]
    pub prompts: Vec<PathBuf>,
    #[command(flatten)]
    pub input: super::InputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output token budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512")]
    pub max_tokens: Vec<u32>,
    #[arg(long, value_enum, default_value = "both")]
    pub constrain: ConstrainMode,
    #[arg(long)]
    pub json: bool,
}

struct Row {
    /// The run's id in the history.
    run_id: Option<i64>,
    prompt: usize,
    max_tokens: u32,
    constrained: bool,
    seconds: f64,
    out: Outcomes,
}

pub fn run(args: Args, globals: &crate::record::Globals) -> Result<Outcome> {
    let prompts = args
        .prompts
        .iter()
        .map(|p| super::load_prompt(p))
        .collect::<Result<Vec<_>>>()?;
    let sources = prompts
        .iter()
        .zip(&args.prompts)
        .map(|(p, path)| crate::record::prompt_source(p, path))
        .collect::<Result<Vec<_>>>()?;
    let provider = args.model.provider()?;
    let history = crate::record::open(globals)?;
    let experiment = match &history {
        Some(store) => Some(store.begin_experiment(
            "compare",
            &json!({
                "prompts": args.prompts.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "max_tokens": args.max_tokens,
                "constrain": format!("{:?}", args.constrain).to_lowercase(),
                "provider": provider.name(),
                "model": provider.as_provider().model(),
                "model_args": args.model.to_argv(),
            }),
        )?),
        None => None,
    };
    let result = compare(
        &args,
        &prompts,
        &sources,
        &provider,
        history.as_ref(),
        experiment,
    );
    if let (Some(store), Some(id)) = (&history, experiment) {
        match &result {
            Ok(v) => store.finish_experiment(id, v, None)?,
            Err(e) => store.finish_experiment(id, &Value::Null, Some(&format!("{e:#}")))?,
        }
    }
    result.map(|_| Outcome::Ok)
}

/// Run every prompt at every budget, print the table (or the JSON), and return the JSON form
/// (what the history keeps as the experiment's result).
fn compare(
    args: &Args,
    prompts: &[kerf_core::Prompt],
    sources: &[kerf_api::runs::PromptSource],
    provider: &Chosen,
    history: Option<&kerf_store::Store>,
    experiment: Option<i64>,
) -> Result<Value> {
    let mut rows: Vec<Row> = Vec::new();
    let mut budgets = args.max_tokens.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let total_runs: usize = budgets.len()
        * prompts
            .iter()
            .map(|p| variants(args.constrain, p, provider).len())
            .sum::<usize>();
    let progress = if args.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(total_runs as u64)
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{spinner} running [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    for &budget in &budgets {
        for (i, (prompt, path)) in prompts.iter().zip(&args.prompts).enumerate() {
            let rendering = args.input.render(prompt, path)?;
            for constrained in variants(args.constrain, prompt, provider) {
                progress.set_message(format!(
                    "{} · {budget} tokens{}",
                    prompt.id(),
                    if constrained { " · constrained" } else { "" }
                ));
                let mut request = args.model.settings().request(&rendering.rendered, budget);
                if constrained {
                    request.constraint = constraint_for(prompt);
                }
                let job = RunJob {
                    meta: RunMeta {
                        prompt: &sources[i],
                        response_type: prompt.file.response_type.to_string(),
                        rendering: &rendering,
                        params: args.model.params(budget, constrained),
                        experiment,
                        rerun_of: None,
                    },
                    provider,
                    prompt,
                    request: &request,
                    repair: false,
                };
                let t = std::time::Instant::now();
                let done = kerf_api::runs::run(
                    history,
                    &job,
                    &interrupt_token(),
                    &mut print_events(true),
                )?;
                let out = done.out;
                rows.push(Row {
                    run_id: done.history_id,
                    prompt: i,
                    max_tokens: budget,
                    constrained,
                    seconds: t.elapsed().as_secs_f64(),
                    out,
                });
                progress.inc(1);
            }
        }
    }
    progress.finish_and_clear();

    // Each format's longest reply that ended on its own (not cut by its budget), swept at the
    // model's token boundaries.
    let gguf = provider.gguf();
    let mut sweeps: Vec<(usize, &Row, Sweep)> = Vec::new();
    for i in 0..prompts.len() {
        let best = rows
            .iter()
            .filter(|r| r.prompt == i && r.out.finish.reason == FinishReason::Stop)
            // One that yielded objects first (an empty curve teaches nothing), then the longest.
            .max_by_key(|r| {
                (
                    !r.out.report.objects.is_empty(),
                    r.out.raw.len(),
                    r.constrained,
                )
            });
        if let Some(r) = best {
            // A local model's own tokens; for a cloud model, o200k_base (OpenAI's current
            // vocabulary) approximates where its tokens end.
            let tokenizer = gguf
                .as_ref()
                .map_or_else(|| "o200k_base".to_string(), |p| p.display().to_string());
            let unit = super::sweep::token_unit(&tokenizer, &r.out.raw)?;
            let sweep = kerf_core::sweep::sweep(
                &prompts[i].parser,
                &r.out.raw,
                &Default::default(),
                &unit,
            )?;
            sweeps.push((i, r, sweep));
        }
    }

    let name = |i: usize| prompts[i].id().to_string();
    let rows_json: Vec<Value> = rows
        .iter()
        .map(|r| {
            let dropped: serde_json::Map<String, Value> = r
                .out
                .report
                .drop_counts()
                .iter()
                .map(|(k, n)| (k.as_str().to_string(), json!(n)))
                .collect();
            json!({
                "prompt": name(r.prompt),
                "response_type": prompts[r.prompt].file.response_type.to_string(),
                "max_tokens": r.max_tokens,
                "constrained": r.constrained,
                "objects": r.out.report.objects.len(),
                "dropped": dropped,
                "truncated": r.out.report.truncated,
                "finish_reason": r.out.finish.reason.as_str(),
                "completion_tokens": r.out.finish.usage.completion_tokens,
                "seconds": r.seconds,
                "history_id": r.run_id,
            })
        })
        .collect();
    let sweeps_json: Vec<Value> = sweeps
        .iter()
        .map(|(i, r, w)| {
            json!({
                "prompt": name(*i),
                "response_type": prompts[*i].file.response_type.to_string(),
                "max_tokens": r.max_tokens,
                "constrained": r.constrained,
                "total": w.total, "points": w.points, "score": w.score, "unit": w.unit,
            })
        })
        .collect();
    let result = json!({"model": provider.as_provider().model(), "experiment": experiment,
                        "rows": rows_json, "sweeps": sweeps_json});
    if args.json {
        print_json(&result);
    } else {
        print_rows(prompts, &rows, provider.as_provider());
        if !sweeps.is_empty() {
            crate::outln!(
                "\nIf the longest complete reply of each format had been cut at every token:"
            );
            let table: Vec<(String, &Sweep)> = sweeps
                .iter()
                .map(|(i, r, w)| {
                    (
                        format!(
                            "{} ({}, {} tokens{})",
                            name(*i),
                            prompts[*i].file.response_type,
                            r.out.finish.usage.completion_tokens,
                            if r.constrained { ", constrained" } else { "" }
                        ),
                        w,
                    )
                })
                .collect();
            super::sweep::print_table(&table);
        }
        if let Some(e) = experiment {
            crate::outln!("\nhistory: experiment {e} (kerf history show e{e})");
        }
    }
    Ok(result)
}

/// Constrained and/or unconstrained, as asked and as the prompt allows.
/// The constrained/unconstrained passes a prompt gets. A cloud provider with no structured mode
/// for the prompt's format (JSONL anywhere; or a server that honours none) gets only the
/// unconstrained pass: a "constrained" row would be the same request under a false label.
fn variants(mode: ConstrainMode, prompt: &kerf_core::Prompt, provider: &Chosen) -> Vec<bool> {
    let can = provider.can_constrain(prompt);
    match mode {
        ConstrainMode::Both if can => vec![true, false],
        ConstrainMode::Auto if can => vec![true],
        _ => vec![false],
    }
}

fn print_rows(prompts: &[kerf_core::Prompt], rows: &[Row], provider: &dyn Provider) {
    crate::outln!("model: {}", provider.model());
    let name_w = prompts
        .iter()
        .map(|p| p.id().chars().count() + p.file.response_type.to_string().len() + 3)
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
    for r in rows {
        if last_budget.is_some_and(|b| b != r.max_tokens) {
            crate::outln!("");
        }
        last_budget = Some(r.max_tokens);
        let p = &prompts[r.prompt];
        let drops = r.out.report.drop_summary();
        crate::outln!(
            "{:>6}  {:<name_w$}  {:<11}  {:>7}  {:<24}  {:<9}  {:<6}  {:>6}  {:>5.1}s",
            r.max_tokens,
            format!("{} ({})", p.id(), p.file.response_type),
            if r.constrained { "yes" } else { "no" },
            r.out.report.objects.len(),
            if drops.is_empty() {
                "-".to_string()
            } else {
                drops
            },
            if r.out.report.truncated { "yes" } else { "no" },
            r.out.finish.reason.as_str(),
            r.out.finish.usage.completion_tokens,
            r.seconds
        );
    }
}
