// The Evaluate screen's matrix: rows × (provider, prompt, budget, constraint) columns, each cell an eval
// cell as Rust scored it (CellLine). Everything here only arranges what Rust decided — which
// cells exist, their F1, their status — for display: sorting, filtering, colour.
import type { CellLine } from "../ipc/bindings/CellLine";

/** One column of the matrix: a prompt on a provider at a budget, constrained or not (and, for
 * an eval that cuts its documents, at a chunk size and context). */
export interface Column {
  key: string;
  provider: string;
  prompt: string;
  maxTokens: number;
  constrained: boolean;
  chunkSize?: number;
  contextChars?: number;
}

export interface MatrixRow {
  id: string;
  /** The row's place in the dataset. */
  seq: number;
  /** Column key → the cell (its first repeat, or the one repeat asked for). */
  cells: Map<string, CellLine>;
}

export type SortBy = "dataset" | "worst-recall" | "worst-f1";
export type StatusFilter = "all" | "cut" | "failed" | "pending" | "missed";

export interface MatrixFilter {
  status: StatusFilter;
  /** Only rows where some cell dropped a piece for this reason ("" for any). */
  drop: string;
  /** Only rows where some cell's scoring met this record type ("" for any). */
  type: string;
  /** Only rows whose id holds this text. */
  text: string;
}

export function columnKey(c: { provider: string; prompt: string; max_tokens: number; constrained: boolean; chunk_size?: number; context_chars?: number }): string {
  const cut = c.chunk_size == null ? "" : `\u0000${c.chunk_size}\u0000${c.context_chars ?? 0}`;
  return `${c.provider}\u0000${c.prompt}\u0000${c.max_tokens}\u0000${c.constrained ? 1 : 0}${cut}`;
}

/**
 * The columns the cells name, grouped by provider (in `providers` order), then by prompt (in
 * `prompts` order), budget, constrained first.
 */
export function columns(cells: Iterable<CellLine>, prompts: string[], providers: string[] = []): Column[] {
  const seen = new Map<string, Column>();
  for (const c of cells) {
    const key = columnKey(c);
    if (!seen.has(key)) seen.set(key, { key, provider: c.provider, prompt: c.prompt, maxTokens: c.max_tokens, constrained: c.constrained, chunkSize: c.chunk_size, contextChars: c.context_chars });
  }
  const at = (list: string[], p: string) => { const i = list.indexOf(p); return i < 0 ? list.length : i; };
  return [...seen.values()].sort((a, b) =>
    at(providers, a.provider) - at(providers, b.provider) || a.provider.localeCompare(b.provider) ||
    at(prompts, a.prompt) - at(prompts, b.prompt) || a.prompt.localeCompare(b.prompt) || a.maxTokens - b.maxTokens ||
    Number(b.constrained) - Number(a.constrained) || (a.chunkSize ?? 0) - (b.chunkSize ?? 0) ||
    (a.contextChars ?? 0) - (b.contextChars ?? 0));
}

/** A run of adjacent columns of one provider: the matrix's header spans it. */
export interface ProviderSpan {
  provider: string;
  span: number;
}

/** The columns' providers as the header spans them, in order. */
export function providerSpans(cols: Column[]): ProviderSpan[] {
  const spans: ProviderSpan[] = [];
  for (const c of cols) {
    const last = spans.at(-1);
    if (last && last.provider === c.provider) last.span += 1;
    else spans.push({ provider: c.provider, span: 1 });
  }
  return spans;
}

/**
 * The rows of the matrix, in the dataset's order (`rowIds`), each with its cells; a cell is the
 * first repeat of its column (repeats are summed up in the report's lines).
 */
export function rows(cells: Iterable<CellLine>, rowIds: string[]): MatrixRow[] {
  const byId = new Map<string, MatrixRow>();
  rowIds.forEach((id, seq) => byId.set(id, { id, seq, cells: new Map() }));
  for (const c of cells) {
    if (c.repeat !== 0) continue;
    let r = byId.get(c.row);
    if (!r) { r = { id: c.row, seq: byId.size, cells: new Map() }; byId.set(c.row, r); }
    r.cells.set(columnKey(c), c);
  }
  return [...byId.values()];
}

