//! The second driver over a plan's cells: instead of one request each through the cell runner
//! ([`super::cells`]), a provider's cells are handed to its batch API (or written to a batch
//! file for `vllm run-batch`) and folded back into the same cell records later, by whichever
//! process hears the answer. The plan is the same [`Plan`]: the same cells, the same keys, the
//! same prepared requests (so a batch line's body is the online request's), and each reply is
//! read by the same reader and kept as the same run an online cell keeps.
//!
//! Every request is stored as a `submitted` run, with its custom id and its cell, before its
//! batch is sent; each batch is a row of its own ([`kerf_store::Batch`]), stored before it is
//! sent and given the provider's id the moment it has one. Folding settles only runs still
//! `submitted`, in one transaction per batch, so a second collect changes nothing and a process
//! killed anywhere loses nothing: an unsent batch is sent by the next process that follows the
//! experiment up, a running one polled, an ended one folded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use kerf_llm::cloud::CloudProvider;
use kerf_llm::cloud::batch::{self as api, Answer, Failure, Outcome};
use kerf_store::{Batch, BatchApi, BatchState, CellKey, NewBatch, RunEnd, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use super::pass::Plan;
use crate::error::{ApiError, Code, Result};
use crate::runs::{Chosen, Outcomes, RunJob};

/// How one provider's cells are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A request each, now, through the cell runner.
    Online,
    /// Handed over in batches (`File`: written to the batch file).
    Batch(BatchApi),
}

impl Way {
    pub fn by_batch(self) -> bool {
        matches!(self, Way::Batch(_))
    }
}

/// How a person asks one provider's cells to be measured (the Evaluate screen's choice per
/// provider; `kerf eval --batch` and `--batch-file` ask each provider that can).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// A request each, now.
    #[default]
    Online,
    /// The provider's batch API, at half the price: answers within a day.
    Batch,
    /// A batch file for `vllm run-batch`, written now and folded back from its output file.
    BatchFile,
}

/// The ways `provider` can go: always online; by its batch API where it has one; by a batch
/// file where it is an OpenAI-compatible server without one.
pub fn offered(provider: &Chosen) -> Vec<Delivery> {
    let mut ways = vec![Delivery::Online];
    if let Chosen::Cloud(c) = provider {
        match c.batch_api() {
            Some(_) => ways.push(Delivery::Batch),
            None if c.def.kind == kerf_llm::providers::Kind::Openai => {
                ways.push(Delivery::BatchFile)
            }
            None => {}
        }
    }
    ways
}

/// The way each provider goes when batches are asked for: its batch API where it has one; a
/// batch file for an OpenAI-compatible server without one when a file is given; otherwise
/// online.
pub fn ways(providers: &[Chosen], file: bool) -> Vec<Way> {
    providers
        .iter()
        .map(|p| {
            let can = offered(p);
            let asked = if can.contains(&Delivery::Batch) {
                Delivery::Batch
            } else if file && can.contains(&Delivery::BatchFile) {
                Delivery::BatchFile
            } else {
                Delivery::Online
            };
            way(p, asked)
        })
        .collect()
}

/// The way each provider goes as `asked` (in the providers' order; one not named goes
/// online): a way the provider does not offer is a usage error that names it.
pub fn ways_asked(providers: &[Chosen], asked: &[Delivery]) -> Result<Vec<Way>> {
    providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let asked = asked.get(i).copied().unwrap_or_default();
            if !offered(p).contains(&asked) {
                return Err(ApiError::new(
                    Code::Usage,
                    match asked {
                        Delivery::Batch => format!(
                            "{} has no batch API: OpenAI, Anthropic and Gemini do, and a server marked as offering OpenAI's",
                            p.name()
                        ),
                        _ => format!(
                            "{} is not an OpenAI-compatible server without a batch API: only those get a batch file",
                            p.name()
                        ),
                    },
                ));
            }
            Ok(way(p, asked))
        })
        .collect()
}

fn way(provider: &Chosen, asked: Delivery) -> Way {
    match (asked, provider) {
        (Delivery::Online, _) => Way::Online,
        (Delivery::BatchFile, _) => Way::Batch(BatchApi::File),
        (Delivery::Batch, Chosen::Cloud(c)) => c.batch_api().map_or(Way::Online, Way::Batch),
        (Delivery::Batch, _) => Way::Online,
    }
}

