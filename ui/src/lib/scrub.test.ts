import { describe, expect, it } from "vitest";
import { countAt, cutAt, curvePath, keptAt, locate, segments, stepKey, tokenAtX, tokensOf } from "./scrub";

// A reply as compare_sides sends it: `{"a":1}\n{"b":2}\nxx` cut into 7 tokens.
const text = '{"a":1}\n{"b":2}\nxx';
const side = {
  cuts: [0, 2, 7, 8, 12, 15, 16, 18],
  // The sweep's curve: 1 object from offset 7, 2 from 15.
  steps: [[0, 0], [7, 1], [15, 2]] as [number, number][],
  objects: [{ start: 0, end: 7, label: "1" }, { start: 8, end: 15, label: "2" }],
};

describe("scrub", () => {
  it("reads a count off the sweep's steps as ByteCurve::at does", () => {
    expect(countAt(side.steps, 0)).toBe(0);
    expect(countAt(side.steps, 6)).toBe(0);
    expect(countAt(side.steps, 7)).toBe(1);
    expect(countAt(side.steps, 14)).toBe(1);
    expect(countAt(side.steps, 15)).toBe(2);
    expect(countAt(side.steps, 10_000)).toBe(2);
    expect(countAt([], 5)).toBe(0);
    // A curve that falls back (strict JSON with trailing text): the last step at or before.
    expect(countAt([[0, 0], [5, 3], [9, 0]], 8)).toBe(3);
    expect(countAt([[0, 0], [5, 3], [9, 0]], 9)).toBe(0);
  });

  it("cuts after k tokens, past the end at the end", () => {
    expect(tokensOf(side)).toBe(7);
    expect(cutAt(side, 0)).toBe(0);
    expect(cutAt(side, 2)).toBe(7);
    expect(cutAt(side, 99)).toBe(18);
    expect(cutAt(side, -3)).toBe(0);
    expect(cutAt({ cuts: [] }, 4)).toBe(0);
  });

  it("keeps the reply's first objects, as many as the sweep counts", () => {
    expect(keptAt(side, 1)).toEqual({ cut: 2, count: 0, objects: [] });
    const two = keptAt(side, 2);
    expect([two.cut, two.count, two.objects.map((o) => o.label)]).toEqual([7, 1, ["1"]]);
    expect(keptAt(side, 5).objects.map((o) => o.label)).toEqual(["1", "2"]);
    // A count past the objects listed (never sent so, but never an out-of-range slice).
    expect(keptAt({ ...side, objects: side.objects.slice(0, 1) }, 7).objects.length).toBe(1);
  });

  it("cuts a reply into its objects and the text between, covering it all", () => {
    const segs = segments(text.length, side.objects);
    expect(segs).toEqual([
      { start: 0, end: 7, object: 0 }, { start: 7, end: 8, object: null },
      { start: 8, end: 15, object: 1 }, { start: 15, end: 18, object: null },
    ]);
    expect(segs.map((s) => text.slice(s.start, s.end)).join("")).toBe(text);
    // Overlapping or empty spans are not drawn twice; an empty reply is one empty segment.
    expect(segments(10, [{ start: 2, end: 6 }, { start: 4, end: 8 }, { start: 9, end: 9 }])).toEqual([
      { start: 0, end: 2, object: null }, { start: 2, end: 6, object: 0 }, { start: 6, end: 10, object: null },
    ]);
    expect(segments(0, [])).toEqual([{ start: 0, end: 0, object: null }]);
  });

  it("locates an offset in the segments, a boundary in the segment that starts there", () => {
    const segs = segments(text.length, side.objects);
    expect(locate(segs, 0)).toEqual({ segment: 0, offset: 0 });
    expect(locate(segs, 3)).toEqual({ segment: 0, offset: 3 });
    expect(locate(segs, 7)).toEqual({ segment: 1, offset: 0 });
    expect(locate(segs, 10)).toEqual({ segment: 2, offset: 2 });
    expect(locate(segs, 15)).toEqual({ segment: 3, offset: 0 });
    // The end of the reply is the end of its last segment.
    expect(locate(segs, 18)).toEqual({ segment: 3, offset: 3 });
    expect(locate(segs, 99)).toEqual({ segment: 3, offset: 3 });
    expect(locate([], 4)).toEqual({ segment: -1, offset: 0 });
  });

  it("steps by keys: arrows one token, pages ten, Home and End the ends", () => {
    expect(stepKey(5, "ArrowRight", 100)).toBe(6);
    expect(stepKey(5, "ArrowUp", 100)).toBe(6);
    expect(stepKey(5, "ArrowLeft", 100)).toBe(4);
    expect(stepKey(0, "ArrowLeft", 100)).toBe(0);
    expect(stepKey(5, "PageUp", 100)).toBe(15);
    expect(stepKey(95, "PageUp", 100)).toBe(100);
    expect(stepKey(5, "PageDown", 100)).toBe(0);
    expect(stepKey(50, "Home", 100)).toBe(0);
    expect(stepKey(50, "End", 100)).toBe(100);
    expect(stepKey(50, "a", 100)).toBeNull();
  });

  it("maps a pointer to the token under it", () => {
    expect(tokenAtX(0, 200, 1000)).toBe(0);
    expect(tokenAtX(100, 200, 1000)).toBe(500);
    expect(tokenAtX(250, 200, 1000)).toBe(1000);
    expect(tokenAtX(-5, 200, 1000)).toBe(0);
    expect(tokenAtX(100, 0, 1000)).toBe(0);
  });

  it("draws the sweep's points as a stepped path, flat past the reply's end", () => {
    expect(curvePath([[0, 0], [2, 1], [5, 2], [7, 2]], 10, 2, 100, 50)).toBe("M0,50.0 H0.0 H20.0 V25.0 H50.0 V0.0 H70.0 H100");
  });
});
