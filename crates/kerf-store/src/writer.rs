//! Writing a run while it streams: [`Store::begin_run`] records it as `running` before the first
//! token, and its [`RunWriter`] appends the reply in batches and ends it.

use std::time::{Duration, Instant};

use kerf_core::ParseReport;
use kerf_core::run::{FinishReason, Timings, Usage};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use crate::error::Result;
use crate::status::Status;
use crate::store::Store;

/// A run about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// A [`PromptVersion`] id from [`Store::put_prompt_version`].
    pub prompt_version: String,
    /// An [`Input`] id from [`Store::put_input`].
    pub input: String,
    /// The experiment this run belongs to.
    pub experiment: Option<i64>,
    /// The run this one repeats (`kerf history rerun`).
    pub rerun_of: Option<i64>,
    /// The cell of `experiment` this run measures: written with the run, replacing the cell's
    /// earlier run if it had one.
    pub cell: Option<crate::CellKey>,
    /// `local`, or the name of a configured provider.
    pub provider: String,
    /// A GGUF path, or the provider's model id.
    pub model: String,
    /// SHA-256 of a local model's file.
    pub model_sha256: Option<String>,
    /// Everything that shaped the reply: max_tokens, temperature, top_p, seed, stop, constraint,
    /// GPU layers, threads, context, structured-output mode.
    pub params: Value,
    /// The rendered turns sent.
    pub system: Option<String>,
    pub user: String,
}

/// How a run ended. The reply and its report may be borrowed from the run's outcome: a reply
/// cut at 64 MiB is not copied to be kept.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd<'a> {
    pub finish_reason: FinishReason,
    /// The last reply, exactly as received.
    pub raw: std::borrow::Cow<'a, str>,
    pub report: Option<std::borrow::Cow<'a, ParseReport>>,
    pub usage: Usage,
    /// Whether `usage` is what the provider reported. When not (missing or unreadable), the
    /// prompt tokens are kept as unknown (NULL), not 0, and `completion_tokens` is the
    /// streamed-pieces estimate the run's details name.
    pub usage_reported: bool,
    pub timings: Timings,
    /// What the provider did, in its own terms (device, offload, constraint engine, retries).
    pub details: Value,
    /// The estimated cost (`{usd, …}`), for priced cloud runs.
    pub cost: Option<Value>,
    /// Earlier replies of a repair loop, oldest first.
    pub earlier: Vec<Value>,
    /// An error after text had started (`finish_reason` `error`): its code and message.
    pub error: Option<(String, String)>,
}

impl RunEnd<'_> {
    /// A run that ended for `reason` with the reply `raw`, nothing else known yet.
    pub fn new(finish_reason: FinishReason, raw: impl Into<String>) -> Self {
        RunEnd {
            finish_reason,
            raw: std::borrow::Cow::Owned(raw.into()),
            report: None,
            usage: Usage::default(),
            usage_reported: true,
            timings: Timings::default(),
            details: Value::Null,
            cost: None,
            earlier: Vec::new(),
            error: None,
        }
    }
}

/// Streams a run's reply into the store: text is batched and written a transaction per batch
/// (the first piece at once, so a run that has shown text has stored text; then at most every
/// [`RunWriter::FLUSH_EVERY`]). Dropped without [`finish`](RunWriter::finish), the run is kept
/// as `interrupted`.
pub struct RunWriter<'s> {
    store: &'s Store,
    id: i64,
    pending: String,
    seq: i64,
    last_flush: Option<Instant>,
    done: bool,
}

impl<'s> RunWriter<'s> {
    /// The longest text waits before it is written while a run streams.
    pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
    /// A batch this large is written at once.
    const FLUSH_BYTES: usize = 64 * 1024;

    pub fn id(&self) -> i64 {
        self.id
    }

