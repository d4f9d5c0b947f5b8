//! # kerf-api
//!
//! Kerf's use cases as plain functions, shared by every front end: the `kerf` CLI now, the
//! desktop app next. A front end unpacks its arguments, calls these, and shows the result; the
//! logic (which provider, the request, the repair loop, recording into the history, comparing
//! runs) lives here once.
//!
//! - [`runs`] — [`runs::RunSettings`] (model and sampling), [`runs::run`]: one run with its
//!   repair loop, recorded in the history as it streams, reporting [`runs::RunEvent`]s.
//! - [`compare`] — formats side by side under real budgets, recorded as one experiment, with
//!   each format's complete reply swept.
//! - [`history`] — [`history::diff`]: what changed between two stored runs.
//! - [`providers`] — cloud providers and servers: definitions, keys into the keyring, probes.
//! - [`prompts`] — prompt folders, drafts inspected as the user types, saved atomically.
//! - [`workbench`] — the desktop's use cases over [`workbench::Workbench`], in wire types.
//! - [`wire`] — the camelCase types the desktop app receives, with generated TypeScript
//!   bindings in `ui/src/ipc/bindings/`.
//! - [`error`] — [`ApiError`] `{code, message, details?}` with a closed [`Code`].

pub mod compare;
pub mod error;
pub mod history;
pub mod prompts;
pub mod providers;
pub mod runs;
pub mod wire;
pub mod workbench;

pub use error::{ApiError, Code, Result};
