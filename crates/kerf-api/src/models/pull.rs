//! Models pulled by name from the Hugging Face Hub (`kerf models pull REPO[:FILE]`, the Models
//! screen): the download is hf-hub's (its blocking client, which resumes a cut download from the
//! partial file with a `Range` request); what a user must be able to trust is Kerf's — the
//! file's SHA-256 against the hub's (the ETag of a Git LFS file is its SHA-256), the GGUF magic,
//! and errors that say what to do.
//!
//! The download is staged in `.hub/` inside the models folder (hf-hub's cache layout, where a
//! later pull resumes it); once verified, the file moves to the models folder itself, where
//! `kerf models list`, runs and the window find it, and the staging copy goes.

use std::io::Read;
use std::path::{Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiError as HubError};
use hf_hub::{Repo, RepoType};
use serde::Serialize;
use sha2::{Digest, Sha256};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};

/// What a pull asks for: `REPO` (`owner/name`) and, optionally, the file in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSpec {
    pub repo: String,
    pub file: Option<String>,
}

impl std::str::FromStr for PullSpec {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self> {
        let (repo, file) = match s.split_once(':') {
            Some((r, f)) => (r, Some(f.to_string()).filter(|f| !f.is_empty())),
            None => (s, None),
        };
        let parts: Vec<&str> = repo.split('/').collect();
        let fine = |p: &str| {
            !p.is_empty()
                && !p.starts_with(['.', '-'])
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        if parts.len() != 2 || !parts.iter().all(|p| fine(p)) {
            return Err(ApiError::new(
                Code::Usage,
                format!(
                    "`{s}`: a model is named OWNER/REPO or OWNER/REPO:FILE.gguf (as on the Hugging Face Hub)"
                ),
            ));
        }
        if let Some(f) = &file
            && (f.contains("..") || f.starts_with('/') || !f.ends_with(".gguf"))
        {
            return Err(ApiError::new(
                Code::Usage,
                format!("`{f}`: the file is a .gguf path inside the repository"),
            ));
        }
        Ok(PullSpec {
            repo: repo.to_string(),
            file,
        })
    }
}

/// What a pull reports as it goes.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum PullEvent {
    /// The download starts (or goes on): its file, size, and the bytes a partial download had.
    #[serde(rename_all = "camelCase")]
    Started {
        file: String,
        total_bytes: u64,
        resumed_from: u64,
    },
    /// Bytes on disk so far.
    #[serde(rename_all = "camelCase")]
    Progress { done_bytes: u64, total_bytes: u64 },
    /// Downloaded; checking its SHA-256 and that it is a GGUF file.
    Verifying,
}

/// A model pulled.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Pulled {
    pub path: String,
    pub repo: String,
    pub file: String,
    pub size_bytes: u64,
    pub sha256: String,
    /// It was there already, verified: nothing was downloaded.
    pub already: bool,
}

/// Where to pull from and with what: the hub's address and token (the environment's
/// `HF_ENDPOINT` and `HF_TOKEN`, read by the binary at start, as every other place is).
#[derive(Debug, Clone, Default)]
pub struct Hub {
    pub endpoint: Option<String>,
    pub token: Option<String>,
}

impl Hub {
    /// `HF_ENDPOINT` and `HF_TOKEN`, as the Hugging Face tools read them.
    pub fn from_env() -> Hub {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Hub {
            endpoint: var("HF_ENDPOINT").map(|e| e.trim_end_matches('/').to_string()),
            token: var("HF_TOKEN"),
        }
    }

    fn endpoint(&self) -> &str {
        self.endpoint.as_deref().unwrap_or("https://huggingface.co")
    }
}

/// Extraction-capable instruct models that run on a laptop, as GGUF files on the Hugging Face
/// Hub: what `kerf models list --available` and the Models screen offer.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Available {
    /// `REPO:FILE`, what `kerf models pull` takes.
    pub name: String,
    /// About how large the file is, in bytes.
    pub size_bytes: u64,
    pub parameters: String,
    pub license: String,
    pub note: String,
}

