//! `kerf`: the command-line front end of Kerf's core.
//!
//! Exit codes (the table in the book's CLI tour, `docs/src/cli.md`, and in `kerf --help`):
//! 0 success · 1 the input failed (parse, validation, template or lint errors) · 2 usage or I/O error.

mod cmd;
mod junit;
mod output;
mod record;
mod reference;

use std::process::ExitCode;

/// mimalloc, not the system's allocator: scoring a long document allocates and frees millions
/// of small values, and glibc's allocator spent a third of the time of `kerf eval show` on a
/// 5 MB document consolidating them (13.6 s there; 8.1 s with mimalloc).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit codes: 0 done; 1 the input failed (template, schema, prompt file, dataset, lint, a reply that
parsed to nothing, a missed --fail-under or test minimum); 2 could not run (usage, I/O, provider,
network, a failed reply, work left undone); 3 the reply was cut short and what it held is parsed;
4 conflict (another process runs the same work); 130 cancelled (Ctrl-C), what finished is kept.
Commands print for people by default; --json gives machine-readable output (export always writes JSON).";

#[derive(Parser)]
#[command(name = "kerf", version, about = "Kerf: a prompt-and-schema workbench for LLM extraction prompts", after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    globals: record::Globals,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Render(cmd::render::Args),
    Parse(cmd::parse::Args),
    Chunk(cmd::chunk::Args),
    Lint(cmd::lint::Args),
    Export(cmd::export::Args),
    Import(cmd::import::Args),
    Check(cmd::check::Args),
    New(cmd::author::NewArgs),
    Twin(cmd::author::TwinArgs),
    Score(cmd::score::Args),
    Sweep(cmd::sweep::Args),
    Run(cmd::run::Args),
    Compare(cmd::compare::Args),
    Eval(Box<cmd::eval::Args>),
    Test(cmd::test::Args),
    Models(cmd::models::Args),
    Providers(cmd::providers::Args),
    History(cmd::history::Args),
    /// The CLI reference of the book (docs/src/reference/cli.md), as Markdown, from these very
    /// definitions.
    #[command(hide = true)]
    HelpMarkdown,
}

/// How a command ended when it did not fail outright. With the errors' codes, this is the exit
/// code table in the book (`docs/src/cli.md`, "Exit codes"), the same for every command:
///
/// | exit | meaning |
/// | 0 | done |
/// | 1 | the input failed (a template, schema, prompt, dataset error; nothing usable parsed; a
///       minimum missed) |
/// | 2 | could not run: usage, I/O, a provider or network error, a run that failed, work left
///       undone |
/// | 3 | the reply was cut short (its budget, Kerf's size limit, a broken stream) and what it
///       held is printed |
/// | 4 | conflict: another process is running the same work |
/// | 130 | cancelled (Ctrl-C) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The input was processed but failed (exit 1), e.g. a strict JSON reply that does not parse.
    InputFailed,
    /// Some of the work could not be done and was reported as such (exit 2), e.g. a test whose
    /// run failed.
    CouldNotRun,
    /// The reply was cut short; what it held was parsed and printed (exit 3).
    Cut,
    /// Stopped by Ctrl-C; what finished is printed (exit 130).
    Cancelled,
}

impl Outcome {
    pub fn exit_status(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::InputFailed => 1,
            Outcome::CouldNotRun => 2,
            Outcome::Cut => 3,
            Outcome::Cancelled => 130,
        }
    }
}

/// The exit status of a command that failed with `code`.
fn exit_status(code: kerf_api::Code) -> u8 {
    match code {
        kerf_api::Code::Cancelled => Outcome::Cancelled.exit_status(),
        kerf_api::Code::Conflict => 4,
        c if c.is_input_failure() => Outcome::InputFailed.exit_status(),
        _ => Outcome::CouldNotRun.exit_status(),
    }
}

