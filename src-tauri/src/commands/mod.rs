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
use kerf_api::compare::wire::{CompareInput, CompareProgress, Comparison, SideBySide};
use kerf_api::eval::tests::{TestReport, TestResult, TestsInput};
use kerf_api::eval::wire::{
    CellKey, CellView, Comparison as EvalComparison, DatasetPreview, EvalInput, EvalPlan,
    EvalShown, Progress as EvalProgress, Report as EvalReport,
};
use kerf_api::export::{ExportTarget, wire::ExportView};
use kerf_api::history::wire::{ExperimentRow, HistoryFilter, RunDetail, RunDiffView, RunRow};
use kerf_api::meta::Meta;
use kerf_api::models::wire::Models;
use kerf_api::opened::{self, OpenedExperiment};
use kerf_api::prompts::wire::{Inspection, PromptDoc, PromptDraft, PromptEntry};
use kerf_api::providers::wire::{ProviderInfo, ProviderSpec, ProvidersView};
use kerf_api::runs::wire::{RunDone, RunInput, RunMessage, RunOptions};
use kerf_api::{ApiError, Code, compare, eval, export, history, models, prompts, providers, runs};
use kerf_llm::CancelToken;
use serde_json::Map;
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime};

use crate::AppState;
use crate::access::Use;
use crate::dialogs::Question;

type Result<T> = std::result::Result<T, ApiError>;

mod client;

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

async fn prompts_list<R: Runtime>(cx: Cx<'_, R>) -> Result<Vec<PromptEntry>> {
    let dirs = cx.state.workbench.prompt_dirs.clone();
    blocking(move || Ok(prompts::list(&dirs))).await
}

async fn prompt_open<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<PromptDoc> {
    cx.state.access.check(&path, Use::Read)?;
    blocking(move || prompts::open(Path::new(&path))).await
}

async fn prompt_inspect<R: Runtime>(
    _: Cx<'_, R>,
    draft: PromptDraft,
    path: Option<String>,
    input: String,
) -> Result<Inspection> {
    blocking(move || {
        Ok(prompts::inspect(
            &draft,
            path.as_deref().map(Path::new),
            &input,
            &Map::new(),
        ))
    })
    .await
}

async fn prompt_save<R: Runtime>(
    cx: Cx<'_, R>,
    draft: PromptDraft,
    path: String,
    opened: Option<String>,
) -> Result<String> {
    cx.state.access.check(&path, Use::Write)?;
    tracing::info!(%path, "saving prompt");
    blocking(move || prompts::save(&draft, Path::new(&path), opened.as_deref())).await
}

async fn prompt_rename_schema_key<R: Runtime>(
    _: Cx<'_, R>,
    draft: PromptDraft,
) -> Result<PromptDraft> {
    blocking(move || prompts::rename_schema_key(&draft)).await
}

async fn prompts_import<R: Runtime>(
    cx: Cx<'_, R>,
    file: String,
    overwrite: bool,
) -> Result<Vec<String>> {
    cx.state.access.check(&file, Use::Read)?;
    let dir = cx.state.workbench.user_prompts()?.to_path_buf();
    tracing::info!(%file, dir = %dir.display(), "importing prompts");
    blocking(move || {
        let written = prompts::import(Path::new(&file), &dir, None, overwrite)?;
        Ok(written.iter().map(|p| p.display().to_string()).collect())
    })
    .await
}

async fn chart_svg<R: Runtime>(_cx: Cx<'_, R>, chart: Chart) -> Result<String> {
    blocking(move || kerf_api::charts::svg(&chart, 900, 520)).await
}

async fn meta<R: Runtime>(_cx: Cx<'_, R>) -> Result<Meta> {
    Ok(kerf_api::meta::meta())
}

async fn models_list<R: Runtime>(cx: Cx<'_, R>) -> Result<Models> {
    let wb = cx.state.workbench.clone();
    blocking(move || Ok(models::models(&wb))).await
}

async fn models_fetch<R: Runtime>(cx: Cx<'_, R>) -> Result<String> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let path = models::fetch(&wb, &mut |line| tracing::info!("{line}"))?;
        Ok(path.display().to_string())
    })
    .await
}

async fn providers_list<R: Runtime>(cx: Cx<'_, R>) -> Result<ProvidersView> {
    let path = cx.state.workbench.providers.clone();
    blocking(move || providers::list(&path)).await
}

