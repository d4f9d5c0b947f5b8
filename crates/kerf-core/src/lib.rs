//! # kerf-core
//!
//! Kerf's pure core: text in, reports out. No network, no SQLite, no async.
//!
//! - [`prompt`] — prompt files: a TrustGraph template object plus optional Kerf keys.
//! - [`template`] — minijinja templates with strict undefined variables and term merging.
//! - [`schema`] — JSON Schema compile/validate with pointers and discriminated-union diagnostics.
//! - [`parse`] — one parser per response type (`text`, `json` strict/salvage, `jsonl`,
//!   `delimited`), all returning a [`report::ParseReport`]; post-processing rules.
//! - [`objects`] — a report's accepted objects held as compact JSON text in one buffer.
//! - [`parse::StreamParser`] — the same parsers fed chunk by chunk, for live runs.
//! - [`sweep`] — truncation sweeps: objects recovered at every cut, and resilience metrics.
//! - [`lint`] — what a schema uses that a provider rejects or silently ignores; the OpenAI strict
//!   rewrite.
//! - [`eval`] — scoring extracted records against expected ones: matching, P/R/F1, grounding.
//! - [`diff`] — what changed between two runs' objects.
//! - [`dirs`] — where Kerf keeps models, history and config; [`time`] — timestamps and dates.
//! - [`export`] — TrustGraph config bundles and templates (and import back), OpenAI
//!   `response_format`, Anthropic tool schemas.
//!
//! [`Prompt`] ties them together: a loaded, compiled prompt that renders and parses.

pub mod cancel;
pub mod chunk;
pub mod diff;
pub mod dirs;
pub mod error;
pub mod eval;
pub mod export;
pub mod files;
pub mod limits;
pub mod lint;
pub mod objects;
pub mod parse;
pub mod prompt;
pub mod python_str;
pub mod render_worker;
pub mod report;
pub mod run;
pub mod schema;
pub mod sweep;
pub mod template;
pub mod time;
pub mod twin;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use cancel::CancelToken;
pub use error::{Error, Result};
pub use objects::{Ends, Objects};
pub use parse::{DelimitedFormat, Parser, StreamParser};
pub use prompt::{Minimums, PromptFile, PromptTest, ResponseType};
pub use report::{DropCounts, DropKind, Dropped, ParseReport};
pub use schema::CompiledSchema;
pub use template::Template;

/// A prompt file, compiled: templates checked, schema compiled, parser ready.
#[derive(Debug)]
pub struct Prompt {
    pub file: PromptFile,
    /// Where it was loaded from, if from disk.
    pub path: Option<PathBuf>,
    /// Non-fatal findings from loading.
    pub warnings: Vec<String>,
    pub user: Template,
    pub system: Option<Template>,
    pub parser: Parser,
}

/// The texts to send: the rendered system and user turns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Rendered {
    pub system: Option<String>,
    pub user: String,
    /// Values printed as minijinja prints them because Python has no form for them (none of
    /// TrustGraph's inputs produce one); each names the template and line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Prompt {
    /// Load and compile a prompt file.
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_loaded(PromptFile::load(path)?, path)
    }

    /// Compile a prompt file loaded from `path` (keeps its warnings and location).
    pub fn from_loaded(loaded: prompt::Loaded, path: &Path) -> Result<Self> {
        let mut p = Self::compile(loaded.file, &path.display().to_string())?;
        p.path = Some(path.to_path_buf());
        p.warnings = loaded.warnings;
        Ok(p)
    }

    /// Compile a prompt file already in memory. `place` names it in errors.
    pub fn compile(file: PromptFile, place: &str) -> Result<Self> {
        let id = file.id().to_string();
        let user = Template::new(&id, &file.prompt)?;
        let system = file
            .system
            .as_deref()
            .map(|s| Template::new(&format!("{id} (system)"), s))
            .transpose()?;
        let mut parser = Parser::new(file.response_type)
            .with_salvage(file.salvage.unwrap_or(false))
            .with_post(file.post.clone());
        if let Some(schema) = &file.schema {
            parser = parser.with_schema(CompiledSchema::compile(
                schema,
                &format!("{place} (key `schema`)"),
            )?);
        }
        if let Some(d) = &file.delimiters {
            parser = parser.with_delimiters(DelimitedFormat::from_delimiters(d, place)?);
        }
        Ok(Prompt {
            file,
            path: None,
            warnings: Vec::new(),
            user,
            system,
            parser,
        })
    }

    pub fn id(&self) -> &str {
        self.file.id()
    }

    /// Render both turns with terms merged as TrustGraph does: `global`, the prompt's `terms`,
    /// then the run's `vars`.
    pub fn render(
        &self,
        global: &Map<String, Value>,
        vars: &Map<String, Value>,
    ) -> Result<Rendered> {
        let ctx = template::merge_terms(global, &self.file.terms, vars);
        let mut warnings = Vec::new();
        let mut render = |t: &Template| -> Result<String> {
            let (text, w) = t.render_with_warnings(&ctx)?;
            warnings.extend(
                w.into_iter()
                    .map(|w| format!("template `{}`, {w}", t.name())),
            );
            Ok(text)
        };
        let system = self.system.as_ref().map(&mut render).transpose()?;
        let user = render(&self.user)?;
        Ok(Rendered {
            system,
            user,
            warnings,
        })
    }

    /// The variables the templates read that the prompt's own terms do not supply.
    pub fn input_variables(&self) -> Vec<String> {
        let mut vars: Vec<String> = self.user.variables();
        if let Some(s) = &self.system {
            vars.extend(s.variables());
        }
        vars.sort();
        vars.dedup();
        vars.retain(|v| !self.file.terms.contains_key(v));
        vars
    }

    /// How this prompt's records are matched when scored: its `match` key over the defaults its
    /// record schema gives.
    pub fn matcher(&self) -> eval::Matcher {
        eval::Matcher::new(
            &self.file.match_spec.clone().unwrap_or_default(),
            self.parser.item_schema(),
        )
    }

    /// Parse a reply to this prompt.
    pub fn parse(&self, reply: &str, vars: &Map<String, Value>) -> ParseReport {
        self.parser.parse(reply, vars)
    }

    /// The sample input shipped with the prompt, if any (resolved beside the prompt file; `None`
    /// when it would leave the prompt's folder).
    pub fn sample_input_path(&self) -> Option<PathBuf> {
        let rel = self.file.sample_input.as_ref()?;
        let dir = self
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .unwrap_or(Path::new("."));
        prompt::resolve_sample_input(dir, rel)
    }
}
