//! Which of llama.cpp's compute backends this process has, and — in a build with the
//! `dynamic-backends` feature — where they were loaded from and which could not load.
//!
//! A `dynamic-backends` build (what the packages ship) links no backend: ggml's CPU code comes
//! as one module per instruction set (`libggml-cpu-haswell.so`, `…-skylakex.so`, …) and the GPU
//! backends as modules of their own (`libggml-cuda.so`, `libggml-vulkan.so`). When the engine
//! starts it loads, from one folder, the best CPU module this CPU can run and every GPU module
//! whose libraries the machine has (a CUDA module needs the driver's `libcuda.so.1`). A GPU
//! module that cannot load is named with llama.cpp's reason, and the run goes on on the CPU.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// What was loaded, and what was not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Backends {
    /// Backends are modules loaded at run time (`dynamic-backends`), not linked in.
    pub dynamic: bool,
    /// The folder they were loaded from.
    pub dir: Option<PathBuf>,
    /// Every backend llama.cpp has now, in its order.
    pub loaded: Vec<LoadedBackend>,
    /// Modules in the folder that did not load, with llama.cpp's reason.
    pub failed: Vec<FailedBackend>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadedBackend {
    /// ggml's name: `CPU`, `CUDA`, `Vulkan`, …
    pub name: String,
    /// The module it came from (a dynamic build), e.g. `libggml-cpu-haswell.so`.
    pub file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedBackend {
    pub file: String,
    pub why: String,
}

impl Backends {
    /// The CPU backend as a run reports it: `CPU`, or `CPU (haswell)` naming the module.
    pub fn cpu(&self) -> String {
        self.loaded
            .iter()
            .find(|b| b.name == "CPU")
            .and_then(|b| b.file.as_deref())
            .and_then(cpu_variant)
            .map_or_else(|| "CPU".to_string(), |v| format!("CPU ({v})"))
    }

    /// Why GPU modules present in the folder did not load, in one phrase.
    pub fn failures(&self) -> Option<String> {
        (!self.failed.is_empty()).then(|| {
            self.failed
                .iter()
                .map(|f| format!("the GPU backend {} could not load ({})", f.file, f.why))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// A note for runs when a GPU module is present but did not load (they run on the CPU).
    pub fn note(&self) -> Option<String> {
        self.failures().map(|f| format!("{f}; running on the CPU"))
    }
}

/// `haswell` from `libggml-cpu-haswell.so`.
fn cpu_variant(file: &str) -> Option<&str> {
    file.strip_prefix("libggml-cpu-")?.strip_suffix(".so")
}

/// The module file name a backend's name is loaded from (`cuda` for `libggml-cuda.so`), for the
/// folder's GPU modules: not the CPU variants, not ggml's own libraries.
#[cfg_attr(not(feature = "dynamic-backends"), allow(dead_code))]
pub(crate) fn gpu_module(file: &str) -> Option<&str> {
    let name = file.strip_prefix("libggml-")?.strip_suffix(".so")?;
    (name != "base" && name != "cpu" && !name.starts_with("cpu-")).then_some(name)
}

/// Where a `dynamic-backends` build finds its modules: `KERF_BACKENDS_DIR` when set; else
/// `../lib/kerf` beside the executable (the packages' layout: `/usr/bin/kerf`,
/// `/usr/lib/kerf/libggml-cpu-*.so`); else the executable's own folder; else the folder the
/// build put them in (a build run from its target directory). The first that holds a CPU module.
pub fn search(env: Option<PathBuf>, exe: Option<&Path>, built: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = env {
        return Some(dir);
    }
    let exe_dir = exe.and_then(Path::parent);
    let candidates = [
        exe_dir.map(|d| d.join("../lib/kerf")),
        exe_dir.map(Path::to_path_buf),
        built.map(Path::to_path_buf),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| has_cpu_module(d))
        .map(|d| d.canonicalize().unwrap_or(d))
}

fn has_cpu_module(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libggml-cpu") && name.ends_with(".so")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names() {
        assert_eq!(gpu_module("libggml-cuda.so"), Some("cuda"));
        assert_eq!(gpu_module("libggml-vulkan.so"), Some("vulkan"));
        assert_eq!(gpu_module("libggml-cpu-haswell.so"), None);
        assert_eq!(gpu_module("libggml-base.so"), None);
        assert_eq!(gpu_module("libggml.so"), None);
        assert_eq!(cpu_variant("libggml-cpu-skylakex.so"), Some("skylakex"));
    }

    #[test]
    fn the_first_folder_with_a_cpu_module_is_searched() {
        let root = tempfile::tempdir().expect("temp dir");
        let bin = root.path().join("usr/bin");
        let lib = root.path().join("usr/lib/kerf");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(&lib).expect("lib");
        let exe = bin.join("kerf");
        // Nothing there yet: the build's folder is the last resort.
        assert_eq!(search(None, Some(&exe), Some(root.path())), None);
        std::fs::write(lib.join("libggml-cpu-x64.so"), b"").expect("module");
        assert_eq!(
            search(None, Some(&exe), None),
            Some(lib.canonicalize().expect("canonical"))
        );
        // The environment wins, as given.
        assert_eq!(
            search(Some(PathBuf::from("/elsewhere")), Some(&exe), None),
            Some(PathBuf::from("/elsewhere"))
        );
    }
}
