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

/// A `dynamic-backends` build: load the best CPU module this CPU can run and every GPU module
/// from the folder [`crate::backends::search`] finds, each aloud, so that llama.cpp says why a
/// module did not load. A build with backends linked in has nothing to load, but checks the CPU
/// it was compiled for.
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
        // GPU modules first, then the CPU's, as ggml's own loader registers them: the devices
        // keep the order a build with backends linked in lists (the CPU last).
        let mut files = Vec::new();
        let mut failed = Vec::new();
        let mut entries: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        for file in entries {
            if crate::backends::gpu_module(&file).is_none() {
                continue;
            }
            logs::clear();
            match load_module(&dir.join(&file)) {
                Some(name) => files.push((name, file)),
                None => failed.push(FailedBackend {
                    why: logs::last_containing(&file)
                        .or_else(|| logs::last_containing("not supported"))
                        .map(|l| {
                            l.split_once(": ")
                                .map_or(l.clone(), |(_, why)| why.to_string())
                        })
                        .unwrap_or_else(|| "llama.cpp gave no reason".into()),
                    file,
                }),
            }
        }
        files.push(("CPU".to_string(), load_cpu_module(&dir)?));
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

/// Load the CPU module this CPU scores best, as ggml's own loader would choose it (the highest
/// `ggml_backend_score`, 0 for a CPU that lacks the module's instructions), but never one of
/// [`crate::backends::WITHHELD_CPU_VARIANTS`]; its file name.
#[cfg(feature = "dynamic-backends")]
fn load_cpu_module(dir: &Path) -> std::result::Result<String, String> {
    let modules = crate::backends::cpu_modules(dir);
    let best = modules
        .iter()
        .filter_map(|file| Some((cpu_score(&dir.join(file))?, file)))
        .filter(|(score, _)| *score > 0)
        // The first of equals, as ggml keeps the first it meets.
        .fold(None::<(i32, &String)>, |best, (score, file)| match best {
            Some((s, _)) if s >= score => best,
            _ => Some((score, file)),
        });
    let Some((_, file)) = best else {
        let tried = if modules.is_empty() {
            "there is none to try".to_string()
        } else {
            format!("tried {}", modules.join(", "))
        };
        return Err(format!(
            "no CPU backend module in {} runs on this CPU ({tried}; {} never loaded: built by GCC 12, its AMX code dies of an illegal instruction)",
            dir.display(),
            crate::backends::WITHHELD_CPU_VARIANTS
                .iter()
                .map(|v| format!("libggml-cpu-{v}.so is"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    logs::clear();
    load_module(&dir.join(file)).ok_or_else(|| {
        format!(
            "the CPU backend {} did not load{}",
            dir.join(file).display(),
            logs::last_containing(file)
                .map(|l| format!(" ({l})"))
                .unwrap_or_default()
        )
    })?;
    Ok(file.clone())
}

/// What a CPU module says of this CPU: `ggml_backend_score`, 0 when it cannot run here. `None`
/// when it does not open or has no score.
#[cfg(feature = "dynamic-backends")]
#[allow(unsafe_code)]
fn cpu_score(path: &Path) -> Option<i32> {
    // SAFETY: opening a ggml CPU module runs only its static initialisers, as ggml's own loader
    // does to score it; `ggml_backend_score` takes nothing and returns an int. The library is
    // closed again when `lib` drops, after the call.
    let lib = match unsafe { libloading::Library::new(path) } {
        Ok(lib) => lib,
        Err(e) => {
            tracing::debug!("{}: {e}", path.display());
            return None;
        }
    };
    let score = unsafe {
        lib.get::<unsafe extern "C" fn() -> std::os::raw::c_int>(b"ggml_backend_score\0")
    }
    .ok()?;
    Some(unsafe { score() })
}

/// Load one backend module aloud (ggml logs why it cannot), registering it; ggml's name for the
/// backend (`CPU`, `CUDA`) when it loads.
#[cfg(feature = "dynamic-backends")]
#[allow(unsafe_code)]
fn load_module(path: &Path) -> Option<String> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `ggml_backend_load` reads the NUL-terminated path (alive for the call) and returns
    // a registry owned by ggml's global list (alive as long as the process), or null.
    let reg = unsafe { llama_cpp_sys_2::ggml_backend_load(c.as_ptr()) };
    if reg.is_null() {
        return None;
    }
    // SAFETY: a loaded registry's name is a NUL-terminated string it owns.
    let name = unsafe { std::ffi::CStr::from_ptr(llama_cpp_sys_2::ggml_backend_reg_name(reg)) };
    Some(name.to_string_lossy().into_owned())
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
