//! What the user adds to or takes from a run after it ran: tags, a note, deletion.

use rusqlite::params;

use crate::error::{Error, Result};
use crate::store::Store;

impl Store {
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
}
