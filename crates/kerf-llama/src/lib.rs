//! Kerf's local engine: runs any GGUF model through llama.cpp (crate `llama-cpp-2`) behind the
//! [`kerf_llm::Provider`] contract, with output constrained by llguidance (llama.cpp's GBNF
//! sampler as the fallback), GPU offload that reports what it really did, and the model's own
//! tokenizer for token-exact sweeps.
//!
//! This is the only crate that links llama.cpp, and only with the `engine` feature (the CLI and
//! the desktop app turn it on). Without it everything compiles and every engine call returns
//! [`kerf_llm::Error::Unavailable`] saying how to build with it. The GGUF reader and the model
//! store work either way.

pub mod backends;
pub mod gguf;
pub mod grammar;
pub mod logs;
pub mod models;

#[cfg(feature = "engine")]
mod engine;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use kerf_llm::{CancelToken, Constraint, Error, Event, Provider, Request, Result, RunFuture};

/// Whether this build has the engine.
pub const ENGINE: bool = cfg!(feature = "engine");

/// How many of the model's layers to put on the GPU. Written (flags, the history's stored
/// parameters) as `auto`, `none`, `all` or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuLayers {
    /// All of them when a GPU backend is present, none otherwise (no warning).
    #[default]
    Auto,
    None,
    All,
    Count(u32),
}

impl std::fmt::Display for GpuLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuLayers::Auto => f.write_str("auto"),
            GpuLayers::None => f.write_str("none"),
            GpuLayers::All => f.write_str("all"),
            GpuLayers::Count(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for GpuLayers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for GpuLayers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for GpuLayers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(GpuLayers::Auto),
            "none" | "0" => Ok(GpuLayers::None),
            "all" => Ok(GpuLayers::All),
            n => n.parse().map(GpuLayers::Count).map_err(|_| {
                format!("`{n}` is not a layer count (use `all`, `none`, `auto` or a number)")
            }),
        }
    }
}

/// How to run a local model.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub model: PathBuf,
    /// Context size in tokens; by default just what the prompt and the budget need (at least
    /// 2,048), up to the model's training context.
    pub context: Option<u32>,
    /// CPU threads; by default every core (fastest on an idle machine; on a busy one llama.cpp's
    /// spinning threads lose badly to contention, so pass fewer).
    pub threads: Option<i32>,
    /// Flash attention: `None` lets llama.cpp decide (its default), `Some(false)` turns it off
    /// (what llama-cpp-python does by default), `Some(true)` forces it on.
    pub flash_attention: Option<bool>,
    pub batch: u32,
    pub gpu_layers: GpuLayers,
    /// The GPU (0 = the first) that holds the model, or with split mode `layer`/`row` the small
    /// tensors and intermediate results. Given, it must exist, and the split mode defaults to
    /// `none` (llama.cpp honours it only then).
    pub main_gpu: Option<u32>,
    /// How layers spread over several GPUs: `None` is `none` when `main_gpu` is given, else
    /// llama.cpp's `layer`.
    pub split_mode: Option<SplitMode>,
    /// A chat template to use instead of the model's own (llama.cpp's built-in names such as
    /// `chatml`, or a template string).
    pub chat_template: Option<String>,
    /// Use llama.cpp's GBNF sampler for schema constraints even where llguidance works (for
    /// comparing the two; llguidance is the default).
    pub prefer_gbnf: bool,
}

impl LocalConfig {
    pub fn new(model: PathBuf) -> Self {
        LocalConfig {
            model,
            context: None,
            threads: None,
            flash_attention: None,
            batch: 512,
            gpu_layers: GpuLayers::Auto,
            main_gpu: None,
            split_mode: None,
            chat_template: None,
            prefer_gbnf: false,
        }
    }
}

/// A backend device llama.cpp can run on (the run vocabulary's, kept with a run's offload).
pub use kerf_llm::details::{Device, SplitMode};

impl LocalConfig {
    /// The split mode a run uses: the one asked for, else `none` when a main GPU is named (so
    /// that it holds the model), else llama.cpp's default, `layer`.
    pub fn effective_split_mode(&self) -> SplitMode {
        self.split_mode.unwrap_or(if self.main_gpu.is_some() {
            SplitMode::None
        } else {
            SplitMode::Layer
        })
    }
}

