//! Where Kerf keeps things on this machine: the one place that reads `KERF_DATA_DIR`,
//! `KERF_MODELS_DIR` and `KERF_CONFIG_DIR`, so the models, the history and the provider
//! definitions never disagree about it.
//!
//! A binary may override the data directory once at start (`kerf --data-dir DIR`) with
//! [`set_data_dir`]; libraries only ever read.

use std::path::PathBuf;
use std::sync::OnceLock;

static DATA_DIR_OVERRIDE: OnceLock<PathBuf> = OnceLock::new();

/// Use `dir` as the data directory for the rest of the process (a `--data-dir` option). The first
/// call wins; later calls are ignored and return false.
pub fn set_data_dir(dir: PathBuf) -> bool {
    DATA_DIR_OVERRIDE.set(dir).is_ok()
}

fn project() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "kerf")
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Kerf's data directory (models, history): `--data-dir`, else `KERF_DATA_DIR`, else the
/// platform's (`~/.local/share/kerf` on Linux).
pub fn data_dir() -> PathBuf {
    if let Some(d) = DATA_DIR_OVERRIDE.get() {
        return d.clone();
    }
    env_dir("KERF_DATA_DIR")
        .or_else(|| project().map(|p| p.data_dir().to_path_buf()))
        .unwrap_or_else(|| PathBuf::from(".kerf"))
}

/// Where GGUF models live: `KERF_MODELS_DIR` (models shared with other tools, or kept while the
/// history moves), else `models/` in the data directory.
pub fn models_dir() -> PathBuf {
    env_dir("KERF_MODELS_DIR").unwrap_or_else(|| data_dir().join("models"))
}

/// Kerf's config directory (providers, prices): `KERF_CONFIG_DIR`, else the platform's
/// (`~/.config/kerf` on Linux).
pub fn config_dir() -> PathBuf {
    env_dir("KERF_CONFIG_DIR")
        .or_else(|| project().map(|p| p.config_dir().to_path_buf()))
        .unwrap_or_else(|| PathBuf::from(".kerf"))
}
