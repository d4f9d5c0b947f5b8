//! One module per subcommand: argument struct (with `--help` examples) and `run`.

pub mod author;
pub mod check;
pub mod chunk;
pub mod compare;
pub mod eval;
pub mod export;
pub mod history;
pub mod import;
pub mod lint;
pub mod models;
pub mod parse;
pub mod providers;
pub mod render;
pub mod run;
pub mod score;
pub mod settings;
pub mod sweep;
pub mod test;

use std::path::Path;

use anyhow::Result;

/// Load and compile a prompt file, printing its warnings (even when compiling then fails).
pub fn load_prompt(path: &Path) -> Result<kerf_core::Prompt> {
    let loaded = kerf_core::PromptFile::load(path)?;
    crate::output::warn_all(&loaded.warnings);
    Ok(kerf_core::Prompt::from_loaded(loaded, path)?)
}

/// A prompt file as every run, compare, eval and test runs it (kerf-api's one loader: one read,
/// the text kept as the prompt version), its warnings printed.
pub fn load_subject(path: &Path) -> Result<kerf_api::experiments::Subject> {
    let subject = kerf_api::experiments::Subject::load(path)?;
    crate::output::warn_all(&subject.prompt.warnings);
    Ok(subject)
}

/// What an experiment may send: a plan over 2,000 requests is refused without one of these.
#[derive(clap::Args, Clone, Copy)]
pub struct AllowArgs {
    /// The most requests the whole plan may send; a larger plan is refused before anything is
    /// sent (needed, or --yes, when a plan would send more than 2,000). Not --max-requests:
    /// that is the ceiling of one run, repairs included.
    #[arg(long, value_name = "N")]
    pub allow_requests: Option<u64>,
    /// Start a plan of any size (it is still announced first).
    #[arg(long)]
    pub yes: bool,
    /// Announce the plan (cells, requests, token and cost bounds) and stop: nothing is stored
    /// or sent.
    #[arg(long)]
    pub dry_run: bool,
}

impl AllowArgs {
    pub fn allowance(&self) -> kerf_api::experiments::plan::Allowance {
        kerf_api::experiments::plan::Allowance {
            max_requests: self.allow_requests,
            yes: self.yes,
        }
    }
}

/// Taking an interrupted experiment up again instead of starting one (`kerf compare --resume`,
/// `kerf test --resume`).
#[derive(clap::Args)]
pub struct ResumeArgs {
    /// Take an interrupted one up again — the latest, or experiment ID — with its own prompts,
    /// input, providers and settings from the history: what it measured before is not bought
    /// again.
    #[arg(long, value_name = "ID", num_args = 0..=1)]
    pub resume: Option<Option<i64>>,
    /// With --resume: go on although a provider's name now points at another endpoint or served
    /// model than the experiment's runs came from (it then mixes the two).
    #[arg(long, requires = "resume")]
    pub allow_endpoint_change: bool,
}

impl ResumeArgs {
    /// The history, and the experiment of `kind` to take up (the latest when no id is given).
    pub fn which(
        &self,
        id: Option<i64>,
        kind: kerf_api::experiments::ExperimentKind,
        wb: &kerf_api::workbench::Workbench,
        globals: &crate::record::Globals,
    ) -> anyhow::Result<(kerf_api::history::Store, i64)> {
        let Some(store) = crate::record::open(wb, globals)? else {
            anyhow::bail!(kerf_api::ApiError::new(
                kerf_api::Code::Usage,
                "--resume takes an experiment up from the history: drop --no-history"
            ));
        };
        let id = match id {
            Some(id) => id,
            None => kerf_api::experiments::lifecycle::latest(&store, kind)?,
        };
        Ok((store, id))
    }

    /// What a resume may do, from these flags and `allow`'s.
    pub fn input(&self, allow: &AllowArgs) -> kerf_api::experiments::lifecycle::ResumeInput {
        kerf_api::experiments::lifecycle::ResumeInput {
            retry_errors: false,
            allowed: allow.allowance(),
            endpoint_changed: self.allow_endpoint_change,
        }
    }
}

/// The plan's size, said before its first request: on stderr, so `--json` stays one object.
pub fn announce(size: &kerf_api::experiments::plan::Size) {
    crate::errln!("kerf: {} plan: {}", size.kind.as_str(), size.line());
}

/// How to read a reply: a prompt file, or a response type with an optional schema. Shared by
/// every command that parses replies (`parse`, `sweep`).
#[derive(clap::Args)]
pub struct ReplyArgs {
    /// Response type; defaults to the prompt's when --prompt is given.
    #[arg(long = "type", value_enum)]
    pub response_type: Option<parse::TypeArg>,
    /// A JSON Schema file: of the whole value for json, of each line for jsonl, of each record for delimited.
    #[arg(long, conflicts_with = "prompt")]
    pub schema: Option<std::path::PathBuf>,
    /// A prompt file: its response type, schema, delimiters and post-processing rules apply.
    #[arg(long)]
    pub prompt: Option<std::path::PathBuf>,
    /// For json: recover complete elements from a cut-off or partly invalid reply instead of
    /// failing.
    #[arg(long)]
    pub salvage: bool,
}

