import { describe, expect, it, beforeEach } from "vitest";
import { isDirty, keepDraft, keptDraft, forgetDraft } from "./state.svelte";
import type { PromptDoc } from "../ipc/bindings/PromptDoc";

const doc: PromptDoc = {
  path: "/p/kg.json", id: "kg", text: "{\"prompt\": \"hi\"}",
  draft: { base: "{\"prompt\": \"hi\"}", template: "hi", system: "", schema: "", responseType: "text", post: "" },
  sampleInput: null, inputVariable: "text", repairAttempts: null,
};

describe("unsaved drafts", () => {
  beforeEach(() => localStorage.clear());
  it("knows when a draft differs from its file", () => {
    expect(isDirty(doc, { ...doc.draft })).toBe(false);
    expect(isDirty(doc, { ...doc.draft, template: "hello" })).toBe(true);
  });
  it("keeps an unsaved draft and offers it back, and forgets it once it matches", () => {
    keepDraft(localStorage, doc, { ...doc.draft, template: "hello" });
    expect(keptDraft(localStorage, doc)?.draft.template).toBe("hello");
    keepDraft(localStorage, doc, { ...doc.draft });
    expect(keptDraft(localStorage, doc)).toBeNull();
  });
  it("does not offer a draft made from another version of the file", () => {
    keepDraft(localStorage, doc, { ...doc.draft, template: "hello" });
    expect(keptDraft(localStorage, { ...doc, text: "{\"prompt\": \"changed elsewhere\"}" })).toBeNull();
    forgetDraft(localStorage, doc.path);
    expect(localStorage.length).toBe(0);
  });
  it("survives a damaged entry", () => {
    localStorage.setItem("kerf.draft:/p/kg.json", "{not json");
    expect(keptDraft(localStorage, doc)).toBeNull();
    expect(localStorage.length).toBe(0);
  });
});
