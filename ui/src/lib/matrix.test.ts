import { describe, expect, it } from "vitest";
import type { CellLine } from "../ipc/bindings/CellLine";
import { cellState, columns, f1Colour, filterRows, providerSpans, recordTypes, rows, sortRows } from "./matrix";

function cell(row: string, prompt: string, max_tokens: number, f: Partial<CellLine> = {}): CellLine {
  return {
    row, prompt, provider: "local", max_tokens, constrained: false, repeat: 0, run: 1, finish_reason: "stop", objects: 1,
    tp: 1, fp: 0, fn: 0, precision: 1, recall: 1, f1: 1, lost_to_cut: null, status: "ok", dropped: {},
    ungrounded: 0, completion_tokens: 10, cost_usd: null, cached: false, ...f,
  } as CellLine;
}

describe("matrix", () => {
  const cells = [
    cell("r1", "jsonl", 256), cell("r1", "jsonl", 64, { status: "truncated", recall: 0.5, f1: 0.6, fn: 1 }),
    cell("r2", "jsonl", 256, { recall: 0.2, f1: 0.3 }), cell("r2", "jsonl", 64, { status: "error", f1: null, recall: null }),
    cell("r3", "array", 64, { dropped: { invalid_json: 2 } as CellLine["dropped"], types: ["definition", "relationship"] }),
    cell("r1", "jsonl", 256, { repeat: 1, f1: 0 }),
  ];
  it("lays cells out as rows in the dataset's order and columns by prompt then budget", () => {
    const cols = columns(cells, ["jsonl", "array"]);
    expect(cols.map((c) => `${c.prompt}@${c.maxTokens}`)).toEqual(["jsonl@64", "jsonl@256", "array@64"]);
    const rs = rows(cells, ["r1", "r2", "r3", "r4"]);
    expect(rs.map((r) => r.id)).toEqual(["r1", "r2", "r3", "r4"]);
    // The first repeat is the cell shown.
    expect(rs[0].cells.get(cols[1].key)?.f1).toBe(1);
    expect(rs[3].cells.size).toBe(0);
  });
  it("groups columns by provider, each provider's prompts in order", () => {
    const two = [
      cell("r1", "array", 64, { provider: "openai" }), cell("r1", "jsonl", 64, { provider: "openai" }),
      cell("r1", "jsonl", 64), cell("r1", "jsonl", 256, { provider: "openai", f1: 0.5 }), cell("r1", "jsonl", 256),
    ];
    const cols = columns(two, ["jsonl", "array"], ["local", "openai"]);
    expect(cols.map((c) => `${c.provider}/${c.prompt}@${c.maxTokens}`))
      .toEqual(["local/jsonl@64", "local/jsonl@256", "openai/jsonl@64", "openai/jsonl@256", "openai/array@64"]);
    expect(providerSpans(cols)).toEqual([{ provider: "local", span: 2 }, { provider: "openai", span: 3 }]);
    // The same prompt and budget on two providers are two cells of the row.
    const [r] = rows(two, ["r1"]);
    expect(r.cells.get(cols[3].key)?.f1).toBe(0.5);
    expect(r.cells.get(cols[1].key)?.f1).toBe(1);
  });
  it("sorts worst recall first, rows without figures last", () => {
    const rs = rows(cells, ["r1", "r2", "r3", "r4"]);
    expect(sortRows(rs, "worst-recall").map((r) => r.id)).toEqual(["r2", "r1", "r3", "r4"]);
    expect(sortRows(rs, "worst-f1").map((r) => r.id)).toEqual(["r2", "r1", "r3", "r4"]);
  });
  it("filters by status, drop reason and id", () => {
    const rs = rows(cells, ["r1", "r2", "r3", "r4"]);
    const f = { status: "all" as const, drop: "", text: "", type: "" };
    expect(filterRows(rs, { ...f, status: "cut" }).map((r) => r.id)).toEqual(["r1"]);
    expect(filterRows(rs, { ...f, status: "failed" }).map((r) => r.id)).toEqual(["r2"]);
    expect(filterRows(rs, { ...f, status: "pending" }).map((r) => r.id)).toEqual(["r4"]);
    expect(filterRows(rs, { ...f, status: "missed" }).map((r) => r.id)).toEqual(["r1"]);
    expect(filterRows(rs, { ...f, drop: "invalid_json" }).map((r) => r.id)).toEqual(["r3"]);
    expect(filterRows(rs, { ...f, text: "R2" }).map((r) => r.id)).toEqual(["r2"]);
    expect(filterRows(rs, { ...f, type: "relationship" }).map((r) => r.id)).toEqual(["r3"]);
    expect(recordTypes(cells)).toEqual(["definition", "relationship"]);
  });
  it("marks states and colours F1 from red to green", () => {
    expect(cellState(undefined)).toBe("pending");
    expect(cellState({ status: "submitted" } as CellLine)).toBe("awaited");
    expect(cellState(cells[1])).toBe("cut");
    expect(cellState(cells[3])).toBe("failed");
    expect(f1Colour(0)).toBe("hsl(0 70% 78%)");
    expect(f1Colour(1)).toBe("hsl(120 70% 78%)");
    expect(f1Colour(null)).toBe("#e5e7eb");
  });
});
