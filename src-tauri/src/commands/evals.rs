//! Evals and prompt files' tests: the Evaluate screen's plans, runs, resumes and reports.

use kerf_api::eval;

use super::*;

pub(super) async fn eval_start<R: Runtime>(
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
                let _ = on_progress.send(for_window(p));
            },
        )?;
        stopped_or_report(finished)
    })
    .await
}

pub(super) async fn start_dataset<R: Runtime>(cx: Cx<'_, R>) -> Result<Option<String>> {
    Ok(cx.state.start_dataset.clone())
}

pub(super) async fn dataset_preview<R: Runtime>(
    cx: Cx<'_, R>,
    path: String,
    prompts: Vec<String>,
    set: Vec<Vec<String>>,
) -> Result<DatasetPreview> {
    cx.state.access.check(&path, Use::Read)?;
    cx.state.access.check_all(&prompts, Use::Read)?;
    blocking(move || {
        let prompts: Vec<std::path::PathBuf> = prompts.iter().map(Into::into).collect();
        eval::view::preview(Path::new(&path), &prompts, &set)
    })
    .await
}

pub(super) async fn eval_plan<R: Runtime>(cx: Cx<'_, R>, input: EvalInput) -> Result<EvalPlan> {
    cx.state.access.check(&input.dataset, Use::Read)?;
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    let wb = cx.state.workbench.clone();
    blocking(move || kerf_api::eval::flow::plan(&wb, &input)).await
}

/// An eval pass's end for the window: its report, or the error a stopped eval ends with (which
/// names how to finish it).
pub(super) fn stopped_or_report(finished: eval::Finished) -> Result<EvalReport> {
    match finished.stopped() {
        Some(e) => Err(e),
        None => Ok(finished.report.for_window()),
    }
}

/// A progress report as the window gets it: its cell's line without its spans.
fn for_window(p: &EvalProgress) -> EvalProgress {
    let mut p = p.clone();
    p.cell = p.cell.map(eval::CellLine::for_window);
    p
}

pub(super) async fn eval_resume<R: Runtime>(
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
                let _ = on_progress.send(for_window(p));
            },
        )?;
        stopped_or_report(finished)
    })
    .await
}

pub(super) async fn eval_submit<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    input: EvalInput,
    on_progress: Channel<EvalProgress>,
) -> Result<EvalSubmitted> {
    cx.state.access.check(&input.dataset, Use::Read)?;
    cx.state.access.check_all(&input.prompts, Use::Read)?;
    if let Some(file) = &input.batch_file {
        cx.state.access.check(file, Use::Write)?;
    }
    check_model(cx.state, &input.options)?;
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        let store = wb.store_required()?;
        let ways = input.ways.clone().unwrap_or_default();
        let sent = eval::batched::submit(
            &wb,
            &store,
            &kerf_api::eval::StartInput::of(&input)?,
            eval::batched::Asked::ByName {
                ways: &ways,
                file: input.batch_file.as_deref().map(Path::new),
            },
            &token,
            &mut |_| {},
            &mut |p| {
                let _ = on_progress.send(for_window(p));
            },
        )?;
        let report = sent.online.map(stopped_or_report).transpose()?;
        Ok(EvalSubmitted {
            experiment: sent.experiment,
            batches: sent.batches,
            report,
        })
    })
    .await
}

pub(super) async fn eval_batches<R: Runtime>(cx: Cx<'_, R>, experiment: i64) -> Result<Vec<Batch>> {
    let wb = cx.state.workbench.clone();
    blocking(move || eval::batched::status(&wb, &wb.store_required()?, experiment)).await
}

pub(super) async fn eval_collect<R: Runtime>(
    cx: Cx<'_, R>,
    experiment: i64,
    results: Option<String>,
) -> Result<EvalCollected> {
    if let Some(file) = &results {
        cx.state.access.check(file, Use::Read)?;
    }
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let c = eval::batched::collect(
            &wb,
            &wb.store_required()?,
            experiment,
            None,
            results.as_deref().map(Path::new),
            eval::Options::default(),
            &mut |_| {},
        )?;
        Ok(c.wire())
    })
    .await
}

pub(super) async fn eval_resume_batch<R: Runtime>(
    cx: Cx<'_, R>,
    id: String,
    experiment: i64,
    batch_file: Option<String>,
    on_progress: Channel<EvalProgress>,
) -> Result<Vec<Batch>> {
    if let Some(file) = &batch_file {
        cx.state.access.check(file, Use::Write)?;
    }
    let running = Running::start(cx.state, &id);
    let (wb, token) = (cx.state.workbench.clone(), running.token.clone());
    blocking(move || {
        eval::batched::resume(
            &wb,
            &wb.store_required()?,
            experiment,
            batch_file.as_deref().map(Path::new),
            &token,
            &mut |_| {},
            &mut |p| {
                let _ = on_progress.send(for_window(p));
            },
        )
    })
    .await
}

pub(super) async fn eval_show<R: Runtime>(cx: Cx<'_, R>, experiment: i64) -> Result<EvalShown> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let mut shown =
            eval::flow::show(&wb.store_required()?, experiment, eval::Options::default())?;
        shown.report = shown.report.for_window();
        Ok(shown)
    })
    .await
}

pub(super) async fn eval_cell<R: Runtime>(
    cx: Cx<'_, R>,
    experiment: i64,
    cell: CellKey,
) -> Result<CellView> {
    let wb = cx.state.workbench.clone();
    blocking(move || {
        let store = wb.store_required()?;
        let mut view = eval::view::cell(&store, &eval::stored(&store, experiment)?, &cell)?;
        view.line = view.line.for_window();
        Ok(view)
    })
    .await
}

pub(super) async fn eval_report_html<R: Runtime>(
    cx: Cx<'_, R>,
    experiment: i64,
    path: String,
) -> Result<()> {
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

pub(super) async fn eval_compare<R: Runtime>(
    cx: Cx<'_, R>,
    a: i64,
    b: i64,
) -> Result<Vec<EvalComparison>> {
    let wb = cx.state.workbench.clone();
    blocking(move || eval::flow::compare(&wb.store_required()?, a, b)).await
}

pub(super) async fn tests_start<R: Runtime>(
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
        eval::suites::run_input(&wb, store.as_ref(), &input, &token, &mut |r| {
            let _ = on_result.send(r.clone());
        })
    })
    .await
}
