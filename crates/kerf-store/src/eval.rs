//! Cells and evaluations. Every experiment that runs cells (a compare, an eval, a prompt file's
//! tests) keeps one record per cell ([`CellKey`]: prompt × provider and model × budget ×
//! constraint × repeat × chunk size and context × chunk × pass × row), each naming the run that measures it. A cell is
//! written in the same transaction as its run begins ([`NewRun::cell`](crate::NewRun)), so
//! what a cell's run is — finished, failed, or cut off by a dead process — is always the run's
//! own status. An eval also keeps its dataset rows, and the scores made of its cells.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use kerf_core::ParseReport;
use kerf_core::run::FinishReason;

use crate::NewRun;
use crate::error::Result;
use crate::status::Status;
use crate::store::Store;

/// A point of an experiment's matrix: what one run measures. The same key for every kind; the
/// order of its fields is the order cells are listed in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    /// The prompt as the experiment's spec names it: an eval's or test's prompt id (unique in
    /// the experiment), a compare's contender.
    pub prompt: String,
    /// The provider's name and the model it ran (one experiment may hold several).
    pub provider: String,
    pub model: String,
    pub max_tokens: u32,
    pub constrained: bool,
    /// 0-based repeat index.
    pub repeat: u32,
    /// The size the document was cut at, in its chunker's unit (0: the whole document).
    /// Left out of the key's JSON when 0, as are context's characters: a batch request's id is
    /// the hash of that JSON, and a batch sent before cells had either must still fold back.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunk_size: u32,
    /// Characters of the chunk before given to the cell as context (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_chars: u32,
    /// 0-based index of the document's chunk the cell reads (0 for a whole document).
    pub chunk: u32,
    /// 0-based pass over it (0 for a plan of one pass).
    pub pass: u32,
    /// The dataset row's id (a test's name; empty for a kind with one input).
    pub row: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A cell as the history has it: the run that measures it (if any is left) and where that run
/// stands.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub cell: CellKey,
    pub run: Option<i64>,
    pub status: Option<Status>,
}

/// Where a run's reply came from, beyond the provider's name: for a cloud or server provider,
/// the API it speaks and its base URL, as the run's details record them (`None` for the local
/// engine, whose model file's hash already names what answered).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub protocol: Option<String>,
    pub base_url: Option<String>,
    /// What an OpenAI-compatible server said it serves under the model's name (the run details'
    /// `served_model`): the same URL and name restarted with another model is another endpoint.
    pub served_model: Option<String>,
}

impl StoredCell {
    /// A measurement: its run ended on its own or was cut by its budget. Never run again.
    pub fn finished(&self) -> bool {
        matches!(self.status, Some(Status::Ok | Status::Truncated))
    }
}

/// A cell with what its run kept: everything an eval's report is figured from, read in one
/// query (a report over thousands of cells reads no request bodies or timings).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReply {
    pub cell: StoredCell,
    pub finish_reason: Option<FinishReason>,
    pub completion_tokens: Option<i64>,
    /// The tokens its request held, as the provider counted them.
    pub prompt_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    /// The experiment the run was bought in: another eval's when the cell came from the cache.
    pub run_experiment: Option<i64>,
    /// How long its run took, from its start to its end (`None`: not ended, or interrupted).
    pub seconds: Option<f64>,
    /// When its run began, in milliseconds since the Unix epoch.
    pub started_at: Option<i64>,
    /// The parse as the run made it.
    pub report: Option<ParseReport>,
    /// The reply as received, and the run's details (how to read it again); with `raw` only.
    pub raw: Option<String>,
    pub details: Option<Value>,
}

/// What a cell's run kept of its reply, read one cell at a time ([`Store::eval_reply`]): an
/// eval's report holds a few replies at once, whatever their number and size.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyBody {
    /// The parse as the run made it (without `raw`).
    pub report: Option<ParseReport>,
    /// The reply as received, and the run's details (how to read it again); with `raw` only.
    pub raw: Option<String>,
    pub details: Option<Value>,
}

/// An eval's rows written as they come, in one transaction ([`Store::eval_rows_writer`]):
/// nothing is kept unless [`commit`](EvalRowsWriter::commit) is reached.
pub struct EvalRowsWriter<'s> {
    store: &'s Store,
    /// Declared before `tx`: finalized before the transaction ends.
    insert: rusqlite::Statement<'s>,
    tx: rusqlite::Transaction<'s>,
    experiment: i64,
    seq: i64,
}

