import { describe, expect, it } from "vitest";
import { cellText, fieldPairs, groupRecords, parseSchema, schemaColumns } from "./records";

// The shipped agent-kg-extract's item schema, in short: a union on `type`.
const union = {
  type: "object",
  oneOf: [
    { title: "Definition", properties: { type: { const: "definition" }, entity: { type: "string" }, definition: { type: "string" } } },
    { title: "Relationship", properties: { type: { enum: ["relationship"] }, subject: {}, predicate: {}, object: {}, "object-entity": { type: "boolean" } } },
  ],
};

describe("records as fields", () => {
  it("takes each union branch's columns from the schema, in its order", () => {
    const cols = schemaColumns(union);
    expect(cols.get("definition")).toEqual(["entity", "definition"]);
    expect(cols.get("relationship")).toEqual(["subject", "predicate", "object", "object-entity"]);
    // A JSON-array prompt's schema is an array of the same items.
    expect(schemaColumns({ type: "array", items: union }).get("definition")).toEqual(["entity", "definition"]);
  });

  it("groups objects by their branch, with columns the schema does not name at the end", () => {
    const groups = groupRecords([
      { type: "relationship", subject: "a", predicate: "is", object: "b", "object-entity": true },
      { type: "definition", entity: "a", definition: "first" },
      { type: "definition", entity: "b", definition: "second", note: "extra" },
    ], union);
    expect(groups.map((g) => [g.type, g.rows.map((r) => r.index)])).toEqual([["relationship", [0]], ["definition", [1, 2]]]);
    expect(groups[1].columns).toEqual(["entity", "definition", "note"]);
    expect(groups[0].columns).toEqual(["subject", "predicate", "object", "object-entity"]);
  });

  it("keeps a plain schema's own `type` field as a column, and groups by `type` when there is no schema", () => {
    const plain = { type: "object", properties: { type: { type: "string" }, name: { type: "string" } } };
    const g = groupRecords([{ type: "city", name: "Oslo" }], plain);
    expect(g).toHaveLength(1);
    expect([g[0].type, g[0].columns]).toEqual([null, ["type", "name"]]);
    const bare = groupRecords([{ type: "x", a: 1 }, { type: "y", b: 2 }, "loose"], null);
    expect(bare.map((x) => [x.type, x.columns])).toEqual([["x", ["a"]], ["y", ["b"]], [null, ["value"]]]);
  });

  it("reads the schema from a draft or from a prompt file", () => {
    expect(parseSchema('{"type":"object"}')).toEqual({ type: "object" });
    expect(parseSchema('{"prompt":"p","object-schema":{"type":"string"}}', true)).toEqual({ type: "string" });
    expect(parseSchema("{broken")).toBeNull();
    expect(parseSchema("")).toBeNull();
  });

  it("pairs two records field by field", () => {
    expect(fieldPairs({ entity: "a", n: 1 }, { entity: "a", n: 2, extra: [1] })).toEqual([
      { field: "entity", expected: "a", extracted: "a", same: true },
      { field: "n", expected: "1", extracted: "2", same: false },
      { field: "extra", expected: "", extracted: "[1]", same: false },
    ]);
    expect(cellText(true)).toBe("true");
  });
});