/// A cell's id in its batch: stable for the cell (a resume sends it under the same id), unique
/// in the experiment, and within every API's rule (1–64 of `[A-Za-z0-9_-]`).
pub fn custom_id(experiment: i64, key: &CellKey) -> String {
    let text = serde_json::to_string(key).unwrap_or_default();
    let hash = kerf_store::sha256_hex(text.as_bytes());
    format!("e{experiment}-{}", &hash[..32])
}

/// The ids cell `key` may have been sent under: [`custom_id`]'s, and for a whole document's
/// cell also the one a Kerf of a single release gave it, whose key's JSON held the chunk size
/// and context as 0 — a batch it sent still folds back, and resends under its own ids.
fn sent_ids(experiment: i64, key: &CellKey) -> Vec<String> {
    let mut ids = vec![custom_id(experiment, key)];
    if key.chunk_size == 0 && key.context_chars == 0 {
        #[derive(Serialize)]
        struct ZerosWritten<'a> {
            prompt: &'a str,
            provider: &'a str,
            model: &'a str,
            max_tokens: u32,
            constrained: bool,
            repeat: u32,
            chunk_size: u32,
            context_chars: u32,
            chunk: u32,
            pass: u32,
            row: &'a str,
        }
        let text = serde_json::to_string(&ZerosWritten {
            prompt: &key.prompt,
            provider: &key.provider,
            model: &key.model,
            max_tokens: key.max_tokens,
            constrained: key.constrained,
            repeat: key.repeat,
            chunk_size: 0,
            context_chars: 0,
            chunk: key.chunk,
            pass: key.pass,
            row: &key.row,
        })
        .unwrap_or_default();
        let hash = kerf_store::sha256_hex(text.as_bytes());
        ids.push(format!("e{experiment}-{}", &hash[..32]));
    }
    ids
}

fn cloud(provider: &Chosen) -> Result<&CloudProvider> {
    match provider {
        Chosen::Cloud(c) => Ok(c),
        other => Err(ApiError::new(
            Code::Internal,
            format!("{} has no batch API", other.name()),
        )),
    }
}

/// The name a batch carries at its provider (OpenAI's metadata, Gemini's display name).
fn tag(batch: &Batch) -> String {
    format!("kerf-e{}-b{}", batch.experiment, batch.id)
}

/// Hand every cell of `plan` not `measured` and not already awaited to the batches of the
/// providers `ways` sends by batch, split by each API's limits; a file batch is written to
/// `file`. Each batch's requests are stored as `submitted` runs before it is sent. Returns the
/// batches made.
pub fn submit<P: Plan>(
    plan: &P,
    store: &Store,
    experiment: i64,
    ways: &[Way],
    measured: &BTreeMap<CellKey, i64>,
    file: Option<&Path>,
) -> Result<Vec<Batch>> {
    let awaited: BTreeSet<String> = store
        .submitted_of(experiment)?
        .into_iter()
        .map(|s| s.submission.custom_id)
        .collect();
    let mut made = Vec::new();
    for (p, provider) in plan.providers().iter().enumerate() {
        let Some(Way::Batch(a)) = ways.get(p).copied() else {
            continue;
        };
        let c = cloud(provider)?;
        let limits = api::limits(a);
        let endpoint = matches!(a, BatchApi::Openai | BatchApi::File)
            .then(|| api::endpoint(c.def.responses_api()).to_string());
        if a == BatchApi::File && c.def.responses_api() {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "{}: `vllm run-batch` takes chat completions only, and this provider speaks the Responses API",
                    c.def.name
                ),
            ));
        }
        let mut lines: Vec<Value> = Vec::new();
        let mut runs = Vec::new();
        let mut bytes = 0u64;
        for (at, key) in plan.cells(p) {
            if measured.contains_key(&key) {
                continue;
            }
            let id = custom_id(experiment, &key);
            if awaited.contains(&id) {
                continue;
            }
            let cell = plan.cell(at, key.clone())?;
            let mut job: RunJob<'_> = cell.subject.job(&cell.rendering, provider, &cell.params);
            job.meta.experiment = Some(experiment);
            job.meta.cell = Some(key);
            job.repair = false;
            let prepared = crate::runs::prepare(Some(store), &job)?;
            let line = c.batch_line(a, &id, &prepared.request)?;
            let size = line.to_string().len() as u64 + 1;
            if !lines.is_empty() && (lines.len() >= limits.requests || bytes + size > limits.bytes)
            {
                made.push(send_one(
                    store, experiment, c, a, &endpoint, &lines, &runs, bytes, file,
                )?);
                lines.clear();
                runs.clear();
                bytes = 0;
            }
            if let Some(new_run) = prepared.new_run {
                runs.push((new_run, id));
            }
            lines.push(line);
            bytes += size;
        }
        if !lines.is_empty() {
            made.push(send_one(
                store, experiment, c, a, &endpoint, &lines, &runs, bytes, file,
            )?);
        }
    }
    Ok(made)
}

