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
    Dataset = "dataset", true;
    ProviderUnavailable = "provider_unavailable", false;
    Model = "model", false;
    Constraint = "constraint", true;
    ContextOverflow = "context_overflow", true;
    Request = "request", true;
    Engine = "engine", false;
    Http = "http", false;
    Refused = "refused", false;
    Timeout = "timeout", false;
    Network = "network", false;
    Auth = "auth", false;
    Protocol = "protocol", false;
    ProviderConfig = "provider_config", false;
    Cancelled = "cancelled", false;
    Conflict = "conflict", false;
    // A plan of more requests than may be sent unasked: `details` holds its size, for the
    // window to ask with.
    PlanTooLarge = "plan_too_large", false;
    // The window named a file it may not use (not chosen in a dialog, not in Kerf's folders).
    Forbidden = "forbidden", false;
    StoreNewer = "store_newer", false;
    StoreCorrupt = "store_corrupt", false;
    StoreFull = "store_full", false;
    StoreIo = "store_io", false;
    NotFound = "not_found", false;
    // A disk with no room left for what was being written (a model download).
    DiskFull = "disk_full", false;
    Store = "store", false;
    Internal = "internal", false;
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

// Each lower crate's errors map to a code by their variant, exhaustively: a new variant does
// not compile until it has a code (matching the printed name with a fallback to `internal`
// would hide it). A test holds each mapping to the spelling the crate itself prints.

impl Code {
    /// The code of an error from a crate below this one (parsing, a provider, the history), or
    /// `None` for any other error: how a front end that holds a plain error (a chain of causes)
    /// says which code it has.
    pub fn of(err: &(dyn std::error::Error + 'static)) -> Option<Code> {
        if let Some(e) = err.downcast_ref::<ApiError>() {
            return Some(e.code);
        }
        if let Some(e) = err.downcast_ref::<kerf_core::Error>() {
            return Some(Code::from(e));
        }
        if let Some(e) = err.downcast_ref::<kerf_llm::Error>() {
            return Some(Code::from(e));
        }
        err.downcast_ref::<kerf_store::Error>().map(Code::from)
    }
}

impl From<&kerf_core::Error> for Code {
    fn from(e: &kerf_core::Error) -> Code {
        use kerf_core::Error as E;
        match e {
            E::Io { .. } => Code::Io,
            E::Utf8 { .. } => Code::InvalidUtf8,
            E::Json { .. } => Code::InvalidJson,
            E::PromptFile { .. } => Code::PromptFile,
            E::Schema { .. } => Code::SchemaInvalid,
            E::TemplateSyntax { .. } => Code::TemplateSyntax,
            E::TemplateUndefined { .. } => Code::TemplateUndefined,
            E::TemplateRender { .. } => Code::TemplateRender,
            E::Import { .. } => Code::Import,
            E::Export { .. } => Code::Export,
            E::Dataset { .. } => Code::Dataset,
            E::Usage(_) => Code::Usage,
            E::Cancelled => Code::Cancelled,
        }
    }
}

impl From<&kerf_llm::Error> for Code {
    fn from(e: &kerf_llm::Error) -> Code {
        use kerf_llm::Error as E;
        match e {
            E::Unavailable(_) => Code::ProviderUnavailable,
            E::Model { .. } => Code::Model,
            E::Constraint(_) => Code::Constraint,
            E::ContextOverflow { .. } => Code::ContextOverflow,
            E::Request(_) => Code::Request,
            E::Engine(_) => Code::Engine,
            E::Http { .. } => Code::Http,
            E::Refused { .. } => Code::Refused,
            E::Timeout(_) => Code::Timeout,
            E::Network(_) => Code::Network,
            E::Auth(_) => Code::Auth,
            E::Protocol(_) => Code::Protocol,
            E::Config(_) => Code::ProviderConfig,
            E::Cancelled => Code::Cancelled,
        }
    }
}

impl From<&kerf_store::Error> for Code {
    fn from(e: &kerf_store::Error) -> Code {
        use kerf_store::Error as E;
        match e {
            E::Newer { .. } => Code::StoreNewer,
            E::Corrupt { .. } => Code::StoreCorrupt,
            E::Full { .. } => Code::StoreFull,
            E::Io { .. } => Code::StoreIo,
            E::NotFound { .. } => Code::NotFound,
            E::Sqlite { .. } => Code::Store,
        }
    }
}

impl From<kerf_core::Error> for ApiError {
    fn from(e: kerf_core::Error) -> Self {
        ApiError::new(Code::from(&e), e.to_string())
    }
}

impl From<kerf_llm::Error> for ApiError {
    fn from(e: kerf_llm::Error) -> Self {
        ApiError::new(Code::from(&e), e.to_string())
    }
}

impl From<kerf_store::Error> for ApiError {
    fn from(e: kerf_store::Error) -> Self {
        ApiError::new(Code::from(&e), e.to_string())
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;
