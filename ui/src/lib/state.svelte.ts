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

export type Screen = "prompts" | "run" | "compare" | "evaluate" | "history" | "export" | "providers";

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
    a.responseType !== draft.responseType || a.post !== draft.post || a.base !== draft.base
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
