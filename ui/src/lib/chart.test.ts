import { describe, expect, it } from "vitest";
import { budgetSeries, stepAt, sweepSeries, toSvg } from "./chart";
import type { CompareRow } from "../ipc/bindings/CompareRow";
import type { ResponseType } from "../ipc/bindings/ResponseType";
import type { SweepCurve } from "../ipc/bindings/SweepCurve";

const row = (prompt: string, responseType: ResponseType, maxTokens: number, objects: number, constrained = false): CompareRow => ({
  prompt, responseType, maxTokens, constrained, objects, dropped: 0, droppedSummary: "", truncated: false,
  finishReason: "length", completionTokens: maxTokens, seconds: 1, historyId: null,
});

describe("chart data", () => {
  it("puts each prompt and pass on its own series over the sorted budgets", () => {
    const { xs, series } = budgetSeries([row("kg", "jsonl", 128, 5), row("kg", "jsonl", 32, 1), row("kg-array", "json", 32, 0)]);
    expect(xs).toEqual([32, 128]);
    expect(series.map((s) => s.label)).toEqual(["kg (jsonl)", "kg-array (json)"]);
    expect(series[0].ys).toEqual([1, 5]);
    expect(series[1].ys).toEqual([0, null]);
  });
  it("reads a sweep as a step function of the fraction emitted", () => {
    const s: SweepCurve = { prompt: "kg", responseType: "jsonl", maxTokens: 512, constrained: true, cutByBudget: false, total: 3,
      points: [[10, 1], [20, 2], [40, 3]], length: 40, score: 0.5, unit: "token" };
    expect(stepAt(s, 0)).toBe(0);
    expect(stepAt(s, 0.25)).toBe(1);
    expect(stepAt(s, 0.49)).toBe(1);
    expect(stepAt(s, 0.5)).toBe(2);
    expect(stepAt(s, 1)).toBe(3);
    const { xs, series } = sweepSeries([s], 4);
    expect(xs).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(series[0].ys).toEqual([0, 1, 2, 2, 3]);
    expect(series[0].label).toBe("kg (jsonl, constrained)");
    const cut = sweepSeries([{ ...s, cutByBudget: true, maxTokens: 48 }], 4);
    expect(cut.series[0].label).toBe("kg (jsonl, constrained), cut by its budget");
  });
  it("writes a standalone SVG with every series and its label, escaped", () => {
    const svg = toSvg("Objects <vs> budget", "max_tokens", "objects", [
      { label: "a & b", xs: [32, 64], ys: [1, 3] }, { label: "c", xs: [32, 64], ys: [0, null] },
    ]);
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("Objects &lt;vs&gt; budget");
    expect(svg).toContain("a &amp; b");
    expect(svg.match(/<polyline/g)?.length).toBe(2);
    const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
    expect(doc.querySelector("parsererror")).toBeNull();
  });
});
