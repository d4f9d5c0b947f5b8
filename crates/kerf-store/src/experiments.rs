//! Experiments: a compare, sweep, eval or prompt file's tests kept as one record that groups
//! its runs (and, for every kind that runs cells, its cells) and holds its result.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::read::{Filter, RunSummary};
use crate::status::Status;
use crate::store::Store;
use crate::store::json_col;

/// What an experiment is: how its cells are planned and what is made of them. The history's
/// `experiments.kind` column holds [`as_str`](ExperimentKind::as_str), and a `CHECK` keeps it to
/// these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ExperimentKind {
    /// Formats side by side under real budgets, each format's best reply swept.
    Compare,
    /// Prompts over a dataset, scored against its expected records.
    Eval,
    /// Replies cut at every offset.
    Sweep,
    /// A prompt file's own tests, held to their minimums.
    Test,
}

impl ExperimentKind {
    pub const ALL: [ExperimentKind; 4] = [Self::Compare, Self::Eval, Self::Sweep, Self::Test];

    /// The kind the history keeps under `name` (`None`: not one).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The name the history keeps it under.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compare => "compare",
            Self::Eval => "eval",
            Self::Sweep => "sweep",
            Self::Test => "test",
        }
    }
}

impl std::fmt::Display for ExperimentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One line of `kerf history experiments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentSummary {
    pub id: i64,
    pub kind: ExperimentKind,
    pub status: Status,
    pub created_at: String,
    pub runs: i64,
    pub note: Option<String>,
    /// What the History list shows of it, taken from its spec and result by SQLite (never the
    /// whole result, which for an eval holds every cell): an eval's cells, cells left and each
    /// line's F1; a test's verdict counts; a compare's planned cells and rows. A spec or result
    /// that is not JSON gives none, never a failed list; a result of 8 MB or more (an eval of
    /// many thousand cells) is not read for the list, which stays quick. Not in the CLI's
    /// `--json` (its full result is there).
    #[serde(skip)]
    pub figures: Option<Value>,
}

/// A compare or sweep in full: what was asked, its rows and curves, and its runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    #[serde(flatten)]
    pub summary: ExperimentSummary,
    pub spec: Value,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub run_list: Vec<RunSummary>,
}

/// The columns of an [`ExperimentSummary`], in [`summary_from`]'s order (a query's own follow).
const SUMMARY_COLUMNS: &str = "e.id, e.kind, e.status, e.created_at, e.note,
    (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id),
    CASE e.kind
      WHEN 'eval' THEN json_object(
        'cells', json_extract((CASE WHEN json_valid(e.spec) THEN e.spec END), '$.cells'),
        'pending', json_extract((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '$.pending'),
        'lines', json((SELECT json_group_array(json_object(
            'prompt', json_extract(l.value, '$.prompt'),
            'max_tokens', json_extract(l.value, '$.max_tokens'),
            'constrained', json_extract(l.value, '$.constrained'),
            'f1', json_extract(l.value, '$.f1')))
          FROM json_each(coalesce((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '{}'), '$.summary') l)))
      WHEN 'test' THEN json_object(
        'cells', json_extract((CASE WHEN json_valid(e.spec) THEN e.spec END), '$.plan.cells'),
        'passed', json_extract((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '$.passed'),
        'failed', json_extract((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '$.failed'),
        'errors', json_extract((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '$.errors'))
      WHEN 'compare' THEN json_object(
        'cells', json_extract((CASE WHEN json_valid(e.spec) THEN e.spec END), '$.plan.cells'),
        'rows', json_array_length((CASE WHEN length(e.result) < 8000000 AND json_valid(e.result) THEN e.result END), '$.rows'))
      ELSE NULL END";

fn summary_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentSummary> {
    // The schema's CHECKs hold both columns to what Kerf writes; a file edited by hand past
    // them is named as corrupt, never read as some other kind.
    fn closed<T>(
        r: &rusqlite::Row<'_>,
        i: usize,
        name: &str,
        parse: fn(&str) -> Option<T>,
    ) -> rusqlite::Result<T> {
        let value: String = r.get(i)?;
        parse(&value).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                i,
                rusqlite::types::Type::Text,
                format!("experiment {name} `{value}` is not one Kerf writes").into(),
            )
        })
    }
    Ok(ExperimentSummary {
        id: r.get(0)?,
        kind: closed(r, 1, "kind", ExperimentKind::parse)?,
        status: closed(r, 2, "status", Status::parse)?,
        created_at: kerf_core::time::rfc3339(r.get(3)?),
        note: r.get(4)?,
        runs: r.get(5)?,
        figures: r
            .get::<_, Option<String>>(6)?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

impl Store {
    /// Start an experiment of `kind` asked as `spec`; its runs name the returned id.
    pub fn begin_experiment(&self, kind: ExperimentKind, spec: &Value) -> Result<i64> {
        let owner = self.owner_id()?;
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO experiments (kind, status, created_at, spec, owner)
             VALUES (?1, 'running', ?2, ?3, ?4)",
            params![kind.as_str(), self.now(), spec.to_string(), owner],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| self.err(e))?;
        Ok(id)
    }

    /// End an experiment with its rows and curves, or (`error`) with why it stopped.
    pub fn finish_experiment(&self, id: i64, result: &Value, error: Option<&str>) -> Result<()> {
        self.exec(
            "UPDATE experiments SET status = ?2, result = ?3, error = ?4, finished_at = ?5,
             owner = NULL WHERE id = ?1",
            params![
                id,
                if error.is_some() { "error" } else { "ok" },
                result.to_string(),
                error,
                self.now()
            ],
        )
    }

    /// Hand an experiment's requests to a provider that answers later: `submitted`, owned by no
    /// process, so recovery leaves it; a later process finishes it
    /// ([`finish_experiment`](Self::finish_experiment)).
    pub fn submit_experiment(&self, id: i64) -> Result<()> {
        self.exec(
            "UPDATE experiments SET status = 'submitted', owner = NULL WHERE id = ?1",
            params![id],
        )
    }

    /// Experiments, newest first.
    pub fn experiments(&self, limit: Option<usize>) -> Result<Vec<ExperimentSummary>> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM experiments e ORDER BY e.created_at DESC, e.id DESC{}",
            limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default()
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        stmt.query_map([], summary_from)
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    pub fn experiment(&self, id: i64) -> Result<Experiment> {
        let found = self
            .conn
            .query_row(
                &format!(
                    "SELECT {SUMMARY_COLUMNS}, e.spec, e.result, e.error FROM experiments e
                     WHERE e.id = ?1"
                ),
                [id],
                |r| {
                    Ok(Experiment {
                        summary: summary_from(r)?,
                        spec: json_col(r.get(7)?),
                        result: Some(json_col(r.get(8)?)).filter(|v| !v.is_null()),
                        error: r.get(9)?,
                        run_list: Vec::new(),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let mut e = found.ok_or(Error::NotFound {
            what: "experiment",
            id: id.to_string(),
        })?;
        let mut runs = self.list(&Filter {
            experiment: Some(id),
            ..Filter::default()
        })?;
        runs.reverse();
        e.run_list = runs;
        Ok(e)
    }
}
