//! The history: runs, experiments, diffs, reruns, tags, notes and exports.

use kerf_api::{export, history, opened};

use super::*;

pub(super) async fn history_list<R: Runtime>(
    cx: Cx<'_, R>,
    filter: HistoryFilter,
) -> Result<Vec<RunRow>> {
    let wb = cx.state.workbench.clone();
    blocking(move || filter.rows(&wb.store_required()?)).await
}

pub(super) async fn history_experiments<R: Runtime>(cx: Cx<'_, R>) -> Result<Vec<ExperimentRow>> {
    let wb = cx.state.workbench.clone();
    blocking(move || history::experiment_rows(&wb.store_required()?, Some(50))).await
}

pub(super) async fn experiment_open<R: Runtime>(
    cx: Cx<'_, R>,
    id: i64,
) -> Result<OpenedExperiment> {
    let wb = cx.state.workbench.clone();
    blocking(move || opened::open(&wb.store_required()?, id)).await
}

pub(super) async fn history_detail<R: Runtime>(cx: Cx<'_, R>, id: i64) -> Result<RunDetail> {
    let wb = cx.state.workbench.clone();
    blocking(move || Ok(history::detail(&wb.store_required()?, id)?.into())).await
}

pub(super) async fn history_diff<R: Runtime>(cx: Cx<'_, R>, a: i64, b: i64) -> Result<RunDiffView> {
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

pub(super) async fn history_rerun<R: Runtime>(
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

pub(super) async fn history_tag<R: Runtime>(
    cx: Cx<'_, R>,
    run: i64,
    tag: String,
    remove: bool,
) -> Result<()> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        history::tag(&wb.store_required()?, run, &[tag], remove)?;
        Ok(())
    })
    .await
}

pub(super) async fn history_note<R: Runtime>(
    cx: Cx<'_, R>,
    run: i64,
    note: Option<String>,
) -> Result<()> {
    let wb = cx.state.workbench.clone();
    blocking(move || history::note(&wb.store_required()?, run, note.as_deref())).await
}

pub(super) async fn export_chunking<R: Runtime>(
    _cx: Cx<'_, R>,
    settings: kerf_core::chunk::ChunkSettings,
) -> Result<ExportView> {
    blocking(move || export::chunking(&settings)).await
}

pub(super) async fn export_preview<R: Runtime>(
    cx: Cx<'_, R>,
    paths: Vec<String>,
    target: ExportTarget,
) -> Result<ExportView> {
    cx.state.access.check_all(&paths, Use::Read)?;
    blocking(move || export::export(&paths, target, None)).await
}