#[cfg_attr(feature = "engine", allow(dead_code))]
fn unavailable() -> Error {
    Error::Unavailable(
        "this build has no local engine (kerf-llama's `engine` feature is off); the `kerf` CLI and \
         the desktop app have it by default (feature `engine`), unless built with \
         `--no-default-features`"
            .into(),
    )
}

/// The local llama.cpp provider.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    config: LocalConfig,
}

impl LocalProvider {
    pub fn new(config: LocalConfig) -> Self {
        LocalProvider { config }
    }

    pub fn config(&self) -> &LocalConfig {
        &self.config
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    fn model(&self) -> String {
        self.config.model.display().to_string()
    }

    fn supports(&self, _constraint: &Constraint) -> bool {
        ENGINE
    }

    #[allow(unused_variables)]
    fn run<'a>(
        &'a self,
        request: &'a Request,
        cancel: &'a CancelToken,
        on_event: &'a mut dyn FnMut(Event<'_>),
    ) -> RunFuture<'a> {
        Box::pin(async move {
            #[cfg(feature = "engine")]
            {
                // The engine is synchronous (a token loop over llama.cpp): it runs on one of the
                // runtime's blocking threads and hands its events back over a channel. A child
                // token stops it at its next token when the run is cancelled or this future is
                // dropped (the guard).
                let config = self.config.clone();
                let request = request.clone();
                let token = cancel.child_token();
                let _stop_when_dropped = token.clone().drop_guard();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Owned>();
                let work = kerf_llm::runtime::runtime().spawn_blocking(move || {
                    engine::run(&config, &request, &token, &mut |e| {
                        let _ = tx.send(match e {
                            Event::Text(t) => Owned::Text(t.to_string()),
                            Event::Warning(w) => Owned::Warning(w.to_string()),
                        });
                    })
                });
                while let Some(e) = rx.recv().await {
                    match &e {
                        Owned::Text(t) => on_event(Event::Text(t)),
                        Owned::Warning(w) => on_event(Event::Warning(w)),
                    }
                }
                work.await
                    .map_err(|e| Error::Engine(format!("the engine's thread failed: {e}")))?
            }
            #[cfg(not(feature = "engine"))]
            {
                Err(unavailable())
            }
        })
    }
}

/// An engine event on its way from the engine's thread to the run's task.
#[cfg(feature = "engine")]
enum Owned {
    Text(String),
    Warning(String),
}

/// The byte offset after each token of `text` under the tokenizer of the GGUF model at `model`
/// (for token-exact sweeps at this model's boundaries).
#[allow(unused_variables)]
pub fn token_boundaries(model: &Path, text: &str) -> Result<Vec<usize>> {
    #[cfg(feature = "engine")]
    {
        engine::token_boundaries(model, text)
    }
    #[cfg(not(feature = "engine"))]
    {
        Err(unavailable())
    }
}

/// The devices llama.cpp can use in this build on this machine.
pub fn devices() -> Result<Vec<Device>> {
    #[cfg(feature = "engine")]
    {
        engine::devices()
    }
    #[cfg(not(feature = "engine"))]
    {
        Err(unavailable())
    }
}

/// The compute backends this process has (loading them first in a `dynamic-backends` build).
pub fn backends() -> Result<backends::Backends> {
    #[cfg(feature = "engine")]
    {
        engine::backends()
    }
    #[cfg(not(feature = "engine"))]
    {
        Err(unavailable())
    }
}

/// llama.cpp as this process's engine started it (modules loaded, logs routed), for programs
/// that drive llama-cpp-2 beside Kerf's engine: the engine-overhead benchmark's bare side. It
/// can be started once per process, so there is no other way to get one.
#[cfg(feature = "engine")]
#[doc(hidden)]
pub fn llama_backend() -> Result<&'static llama_cpp_2::llama_backend::LlamaBackend> {
    engine::backend()
}

/// The largest char boundary at or before `i`.
#[cfg_attr(not(feature = "engine"), allow(dead_code))]
fn floor_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}
