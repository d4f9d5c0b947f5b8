//! Opening the history: the file's checks, connection settings, migrations and the recovery of
//! runs whose process died.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::owner::{self, Owner};

/// Milliseconds since the Unix epoch, as the store should see "now" (tests inject a fixed one).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// How long a write waits for another process's write to finish before giving up. Writes are
/// short (a run's start, a batch of streamed text, its end), so this is only reached when
/// something holds the file far longer than Kerf ever does.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// The history: one SQLite connection, its clock, and (once it writes a run) its owner claim.
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) clock: Clock,
    /// The database file (`None` in memory).
    path: Option<PathBuf>,
    /// Claimed on the first run or experiment this store starts.
    owner: RefCell<Option<Owner>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (or create) the history at `path`: refuse a file that is not a Kerf history, is
    /// damaged or is newer than this build — without writing to it — then migrate it and mark the
    /// runs of dead processes `interrupted`.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with_clock(path, Arc::new(kerf_core::time::now_ms))
    }

    pub fn open_with_clock(path: &Path, clock: Clock) -> Result<Self> {
        let place = path.display().to_string();
        if path.is_dir() {
            return Err(Error::Io {
                path: place,
                message: "is a directory, not a history file".into(),
            });
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::Io {
                path: parent.display().to_string(),
                message: format!("cannot create the data directory: {e}"),
            })?;
        }
        identify(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::sqlite(&place, e))?;
        let mut store = Store {
            conn,
            clock,
            path: Some(path.to_path_buf()),
            owner: RefCell::new(None),
        };
        store.configure()?;
        store.recover()?;
        Ok(store)
    }

    /// A history that lives only as long as the value (tests; the app's scratch runs).
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory().map_err(|e| Error::sqlite(":memory:", e))?;
        let mut store = Store {
            conn,
            clock: Arc::new(kerf_core::time::now_ms),
            path: None,
            owner: RefCell::new(None),
        };
        store.configure()?;
        Ok(store)
    }

    /// Use `clock` for every timestamp written from now on.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub(crate) fn place(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| ":memory:".into(), |p| p.display().to_string())
    }

    /// Map a SQLite error on this store's file.
    pub(crate) fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.place(), e)
    }

    pub(crate) fn now(&self) -> i64 {
        (self.clock)()
    }

    /// The settings every connection gets, checked before anything is written: the busy timeout,
    /// the file's identity and version (refused untouched if wrong), then WAL and migrations.
    fn configure(&mut self) -> Result<()> {
        let place = self.place();
        let sql = |e| Error::sqlite(&place, e);
        self.conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // Reading the header first: a file that is not SQLite fails here, before any write.
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if self.path.is_some() {
            if version > crate::migrate::LATEST {
                return Err(Error::Newer {
                    path: place,
                    found: version,
                    known: crate::migrate::LATEST,
                });
            }
            // WAL: readers never block the writer, and a killed writer loses at most its
            // uncommitted transaction. NORMAL sync is durable across process crashes.
            self.conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
                .map_err(sql)?;
            self.conn
                .execute_batch("PRAGMA synchronous = NORMAL")
                .map_err(sql)?;
        }
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(sql)?;
        crate::migrate::migrate(&mut self.conn, &place)
    }

    /// This store's owner id, claiming it on first use (a file store only).
    pub(crate) fn owner_id(&self) -> Result<Option<String>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let mut owner = self.owner.borrow_mut();
        if owner.is_none() {
            let dir = owner::dir_for(path);
            *owner = Some(Owner::claim(&dir).map_err(|e| Error::Io {
                path: dir.display().to_string(),
                message: format!("cannot claim a run owner: {e}"),
            })?);
        }
        Ok(owner.as_ref().map(|o| o.id.clone()))
    }

    /// Runs and experiments still `running` whose process is gone become `interrupted`, keeping
    /// the text received (and, for runs, a parse report of it). Returns how many runs were.
    pub fn recover(&self) -> Result<usize> {
        let Some(path) = &self.path else {
            return Ok(0);
        };
        let dir = owner::dir_for(path);
        let mine = self.owner.borrow().as_ref().map(|o| o.id.clone());
        let dead = |id: &Option<String>| match id {
            Some(id) => Some(id) != mine.as_ref() && !owner::is_alive(&dir, id),
            None => true,
        };
        let running: Vec<(i64, Option<String>)> =
            self.query_pairs("SELECT id, owner FROM runs WHERE status = 'running'")?;
        let runs: Vec<i64> = running
            .into_iter()
            .filter(|(_, o)| dead(o))
            .map(|(id, _)| id)
            .collect();
        let experiments: Vec<i64> = self
            .query_pairs("SELECT id, owner FROM experiments WHERE status = 'running'")?
            .into_iter()
            .filter(|(_, o)| dead(o))
            .map(|(id, _)| id)
            .collect();
        for &id in &runs {
            self.interrupt_run(id)?;
        }
        for &id in &experiments {
            self.conn
                .execute(
                    "UPDATE experiments SET status = 'interrupted', finished_at = ?2, owner = NULL,
                     error = 'the Kerf process running this experiment stopped before it finished'
                     WHERE id = ?1 AND status = 'running'",
                    params![id, self.now()],
                )
                .map_err(|e| self.err(e))?;
        }
        owner::sweep_dead(&dir);
        if !runs.is_empty() {
            tracing::warn!(
                "{} run(s) left running by a process that stopped were marked interrupted (their text is kept)",
                runs.len()
            );
        }
        Ok(runs.len())
    }

    fn query_pairs(&self, sql: &str) -> Result<Vec<(i64, Option<String>)>> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// Fold a dead run's streamed chunks into its reply, parse what arrived, mark it interrupted.
    ///
    /// Another process may be recovering the same run: the list of `running` runs was read
    /// outside any transaction. So the status is read again inside the transaction that writes,
    /// and a run that is no longer `running` (or whose chunks changed meanwhile) is left as it
    /// is: a report is never overwritten by one this process did not produce from the same text.
    /// The parse (seconds for a reply of hundreds of MB) runs between the two transactions, not
    /// while holding the write lock.
    fn interrupt_run(&self, id: i64) -> Result<()> {
        let Some(seen) = self.dead_run_text(id)? else {
            return Ok(());
        };
        let report = crate::runs::parse_with_version(&seen.version_text, &seen.vars, &seen.raw);
        let (objects, dropped, truncated) = report.as_ref().map_or((None, None, None), |r| {
            (
                Some(r.objects.len() as i64),
                Some(r.dropped.len() as i64),
                Some(r.truncated),
            )
        });
        let report = report.and_then(|r| serde_json::to_string(&r).ok());
        let tx = self.write()?;
        let (status, last_chunk) = Self::run_state(&tx, id).map_err(|e| self.err(e))?;
        if status != "running" || last_chunk != seen.last_chunk {
            // Recovered by another process while this one parsed.
            return tx.commit().map_err(|e| self.err(e));
        }
        tx.execute(
            "UPDATE run_bodies SET raw = raw || ?2, report = ?3 WHERE run_id = ?1",
            params![id, seen.raw, report],
        )
        .map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM run_chunks WHERE run_id = ?1", [id])
            .map_err(|e| self.err(e))?;
        tx.execute(
            "UPDATE runs SET status = 'interrupted', finish_reason = 'interrupted', finished_at = ?2,
             owner = NULL, objects = ?3, dropped = ?4, truncated = ?5, error_code = 'interrupted',
             error = 'the Kerf process running this stopped (killed or crashed) mid-run; the text received is kept'
             WHERE id = ?1 AND status = 'running'",
            params![id, self.now(), objects, dropped, truncated],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// A dead run's streamed text, prompt and variables, read in one snapshot; `None` when the
    /// run is no longer `running`.
    fn dead_run_text(&self, id: i64) -> Result<Option<DeadRun>> {
        let tx = self.write()?;
        let (status, last_chunk) = Self::run_state(&tx, id).map_err(|e| self.err(e))?;
        if status != "running" {
            return Ok(None);
        }
        let raw: String = tx
            .query_row(
                "SELECT coalesce(group_concat(text, ''), '') FROM
                 (SELECT text FROM run_chunks WHERE run_id = ?1 ORDER BY seq)",
                [id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        let (version_text, vars): (String, String) = tx
            .query_row(
                "SELECT p.text, i.vars FROM runs r JOIN prompt_versions p ON p.id = r.prompt_version
                 JOIN inputs i ON i.id = r.input_id WHERE r.id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(DeadRun {
            raw,
            version_text,
            vars,
            last_chunk,
        }))
    }

    /// A run's status and the sequence number of its last streamed chunk.
    fn run_state(
        tx: &rusqlite::Transaction<'_>,
        id: i64,
    ) -> rusqlite::Result<(String, Option<i64>)> {
        tx.query_row(
            "SELECT status, (SELECT max(seq) FROM run_chunks WHERE run_id = ?1) FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// A write transaction that takes the write lock up front, so a concurrent writer waits on
    /// the busy timeout instead of failing with "database is locked" on upgrade.
    pub(crate) fn write(&self) -> Result<rusqlite::Transaction<'_>> {
        rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))
    }

    /// Check the file's integrity (`PRAGMA integrity_check`): `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<String> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| self.err(e))?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))?;
        Ok(lines.join("\n"))
    }
}

/// What recovery reads of a dead run before parsing it.
struct DeadRun {
    raw: String,
    version_text: String,
    vars: String,
    last_chunk: Option<i64>,
}

/// What an existing file is, from its first 100 bytes (the SQLite header), read without opening
/// it as a database: SQLite's own open and the pragmas that follow (WAL) write to the file, so a
/// file that is not Kerf's, or is newer than this build, is refused here, before any of that.
/// An empty or missing file is a new history. (`migrate` checks again through SQLite, which sees
/// a header change still in the WAL.)
fn identify(path: &Path) -> Result<()> {
    use std::io::Read;
    let place = path.display().to_string();
    let mut header = Vec::with_capacity(100);
    match std::fs::File::open(path) {
        Ok(f) => f.take(100).read_to_end(&mut header),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
    }
    .map_err(|e| Error::Io {
        path: place.clone(),
        message: format!("cannot read the history file: {e}"),
    })?;
    if header.is_empty() {
        return Ok(());
    }
    let field = |at: usize| {
        header
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
    };
    let (Some(pages), Some(version), Some(app)) = (field(28), field(60), field(68)) else {
        return Err(Error::not_sqlite(place));
    };
    if !header.starts_with(b"SQLite format 3\0") {
        return Err(Error::not_sqlite(place));
    }
    if i64::from(version) > crate::migrate::LATEST {
        return Err(Error::Newer {
            path: place,
            found: i64::from(version),
            known: crate::migrate::LATEST,
        });
    }
    // A database holding anything (a table needs a page of its own) or versioned by someone
    // else, without Kerf's mark, is another program's.
    if i64::from(app) != crate::migrate::APPLICATION_ID && (version > 0 || pages > 1) {
        return Err(Error::Corrupt {
            path: place,
            message: "a SQLite database, but not a Kerf history".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Filter, NewRun, RunEnd, Status};
    use serde_json::json;

    fn new_run(store: &Store) -> NewRun {
        let prompt = r#"{"prompt": "{{text}}", "response-type": "jsonl"}"#;
        NewRun {
            prompt_version: store
                .put_prompt_version("p", None, "jsonl", prompt)
                .unwrap(),
            input: store.put_input(&json!({"text": "t"}), &json!({})).unwrap(),
            experiment: None,
            rerun_of: None,
            provider: "local".into(),
            model: "m".into(),
            model_sha256: None,
            params: json!({}),
            system: None,
            user: "t".into(),
        }
    }

    /// Security review, finding 7: two processes recovering the same dead run destroyed its
    /// report. The second had listed the run as `running` before the first folded it, then
    /// parsed the (by then empty) chunks and overwrote the report with nothing.
    #[test]
    fn a_second_recovery_of_the_same_run_never_overwrites_its_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let store = Store::open(&path).unwrap();
        let mut w = store.begin_run(&new_run(&store)).unwrap();
        w.push("{\"a\": 1}\n{\"b\": 2}\n{\"c").unwrap();
        let id = w.id();
        std::mem::forget(w); // the writer dies: no finish, its owner lock goes with the store
        drop(store);
        let first = Store::open(&path).unwrap(); // recovers it
        let recovered = first.run(id).unwrap();
        assert_eq!(recovered.summary.status, Status::Interrupted);
        assert_eq!(recovered.summary.objects, Some(2));
        // The second process, working from the list it read before the first one finished.
        let second = Store::open(&path).unwrap();
        second.interrupt_run(id).unwrap();
        let after = second.run(id).unwrap();
        assert_eq!(after.summary.objects, Some(2), "the report was overwritten");
        assert_eq!(after.raw, recovered.raw);
        assert_eq!(after.report, recovered.report);
    }

    /// A full disk (here: the database's page limit, which SQLite reports exactly as a full
    /// disk, SQLITE_FULL): the run fails with a clear error and earlier runs are untouched.
    #[test]
    fn a_full_disk_fails_the_run_clearly_and_keeps_earlier_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.sqlite")).unwrap();
        let w = store.begin_run(&new_run(&store)).unwrap();
        let earlier = w
            .finish(RunEnd {
                finish_reason: "stop".into(),
                raw: "{\"a\": 1}\n".into(),
                ..RunEnd::default()
            })
            .unwrap();
        let pages: i64 = store
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        store
            .conn
            .execute_batch(&format!("PRAGMA max_page_count = {}", pages + 2))
            .unwrap();
        let mut w = store.begin_run(&new_run(&store)).unwrap();
        let chunk = "x".repeat(64 * 1024);
        let err = (0..20).find_map(|_| w.push(&chunk).err()).unwrap();
        assert_eq!(err.code(), "store_full", "{err}");
        assert!(err.to_string().contains("disk is full"), "{err}");
        assert!(err.to_string().contains("h.sqlite"), "{err}");
        drop(w);
        let run = store.run(earlier).unwrap();
        assert_eq!(run.summary.status, Status::Ok);
        assert_eq!(run.raw, "{\"a\": 1}\n");
        assert_eq!(store.list(&Filter::default()).unwrap().len(), 2);
        assert_eq!(store.integrity_check().unwrap(), "ok");
    }
}
