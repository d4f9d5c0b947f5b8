// The side-by-side view's logic: a cut point moved through two replies by token. Every count is
// read off the sweep's own curve (the `steps` of `compare_sides`, computed in kerf-core); nothing
// here parses or counts objects. Offsets are UTF-16 code units, a string's indices.
import type { PlacedObject } from "../ipc/bindings/PlacedObject";
import type { ReplySide } from "../ipc/bindings/ReplySide";

/** The sweep's count at `cut`: the last step at or before it (kerf-core's `ByteCurve::at`). */
export function countAt(steps: ReadonlyArray<readonly [number, number]>, cut: number): number {
  let lo = 0, hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid][0] <= cut) lo = mid + 1; else hi = mid;
  }
  return lo === 0 ? 0 : steps[lo - 1][1];
}

/** Tokens in a reply. */
export const tokensOf = (side: Pick<ReplySide, "cuts">): number => Math.max(0, side.cuts.length - 1);

/** Where a cut after `k` tokens falls (past the reply's last token: its end). */
export function cutAt(side: Pick<ReplySide, "cuts">, k: number): number {
  const last = side.cuts.length - 1;
  return last < 0 ? 0 : side.cuts[Math.max(0, Math.min(Math.round(k), last))];
}

export interface Kept {
  /** The cut, as an index into the reply's text. */
  cut: number;
  /** Objects kept, as the sweep counts them. */
  count: number;
  /** Which: the reply's first `count` objects. */
  objects: PlacedObject[];
}

/** What `side` keeps when cut after `k` tokens. */
export function keptAt(side: Pick<ReplySide, "cuts" | "steps" | "objects">, k: number): Kept {
  const cut = cutAt(side, k);
  const count = countAt(side.steps, cut);
  return { cut, count, objects: side.objects.slice(0, Math.min(count, side.objects.length)) };
}

/** A stretch of a reply: an accepted object's text (`object`: its index) or the text between. */
export interface Segment { start: number; end: number; object: number | null }

/**
 * The reply cut into its objects and the text between them, in order, covering it all. Objects
 * out of order or overlapping an earlier one are left unhighlighted rather than drawn twice.
 */
export function segments(length: number, objects: ReadonlyArray<Pick<PlacedObject, "start" | "end">>): Segment[] {
  const out: Segment[] = [];
  let at = 0;
  objects.forEach((o, i) => {
    const start = Math.max(o.start, 0), end = Math.min(o.end, length);
    if (start < at || end <= start) return;
    if (start > at) out.push({ start: at, end: start, object: null });
    out.push({ start, end, object: i });
    at = end;
  });
  if (at < length || out.length === 0) out.push({ start: at, end: length, object: null });
  return out;
}

/**
 * Where text offset `at` lies among the segments: the segment holding the character at `at` and
 * the offset within it (the end of the reply: the end of the last segment). A cut, a highlight's
 * edge or a caret is placed in the page there.
 */
export function locate(segs: ReadonlyArray<Segment>, at: number): { segment: number; offset: number } {
  if (segs.length === 0) return { segment: -1, offset: 0 };
  let lo = 0, hi = segs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (segs[mid].end <= at) lo = mid + 1; else hi = mid;
  }
  const segment = Math.min(lo, segs.length - 1);
  const s = segs[segment];
  return { segment, offset: Math.max(0, Math.min(at, s.end) - s.start) };
}

/** The scrubber's keys: arrows one token, PageUp/PageDown ten, Home/End the ends; `null`: not ours. */
export function stepKey(k: number, key: string, max: number): number | null {
  const to = (n: number) => Math.max(0, Math.min(max, n));
  switch (key) {
    case "ArrowRight": case "ArrowUp": return to(k + 1);
    case "ArrowLeft": case "ArrowDown": return to(k - 1);
    case "PageUp": return to(k + 10);
    case "PageDown": return to(k - 10);
    case "Home": return 0;
    case "End": return max;
    default: return null;
  }
}

/** The token under a pointer `x` pixels into a track `width` wide spanning 0…`max` tokens. */
export function tokenAtX(x: number, width: number, max: number): number {
  if (width <= 0 || max <= 0) return 0;
  return Math.max(0, Math.min(max, Math.round((x / width) * max)));
}

/**
 * The sweep's points (`(tokens, objects)` where the count changes) as a stepped SVG path over a
 * `w`×`h` box whose x runs over 0…`maxTokens` and y over 0…`maxObjects` (up).
 */
export function curvePath(points: ReadonlyArray<readonly [number, number]>, maxTokens: number, maxObjects: number, w: number, h: number): string {
  const x = (k: number) => (maxTokens > 0 ? (Math.min(k, maxTokens) / maxTokens) * w : 0);
  const y = (n: number) => (maxObjects > 0 ? h - (n / maxObjects) * h : h);
  let d = `M0,${y(0).toFixed(1)}`;
  let n = 0;
  for (const [k, count] of points) {
    d += ` H${x(k).toFixed(1)}`;
    if (count !== n) { d += ` V${y(count).toFixed(1)}`; n = count; }
  }
  // Past a shorter reply's end, a cut keeps what the whole reply has.
  return `${d} H${w}`;
}
