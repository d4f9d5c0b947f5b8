//! Schema migrations: ordered SQL files embedded at build time, applied on open. The file's
//! `PRAGMA user_version` is the number of migrations applied; a file with a higher number than
//! this build knows was written by a newer Kerf and is refused untouched.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// Every migration, in order: `(file name, SQL)`. Add a file under `migrations/` and a line here
/// (a test checks the two agree).
pub const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_history.sql",
        include_str!("../migrations/0001_history.sql"),
    ),
    ("0002_eval.sql", include_str!("../migrations/0002_eval.sql")),
    (
        "0003_submitted.sql",
        include_str!("../migrations/0003_submitted.sql"),
    ),
    (
        "0004_cell_scores.sql",
        include_str!("../migrations/0004_cell_scores.sql"),
    ),
    (
        "0005_cells.sql",
        include_str!("../migrations/0005_cells.sql"),
    ),
    (
        "0006_figures.sql",
        include_str!("../migrations/0006_figures.sql"),
    ),
    (
        "0007_batches.sql",
        include_str!("../migrations/0007_batches.sql"),
    ),
    (
        "0008_chunked_cells.sql",
        include_str!("../migrations/0008_chunked_cells.sql"),
    ),
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

/// Marks a Kerf history in the SQLite header (`PRAGMA application_id`): ASCII `KERF`.
pub const APPLICATION_ID: i64 = 0x4B45_5246;

/// Check what the file is, then bring it to [`LATEST`]. Nothing is written to a file that is not
/// a Kerf history or is newer than this build.
pub fn migrate(conn: &mut Connection, path: &str) -> Result<()> {
    let sql = |e| Error::sqlite(path, e);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(sql)?;
    if version > LATEST {
        return Err(Error::Newer {
            path: path.into(),
            found: version,
            known: LATEST,
        });
    }
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(sql)?;
    if app != APPLICATION_ID && (version > 0 || tables > 0) {
        return Err(Error::Corrupt {
            path: path.into(),
            message: "a SQLite database, but not a Kerf history".into(),
        });
    }
    if version == LATEST {
        return Ok(());
    }
    // A migration may rebuild a table others refer to; with foreign keys on, dropping the old
    // one would act on the rows pointing at it. The pragma is a no-op inside a transaction, so
    // it is set around it, and the keys are checked before the commit.
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .map_err(sql)?;
    let migrated = apply(conn, path);
    conn.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(sql)?;
    migrated
}

/// Apply the migrations this file lacks, in one transaction.
fn apply(conn: &mut Connection, path: &str) -> Result<()> {
    let sql = |e| Error::sqlite(path, e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    // Another process may have migrated while this one waited for the write lock.
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    for (name, body) in MIGRATIONS.iter().skip(version as usize) {
        tx.execute_batch(body).map_err(|e| Error::Sqlite {
            path: path.into(),
            message: format!("migration {name}: {e}"),
        })?;
    }
    let dangling: i64 = tx
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .map_err(sql)?;
    if dangling > 0 {
        return Err(Error::Corrupt {
            path: path.into(),
            message: format!("{dangling} row(s) refer to rows that do not exist after migrating"),
        });
    }
    tx.execute_batch(&format!(
        "PRAGMA user_version = {LATEST}; PRAGMA application_id = {APPLICATION_ID};"
    ))
    .map_err(sql)?;
    tx.commit().map_err(sql)
}