/// Whether a spec sends a key somewhere new is `providers::key_consent`'s to say.
async fn provider_add<R: Runtime>(cx: Cx<'_, R>, spec: ProviderSpec) -> Result<ProviderInfo> {
    tracing::info!(name = %spec.name, kind = spec.kind.as_str(), "provider add");
    let path = cx.state.workbench.providers.clone();
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    blocking(move || {
        if let Some(message) = providers::key_consent(&spec)? {
            let q = Question {
                title: "Send a key to this provider?",
                message: &message,
                yes: "Add provider",
            };
            if !dialogs.ask(&app, &q)? {
                return Err(ApiError::new(
                    Code::Cancelled,
                    format!(
                        "{} was not added: you declined where it would send a key",
                        spec.name
                    ),
                ));
            }
        }
        providers::add(&path, &spec).map(|added| providers::info(&added.def))
    })
    .await
}

async fn provider_remove<R: Runtime>(cx: Cx<'_, R>, name: String) -> Result<bool> {
    tracing::info!(%name, "provider remove");
    let path = cx.state.workbench.providers.clone();
    blocking(move || providers::remove(&path, &name)).await
}

/// The key is never logged.
async fn provider_set_key<R: Runtime>(
    cx: Cx<'_, R>,
    name: String,
    key: String,
) -> Result<ProviderInfo> {
    tracing::info!(%name, "provider key set");
    let path = cx.state.workbench.providers.clone();
    blocking(move || {
        providers::set_key(&path, &name, &key)?;
        providers::one(&path, &name)
    })
    .await
}

async fn provider_delete_key<R: Runtime>(_: Cx<'_, R>, name: String) -> Result<bool> {
    blocking(move || providers::delete_key(&name)).await
}

async fn provider_probe<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    name: String,
    draft: Option<PromptDraft>,
) -> Result<ProviderInfo> {
    let running = Running::start(cx.state, &id);
    let (path, token) = (cx.state.workbench.providers.clone(), running.token.clone());
    blocking(move || {
        let prompt = draft
            .map(|d| prompts::compile_draft(&d, None))
            .transpose()?;
        providers::probe(&path, &name, prompt.as_ref(), &token)?;
        providers::one(&path, &name)
    })
    .await
}

async fn input_read<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<String> {
    cx.state.access.check(&path, Use::Read)?;
    blocking(move || {
        std::fs::read_to_string(&path).map_err(|e| ApiError::new(Code::Io, format!("{path}: {e}")))
    })
    .await
}

async fn run_start<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    input: RunInput,
    options: RunOptions,
    on_event: Channel<RunMessage>,
) -> Result<RunDone> {
    check_model(cx.state, &options)?;
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    tracing::info!(%id, provider = %options.provider, max_tokens = options.max_tokens, "run");
    blocking(move || {
        runs::run_draft(&wb, &input, &options, &token, &mut |m| {
            let _ = on_event.send(m);
        })
    })
    .await
}

async fn run_cancel<R: Runtime>(cx: Cx<'_, R>, id: String) -> Result<()> {
    cancel_work(&cx.state.running, id);
    Ok(())
}

async fn compare_start<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    input: CompareInput,
    on_progress: Channel<CompareProgress>,
) -> Result<Comparison> {
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    check_model(cx.state, &input.options)?;
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        let report = compare::compare_files(&wb, &input, &token, &mut |p| {
            let _ = on_progress.send(p);
        })?;
        Ok(Comparison::from(&report))
    })
    .await
}

async fn compare_sides<R: Runtime>(cx: Cx<'_, R>, a: i64, b: i64) -> Result<SideBySide> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        Ok(SideBySide::from(&compare::sides::sides(
            &wb,
            a,
            b,
            &CancelToken::new(),
        )?))
    })
    .await
}

async fn eval_start<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    input: EvalInput,
    on_progress: Channel<EvalProgress>,
) -> Result<EvalReport> {
    cx.state.access.check(&input.dataset, Use::Read)?;
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    check_model(cx.state, &input.options)?;
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        let store = wb.store_required()?;
        let finished = eval::flow::run(
            &wb,
            &store,
            &kerf_api::eval::StartInput::of(&input)?,
            &token,
            eval::Options::default(),
            &mut |_| {},
            &mut |p| {
                let _ = on_progress.send(p.clone());
            },
        )?;
        stopped_or_report(finished)
    })
    .await
}

