//! What can go wrong with the history file. Every variant names the file; none loses data.

/// A history error, each with a stable code (`Error::code`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Written by a newer Kerf: opening it could corrupt what that version relies on.
    #[error(
        "{path}: this history was written by a newer Kerf (schema version {found}; this Kerf knows up to {known}). It was left untouched: upgrade Kerf, or point --data-dir elsewhere"
    )]
    Newer {
        path: String,
        found: i64,
        known: i64,
    },
    /// Not a Kerf history, or damaged.
    #[error(
        "{path}: {message}. The file was left untouched: move it aside (Kerf then starts a new history) or point --data-dir elsewhere"
    )]
    Corrupt { path: String, message: String },
    /// The disk (or the database's size limit) is full.
    #[error(
        "{path}: the disk is full ({message}); this write was not saved, earlier runs are untouched"
    )]
    Full { path: String, message: String },
    /// Reading or writing the file failed.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// No run or experiment with that id.
    #[error("{what} {id} is not in the history")]
    NotFound { what: &'static str, id: String },
    /// Anything else SQLite reports.
    #[error("{path}: {message}")]
    Sqlite { path: String, message: String },
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Newer { .. } => "store_newer",
            Error::Corrupt { .. } => "store_corrupt",
            Error::Full { .. } => "store_full",
            Error::Io { .. } => "store_io",
            Error::NotFound { .. } => "not_found",
            Error::Sqlite { .. } => "store",
        }
    }

    /// The file at `path` is not a SQLite database.
    pub(crate) fn not_sqlite(path: String) -> Self {
        Error::Corrupt {
            path,
            message: "not a SQLite database (not a Kerf history file)".into(),
        }
    }

    /// Classify a SQLite error on the file at `path`.
    pub(crate) fn sqlite(path: &str, e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        let path = path.to_string();
        if let rusqlite::Error::FromSqlConversionFailure(_, _, why) = &e {
            // A value no version of Kerf writes (a closed column edited by hand).
            return Error::Corrupt {
                path,
                message: why.to_string(),
            };
        }
        let message = e.to_string();
        match e.sqlite_error_code() {
            Some(C::NotADatabase) => Error::not_sqlite(path),
            Some(C::DatabaseCorrupt) => Error::Corrupt {
                path,
                message: format!("the database is damaged ({message})"),
            },
            Some(C::DiskFull) => Error::Full { path, message },
            Some(C::SystemIoFailure | C::CannotOpen | C::ReadOnly | C::PermissionDenied) => {
                Error::Io { path, message }
            }
            _ => Error::Sqlite { path, message },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
