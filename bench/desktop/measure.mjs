// Measures the desktop app in its real window (run by bench/desktop/run under Xvfb):
//   1. start: from the kerf-desktop process's start (its /proc start time) to the app's first
//      paint and to interactive (the prompt list drawn), over REPS fresh launches;
//   2. memory: resident (RSS) and proportional (PSS) memory of the app and its WebKit processes,
//      at idle and after a run that streams 1,000 objects;
//   3. streaming: the gaps between animation frames while those 1,000 objects stream in from a
//      loopback OpenAI-compatible server, and how many table rows the DOM holds meanwhile;
//   4. scrubber: a compare of that JSONL reply and the same 1,000 objects as a JSON array, side
//      by side, and the gaps between frames while the pointer drags the scrubber across both;
//   5. evaluate: frames while a 3,000-cell eval (16 in flight) fills the matrix, then the
//      500-row × 6-cell matrix scrolled and filtered, and cells opened.
// Prints a table and writes bench/desktop/results.json. KERF_MEASURE_ONLY=scrubber (or evaluate)
// measures only 4 (or 5), one launch, keeping the other figures in results.json.
import { remote } from "webdriverio";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { kgLines, startOpenAI } from "../../tests/e2e/openai-loopback.mjs";
import { startDriver } from "../../tests/e2e/driver.mjs";

const app = process.env.KERF_DESKTOP_BIN;
const reps = Number(process.env.REPS ?? 5);
const OBJECTS = 1000;
const results = process.env.KERF_BENCH_RESULTS;
const only = process.env.KERF_MEASURE_ONLY;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- processes --------------------------------------------------------------------------------
const TICKS = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim());
function stat(pid) {
  const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return { ppid: Number(rest[1]), start: Number(rest[19]), cpu: Number(rest[11]) + Number(rest[12]) };
}
/** The process's start as epoch milliseconds (boot time + its start ticks). */
function startedAt(pid) {
  const uptime = Number(fs.readFileSync("/proc/uptime", "utf8").split(" ")[0]);
  const boot = Date.now() - uptime * 1000;
  return boot + (stat(pid).start / TICKS) * 1000;
}
/**
 * The app just launched: the newest kerf-desktop. The one a section before closed can still be
 * shutting down when the next launches (its session is ended, its process not yet gone); it is
 * never the one measured. Nor is a worker the app started (a prompt's preview renders in a
 * kerf-desktop of its own, started after the app: taken for it, the start came out negative).
 */
function appPid() {
  const pids = fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number);
  const isApp = (p) => { try { return fs.readFileSync(`/proc/${p}/comm`, "utf8").trim() === "kerf-desktop"; } catch { return false; } };
  const parent = (p) => { try { return stat(p).ppid; } catch { return -1; } };
  const mine = pids.filter((p) => isApp(p) && !isApp(parent(p)));
  if (mine.length === 0) throw new Error("no kerf-desktop is running");
  const started = (p) => { try { return stat(p).start; } catch { return -1; } };
  return mine.reduce((a, b) => (started(b) > started(a) ? b : a));
}
function tree(root) {
  const pids = fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number);
  const parent = new Map();
  for (const p of pids) { try { parent.set(p, stat(p).ppid); } catch {} }
  const out = [root];
  for (let grew = true; grew;) {
    grew = false;
    for (const [p, pp] of parent) if (out.includes(pp) && !out.includes(p)) { out.push(p); grew = true; }
  }
  return out;
}
/** CPU seconds used so far by the app's processes, by name. */
function cpu(root) {
  const out = {};
  for (const pid of tree(root)) {
    try { const c = fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim(); out[c] = (out[c] ?? 0) + stat(pid).cpu / TICKS; } catch {}
  }
  return out;
}
function memory(root) {
  const procs = [];
  for (const pid of tree(root)) {
    try {
      const comm = fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
      const pss = Number(/Pss:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);
      procs.push({ pid, comm, rssMiB: rss / 1024, pssMiB: pss / 1024 });
    } catch {}
  }
  const sum = (k) => procs.reduce((a, p) => a + p[k], 0);
  return { rssMiB: sum("rssMiB"), pssMiB: sum("pssMiB"), processes: procs };
}

