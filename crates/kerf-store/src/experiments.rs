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
    /// The cells its plan counted (from its spec; History's "cells"). Not in the CLI's
    /// `--json` (its spec is there).
    #[serde(skip)]
    pub cells: Option<u64>,
    /// What lists show of its result, kept typed as it settled. Not in the CLI's `--json` (its
    /// full result is there).
    #[serde(skip)]
    pub figures: Figures,
}

/// What lists show of an experiment's result, kept in columns of their own as it settles (never
/// read out of the result, which for an eval holds every cell). Each kind fills in its own.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    /// An eval's cells not run yet.
    pub pending: Option<u64>,
    /// A prompt file's tests: verdicts.
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub errors: Option<u64>,
    /// A compare's rows.
    pub rows: Option<u64>,
    /// An eval's summary lines, in the report's order.
    pub lines: Vec<FigureLine>,
}

/// One summary line of an eval, as lists show it.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureLine {
    pub prompt: String,
    /// `None`: kept before lines named their provider.
    pub provider: Option<String>,
    pub max_tokens: u32,
    pub constrained: bool,
    pub f1: Option<f64>,
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
/// An experiment's lines are read apart ([`Store::figure_lines`]).
const SUMMARY_COLUMNS: &str = "e.id, e.kind, e.status, e.created_at, e.note,
    (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id),
    json_extract((CASE WHEN json_valid(e.spec) THEN e.spec END),
                 CASE e.kind WHEN 'eval' THEN '$.cells' ELSE '$.plan.cells' END),
    e.pending, e.passed, e.failed, e.errors, e.result_rows";

/// The column count of [`SUMMARY_COLUMNS`].
const SUMMARY_WIDTH: usize = 12;

/// A count as kept (a negative one, which Kerf never writes, is none).
fn count(n: i64) -> Option<u64> {
    u64::try_from(n).ok()
}

/// Column `i` of `r`, one of a closed set of values (`parse`). The schema's CHECKs hold the
/// kind and status columns to what Kerf writes; a file edited by hand past them is named as
/// corrupt, never read as some other value.
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

fn summary_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentSummary> {
    Ok(ExperimentSummary {
        id: r.get(0)?,
        kind: closed(r, 1, "kind", ExperimentKind::parse)?,
        status: closed(r, 2, "status", Status::parse)?,
        created_at: kerf_core::time::rfc3339(r.get(3)?),
        note: r.get(4)?,
        runs: r.get(5)?,
        cells: r.get::<_, Option<i64>>(6)?.and_then(count),
        figures: Figures {
            pending: r.get::<_, Option<i64>>(7)?.and_then(count),
            passed: r.get::<_, Option<i64>>(8)?.and_then(count),
            failed: r.get::<_, Option<i64>>(9)?.and_then(count),
            errors: r.get::<_, Option<i64>>(10)?.and_then(count),
            rows: r.get::<_, Option<i64>>(11)?.and_then(count),
            lines: Vec::new(),
        },
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

    /// End an experiment with its result (JSON text, `null` for none) and the figures lists
    /// show of it, or (`error`) with why it stopped.
    pub fn finish_experiment(
        &self,
        id: i64,
        result: &str,
        figures: &Figures,
        error: Option<&str>,
    ) -> Result<()> {
        let tx = self.write()?;
        tx.execute(
            "UPDATE experiments SET status = ?2, result = ?3, error = ?4, finished_at = ?5,
             owner = NULL WHERE id = ?1",
            params![
                id,
                if error.is_some() { "error" } else { "ok" },
                result,
                error,
                self.now()
            ],
        )
        .map_err(|e| self.err(e))?;
        self.put_figures(&tx, id, figures)?;
        tx.commit().map_err(|e| self.err(e))
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
        let mut list: Vec<ExperimentSummary> = stmt
            .query_map([], summary_from)
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))?;
        let evals: Vec<i64> = list
            .iter()
            .filter(|e| e.kind == ExperimentKind::Eval)
            .map(|e| e.id)
            .collect();
        let mut lines = self.figure_lines(&evals)?;
        for e in &mut list {
            e.figures.lines = lines.remove(&e.id).unwrap_or_default();
        }
        Ok(list)
    }

    /// The summary lines of the experiments `ids`, by experiment, in each one's order.
    fn figure_lines(&self, ids: &[i64]) -> Result<std::collections::HashMap<i64, Vec<FigureLine>>> {
        let mut out: std::collections::HashMap<i64, Vec<FigureLine>> = Default::default();
        if ids.is_empty() {
            return Ok(out);
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT experiment_id, prompt, provider, max_tokens, constrained, f1
                 FROM result_lines WHERE experiment_id IN (SELECT value FROM json_each(?1))
                 ORDER BY experiment_id, seq",
            )
            .map_err(|e| self.err(e))?;
        let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        let rows = stmt
            .query_map([ids], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    FigureLine {
                        prompt: r.get(1)?,
                        provider: r.get(2)?,
                        max_tokens: r.get(3)?,
                        constrained: r.get(4)?,
                        f1: r.get(5)?,
                    },
                ))
            })
            .map_err(|e| self.err(e))?;
        for row in rows {
            let (id, line) = row.map_err(|e| self.err(e))?;
            out.entry(id).or_default().push(line);
        }
        Ok(out)
    }

    /// Keep `figures` as experiment `id`'s, in `tx` (with the result they come from).
    pub(crate) fn put_figures(
        &self,
        tx: &rusqlite::Transaction<'_>,
        id: i64,
        figures: &Figures,
    ) -> Result<()> {
        let n = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
        tx.execute(
            "UPDATE experiments SET pending = ?2, passed = ?3, failed = ?4, errors = ?5,
             result_rows = ?6 WHERE id = ?1",
            params![
                id,
                n(figures.pending),
                n(figures.passed),
                n(figures.failed),
                n(figures.errors),
                n(figures.rows)
            ],
        )
        .map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM result_lines WHERE experiment_id = ?1", [id])
            .map_err(|e| self.err(e))?;
        let mut insert = tx
            .prepare(
                "INSERT INTO result_lines (experiment_id, seq, prompt, provider, max_tokens,
                 constrained, f1) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(|e| self.err(e))?;
        for (seq, l) in figures.lines.iter().enumerate() {
            insert
                .execute(params![
                    id,
                    seq as i64,
                    l.prompt,
                    l.provider,
                    l.max_tokens,
                    l.constrained,
                    l.f1
                ])
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Experiment `id`'s kind and what was asked of it, and nothing else: what running,
    /// resuming or scoring it again needs. [`experiment`](Self::experiment) also reads its
    /// result, which for a long eval is the whole report (tens of megabytes), and its runs.
    pub fn experiment_spec(&self, id: i64) -> Result<(ExperimentKind, serde_json::Value)> {
        let found = self
            .conn
            .query_row(
                "SELECT e.id, e.kind, e.spec FROM experiments e WHERE e.id = ?1",
                [id],
                |r| {
                    Ok((
                        closed(r, 1, "kind", ExperimentKind::parse)?,
                        json_col(r.get(2)?),
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))?;
        found.ok_or(Error::NotFound {
            what: "experiment",
            id: id.to_string(),
        })
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
                        spec: json_col(r.get(SUMMARY_WIDTH)?),
                        result: Some(json_col(r.get(SUMMARY_WIDTH + 1)?)).filter(|v| !v.is_null()),
                        error: r.get(SUMMARY_WIDTH + 2)?,
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
        e.summary.figures.lines = self.figure_lines(&[id])?.remove(&id).unwrap_or_default();
        Ok(e)
    }
}
