//! Where Kerf keeps things on this machine: the one place that reads `KERF_DATA_DIR`,
//! `KERF_MODELS_DIR` and `KERF_CONFIG_DIR`, so the models, the history and the provider
//! definitions never disagree about it.
//!
//! Only a binary's composition root (`kerf_api::workbench::Workbench`) reads these, once at
//! start; everything else is handed the places it works in.

use std::path::{Path, PathBuf};

fn project() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "kerf")
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Kerf's data directory (models, history): `KERF_DATA_DIR`, else the platform's
/// (`~/.local/share/kerf` on Linux).
pub fn data_dir() -> PathBuf {
    env_dir("KERF_DATA_DIR")
        .or_else(|| project().map(|p| p.data_dir().to_path_buf()))
        .unwrap_or_else(|| PathBuf::from(".kerf"))
}

/// Where GGUF models live: `KERF_MODELS_DIR` (models shared with other tools, or kept while the
/// history moves), else `models/` in the data directory.
pub fn models_dir() -> PathBuf {
    models_dir_in(&data_dir())
}

/// Where GGUF models live for the data directory `data`: `KERF_MODELS_DIR`, else `models/` in
/// it.
pub fn models_dir_in(data: &Path) -> PathBuf {
    env_dir("KERF_MODELS_DIR").unwrap_or_else(|| data.join("models"))
}

/// Kerf's config directory (providers, prices): `KERF_CONFIG_DIR`, else the platform's
/// (`~/.config/kerf` on Linux).
pub fn config_dir() -> PathBuf {
    env_dir("KERF_CONFIG_DIR")
        .or_else(|| project().map(|p| p.config_dir().to_path_buf()))
        .unwrap_or_else(|| PathBuf::from(".kerf"))
}

/// What an installed package keeps beside the program: `../share/kerf/NAME` from the executable
/// (`/usr/share/kerf/prompts` for `/usr/bin/kerf`), read-only; `None` when this program was not
/// installed so (a build run from its target directory) or the package has no such folder.
pub fn installed(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.join("../share/kerf").join(name);
    dir.is_dir().then(|| dir.canonicalize().unwrap_or(dir))
}
