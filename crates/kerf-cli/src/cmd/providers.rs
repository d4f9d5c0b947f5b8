//! `kerf providers`: the cloud APIs and OpenAI-compatible servers runs can use, their keys, and
//! what each really honours.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use anyhow::Result;
use kerf_api::providers;
use kerf_api::providers::{Api, Kind, Structured};
use serde_json::{Value, json};

use crate::Outcome;
use crate::output::print_json;

/// Configure cloud and server providers (OpenAI-compatible, Anthropic, Gemini).
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf providers add openai --kind openai --model gpt-4o-mini
  kerf providers add local-vllm --kind openai --base-url http://127.0.0.1:8000/v1 --model qwen2.5 --no-key
  kerf providers add claude --kind anthropic --model claude-sonnet-4-5
  printf %s \"$KEY\" | kerf providers set-key openai
  kerf providers probe local-vllm
  kerf run prompts/agent-kg-extract.json --sample --provider openai

Definitions live in providers.json in Kerf's config directory (KERF_CONFIG_DIR, else
~/.config/kerf). Keys never do: they go to the OS keyring (set-key), or come from the environment
(the provider's --key-env variable, else OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY, which
are used only for the provider's own public endpoint: a server at another --base-url needs set-key
or its own --key-env).")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// The configured providers, where each one's key is found, and what a probe found.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Add (or replace) a provider.
    Add {
        name: String,
        /// openai (any OpenAI-compatible server), anthropic or gemini.
        #[arg(long, value_parser = parse_kind)]
        kind: Kind,
        /// The API's base URL (default: the kind's public endpoint).
        #[arg(long)]
        base_url: Option<String>,
        #[arg(long)]
        model: String,
        /// An environment variable to read the key from.
        #[arg(long)]
        key_env: Option<String>,
        /// The server needs no key (a local vLLM, Ollama, llama.cpp server).
        #[arg(long)]
        no_key: bool,
        /// Structured-output mode: auto, none, json_object, json_object_schema, json_schema,
        /// tool (Anthropic), response_schema (Gemini's older field), grammar (llama.cpp's
        /// server, vLLM).
        #[arg(long, default_value = "auto", value_parser = parse_structured)]
        structured: Structured,
        /// Send the budget as `max_completion_tokens` not `max_tokens` (the default on
        /// api.openai.com already).
        #[arg(long)]
        max_completion_tokens: bool,
        /// OpenAI kind: auto (chat completions, except models only the Responses API serves),
        /// chat, or responses.
        #[arg(long, value_parser = parse_api)]
        api: Option<Api>,
        /// Correct enum/const values that differ from the schema only in letter case before
        /// parsing, and report each correction (Anthropic does not guarantee their case).
        #[arg(long)]
        fold_enum_case: bool,
        /// The server offers OpenAI's batch API (`/files` and `/batches`: a LiteLLM proxy), so
        /// `kerf eval --batch` sends it batches (OpenAI itself, Anthropic and Gemini always do).
        #[arg(long)]
        batch_api: bool,
        /// Send the key over plain http:// to a host off this machine (refused otherwise:
        /// anyone on the network path can read it).
        #[arg(long)]
        allow_plain_http: bool,
        /// When replacing a provider with a new --base-url, keep its stored key (by default it is
        /// removed: it was given for the old server).
        #[arg(long)]
        keep_key: bool,
        /// Requests per minute this provider's runs stay under (default: the limit the API
        /// announces in its reply headers, if it does).
        #[arg(long, value_name = "N")]
        requests_per_minute: Option<u32>,
        /// Tokens per minute (each request counts its prompt estimate plus its whole budget).
        #[arg(long, value_name = "N")]
        tokens_per_minute: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Remove a provider (and its key from the keyring).
    Remove {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Store a provider's API key in the OS keyring, read from standard input (never an argument).
    SetKey {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a provider's key from the keyring.
    DeleteKey {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Send small requests to find which structured-output modes the server really honours; the
    /// result is stored and `--structured auto` runs use it.
    Probe {
        name: String,
        /// Probe with this prompt's own schema, rewritten per mode as its runs would send it:
        /// the verdict is kept for this model and schema, and `auto` follows it for the
        /// prompt's runs (without: a one-field toy schema).
        #[arg(long)]
        prompt: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    s.parse()
}

fn parse_structured(s: &str) -> Result<Structured, String> {
    s.parse()
}

fn parse_api(s: &str) -> Result<Api, String> {
    s.parse()
}

impl Args {
    pub fn json(&self) -> bool {
        match &self.action {
            Action::List { json }
            | Action::Add { json, .. }
            | Action::Remove { json, .. }
            | Action::SetKey { json, .. }
            | Action::DeleteKey { json, .. }
            | Action::Probe { json, .. } => *json,
        }
    }
}

pub fn run(args: Args, wb: &kerf_api::workbench::Workbench) -> Result<Outcome> {
    let json_out = args.json();
    let path = wb.providers.clone();
    match args.action {
        Action::List { .. } => {
            let registry = providers::registry(&path)?;
            let rows: Vec<Value> = registry
                .providers
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name, "kind": p.kind, "base_url": p.base_url, "model": p.model,
                        "structured": p.structured, "key": providers::key_status(p), "probe": p.probe,
                    })
                })
                .collect();
            if json_out {
                print_json(
                    &json!({"config": registry.path, "keyring": providers::keyring(), "providers": rows}),
                );
            } else if rows.is_empty() {
                crate::outln!(
                    "no providers configured in {} (add one: kerf providers add NAME --kind openai --model MODEL)",
                    registry.path.display()
                );
            } else {
                crate::outln!(
                    "{:<14} {:<10} {:<40} {:<22} {:<12} key",
                    "name",
                    "kind",
                    "base url",
                    "model",
                    "structured"
                );
                for p in &registry.providers {
                    crate::outln!(
                        "{:<14} {:<10} {:<40} {:<22} {:<12} {}",
                        p.name,
                        p.kind.as_str(),
                        p.base_url,
                        p.model,
                        p.structured.as_str(),
                        providers::key_status(p)
                    );
                    if let Some(probe) = &p.probe {
                        let modes: Vec<String> = probe
                            .modes
                            .iter()
                            .map(|m| format!("{} {}", m.mode.as_str(), m.result))
                            .collect();
                        crate::outln!("{:<14} probed {}: {}", "", probe.at, modes.join(", "));
                    }
                }
            }
        }
        Action::Add {
            name,
            kind,
            base_url,
            model,
            key_env,
            no_key,
            structured,
            max_completion_tokens,
            api,
            fold_enum_case,
            batch_api,
            allow_plain_http,
            keep_key,
            requests_per_minute,
            tokens_per_minute,
            ..
        } => {
            let spec = kerf_api::providers::wire::ProviderSpec {
                name,
                kind,
                base_url,
                model,
                key_env,
                no_key,
                structured: Some(structured),
                max_completion_tokens,
                api,
                fold_enum_case,
                allow_plain_http,
                keep_key,
                requests_per_minute,
                tokens_per_minute,
                batch_api: Some(batch_api),
            };
            let providers::Added {
                def,
                config,
                key_dropped,
            } = providers::add(&path, &spec)?;
            if key_dropped {
                crate::errln!(
                    "kerf: the stored key of `{}` was removed: it was given for another endpoint (set it again with `kerf providers set-key {}`, or re-add with --keep-key)",
                    def.name,
                    def.name
                );
            }
            if json_out {
                print_json(
                    &json!({"added": def, "config": config, "key": providers::key_status(&def), "key_dropped": key_dropped}),
                );
            } else {
                crate::outln!(
                    "added {} ({} at {}, model {}) to {}; key: {}",
                    def.name,
                    def.kind.as_str(),
                    def.base_url,
                    def.model,
                    config,
                    providers::key_status(&def)
                );
            }
        }
        Action::Remove { name, .. } => {
            let key_removed = providers::remove(&path, &name)?;
            if json_out {
                print_json(&json!({"removed": name, "key_removed": key_removed}));
            } else {
                crate::outln!(
                    "removed {}{}",
                    name,
                    if key_removed {
                        " and its key from the keyring"
                    } else {
                        ""
                    }
                );
            }
        }
        Action::SetKey { name, .. } => {
            providers::registry(&path)?.get(&name)?;
            let stdin = std::io::stdin();
            let key = if stdin.is_terminal() {
                rpassword::prompt_password(format!("API key for {name} (not echoed): "))?
            } else {
                let mut line = String::new();
                stdin.lock().read_line(&mut line)?;
                line
            };
            providers::set_key(&path, &name, &key)?;
            if json_out {
                print_json(&json!({"provider": name, "stored_in": providers::keyring()}));
            } else {
                crate::outln!(
                    "stored the key for {name} in the {} keyring",
                    providers::keyring()
                );
            }
        }
        Action::DeleteKey { name, .. } => {
            let removed = providers::delete_key(&name)?;
            if json_out {
                print_json(&json!({"provider": name, "removed": removed}));
            } else if removed {
                crate::outln!(
                    "removed the key for {name} from the {} keyring",
                    providers::keyring()
                );
            } else {
                crate::outln!("no key for {name} in the {} keyring", providers::keyring());
            }
        }
        Action::Probe { name, prompt, .. } => {
            let base_url = providers::registry(&path)?.get(&name)?.base_url.clone();
            let prompt = prompt.map(|p| kerf_core::Prompt::load(&p)).transpose()?;
            let (probe, chosen, why) = providers::probe(
                &path,
                &name,
                prompt.as_ref(),
                &crate::cmd::run::interrupt_token(),
            )?;
            if json_out {
                print_json(
                    &json!({"provider": name, "probe": probe, "auto_mode": chosen, "why": why}),
                );
            } else {
                crate::outln!("{name} ({base_url}), model {}:", probe.model);
                for m in &probe.modes {
                    crate::outln!("  {:<12} {:<9} {}", m.mode.as_str(), m.result, m.detail);
                }
                match &prompt {
                    Some(p) => crate::outln!(
                        "auto mode for {} (schema {}): {} ({why})",
                        p.id(),
                        probe.schema.as_deref().unwrap_or("?"),
                        chosen.as_str()
                    ),
                    None => {
                        crate::outln!("auto mode for JSON prompts: {} ({why})", chosen.as_str())
                    }
                }
            }
        }
    }
    Ok(Outcome::Ok)
}
