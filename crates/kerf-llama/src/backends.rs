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

/// CPU variants never loaded, though a CPU may score them best. `sapphirerapids`, the one with
/// AMX: ggml sets its tiles up from a 64-byte configuration on the stack, and GCC 12's
/// `_tile_loadconfig` tells the compiler the instruction reads 8 bytes of it, so the rows and
/// widths written before it are dropped as dead stores. Built so (Debian 12's compiler), its
/// first matrix product dies of an illegal instruction on every CPU with AMX; the AVX-512
/// variants run there instead. Lift when llama.cpp no longer builds the configuration on the
/// stack (ggml-org/llama.cpp#26954) and the build's compiler is checked.
pub(crate) const WITHHELD_CPU_VARIANTS: &[&str] = &["sapphirerapids"];

/// The CPU modules in `dir` that may be loaded (not [`WITHHELD_CPU_VARIANTS`]), by file name,
/// sorted.
#[cfg_attr(not(feature = "dynamic-backends"), allow(dead_code))]
pub(crate) fn cpu_modules(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| cpu_variant(f).is_some_and(|v| !WITHHELD_CPU_VARIANTS.contains(&v)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
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

/// Where a `dynamic-backends` build finds its modules: `KERF_BACKENDS_DIR` when set (as given);
/// else the folder of the llama.cpp this process runs (`ggml_base`: the `libggml-base.so` the
/// dynamic linker loaded, found through the program's rpath — `/usr/lib/kerf` for the packages'
/// `/usr/bin/kerf`); else, when that library is the build's own file (a build run from its
/// target directory, where the library is a hard link of the build's), the folder the build put
/// the modules in (`built`). Never a folder merely beside the executable: a copied or planted
/// `libggml-*.so` there once ran inside Kerf. The folder must hold a CPU module.
pub fn search(
    env: Option<PathBuf>,
    ggml_base: Option<&Path>,
    built: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(dir) = env {
        return Some(dir);
    }
    let own = ggml_base
        .and_then(Path::parent)
        .filter(|d| has_cpu_module(d));
    let build = built.filter(|b| {
        has_cpu_module(b)
            && ggml_base.is_none_or(|lib| b.parent().is_some_and(|out| same_file_within(lib, out)))
    });
    own.map(Path::to_path_buf)
        .or(build.map(Path::to_path_buf))
        .map(|d| d.canonicalize().unwrap_or(d))
}

/// The `libggml-base.so` this process loaded, from its memory map (Linux); `None` elsewhere or
/// when none is mapped (a build with llama.cpp linked in statically).
pub fn loaded_ggml_base() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libggml-base.so"))
        })
        .map(PathBuf::from)
}

/// Whether `lib` is the same file (device and inode: a hard link counts) as a file of the same
/// name somewhere under `root`, at most three folders down (a build's `out/lib`).
fn same_file_within(lib: &Path, root: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(want) = std::fs::metadata(lib) else {
            return false;
        };
        let Some(name) = lib.file_name() else {
            return false;
        };
        let mut dirs = vec![(root.to_path_buf(), 0)];
        while let Some((dir, depth)) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if e.file_name() == name
                    && std::fs::metadata(&path)
                        .is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino())
                {
                    return true;
                }
                if depth < 3 && e.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push((path, depth + 1));
                }
            }
        }
        false
    }
    #[cfg(not(unix))]
    {
        let _ = (lib, root);
        false
    }
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

    /// The AMX variant is never a candidate: built by GCC 12 it dies on its first tile load.
    #[test]
    fn the_amx_variant_is_withheld() {
        let dir = tempfile::tempdir().expect("temp dir");
        for f in [
            "libggml-cpu-zen4.so",
            "libggml-cpu-sapphirerapids.so",
            "libggml-cpu-haswell.so",
            "libggml-cuda.so",
            "libggml-base.so",
        ] {
            std::fs::write(dir.path().join(f), b"").expect("module");
        }
        assert_eq!(
            cpu_modules(dir.path()),
            ["libggml-cpu-haswell.so", "libggml-cpu-zen4.so"]
        );
    }

    /// The modules come from the folder of the llama.cpp the process loaded (the package's
    /// /usr/lib/kerf), or the build's own folder when that library is the build's file; never
    /// from a folder beside the executable alone (a planted module there once ran in Kerf).
    #[test]
    fn modules_load_only_from_the_folder_of_the_loaded_llama_cpp() {
        let root = tempfile::tempdir().expect("temp dir");
        let lib = root.path().join("usr/lib/kerf");
        std::fs::create_dir_all(&lib).expect("lib");
        let base = lib.join("libggml-base.so");
        std::fs::write(&base, b"").expect("base");
        // Its folder has no CPU module yet, and no build is known: none.
        assert_eq!(search(None, Some(&base), None), None);
        std::fs::write(lib.join("libggml-cpu-x64.so"), b"").expect("module");
        assert_eq!(
            search(None, Some(&base), None),
            Some(lib.canonicalize().expect("canonical"))
        );
        // A build's folder is used only when the loaded library is that build's own file.
        let out = root.path().join("target/build/out");
        let built = out.join("backends");
        std::fs::create_dir_all(out.join("lib")).expect("out/lib");
        std::fs::create_dir_all(&built).expect("backends");
        std::fs::write(built.join("libggml-cpu-x64.so"), b"").expect("module");
        let debug = root.path().join("target/debug");
        std::fs::create_dir_all(&debug).expect("debug");
        let copied = debug.join("libggml-base.so");
        std::fs::write(&copied, b"").expect("a copy");
        std::fs::write(out.join("lib/libggml-base.so"), b"").expect("build's");
        assert_eq!(
            search(None, Some(&copied), Some(&built)),
            None,
            "a copy is not the build's"
        );
        std::fs::remove_file(&copied).expect("rm");
        std::fs::hard_link(out.join("lib/libggml-base.so"), &copied).expect("link");
        assert_eq!(
            search(None, Some(&copied), Some(&built)),
            Some(built.canonicalize().expect("canonical"))
        );
        // Modules planted beside an executable are not searched at all.
        let bin = root.path().join("planted");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::write(bin.join("libggml-cpu-x64.so"), b"").expect("planted");
        std::fs::write(bin.join("libggml-base.so"), b"").expect("planted base");
        assert_eq!(
            search(None, Some(&copied), Some(&built)),
            Some(built.canonicalize().expect("c"))
        );
        // The environment wins, as given.
        assert_eq!(
            search(Some(PathBuf::from("/elsewhere")), Some(&base), None),
            Some(PathBuf::from("/elsewhere"))
        );
    }
}
