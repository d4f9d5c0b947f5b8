import { describe, expect, it } from "vitest";
import { LiveCompare } from "./live";
import type { CompareProgress } from "../ipc/bindings/CompareProgress";

const label = (t: { prompt: number; maxTokens: number; constrained: boolean }) => `p${t.prompt}@${t.maxTokens}${t.constrained ? "c" : ""}`;
const text = (cell: number, prompt: number, s: string, objects: [number, number][] = []): CompareProgress => ({
  done: 0, total: 4, label: "",
  text: { cell, prompt, provider: 0, maxTokens: 64, constrained: false, text: s, objects: objects.map(([start, end]) => ({ start, end, label: `${start}` })) },
});
const ended = (cell: number, prompt: number, objects: [number, number][], total: number): CompareProgress => ({
  done: 1, total: 4, label: "",
  ended: { cell, prompt, provider: 0, historyId: 10 + cell, objects: objects.map(([start, end]) => ({ start, end, label: `${start}` })), total, finishReason: "stop", truncated: false },
});

describe("live compare", () => {
  it("appends a cell's text and objects in its prompt's column", () => {
    const live = new LiveCompare(2, label);
    expect(live.view()).toEqual([null, null]);
    expect(live.heard(text(0, 0, '{"a":1}\n{"b'))).toBe(true);
    expect(live.heard(text(0, 0, '":2}\n', [[0, 7]]))).toBe(true);
    const [a, b] = live.view();
    expect(b).toBeNull();
    expect(a!.label).toBe("p0@64");
    expect(a!.text).toBe('{"a":1}\n{"b":2}\n');
    expect(a!.objects.map((o) => [o.start, o.end])).toEqual([[0, 7]]);
    expect(a!.ended).toBeNull();
  });

  it("adds what the end settles (a JSON array's elements) and keeps the ended cell shown", () => {
    const live = new LiveCompare(2, label);
    live.heard(text(1, 1, '[{"a":1},'));
    live.heard(text(1, 1, '{"b":2}]'));
    expect(live.view()[1]!.objects).toEqual([]);
    expect(live.heard(ended(1, 1, [[1, 8], [9, 16]], 2))).toBe(true);
    const col = live.view()[1]!;
    expect(col.objects.map((o) => [o.start, o.end])).toEqual([[1, 8], [9, 16]]);
    expect(col.ended?.historyId).toBe(11);
    // Another prompt's text leaves it where it is.
    live.heard(text(2, 0, "x"));
    expect(live.view()[1]!.ended?.historyId).toBe(11);
    // The next cell of its prompt takes the column over.
    live.heard(text(3, 1, "["));
    expect(live.view()[1]!.text).toBe("[");
    expect(live.view()[1]!.ended).toBeNull();
  });

  it("follows one cell of a prompt while others of it stream at once, then the next", () => {
    const live = new LiveCompare(2, label);
    live.heard(text(0, 0, "first "));
    expect(live.heard(text(2, 0, "second "))).toBe(false);
    live.heard(text(0, 0, "still"));
    expect(live.view()[0]!.text).toBe("first still");
    live.heard(ended(0, 0, [], 0));
    live.heard(text(2, 0, "more"));
    expect(live.view()[0]!.text).toBe("second more");
  });

  it("ignores prompts past its columns and ends of cells it never heard", () => {
    const live = new LiveCompare(2, label);
    expect(live.heard(text(0, 2, "x"))).toBe(false);
    expect(live.heard(ended(5, 0, [[0, 1]], 1))).toBe(false);
    expect(live.view()).toEqual([null, null]);
  });
});