impl ReplyArgs {
    pub fn parser(&self) -> Result<kerf_core::Parser> {
        parser_for(
            self.response_type.map(Into::into),
            self.schema.as_deref(),
            self.prompt.as_deref(),
            self.salvage,
        )
    }
}

/// The parser for a reply: from a prompt file (its type — or `response_type` if given — schema,
/// delimiters and rules), or from a response type and an optional schema file.
pub fn parser_for(
    response_type: Option<kerf_core::ResponseType>,
    schema: Option<&Path>,
    prompt: Option<&Path>,
    salvage: bool,
) -> Result<kerf_core::Parser> {
    if let Some(path) = prompt {
        let mut file = load_prompt(path)?.file;
        if let Some(t) = response_type {
            file.response_type = t;
        }
        if salvage {
            file.salvage = Some(true);
        }
        return Ok(kerf_core::Prompt::compile(file, &path.display().to_string())?.parser);
    }
    let t = response_type.ok_or_else(|| {
        kerf_core::Error::Usage("give --type (text, json, jsonl or delimited) or --prompt".into())
    })?;
    let mut parser = kerf_core::Parser::new(t).with_salvage(salvage);
    if let Some(path) = schema {
        let schema = crate::output::read_json(path)?;
        parser = parser.with_schema(kerf_core::CompiledSchema::compile(
            &schema,
            &path.display().to_string(),
        )?);
    }
    Ok(parser)
}

/// Load a schema file, or the schema of a prompt file (a JSON object with a `prompt` key).
pub fn load_schema_or_prompt(
    path: &Path,
) -> Result<(serde_json::Value, Option<kerf_core::Prompt>)> {
    let value = crate::output::read_json(path)?;
    if value.get("prompt").is_some_and(|p| p.is_string()) {
        let prompt = load_prompt(path)?;
        let schema = prompt
            .file
            .schema
            .clone()
            .ok_or_else(|| kerf_core::Error::PromptFile {
                place: path.display().to_string(),
                message: "the prompt file has no `schema`".into(),
            })?;
        return Ok((schema, Some(prompt)));
    }
    Ok((value, None))
}

/// The document and variables a prompt is rendered with: shared by `render`, `run`, `compare`.
#[derive(clap::Args, Clone)]
pub struct InputArgs {
    /// The input document (`-` for standard input); bound to the prompt's input variable (default `text`).
    #[arg(long, conflicts_with = "sample")]
    pub input: Option<std::path::PathBuf>,
    /// Use the sample input shipped with the prompt (its `sample-input` key).
    #[arg(long)]
    pub sample: bool,
    /// Run variables as NAME=VALUE (JSON values are parsed: --var 'types=["a","b"]').
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A JSON object of global terms (TrustGraph's global terms).
    #[arg(long)]
    pub terms: Option<std::path::PathBuf>,
}

impl InputArgs {
    /// Render `prompt` (loaded from `path`): global terms, then the prompt's terms, then the
    /// input document and --var.
    pub fn render(&self, prompt: &kerf_core::Prompt, path: &Path) -> Result<Rendering> {
        use serde_json::Value;
        let global = match &self.terms {
            Some(p) => match crate::output::read_json(p)? {
                Value::Object(m) => m,
                _ => {
                    return Err(kerf_core::Error::Usage(format!(
                        "{}: global terms must be a JSON object",
                        p.display()
                    ))
                    .into());
                }
            },
            None => Default::default(),
        };
        let mut run_vars = serde_json::Map::new();
        let input_path = if self.sample {
            Some(prompt.sample_input_path().ok_or_else(|| {
                kerf_core::Error::Usage(format!(
                    "{}: the prompt has no `sample-input` inside its folder",
                    path.display()
                ))
            })?)
        } else {
            self.input.clone()
        };
        if let Some(p) = &input_path {
            run_vars.insert(
                prompt.file.input_variable().to_string(),
                Value::String(crate::output::read_input(p)?),
            );
        }
        run_vars.extend(crate::output::vars(&self.vars)?);
        let rendered = prompt.render(&global, &run_vars)?;
        // A value printed as minijinja prints it (Python has no form for it): say so.
        crate::output::warn_all(&rendered.warnings);
        Ok(Rendering {
            rendered,
            vars: run_vars,
            terms: global,
        })
    }
}

pub use kerf_api::runs::Rendering;
