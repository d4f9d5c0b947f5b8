//! `kerf history`: every run, compare and sweep Kerf has recorded — list, show, diff, rerun,
//! export, tag, note, delete.

use std::io::IsTerminal;
use std::path::PathBuf;

use super::settings::SettingFlags;
use anyhow::Result;
use clap::Subcommand;
use kerf_api::history::{self, Filter, RunRecord, RunSummary, Status, Store};
use kerf_api::workbench::Workbench;
use serde_json::json;

use super::run::ConstrainArg;
use crate::Outcome;
use crate::output::print_json;
use crate::record::Globals;

/// Browse and reuse the history of runs and experiments (kept in history.sqlite in Kerf's data
/// directory; see --data-dir).
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf history list --status truncated --since 7d
  kerf history show last
  kerf history diff 12 15
  kerf history rerun 12 --provider openai --max-tokens 1024
  kerf history export --format csv --prompt agent-kg-extract > runs.csv
  kerf history tag 12 baseline
  kerf history show e3          (an experiment: a compare or a sweep)

RUN is a run's number (from `list`) or `last`. `kerf run`, `compare` and `sweep` record here
unless given --no-history.")]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Subcommand)]
pub enum Sub {
    /// Runs, newest first (filters combine).
    List(ListArgs),
    /// One run in full (rendered prompt, raw reply, report), or an experiment (`e3`).
    Show(ShowArgs),
    /// What changed between two runs: prompt text, input, parameters, outcome, objects.
    Diff(DiffArgs),
    /// Run a stored run again: the same prompt version, input and parameters; any `kerf run`
    /// flag given after RUN overrides the stored one.
    Rerun(RerunArgs),
    /// Every matching run as JSON lines (full records) or CSV (one summary row each).
    Export(ExportArgs),
    /// Compares and sweeps, newest first.
    Experiments(ExperimentsArgs),
    /// Add tags to a run (or --remove them).
    Tag(TagArgs),
    /// Set a run's note (an empty TEXT clears it).
    Note(NoteArgs),
    /// Delete runs (asks first unless --yes).
    Delete(DeleteArgs),
}

