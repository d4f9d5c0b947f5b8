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
    pub fn claim(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let id = format!("{}-{nanos:09}", std::process::id());
        let path = dir.join(format!("{id}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        file.lock()?;
        Ok(Owner {
            id,
            path,
            _file: file,
        })
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // The folder goes too when no other process holds a claim in it.
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

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

/// Remove lock files left by owners that died with no run in progress.
pub fn sweep_dead(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_suffix(".lock") {
            is_alive(dir, id);
        }
    }
}
