//! An eval's cells' replies read back from the history, one at a time ([`Reader`]): the parse
//! each run kept, or its raw reply parsed again; never more than a few held at once.

use std::collections::HashMap;

use kerf_core::eval::dataset::Row;
use kerf_core::eval::mentions::{Merged, Merger};
use kerf_core::eval::score;
use kerf_core::{ParseReport, Prompt};
use kerf_llm::RunDetails;
use kerf_store::Store;
use serde_json::{Map, Value};

use super::lines::{CellLine, Records, held};
use super::{Eval, Replies, chunked};
use crate::error::Result;

/// Reads an eval's cells' replies back from the history, one at a time: the objects its run's
/// parse gave, or (`Replies::Reread`) its raw reply parsed again.
pub(crate) struct Reader<'a> {
    store: &'a Store,
    eval: &'a Eval,
    replies: Replies,
    subject_of: HashMap<&'a str, usize>,
    seq_of: HashMap<&'a str, usize>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(store: &'a Store, eval: &'a Eval, replies: Replies) -> Reader<'a> {
        Reader {
            store,
            eval,
            replies,
            subject_of: eval
                .subjects
                .iter()
                .enumerate()
                .map(|(i, s)| (s.prompt.id(), i))
                .collect(),
            seq_of: eval
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.as_str(), i))
                .collect(),
        }
    }

    /// The index of prompt `id` among the eval's subjects.
    pub(crate) fn subject(&self, id: &str) -> Option<usize> {
        self.subject_of.get(id).copied()
    }

    /// The index of row `id` among the eval's rows.
    pub(crate) fn seq(&self, id: &str) -> Option<usize> {
        self.seq_of.get(id).copied()
    }

    /// Run `run`'s reply, as prompt `si` reads it for `row`.
    pub(crate) fn reply(&self, run: i64, si: usize, row: &Row) -> Result<Reply> {
        match self.replies {
            Replies::Stored => self.stored(run),
            Replies::Reread => self.reread(run, si, row),
        }
    }

    /// The objects run `run`'s parse gave as it ran.
    fn stored(&self, run: i64) -> Result<Reply> {
        let report = self.store.eval_reply(run, false)?.report;
        Ok(Reply::new(report.unwrap_or_default()))
    }

    /// Run `run`'s raw reply parsed again by prompt `si` for `row`.
    fn reread(&self, run: i64, si: usize, row: &Row) -> Result<Reply> {
        self.reread_with(run, si, self.eval.vars_for(si, row))
    }

    /// Run `run`'s raw reply parsed again by prompt `si` with the variables it was sent with.
    fn reread_with(&self, run: i64, si: usize, vars: Map<String, Value>) -> Result<Reply> {
        let body = self.store.eval_reply(run, true)?;
        Ok(Reply::new(reread_reply(
            &self.eval.subjects[si].prompt,
            &vars,
            body.raw.as_deref(),
            body.details,
        )))
    }

    /// A cut document's line `c` (prompt `si`, row `row`, its index `seq`): its chunks'
    /// replies read back one at a time, in pass then chunk order, each record placed in the
    /// document and merged ([`Merger`]); with `expected`, the counts after each pass. `None`
    /// unless every chunk was measured.
    pub(crate) fn document(
        &self,
        c: &CellLine,
        si: usize,
        seq: usize,
        row: &Row,
        expected: Option<&[Value]>,
    ) -> Result<Option<Document>> {
        let (Some(size), true) = (c.chunk_size, c.measured()) else {
            return Ok(None);
        };
        let context = c.context_chars.unwrap_or(0);
        let chunks = self.eval.chunks(si, seq, row, size)?;
        let m = self.eval.subjects[si].prompt.matcher();
        let mut merger = Merger::new(&m);
        let mut report = ParseReport::default();
        let mut by_passes = Vec::new();
        let mut runs = c.chunk_runs.iter().peekable();
        while let Some(&(chunk, pass, run)) = runs.next() {
            let reply = match self.replies {
                Replies::Stored => self.stored(run)?,
                Replies::Reread => self.reread_with(
                    run,
                    si,
                    self.eval.chunk_vars(si, seq, row, (size, context, chunk))?,
                )?,
            };
            if let Some(text) = chunked::chunk_text(&chunks, chunk as usize, context) {
                merger.add(&text, pass, &reply.report.objects.to_vec());
            }
            let Reply { report: r, .. } = reply;
            report.dropped.extend(r.dropped);
            report.truncated |= r.truncated;
            report.notes.extend(r.notes);
            let pass_ends = runs.peek().is_none_or(|&&(_, next, _)| next != pass);
            if let (Some(expected), true) = (expected, pass_ends) {
                by_passes.push(score(&m, expected, merger.objects()).counts);
            }
        }
        let merged = merger.finish();
        for o in &merged.objects {
            report.objects.push(o);
        }
        Ok(Some(Document {
            reply: Reply::new(report),
            merged,
            by_passes,
        }))
    }

    /// The records of cell `c`'s reply (none unless it was measured), read back.
    pub(crate) fn objects(&self, c: &CellLine) -> Result<Records> {
        Ok(self
            .cell_reply(c)?
            .map_or_else(Records::none, Reply::into_records))
    }

    /// Cell `c`'s reply, read back (`None` unless it was measured).
    pub(crate) fn cell_reply(&self, c: &CellLine) -> Result<Option<Reply>> {
        let (Some(si), Some(ri)) = (self.subject(&c.prompt), self.seq(&c.row)) else {
            return Ok(None);
        };
        if c.chunk_size.is_some() {
            let row = self.eval.row(self.store, ri)?;
            return Ok(self.document(c, si, ri, &row, None)?.map(|d| d.reply));
        }
        let (Some(run), true) = (c.run, c.measured()) else {
            return Ok(None);
        };
        match self.replies {
            // The stored parse needs no row.
            Replies::Stored => self.stored(run).map(Some),
            Replies::Reread => {
                let row = self.eval.row(self.store, ri)?;
                self.reread(run, si, &row).map(Some)
            }
        }
    }
}

/// A cut document's chunk replies made one: the merged records as one reply, where each
/// stands, and (when the document has expected records) the counts after each pass.
pub(crate) struct Document {
    pub reply: Reply,
    pub merged: Merged,
    pub by_passes: Vec<kerf_core::eval::Counts>,
}

/// One cell's reply as the report holds it while it reads the cell (counted: see [`held`]).
pub(crate) struct Reply {
    pub report: ParseReport,
    _held: held::Held,
}

impl Reply {
    fn new(report: ParseReport) -> Reply {
        Reply {
            report,
            _held: held::Held::new(),
        }
    }

    /// Its records, still counted as the one reply they are.
    fn into_records(self) -> Records {
        Records::held(self.report.objects.to_vec(), self._held)
    }
}

/// A stored reply read again from its raw text, the way its run read it: unwrapped from the
/// key its run wrapped it in, enum case folded if its run folded any, parsed with the
/// variables it was rendered with (`vars`: [`Eval::vars_for`](super::Eval::vars_for)).
pub(crate) fn reread_reply(
    prompt: &Prompt,
    vars: &Map<String, Value>,
    raw: Option<&str>,
    details: Option<Value>,
) -> ParseReport {
    let details: Option<RunDetails> = details.and_then(|d| serde_json::from_value(d).ok());
    let folded = matches!(&details, Some(RunDetails::Cloud(c)) if !c.case_folded.is_empty());
    let (report, _) = crate::runs::read_reply(
        prompt,
        raw.unwrap_or_default(),
        details.as_ref().and_then(RunDetails::wrapped_in),
        folded,
        vars,
    );
    report
}
