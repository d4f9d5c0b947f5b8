//! Provider definitions: the cloud and server endpoints a user has configured, kept in
//! `providers.json` in Kerf's config directory (`KERF_CONFIG_DIR`, else the platform's config
//! directory). Names, kinds, URLs, models and default parameters only — never a key: keys live
//! in the OS keyring or the environment (see [`crate::secrets`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ratelimit::RateLimits;
use crate::{Error, Result};

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "ProviderKind"))]
pub enum Kind {
    /// OpenAI's chat completions, as OpenAI, DeepSeek, vLLM, Ollama, LM Studio and llama.cpp's
    /// server speak it.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini `generateContent`.
    Gemini,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Openai, Kind::Anthropic, Kind::Gemini];

    /// The structured-output modes a provider of this kind takes (`auto` picks among the others;
    /// the README's provider table says what each sends).
    pub fn modes(self) -> &'static [Structured] {
        match self {
            Kind::Openai => &[
                Structured::Auto,
                Structured::None,
                Structured::JsonObject,
                Structured::JsonObjectSchema,
                Structured::JsonSchema,
                Structured::Grammar,
            ],
            Kind::Anthropic => &[
                Structured::Auto,
                Structured::None,
                Structured::JsonSchema,
                Structured::Tool,
            ],
            Kind::Gemini => &[
                Structured::Auto,
                Structured::None,
                Structured::JsonObject,
                Structured::JsonSchema,
                Structured::ResponseSchema,
            ],
        }
    }

    /// A model of this kind's own service, as an example of what to write.
    pub fn example_model(self) -> &'static str {
        match self {
            Kind::Openai => "gpt-4o-mini",
            Kind::Anthropic => "claude-sonnet-4-5",
            Kind::Gemini => "gemini-2.5-flash",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Openai => "openai",
            Kind::Anthropic => "anthropic",
            Kind::Gemini => "gemini",
        }
    }

    /// The environment variable Kerf falls back to for this kind's key.
    pub fn key_env(self) -> &'static str {
        match self {
            Kind::Openai => "OPENAI_API_KEY",
            Kind::Anthropic => "ANTHROPIC_API_KEY",
            Kind::Gemini => "GEMINI_API_KEY",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Kind::Openai => "https://api.openai.com/v1",
            Kind::Anthropic => "https://api.anthropic.com/v1",
            Kind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "openai" | "openai-compatible" => Ok(Kind::Openai),
            "anthropic" => Ok(Kind::Anthropic),
            "gemini" => Ok(Kind::Gemini),
            other => Err(format!(
                "unknown provider kind `{other}` (one of: openai, anthropic, gemini)"
            )),
        }
    }
}

/// How a run asks for structured output (what each kind offers; `auto` picks the best one the
/// provider is known to honour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "StructuredMode"))]
pub enum Structured {
    #[default]
    Auto,
    /// No structured-output request: the prompt alone asks for the format.
    None,
    /// OpenAI `response_format: {"type": "json_object"}`.
    JsonObject,
    /// `response_format: {"type": "json_object", "schema": …}`: the extension llama.cpp's and
    /// llama-cpp-python's servers read (they hold the reply to the schema with a grammar).
    JsonObjectSchema,
    /// OpenAI `response_format: {"type": "json_schema", strict}` (`text.format` on the Responses
    /// API); Anthropic's native `output_config.format`; Gemini's `responseJsonSchema`.
    JsonSchema,
    /// Anthropic: a forced strict tool whose `input_schema` is the schema.
    Tool,
    /// Gemini's older `responseSchema` (an OpenAPI subset; the schema rewritten into it): the
    /// fallback for models or proxies without `responseJsonSchema`.
    ResponseSchema,
    /// OpenAI-compatible servers: Kerf's GBNF grammar of the reply, as llama.cpp's server
    /// (`grammar`) and vLLM (`structured_outputs.grammar`) take it. The one server-side mode
    /// that holds JSONL, line by line.
    Grammar,
}

