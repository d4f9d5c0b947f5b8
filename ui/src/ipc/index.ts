// The one module that talks to the Rust side. Every command is a typed function here; the types
// are generated from the Rust wire types (./bindings, checked for drift by a Rust test). Errors
// always arrive as ApiError {code, message, details?}, whatever failed.
import { invoke, Channel } from "@tauri-apps/api/core";
import type { ApiError } from "./bindings/ApiError";
import type { CompareInput } from "./bindings/CompareInput";
import type { CompareProgress } from "./bindings/CompareProgress";
import type { Comparison } from "./bindings/Comparison";
import type { ExperimentRow } from "./bindings/ExperimentRow";
import type { ExportView } from "./bindings/ExportView";
import type { HistoryFilter } from "./bindings/HistoryFilter";
import type { Inspection } from "./bindings/Inspection";
import type { Models } from "./bindings/Models";
import type { PromptDoc } from "./bindings/PromptDoc";
import type { PromptDraft } from "./bindings/PromptDraft";
import type { PromptEntry } from "./bindings/PromptEntry";
import type { ProviderInfo } from "./bindings/ProviderInfo";
import type { ProviderSpec } from "./bindings/ProviderSpec";
import type { ProvidersView } from "./bindings/ProvidersView";
import type { RunDetail } from "./bindings/RunDetail";
import type { RunDiffView } from "./bindings/RunDiffView";
import type { RunDone } from "./bindings/RunDone";
import type { RunInput } from "./bindings/RunInput";
import type { RunMessage } from "./bindings/RunMessage";
import type { RunOptions } from "./bindings/RunOptions";
import type { RunRow } from "./bindings/RunRow";

export type * from "./bindings/ApiError";

/** Anything thrown, as an ApiError (a JS exception becomes `internal`). */
export function asApiError(e: unknown): ApiError {
  if (e && typeof e === "object" && "code" in e && "message" in e) {
    return e as ApiError;
  }
  if (typeof e === "string") {
    // Tauri reports its own failures (a command not allowed, bad arguments) as strings.
    return { code: "internal", message: e };
  }
  return { code: "internal", message: e instanceof Error ? e.message : String(e) };
}

async function call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (e) {
    throw asApiError(e);
  }
}

let nextId = 0;
/** An id for a piece of work, so Cancel can name it. */
export function workId(kind: string): string {
  nextId += 1;
  return `${kind}-${Date.now().toString(36)}-${nextId}`;
}

export const api = {
  promptsList: () => call<PromptEntry[]>("prompts_list"),
  promptOpen: (path: string) => call<PromptDoc>("prompt_open", { path }),
  promptInspect: (draft: PromptDraft, path: string | null, input: string) =>
    call<Inspection>("prompt_inspect", { draft, path, input, vars: {} }),
  // `opened`: the file's text when it was opened; a file changed on disk since is a conflict.
  promptSave: (draft: PromptDraft, path: string, opened: string | null) => call<string>("prompt_save", { draft, path, opened }),
  /** The draft with `object-schema` renamed to `schema` (TrustGraph validates only `schema`); not saved. */
  promptRenameSchemaKey: (draft: PromptDraft) => call<PromptDraft>("prompt_rename_schema_key", { draft }),
  /** A TrustGraph prompt config (bundle or one template) into the user's folder: the files written. */
  promptsImport: (file: string, overwrite: boolean) => call<string[]>("prompts_import", { file, overwrite }),
  modelsList: () => call<Models>("models_list"),
  modelsFetch: () => call<string>("models_fetch"),

  providersList: () => call<ProvidersView>("providers_list"),
  providerAdd: (spec: ProviderSpec) => call<ProviderInfo>("provider_add", { spec }),
  providerRemove: (name: string) => call<boolean>("provider_remove", { name }),
  /** Into the OS keyring; the key never comes back (only where a run would find it). */
  providerSetKey: (name: string, key: string) => call<ProviderInfo>("provider_set_key", { name, key }),
  providerDeleteKey: (name: string) => call<boolean>("provider_delete_key", { name }),
  providerProbe: (id: string, name: string) => call<ProviderInfo>("provider_probe", { id, name }),

  inputRead: (path: string) => call<string>("input_read", { path }),

  /** Start a run; `onMessage` hears the reply and its objects as they stream. */
  runStart(id: string, input: RunInput, options: RunOptions, onMessage: (m: RunMessage) => void) {
    const onEvent = new Channel<RunMessage>();
    onEvent.onmessage = onMessage;
    return call<RunDone>("run_start", { id, input, options, onEvent });
  },
  /** Stop a run or compare (it keeps what arrived). */
  runCancel: (id: string) => call<void>("run_cancel", { id }),
  compareStart(id: string, input: CompareInput, onProgress: (p: CompareProgress) => void) {
    const channel = new Channel<CompareProgress>();
    channel.onmessage = onProgress;
    return call<Comparison>("compare_start", { id, input, onProgress: channel });
  },

  historyList: (filter: HistoryFilter) => call<RunRow[]>("history_list", { filter }),
  historyExperiments: () => call<ExperimentRow[]>("history_experiments"),
  historyDetail: (id: number) => call<RunDetail>("history_detail", { id }),
  historyDiff: (a: number, b: number) => call<RunDiffView>("history_diff", { a, b }),
  historyRerun(id: string, run: number, onMessage: (m: RunMessage) => void) {
    const onEvent = new Channel<RunMessage>();
    onEvent.onmessage = onMessage;
    return call<RunDone>("history_rerun", { id, run, onEvent });
  },
  historyTag: (run: number, tag: string, remove = false) =>
    call<void>("history_tag", { run, tag, remove }),
  historyNote: (run: number, note: string | null) => call<void>("history_note", { run, note }),

  exportPreview: (paths: string[], target: string) =>
    call<ExportView>("export_preview", { paths, target }),
  saveText: (path: string, text: string) => call<void>("file_save", { path, text, base64: null }),
  saveBytes: (path: string, base64: string) =>
    call<void>("file_save", { path, text: null, base64 }),
};

/**
 * The native open/save dialogs, shown by Kerf's own commands: a file the user picks there is the
 * only file outside Kerf's folders the other commands will read or write. `null` when the user
 * cancels.
 */
export async function pickFile(title: string): Promise<string | null> {
  return call<string | null>("dialog_open", { title });
}

/** `suggested`: a file name, or a path whose folder the dialog opens in. */
export async function pickSavePath(title: string, suggested: string): Promise<string | null> {
  return call<string | null>("dialog_save", { title, suggested });
}
