//! # kerf-api
//!
//! Kerf's use cases as plain functions, shared by every front end: the `kerf` CLI now, the
//! desktop app next. A front end unpacks its arguments, calls these, and shows the result; the
//! logic (which provider, the request, the repair loop, recording into the history, comparing
//! runs) lives here once.
//!
//! - [`runs`] — [`runs::RunSettings`] (model and sampling), [`runs::run`]: one run with its
//!   repair loop, recorded in the history as it streams, reporting [`runs::RunEvent`]s.
//! - [`history`] — [`history::diff`]: what changed between two stored runs.
//! - [`wire`] — the camelCase types the desktop app receives, with generated TypeScript
//!   bindings in `ui/src/ipc/bindings/`.
//! - [`error`] — [`ApiError`] `{code, message, details?}` with a closed [`Code`].

pub mod error;
pub mod history;
pub mod runs;
pub mod wire;

pub use error::{ApiError, Code, Result};