// --- the window -------------------------------------------------------------------------------
async function launch(args = []) {
  const browser = await remote({
    hostname: "127.0.0.1", port: driver.port, logLevel: "error",
    capabilities: { browserName: "wry", "wdio:enforceWebDriverClassic": true, "tauri:options": { application: app, args } },
  });
  await browser.waitUntil(async () => (await browser.execute(() => document.body.dataset.ready)) === "true",
    { timeout: 30000, interval: 20, timeoutMsg: "the window did not become ready" });
  return browser;
}
async function marks(browser) {
  await browser.waitUntil(async () => (await browser.execute(() => performance.getEntriesByName("kerf-interactive").length)) > 0,
    { timeout: 10000, interval: 20 });
  return browser.execute(() => ({
    origin: performance.timeOrigin,
    paint: performance.getEntriesByName("kerf-first-paint")[0]?.startTime ?? null,
    fcp: performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint")?.startTime ?? null,
    interactive: performance.getEntriesByName("kerf-interactive")[0].startTime,
  }));
}
const $t = (browser, id) => browser.$(`[data-testid="${id}"]`);
const q = (xs, f) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(f * s.length))]; };
const median = (xs) => q(xs, 0.5);

// Free ports of its own: a tauri-driver beside it (an E2E run) is never driven instead.
const driver = await startDriver({ quiet: true, port: 0 });

