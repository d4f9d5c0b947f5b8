//! What the history holds: prompt versions, inputs, runs (written while they stream) and
//! experiments; and the queries over them.

use std::time::{Duration, Instant};

use kerf_core::ParseReport;
use rusqlite::{OptionalExtension, Row, ToSql, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::Store;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "RunStatus"))]
pub enum Status {
    /// Started; its text is being appended.
    Running,
    /// Ended on its own (the model stopped, refused, or was filtered).
    Ok,
    /// Cut off by its token budget: never a complete answer.
    Truncated,
    /// Stopped part-way: cancelled, the stream broke, or the process died. The text is kept.
    Interrupted,
    /// Failed before or while replying.
    Error,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Running,
        Status::Ok,
        Status::Truncated,
        Status::Interrupted,
        Status::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Ok => "ok",
            Status::Truncated => "truncated",
            Status::Interrupted => "interrupted",
            Status::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// The status of a run that ended with a provider's finish reason (`stop`, `length`, …).
    pub fn for_finish(reason: &str) -> Self {
        match reason {
            "length" => Status::Truncated,
            "cancelled" | "interrupted" => Status::Interrupted,
            "error" => Status::Error,
            _ => Status::Ok,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A prompt file as it was run, addressed by the SHA-256 of its text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptVersion {
    pub id: String,
    /// The prompt's id (its `id` key, else its file stem).
    pub name: String,
    /// Where it was first run from.
    pub path: Option<String>,
    pub response_type: String,
    pub text: String,
}

/// What a prompt was rendered with, addressed by the SHA-256 of its JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Input {
    pub id: String,
    /// The run's variables: the document under the prompt's input variable, and every --var.
    pub vars: Value,
    /// Global terms (TrustGraph's), `{}` when none.
    pub terms: Value,
}

/// A run about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// A [`PromptVersion`] id from [`Store::put_prompt_version`].
    pub prompt_version: String,
    /// An [`Input`] id from [`Store::put_input`].
    pub input: String,
    /// The compare or sweep this run belongs to.
    pub experiment: Option<i64>,
    /// The run this one repeats (`kerf history rerun`).
    pub rerun_of: Option<i64>,
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

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunEnd {
    /// The provider's finish reason (`stop`, `length`, `cancelled`, `interrupted`, …).
    pub finish_reason: String,
    /// The last reply, exactly as received.
    pub raw: String,
    pub report: Option<ParseReport>,
    /// `{prompt_tokens, completion_tokens, reasoning_tokens?}`.
    pub usage: Value,
    pub timings: Value,
    /// What the provider did, in its own terms (device, offload, constraint engine, retries).
    pub details: Value,
    /// The estimated cost (`{usd, …}`), for priced cloud runs.
    pub cost: Option<Value>,
    /// Earlier replies of a repair loop, oldest first.
    pub earlier: Vec<Value>,
    /// An error after text had started (`finish_reason` `error`): its code and message.
    pub error: Option<(String, String)>,
}

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
    pub finish_reason: Option<String>,
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
    pub usage: Value,
    pub timings: Value,
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

/// One line of `kerf history experiments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentSummary {
    pub id: i64,
    pub kind: String,
    pub status: String,
    pub created_at: String,
    pub runs: i64,
    pub note: Option<String>,
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
    pub fn finish(mut self, end: RunEnd) -> Result<i64> {
        self.done = true;
        let s = self.store;
        let status = match &end.error {
            Some(_) if end.finish_reason == "error" => Status::Error,
            _ => Status::for_finish(&end.finish_reason),
        };
        let json = |v: &Value| v.to_string();
        let report = end
            .report
            .as_ref()
            .map(|r| serde_json::to_string(r).unwrap_or_default());
        let tokens = |k: &str| end.usage.get(k).and_then(Value::as_i64);
        let tx = s.write()?;
        tx.execute(
            "UPDATE run_bodies SET raw = ?2, report = ?3, usage = ?4, timings = ?5, cost = ?6,
             details = ?7, earlier = ?8 WHERE run_id = ?1",
            params![
                self.id,
                end.raw,
                report,
                json(&end.usage),
                json(&end.timings),
                end.cost.as_ref().map(json),
                json(&end.details),
                json(&Value::Array(end.earlier.clone())),
            ],
        )
        .map_err(|e| s.err(e))?;
        tx.execute("DELETE FROM run_chunks WHERE run_id = ?1", [self.id])
            .map_err(|e| s.err(e))?;
        tx.execute(
            "UPDATE runs SET status = ?2, finish_reason = ?3, finished_at = ?4, owner = NULL,
             objects = ?5, dropped = ?6, truncated = ?7, prompt_tokens = ?8,
             completion_tokens = ?9, cost_usd = ?10, attempts = ?11, error_code = ?12, error = ?13
             WHERE id = ?1",
            params![
                self.id,
                status.as_str(),
                end.finish_reason,
                s.now(),
                end.report.as_ref().map(|r| r.objects.len() as i64),
                end.report.as_ref().map(|r| r.dropped.len() as i64),
                end.report.as_ref().map(|r| r.truncated),
                tokens("prompt_tokens"),
                tokens("completion_tokens"),
                end.cost
                    .as_ref()
                    .and_then(|c| c.get("usd"))
                    .and_then(Value::as_f64),
                end.earlier.len() as i64 + 1,
                end.error.as_ref().map(|e| e.0.clone()),
                end.error.as_ref().map(|e| e.1.clone()),
            ],
        )
        .map_err(|e| s.err(e))?;
        tx.commit().map_err(|e| s.err(e))?;
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

fn sha256_parts(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    format!("{:x}", h.finalize())
}

/// SHA-256 of some bytes, hex (how the history names a reply it does not keep).
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// JSON with object keys sorted, so equal values hash alike whatever order they were built in.
fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// Parse `raw` as the prompt version `text` would, with the run's variables: the report of an
/// interrupted run. `None` if the stored prompt no longer compiles (it always did when it ran).
pub(crate) fn parse_with_version(text: &str, vars: &str, raw: &str) -> Option<ParseReport> {
    let loaded = kerf_core::PromptFile::from_json_str(text, "stored prompt").ok()?;
    let prompt = kerf_core::Prompt::compile(loaded.file, "stored prompt").ok()?;
    let vars: serde_json::Map<String, Value> = serde_json::from_str(vars).ok()?;
    Some(prompt.parse(raw, &vars))
}

const SUMMARY_COLUMNS: &str = "r.id, r.status, r.prompt_name, r.prompt_version, r.provider,
    r.model, r.created_at, r.objects, r.dropped, r.truncated, r.finish_reason, r.prompt_tokens,
    r.completion_tokens, r.cost_usd, r.attempts, r.experiment_id, r.rerun_of, r.note, r.error,
    (SELECT group_concat(tag, char(31)) FROM run_tags t WHERE t.run_id = r.id),
    json_extract(r.params, '$.max_tokens')";

/// How many columns [`SUMMARY_COLUMNS`] has (a query's own columns follow).
const SUMMARY_WIDTH: usize = 21;

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
        finish_reason: row.get(10)?,
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
    })
}

