//! The llama.cpp engine (feature `engine`): one backend per process, models loaded once and
//! reused, and a generation loop Kerf owns — so it can cancel between tokens, stop exactly at the
//! budget, and time the constraint's share of every step.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::{LlamaBackendDeviceType, LogOptions};
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use kerf_llm::{
    CancelToken, Constraint, Error, Event, Finish, FinishReason, Request, Result, Role, Timings,
    Usage,
};

use crate::backends::{Backends, FailedBackend, LoadedBackend};
use crate::gguf::{self, GgufInfo};
use crate::{GpuLayers, LocalConfig, SplitMode, logs};
use kerf_llm::RunDetails;
use kerf_llm::details::{ConstraintEngine, ConstraintRun, Device, LocalDetails, Offload};
use llama_cpp_2::model::params::LlamaSplitMode;

mod backend;
mod constraint;

pub(crate) use backend::backend;
pub use backend::{backends, devices};
use constraint::*;

fn engine_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Engine(format!("{what}: {e}"))
}

/// A loaded model, shared by every run in the process that asks for the same file and offload.
struct Loaded {
    model: LlamaModel,
    info: GgufInfo,
    load_seconds: f64,
    offload: Offload,
    warning: Option<String>,
    /// llguidance's view of the vocabulary: built on first constrained run (~0.2 s), then reused.
    factory: OnceLock<std::result::Result<ParserFactory, String>>,
}

type Key = (PathBuf, GpuLayers, Option<u32>, SplitMode);