fn main() -> ExitCode {
    // Templates render in a worker process with a memory limit (this executable, started again).
    kerf_core::render_worker::set_up(kerf_core::template::ENGINE);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Command::HelpMarkdown = cli.command {
        output::write_stdout(format_args!("{}", reference::markdown(Cli::command())));
        return ExitCode::SUCCESS;
    }
    let json = match &cli.command {
        Command::Render(a) => a.json,
        Command::Parse(a) => a.json,
        Command::Chunk(a) => a.json,
        Command::Lint(a) => a.json,
        Command::Export(_) => false,
        Command::Import(a) => a.json,
        Command::Check(a) => a.json,
        Command::New(a) => a.json,
        Command::Twin(a) => a.json,
        Command::Score(a) => a.json,
        Command::Sweep(a) => a.json,
        Command::Run(a) => a.json,
        Command::Compare(a) => a.json,
        Command::Eval(a) => a.json(),
        Command::Test(a) => a.json,
        Command::Models(a) => a.json(),
        Command::Providers(a) => a.json(),
        Command::History(a) => a.json(),
        Command::HelpMarkdown => false,
    };
    // The composition root: every command works in these places, and nothing below reads a
    // default place behind its back.
    let wb = &kerf_api::workbench::Workbench::of_this_machine(
        cli.globals
            .data_dir
            .as_ref()
            .map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.clone())),
        kerf_api::workbench::shipped_prompts(),
    );
    let globals = &cli.globals;
    init_tracing();
    let result = match cli.command {
        Command::Render(a) => cmd::render::run(a, wb),
        Command::Parse(a) => cmd::parse::run(a),
        Command::Chunk(a) => cmd::chunk::run(a),
        Command::Lint(a) => cmd::lint::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::New(a) => cmd::author::run_new(a),
        Command::Twin(a) => cmd::author::run_twin(a),
        Command::Score(a) => cmd::score::run(a),
        Command::Sweep(a) => cmd::sweep::run(a, wb, globals),
        Command::Run(a) => cmd::run::run(a, wb, globals),
        Command::Compare(a) => cmd::compare::run(a, wb, globals),
        Command::Eval(a) => cmd::eval::run(*a, wb, globals),
        Command::Test(a) => cmd::test::run(a, wb, globals),
        Command::Models(a) => cmd::models::run(a, wb),
        Command::Providers(a) => cmd::providers::run(a, wb),
        Command::History(a) => cmd::history::run(a, wb, globals),
        Command::HelpMarkdown => Ok(Outcome::Ok),
    };
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_status()),
        Err(err) => {
            let code = match err.downcast_ref::<kerf_api::ApiError>() {
                Some(e) => e.code,
                None => classify(&err),
            };
            let (code, status) = (code.as_str(), exit_status(code));
            crate::errln!("kerf: error[{code}]: {err:#}");
            if json {
                output::print_json(
                    &serde_json::json!({"error": {"code": code, "message": format!("{err:#}")}}),
                );
            }
            ExitCode::from(status)
        }
    }
}

/// The code of an error that is not an `ApiError` itself: the first cause in its chain that
/// has one (a parse error read straight from kerf-core, say).
fn classify(err: &anyhow::Error) -> kerf_api::Code {
    err.chain()
        .find_map(kerf_api::Code::of)
        .unwrap_or(kerf_api::Code::Internal)
}

/// Whether standard error is a terminal that takes colour (`NO_COLOR` unset).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Logs go through `tracing`: llama.cpp's lines are kept for reports (what it offloaded) and
/// shown only when asked (`KERF_LOG=llama-cpp-2=info`); Kerf's own warnings show by default.
fn init_tracing() {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("KERF_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=off"));
    let _ = tracing_subscriber::registry()
        .with(kerf_llama::logs::Capture)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(true)
                // Colour only for a person at a terminal: a pipe or a CI log gets plain text.
                .with_ansi(colour_on_stderr())
                .with_filter(filter),
        )
        .try_init();
}