/// Store one batch and its runs, then send it (or write it).
#[allow(clippy::too_many_arguments)] // one batch's parts, used once
fn send_one(
    store: &Store,
    experiment: i64,
    c: &CloudProvider,
    a: BatchApi,
    endpoint: &Option<String>,
    lines: &[Value],
    runs: &[(kerf_store::NewRun, String)],
    bytes: u64,
    file: Option<&Path>,
) -> Result<Batch> {
    let batch = store.store_batch(
        &NewBatch {
            experiment,
            provider: c.def.name.clone(),
            api: a,
            endpoint: endpoint.clone(),
            requests: lines.len() as u64,
            bytes,
        },
        runs,
    )?;
    send(store, c, &batch, lines, file)
}

/// Send a stored batch (or write its file), and keep the provider's id for it.
fn send(
    store: &Store,
    c: &CloudProvider,
    batch: &Batch,
    lines: &[Value],
    file: Option<&Path>,
) -> Result<Batch> {
    let (remote_id, input_file) = if batch.api == BatchApi::File {
        let path = file.ok_or_else(|| {
            ApiError::new(
                Code::Usage,
                "a batch file needs a path to write it to (--batch-file FILE)",
            )
        })?;
        write_lines(path, lines)?;
        (path.display().to_string(), None)
    } else {
        let sent =
            kerf_llm::runtime::block_on(c.batch_send(batch.api, lines, &tag(batch))).map_err(
                |e| {
                    let mut e = ApiError::from(e);
                    e.message = format!(
                        "{}: the batch was not accepted: {}; its {} request(s) are kept: `kerf eval resume {}` sends them again",
                        c.def.name, e.message, batch.requests, batch.experiment
                    );
                    e
                },
            )?;
        (sent.remote_id, sent.input_file)
    };
    store.batch_sent(batch.id, &remote_id, input_file.as_deref())?;
    Ok(store
        .batches(batch.experiment)?
        .into_iter()
        .find(|b| b.id == batch.id)
        .unwrap_or_else(|| batch.clone()))
}

fn write_lines(path: &Path, lines: &[Value]) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(kerf_core::files::AtomicFile::create(path)?);
    let io = |e: std::io::Error| ApiError::from(kerf_core::Error::io(path, e));
    for l in lines {
        serde_json::to_writer(&mut f, l).map_err(|e| io(e.into()))?;
        f.write_all(b"\n").map_err(io)?;
    }
    f.into_inner().map_err(|e| io(e.into_error()))?.commit()?;
    Ok(())
}

/// Ask each provider where experiment `experiment`'s batches stand now (an unsent one — its
/// process died before sending — is sent first, a file batch is left as written), keeping
/// what they say; returns every batch as it now stands.
pub fn poll<P: Plan>(plan: &P, store: &Store, experiment: i64) -> Result<Vec<Batch>> {
    for b in store.batches(experiment)? {
        if b.api == BatchApi::File || matches!(b.state, BatchState::Folded | BatchState::Failed) {
            continue;
        }
        let Some(provider) = plan.providers().iter().find(|p| p.name() == b.provider) else {
            continue;
        };
        let c = cloud(provider)?;
        if b.state == BatchState::Unsent {
            resend(plan, store, c, &b)?;
            continue;
        }
        let Some(remote) = &b.remote_id else { continue };
        let polled = kerf_llm::runtime::block_on(c.batch_poll(b.api, remote))?;
        store.batch_polled(
            b.id,
            polled.state,
            &polled.remote_state,
            &polled.counts,
            polled.error.as_deref(),
        )?;
    }
    store.batches(experiment).map_err(Into::into)
}