impl EvalRowsWriter<'_> {
    /// Keep the next row: its id and the row as JSON text.
    pub fn put(&mut self, id: &str, row: &str) -> Result<()> {
        self.insert
            .execute(params![self.experiment, self.seq, id, row])
            .map_err(|e| self.store.err(e))?;
        self.seq += 1;
        Ok(())
    }

    /// Keep every row put.
    pub fn commit(self) -> Result<()> {
        let EvalRowsWriter {
            store, insert, tx, ..
        } = self;
        drop(insert);
        tx.commit().map_err(|e| store.err(e))
    }
}

/// The columns an eval's cell query reads of each run's body.
enum Bodies {
    /// None: the cells and their runs' outcomes only.
    None,
    /// The parse as the run made it.
    Report,
    /// The parse, the raw reply and the details.
    Raw,
}

/// Which of an eval's cells a cell query reads.
#[derive(Clone, Copy)]
enum Only<'a> {
    All,
    /// The cell with this key.
    Cell(&'a CellKey),
    /// Every chunk and pass of the document this key names (its `chunk` and `pass` aside).
    Document(&'a CellKey),
}

/// Point `cell` of experiment `experiment` at `run`, replacing the run it had: each cell is in
/// the history once. Used in the transaction that begins a cell's run, and for a cached reply.
pub(crate) fn insert_cell(
    tx: &rusqlite::Transaction<'_>,
    experiment: i64,
    cell: &CellKey,
    run: i64,
) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT OR REPLACE INTO cells
         (experiment_id, prompt, provider, model, max_tokens, constrained, repeat, chunk_size,
          context_chars, chunk, pass, row_id, run_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            experiment,
            cell.prompt,
            cell.provider,
            cell.model,
            cell.max_tokens,
            cell.constrained,
            cell.repeat,
            cell.chunk_size,
            cell.context_chars,
            cell.chunk,
            cell.pass,
            cell.row,
            run
        ],
    )
}

impl Store {
    /// An eval's cells with their runs' replies, in key order; the raw replies and details too
    /// when `raw` (to read them again: `kerf eval rescore`). Every reply at once: a report
    /// reads [`eval_outcomes`](Self::eval_outcomes), then each reply with
    /// [`eval_reply`](Self::eval_reply).
    pub fn eval_replies(&self, experiment: i64, raw: bool) -> Result<Vec<StoredReply>> {
        self.cells_with(
            experiment,
            if raw { Bodies::Raw } else { Bodies::Report },
            Only::All,
        )
    }

    /// An eval's cells with their runs' outcomes (status, finish, tokens, cost, the experiment
    /// that bought them), in key order, without their replies (`report`, `raw` and `details`
    /// are `None`).
    pub fn eval_outcomes(&self, experiment: i64) -> Result<Vec<StoredReply>> {
        self.cells_with(experiment, Bodies::None, Only::All)
    }

    /// One cell of an eval with its run's outcome, as [`eval_outcomes`](Self::eval_outcomes)
    /// gives it, looked up by its key (the window opening a cell of a large eval reads one row,
    /// not the matrix). `None`: the eval has no such cell.
    pub fn eval_outcome(&self, experiment: i64, cell: &CellKey) -> Result<Option<StoredReply>> {
        Ok(self
            .cells_with(experiment, Bodies::None, Only::Cell(cell))?
            .into_iter()
            .next())
    }

    /// The cells of one document of a chunked eval, as [`eval_outcomes`](Self::eval_outcomes)
    /// gives them: every chunk and pass of the cell `document` names (its `chunk` and `pass`
    /// aside), in chunk-then-pass order. The window opening a cut document, and a document's
    /// line sent live as its last chunk ends, read these rows, not the eval's.
    pub fn eval_document_outcomes(
        &self,
        experiment: i64,
        document: &CellKey,
    ) -> Result<Vec<StoredReply>> {
        self.cells_with(experiment, Bodies::None, Only::Document(document))
    }

    /// What run `run` kept of its reply: its parse, or with `raw` the reply as received and the
    /// run's details. Empty when the run has no body.
    pub fn eval_reply(&self, run: i64, raw: bool) -> Result<ReplyBody> {
        let sql = if raw {
            "SELECT NULL, raw, details FROM run_bodies WHERE run_id = ?1"
        } else {
            "SELECT report, NULL, NULL FROM run_bodies WHERE run_id = ?1"
        };
        self.conn
            .prepare(sql)
            .and_then(|mut stmt| {
                stmt.query_row([run], |r| {
                    let json = |i: usize| -> rusqlite::Result<Option<String>> { r.get(i) };
                    Ok(ReplyBody {
                        report: json(0)?.and_then(|t| serde_json::from_str(&t).ok()),
                        raw: r.get(1)?,
                        details: json(2)?.and_then(|t| serde_json::from_str(&t).ok()),
                    })
                })
                .optional()
            })
            .map(Option::unwrap_or_default)
            .map_err(|e| self.err(e))
    }

