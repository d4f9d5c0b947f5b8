//! An eval's dataset as the eval reads it, a row at a time ([`Rows`]): read again each time it
//! is gone through, never all in memory; and what is kept of it checked to be what was planned.

use super::*;

/// An eval's dataset as [`plan`] and [`begin`] read it, a row at a time.
#[derive(Debug, Clone, PartialEq)]
pub enum Rows {
    /// A `.jsonl` or `.csv` file, or a folder of `.txt` documents, read again each time it is
    /// gone through (planning checks every row; beginning keeps them), so its rows are never
    /// all in memory. Each reading finds every problem [`dataset::load`] finds.
    File {
        path: PathBuf,
        /// The first N rows only.
        limit: Option<usize>,
    },
    /// Rows already in memory (a prompt file's tests, a test's dataset).
    Loaded(Dataset),
}

impl From<Dataset> for Rows {
    fn from(d: Dataset) -> Rows {
        Rows::Loaded(d)
    }
}

impl Rows {
    /// The dataset at `path` (its first `limit` rows); nothing is read yet.
    pub fn file(path: &Path, limit: Option<usize>) -> Rows {
        Rows::File {
            path: path.to_path_buf(),
            limit,
        }
    }

    /// The dataset's file or folder.
    pub fn path(&self) -> &Path {
        match self {
            Rows::File { path, .. } => path,
            Rows::Loaded(d) => &d.path,
        }
    }

    /// `e` — unless the dataset has problems of its own (bad JSON, unknown keys, duplicate ids,
    /// oversized rows), which come first: a dataset is read before the prompts, the provider
    /// and the flags are looked at, and planning reads it only once those are sound.
    pub fn problems_first(&self, e: ApiError) -> ApiError {
        match self {
            Rows::File { path, .. } => match dataset::scan::<ApiError>(path, &mut |_| Ok(())) {
                Err(problems) => problems,
                Ok(_) => e,
            },
            Rows::Loaded(_) => e,
        }
    }

    /// Hand each row the eval takes to `each`, in order, one at a time; then the dataset's
    /// problems, if it has any (after every row is read).
    pub(super) fn each(&self, each: &mut dyn FnMut(&Row) -> Result<()>) -> Result<()> {
        match self {
            Rows::Loaded(d) => d.rows.iter().try_for_each(each),
            Rows::File { path, limit } => {
                let mut n = 0;
                dataset::scan::<ApiError>(path, &mut |row| {
                    n += 1;
                    if limit.is_none_or(|limit| n <= limit) {
                        each(&row)?;
                    }
                    Ok(())
                })?;
                Ok(())
            }
        }
    }

    /// Whether the rows are read again from a file (which could change between two readings).
    pub(super) fn reread(&self) -> bool {
        matches!(self, Rows::File { .. })
    }
}

/// A fingerprint of the rows an eval takes, as they are kept: planning and beginning each read
/// a file's rows, and what is kept must be what was checked.
#[derive(Default)]
pub(super) struct Fingerprint(std::collections::hash_map::DefaultHasher);

impl Fingerprint {
    pub(super) fn add(&mut self, text: &str) {
        text.hash(&mut self.0);
    }

    pub(super) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// A row as the history keeps it (`eval_rows`).
pub(super) fn row_json(row: &Row) -> Result<String> {
    serde_json::to_string(row).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}
