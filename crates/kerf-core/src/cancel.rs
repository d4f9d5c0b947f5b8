//! Stopping long work from another thread: a run between tokens, a sweep between the prefixes
//! it evaluates. One token type for every layer, so the window's Stop button reaches all of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Asks work in progress to stop at its next check; cheap to clone and share with another thread.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
