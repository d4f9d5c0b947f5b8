//! Prompts, models, charts and input files: the Prompts screen and the run panel's lists.

use kerf_api::{models, prompts};

use super::*;

pub(super) async fn prompts_list<R: Runtime>(cx: Cx<'_, R>) -> Result<Vec<PromptEntry>> {
    let dirs = cx.state.workbench.prompt_dirs.clone();
    blocking(move || Ok(prompts::list(&dirs))).await
}

pub(super) async fn prompt_open<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<PromptDoc> {
    cx.state.access.check(&path, Use::Read)?;
    blocking(move || prompts::open(Path::new(&path))).await
}

pub(super) async fn prompt_inspect<R: Runtime>(
    _: Cx<'_, R>,
    draft: PromptDraft,
    path: Option<String>,
    input: String,
    vars: std::collections::HashMap<String, String>,
) -> Result<Inspection> {
    let vars: Map<String, serde_json::Value> = vars
        .into_iter()
        .map(|(k, v)| {
            let value = kerf_core::template::var_value(&v);
            (k, value)
        })
        .collect();
    blocking(move || {
        Ok(prompts::inspect(
            &draft,
            path.as_deref().map(Path::new),
            &input,
            &vars,
        ))
    })
    .await
}

pub(super) async fn prompt_save<R: Runtime>(
    cx: Cx<'_, R>,
    draft: PromptDraft,
    path: String,
    opened: Option<String>,
) -> Result<String> {
    cx.state.access.check(&path, Use::Write)?;
    refuse_shipped(cx.state, &path, "saved over")?;
    tracing::info!(%path, "saving prompt");
    blocking(move || prompts::save(&draft, Path::new(&path), opened.as_deref())).await
}

/// Whether `path` is one of Kerf's shipped prompts (read-only in the window).
fn is_shipped(state: &AppState, path: &Path) -> bool {
    state
        .workbench
        .prompt_dirs
        .iter()
        .filter(|d| d.label == "shipped")
        .any(|d| {
            let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            canon(path).starts_with(canon(&d.path))
        })
}

pub(super) async fn prompt_save_as<R: Runtime>(
    cx: Cx<'_, R>,
    draft: PromptDraft,
    from: Option<String>,
    id: String,
) -> Result<String> {
    if let Some(f) = &from {
        cx.state.access.check(f, Use::Read)?;
    }
    let dir = cx.state.workbench.user_prompts()?.to_path_buf();
    tracing::info!(%id, dir = %dir.display(), "saving prompt as");
    blocking(move || {
        let path =
            prompts::author::save_as(&draft, from.as_deref().map(Path::new), &dir, &id, false)?;
        Ok(path.display().to_string())
    })
    .await
}

pub(super) async fn prompt_new<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    format: ResponseType,
    twin: bool,
) -> Result<Vec<Written>> {
    let dir = cx.state.workbench.user_prompts()?.to_path_buf();
    tracing::info!(%id, dir = %dir.display(), "new prompt");
    blocking(move || {
        prompts::author::write_new(
            &prompts::author::file_for(&dir, &id)?,
            format,
            None,
            twin,
            false,
        )
    })
    .await
}

pub(super) async fn prompt_twin<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<Written> {
    cx.state.access.check(&path, Use::Read)?;
    let source = Path::new(&path).to_path_buf();
    // A shipped prompt's twin goes to the user's folder (the shipped folder is read-only).
    let out = if is_shipped(cx.state, &source) {
        let file = prompts::author::twin_file_name(&source)?;
        Some(cx.state.workbench.user_prompts()?.join(file))
    } else {
        None
    };
    tracing::info!(%path, "making twin");
    blocking(move || prompts::author::write_twin(&source, out.as_deref(), false, true)).await
}

/// A shipped prompt refused for `what` (they are read-only).
fn refuse_shipped(state: &AppState, path: &str, what: &str) -> Result<()> {
    if is_shipped(state, Path::new(path)) {
        return Err(ApiError::new(
            Code::Forbidden,
            format!(
                "{path} is one of Kerf's shipped prompts, which are read-only: it cannot be {what} (Save as… makes a copy of your own)"
            ),
        ));
    }
    Ok(())
}

pub(super) async fn prompt_rename<R: Runtime>(
    cx: Cx<'_, R>,
    path: String,
    id: String,
) -> Result<String> {
    cx.state.access.check(&path, Use::Write)?;
    refuse_shipped(cx.state, &path, "renamed")?;
    tracing::info!(%path, %id, "renaming prompt");
    blocking(move || {
        let (to, _) = prompts::author::rename(Path::new(&path), &id)?;
        Ok(to.display().to_string())
    })
    .await
}

pub(super) async fn prompt_delete<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<String> {
    cx.state.access.check(&path, Use::Write)?;
    refuse_shipped(cx.state, &path, "deleted")?;
    tracing::info!(%path, "deleting prompt");
    blocking(move || {
        Ok(prompts::author::delete(Path::new(&path))?
            .display()
            .to_string())
    })
    .await
}

pub(super) async fn prompt_rename_schema_key<R: Runtime>(
    _: Cx<'_, R>,
    draft: PromptDraft,
) -> Result<PromptDraft> {
    blocking(move || prompts::rename_schema_key(&draft)).await
}

pub(super) async fn prompts_import<R: Runtime>(
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

pub(super) async fn chart_svg<R: Runtime>(_cx: Cx<'_, R>, chart: Chart) -> Result<String> {
    blocking(move || kerf_api::charts::svg(&chart, 900, 520)).await
}

pub(super) async fn meta<R: Runtime>(_cx: Cx<'_, R>) -> Result<Meta> {
    Ok(kerf_api::meta::meta())
}

pub(super) async fn models_list<R: Runtime>(cx: Cx<'_, R>) -> Result<Models> {
    let wb = cx.state.workbench.clone();
    blocking(move || Ok(models::models(&wb))).await
}

pub(super) async fn models_fetch<R: Runtime>(cx: Cx<'_, R>) -> Result<String> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let path = models::fetch(&wb, &mut |line| tracing::info!("{line}"))?;
        Ok(path.display().to_string())
    })
    .await
}

pub(super) async fn models_available<R: Runtime>(_cx: Cx<'_, R>) -> Result<Vec<Available>> {
    Ok(models::pull::available())
}

pub(super) async fn models_pull<R: Runtime>(
    cx: Cx<'_, R>,
    name: String,
    on_event: Channel<PullEvent>,
) -> Result<Pulled> {
    let spec: models::pull::PullSpec = name.parse()?;
    let dir = cx.state.workbench.models.clone();
    tracing::info!(%name, "models pull");
    blocking(move || {
        // hf-hub reports every chunk it writes: the page hears of each half per cent.
        let mut shown = 0u64;
        models::pull::pull(&dir, &models::pull::Hub::from_env(), &spec, &mut |event| {
            if let PullEvent::Progress {
                done_bytes,
                total_bytes,
            } = event
            {
                if done_bytes < total_bytes && done_bytes.saturating_sub(shown) < total_bytes / 200
                {
                    return;
                }
                shown = done_bytes;
            }
            let _ = on_event.send(event);
        })
    })
    .await
}

pub(super) async fn input_read<R: Runtime>(cx: Cx<'_, R>, path: String) -> Result<String> {
    cx.state.access.check(&path, Use::Read)?;
    blocking(move || {
        std::fs::read_to_string(&path).map_err(|e| ApiError::new(Code::Io, format!("{path}: {e}")))
    })
    .await
}
