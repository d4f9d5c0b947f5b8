// A compare's replies as they stream, a column per format: each column follows one cell (a
// prompt at a budget) of its prompt from its first text to its end, with every object its
// format has accepted so far (kerf-core's incremental parse, sent with the text: a JSONL reply's
// objects light up line by line, a JSON array's all at once when it closes). An ended cell stays
// in its column until another cell of that prompt sends text, so its final highlights are seen.
import type { CompareProgress } from "../ipc/bindings/CompareProgress";
import type { CellEnded } from "../ipc/bindings/CellEnded";
import type { CellText } from "../ipc/bindings/CellText";
import type { PlacedObject } from "../ipc/bindings/PlacedObject";

/** A reply as it streams, before its run is stored: what it is, its text, its objects so far. */
export interface LiveColumn {
  label: string;
  text: string;
  objects: PlacedObject[];
  /** Set once its reply has ended. */
  ended: CellEnded | null;
}

interface LiveCell extends LiveColumn { cell: number; prompt: number }

export class LiveCompare {
  private cells = new Map<number, LiveCell>();
  private shown: (number | null)[];

  constructor(private columns: number, private labelOf: (t: Pick<CellText, "prompt" | "maxTokens" | "constrained">) => string) {
    this.shown = new Array(columns).fill(null);
  }

  /** One progress message taken in; true when a column shown changed. */
  heard(p: CompareProgress): boolean {
    if (p.text) return this.text(p.text);
    if (p.ended) return this.end(p.ended);
    return false;
  }

  /** What each column shows (null: no cell of its prompt has sent anything yet). */
  view(): (LiveColumn | null)[] {
    return this.shown.map((c) => {
      const cell = c == null ? undefined : this.cells.get(c);
      return cell ? { label: cell.label, text: cell.text, objects: cell.objects, ended: cell.ended } : null;
    });
  }

  private cell(at: number, prompt: number, label: string): LiveCell {
    let c = this.cells.get(at);
    if (!c) { c = { cell: at, prompt, label, text: "", objects: [], ended: null }; this.cells.set(at, c); }
    return c;
  }

  private text(t: CellText): boolean {
    if (t.prompt >= this.columns) return false;
    const c = this.cell(t.cell, t.prompt, this.labelOf(t));
    c.text += t.text;
    for (const o of t.objects) c.objects.push(o);
    const was = this.shown[t.prompt];
    const showing = was == null ? undefined : this.cells.get(was);
    if (!showing || showing.ended) this.follow(t.prompt, t.cell);
    return this.shown[t.prompt] === t.cell;
  }

  private end(e: CellEnded): boolean {
    const c = this.cells.get(e.cell);
    if (!c || e.prompt >= this.columns) return false;
    for (const o of e.objects) c.objects.push(o);
    c.ended = e;
    return this.shown[e.prompt] === e.cell;
  }

  /** Column `prompt` follows cell `at`; ended cells no column shows are let go. */
  private follow(prompt: number, at: number) {
    this.shown[prompt] = at;
    for (const [k, c] of this.cells) if (c.ended && !this.shown.includes(k)) this.cells.delete(k);
  }
}
