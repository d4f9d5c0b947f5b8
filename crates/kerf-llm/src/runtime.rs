//! The one async runtime of a Kerf process. The CLI drives runs on it with [`block_on`]; the
//! desktop hands its handle to Tauri (`tauri::async_runtime::set`) before the app starts, so the
//! window's commands, the cloud transport and the local engine's blocking threads all live on
//! the same tokio runtime, and the pooled HTTP client's connections are shared by everything.
//!
//! Run futures are not `Send` (they call back into the caller's `on_event` closure), so many
//! runs in flight are polled together on one task (`futures_util::stream::FuturesUnordered`),
//! while the runtime's workers drive the sockets and timers underneath.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The process's runtime, started on first use.
#[allow(clippy::expect_used)] // no runtime means no network and no engine: nothing can run
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        // Workers drive I/O and timers only; parsing and callbacks run on the caller's thread
        // and the engine on blocking threads, so a couple of workers are plenty.
        let workers = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 4);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("kerf-io")
            .enable_all()
            .build()
            .expect("the tokio runtime starts (threads, timers, the I/O driver)")
    })
}

/// Run `f` to completion on the calling thread, with the runtime's I/O and timers underneath.
/// For synchronous callers: the CLI, tests, and the desktop's blocking command threads. Calling
/// it from inside an async task panics (tokio forbids blocking a worker).
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Wait `d`, or less if `cancel` fires first: whether the whole wait ran.
pub async fn pause(d: std::time::Duration, cancel: &kerf_core::cancel::CancelToken) -> bool {
    tokio::select! {
        biased;
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}
