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
 * spans both mark the overlap; spans past the text are clipped. Unlike the side-by-side view's
 * `scrub.segments` (one object per stretch, in order), a document's grounding spans may overlap.
 *
 * One sweep over the cut points: a long document's thousands of chunks and records cost each
 * segment only what is open over it, not a look at every span.
 */
export function segments(text: string, spans: Marked[], cut: number | null = null, chunks: ChunkSpan[] = []): Segment[] {
  const total = text.length;
  const clip = (x: number) => Math.min(Math.max(0, x), total);
  const points = new Set<number>([0, total]);
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
