// The app's shared state: which screen, the prompt being edited (its draft, saved or not), the
// input, the run settings. Drafts are kept in localStorage as they change, so unsaved edits
// survive a crash or a closed window and are offered back when the prompt is opened again.
import type { OpenedExperiment } from "../ipc/bindings/OpenedExperiment";
import type { PromptDoc } from "../ipc/bindings/PromptDoc";
import type { PromptDraft } from "../ipc/bindings/PromptDraft";
import type { PromptEntry } from "../ipc/bindings/PromptEntry";
import type { RunOptions } from "../ipc/bindings/RunOptions";
import type { Models } from "../ipc/bindings/Models";
import type { Meta } from "../ipc/bindings/Meta";

export type Screen = "prompts" | "run" | "compare" | "evaluate" | "history" | "export" | "providers" | "models";

export const app = $state({
  screen: "prompts" as Screen,
  prompts: [] as PromptEntry[],
  doc: null as PromptDoc | null,
  draft: null as PromptDraft | null,
  input: "",
  models: null as Models | null,
  // The closed lists the screens offer and the run panel's defaults, from Rust (`meta`): no
  // screen keeps its own copy. Loaded before any screen is drawn (App.svelte).
  meta: null as Meta | null,
  // Set to `meta.runDefaults` before any screen is drawn.
  options: undefined as unknown as RunOptions,
  // An eval for the Evaluate screen to open (History's "Open"), taken by the screen once shown.
  openEval: null as number | null,
  // History's "Collect" or "Resume" on a batch eval, for the Evaluate screen to do once shown.
  evalBatchAction: null as { id: number; act: "collect" | "resume" } | null,
  // A stored compare for the Compare screen to show (History's "Open"), taken once shown.
  openCompare: null as Extract<OpenedExperiment, { kind: "compare" }> | null,
  // A stopped compare for the Compare screen to take up again (History's "Resume").
  resumeCompare: null as number | null,
  // The dataset the window was opened with (`kerf-desktop --evaluate DATASET`), for Evaluate.
  startDataset: null as string | null,
});

/** Whether the draft differs from the file it was opened from. */
export function isDirty(doc: PromptDoc | null, draft: PromptDraft | null): boolean {
  if (!doc || !draft) return false;
  const a = doc.draft;
  return (
    a.template !== draft.template || a.system !== draft.system || a.schema !== draft.schema ||
    a.responseType !== draft.responseType || a.post !== draft.post || a.base !== draft.base ||
    (draft.terms !== undefined && a.terms !== draft.terms)
  );
}

const KEY = (path: string) => `kerf.draft:${path}`;

interface Kept { draft: PromptDraft; at: number }

/** Keep an unsaved draft (or forget it once it matches the file). */
export function keepDraft(storage: Storage, doc: PromptDoc, draft: PromptDraft) {
  if (isDirty(doc, draft)) {
    storage.setItem(KEY(doc.path), JSON.stringify({ draft, at: Date.now() } satisfies Kept));
  } else {
    storage.removeItem(KEY(doc.path));
  }
}

/** An unsaved draft kept for this file, if it was made from the file's current text. */
export function keptDraft(storage: Storage, doc: PromptDoc): Kept | null {
  const raw = storage.getItem(KEY(doc.path));
  if (!raw) return null;
  try {
    const kept = JSON.parse(raw) as Kept;
    // Made from another version of the file: it would overwrite changes made elsewhere.
    if (kept.draft.base !== doc.text) return null;
    return kept;
  } catch {
    storage.removeItem(KEY(doc.path));
    return null;
  }
}

export function forgetDraft(storage: Storage, path: string) {
  storage.removeItem(KEY(path));
}

// The values typed into a prompt's variable form, per prompt file, kept across launches.
const VARS_KEY = "kerf.vars";
export const promptVars = $state<Record<string, Record<string, string>>>(loadVars());

function loadVars(): Record<string, Record<string, string>> {
  try { return JSON.parse(globalThis.localStorage?.getItem(VARS_KEY) ?? "{}") ?? {}; } catch { return {}; }
}

/** Set variable `name` of prompt `path` (kept in localStorage). */
export function setPromptVar(path: string, name: string, value: string) {
  (promptVars[path] ??= {})[name] = value;
  globalThis.localStorage?.setItem(VARS_KEY, JSON.stringify($state.snapshot(promptVars)));
}

/** A typed value as a run variable, as `kerf --var NAME=VALUE` reads it: valid JSON that is an
 * object, array, number or boolean is taken as JSON; anything else is the text itself. */
export function varValue(text: string): unknown {
  try {
    const v = JSON.parse(text);
    if (v !== null && typeof v !== "string") return v;
  } catch { /* text */ }
  return text;
}

/** The variables of prompt `path` as a run sends them: those in `names` (default: every one
 *  remembered for it) with a value typed. */
export function varsOf(path: string | null | undefined, names?: string[]): Record<string, unknown> {
  const typed = (path && promptVars[path]) || {};
  return Object.fromEntries((names ?? Object.keys(typed)).filter((n) => (typed[n] ?? "") !== "").map((n) => [n, varValue(typed[n])]));
}
