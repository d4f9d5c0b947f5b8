// The one module the screens use to talk to the Rust side. The commands are generated from their
// declaration in Rust (./commands.ts, from src-tauri/src/commands/surface.in) and typed by the
// Rust wire types (./bindings); both are checked for drift by Rust tests. Errors always arrive as
// ApiError {code, message, details?}, whatever failed. What is written here by hand only names
// the generated commands for the screens' common cases.
import * as commands from "./commands";

export type * from "./bindings/ApiError";
export { asApiError } from "./call";

let nextId = 0;
/** An id for a piece of work, so Cancel can name it. */
export function workId(kind: string): string {
  nextId += 1;
  return `${kind}-${Date.now().toString(36)}-${nextId}`;
}

export const api = {
  ...commands,
  /** Write text where the user chose (atomically). */
  saveText: (path: string, text: string) => commands.fileSave(path, text, null),
  /** Write bytes given as base64 (a PNG) where the user chose. */
  saveBytes: (path: string, base64: string) => commands.fileSave(path, null, base64),
};

/**
 * The native open/save dialogs, shown by Kerf's own commands: a file the user picks there is the
 * only file outside Kerf's folders the other commands will read or write. `null` when the user
 * cancels.
 */
export const pickFile = commands.dialogOpen;

/** `suggested`: a file name, or a path whose folder the dialog opens in. */
export const pickSavePath = commands.dialogSave;
