//! Where generation time goes between llama.cpp and what Kerf reports: the same model, prompt,
//! context settings and greedy decoding, driven three ways in one process, alternating so that
//! drift in machine load hits every side equally:
//!
//! - `bare`: llama.cpp through llama-cpp-2 and nothing else: decode one token, take the largest
//!   logit, decode it (the least any program built on these libraries can do per token);
//! - `kerf`: Kerf's engine through the provider contract, as `kerf run` drives it: the sampling
//!   step, the text relay over a channel to the run's task, stop strings, cancellation checks;
//! - `kerf+llguidance`: the same with a JSON Schema constraint (llguidance's mask per token).
//!
//! Tokens/s is generation only, first token to last, as Kerf reports it. Greedy decoding gives
//! the bare side and Kerf's unconstrained side the same tokens, and both stop at
//! end-of-generation, so they are timed over the same tokens; the constrained side writes its
//! own (the output shows each side's token count).
//!
//! ```text
//! cargo run --release -p kerf-llama --features engine --example engine-overhead -- \
//!     [--model PATH.gguf] [--max-tokens 128] [--reps 5] [--gpu-layers all|none|N] [--threads N]
//!     [--user TEXT]   (another request: one the model answers at length times more tokens)
//! ```
//! `bench/engine/run` runs it and writes bench/engine/results.json. Build it with the same
//! features as the Kerf build being measured (`cuda`, `dynamic-backends`): it then links the same
//! llama.cpp.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Instant;

use kerf_llama::{GpuLayers, LocalConfig, LocalProvider};
use kerf_llm::{CancelToken, Constraint, Event, Message, Provider, Request, Role};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::token::LlamaToken;

const SYSTEM: &str = "You extract facts as JSON.";
const USER: &str = "List every entity in this text with its type, one JSON object each: \
Photosynthesis converts light energy into chemical energy in chloroplasts. Chlorophyll absorbs \
mostly blue and red light, and the Calvin cycle fixes carbon dioxide into sugars.";

struct Args {
    model: PathBuf,
    /// The user's message (default: the extraction request above).
    user: String,
    max_tokens: u32,
    reps: usize,
    gpu_layers: GpuLayers,
    threads: i32,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        model: kerf_llama::models::default_model_path(&kerf_llama::models::models_dir()),
        user: USER.to_string(),
        max_tokens: 128,
        reps: 5,
        gpu_layers: GpuLayers::Auto,
        threads: std::thread::available_parallelism().map_or(4, |n| n.get() as i32),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--model" => a.model = PathBuf::from(&value),
            "--user" => a.user = value,
            "--max-tokens" => a.max_tokens = value.parse().map_err(|e| bad(&e))?,
            "--reps" => a.reps = value.parse().map_err(|e| bad(&e))?,
            "--gpu-layers" => a.gpu_layers = value.parse().map_err(|e: String| bad(&e))?,
            "--threads" => a.threads = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

/// One bare run: tokens/s from the first generated token to the last, and the tokens.
fn bare(backend: &LlamaBackend, model: &LlamaModel, a: &Args) -> Result<(f64, Vec<i32>), String> {
    let template = model.chat_template(None).map_err(|e| e.to_string())?;
    let messages = [
        LlamaChatMessage::new("system".into(), SYSTEM.into()).map_err(|e| e.to_string())?,
        LlamaChatMessage::new("user".into(), a.user.clone()).map_err(|e| e.to_string())?,
    ];
    let prompt = model
        .apply_chat_template(&template, &messages, true)
        .map_err(|e| e.to_string())?;
    let tokens = model.vocab().tokenize(prompt.as_bytes(), true, true);
    // Kerf's context for this prompt and budget: what they need, at least 2,048.
    let n_ctx = (tokens.len() as u32 + a.max_tokens + 1).max(2048);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(512)
        .with_n_ubatch(512)
        .with_n_threads(a.threads)
        .with_n_threads_batch(a.threads);
    let mut ctx = model
        .new_context(backend, params)
        .map_err(|e| e.to_string())?;
    let mut batch = LlamaBatch::new(512, 1);
    for (i, t) in tokens.iter().enumerate() {
        batch
            .add(*t, i as i32, &[0], i + 1 == tokens.len())
            .map_err(|e| e.to_string())?;
    }
    ctx.decode(&mut batch).map_err(|e| e.to_string())?;
    let mut pos = tokens.len() as i32;
    let mut out = Vec::new();
    let mut first = None;
    let mut last = Instant::now();
    while (out.len() as u32) < a.max_tokens {
        let logits = ctx.get_logits_ith(batch.n_tokens() - 1);
        let (best, _) =
            logits
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |(bi, bl), (i, &l)| {
                    if l > bl { (i, l) } else { (bi, bl) }
                });
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        out.push(best as i32);
        // End of generation ends the reply, as on Kerf's side: both are then timed over the
        // same tokens (a side that ran on past it timed tokens the other never made).
        if out.len() as u32 == a.max_tokens || model.vocab().is_eog(LlamaToken(best as i32)) {
            break;
        }
        batch.clear();
        batch
            .add(LlamaToken(best as i32), pos, &[0], true)
            .map_err(|e| e.to_string())?;
        pos += 1;
        ctx.decode(&mut batch).map_err(|e| e.to_string())?;
    }
    let seconds = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    Ok(((out.len() - 1) as f64 / seconds, out))
}

