//! Export prompts to production shapes, and import TrustGraph's back.
//!
//! - [`trustgraph`]: the config bundle for config type `prompt` (`system`, `template-index`,
//!   `template.<id>`, values JSON-encoded strings as TrustGraph's config API stores them), a single
//!   template object, and lossless import of either.
//! - [`chunking`]: chunk settings as a TrustGraph flow's `chunk-size` / `chunk-overlap`
//!   parameters and its chunker processor, and back.
//! - [`provider`]: OpenAI's `response_format` (`json_schema`, `strict: true`, after the rewrite in
//!   [`crate::lint`]) and an Anthropic forced-tool request fragment.

pub mod chunking;
pub mod provider;
pub mod trustgraph;

use serde::Serialize;
use serde_json::Value;

/// What an export produced: the JSON to write, and what the user should know about it.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub value: Value,
    /// Changes made on the way and anything the target cannot express.
    pub notes: Vec<String>,
}
