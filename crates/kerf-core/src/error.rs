//! Errors of the core. Every variant has a stable [`Error::code`] so front ends can switch on it
//! (the CLI maps codes to exit statuses; the desktop shows messages but branches on codes).

use std::path::PathBuf;

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the core can refuse, each naming the place (file, line, key or JSON pointer).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written. The OS error is in the message, not given again as
    /// the error's source: a printer that follows sources (the CLI's) would say it twice.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    /// Text that must be UTF-8 is not.
    #[error("{place}: not valid UTF-8 (first bad byte at offset {offset})")]
    Utf8 { place: String, offset: usize },

    /// A file that must be JSON is not (with the line and column of the first error).
    #[error("{place}:{line}:{column}: not valid JSON: {message}")]
    Json {
        place: String,
        line: usize,
        column: usize,
        message: String,
    },

    /// A prompt file of the wrong shape: a key with the wrong type, an unknown response type, …
    #[error("{place}: {message}")]
    PromptFile { place: String, message: String },

    /// A JSON Schema that does not satisfy its meta-schema, or cannot be compiled.
    #[error("{place}: invalid JSON Schema at {pointer}: {message}")]
    Schema {
        place: String,
        pointer: String,
        message: String,
    },

    /// A template that does not compile.
    #[error("template `{name}`{}: syntax error: {message}", line_suffix(*line))]
    TemplateSyntax {
        name: String,
        line: Option<usize>,
        message: String,
    },

    /// A template that uses a variable nobody supplied.
    #[error("template `{name}`{}: undefined variable `{variable}` (supply it with --var {variable}=… or in the prompt's `terms`)", line_suffix(*line))]
    TemplateUndefined {
        name: String,
        line: Option<usize>,
        variable: String,
    },

    /// Any other failure while rendering a template.
    #[error("template `{name}`{}: {message}", line_suffix(*line))]
    TemplateRender {
        name: String,
        line: Option<usize>,
        message: String,
    },

    /// A bundle or template that cannot be imported.
    #[error("{place}: cannot import: {message}")]
    Import { place: String, message: String },

    /// A prompt that cannot be exported to the requested target.
    #[error("{place}: cannot export to {target}: {message}")]
    Export {
        place: String,
        target: String,
        message: String,
    },

    /// A dataset with problems: every one found, each naming its row (id and line) and the JSON
    /// pointer or column. Nothing is run until there are none.
    #[error("{place}: {} problem{} in the dataset:\n{}", problems.len(), if problems.len() == 1 { "" } else { "s" }, listed(problems))]
    Dataset {
        place: String,
        problems: Vec<String>,
    },

    /// A value the caller passed that makes no sense (a bad `--var`, a bad option).
    #[error("{0}")]
    Usage(String),

    /// Work stopped because the user asked (a sweep cancelled from the window or by Ctrl-C).
    #[error("cancelled")]
    Cancelled,
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

impl Error {
    /// A stable, machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Utf8 { .. } => "invalid_utf8",
            Error::Json { .. } => "invalid_json",
            Error::PromptFile { .. } => "prompt_file",
            Error::Schema { .. } => "schema_invalid",
            Error::TemplateSyntax { .. } => "template_syntax",
            Error::TemplateUndefined { .. } => "template_undefined",
            Error::TemplateRender { .. } => "template_render",
            Error::Import { .. } => "import",
            Error::Export { .. } => "export",
            Error::Dataset { .. } => "dataset",
            Error::Usage(_) => "usage",
            Error::Cancelled => "cancelled",
        }
    }

    /// Whether the failure is about the environment (I/O, usage) rather than the input's content.
    pub fn is_environmental(&self) -> bool {
        matches!(self, Error::Io { .. } | Error::Usage(_))
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            error: source,
        }
    }

    /// A JSON syntax error in the text of `place`.
    pub fn json(place: &str, err: &serde_json::Error) -> Self {
        Error::Json {
            place: place.to_string(),
            line: err.line(),
            column: err.column(),
            message: strip_position(&err.to_string()),
        }
    }
}

/// serde_json appends " at line L column C" to its messages; we report the place ourselves.
pub fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// A reply's bytes as text. A reply whose last character is incomplete (a stream or file cut
/// inside a multi-byte UTF-8 sequence) is cut off, not corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyText {
    pub text: String,
    /// Bytes of an incomplete character dropped from the end (0 when the text was whole).
    pub cut_bytes: usize,
}

impl ReplyText {
    /// The note a parse report carries when the reply ended inside a character.
    pub fn cut_note(&self) -> Option<String> {
        (self.cut_bytes > 0).then(|| {
            format!(
                "the reply ends inside a UTF-8 character (its first {} byte(s) dropped): cut off",
                self.cut_bytes
            )
        })
    }

    /// Mark `report` as cut off when the text was (see `cut_note`).
    pub fn mark(&self, report: &mut crate::ParseReport) {
        if let Some(note) = self.cut_note() {
            report.truncated = true;
            report.notes.push(note);
        }
    }
}

/// Decode a reply: an incomplete sequence at the very end is dropped and counted
/// (`ReplyText::cut_bytes`); invalid UTF-8 anywhere else is an error naming `place` and the
/// byte offset.
pub fn decode_reply(mut bytes: Vec<u8>, place: &str) -> Result<ReplyText> {
    let mut cut_bytes = 0;
    if let Err(e) = std::str::from_utf8(&bytes) {
        // `error_len() == None`: the input ended in the middle of a valid sequence.
        if e.error_len().is_some() {
            return Err(Error::Utf8 {
                place: place.into(),
                offset: e.valid_up_to(),
            });
        }
        cut_bytes = bytes.len() - e.valid_up_to();
        bytes.truncate(e.valid_up_to());
    }
    let text = String::from_utf8(bytes).map_err(|e| Error::Utf8 {
        place: place.into(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    Ok(ReplyText { text, cut_bytes })
}

/// Read a file as UTF-8 text, with errors that name the file.
pub fn read_text(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes).map_err(|e| Error::Utf8 {
        place: path.display().to_string(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Problems listed at most, each on its line; the rest are counted (a dataset with thousands of
/// bad rows gets a readable message, not thousands of lines).
pub const PROBLEMS_SHOWN: usize = 50;

fn listed(problems: &[String]) -> String {
    let mut out: Vec<String> = problems
        .iter()
        .take(PROBLEMS_SHOWN)
        .map(|p| format!("  - {p}"))
        .collect();
    if problems.len() > PROBLEMS_SHOWN {
        out.push(format!(
            "  … and {} more problem(s)",
            problems.len() - PROBLEMS_SHOWN
        ));
    }
    out.join("\n")
}

/// Characters of a user's value a message quotes at most: an 8 MB row id quoted in every one of
/// a dataset's problems once took 2 GB.
pub const QUOTED_CHARS: usize = 60;

/// `value` as a message quotes it: whole when short, else its first characters and its size.
pub fn quoted(value: &str) -> std::borrow::Cow<'_, str> {
    match value.char_indices().nth(QUOTED_CHARS) {
        None => std::borrow::Cow::Borrowed(value),
        Some((cut, _)) => {
            std::borrow::Cow::Owned(format!("{}… ({} bytes)", &value[..cut], value.len()))
        }
    }
}
