import { describe, expect, it } from "vitest";
import { segments } from "./spans";

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
});