/// Send a batch whose process stored it and died before sending: its lines made again from
/// its cells, under the same ids. First the provider is asked for a batch by its name: a
/// process that died after sending and before keeping the provider's id had sent it, and it
/// is kept, not bought again.
fn resend<P: Plan>(plan: &P, store: &Store, c: &CloudProvider, b: &Batch) -> Result<()> {
    if let Some(found) = kerf_llm::runtime::block_on(c.batch_find(b.api, &tag(b)))? {
        store.batch_sent(b.id, &found.remote_id, found.input_file.as_deref())?;
        return Ok(());
    }
    let ids: BTreeSet<String> = store
        .submitted_of(b.experiment)?
        .into_iter()
        .filter(|s| s.submission.batch == b.id)
        .map(|s| s.submission.custom_id)
        .collect();
    let Some(p) = plan.providers().iter().position(|p| p.name() == b.provider) else {
        return Ok(());
    };
    let mut lines = Vec::new();
    for (at, key) in plan.cells(p) {
        let Some(id) = sent_ids(b.experiment, &key)
            .into_iter()
            .find(|id| ids.contains(id))
        else {
            continue;
        };
        let cell = plan.cell(at, key)?;
        let job = cell
            .subject
            .job(&cell.rendering, &plan.providers()[p], &cell.params);
        let prepared = crate::runs::prepare(None, &job)?;
        lines.push(c.batch_line(b.api, &id, &prepared.request)?);
    }
    if !lines.is_empty() {
        send(store, c, b, &lines, None)?;
    }
    Ok(())
}

/// What a fold did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folded {
    /// Runs settled now.
    pub settled: usize,
    /// Requests without a reply (expired, errored, cancelled), by cell: settled as failed runs.
    pub failed: Vec<(CellKey, String)>,
    /// Answers whose id names no request awaited here (another experiment's file, or one folded
    /// already).
    pub unknown: usize,
}

/// Fold the results of every ended batch of `experiment` into its cells (and with `results`,
/// a `vllm run-batch` output file into its file batches): each reply read as its online twin
/// would be, kept with its finish reason, usage and cost at the batch price (half the online
/// price); a request with no reply kept as a failed run saying why. Runs settled already are
/// left as they are.
pub fn fold<P: Plan>(
    plan: &P,
    store: &Store,
    experiment: i64,
    results: Option<&Path>,
) -> Result<Folded> {
    let mut folded = Folded::default();
    let batches = store.batches(experiment)?;
    let file_answers = match results {
        Some(path) => {
            let all = read_results_file(path)?;
            let awaited: BTreeSet<String> = store
                .submitted_of(experiment)?
                .into_iter()
                .map(|s| s.submission.custom_id)
                .collect();
            folded.unknown += all
                .iter()
                .filter(|a| !awaited.contains(&a.custom_id))
                .count();
            Some(all)
        }
        None => None,
    };
    for b in &batches {
        let Some(p) = plan.providers().iter().position(|p| p.name() == b.provider) else {
            continue;
        };
        let answers: Vec<Answer> = match (b.api, b.state, &file_answers) {
            (BatchApi::File, BatchState::Running, Some(all)) => all.clone(),
            (BatchApi::File, ..) => continue,
            (_, BatchState::Ended, _) => {
                let c = cloud(&plan.providers()[p])?;
                let remote = b.remote_id.clone().unwrap_or_default();
                let polled = kerf_llm::runtime::block_on(c.batch_poll(b.api, &remote))?;
                let order = order_of(store, b)?;
                kerf_llm::runtime::block_on(c.batch_results(&polled, &order))?
            }
            (_, BatchState::Failed, _) => Vec::new(),
            _ => continue,
        };
        let whole = b.api != BatchApi::File || results.is_some();
        one_batch(plan, store, b, p, answers, whole, &mut folded)?;
    }
    Ok(folded)
}

/// The custom ids of batch `b` in the order they were sent (its runs' order).
fn order_of(store: &Store, b: &Batch) -> Result<Vec<String>> {
    Ok(store
        .submitted_of(b.experiment)?
        .into_iter()
        .filter(|s| s.submission.batch == b.id)
        .map(|s| s.submission.custom_id)
        .collect())
}

