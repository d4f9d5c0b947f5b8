//! One module per subcommand: argument struct (with `--help` examples) and `run`.

pub mod check;
pub mod export;
pub mod import;
pub mod lint;
pub mod parse;
pub mod render;
pub mod sweep;

use std::path::Path;

use anyhow::Result;

/// Load and compile a prompt file, printing its warnings (even when compiling then fails).
pub fn load_prompt(path: &Path) -> Result<kerf_core::Prompt> {
    let loaded = kerf_core::PromptFile::load(path)?;
    crate::output::warn_all(&loaded.warnings);
    Ok(kerf_core::Prompt::from_loaded(loaded, path)?)
}

/// Load a schema file, or the schema of a prompt file (a JSON object with a `prompt` key).
pub fn load_schema_or_prompt(path: &Path) -> Result<(serde_json::Value, Option<kerf_core::Prompt>)> {
    let value = crate::output::read_json(path)?;
    if value.get("prompt").is_some_and(|p| p.is_string()) {
        let prompt = load_prompt(path)?;
        let schema = prompt.file.schema.clone().ok_or_else(|| kerf_core::Error::PromptFile {
            place: path.display().to_string(),
            message: "the prompt file has no `schema`".into(),
        })?;
        return Ok((schema, Some(prompt)));
    }
    Ok((value, None))
}
