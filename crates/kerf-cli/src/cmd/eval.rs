//! `kerf eval`: prompts run over a dataset at several budgets, scored against the expected
//! records, as one experiment in the history; `resume` and `show` take it up again.

use std::path::PathBuf;

use anyhow::Result;
use kerf_api::eval::{self, Pace, Progress, Report, Threshold};
use kerf_api::history::Store;
use kerf_api::workbench::Workbench;
use kerf_api::{ApiError, Code};

use super::compare::ConstrainMode;
use super::run::{ModelArgs, interrupt_token};
use crate::output::print_json;
use crate::{Outcome, junit};

/// Run prompts over a dataset and score what they extract against its expected records.
#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "\
Examples:
  kerf eval datasets/knowledge-graph.jsonl --prompt prompts/agent-kg-extract.json \\
    --prompt prompts/agent-kg-extract-array.json --max-tokens 128,512 --limit 5
  kerf eval data.jsonl --prompt p.json --provider openai --concurrency 16 --fail-under f1=0.8
  kerf eval data.jsonl --prompt p.json --provider openai,anthropic   two models side by side
  kerf eval data.jsonl --prompt p.json --var language=French   a variable every row renders with
  kerf eval data.jsonl --prompt p.json --provider openai,anthropic --batch   half price, later
  kerf eval status 12       where an eval's batches stand
  kerf eval collect 12 --wait   fold the batches' results in as they end, then report
  kerf eval data.jsonl --prompt p.json --provider vllm --batch-file in.jsonl   for vllm run-batch
  kerf eval collect 12 --results out.jsonl   fold `vllm run-batch -o out.jsonl` back in
  kerf eval resume          finish the latest eval (after Ctrl-C or a crash)
  kerf eval show 12 --json  an eval's figures again, from the history
  kerf eval rescore 12      its stored replies scored again with the prompts' current `match`
  kerf eval report 12 --html eval.html   one self-contained file with charts, for people
  kerf eval compare 12 14   two evals on the same rows, row by row
  kerf eval compare 12      one eval's providers, each against the first

