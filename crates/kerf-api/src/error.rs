//! Errors as every front end shows them: a closed [`Code`] (the UI switches on it, the CLI maps it
//! to an exit status), a message in words a prompt engineer understands, optional details.

use serde::Serialize;

/// Declares [`Code`]: each variant, the string `kerf` prints (`error[CODE]`) and `--json` carries,
/// and whether it means the input failed (exit 1) rather than the environment (exit 2).
macro_rules! codes {
    ($($variant:ident = $name:literal, $input:literal;)*) => {
        /// Every error code a use case can return (closed: the UI switches on it).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ts_rs::TS)]
        pub enum Code {
            $(#[ts(rename = $name)] $variant),*
        }

        impl Code {
            pub const ALL: &[Code] = &[$(Code::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name),*
                }
            }

            /// The input failed (the prompt, its template or schema, the request): exit 1.
            /// Otherwise the environment did (usage, files, network, providers, history): exit 2.
            pub fn is_input_failure(self) -> bool {
                match self {
                    $(Code::$variant => $input),*
                }
            }
        }
    };
}

codes! {
    Usage = "usage", false;
    Io = "io", false;
    InvalidUtf8 = "invalid_utf8", true;
    InvalidJson = "invalid_json", true;
    PromptFile = "prompt_file", true;
    SchemaInvalid = "schema_invalid", true;
    TemplateSyntax = "template_syntax", true;
    TemplateUndefined = "template_undefined", true;
    TemplateRender = "template_render", true;
    Import = "import", true;
    Export = "export", true;
    ProviderUnavailable = "provider-unavailable", false;
    Model = "model", false;
    Constraint = "constraint", true;
    ContextOverflow = "context-overflow", true;
    Request = "request", true;
    Engine = "engine", false;
    Http = "http", false;
    Timeout = "timeout", false;
    Network = "network", false;
    Auth = "auth", false;
    Protocol = "protocol", false;
    ProviderConfig = "provider-config", false;
    Cancelled = "cancelled", false;
    Conflict = "conflict", false;
    // The window named a file it may not use (not chosen in a dialog, not in Kerf's folders).
    Forbidden = "forbidden", false;
    StoreNewer = "store-newer", false;
    StoreCorrupt = "store-corrupt", false;
    StoreFull = "store-full", false;
    StoreIo = "store-io", false;
    NotFound = "not-found", false;
    Store = "store", false;
    Internal = "internal", false;
}

impl Code {
    /// The code named `s` (an unknown name is `Internal`).
    pub fn from_name(s: &str) -> Code {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .unwrap_or(Code::Internal)
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An error as it crosses to a front end.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error, ts_rs::TS)]
#[error("{message}")]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(type = "unknown", optional)]
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            details: None,
        }
    }
}

impl From<kerf_core::Error> for ApiError {
    fn from(e: kerf_core::Error) -> Self {
        ApiError::new(Code::from_name(e.code()), e.to_string())
    }
}

impl From<kerf_llm::Error> for ApiError {
    fn from(e: kerf_llm::Error) -> Self {
        ApiError::new(Code::from_name(e.code()), e.to_string())
    }
}

impl From<kerf_store::Error> for ApiError {
    fn from(e: kerf_store::Error) -> Self {
        ApiError::new(Code::from_name(e.code()), e.to_string())
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;
