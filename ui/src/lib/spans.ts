// Highlighting: a text cut into segments at the spans Rust located (each record's place in the
// reply, each grounding field's place in the document) and at a cut point, so a screen draws
// each segment with its marks. Spans are byte offsets (Rust's `str` indices); JavaScript
// strings are UTF-16, so offsets are converted once per text.

/** A span to mark: byte offsets `[start, end)` and the record it belongs to. */
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
  /** Where the segment starts, in bytes. */
  byte: number;
}

/**
 * UTF-16 index of every UTF-8 byte offset that starts a character (and of the end): how a
 * byte offset from Rust finds its place in a JavaScript string.
 */
export function byteToUtf16(text: string): (byte: number) => number {
  const marks: number[] = []; // marks[k]: byte offset of the k-th UTF-16 unit
  let byte = 0;
  for (let i = 0; i < text.length; i++) {
    marks.push(byte);
    const c = text.charCodeAt(i);
    if (c < 0x80) byte += 1;
    else if (c < 0x800) byte += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      // A surrogate pair is one 4-byte character: its second unit is no character's start, so
      // it gets an offset inside the character, and a byte offset finds the unit after it.
      marks.push(byte + 2); byte += 4; i++;
    }
    else byte += 3;
  }
  marks.push(byte);
  return (b: number) => {
    // The first unit at or after byte b.
    let lo = 0, hi = marks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (marks[mid] < b) lo = mid + 1; else hi = mid;
    }
    return lo;
  };
}

/** The text's length in UTF-8 bytes. */
export function byteLength(text: string): number {
  return new TextEncoder().encode(text).length;
}

/**
 * `text` cut at every span's ends and at `cut` (a byte offset; `null`: none): each segment with
 * the records covering it, and whether it lies past the cut. Overlapping spans both mark the
 * overlap; spans past the text are clipped.
 */
export function segments(text: string, spans: Marked[], cut: number | null = null): Segment[] {
  const toUnit = byteToUtf16(text);
  const total = byteLength(text);
  const points = new Set<number>([0, total]);
  for (const s of spans) { points.add(Math.min(Math.max(0, s.start), total)); points.add(Math.min(Math.max(0, s.end), total)); }
  if (cut != null) points.add(Math.min(Math.max(0, cut), total));
  const sorted = [...points].sort((a, b) => a - b);
  const out: Segment[] = [];
  for (let i = 0; i + 1 < sorted.length; i++) {
    const [a, b] = [sorted[i], sorted[i + 1]];
    if (a === b) continue;
    const records = spans.filter((s) => s.start <= a && s.end >= b).map((s) => s.record);
    out.push({ text: text.slice(toUnit(a), toUnit(b)), records, afterCut: cut != null && a >= cut, byte: a });
  }
  return out;
}