const AVAILABLE: [(&str, &str, u64, &str, &str, &str); 6] = [
    (
        "bartowski/Qwen2.5-1.5B-Instruct-GGUF",
        "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf",
        986_000_000,
        "1.5B",
        "Apache-2.0",
        "small and quick; follows JSON schemas well for its size",
    ),
    (
        "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
        "smollm2-1.7b-instruct-q4_k_m.gguf",
        1_060_000_000,
        "1.7B",
        "Apache-2.0",
        "the bundled model's larger sibling",
    ),
    (
        "bartowski/Llama-3.2-3B-Instruct-GGUF",
        "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
        2_020_000_000,
        "3B",
        "Llama 3.2 Community",
        "a good default for extraction on a laptop CPU",
    ),
    (
        "bartowski/Qwen2.5-3B-Instruct-GGUF",
        "Qwen2.5-3B-Instruct-Q4_K_M.gguf",
        1_930_000_000,
        "3B",
        "Qwen Research",
        "strong on structured output",
    ),
    (
        "bartowski/Phi-3.5-mini-instruct-GGUF",
        "Phi-3.5-mini-instruct-Q4_K_M.gguf",
        2_390_000_000,
        "3.8B",
        "MIT",
        "long context (128k)",
    ),
    (
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        4_680_000_000,
        "7B",
        "Apache-2.0",
        "near cloud quality on extraction; wants a GPU or patience",
    ),
];

/// The curated list.
pub fn available() -> Vec<Available> {
    AVAILABLE
        .iter()
        .map(|(repo, file, size, params, license, note)| Available {
            name: format!("{repo}:{file}"),
            size_bytes: *size,
            parameters: (*params).into(),
            license: (*license).into(),
            note: (*note).into(),
        })
        .collect()
}

/// Bridges hf-hub's progress calls to [`PullEvent`]s.
struct Reporter<'a> {
    on: &'a mut dyn FnMut(PullEvent),
    file: String,
    total: u64,
    done: u64,
    started: bool,
}

impl hf_hub::api::Progress for Reporter<'_> {
    fn init(&mut self, size: usize, _filename: &str) {
        self.total = size as u64;
        self.done = 0;
        self.started = false;
    }
    fn update(&mut self, size: usize) {
        // hf-hub's first update after `init` is the partial file's length (a resume).
        if !self.started {
            self.started = true;
            (self.on)(PullEvent::Started {
                file: self.file.clone(),
                total_bytes: self.total,
                resumed_from: size as u64,
            });
        }
        self.done += size as u64;
        (self.on)(PullEvent::Progress {
            done_bytes: self.done,
            total_bytes: self.total,
        });
    }
    fn finish(&mut self) {}
}