async fn start_dataset<R: Runtime>(cx: Cx<'_, R>) -> Result<Option<String>> {
    Ok(cx.state.start_dataset.clone())
}

async fn dataset_preview<R: Runtime>(
    cx: Cx<'_, R>,
    path: String,
    prompts: Vec<String>,
) -> Result<DatasetPreview> {
    cx.state.access.check(&path, Use::Read)?;
    cx.state.access.check_all(&prompts, Use::Read)?;
    blocking(move || {
        let prompts: Vec<std::path::PathBuf> = prompts.iter().map(Into::into).collect();
        eval::view::preview(Path::new(&path), &prompts)
    })
    .await
}

async fn eval_plan<R: Runtime>(cx: Cx<'_, R>, input: EvalInput) -> Result<EvalPlan> {
    cx.state.access.check(&input.dataset, Use::Read)?;
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    let wb = cx.state.workbench.clone();
    blocking(move || kerf_api::eval::flow::plan(&wb, &input)).await
}

/// An eval pass's end for the window: its report, or the error a stopped eval ends with (which
/// names how to finish it).
fn stopped_or_report(finished: eval::Finished) -> Result<EvalReport> {
    match finished.stopped() {
        Some(e) => Err(e),
        None => Ok(finished.report),
    }
}

async fn eval_resume<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    experiment: i64,
    confirmed: bool,
    on_progress: Channel<EvalProgress>,
) -> Result<EvalReport> {
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        let store = wb.store_required()?;
        let finished = eval::flow::resume_run(
            &wb,
            &store,
            experiment,
            confirmed,
            &token,
            &mut |_| {},
            &mut |p| {
                let _ = on_progress.send(p.clone());
            },
        )?;
        stopped_or_report(finished)
    })
    .await
}

async fn eval_show<R: Runtime>(cx: Cx<'_, R>, experiment: i64) -> Result<EvalShown> {
    let wb = cx.state.workbench.clone();
    blocking(move || eval::flow::show(&wb.store_required()?, experiment, eval::Options::default()))
        .await
}

async fn eval_cell<R: Runtime>(cx: Cx<'_, R>, experiment: i64, cell: CellKey) -> Result<CellView> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let store = wb.store_required()?;
        eval::view::cell(&store, &eval::stored(&store, experiment)?, &cell)
    })
    .await
}

async fn eval_report_html<R: Runtime>(cx: Cx<'_, R>, experiment: i64, path: String) -> Result<()> {
    cx.state.access.check(&path, Use::Write)?;
    let wb = cx.state.workbench.clone();
    blocking(move || {
        eval::flow::write_html(
            &wb.store_required()?,
            experiment,
            Path::new(&path),
            eval::Options::default(),
        )
    })
    .await
}

async fn eval_compare<R: Runtime>(cx: Cx<'_, R>, a: i64, b: i64) -> Result<Vec<EvalComparison>> {
    let wb = cx.state.workbench.clone();
    blocking(move || eval::flow::compare(&wb.store_required()?, a, b)).await
}

async fn tests_start<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    input: TestsInput,
    on_result: Channel<TestResult>,
) -> Result<TestReport> {
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    check_model(cx.state, &input.options)?;
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        let store = wb.store()?;
        eval::tests::run_input(&wb, store.as_ref(), &input, &token, &mut |r| {
            let _ = on_result.send(r.clone());
        })
    })
    .await
}

async fn history_list<R: Runtime>(cx: Cx<'_, R>, filter: HistoryFilter) -> Result<Vec<RunRow>> {
    let wb = cx.state.workbench.clone();
    blocking(move || filter.rows(&wb.store_required()?)).await
}

async fn history_experiments<R: Runtime>(cx: Cx<'_, R>) -> Result<Vec<ExperimentRow>> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let store = wb.store_required()?;
        Ok(history::experiments(&store, Some(50))?
            .into_iter()
            .map(ExperimentRow::from)
            .collect())
    })
    .await
}

async fn experiment_open<R: Runtime>(cx: Cx<'_, R>, id: i64) -> Result<OpenedExperiment> {
    let wb = cx.state.workbench.clone();
    blocking(move || opened::open(&wb.store_required()?, id)).await
}

