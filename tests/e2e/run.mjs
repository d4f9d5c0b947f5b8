// E2E in the real app window: kerf-desktop (debug build, frontend embedded) driven through
// tauri-driver + WebKitWebDriver. Run by scripts/e2e under Xvfb; each scenario asserts what the
// user sees and saves a screenshot to $KERF_E2E_ARTIFACTS.
import { remote } from "webdriverio";
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn } from "node:child_process";
import { promisify } from "node:util";
import fs from "node:fs";
import path from "node:path";
import { kgLines, startOpenAI } from "./openai-loopback.mjs";
import { startDriver, stopAll } from "./driver.mjs";
const execFileAsync = promisify(execFile);

const app = process.env.KERF_DESKTOP_BIN;
const artifacts = process.env.KERF_E2E_ARTIFACTS;
const work = process.env.KERF_E2E_WORK;
// Where the scenarios save and open files as a user would: ~/Documents of the run's own home.
const documents = path.join(process.env.HOME, "Documents");
/** A path as the window shows it: under the home folder, as `~/…`. */
const shown = (p) => (p.startsWith(process.env.HOME + "/") ? `~${p.slice(process.env.HOME.length)}` : p);
assert.ok(app && artifacts && work, "KERF_DESKTOP_BIN, KERF_E2E_ARTIFACTS and KERF_E2E_WORK must be set");
fs.mkdirSync(artifacts, { recursive: true });

// Deadlines, never delays: each wait ends as soon as what it waits for is there, so a generous
// deadline costs nothing on a fast machine and keeps a loaded 2-core one running the debug build
// from failing. KERF_E2E_TIME_SCALE multiplies them all (2: twice as long).
const SCALE = Number(process.env.KERF_E2E_TIME_SCALE) > 0 ? Number(process.env.KERF_E2E_TIME_SCALE) : 1;
const T = (ms) => Math.round(ms * SCALE);
/** A change in the window after a click (a screen, a list, a notice). */
const UI = T(20000);
/** A run or probe against the loopback server (no model). */
const NET = T(90000);
/** A model run fails when its reply has not grown for this long, however long it runs in all. */
const STALL = T(180000);
/**
 * A compare shows only the cell it is on (one model run of up to 400 tokens, constrained or not,
 * many minutes on a loaded machine): its progress is also the history being written (each cell
 * stores its reply as it streams). Fails after this long with neither.
 */
