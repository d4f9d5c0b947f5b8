//! The one llama.cpp backend of the process: the CPU checked, the runtime-loaded GPU backends
//! loaded once, and what they found (backends, devices).

use super::*;

/// The CPU features this build's ggml was compiled for (see `.cargo/config.toml`): without them
/// the first matrix product would die of an illegal instruction, so refuse to start instead.
#[cfg_attr(feature = "dynamic-backends", allow(dead_code))]
fn check_cpu() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        let missing: Vec<&str> = [
            ("avx", std::arch::is_x86_feature_detected!("avx")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("f16c", std::arch::is_x86_feature_detected!("f16c")),
            ("bmi2", std::arch::is_x86_feature_detected!("bmi2")),
        ]
        .into_iter()
        .filter(|(_, has)| !has)
        .map(|(name, _)| name)
        .collect();
        if !missing.is_empty() {
            return Err(Error::Unavailable(format!(
                "this build of Kerf's local engine needs an x86-64-v3 CPU and this one lacks {}; \
                 rebuild with the GGML_* lines removed from .cargo/config.toml",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

pub(crate) fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own lines go to tracing (see `logs::Capture`), never to the terminal.
            llama_cpp_2::send_logs_to_tracing(LogOptions::default());
            load_modules()?;
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| engine_error("llama.cpp backend", e))
}

/// What [`load_modules`] loaded (a `dynamic-backends` build), set once before the backend starts.
#[derive(Debug, Clone, Default)]
struct Modules {
    dir: Option<PathBuf>,
    /// Each backend's name and the module it came from, as ggml said when it loaded it.
    files: Vec<(String, String)>,
    failed: Vec<FailedBackend>,
}

static MODULES: OnceLock<Modules> = OnceLock::new();

/// A `dynamic-backends` build: load the best CPU module and every GPU module the machine can run
/// from the folder [`crate::backends::search`] finds, and ask again, aloud, for each GPU module
/// that did not load, so llama.cpp says why. A build with backends linked in has nothing to load,
/// but checks the CPU it was compiled for.
fn load_modules() -> std::result::Result<(), String> {
    #[cfg(feature = "dynamic-backends")]
    {
        let base = crate::backends::loaded_ggml_base();
        let dir = crate::backends::search(
            std::env::var_os("KERF_BACKENDS_DIR").map(PathBuf::from),
            base.as_deref(),
            llama_cpp_sys_2::BACKENDS_DIR.map(Path::new),
        )
        .ok_or_else(|| {
            format!(
                "no CPU backend module (libggml-cpu-*.so) beside the llama.cpp this program loaded ({}) nor where its build put them; set KERF_BACKENDS_DIR to the folder that holds them",
                base.as_deref()
                    .map_or_else(|| "not found".to_string(), |b| b.display().to_string())
            )
        })?;
        if dir.to_str().is_none() {
            return Err(format!(
                "the backends folder {} is not UTF-8",
                dir.display()
            ));
        }
        logs::clear();
        llama_cpp_2::llama_backend::load_backends_from_path(&dir);
        // "load_backend: loaded CPU backend from /usr/lib/kerf/libggml-cpu-haswell.so"
        let files: Vec<(String, String)> = logs::all_containing(" backend from ")
            .iter()
            .filter_map(|l| {
                let (name, path) = l.split_once("loaded ")?.1.split_once(" backend from ")?;
                let file = Path::new(path.trim()).file_name()?.to_string_lossy();
                Some((name.to_string(), file.into_owned()))
            })
            .collect();
        let backends: Vec<String> = llama_cpp_2::list_llama_ggml_backend_devices()
            .into_iter()
            .map(|d| d.backend.to_ascii_lowercase())
            .collect();
        if !backends.iter().any(|b| b == "cpu") {
            return Err(format!(
                "no CPU backend module in {} runs on this CPU{}",
                dir.display(),
                logs::last_containing("libggml-cpu")
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ));
        }
        let mut failed = Vec::new();
        let mut entries: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        for file in entries {
            let Some(name) = crate::backends::gpu_module(&file) else {
                continue;
            };
            if backends.iter().any(|b| b == name) {
                continue;
            }
            logs::clear();
            if !load_module(&dir.join(&file)) {
                failed.push(FailedBackend {
                    why: logs::last_containing(&file)
                        .or_else(|| logs::last_containing("not supported"))
                        .map(|l| {
                            l.split_once(": ")
                                .map_or(l.clone(), |(_, why)| why.to_string())
                        })
                        .unwrap_or_else(|| "llama.cpp gave no reason".into()),
                    file,
                });
            }
        }
        let _ = MODULES.set(Modules {
            dir: Some(dir),
            files,
            failed,
        });
        Ok(())
    }
    #[cfg(not(feature = "dynamic-backends"))]
    {
        let _ = MODULES.set(Modules::default());
        check_cpu().map_err(|e| e.to_string())
    }
}

/// Load one backend module aloud (ggml logs why it cannot), registering it if it loads.
#[cfg(feature = "dynamic-backends")]
#[allow(unsafe_code)]
fn load_module(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `ggml_backend_load` reads the NUL-terminated path (alive for the call) and returns
    // a registry owned by ggml's global list, or null; only the null check is used here.
    !unsafe { llama_cpp_sys_2::ggml_backend_load(c.as_ptr()) }.is_null()
}

/// The backends this process has, and where a dynamic build loaded them from.
pub fn backends() -> Result<Backends> {
    backend()?;
    let modules = MODULES.get().cloned().unwrap_or_default();
    let mut loaded: Vec<LoadedBackend> = Vec::new();
    for d in llama_cpp_2::list_llama_ggml_backend_devices() {
        if loaded.iter().any(|b| b.name == d.backend) {
            continue;
        }
        let file = modules
            .files
            .iter()
            .find(|(name, _)| *name == d.backend)
            .map(|(_, file)| file.clone());
        loaded.push(LoadedBackend {
            name: d.backend,
            file,
        });
    }
    Ok(Backends {
        dynamic: cfg!(feature = "dynamic-backends"),
        dir: modules.dir,
        loaded,
        failed: modules.failed,
    })
}

pub fn devices() -> Result<Vec<Device>> {
    backend()?;
    Ok(llama_cpp_2::list_llama_ggml_backend_devices()
        .into_iter()
        .map(|d| Device {
            index: d.index,
            name: d.name,
            description: d.description,
            backend: d.backend,
            kind: match d.device_type {
                LlamaBackendDeviceType::Cpu => "cpu",
                LlamaBackendDeviceType::Gpu => "gpu",
                LlamaBackendDeviceType::IntegratedGpu => "igpu",
                LlamaBackendDeviceType::Accelerator => "accelerator",
                LlamaBackendDeviceType::Unknown => "unknown",
            }
            .to_string(),
            memory_total: d.memory_total,
            memory_free: d.memory_free,
        })
        .collect())
}
