//! Opening the history: the file's checks, connection settings and migrations; then the
//! recovery of runs whose process died ([`crate::recovery`]).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

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
    pub(crate) owner: RefCell<Option<Owner>>,
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

    /// A write transaction that takes the write lock up front, so a concurrent writer waits on
    /// the busy timeout instead of failing with "database is locked" on upgrade.
    pub(crate) fn write(&self) -> Result<rusqlite::Transaction<'_>> {
        rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))
    }

    /// One statement in its own write transaction.
    pub(crate) fn exec(&self, sql: &str, args: impl rusqlite::Params) -> Result<()> {
        let tx = self.write()?;
        tx.execute(sql, args).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
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

/// A column of JSON text as a value (`null` when absent or unreadable).
pub(crate) fn json_col(text: Option<String>) -> serde_json::Value {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::new_run;
    use crate::{Filter, RunEnd, Status};
    use kerf_core::run::FinishReason;

    /// A full disk (here: the database's page limit, which SQLite reports exactly as a full
    /// disk, SQLITE_FULL): the run fails with a clear error and earlier runs are untouched.
    #[test]
    fn a_full_disk_fails_the_run_clearly_and_keeps_earlier_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.sqlite")).unwrap();
        let w = store.begin_run(&new_run(&store)).unwrap();
        let earlier = w
            .finish(RunEnd::new(FinishReason::Stop, "{\"a\": 1}\n"))
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
