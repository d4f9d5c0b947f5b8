// How the generated client (./commands.ts) reaches the Rust side: one invoke, every failure as an
// ApiError {code, message, details?}, and a Channel for commands that stream. No command names
// here: they live in the declaration the client is generated from.
import { invoke, Channel } from "@tauri-apps/api/core";
import type { ApiError } from "./bindings/ApiError";

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

export async function call<T>(cmd: string, args: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (e) {
    throw asApiError(e);
  }
}

/** A channel that hands each message the command sends to `onMessage`. */
export function channel<T>(onMessage: (message: T) => void): Channel<T> {
  const c = new Channel<T>();
  c.onmessage = onMessage;
  return c;
}
