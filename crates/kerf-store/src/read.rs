//! Reading the history: lists of runs by a [`Filter`], one run in full, the newest run.

use kerf_core::ParseReport;
use kerf_core::run::{FinishReason, Timings, Usage};
use rusqlite::{OptionalExtension, Row, ToSql};
use serde::Serialize;
use serde_json::Value;

use crate::content::Input;
use crate::error::{Error, Result};
use crate::status::Status;
use crate::store::{Store, json_col};

/// One line of `kerf history list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub id: i64,
    pub status: Status,
    /// The prompt's name.
    pub prompt: String,
    pub prompt_version: String,
    pub provider: String,
    pub model: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(skip)]
    pub created_ms: i64,
    pub objects: Option<i64>,
    pub dropped: Option<i64>,
    pub truncated: Option<bool>,
    pub finish_reason: Option<FinishReason>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// The run's output budget.
    pub max_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub attempts: i64,
    pub experiment: Option<i64>,
    pub rerun_of: Option<i64>,
    pub tags: Vec<String>,
    pub note: Option<String>,
    pub error: Option<String>,
    /// How long the run took, from its start to its end. `None` while it runs, and for an
    /// interrupted run: a dead process's run is ended when the next process opens the history,
    /// not when it stopped.
    pub seconds: Option<f64>,
}

/// One run in full.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub finished_at: Option<String>,
    pub model_sha256: Option<String>,
    pub params: Value,
    pub input: Input,
    pub system: Option<String>,
    pub user: String,
    pub raw: String,
    pub report: Option<ParseReport>,
    /// `None` for a run that failed before it was told (or never ended).
    pub usage: Option<Usage>,
    pub timings: Option<Timings>,
    pub details: Value,
    pub cost: Option<Value>,
    /// Earlier replies of a repair loop, oldest first.
    pub earlier: Vec<Value>,
    pub error_code: Option<String>,
}

/// Which runs a list shows, newest first.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A prompt's name, or the start of a prompt version id (at least 6 hex digits).
    pub prompt: Option<String>,
    pub status: Option<Status>,
    pub provider: Option<String>,
    /// A substring of the model path or id.
    pub model: Option<String>,
    /// Created at or after (ms since the epoch).
    pub since: Option<i64>,
    /// Created before (ms since the epoch).
    pub until: Option<i64>,
    pub tag: Option<String>,
    pub experiment: Option<i64>,
    /// At most this many (none: all).
    pub limit: Option<usize>,
}

const SUMMARY_COLUMNS: &str = "r.id, r.status, r.prompt_name, r.prompt_version, r.provider,
    r.model, r.created_at, r.objects, r.dropped, r.truncated, r.finish_reason, r.prompt_tokens,
    r.completion_tokens, r.cost_usd, r.attempts, r.experiment_id, r.rerun_of, r.note, r.error,
    (SELECT group_concat(tag, char(31)) FROM run_tags t WHERE t.run_id = r.id),
    json_extract(r.params, '$.max_tokens'),
    CASE WHEN r.finish_reason IS NOT 'interrupted' THEN r.finished_at - r.created_at END";

/// How many columns [`SUMMARY_COLUMNS`] has (a query's own columns follow).
const SUMMARY_WIDTH: usize = 22;

fn summary_from(row: &Row<'_>) -> rusqlite::Result<RunSummary> {
    let status: String = row.get(1)?;
    let created_ms: i64 = row.get(6)?;
    let tags: Option<String> = row.get(19)?;
    let mut tags: Vec<String> = tags
        .map(|t| t.split('\u{1f}').map(str::to_string).collect())
        .unwrap_or_default();
    tags.sort();
    Ok(RunSummary {
        id: row.get(0)?,
        status: Status::parse(&status).unwrap_or(Status::Error),
        prompt: row.get(2)?,
        prompt_version: row.get(3)?,
        provider: row.get(4)?,
        model: row.get(5)?,
        created_at: kerf_core::time::rfc3339(created_ms),
        created_ms,
        objects: row.get(7)?,
        dropped: row.get(8)?,
        truncated: row.get(9)?,
        finish_reason: row
            .get::<_, Option<String>>(10)?
            .as_deref()
            .and_then(FinishReason::parse),
        prompt_tokens: row.get(11)?,
        completion_tokens: row.get(12)?,
        cost_usd: row.get(13)?,
        attempts: row.get(14)?,
        experiment: row.get(15)?,
        rerun_of: row.get(16)?,
        note: row.get(17)?,
        error: row.get(18)?,
        tags,
        max_tokens: row.get(20)?,
        seconds: row
            .get::<_, Option<i64>>(21)?
            .map(|ms| ms.max(0) as f64 / 1000.0),
    })
}

