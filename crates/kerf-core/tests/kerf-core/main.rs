//! kerf-core's integration tests: one binary, one module per area.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod dataset;
mod delimited;
mod export;
mod files;
mod json;
mod jsonl;
mod lint;
mod post;
mod prompt_file;
mod robustness;
mod schema;
mod score;
mod shipped;
mod spans;
mod stream;
mod support;
mod sweep;
mod template;
mod twin;
