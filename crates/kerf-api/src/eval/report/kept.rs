//! Kept scores: what scoring a cell gives, kept with its run (`cell_scores`) under a key of
//! everything it depends on, so opening an eval again scores no cell again.

use super::*;

/// What scoring a cell gives, kept with its run (`cell_scores`) so that opening an eval again
/// does not score it again.
#[derive(Serialize, serde::Deserialize)]
pub(super) struct CellScore {
    pub(super) ungrounded: Option<usize>,
    pub(super) scored: Option<kerf_core::eval::Scored>,
}

impl CellScore {
    /// Fill `line`'s figures in from this score and its reply's parse.
    pub(super) fn apply(self, line: &mut CellLine, report: &ParseReport) {
        line.objects = report.objects.len();
        line.dropped = report.drop_counts();
        line.ungrounded = self.ungrounded;
        if let Some(s) = self.scored {
            let f = s.counts.scores();
            (line.tp, line.fp, line.fn_) = (Some(f.tp), Some(f.fp), Some(f.fn_));
            (line.precision, line.recall, line.f1) = (f.precision, f.recall, f.f1);
            line.types = s
                .by_type
                .iter()
                .filter(|(_, c)| c.tp + c.fp + c.fn_ > 0)
                .map(|(t, _)| t.clone())
                .collect();
            line.scored = Some(s);
        }
    }

    pub(super) fn of(line: &CellLine) -> CellScore {
        CellScore {
            ungrounded: line.ungrounded,
            scored: line.scored.clone(),
        }
    }
}

/// The version of scoring a kept score was made by: a change to how cells are scored changes
/// it, and every kept score is made again.
pub(super) const SCORING: &str = "2";

/// What a kept score of a cell of `eval` (row `seq`, prompt `si`) depends on, besides its run:
/// the eval and row (an eval's rows never change), the prompt's text and its `match` settings
/// now (`rescore` may have changed them), which objects were scored, and the scoring's version.
pub(super) fn score_key(eval: &Eval, si: usize, seq: usize, replies: Replies) -> String {
    let s = &eval.subjects[si];
    let matching = serde_json::to_string(&s.prompt.file.match_spec).unwrap_or_default();
    let prompt = kerf_store::sha256_hex(format!("{}\n{matching}", s.source.text).as_bytes());
    let replies = match replies {
        Replies::Stored => "stored",
        Replies::Reread => "reread",
    };
    format!(
        "v{SCORING} eval {} row {seq} {replies} {prompt}",
        eval.experiment
    )
}

/// Kept scores are written in batches of this many cells, so a report of many cells holds few.
pub(super) const KEEP_BATCH: usize = 256;
