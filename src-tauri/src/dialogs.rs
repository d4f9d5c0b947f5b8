//! The native dialogs Kerf shows from Rust: the open and save pickers whose answers
//! [`crate::access`] grants, and the questions asked before a provider may send a key somewhere
//! new. The page can ask for one; only the user can answer it.
//!
//! WebDriver cannot drive GTK's dialogs, so the end-to-end tests answer them from a file instead
//! (`KERF_E2E_DIALOGS`, read when the app starts; see `Dialogs::from_env`): each dialog takes
//! its first line — a path for a picker, `yes` or `no` for a question — and no line (or no file)
//! is a cancel. Whoever can set the app's environment can already read the user's files; the
//! page cannot set it.

use std::path::{Path, PathBuf};

use kerf_api::{ApiError, Code};
use tauri::{AppHandle, Runtime};
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};

/// Who answers the dialogs.
#[derive(Debug, Clone, Default)]
pub enum Dialogs {
    /// The user, in GTK/Cocoa/Win32 dialogs.
    #[default]
    Native,
    /// Lines of this file, one per dialog (end-to-end tests).
    Scripted(PathBuf),
}

/// A question for the user.
pub struct Question<'a> {
    pub title: &'a str,
    pub message: &'a str,
    /// The button that says yes, e.g. "Add provider".
    pub yes: &'a str,
}

impl Dialogs {
    /// `Scripted` when `KERF_E2E_DIALOGS` names a file, else `Native`.
    pub fn from_env() -> Self {
        match std::env::var_os("KERF_E2E_DIALOGS") {
            Some(f) if !f.is_empty() => Dialogs::Scripted(f.into()),
            _ => Dialogs::Native,
        }
    }

    /// The file (or with `folder`, the folder) the user picked to open, or `None` if they
    /// cancelled.
    pub fn pick_open<R: Runtime>(
        &self,
        app: &AppHandle<R>,
        title: &str,
        folder: bool,
    ) -> Result<Option<PathBuf>, ApiError> {
        match self {
            Dialogs::Native => {
                let dialog = app.dialog().file().set_title(title);
                let picked = if folder {
                    dialog.blocking_pick_folder()
                } else {
                    dialog.blocking_pick_file()
                };
                picked.map(into_path).transpose()
            }
            Dialogs::Scripted(file) => Ok(next_answer(file)?.map(PathBuf::from)),
        }
    }

    /// Where the user chose to save (starting from `suggested`: a file name, or a path whose
    /// folder the dialog opens in), or `None` if they cancelled.
    pub fn pick_save<R: Runtime>(
        &self,
        app: &AppHandle<R>,
        title: &str,
        suggested: &Path,
    ) -> Result<Option<PathBuf>, ApiError> {
        match self {
            Dialogs::Native => {
                let mut d = app.dialog().file().set_title(title);
                if let Some(name) = suggested.file_name() {
                    d = d.set_file_name(name.to_string_lossy());
                }
                if let Some(folder) = suggested.parent().filter(|f| f.is_dir()) {
                    d = d.set_directory(folder);
                }
                d.blocking_save_file().map(into_path).transpose()
            }
            Dialogs::Scripted(file) => Ok(next_answer(file)?.map(PathBuf::from)),
        }
    }

    /// Whether the user said yes.
    pub fn ask<R: Runtime>(&self, app: &AppHandle<R>, q: &Question<'_>) -> Result<bool, ApiError> {
        match self {
            Dialogs::Native => Ok(app
                .dialog()
                .message(q.message)
                .title(q.title)
                .kind(MessageDialogKind::Warning)
                .buttons(MessageDialogButtons::OkCancelCustom(
                    q.yes.to_string(),
                    "Cancel".to_string(),
                ))
                .blocking_show()),
            Dialogs::Scripted(file) => Ok(next_answer(file)?.is_some_and(|a| a == "yes")),
        }
    }
}

fn into_path(p: tauri_plugin_dialog::FilePath) -> Result<PathBuf, ApiError> {
    p.into_path()
        .map_err(|e| ApiError::new(Code::Io, format!("the dialog's answer is not a path: {e}")))
}

/// The script's first line, removed from it; `None` when the script is empty or missing.
fn next_answer(file: &Path) -> Result<Option<String>, ApiError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ApiError::new(Code::Io, format!("{}: {e}", file.display()))),
    };
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    std::fs::write(file, rest)
        .map_err(|e| ApiError::new(Code::Io, format!("{}: {e}", file.display())))?;
    let first = first.trim();
    Ok((!first.is_empty()).then(|| first.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn a_script_answers_one_dialog_per_line_then_cancels() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("answers");
        assert_eq!(super::next_answer(&script).unwrap(), None);
        std::fs::write(&script, "/tmp/a.json\nyes\n").unwrap();
        assert_eq!(
            super::next_answer(&script).unwrap().as_deref(),
            Some("/tmp/a.json")
        );
        assert_eq!(super::next_answer(&script).unwrap().as_deref(), Some("yes"));
        assert_eq!(super::next_answer(&script).unwrap(), None);
    }
}