fn read_results_file(path: &Path) -> Result<Vec<Answer>> {
    let text = std::fs::read(path).map_err(|e| ApiError::from(kerf_core::Error::io(path, e)))?;
    let mut answers = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let bad = |why: String| {
            ApiError::new(
                Code::Usage,
                format!("{}: line {}: {why}", path.display(), i + 1),
            )
        };
        let v: Value = serde_json::from_slice(line).map_err(|e| bad(format!("not JSON ({e})")))?;
        answers.push(api::read_openai_line(&v).map_err(bad)?);
    }
    Ok(answers)
}

/// Fold `answers` into batch `b`'s runs (provider `p` of the plan). A batch that ended or
/// failed whole (`whole`) leaves no run awaited: a request with no answer is a failed run.
fn one_batch<P: Plan>(
    plan: &P,
    store: &Store,
    b: &Batch,
    p: usize,
    answers: Vec<Answer>,
    whole: bool,
    folded: &mut Folded,
) -> Result<()> {
    let runs: HashMap<String, i64> = store
        .submitted_of(b.experiment)?
        .into_iter()
        .filter(|s| s.submission.batch == b.id)
        .map(|s| (s.submission.custom_id, s.run))
        .collect();
    let mut by_id: HashMap<String, Outcome> = HashMap::with_capacity(answers.len());
    for a in answers {
        if runs.contains_key(&a.custom_id) {
            by_id.insert(a.custom_id, a.outcome);
        } else if b.api != BatchApi::File {
            // A file's answers are shared by its batches: counted once, by `fold`.
            folded.unknown += 1;
        }
    }
    let provider = &plan.providers()[p];
    let c = cloud(provider)?;
    // Read once for the whole batch: the price table, and per prompt and constraint what reads
    // its answers (the request's mode and schema rewrite do not change with the row).
    let prices = kerf_llm::prices::Prices::load()?;
    let mut readers: HashMap<(String, bool), kerf_llm::cloud::batch::BatchReader> = HashMap::new();
    // Each settled run's outcome first (the ends borrow from them), then one transaction.
    let mut kept: Vec<(i64, Kept)> = Vec::new();
    for (at, key) in plan.cells(p) {
        let Some((id, run)) = sent_ids(b.experiment, &key)
            .into_iter()
            .find_map(|id| runs.get(&id).map(|&run| (id, run)))
        else {
            continue;
        };
        let outcome = match by_id.remove(&id) {
            Some(o) => o,
            None if whole => Outcome::Failed {
                failure: missing_failure(b),
                message: match (&b.error, b.state) {
                    (Some(e), BatchState::Failed) => format!("the batch was refused: {e}"),
                    _ => format!(
                        "no result came back for this request (the batch is {})",
                        b.remote_state.as_deref().unwrap_or("ended")
                    ),
                },
            },
            None => continue,
        };
        // The request is made once per prompt and constraint, for what reads their answers;
        // each cell then needs only its variables (no render per answer).
        let reader = match readers.entry((key.prompt.clone(), key.constrained)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let cell = plan.cell(at, key.clone())?;
                let job = cell.subject.job(&cell.rendering, provider, &cell.params);
                let prepared = crate::runs::prepare(None, &job)?;
                e.insert(c.batch_reader(&prepared.request)?)
            }
        };
        let k = match outcome {
            Outcome::Reply(body) => {
                let (subject, vars) = plan.reading(at, key.clone())?;
                let (raw, finish) = reader.finish(c, &body)?;
                let (report, _) = crate::runs::read_reply(
                    &subject.prompt,
                    &raw,
                    finish.details.wrapped_in(),
                    c.def.fold_enum_case,
                    &vars,
                );
                let out = Outcomes {
                    finish,
                    raw,
                    report,
                    earlier: Vec::new(),
                };
                // As `Chosen::cost`: usage the provider did not report has no price.
                let cost = out
                    .finish
                    .usage_reported()
                    .then(|| prices.estimate(&c.def.model, &out.finish.usage))
                    .flatten()
                    .map(batch_price);
                Kept::Reply(Box::new(out), cost)
            }
            Outcome::Failed { failure, message } => {
                folded.failed.push((key, message.clone()));
                // Where it went is kept as for any run (a resume checks it).
                Kept::Failed(
                    failure,
                    message,
                    serde_json::to_value(reader.details()).unwrap_or_default(),
                )
            }
        };
        kept.push((run, k));
    }
    let ends = kept.iter().map(|(run, k)| (*run, k.end()));
    folded.settled += store.fold_batch(b.id, ends, whole)?;
    Ok(())
}

