//! kerf-llama: the GGUF reader and model store always; with the `engine` feature, runs of the
//! real bundled model (SmolLM2-135M-Instruct, fetched by the test command first).
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod gguf;

#[cfg(feature = "engine")]
mod engine;

#[cfg(not(feature = "engine"))]
#[test]
fn without_the_engine_every_run_says_how_to_get_it() {
    use kerf_llm::{CancelToken, Provider, Request};
    let p = kerf_llama::LocalProvider::new(kerf_llama::LocalConfig::new("m.gguf".into()));
    let err = p
        .run_blocking(&Request::new(None, "hi"), &CancelToken::new(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "provider_unavailable");
    assert!(err.to_string().contains("`engine` feature"), "{err}");
    let err = kerf_llama::token_boundaries(std::path::Path::new("m.gguf"), "x").unwrap_err();
    assert_eq!(err.code(), "provider_unavailable");
    assert!(kerf_llama::devices().is_err());
}

/// The repository root.
pub fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
