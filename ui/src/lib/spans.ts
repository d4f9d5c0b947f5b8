// Highlighting: a text cut into segments at the spans Rust located (each record's place in the
// reply, each grounding field's place in the document) and at a cut point, so a screen draws
// each segment with its marks. Offsets arrive in UTF-16 units (Rust converts them, as it does
// for the side-by-side view), so they index the page's strings directly.

/** A span to mark: offsets `[start, end)` and the record it belongs to. */
export interface Marked {
  start: number;
  end: number;
  record: number;
}

export interface Segment {
  text: string;
  /** The records whose span covers this segment (empty: none). */
  records: number[];
  /** Past the cut point: what the budget cut off, or what gave nothing. */
  afterCut: boolean;
  /** Where the segment starts. */
  at: number;
  /** A cut document's chunks covering this segment, by index (two: an overlap). */
  chunks: number[];
}

/** A chunk of a cut document: its index (from 1) and its place, in UTF-16 units. */
export interface ChunkSpan {
  index: number;
  start: number;
  end: number;
}

/**
 * `text` cut at every span's ends, at `cut` (`null`: none) and at every chunk's ends: each
 * segment with the records and chunks covering it, and whether it lies past the cut. Overlapping
 * spans both mark the overlap; spans past the text are clipped. With `part`, only that stretch
 * of the text is cut (spans and chunks clipped to it; `at` stays the place in the whole text). Unlike the side-by-side view's
 * `scrub.segments` (one object per stretch, in order), a document's grounding spans may overlap.
 *
 * One sweep over the cut points: a long document's thousands of chunks and records cost each
 * segment only what is open over it, not a look at every span.
 */
export function segments(text: string, spans: Marked[], cut: number | null = null, chunks: ChunkSpan[] = [], part: Part = { start: 0, end: text.length }): Segment[] {
  const [from, to] = [Math.max(0, part.start), Math.min(part.end, text.length)];
  const clip = (x: number) => Math.min(Math.max(from, x), to);
  const points = new Set<number>([from, to]);
  for (const s of spans) { points.add(clip(s.start)); points.add(clip(s.end)); }
  for (const c of chunks) { points.add(clip(c.start)); points.add(clip(c.end)); }
  if (cut != null) points.add(clip(cut));
  const sorted = [...points].sort((a, b) => a - b);
  const records = covering(spans, clip);
  const within = covering(chunks, clip);
  const out: Segment[] = [];
  for (let i = 0; i + 1 < sorted.length; i++) {
    const [a, b] = [sorted[i], sorted[i + 1]];
    out.push({
      text: text.slice(a, b),
      records: records(a).map((k) => spans[k].record),
      afterCut: cut != null && a >= cut,
      at: a,
      chunks: within(a).map((k) => chunks[k].index),
    });
  }
  return out;
}

/**
 * For segments asked in order of their start `a`: the indices (in `items`' order) of the items
 * covering the segment from `a` to the next cut point. Every item's clipped ends are cut points,
 * so an item covers it when it starts at or before `a` and ends after it.
 */
function covering(items: { start: number; end: number }[], clip: (x: number) => number): (a: number) => number[] {
  const order = items
    .map((it, i) => ({ start: clip(it.start), end: clip(it.end), i }))
    .filter((it) => it.start < it.end)
    .sort((x, y) => x.start - y.start);
  let next = 0;
  let open: { end: number; i: number }[] = [];
  return (a) => {
    while (next < order.length && order[next].start <= a) open.push(order[next++]);
    open = open.filter((it) => it.end > a);
    return open.map((it) => it.i).sort((x, y) => x - y);
  };
}

/** A stretch of a long text that a screen draws at once: `[start, end)` in UTF-16 units. */
export interface Part {
  start: number;
  end: number;
}

/**
 * `text` in parts of about `size` units each, so a screen draws a book a part at a time: each
 * part ends at a line break in its last eighth when it has one, else at a space there, and never
 * between the two halves of a surrogate pair. A text no longer than `size` is one part.
 */
export function parts(text: string, size: number): Part[] {
  const out: Part[] = [];
  let start = 0;
  while (text.length - start > size) {
    const hard = start + size;
    const floor = hard - Math.floor(size / 8);
    let end = text.lastIndexOf("\n", hard - 1) + 1;
    if (end <= floor) end = text.lastIndexOf(" ", hard - 1) + 1;
    if (end <= floor) {
      end = hard;
      const unit = text.charCodeAt(end - 1);
      if (unit >= 0xd800 && unit <= 0xdbff) end -= 1; // a high surrogate stays with its low half
    }
    out.push({ start, end });
    start = end;
  }
  out.push({ start, end: text.length });
  return out;
}

/** The index of the part holding the unit at `offset` (the last part for the text's end). */
export function partAt(ps: Part[], offset: number): number {
  let [lo, hi] = [0, ps.length - 1];
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ps[mid].start <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