impl Structured {
    pub fn as_str(self) -> &'static str {
        match self {
            Structured::Auto => "auto",
            Structured::None => "none",
            Structured::JsonObject => "json_object",
            Structured::JsonObjectSchema => "json_object_schema",
            Structured::JsonSchema => "json_schema",
            Structured::Tool => "tool",
            Structured::ResponseSchema => "response_schema",
            Structured::Grammar => "grammar",
        }
    }
}

impl std::str::FromStr for Structured {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Structured::Auto),
            "none" | "text" => Ok(Structured::None),
            "json_object" => Ok(Structured::JsonObject),
            "json_object_schema" => Ok(Structured::JsonObjectSchema),
            "json_schema" => Ok(Structured::JsonSchema),
            "tool" => Ok(Structured::Tool),
            "response_schema" => Ok(Structured::ResponseSchema),
            "grammar" => Ok(Structured::Grammar),
            other => Err(format!(
                "unknown structured-output mode `{other}` (one of: auto, none, json_object, json_object_schema, json_schema, tool, response_schema, grammar)"
            )),
        }
    }
}

/// Which OpenAI endpoint an `openai` provider calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "OpenaiApi"))]
pub enum Api {
    /// Chat completions, except for the models that exist only on OpenAI's Responses API.
    #[default]
    Auto,
    /// `/chat/completions`: OpenAI and every compatible server.
    Chat,
    /// `/responses`: OpenAI's newer API (`text.format`, `reasoning.effort`).
    Responses,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Auto => "auto",
            Api::Chat => "chat",
            Api::Responses => "responses",
        }
    }

    fn is_auto(&self) -> bool {
        *self == Api::Auto
    }
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Api::Auto),
            "chat" => Ok(Api::Chat),
            "responses" => Ok(Api::Responses),
            other => Err(format!(
                "unknown OpenAI API `{other}` (one of: auto, chat, responses)"
            )),
        }
    }
}

/// OpenAI models that only the Responses API serves (the `-pro` reasoning models, Codex and
/// deep research): `auto` sends them there.
pub fn responses_only(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("-pro")
        || m.contains("codex")
        || m.contains("deep-research")
        || m.starts_with("computer-use")
}

/// What `kerf providers probe` found a server really does with each mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeProbe {
    pub mode: Structured,
    /// `honoured` (the reply obeyed), `ignored` (accepted, reply did not obey), `rejected` (an
    /// error status), `failed` (no answer).
    pub result: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// When, as an RFC 3339 UTC timestamp.
    pub at: String,
    pub model: String,
    /// The probe sent a prompt's own schema: its hash (see [`schema_hash`]); `None` for the
    /// one-field toy schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub modes: Vec<ModeProbe>,
}

/// A schema's identity for cached probe verdicts: the first 64 bits of the SHA-256 of its JSON
/// as written (key order kept, so a reordered schema is probed anew), prefixed by the
/// constraint's kind (`json:` or `jsonl:`), since one schema can be asked for both ways.
pub fn schema_hash(kind: &str, schema: &serde_json::Value) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.to_string().as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{kind}:{hex}")
}

impl Probe {
    pub fn honours(&self, mode: Structured) -> bool {
        self.modes
            .iter()
            .any(|m| m.mode == mode && m.result == "honoured")
    }
}

/// One configured provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderDef {
    pub name: String,
    pub kind: Kind,
    pub base_url: String,
    pub model: String,
    /// An environment variable to read the key from (after the keyring, before the kind's
    /// standard variable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// A server that needs no key (a local vLLM, Ollama or llama.cpp server).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_key: bool,
    #[serde(default)]
    pub structured: Structured,
    /// OpenAI-compatible: send the budget as `max_completion_tokens` (OpenAI's newer models
    /// require it) instead of `max_tokens` (what most other servers read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_completion_tokens: bool,
    /// OpenAI kind: chat completions or the Responses API.
    #[serde(default, skip_serializing_if = "Api::is_auto")]
    pub api: Api,
    /// Replies whose enum or const values differ from the schema's only in letter case are
    /// corrected before parsing, and each correction reported (Anthropic does not guarantee
    /// their casing). Off by default: a wrong case is otherwise a schema violation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fold_enum_case: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// Probes run with a prompt's own schema (`kerf providers probe NAME --prompt P`), one per
    /// model and schema; `auto` follows the one matching a run's model and schema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_probes: Vec<Probe>,
    /// The user agreed to send the key over plain `http://` to a host that is not this machine
    /// (anyone on the network path can read it). Without it such a run is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_plain_http: bool,
    /// Requests and tokens per minute this provider's runs stay under (see
    /// [`crate::ratelimit`]); without them, the limits the API announces are used.
    #[serde(default, skip_serializing_if = "RateLimits::is_empty")]
    pub rate_limits: RateLimits,
    /// An OpenAI-compatible server that offers OpenAI's batch API (`/files` and `/batches`: a
    /// LiteLLM proxy, vLLM started with its batch API), so `kerf eval --batch` sends it
    /// batches. OpenAI itself, Anthropic and Gemini always do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch_api: bool,
}