    /// Add streamed text; written now or with the next batch.
    pub fn push(&mut self, text: &str) -> Result<()> {
        self.pending.push_str(text);
        let due = self
            .last_flush
            .is_none_or(|t| t.elapsed() >= Self::FLUSH_EVERY);
        if due || self.pending.len() >= Self::FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Write the pending text as one chunk.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let s = self.store;
        let tx = s.write()?;
        tx.execute(
            "INSERT INTO run_chunks (run_id, seq, text) VALUES (?1, ?2, ?3)",
            params![self.id, self.seq, self.pending],
        )
        .map_err(|e| s.err(e))?;
        tx.commit().map_err(|e| s.err(e))?;
        self.seq += 1;
        self.pending.clear();
        self.last_flush = Some(Instant::now());
        Ok(())
    }

    /// End the run: its reply, report, usage and status, in one transaction.
    pub fn finish(mut self, end: RunEnd<'_>) -> Result<i64> {
        self.done = true;
        let s = self.store;
        let tx = s.write()?;
        write_end(s, &tx, self.id, &end)?;
        tx.commit().map_err(|e| s.err(e))?;
        Ok(self.id)
    }

    /// Hand the run to a provider that answers later: it is kept as `submitted` with the
    /// provider's handle for it, owned by no process, so recovery leaves it and any later
    /// process may settle it ([`Store::settle_run`]).
    pub fn submit(mut self, submission: &str) -> Result<i64> {
        self.done = true;
        self.flush()?;
        self.store.exec(
            "UPDATE runs SET status = 'submitted', owner = NULL, submission = ?2 WHERE id = ?1",
            params![self.id, submission],
        )?;
        Ok(self.id)
    }

    /// End the run as failed (`code`, `message`), keeping whatever text arrived.
    pub fn fail(mut self, code: &str, message: &str) -> Result<i64> {
        self.done = true;
        self.end_keeping_text(Status::Error, code, message)?;
        Ok(self.id)
    }

    /// Fold the streamed chunks into the reply and end the run with `status`.
    fn end_keeping_text(&mut self, status: Status, code: &str, message: &str) -> Result<()> {
        self.flush()?;
        let s = self.store;
        let tx = s.write()?;
        tx.execute(
            "UPDATE run_bodies SET raw = raw || (SELECT coalesce(group_concat(text, ''), '') FROM
             (SELECT text FROM run_chunks WHERE run_id = ?1 ORDER BY seq)) WHERE run_id = ?1",
            [self.id],
        )
        .map_err(|e| s.err(e))?;
        tx.execute("DELETE FROM run_chunks WHERE run_id = ?1", [self.id])
            .map_err(|e| s.err(e))?;
        tx.execute(
            "UPDATE runs SET status = ?2, finish_reason = ?2, finished_at = ?3, owner = NULL,
             error_code = ?4, error = ?5 WHERE id = ?1",
            params![self.id, status.as_str(), s.now(), code, message],
        )
        .map_err(|e| s.err(e))?;
        tx.commit().map_err(|e| s.err(e))
    }
}

impl Drop for RunWriter<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.end_keeping_text(
                Status::Interrupted,
                "interrupted",
                "the run ended without a result (its caller stopped); the text received is kept",
            );
        }
    }
}

/// Insert `run` with `status` in the transaction `tx` (its body, and its cell where it
/// measures one): written `running` by its owner as it begins, or `submitted` with its handle
/// at a provider that answers later.
pub(crate) fn insert_run(
    s: &Store,
    tx: &rusqlite::Transaction<'_>,
    run: &NewRun,
    status: Status,
    owner: Option<&str>,
    submission: Option<&str>,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO runs (created_at, status, prompt_version, prompt_name, input_id,
         experiment_id, rerun_of, provider, model, model_sha256, params, owner, submission)
         VALUES (?1, ?2, ?3, (SELECT name FROM prompt_versions WHERE id = ?3), ?4, ?5,
         ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            s.now(),
            status.as_str(),
            run.prompt_version,
            run.input,
            run.experiment,
            run.rerun_of,
            run.provider,
            run.model,
            run.model_sha256,
            run.params.to_string(),
            owner,
            submission,
        ],
    )
    .map_err(|e| s.err(e))?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO run_bodies (run_id, system, user) VALUES (?1, ?2, ?3)",
        params![id, run.system, run.user],
    )
    .map_err(|e| s.err(e))?;
    if let (Some(c), Some(experiment)) = (&run.cell, run.experiment) {
        crate::eval::insert_cell(tx, experiment, c, id).map_err(|e| s.err(e))?;
    }
    Ok(id)
}

