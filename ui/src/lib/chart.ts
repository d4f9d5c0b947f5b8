// Chart data for the Compare screen and its SVG export. Pure functions: unit-tested.
import type { CompareRow } from "../ipc/bindings/CompareRow";
import type { SweepCurve } from "../ipc/bindings/SweepCurve";

export interface Series {
  label: string;
  /** x values ascending; y values (null = no point). */
  xs: number[];
  ys: (number | null)[];
}

/** Objects recovered vs budget: one series per prompt and constraint pass. */
export function budgetSeries(rows: CompareRow[]): { xs: number[]; series: Series[] } {
  const xs = [...new Set(rows.map((r) => r.maxTokens))].sort((a, b) => a - b);
  const keys = [...new Set(rows.map((r) => seriesKey(r)))];
  const series = keys.map((label) => ({
    label,
    xs,
    ys: xs.map((x) => rows.find((r) => seriesKey(r) === label && r.maxTokens === x)?.objects ?? null),
  }));
  return { xs, series };
}

function seriesKey(r: { prompt: string; responseType: string; constrained: boolean }): string {
  return `${r.prompt} (${r.responseType}${r.constrained ? ", constrained" : ""})`;
}

/**
 * Recovered objects vs fraction of the reply emitted, for each sweep, on one shared x grid
 * (0..1). A sweep is a step function: the count at x is the last point at or before x.
 */
export function sweepSeries(sweeps: SweepCurve[], steps = 200): { xs: number[]; series: Series[] } {
  const xs = Array.from({ length: steps + 1 }, (_, i) => i / steps);
  const series = sweeps.map((s) => ({
    // A reply that did not end on its own is labelled so: its curve stops where the budget did.
    label: s.cutByBudget ? `${seriesKey(s)}, cut by its budget` : seriesKey(s),
    xs,
    ys: xs.map((x) => stepAt(s, x)),
  }));
  return { xs, series };
}

/** Objects recovered when the reply is cut after `fraction` of its units. */
export function stepAt(s: SweepCurve, fraction: number): number {
  const unit = Math.floor(fraction * s.length + 1e-9);
  let n = 0;
  for (const [u, c] of s.points) {
    if (u <= unit) n = c;
    else break;
  }
  return n;
}

const COLORS = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2"];
export const color = (i: number) => COLORS[i % COLORS.length];

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** A standalone SVG of line series (what "Save SVG" writes). */
export function toSvg(title: string, xLabel: string, yLabel: string, series: Series[], width = 720, height = 400): string {
  const m = { l: 56, r: 16, t: 36, b: 48 + 18 * series.length };
  const all = series.flatMap((s) => s.xs);
  const ys = series.flatMap((s) => s.ys.filter((y): y is number => y != null));
  const [x0, x1] = [Math.min(...all, 0), Math.max(...all, 1)];
  const y1 = Math.max(1, ...ys);
  const W = width - m.l - m.r, H = height - m.t - m.b;
  const px = (x: number) => m.l + ((x - x0) / (x1 - x0 || 1)) * W;
  const py = (y: number) => m.t + H - (y / y1) * H;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  out.push(`<text x="${m.l}" y="20" font-size="14" font-weight="bold">${esc(title)}</text>`);
  out.push(`<line x1="${m.l}" y1="${m.t + H}" x2="${m.l + W}" y2="${m.t + H}" stroke="#333"/>`);
  out.push(`<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${m.t + H}" stroke="#333"/>`);
  for (let i = 0; i <= 4; i++) {
    const yv = (y1 * i) / 4, xv = x0 + ((x1 - x0) * i) / 4;
    out.push(`<text x="${m.l - 6}" y="${py(yv) + 4}" text-anchor="end">${+yv.toFixed(1)}</text>`);
    out.push(`<text x="${px(xv)}" y="${m.t + H + 16}" text-anchor="middle">${+xv.toFixed(2)}</text>`);
  }
  out.push(`<text x="${m.l + W / 2}" y="${m.t + H + 34}" text-anchor="middle">${esc(xLabel)}</text>`);
  out.push(`<text transform="translate(14 ${m.t + H / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const pts = s.xs.map((x, j) => (s.ys[j] == null ? null : `${px(x).toFixed(1)},${py(s.ys[j]!).toFixed(1)}`)).filter(Boolean);
    out.push(`<polyline fill="none" stroke="${color(i)}" stroke-width="2" points="${pts.join(" ")}"/>`);
    const ly = m.t + H + 52 + 18 * i;
    out.push(`<line x1="${m.l}" y1="${ly - 4}" x2="${m.l + 18}" y2="${ly - 4}" stroke="${color(i)}" stroke-width="3"/>`);
    out.push(`<text x="${m.l + 24}" y="${ly}">${esc(s.label)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n");
}
