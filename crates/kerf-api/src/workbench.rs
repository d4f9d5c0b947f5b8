//! The composition root: where a front end's use cases find prompts, the history, the provider
//! definitions and the models. Both binaries build one [`Workbench`] at start (the CLI from
//! `--data-dir` and the environment, the desktop app from the environment) and pass it to every
//! use case; no use case reads a default place behind its caller's back.

use std::path::{Path, PathBuf};

use kerf_store::Store;

use crate::error::{ApiError, Code, Result};
use crate::prompts::PromptDir;

/// Kerf's shipped prompts (with their sample inputs and example replies): `KERF_PROMPTS_DIR`,
/// else what an installed package put in `/usr/share/kerf/prompts` (beside the program), else
/// the `prompts/` of the source tree this program was built from (a clone's `npm start`). Read
/// once, by a binary at start.
pub fn shipped_prompts() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("KERF_PROMPTS_DIR").filter(|d| !d.is_empty()) {
        return Some(d.into());
    }
    kerf_core::dirs::installed("prompts").or_else(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts");
        source
            .is_dir()
            .then(|| source.canonicalize().unwrap_or(source))
    })
}

/// Where the app finds prompts, keeps its history, its providers and its models.
#[derive(Debug, Clone)]
pub struct Workbench {
    pub prompt_dirs: Vec<PromptDir>,
    /// The history file (`None`: runs are not recorded).
    pub history: Option<PathBuf>,
    /// The providers' definitions (`providers.json`).
    pub providers: PathBuf,
    /// The folder GGUF models live in (the bundled default is fetched into it).
    pub models: PathBuf,
}

impl Workbench {
    /// Kerf's places under a data directory and a config directory: the user's prompt folder
    /// and the history in `data_dir`, `providers.json` in `config_dir`, the models in `models`;
    /// Kerf's shipped `prompts/` first when `shipped` is given.
    pub fn at(data_dir: &Path, config_dir: &Path, models: &Path, shipped: Option<PathBuf>) -> Self {
        let mut prompt_dirs = Vec::new();
        if let Some(p) = shipped {
            prompt_dirs.push(PromptDir {
                label: "shipped".into(),
                path: p,
            });
        }
        prompt_dirs.push(PromptDir {
            label: "user".into(),
            path: data_dir.join("prompts"),
        });
        Workbench {
            prompt_dirs,
            history: Some(data_dir.join(kerf_store::FILE_NAME)),
            providers: kerf_llm::providers::Registry::path_in(config_dir),
            models: models.to_path_buf(),
        }
    }

    /// This machine's places: the data directory `data_dir` (a `--data-dir` option), else
    /// `KERF_DATA_DIR` or the platform's; `KERF_CONFIG_DIR` or the platform's;
    /// `KERF_MODELS_DIR`, else `models/` in the data directory (see `kerf_core::dirs`). Read
    /// here, once, by a binary at start.
    pub fn of_this_machine(data_dir: Option<PathBuf>, shipped: Option<PathBuf>) -> Self {
        let data_dir = data_dir.unwrap_or_else(kerf_core::dirs::data_dir);
        Self::at(
            &data_dir,
            &kerf_core::dirs::config_dir(),
            &kerf_core::dirs::models_dir_in(&data_dir),
            shipped,
        )
    }

    /// The prompt file `arg` names: itself when it is a path (it exists, or names a folder or a
    /// `.json` file), else the prompt of that id in the workbench's folders (shipped first), so
    /// `kerf run agent-kg-extract` works from any folder; else `arg`, for the error to name.
    pub fn find_prompt(&self, arg: &Path) -> PathBuf {
        let bare = arg.components().count() == 1 && arg.extension().is_none();
        if arg.exists() || !bare {
            return arg.to_path_buf();
        }
        self.prompt_dirs
            .iter()
            .map(|d| d.path.join(arg).with_extension("json"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| arg.to_path_buf())
    }

    /// The user's prompt folder: where imported prompts go.
    pub fn user_prompts(&self) -> Result<&Path> {
        self.prompt_dirs
            .iter()
            .find(|d| d.label == "user")
            .map(|d| d.path.as_path())
            .ok_or_else(|| ApiError::new(Code::Usage, "this workbench has no user prompt folder"))
    }

    /// A connection to the history (each caller its own: a run streams through one while the
    /// History screen reads through another), opened as [`crate::recovery::open`] does.
    pub fn store(&self) -> Result<Option<Store>> {
        self.history
            .as_deref()
            .map(crate::recovery::open)
            .transpose()
            .map_err(Into::into)
    }

    /// The history, for screens that cannot work without it.
    pub fn store_required(&self) -> Result<Store> {
        self.store()?
            .ok_or_else(|| ApiError::new(Code::Usage, "this workbench keeps no history"))
    }
}