/// Pull `spec` into `models` (the models folder): the file, verified, in `models/FILE`.
pub fn pull(
    models: &Path,
    hub: &Hub,
    spec: &PullSpec,
    on: &mut dyn FnMut(PullEvent),
) -> Result<Pulled> {
    let staging = models.join(".hub");
    std::fs::create_dir_all(&staging).map_err(|e| disk(&staging, e))?;
    let api = ApiBuilder::new()
        .with_endpoint(hub.endpoint().to_string())
        .with_cache_dir(staging.clone())
        .with_token(hub.token.clone())
        .with_progress(false)
        .build()
        .map_err(|e| hub_error(hub, spec, None, e))?;
    let repo = api.repo(Repo::new(spec.repo.clone(), RepoType::Model));
    // The repository's files, with each LFS file's SHA-256 and size (`?blobs=true`): the hub's
    // own word on what the download must be.
    let listing: serde_json::Value = repo
        .info_request()
        .query("blobs", "true")
        .call()
        .map_err(|e| hub_error(hub, spec, None, HubError::RequestError(Box::new(e))))?
        .into_json()
        .map_err(|e| {
            ApiError::new(
                Code::Protocol,
                format!("{}: the hub's file list is not JSON: {e}", spec.repo),
            )
        })?;
    let siblings = listing
        .get("siblings")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<String> = siblings
        .iter()
        .filter_map(|s| s.get("rfilename").and_then(serde_json::Value::as_str))
        .map(str::to_string)
        .collect();
    let file = match &spec.file {
        Some(f) if names.contains(f) => f.clone(),
        Some(f) => {
            return Err(ApiError::new(
                Code::NotFound,
                format!(
                    "{}:{f}: the repository has no such file{}",
                    spec.repo,
                    match names.iter().filter(|n| n.ends_with(".gguf")).count() {
                        0 => String::from(" (and no .gguf file at all)"),
                        _ => format!(
                            "; its GGUF files: {}",
                            names
                                .iter()
                                .filter(|n| n.ends_with(".gguf"))
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                ),
            ));
        }
        None => choose(&names, spec)?,
    };
    let lfs = siblings
        .iter()
        .find(|s| s.get("rfilename").and_then(serde_json::Value::as_str) == Some(file.as_str()))
        .and_then(|s| s.get("lfs"));
    let listed_sha = lfs
        .and_then(|l| l.get("sha256"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_ascii_lowercase);
    let name = Path::new(&file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.clone());
    let dest = models.join(&name);
    if dest.is_file() {
        let (sha256, size, _) = digest(&dest)?;
        if listed_sha.as_deref().is_none_or(|l| l == sha256) {
            return Ok(Pulled {
                path: dest.display().to_string(),
                repo: spec.repo.clone(),
                file,
                size_bytes: size,
                sha256,
                already: true,
            });
        }
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "{} exists and is another file (SHA-256 {sha256}, the hub's is {}): move it away, then pull again",
                dest.display(),
                listed_sha.unwrap_or_default()
            ),
        ));
    }
    let reporter = Reporter {
        on: &mut *on,
        file: file.clone(),
        total: 0,
        done: 0,
        started: false,
    };
    let pointer = repo
        .download_with_progress(&file, reporter)
        .map_err(|e| hub_error(hub, spec, Some(&file), e))?;
    on(PullEvent::Verifying);
    // The snapshot entry links to the blob, which hf-hub names by the ETag: a Git LFS file's
    // SHA-256.
    let blob = std::fs::canonicalize(&pointer).map_err(|e| disk(&pointer, e))?;
    let etag = blob
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let expected = listed_sha.unwrap_or(etag);
    let discard = || {
        let _ = std::fs::remove_file(&blob);
        let _ = std::fs::remove_file(&pointer);
    };
    let (sha256, size, magic) = digest(&blob)?;
    if &magic != b"GGUF" {
        discard();
        return Err(ApiError::new(
            Code::Model,
            format!(
                "{}:{file} is not a GGUF file (it starts {:?}, not GGUF): llama.cpp cannot load it, so it was deleted; pick a .gguf file of a GGUF repository",
                spec.repo,
                String::from_utf8_lossy(&magic)
            ),
        ));
    }
    if !is_sha256(&expected) {
        discard();
        return Err(ApiError::new(
            Code::Protocol,
            format!(
                "{}:{file}: the hub gave no SHA-256 for it (ETag `{expected}`), so it cannot be checked; it was deleted",
                spec.repo
            ),
        ));
    }
    if sha256 != expected {
        discard();
        return Err(ApiError::new(
            Code::Model,
            format!(
                "{}:{file}: checksum mismatch: the file downloaded has SHA-256 {sha256}, the hub says {expected}; it was deleted (pull it again to download it afresh)",
                spec.repo
            ),
        ));
    }
    std::fs::rename(&blob, &dest).map_err(|e| disk(&dest, e))?;
    // The staging copy of this repository goes: the file is in the models folder now.
    let _ =
        std::fs::remove_dir_all(staging.join(format!("models--{}", spec.repo.replace('/', "--"))));
    Ok(Pulled {
        path: dest.display().to_string(),
        repo: spec.repo.clone(),
        file,
        size_bytes: size,
        sha256,
        already: false,
    })
}