/// Query parameters that carry a credential when they appear in a URL.
const SECRET_PARAMS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "api-key",
    "x-api-key",
    "token",
    "access_token",
    "auth",
    "authorization",
    "secret",
    "password",
    "sig",
    "signature",
];

/// What in `url` is a credential: `user:pass@` and query parameters such as `?key=` (names
/// only, never the values). Kerf keeps keys in the keyring, never in `providers.json`, and
/// never prints them, so such a base URL is refused.
pub fn credentials_in(url: &str) -> Vec<String> {
    let Ok(u) = url::Url::parse(url) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    if !u.username().is_empty() || u.password().is_some() {
        found.push("user:password@".to_string());
    }
    for (k, _) in u.query_pairs() {
        if SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) {
            found.push(format!("?{k}="));
        }
    }
    found
}

/// Whether `url` goes over plain `http://` to a host other than this machine (a key sent there
/// crosses the network readable). `localhost` and loopback addresses are this machine.
pub fn is_plain_http_off_machine(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    if u.scheme() != "http" {
        return false;
    }
    match u.host() {
        Some(url::Host::Domain(d)) => !d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => !ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => !ip.is_loopback(),
        None => true,
    }
}

impl ProviderDef {
    /// The probe that speaks for runs of `model` with a constraint whose schema hashes to
    /// `schema` (see [`schema_hash`]): the prompt's own probe if one was run, else the toy one.
    pub fn probe_for(&self, schema: Option<&str>) -> Option<&Probe> {
        let own = schema.and_then(|h| {
            self.schema_probes
                .iter()
                .find(|p| p.model == self.model && p.schema.as_deref() == Some(h))
        });
        own.or(self.probe.as_ref())
    }

    /// The OpenAI endpoint this provider's runs call. `auto` sends only OpenAI's own API's
    /// Responses-only models there: a compatible server's model names say nothing about it.
    pub fn responses_api(&self) -> bool {
        self.kind == Kind::Openai
            && match self.api {
                Api::Responses => true,
                Api::Chat => false,
                Api::Auto => self.is_openai_itself() && responses_only(&self.model),
            }
    }

    /// OpenAI's own API (not a compatible server): its newer models need
    /// `max_completion_tokens`, and it refuses `json_object` requests that never say "JSON".
    pub fn is_openai_itself(&self) -> bool {
        self.kind == Kind::Openai
            && url::Url::parse(&self.base_url)
                .ok()
                .and_then(|u| u.host_str().map(|h| h == "api.openai.com"))
                .unwrap_or(false)
    }