fn json_col(text: Option<String>) -> Value {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

impl Store {
    /// Keep a prompt file's text (once per distinct text); returns its version id.
    pub fn put_prompt_version(
        &self,
        name: &str,
        path: Option<&str>,
        response_type: &str,
        text: &str,
    ) -> Result<String> {
        let id = sha256_hex(text.as_bytes());
        let tx = self.write()?;
        tx.execute(
            "INSERT OR IGNORE INTO prompt_versions (id, name, path, response_type, text, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, name, path, response_type, text, self.now()],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(id)
    }

    /// A stored prompt version by its full id or a unique prefix of it.
    pub fn prompt_version(&self, id: &str) -> Result<PromptVersion> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, name, path, response_type, text FROM prompt_versions
                 WHERE id >= ?1 AND id < ?1 || 'g' LIMIT 2",
            )
            .map_err(|e| self.err(e))?;
        let found: Vec<PromptVersion> = stmt
            .query_map([id.to_ascii_lowercase()], |r| {
                Ok(PromptVersion {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    path: r.get(2)?,
                    response_type: r.get(3)?,
                    text: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))?;
        match found.len() {
            1 => Ok(found.into_iter().next().expect("one")),
            _ => Err(Error::NotFound {
                what: if found.is_empty() {
                    "prompt version"
                } else {
                    "a single prompt version (the prefix is ambiguous)"
                },
                id: id.into(),
            }),
        }
    }

    /// Keep a run's input (once per distinct input); returns its id.
    pub fn put_input(&self, vars: &Value, terms: &Value) -> Result<String> {
        let (v, t) = (canonical(vars), canonical(terms));
        let id = sha256_parts(&[v.as_bytes(), t.as_bytes()]);
        let tx = self.write()?;
        tx.execute(
            "INSERT OR IGNORE INTO inputs (id, vars, terms, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, vars.to_string(), terms.to_string(), self.now()],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(id)
    }

    pub fn input(&self, id: &str) -> Result<Input> {
        self.conn
            .query_row(
                "SELECT id, vars, terms FROM inputs WHERE id = ?1",
                [id],
                |r| {
                    Ok(Input {
                        id: r.get(0)?,
                        vars: json_col(r.get(1)?),
                        terms: json_col(r.get(2)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| Error::NotFound {
                what: "input",
                id: id.into(),
            })
    }

    /// Write the run as `running` (before the first token) and return its writer.
    pub fn begin_run(&self, run: &NewRun) -> Result<RunWriter<'_>> {
        let owner = self.owner_id()?;
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO runs (created_at, status, prompt_version, prompt_name, input_id,
             experiment_id, rerun_of, provider, model, model_sha256, params, owner)
             VALUES (?1, 'running', ?2, (SELECT name FROM prompt_versions WHERE id = ?2), ?3, ?4,
             ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                self.now(),
                run.prompt_version,
                run.input,
                run.experiment,
                run.rerun_of,
                run.provider,
                run.model,
                run.model_sha256,
                run.params.to_string(),
                owner,
            ],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid();
        tx.execute(
            "INSERT INTO run_bodies (run_id, system, user) VALUES (?1, ?2, ?3)",
            params![id, run.system, run.user],
        )
        .map_err(|e| self.err(e))?;
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
                    usage: json_col(r.get(at(11))?),
                    timings: json_col(r.get(at(12))?),
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

    fn require_run(&self, id: i64) -> Result<()> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(Error::NotFound {
                what: "run",
                id: id.to_string(),
            });
        }
        Ok(())
    }

    /// Tag a run (tags are a set: adding one twice keeps one).
    pub fn tag(&self, run: i64, tag: &str) -> Result<()> {
        self.require_run(run)?;
        self.exec(
            "INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?1, ?2)",
            params![run, tag],
        )
    }

    pub fn untag(&self, run: i64, tag: &str) -> Result<()> {
        self.require_run(run)?;
        self.exec(
            "DELETE FROM run_tags WHERE run_id = ?1 AND tag = ?2",
            params![run, tag],
        )
    }

    /// Set (or with `None`, clear) a run's note.
    pub fn note(&self, run: i64, note: Option<&str>) -> Result<()> {
        self.require_run(run)?;
        self.exec(
            "UPDATE runs SET note = ?2 WHERE id = ?1",
            params![run, note],
        )
    }

    /// Delete a run with its texts and tags; prompt versions and inputs no run uses any more go
    /// with it.
    pub fn delete(&self, run: i64) -> Result<()> {
        self.require_run(run)?;
        let tx = self.write()?;
        for sql in [
            "DELETE FROM runs WHERE id = ?1",
            "DELETE FROM prompt_versions WHERE id NOT IN (SELECT prompt_version FROM runs)
             AND ?1 IS NOT NULL",
            "DELETE FROM inputs WHERE id NOT IN (SELECT input_id FROM runs) AND ?1 IS NOT NULL",
        ] {
            tx.execute(sql, [run]).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn exec(&self, sql: &str, args: impl rusqlite::Params) -> Result<()> {
        let tx = self.write()?;
        tx.execute(sql, args).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Start a compare or sweep (`kind`) asked as `spec`; its runs name the returned id.
    pub fn begin_experiment(&self, kind: &str, spec: &Value) -> Result<i64> {
        let owner = self.owner_id()?;
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO experiments (kind, status, created_at, spec, owner)
             VALUES (?1, 'running', ?2, ?3, ?4)",
            params![kind, self.now(), spec.to_string(), owner],
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

    /// Experiments, newest first.
    pub fn experiments(&self, limit: Option<usize>) -> Result<Vec<ExperimentSummary>> {
        let sql = format!(
            "SELECT e.id, e.kind, e.status, e.created_at, e.note,
             (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id)
             FROM experiments e ORDER BY e.created_at DESC, e.id DESC{}",
            limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default()
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        stmt.query_map([], |r| {
            Ok(ExperimentSummary {
                id: r.get(0)?,
                kind: r.get(1)?,
                status: r.get(2)?,
                created_at: kerf_core::time::rfc3339(r.get(3)?),
                note: r.get(4)?,
                runs: r.get(5)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<rusqlite::Result<_>>()
        .map_err(|e| self.err(e))
    }

    pub fn experiment(&self, id: i64) -> Result<Experiment> {
        let found = self
            .conn
            .query_row(
                "SELECT e.id, e.kind, e.status, e.created_at, e.note,
                 (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id), e.spec, e.result,
                 e.error FROM experiments e WHERE e.id = ?1",
                [id],
                |r| {
                    Ok(Experiment {
                        summary: ExperimentSummary {
                            id: r.get(0)?,
                            kind: r.get(1)?,
                            status: r.get(2)?,
                            created_at: kerf_core::time::rfc3339(r.get(3)?),
                            note: r.get(4)?,
                            runs: r.get(5)?,
                        },
                        spec: json_col(r.get(6)?),
                        result: Some(json_col(r.get(7)?)).filter(|v| !v.is_null()),
                        error: r.get(8)?,
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

impl Store {
    /// SHA-256 of a local model file, hashed once per (path, size, modification time).
    pub fn model_sha256(&self, path: &std::path::Path) -> Result<String> {
        let io = |e: std::io::Error| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        let size = meta.len() as i64;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        let key = path.display().to_string();
        let known: Option<String> = self
            .conn
            .query_row(
                "SELECT sha256 FROM model_hashes WHERE path = ?1 AND size = ?2 AND mtime_ns = ?3",
                params![key, size, mtime],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        if let Some(h) = known {
            return Ok(h);
        }
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut h = Sha256::new();
        std::io::copy(&mut file, &mut h).map_err(io)?;
        let hex = format!("{:x}", h.finalize());
        self.exec(
            "INSERT OR REPLACE INTO model_hashes (path, size, mtime_ns, sha256) VALUES (?1, ?2, ?3, ?4)",
            params![key, size, mtime, hex],
        )?;
        Ok(hex)
    }
}