async fn history_detail<R: Runtime>(cx: Cx<'_, R>, id: i64) -> Result<RunDetail> {
    let wb = cx.state.workbench.clone();
    blocking(move || Ok(history::detail(&wb.store_required()?, id)?.into())).await
}

async fn history_diff<R: Runtime>(cx: Cx<'_, R>, a: i64, b: i64) -> Result<RunDiffView> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        Ok(RunDiffView::from(&history::diff(
            &wb.store_required()?,
            a,
            b,
        )?))
    })
    .await
}

async fn history_rerun<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    run: i64,
    on_event: Channel<RunMessage>,
) -> Result<RunDone> {
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        history::rerun(&wb, run, &token, &mut |m| {
            let _ = on_event.send(m);
        })
    })
    .await
}

async fn history_tag<R: Runtime>(cx: Cx<'_, R>, run: i64, tag: String, remove: bool) -> Result<()> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        history::tag(&wb.store_required()?, run, &[tag], remove)?;
        Ok(())
    })
    .await
}

async fn history_note<R: Runtime>(cx: Cx<'_, R>, run: i64, note: Option<String>) -> Result<()> {
    let wb = cx.state.workbench.clone();
    blocking(move || history::note(&wb.store_required()?, run, note.as_deref())).await
}

async fn export_preview<R: Runtime>(
    cx: Cx<'_, R>,
    paths: Vec<String>,
    target: ExportTarget,
) -> Result<ExportView> {
    cx.state.access.check_all(&paths, Use::Read)?;
    blocking(move || export::export(&paths, target, None)).await
}

async fn file_save<R: Runtime>(
    cx: Cx<'_, R>,
    path: String,
    text: Option<String>,
    base64: Option<String>,
) -> Result<()> {
    cx.state.access.check(&path, Use::Write)?;
    let bytes = match (text, base64) {
        (Some(t), None) => t.into_bytes(),
        (None, Some(b)) => decode_base64(&b)
            .ok_or_else(|| ApiError::new(Code::Usage, "file_save: the data is not base64"))?,
        _ => {
            return Err(ApiError::new(
                Code::Usage,
                "file_save takes text or base64, one of them",
            ));
        }
    };
    tracing::info!(%path, bytes = bytes.len(), "saving file");
    blocking(move || kerf_api::prompts::write_atomically_bytes(Path::new(&path), &bytes)).await
}

/// A local model named by path must be one the user may read (the models folder, or a GGUF
/// picked in a dialog): llama.cpp would otherwise read any file the page names.
fn check_model(state: &AppState, options: &RunOptions) -> Result<()> {
    match &options.model {
        Some(model) if options.provider == "local" => {
            state.access.check(model, Use::Read).map(drop)
        }
        _ => Ok(()),
    }
}

/// What the user picks becomes readable by the other commands (`FileAccess::choose`).
async fn dialog_open<R: Runtime>(cx: Cx<'_, R>, title: String) -> Result<Option<String>> {
    picked_to_read(cx, title, false).await
}

async fn dialog_open_folder<R: Runtime>(cx: Cx<'_, R>, title: String) -> Result<Option<String>> {
    picked_to_read(cx, title, true).await
}

/// The open dialog for a file (or a `folder`): what the user picked becomes readable by the
/// other commands (`FileAccess::choose`).
async fn picked_to_read<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
    folder: bool,
) -> Result<Option<String>> {
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    let picked = blocking(move || dialogs.pick_open(&app, &title, folder)).await?;
    picked
        .map(|p| Ok(cx.state.access.choose(&p, Use::Read)?.display().to_string()))
        .transpose()
}

/// Where the user chose becomes writable by `file_save` (`FileAccess::choose`).
async fn dialog_save<R: Runtime>(
    cx: Cx<'_, R>,
    title: String,
    suggested: String,
) -> Result<Option<String>> {
    let (app, dialogs) = (cx.app, cx.state.dialogs.clone());
    let picked = blocking(move || dialogs.pick_save(&app, &title, Path::new(&suggested))).await?;
    picked
        .map(|p| {
            Ok(cx
                .state
                .access
                .choose(&p, Use::Write)?
                .display()
                .to_string())
        })
        .transpose()
}

/// Standard base64 (what `canvas.toDataURL` produces after its comma).
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

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
