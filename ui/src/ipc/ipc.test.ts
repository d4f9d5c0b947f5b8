import { afterEach, describe, expect, it } from "vitest";
import { mockIPC, clearMocks } from "@tauri-apps/api/mocks";
import { api, asApiError } from "./index";
import type { RunMessage } from "./bindings/RunMessage";

afterEach(() => clearMocks());

describe("the IPC client", () => {
  it("calls commands by their Rust names with camelCase arguments", async () => {
    const seen: [string, unknown][] = [];
    mockIPC((cmd, args) => {
      seen.push([cmd, args]);
      if (cmd === "history_diff") return { a: 1, b: 2 };
    });
    await api.historyDiff(1, 2);
    await api.historyTag(3, "good", false);
    expect(seen[0]).toEqual(["history_diff", { a: 1, b: 2 }]);
    expect(seen[1]).toEqual(["history_tag", { run: 3, tag: "good", remove: false }]);
  });

  it("turns every failure into an ApiError with a code", async () => {
    mockIPC(() => { throw { code: "not_found", message: "no run 9 in the history" }; });
    await expect(api.historyDetail(9)).rejects.toEqual({ code: "not_found", message: "no run 9 in the history" });
    expect(asApiError("Command foo not allowed by ACL")).toEqual({ code: "internal", message: "Command foo not allowed by ACL" });
    expect(asApiError(new Error("x")).code).toBe("internal");
  });

  it("streams a run's messages through its channel and resolves with the finished run", async () => {
    mockIPC((cmd, args) => {
      if (cmd !== "run_start") return;
      const a = args as { onEvent: { id: number } };
      // What the Rust side does: send on the channel, then return.
      const send = (m: RunMessage, index: number) =>
        (window as any).__TAURI_INTERNALS__.runCallback(a.onEvent.id, { message: m, index });
      send({ kind: "text", text: "{\"a\":1}\n" }, 0);
      send({ kind: "objects", objects: [{ a: 1 }], dropped: [] }, 1);
      return { historyId: 7, objects: [{ a: 1 }] };
    });
    const got: RunMessage[] = [];
    const done = await api.runStart("run-1",
      { draft: { base: "", template: "", system: "", schema: "", responseType: "jsonl", post: "" }, path: null, input: "", vars: {} },
      { provider: "local", model: null, maxTokens: 8, constrain: true, temperature: 0, seed: null, gpuLayers: "auto", maxRequests: 10, maxRunTokens: 100000 },
      (m) => got.push(m));
    expect(done.historyId).toBe(7);
    await new Promise((r) => setTimeout(r, 0));
    expect(got.map((m) => m.kind)).toEqual(["text", "objects"]);
  });
});
