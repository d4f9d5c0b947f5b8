//! What the Prompts screen sends and receives: prompt files, drafts, and what the editor shows
//! beside a draft.

use kerf_core::ResponseType;
use kerf_core::lint::{Provider, Severity};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// Which part of a draft a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub enum DraftPart {
    Template,
    System,
    Schema,
    Post,
    Terms,
    ResponseType,
    /// The prompt file as a whole (its JSON, or a key the editor does not show).
    File,
}

impl DraftPart {
    /// As messages name it (the wire's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            DraftPart::Template => "template",
            DraftPart::System => "system",
            DraftPart::Schema => "schema",
            DraftPart::Post => "post",
            DraftPart::Terms => "terms",
            DraftPart::ResponseType => "responseType",
            DraftPart::File => "file",
        }
    }
}

/// A prompt file in one of the folders the Prompts screen lists.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptEntry {
    /// The prompt's id (its `id` key, or the file name without `.json`).
    pub id: String,
    pub path: String,
    /// Which folder: `shipped` (Kerf's `prompts/`) or `user`.
    pub folder: String,
    /// `None` when the file could not be read as a prompt.
    pub response_type: Option<ResponseType>,
    pub description: Option<String>,
    /// The id of its twin in another format, if it names one.
    pub twin: Option<String>,
    /// Why the file could not be read as a prompt (it is still listed, to be fixed).
    pub error: Option<String>,
}

/// A prompt file opened for editing: the file's text and the parts the editor shows.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptDoc {
    pub path: String,
    pub id: String,
    /// The file as it is on disk (what a draft is composed onto).
    pub text: String,
    pub draft: PromptDraft,
    /// The prompt's sample input document, if it ships one.
    pub sample_input: Option<String>,
    pub input_variable: String,
    /// Replies a run may take, the first included, when the prompt asks for repair
    /// (`repair.max-attempts`); `None` without repair. The window asks before such a run on a
    /// paid provider.
    pub repair_attempts: Option<u32>,
}

/// What the editor holds: the parts of a prompt file a user edits, each as text. Composed onto
/// `base` (the file's text) so keys the editor does not show are kept as they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptDraft {
    /// The prompt file's text this draft started from (`""` for a new prompt).
    pub base: String,
    /// The user-turn template.
    pub template: String,
    /// The system-turn template (`""`: none).
    pub system: String,
    /// The JSON Schema, as JSON text (`""`: none).
    pub schema: String,
    /// `text`, `json`, `jsonl` or `delimited`.
    pub response_type: String,
    /// The post-processing rules, as JSON text (`""`: none).
    pub post: String,
    /// The template's default variables (`terms`), as a JSON object's text (`""`: none). A
    /// draft kept from an older window has none: the file's own are kept then.
    #[serde(default)]
    #[ts(optional)]
    pub terms: Option<String>,
}

/// Something wrong with a draft, where it is: which part, and a line or JSON pointer in it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub part: DraftPart,
    pub code: crate::Code,
    pub message: String,
    /// 1-based line in the part's text, when known.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// A JSON pointer into the schema, when the problem is in the schema.
    pub pointer: Option<String>,
}

/// A provider-lint finding on the draft's schema.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct LintFinding {
    pub provider: Provider,
    pub severity: Severity,
    pub pointer: String,
    /// The schema keyword (or prompt-file key, `object-schema`) the finding is about.
    pub keyword: String,
    pub message: String,
}

/// The rendered turns of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub system: Option<String>,
    pub user: String,
    /// The rendered turns' length in tokens of `o200k_base` (the tokenizer of OpenAI's current
    /// models; other models' tokenizers count within a few per cent of it on English prose).
    pub tokens: u32,
}

/// What the editor shows beside a draft as the user types: the template's variables, the
/// preview, the schema's errors and union branches, and the provider lint.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// Variables the templates read that the prompt's own terms do not supply.
    pub variables: Vec<String>,
    /// Variables the templates read that the prompt's terms supply (a run's own value wins).
    pub from_terms: Vec<String>,
    pub preview: Option<Preview>,
    /// Every problem found, each naming its part.
    pub problems: Vec<Problem>,
    /// The `type` values of a `oneOf` discriminated union, in branch order.
    pub branches: Vec<String>,
    pub lint: Vec<LintFinding>,
}
