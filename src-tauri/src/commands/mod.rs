//! Kerf's commands: each unpacks its arguments, calls one kerf-api use case, and returns its wire
//! type or an `ApiError {code, message, details?}`. Work that streams (runs, compares) runs off
//! the main thread, reports over a `Channel`, and stops when `run_cancel` names its id.
//!
//! The surface is declared once, in `surface.in`: the `commands!` macro below turns it into
//! Tauri's handler (a `#[tauri::command]` per declaration, calling the function of the same name
//! here with the declared arguments), the list of names build.rs makes permissions from, and the
//! page's TypeScript client.

use std::path::Path;

use kerf_api::charts::Chart;
use kerf_api::compare::wire::{
    CompareExample, CompareInput, CompareProgress, Comparison, SideBySide,
};
use kerf_api::eval::suites::{TestReport, TestResult, TestsInput};
use kerf_api::eval::wire::{
    CellKey, CellView, Comparison as EvalComparison, DatasetPreview, EvalCollected, EvalInput,
    EvalPlan, EvalShown, EvalSubmitted, Progress as EvalProgress, Report as EvalReport,
};
use kerf_api::export::{ExportTarget, wire::ExportView};
use kerf_api::history::Batch;
use kerf_api::history::wire::{ExperimentRow, HistoryFilter, RunDetail, RunDiffView, RunRow};
use kerf_api::meta::Meta;
use kerf_api::models::pull::{Available, PullEvent, Pulled};
use kerf_api::models::wire::Models;
use kerf_api::opened::OpenedExperiment;
use kerf_api::prompts::author::Written;
use kerf_api::prompts::wire::{Inspection, PromptDoc, PromptDraft, PromptEntry};
use kerf_api::providers::wire::{ProviderInfo, ProviderSpec, ProvidersView};
use kerf_api::runs::CancelToken;
use kerf_api::runs::wire::{RunDone, RunInput, RunMessage, RunOptions};
use kerf_api::{ApiError, Code};
use kerf_core::ResponseType;
use kerf_core::chunk::ChunkSettings;
use serde_json::Map;
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime};

use crate::AppState;
use crate::access::Use;
use crate::dialogs::Question;

type Result<T> = std::result::Result<T, ApiError>;

mod client;
mod evals;
mod files;
mod history;
mod prompts;
mod providers;
mod runs;

// Each command's function, by area (the handlers below call them by name).
use evals::*;
use files::*;
use history::*;
use prompts::*;
use providers::*;
use runs::*;

/// What every command is given besides its declared arguments: the app (for native dialogs)
/// and the app's state.
struct Cx<'a, R: Runtime> {
    app: AppHandle<R>,
    state: &'a AppState,
}

/// The declaration's form: doc lines, `name(arg: Type, …; channel name: Message) -> Answer;`.
macro_rules! commands {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident ( $($arg:ident : $ty:ty),* $(; channel $chan:ident : $msg:ty)? ) -> $ret:ty;
    )*) => {
        /// Every command's name, as the page calls it.
        pub const COMMANDS: &[&str] = &[$(stringify!($name)),*];

        /// Tauri's side of each command: the app and its state injected, the declared arguments
        /// read from the page's call, all passed to the function of the same name.
        mod handlers {
            use super::*;
            $(
                $(#[doc = $doc])*
                #[tauri::command]
                pub async fn $name<R: Runtime>(
                    app: AppHandle<R>,
                    state: tauri::State<'_, AppState>,
                    $($arg: $ty,)*
                    $($chan: Channel<$msg>,)?
                ) -> Result<$ret> {
                    super::$name(Cx { app, state: state.inner() }, $($arg,)* $($chan)?).await
                }
            )*
        }

        /// The handler the builder installs: every declared command, no others.
        pub fn handler<R: Runtime>() -> impl Fn(tauri::ipc::Invoke<R>) -> bool + Send + Sync + 'static {
            tauri::generate_handler![$(handlers::$name),*]
        }

        /// `ui/src/ipc/commands.ts`: the page's typed client for every declared command.
        pub fn typescript_client() -> String {
            let cfg = &ts_rs::Config::new().with_large_int("number");
            let mut client = client::Client::new(cfg);
            $(
                let args = vec![$(client.arg::<$ty>(stringify!($arg))),*];
                let channel = None $(.or(Some(client.arg::<$msg>(stringify!($chan)))))?;
                let answer = client.ty::<$ret>();
                client.command(stringify!($name), &[$($doc),*], args, channel, answer);
            )*
            client.finish()
        }
    };
}