    /// An eval's cells (or, with `only`, that one cell) with their runs and `bodies`.
    fn cells_with(
        &self,
        experiment: i64,
        bodies: Bodies,
        only: Only<'_>,
    ) -> Result<Vec<StoredReply>> {
        let (columns, join) = match bodies {
            Bodies::None => ("NULL, r.experiment_id, NULL, NULL", ""),
            Bodies::Report => (
                "b.report, r.experiment_id, NULL, NULL",
                "LEFT JOIN run_bodies b ON b.run_id = c.run_id",
            ),
            Bodies::Raw => (
                "b.report, r.experiment_id, b.raw, b.details",
                "LEFT JOIN run_bodies b ON b.run_id = c.run_id",
            ),
        };
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT c.prompt, c.provider, c.model, c.max_tokens, c.constrained, c.repeat,
                        c.chunk, c.pass, c.row_id, c.run_id,
                        r.status, r.finish_reason, r.completion_tokens, r.cost_usd, {columns},
                        CASE WHEN r.finish_reason IS NOT 'interrupted'
                             THEN r.finished_at - r.created_at END,
                        r.created_at, c.chunk_size, c.context_chars, r.prompt_tokens
                 FROM cells c LEFT JOIN runs r ON r.id = c.run_id {join}
                 WHERE c.experiment_id = ?1{}
                 ORDER BY c.prompt, c.provider, c.model, c.max_tokens, c.constrained DESC,
                          c.repeat, c.chunk_size, c.context_chars, c.chunk, c.pass, c.row_id",
                match only {
                    Only::All => "",
                    Only::Cell(_) =>
                        " AND c.prompt = ?2 AND c.provider = ?3 AND c.model = ?4
                           AND c.max_tokens = ?5 AND c.constrained = ?6 AND c.repeat = ?7
                           AND c.chunk_size = ?8 AND c.context_chars = ?9 AND c.row_id = ?10
                           AND c.chunk = ?11 AND c.pass = ?12",
                    Only::Document(_) =>
                        " AND c.prompt = ?2 AND c.provider = ?3 AND c.model = ?4
                           AND c.max_tokens = ?5 AND c.constrained = ?6 AND c.repeat = ?7
                           AND c.chunk_size = ?8 AND c.context_chars = ?9 AND c.row_id = ?10",
                }
            ))
            .map_err(|e| self.err(e))?;
        let mut key: Vec<rusqlite::types::Value> = vec![experiment.into()];
        if let Only::Cell(c) | Only::Document(c) = only {
            key.extend([
                c.prompt.clone().into(),
                c.provider.clone().into(),
                c.model.clone().into(),
                i64::from(c.max_tokens).into(),
                c.constrained.into(),
                i64::from(c.repeat).into(),
                i64::from(c.chunk_size).into(),
                i64::from(c.context_chars).into(),
                c.row.clone().into(),
            ]);
        }
        if let Only::Cell(c) = only {
            key.extend([i64::from(c.chunk).into(), i64::from(c.pass).into()]);
        }
        stmt.query_map(rusqlite::params_from_iter(key), |r| {
            let json = |i: usize| -> rusqlite::Result<Option<String>> { r.get(i) };
            Ok(StoredReply {
                cell: StoredCell {
                    cell: CellKey {
                        prompt: r.get(0)?,
                        provider: r.get(1)?,
                        model: r.get(2)?,
                        max_tokens: r.get(3)?,
                        constrained: r.get(4)?,
                        repeat: r.get(5)?,
                        chunk_size: r.get(20)?,
                        context_chars: r.get(21)?,
                        chunk: r.get(6)?,
                        pass: r.get(7)?,
                        row: r.get(8)?,
                    },
                    run: r.get(9)?,
                    status: r
                        .get::<_, Option<String>>(10)?
                        .as_deref()
                        .and_then(Status::parse),
                },
                finish_reason: r
                    .get::<_, Option<String>>(11)?
                    .as_deref()
                    .and_then(FinishReason::parse),
                completion_tokens: r.get(12)?,
                cost_usd: r.get(13)?,
                report: json(14)?.and_then(|t| serde_json::from_str(&t).ok()),
                run_experiment: r.get(15)?,
                raw: r.get(16)?,
                details: json(17)?.and_then(|t| serde_json::from_str(&t).ok()),
                seconds: r
                    .get::<_, Option<i64>>(18)?
                    .map(|ms| ms.max(0) as f64 / 1000.0),
                started_at: r.get(19)?,
                prompt_tokens: r.get(22)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<rusqlite::Result<_>>()
        .map_err(|e| self.err(e))
    }

    /// Keep an eval's dataset rows, in order: `(row id, the row as JSON)`.
    pub fn put_eval_rows(&self, experiment: i64, rows: &[(String, Value)]) -> Result<()> {
        let mut w = self.eval_rows_writer(experiment)?;
        for (id, row) in rows {
            w.put(id, &row.to_string())?;
        }
        w.commit()
    }

    /// Keep an eval's dataset rows as they come, in order, in one transaction (the history's
    /// write lock held until [`EvalRowsWriter::commit`], or dropped, which keeps none).
    pub fn eval_rows_writer(&self, experiment: i64) -> Result<EvalRowsWriter<'_>> {
        let tx = self.write()?;
        let insert = self
            .conn
            .prepare(
                "INSERT INTO eval_rows (experiment_id, seq, row_id, row) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(|e| self.err(e))?;
        Ok(EvalRowsWriter {
            store: self,
            insert,
            tx,
            experiment,
            seq: 0,
        })
    }

    /// An eval's row ids, in the rows' order (a row's index is its `seq`).
    pub fn eval_row_ids(&self, experiment: i64) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT row_id FROM eval_rows WHERE experiment_id = ?1 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        stmt.query_map([experiment], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Row `seq` of an eval, as the JSON text it was kept as (`None`: no such row).
    pub fn eval_row(&self, experiment: i64, seq: usize) -> Result<Option<String>> {
        // Cached: a plan reads its rows one by one as its cells start (a batch's fold, 10,000).
        self.conn
            .prepare_cached("SELECT row FROM eval_rows WHERE experiment_id = ?1 AND seq = ?2")
            .and_then(|mut stmt| {
                stmt.query_row(params![experiment, seq as i64], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| self.err(e))
    }

    /// Hand each of an eval's rows to `each` in order (its `seq` and JSON text), one at a time;
    /// an error from `each` stops there and is returned.
    pub fn each_eval_row<E: From<crate::Error>>(
        &self,
        experiment: i64,
        mut each: impl FnMut(usize, String) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, row FROM eval_rows WHERE experiment_id = ?1 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([experiment]).map_err(|e| self.err(e))?;
        while let Some(r) = rows.next().map_err(|e| self.err(e))? {
            let seq: i64 = r.get(0).map_err(|e| self.err(e))?;
            let text: String = r.get(1).map_err(|e| self.err(e))?;
            each(usize::try_from(seq).unwrap_or(usize::MAX), text)?;
        }
        Ok(())
    }

    /// An eval's dataset rows, in their order.
    pub fn eval_rows(&self, experiment: i64) -> Result<Vec<Value>> {
        let mut stmt = self
            .conn
            .prepare("SELECT row FROM eval_rows WHERE experiment_id = ?1 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([experiment], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(rows
            .iter()
            .map(|s| serde_json::from_str(s).unwrap_or(Value::Null))
            .collect())
    }

    /// A reply an earlier eval bought for exactly this cell (`kerf eval --cache`): a run of the
    /// same prompt version, input, provider, model (and model file) and parameters, measuring the
    /// same repeat index and pass, that ended on its own — a reply cut by its budget is never reused —
    /// from the same `endpoint` (a provider's name can be re-pointed at another server, whose
    /// replies are not the old one's). The newest such run.
    pub fn cached_eval_run(
        &self,
        run: &NewRun,
        (repeat, pass): (u32, u32),
        endpoint: &Endpoint,
    ) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT r.id FROM runs r JOIN cells c ON c.run_id = r.id
                   JOIN experiments e ON e.id = c.experiment_id AND e.kind = 'eval'
                   JOIN run_bodies b ON b.run_id = r.id
                 WHERE r.prompt_version = ?1 AND r.input_id = ?2 AND r.provider = ?3
                   AND r.model = ?4 AND r.model_sha256 IS ?5 AND r.params = ?6
                   AND c.repeat = ?7 AND c.pass = ?11 AND r.status = 'ok'
                   AND r.finish_reason = 'stop'
                   AND json_extract(b.details, '$.protocol') IS ?8
                   AND json_extract(b.details, '$.base_url') IS ?9
                   AND json_extract(b.details, '$.served_model') IS ?10
                 ORDER BY r.id DESC LIMIT 1",
                params![
                    run.prompt_version,
                    run.input,
                    run.provider,
                    run.model,
                    run.model_sha256,
                    run.params.to_string(),
                    repeat,
                    endpoint.protocol,
                    endpoint.base_url,
                    endpoint.served_model,
                    pass,
                ],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every endpoint eval `experiment`'s own runs came from (see [`Endpoint`]), each once with
    /// the provider name its runs were bought under, in the order first used: a resume checks
    /// that each provider's name still points there. Runs that never finished (killed,
    /// interrupted before an answer) recorded none, and say nothing.
    pub fn experiment_endpoints(&self, experiment: i64) -> Result<Vec<(String, Endpoint)>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.provider, json_extract(b.details, '$.protocol'),
                        json_extract(b.details, '$.base_url'),
                        json_extract(b.details, '$.served_model'), min(r.id)
                 FROM runs r JOIN run_bodies b ON b.run_id = r.id
                 WHERE r.experiment_id = ?1 AND b.details IS NOT NULL
                 GROUP BY 1, 2, 3, 4 ORDER BY 5",
            )
            .map_err(|e| self.err(e))?;
        let endpoints = stmt
            .query_map([experiment], |r| {
                Ok((
                    r.get(0)?,
                    Endpoint {
                        protocol: r.get(1)?,
                        base_url: r.get(2)?,
                        served_model: r.get(3)?,
                    },
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(endpoints)
    }

    /// The score kept for run `run` under `key` (see the `cell_scores` table), if any.
    pub fn cell_score(&self, run: i64, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT score FROM cell_scores WHERE run_id = ?1 AND key = ?2",
                params![run, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Keep each `(run, key, score)` (see [`Store::cell_score`]), in one transaction.
    pub fn put_cell_scores(&self, scores: &[(i64, String, String)]) -> Result<()> {
        if scores.is_empty() {
            return Ok(());
        }
        let tx = self.write()?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT OR REPLACE INTO cell_scores (run_id, key, score) VALUES (?1, ?2, ?3)",
                )
                .map_err(|e| self.err(e))?;
            for (run, key, score) in scores {
                stmt.execute(params![run, key, score])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Measure `cell` of experiment `experiment` with an existing run (a cached reply).
    pub fn put_cell(&self, experiment: i64, cell: &CellKey, run: i64) -> Result<()> {
        let tx = self.write()?;
        insert_cell(&tx, experiment, cell, run).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// An experiment's cells with their runs' status, in key order (every kind that runs cells
    /// keeps them).
    pub fn cells(&self, experiment: i64) -> Result<Vec<StoredCell>> {
        Ok(self
            .eval_outcomes(experiment)?
            .into_iter()
            .map(|r| r.cell)
            .collect())
    }

    /// The newest experiment of `kind`.
    pub fn latest_experiment(&self, kind: crate::ExperimentKind) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT id FROM experiments WHERE kind = ?1 ORDER BY created_at DESC, id DESC
                 LIMIT 1",
                [kind.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Take up an experiment again (`eval resume`): `running`, owned by this process, its
    /// earlier end cleared. `false`, changing nothing, when it is still `running`: opening the
    /// history marked every experiment of a dead process `interrupted`, so a `running` one has
    /// a live owner, and two processes buying the same cells would waste what the first buys.
    /// One statement, so two resumes at once cannot both take it.
    pub fn resume_experiment(&self, id: i64) -> Result<bool> {
        let owner = self.owner_id()?;
        let tx = self.write()?;
        let changed = tx
            .execute(
                "UPDATE experiments SET status = 'running', owner = ?2, finished_at = NULL,
                 error = NULL WHERE id = ?1 AND status != 'running'",
                params![id, owner],
            )
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }

    /// End an experiment that was stopped (Ctrl-C) with what it has so far: `interrupted`, so
    /// `eval resume` finishes it.
    pub fn interrupt_experiment(
        &self,
        id: i64,
        result: &str,
        figures: &crate::Figures,
        why: &str,
    ) -> Result<()> {
        let tx = self.write()?;
        tx.execute(
            "UPDATE experiments SET status = 'interrupted', result = ?2, error = ?3,
             finished_at = ?4, owner = NULL WHERE id = ?1",
            params![id, result, why, self.now()],
        )
        .map_err(|e| self.err(e))?;
        self.put_figures(&tx, id, figures)?;
        tx.commit().map_err(|e| self.err(e))
    }
}
