//! `kerf run`: render a prompt, run it on a model, stream the reply, parse it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
pub use kerf_api::runs::Outcomes;
use kerf_api::runs::{CancelToken, CloudDetails, Finish, FinishReason, RunDetails};
use kerf_api::runs::{RunEvent, RunJob, RunParams, RunSettings};
use kerf_api::workbench::Workbench;
use kerf_core::Prompt;

use super::settings::SettingFlags;
use crate::Outcome;
use crate::output::print_json;

/// Which model runs, and how: shared by `run` and `compare`.
#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// The provider: `local` (llama.cpp; the default model unless --model is given) or the name
    /// of one configured with `kerf providers add`. `kerf eval` takes several side by side
    /// (repeat the flag, or separate names with commas).
    #[arg(
        long = "provider",
        value_name = "PROVIDER",
        value_delimiter = ',',
        default_value = "local"
    )]
    pub providers: Vec<String>,
    /// Local: a GGUF model file (default: the bundled SmolLM2-135M-Instruct, see `kerf models
    /// fetch`). Cloud: a model id instead of the provider's configured one.
    #[arg(long, value_hint = clap::ValueHint::FilePath)]
    pub model: Option<String>,
    #[command(flatten)]
    pub settings: SettingFlags,
}

impl ModelArgs {
    /// These flags as the use-case layer takes them.
    /// The one provider a command that runs on one takes (`what` names the command): several
    /// are a usage error.
    pub fn one_provider(&self, what: &str) -> Result<()> {
        if self.providers.len() > 1 {
            anyhow::bail!(kerf_api::ApiError::new(
                kerf_api::Code::Usage,
                format!(
                    "{what} runs on one provider; `kerf eval`, `kerf compare` and `kerf test` run several side by side ({} given)",
                    self.providers.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The settings, on the first provider given: the defaults with the flags given.
    pub fn settings(&self) -> RunSettings {
        let mut settings = RunSettings {
            provider: self
                .providers
                .first()
                .cloned()
                .unwrap_or_else(|| "local".into()),
            model: self.model.clone(),
            ..RunSettings::default()
        };
        self.settings.patch().apply(&mut settings);
        settings
    }

    /// These flags with a budget and a constrain choice: one run's parameters.
    pub fn run_params(&self, max_tokens: u32, constrain: ConstrainArg) -> RunParams {
        RunParams {
            settings: self.settings(),
            max_tokens,
            constrain: constrain == ConstrainArg::Auto,
        }
    }
}

/// Constrain to the prompt's schema when asked (`auto`) and the format allows it.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConstrainArg {
    Auto,
    None,
}

/// A token Ctrl-C cancels: the run in progress stops between tokens and keeps what arrived (the
/// report shows `cancelled`); later runs of the same command see it cancelled too and stop at once.
/// A second Ctrl-C (no run listening) ends the process as usual.
pub fn interrupt_token() -> CancelToken {
    static TOKEN: std::sync::OnceLock<CancelToken> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let token = CancelToken::new();
            let t = token.clone();
            let _ = ctrlc::set_handler(move || {
                if t.is_cancelled() {
                    std::process::exit(130);
                }
                t.cancel();
            });
            token
        })
        .clone()
}

/// How the CLI shows a run's events: the reply on standard output as it streams (not with
/// `--json`), warnings and repair notices on standard error.
pub fn print_events(json_out: bool) -> impl FnMut(RunEvent<'_>) {
    let mut stdout = std::io::stdout();
    move |e| match e {
        RunEvent::Text(t) => {
            if !json_out {
                let _ = stdout.write_all(t.as_bytes());
                let _ = stdout.flush();
            }
        }
        RunEvent::Warning(w) => crate::errln!("kerf: warning: {w}"),
        RunEvent::Repair {
            attempt,
            max,
            problems,
        } => {
            crate::errln!(
                "kerf: repair: reply {} of at most {max} failed ({problems}); sending its problems back",
                attempt - 1
            );
            if !json_out {
                let _ = writeln!(stdout, "\n── repair attempt {attempt} ──");
            }
        }
    }
}

/// Run a prompt on a model: the reply streams as it is generated, then the parse report.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf run prompts/agent-kg-extract.json --sample
  kerf run prompts/extract-definitions.json --input doc.txt --max-tokens 256 --json
  kerf run prompts/agent-kg-extract.json --sample --constrain none --model other.gguf --gpu-layers all
  kerf run prompts/agent-kg-extract-array.json --sample --provider openai --structured json_schema

With no --provider or --model, runs use the bundled SmolLM2-135M-Instruct (fetch it once with
`kerf models fetch`). --provider NAME runs on one configured with `kerf providers add`.
--constrain auto (the default) holds json/jsonl output to the prompt's schema: llguidance locally,
the provider's structured-output mode in the cloud (--structured picks one).
--json prints {\"objects\", \"dropped\", \"truncated\", \"finish_reason\", \"usage\", \"timings\", \"raw\", …}.
Exits 1 when the reply yields nothing usable (as `kerf parse`).")]
pub struct Args {
    /// The prompt file, or the id of a shipped or own prompt (`agent-kg-extract`).
    pub prompt: PathBuf,
    #[command(flatten)]
    pub input: super::InputArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output token budget.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Hold the output to the prompt's schema (auto) or not (none).
    #[arg(long, value_enum, default_value = "auto")]
    pub constrain: ConstrainArg,
    /// Machine-readable output (one JSON object at the end; nothing streamed).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, wb: &Workbench, globals: &crate::record::Globals) -> Result<Outcome> {
    let prompt = wb.find_prompt(&args.prompt);
    let subject = super::load_subject(&prompt)?;
    let rendering = args.input.render(&subject.prompt, &prompt)?;
    args.model.one_provider("kerf run")?;
    let params = args.model.run_params(args.max_tokens, args.constrain);
    let provider = params.settings.provider(wb)?;
    let history = crate::record::open(wb, globals)?;
    let job = subject.job(&rendering, &provider, &params);
    run_job(&job, args.json, history.as_ref())
}

/// Run a job and print its reply and report: `kerf run`, and `kerf history rerun`.
pub fn run_job(
    job: &RunJob<'_>,
    json_out: bool,
    history: Option<&kerf_api::history::Store>,
) -> Result<Outcome> {
    let (prompt, provider) = (job.prompt, job.provider);
    let done = kerf_api::runs::run_blocking(
        history,
        job,
        &interrupt_token(),
        &mut print_events(json_out),
    )?;
    let (out, cost, run_id) = (&done.out, &done.cost, done.history_id);
    if json_out {
        print_json(&done.json(provider)?);
    } else {
        crate::outln!("\n");
        print_summary(prompt, out);
        if let Some(c) = &cost {
            crate::outln!(
                "   cost: ~${:.5} ({} at ${}/M in, ${}/M out, from {})",
                c.usd,
                c.matched,
                c.price.input,
                c.price.output,
                c.source
            );
        }
        if let Some(id) = run_id {
            crate::outln!("   history: run {id} (kerf history show {id})");
        }
    }
    // A text prompt's reply is the text itself; others are what their parser accepted.
    let kept_nothing = if prompt.parser.response_type() == kerf_core::ResponseType::Text {
        out.raw.trim().is_empty()
    } else {
        out.report.objects.is_empty()
    };
    Ok(outcome(
        out.finish.reason,
        out.report.failed(),
        kept_nothing,
    ))
}

/// How a run ends the command (the book's exit code table): a reply that failed, or was cut
/// with nothing usable in it, is a run that failed; one cut short with objects in it is cut;
/// one that ended on its own is judged by its parse.
fn outcome(reason: FinishReason, parse_failed: bool, kept_nothing: bool) -> Outcome {
    use FinishReason as F;
    match reason {
        F::Cancelled => Outcome::Cancelled,
        F::Error => Outcome::CouldNotRun,
        r if r.cut_short() && kept_nothing => Outcome::CouldNotRun,
        r if r.cut_short() => Outcome::Cut,
        _ if parse_failed => Outcome::InputFailed,
        _ => Outcome::Ok,
    }
}

fn print_summary(prompt: &Prompt, out: &Outcomes) {
    let f = &out.finish;
    let r = &out.report;
    crate::outln!(
        "── {} ({}): {} object(s), {}",
        prompt.id(),
        prompt.file.response_type,
        r.objects.len(),
        crate::output::dropped_phrase(r, ", reply CUT OFF"),
    );
    crate::output::print_drops(r, "   ");
    let d = match &f.details {
        RunDetails::Cloud(cloud) => return print_cloud_summary(f, cloud),
        RunDetails::Local(local) => Some(local),
        RunDetails::Other { .. } => None,
    };
    crate::outln!(
        "   finish: {}{} · tokens: {} prompt + {} completion · {:.1} tok/s · first token {:.2}s · constraint {} ({:.1} ms)",
        f.reason.as_str(),
        if f.reason == FinishReason::Length {
            " (the budget ran out: raise --max-tokens)"
        } else {
            ""
        },
        f.usage.prompt_tokens,
        f.usage.completion_tokens,
        f.timings.tokens_per_second,
        f.timings.first_token_seconds.unwrap_or(0.0),
        d.and_then(|d| d.constraint.as_ref())
            .map_or("none", |c| c.engine.as_str()),
        f.timings.constraint_seconds * 1000.0,
    );
    if let Some(d) = d {
        let o = &d.offload;
        crate::outln!(
            "   device: {} · {}/{} layers offloaded (asked: {}{}) · {} threads · context {}{}",
            o.ran_on(),
            o.offloaded_layers,
            o.total_layers,
            o.requested,
            o.split_mode
                .filter(|_| o.offloaded_layers > 0)
                .map(|m| format!(", split {}", m.as_str()))
                .unwrap_or_default(),
            d.threads,
            d.context,
            if d.model_reused {
                String::new()
            } else {
                format!(" · model loaded in {:.2}s", d.load_seconds)
            }
        );
        crate::outln!(
            "   prompt: {:.0} tok/s from the first decode{}",
            f.timings.prompt_tokens_per_second,
            d.setup_seconds
                .map(|s| format!(
                    " · set-up {:.0} ms (chat template, tokens, context)",
                    s * 1000.0
                ))
                .unwrap_or_default()
        );
    }
    if let Some(e) = &f.error {
        crate::outln!("   error: {e}");
    }
}

/// The finish lines of a cloud run: reason, usage, speed; then the provider, the structured-output
/// mode and why, where the key came from, retries.
fn print_cloud_summary(f: &Finish, d: &CloudDetails) {
    let tokens = if d.usage_source.as_deref() == Some("provider") {
        format!(
            "{} prompt + {} completion{}",
            f.usage.prompt_tokens,
            f.usage.completion_tokens,
            f.usage
                .reasoning_tokens
                .map(|r| format!(" ({r} reasoning)"))
                .unwrap_or_default()
        )
    } else {
        format!(
            "~{} completion (the server reported no usage; streamed pieces counted)",
            f.usage.completion_tokens
        )
    };
    crate::outln!(
        "   finish: {}{} · tokens: {} · {:.1} tok/s · first token {:.2}s",
        f.reason.as_str(),
        match f.reason {
            FinishReason::Length => " (the budget ran out: raise --max-tokens)",
            FinishReason::Interrupted => " (the stream broke off: what arrived is parsed)",
            FinishReason::SizeLimit =>
                " (the reply passed KERF_MAX_REPLY_MIB: what arrived is parsed)",
            _ => "",
        },
        tokens,
        f.timings.tokens_per_second,
        f.timings.first_token_seconds.unwrap_or(0.0),
    );
    let retries = d.retries.len();
    crate::outln!(
        "   provider: {} ({}) · structured output: {} ({}){}{}",
        d.provider,
        d.protocol.as_str(),
        d.structured.mode.as_str(),
        d.structured.why,
        d.key_source
            .as_deref()
            .map(|k| format!(" · key from {k}"))
            .unwrap_or_default(),
        if retries > 0 {
            format!(" · {retries} retries")
        } else {
            String::new()
        }
    );
    if let Some(e) = &f.error {
        crate::outln!("   error: {e}");
    }
}