/** A cell's state as the matrix marks it. */
export type CellState = "pending" | "awaited" | "failed" | "cut" | "ok";

export function cellState(c: CellLine | undefined): CellState {
  // Sent in a batch whose answer has not been folded in yet.
  if (c?.status === "submitted") return "awaited";
  if (!c || c.status == null || c.status === "running" || c.status === "interrupted") return "pending";
  if (c.status === "error") return "failed";
  if (c.status === "truncated") return "cut";
  return "ok";
}

/** The lowest of a row's figure over its cells (`null`: no cell has it). */
function lowest(r: MatrixRow, pick: (c: CellLine) => number | null): number | null {
  let low: number | null = null;
  for (const c of r.cells.values()) {
    const v = pick(c);
    if (v != null && (low == null || v < low)) low = v;
  }
  return low;
}

export function sortRows(list: MatrixRow[], by: SortBy): MatrixRow[] {
  if (by === "dataset") return [...list].sort((a, b) => a.seq - b.seq);
  const pick = by === "worst-recall" ? (c: CellLine) => c.recall : (c: CellLine) => c.f1;
  // Rows with no figure yet go last; ties keep the dataset's order.
  return [...list].sort((a, b) => {
    const x = lowest(a, pick), y = lowest(b, pick);
    if (x == null && y == null) return a.seq - b.seq;
    if (x == null) return 1;
    if (y == null) return -1;
    return x - y || a.seq - b.seq;
  });
}

export function filterRows(list: MatrixRow[], f: MatrixFilter): MatrixRow[] {
  const text = f.text.trim().toLowerCase();
  return list.filter((r) => {
    if (text && !r.id.toLowerCase().includes(text)) return false;
    const cells = [...r.cells.values()];
    if (f.drop && !cells.some((c) => (c.dropped as Record<string, number | undefined>)[f.drop])) return false;
    if (f.type && !cells.some((c) => c.types?.includes(f.type))) return false;
    switch (f.status) {
      case "all": return true;
      case "cut": return cells.some((c) => cellState(c) === "cut");
      case "failed": return cells.some((c) => cellState(c) === "failed");
      case "pending": return cells.length === 0 || cells.some((c) => cellState(c) === "pending" || cellState(c) === "awaited");
      case "missed": return cells.some((c) => (c.fn ?? 0) > 0);
    }
  });
}

/** The drop reasons any cell has, for the filter's list. */
export function dropReasons(cells: Iterable<CellLine>): string[] {
  const seen = new Set<string>();
  for (const c of cells) for (const [k, n] of Object.entries(c.dropped as Record<string, number | undefined>)) if (n) seen.add(k);
  return [...seen].sort();
}

/** The record types any cell's scoring met, for the filter's list. */
export function recordTypes(cells: Iterable<CellLine>): string[] {
  const seen = new Set<string>();
  for (const c of cells) for (const t of c.types ?? []) seen.add(t);
  return [...seen].sort();
}

/**
 * A cell's colour by F1: red (0) through amber to green (1), on a light ground so its figure
 * reads in black; grey when there is nothing to score.
 */
export function f1Colour(f1: number | null | undefined): string {
  if (f1 == null || Number.isNaN(f1)) return "#e5e7eb";
  const t = Math.min(1, Math.max(0, f1));
  const hue = Math.round(t * 120); // 0 red → 120 green
  return `hsl(${hue} 70% 78%)`;
}

/**
 * Put `cell` into `cells` (keyed by its identity): the live matrix replaces a cell as a later
 * end (a resume, the final report) says more of it.
 */
export function cellId(c: { row: string; provider: string; prompt: string; max_tokens: number; constrained: boolean; repeat: number }): string {
  return `${columnKey(c)}\u0000${c.repeat}\u0000${c.row}`;
}
