//! What the Providers screen sends and receives. A key never crosses back: only where a run
//! would find it.

use kerf_llm::providers::{Api, Kind, Structured};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A provider to add (the Providers screen's form, `kerf providers add`'s flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    pub name: String,
    /// `openai` is any OpenAI-compatible server.
    pub kind: Kind,
    /// `None` or empty: the kind's public endpoint.
    pub base_url: Option<String>,
    pub model: String,
    /// An environment variable to read the key from.
    pub key_env: Option<String>,
    /// The server needs no key (a local vLLM, Ollama, llama.cpp server).
    pub no_key: bool,
    /// `None`: `auto`.
    pub structured: Option<Structured>,
    pub max_completion_tokens: bool,
    /// OpenAI kind: chat completions or the Responses API (`None`: `auto`, chat completions
    /// except for models only the Responses API serves).
    #[serde(default)]
    #[ts(optional)]
    pub api: Option<Api>,
    /// Correct enum/const values that differ only in letter case, and report each.
    #[serde(default)]
    pub fold_enum_case: bool,
    /// Send the key over plain `http://` to a host off this machine (refused otherwise).
    #[serde(default)]
    pub allow_plain_http: bool,
    /// Replacing a provider with a different endpoint drops its stored key unless this is set
    /// (the key was given for the old server).
    #[serde(default)]
    pub keep_key: bool,
    /// Requests per minute this provider's runs stay under (`None`: what the API announces).
    #[serde(default)]
    #[ts(optional)]
    pub requests_per_minute: Option<u32>,
    /// Tokens per minute (prompt estimate plus budget per request).
    #[serde(default)]
    #[ts(optional)]
    pub tokens_per_minute: Option<u32>,
    /// An OpenAI-compatible server that offers OpenAI's batch API (a LiteLLM proxy), so
    /// `kerf eval --batch` sends it batches.
    #[serde(default)]
    #[ts(optional)]
    pub batch_api: Option<bool>,
}

/// A configured provider. The key itself never crosses: only where it would come from.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    pub name: String,
    pub kind: Kind,
    pub base_url: String,
    pub model: String,
    pub structured: Structured,
    pub key_env: Option<String>,
    pub no_key: bool,
    pub max_completion_tokens: bool,
    pub api: Api,
    pub fold_enum_case: bool,
    /// Whether `kerf eval --batch` sends it batches (OpenAI, Anthropic and Gemini themselves,
    /// or a server configured to).
    pub batch_api: bool,
    /// How many probes with a prompt's own schema are kept for the current model.
    pub prompt_probes: usize,
    /// Configured rate limits (runs of this process may also have learned the API's).
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Whether a run would find a key (or needs none).
    pub key_found: bool,
    /// e.g. "from the kernel user (kept until reboot) keyring", "from $OPENAI_API_KEY",
    /// "none needed", "MISSING".
    pub key: String,
    /// The last probe: when, and each mode's result.
    pub probe: Option<String>,
}

/// The Providers screen: every provider, the file they live in, the keyring in use.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ProvidersView {
    pub config: String,
    pub keyring: String,
    pub providers: Vec<ProviderInfo>,
}
