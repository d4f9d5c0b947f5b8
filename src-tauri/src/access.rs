//! Which files the webview may name. The page is trusted only as far as its content: a reply,
//! a prompt or an imported bundle it displays could one day carry script past the CSP, and
//! every command takes paths. So a command reads or writes a path only when it lies in one of
//! Kerf's own folders (the prompt folders; the models folder, read-only) or the user picked that
//! very file in a native dialog this process showed (see [`crate::dialogs`]), which a script
//! in the page cannot answer.
//!
//! Paths are compared after resolving symlinks and `..`, so a link inside a prompt folder that
//! points elsewhere is judged by where it points.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use kerf_api::{ApiError, Code};

/// What a command will do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Use {
    Read,
    /// Write (and read back).
    Write,
}

/// A folder of Kerf's own and what the webview may do in it.
#[derive(Debug, Clone)]
struct Folder {
    path: PathBuf,
    allows: Use,
}

/// The folders, and the files the user chose this session.
#[derive(Debug, Default)]
pub struct FileAccess {
    folders: Vec<Folder>,
    chosen: Mutex<HashSet<(PathBuf, Use)>>,
}

impl FileAccess {
    /// Read and write under each of `prompt_dirs`; read under `models`.
    pub fn new(prompt_dirs: impl IntoIterator<Item = PathBuf>, models: PathBuf) -> Self {
        let mut folders: Vec<Folder> = prompt_dirs
            .into_iter()
            .map(|path| Folder {
                path,
                allows: Use::Write,
            })
            .collect();
        folders.push(Folder {
            path: models,
            allows: Use::Read,
        });
        FileAccess {
            folders,
            chosen: Mutex::new(HashSet::new()),
        }
    }

    /// Remember a file the user picked in a native dialog (`Write` for a save dialog).
    pub fn choose(&self, path: &Path, allows: Use) -> Result<PathBuf, ApiError> {
        let resolved = resolve(path)?;
        if let Ok(mut chosen) = self.chosen.lock() {
            chosen.insert((resolved.clone(), allows));
        }
        Ok(resolved)
    }

    /// `path` resolved, if the webview may use it so; else a `forbidden` error naming it.
    pub fn check(&self, path: &str, want: Use) -> Result<PathBuf, ApiError> {
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(forbidden(path, "is not an absolute path"));
        }
        let resolved = resolve(given)?;
        let in_folder = self.folders.iter().any(|f| {
            (f.allows == Use::Write || want == Use::Read)
                // A folder that does not exist yet holds nothing.
                && std::fs::canonicalize(&f.path).is_ok_and(|root| resolved.starts_with(root))
        });
        let chosen = self.chosen.lock().is_ok_and(|c| {
            c.contains(&(resolved.clone(), Use::Write))
                || (want == Use::Read && c.contains(&(resolved.clone(), Use::Read)))
        });
        if in_folder || chosen {
            Ok(resolved)
        } else {
            Err(forbidden(
                path,
                match want {
                    Use::Read => "was not chosen in an open dialog and is not in Kerf's folders",
                    Use::Write => {
                        "was not chosen in a save dialog and is not in Kerf's prompt folders"
                    }
                },
            ))
        }
    }

    /// [`check`](Self::check) for each of `paths`.
    pub fn check_all(&self, paths: &[String], want: Use) -> Result<(), ApiError> {
        paths.iter().try_for_each(|p| self.check(p, want).map(drop))
    }
}

fn forbidden(path: &str, why: &str) -> ApiError {
    ApiError::new(
        Code::Forbidden,
        format!(
            "{path} {why}: pick it with one of the window's file buttons (Load file…, Choose…, Save…)"
        ),
    )
}

/// `path` with symlinks and `..` resolved. A file that does not exist yet (a save) is its
/// resolved folder plus its name.
fn resolve(path: &Path) -> Result<PathBuf, ApiError> {
    let io = |e: std::io::Error| ApiError::new(Code::Io, format!("{}: {e}", path.display()));
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (Some(folder), Some(Component::Normal(name))) =
                (path.parent(), path.components().next_back())
            else {
                return Err(io(e));
            };
            Ok(std::fs::canonicalize(folder).map_err(io)?.join(name))
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn s(p: &Path) -> String {
        p.display().to_string()
    }

    #[test]
    fn only_kerf_folders_and_chosen_files_are_reachable() {
        let dir = tempfile::tempdir().unwrap();
        let (prompts, models, elsewhere) = (
            dir.path().join("prompts"),
            dir.path().join("models"),
            dir.path().join("elsewhere"),
        );
        for d in [&prompts, &models, &elsewhere] {
            std::fs::create_dir(d).unwrap();
        }
        let secret = elsewhere.join("secret.txt");
        std::fs::write(&secret, "x").unwrap();
        let access = FileAccess::new([prompts.clone()], models.clone());

        access
            .check(&s(&prompts.join("a.json")), Use::Write)
            .unwrap();
        access.check(&s(&models.join("m.gguf")), Use::Read).unwrap();
        let e = access
            .check(&s(&models.join("m.gguf")), Use::Write)
            .unwrap_err();
        assert_eq!(e.code, Code::Forbidden);
        let e = access.check(&s(&secret), Use::Read).unwrap_err();
        assert_eq!(e.code, Code::Forbidden);
        assert!(e.message.contains("secret.txt"), "{}", e.message);
        // `..` out of a prompt folder, a relative path and a link pointing out are all refused.
        let up = format!("{}/../elsewhere/secret.txt", prompts.display());
        assert_eq!(
            access.check(&up, Use::Read).unwrap_err().code,
            Code::Forbidden
        );
        assert_eq!(
            access.check("secret.txt", Use::Read).unwrap_err().code,
            Code::Forbidden
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&secret, prompts.join("link.json")).unwrap();
            let e = access
                .check(&s(&prompts.join("link.json")), Use::Read)
                .unwrap_err();
            assert_eq!(e.code, Code::Forbidden);
        }

        // Chosen in an open dialog: readable, not writable. In a save dialog: both.
        access.choose(&secret, Use::Read).unwrap();
        access.check(&s(&secret), Use::Read).unwrap();
        assert_eq!(
            access.check(&s(&secret), Use::Write).unwrap_err().code,
            Code::Forbidden
        );
        let out = elsewhere.join("new.json");
        access.choose(&out, Use::Write).unwrap();
        access.check(&s(&out), Use::Write).unwrap();
        // Only that file: its neighbour is not.
        assert_eq!(
            access
                .check(&s(&elsewhere.join("other.json")), Use::Write)
                .unwrap_err()
                .code,
            Code::Forbidden
        );
    }
}
