import { describe, expect, it } from "vitest";
import { batchCounts, batchLine, tallyLine, count, grouped, dropSummary, finishWords, parseBudgets, seconds, usd, runOutcome, runTokens, modelName, errorTitle, bytes, eta, setHome, tilde } from "./format";
import type { RunRow } from "../ipc/bindings/RunRow";

describe("format", () => {
  it("says where a batch stands", () => {
    const counts = { total: 4, processing: 1, succeeded: 2, errored: 0, expired: 1, canceled: 0 };
    expect(batchCounts(counts)).toBe("2 succeeded · 1 expired · 1 processing");
    expect(batchCounts(null)).toBe("no counts yet");
    expect(batchCounts({ ...counts, processing: 0, succeeded: 0, expired: 0 })).toBe("4 requests, none counted yet");
    const b = { id: 1, experiment: 7, provider: "openai", api: "openai" as const, endpoint: "/v1/chat/completions", remote_id: "batch_1", input_file: null,
      requests: 4, bytes: 900, state: "running" as const, remote_state: "in_progress", counts, created_at: 0, sent_at: 0, ended_at: null, folded_at: null, error: null };
    expect(batchLine(b)).toBe("openai: openai batch · 4 requests · with the provider (in_progress) · 2 succeeded · 1 expired · 1 processing");
    expect(batchLine({ ...b, api: "file", state: "ended", remote_state: null, input_file: "/tmp/in.jsonl", provider: "vllm" }))
      .toBe("vllm: batch file · 4 requests · ended, not folded yet · /tmp/in.jsonl");
    expect(tallyLine({ batches: 2, ended: 1, requests: 40, counts: { ...counts, succeeded: 30, processing: 10, expired: 0, total: 40 } }))
      .toBe("2 batches, 1 ended · 40 requests · 30 succeeded · 10 processing");
  });
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