Every prompt × provider × budget × constraint variant × repeat × row is one run, kept in the
history under one experiment; each provider's cells run side by side, --concurrency at a time
each. Before anything runs, every row is checked against every prompt; a problem stops the eval
with nothing written. --json prints {\"experiment\", \"summary\": [{\"prompt\", \"provider\",
\"max_tokens\", \"constrained\", \"cells\", \"tp\", \"fp\", \"fn\", \"precision\", \"recall\", \"f1\",
\"macro_f1\", …}], \"cells\": [{\"row\", \"prompt\", \"provider\", \"max_tokens\", \"constrained\",
\"repeat\", \"run\", \"finish_reason\", \"objects\", \"tp\", \"fp\", \"fn\", \"precision\", \"recall\", \"f1\",
\"lost_to_cut\", …}], \"providers\": [{\"provider\", \"model\", \"cost_usd\", \"seconds_p50\",
\"seconds_p95\", …}], …}.
With --batch, the providers that have a batch API (OpenAI, Anthropic, Gemini, a server marked
`\"batch_api\": true`) get every request in batches at half the price and the command returns at
once: --json prints {\"experiment\", \"batches\": [{\"id\", \"provider\", \"api\", \"requests\",
\"bytes\", \"state\"}], \"ways\"}; `kerf eval collect` folds the results in and prints the same report
as an online eval. Other providers run online as usual.
Exit codes: 0 done (and every --fail-under met); 1 a --fail-under threshold missed; 2 could not run,
or stopped, or cells left without a finished run (`kerf eval resume` finishes it), or requests still
in a batch (`kerf eval collect --wait`)."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub start: StartArgs,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Finish an eval that was stopped or killed: runs the cells without a finished run, never
    /// one that finished (ok or cut by its budget). An eval sent by batch: folds what ended,
    /// then sends the cells without a finished result again as a new batch.
    Resume(ResumeArgs),
    /// Where an eval's batches stand: each one's state and request counts, as its provider
    /// reports them now.
    Status(StatusArgs),
    /// Fold the results of an eval's ended batches into its cells and report it as an online
    /// eval is reported (partial, saying so, while requests are still in a batch). Collecting
    /// twice changes nothing and sends nothing.
    Collect(CollectArgs),
    /// An eval's figures, from the history.
    Show(ShowArgs),
    /// An eval as one self-contained HTML file: charts, advice, repeats, comparisons, drops,
    /// and every row's expected and extracted records side by side.
    Report(ReportArgs),
    /// Score an eval's stored replies again with its prompts' current `match` settings (read
    /// from their files), parsing each raw reply again; no model is called.
    Rescore(ShowArgs),
    /// Two evals on the same rows — or one eval's providers, side by side: per prompt, budget
    /// and constraint, the paired F1 difference with a bootstrap interval, and per row the
    /// records gained and lost.
    Compare(CompareArgs),
}

#[derive(clap::Args)]
pub struct StartArgs {
    /// The dataset: a .jsonl or .csv file, or a folder of .txt documents.
    #[arg(required = true)]
    pub dataset: Option<PathBuf>,
    /// A prompt file, or the id of a shipped or own prompt, to evaluate (repeat for several).
    #[arg(long = "prompt", required = true)]
    pub prompts: Vec<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output token budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024")]
    pub max_tokens: Vec<u32>,
    #[arg(long, value_enum, default_value = "auto")]
    pub constrain: ConstrainMode,
    /// Runs of each cell (repeats show how stable the figures are).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Reuse a reply an earlier eval bought for the same cell: only one that ended on its own,
    /// with the same prompt version, input, provider, model, parameters and repeat index.
    #[arg(long)]
    pub cache: bool,
    /// The first N rows of the dataset only.
    #[arg(long)]
    pub limit: Option<usize>,
    /// A variable set for every row as NAME=VALUE, beneath the row's own `vars` (JSON values
    /// are parsed: --var 'types=["a","b"]'); each prompt that reads it gets it.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    #[command(flatten)]
    pub chunks: ChunkArgs,
    #[command(flatten)]
    pub allow: super::AllowArgs,
    #[command(flatten)]
    pub pace: PaceArgs,
    #[command(flatten)]
    pub batch: BatchArgs,
    #[command(flatten)]
    pub out: OutArgs,
}

/// Long documents: cut each one as TrustGraph does, a request per chunk, merged per document.
#[derive(clap::Args)]
pub struct ChunkArgs {
    /// Cut each document at these sizes (comma-separated, in the chunker's unit) and send each
    /// chunk as its own request; a document's chunks are merged before it is scored.
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub chunk_size: Vec<u32>,
    /// Which of TrustGraph's chunkers cuts the documents [default: recursive].
    #[arg(long, value_enum)]
    pub chunker: Option<super::chunk::ChunkerArg>,
    /// What each chunk shares with the one before, in the chunker's unit [default: 50, a
    /// deployed TrustGraph flow's].
    #[arg(long, value_name = "N")]
    pub chunk_overlap: Option<u32>,
    /// Requests per chunk, their records merged (sampling differs between them only at a
    /// temperature above 0) [default: 1].
    #[arg(long, value_name = "N")]
    pub passes: Option<u32>,
    /// Give each chunk the last N characters of the chunk before as marked context
    /// (comma-separated for several: each is a line of the report) [default: 0].
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub context_chars: Vec<u32>,
    /// Cut as a TrustGraph flow does with these settings: a file `kerf export --to
    /// trustgraph-chunking` wrote (or a flow's `parameters`), instead of --chunker,
    /// --chunk-size and --chunk-overlap.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["chunk_size", "chunker", "chunk_overlap"])]
    pub chunk_settings: Option<PathBuf>,
}

/// A deployed TrustGraph flow's `chunk-overlap` (it overrides the processor's on every message).
const FLOW_OVERLAP: u32 = 50;

impl ChunkArgs {
    /// The cut asked for (`None`: whole documents); the other chunk flags without
    /// --chunk-size are an error.
    fn chunking(&self) -> Result<Option<eval::chunked::Chunking>> {
        if let Some(path) = &self.chunk_settings {
            let s = kerf_api::export::read_chunking(path)?;
            return Ok(Some(eval::chunked::Chunking {
                chunker: s.chunker,
                sizes: vec![s.size as u32],
                overlap: s.overlap as u32,
                passes: self.passes.unwrap_or(1),
                context_chars: self.context_chars.clone(),
            }));
        }
        if self.chunk_size.is_empty() {
            let given = [
                ("--chunker", self.chunker.is_some()),
                ("--chunk-overlap", self.chunk_overlap.is_some()),
                ("--passes", self.passes.is_some()),
                ("--context-chars", !self.context_chars.is_empty()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                anyhow::bail!(ApiError::new(
                    Code::Usage,
                    format!("{flag} is about cutting documents into chunks: give --chunk-size too")
                ));
            }
            return Ok(None);
        }
        Ok(Some(eval::chunked::Chunking {
            chunker: self
                .chunker
                .unwrap_or(super::chunk::ChunkerArg::Recursive)
                .into(),
            sizes: self.chunk_size.clone(),
            overlap: self.chunk_overlap.unwrap_or(FLOW_OVERLAP),
            passes: self.passes.unwrap_or(1),
            context_chars: self.context_chars.clone(),
        }))
    }
}

#[derive(clap::Args)]
pub struct BatchArgs {
    /// Send the requests of every provider that has a batch API in batches (half the price,
    /// answered within 24 hours) and return at once; `kerf eval collect` folds the results in.
    #[arg(long)]
    pub batch: bool,
    /// Write the requests of an OpenAI-compatible server without a batch API to FILE, the input
    /// of `vllm run-batch -i FILE -o OUT`; `kerf eval collect ID --results OUT` folds its output.
    #[arg(long, value_name = "FILE")]
    pub batch_file: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct WaitArgs {
    /// Poll until no request is still in a batch, then report.
    #[arg(long)]
    pub wait: bool,
    /// Seconds between polls with --wait.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub poll: f64,
}

impl WaitArgs {
    fn every(&self) -> Result<Option<std::time::Duration>> {
        if !self.wait {
            return Ok(None);
        }
        std::time::Duration::try_from_secs_f64(self.poll)
            .ok()
            .filter(|d| !d.is_zero())
            .map(Some)
            .ok_or_else(|| {
                ApiError::new(
                    Code::Usage,
                    format!("--poll {}: give a number of seconds above 0", self.poll),
                )
                .into()
            })
    }
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The eval (default: the latest).
    pub experiment: Option<i64>,
    /// Print the batches as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct CollectArgs {
    /// The eval (default: the latest).
    pub experiment: Option<i64>,
    #[command(flatten)]
    pub wait: WaitArgs,
    /// The output file of `vllm run-batch` for the eval's batch file.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Args)]
pub struct PaceArgs {
    /// Requests in flight at once per provider (cloud providers and servers, within their rate
    /// limits; the local engine runs one at a time): a number, or `auto` — start at 4, grow
    /// while the latency holds, halve on 429, 503 or a refused connection, up to 64
    /// [default: auto; a resume: what the eval started with]
    #[arg(long, value_parser = parse_concurrency, value_name = "N|auto")]
    pub concurrency: Option<Concurrency>,
    /// Run again the cells whose run failed.
    #[arg(long)]
    pub retry_errors: bool,
}

#[derive(clap::Args)]
pub struct OutArgs {
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 unless every prompt × budget × constraint line reaches these figures
    /// (comma-separated: f1=0.8,recall=0.7; metrics: f1, precision, recall, macro_f1).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(Threshold))]
    pub fail_under: Vec<Threshold>,
    /// Also write the figures as JUnit XML: a test case per prompt × budget × constraint line,
    /// failed when it misses a --fail-under threshold, an error when cells failed.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Budget advice: the smallest budget whose recall is within this many percent of the
    /// best budget's.
    #[arg(long, default_value_t = 5.0, value_parser = parse_percent)]
    pub advise_within: f64,
}

impl OutArgs {
    fn options(&self) -> eval::Options {
        eval::Options {
            advise_within: self.advise_within / 100.0,
            replies: eval::Replies::Stored,
        }
    }
}

/// `--concurrency`: a fixed number, or found by itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Concurrency {
    Auto,
    Fixed(usize),
}

impl Concurrency {
    /// The number (the most, for `auto`) and whether it is found by itself.
    fn pace(self) -> (usize, bool) {
        match self {
            Concurrency::Auto => (eval::AUTO_CEILING, true),
            Concurrency::Fixed(n) => (n, false),
        }
    }
}

fn parse_concurrency(s: &str) -> std::result::Result<Concurrency, String> {
    match s.trim() {
        "auto" => Ok(Concurrency::Auto),
        n => n
            .parse()
            .map(Concurrency::Fixed)
            .map_err(|_| format!("`{s}`: a number of requests, or `auto`")),
    }
}

fn parse_percent(s: &str) -> std::result::Result<f64, String> {
    s.trim()
        .trim_end_matches('%')
        .parse()
        .ok()
        .filter(|v: &f64| (0.0..=100.0).contains(v))
        .ok_or_else(|| format!("`{s}`: a percentage from 0 to 100"))
}

#[derive(clap::Args)]
pub struct ResumeArgs {
    /// The eval (default: the latest).
    pub experiment: Option<i64>,
    /// Go on although the provider's name now points at another endpoint or served model than
    /// the eval's runs came from (the eval then mixes the two).
    #[arg(long)]
    pub allow_endpoint_change: bool,
    #[command(flatten)]
    pub allow: super::AllowArgs,
    #[command(flatten)]
    pub pace: PaceArgs,
    /// An eval sent by batch: where to write its batch file again (its file batches' cells).
    #[arg(long, value_name = "FILE")]
    pub batch_file: Option<PathBuf>,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// The eval (default: the latest).
    pub experiment: Option<i64>,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The eval (default: the latest).
    pub experiment: Option<i64>,
    /// The HTML file to write.
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    /// Budget advice: within this many percent of the best recall.
    #[arg(long, default_value_t = 5.0, value_parser = parse_percent)]
    pub advise_within: f64,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The eval to compare against (the baseline, `a`).
    pub a: i64,
    /// The eval compared (`b`): differences are b − a. Left out: eval `a`'s providers are
    /// compared, each against its first.
    pub b: Option<i64>,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    pub fn json(&self) -> bool {
        match &self.command {
            Some(Sub::Resume(a)) => a.out.json,
            Some(Sub::Status(a)) => a.json,
            Some(Sub::Collect(a)) => a.out.json,
            Some(Sub::Show(a)) => a.out.json,
            Some(Sub::Compare(a)) => a.json,
            Some(Sub::Rescore(a)) => a.out.json,
            Some(Sub::Report(_)) => false,
            None => self.start.out.json,
        }
    }
}

pub fn run(args: Args, wb: &Workbench, globals: &crate::record::Globals) -> Result<Outcome> {
    if globals.no_history {
        anyhow::bail!(ApiError::new(
            Code::Usage,
            "an eval is kept in the history: drop --no-history"
        ));
    }
    let store = crate::record::open_for_reading(wb)?;
    match args.command {
        None => start(args.start, wb, &store),
        Some(Sub::Resume(a)) => resume(a, wb, &store),
        Some(Sub::Status(a)) => status(&a, wb, &store),
        Some(Sub::Collect(a)) => {
            let id = eval::flow::which(&store, a.experiment)?;
            collect(id, &a.wait, a.results.as_deref(), &a.out, wb, &store)
        }
        Some(Sub::Show(a)) => {
            let id = eval::flow::which(&store, a.experiment)?;
            let e = eval::stored(&store, id)?;
            let report = eval::report(&store, &e, a.out.options())?;
            conclude(&report, &a.out, None)
        }
        Some(Sub::Compare(a)) => compare(&a, &store),
        Some(Sub::Report(a)) => {
            let id = eval::flow::which(&store, a.experiment)?;
            let options = eval::Options {
                advise_within: a.advise_within / 100.0,
                ..eval::Options::default()
            };
            eval::flow::write_html(&store, id, &a.html, options)?;
            crate::outln!("eval {id}: wrote {}", a.html.display());
            Ok(Outcome::Ok)
        }
        Some(Sub::Rescore(a)) => {
            let id = eval::flow::which(&store, a.experiment)?;
            let mut e = eval::stored(&store, id)?;
            for p in eval::rematch(&mut e)? {
                crate::errln!("kerf: {p}: scored with the `match` settings its file has now");
            }
            let options = eval::Options {
                replies: eval::Replies::Reread,
                ..a.out.options()
            };
            let report = eval::report(&store, &e, options)?;
            conclude(&report, &a.out, None)
        }
    }
}

fn start(args: StartArgs, wb: &Workbench, store: &Store) -> Result<Outcome> {
    let Some(dataset) = args.dataset else {
        anyhow::bail!(ApiError::new(Code::Usage, "give the dataset to run"));
    };
    let input = eval::StartInput {
        dataset,
        limit: args.limit,
        prompts: args.prompts.iter().map(|p| wb.find_prompt(p)).collect(),
        settings: args.model.settings(),
        providers: args.model.providers.clone(),
        max_tokens: args.max_tokens,
        constrain: args.constrain.into(),
        repeat: args.repeat,
        cache: args.cache,
        concurrency: args.pace.concurrency.unwrap_or(Concurrency::Auto).pace().0,
        adaptive: args.pace.concurrency.unwrap_or(Concurrency::Auto).pace().1,
        allowed: args.allow.allowance(),
        vars: vec![crate::output::vars(&args.vars)?; args.prompts.len()],
        chunking: args.chunks.chunking()?,
    };
    if args.allow.dry_run {
        let (size, warnings) = eval::flow::dry_run(wb, &input)?;
        crate::output::warn_all(&warnings);
        super::announce(&size);
        return Ok(Outcome::Ok);
    }
    if args.batch.batch || args.batch.batch_file.is_some() {
        return submit(&input, &args.batch, &args.out, wb, store);
    }
    let (e, providers) = eval::flow::start(wb, store, &input, &mut super::announce)?;
    for s in &e.subjects {
        crate::output::warn_all(&s.prompt.warnings);
    }
    go(store, &e, &providers, &args.pace, &args.out)
}

fn resume(args: ResumeArgs, wb: &Workbench, store: &Store) -> Result<Outcome> {
    let id = eval::flow::which(store, args.experiment)?;
    if !store.batches(id)?.is_empty() {
        if args.allow.dry_run {
            super::announce(&eval::batched::dry_run_resume(
                wb,
                store,
                id,
                args.batch_file.is_some(),
            )?);
            return Ok(Outcome::Ok);
        }
        let made = eval::batched::resume(
            wb,
            store,
            id,
            args.batch_file.as_deref(),
            &interrupt_token(),
            &mut super::announce,
            &mut |_| {},
        )?;
        for b in &made {
            crate::errln!("kerf: eval {id}: {}", batch_line(b));
        }
        if args.wait.wait {
            return collect(id, &args.wait, None, &args.out, wb, store);
        }
        if args.out.json {
            print_json(&serde_json::json!({"experiment": id, "batches": batches_json(&made)}));
        } else if made.is_empty() {
            crate::outln!("eval {id}: nothing to send again; `kerf eval collect {id}` reports it");
        } else {
            crate::outln!(
                "eval {id}: {} batch(es) sent; `kerf eval collect {id} --wait` folds their results",
                made.len()
            );
        }
        return Ok(Outcome::Ok);
    }
    let input = eval::flow::ResumeInput {
        retry_errors: args.pace.retry_errors,
        allowed: args.allow.allowance(),
        endpoint_changed: args.allow_endpoint_change,
    };
    if args.allow.dry_run {
        super::announce(&eval::flow::dry_run_resume(wb, store, id, input)?);
        return Ok(Outcome::Ok);
    }
    let (e, providers) = eval::flow::resume(wb, store, id, input, &mut super::announce)?;
    go(store, &e, &providers, &args.pace, &args.out)
}

/// Send an eval's batch providers' requests in batches (and run its online providers' cells),
/// then print the experiment and its batches.
fn submit(
    input: &eval::StartInput,
    args: &BatchArgs,
    out: &OutArgs,
    wb: &Workbench,
    store: &Store,
) -> Result<Outcome> {
    let sent = eval::batched::submit(
        wb,
        store,
        input,
        eval::batched::Asked::EachThatCan {
            file: args.batch_file.as_deref(),
        },
        &interrupt_token(),
        &mut super::announce,
        &mut |_| {},
    )?;
    let id = sent.experiment;
    let ways: serde_json::Map<String, serde_json::Value> = sent
        .ways
        .iter()
        .map(|(name, way)| {
            let w = match way {
                eval::batched::Way::Online => "online",
                eval::batched::Way::Batch(kerf_api::history::BatchApi::File) => "file",
                eval::batched::Way::Batch(_) => "batch",
            };
            (name.clone(), serde_json::json!(w))
        })
        .collect();
    if out.json {
        print_json(&serde_json::json!({
            "experiment": id,
            "batches": batches_json(&sent.batches),
            "ways": ways,
        }));
    } else {
        for b in &sent.batches {
            crate::outln!("eval {id}: {}", batch_line(b));
        }
        if sent
            .batches
            .iter()
            .any(|b| b.api == kerf_api::history::BatchApi::File)
        {
            crate::outln!(
                "eval {id}: run `vllm run-batch -i FILE -o OUT --model M`, then `kerf eval collect {id} --results OUT`"
            );
        }
        crate::outln!(
            "eval {id}: `kerf eval status {id}` shows where the batches stand; `kerf eval collect {id} --wait` folds their results and reports"
        );
    }
    if let Some(f) = &sent.online
        && let Some(e) = f.stopped()
    {
        anyhow::bail!(e);
    }
    Ok(Outcome::Ok)
}

fn batch_line(b: &kerf_api::history::Batch) -> String {
    let counts = b
        .counts
        .map(|c| {
            format!(
                " · {} succeeded, {} errored, {} expired, {} cancelled, {} processing",
                c.succeeded, c.errored, c.expired, c.canceled, c.processing
            )
        })
        .unwrap_or_default();
    format!(
        "batch {} on {} ({}{}): {} request(s), {} byte(s) · {}{}{}",
        b.remote_id.as_deref().unwrap_or("(not sent yet)"),
        b.provider,
        b.api.as_str(),
        b.endpoint
            .as_deref()
            .map(|e| format!(" {e}"))
            .unwrap_or_default(),
        b.requests,
        b.bytes,
        b.state.as_str(),
        b.remote_state
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default(),
        counts
    )
}

fn batches_json(batches: &[kerf_api::history::Batch]) -> serde_json::Value {
    serde_json::Value::Array(
        batches
            .iter()
            .map(|b| {
                serde_json::json!({
                    "id": b.remote_id,
                    "provider": b.provider,
                    "api": b.api,
                    "endpoint": b.endpoint,
                    "requests": b.requests,
                    "bytes": b.bytes,
                    "state": b.state,
                    "remote_state": b.remote_state,
                    "counts": b.counts,
                })
            })
            .collect(),
    )
}

fn status(args: &StatusArgs, wb: &Workbench, store: &Store) -> Result<Outcome> {
    let id = eval::flow::which(store, args.experiment)?;
    let batches = eval::batched::status(wb, store, id)?;
    if args.json {
        print_json(&serde_json::json!({"experiment": id, "batches": batches_json(&batches)}));
    } else {
        for b in &batches {
            crate::outln!("eval {id}: {}", batch_line(b));
        }
    }
    Ok(Outcome::Ok)
}

/// Fold what ended (waiting with `wait`), report, list the requests without a reply; exit 2
/// while the eval is not whole.
fn collect(
    id: i64,
    wait: &WaitArgs,
    results: Option<&std::path::Path>,
    out: &OutArgs,
    wb: &Workbench,
    store: &Store,
) -> Result<Outcome> {
    let every = wait.every()?;
    let quiet = out.json;
    let c = eval::batched::collect(wb, store, id, every, results, out.options(), &mut |bs| {
        if !quiet && every.is_some() {
            for b in bs {
                crate::errln!("kerf: eval {id}: {}", batch_line(b));
            }
        }
    })?;
    if c.folded.unknown > 0 {
        crate::errln!(
            "kerf: eval {id}: {} answer(s) name no request awaited here (folded before, or another eval's)",
            c.folded.unknown
        );
    }
    let outcome = conclude(&c.finished.report, out, None)?;
    for f in &c.failed {
        crate::errln!(
            "kerf: eval {id}: no result for row {} · {} on {} at {} tokens (run {}): {} [{}]",
            f.row,
            f.prompt,
            f.provider,
            f.max_tokens,
            f.run,
            f.error,
            f.code
        );
    }
    if let Some(why) = c.not_whole() {
        crate::errln!("kerf: {why}");
        return Ok(Outcome::CouldNotRun);
    }
    Ok(outcome)
}

/// Run what the eval still needs, with a progress bar, then report it.
fn go(
    store: &Store,
    e: &eval::Eval,
    providers: &[kerf_api::runs::Chosen],
    pace: &PaceArgs,
    out: &OutArgs,
) -> Result<Outcome> {
    let bar = if out.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} eval {prefix} [{bar:30}] {pos}/{len} cells · ETA {eta} · {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(e.experiment.to_string());
    let finished = eval::flow::go(
        store,
        e,
        providers,
        Pace {
            concurrency: pace.concurrency.map_or(e.spec.concurrency, |c| c.pace().0),
            adaptive: pace.concurrency.map_or(e.spec.adaptive, |c| c.pace().1),
            retry_errors: pace.retry_errors,
            live: false,
        },
        &interrupt_token(),
        out.options(),
        &mut |p: &Progress| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(progress_message(p));
        },
    );
    bar.finish_and_clear();
    let finished = finished?;
    let outcome = conclude(&finished.report, out, finished.stopped())?;
    if let (Outcome::Ok, Some(why)) = (outcome, finished.not_whole()) {
        crate::errln!("kerf: {why}");
        return Ok(Outcome::CouldNotRun);
    }
    Ok(outcome)
}

fn progress_message(p: &Progress) -> String {
    let mut m = format!("{} tokens", p.prompt_tokens + p.completion_tokens);
    if p.cost_usd > 0.0 {
        m.push_str(&format!(" · ${:.4}", p.cost_usd));
    }
    if p.failed > 0 {
        m.push_str(&format!(" · {} failed", p.failed));
    }
    if p.skipped > 0 {
        m.push_str(&format!(" · {} already measured", p.skipped));
    }
    if p.cached > 0 {
        m.push_str(&format!(" · {} from the cache", p.cached));
    }
    if let Some(n) = &p.notice {
        m.push_str(&format!(" · {n}"));
    }
    m
}

/// Print the report, then judge it: a stopped eval is an error naming how to finish it; a
/// missed threshold exits 1.
fn conclude(report: &Report, out: &OutArgs, stopped: Option<ApiError>) -> Result<Outcome> {
    if out.json {
        // Written as it is serialised: a long document's report is tens of megabytes.
        crate::output::print_json_streamed(report);
    } else {
        print_table(report);
    }
    if let Some(e) = stopped {
        anyhow::bail!(e);
    }
    let mut missed = Vec::new();
    let mut cases = std::collections::BTreeMap::<String, Vec<junit::Case>>::new();
    let several = report.providers.len() > 1;
    for line in &report.summary {
        let suite = line_name(&line.prompt, &line.provider, several);
        let name = format!(
            "{} at {} tokens{}{}",
            suite,
            line.max_tokens,
            if line.constrained {
                ", constrained"
            } else {
                ""
            },
            match line.chunk_size {
                Some(size) => format!(", chunk size {size}{}", context_of(line.context_chars)),
                None => String::new(),
            }
        );
        let mine: Vec<String> = out
            .fail_under
            .iter()
            .filter_map(|t| t.missed(line))
            .collect();
        let outcome = if !mine.is_empty() {
            junit::Outcome::Failed(mine.join("; "))
        } else if line.failed + line.unfinished > 0 {
            junit::Outcome::Error(format!(
                "{} cell(s) failed, {} without a finished run",
                line.failed, line.unfinished
            ))
        } else {
            junit::Outcome::Passed
        };
        cases.entry(suite).or_default().push(junit::Case {
            figures: format!(
                "cells {} · tp {} fp {} fn {} · precision {} recall {} F1 {} macro F1 {} · cut {} lost {}",
                line.cells,
                line.micro.tp,
                line.micro.fp,
                line.micro.fn_,
                figure(line.micro.precision),
                figure(line.micro.recall),
                figure(line.micro.f1),
                figure(line.macro_f1),
                line.truncated,
                line.lost_to_cut
            ),
            name: name.clone(),
            outcome,
        });
        missed.extend(mine.into_iter().map(|m| format!("{name}: {m}")));
    }
    if let Some(path) = &out.junit {
        junit::write(
            path,
            &format!("kerf eval {}", report.experiment),
            cases.into_iter().collect(),
        )?;
    }
    for m in &missed {
        crate::errln!("kerf: below --fail-under: {m}");
    }
    Ok(if missed.is_empty() {
        Outcome::Ok
    } else {
        Outcome::InputFailed
    })
}

fn compare(args: &CompareArgs, store: &Store) -> Result<Outcome> {
    let Some(b) = args.b else {
        let comparisons = eval::flow::compare_providers(store, args.a)?;
        if args.json {
            print_json(&serde_json::json!({
                "a": args.a,
                "b": args.a,
                "comparisons": comparisons,
            }));
        } else {
            crate::outln!("eval {}: its providers side by side (b − a)", args.a);
            print_comparisons(&comparisons, true);
        }
        return Ok(Outcome::Ok);
    };
    let comparisons = eval::flow::compare(store, args.a, b)?;
    if args.json {
        print_json(&serde_json::json!({
            "a": args.a,
            "b": b,
            "comparisons": comparisons,
        }));
    } else {
        crate::outln!("eval {} (a) against eval {} (b)", args.a, b);
        print_comparisons(&comparisons, true);
    }
    Ok(Outcome::Ok)
}

/// Rows listed per comparison before "… more".
const ROWS_SHOWN: usize = 10;

/// ` with N characters of context`, when a cut gave any.
fn context_of(chars: Option<u32>) -> String {
    match chars {
        Some(n) if n > 0 => format!(" with {n} characters of context"),
        _ => String::new(),
    }
}

fn print_comparisons(comparisons: &[eval::analysis::Comparison], rows: bool) {
    for c in comparisons {
        // Two cuts alike are named once, after the budget; whole documents against a cut name
        // each side's.
        let same_cut = (c.a.chunk_size, c.a.context_chars) == (c.b.chunk_size, c.b.context_chars);
        let name = |s: &eval::analysis::Side| {
            format!(
                "{}{}{}{}{}",
                if c.a.experiment != c.b.experiment {
                    format!("eval {} ", s.experiment)
                } else {
                    String::new()
                },
                s.prompt,
                if c.a.provider != c.b.provider {
                    format!(" on {}", s.provider)
                } else {
                    String::new()
                },
                if s.constrained { " (constrained)" } else { "" },
                match s.chunk_size {
                    _ if same_cut => String::new(),
                    Some(size) => format!(" (chunk size {size}{})", context_of(s.context_chars)),
                    None => " (whole documents)".to_string(),
                }
            )
        };
        crate::outln!(
            "{} vs {} at {} tokens{}: F1 {} → {}, Δ {} (95% CI {}) over {} row(s); b better on {}, worse on {}, same on {}",
            name(&c.a),
            name(&c.b),
            c.a.max_tokens,
            match c.a.chunk_size {
                Some(size) if same_cut =>
                    format!(", chunk size {size}{}", context_of(c.a.context_chars)),
                _ => String::new(),
            },
            figure(c.a.f1),
            figure(c.b.f1),
            c.f1_diff.map_or("-".into(), |d| format!("{d:+.3}")),
            interval(c.f1_diff_ci),
            c.rows,
            c.better,
            c.worse,
            c.same
        );
        if !rows {
            continue;
        }
        let changed: Vec<_> = c
            .per_row
            .iter()
            .filter(|r| !r.gained.is_empty() || !r.lost.is_empty() || r.changed > 0)
            .collect();
        for r in changed.iter().take(ROWS_SHOWN) {
            crate::outln!(
                "  {}: F1 {} → {}; {} gained, {} lost, {} changed",
                r.row,
                figure(r.f1_a),
                figure(r.f1_b),
                r.gained.len(),
                r.lost.len(),
                r.changed
            );
        }
        if changed.len() > ROWS_SHOWN {
            crate::outln!(
                "  … {} more row(s) differ (--json lists them all)",
                changed.len() - ROWS_SHOWN
            );
        }
    }
}

fn interval(ci: Option<[f64; 2]>) -> String {
    ci.map_or("-".into(), |[lo, hi]| format!("{lo:+.3} … {hi:+.3}"))
}

fn figure(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// A provider's share as one line: its model, cells, cost, tokens and run times. In an eval
/// over chunks the cells counted are its chunk requests, and a run time is a whole document's
/// (its chunks' runs together): the line says so, as the two units differ.
fn provider_line(p: &eval::lines::ProviderLine, chunked: bool) -> String {
    let (counted, timed) = if chunked {
        ("chunk request(s)", " per document")
    } else {
        ("cell(s)", "")
    };
    let mut s = format!(
        "{} / {} · {} of {} {counted} measured",
        p.provider, p.model, p.measured, p.cells
    );
    if p.failed > 0 {
        s.push_str(&format!(" ({} failed)", p.failed));
    }
    s.push_str(&format!(" · {} completion tokens", p.completion_tokens));
    if let Some(c) = p.cost_usd {
        s.push_str(&format!(" · ${c:.4}"));
    }
    if let (Some(p50), Some(p95)) = (p.seconds_p50, p.seconds_p95) {
        s.push_str(&format!(
            " · run time{timed} p50 {p50:.2} s, p95 {p95:.2} s"
        ));
    }
    s
}

/// A line's prompt, with its provider when the eval has several.
fn line_name(prompt: &str, provider: &str, several: bool) -> String {
    if several {
        format!("{prompt} on {provider}")
    } else {
        prompt.to_string()
    }
}

/// What a cut document's lines' chunks did: requests and tokens per document, replies cut and
/// what was lost with them, records at chunk boundaries, how the records were placed; with
/// several passes, recall against passes.
fn print_chunks(r: &Report, several: bool, label: &dyn Fn(&eval::SummaryLine) -> String) {
    let lines: Vec<_> = r
        .summary
        .iter()
        .filter_map(|l| l.chunks.as_ref().map(|c| (l, c)))
        .collect();
    if lines.is_empty() {
        return;
    }
    crate::outln!("\nChunks (per document: requests, input and output tokens):");
    for (l, c) in &lines {
        crate::outln!(
            "  {}{} at {}: {} chunk(s) over {} document(s) · {:.1} requests, {:.0} + {:.0} tokens per document · {} cut by the budget, {} expected record(s) in them not found · at chunk boundaries {} record(s), recall {} · placed {} exact, {} fuzzy, {} from context, {} not found{} · {} folded",
            if several {
                format!("{} on ", l.provider)
            } else {
                String::new()
            },
            label(l),
            l.max_tokens,
            c.chunks,
            c.documents,
            c.requests_per_document,
            c.prompt_tokens_per_document,
            c.completion_tokens_per_document,
            c.cut,
            c.missed_in_cut,
            c.at_boundary,
            figure(c.boundary_recall),
            c.spans.exact,
            c.spans.fuzzy,
            c.spans.context,
            c.spans.not_found,
            match c.spans.no_text {
                0 => String::new(),
                n => format!(", {n} with no text to ground"),
            },
            c.folded
        );
        if !c.by_passes.is_empty() {
            let passes: Vec<String> = c
                .by_passes
                .iter()
                .map(|p| {
                    format!(
                        "{} pass(es): recall {}, F1 {}, {:.1} requests",
                        p.passes,
                        figure(p.micro.recall),
                        figure(p.micro.f1),
                        p.requests_per_document
                    )
                })
                .collect();
            crate::outln!("    {}", passes.join(" · "));
        }
    }
}

fn print_table(r: &Report) {
    let several = r.providers.len() > 1;
    if several {
        crate::outln!(
            "eval {} · {} · {} row(s) × {} repeat(s) · {} providers side by side",
            r.experiment,
            r.dataset,
            r.rows,
            r.repeat,
            r.providers.len()
        );
    } else {
        crate::outln!(
            "eval {} · {} · {} row(s) × {} repeat(s) · {} / {}",
            r.experiment,
            r.dataset,
            r.rows,
            r.repeat,
            r.provider,
            r.model
        );
    }
    for (prompt, vars) in &r.vars {
        crate::outln!(
            "{prompt}: every row with {}",
            vars.iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    v => format!("{k}={v}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let name_w = r
        .summary
        .iter()
        .map(|l| l.prompt.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    // A cut document's lines name their chunk size (and context) after the prompt.
    let chunked = r.summary.iter().any(|l| l.chunk_size.is_some());
    let label = |l: &eval::SummaryLine| -> String {
        match (l.chunk_size, l.context_chars) {
            (Some(size), Some(ctx)) if ctx > 0 => format!("{} @{size}+{ctx}", l.prompt),
            (Some(size), _) => format!("{} @{size}", l.prompt),
            _ => l.prompt.clone(),
        }
    };
    let name_w = if chunked {
        r.summary
            .iter()
            .map(|l| label(l).chars().count())
            .max()
            .unwrap_or(name_w)
            .max(name_w)
    } else {
        name_w
    };
    crate::outln!(
        "{:<name_w$}  {:>6}  {:<5}  {:>5}  {:>5}  {:>5}  {:>5}  {:>6}  {:>6}  {:>6}  {:>8}  {:>11}  {:>5}  {:>4}  {:>10}",
        if chunked {
            "prompt @chunk size"
        } else {
            "prompt"
        },
        "budget",
        "cons.",
        "cells",
        "tp",
        "fp",
        "fn",
        "prec.",
        "recall",
        "F1",
        "macro F1",
        "F1 95% CI",
        "cut",
        "lost",
        "ungrounded"
    );
    for (i, l) in r.summary.iter().enumerate() {
        // Each provider's lines under a line of its own: model, cost, run times.
        if (i == 0 || r.summary[i - 1].provider != l.provider)
            && let Some(p) = r.providers.iter().find(|p| p.provider == l.provider)
        {
            let chunked = r
                .summary
                .iter()
                .any(|m| m.provider == p.provider && m.chunk_size.is_some());
            crate::outln!("{}", provider_line(p, chunked));
        }
        crate::outln!(
            "{:<name_w$}  {:>6}  {:<5}  {:>5}  {:>5}  {:>5}  {:>5}  {:>6}  {:>6}  {:>6}  {:>8}  {:>11}  {:>5}  {:>4}  {:>10}",
            label(l),
            l.max_tokens,
            if l.constrained { "yes" } else { "no" },
            l.cells,
            l.micro.tp,
            l.micro.fp,
            l.micro.fn_,
            figure(l.micro.precision),
            figure(l.micro.recall),
            figure(l.micro.f1),
            figure(l.macro_f1),
            l.f1_ci
                .map_or("-".into(), |[lo, hi]| format!("{lo:.2}–{hi:.2}")),
            l.truncated,
            l.lost_to_cut,
            l.ungrounded
                .map_or("-".into(), |u| format!("{:.0}%", u * 100.0))
        );
    }
    print_chunks(r, several, &label);
    let repeated: Vec<_> = r
        .summary
        .iter()
        .filter_map(|l| l.repeats.as_ref().map(|s| (l, s)))
        .collect();
    if !repeated.is_empty() {
        crate::outln!("\nOver {} repeats:", r.repeat);
        for (l, s) in repeated {
            crate::outln!(
                "  {} at {}{}: F1 {} ± {} · Jaccard between repeats {} · distinct outputs per row {} (most {}) · expected records found always {}, sometimes {}, never {}",
                line_name(&l.prompt, &l.provider, several),
                l.max_tokens,
                if l.constrained { ", constrained" } else { "" },
                figure(s.f1_mean),
                figure(s.f1_sd),
                figure(s.jaccard_mean),
                s.distinct_outputs_mean
                    .map_or("-".into(), |d| format!("{d:.1}")),
                s.distinct_outputs_max,
                s.found_always,
                s.found_sometimes,
                s.found_never
            );
        }
    }
    if !r.advice.is_empty() {
        crate::outln!(
            "\nBudget advice (the smallest budget within {:.0}% of the best recall):",
            r.advice[0].within * 100.0
        );
        for a in &r.advice {
            let mut per_doc = Vec::new();
            if let Some(c) = a.cost_per_document {
                per_doc.push(format!("${c:.5} per document"));
            }
            if let Some(t) = a.completion_tokens_per_document {
                per_doc.push(format!("{t:.0} completion tokens per document"));
            }
            if let Some(size) = a.chunk_size {
                per_doc.insert(
                    0,
                    format!(
                        "chunk size {size}{} ({:.1} requests per document; best recall at chunk size {})",
                        a.context_chars
                            .filter(|c| *c > 0)
                            .map_or(String::new(), |c| format!(" with {c} characters of context")),
                        a.requests_per_document.unwrap_or(0.0),
                        a.best_chunk_size.unwrap_or(size)
                    ),
                );
            }
            crate::outln!(
                "  {}{}: {} tokens (recall {:.3}; best {:.3} at {}){}",
                line_name(&a.prompt, &a.provider, several),
                if a.constrained { ", constrained" } else { "" },
                a.max_tokens,
                a.recall,
                a.best_recall,
                a.best_max_tokens,
                if per_doc.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", per_doc.join(" · "))
                }
            );
        }
    }
    let dropping: Vec<_> = r.drops.iter().filter(|d| !d.bars.is_empty()).collect();
    if !dropping.is_empty() {
        crate::outln!("\nDropped pieces, by reason:");
        for d in dropping {
            for b in &d.bars {
                let mut rows = b
                    .rows
                    .iter()
                    .take(ROWS_SHOWN)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                if b.rows.len() > ROWS_SHOWN {
                    rows.push_str(&format!(", … {} more", b.rows.len() - ROWS_SHOWN));
                }
                crate::outln!(
                    "  {}: {} {} in {} cell(s) · rows {}",
                    line_name(&d.prompt, &d.provider, several),
                    b.objects,
                    b.kind,
                    b.cells,
                    rows
                );
            }
        }
    }
    if !r.comparisons.is_empty() {
        crate::outln!(
            "\n{} compared on the same rows (b − a):",
            if several {
                "Prompts and providers"
            } else {
                "Prompts"
            }
        );
        print_comparisons(&r.comparisons, false);
    }
    if r.cached > 0 {
        crate::outln!(
            "{} cell(s) measured by replies earlier evals bought (--cache)",
            r.cached
        );
    }
    let failed: usize = r.summary.iter().map(|l| l.failed).sum();
    if failed > 0 {
        crate::outln!(
            "{failed} cell(s) failed: `kerf eval resume {} --retry-errors` runs them again",
            r.experiment
        );
    }
    if r.pending > 0 {
        crate::outln!(
            "{} cell(s) without a finished run: `kerf eval resume {}` runs them",
            r.pending,
            r.experiment
        );
    }
}
