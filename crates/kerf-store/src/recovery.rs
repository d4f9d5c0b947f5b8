//! Runs whose process died. Opening the history marks every run and experiment still `running`
//! whose owner is gone `interrupted`, folding a run's streamed chunks into its reply so the text
//! received is kept.
//!
//! Parsing that text is not storage: it needs the run's prompt compiled. The store keeps prompt
//! versions as text and compiles nothing, so it only says which runs lack a report
//! ([`Store::runs_without_report`]) and keeps the one its caller makes ([`Store::set_report`]);
//! kerf-api does both whenever it opens the history.

use kerf_core::ParseReport;
use rusqlite::params;

use crate::error::Result;
use crate::owner;
use crate::store::Store;

impl Store {
    /// Mark the runs and experiments left `running` by a process that is gone `interrupted`,
    /// keeping each run's text. Returns the runs this call interrupted.
    pub fn recover(&self) -> Result<Vec<i64>> {
        let Some(path) = self.path() else {
            return Ok(Vec::new());
        };
        let dir = owner::dir_for(path);
        let mine = self.owner.borrow().as_ref().map(|o| o.id.clone());
        let dead = |id: &Option<String>| match id {
            Some(id) => Some(id) != mine.as_ref() && !owner::is_alive(&dir, id),
            None => true,
        };
        let dead_of = |sql: &str| -> Result<Vec<i64>> {
            Ok(self
                .query_pairs(sql)?
                .into_iter()
                .filter(|(_, o)| dead(o))
                .map(|(id, _)| id)
                .collect())
        };
        let runs = dead_of("SELECT id, owner FROM runs WHERE status = 'running'")?;
        let experiments = dead_of("SELECT id, owner FROM experiments WHERE status = 'running'")?;
        let mut interrupted = Vec::new();
        for id in runs {
            if self.interrupt_run(id)? {
                interrupted.push(id);
            }
        }
        for id in experiments {
            self.exec(
                "UPDATE experiments SET status = 'interrupted', finished_at = ?2, owner = NULL,
                 error = 'the Kerf process running this experiment stopped before it finished'
                 WHERE id = ?1 AND status = 'running'",
                params![id, self.now()],
            )?;
        }
        owner::sweep_dead(&dir);
        if !interrupted.is_empty() {
            tracing::warn!(
                "{} run(s) left running by a process that stopped were marked interrupted (their text is kept)",
                interrupted.len()
            );
        }
        Ok(interrupted)
    }

    fn query_pairs(&self, sql: &str) -> Result<Vec<(i64, Option<String>)>> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// Fold a dead run's streamed chunks into its reply and mark it interrupted, in one
    /// transaction. The list of `running` runs was read outside it and another process may be
    /// recovering the same run, so the status is read again here: a run no longer `running` is
    /// left as it is (`false`).
    pub(crate) fn interrupt_run(&self, id: i64) -> Result<bool> {
        let tx = self.write()?;
        let status: String = tx
            .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if status != "running" {
            tx.commit().map_err(|e| self.err(e))?;
            return Ok(false);
        }
        for sql in [
            "UPDATE run_bodies SET raw = raw || (SELECT coalesce(group_concat(text, ''), '') FROM
             (SELECT text FROM run_chunks WHERE run_id = ?1 ORDER BY seq)) WHERE run_id = ?1",
            "DELETE FROM run_chunks WHERE run_id = ?1",
        ] {
            tx.execute(sql, [id]).map_err(|e| self.err(e))?;
        }
        tx.execute(
            "UPDATE runs SET status = 'interrupted', finish_reason = 'interrupted', finished_at = ?2,
             owner = NULL, error_code = 'interrupted',
             error = 'the Kerf process running this stopped (killed or crashed) mid-run; the text received is kept'
             WHERE id = ?1",
            params![id, self.now()],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(true)
    }

    /// Interrupted runs whose text has not been parsed: those recovered from a dead process, and
    /// those whose writer was dropped without an end. Oldest first.
    ///
    /// Read from the `runs` table alone (a parsed run has its object count there): every open
    /// asks, and a body's `report` column sits behind its reply, which can be hundreds of MB.
    pub fn runs_without_report(&self) -> Result<Vec<i64>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id FROM runs WHERE status = 'interrupted' AND objects IS NULL
                 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([], |r| r.get(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// Keep `report` as the parse of an interrupted run's text, with its counts. A run that
    /// already has a report keeps it (`false`): two processes recovering the same run parse the
    /// same text, and a report is never overwritten.
    pub fn set_report(&self, id: i64, report: &ParseReport) -> Result<bool> {
        let json = serde_json::to_string(report).unwrap_or_default();
        let tx = self.write()?;
        let written = tx
            .execute(
                "UPDATE run_bodies SET report = ?2 WHERE run_id = ?1 AND report IS NULL",
                params![id, json],
            )
            .map_err(|e| self.err(e))?;
        if written == 1 {
            tx.execute(
                "UPDATE runs SET objects = ?2, dropped = ?3, truncated = ?4 WHERE id = ?1",
                params![
                    id,
                    report.objects.len() as i64,
                    report.dropped.len() as i64,
                    report.truncated
                ],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(written == 1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::testing::new_run;
    use crate::{Status, Store};
    use serde_json::json;

    /// Security review, finding 7: two processes recovering the same dead run destroyed its
    /// report. The second had listed the run as `running` before the first folded it, then
    /// overwrote the report with one of nothing. Now the fold re-reads the status in its
    /// transaction, and a report is only ever written where there is none.
    #[test]
    fn a_second_recovery_of_the_same_run_never_overwrites_its_text_or_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let store = Store::open(&path).unwrap();
        let mut w = store.begin_run(&new_run(&store)).unwrap();
        w.push("{\"a\": 1}\n{\"b\": 2}\n{\"c").unwrap();
        let id = w.id();
        std::mem::forget(w); // the writer dies: no finish, its owner lock goes with the store
        drop(store);
        let first = Store::open(&path).unwrap(); // recovers it
        assert_eq!(first.runs_without_report().unwrap(), vec![id]);
        let recovered = first.run(id).unwrap();
        assert_eq!(recovered.summary.status, Status::Interrupted);
        assert_eq!(recovered.raw, "{\"a\": 1}\n{\"b\": 2}\n{\"c");
        let report = kerf_core::ParseReport {
            objects: vec![json!({"a": 1}), json!({"b": 2})].into(),
            truncated: true,
            ..Default::default()
        };
        assert!(first.set_report(id, &report).unwrap());
        // The second process, working from the list it read before the first one finished.
        let second = Store::open(&path).unwrap();
        assert!(!second.interrupt_run(id).unwrap());
        assert!(
            !second
                .set_report(id, &kerf_core::ParseReport::default())
                .unwrap()
        );
        let after = second.run(id).unwrap();
        assert_eq!(after.summary.objects, Some(2), "the report was overwritten");
        assert_eq!(after.raw, recovered.raw);
        assert_eq!(after.report, Some(report));
        assert!(second.runs_without_report().unwrap().is_empty());
    }
}
