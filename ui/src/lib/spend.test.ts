import { describe, expect, it } from "vitest";
import { onThisMachine, repairQuestion } from "./spend";
import type { ProviderInfo } from "../ipc/bindings/ProviderInfo";
import type { RunOptions } from "../ipc/bindings/RunOptions";

const options = (provider: string, maxRequests = 10): RunOptions => ({
  provider, model: null, maxTokens: 512, constrain: true, temperature: 0, seed: null, gpuLayers: "auto",
  maxRequests, maxRunTokens: 100000,
});
const provider = (name: string, baseUrl: string) => ({ name, baseUrl } as ProviderInfo);
const providers = [provider("openai", "https://api.openai.com/v1"), provider("mine", "http://127.0.0.1:8080/v1")];

describe("asking before a repair loop on a paid provider", () => {
  it("asks for a repairing prompt on a cloud provider, naming the ceilings", () => {
    const q = repairQuestion(3, options("openai"), providers);
    expect(q).toContain("up to 3 paid requests");
    expect(q).toContain("100,000 tokens");
    expect(repairQuestion(3, options("openai", 2), providers)).toContain("up to 2 paid requests");
  });
  it("never asks for a local model, a server on this machine, or a prompt without repair", () => {
    expect(repairQuestion(3, options("local"), providers)).toBeNull();
    expect(repairQuestion(3, options("mine"), providers)).toBeNull();
    expect(repairQuestion(null, options("openai"), providers)).toBeNull();
    expect(repairQuestion(1, options("openai"), providers)).toBeNull();
    expect(repairQuestion(3, options("openai", 1), providers)).toBeNull();
  });
  it("knows which hosts are this machine", () => {
    expect(onThisMachine("http://localhost:1/v1")).toBe(true);
    expect(onThisMachine("http://[::1]:1/v1")).toBe(true);
    expect(onThisMachine("http://10.0.0.2/v1")).toBe(false);
    expect(onThisMachine("not a url")).toBe(false);
  });
});