/// Write how a run ended — its reply, report, usage, status — in the transaction `tx`.
pub(crate) fn write_end(
    s: &Store,
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    end: &RunEnd<'_>,
) -> Result<()> {
    let status = Status::for_finish(end.finish_reason);
    let json = |v: &Value| v.to_string();
    let report = end
        .report
        .as_ref()
        .map(|r| serde_json::to_string(r).unwrap_or_default());
    // Cached statements: a batch's fold writes thousands of ends in one transaction.
    tx.prepare_cached(
        "UPDATE run_bodies SET raw = ?2, report = ?3, usage = ?4, timings = ?5, cost = ?6,
         details = ?7, earlier = ?8 WHERE run_id = ?1",
    )
    .and_then(|mut q| {
        q.execute(params![
            id,
            end.raw.as_ref(),
            report,
            serde_json::to_string(&end.usage).unwrap_or_default(),
            serde_json::to_string(&end.timings).unwrap_or_default(),
            end.cost.as_ref().map(json),
            json(&end.details),
            json(&Value::Array(end.earlier.clone())),
        ])
    })
    .map_err(|e| s.err(e))?;
    tx.prepare_cached("DELETE FROM run_chunks WHERE run_id = ?1")
        .and_then(|mut q| q.execute([id]))
        .map_err(|e| s.err(e))?;
    tx.prepare_cached(
        "UPDATE runs SET status = ?2, finish_reason = ?3, finished_at = ?4, owner = NULL,
         objects = ?5, dropped = ?6, truncated = ?7, prompt_tokens = ?8,
         completion_tokens = ?9, cost_usd = ?10, attempts = ?11, error_code = ?12, error = ?13
         WHERE id = ?1",
    )
    .and_then(|mut q| {
        q.execute(params![
            id,
            status.as_str(),
            end.finish_reason.as_str(),
            s.now(),
            end.report.as_ref().map(|r| r.objects.len() as i64),
            end.report.as_ref().map(|r| r.dropped.len() as i64),
            end.report.as_ref().map(|r| r.truncated),
            end.usage_reported.then_some(end.usage.prompt_tokens),
            end.usage.completion_tokens,
            end.cost
                .as_ref()
                .and_then(|c| c.get("usd"))
                .and_then(Value::as_f64),
            end.earlier.len() as i64 + 1,
            end.error.as_ref().map(|e| e.0.clone()),
            end.error.as_ref().map(|e| e.1.clone()),
        ])
    })
    .map_err(|e| s.err(e))?;
    Ok(())
}

impl Store {
    /// Settle a `submitted` run with how it ended (its provider answered), written as a
    /// finished run is. The status is read again in the transaction, so of two processes
    /// settling the same run one does (`true`) and the other leaves it (`false`).
    pub fn settle_run(&self, id: i64, end: &RunEnd<'_>) -> Result<bool> {
        let tx = self.write()?;
        let status: Option<String> = tx
            .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let settled = match status.as_deref() {
            None => {
                return Err(crate::Error::NotFound {
                    what: "run",
                    id: id.to_string(),
                });
            }
            Some("submitted") => {
                write_end(self, &tx, id, end)?;
                true
            }
            Some(_) => false,
        };
        tx.commit().map_err(|e| self.err(e))?;
        Ok(settled)
    }

    /// Runs submitted and not yet settled, with their providers' handles: oldest first.
    pub fn submitted_runs(&self) -> Result<Vec<(i64, String)>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, coalesce(submission, '') FROM runs WHERE status = 'submitted'
                 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }
}

impl Store {
    /// Write the run as `running` (before the first token) and return its writer.
    pub fn begin_run(&self, run: &NewRun) -> Result<RunWriter<'_>> {
        let owner = self.owner_id()?;
        let tx = self.write()?;
        let id = insert_run(self, &tx, run, Status::Running, owner.as_deref(), None)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(RunWriter {
            store: self,
            id,
            pending: String::new(),
            seq: 0,
            last_flush: None,
            done: false,
        })
    }
}