    pub fn new(name: &str, kind: Kind, base_url: Option<&str>, model: &str) -> Self {
        ProviderDef {
            name: name.to_string(),
            kind,
            base_url: base_url
                .unwrap_or(kind.default_base_url())
                .trim_end_matches('/')
                .to_string(),
            model: model.to_string(),
            key_env: None,
            no_key: false,
            structured: Structured::Auto,
            max_completion_tokens: false,
            api: Api::Auto,
            fold_enum_case: false,
            probe: None,
            schema_probes: Vec::new(),
            allow_plain_http: false,
            rate_limits: RateLimits::default(),
            batch_api: false,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    providers: Vec<ProviderDef>,
}

/// Kerf's config directory (see [`kerf_core::dirs::config_dir`]).
pub fn config_dir() -> PathBuf {
    kerf_core::dirs::config_dir()
}

/// The providers file's name in Kerf's config directory.
pub const FILE_NAME: &str = "providers.json";

/// The configured providers, loaded from and saved to one file.
#[derive(Debug)]
pub struct Registry {
    pub path: PathBuf,
    pub providers: Vec<ProviderDef>,
}

impl Registry {
    /// `providers.json` in a config directory (a composition root names it).
    pub fn path_in(config_dir: &Path) -> PathBuf {
        config_dir.join(FILE_NAME)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let providers = match std::fs::read_to_string(path) {
            Ok(text) => {
                let de = &mut serde_json::Deserializer::from_str(&text);
                let file: File = serde_path_to_error::deserialize(de).map_err(|e| {
                    let at = e.path().to_string();
                    let inner = e.into_inner();
                    Error::Config(format!(
                        "{}:{}:{}: {} (at {at})",
                        path.display(),
                        inner.line(),
                        inner.column(),
                        strip_position(&inner.to_string())
                    ))
                })?;
                file.providers
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::Config(format!("{}: {e}", path.display()))),
        };
        let mut seen = std::collections::HashSet::new();
        for (i, p) in providers.iter().enumerate() {
            let found = credentials_in(&p.base_url);
            if !found.is_empty() {
                // The URL itself is not shown: it holds the secret.
                return Err(Error::Config(format!(
                    "{}: /providers/{i}/base_url of `{}` holds credentials ({}): remove them from the URL and store the key with `kerf providers set-key {}`",
                    path.display(),
                    p.name,
                    found.join(", "),
                    p.name
                )));
            }
            if !seen.insert(p.name.as_str()) {
                return Err(Error::Config(format!(
                    "{}: provider `{}` is defined twice",
                    path.display(),
                    p.name
                )));
            }
        }
        Ok(Registry {
            path: path.to_path_buf(),
            providers,
        })
    }

    /// Write the file atomically (`kerf_core::files::write_atomically`: a unique temporary,
    /// synced, renamed, the folder synced), so a crash mid-write never leaves a half-written
    /// registry.
    pub fn save(&self) -> Result<()> {
        let file = File {
            providers: self.providers.clone(),
        };
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| Error::Config(format!("serialising providers: {e}")))?;
        kerf_core::files::write_atomically(&self.path, (text + "\n").as_bytes())
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// Load, change and save the registry at `path` while holding its lock, so the CLI and the
    /// window changing providers at the same moment never lose one another's change.
    pub fn update<T>(path: &Path, change: impl FnOnce(&mut Registry) -> Result<T>) -> Result<T> {
        let _lock =
            kerf_core::files::Lock::exclusive(path).map_err(|e| Error::Config(e.to_string()))?;
        let mut registry = Registry::load(path)?;
        let out = change(&mut registry)?;
        registry.save()?;
        Ok(out)
    }

    pub fn get(&self, name: &str) -> Result<&ProviderDef> {
        self.providers
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| self.unknown(name))
    }

    pub fn get_mut(&mut self, name: &str) -> Result<&mut ProviderDef> {
        if !self.providers.iter().any(|p| p.name == name) {
            return Err(self.unknown(name));
        }
        Ok(self
            .providers
            .iter_mut()
            .find(|p| p.name == name)
            .expect("checked above"))
    }

    fn unknown(&self, name: &str) -> Error {
        let known: Vec<&str> = self.providers.iter().map(|p| p.name.as_str()).collect();
        Error::Config(format!(
            "no provider named `{name}` in {} (configured: {}); add one with `kerf providers add {name} --kind openai --base-url URL --model MODEL`",
            self.path.display(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
    }

    /// Add or replace a definition.
    pub fn upsert(&mut self, def: ProviderDef) {
        match self.providers.iter_mut().find(|p| p.name == def.name) {
            Some(p) => *p = def,
            None => self.providers.push(def),
        }
    }

    pub fn remove(&mut self, name: &str) -> Result<ProviderDef> {
        let i = self
            .providers
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| self.unknown(name))?;
        Ok(self.providers.remove(i))
    }
}

/// serde_json appends " at line L column C"; the message already leads with the position.
fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}
