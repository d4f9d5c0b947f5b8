//! Batches: an experiment's requests handed to a provider's batch API (or written to a batch
//! file for a self-hosted engine), kept so any later process can follow them up. Each request
//! is a run kept `submitted`; its `submission` names its batch and its id in it
//! ([`Submission`]). A batch is stored before it is sent, its provider's id kept the moment it
//! has one, and its state and counts as last polled.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use kerf_core::run::{BatchApi, BatchCounts as Counts, BatchState};

use crate::error::Result;
use crate::writer::{NewRun, RunEnd, write_end};
use crate::{Status, Store};

/// A batch as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Batch {
    pub id: i64,
    pub experiment: i64,
    pub provider: String,
    pub api: BatchApi,
    pub endpoint: Option<String>,
    pub remote_id: Option<String>,
    pub input_file: Option<String>,
    pub requests: u64,
    pub bytes: u64,
    pub state: BatchState,
    pub remote_state: Option<String>,
    pub counts: Option<Counts>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub folded_at: Option<i64>,
    pub error: Option<String>,
}

/// A batch about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewBatch {
    pub experiment: i64,
    pub provider: String,
    pub api: BatchApi,
    pub endpoint: Option<String>,
    pub requests: u64,
    pub bytes: u64,
}

/// A submitted run's handle: its batch and its id in it (kept in `runs.submission`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub batch: i64,
    pub custom_id: String,
}

/// A submitted run of an experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedRun {
    pub run: i64,
    pub submission: Submission,
}

const COLUMNS: &str = "id, experiment_id, provider, api, endpoint, remote_id, input_file, requests,
    bytes, state, remote_state, counts, created_at, sent_at, ended_at, folded_at, error";

fn batch_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Batch> {
    let text = |i: usize| r.get::<_, String>(i);
    let bad = |i: usize, what: &str| {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("not a batch {what}").into(),
        )
    };
    Ok(Batch {
        id: r.get(0)?,
        experiment: r.get(1)?,
        provider: text(2)?,
        api: BatchApi::parse(&text(3)?).ok_or_else(|| bad(3, "api"))?,
        endpoint: r.get(4)?,
        remote_id: r.get(5)?,
        input_file: r.get(6)?,
        requests: r.get::<_, i64>(7)? as u64,
        bytes: r.get::<_, i64>(8)? as u64,
        state: BatchState::parse(&text(9)?).ok_or_else(|| bad(9, "state"))?,
        remote_state: r.get(10)?,
        counts: r
            .get::<_, Option<String>>(11)?
            .and_then(|c| serde_json::from_str(&c).ok()),
        created_at: r.get(12)?,
        sent_at: r.get(13)?,
        ended_at: r.get(14)?,
        folded_at: r.get(15)?,
        error: r.get(16)?,
    })
}

impl Store {
    /// Store a batch and its requests at once, before anything is sent: the batch as `unsent`,
    /// each request a run begun and kept `submitted` under its `custom_id` (its cell written
    /// with it). One transaction: a process killed here leaves all of it or none.
    pub fn store_batch(&self, batch: &NewBatch, runs: &[(NewRun, String)]) -> Result<Batch> {
        let tx = self.write()?;
        let now = self.now();
        tx.execute(
            "INSERT INTO batches (experiment_id, provider, api, endpoint, requests, bytes, state,
             created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'unsent', ?7)",
            params![
                batch.experiment,
                batch.provider,
                batch.api.as_str(),
                batch.endpoint,
                batch.requests as i64,
                batch.bytes as i64,
                now
            ],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid();
        for (run, custom_id) in runs {
            let submission = serde_json::to_string(&Submission {
                batch: id,
                custom_id: custom_id.clone(),
            })
            .unwrap_or_default();
            crate::writer::insert_run(self, &tx, run, Status::Submitted, None, Some(&submission))?;
        }
        let stored = tx
            .query_row(
                &format!("SELECT {COLUMNS} FROM batches WHERE id = ?1"),
                [id],
                batch_from,
            )
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(stored)
    }

    /// The provider accepted batch `id` under `remote_id` (its input uploaded as `input_file`).
    pub fn batch_sent(&self, id: i64, remote_id: &str, input_file: Option<&str>) -> Result<()> {
        self.exec(
            "UPDATE batches SET state = 'running', remote_id = ?2, input_file = ?3, sent_at = ?4
             WHERE id = ?1 AND state = 'unsent'",
            params![id, remote_id, input_file, self.now()],
        )
    }

    /// Batch `id` as its provider reports it now: where Kerf takes it to stand, the provider's
    /// word for it, its counts, and (refused whole) why. A folded batch stays folded.
    pub fn batch_polled(
        &self,
        id: i64,
        state: BatchState,
        remote_state: &str,
        counts: &Counts,
        error: Option<&str>,
    ) -> Result<()> {
        let ended = matches!(state, BatchState::Ended | BatchState::Failed);
        self.exec(
            "UPDATE batches SET state = ?2, remote_state = ?3, counts = ?4, error = ?5,
             ended_at = CASE WHEN ?6 THEN coalesce(ended_at, ?7) ELSE ended_at END
             WHERE id = ?1 AND state != 'folded'",
            params![
                id,
                state.as_str(),
                remote_state,
                serde_json::to_string(counts).unwrap_or_default(),
                error,
                ended,
                self.now()
            ],
        )
    }

    /// Fold results into batch `id`'s runs, in one transaction: each `submitted` run is settled
    /// with its end (a run settled already is left as it is), and with `whole` the batch is
    /// marked folded. Returns how many runs this settled.
    pub fn fold_batch<'a>(
        &self,
        id: i64,
        ends: impl IntoIterator<Item = (i64, RunEnd<'a>)>,
        whole: bool,
    ) -> Result<usize> {
        let tx = self.write()?;
        let mut settled = 0;
        for (run, end) in ends {
            let status: Option<String> = tx
                .prepare_cached("SELECT status FROM runs WHERE id = ?1")
                .and_then(|mut q| q.query_row([run], |r| r.get(0)).optional())
                .map_err(|e| self.err(e))?;
            if status.as_deref() == Some("submitted") {
                write_end(self, &tx, run, &end)?;
                settled += 1;
            }
        }
        if whole {
            tx.execute(
                "UPDATE batches SET state = 'folded', folded_at = ?2 WHERE id = ?1",
                params![id, self.now()],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(settled)
    }

    /// Experiment `experiment`'s batches, oldest first.
    pub fn batches(&self, experiment: i64) -> Result<Vec<Batch>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM batches WHERE experiment_id = ?1 ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map([experiment], batch_from)
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// Experiment `experiment`'s runs still `submitted`, with their handles (a run whose handle
    /// is not a batch's is left out).
    pub fn submitted_of(&self, experiment: i64) -> Result<Vec<SubmittedRun>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, submission FROM runs WHERE experiment_id = ?1 AND status = 'submitted'
                 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows: Vec<(i64, Option<String>)> = stmt
            .query_map([experiment], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(run, s)| {
                let submission = serde_json::from_str::<Submission>(s.as_deref()?).ok()?;
                Some(SubmittedRun { run, submission })
            })
            .collect())
    }
}

/// The counts as a JSON value (for a report's `--json`).
pub fn counts_json(c: &Counts) -> Value {
    serde_json::to_value(c).unwrap_or_default()
}
