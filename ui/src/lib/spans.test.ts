import { describe, expect, it } from "vitest";
import { partAt, parts, segments, type ChunkSpan, type Marked, type Part } from "./spans";

describe("spans", () => {
  it("cuts a reply into segments marked by the records covering them and the cut", () => {
    const reply = '{"a":1}\n{"b":2}\n{"c":';
    const segs = segments(reply, [{ start: 0, end: 7, record: 0 }, { start: 8, end: 15, record: 1 }], 16);
    expect(segs.map((s) => s.text)).toEqual(['{"a":1}', "\n", '{"b":2}', "\n", '{"c":']);
    expect(segs.map((s) => s.records)).toEqual([[0], [], [1], [], []]);
    expect(segs.map((s) => s.afterCut)).toEqual([false, false, false, false, true]);
    expect(segs.map((s) => s.text).join("")).toBe(reply);
  });

  it("places a grounding span on a document with accents and emoji by its string indices", () => {
    const doc = "Café 😀 Müller met Zoë.";
    const start = doc.indexOf("Müller");
    const segs = segments(doc, [{ start, end: start + "Müller".length, record: 3 }]);
    expect(segs.find((s) => s.records.includes(3))?.text).toBe("Müller");
    expect(segs.map((s) => s.text).join("")).toBe(doc);
  });

  it("marks overlaps with both records and clips spans past the end", () => {
    const segs = segments("abcdef", [{ start: 1, end: 4, record: 0 }, { start: 3, end: 99, record: 1 }]);
    expect(segs.map((s) => [s.text, s.records])).toEqual([["a", []], ["bc", [0]], ["d", [0, 1]], ["ef", [1]]]);
  });

  it("marks the chunks covering each stretch of a cut document, two in an overlap", () => {
    const doc = "aaaa bbbb cccc";
    const segs = segments(doc, [{ start: 5, end: 9, record: 0 }], null, [{ index: 1, start: 0, end: 9 }, { index: 2, start: 5, end: 14 }]);
    expect(segs.map((s) => [s.text, s.chunks, s.records])).toEqual([["aaaa ", [1], []], ["bbbb", [1, 2], [0]], [" cccc", [2], []]]);
  });

  it("gives what a look at every span gives, on a long document's thousands of chunks and records", () => {
    // The definition, one segment at a time over every span.
    const naive = (text: string, spans: Marked[], cut: number | null, chunks: ChunkSpan[], part: Part = { start: 0, end: text.length }) => {
      const [from, to] = [part.start, Math.min(part.end, text.length)];
      const clip = (x: number) => Math.min(Math.max(from, x), to);
      const points = new Set<number>([from, to]);
      for (const s of [...spans, ...chunks]) { points.add(clip(s.start)); points.add(clip(s.end)); }
      if (cut != null) points.add(clip(cut));
      const sorted = [...points].sort((a, b) => a - b);
      return sorted.slice(0, -1).map((a, i) => {
        const b = sorted[i + 1];
        return {
          text: text.slice(a, b),
          records: spans.filter((s) => s.start <= a && s.end >= b).map((s) => s.record),
          afterCut: cut != null && a >= cut,
          at: a,
          chunks: chunks.filter((c) => c.start <= a && c.end >= b).map((c) => c.index),
        };
      });
    };
    const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env;
    const seed = Number(env?.KERF_TEST_SEED ?? Date.now() % 2 ** 31);
    console.log(`spans: KERF_TEST_SEED=${seed}`);
    let x = seed || 1;
    const below = (n: number) => { x = (x * 48271) % 2147483647; return x % n; };
    for (let round = 0; round < 200; round++) {
      const total = below(60);
      const text = "abcdefghij".repeat(7).slice(0, total);
      const spans: Marked[] = Array.from({ length: below(8) }, () => ({ start: below(70) - 5, end: below(70) - 5, record: below(5) }));
      const chunks: ChunkSpan[] = Array.from({ length: below(5) }, (_, i) => ({ index: i + 1, start: below(60), end: below(70) }));
      const cut = below(3) === 0 ? null : below(70);
      expect(segments(text, spans, cut, chunks), `KERF_TEST_SEED=${seed}, round ${round}`).toEqual(naive(text, spans, cut, chunks));
      // One part of the text: what the whole gives, clipped to it.
      const start = below(total + 1);
      const part = { start, end: start + below(total - start + 1) };
      expect(segments(text, spans, cut, chunks, part), `KERF_TEST_SEED=${seed}, round ${round}, part`).toEqual(naive(text, spans, cut, chunks, part));
    }
    // A book: 3,000 overlapping chunks and 12,000 records over 3 million characters.
    const book = "word ".repeat(600_000);
    const chunks: ChunkSpan[] = Array.from({ length: 3000 }, (_, i) => ({ index: i + 1, start: i * 1000, end: i * 1000 + 1100 }));
    const spans: Marked[] = Array.from({ length: 12_000 }, (_, i) => ({ start: i * 250, end: i * 250 + 4, record: i }));
    const segs = segments(book, spans, null, chunks);
    expect(segs.map((s) => s.text).join("")).toBe(book);
    expect(new Set(segs.filter((s) => s.chunks.length === 2).map((s) => s.chunks.join(" "))).size).toBe(2999);
    expect(segs.filter((s) => s.records.length > 0).map((s) => s.records[0])).toEqual(spans.map((s) => s.record));
  });

  it("draws a long text a part at a time: at line breaks where it can, never inside a character", () => {
    const lines = Array.from({ length: 400 }, (_, i) => `line ${i} ${"x".repeat(i % 37)}`).join("\n");
    const ps = parts(lines, 1000);
    expect(ps.map((p) => lines.slice(p.start, p.end)).join("")).toBe(lines);
    expect(ps.every((p) => p.end - p.start <= 1000)).toBe(true);
    expect(ps.slice(0, -1).every((p) => lines[p.end - 1] === "\n")).toBe(true);
    // No line break or space near the limit: cut at it, but not between a surrogate pair's halves.
    const emoji = "😀".repeat(1000);
    const eps = parts(emoji, 101);
    expect(eps.map((p) => emoji.slice(p.start, p.end)).join("")).toBe(emoji);
    expect(eps.every((p) => (p.end - p.start) % 2 === 0)).toBe(true);
    // A text no longer than a part is one part, an empty one too.
    expect(parts("short", 1000)).toEqual([{ start: 0, end: 5 }]);
    expect(parts("", 1000)).toEqual([{ start: 0, end: 0 }]);
    // Every place is found in the part holding it.
    for (const at of [0, 1, 999, 1000, 5000, lines.length - 1, lines.length]) {
      const k = partAt(ps, at);
      expect(ps[k].start <= at && (at < ps[k].end || k === ps.length - 1)).toBe(true);
    }
  });
});