const watchFrames = (browser) => browser.execute(() => {
  const w = window;
  w.__gaps = []; w.__stop = false;
  let last = performance.now();
  const tick = (t) => { w.__gaps.push(t - last); last = t; if (!w.__stop) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
});
const stopFrames = (browser) => browser.execute(() => { window.__stop = true; return window.__gaps.slice(1); });

/**
 * 4. The scrubber on replies of 1,000 objects: the Compare screen runs the JSONL prompt and its
 * array twin on `provider` (a loopback server answering the JSONL reply, then the array), shows
 * them side by side, and the pointer drags the scrubber from one end to the other.
 */
async function scrubber(browser, provider) {
  const lines = kgLines(OBJECTS);
  const replies = [lines.join("\n") + "\n", "[\n" + lines.join(",\n") + "\n]\n"];
  const server = await startOpenAI({ reply: replies[0], chunk: 4096 });
  fs.writeFileSync(path.join(process.env.KERF_CONFIG_DIR, "providers.json"), JSON.stringify({ providers: [
    { name: provider, kind: "openai", base_url: server.url, model: "loopback", no_key: true, structured: "none" }] }));
  await (await $t(browser, "nav-providers")).click();
  await browser.waitUntil(async () => (await browser.$$('[data-testid="provider-row"]')).length === 1, { timeout: 5000 });
  await (await $t(browser, `use-${provider}`)).click();
  await (await $t(browser, "max-tokens")).setValue("60000");
  await (await $t(browser, "nav-compare")).click();
  const prompts = process.env.KERF_PROMPTS_DIR;
  await (await $t(browser, "compare-a")).selectByAttribute("value", path.join(prompts, "agent-kg-extract.json"));
  await (await $t(browser, "compare-b")).selectByAttribute("value", path.join(prompts, "agent-kg-extract-array.json"));
  await (await $t(browser, "budgets")).setValue("60000");
  await (await $t(browser, "compare-constrain")).selectByAttribute("value", "none");
  // One cell at a time: the JSONL prompt's, then the array's (each request takes the reply set
  // when it arrives).
  await (await $t(browser, "compare-concurrency")).setValue("1");
  await (await $t(browser, "compare-run")).click();
  await browser.waitUntil(async () => server.requests.length >= 1, { timeout: 60000, interval: 5 });
  server.options.reply = replies[1];
  const t = Date.now();
  await browser.waitUntil(async () => (await (await $t(browser, "compare-sbs")).getAttribute("data-loaded")) === "true",
    { timeout: 180000, interval: 100, timeoutMsg: "the side-by-side view did not appear" });
  const ready = (Date.now() - t) / 1000;
  await server.close();
  const counts = await browser.execute(() => ["a", "b"].map((n) => Number(document.querySelector(`[data-testid="compare-sbs-${n}-kept"]`).dataset.count)));
  const box = await browser.execute(() => {
    const r = document.querySelector('[data-testid="compare-sbs-scrubber"]').getBoundingClientRect();
    r.top < 0 || r.bottom > innerHeight ? document.querySelector('[data-testid="compare-sbs-scrubber"]').scrollIntoView({ block: "center" }) : null;
    const s = document.querySelector('[data-testid="compare-sbs-scrubber"]').getBoundingClientRect();
    return { x: s.left, y: s.top + s.height / 2, w: s.width, max: Number(document.querySelector('[data-testid="compare-sbs-scrubber"]').max) };
  });
  // Where the cut is at each frame, to see it follow the pointer.
  await browser.execute(() => {
    const w = window;
    w.__ks = [];
    // Runs until stopFrames: not stopped already by the flag an earlier section left set (in a
    // full run, the streaming section's), which ended this loop after one frame.
    w.__stop = false;
    const cut = document.querySelector('[data-testid="compare-sbs-cut"]');
    const tick = () => { w.__ks.push(Number(cut.dataset.k)); if (!w.__stop) requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
  });
  // From the start: the drag follows the pointer from token 0 to the last.
  await (await $t(browser, "compare-sbs-scrubber")).click();
  await browser.keys(["Home"]);
  await browser.waitUntil(async () => (await (await $t(browser, "compare-sbs-cut")).getAttribute("data-k")) === "0", { timeout: 10000 });
  await sleep(500);
  // The page's own work for each step (the input event to the end of its updates, a forced
  // layout included): what the frames leave to painting.
  await browser.execute(() => {
    const w = window;
    w.__work = [];
    document.querySelector('[data-testid="compare-sbs-scrubber"]').addEventListener("input", () => {
      const t = performance.now();
      setTimeout(() => w.__work.push(performance.now() - t), 0);
    }, { capture: true });
  });
  await watchFrames(browser);
  const STEPS = 120;
  const drag = browser.action("pointer", { parameters: { pointerType: "mouse" } })
    .move({ x: Math.round(box.x + 1), y: Math.round(box.y), origin: "viewport" }).down({ button: 0 });
  for (let i = 1; i <= STEPS; i++) drag.move({ x: Math.round(box.x + 1 + ((box.w - 2) * i) / STEPS), y: Math.round(box.y), origin: "viewport", duration: 20 });
  const dragStart = Date.now();
  await drag.up({ button: 0 }).perform();
  const dragSeconds = (Date.now() - dragStart) / 1000;
  await sleep(300);
  const gaps = await stopFrames(browser);
  const ks = await browser.execute(() => window.__ks);
  const work = await browser.execute(() => window.__work);
  const positions = new Set(ks).size;
  const end = ks.at(-1);
  console.log(`scrubber: two replies of ${OBJECTS} objects (${counts.join(" and ")} kept at the end), ${box.max} tokens; ready ${ready.toFixed(1)} s after the first request`);
  console.log(`scrubber drag: ${STEPS} pointer moves in ${dragSeconds.toFixed(1)} s, ${gaps.length} frames, the cut at ${positions} places, ending at ${end} of ${box.max}`);
  console.log(`scrubber: ${work.length} input events, the page's work for each: median ${median(work).toFixed(1)} ms, max ${Math.max(...work).toFixed(1)} ms`);
  console.log(`scrubber frame gaps: median ${median(gaps).toFixed(1)} ms, p99 ${q(gaps, 0.99).toFixed(1)} ms, max ${Math.max(...gaps).toFixed(1)} ms, over 50 ms: ${gaps.filter((g) => g > 50).length}`);
  return {
    objects: OBJECTS, kept: counts, tokens: box.max, readySeconds: Number(ready.toFixed(1)),
    inputEvents: work.length, workMedianMs: Number(median(work).toFixed(1)), workMaxMs: Number(Math.max(...work).toFixed(1)),
    pointerMoves: STEPS, dragSeconds: Number(dragSeconds.toFixed(1)), frames: gaps.length, cutPlaces: positions, endedAt: end,
    frameGapMedianMs: Number(median(gaps).toFixed(1)), frameGapP99Ms: Number(q(gaps, 0.99).toFixed(1)),
    frameGapMaxMs: Number(Math.max(...gaps).toFixed(1)), framesOver50Ms: gaps.filter((g) => g > 50).length,
  };
}

// 5. Evaluate: a 500-row eval of 2 prompts × 3 budgets (3,000 cells) on a loopback server with
// 16 requests in flight, its matrix filling in; then the 500 × 6 matrix scrolled and filtered,
// and cells opened. The window opens at Evaluate with the dataset (`--evaluate`), as npm start
// opens it.
async function evaluateScreen() {
  const ROWS = 500;
  const dataset = path.join(process.env.KERF_CONFIG_DIR, "..", "bench-500.jsonl");
  const docs = [
    "Photosynthesis is the process by which green plants turn light energy into chemical energy.",
    "Ada Lovelace wrote the first program for the Analytical Engine designed by Charles Babbage.",
  ];
  fs.writeFileSync(dataset, Array.from({ length: ROWS }, (_, i) => JSON.stringify({
    id: `doc-${String(i).padStart(3, "0")}`, input: docs[i % 2],
    expected: [{ type: "definition", entity: i % 2 ? "Ada Lovelace" : "Photosynthesis", definition: "x" }],
  })).join("\n") + "\n");
  const server = await startOpenAI({ reply: kgLines(6).join("\n") + "\n", chunk: 200, perEventMs: 0 });
  fs.writeFileSync(path.join(process.env.KERF_CONFIG_DIR, "providers.json"), JSON.stringify({ providers: [
    { name: "bench", kind: "openai", base_url: server.url, model: "loopback", no_key: true, structured: "none" }] }));
  const browser = await launch(["--evaluate", dataset]);
  const pid = appPid();
  await (await $t(browser, "nav-providers")).click();
  await browser.waitUntil(async () => (await browser.$$('[data-testid="provider-row"]')).length === 1, { timeout: 5000 });
  await (await $t(browser, "use-bench")).click();
  await (await $t(browser, "nav-evaluate")).click();
  await browser.waitUntil(async () => new RegExp(`^${ROWS} row`, "i").test(await (await $t(browser, "eval-preview")).getText()), { timeout: 30000, timeoutMsg: "the dataset's preview" });
  await (await $t(browser, "eval-budgets")).setValue("64, 256, 1024");
  await (await $t(browser, "eval-constrain")).selectByAttribute("value", "none");
  await (await $t(browser, "eval-concurrency")).setValue("16");
  // 3,000 requests: more than are sent unasked, so the window asks first.
  await (await $t(browser, "eval-run")).click();
  await (await $t(browser, "eval-confirm")).waitForExist({ timeout: 60000 });
  await watchFrames(browser);
  const t = Date.now();
  const cpuBefore = cpu(pid);
  await (await $t(browser, "eval-confirm")).click();
  let maxInFlight = 0;
  await browser.waitUntil(async () => {
    maxInFlight = Math.max(maxInFlight, server.inFlight ?? 0);
    return (await browser.$('[data-testid="eval-title"]').isExisting()) && !(await (await $t(browser, "eval-cancel")).isEnabled());
  }, { timeout: 900000, interval: 500, timeoutMsg: "the 3,000-cell eval did not finish" });
  const evalSeconds = (Date.now() - t) / 1000;
  const fillGaps = await stopFrames(browser);
  const cpuAfter = cpu(pid);
  // The matrix draws the rows in view: its size is its rows × its columns.
  const cells = await browser.execute(() => Number(document.querySelector('[data-testid="eval-matrix"]').dataset.rows)
    * (document.querySelectorAll('[data-testid="eval-matrix"] thead th').length - 1));
  console.log(`eval: ${server.requests.length} requests, ${cells} cells in the matrix, ${evalSeconds.toFixed(1)} s, ${fillGaps.length} frames`);
  const worst = fillGaps.indexOf(Math.max(...fillGaps));
  console.log(`the longest frame: ${worst + 1} of ${fillGaps.length} (${fillGaps.slice(0, worst).reduce((a, b) => a + b, 0).toFixed(0)} ms after the start)`);
  console.log(`frame gaps while the matrix filled: median ${median(fillGaps).toFixed(1)} ms, p99 ${q(fillGaps, 0.99).toFixed(1)} ms, max ${Math.max(...fillGaps).toFixed(1)} ms, over 100 ms: ${fillGaps.filter((g) => g > 100).length}`);
  console.log(`CPU seconds during the eval: ${JSON.stringify(Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Number((v - (cpuBefore[k] ?? 0)).toFixed(1))])))}`);
  // Scroll the matrix top to bottom, 120 px a frame.
  await watchFrames(browser);
  await browser.executeAsync((done) => {
    const box = document.querySelector(".matrix-scroll");
    const step = () => { box.scrollTop += 120; if (box.scrollTop + box.clientHeight < box.scrollHeight - 1) requestAnimationFrame(step); else setTimeout(done, 100); };
    requestAnimationFrame(step);
  });
  const scrollGaps = await stopFrames(browser);
  // Filter: each change, from the input to the frame that shows it.
  const filterMs = [];
  for (const [id, value] of [["matrix-text", "doc-1"], ["matrix-text", ""], ["matrix-sort", "worst-f1"], ["matrix-status", "missed"], ["matrix-status", "all"], ["matrix-sort", "dataset"]]) {
    filterMs.push(await browser.executeAsync((id, value, done) => {
      const el = document.querySelector(`[data-testid="${id}"]`);
      const t0 = performance.now();
      el.value = value;
      el.dispatchEvent(new Event(el.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
      requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
    }, id, value));
  }
  // Open cells: from the click to the frame that shows the opened cell.
  const openMs = [];
  for (const row of ["doc-000", "doc-250", "doc-499"]) {
    // The row scrolled into view first (the matrix draws the rows in view).
    await browser.executeAsync((row, done) => {
      const box = document.querySelector(".matrix-scroll");
      const n = Number(row.slice(4));
      box.scrollTop = Math.max(0, n * 24 - 100);
      const wait = () => (document.querySelector(`[data-testid="matrix-row"][data-row="${row}"]`) ? done() : requestAnimationFrame(wait));
      requestAnimationFrame(wait);
    }, row);
    openMs.push(await browser.executeAsync((row, done) => {
      const button = document.querySelector(`[data-testid="matrix-row"][data-row="${row}"] [data-testid="matrix-cell"] button`);
      const t0 = performance.now();
      button.click();
      const wait = () => {
        const panel = document.querySelector(`[data-testid="cell-panel"][data-row="${row}"]`);
        if (panel) requestAnimationFrame(() => done(performance.now() - t0)); else requestAnimationFrame(wait);
      };
      requestAnimationFrame(wait);
    }, row));
  }
  console.log(`matrix scroll: ${scrollGaps.length} frames, max gap ${Math.max(...scrollGaps).toFixed(1)} ms, over 100 ms: ${scrollGaps.filter((g) => g > 100).length}`);
  console.log(`filter/sort to the frame showing it: ${filterMs.map((m) => m.toFixed(0)).join(", ")} ms`);
  console.log(`cell opened in: ${openMs.map((m) => m.toFixed(0)).join(", ")} ms`);
  await server.close();
  await browser.deleteSession();
  const evaluate = {
    rows: ROWS, cells, requests: server.requests.length, concurrency: 16, seconds: Number(evalSeconds.toFixed(1)),
    fillFrameGapMaxMs: Number(Math.max(...fillGaps).toFixed(1)), fillFramesOver100Ms: fillGaps.filter((g) => g > 100).length,
    fillFrameGapP99Ms: Number(q(fillGaps, 0.99).toFixed(1)),
    scrollFrameGapMaxMs: Number(Math.max(...scrollGaps).toFixed(1)), scrollFramesOver100Ms: scrollGaps.filter((g) => g > 100).length,
    filterMs: filterMs.map((m) => Math.round(m)), cellOpenMs: openMs.map((m) => Math.round(m)),
  };
  if (results) {
    const all = fs.existsSync(results) ? JSON.parse(fs.readFileSync(results, "utf8")) : {};
    all.evaluate = { date: new Date().toISOString().slice(0, 10), ...evaluate };
    fs.writeFileSync(results, JSON.stringify(all, null, 2) + "\n");
  }
  const met = (ok) => (ok ? "met" : "MISSED");
  console.log(`target no frame over 100 ms while the eval fills the matrix: ${met(evaluate.fillFramesOver100Ms === 0)}`);
  console.log(`target no frame over 100 ms scrolling, filtering the 500 × 6 matrix: ${met(evaluate.scrollFramesOver100Ms === 0 && Math.max(...evaluate.filterMs) <= 100)}`);
  console.log(`target a cell opens in 200 ms or less: ${met(Math.max(...evaluate.cellOpenMs) <= 200)}`);
  console.log(JSON.stringify(evaluate));
}

if (only === "evaluate") {
  await evaluateScreen();
  await driver.stop();
  process.exit(0);
}

if (only === "scrubber") {
  const browser = await launch();
  const scrub = await scrubber(browser, "bench");
  await browser.deleteSession();
  const kept = results && fs.existsSync(results) ? JSON.parse(fs.readFileSync(results, "utf8")) : {};
  kept.scrubber = { date: new Date().toISOString().slice(0, 10),
    machine: `${os.cpus().length} × ${os.cpus()[0].model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Xvfb (software rendering)`, ...scrub };
  if (results) fs.writeFileSync(results, JSON.stringify(kept, null, 2) + "\n");
  console.log(`target the scrubber follows the pointer with no frame over 50 ms: ${scrub.framesOver50Ms === 0 && scrub.endedAt === scrub.tokens ? "met" : "MISSED"}`);
  console.log(JSON.stringify(kept.scrubber));
  await driver.stop();
  process.exit(0);
}

// 1. Start, REPS fresh launches.
const starts = [];
for (let i = 0; i < reps; i++) {
  const browser = await launch();
  const pid = appPid();
  const t0 = startedAt(pid);
  const m = await marks(browser);
  const paint = m.origin + (m.fcp ?? m.paint) - t0;
  const interactive = m.origin + m.interactive - t0;
  starts.push({ paintMs: Math.round(paint), interactiveMs: Math.round(interactive), fcp: m.fcp != null });
  console.log(`launch ${i + 1}: first paint ${Math.round(paint)} ms, interactive ${Math.round(interactive)} ms`);
  if (i < reps - 1) { await browser.deleteSession(); await sleep(500); continue; }

  // 2 and 3 in the last launch.
  await sleep(3000);
  const idle = memory(pid);
  console.log(`idle: RSS ${idle.rssMiB.toFixed(0)} MiB, PSS ${idle.pssMiB.toFixed(0)} MiB over ${idle.processes.length} processes`);

  const reply = kgLines(OBJECTS).join("\n") + "\n";
  const server = await startOpenAI({ reply, chunk: 12, perEventMs: 1 });
  fs.writeFileSync(path.join(process.env.KERF_CONFIG_DIR, "providers.json"), JSON.stringify({ providers: [
    { name: "bench", kind: "openai", base_url: server.url, model: "loopback", no_key: true, structured: "none" }] }));
  // The window opens at Compare: the prompt is picked on Prompts.
  await (await $t(browser, "nav-prompts")).click();
  await (await $t(browser, "prompt-agent-kg-extract")).click();
  await (await $t(browser, "nav-run")).click();
  await browser.execute(async () => {}); // let the screen settle
  // The provider list is read when the window loads; the Providers screen refreshes it.
  await (await $t(browser, "nav-providers")).click();
  await browser.waitUntil(async () => (await browser.$$('[data-testid="provider-row"]')).length === 1, { timeout: 5000 });
  await (await $t(browser, "use-bench")).click();
  await (await $t(browser, "max-tokens")).setValue("60000");
  // The baseline: frames of the idle window, for what the display itself gives.
  await watchFrames(browser);
  await sleep(2000);
  const idleGaps = await stopFrames(browser);
  console.log(`idle frames: ${idleGaps.length} in 2 s, median gap ${median(idleGaps).toFixed(1)} ms, max ${Math.max(...idleGaps).toFixed(1)} ms`);
  await watchFrames(browser);
  const cpuBefore = cpu(pid);
  const t = Date.now();
  await (await $t(browser, "run")).click();
  let domRows = 0;
  await browser.waitUntil(async () => {
    // Rows of either view (the field tables, or the JSON lines one toggle away).
    domRows = Math.max(domRows, (await browser.$$('[data-testid="object-row"], [data-testid="record-row"]')).length);
    return /finished/.test(await (await $t(browser, "run-summary")).getText().catch(() => ""));
  }, { timeout: 180000, interval: 250, timeoutMsg: "the 1,000-object run did not finish" });
  const seconds = (Date.now() - t) / 1000;
  const shown = Number(await (await $t(browser, "object-count")).getText());
  const gaps = await stopFrames(browser);
  const cpuAfter = cpu(pid);
  const cpuUsed = Object.fromEntries(Object.entries(cpuAfter).map(([k, v]) => [k, Number((v - (cpuBefore[k] ?? 0)).toFixed(1))]));
  console.log(`CPU seconds while streaming: ${JSON.stringify(cpuUsed)}`);
  await server.close();
  await sleep(2000);
  const after = memory(pid);
  console.log(`streamed ${shown} objects in ${seconds.toFixed(1)} s (${server.requests.length} request), ${gaps.length} frames`);
  console.log(`frame gaps: median ${median(gaps).toFixed(1)} ms, p99 ${q(gaps, 0.99).toFixed(1)} ms, max ${Math.max(...gaps).toFixed(1)} ms, over 100 ms: ${gaps.filter((g) => g > 100).length}`);
  console.log(`after the run: RSS ${after.rssMiB.toFixed(0)} MiB, PSS ${after.pssMiB.toFixed(0)} MiB; at most ${domRows} object rows in the DOM`);
  const scrub = await scrubber(browser, "bench2");
  await browser.deleteSession();

  const summary = {
    date: new Date().toISOString().slice(0, 10),
    machine: `${os.cpus().length} × ${os.cpus()[0].model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Xvfb (software rendering)`,
    build: "debug kerf-desktop with the frontend embedded (what npm start opens)",
    start: {
      launches: starts,
      firstPaintMedianMs: median(starts.map((s) => s.paintMs)),
      interactiveMedianMs: median(starts.map((s) => s.interactiveMs)),
      interactiveMaxMs: Math.max(...starts.map((s) => s.interactiveMs)),
      firstPaintFrom: starts[0].fcp ? "first-contentful-paint" : "the frame after the shell mounted",
    },
    memory: {
      idle: { rssMiB: Math.round(idle.rssMiB), pssMiB: Math.round(idle.pssMiB), processes: idle.processes.map((p) => `${p.comm} ${p.rssMiB.toFixed(0)}/${p.pssMiB.toFixed(0)}`) },
      after1000: { rssMiB: Math.round(after.rssMiB), pssMiB: Math.round(after.pssMiB), processes: after.processes.map((p) => `${p.comm} ${p.rssMiB.toFixed(0)}/${p.pssMiB.toFixed(0)}`) },
    },
    streaming: {
      objects: shown, seconds: Number(seconds.toFixed(1)), textEvents: Math.ceil(reply.length / 12),
      frames: gaps.length,
      frameGapMedianMs: Number(median(gaps).toFixed(1)), frameGapP99Ms: Number(q(gaps, 0.99).toFixed(1)),
      frameGapMaxMs: Number(Math.max(...gaps).toFixed(1)), framesOver100Ms: gaps.filter((g) => g > 100).length,
      framesOver50Ms: gaps.filter((g) => g > 50).length, maxDomRows: domRows, cpuSeconds: cpuUsed,
      idleFrameGapMedianMs: Number(median(idleGaps).toFixed(1)), idleFrameGapMaxMs: Number(Math.max(...idleGaps).toFixed(1)),
    },
    scrubber: scrub,
  };
  if (results) fs.writeFileSync(results, JSON.stringify(summary, null, 2) + "\n");
  // The targets, reported (this is a measurement, not a test: it does not fail).
  const met = (ok) => (ok ? "met" : "MISSED");
  console.log(`target interactive <= 1500 ms (every launch): ${met(summary.start.interactiveMaxMs <= 1500)}`);
  console.log(`target no frame over 100 ms while streaming: ${met(summary.streaming.framesOver100Ms === 0)}`);
  console.log(`target the scrubber follows the pointer with no frame over 50 ms: ${met(scrub.framesOver50Ms === 0 && scrub.endedAt === scrub.tokens)}`);
  console.log(JSON.stringify(summary.start), JSON.stringify(summary.streaming));
}
await evaluateScreen();
await driver.stop();
