//! `kerf test`: the tests prompt files carry, for CI.

use std::path::PathBuf;

use anyhow::Result;
use kerf_api::eval::suites::{self, TestReport, TestResult, Verdict};
use kerf_api::experiments::ExperimentKind;
use kerf_api::workbench::Workbench;

use super::run::{ModelArgs, interrupt_token};
use crate::output::print_json;
use crate::{Outcome, junit};

/// Run the tests prompt files carry (`tests`) and hold each reply to its minimums.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf test prompts/agent-kg-extract.json
  kerf test prompts/*.json --provider openai --concurrency 8 --junit kerf-tests.xml
  kerf test prompts/agent-kg-extract.json --provider openai,local   every test on both
  kerf test --resume                        take the latest interrupted tests up again

A test in a prompt file: {\"name\": \"…\", \"input\": \"…\" (or \"vars\": {…}), \"expected\": [records],
\"min\": {\"precision\": 0.8, \"recall\": 0.8, \"f1\": 0.8}, \"max-tokens\": 1024}. Every test is checked
against its prompt before any runs; each run is kept in the history. With several providers,
every test runs on each, side by side. Lines print as tests end; the summary, --json and JUnit
list them provider by provider, in the files' order. --json prints
{\"passed\", \"failed\", \"errors\", \"tests\": [{\"prompt\", \"name\", \"provider\", \"verdict\",
\"max_tokens\", \"run\", \"finish_reason\", \"objects\", \"scores\", \"missed\", \"error\"}]}.
Exit codes: 0 every test passed; 1 a minimum missed; 2 a test could not run (or bad input).")]
pub struct Args {
    /// Prompt files whose tests to run.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    pub prompts: Vec<PathBuf>,
    #[command(flatten)]
    pub resume: super::ResumeArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The output token budget of tests that set no `max-tokens`.
    #[arg(long, default_value_t = 1024)]
    pub max_tokens: u32,
    /// Also write the results as JUnit XML: a suite per prompt (per prompt and provider, with
    /// several providers), a case per test.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the results as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Tests in flight at once (cloud providers, within their rate limits; the local engine
    /// runs one at a time).
    #[arg(long, default_value_t = kerf_api::eval::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    #[command(flatten)]
    pub allow: super::AllowArgs,
}

pub fn run(args: Args, wb: &Workbench, globals: &crate::record::Globals) -> Result<Outcome> {
    if let Some(id) = args.resume.resume {
        return resume(&args, id, wb, globals);
    }
    // Every prompt and test checked before anything is bought.
    let subjects = suites::load(&args.prompts)?;
    for (s, _) in &subjects {
        crate::output::warn_all(&s.prompt.warnings);
    }
    let settings = args.model.settings();
    let providers = kerf_api::runs::providers(wb, &settings, &args.model.providers)?;
    let several = providers.len() > 1;
    let params = suites::params(settings, args.max_tokens);
    let job = suites::TestJob {
        suites: &subjects,
        params: &params,
        concurrency: args.concurrency,
    };
    let size = suites::plan(&job, &providers, args.allow.allowance())?;
    super::announce(&size);
    if args.allow.dry_run {
        return Ok(Outcome::Ok);
    }
    let history = crate::record::open(wb, globals)?;
    let cancel = interrupt_token();
    let report = suites::run(
        history.as_ref(),
        &job,
        &providers,
        &size,
        &cancel,
        &mut |r| {
            if !args.json {
                print_line(r, several);
            }
        },
    )?;
    let names: Vec<String> = providers.iter().map(|p| p.name()).collect();
    show(&args, &report, &names)
}

/// `kerf test --resume`: the tests' own prompt versions, providers and settings, from the
/// history; only the tests not measured before are run.
fn resume(
    args: &Args,
    id: Option<i64>,
    wb: &Workbench,
    globals: &crate::record::Globals,
) -> Result<Outcome> {
    let (store, id) = args.resume.which(id, ExperimentKind::Test, wb, globals)?;
    let resumption = suites::resumption(wb, &store, id, args.resume.input(&args.allow))?;
    super::announce(resumption.size());
    if args.allow.dry_run {
        return Ok(Outcome::Ok);
    }
    let providers: Vec<String> = resumption.providers().iter().map(|p| p.name()).collect();
    let several = providers.len() > 1;
    let report = resumption.run(&store, &interrupt_token(), &mut |r| {
        if !args.json {
            print_line(r, several);
        }
    })?;
    show(args, &report, &providers)
}

/// The report: JUnit when asked, then --json or the summary; the exit code its verdicts give.
fn show(args: &Args, report: &TestReport, providers: &[String]) -> Result<Outcome> {
    let several = providers.len() > 1;
    let TestReport {
        passed,
        failed,
        errors,
        tests: results,
    } = report;
    let (passed, failed, errors) = (*passed, *failed, *errors);
    if let Some(path) = &args.junit {
        let mut suites: Vec<(String, Vec<junit::Case>)> = Vec::new();
        for r in results {
            let case = junit::Case {
                name: r.name.clone(),
                outcome: match r.verdict {
                    Verdict::Passed => junit::Outcome::Passed,
                    Verdict::Failed => junit::Outcome::Failed(r.missed.join("; ")),
                    Verdict::Error => junit::Outcome::Error(r.error.clone().unwrap_or_default()),
                },
                figures: figures(r),
            };
            let suite = suite_name(r, several);
            match suites.iter_mut().find(|(p, _)| *p == suite) {
                Some((_, cases)) => cases.push(case),
                None => suites.push((suite, vec![case])),
            }
        }
        junit::write(path, "kerf test", suites)?;
    }
    if args.json {
        print_json(&serde_json::to_value(report)?);
    } else {
        if several {
            for p in providers {
                let name = p;
                let mine: Vec<&TestResult> =
                    results.iter().filter(|r| &r.provider == name).collect();
                let n = |v: Verdict| mine.iter().filter(|r| r.verdict == v).count();
                crate::outln!(
                    "{name}: {} passed, {} failed, {} could not run",
                    n(Verdict::Passed),
                    n(Verdict::Failed),
                    n(Verdict::Error)
                );
            }
        }
        crate::outln!("{passed} passed, {failed} failed, {errors} could not run");
    }
    Ok(if errors > 0 {
        Outcome::CouldNotRun
    } else if failed > 0 {
        Outcome::InputFailed
    } else {
        Outcome::Ok
    })
}

fn figures(r: &TestResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    match &r.scores {
        Some(s) => format!(
            "{} objects · tp {} fp {} fn {} · precision {} recall {} F1 {} · finish {} at {} tokens",
            r.objects,
            s.tp,
            s.fp,
            s.fn_,
            f(s.precision),
            f(s.recall),
            f(s.f1),
            r.finish_reason.map_or("-".into(), |f| f.to_string()),
            r.max_tokens
        ),
        None => String::new(),
    }
}

/// A test's prompt as a suite names it: with its provider, when the tests ran on several.
fn suite_name(r: &TestResult, several: bool) -> String {
    if several {
        format!("{} on {}", r.prompt, r.provider)
    } else {
        r.prompt.clone()
    }
}

fn print_line(r: &TestResult, several: bool) {
    let mark = match r.verdict {
        Verdict::Passed => "pass",
        Verdict::Failed => "FAIL",
        Verdict::Error => "ERROR",
    };
    let why = match r.verdict {
        Verdict::Passed => String::new(),
        Verdict::Failed => format!(" — {}", r.missed.join("; ")),
        Verdict::Error => format!(" — {}", r.error.as_deref().unwrap_or("")),
    };
    crate::outln!(
        "{mark:<5} {} / {}: {}{why}",
        suite_name(r, several),
        r.name,
        figures(r)
    );
}
