import { describe, expect, it } from "vitest";
import { count, grouped, dropSummary, finishWords, parseBudgets, seconds, usd, runOutcome, runTokens, modelName, errorTitle, bytes, eta, setHome, tilde } from "./format";
import type { RunRow } from "../ipc/bindings/RunRow";

describe("format", () => {
  it("groups thousands whatever the locale", () => {
    expect(grouped(0)).toBe("0");
    expect(grouped(999)).toBe("999");
    expect(grouped(2004)).toBe("2,004");
    expect(grouped(1234567)).toBe("1,234,567");
  });
  it("reads durations as people do", () => {
    expect(seconds(0.0423)).toBe("42 ms");
    expect(seconds(3.14159)).toBe("3.14 s");
    expect(seconds(42.2)).toBe("42.2 s");
    expect(seconds(125)).toBe("2 min 5 s");
    expect(seconds(null)).toBe("–");
  });
  it("prices small and large", () => {
    expect(usd(0.000123)).toBe("$0.00012");
    expect(usd(1.5)).toBe("$1.50");
    expect(usd(null)).toBe("–");
  });
  it("counts drops by kind in order of first appearance", () => {
    expect(dropSummary([{ kind: "schema" }, { kind: "truncated" }, { kind: "schema" }])).toBe("2 schema, 1 truncated");
    expect(dropSummary([])).toBe("");
    expect(count(1, "object")).toBe("1 object");
    expect(count(3, "object")).toBe("3 objects");
  });
  it("says what a finish reason means", () => {
    expect(finishWords("length")).toBe("hit max_tokens");
    expect(finishWords("stop")).toBe("finished");
  });
  it("parses budgets strictly", () => {
    expect(parseBudgets("128, 64 64,32")).toEqual([32, 64, 128]);
    expect(parseBudgets("64, x")).toBeNull();
    expect(parseBudgets("0")).toBeNull();
    expect(parseBudgets("  ")).toBeNull();
  });
  it("summarises a stored run", () => {
    const row = { status: "truncated", objects: 4, dropped: 1, truncated: true, error: null } as RunRow;
    expect(runOutcome(row)).toBe("4 objects, 1 dropped, cut off");
    expect(runOutcome({ ...row, status: "error", error: "boom" })).toBe("error: boom");
    expect(runTokens({ promptTokens: 1204, completionTokens: 310 })).toBe("1,204 → 310");
    expect(runTokens({ promptTokens: null, completionTokens: 12 })).toBe("? → 12");
    expect(runTokens({ promptTokens: null, completionTokens: null })).toBe("–");
    expect(modelName("/a/b/SmolLM2.gguf")).toBe("SmolLM2.gguf");
    expect(bytes(98_000_000)).toBe("98 MB");
    expect(bytes(1_930_000_000)).toBe("1.9 GB");
    expect(bytes(512)).toBe("512 B");
    setHome("/home/ada/");
    expect(tilde("/home/ada/.local/share/kerf/prompts/x.json exists; /home/adab/y stays")).toBe("~/.local/share/kerf/prompts/x.json exists; /home/adab/y stays");
    setHome(null);
    expect(tilde("/home/ada/x")).toBe("/home/ada/x");
    expect(eta(0, 10, 5)).toBe("");
    expect(eta(5, 10, 50)).toBe("about 50 s left");
    expect(eta(1, 2, 8.2)).toBe("about 9 s left");
    expect(eta(1, 10, 40)).toBe("about 6 min 0 s left");
    expect(eta(10, 10, 40)).toBe("0 s left");
    expect(errorTitle({ code: "schema_invalid", message: "" })).toBe("The schema is not valid");
  });
});
