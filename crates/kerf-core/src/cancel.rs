//! Stopping long work from another thread or task: a run between tokens, a sweep between the
//! prefixes it evaluates, a request mid-stream. One token type for every layer, so the window's
//! Stop button reaches all of it.
//!
//! It is tokio-util's `CancellationToken`: cheap to clone and share, checked synchronously
//! (`is_cancelled`, between tokens of the local engine) or awaited (`cancelled()`, raced against
//! a network read), with child tokens that stop with their parent (a run's token under an
//! evaluation's).

pub use tokio_util::sync::CancellationToken as CancelToken;
