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
///
/// A regular file, a new one, or a link (which is replaced, never written through: a planted
/// link must not aim Kerf's output at another file) is replaced that way. A `path` that is, or
/// links to, a character device (`/dev/null`, a terminal) or a FIFO, or that lies under `/dev`
/// or `/proc` (`/dev/stdout`), is written in place: renaming a file over it would put a regular
/// file where the device or pipe was, and its reader would get nothing. A block device is
/// refused (a report written onto a disk would destroy it). `-` is standard output.
pub struct AtomicFile {
    path: PathBuf,
    target: Target,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

/// How an [`AtomicFile`] reaches its path.
enum Target {
    /// Written to this temporary file, renamed over the path on commit.
    Replace { tmp: PathBuf },
    /// Written to the path itself (a device, a FIFO, standard output).
    InPlace,
}

impl AtomicFile {
    pub fn create(path: &Path) -> Result<AtomicFile> {
        if path.as_os_str() == "-" {
            return Ok(AtomicFile {
                path: path.to_path_buf(),
                target: Target::InPlace,
                file: Some(std::io::BufWriter::new(stdout_file(path)?)),
            });
        }
        if written_in_place(path)? {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            return Ok(AtomicFile {
                path: path.to_path_buf(),
                target: Target::InPlace,
                file: Some(std::io::BufWriter::new(file)),
            });
        }
        let real = path.to_path_buf();
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = folder_of(&real);
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        sweep_orphans(dir, &name);
        let tmp = dir.join(format!(
            ".{name}.{}-{}{TMP_SUFFIX}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(path, e))?;
        Ok(AtomicFile {
            path: real,
            target: Target::Replace { tmp },
            file: Some(std::io::BufWriter::new(file)),
        })
    }

    /// Write out what is buffered and sync it to the disk (still under the temporary name).
    /// Written in place, the bytes are only flushed: a pipe or a device has nothing to sync.
    pub fn sync(&mut self) -> Result<()> {
        if let Some(f) = &mut self.file {
            f.flush().map_err(|e| Error::io(&self.path, e))?;
            if matches!(self.target, Target::Replace { .. }) {
                f.get_ref()
                    .sync_all()
                    .map_err(|e| Error::io(&self.path, e))?;
            }
        }
        Ok(())
    }

    /// Sync, rename into place, sync the folder.
    pub fn commit(mut self) -> Result<()> {
        self.sync()?;
        if self.file.take().is_some()
            && let Target::Replace { tmp } = &self.target
        {
            if let Err(e) = std::fs::rename(tmp, &self.path) {
                let _ = std::fs::remove_file(tmp);
                return Err(Error::io(&self.path, e));
            }
            sync_dir(folder_of(&self.path));
        }
        Ok(())
    }
}

/// How every temporary file of [`AtomicFile`] ends: `.NAME.PID-SEQ.kerf-tmp`.
pub const TMP_SUFFIX: &str = ".kerf-tmp";

/// Whether `path` is written in place rather than replaced: it is, or links to, a character
/// device or a FIFO, or it lies under `/dev` or `/proc`, which hold no temporary files (and
/// where `/dev/stdout` may resolve to a regular file that the shell holds open). A block device
/// is an error.
fn written_in_place(path: &Path) -> Result<bool> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(false);
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_block_device() {
            return Err(Error::io(
                path,
                std::io::Error::other("a block device (a disk): not written"),
            ));
        }
        if kind.is_char_device() || kind.is_fifo() {
            return Ok(true);
        }
    }
    Ok(
        path.starts_with("/dev")
            || path.starts_with("/proc")
            || (!meta.is_file() && !meta.is_dir()),
    )
}

/// Remove the temporary files of earlier writes of `name` in `dir` whose process has ended (a
/// write killed before its commit or its drop: SIGKILL, a power cut). A temporary file of a
/// process still running is another writer's, and stays.
fn sweep_orphans(dir: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|f| f.strip_suffix(TMP_SUFFIX))
        else {
            continue;
        };
        let Some((pid, seq)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), seq.parse::<u64>()) else {
            continue;
        };
        if pid != std::process::id() && process_ended(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` has ended (Linux: no `/proc/PID`). Where that cannot be told, it has
/// not.
fn process_ended(pid: u32) -> bool {
    cfg!(target_os = "linux")
        && Path::new("/proc/self").exists()
        && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Standard output as a file, for `-`: the same open file (its offset shared with what the
/// program prints there).
#[cfg(unix)]
fn stdout_file(path: &Path) -> Result<std::fs::File> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io(path, e))?;
    Ok(std::fs::File::from(fd))
}

#[cfg(windows)]
fn stdout_file(path: &Path) -> Result<std::fs::File> {
    use std::os::windows::io::AsHandle;
    let handle = std::io::stdout()
        .as_handle()
        .try_clone_to_owned()
        .map_err(|e| Error::io(path, e))?;
    Ok(std::fs::File::from(handle))
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
        if self.file.take().is_some()
            && let Target::Replace { tmp } = &self.target
        {
            let _ = std::fs::remove_file(tmp);
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
