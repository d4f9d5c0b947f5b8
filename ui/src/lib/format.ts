// How numbers, times and outcomes read on screen. Pure functions: unit-tested in format.test.ts.
import type { RunRow } from "../ipc/bindings/RunRow";
import type { ApiError } from "../ipc/bindings/ApiError";
import type { DropKind } from "../ipc/bindings/DropKind";
import type { FinishReason } from "../ipc/bindings/FinishReason";
import type { Batch } from "../ipc/bindings/Batch";
import type { BatchCounts } from "../ipc/bindings/BatchCounts";
import type { BatchState } from "../ipc/bindings/BatchState";
import type { BatchTally } from "../ipc/bindings/BatchTally";

export function seconds(s: number | null | undefined): string {
  if (s == null || !isFinite(s)) return "–";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

/** Time left at the pace so far (`done` of `total` in `elapsed` seconds), as the CLI's bar says
 *  it: "" until the first is done, when there is no pace yet. */
export function eta(done: number, total: number, elapsed: number): string {
  if (done <= 0 || elapsed <= 0) return "";
  if (done >= total) return "0 s left";
  const left = ((total - done) * elapsed) / done;
  return `about ${left < 60 ? `${Math.ceil(left)} s` : seconds(Math.round(left))} left`;
}

export function usd(x: number | null | undefined): string {
  if (x == null) return "–";
  if (x === 0) return "$0";
  return x < 0.01 ? `$${x.toFixed(5)}` : `$${x.toFixed(2)}`;
}

/** A whole number with its thousands grouped by commas ("2,004"), as the CLI prints it: the
 * window's locale may be C, where `toLocaleString` groups nothing. */
export function grouped(n: number): string {
  return Math.trunc(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "2 schema, 1 truncated" from drop kinds. */
export function dropSummary(drops: { kind: DropKind }[]): string {
  const by = new Map<DropKind, number>();
  for (const d of drops) by.set(d.kind, (by.get(d.kind) ?? 0) + 1);
  return [...by].map(([k, n]) => `${n} ${k}`).join(", ");
}

// Every finish reason in words: a Record over the generated union, so a reason added in Rust
// fails the type check here until it has its words.
const FINISH_WORDS: Record<FinishReason, string> = {
  stop: "finished",
  length: "hit max_tokens",
  cancelled: "cancelled",
  content_filter: "withheld by the provider's content filter",
  refusal: "the model refused",
  interrupted: "stream broke off",
  error: "failed",
  size_limit: "cut by Kerf's reply size limit",
};

/** A finish reason in words. */
export function finishWords(reason: FinishReason): string {
  return FINISH_WORDS[reason];
}

/** A stored run's tokens, sent → received ("1,204 → 310"); "?" where the provider did not say. */
export function runTokens(r: Pick<RunRow, "promptTokens" | "completionTokens">): string {
  const n = (x: number | null) => (x == null ? "?" : grouped(x));
  if (r.promptTokens == null && r.completionTokens == null) return "–";
  return `${n(r.promptTokens)} → ${n(r.completionTokens)}`;
}

/** A stored run's one-line outcome. */
export function runOutcome(r: RunRow): string {
  if (r.status === "error") return `error: ${r.error ?? "unknown"}`;
  if (r.status === "running") return "running…";
  const parts = [count(r.objects ?? 0, "object")];
  if (r.dropped) parts.push(`${r.dropped} dropped`);
  if (r.truncated) parts.push("cut off");
  return parts.join(", ");
}

/** Local time, minute precision, from RFC 3339. */
export function when(rfc3339: string): string {
  const d = new Date(rfc3339);
  if (isNaN(d.getTime())) return rfc3339;
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** What to tell the user for an error code (the message carries the specifics). */
export function errorTitle(e: ApiError): string {
  switch (e.code) {
    case "model": return "The model could not be loaded";
    case "provider_unavailable": return "That provider is not available";
    case "auth": return "The provider refused the API key";
    case "network": case "timeout": case "http": return "The provider could not be reached";
    case "refused": return "The provider keeps refusing requests";
    case "schema_invalid": return "The schema is not valid";
    case "template_syntax": case "template_undefined": case "template_render": return "The template does not render";
    case "invalid_json": return "That is not valid JSON";
    case "context_overflow": return "The prompt does not fit the model's context";
    case "cancelled": return "Cancelled";
    case "store_newer": case "store_corrupt": case "store_full": case "store_io": case "store": return "The history could not be used";
    case "not_found": return "Not found";
    case "io": return "A file could not be read or written";
    case "usage": return "Check the settings";
    default: return "Something went wrong";
  }
}

/** A size in bytes as people read it: "98 MB", "1.9 GB" (decimal units, as the hub shows them). */
export function bytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  if (n >= 1e6) return `${Math.round(n / 1e6)} MB`;
  if (n >= 1e3) return `${Math.round(n / 1e3)} kB`;
  return `${n} B`;
}

/** The user's home folder, set once from `meta` (App.svelte). */
let home: string | null = null;
export function setHome(h: string | null | undefined) {
  home = h ? h.replace(/[\\/]+$/, "") : null;
}
/** Paths under the home folder as `~/…`, wherever they occur in `text` (a path, a notice, an
 *  error message): shorter, and the part that says where a file is. */
export function tilde(text: string): string {
  if (!home) return text;
  return text.split(home + "/").join("~/").split(home + "\\").join("~\\");
}

/** A model path as a short name. */
export function modelName(path: string): string {
  const i = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return i >= 0 ? path.slice(i + 1) : path;
}

/** Token budgets typed as "32, 64 128": sorted, distinct, positive; null when any part is not. */
export function parseBudgets(text: string): number[] | null {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d+$/.test(p)) return null;
    const n = Number(p);
    if (n <= 0) return null;
    if (!out.includes(n)) out.push(n);
  }
  return out.sort((a, b) => a - b);
}

// Every batch state in words (a Record over the generated union: a state added in Rust fails
// the type check here until it has its words).
const BATCH_STATE_WORDS: Record<BatchState, string> = {
  unsent: "stored, not sent yet",
  running: "with the provider",
  ended: "ended, not folded yet",
  failed: "refused whole",
  folded: "folded in",
};

/** A batch's request counts in words: "3 succeeded · 1 expired · 2 processing" (zeros left out). */
export function batchCounts(c: BatchCounts | null): string {
  if (!c) return "no counts yet";
  const parts: [number, string][] = [[c.succeeded, "succeeded"], [c.errored, "errored"], [c.expired, "expired"], [c.canceled, "cancelled"], [c.processing, "processing"]];
  const said = parts.filter(([n]) => n > 0).map(([n, w]) => `${grouped(n)} ${w}`);
  return said.length ? said.join(" · ") : `${grouped(c.total)} requests, none counted yet`;
}

/** One batch in a line: "openai batch · 12 requests · with the provider (in_progress) · 3 succeeded". */
export function batchLine(b: Batch): string {
  const how = b.api === "file" ? "batch file" : `${b.api} batch`;
  // A batch file is "running" until its output file is folded: nobody reports on it meanwhile.
  const state = b.api === "file" && b.state === "running" ? "written, awaiting its output file"
    : BATCH_STATE_WORDS[b.state] + (b.remote_state ? ` (${b.remote_state})` : "");
  const tail = b.api === "file" ? (b.input_file ? ` · ${b.input_file}` : "") : ` · ${batchCounts(b.counts)}`;
  return `${b.provider}: ${how} · ${count(b.requests, "request")} · ${state}${tail}${b.error ? ` · ${b.error}` : ""}`;
}

/** An experiment's batches summed for History: "2 batches, 1 ended · 40 requests · 30 succeeded · 10 processing". */
export function tallyLine(t: BatchTally): string {
  return `${count(t.batches, "batch", "batches")}, ${t.ended} ended · ${count(t.requests, "request")} · ${batchCounts(t.counts)}`;
}