const CELL = T(600000);
/** When the history file was last written: seen from outside, without opening it. */
function historyWritten() {
  let t = 0;
  for (const f of ["history.sqlite", "history.sqlite-wal"]) {
    try { t = Math.max(t, fs.statSync(path.join(process.env.KERF_DATA_DIR, f)).mtimeMs); } catch {}
  }
  return t;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A promise's value, or a failure naming `what` after `ms`. */
function within(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} (${ms / 1000} s)`)), ms); })])
    .finally(() => clearTimeout(timer));
}

// The prompts some scenarios need in the user's folder, written when the scenario starts (so the
// pictures of the scenarios before show the shipped prompts alone): each lands in the list when
// the Prompts screen is shown again, as a file put there by hand does.
const userPrompts = path.join(process.env.KERF_DATA_DIR, "prompts");
fs.mkdirSync(userPrompts, { recursive: true });
const tgPrompt = path.join(userPrompts, "tg-object-schema.json");
const testPrompts = {
  // As TrustGraph's own jsonl prompts are written: its schema under `object-schema`, which
  // TrustGraph ignores.
  "tg-object-schema": {
    prompt: "Extract definitions from: {{ text }}", "response-type": "jsonl",
    "object-schema": { type: "object", properties: { entity: { type: "string" } }, required: ["entity"] },
    description: "written as TrustGraph writes it",
  },
  // A prompt that repairs (up to 3 requests): the loopback server's agent-kg-extract lines lack
  // its required `term`, so every reply fails and is sent back for repair.
  "repair-terms": {
    prompt: "List the terms in: {{ text }}", "response-type": "jsonl",
    schema: { type: "object", properties: { term: { type: "string" } }, required: ["term"], additionalProperties: false },
    repair: { "max-attempts": 3 },
  },
  // A template that doubles a string 64 times (a few hundred steps, far inside the fuel): its
  // render would need exabytes. The preview renders in a worker with a memory limit; the window
  // must show the error and go on.
  // A prompt reading a variable no dataset row gives: Evaluate's form sets it for every row.
  "area-extract": {
    prompt: "Subject area: {{ area }}. Extract definitions as JSONL from: {{ text }}", "response-type": "jsonl",
  },
  "grows-a-string": {
    prompt: "{% set ns = namespace(s='grow') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }} {{ text }}",
    "response-type": "text",
  },
};
/** Put test prompt `id` in the user's folder and show the Prompts screen, which lists it. */
async function withTestPrompt(id) {
  fs.writeFileSync(path.join(userPrompts, `${id}.json`), JSON.stringify(testPrompts[id], null, 2) + "\n");
  await (await $t("nav-prompts")).click();
  await (await $t(`prompt-${id}`)).waitForExist({ timeout: UI, timeoutMsg: `${id} is not listed` });
}

/**
 * Answer the next native dialogs (WebDriver cannot drive GTK's): scripts/e2e starts the app with
 * KERF_E2E_DIALOGS naming this file; each dialog takes one line (a path, or yes/no).
 */
function answerDialogs(...lines) {
  fs.writeFileSync(process.env.KERF_E2E_DIALOGS, lines.join("\n") + "\n");
}

// On SIGTERM or Ctrl-C (which end the process without its "exit" handlers' waiting): stop the
// window, its WebKitWebDriver and tauri-driver, wait for them, and end as failed.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.once(signal, async () => {
    console.log(`\ne2e: ${signal}: stopping the window and tauri-driver`);
    await within(stopAll(), 30000, "tauri-driver did not stop").catch((e) => console.log(String(e)));
    process.exit(signal === "SIGINT" ? 130 : 143);
  });
}

// A loopback Hugging Face Hub (tests/hub/hub.py) serving the model the window runs under a name
// of its own, which cuts the first download after 10 MB: the Models screen pulls from it. The
// window reads HF_ENDPOINT as the CLI does, so it is set before tauri-driver starts the window.
const cliBin = process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf");
const hubModel = JSON.parse(execFileSync(cliBin, ["models", "list", "--json"], { encoding: "utf8" })).models[0]?.path;
const HUB_REPO = "kerf-e2e/smol-GGUF", HUB_FILE = `kerf-e2e-${process.pid}.Q8_0.gguf`, HUB_CUT = 10_000_000;
const hub = spawn("python3", [path.join(path.dirname(new URL(import.meta.url).pathname), "..", "hub", "hub.py"),
  "--serve", `${HUB_REPO}:${HUB_FILE}=${hubModel}`, "--cut-after", String(HUB_CUT)], { stdio: ["ignore", "pipe", "inherit"] });
process.on("exit", () => hub.kill());
const hubPort = await within(new Promise((resolve, reject) => {
  let out = "";
  hub.stdout.on("data", (d) => { out += d; const m = /port (\d+)/.exec(out); if (m) resolve(Number(m[1])); });
  hub.on("exit", (code) => reject(new Error(`the loopback hub ended (${code})`)));
}), T(30000), "the loopback hub did not start");
process.env.HF_ENDPOINT = `http://127.0.0.1:${hubPort}`;
delete process.env.HF_TOKEN;

// Free ports of its own (not 4444): another run's driver is never ours.
const driver = await startDriver({ port: 0, timeout: T(60000) });

let browser;
const results = [];
// KERF_E2E_ONLY=TEXT[|TEXT…]: only the scenarios whose name holds one of the texts (while
// working on one; some scenarios build on what an earlier one left, so the whole list is what
// the test command runs).
const only = process.env.KERF_E2E_ONLY?.split("|").filter(Boolean);
async function scenario(name, fn) {
  if (only?.length && !only.some((t) => name.includes(t))) return;
  const t = Date.now();
  try {
    await fn();
    // An error the page did not handle (it shows over the window) fails the scenario it came in.
    const uncaught = await browser.execute(() => {
      const e = document.body.dataset.error;
      delete document.body.dataset.error;
      document.querySelectorAll("pre.fatal").forEach((p) => p.remove());
      return e ?? null;
    });
    if (uncaught) throw new Error(`the page had an error it did not handle:\n${uncaught}`);
    results.push([name, "ok", Date.now() - t]);
    console.log(`ok   ${name} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  } catch (e) {
    results.push([name, "FAILED", Date.now() - t]);
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    try { await shot(`FAILED-${name.replace(/\W+/g, "-")}`); } catch {}
  }
}

/**
 * A screenshot once the page has painted what the test just saw (two animation frames).
 *
 * Without compositing (the webview's mode on a machine with no GPU, see src-tauri/src/webview.rs)
 * WebKitGTK takes a WebDriver snapshot at the page's next paint, and an idle page never paints:
 * the request hangs. So while the snapshot is taken a 1-pixel element in the corner flips between
 * two invisible opacities, which makes the page paint; it is removed afterwards.
 */
async function shot(name) {
  await browser.executeAsync((done) => {
    const tick = document.createElement("div");
    tick.id = "e2e-paint-tick";
    tick.style.cssText = "position:fixed;left:0;top:0;width:1px;height:1px;opacity:0;pointer-events:none";
    document.body.append(tick);
    let n = 0;
    window.__e2eTick = setInterval(() => { tick.style.opacity = n++ % 2 ? "0" : "0.01"; }, 30);
    requestAnimationFrame(() => requestAnimationFrame(() => done()));
  });
  try {
    await browser.saveScreenshot(path.join(artifacts, `${name}.png`));
  } finally {
    await browser.execute(() => { clearInterval(window.__e2eTick); document.getElementById("e2e-paint-tick")?.remove(); });
  }
}

const $t = (id) => browser.$(`[data-testid="${id}"]`);
async function text(id) { return (await $t(id)).getText(); }
async function waitText(id, pred, timeout, what) {
  // The last text seen goes into the failure, which then says what was there instead.
  let last = "(not on the page)";
  try {
    await browser.waitUntil(async () => { try { last = await text(id); return pred(last); } catch { return false; } },
      { timeout, interval: 200, timeoutMsg: `${id}: ${what}` });
  } catch (e) {
    e.message += `; it read ${JSON.stringify(last)}`;
    throw e;
  }
}
/** Wait until `cond()` (its throws count as not yet); `what` may be a function, read on failure. */
async function waitFor(cond, timeout, what, interval = 200) {
  try {
    await browser.waitUntil(async () => { try { return await cond(); } catch { return false; } }, { timeout, interval });
  } catch (e) {
    throw new Error(`${typeof what === "function" ? what() : what} (${timeout / 1000} s)`, { cause: e });
  }
}
/**
 * Wait for work that shows its progress (a model run, a compare): fails when `progress()` has not
 * changed for `stall` ms, not after a total time, and at once when `failed()` says why.
 */
async function waitProgress({ done, progress, failed }, stall, what) {
  let last, since = Date.now();
  for (;;) {
    const why = await failed().catch(() => null);
    if (why) throw new Error(`${what}: ${why}`);
    if (await done().catch(() => false)) return;
    const now = await progress().catch(() => last);
    if (now !== last) { last = now; since = Date.now(); }
    else if (Date.now() - since > stall) throw new Error(`${what}: no progress for ${stall / 1000} s (last: ${last})`);
    await sleep(250);
  }
}
const runId = async () => (await $t("run-results")).getAttribute("data-run");
/**
 * Press Run (or the repair question's Run) and return the new run's id. The screen names the
 * run it shows from the moment the button is pressed, its results cleared: nothing read after
 * this is the previous run's.
 */
async function pressRun(button = "run") {
  const before = await runId();
  await (await $t(button)).click();
  let id;
  await waitFor(async () => { id = await runId(); return id && id !== before; }, UI, `${button}: no new run shown`);
  return id;
}
/** The summary of run `id`, once it satisfies `pred`. */
async function waitSummary(id, pred, timeout, what) {
  let last = "(none)";
  await waitFor(async () => {
    const el = await browser.$(`[data-testid="run-summary"][data-run="${id}"]`);
    if (!(await el.isExisting())) return false;
    last = await el.getText();
    return pred(last);
  }, timeout, () => `run-summary of ${id}: ${what} (last: ${last})`);
}
const runError = async () => {
  const e = await browser.$('[data-testid="run-error"]');
  return (await e.isExisting()) ? (await e.getText()) || null : null;
};
/** Type into a CodeMirror editor at the end of its document. */
async function typeAtEnd(editorId, keys) {
  const content = await browser.$(`[data-testid="${editorId}"] .cm-content`);
  await content.click();
  await browser.keys(["Control", "End"]);
  await browser.keys(keys);
}

try {
  browser = await remote({
    hostname: "127.0.0.1", port: driver.port, logLevel: "warn",
    // Element commands wait this long for their element (a list that loads after a click).
    waitforTimeout: UI, connectionRetryTimeout: T(240000),
    capabilities: { browserName: "wry", "wdio:enforceWebDriverClassic": true, "tauri:options": { application: app } },
  });
  try {
    await browser.waitUntil(async () => (await browser.execute(() => document.body.dataset.ready)) === "true",
      { timeout: T(120000), timeoutMsg: "the window did not become ready" });
  } catch (e) {
    console.log(await browser.execute(() => document.documentElement.outerHTML.slice(0, 3000)));
    console.log("startup error:", await browser.execute(() => document.body.dataset.error ?? "none"));
    console.log("page:", await browser.execute(() => JSON.stringify({ href: location.href, ready: document.readyState,
      tauri: typeof window.__TAURI_INTERNALS__, boot: document.documentElement.dataset.boot, bootError: document.documentElement.dataset.bootError, app: document.getElementById("app")?.childElementCount, scripts: document.scripts.length })));
    await shot("FAILED-startup");
    throw e;
  }

  await scenario("first launch: Compare, the example pair side by side, cut before the array closes, the headline", async () => {
    // No history yet: the window opens at Compare, on the shipped example.
    await (await $t("compare-headline")).waitForDisplayed({ timeout: UI, timeoutMsg: "the first launch did not land on Compare's headline" });
    const headline = await text("compare-headline");
    const m = headline.match(/^Cut after (\d+) tokens \(50% of the reply\): JSONL keeps (\d+) of (\d+) objects, the JSON array 0 of (\d+); resilience (0\.\d\d) vs (0\.\d\d)\.$/);
    assert.ok(m, `headline: ${headline}`);
    const [, cutAt, keptJsonl, totalJsonl, totalArray, scoreJsonl, scoreArray] = m;
    assert.ok(Number(keptJsonl) > 0 && Number(keptJsonl) < Number(totalJsonl), headline);
    assert.equal(totalJsonl, totalArray, "the same extraction in both formats");
    assert.ok(Number(scoreJsonl) > Number(scoreArray), headline);
    assert.equal(await text("compare-score-jsonl"), scoreJsonl);
    assert.equal(await text("compare-score-array"), scoreArray);
    // The scrubber stands where the headline cuts: each column keeps what the sentence says.
    await browser.waitUntil(async () => (await (await $t("compare-example-sbs")).getAttribute("data-loaded")) === "true",
      { timeout: UI, timeoutMsg: "the example replies did not load" });
    assert.equal(await (await $t("compare-example-sbs-a-kept")).getAttribute("data-count"), keptJsonl);
    assert.equal(await (await $t("compare-example-sbs-b-kept")).getAttribute("data-count"), "0");
    assert.equal(await (await $t("compare-example-sbs-cut")).getAttribute("data-k"), cutAt, "the scrubber is where the sentence cuts");
    // The prompts a first Compare runs are the pair's.
    assert.match(await (await $t("compare-a")).getValue(), /agent-kg-extract\.json$/);
    assert.match(await (await $t("compare-b")).getValue(), /agent-kg-extract-array\.json$/);
    await shot("compare-first-launch");
    // To the end of the replies: the array, closed, keeps all of its objects.
    await (await $t("compare-example-sbs-scrubber")).click();
    await browser.keys(["End"]);
    await browser.waitUntil(async () => (await (await $t("compare-example-sbs-b-kept")).getAttribute("data-count")) === totalArray,
      { timeout: UI, timeoutMsg: "at the end the array does not keep all its objects" });
  });

  await scenario("dark mode: the system's scheme by default, or the one picked, remembered; the screens read the palette", async () => {
    // What the page draws with: its scheme, the page's colours, and the side-by-side's cut marker
    // and the text past the cut (drawn from the palette, as every screen's colours are).
    const drawn = () => browser.execute(() => {
      const css = getComputedStyle(document.documentElement);
      const body = getComputedStyle(document.body);
      const marker = document.querySelector('[data-testid="compare-example-sbs-marker"]');
      return {
        dark: matchMedia("(prefers-color-scheme: dark)").matches,
        bg: css.backgroundColor, text: body.color, paletteText: css.getPropertyValue("--text").trim(),
        marker: marker ? getComputedStyle(marker).stroke : null,
      };
    });
    const rgb = (hex) => `rgb(${[1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(", ")})`;
    await (await $t("nav-compare")).click();
    await (await $t("compare-example-sbs-marker")).waitForExist({ timeout: UI, timeoutMsg: "Kerf's example is not drawn" });
    assert.equal(await (await $t("theme")).getValue(), "system");
    const light = await drawn();
    assert.equal(light.dark, false, "this test's system scheme is light");
    try {
      await (await $t("theme")).selectByAttribute("value", "dark");
      await waitFor(async () => (await drawn()).dark, UI, "picking dark did not switch the page's scheme");
      const dark = await drawn();
      console.log(`     light ${JSON.stringify(light)}; dark ${JSON.stringify(dark)}`);
      assert.equal(dark.bg, rgb("#11151c"), "the dark palette's background");
      assert.equal(dark.text, rgb(dark.paletteText));
      assert.equal(dark.marker, dark.text, "the cut marker is drawn in the palette's text colour");
      assert.notEqual(dark.marker, light.marker);
      assert.equal(await browser.execute(() => localStorage.getItem("kerf.theme")), "dark");
      await shot("dark-mode");
    } finally {
      await (await $t("theme")).selectByAttribute("value", "system");
    }
    await waitFor(async () => !(await drawn()).dark, UI, "back on the system's scheme, the page is not light again");
    assert.equal((await drawn()).bg, light.bg);
    assert.equal(await browser.execute(() => localStorage.getItem("kerf.theme")), null);
  });

  await scenario("zoom with Ctrl and +, - or 0, remembered", async () => {
    const zoom = () => browser.execute(() => document.documentElement.dataset.zoom);
    await (await $t("nav-compare")).click();
    try {
      await browser.keys(["Control", "="]);
      await browser.keys(["Control", "="]);
      await waitFor(async () => (await zoom()) === "1.2", UI, "Ctrl+= twice did not zoom to 120%");
      assert.equal(await browser.execute(() => localStorage.getItem("kerf.zoom")), "1.2");
      // The window still fits: the page does not scroll as a whole, whatever the zoom.
      const fit = await browser.execute(() => ({ page: document.documentElement.scrollHeight, shell: document.querySelector(".shell").getBoundingClientRect().height, window: window.innerHeight }));
      console.log(`     zoomed 120%: ${JSON.stringify(fit)}`);
      assert.ok(fit.page <= fit.window + 2, `the zoomed window scrolls as a whole: ${JSON.stringify(fit)}`);
      // …and fills it: the shell, measured in zoomed pixels, is the window's height over 1.2.
      assert.ok(Math.abs(fit.shell * 1.2 - fit.window) <= 3, `the zoomed shell does not fill the window: ${JSON.stringify(fit)}`);
      await shot("zoomed");
      await browser.keys(["Control", "-"]);
      await waitFor(async () => (await zoom()) === "1.1", UI, "Ctrl+- did not zoom out");
    } finally {
      // Back to 100% whatever happened: the scenarios after this one click where they expect.
      await browser.keys(["Control", "0"]);
    }
    await waitFor(async () => (await zoom()) === "1", UI, "Ctrl+0 did not reset the zoom");
  });

  await scenario("open a shipped prompt, edit the template, see the preview change", async () => {
    await (await $t("nav-prompts")).click();
    await (await $t("prompt-agent-kg-extract")).click();
    await waitText("prompt-title", (s) => s === "agent-kg-extract", UI, "the prompt did not open");
    await waitText("preview", (s) => s.length > 100, UI, "no preview");
    assert.ok(!(await text("preview")).includes("Answer-in-English."));
    // (The editor closes brackets as you type, so the edit is plain text.)
    await typeAtEnd("template-editor", ["Enter", ..."Answer-in-English."]);
    await waitText("preview", (s) => s.trimEnd().endsWith("Answer-in-English."), UI, "the preview did not follow the edit");
    assert.ok(await (await $t("dirty")).isDisplayed(), "the draft is not marked unsaved");
    // Opening another prompt with unsaved changes asks first; Keep editing keeps the edit.
    await (await $t("prompt-extract-definitions")).click();
    await (await $t("unsaved-dialog")).waitForDisplayed({ timeout: UI, timeoutMsg: "no unsaved-changes dialog" });
    assert.match(await text("unsaved-dialog"), /agent-kg-extract has unsaved changes/);
    await (await $t("keep-editing")).click();
    assert.equal(await (await $t("unsaved-dialog")).isExisting(), false, "the dialog stayed");
    assert.equal(await text("prompt-title"), "agent-kg-extract");
    assert.ok((await text("preview")).trimEnd().endsWith("Answer-in-English."), "the edit was lost");
    await shot("prompts");
  });

  await scenario("break the schema and see the error", async () => {
    await typeAtEnd("schema-editor", ["Enter", ..."oops"]);
    await browser.waitUntil(async () => (await browser.$$('[data-testid="problem"][data-part="schema"]')).length > 0,
      { timeout: UI, timeoutMsg: "no schema problem shown" });
    const problem = await (await browser.$('[data-testid="problem"][data-part="schema"]')).getText();
    assert.match(problem, /schema line \d+: not valid JSON/);
    // Named at the top of the editor too, wherever the schema is scrolled.
    assert.match(await text("problem-bar"), /1 problem · schema line \d+: not valid JSON/);
    await shot("schema-error");
    await (await $t("revert")).click();
    await waitText("problems", (s) => s.trim() === "none", UI, "the problems did not clear after Revert");
  });

  await scenario("a variable typed in the form and the terms edited reach the preview and the run", async () => {
    await (await $t("nav-prompts")).click();
    await (await $t("prompt-extract-topics")).click();
    await waitText("prompt-title", (s) => s === "extract-topics", UI, "the prompt did not open");
    await waitText("preview", (s) => s.includes("fixes carbon dioxide into sugar"), UI, "the terms' example is not in the preview");
    // `examples` comes from the prompt's terms; a value typed for it wins, in the preview and in
    // what Run sends.
    await (await $t("vars-examples")).setValue('{"topic": "Photosystem II", "definition": "The protein complex that splits water in the light reactions"}');
    await waitText("preview", (s) => s.includes("Photosystem II") && !s.includes("fixes carbon dioxide into sugar"), UI, "the typed variable did not reach the preview");
    await (await $t("nav-run")).click();
    await waitText("run-vars", (s) => s.includes("examples = ") && s.includes("Photosystem II"), UI, "the Run screen does not show the variable it sends");
    // Compare offers the same form for each prompt it compares, with the value remembered.
    await (await $t("nav-compare")).click();
    const topics = await browser.execute(() => [...document.querySelectorAll('[data-testid="compare-a"] option')].find((o) => o.textContent.startsWith("extract-topics "))?.value);
    const keptA = await (await $t("compare-a")).getValue();
    await (await $t("compare-a")).selectByAttribute("value", topics);
    await waitFor(async () => (await (await $t("compare-vars-a-form-examples")).getValue()).includes("Photosystem II"), UI, "Compare's form does not show the remembered value");
    await (await $t("compare-a")).selectByAttribute("value", keptA);
    await (await $t("nav-prompts")).click();
    await browser.execute(() => {
      const input = document.querySelector('[data-testid="vars-examples"]');
      input.value = "";
      input.dispatchEvent(new Event("input", { bubbles: true }));
    });
    await waitText("preview", (s) => s.includes("fixes carbon dioxide into sugar"), UI, "emptied, the term's value did not come back");
    // The terms are a part of the draft: an edit that is not a JSON object is named there.
    await typeAtEnd("terms-editor", ["Enter", ..."oops"]);
    await browser.waitUntil(async () => (await browser.$$('[data-testid="problem"][data-part="terms"]')).length > 0,
      { timeout: UI, timeoutMsg: "no terms problem shown" });
    await (await $t("revert")).click();
    await waitText("problems", (s) => s.trim() === "none", UI, "the problems did not clear after Revert");
  });

  await scenario("New, edit, Save as, Make twin, then Compare the two; a shipped prompt is read-only", async () => {
    await (await $t("nav-prompts")).click();
    // Shipped prompts are read-only: Save is off, Save as is there.
    await (await $t("prompt-extract-definitions")).click();
    await waitText("prompt-title", (s) => s === "extract-definitions", UI, "the prompt did not open");
    assert.ok(await (await $t("read-only")).isDisplayed(), "a shipped prompt is not marked read-only");
    await (await $t("prompt-new")).click();
    await (await $t("new-id")).setValue("people-e2e");
    await (await $t("new-format")).selectByAttribute("value", "jsonl");
    // Its twin comes later, from the edited copy.
    const twinBox = await browser.$('[data-testid="new-form"] input[type="checkbox"]');
    if (await twinBox.isSelected()) await twinBox.click();
    await (await $t("new-create")).click();
    await waitText("prompt-title", (s) => s === "people-e2e", UI, "the new prompt did not open");
    assert.ok(fs.existsSync(path.join(userPrompts, "people-e2e.json")), "the new prompt is not in the user's folder");
    assert.ok(fs.existsSync(path.join(userPrompts, "inputs", "people-e2e.txt")), "no sample input beside it");
    await waitText("preview", (s) => s.includes("one JSON object per line") && s.includes("chlorophyll"), UI, "no preview of the new prompt with its sample");
    await typeAtEnd("template-editor", ["Enter", ..."Include-every-person."]);
    await waitText("preview", (s) => s.trimEnd().endsWith("Include-every-person."), UI, "the edit did not reach the preview");
    await (await $t("dirty")).waitForDisplayed({ timeout: UI, timeoutMsg: "the edit is not marked unsaved" });
    await (await $t("save-as")).click();
    await (await $t("save-as-id")).setValue("people-short");
    await (await $t("save-as-confirm")).click();
    await waitText("prompt-title", (s) => s === "people-short", UI, "Save as did not open the new file");
    const saved = JSON.parse(fs.readFileSync(path.join(userPrompts, "people-short.json"), "utf8"));
    assert.ok(saved.prompt.includes("Include-every-person."), "the edit was not saved as");
    assert.equal(saved.id, "people-short");
    await (await $t("make-twin")).click();
    await waitText("prompt-title", (s) => s === "people-short-array", UI, "Make twin did not open the twin");
    const twin = JSON.parse(fs.readFileSync(path.join(userPrompts, "people-short-array.json"), "utf8"));
    assert.equal(twin["response-type"], "json");
    assert.equal(twin.twin, "people-short");
    assert.ok(twin.prompt.includes("a JSON array of objects") && twin.prompt.includes("Include-every-person."), twin.prompt);
    assert.equal(JSON.parse(fs.readFileSync(path.join(userPrompts, "people-short.json"), "utf8")).twin, "people-short-array");
    await shot("make-twin");
    // The two compare at once.
    await (await $t("nav-compare")).click();
    await (await $t("compare-a")).selectByAttribute("value", path.join(userPrompts, "people-short.json"));
    await (await $t("compare-b")).selectByAttribute("value", path.join(userPrompts, "people-short-array.json"));
    await (await $t("budgets")).setValue("48");
    await (await $t("compare-run")).click();
    await waitFor(async () => (await browser.$$('[data-testid="compare-row"]')).length >= 2, CELL, "the new pair did not compare");
    const prompts = await browser.execute(() => [...document.querySelectorAll('[data-testid="compare-row"]')].map((r) => r.dataset.prompt));
    assert.ok(prompts.includes("people-short") && prompts.includes("people-short-array"), String(prompts));
    // Back where the scenarios after this one start.
    await (await $t("nav-prompts")).click();
  });

  await scenario("Duplicate, Rename and Delete a prompt of your own; its twin follows; the preview counts tokens", async () => {
    await (await $t("nav-prompts")).click();
    await (await $t("prompt-people-e2e")).click();
    await waitText("prompt-title", (s) => s === "people-e2e", UI, "the prompt did not open");
    await waitFor(async () => Number(await (await $t("preview-tokens")).getAttribute("data-tokens")) > 20, UI, "no token count of the rendered prompt");
    // Duplicate: a copy in the user's folder, opened.
    await (await $t("duplicate")).click();
    assert.equal(await (await $t("save-as-id")).getValue(), "people-e2e-copy");
    await (await $t("save-as-confirm")).click();
    await waitText("prompt-title", (s) => s === "people-e2e-copy", UI, "Duplicate did not open the copy");
    // Its twin, then a rename: the twin names the new id.
    await (await $t("make-twin")).click();
    await waitText("prompt-title", (s) => s === "people-e2e-copy-array", UI, "Make twin did not open the twin");
    await (await $t("prompt-people-e2e-copy")).click();
    await waitText("prompt-title", (s) => s === "people-e2e-copy", UI, "the copy did not open");
    await (await $t("rename")).click();
    await (await $t("rename-id")).setValue("people-renamed");
    await (await $t("rename-confirm")).click();
    await waitText("prompt-title", (s) => s === "people-renamed", UI, "Rename did not open the renamed file");
    assert.ok(!fs.existsSync(path.join(userPrompts, "people-e2e-copy.json")) && fs.existsSync(path.join(userPrompts, "people-renamed.json")));
    const twinFile = path.join(userPrompts, "people-e2e-copy-array.json");
    assert.equal(JSON.parse(fs.readFileSync(twinFile, "utf8")).twin, "people-renamed");
    await waitFor(async () => (await browser.$$('[data-testid="prompt-people-e2e-copy"]')).length === 0, UI, "the old name is still listed");
    // Delete it: asked twice, moved aside, gone from the list; its twin names none.
    await (await $t("delete")).click();
    await (await $t("delete-confirm")).click();
    await waitText("deleted-note", (s) => s.includes(".deleted"), UI, "no word of where the deleted prompt went");
    assert.ok(fs.existsSync(path.join(userPrompts, ".deleted", "people-renamed.json")), "the deleted prompt is kept aside");
    await waitFor(async () => (await browser.$$('[data-testid="prompt-people-renamed"]')).length === 0, UI, "the deleted prompt is still listed");
    assert.equal(JSON.parse(fs.readFileSync(twinFile, "utf8")).twin, undefined);
    // A shipped prompt offers neither.
    await (await $t("prompt-extract-definitions")).click();
    await waitText("prompt-title", (s) => s === "extract-definitions", UI, "the prompt did not open");
    assert.equal((await browser.$$('[data-testid="rename"], [data-testid="delete"]')).length, 0, "a shipped prompt can be renamed or deleted");
  });

  await scenario("a template that builds gigabytes is stopped with an error; the window goes on", async () => {
    await withTestPrompt("grows-a-string");
    await (await $t("prompt-grows-a-string")).click();
    await waitText("prompt-title", (s) => s === "grows-a-string", UI, "the prompt did not open");
    await browser.waitUntil(async () => (await browser.$$('[data-testid="problem"][data-part="template"]')).length > 0,
      { timeout: UI, timeoutMsg: "no template problem shown" });
    const problem = await (await browser.$('[data-testid="problem"][data-part="template"]')).getText();
    assert.match(problem, /the render built more than \d+ MiB \(KERF_RENDER_MEMORY_MIB\) and was stopped/);
    await shot("template-memory");
    // The same window, still answering: another prompt opens and previews.
    await (await $t("prompt-extract-definitions")).click();
    await waitText("prompt-title", (s) => s === "extract-definitions", UI, "the window stopped answering");
    await waitText("preview", (s) => s.length > 100, UI, "no preview after the stopped render");
    fs.rmSync(path.join(userPrompts, "grows-a-string.json"));
    await (await $t("nav-prompts")).click();
  });

  await scenario("a schema under object-schema is flagged for TrustGraph, renamed in one click, saved as schema", async () => {
    await withTestPrompt("tg-object-schema");
    await (await $t("prompt-tg-object-schema")).click();
    await waitText("prompt-title", (s) => s === "tg-object-schema", UI, "the prompt did not open");
    await (await $t("rename-schema-key")).waitForDisplayed({ timeout: UI, timeoutMsg: "no trustgraph finding with its rename" });
    assert.match(await text("lint"), /trustgraph\s*ignored.*TrustGraph ignores `object-schema`: in production this prompt's replies are not validated/s);
    assert.match(await text("object-schema-notice"), /TrustGraph ignores `object-schema`/);
    await shot("object-schema");
    await (await $t("rename-schema-key")).click();
    await browser.waitUntil(async () => !(await (await $t("rename-schema-key")).isExisting()),
      { timeout: UI, timeoutMsg: "the finding stayed after the rename" });
    assert.ok(await (await $t("dirty")).isDisplayed(), "the rename is not an unsaved change");
    assert.ok(JSON.parse(fs.readFileSync(tgPrompt, "utf8"))["object-schema"], "the file changed before saving");
    await (await $t("save")).click();
    // Saved when the window says so (the note, the unsaved mark gone): the file is written then.
    await waitFor(async () => /^Saved /.test(await text("saved-note")) && !(await (await $t("dirty")).isExisting()),
      UI, "the window did not report the save");
    const saved = JSON.parse(fs.readFileSync(tgPrompt, "utf8"));
    assert.ok("schema" in saved, "the file was not saved with `schema`");
    assert.deepEqual(Object.keys(saved), ["prompt", "response-type", "schema", "description"]);
    assert.equal(saved.schema.required[0], "entity");
  });
  // The scenarios after this one run the prompt that is open: agent-kg-extract (discarding what a
  // failed scenario above may have left unsaved).
  await (await $t("nav-prompts")).click();
  await (await $t("prompt-agent-kg-extract")).click();
  if (await (await $t("unsaved-dialog")).isExisting()) await (await $t("discard")).click();
  await waitText("prompt-title", (s) => s === "agent-kg-extract", UI, "agent-kg-extract did not open again");

  await scenario("run agent-kg-extract on the bundled model and see objects appear", async () => {
    await (await $t("nav-run")).click();
    const max = await $t("max-tokens");
    await max.setValue("200");
    const id = await pressRun();
    // Progress is the reply growing: a slow machine takes longer, a stuck run stops growing.
    const replied = () => browser.execute(() => document.querySelector('[data-testid="raw"]')?.textContent.length ?? 0);
    const summaryShown = async () => (await browser.$(`[data-testid="run-summary"][data-run="${id}"]`)).isExisting();
    try {
      await waitProgress({ done: async () => Number(await text("object-count")) > 0, progress: replied,
        failed: async () => (await runError()) ?? ((await summaryShown()) ? "the run finished with no object" : null) },
      STALL, "no objects appeared");
      await waitProgress({ done: summaryShown, progress: replied, failed: runError }, STALL, "the run did not finish");
    } catch (e) {
      // Left running, it would hold the model under the compare after it.
      const cancel = await $t("cancel");
      if (await cancel.isEnabled().catch(() => false)) await cancel.click().catch(() => {});
      throw e;
    }
    await waitSummary(id, (s) => /object/.test(s), UI, "no objects in the summary");
    const summary = await text("run-summary");
    assert.match(summary, /run \d+ in History/);
    // Records as fields: one table per branch of the union, its columns from the schema.
    const shown = Number(await text("object-count"));
    const groups = await browser.execute(() => [...document.querySelectorAll('[data-screen="run"] [data-testid="record-group"]')].map((g) => ({
      type: g.dataset.type, rows: g.querySelectorAll('[data-testid="record-row"]').length,
      columns: [...g.querySelectorAll("th")].map((t) => t.textContent) })));
    assert.ok(groups.length > 0, "no record tables drawn");
    assert.equal(groups.reduce((n, g) => n + g.rows, 0), shown, `every object is a row: ${JSON.stringify(groups)}`);
    for (const g of groups) {
      if (g.type === "definition") assert.deepEqual(g.columns.slice(1, 3), ["entity", "definition"], JSON.stringify(g));
      if (g.type === "relationship") assert.deepEqual(g.columns.slice(1, 5), ["subject", "predicate", "object", "object-entity"], JSON.stringify(g));
    }
    await shot("run");
    // The raw JSON lines, one toggle away.
    await (await $t("objects-as-json")).click();
    await waitFor(async () => (await browser.$$('[data-testid="object-row"]')).length > 0, UI, "no JSON lines drawn");
    await (await $t("objects-as-fields")).click();
  });

  let arrayRuns = null;
  await scenario("compare at two budgets and see both charts drawn", async () => {
    await (await $t("nav-compare")).click();
    await (await $t("compare-a")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract.json"));
    await (await $t("compare-b")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract-array.json"));
    await (await $t("budgets")).setValue("48, 400");
    await (await $t("compare-run")).click();
    // Progress is the cell it is on; each cell is one model run. A compare that fails is
    // cancelled: left running, it would hold the model and write runs into History under the
    // scenarios after it.
    const started = Date.now();
    let cell = "";
    try {
      await waitProgress({
        done: async () => (await browser.$$('[data-testid="compare-row"]')).length >= 4,
        progress: async () => {
          const p = await browser.$('[data-testid="compare-progress"]');
          const now = (await p.isExisting()) ? await p.getText() : "";
          if (now && now !== cell) console.log(`     at ${((Date.now() - started) / 1000).toFixed(0)} s: ${now}`);
          cell = now;
          return `${now} @ ${historyWritten()}`;
        },
        failed: async () => {
          const e = await browser.$('[data-testid="compare-error"]');
          return (await e.isExisting()) ? (await e.getText()) || null : null;
        },
      }, CELL, "the compare table did not appear");
    } catch (e) {
      const cancel = await $t("compare-cancel");
      if (await cancel.isEnabled().catch(() => false)) {
        await cancel.click();
        await cancel.waitForEnabled({ reverse: true, timeout: UI }).catch(() => {});
      }
      throw e;
    }
    // The compare's runs of the array prompt, as History will list them.
    arrayRuns = await browser.execute(() => [...document.querySelectorAll('[data-testid="compare-row"]')]
      .filter((r) => r.dataset.prompt === "agent-kg-extract-array").map((r) => r.dataset.run));
    assert.ok(arrayRuns.length >= 2 && arrayRuns.every((id) => /^\d+$/.test(id)), `the array prompt's compare runs: ${arrayRuns}`);
    for (const id of ["budget-chart", "sweep-chart"]) {
      const drawn = await (await $t(id)).getAttribute("data-drawn");
      // The sweep has one curve per format, whether or not its replies ended on their own.
      assert.ok(Number(drawn) >= (id === "sweep-chart" ? 2 : 1), `${id} drew ${drawn} series`);
      assert.ok(await (await browser.$(`[data-testid="${id}"] canvas`)).isDisplayed(), `${id} has no canvas`);
    }
    await shot("compare");
    // "Save SVG" writes the chart Rust specified, drawn as `kerf sweep --svg` draws: one
    // document with every format's curve named.
    const svgPath = path.join(documents, "exported", "sweep.svg");
    fs.mkdirSync(path.dirname(svgPath), { recursive: true });
    answerDialogs(svgPath);
    await (await browser.$('[data-testid="sweep-chart"]').parentElement().$("button=Save SVG")).click();
    await browser.waitUntil(() => fs.existsSync(svgPath), { timeout: UI, timeoutMsg: "no SVG written" });
    const svg = fs.readFileSync(svgPath, "utf8");
    assert.ok(svg.startsWith("<svg"), svg.slice(0, 80));
    for (const name of ["agent-kg-extract (jsonl", "agent-kg-extract-array (json", "fraction of the reply emitted"]) {
      assert.ok(svg.includes(name), `the saved SVG lacks "${name}"`);
    }
    // Where it went, said with the home folder as ~.
    assert.match(await browser.$('[data-testid="sweep-chart"]').parentElement().$(".saved").getText(), /^saved ~\/Documents\/exported\/sweep\.svg$/);
  });

  await scenario("a compare too large to send unasked asks first, and the at-once limit is named", async () => {
    await (await $t("nav-compare")).click();
    // 2 prompts × 501 budgets × constrained and not: 2,004 requests, past the 2,000 sent unasked.
    const many = Array.from({ length: 501 }, (_, i) => String(i + 1)).join(",");
    await (await $t("budgets")).setValue(many);
    await (await $t("compare-constrain")).selectByAttribute("value", "both");
    await (await $t("compare-run")).click();
    const confirm = await $t("compare-confirm");
    await confirm.waitForDisplayed({ timeout: UI });
    assert.equal(await (await $t("compare-error")).getAttribute("data-code"), "plan_too_large");
    assert.match(await confirm.getText(), /Send all 2,004 requests/);
    // Nothing was sent or stored: no progress, no rows.
    assert.equal((await browser.$$('[data-testid="compare-row"]')).length, 0, "a refused plan drew rows");
    // More than 256 at once is refused, naming the limit; nothing runs.
    await (await $t("budgets")).setValue("48");
    await (await $t("compare-concurrency")).setValue("300");
    await (await $t("compare-run")).click();
    await browser.waitUntil(async () => /256/.test(await text("compare-error").catch(() => "")), { timeout: UI, timeoutMsg: "no error naming the 256 limit" });
    assert.equal(await (await $t("compare-error")).getAttribute("data-code"), "usage");
    await (await $t("compare-concurrency")).setValue("4");
    await (await $t("compare-constrain")).selectByAttribute("value", "both");
  });

  await scenario("find the runs in History and diff them", async () => {
    await (await $t("nav-history")).click();
    await (await $t("filter-prompt")).setValue("agent-kg-extract-array");
    await (await $t("filter-apply")).click();
    // The filtered list, not the unfiltered one it replaces: the compare's runs of the array
    // prompt, and nothing else.
    assert.ok(arrayRuns, "no compare ran");
    let listed = [];
    await waitFor(async () => {
      // One snapshot of the list, read in the page at once.
      const rows = await browser.execute(() =>
        [...document.querySelectorAll('[data-testid="run-row"]')].map((r) => [r.dataset.id, r.dataset.prompt]));
      listed = rows;
      return rows.length === arrayRuns.length && rows.every(([id, p]) => p === "agent-kg-extract-array" && arrayRuns.includes(id));
    }, UI, () => `History does not list exactly the compare's runs of agent-kg-extract-array (${arrayRuns}): ${JSON.stringify(listed)}`);
    // Each row shows its tokens, cost and time as the history keeps them: the CLI reads the same
    // run back.
    const [firstId] = listed[0];
    const cliBin = process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf");
    const kept = JSON.parse(execFileSync(cliBin, ["history", "show", firstId, "--json"], { encoding: "utf8" }));
    const g = (n) => Math.trunc(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    const first = await browser.$(`[data-testid="run-row"][data-id="${firstId}"]`);
    assert.equal(await (await first.$('[data-testid="run-tokens"]')).getText(), `${g(kept.prompt_tokens)} → ${g(kept.completion_tokens)}`);
    assert.equal(await (await first.$('[data-testid="run-cost"]')).getText(), "–", "the local engine costs nothing");
    assert.ok(kept.seconds > 0, `no time kept: ${JSON.stringify(kept.seconds)}`);
    assert.match(await (await first.$('[data-testid="run-time"]')).getText(), /^\d+(\.\d+)? (ms|s)$|^\d+ min \d+ s$/);
    const rows = await browser.$$('[data-testid="run-row"]');
    // The newest run (largest budget) and the oldest (smallest): their parameters differ.
    const ids = [await rows[0].getAttribute("data-id"), await rows[rows.length - 1].getAttribute("data-id")];
    for (const id of ids) await (await $t(`pick-${id}`)).click();
    await (await $t("diff")).click();
    await waitText("diff-title", (s) => s.startsWith("Run "), UI, "no diff shown");
    assert.match(await text("diff-params"), /max_tokens/);
    assert.match(await text("diff-objects"), /\d+ unchanged · \d+ added · \d+ removed · \d+ changed/);
    await shot("history");
  });

  await scenario("export a TrustGraph bundle and check the written file", async () => {
    await (await $t("nav-export")).click();
    await (await $t("target-trustgraph-bundle")).click();
    await waitText("export-preview", (s) => s.includes("agent-kg-extract"), UI, "no preview");
    const out = path.join(documents, "exported", "prompt-config.json");
    fs.mkdirSync(path.dirname(out), { recursive: true });
    answerDialogs(out);
    await (await $t("export-save")).click();
    await waitText("export-status", (s) => s === `Saved ${shown(out)}`, UI, "not saved");
    const bundle = JSON.parse(fs.readFileSync(out, "utf8"));
    const shipped = JSON.parse(fs.readFileSync(path.join(work, "prompts", "agent-kg-extract.json"), "utf8"));
    const key = Object.keys(bundle).find((k) => k.includes("agent-kg-extract"));
    assert.ok(key, `no agent-kg-extract entry in ${Object.keys(bundle)}`);
    const entry = typeof bundle[key] === "string" ? JSON.parse(bundle[key]) : bundle[key];
    assert.equal(entry.prompt, shipped.prompt, "the exported template is not the file's");
    await shot("export");
  });

  await scenario("import that bundle into your prompt folder; a second import overwrites nothing", async () => {
    await (await $t("nav-prompts")).click();
    const config = path.join(documents, "exported", "prompt-config.json");
    answerDialogs(config);
    await (await $t("import-choose")).click();
    await waitText("import-path", (s) => s === shown(config), UI, "the chosen file is not shown");
    await (await $t("import")).click();
    await waitText("import-status", (s) => s.startsWith("Imported"), UI, "the import did not report");
    assert.match(await text("import-status"), /Imported 1 prompt into your folder: agent-kg-extract\./);
    const mine = path.join(process.env.KERF_DATA_DIR, "prompts", "agent-kg-extract.json");
    const shipped = path.join(work, "prompts", "agent-kg-extract.json");
    assert.deepEqual(JSON.parse(fs.readFileSync(mine, "utf8")), JSON.parse(fs.readFileSync(shipped, "utf8")),
      "the imported prompt is not the exported one");
    // Listed under your folder, next to the shipped one of the same id.
    await waitFor(async () => (await browser.$$('[data-testid="prompt-agent-kg-extract"]')).length === 2,
      UI, "the imported prompt is not listed next to the shipped one");
    const before = fs.readFileSync(mine, "utf8");
    await (await $t("import")).click();
    await browser.$('[data-testid="import-error"]').waitForDisplayed({ timeout: UI, timeoutMsg: "no error for an import that would overwrite" });
    assert.match(await text("import-error"), /agent-kg-extract\.json exists/);
    assert.equal(fs.readFileSync(mine, "utf8"), before, "a refused import changed the file");
    await shot("import");
  });
  await scenario("a script in the page cannot read or write a file the user did not choose", async () => {
    // What an injected script would try: Kerf's commands, called directly.
    const call = (cmd, args) => browser.executeAsync((cmd, args, done) => {
      window.__TAURI_INTERNALS__.invoke(cmd, args).then((v) => done({ ok: v }), (e) => done({ err: e }));
    }, cmd, args);
    const secret = path.join(work, "secret.txt");
    fs.writeFileSync(secret, "not for the page");
    const read = await call("input_read", { path: secret });
    assert.equal(read.err?.code, "forbidden", JSON.stringify(read));
    const written = await call("file_save", { path: path.join(work, "planted.txt"), text: "x", base64: null });
    assert.equal(written.err?.code, "forbidden", JSON.stringify(written));
    assert.ok(!fs.existsSync(path.join(work, "planted.txt")), "the page wrote a file");
    // The plugin's own dialog commands are not open to the page either: only Kerf's, which
    // remember what the user picked.
    const direct = await call("plugin:dialog|open", { options: {} });
    assert.ok(direct.err && /not allowed/.test(String(direct.err)), JSON.stringify(direct));
    // Picked in the dialog, the same file reads.
    answerDialogs(secret);
    await (await $t("nav-run")).click();
    await (await $t("load-input")).click();
    await browser.waitUntil(async () => (await call("input_read", { path: secret })).ok === "not for the page",
      { timeout: UI, timeoutMsg: "a file picked in the dialog was not readable" });
  });

  // The Evaluate screen on the bundled model: the shipped dataset, a broken one, a small eval
  // whose matrix fills in, a cell opened, a cancelled eval resumed, two evals compared, and the
  // same evals read by the CLI.
  const shipped = path.join(process.cwd(), "datasets", "knowledge-graph.jsonl");
  const kgPrompt = path.join(work, "prompts", "agent-kg-extract.json");
  const cli = (...args) => execFileSync(process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf"), args, { encoding: "utf8", env: process.env });
  const matrixCells = () => browser.execute(() => [...document.querySelectorAll('[data-testid="matrix-cell"]')]
    .map((c) => c.dataset.state));
  /** Press a button that runs an eval and wait until its matrix has no cell left pending. */
  async function waitEval(what) {
    const started = Date.now();
    let seen = "";
    const filled = [];
    await waitProgress({
      done: async () => {
        const cells = await matrixCells();
        return cells.length > 0 && cells.every((c) => c !== "pending") && (await browser.$('[data-testid="eval-title"]').isExisting())
          && !(await (await $t("eval-cancel")).isEnabled());
      },
      progress: async () => {
        const p = await browser.$('[data-testid="eval-progress"]');
        const now = (await p.isExisting()) ? await p.getText() : "";
        if (now && now !== seen) {
          console.log(`     at ${((Date.now() - started) / 1000).toFixed(0)} s: ${now}`);
          filled.push((await matrixCells()).filter((c) => c !== "pending").length);
        }
        seen = now;
        return `${now} @ ${historyWritten()}`;
      },
      failed: async () => {
        const e = await browser.$('[data-testid="eval-error"]');
        return (await e.isExisting()) ? (await e.getText()) || null : null;
      },
    }, CELL, what);
    return filled;
  }
  async function choosePrompt(id) {
    const box = await browser.$(`[data-testid="eval-prompt"][data-id="${id}"]`);
    if (!(await box.isSelected())) await box.click();
  }

  /** Open `file` as Evaluate's dataset through the native dialog and wait until it reads sound. */
  async function openDataset(file) {
    answerDialogs(file);
    await (await $t("eval-dataset-pick")).click();
    // The path first: until the dialog answers, a "no problems" on screen is the last dataset's.
    await waitText("eval-dataset", (t) => t === file, UI, "the dataset was not opened");
    await (await $t("eval-no-problems")).waitForExist({ timeout: UI });
  }

  /** An eval of `file`'s first row with agent-kg-extract at 2,048 tokens, unconstrained, its
   *  documents cut at `sizes` with `overlap`: run to its end; its experiment's id. */
  async function chunkedEval(file, { concurrency, sizes, overlap }) {
    await (await $t("nav-evaluate")).click();
    await openDataset(file);
    await choosePrompt("agent-kg-extract");
    await (await $t("eval-limit")).setValue("1");
    await (await $t("eval-budgets")).setValue("2048");
    await (await $t("eval-constrain")).selectByAttribute("value", "none");
    await (await $t("eval-concurrency")).setValue(String(concurrency));
    await (await $t("eval-chunk-sizes")).setValue(sizes);
    await (await $t("eval-chunk-overlap")).setValue(String(overlap));
    await (await $t("eval-run")).click();
    await waitEval(`the eval of ${path.basename(file)} cut at ${sizes} did not finish`);
    return Number((await text("eval-title")).replace(/\D+/g, ""));
  }

  await scenario("evaluate: load the shipped dataset and see its problem-free preview", async () => {
    await (await $t("nav-evaluate")).click();
    await choosePrompt("agent-kg-extract");
    await openDataset(shipped);
    const rows = await browser.$$('[data-testid="eval-preview-row"]');
    const lines = fs.readFileSync(shipped, "utf8").trim().split("\n").length;
    assert.equal(rows.length, lines, "every row of the shipped dataset is previewed");
    assert.equal((await browser.$$('[data-testid="eval-row-problem"]')).length, 0);
    assert.equal(await rows[0].getAttribute("data-row"), "photosynthesis");
    await shot("evaluate-preview");
  });

  await scenario("evaluate: a dataset with errors shows each problem at its row", async () => {
    const broken = path.join(documents, "broken.jsonl");
    fs.writeFileSync(broken, [
      JSON.stringify({ id: "fine", input: "Ada wrote the first program.", expected: [{ type: "definition", entity: "program", definition: "instructions" }] }),
      "{this line is not JSON",
      JSON.stringify({ id: "bad-record", input: "Text.", expected: [{ type: "definition", entity: 7 }] }),
      JSON.stringify({ id: "fine", input: "A second row with the same id." }),
    ].join("\n") + "\n");
    answerDialogs(broken);
    await (await $t("eval-dataset-pick")).click();
    await waitText("eval-problem-count", (t) => /^4 problem/i.test(t), UI, "not 4 problems counted");
    const bad = await browser.$('[data-testid="eval-preview-row"][data-row="bad-record"]');
    assert.equal(await bad.getAttribute("data-line"), "3");
    const badText = await bad.getText();
    assert.match(badText, /\/expected\/0/, "the bad record's problem names its pointer");
    const loose = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-problem"]')].map((p) => [p.dataset.line, p.textContent]));
    assert.ok(loose.some(([line, t]) => line === "2" && t.includes(":2")), `the line that is not JSON: ${JSON.stringify(loose)}`);
    const all = await text("eval-preview");
    assert.match(all, /row `fine`: id `fine` is also the id of the row at/, "the duplicate id is named at its second row");
    await shot("evaluate-problems");
    // A folder of documents, each with its expected records beside it.
    const folder = path.join(documents, "docs-dataset");
    fs.mkdirSync(folder, { recursive: true });
    fs.writeFileSync(path.join(folder, "tea.txt"), "Tea is an aromatic beverage made from the leaves of Camellia sinensis.");
    fs.writeFileSync(path.join(folder, "tea.expected.jsonl"), JSON.stringify({ type: "definition", entity: "Tea", definition: "An aromatic beverage" }) + "\n");
    fs.writeFileSync(path.join(folder, "rust.txt"), "Rust is a systems programming language.");
    answerDialogs(folder);
    await (await $t("eval-dataset-folder")).click();
    await waitText("eval-dataset", (t) => t.endsWith("docs-dataset"), UI, "the folder was not opened");
    await (await $t("eval-no-problems")).waitForExist({ timeout: UI });
    const ids = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-preview-row"]')].map((r) => r.dataset.row));
    assert.deepEqual(ids.sort(), ["rust", "tea"]);
  });

  let firstEval = null;
  await scenario("evaluate: run a small eval on the bundled model, watch the matrix fill, open a cell", async () => {
    await openDataset(shipped);
    await (await $t("eval-limit")).setValue("2");
    await (await $t("eval-budgets")).setValue("96");
    await (await $t("eval-constrain")).selectByAttribute("value", "auto");
    await (await $t("eval-plan")).click();
    await waitText("eval-plan-line", (t) => t.startsWith("2 cell(s) · 2 request(s) at most"), UI, "the plan's size");
    await (await $t("eval-run")).click();
    // Every state of the progress bar the page draws, recorded by the page itself (a poll could
    // miss one on a fast machine).
    await browser.execute(() => {
      window.__evalBars = [];
      const seen = () => {
        const bar = document.querySelector('[data-testid="eval-bar"]');
        const line = document.querySelector('[data-testid="eval-progress"]')?.textContent ?? "";
        const last = window.__evalBars.at(-1);
        if (bar && (!last || last.text !== line)) window.__evalBars.push({ done: Number(bar.dataset.done), total: Number(bar.dataset.total), text: line });
      };
      window.__evalBarsObserver?.disconnect();
      window.__evalBarsObserver = new MutationObserver(seen);
      window.__evalBarsObserver.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    const filled = await waitEval("the eval's matrix did not fill");
    const cells = await matrixCells();
    assert.equal(cells.length, 2, `2 rows × 1 cell: ${cells}`);
    // Its progress as a bar, and once a cell is done, the time left at that pace.
    const evalBars = await browser.execute(() => { window.__evalBarsObserver.disconnect(); return window.__evalBars; });
    assert.ok(evalBars.length > 0 && evalBars.every((b) => b.total === 2), `the bar, over the eval's 2 cells: ${JSON.stringify(evalBars)}`);
    // Once a cell is done and another is not, the line says the time left at that pace (both
    // may end within one redraw on a fast machine: then there is no such moment to check).
    const midway = evalBars.filter((b) => b.done > 0 && b.done < b.total);
    assert.ok(midway.every((b) => /about .+ left/.test(b.text)), `the bar part full with an ETA: ${JSON.stringify(evalBars)}`);
    console.log(`     progress drawn: ${evalBars.map((b) => `${b.done}/${b.total}`).join(", ")}`);
    firstEval = Number((await text("eval-title")).replace(/\D+/g, ""));
    assert.ok(firstEval > 0);
    // The window's figures are the CLI's: `kerf eval show` reads the same eval.
    const shown = JSON.parse(cli("eval", "show", String(firstEval), "--json"));
    assert.equal(shown.pending, 0);
    const f1 = await text("eval-line-f1");
    const cliF1 = shown.summary[0].f1 == null ? "–" : shown.summary[0].f1.toFixed(3);
    assert.equal(f1, cliF1, "the window's F1 is `kerf eval show`'s");
    // A cell opened: expected and extracted side by side, marked; the reply; the document.
    const first = await browser.$('[data-testid="matrix-row"][data-row="photosynthesis"] [data-testid="matrix-cell"] button');
    await first.click();
    await (await $t("cell-panel")).waitForExist({ timeout: UI });
    const expected = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-expected"] li')].map((l) => l.dataset.mark));
    assert.ok(expected.length >= 3 && expected.every((m) => ["matched", "partial", "missed"].includes(m)), `expected marks: ${expected}`);
    const extracted = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-extracted"] li[data-mark]')].map((l) => [l.dataset.mark, l.dataset.grounded]));
    const cellShown = shown.cells.find((c) => c.row === "photosynthesis");
    assert.equal(extracted.length, cellShown.objects, "every extracted record is listed");
    assert.equal(extracted.filter(([m]) => m === "matched" || m === "partial").length, cellShown.tp, "matched records are the CLI's tp");
    assert.ok((await text("cell-reply")).length > 0, "the reply is shown");
    const doc = await text("cell-document");
    assert.ok(doc.startsWith("Photosynthesis is the process"), doc.slice(0, 60));
    if (extracted.length > 0) {
      const hits = await browser.$$('[data-testid="cell-reply"] .hit');
      assert.ok(hits.length >= 1, "each accepted record is highlighted in the reply");
    }
    const grounded = extracted.filter(([, g]) => g === "true").length;
    if (grounded > 0) {
      await (await browser.$('[data-testid="cell-extracted"] li[data-grounded="true"] [data-testid="cell-record"]')).click();
      const on = await browser.$$('[data-testid="cell-document"] .ground.on');
      assert.ok(on.length >= 1, "the chosen record's place in the document is highlighted");
    }
    console.log(`     matrix filled in steps: ${filled.join(" → ")}; ${extracted.length} extracted, ${grounded} grounded`);
    await shot("evaluate-cell");
  });

  await scenario("evaluate: cancel an eval, resume it in the window, compare it with the first, report it from the CLI", async () => {
    await (await $t("eval-limit")).setValue("3");
    await (await $t("eval-run")).click();
    // Cancel once the first cell has filled in.
    await waitFor(async () => (await matrixCells()).some((c) => c !== "pending"), CELL, "no cell filled in");
    await (await $t("eval-cancel")).click();
    await waitFor(async () => (await (await browser.$('[data-testid="eval-error"]')).getAttribute("data-code")) === "cancelled", CELL, "the eval did not stop");
    await waitText("eval-resume", (t) => /cells left/.test(t), UI, "no Resume offered");
    const id = Number((await text("eval-title")).replace(/\D+/g, ""));
    assert.ok(id > firstEval, `a second eval: ${id}`);
    const stopped = JSON.parse(cli("eval", "show", String(id), "--json"));
    assert.ok(stopped.pending > 0, "the CLI sees the cells left");
    await (await $t("eval-resume")).click();
    await waitEval("the resumed eval did not finish");
    const done = JSON.parse(cli("eval", "show", String(id), "--json"));
    assert.equal(done.pending, 0, "resumed in the window, whole in the CLI");
    assert.equal((await matrixCells()).length, 3);
    // Two evals compared: the paired F1 difference over the rows they share.
    await (await $t("eval-compare-id")).setValue(String(firstEval));
    await (await $t("eval-compare")).click();
    await (await $t("eval-comparison-line")).waitForExist({ timeout: UI });
    const diff = await text("eval-f1-diff");
    const cliCompared = JSON.parse(cli("eval", "compare", String(firstEval), String(id), "--json")).comparisons[0];
    const cliDiff = cliCompared.f1_diff;
    assert.equal(diff, cliDiff == null ? "–" : (cliDiff >= 0 ? "+" : "") + cliDiff.toFixed(3));
    // Per row, the records gained and lost, as the CLI pairs the rows.
    const perRow = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-comparison-row"]')].map((r) => r.dataset.row));
    assert.deepEqual(perRow, cliCompared.per_row.map((r) => r.row));
    // The HTML report from the window, and the CLI's of the same eval.
    const html = path.join(documents, "exported", `eval-${id}.html`);
    fs.mkdirSync(path.dirname(html), { recursive: true });
    answerDialogs(html);
    await (await $t("eval-save-html")).click();
    await waitFor(() => fs.existsSync(html), UI, "no HTML report written");
    const page = fs.readFileSync(html, "utf8");
    assert.ok(page.includes("photosynthesis") && page.startsWith("<!doctype html"), page.slice(0, 80));
    const cliHtml = path.join(documents, "exported", `eval-${id}-cli.html`);
    cli("eval", "report", String(id), "--html", cliHtml);
    const strip = (t) => t.replace(/generated [^<]*/gi, "");
    assert.equal(strip(fs.readFileSync(cliHtml, "utf8")), strip(page), "the window writes the CLI's report");
    await shot("evaluate-resumed");
  });

  await scenario("evaluate: an eval the CLI ran opens in the window", async () => {
    const out = JSON.parse(cli("eval", shipped, "--prompt", kgPrompt, "--max-tokens", "32", "--limit", "1", "--json"));
    await (await $t("eval-open-id")).setValue(String(out.experiment));
    await (await $t("eval-open")).click();
    await waitText("eval-title", (t) => t === `eval ${out.experiment}`, UI, "the CLI's eval did not open");
    assert.equal((await matrixCells()).length, 1);
    assert.equal(await text("eval-line-f1"), out.summary[0].f1 == null ? "–" : out.summary[0].f1.toFixed(3));
  });

  await scenario("evaluate: a long document cut into chunks on the bundled model, its document under its chunks", async () => {
    const longDocs = path.join(process.cwd(), "datasets", "long-documents.jsonl");
    try {
      await (await $t("nav-evaluate")).click();
      await openDataset(longDocs);
      await choosePrompt("agent-kg-extract");
      await (await $t("eval-limit")).setValue("1");
      await (await $t("eval-budgets")).setValue("48");
      await (await $t("eval-chunk-sizes")).setValue("2000");
      await (await $t("eval-plan")).click();
      await waitText("eval-plan-line", (t) => t.startsWith("3 cell(s) · 3 request(s) at most"), UI, "the plan counts the document's 3 chunks");
      await (await $t("eval-run")).click();
      await waitEval("the chunked eval on the bundled model did not finish");
      const id = Number((await text("eval-title")).replace(/\D+/g, ""));
      const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
      const line = shown.cells[0];
      assert.equal(line.chunk_size, 2000);
      assert.equal(line.chunks.chunks, 3);
      assert.equal((await matrixCells()).length, 1);
      assert.equal(await text("eval-line-f1"), line.f1 == null ? "–" : line.f1.toFixed(3), "the window's F1 is the CLI's");
      await (await browser.$('[data-testid="matrix-row"] [data-testid="matrix-cell"] button')).click();
      await (await $t("cell-panel")).waitForExist({ timeout: UI });
      assert.equal(Number(await (await $t("cell-chunks")).getAttribute("data-chunks")), 3);
      assert.equal(Number(await (await $t("cell-chunks")).getAttribute("data-cut")), line.chunks.cut);
      const starts = await browser.execute(() => [...document.querySelectorAll('[data-testid="chunk-start"]')].map((c) => Number(c.dataset.chunk)));
      assert.deepEqual(starts, [1, 2, 3]);
      // Every merged record listed with its placement, as the CLI has it.
      const places = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-place"]')].map((p) => p.dataset.status));
      assert.deepEqual(places, (line.spans ?? []).map((sp) => sp.status));
      console.log(`     3 chunks, ${line.chunks.cut} cut by the budget, ${places.length} records placed (${places.filter((p) => p === "exact").length} exact)`);
    } finally {
      // WebDriver's clearValue fires no input event: a blank is typed, which means whole documents.
      await (await $t("eval-chunk-sizes")).setValue(" ");
    }
  });

  await scenario("evaluate: History lists the evals with their state and best line; an unfinished one opens to resume", async () => {
    // One more eval, stopped after its first cell.
    await (await $t("nav-evaluate")).click();
    await openDataset(shipped);
    await (await $t("eval-limit")).setValue("2");
    await (await $t("eval-budgets")).setValue("32");
    await (await $t("eval-run")).click();
    await waitFor(async () => (await matrixCells()).some((c) => c !== "pending"), CELL, "no cell filled in");
    await (await $t("eval-cancel")).click();
    await waitText("eval-resume", (t) => /cells left/.test(t), CELL, "no Resume offered");
    const stopped = Number((await text("eval-title")).replace(/\D+/g, ""));
    await (await $t("nav-history")).click();
    const row = await browser.$(`[data-testid="experiment-row"][data-id="${stopped}"]`);
    await row.waitForExist({ timeout: UI });
    assert.equal(await row.getAttribute("data-state"), "unfinished");
    assert.match(await row.getText(), /cell\(s\) left/);
    const done = await browser.$(`[data-testid="experiment-row"][data-id="${firstEval}"]`);
    assert.equal(await done.getAttribute("data-state"), "done");
    const shown = JSON.parse(cli("eval", "show", String(firstEval), "--json"));
    const best = Math.max(...shown.summary.map((l) => l.f1 ?? -1));
    if (best >= 0) assert.match(await done.$('[data-testid="experiment-headline"]').getText(), new RegExp(`^best F1 ${best.toFixed(3)}`));
    await shot("history-experiments");
    await row.$('[data-testid="experiment-open"]').click();
    await waitText("eval-title", (t) => t === `eval ${stopped}`, UI, "the stopped eval did not open in Evaluate");
    assert.ok(await (await $t("eval-resume")).isEnabled(), "Resume is offered");
  });

  await scenario("compare side by side: the scrubber, moved by keys, keeps the sweep's counts at three offsets", async () => {
    // The compare's input: the JSONL prompt's own sample (an earlier scenario loaded another).
    await (await $t("nav-run")).click();
    // Set whole, newlines and all (typed by WebDriver, its 7 newlines were lost: another
    // document, on which the constrained array never closed within its budget).
    await browser.execute((text) => {
      const input = document.querySelector('[data-testid="run-input"]');
      input.value = text;
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }, fs.readFileSync(path.join(work, "prompts", "inputs", "photosynthesis.txt"), "utf8"));
    await (await $t("nav-compare")).click();
    await (await $t("compare-a")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract.json"));
    await (await $t("compare-b")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract-array.json"));
    await (await $t("budgets")).setValue("300");
    await (await $t("compare-constrain")).selectByAttribute("value", "auto");
    await (await $t("compare-concurrency")).setValue("4");
    // What the columns showed while the compare ran, watched in the page (a poll from here would
    // miss the moment between the last reply's end and the compare's).
    await browser.execute(() => {
      const seen = (window.__liveSeen = { streamingObjects: 0, endedArrayObjects: 0 });
      new MutationObserver(() => {
        const [a, b] = ["a", "b"].map((n) => document.querySelector(`[data-testid="compare-sbs-live-${n}"]`));
        const marked = (col) => (col ? Math.min(Number(col.dataset.objects), col.querySelectorAll("pre span.obj").length) : 0);
        if (a && a.dataset.ended !== "true") seen.streamingObjects = Math.max(seen.streamingObjects, marked(a));
        if (b && b.dataset.ended === "true") seen.endedArrayObjects = Math.max(seen.endedArrayObjects, marked(b));
      }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await (await $t("compare-run")).click();
    // The two columns fill as the runs stream, before the compare ends, each object its format
    // accepts highlighted as it is accepted: a JSONL reply's while it still streams.
    const liveText = () => browser.execute(() => ["a", "b"].map((n) => ({
      text: document.querySelector(`[data-testid="compare-sbs-live-${n}"] pre`)?.textContent.length ?? 0 })));
    let sawLive = false, last = "";
    try {
      await waitProgress({
        done: async () => (await (await $t("compare-sbs")).getAttribute("data-loaded")) === "true",
        progress: async () => {
          const [ca, cb] = await liveText().catch(() => [{ text: 0 }, { text: 0 }]);
          const [la, lb] = [ca.text, cb.text];
          if (la + lb > 0) sawLive = true;

          const p = await browser.$('[data-testid="compare-progress"]');
          last = `${(await p.isExisting()) ? await p.getText() : ""} · streamed ${la}/${lb}`;
          return `${last} @ ${historyWritten()}`;
        },
        failed: async () => {
          const e = await browser.$('[data-testid="compare-error"], [data-testid="compare-sbs-error"]');
          return (await e.isExisting()) ? (await e.getText()) || null : null;
        },
      }, CELL, "the side-by-side view did not appear");
    } catch (e) {
      const cancel = await $t("compare-cancel");
      if (await cancel.isEnabled().catch(() => false)) await cancel.click();
      throw e;
    }
    assert.ok(sawLive, "no reply text streamed into the columns while the compare ran");
    const seen = await browser.execute(() => window.__liveSeen);
    assert.ok(seen.streamingObjects > 0, "no JSONL object was highlighted while its reply streamed");
    assert.ok(seen.endedArrayObjects > 0, "no array reply's objects were highlighted once it ended");
    console.log(`     while streaming: up to ${seen.streamingObjects} JSONL objects highlighted; the array's ${seen.endedArrayObjects} at its end`);

    // What the sweep says, from the CLI: each column's stored run, cut at its model's tokens.
    const cli = process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf");
    const sweepOf = async (side) => {
      const run = await (await $t(`compare-sbs-${side}`)).getAttribute("data-run");
      const shown = JSON.parse(execFileSync(cli, ["history", "show", run, "--json"], { encoding: "utf8" }));
      const reply = path.join(work, `side-${side}-${run}.txt`);
      fs.writeFileSync(reply, shown.raw);
      const model = path.isAbsolute(shown.model) ? shown.model : path.join(process.env.KERF_MODELS_DIR, shown.model);
      const sweep = JSON.parse(execFileSync(cli, ["--no-history", "sweep", reply, "--prompt", shown.prompt_path,
        "--unit", "token", "--tokenizer", model, "--json"], { encoding: "utf8" }));
      // The sweep's value after k tokens: the last change at or before k (the total past the end).
      return { run, length: sweep.points.at(-1)[0], at: (k) => sweep.points.filter(([o]) => o <= k).at(-1)?.[1] ?? 0 };
    };
    const sweeps = { a: await sweepOf("a"), b: await sweepOf("b") };
    const maxK = Math.max(sweeps.a.length, sweeps.b.length);
    const cutK = async () => Number(await (await $t("compare-sbs-cut")).getAttribute("data-k"));
    const kept = async (side) => Number(await (await $t(`compare-sbs-${side}-kept`)).getAttribute("data-count"));
    // Which objects: the last ones listed, the earlier ones counted.
    const which = (side) => browser.execute((side) => {
      const list = document.querySelector(`[data-testid="compare-sbs-${side}-which"]`);
      return Number(list.dataset.from) + list.querySelectorAll("[data-record]").length;
    }, side);
    // Three offsets reached by keys alone: Home then pages and arrows, then End and back.
    const scrubber = await $t("compare-sbs-scrubber");
    await scrubber.click();
    const offsets = [];
    // What each key does to the cut, as the view's help line says.
    const stepOf = { Home: () => 0, End: () => maxK, PageUp: (k) => k + 10, PageDown: (k) => k - 10,
      ArrowRight: (k) => k + 1, ArrowUp: (k) => k + 1, ArrowLeft: (k) => k - 1, ArrowDown: (k) => k - 1 };
    const press = async (keys, why) => {
      let expected = await cutK();
      for (const key of keys) {
        await browser.keys([key]);
        expected = Math.max(0, Math.min(maxK, stepOf[key](expected)));
      }
      await waitFor(async () => (await cutK()) === expected, UI, () => `${why}: the cut is not after ${expected} tokens`);
      const k = expected;
      for (const side of ["a", "b"]) {
        const want = sweeps[side].at(k);
        await waitFor(async () => (await kept(side)) === want, UI,
          () => `after ${k} tokens, column ${side} (run ${sweeps[side].run}) does not keep the sweep's ${want}`);
        // The list follows once the cut rests (a table is dearer than the counts).
        await waitFor(async () => (await which(side)) === want, UI, `column ${side} does not list ${want} kept objects after ${k} tokens`);
      }
      offsets.push(`${k}: ${await kept("a")}/${await kept("b")}`);
    };
    const pages = Math.max(1, Math.floor(maxK / 30));
    await press(["Home", ...Array(pages).fill("PageUp"), "ArrowRight", "ArrowRight", "ArrowLeft"], "Home, PageUp, arrows");
    // The kept objects as fields, a table per type with its fields as columns; their labels one
    // toggle away, the same objects.
    const tables = (side) => browser.execute((side) => [...document.querySelectorAll(`[data-testid="compare-sbs-${side}-which"] [data-testid="record-group"]`)]
      .map((g) => [g.dataset.type, [...g.querySelectorAll("th")].map((h) => h.textContent).slice(1)]), side);
    for (const side of ["a", "b"]) {
      if ((await kept(side)) === 0) continue;
      const groups = await tables(side);
      assert.ok(groups.length > 0 && groups.every(([t, cols]) => ["definition", "relationship"].includes(t) && cols.length >= 2), `column ${side}'s kept objects as fields: ${JSON.stringify(groups)}`);
      const want = { definition: ["entity", "definition"], relationship: ["subject", "predicate", "object"] };
      assert.ok(groups.every(([t, cols]) => want[t].every((c) => cols.includes(c))), `each type's fields are its columns: ${JSON.stringify(groups)}`);
    }
    const listed = await which("a");
    await (await $t("compare-sbs-as-labels")).click();
    await waitFor(async () => (await browser.$$('[data-testid="compare-sbs-a-which"] li')).length > 0 || listed === 0, UI, "the labels did not show");
    assert.equal(await which("a"), listed, "the labels list the same kept objects");
    await (await $t("compare-sbs-as-fields")).click();
    await scrubber.click();
    await press([...Array(pages).fill("PageUp"), "PageDown", "ArrowUp"], "PageUp, PageDown, ArrowUp");
    await browser.execute(() => document.querySelector('[data-testid="compare-sbs"]').scrollIntoView({ block: "center" }));
    await shot("side-by-side");
    await press(["End", "ArrowLeft", "ArrowLeft", "ArrowRight"], "End, arrows");
    // The curve's marker is at the cut.
    assert.equal(Number(await (await $t("compare-sbs-marker")).getAttribute("data-k")), maxK - 1);
    // The array's reply ended on its own with objects: its column keeps them at the end.
    assert.ok(sweeps.b.at(maxK) > 0 && (await kept("b")) === sweeps.b.at(maxK - 1),
      `the array column keeps ${await kept("b")} at the end (the sweep: ${sweeps.b.at(maxK)})`);
    console.log(`     kept (JSONL/array) after k tokens, as the sweep says: ${offsets.join(", ")} of ${sweeps.a.length}/${sweeps.b.length} tokens`);

    // Dragging on the curve moves the cut too: pressed at a quarter of its width and dragged to
    // three quarters, the cut follows the pointer and the counts are the sweep's there.
    const curve = await $t("compare-sbs-curve");
    const { width } = await curve.getSize();
    const at = (f) => Math.round((f - 0.5) * width);
    await browser.action("pointer", { parameters: { pointerType: "mouse" } })
      .move({ origin: curve, x: at(0.25), y: 0 }).down().pause(50)
      .move({ origin: curve, x: at(0.5), y: 0 }).pause(50)
      .move({ origin: curve, x: at(0.75), y: 0 }).up().perform();
    const dragged = await cutK();
    assert.ok(Math.abs(dragged - 0.75 * maxK) <= Math.max(2, maxK * 0.03), `dragged to ${dragged} of ${maxK} tokens, not near three quarters`);
    assert.equal(Number(await (await $t("compare-sbs-marker")).getAttribute("data-k")), dragged);
    for (const side of ["a", "b"]) {
      await waitFor(async () => (await kept(side)) === sweeps[side].at(dragged), UI,
        () => `dragged to ${dragged} tokens, column ${side} does not keep the sweep's ${sweeps[side].at(dragged)}`);
    }
    console.log(`     dragged on the curve to ${dragged} tokens: ${await kept("a")}/${await kept("b")} kept`);

    // The same two runs from History: tick both, "Compare side by side", and cut with the keys.
    await (await $t("nav-history")).click();
    for (const side of ["a", "b"]) await (await $t(`pick-${sweeps[side].run}`)).click();
    await (await $t("side-by-side")).click();
    await waitFor(async () => (await (await $t("history-sbs")).getAttribute("data-loaded")) === "true", UI, "History's side-by-side view did not appear");
    await (await $t("history-sbs-scrubber")).click();
    const history = async (col) => ({
      run: await (await $t(`history-sbs-${col}`)).getAttribute("data-run"),
      kept: Number(await (await $t(`history-sbs-${col}-kept`)).getAttribute("data-count")),
    });
    for (const [keys, k] of [[["Home", "PageUp"], Math.min(10, maxK)], [["End"], maxK]]) {
      for (const key of keys) await browser.keys([key]);
      await waitFor(async () => Number(await (await $t("history-sbs-cut")).getAttribute("data-k")) === k, UI, `History's cut is not after ${k} tokens`);
      for (const col of ["a", "b"]) {
        const { run, kept: n } = await history(col);
        const side = sweeps.a.run === run ? sweeps.a : sweeps.b;
        assert.equal(run, side.run, `History's column ${col} shows run ${run}, not one of the compare's`);
        assert.equal(n, side.at(k), `History: run ${run} after ${k} tokens keeps ${n}, the sweep says ${side.at(k)}`);
      }
    }
  });

  await scenario("History opens a compare in Compare, a sweep's curves and a test's verdicts", async () => {
    const cli = process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf");
    // A sweep and a prompt file's tests, from the CLI, into the same history.
    const reply = path.join(work, "swept.jsonl");
    fs.writeFileSync(reply, kgLines(3).join("\n") + "\n");
    execFileSync(cli, ["sweep", reply, "--prompt", path.join(work, "prompts", "agent-kg-extract.json"), "--unit", "char", "--json"], { encoding: "utf8" });
    const withTests = JSON.parse(fs.readFileSync(path.join(work, "prompts", "agent-kg-extract.json"), "utf8"));
    const input = fs.readFileSync(path.join(work, "prompts", "inputs", "photosynthesis.txt"), "utf8");
    const expected = [{ type: "definition", entity: "a thing no model names", definition: "none" }];
    withTests.tests = [
      { name: "anything goes", input, expected, min: { recall: 0 }, "max-tokens": 48 },
      { name: "finds the unnamed", input, expected, min: { recall: 1 }, "max-tokens": 48 },
    ];
    const testedPrompt = path.join(work, "tested.json");
    fs.writeFileSync(testedPrompt, JSON.stringify(withTests, null, 2));
    try { execFileSync(cli, ["test", testedPrompt, "--json"], { encoding: "utf8" }); } catch (e) {
      // One test fails by design: exit 1, its report on stdout.
      assert.equal(e.status, 1, `kerf test: ${e.stderr}`);
    }

    await (await $t("nav-run")).click();
    await (await $t("nav-history")).click();
    const openKind = async (kind) => {
      await waitFor(async () => (await browser.$$(`[data-testid="experiment-row"][data-kind="${kind}"]`)).length > 0, UI, `History lists no ${kind}`);
      const row = await browser.$(`[data-testid="experiment-row"][data-kind="${kind}"]`);
      const id = await row.getAttribute("data-id");
      await (await row.$('[data-testid="experiment-open"]')).click();
      return id;
    };
    // The sweep: its curves here, its chart drawn.
    const sweepId = await openKind("sweep");
    await waitFor(async () => (await (await $t("opened-title")).getAttribute("data-kind")) === "sweep", UI, "the sweep did not open");
    assert.match(await (await $t("opened-title")).getText(), new RegExp(`Sweep e${sweepId}: 1 reply cut at every char`));
    assert.equal(await (await $t("opened-sweep-chart")).getAttribute("data-drawn"), "1");
    const curves = await browser.execute(() => [...document.querySelectorAll('[data-testid="opened-curve"]')].map((r) => [r.cells[0].textContent, Number(r.dataset.total)]));
    assert.ok(curves.length === 1 && curves[0][0].includes("swept.jsonl") && curves[0][1] === 3, `the sweep's curves: ${JSON.stringify(curves)}`);
    // The test: each verdict, and its run one click away.
    await openKind("test");
    await waitFor(async () => (await (await $t("opened-title")).getAttribute("data-kind")) === "test", UI, "the test did not open");
    assert.match(await (await $t("opened-title")).getText(), /1 passed, 1 failed/);
    const verdicts = await browser.execute(() => [...document.querySelectorAll('[data-testid="opened-test"]')].map((r) => r.dataset.verdict));
    assert.deepEqual(verdicts, ["passed", "failed"]);
    await shot("history-opened-test");
    // The compare: in Compare, as it ended, its two formats side by side.
    const compareId = await openKind("compare");
    await waitFor(async () => (await (await $t("compare-stored")).getAttribute("data-id")) === compareId, UI, `compare e${compareId} did not open in Compare`);
    assert.equal((await browser.$$('[data-testid="compare-row"]')).length, 2);
    await waitFor(async () => (await (await $t("compare-sbs")).getAttribute("data-loaded")) === "true", UI, "the stored compare's side by side did not load");
    assert.equal(await (await $t("budgets")).getValue(), "300");
  });

  // A cloud provider through the window: its key typed once into the keyring, then a run on it
  // against a loopback OpenAI-compatible server that checks the key.
  const key = `sk-e2e-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const cloud = await startOpenAI({ key, reply: kgLines(6).join("\n") + "\n" });
  const provider = `e2e-${process.pid}`;
  const paid = `e2e-paid-${process.pid}`;
  try {
    await scenario("add a cloud provider with its key in the keyring and run on it", async () => {
      await (await $t("nav-providers")).click();
      await waitText("providers-empty", (s) => s.includes("No cloud providers yet"), UI, "no empty state");
      await (await $t("provider-name")).setValue(provider);
      await (await $t("provider-url")).setValue(cloud.url);
      await (await $t("provider-model")).setValue("loopback-model");
      await (await $t("provider-key")).setValue(key);
      await (await $t("provider-add")).click();
      await waitText("providers-notice", (s) => s.startsWith(`Added ${provider}`), UI, "the provider was not added");
      const row = await browser.$(`[data-testid="provider-row"][data-name="${provider}"]`);
      assert.match(await row.$('[data-testid="key-status"]').getText(), /from the .*keyring/);
      // Never shown again: not in any field, not anywhere in the page.
      assert.equal(await (await $t("provider-key")).getValue(), "");
      assert.ok(!(await browser.getPageSource()).includes(key), "the key is still in the page");
      await shot("providers");

      await (await $t(`use-${provider}`)).click();
      await waitFor(async () => (await (await $t("provider")).getValue()) === provider, UI, `the Run screen's provider is not ${provider}`);
      await (await $t("max-tokens")).setValue("2000");
      // The previous run's summary (a local run that finished) is not this one's.
      const id = await pressRun();
      await waitSummary(id, (s) => /finished/.test(s), NET, "the cloud run did not finish");
      assert.equal(Number(await text("object-count")), 6);
      const shown = await browser.execute(() => document.querySelector('[data-testid="raw"]').textContent);
      assert.equal(shown, cloud.options.reply, "the reply shown is not what the server sent");
      const last = cloud.requests.at(-1);
      assert.equal(last.auth, `Bearer ${key}`, "the run did not send the stored key");
      assert.equal(last.body.model, "loopback-model");
    });

    await scenario("evaluate on the loopback server: every cell scored, a cell's records marked and placed", async () => {
      // A reply with one expected record of the photosynthesis row, one invented record, and a
      // line that is not JSON: the same for every row.
      const saved = cloud.options.reply;
      cloud.options.reply = [
        JSON.stringify({ type: "definition", entity: "Photosynthesis", definition: "The process by which green plants turn light energy into chemical energy" }),
        "not a record",
        JSON.stringify({ type: "definition", entity: "Unicorn", definition: "Not in any document" }),
      ].join("\n") + "\n";
      try {
        await (await $t("nav-evaluate")).click();
        await openDataset(shipped);
        await choosePrompt("agent-kg-extract");
        await (await $t("eval-limit")).setValue("4");
        await (await $t("eval-budgets")).setValue("512");
        await (await $t("eval-constrain")).selectByAttribute("value", "none");
        await (await $t("eval-concurrency")).setValue("4");
        await (await $t("eval-run")).click();
        await waitEval("the loopback eval did not finish");
        const id = Number((await text("eval-title")).replace(/\D+/g, ""));
        const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
        assert.equal(shown.provider, provider);
        assert.equal((await matrixCells()).length, 4);
        assert.equal(await text("eval-line-f1"), shown.summary[0].f1.toFixed(3));
        await (await browser.$('[data-testid="matrix-row"][data-row="photosynthesis"] [data-testid="matrix-cell"] button')).click();
        await (await browser.$('[data-testid="cell-panel"][data-row="photosynthesis"]')).waitForExist({ timeout: UI });
        const marks = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-extracted"] li[data-mark]')].map((l) => [l.dataset.mark, l.dataset.grounded]));
        assert.deepEqual(marks, [["matched", "true"], ["spurious", "false"]]);
        const expected = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-expected"] li')].map((l) => l.dataset.mark));
        assert.equal(expected.filter((m) => m === "matched").length, 1);
        assert.ok(expected.filter((m) => m === "missed").length >= 2);
        // The two records highlighted in the reply, the line between them not.
        const hits = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-reply"] .hit')].map((h) => h.textContent));
        assert.deepEqual(hits.map((h) => JSON.parse(h).entity), ["Photosynthesis", "Unicorn"]);
        // Its name in the document, and the invented one listed apart.
        await (await browser.$('[data-testid="cell-extracted"] li[data-mark="matched"] [data-testid="cell-record"]')).click();
        const on = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-document"] .ground.on')].map((h) => h.textContent));
        assert.deepEqual(on, ["Photosynthesis"]);
        assert.match(await text("cell-ungrounded"), /Unicorn/);
        // Records as fields, and the matched one beside its expected record field by field.
        assert.match(await text("cell-extracted"), /entity\s*Photosynthesis/);
        const pair = await browser.execute(() => [...document.querySelectorAll('[data-testid="pair-field"]')].map((r) => [r.dataset.field, r.dataset.same]));
        assert.ok(pair.some(([f, same]) => f === "entity" && same === "true"), `the entity agrees field by field: ${JSON.stringify(pair)}`);
        await shot("evaluate-loopback-cell");
        await (await $t("cell-as-json")).click();
        assert.match(await text("cell-extracted"), /"entity":"Photosynthesis"/);
        await (await $t("cell-as-fields")).click();
        // Why pieces were dropped: the line of prose in every reply, as a bar chart that saves
        // as SVG (drawn by Rust, the HTML report's chart) and PNG; a click on the bar filters
        // the matrix to that reason.
        const drops = await $t("eval-drop-chart");
        await drops.scrollIntoView();
        assert.equal(await drops.getAttribute("data-drawn"), "1", "one prompt, one bar per reason");
        const dropSvg = path.join(documents, "exported", "drops.svg");
        const dropPng = path.join(documents, "exported", "drops.png");
        fs.mkdirSync(path.dirname(dropSvg), { recursive: true });
        answerDialogs(dropSvg);
        await (await drops.parentElement().$("button=Save SVG")).click();
        await browser.waitUntil(() => fs.existsSync(dropSvg), { timeout: UI, timeoutMsg: "no drop chart SVG written" });
        const dropDoc = fs.readFileSync(dropSvg, "utf8");
        for (const label of ["\nprose\n", "\nagent-kg-extract\n", "pieces dropped"]) {
          assert.ok(dropDoc.includes(label), `the drop chart's SVG lacks ${JSON.stringify(label)}`);
        }
        answerDialogs(dropPng);
        await (await drops.parentElement().$("button=Save PNG")).click();
        await browser.waitUntil(() => fs.existsSync(dropPng) && fs.statSync(dropPng).size > 0, { timeout: UI, timeoutMsg: "no drop chart PNG written" });
        assert.equal(fs.readFileSync(dropPng).subarray(1, 4).toString(), "PNG");
        assert.equal(await (await $t("matrix-drop")).getValue(), "");
        // One reason: its bars are the plot's middle.
        await (await browser.$('[data-testid="eval-drop-chart"] .u-over')).click();
        await waitFor(async () => (await (await $t("matrix-drop")).getValue()) === "prose", UI, "a click on the prose bar did not filter the matrix");
        assert.equal((await matrixCells()).length, 4, "every row dropped a line of prose");
        await shot("evaluate-drops");
      } finally {
        cloud.options.reply = saved;
        // The scenarios after this one start from the Run screen, as the one before left it.
        await (await $t("nav-run")).click();
      }
    });

    await scenario("evaluate a long document cut into chunks: its records merged and placed, its chunks drawn over it", async () => {
      // A model that reads only the chunk it is sent: every expected record of the shipped long
      // documents whose names are all in the request, one JSON line each.
      const longDocs = path.join(process.cwd(), "datasets", "long-documents.jsonl");
      const rows = fs.readFileSync(longDocs, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const records = rows.flatMap((r) => r.expected["agent-kg-extract"]);
      cloud.options.replyFor = (req) => {
        const sent = JSON.stringify(req.messages);
        return records.filter((r) => [r.entity, r.subject, r.object].filter(Boolean).every((t) => sent.includes(t)))
          .map((r) => JSON.stringify(r)).join("\n") + "\n";
      };
      try {
        const id = await chunkedEval(longDocs, { concurrency: 4, sizes: "1500, 3000", overlap: 300 });
        const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
        const line = shown.cells.find((c) => c.chunk_size === 1500);
        assert.ok(line, "a line at 1,500 characters");
        assert.equal((await matrixCells()).length, 2, "one document, a line per chunk size");
        // What its chunks did, as the CLI reports it.
        const chunkLines = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-chunk-line"]')].map((l) => l.dataset.chunkSize));
        assert.deepEqual(chunkLines, ["1500", "3000"]);
        // The advised chunk size, exported for TrustGraph where the user chose, reads back.
        const advised = shown.advice[0].chunk_size;
        const settings = path.join(documents, "exported", "flow-params.json");
        fs.mkdirSync(path.dirname(settings), { recursive: true });
        answerDialogs(settings);
        await (await $t("eval-export-chunking")).click();
        await waitText("eval-chunking-exported", (t) => t.startsWith("Saved"), UI, "the chunk settings were not saved");
        const params = JSON.parse(fs.readFileSync(settings, "utf8"));
        assert.deepEqual(params.parameters, { "chunk-size": String(advised), "chunk-overlap": "300" });
        assert.equal(params.processor, "chunker-recursive");
        assert.deepEqual(JSON.parse(cli("import", settings, "--json")).chunking, { chunker: "recursive", size: advised, overlap: 300 });
        await (await browser.$('[data-testid="matrix-row"] [data-testid="matrix-cell"][data-chunk-size="1500"] button')).click();
        await (await $t("cell-panel")).waitForExist({ timeout: UI });
        const chunks = await $t("cell-chunks");
        assert.equal(Number(await chunks.getAttribute("data-chunks")), line.chunks.chunks);
        // Every chunk's start marked in the document, the overlaps shaded, the whole text shown.
        const starts = await browser.execute(() => [...document.querySelectorAll('[data-testid="chunk-start"]')].map((c) => Number(c.dataset.chunk)));
        assert.deepEqual(starts, Array.from({ length: line.chunks.chunks }, (_, i) => i + 1));
        assert.ok((await browser.$$('[data-testid="cell-document"] .overlap')).length >= 1, "consecutive chunks share text");
        const doc = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-document"] span:not(.chunkmark)')].map((s) => s.textContent).join(""));
        assert.equal(doc, rows[0].input, "the document whole, under its chunks");
        // Each merged record listed once, placed where it was found, as the CLI's spans say.
        const places = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-place"]')].map((p) => p.dataset.status));
        assert.equal(places.length, line.spans.length);
        assert.ok(places.every((p) => p === "exact"), `every record found as written: ${places}`);
        // A record seen again in an overlap is folded into one; the same record named again at
        // another place is another mention, and the row expects it once: a repeat is spurious.
        assert.ok(line.chunks.folded > 0, "records in an overlap were folded");
        const mentions = new Map();
        for (const sp of line.spans) mentions.set(sp.identity, (mentions.get(sp.identity) ?? 0) + 1);
        const repeats = [...mentions.values()].reduce((n, k) => n + k - 1, 0);
        assert.ok(repeats > 0 && line.fp >= repeats, `${repeats} repeats, ${line.fp} spurious`);
        const marks = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-extracted"] li[data-mark]')].map((l) => l.dataset.mark));
        assert.equal(marks.filter((m) => m === "spurious").length, line.fp, "the window's spurious records are the CLI's");
        assert.equal(marks.filter((m) => m === "matched" || m === "partial").length, line.tp);
        await (await browser.$('[data-testid="cell-extracted"] li[data-mark="matched"] [data-testid="cell-record"]')).click();
        const on = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-document"] .ground.on')].map((h) => h.textContent).join(""));
        assert.ok(on.length > 0 && rows[0].input.includes(on), `the chosen record's place is highlighted: ${on}`);
        console.log(`     ${line.chunks.chunks} chunks, ${line.spans.length} records placed, ${line.chunks.folded} folded, recall ${line.recall.toFixed(3)}`);
        await shot("evaluate-chunked");
      } finally {
        delete cloud.options.replyFor;
        // WebDriver's clearValue fires no input event: a blank is typed, which means whole documents.
        await (await $t("eval-chunk-sizes")).setValue(" ");
        await (await $t("nav-run")).click();
      }
    });

    await scenario("evaluate a book-length document: drawn a part at a time, its records a page at a time", async () => {
      // The shipped long documents over and over, to a megabyte: hundreds of chunks, thousands of
      // records. The model reads only its chunk; every ninth reply is cut by its budget.
      const rows = fs.readFileSync(path.join(process.cwd(), "datasets", "long-documents.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const block = rows.map((r) => r.input).join("\n\n");
      const book = Array.from({ length: Math.ceil(1_000_000 / block.length) }, () => block).join("\n\n");
      const records = [...new Map(rows.flatMap((r) => r.expected["agent-kg-extract"]).map((r) => [JSON.stringify(r), r])).values()];
      const bookFile = path.join(documents, "book.jsonl");
      fs.writeFileSync(bookFile, JSON.stringify({ id: "book", input: book, expected: { "agent-kg-extract": records } }) + "\n");
      let asked = 0;
      cloud.options.replyFor = (req) => {
        const sent = JSON.stringify(req.messages);
        const lines = records.filter((r) => [r.entity, r.subject, r.object].filter(Boolean).every((t) => sent.includes(t))).map((r) => JSON.stringify(r));
        if (++asked % 9 || lines.length < 2) return lines.join("\n") + "\n";
        return { reply: lines.slice(0, Math.floor(lines.length / 2)).join("\n") + '\n{"type": "defin', finish: "length" };
      };
      try {
        const id = await chunkedEval(bookFile, { concurrency: 8, sizes: "2000", overlap: 100 });
        // Its report is megabytes of JSON: every record's place. The window is sent the report
        // without them (an opened cell brings its own).
        const report = execFileSync(cliBin, ["eval", "show", String(id), "--json"], { encoding: "utf8", env: process.env, maxBuffer: 1 << 28 });
        const line = JSON.parse(report).cells[0];
        const sent = await browser.executeAsync((experiment, done) => window.__TAURI_INTERNALS__.invoke("eval_show", { experiment })
          .then((v) => done(JSON.stringify(v)), (e) => done(`failed: ${e}`)), id);
        assert.ok(JSON.parse(sent).report.cells.every((c) => c.spans === undefined && c.chunks.chunks === line.chunks.chunks), "the window's report: each line's figures, not its spans");
        assert.ok(line.chunks.chunks > 400 && line.chunks.cut > 0 && line.spans.length > 1000, `${line.chunks.chunks} chunks, ${line.chunks.cut} cut, ${line.spans.length} records`);
        const t0 = Date.now();
        await (await browser.$('[data-testid="matrix-row"] [data-testid="matrix-cell"] button')).click();
        await (await $t("cell-panel")).waitForExist({ timeout: NET });
        const opening = Date.now() - t0;
        // The first part of the document drawn, and no more: a tenth of a megabyte at most.
        const parts = await $t("cell-document-parts");
        assert.equal(await parts.getAttribute("data-part"), "1");
        const partCount = Number(await parts.getAttribute("data-parts"));
        assert.ok(partCount >= 20, `${partCount} parts`);
        const drawn = () => browser.execute(() => [...document.querySelectorAll('[data-testid="cell-document"] span:not(.chunkmark)')].map((s) => s.textContent).join(""));
        const first = await drawn();
        assert.ok(first.length > 43_750 && first.length <= 50_000 && book.startsWith(first), `part 1 is the book's first ${first.length} characters`);
        const elements = await browser.execute(() => document.querySelectorAll('[data-testid="cell-document"] span').length);
        // The extracted records a page at a time, counted as the CLI counts them.
        const pages = await $t("cell-extracted-pages");
        assert.ok((await pages.getText()).includes(`1–500 of ${line.spans.length.toLocaleString("en-US")}`), await pages.getText());
        assert.equal((await browser.$$('[data-testid="cell-extracted"] li[data-mark]')).length, 500);
        // A record past the first page and the first part, found by turning the list's pages and
        // chosen: the document turns to its part and marks exactly the characters the CLI places
        // it at.
        const k = line.spans.findIndex((sp, i) => i >= 500 && sp.start > first.length);
        assert.ok(k >= 500, "a record past the first page lies past the first part");
        for (let p = 0; p < Math.floor(k / 500); p++) await (await browser.$('[data-testid="cell-extracted-pages"] button[aria-label="Next records"]')).click();
        const at = line.spans[k];
        await (await browser.$(`[data-testid="cell-extracted"] li[data-index="${k}"] [data-testid="cell-record"]`)).click();
        await waitFor(async () => (await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-document"] .ground.on')].map((h) => h.textContent).join(""))) === book.slice(at.start, at.end),
          UI, `record ${k + 1} is highlighted at ${at.start}–${at.end}`);
        const nav = await $t("cell-document-parts");
        const [turned, from, to] = await Promise.all(["data-part", "data-start", "data-end"].map(async (a) => Number(await nav.getAttribute(a))));
        assert.ok(turned > 1 && from <= at.start && at.start < to, `turned to part ${turned} (${from}–${to}) for ${at.start}`);
        assert.equal(await drawn(), book.slice(from, to), "the part drawn is the book's characters there");
        // A chunk cut by its budget, named in the header: a click shows it in the document.
        const cutLink = await $t("cell-cut-chunk");
        const cutChunk = Number(await cutLink.getText());
        await cutLink.click();
        await (await browser.$(`[data-testid="cell-document"] [data-testid="chunk-start"][data-chunk="${cutChunk}"]`)).waitForExist({ timeout: UI });
        assert.ok(await (await browser.$(`[data-testid="chunk-start"][data-chunk="${cutChunk}"]`)).getAttribute("class").then((c) => c.includes("cutchunk")));
        // Only the spurious records, counted as the CLI counts them.
        await (await $t("cell-extracted-only")).selectByAttribute("value", "spurious");
        const marks = await browser.execute(() => [...document.querySelectorAll('[data-testid="cell-extracted"] li[data-mark]')].map((l) => l.dataset.mark));
        assert.ok(marks.length === Math.min(500, line.fp) && marks.every((m) => m === "spurious"), `${marks.length} listed of ${line.fp} spurious`);
        console.log(`     ${book.length.toLocaleString("en-US")} characters, ${line.chunks.chunks} chunks (${line.chunks.cut} cut), ${line.spans.length} records: opened in ${(opening / 1000).toFixed(1)} s, ${partCount} parts, ${elements} elements drawn; the report ${(report.length / 1e6).toFixed(1)} MB as JSON, ${(sent.length / 1e6).toFixed(2)} MB sent to the window`);
      } finally {
        delete cloud.options.replyFor;
        await (await $t("eval-chunk-sizes")).setValue(" ");
        await (await $t("nav-run")).click();
      }
    });

    await scenario("evaluate two providers side by side: the bundled model and the loopback server", async () => {
      const saved = cloud.options.reply;
      cloud.options.reply = JSON.stringify({ type: "definition", entity: "Photosynthesis", definition: "The process by which green plants turn light energy into chemical energy" }) + "\n";
      try {
        await (await $t("nav-evaluate")).click();
        await openDataset(shipped);
        await choosePrompt("agent-kg-extract");
        await (await $t("eval-limit")).setValue("2");
        await (await $t("eval-budgets")).setValue("96");
        await (await $t("eval-constrain")).selectByAttribute("value", "none");
        // The Run screen's provider is the loopback one; the bundled model beside it.
        const local = await browser.$('[data-testid="eval-provider"][data-name="local"]');
        if (!(await local.isSelected())) await local.click();
        const cloudBox = await browser.$(`[data-testid="eval-provider"][data-name="${provider}"]`);
        assert.ok(await cloudBox.isSelected(), "the Run screen's provider is picked");
        await (await $t("eval-plan")).click();
        await waitText("eval-plan-line", (t) => t.startsWith("4 cell(s) · 4 request(s) at most") && t.includes(`${provider}: 2 request(s)`) && t.includes("local: 2 request(s), free"), UI, "the plan does not count each provider");
        const before = cloud.requests.length;
        await (await $t("eval-run")).click();
        await waitEval("the eval of two providers did not finish");
        const chats = cloud.requests.slice(before).filter((r) => r.url.endsWith("/chat/completions"));
        assert.equal(chats.length, 2, "the loopback server saw its two requests and no more");
        const id = Number((await text("eval-title")).replace(/\D+/g, ""));
        const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
        assert.deepEqual(shown.providers.map((p) => p.provider), [provider, "local"]);
        assert.equal((await matrixCells()).length, 4, "2 rows × 2 providers");
        // The matrix's columns under each provider, its cost and run times in the header.
        const heads = await browser.execute(() => [...document.querySelectorAll('[data-testid="matrix-provider"]')].map((h) => [h.dataset.provider, h.textContent]));
        assert.deepEqual(heads.map(([p]) => p), [provider, "local"]);
        assert.ok(heads.every(([, t]) => /p50 [\d.]+ s · p95 [\d.]+ s/.test(t)), `run times in the headers: ${JSON.stringify(heads)}`);
        const lines = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-summary-line"]')].map((l) => [l.dataset.provider, l.querySelector('[data-testid="eval-line-f1"]').textContent]));
        assert.deepEqual(lines, shown.summary.map((l) => [l.provider, l.f1 == null ? "–" : l.f1.toFixed(3)]), "the window's lines are `kerf eval show`'s");
        // A cell of the loopback server opened, its provider named.
        await (await browser.$(`[data-testid="matrix-row"][data-row="photosynthesis"] [data-testid="matrix-cell"][data-provider="${provider}"] button`)).click();
        await (await browser.$(`[data-testid="cell-panel"][data-provider="${provider}"]`)).waitForExist({ timeout: UI });
        assert.equal(await text("cell-provider"), provider);
        const cliCell = shown.cells.find((c) => c.provider === provider && c.row === "photosynthesis");
        assert.equal(cliCell.tp, 1, "the one expected record the server sent is matched");
        // Both providers' bars in the drop chart, each named.
        const dropSeries = JSON.parse(cli("eval", "show", String(id), "--json")).drops.map((d) => d.provider);
        assert.deepEqual(dropSeries, [provider, "local"]);
        await (await $t("eval-matrix")).scrollIntoView();
        await shot("evaluate-providers");
      } finally {
        cloud.options.reply = saved;
        await (await $t("nav-run")).click();
      }
    });

    await scenario("evaluate with a variable set for every row: the form answers the preview, every request carries it, the eval says so", async () => {
      const saved = cloud.options.reply;
      cloud.options.reply = JSON.stringify({ type: "definition", entity: "Photosynthesis", definition: "The process by which green plants turn light energy into chemical energy" }) + "\n";
      try {
        await withTestPrompt("area-extract");
        await (await $t("nav-evaluate")).click();
        for (const box of await browser.$$('[data-testid="eval-prompt"]')) {
          if ((await box.isSelected()) !== ((await box.getAttribute("data-id")) === "area-extract")) await box.click();
        }
        answerDialogs(shipped);
        await (await $t("eval-dataset-pick")).click();
        // Each row misses `area`, named at the row, until the form sets it.
        await (await $t("eval-problem-count")).waitForExist({ timeout: UI });
        assert.match(await text("eval-problem-count"), /^\d+ problem/i);
        const problems = await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-row-problem"]')].map((p) => p.textContent));
        assert.ok(problems.length > 0 && problems.every((p) => p.includes("missing variable `area`")), JSON.stringify(problems));
        assert.match(await text("eval-vars-area-extract"), /area \(each row's own\)/);
        await (await browser.$('[data-testid="eval-vars-area-extract"] summary')).click();
        await (await $t("eval-vars-area-extract-form-area")).setValue("botany");
        await (await $t("eval-no-problems")).waitForExist({ timeout: UI, timeoutMsg: "the value set did not answer the rows' missing variable" });
        await (await $t("eval-limit")).setValue("2");
        await (await $t("eval-budgets")).setValue("96");
        await (await $t("eval-constrain")).selectByAttribute("value", "none");
        const local = await browser.$('[data-testid="eval-provider"][data-name="local"]');
        if (await local.isSelected()) await local.click();
        const before = cloud.requests.length;
        await (await $t("eval-run")).click();
        await waitEval("the eval with a variable set did not finish");
        const chats = cloud.requests.slice(before).filter((r) => r.url.endsWith("/chat/completions"));
        assert.equal(chats.length, 2);
        for (const c of chats) {
          assert.match(c.body.messages.at(-1).content, /^Subject area: botany\. Extract definitions/);
        }
        assert.equal(await text("eval-set-vars"), "area-extract: every row with area=botany");
        const id = Number((await text("eval-title")).replace(/\D+/g, ""));
        const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
        assert.deepEqual(shown.vars, { "area-extract": { area: "botany" } });
      } finally {
        cloud.options.reply = saved;
        const box = await browser.$('[data-testid="eval-prompt"][data-id="area-extract"]');
        if ((await box.isExisting()) && (await box.isSelected())) await box.click();
        fs.rmSync(path.join(userPrompts, "area-extract.json"), { force: true });
        await (await $t("nav-run")).click();
      }
    });

    await scenario("evaluate by batch: online vs batch cost before the start, submitted at once, its state in History, collected into the matrix", async () => {
      const saved = cloud.options.reply;
      cloud.options.reply = JSON.stringify({ type: "definition", entity: "Photosynthesis", definition: "The process by which green plants turn light energy into chemical energy" }) + "\n";
      const batcher = `e2e-batch-${process.pid}`;
      try {
        // A server that offers OpenAI's batch API, added with the Providers screen's checkbox.
        await (await $t("nav-providers")).click();
        await (await $t("provider-name")).setValue(batcher);
        await (await $t("provider-url")).setValue(cloud.url);
        await (await $t("provider-model")).setValue("loopback-model");
        await (await $t("provider-key")).setValue(key);
        const offers = await $t("provider-batch-api");
        if (!(await offers.isSelected())) await offers.click();
        await (await $t("provider-add")).click();
        await waitText("providers-notice", (s) => s.startsWith(`Added ${batcher}`), UI, "the batch provider was not added");

        await (await $t("nav-evaluate")).click();
        // One prompt: an earlier scenario may have saved a copy of it under the same id.
        for (const box of await browser.$$('[data-testid="eval-prompt"]')) {
          if (await box.isSelected()) await box.click();
        }
        await choosePrompt("agent-kg-extract");
        await openDataset(shipped);
        await (await $t("eval-limit")).setValue("3");
        await (await $t("eval-budgets")).setValue("512");
        await (await $t("eval-constrain")).selectByAttribute("value", "none");
        const chip = await browser.$(`[data-testid="eval-provider"][data-name="${batcher}"]`);
        await chip.waitForExist({ timeout: UI, timeoutMsg: "the new provider is not offered for evals" });
        // The batch provider ticked first: with none ticked, the Run screen's provider is used.
        if (!(await chip.isSelected())) await chip.click();
        for (const box of await browser.$$('[data-testid="eval-provider"]')) {
          if ((await box.isSelected()) && (await box.getAttribute("data-name")) !== batcher) await box.click();
        }
        // The plan offers both ways with their costs; batch chosen, the line says so.
        await (await $t("eval-plan")).click();
        const offer = await browser.$(`[data-testid="eval-offer"][data-provider="${batcher}"]`);
        await waitFor(async () => (await offer.isExisting()) || (await browser.$('[data-testid="eval-error"]').isExisting()), UI, "the plan offers no way per provider");
        assert.ok(await offer.isExisting(), `no offer for ${batcher}: ${await browser.execute(() => document.querySelector('[data-testid="eval-error"]')?.textContent)}; plan: ${await browser.execute(() => document.querySelector('[data-testid="eval-plan-line"]')?.textContent)}; providers: ${await browser.execute(() => [...document.querySelectorAll('[data-testid="eval-provider"]')].map((b) => `${b.dataset.name}=${b.checked}`).join(","))}`);
        assert.equal(await (await offer.$("td:nth-child(2)")).getText(), "3");
        assert.equal(await (await offer.$('[data-testid="eval-offer-online"]')).getText(), "no price known");
        assert.equal(await (await offer.$('[data-testid="eval-offer-batch"]')).getText(), "half the online price");
        const way = await offer.$('[data-testid="eval-way"]');
        assert.deepEqual(await browser.execute((el) => [...el.options].map((o) => o.value), way), ["online", "batch"]);
        await way.selectByAttribute("value", "batch");
        await waitText("eval-plan-line", (t) => t.includes("3 request(s)") && t.includes("by batch, at half the online price"), UI, "the plan line does not say the cells go by batch");

        // Submitted: one batch of 3 requests, no ordinary completion request, back at once.
        const chatsBefore = cloud.requests.filter((r) => r.url.endsWith("/chat/completions")).length;
        const batchesBefore = cloud.batches.size;
        await (await $t("eval-run")).click();
        await waitFor(async () => (await browser.$$('[data-testid="eval-batch"][data-state="running"]')).length === 1, UI, "no batch shown with the provider");
        assert.equal(cloud.batches.size, batchesBefore + 1, "one batch made");
        const made = [...cloud.batches.values()].at(-1);
        assert.equal(made.lines.length, 3);
        assert.equal(made.endpoint, "/v1/chat/completions");
        assert.equal(new Set(made.lines.map((l) => l.custom_id)).size, 3, "each request has its own id");
        assert.equal(cloud.requests.filter((r) => r.url.endsWith("/chat/completions")).length, chatsBefore, "no ordinary completion request");
        // The batch is shown as stored at once; its counts follow when the provider has been asked.
        const batchText = () => browser.execute(() => document.querySelector('[data-testid="eval-batch"]')?.textContent ?? "");
        const counted = /3 requests · with the provider \(in_progress\) · 3 processing$/;
        await waitFor(async () => counted.test(await batchText()), UI, "the provider's counts are not shown");
        assert.match(await batchText(), counted);
        assert.deepEqual(await matrixCells(), ["awaited", "awaited", "awaited"], "the cells show as awaited in the batch");
        const id = Number((await text("eval-title")).replace(/\D+/g, ""));
        // Asynchronously: `eval status` asks this process's loopback server, which a synchronous
        // child would keep from answering.
        const status = JSON.parse((await execFileAsync(process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf"), ["eval", "status", String(id), "--json"], { encoding: "utf8", env: process.env })).stdout);
        assert.deepEqual(status.batches.map((b) => [b.id, b.state, b.counts.total]), [[made.id, "running", 3]]);

        // History: the eval submitted, its batch's counts.
        await (await $t("nav-history")).click();
        const row = await browser.$(`[data-testid="experiment-row"][data-id="${id}"]`);
        await row.waitForExist({ timeout: UI, timeoutMsg: "the batch eval is not in History" });
        assert.equal(await row.getAttribute("data-state"), "submitted");
        assert.equal(await (await row.$('[data-testid="experiment-batches"]')).getText(), "1 batch, 0 ended · 3 requests · 3 processing");
        await shot("history-batch");

        // The batch ends; History's Collect folds it: the matrix as an online eval shows it.
        cloud.endBatches();
        await (await row.$('[data-testid="experiment-collect"]')).click();
        await waitFor(async () => (await browser.$('[data-testid="eval-collected"]').isExisting())
          && (await (await $t("eval-collected")).getAttribute("data-whole")) === "true"
          // Collect reopens the eval after its result shows: done when its button is free again.
          && (await (await $t("eval-collect")).isEnabled()), NET, "the collect did not make the eval whole");
        assert.equal(await (await $t("eval-collected")).getAttribute("data-folded"), "3");
        assert.equal((await browser.$$('[data-testid="eval-batch"][data-state="folded"]')).length, 1);
        await waitFor(async () => JSON.stringify(await matrixCells()) === JSON.stringify(["ok", "ok", "ok"]), UI, "the matrix does not show the folded cells");
        const shown = JSON.parse(cli("eval", "show", String(id), "--json"));
        assert.equal(shown.cells.length, 3);
        assert.ok(shown.cells.every((c) => c.finish_reason === "stop"), JSON.stringify(shown.cells.map((c) => c.finish_reason)));
        assert.equal(shown.cells.find((c) => c.row === "photosynthesis").tp, 1, "the folded reply is scored");
        assert.equal(await text("eval-line-f1"), shown.summary[0].f1.toFixed(3), "the window's F1 is `kerf eval show`'s");
        await shot("evaluate-batch");

        // Collecting again changes nothing and sends nothing.
        const asked = cloud.requests.length;
        await (await $t("eval-collect")).click();
        await waitFor(async () => (await (await $t("eval-collected")).getAttribute("data-folded")) === "0", UI, "a second collect folded something");
        assert.equal(cloud.batches.size, batchesBefore + 1, "a second collect made a batch");
        assert.ok(cloud.requests.slice(asked).every((r) => r.method === "GET"), "a second collect sent something");
        assert.equal(JSON.parse(cli("eval", "show", String(id), "--json")).cells.length, 3);
      } finally {
        cloud.options.reply = saved;
        await (await $t("nav-run")).click();
      }
    });

    await scenario("compare one prompt on two models, side by side with the scrubber", async () => {
      const saved = cloud.options.reply;
      cloud.options.reply = kgLines(4).join("\n") + "\n";
      try {
        await (await $t("nav-compare")).click();
        const kg = path.join(work, "prompts", "agent-kg-extract.json");
        await (await $t("compare-a")).selectByAttribute("value", kg);
        await (await $t("compare-b")).selectByAttribute("value", kg);
        // Side A on the Run screen's provider (the loopback server), side B on the bundled model.
        await (await $t("compare-model-b")).selectByAttribute("value", "local");
        await (await $t("budgets")).setValue("96");
        await (await $t("compare-constrain")).selectByAttribute("value", "none");
        const before = cloud.requests.filter((r) => r.url.endsWith("/chat/completions")).length;
        await (await $t("compare-run")).click();
        await waitFor(async () => (await browser.$$('[data-testid="compare-row"]')).length === 2, CELL, "the compare of two models did not end");
        const rows = await browser.execute(() => [...document.querySelectorAll('[data-testid="compare-row"]')].map((r) => [r.dataset.prompt, r.dataset.provider, r.dataset.run]));
        assert.deepEqual(rows.map(([p, m]) => [p, m]), [["agent-kg-extract", provider], ["agent-kg-extract", "local"]]);
        assert.equal(cloud.requests.filter((r) => r.url.endsWith("/chat/completions")).length - before, 1, "one request to the loopback server");
        // Side by side: A the loopback server's reply, B the bundled model's, one scrubber over both.
        await waitFor(async () => (await (await $t("compare-sbs")).getAttribute("data-loaded")) === "true", UI, "the two models' replies did not load side by side");
        const [a, b] = await browser.execute(() => ["a", "b"].map((n) => document.querySelector(`[data-testid="compare-sbs-${n}"]`)?.dataset.run));
        assert.deepEqual([a, b], [rows[0][2], rows[1][2]], "each side shows its model's run");
        assert.ok((await text("compare-sbs-a-reply")).includes("Entity 0"), "side A shows the loopback server's reply");
        await (await $t("compare-sbs-scrubber")).waitForExist({ timeout: UI });
        await shot("compare-two-models");
      } finally {
        cloud.options.reply = saved;
        await (await $t("nav-run")).click();
      }
    });

    await scenario("a stopped compare is resumed from History without sending its finished cells again", async () => {
      const saved = cloud.options.reply;
      cloud.options.reply = kgLines(4).join("\n") + "\n";
      // The first cell's reply passes; the second's is held after two lines, so the Cancel lands
      // with one cell finished and one in flight, on any machine.
      const pass = cloud.hold(1e9);
      const gate = cloud.hold(2);
      try {
        await (await $t("nav-compare")).click();
        await (await $t("compare-a")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract.json"));
        await (await $t("compare-b")).selectByAttribute("value", path.join(work, "prompts", "agent-kg-extract-array.json"));
        await (await $t("compare-model-b")).selectByAttribute("value", "");
        await (await $t("budgets")).setValue("96, 192");
        await (await $t("compare-constrain")).selectByAttribute("value", "none");
        await (await $t("compare-concurrency")).setValue("1");
        const chats = () => cloud.requests.filter((r) => r.url.endsWith("/chat/completions")).length;
        const before = chats();
        await (await $t("compare-run")).click();
        await within(gate.held, NET, "the compare's second cell did not reach the server");
        await (await $t("compare-cancel")).click();
        await within(gate.hungUp, UI, "the compare did not hang up after Cancel");
        await (await $t("compare-error")).waitForExist({ timeout: UI, timeoutMsg: "the stopped compare did not say so" });
        assert.equal(chats() - before, 2, "one cell finished and one stopped");
        // History lists it unfinished, with Resume.
        await (await $t("nav-history")).click();
        const unfinished = '[data-testid="experiment-row"][data-kind="compare"][data-state="unfinished"]';
        await (await browser.$(unfinished)).waitForExist({ timeout: UI, timeoutMsg: "the stopped compare is not listed as unfinished" });
        // The newest of them: this one.
        const experiment = String(await browser.execute((sel) => Math.max(...[...document.querySelectorAll(sel)].map((r) => Number(r.dataset.id))), unfinished));
        const row = await browser.$(`[data-testid="experiment-row"][data-id="${experiment}"]`);
        await (await row.$('[data-testid="experiment-resume"]')).click();
        // Its four cells shown, only three of them sent again: the finished one is not.
        await waitFor(async () => (await browser.$$('[data-testid="compare-row"]')).length === 4, CELL, "the resumed compare did not end");
        assert.equal(chats() - before, 5, "the resume sent the three cells not measured");
        assert.equal(await (await $t("compare-resumed")).getAttribute("data-id"), experiment);
        const runs = await browser.execute(() => [...document.querySelectorAll('[data-testid="compare-row"]')].map((r) => r.dataset.run));
        assert.equal(new Set(runs).size, 4, `four runs, one per cell: ${runs}`);
      } finally {
        gate.release();
        void pass;
        cloud.options.reply = saved;
        await (await $t("nav-run")).click();
      }
    });

    await scenario("cancel a streaming run and keep what arrived", async () => {
      cloud.options.reply = kgLines(400).join("\n") + "\n";
      cloud.options.perEventMs = 0;
      // The reply stops after 8 lines and stays open until the client hangs up: the run is in
      // progress for as long as the test takes to cancel it, on any machine.
      const gate = cloud.hold(8);
      try {
        const sent = cloud.requests.length;
        const id = await pressRun();
        await (await $t("cancel")).waitForEnabled({ timeout: UI, timeoutMsg: "Cancel is not enabled for the new run" });
        const held = await within(gate.held, NET, "the run's request did not reach the server");
        assert.equal(cloud.requests.length, sent + 1, "not one request for the run");
        const lines = held.split("\n").length - 1;
        assert.ok(lines >= 8, `held after ${lines} lines`);
        await waitFor(async () => Number(await text("object-count")) >= lines, UI, `the ${lines} streamed objects are not shown`, 100);
        await (await $t("cancel")).click();
        const streamed = await within(gate.hungUp, UI, "the run did not hang up after Cancel");
        await waitSummary(id, (s) => /cancelled/.test(s), UI, "the run did not stop");
        const kept = Number(await text("object-count"));
        assert.ok(kept >= lines && kept < 400, `kept ${kept} objects of the ${lines} sent before the hold`);
        // The reply shown is what was streamed up to the cancel: all that came before the hold,
        // and no more than the server sent before the client hung up.
        const shown = await browser.execute(() => document.querySelector('[data-testid="raw"]').textContent);
        assert.ok(shown.startsWith(held) && streamed.startsWith(shown),
          `the reply shown is not what was sent (${shown.length} characters shown, ${held.length} before the hold, ${streamed.length} sent): ${shown.slice(-200)}`);
      } finally {
        // A failure above leaves the run going: stopped, so the scenarios after it can run.
        const cancel = await $t("cancel");
        if (await cancel.isEnabled().catch(() => false)) await cancel.click().catch(() => {});
        gate.release();
      }
      assert.ok(!(await (await $t("run")).getAttribute("disabled")), "Run is still disabled");
      await shot("cancelled");
    });

    // A server off this machine (0.0.0.0 stands in for a LAN host: it is not loopback to Kerf)
    // that bills requests: the key crosses plain http only with the switch and a yes in the
    // native dialog, and a repairing prompt asks before it runs.
    const paidUrl = cloud.url.replace("127.0.0.1", "0.0.0.0");
    await scenario("a key goes over plain http to another machine only after a yes in a native dialog", async () => {
      cloud.options.reply = kgLines(4).join("\n") + "\n";
      cloud.options.perEventMs = 0;
      await (await $t("nav-providers")).click();
      await (await $t("provider-name")).setValue(paid);
      await (await $t("provider-url")).setValue(paidUrl);
      await (await $t("provider-model")).setValue("loopback-model");
      await (await $t("provider-key")).setValue(key);
      await (await $t("provider-allow-plain-http")).click();
      answerDialogs("no");
      await (await $t("provider-add")).click();
      await waitText("providers-error", (s) => /was not added/.test(s), UI, "a declined provider was added");
      assert.equal((await browser.$$(`[data-testid="provider-row"][data-name="${paid}"]`)).length, 0);
      answerDialogs("yes");
      await (await $t("provider-add")).click();
      await waitText("providers-notice", (s) => s.startsWith(`Added ${paid}`), UI, "the provider was not added");
    });

    await scenario("a repairing prompt on a paid provider asks first, and the ceiling holds", async () => {
      await withTestPrompt("repair-terms");
      await (await $t("prompt-repair-terms")).click();
      await waitText("prompt-title", (s) => s === "repair-terms", UI, "repair-terms did not open");
      await (await $t("nav-providers")).click();
      await (await $t(`use-${paid}`)).click();
      const before = cloud.requests.length;
      await (await $t("run")).click();
      await waitText("repair-question", (s) => /up to 3 paid requests/.test(s), UI, "no question before a repair loop");
      await shot("repair-question");
      await (await $t("repair-stop")).click();
      assert.equal(await (await $t("repair-question")).isExisting(), false);
      assert.equal(cloud.requests.length, before, "Don't run sent a request");
      await (await $t("run")).click();
      await waitText("repair-question", (s) => /up to 3 paid requests/.test(s), UI, "no question the second time");
      let id = await pressRun("repair-go");
      await waitSummary(id, (s) => /finished/.test(s), NET, "the repairing run did not finish");
      assert.equal(cloud.requests.length - before, 3, "a run of max-attempts 3 did not make 3 requests");
      assert.equal(cloud.requests.at(-1).auth, `Bearer ${key}`, "the consented key was not sent");
      // The window's ceiling: 2 requests at most, whatever the prompt allows.
      await (await $t("max-requests")).setValue("2");
      await (await $t("run")).click();
      await waitText("repair-question", (s) => /up to 2 paid requests/.test(s), UI, "the question ignores the ceiling");
      id = await pressRun("repair-go");
      await waitSummary(id, (s) => /finished/.test(s), NET, "the capped run did not finish");
      assert.equal(cloud.requests.length - before, 5, "the ceiling of 2 requests did not hold");
      await (await $t("max-requests")).setValue("10");
      await (await $t("nav-providers")).click();
      await (await $t(`remove-${paid}`)).click();
      await (await $t(`remove-confirm-${paid}`)).click();
      await waitText("providers-notice", (s) => s.startsWith(`Removed ${paid}`), UI, "not removed");
    });

    // Issue 19: the open prompt's own schema, probed per mode; the verdict shows in the row, and
    // the grammar mode sent llama.cpp's GBNF of the prompt's line schema.
    await scenario("probe a provider with the open prompt's own schema", async () => {
      await (await $t("nav-prompts")).click();
      await (await $t("prompt-agent-kg-extract")).click();
      await waitText("prompt-title", (s) => s === "agent-kg-extract", UI, "agent-kg-extract did not open");
      cloud.options.reply = kgLines(4).join("\n") + "\n";
      cloud.options.perEventMs = 0;
      await (await $t("nav-providers")).click();
      const sent = cloud.requests.length;
      await (await $t(`probe-prompt-${provider}`)).click();
      await waitText("providers-notice", (s) => s.startsWith(`Probed ${provider}`), NET, "the probe did not finish");
      const notice = await text("providers-notice");
      assert.match(notice, /\(prompt schema jsonl:[0-9a-f]{16}\)/, notice);
      assert.match(notice, /none honoured, grammar honoured/, notice);
      const grammar = cloud.requests.slice(sent).find((r) => r.body?.grammar);
      assert.ok(grammar, "no request carried a grammar");
      assert.match(grammar.body.grammar, /root ::= \(item "\\n"\)\+/, grammar.body.grammar.slice(0, 200));
      assert.equal(grammar.body.structured_outputs?.grammar, grammar.body.grammar);
      await (await $t("nav-run")).click();
    });

    await scenario("remove the provider and its key", async () => {
      await (await $t("nav-providers")).click();
      await (await $t(`remove-${provider}`)).click();
      await (await $t(`remove-confirm-${provider}`)).click();
      await waitText("providers-notice", (s) => s === `Removed ${provider} and its key.`, UI, "not removed");
      await waitFor(async () => (await browser.$$(`[data-testid="provider-row"][data-name="${provider}"]`)).length === 0,
        UI, "the removed provider is still listed");
    });
  } finally {
    await cloud.close();
    // The keys live in the kernel keyring, outside the work folder: a scenario that failed before
    // removing its provider would leave them there.
    for (const name of [provider, paid]) {
      try {
        execFileSync(process.env.KERF_CLI_BIN ?? path.join(path.dirname(app), "kerf"), ["providers", "delete-key", name],
          { stdio: ["ignore", "ignore", "pipe"], timeout: T(30000) });
      } catch (e) {
        console.log(`could not remove ${name}'s test key from the keyring: ${e.stderr ?? e}`);
      }
    }
  }

  // Models by name: the screen pulls from the loopback hub, whose first download is cut after
  // 10 MB; pulled again, it goes on from there, is checked, and every screen lists it.
  const pulled = path.join(process.env.KERF_MODELS_DIR, HUB_FILE);
  try {
    await scenario("Models: pull a model by name with a progress bar; a cut download goes on from where it stopped", async () => {
      await (await $t("nav-models")).click();
      await waitFor(async () => (await browser.$$('[data-testid="available-model"]')).length >= 5, UI, "the suggested models are not listed");
      assert.ok((await browser.$$('[data-testid="local-model"]')).length >= 1, "the model the window runs is listed");
      await (await $t("pull-name")).setValue(HUB_REPO);
      await (await $t("pull-go")).click();
      // Cut after 10 MB: the error says to pull again; the bar shows where it stopped.
      await waitFor(async () => (await (await $t("pull-progress")).getAttribute("data-phase")) === "stopped", NET, "the cut download did not stop");
      assert.match(await text("models-error"), /pull it again to go on from where it stopped/);
      const stoppedAt = Number(await (await $t("pull-progress")).getAttribute("data-done"));
      const total = Number(await (await $t("pull-progress")).getAttribute("data-total"));
      assert.equal(total, fs.statSync(hubModel).size, "the bar's total is the file's size");
      assert.ok(stoppedAt > 0 && stoppedAt <= HUB_CUT, `the bar stopped at ${stoppedAt}, at most the 10 MB sent`);
      assert.ok(!fs.existsSync(pulled), "no half file where models are found");
      await shot("models-pull-stopped");
      // Pulled again — with Ctrl+Enter, the screen's main action — it goes on from 10 MB, the
      // SHA-256 matches, the bar is full.
      await browser.keys(["Control", "Enter"]);
      let phase;
      await waitFor(async () => (phase = await (await $t("pull-progress")).getAttribute("data-phase")) === "done", NET,
        () => `the second pull did not finish (${phase})`);
      const bar = await $t("pull-progress");
      assert.equal(Number(await bar.getAttribute("data-resumed")), HUB_CUT, "it went on from where the cut left it");
      assert.equal(Number(await bar.getAttribute("data-done")), total);
      assert.match(await text("pull-status"), /SHA-256 checked · went on from 10 MB/);
      assert.match(await text("models-notice"), new RegExp(`Pulled ${HUB_FILE.replace(/\./g, "\\.")}: \\d+ MB, SHA-256 [0-9a-f]{12}… matches the hub's`));
      assert.equal(fs.statSync(pulled).size, total);
      const listed = () => browser.execute(() => [...document.querySelectorAll('[data-testid="local-model"]')].map((r) => r.textContent));
      let seen = [];
      await waitFor(async () => (seen = await listed()).some((t) => t.includes(HUB_FILE)), UI, () => `the pulled model is not listed on this machine: ${seen}`);
      await shot("models-pulled");
      // The Run screen offers it.
      await (await $t("nav-run")).click();
      await (await $t("provider")).selectByAttribute("value", "local");
      const options = await browser.execute(() => [...document.querySelectorAll('[data-testid="model"] option')].map((o) => o.textContent));
      assert.ok(options.includes(HUB_FILE), `Run lists the pulled model: ${options}`);
    });
  } finally {
    fs.rmSync(pulled, { force: true });
    fs.rmSync(path.join(process.env.KERF_MODELS_DIR, ".hub", `models--${HUB_REPO.replace("/", "--")}`), { recursive: true, force: true });
  }
} finally {
  if (browser) await within(browser.deleteSession(), T(30000), "the session did not end").catch((e) => console.log(String(e)));
  // Waited for: tauri-driver, its WebKitWebDriver and the window are gone when this run ends.
  await driver.stop();
}

const failed = results.filter((r) => r[1] !== "ok").length;
console.log(`\n${results.length - failed} passed, ${failed} failed (e2e)`);
process.exit(failed ? 1 : 0);