fn load(config: &LocalConfig) -> Result<(Arc<Loaded>, bool)> {
    static MODELS: Mutex<Vec<(Key, Arc<Loaded>)>> = Mutex::new(Vec::new());
    let path = config
        .model
        .canonicalize()
        .unwrap_or_else(|_| config.model.clone());
    let split_mode = config.effective_split_mode();
    let key = (path.clone(), config.gpu_layers, config.main_gpu, split_mode);
    let mut models = MODELS
        .lock()
        .map_err(|_| Error::Engine("model cache poisoned".into()))?;
    if let Some((_, m)) = models.iter().find(|(k, _)| *k == key) {
        return Ok((m.clone(), true));
    }
    // Checks llama.cpp would otherwise make the hard way.
    let info = gguf::inspect(&config.model)?;
    gguf::check_memory(&info)?;
    let backend = backend()?;
    let backends = backends()?;
    let devices = devices()?;
    let gpus: Vec<&Device> = devices
        .iter()
        .filter(|d| matches!(d.kind.as_str(), "gpu" | "igpu"))
        .collect();
    let device_names = || {
        devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // llama.cpp counts `main_gpu` among the GPUs it uses, and ignores one that does not exist.
    if let Some(i) = config.main_gpu
        && i as usize >= gpus.len()
    {
        return Err(Error::Request(format!(
            "--main-gpu {i}: there is no GPU {i} here ({}); GPUs are counted from 0 in `kerf models devices`",
            if gpus.is_empty() {
                format!(
                    "this build finds no GPU on this machine, only {}",
                    device_names()
                )
            } else {
                format!(
                    "GPUs: {}",
                    gpus.iter()
                        .enumerate()
                        .map(|(k, d)| format!("{k} = {}", d.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )));
    }
    let all_layers = info.layers.map_or(999, |l| {
        u32::try_from(l).unwrap_or(u32::MAX).saturating_add(1)
    });
    let no_gpu = || {
        backends.failures().unwrap_or_else(|| {
            format!(
                "this build has no GPU backend on this machine (devices: {})",
                device_names()
            )
        })
    };
    let (n_gpu_layers, warning) = match config.gpu_layers {
        GpuLayers::None => (0, None),
        // Auto stays quiet when there is simply no GPU, but not when one failed to load.
        GpuLayers::Auto => (
            if gpus.is_empty() { 0 } else { all_layers },
            if gpus.is_empty() {
                backends.note()
            } else {
                None
            },
        ),
        GpuLayers::All | GpuLayers::Count(_) if gpus.is_empty() => (
            0,
            Some(format!(
                "GPU offload was asked for, but {}; running on the CPU",
                no_gpu()
            )),
        ),
        GpuLayers::All => (all_layers, None),
        GpuLayers::Count(n) => (n, None),
    };
    let params = LlamaModelParams::default()
        .with_n_gpu_layers(n_gpu_layers)
        .with_main_gpu(config.main_gpu.map_or(0, |i| i as i32))
        .with_split_mode(match split_mode {
            SplitMode::Layer => LlamaSplitMode::Layer,
            SplitMode::Row => LlamaSplitMode::Row,
            SplitMode::None => LlamaSplitMode::None,
        });
    logs::clear();
    let t = Instant::now();
    let model =
        LlamaModel::load_from_file(backend, &config.model, &params).map_err(|e| Error::Model {
            path: config.model.display().to_string(),
            message: format!(
                "llama.cpp could not load it ({e}){}",
                logs::last_containing("error")
                    .or_else(|| logs::last_containing("failed"))
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            ),
        })?;
    let load_seconds = t.elapsed().as_secs_f64();
    // What llama.cpp says it did, not what was asked.
    let (offloaded, total) = logs::offloaded_layers().unwrap_or((0, all_layers));
    // The GPUs the layers went to: the main one alone with split mode `none`, else every GPU.
    let used: Vec<&&Device> = if offloaded == 0 {
        Vec::new()
    } else if split_mode == SplitMode::None {
        gpus.get(config.main_gpu.unwrap_or(0) as usize)
            .into_iter()
            .collect()
    } else {
        gpus.iter().collect()
    };
    let (device, backend_name) = if used.is_empty() {
        ("CPU".to_string(), backends.cpu())
    } else {
        let mut names: Vec<&str> = used.iter().map(|d| d.backend.as_str()).collect();
        names.dedup();
        (
            used.iter()
                .map(|d| format!("{} ({})", d.name, d.description))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", "),
        )
    };
    let offload = Offload {
        requested: match config.gpu_layers {
            GpuLayers::Auto => "auto".to_string(),
            GpuLayers::None => "none".to_string(),
            GpuLayers::All => "all".to_string(),
            GpuLayers::Count(n) => n.to_string(),
        },
        offloaded_layers: offloaded,
        total_layers: total,
        device,
        backend: Some(backend_name),
        split_mode: Some(split_mode),
        devices,
    };
    let loaded = Arc::new(Loaded {
        model,
        info,
        load_seconds,
        offload,
        warning,
        factory: OnceLock::new(),
    });
    models.push((key, loaded.clone()));
    Ok((loaded, false))
}

/// The byte offset after each token of `text` under the model's tokenizer.
pub fn token_boundaries(model: &Path, text: &str) -> Result<Vec<usize>> {
    gguf::inspect(model)?;
    let backend = backend()?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    let m = LlamaModel::load_from_file(backend, model, &params).map_err(|e| Error::Model {
        path: model.display().to_string(),
        message: format!("llama.cpp could not load its vocabulary ({e})"),
    })?;
    let vocab = m.vocab();
    let tokens = vocab.tokenize(text.as_bytes(), false, false);
    let mut boundaries = Vec::with_capacity(tokens.len());
    let mut at = 0;
    for t in tokens {
        at += vocab.token_to_piece(t, false, None).len();
        boundaries.push(at);
    }
    if at != text.len() {
        return Err(Error::Model {
            path: model.display().to_string(),
            message: format!(
                "its tokenizer does not reproduce the text byte for byte ({at} bytes from {} tokens, the text has {}); token cuts would be wrong",
                boundaries.len(),
                text.len()
            ),
        });
    }
    Ok(boundaries)
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn default_threads() -> i32 {
    std::thread::available_parallelism().map_or(2, |n| n.get() as i32)
}

pub fn run(
    config: &LocalConfig,
    req: &Request,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Finish> {
    let (loaded, reused) = load(config)?;
    if let Some(w) = &loaded.warning {
        on_event(Event::Warning(w));
    }
    let model = &loaded.model;
    let backend = backend()?;
    let start = Instant::now();

    // The prompt through the chat template (the model's own unless one is configured).
    let template = match &config.chat_template {
        Some(t) => {
            LlamaChatTemplate::new(t).map_err(|e| Error::Request(format!("chat template: {e}")))?
        }
        None => model.chat_template(None).map_err(|_| Error::Model {
            path: config.model.display().to_string(),
            message:
                "the model has no chat template; configure one (e.g. `--chat-template chatml`)"
                    .into(),
        })?,
    };
    let messages = req
        .messages
        .iter()
        .map(|m| LlamaChatMessage::new(role(m.role).into(), m.content.clone()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Request(format!("a message holds a NUL byte: {e}")))?;
    let prompt = model
        .apply_chat_template(&template, &messages, true)
        .map_err(|e| engine_error("applying the chat template", e))?;
    let tokens = model.vocab().tokenize(prompt.as_bytes(), true, true);

    // Context: what the prompt and the budget need, within the model's training context.
    // Saturating and clamped: the header's numbers and `--max-tokens 4294967295` are input.
    let train = loaded
        .info
        .context_length
        .map_or(4096, |c| u32::try_from(c).unwrap_or(u32::MAX));
    let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
    let needed = prompt_tokens
        .saturating_add(req.max_tokens)
        .saturating_add(1);
    let n_ctx = config
        .context
        .unwrap_or_else(|| needed.max(2048).min(train));
    if needed > n_ctx {
        return Err(Error::ContextOverflow {
            prompt_tokens,
            max_tokens: req.max_tokens,
            context: n_ctx,
        });
    }
    let threads = config.threads.unwrap_or_else(default_threads);
    let n_batch = config.batch.max(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
        .with_flash_attention_policy(match config.flash_attention {
            None => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
            Some(false) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
            Some(true) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
        });
    let mut ctx = model
        .new_context(backend, params)
        .map_err(|e| engine_error("creating the context", e))?;

    let mut details = LocalDetails {
        engine: "llama.cpp".into(),
        model: config.model.display().to_string(),
        model_reused: reused,
        load_seconds: if reused { 0.0 } else { loaded.load_seconds },
        context: n_ctx,
        threads,
        flash_attention: config.flash_attention.into(),
        offload: loaded.offload.clone(),
        setup_seconds: None,
        constraint: None,
    };
    let finish =
        |reason, completion, timings: Timings, error: Option<String>, details: LocalDetails| {
            Ok(Finish {
                reason,
                usage: Usage {
                    prompt_tokens,
                    completion_tokens: completion,
                    reasoning_tokens: None,
                },
                timings,
                error,
                details: RunDetails::Local(details),
            })
        };

    // The prompt, in batches, checking for cancellation between them. Its speed is timed from
    // the first decode: what came before (template, tokenizing, the context) is set-up.
    let prompt_start = Instant::now();
    details.setup_seconds = Some(prompt_start.duration_since(start).as_secs_f64());
    let mut batch = LlamaBatch::new(n_batch as usize, 1);
    let mut pos: i32 = 0;
    for chunk in tokens.chunks(n_batch as usize) {
        if cancel.is_cancelled() {
            return finish(
                FinishReason::Cancelled,
                0,
                Timings::default(),
                None,
                details,
            );
        }
        batch.clear();
        for (j, t) in chunk.iter().enumerate() {
            let last = pos as usize + j + 1 == tokens.len();
            batch
                .add(*t, pos + j as i32, &[0], last)
                .map_err(|e| engine_error("batch", e))?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| engine_error("processing the prompt", e))?;
        pos += chunk.len() as i32;
    }
    let prompt_seconds = prompt_start.elapsed().as_secs_f64();

    let (mut active, constraint_details) =
        build_constraint(&loaded, &req.constraint, config.prefer_gbnf, on_event)?;
    details.constraint = Some(constraint_details);
    let seed = req.seed.unwrap_or(0) as u32;
    // No temperature set is greedy here: reruns on the local model stay comparable.
    let temperature = req.temperature.unwrap_or(0.0);
    let mut chain = (temperature > 0.0).then(|| {
        LlamaSampler::chain_simple([
            LlamaSampler::top_p(req.top_p.unwrap_or(1.0).clamp(0.0, 1.0), 1),
            LlamaSampler::temp(temperature),
            LlamaSampler::dist(seed),
        ])
    });

    let vocab = model.vocab();
    let mut constraint_seconds = 0.0;
    let mut completion = 0u32;
    let mut text = String::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut first_token: Option<Instant> = None;
    let mut last_token = Instant::now();
    let mut reason = FinishReason::Length;
    let mut error = None;
    let mut logits_at = batch.n_tokens() - 1;
    while completion < req.max_tokens {
        if cancel.is_cancelled() {
            reason = FinishReason::Cancelled;
            break;
        }
        let token = match pick(
            &ctx,
            logits_at,
            &mut active,
            chain.as_mut(),
            &mut constraint_seconds,
        ) {
            Ok(t) => t,
            Err(e) => {
                reason = FinishReason::Error;
                error = Some(e);
                break;
            }
        };
        if vocab.is_eog(token) {
            reason = FinishReason::Stop;
            break;
        }
        let now = Instant::now();
        first_token.get_or_insert(now);
        last_token = now;
        completion += 1;
        // Text as whole UTF-8 characters; a character split across tokens waits for its end.
        pending.extend(vocab.token_to_piece(token, false, None));
        let valid = match std::str::from_utf8(&pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        if valid > 0 {
            let piece = String::from_utf8_lossy(&pending[..valid]).into_owned();
            pending.drain(..valid);
            let before = text.len();
            text.push_str(&piece);
            if let Some(cut) = stop_at(&text, &req.stop, before) {
                if cut > before {
                    on_event(Event::Text(&text[before..cut]));
                }
                text.truncate(cut);
                reason = FinishReason::Stop;
                break;
            }
            on_event(Event::Text(&piece));
        }
        if completion == req.max_tokens {
            break;
        }
        batch.clear();
        batch
            .add(token, pos, &[0], true)
            .map_err(|e| engine_error("batch", e))?;
        pos += 1;
        if let Err(e) = ctx.decode(&mut batch) {
            reason = FinishReason::Error;
            error = Some(format!("decoding: {e}"));
            break;
        }
        logits_at = batch.n_tokens() - 1;
    }
    let total = start.elapsed().as_secs_f64();
    let gen_seconds = first_token
        .map(|f| last_token.duration_since(f).as_secs_f64())
        .unwrap_or(0.0);
    let timings = Timings {
        first_token_seconds: first_token.map(|f| f.duration_since(start).as_secs_f64()),
        prompt_tokens_per_second: if prompt_seconds > 0.0 {
            f64::from(prompt_tokens) / prompt_seconds
        } else {
            0.0
        },
        tokens_per_second: if completion > 1 && gen_seconds > 0.0 {
            f64::from(completion - 1) / gen_seconds
        } else {
            0.0
        },
        constraint_seconds,
        total_seconds: total,
    };
    finish(reason, completion, timings, error, details)
}

/// Where the first stop string ends the text, looking only at what may include new text.
fn stop_at(text: &str, stops: &[String], new_from: usize) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let from = crate::floor_boundary(text, new_from.saturating_sub(s.len()));
            text[from..].find(s.as_str()).map(|i| from + i)
        })
        .min()
}

/// Choose the next token: the constraint's mask, then the sampler chain (or greedy).
fn pick(
    ctx: &llama_cpp_2::context::LlamaContext<'_>,
    at: i32,
    active: &mut Active,
    chain: Option<&mut LlamaSampler>,
    constraint_seconds: &mut f64,
) -> std::result::Result<LlamaToken, String> {
    let t = Instant::now();
    let mask = match active {
        Active::Guidance(m) => Some(m.compute_mask_or_eos().map_err(|e| {
            format!(
                "the constraint failed: {}",
                m.get_error().unwrap_or_else(|| e.to_string())
            )
        })?),
        _ => None,
    };
    *constraint_seconds += t.elapsed().as_secs_f64();
    let token = match (chain, &mut *active) {
        // Greedy with llguidance or nothing: the best allowed logit, no candidate array needed.
        (None, Active::None | Active::Guidance(_)) => {
            let logits = ctx.get_logits_ith(at);
            let mut best: Option<(usize, f32)> = None;
            for (i, &l) in logits.iter().enumerate() {
                if mask.as_ref().is_some_and(|m| !m.is_allowed(i as u32)) {
                    continue;
                }
                if best.is_none_or(|(_, b)| l > b) {
                    best = Some((i, l));
                }
            }
            LlamaToken(best.map_or(0, |(i, _)| i as i32))
        }
        (chain, active) => {
            let mut data = LlamaTokenDataArray::from_iter(ctx.candidates_ith(at), false);
            let t = Instant::now();
            match active {
                Active::Guidance(_) => {
                    if let Some(m) = &mask {
                        data.data.iter_mut().for_each(|d| {
                            if !m.is_allowed(d.id().0 as u32) {
                                d.set_logit(f32::NEG_INFINITY);
                            }
                        });
                    }
                }
                Active::Grammar(g) => data.apply_sampler(g),
                Active::None => {}
            }
            *constraint_seconds += t.elapsed().as_secs_f64();
            match chain {
                Some(c) => {
                    data.apply_sampler(c);
                    let tok = data
                        .selected_token()
                        .ok_or_else(|| "the sampler selected no token".to_string())?;
                    c.accept(tok);
                    tok
                }
                None => data.sample_token_greedy(),
            }
        }
    };
    let t = Instant::now();
    match active {
        Active::Guidance(m) if !m.is_stopped() => {
            m.consume_token(token.0 as u32)
                .map_err(|e| format!("the constraint failed: {e}"))?;
        }
        Active::Grammar(g) => g.accept(token),
        _ => {}
    }
    *constraint_seconds += t.elapsed().as_secs_f64();
    Ok(token)
}