/// A column of JSON typed as `T`; `None` when absent or not of that shape.
fn typed_col<T: serde::de::DeserializeOwned>(text: Option<String>) -> Option<T> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl Store {
    /// Runs matching `filter`, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<RunSummary>> {
        let mut clauses: Vec<String> = Vec::new();
        let mut args: Vec<Box<dyn ToSql>> = Vec::new();
        let mut arg = |clause: &str, v: Box<dyn ToSql>, clauses: &mut Vec<String>| {
            args.push(v);
            clauses.push(clause.replace('?', &format!("?{}", args.len())));
        };
        if let Some(p) = &filter.prompt {
            let is_version = p.len() >= 6 && p.chars().all(|c| c.is_ascii_hexdigit());
            if is_version {
                let lower = p.to_ascii_lowercase();
                arg(
                    "r.prompt_version >= ?",
                    Box::new(lower.clone()),
                    &mut clauses,
                );
                arg("r.prompt_version < ? || 'g'", Box::new(lower), &mut clauses);
            } else {
                arg("r.prompt_name = ?", Box::new(p.clone()), &mut clauses);
            }
        }
        if let Some(s) = filter.status {
            arg("r.status = ?", Box::new(s.as_str()), &mut clauses);
        }
        if let Some(p) = &filter.provider {
            arg("r.provider = ?", Box::new(p.clone()), &mut clauses);
        }
        if let Some(m) = &filter.model {
            arg("instr(r.model, ?) > 0", Box::new(m.clone()), &mut clauses);
        }
        if let Some(t) = filter.since {
            arg("r.created_at >= ?", Box::new(t), &mut clauses);
        }
        if let Some(t) = filter.until {
            arg("r.created_at < ?", Box::new(t), &mut clauses);
        }
        if let Some(t) = &filter.tag {
            arg(
                "r.id IN (SELECT run_id FROM run_tags WHERE tag = ?)",
                Box::new(t.clone()),
                &mut clauses,
            );
        }
        if let Some(e) = filter.experiment {
            arg("r.experiment_id = ?", Box::new(e), &mut clauses);
        }
        let mut sql = format!("SELECT {SUMMARY_COLUMNS} FROM runs r");
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY r.created_at DESC, r.id DESC");
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let refs: Vec<&dyn ToSql> = args.iter().map(|a| a.as_ref()).collect();
        stmt.query_map(refs.as_slice(), summary_from)
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// The newest run's id.
    pub fn last_run(&self) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT id FROM runs ORDER BY created_at DESC, id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or(Error::NotFound {
                what: "run",
                id: "last (the history is empty)".into(),
            })
    }

    /// One run in full. A run still streaming shows the text stored so far.
    pub fn run(&self, id: i64) -> Result<RunRecord> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, r.finished_at, r.model_sha256, r.params, r.error_code,
             i.id, i.vars, i.terms, b.system, b.user,
             b.raw || (SELECT coalesce(group_concat(text, ''), '') FROM
                       (SELECT text FROM run_chunks WHERE run_id = r.id ORDER BY seq)),
             b.report, b.usage, b.timings, b.details, b.cost, b.earlier
             FROM runs r JOIN run_bodies b ON b.run_id = r.id JOIN inputs i ON i.id = r.input_id
             WHERE r.id = ?1"
        );
        self.conn
            .query_row(&sql, [id], |r| {
                let at = |i: usize| SUMMARY_WIDTH + i;
                let report: Option<String> = r.get(at(10))?;
                Ok(RunRecord {
                    summary: summary_from(r)?,
                    finished_at: r
                        .get::<_, Option<i64>>(at(0))?
                        .map(kerf_core::time::rfc3339),
                    model_sha256: r.get(at(1))?,
                    params: json_col(r.get(at(2))?),
                    // One spelling for codes: runs recorded before it kept some in kebab case
                    // (`provider-unavailable`); read back as they are spelled now.
                    error_code: r
                        .get::<_, Option<String>>(at(3))?
                        .map(|c| c.replace('-', "_")),
                    input: Input {
                        id: r.get(at(4))?,
                        vars: json_col(r.get(at(5))?),
                        terms: json_col(r.get(at(6))?),
                    },
                    system: r.get(at(7))?,
                    user: r.get(at(8))?,
                    raw: r.get(at(9))?,
                    report: report.and_then(|t| serde_json::from_str(&t).ok()),
                    usage: typed_col(r.get(at(11))?),
                    timings: typed_col(r.get(at(12))?),
                    details: json_col(r.get(at(13))?),
                    cost: Some(json_col(r.get(at(14))?)).filter(|c| !c.is_null()),
                    earlier: match json_col(r.get(at(15))?) {
                        Value::Array(a) => a,
                        _ => Vec::new(),
                    },
                })
            })
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or(Error::NotFound {
                what: "run",
                id: id.to_string(),
            })
    }
}
