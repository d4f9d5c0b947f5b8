//! Kerf's desktop shell: a Tauri 2 window over `kerf-api`. Each command unpacks its arguments,
//! calls one use case and returns its wire type (see `src/commands/`); streaming work reports
//! over a `tauri::ipc::Channel` and can be cancelled. Everything else — prompts, runs, the
//! history, exports — is kerf-api's, shared with the `kerf` CLI.

pub mod access;
mod commands;
pub mod dialogs;
mod logs;
mod webview;

use std::collections::HashMap;
use std::sync::Mutex;

use kerf_api::workbench::Workbench;
use kerf_llm::CancelToken;

use crate::access::FileAccess;
use crate::dialogs::Dialogs;

/// What every command shares: the workbench (folders, history path) and the cancel tokens of
/// the work in progress, by the id the window gave it.
pub struct AppState {
    pub workbench: Workbench,
    pub running: Mutex<HashMap<String, CancelToken>>,
    /// Which files the webview may name: Kerf's folders and what the user picked.
    pub access: FileAccess,
    pub dialogs: Dialogs,
    /// A dataset named on the command line (`kerf-desktop --evaluate DATASET`): the window opens
    /// at the Evaluate screen with it loaded (readable, as a file picked in the dialog is).
    pub start_dataset: Option<String>,
    /// The window opens at Compare, on Kerf's example pair: its first launch (no history yet)
    /// or `kerf-desktop --compare` (what `npm start` opens).
    pub start_at_compare: bool,
}

impl AppState {
    /// The workbench's prompt folders and the models folder open to the webview; native
    /// dialogs.
    pub fn new(workbench: Workbench) -> Self {
        let access = FileAccess::new(
            workbench.prompt_dirs.iter().map(|d| d.path.clone()),
            workbench.models.clone(),
        );
        AppState {
            workbench,
            running: Mutex::new(HashMap::new()),
            access,
            dialogs: Dialogs::Native,
            start_dataset: None,
            start_at_compare: false,
        }
    }

    /// Open the window at the Evaluate screen with `dataset` loaded; a path that cannot be
    /// resolved is reported and the window opens as usual.
    pub fn evaluating(mut self, dataset: Option<&std::path::Path>) -> Self {
        if let Some(path) = dataset {
            match self.access.choose(path, access::Use::Read) {
                Ok(p) => self.start_dataset = Some(p.display().to_string()),
                Err(e) => eprintln!("kerf-desktop: --evaluate {}: {}", path.display(), e.message),
            }
        }
        self
    }

    /// Dialogs answered by someone else (the tests).
    pub fn with_dialogs(self, dialogs: Dialogs) -> Self {
        AppState { dialogs, ..self }
    }
}

/// `builder` with Kerf's state and commands, on any runtime (the mock runtime in tests).
pub fn with_kerf<R: tauri::Runtime>(
    builder: tauri::Builder<R>,
    state: AppState,
) -> tauri::Builder<R> {
    builder.manage(state).invoke_handler(commands::handler())
}

/// The generated context: config, embedded frontend, capabilities (the tests use the real one,
/// so the ACL they exercise is the app's).
pub fn context<R: tauri::Runtime>() -> tauri::Context<R> {
    tauri::generate_context!()
}

/// Every command the handler serves, from their one declaration (`src/commands/surface.in`).
pub use commands::{COMMANDS, typescript_client};

/// `--evaluate DATASET` on the command line (what `npm start` opens the window with).
fn evaluate_arg() -> Option<std::path::PathBuf> {
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--evaluate" {
            return args.next().map(Into::into);
        }
    }
    None
}

/// `--compare` on the command line, or a first launch (no history file yet).
fn compare_at_start(workbench: &Workbench) -> bool {
    std::env::args_os().skip(1).any(|a| a == "--compare")
        || workbench.history.as_ref().is_some_and(|h| !h.exists())
}

/// Open the window.
pub fn run() {
    // One runtime per process: Tauri's commands, the cloud transport's pooled connections and
    // the local engine's blocking threads all run on Kerf's (see `kerf_llm::runtime`).
    tauri::async_runtime::set(kerf_llm::runtime::runtime().handle().clone());
    let workbench = Workbench::of_this_machine(None, kerf_api::workbench::shipped_prompts());
    let start_at_compare = compare_at_start(&workbench);
    with_kerf(
        tauri::Builder::default(),
        AppState {
            start_at_compare,
            ..AppState::new(workbench)
                .with_dialogs(Dialogs::from_env())
                .evaluating(evaluate_arg().as_deref())
        },
    )
    .plugin(tauri_plugin_dialog::init())
    .plugin(tauri_plugin_window_state::Builder::default().build())
    .setup(|app| {
        use tauri::Manager;
        let dir = app.path().app_log_dir()?;
        logs::init(&dir);
        tracing::info!(version = env!("CARGO_PKG_VERSION"), logs = %dir.display(), "Kerf started");
        webview::tune(app);
        Ok(())
    })
    .run(context())
    .unwrap_or_else(|e| {
        eprintln!("kerf-desktop: the window could not start: {e}");
        std::process::exit(2);
    });
}