include!("surface.in");

/// Blocking work (a model run, a compare, opening the history) off the main thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tauri::async_runtime::spawn_blocking(f).await.map_err(|e| {
        ApiError::new(
            Code::Internal,
            format!("the work stopped unexpectedly: {e}"),
        )
    })?
}

/// A cancel token registered under `id` for as long as the work runs.
struct Running<'a> {
    state: &'a AppState,
    id: String,
    token: CancelToken,
}

impl<'a> Running<'a> {
    fn start(state: &'a AppState, id: &str) -> Self {
        let token = register(&state.running, id);
        Running {
            state,
            id: id.to_string(),
            token,
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut map) = self.state.running.lock() {
            map.remove(&self.id);
        }
    }
}

type Tokens = std::sync::Mutex<std::collections::HashMap<String, CancelToken>>;

/// The token of work `id` starting now: a new one, or the cancelled one `cancel_work` left for
/// an id it was given before the work started (the page's Cancel can reach the backend first:
/// the work then starts cancelled).
fn register(running: &Tokens, id: &str) -> CancelToken {
    match running.lock() {
        Ok(mut map) => map.entry(id.to_string()).or_default().clone(),
        Err(_) => CancelToken::new(),
    }
}

/// Cancelled tokens kept for ids whose work has not started (or has ended) before some are
/// dropped: a cancel for work that never starts must not grow the map for ever.
const EARLY_CANCELS: usize = 64;

/// Stop work `id`, or remember that it is to stop if it has not started yet.
fn cancel_work(running: &Tokens, id: String) {
    let Ok(mut map) = running.lock() else {
        return;
    };
    if let Some(t) = map.get(&id) {
        tracing::info!(%id, "cancel");
        t.cancel();
    } else {
        // Not started yet (its start and this cancel raced to the backend): remembered, so the
        // work starts cancelled. Dropping cancelled entries loses nothing for work under way (it
        // holds its own token, already cancelled).
        tracing::info!(%id, "cancel before start");
        if map.len() >= EARLY_CANCELS {
            map.retain(|_, t| !t.is_cancelled());
        }
        let t = CancelToken::new();
        t.cancel();
        map.insert(id, t);
    }
}

// What each command does is documented once, in surface.in (and from there in the page's
// client); the comments here are about how.
//
// Every command that reads files or renders templates is async and runs on a blocking thread:
// a synchronous command runs on the window's main thread, where an untrusted prompt (a template
// that loops for long, a huge file) would freeze the window.

#[cfg(test)]
mod tests {
    #[test]
    fn a_cancel_that_reaches_the_backend_before_the_start_stops_the_work() {
        let running = super::Tokens::default();
        super::cancel_work(&running, "early".into());
        assert!(super::register(&running, "early").is_cancelled());
        let other = super::register(&running, "other");
        assert!(!other.is_cancelled());
        // Work under way stops where it is.
        let live = super::register(&running, "live");
        super::cancel_work(&running, "live".into());
        assert!(live.is_cancelled());
        // Cancels for work that never starts do not pile up; work under way keeps its entry.
        for i in 0..1000 {
            super::cancel_work(&running, format!("never-{i}"));
        }
        let map = running.lock().expect("the map is not poisoned");
        assert!(map.len() <= super::EARLY_CANCELS, "{} entries", map.len());
        assert!(map.contains_key("other"));
        drop(map);
        assert!(!other.is_cancelled());
    }

    #[test]
    fn base64_decodes_as_the_standard_says() {
        assert_eq!(
            super::decode_base64("aGVsbG8=").as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(super::decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(super::decode_base64("!!"), None);
    }
}
