//! # kerf-api
//!
//! Kerf's use cases as plain functions, shared by both front ends: the `kerf` CLI and the
//! desktop app. A front end builds one [`workbench::Workbench`] (its composition root), unpacks
//! its arguments, calls these, and shows the result; the logic (which provider, the request, the
//! repair loop, recording into the history, comparing runs) lives here once.
//!
//! Organised by area; each has its use cases and a `wire` module of the camelCase types the
//! desktop app receives, built `From` the area's results (the CLI prints those results, and its
//! `--json` is their serialisation):
//!
//! - [`runs`] — [`runs::RunParams`] (everything that reproduces a run), [`runs::run`]: the one
//!   place a run is assembled, with its repair loop, recorded as it streams; [`runs::run_draft`],
//!   the window's run of a draft, relayed as lines complete.
//! - [`compare`] — formats side by side under real budgets, recorded as one experiment, with
//!   each format's complete reply swept; [`compare::Report`] is what every front end shows.
//! - [`experiments`] — many runs as one plan: [`experiments::Subject::load`], the one cell
//!   runner ([`experiments::cells::run_cells`]) every compare, eval and test goes through, what
//!   a plan costs before it starts ([`experiments::plan::Size`]), the one record every kind
//!   keeps ([`experiments::ExperimentSpec`]) and sweeps ([`experiments::sweep`]).
//! - [`eval`] — datasets scored against prompts: the plan, its use cases ([`eval::flow`]:
//!   start, resume, a pass and how it ends), reports, comparisons, and a prompt file's tests.
//! - [`history`] — a stored run in full, what changed between two runs, and
//!   [`history::replay`]: a stored run made ready to run again (both front ends' rerun).
//! - [`opened`] — a stored compare, sweep or test opened again, as its screen shows it.
//! - [`prompts`] — prompt folders, drafts inspected as the user types, saved atomically, imports.
//! - [`providers`] — cloud providers and servers: definitions, keys into the keyring, probes.
//! - [`export`] — prompts in production shapes.
//! - [`models`] — local models, providers and devices a run can use.
//! - [`charts`] — one chart specification, built by the areas, drawn by the window and as SVG.
//! - [`meta`] — the closed lists the window offers (modes, targets, statuses, run defaults),
//!   declared once.
//! - [`workbench`] — the composition root.
//! - [`bindings`] — the generated TypeScript for every wire type (`ui/src/ipc/bindings/`).
//! - [`error`] — [`ApiError`] `{code, message, details?}` with a closed [`Code`].

pub mod bindings;
pub mod charts;
pub mod compare;
pub mod error;
pub mod eval;
pub mod experiments;
pub mod export;
pub mod history;
pub mod meta;
pub mod models;
pub mod opened;
pub mod prompts;
pub mod providers;
mod recovery;
pub mod runs;
mod text;
pub mod workbench;

pub use error::{ApiError, Code, Result};