/// Why a request an ended batch gave no answer for has none.
fn missing_failure(b: &Batch) -> Failure {
    let s = b.remote_state.as_deref().unwrap_or("").to_ascii_lowercase();
    if s.contains("expire") {
        Failure::Expired
    } else if s.contains("cancel") {
        Failure::Canceled
    } else {
        Failure::Errored
    }
}

/// A settled request's outcome, held while its run's end borrows it.
enum Kept {
    Reply(Box<Outcomes>, Option<kerf_llm::prices::Cost>),
    Failed(Failure, String, Value),
}

impl Kept {
    fn end(&self) -> RunEnd<'_> {
        match self {
            Kept::Reply(out, cost) => crate::runs::run_end(out, cost.as_ref()),
            Kept::Failed(failure, message, details) => RunEnd {
                finish_reason: kerf_llm::FinishReason::Error,
                raw: std::borrow::Cow::Borrowed(""),
                report: None,
                usage: kerf_llm::Usage::default(),
                usage_reported: false,
                timings: kerf_llm::Timings::default(),
                details: details.clone(),
                cost: None,
                earlier: Vec::new(),
                error: Some((failure.code().to_string(), message.clone())),
            },
        }
    }
}

/// The batch price: half the online price, for input and output alike (all three providers).
fn batch_price(mut c: kerf_llm::prices::Cost) -> kerf_llm::prices::Cost {
    use super::plan::BATCH_SHARE;
    c.usd *= BATCH_SHARE;
    c.price.input *= BATCH_SHARE;
    c.price.output *= BATCH_SHARE;
    c.source = format!("{} · batch price (half the online price)", c.source);
    c
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A batch sent by a Kerf whose cells had no chunk size nor context is folded back by
    /// recomputing each cell's id: an uncut cell's id must be what it was then (the hash of
    /// the key's JSON without either field), and a cut cell's differ from its uncut twin's.
    #[test]
    fn an_uncut_cells_batch_id_is_the_one_it_had_before_cells_were_cut() {
        let key = CellKey {
            prompt: "kg".into(),
            provider: "oai".into(),
            model: "gpt-4o-mini".into(),
            max_tokens: 512,
            constrained: false,
            repeat: 0,
            chunk_size: 0,
            context_chars: 0,
            chunk: 0,
            pass: 0,
            row: "r1".into(),
        };
        let before = r#"{"prompt":"kg","provider":"oai","model":"gpt-4o-mini","max_tokens":512,"constrained":false,"repeat":0,"chunk":0,"pass":0,"row":"r1"}"#;
        assert_eq!(
            custom_id(7, &key),
            format!("e7-{}", &kerf_store::sha256_hex(before.as_bytes())[..32])
        );
        let cut = CellKey {
            chunk_size: 2000,
            ..key.clone()
        };
        assert_ne!(custom_id(7, &cut), custom_id(7, &key));
        let with_context = CellKey {
            context_chars: 200,
            ..cut.clone()
        };
        assert_ne!(custom_id(7, &with_context), custom_id(7, &cut));
        // A batch sent with the zeros written is still this cell's.
        let written = r#"{"prompt":"kg","provider":"oai","model":"gpt-4o-mini","max_tokens":512,"constrained":false,"repeat":0,"chunk_size":0,"context_chars":0,"chunk":0,"pass":0,"row":"r1"}"#;
        assert_eq!(
            sent_ids(7, &key),
            [
                custom_id(7, &key),
                format!("e7-{}", &kerf_store::sha256_hex(written.as_bytes())[..32])
            ]
        );
        assert_eq!(sent_ids(7, &cut), [custom_id(7, &cut)]);
        // The key reads back whole from either form.
        let back: CellKey = serde_json::from_str(before).unwrap();
        assert_eq!(back, key);
        let text = serde_json::to_string(&with_context).unwrap();
        assert_eq!(
            serde_json::from_str::<CellKey>(&text).unwrap(),
            with_context
        );
    }
}
