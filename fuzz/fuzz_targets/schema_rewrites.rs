#![no_main]
//! The provider schema rewrites (OpenAI strict, Gemini's subset) and the lint on arbitrary JSON
//! schemas, `$ref` cycles included: no panic, bounded work, and a Gemini rewrite that stopped at
//! its size limit says so.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let _ = kerf_core::lint::openai_strict(&schema);
    let g = kerf_core::lint::gemini_schema(&schema);
    if g.too_large {
        assert!(g.findings.iter().any(|f| f.severity == kerf_core::lint::Severity::Error));
    }
    for p in [
        kerf_core::lint::Provider::Openai,
        kerf_core::lint::Provider::Anthropic,
        kerf_core::lint::Provider::Gemini,
    ] {
        let _ = kerf_core::lint::lint(&schema, p);
    }
});