/// The GGUF file to pull from a repository's files: its only one, else the Q4_K_M one, else
/// the user must say which.
fn choose(files: &[String], spec: &PullSpec) -> Result<String> {
    let ggufs: Vec<&String> = files.iter().filter(|f| f.ends_with(".gguf")).collect();
    match &ggufs[..] {
        [] => Err(ApiError::new(
            Code::NotFound,
            format!(
                "{} has no .gguf file: Kerf runs GGUF models (look for a repository named …-GGUF)",
                spec.repo
            ),
        )),
        [one] => Ok((*one).clone()),
        many => {
            let q4: Vec<&&String> = many
                .iter()
                .filter(|f| f.to_ascii_lowercase().contains("q4_k_m"))
                .collect();
            match &q4[..] {
                [one] => Ok((**one).clone()),
                _ => Err(ApiError::new(
                    Code::Usage,
                    format!(
                        "{} has {} GGUF files; name one: {}",
                        spec.repo,
                        many.len(),
                        many.iter()
                            .map(|f| format!("{}:{f}", spec.repo))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            }
        }
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The file's SHA-256, size and first four bytes.
fn digest(path: &Path) -> Result<(String, u64, [u8; 4])> {
    let mut f = std::fs::File::open(path).map_err(|e| disk(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    let mut magic = [0u8; 4];
    loop {
        let n = f.read(&mut buf).map_err(|e| disk(path, e))?;
        if n == 0 {
            break;
        }
        if size < 4 {
            let take = (4 - size as usize).min(n);
            magic[size as usize..size as usize + take].copy_from_slice(&buf[..take]);
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    let sha = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((sha, size, magic))
}

fn disk(path: &Path, e: std::io::Error) -> ApiError {
    if e.kind() == std::io::ErrorKind::StorageFull {
        ApiError::new(
            Code::DiskFull,
            format!(
                "{}: the disk is full; free some space and pull it again: the download goes on from where it stopped",
                path.display()
            ),
        )
    } else {
        ApiError::new(Code::Io, format!("{}: {e}", path.display()))
    }
}

/// hf-hub's error, said as what happened and what to do.
fn hub_error(hub: &Hub, spec: &PullSpec, file: Option<&str>, e: HubError) -> ApiError {
    let what = match file {
        Some(f) => format!("{}:{f}", spec.repo),
        None => spec.repo.clone(),
    };
    match e {
        HubError::RequestError(err) => match *err {
            ureq::Error::Status(status, response) => {
                let server = response
                    .header("X-Error-Message")
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default();
                match status {
                    401 | 403 => ApiError::new(
                        Code::Auth,
                        format!(
                            "{what}: the hub refused access ({status}){server}: the repository is gated or private — accept its terms on its page and set HF_TOKEN to a token that may read it{}",
                            if hub.token.is_some() {
                                " (the HF_TOKEN given may not)"
                            } else {
                                ""
                            }
                        ),
                    ),
                    404 => ApiError::new(
                        Code::NotFound,
                        format!(
                            "{what}: not on the hub (404){server}: check the repository's name and the file's, as its \"Files\" page lists them"
                        ),
                    ),
                    416 => ApiError::new(
                        Code::Http,
                        format!(
                            "{what}: the partial download in {} does not fit the file on the hub (416): delete that folder and pull again",
                            PathBuf::from(".hub").display()
                        ),
                    ),
                    _ => ApiError::new(
                        Code::Http,
                        format!("{what}: the hub answered {status}{server}"),
                    ),
                }
            }
            ureq::Error::Transport(t) => ApiError::new(
                Code::Network,
                format!(
                    "{what}: could not reach {}: {t} (pull it again to go on from where it stopped)",
                    hub.endpoint()
                ),
            ),
        },
        HubError::IoError(io) if io.kind() == std::io::ErrorKind::StorageFull => {
            disk(Path::new(&what), io)
        }
        HubError::IoError(io) => ApiError::new(
            Code::Network,
            format!(
                "{what}: the download stopped: {io}; pull it again to go on from where it stopped"
            ),
        ),
        HubError::InvalidResume => ApiError::new(
            Code::Model,
            format!(
                "{what}: the partial download is longer than the file on the hub: it was from another version; delete the .hub folder in the models folder and pull again"
            ),
        ),
        other => ApiError::new(Code::Http, format!("{what}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_owner_repo_and_a_gguf_file() {
        let s: PullSpec = "bartowski/Qwen2.5-1.5B-Instruct-GGUF:Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.repo, "bartowski/Qwen2.5-1.5B-Instruct-GGUF");
        assert_eq!(s.file.as_deref(), Some("Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"));
        for bad in [
            "qwen",
            "a/b/c",
            "../x/y",
            "a/b:../../etc/passwd.gguf",
            "a/b:model.bin",
            "a /b",
        ] {
            assert!(bad.parse::<PullSpec>().is_err(), "{bad}");
        }
        let many = vec![
            "a-Q8_0.gguf".to_string(),
            "a-Q4_K_M.gguf".into(),
            "README.md".into(),
        ];
        let spec = PullSpec {
            repo: "o/r".into(),
            file: None,
        };
        assert_eq!(choose(&many, &spec).ok().as_deref(), Some("a-Q4_K_M.gguf"));
        let e = choose(&["a.gguf".into(), "b.gguf".into()], &spec)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("o/r:a.gguf, o/r:b.gguf")));
    }
}
