//! Writing files so that a crash, a full disk or the other front end never leaves half of one:
//! [`AtomicFile`] (a unique temporary beside the target, synced, renamed, the folder synced) and
//! [`Lock`] (an OS lock that serialises read-modify-write of a file between processes — the CLI
//! and the window editing the same `providers.json`).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Write `bytes` to `path` in full or not at all (see [`AtomicFile`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes).map_err(|e| Error::io(path, e))?;
    file.commit()
}

/// A file written in full or not at all, streamed: the bytes go to a temporary name unique to
/// this write (two writers of the same file never share one) beside `path`; `commit` syncs them,
/// renames the file into place and syncs the folder, so a crash leaves the old file or the new
/// one, never half of either. Dropped without `commit`, the temporary file is removed.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> Result<AtomicFile> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = folder_of(path);
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let tmp = dir.join(format!(
            ".{}.{}-{}.kerf-tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(path, e))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            file: Some(std::io::BufWriter::new(file)),
        })
    }

    /// Write out what is buffered and sync it to the disk (still under the temporary name).
    pub fn sync(&mut self) -> Result<()> {
        if let Some(f) = &mut self.file {
            f.flush().map_err(|e| Error::io(&self.path, e))?;
            f.get_ref()
                .sync_all()
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Sync, rename into place, sync the folder.
    pub fn commit(mut self) -> Result<()> {
        self.sync()?;
        if self.file.take().is_some() {
            if let Err(e) = std::fs::rename(&self.tmp, &self.path) {
                let _ = std::fs::remove_file(&self.tmp);
                return Err(Error::io(&self.path, e));
            }
            sync_dir(folder_of(&self.path));
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.file {
            Some(f) => f.write(buf),
            None => Err(std::io::Error::other("already committed")),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// An exclusive OS lock for read-modify-write of `path`, held until dropped. It is taken on a
/// hidden sibling (`.NAME.lock`), not on `path` itself: an atomic write replaces `path`'s inode,
/// and a lock on the old inode would not exclude the next writer. The OS releases it if the
/// process dies.
pub struct Lock {
    _file: std::fs::File,
}

impl Lock {
    pub fn exclusive(path: &Path) -> Result<Lock> {
        let dir = folder_of(path);
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let lock = dir.join(format!(".{name}.lock"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(|e| Error::io(&lock, e))?;
        file.lock().map_err(|e| Error::io(&lock, e))?;
        Ok(Lock { _file: file })
    }
}

fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Make a rename in `dir` durable (best effort: not every system can open a folder to sync it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
