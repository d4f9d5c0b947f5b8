//! Which process is writing a run. A store that starts a run holds an exclusive lock on a file
//! of its own in `<database>-owners/`; the operating system releases it when the process dies,
//! however it dies. A later open that finds a `running` run whose owner's file is unlocked (or
//! gone) knows the writer is dead and marks the run `interrupted`; a run whose owner still holds
//! its lock is live (the CLI and the desktop app write at the same time) and is left alone.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// This store's claim: its id (kept on its runs) and the locked file.
#[derive(Debug)]
pub struct Owner {
    pub id: String,
    path: PathBuf,
    _file: File,
}

/// The owners folder of a database file.
pub fn dir_for(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-owners");
    db.with_file_name(name)
}

impl Owner {
    /// Claim a new owner id in `dir` and hold its lock.
    ///
    /// The lock file is created and locked under a staging name, then renamed into place, so
    /// another process never sees `<id>.lock` unlocked (it would judge the owner dead and remove
    /// the file). No owner removes the folder, and a sweep leaves a young staging file alone, so
    /// nothing another process does takes a file from under a claim; a claim that still meets
    /// `NotFound` (the folder removed by hand, or by an older Kerf) tries again.
    pub fn claim(dir: &Path) -> std::io::Result<Self> {
        let mut attempt = 0;
        loop {
            match Self::try_claim(dir) {
                Err(e)
                    if attempt < 16
                        && matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::AlreadyExists
                        ) =>
                {
                    attempt += 1;
                }
                claimed => return claimed,
            }
        }
    }

    fn try_claim(dir: &Path) -> std::io::Result<Self> {
        // Unique within the process too: two stores of one process may claim in the same
        // nanosecond.
        static CLAIMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        std::fs::create_dir_all(dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{}-{nanos:09}-{n}", std::process::id());
        let staging = dir.join(format!("{id}.claim"));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&staging)?;
        let path = dir.join(format!("{id}.lock"));
        if let Err(e) = file.lock().and_then(|()| std::fs::rename(&staging, &path)) {
            let _ = std::fs::remove_file(&staging);
            return Err(e);
        }
        Ok(Owner {
            id,
            path,
            _file: file,
        })
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // The folder stays (empty when no one else holds a claim): removing it raced every
        // claim between its `create_dir_all` and its open, and under load a claim could lose
        // that race again and again (seen: 16 times in a row, on a loaded 2-core machine).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How old a staging file must be before a sweep takes it as a dead claimant's: a live one
/// locks and renames its file within microseconds, but may be descheduled in between.
const STAGING_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the process that claimed `id` in `dir` is still running. An owner whose lock file is
/// gone or can be locked has died; its file is removed.
pub fn is_alive(dir: &Path, id: &str) -> bool {
    let path = dir.join(format!("{id}.lock"));
    let Ok(file) = OpenOptions::new().write(true).open(&path) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = std::fs::remove_file(&path);
            false
        }
        Err(TryLockError::WouldBlock) => true,
        // A file system without locks: assume alive rather than interrupt a live run.
        Err(TryLockError::Error(_)) => true,
    }
}

/// Remove lock files left by owners that died with no run in progress, and staging files left
/// by a process that died while claiming (only those older than [`STAGING_GRACE`]: a live
/// claimant's file, not yet locked, is never taken from under it).
pub fn sweep_dead(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_suffix(".lock") {
            is_alive(dir, id);
        } else if name.ends_with(".claim")
            && e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= STAGING_GRACE)
            && let Ok(file) = OpenOptions::new().write(true).open(e.path())
            && file.try_lock().is_ok()
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
