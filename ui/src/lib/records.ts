// Records as fields: the columns of a table of extracted objects, from the prompt's schema (one
// table per branch of a `oneOf`/`anyOf` union, told apart by its `type` constant) and, for keys
// the schema does not name, from the objects themselves.

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v != null && typeof v === "object" && !Array.isArray(v);

/** One branch's records: its `type` value (null: the objects have none), columns and rows. */
export interface RecordGroup {
  type: string | null;
  columns: string[];
  /** Each row's index among all the objects (1-based numbering is the view's). */
  /** Objects that are not JSON objects (a bare string, a number) have one column: "value". */
  rows: { index: number; object: Json }[];
}

/** The discriminator every branch names, when the schema is a union told apart by `type`. */
const DISCRIMINATOR = "type";

/** The item schema of a prompt's schema: an array's `items`, or the schema itself. */
function itemSchema(schema: unknown): Json | null {
  if (!isObject(schema)) return null;
  if (schema.type === "array" && isObject(schema.items)) return schema.items;
  return schema;
}

/** The value a branch's `type` property is fixed to (`const`, or a one-value `enum`). */
function branchType(branch: Json): string | null {
  const props = isObject(branch.properties) ? branch.properties : null;
  const t = props && isObject(props[DISCRIMINATOR]) ? (props[DISCRIMINATOR] as Json) : null;
  if (!t) return null;
  if (typeof t.const === "string") return t.const;
  if (Array.isArray(t.enum) && t.enum.length === 1 && typeof t.enum[0] === "string") return t.enum[0];
  return null;
}

/** Each branch's columns by its `type` value (`""`: a schema with no union), in schema order. */
export function schemaColumns(schema: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const item = itemSchema(schema);
  if (!item) return out;
  const branches = [item.oneOf, item.anyOf].find(Array.isArray) as unknown[] | undefined;
  // In a union the discriminator is each table's title, not a column.
  const keys = (s: Json) => (isObject(s.properties) ? Object.keys(s.properties).filter((k) => !branches || k !== DISCRIMINATOR) : []);
  if (branches) {
    for (const b of branches) {
      if (!isObject(b)) continue;
      const t = branchType(b);
      if (t != null) out.set(t, [...keys(item), ...keys(b).filter((k) => !keys(item).includes(k))]);
    }
  }
  if (!out.size) out.set("", keys(item));
  return out;
}

/** The schema from a draft's or a prompt file's JSON text (null when it has none or is broken). */
export function parseSchema(text: string | null | undefined, fromPromptFile = false): unknown {
  if (!text?.trim()) return null;
  try {
    const v = JSON.parse(text);
    return fromPromptFile ? (isObject(v) ? (v.schema ?? v["object-schema"] ?? null) : null) : v;
  } catch {
    return null;
  }
}

/**
 * The objects in groups, one per `type` value in the order first seen, each with the schema's
 * columns for its branch and then any other keys its objects carry (so nothing is hidden).
 */
export function groupRecords(objects: unknown[], schema: unknown): RecordGroup[] {
  const columns = schemaColumns(schema);
  const union = [...columns.keys()].some((k) => k !== "");
  const groups = new Map<string, RecordGroup>();
  objects.forEach((o, index) => {
    const object: Json = isObject(o) ? o : { value: o };
    // Grouped by `type` when the schema is a union on it, or when there is no schema to go by.
    const typed = typeof object[DISCRIMINATOR] === "string" ? (object[DISCRIMINATOR] as string) : null;
    const t = typed != null && (union || !columns.get("")?.length) ? typed : "";
    let g = groups.get(t);
    if (!g) {
      g = { type: t || null, columns: [...(columns.get(t) ?? (union ? [] : columns.get("") ?? []))], rows: [] };
      groups.set(t, g);
    }
    for (const k of Object.keys(object)) if (!(k === DISCRIMINATOR && g.type != null) && !g.columns.includes(k)) g.columns.push(k);
    g.rows.push({ index, object });
  });
  return [...groups.values()];
}

/** A field's value as a table cell shows it: strings as they are, anything else as JSON. */
export function cellText(v: unknown): string {
  if (v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** Two records field by field: each key of either, with both values and whether they agree. */
export function fieldPairs(expected: unknown, extracted: unknown): { field: string; expected: string; extracted: string; same: boolean }[] {
  const a: Json = isObject(expected) ? expected : { value: expected };
  const b: Json = isObject(extracted) ? extracted : { value: extracted };
  const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !(k in a))];
  return keys.map((field) => ({
    field,
    expected: cellText(a[field]),
    extracted: cellText(b[field]),
    same: JSON.stringify(a[field]) === JSON.stringify(b[field]),
  }));
}