/// One run through Kerf's engine: tokens/s as Kerf reports it, and how many tokens.
fn kerf(provider: &LocalProvider, a: &Args, constraint: &Constraint) -> Result<(f64, u32), String> {
    let request = Request {
        messages: vec![
            Message::new(Role::System, SYSTEM),
            Message::new(Role::User, &a.user),
        ],
        max_tokens: a.max_tokens,
        temperature: None,
        top_p: None,
        seed: None,
        stop: vec![],
        constraint: constraint.clone(),
        reasoning_effort: None,
        thinking_budget: None,
    };
    let cancel = CancelToken::new();
    // What a caller does with the text: keep it (the CLI prints it and parses it at the end).
    let mut reply = String::new();
    let finish = kerf_llm::runtime::block_on(provider.run(&request, &cancel, &mut |e| {
        if let Event::Text(t) = e {
            reply.push_str(t);
        }
    }))
    .map_err(|e| e.to_string())?;
    Ok((
        finish.timings.tokens_per_second,
        finish.usage.completion_tokens,
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let a = args()?;
    let mut config = LocalConfig::new(a.model.clone());
    config.threads = Some(a.threads);
    config.gpu_layers = a.gpu_layers;
    let provider = LocalProvider::new(config);
    let schema: serde_json::Value = serde_json::json!({
        "type": "array",
        "items": {"type": "object", "properties": {"entity": {"type": "string"}, "type": {"type": "string"}},
                  "required": ["entity", "type"]}
    });
    let constrained = Constraint::Json(schema);
    // Kerf's run first: it starts llama.cpp (loading the backend modules of a dynamic-backends
    // build), which the bare side then shares; the bare side loads its own copy of the model.
    kerf(&provider, &a, &Constraint::None)?;
    let backend = kerf_llama::llama_backend().map_err(|e| e.to_string())?;
    let layers = match a.gpu_layers {
        GpuLayers::None => 0,
        GpuLayers::Count(n) => n,
        GpuLayers::All | GpuLayers::Auto => u32::MAX,
    };
    let model = LlamaModel::load_from_file(
        backend,
        &a.model,
        &LlamaModelParams::default().with_n_gpu_layers(layers),
    )
    .map_err(|e| format!("{}: {e}", a.model.display()))?;

    let (mut b, mut k, mut g) = (Vec::new(), Vec::new(), Vec::new());
    let mut tokens = (0, 0, 0);
    for _ in 0..a.reps {
        let (tps, out) = bare(backend, &model, &a)?;
        b.push(tps);
        tokens.0 = out.len();
        let (tps, n) = kerf(&provider, &a, &Constraint::None)?;
        k.push(tps);
        tokens.1 = n as usize;
        let (tps, n) = kerf(&provider, &a, &constrained)?;
        g.push(tps);
        tokens.2 = n as usize;
    }
    let (mb, mk, mg) = (median(&mut b), median(&mut k), median(&mut g));
    println!(
        "{}",
        serde_json::json!({
            "model": a.model.display().to_string(),
            "max_tokens": a.max_tokens,
            "reps": a.reps,
            "threads": a.threads,
            "gpu_layers": format!("{:?}", a.gpu_layers),
            "tok_s": {"bare": mb, "kerf": mk, "kerf_llguidance": mg},
            "tokens": {"bare": tokens.0, "kerf": tokens.1, "kerf_llguidance": tokens.2},
            "kerf_vs_bare": mk / mb,
            "kerf_llguidance_vs_bare": mg / mb,
            "runs": {"bare": b, "kerf": k, "kerf_llguidance": g},
        })
    );
    Ok(())
}
