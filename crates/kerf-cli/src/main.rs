//! `kerf`: the command-line front end of Kerf's core.
//!
//! Exit codes (documented in the README and in `kerf --help`):
//! 0 success · 1 the input failed (parse, validation, template or lint errors) · 2 usage or I/O error.

mod chart;
mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit codes: 0 success; 1 the input failed (parse, validation, template or lint errors); 2 usage or I/O error.
Commands print for people by default; --json gives machine-readable output (export always writes JSON).";

#[derive(Parser)]
#[command(name = "kerf", version, about = "Kerf: a prompt-and-schema workbench for LLM extraction prompts", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Render(cmd::render::Args),
    Parse(cmd::parse::Args),
    Lint(cmd::lint::Args),
    Export(cmd::export::Args),
    Import(cmd::import::Args),
    Check(cmd::check::Args),
    Sweep(cmd::sweep::Args),
}

/// How a command ended when it did not fail outright.
pub enum Outcome {
    Ok,
    /// The input was processed but failed (exit 1), e.g. a strict JSON reply that does not parse.
    InputFailed,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let json = match &cli.command {
        Command::Render(a) => a.json,
        Command::Parse(a) => a.json,
        Command::Lint(a) => a.json,
        Command::Export(_) => false,
        Command::Import(a) => a.json,
        Command::Check(a) => a.json,
        Command::Sweep(a) => a.json,
    };
    let result = match cli.command {
        Command::Render(a) => cmd::render::run(a),
        Command::Parse(a) => cmd::parse::run(a),
        Command::Lint(a) => cmd::lint::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::InputFailed) => ExitCode::from(1),
        Err(err) => {
            let (code, status) = match err.downcast_ref::<kerf_core::Error>() {
                Some(e) if e.is_environmental() => (e.code(), 2),
                Some(e) => (e.code(), 1),
                None => ("internal", 2),
            };
            eprintln!("kerf: error[{code}]: {err:#}");
            if json {
                output::print_json(
                    &serde_json::json!({"error": {"code": code, "message": format!("{err:#}")}}),
                );
            }
            ExitCode::from(status)
        }
    }
}
