//! Runs and compares: the Run and Compare screens' work, streamed over a channel.

use kerf_api::{compare, runs};

use super::*;

pub(super) async fn run_start<R: Runtime>(
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

pub(super) async fn run_cancel<R: Runtime>(cx: Cx<'_, R>, id: String) -> Result<()> {
    cancel_work(&cx.state.running, id);
    Ok(())
}

pub(super) async fn compare_start<R: Runtime>(
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

pub(super) async fn compare_resume<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    experiment: i64,
    confirmed: bool,
    on_progress: Channel<CompareProgress>,
) -> Result<Comparison> {
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    tracing::info!(%id, experiment, "compare resume");
    blocking(move || {
        let report = compare::resume_in_window(&wb, experiment, confirmed, &token, &mut |p| {
            let _ = on_progress.send(p);
        })?;
        Ok(Comparison::from(&report))
    })
    .await
}

pub(super) async fn compare_sides<R: Runtime>(cx: Cx<'_, R>, a: i64, b: i64) -> Result<SideBySide> {
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

pub(super) async fn compare_example<R: Runtime>(cx: Cx<'_, R>) -> Result<Option<CompareExample>> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        Ok(compare::sides::example(&wb, &CancelToken::new())?
            .as_ref()
            .map(CompareExample::from))
    })
    .await
}

pub(super) async fn start_at_compare<R: Runtime>(cx: Cx<'_, R>) -> Result<bool> {
    Ok(cx.state.start_at_compare)
}

/// A local model named by path must be one the user may read (the models folder, or a GGUF
/// picked in a dialog): llama.cpp would otherwise read any file the page names.
pub(super) fn check_model(state: &AppState, options: &RunOptions) -> Result<()> {
    match &options.model {
        Some(model) if options.provider == "local" => {
            state.access.check(model, Use::Read).map(drop)
        }
        _ => Ok(()),
    }
}