impl Args {
    pub fn json(&self) -> bool {
        match &self.command {
            Sub::List(a) => a.json,
            Sub::Show(a) => a.json,
            Sub::Diff(a) => a.json,
            Sub::Experiments(a) => a.json,
            Sub::Rerun(a) => a.json,
            _ => false,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy)]
pub enum StatusArg {
    Running,
    Submitted,
    Ok,
    Truncated,
    Interrupted,
    Error,
}

impl From<StatusArg> for Status {
    fn from(s: StatusArg) -> Self {
        match s {
            StatusArg::Running => Status::Running,
            StatusArg::Submitted => Status::Submitted,
            StatusArg::Ok => Status::Ok,
            StatusArg::Truncated => Status::Truncated,
            StatusArg::Interrupted => Status::Interrupted,
            StatusArg::Error => Status::Error,
        }
    }
}

/// Which runs: shared by `list` and `export`.
#[derive(clap::Args)]
pub struct FilterArgs {
    /// A prompt's id, or the start of a prompt version (6+ hex digits).
    #[arg(long)]
    pub prompt: Option<String>,
    #[arg(long, value_enum)]
    pub status: Option<StatusArg>,
    /// `local`, or a configured provider's name.
    #[arg(long)]
    pub provider: Option<String>,
    /// Part of the model's path or id.
    #[arg(long)]
    pub model: Option<String>,
    /// Created at or after: YYYY-MM-DD, an RFC 3339 time, or an age (30m, 12h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Created before (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    #[arg(long)]
    pub tag: Option<String>,
    /// Runs of one experiment.
    #[arg(long)]
    pub experiment: Option<i64>,
}

impl FilterArgs {
    fn filter(&self, limit: Option<usize>) -> Result<Filter> {
        let query = kerf_api::history::Query {
            prompt: self.prompt.clone(),
            status: self.status.map(Into::into),
            provider: self.provider.clone(),
            model: self.model.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            tag: self.tag.clone(),
            experiment: self.experiment,
            limit,
        };
        Ok(query.filter(&|field| format!("--{field}"))?)
    }
}

#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// At most this many (0: all).
    #[arg(long, default_value_t = 30)]
    pub limit: usize,
    /// An array of runs, newest first: {id, status, prompt, prompt_version, provider, model,
    /// created_at, objects, dropped, truncated, finish_reason, tokens, cost_usd, tags, note, …}.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// A run (number or `last`), or an experiment (`e3`).
    pub run: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct DiffArgs {
    pub a: String,
    pub b: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RerunArgs {
    pub run: String,
    #[command(flatten)]
    pub overrides: OverrideArgs,
    /// Machine-readable output (one JSON object at the end; nothing streamed).
    #[arg(long)]
    pub json: bool,
}

/// `kerf run`'s settings, each replacing the stored one when given (a value may begin with
/// `-`: `--stop '-->'`).
#[derive(clap::Args)]
pub struct OverrideArgs {
    /// Another provider (`local`, or a configured one); its own model and structured mode
    /// unless --model/--structured are given too.
    #[arg(long, allow_hyphen_values = true)]
    pub provider: Option<String>,
    /// Another model: a GGUF file for the local provider, a model id for a cloud one.
    #[arg(long, allow_hyphen_values = true)]
    pub model: Option<String>,
    #[command(flatten)]
    pub settings: SettingFlags,
    /// Clear the stored stop strings.
    #[arg(long, conflicts_with = "stop")]
    pub no_stop: bool,
    /// Another budget, in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Hold the reply to the schema (auto) or not (none).
    #[arg(long, value_enum)]
    pub constrain: Option<ConstrainArg>,
}

impl OverrideArgs {
    /// The flags as the use case's patch: one field each, nothing re-parsed.
    pub fn overrides(&self) -> kerf_api::runs::Overrides {
        let mut settings = self.settings.patch();
        if self.no_stop {
            settings.stop = Some(Vec::new());
        }
        kerf_api::runs::Overrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            settings,
            max_tokens: self.max_tokens,
            constrain: self.constrain.map(|c| c == ConstrainArg::Auto),
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

#[derive(clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: ExportFormat,
    /// Write here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ExperimentsArgs {
    #[arg(long, default_value_t = 30)]
    pub limit: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct TagArgs {
    pub run: String,
    #[arg(required = true)]
    pub tags: Vec<String>,
    #[arg(long)]
    pub remove: bool,
}

#[derive(clap::Args)]
pub struct NoteArgs {
    pub run: String,
    pub text: String,
}

#[derive(clap::Args)]
pub struct DeleteArgs {
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Do not ask.
    #[arg(long)]
    pub yes: bool,
}

/// A run named on the command line: its number, or `last`.
fn run_id(store: &Store, text: &str) -> Result<i64> {
    if text == "last" {
        return Ok(history::last(store)?);
    }
    text.trim_start_matches(['r', '#']).parse().map_err(|_| {
        kerf_core::Error::Usage(format!(
            "`{text}` is not a run: give its number (see `kerf history list`) or `last`"
        ))
        .into()
    })
}

pub fn run(args: Args, wb: &Workbench, globals: &Globals) -> Result<Outcome> {
    let store = crate::record::open_for_reading(wb)?;
    match args.command {
        Sub::List(a) => list(&store, &a),
        Sub::Show(a) => show(&store, &a),
        Sub::Diff(a) => diff(&store, &a),
        Sub::Rerun(a) => rerun(&store, a, wb, globals),
        Sub::Export(a) => export(&store, &a),
        Sub::Experiments(a) => experiments(&store, &a),
        Sub::Tag(a) => {
            let id = run_id(&store, &a.run)?;
            let tags = kerf_api::history::tag(&store, id, &a.tags, a.remove)?;
            crate::errln!(
                "kerf: run {id} tags: {}",
                if tags.is_empty() {
                    "(none)".into()
                } else {
                    tags.join(", ")
                }
            );
            Ok(Outcome::Ok)
        }
        Sub::Note(a) => {
            let id = run_id(&store, &a.run)?;
            kerf_api::history::note(&store, id, Some(a.text.as_str()))?;
            Ok(Outcome::Ok)
        }
        Sub::Delete(a) => delete(&store, &a),
    }
}

fn list(store: &Store, a: &ListArgs) -> Result<Outcome> {
    let runs = history::list(store, &a.filter.filter(Some(a.limit).filter(|n| *n > 0))?)?;
    if a.json {
        print_json(&serde_json::to_value(&runs)?);
        return Ok(Outcome::Ok);
    }
    if runs.is_empty() {
        crate::outln!(
            "No runs match. Runs appear here after `kerf run`, `kerf compare` or the app."
        );
        return Ok(Outcome::Ok);
    }
    let prompt_w = runs
        .iter()
        .map(|r| r.prompt.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    crate::outln!(
        "{:>5}  {:<20}  {:<11}  {:<prompt_w$}  {:<9}  {:>7}  {:>7}  {:<6}  {:>6}  model",
        "run",
        "created",
        "status",
        "prompt",
        "provider",
        "objects",
        "dropped",
        "finish",
        "tokens"
    );
    for r in &runs {
        crate::outln!(
            "{:>5}  {:<20}  {:<11}  {:<prompt_w$}  {:<9}  {:>7}  {:>7}  {:<6}  {:>6}  {}{}",
            r.id,
            r.created_at,
            r.status.as_str(),
            r.prompt,
            r.provider,
            opt(r.objects),
            opt(r.dropped),
            r.finish_reason.map_or("-", |r| r.as_str()),
            opt(r.completion_tokens),
            short_model(&r.model),
            labels(r)
        );
    }
    Ok(Outcome::Ok)
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A model path's file name (ids stay whole).
fn short_model(m: &str) -> &str {
    if m.ends_with(".gguf") {
        m.rsplit('/').next().unwrap_or(m)
    } else {
        m
    }
}

/// Tags, note and experiment, after a list row.
fn labels(r: &RunSummary) -> String {
    let mut s = String::new();
    if let Some(e) = r.experiment {
        s.push_str(&format!("  [e{e}]"));
    }
    for t in &r.tags {
        s.push_str(&format!("  #{t}"));
    }
    if let Some(n) = &r.note {
        s.push_str(&format!(
            "  “{}”",
            crate::output::compact(&json!(n), 40).trim_matches('"')
        ));
    }
    s
}

fn show(store: &Store, a: &ShowArgs) -> Result<Outcome> {
    if let Some(e) = a.run.strip_prefix('e').and_then(|n| n.parse::<i64>().ok()) {
        let x = history::experiment(store, e)?;
        if a.json {
            print_json(&serde_json::to_value(&x)?);
        } else {
            crate::outln!(
                "experiment e{} · {} · {} · {}",
                x.summary.id,
                x.summary.kind,
                x.summary.status,
                x.summary.created_at
            );
            crate::outln!("asked: {}", crate::output::compact(&x.spec, 300));
            if let Some(err) = &x.error {
                crate::outln!("error: {err}");
            }
            for r in &x.run_list {
                crate::outln!(
                    "  run {:>5}  {:<11}  {:<24} {:>4} objects  finish {:<9} {:>5} tokens  max_tokens {}",
                    r.id,
                    r.status.as_str(),
                    r.prompt,
                    opt(r.objects),
                    r.finish_reason.map_or("-", |r| r.as_str()),
                    opt(r.completion_tokens),
                    opt(r.max_tokens)
                );
            }
            if x.summary.kind == kerf_api::experiments::ExperimentKind::Sweep
                && let Some(result) = &x.result
            {
                crate::outln!("curves: {}", crate::output::compact(result, 400));
            }
        }
        return Ok(Outcome::Ok);
    }
    // The run the History screen shows: --json is its serialisation.
    let detail = kerf_api::history::detail(store, run_id(store, &a.run)?)?;
    if a.json {
        print_json(&serde_json::to_value(&detail)?);
        return Ok(Outcome::Ok);
    }
    print_record(&detail.record, &detail.version);
    Ok(Outcome::Ok)
}

fn print_record(rec: &RunRecord, version: &history::PromptVersion) {
    let s = &rec.summary;
    crate::outln!(
        "run {} · {} · {}{}{}",
        s.id,
        s.status.as_str(),
        s.created_at,
        rec.finished_at
            .as_ref()
            .map(|f| format!(" → {f}"))
            .unwrap_or_default(),
        s.rerun_of
            .map(|r| format!(" · rerun of {r}"))
            .unwrap_or_default()
    );
    crate::outln!(
        "prompt: {} (version {}{}) · {}",
        s.prompt,
        &s.prompt_version[..12],
        version
            .path
            .as_ref()
            .map(|p| format!(", {p}"))
            .unwrap_or_default(),
        version.response_type
    );
    crate::outln!(
        "provider: {} · model: {}{}",
        s.provider,
        s.model,
        rec.model_sha256
            .as_ref()
            .map(|h| format!(" (sha256 {}…)", &h[..12]))
            .unwrap_or_default()
    );
    let params: Vec<String> = rec
        .params
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !matches!(k.as_str(), "argv" | "params_version") && !v.is_null())
        .map(|(k, v)| format!("{k}={}", crate::output::compact(v, 60)))
        .collect();
    crate::outln!("params: {}", params.join(" "));
    if !s.tags.is_empty() || s.note.is_some() {
        crate::outln!(
            "tags: {} · note: {}",
            if s.tags.is_empty() {
                "-".into()
            } else {
                s.tags.join(", ")
            },
            s.note.as_deref().unwrap_or("-")
        );
    }
    crate::outln!(
        "finish: {} · tokens: {} prompt + {} completion{} · {} tok/s · first token {}s{}",
        s.finish_reason.map_or("-", |r| r.as_str()),
        opt(s.prompt_tokens),
        opt(s.completion_tokens),
        rec.usage
            .and_then(|u| u.reasoning_tokens)
            .map(|r| format!(" ({r} reasoning)"))
            .unwrap_or_default(),
        rec.timings
            .map_or("-".into(), |t| format!("{:.1}", t.tokens_per_second)),
        rec.timings
            .and_then(|t| t.first_token_seconds)
            .map_or("-".into(), |t| format!("{t:.2}")),
        s.cost_usd
            .map(|c| format!(" · cost ~${c:.5}"))
            .unwrap_or_default()
    );
    if let Some(e) = &s.error {
        crate::outln!("error: [{}] {e}", rec.error_code.as_deref().unwrap_or("?"));
    }
    if let Some(r) = &rec.report {
        crate::outln!(
            "report: {} object(s), {}",
            r.objects.len(),
            crate::output::dropped_phrase(r, ", reply CUT OFF")
        );
        crate::output::print_drops(r, "   ");
    }
    if !rec.earlier.is_empty() {
        crate::outln!(
            "repair: {} earlier repl{} (see --json `earlier`)",
            rec.earlier.len(),
            if rec.earlier.len() == 1 { "y" } else { "ies" }
        );
    }
    if let Some(system) = &rec.system {
        crate::outln!("\n── system ──\n{system}");
    }
    crate::outln!("\n── user ──\n{}", rec.user);
    crate::outln!("\n── reply ({} bytes) ──\n{}", rec.raw.len(), rec.raw);
}

fn diff(store: &Store, a: &DiffArgs) -> Result<Outcome> {
    let d = kerf_api::history::diff(store, run_id(store, &a.a)?, run_id(store, &a.b)?)?;
    if a.json {
        print_json(&serde_json::to_value(&d)?);
        return Ok(Outcome::Ok);
    }
    let (x, y) = (&d.a, &d.b);
    crate::outln!(
        "run {} ({}) → run {} ({})",
        x.id,
        x.created_at,
        y.id,
        y.created_at
    );
    let (va, vb) = (&d.prompt_versions.0[..12], &d.prompt_versions.1[..12]);
    match &d.prompt.diff {
        None => crate::outln!("prompt: same version ({va}, {})", d.prompt_name),
        Some(text) => crate::outln!("prompt: {va} → {vb}\n{text}"),
    }
    match &d.input.diff {
        None => crate::outln!("input: same"),
        Some(text) => crate::outln!("input: changed\n{text}"),
    }
    if d.params.is_empty() {
        crate::outln!("parameters: same");
    } else {
        crate::outln!("parameters:");
        for p in &d.params {
            crate::outln!(
                "  {}: {} → {}",
                p.name,
                crate::output::compact(&p.a, 80),
                crate::output::compact(&p.b, 80)
            );
        }
    }
    crate::outln!(
        "outcome: {} → {} · finish {} → {} · objects {} → {} · dropped {} → {} · tokens {} → {}",
        x.status,
        y.status,
        x.finish_reason.map_or("-", |r| r.as_str()),
        y.finish_reason.map_or("-", |r| r.as_str()),
        opt(x.objects),
        opt(y.objects),
        opt(x.dropped),
        opt(y.dropped),
        opt(x.completion_tokens),
        opt(y.completion_tokens),
    );
    if let Some((da, db)) = &d.devices {
        crate::outln!(
            "warning: run {} ran on {da}, run {} on {db}: greedy output differs between devices, so some of this difference may come from that alone",
            x.id,
            y.id
        );
    }
    let o = &d.objects;
    crate::outln!(
        "objects: {} unchanged, {} added, {} removed, {} changed",
        o.unchanged,
        o.added.len(),
        o.removed.len(),
        o.changed.len()
    );
    if o.bounded {
        crate::outln!(
            "  (pairing stopped after {} comparisons: some objects counted as removed and added may be changed versions of each other)",
            kerf_core::diff::MAX_PAIRING_WORK
        );
    }
    for v in &o.added {
        crate::outln!("  + {}", crate::output::compact(v, 160));
    }
    for v in &o.removed {
        crate::outln!("  - {}", crate::output::compact(v, 160));
    }
    for (p, q) in &o.changed {
        crate::outln!("  ~ {}", crate::output::compact(p, 120));
        for (k, before, after) in kerf_core::diff::changed_fields(p, q) {
            crate::outln!(
                "      {k}: {} → {}",
                crate::output::compact(&before, 70),
                crate::output::compact(&after, 70)
            );
        }
    }
    Ok(Outcome::Ok)
}

fn rerun(store: &Store, a: RerunArgs, wb: &Workbench, globals: &Globals) -> Result<Outcome> {
    let id = run_id(store, &a.run)?;
    // The stored run made ready to run again, as the History screen's Rerun takes it: every
    // stored setting, whichever front end recorded it (bug A: a window run has no CLI flags,
    // and was rerun on the defaults); then the flags given, each replacing one setting.
    let mut replay = kerf_api::history::replay(store, id)?;
    a.overrides.overrides().apply(&mut replay.params);
    let provider = replay.params.settings.provider(wb)?;
    if !a.json {
        crate::errln!(
            "kerf: rerunning run {id} ({}, {})",
            replay.record.summary.prompt,
            replay.record.summary.created_at
        );
    }
    let history = crate::record::open(wb, globals)?;
    super::run::run_job(&replay.job(&provider), a.json, history.as_ref())
}

/// Runs as JSON lines (full records) or CSV (one row per run), written one run at a time
/// (kerf-api's export): the memory an export takes does not grow with the history, and a file
/// is complete or absent.
fn export(store: &Store, a: &ExportArgs) -> Result<Outcome> {
    let mut sink = crate::output::Sink::to(a.output.as_deref())?;
    let format = match a.format {
        ExportFormat::Jsonl => kerf_api::history::ExportFormat::Jsonl,
        ExportFormat::Csv => kerf_api::history::ExportFormat::Csv,
    };
    let mut failed = None;
    let written = kerf_api::history::export(store, &a.filter.filter(None)?, format, &mut |line| {
        sink.put(line).map_err(|e| {
            let message = format!("{e:#}");
            failed = Some(e);
            kerf_api::ApiError::new(kerf_api::Code::Io, message)
        })
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let written = written?;
    sink.finish()?;
    if let Some(p) = &a.output {
        crate::errln!("kerf: wrote {written} run(s) to {}", p.display());
    }
    Ok(Outcome::Ok)
}

fn experiments(store: &Store, a: &ExperimentsArgs) -> Result<Outcome> {
    let list = kerf_api::history::experiments(store, Some(a.limit).filter(|n| *n > 0))?;
    if a.json {
        print_json(&serde_json::to_value(&list)?);
        return Ok(Outcome::Ok);
    }
    if list.is_empty() {
        crate::outln!(
            "No experiments yet: `kerf compare`, `eval`, `sweep` and `test` record one each."
        );
    }
    for e in &list {
        crate::outln!(
            "e{:<5} {:<8} {:<11} {}  {} run(s){}",
            e.id,
            e.kind,
            e.status,
            e.created_at,
            e.runs,
            e.note
                .as_ref()
                .map(|n| format!("  “{n}”"))
                .unwrap_or_default()
        );
    }
    Ok(Outcome::Ok)
}

fn delete(store: &Store, a: &DeleteArgs) -> Result<Outcome> {
    let ids = a
        .runs
        .iter()
        .map(|r| run_id(store, r))
        .collect::<Result<Vec<_>>>()?;
    let runs = history::runs(store, &ids)?;
    if !a.yes {
        if !std::io::stdin().is_terminal() {
            return Err(kerf_core::Error::Usage(
                "kerf history delete asks before deleting; pass --yes to delete without asking"
                    .into(),
            )
            .into());
        }
        for r in &runs {
            crate::errln!(
                "  run {} · {} · {} · {}",
                r.summary.id,
                r.summary.prompt,
                r.summary.status,
                r.summary.created_at
            );
        }
        eprint!(
            "Delete {} run(s)? This cannot be undone. [y/N] ",
            runs.len()
        );
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            crate::errln!("kerf: nothing deleted");
            return Ok(Outcome::Ok);
        }
    }
    history::delete(store, &ids)?;
    crate::errln!("kerf: deleted {} run(s)", runs.len());
    Ok(Outcome::Ok)
}
