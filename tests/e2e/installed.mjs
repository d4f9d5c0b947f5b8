// The installed app on a fresh Debian 12 (the package test's chroot at $KERF_E2E_ROOT): started
// as its desktop entry starts it, as a new user, in a real window, through tauri-driver and that
// system's own WebKitWebDriver (tests/e2e/in-root); it must open and list, as Kerf's shipped
// prompts, exactly the ones the package installed there, found by itself from the user's home.
// scripts/e2e runs it with KERF_E2E_SCRIPT pointing here.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { remote } from "webdriverio";
import { startDriver, stopAll } from "./driver.mjs";

const root = process.env.KERF_E2E_ROOT;
const artifacts = process.env.KERF_E2E_ARTIFACTS;
// The app's path as that system sees it.
const app = process.env.KERF_DESKTOP_BIN?.slice(root?.length ?? 0);
assert.ok(root && artifacts && app?.startsWith("/"), "KERF_E2E_ROOT, KERF_E2E_ARTIFACTS and KERF_DESKTOP_BIN (under the root) must be set");
fs.mkdirSync(artifacts, { recursive: true });

// The shipped prompts the package installed: their ids (a file's `id`, else its name).
const shippedDir = path.join(root, "usr/share/kerf/prompts");
const want = fs.readdirSync(shippedDir).filter((f) => f.endsWith(".json")).map((f) => {
  const p = JSON.parse(fs.readFileSync(path.join(shippedDir, f), "utf8"));
  return p.id ?? f.replace(/\.json$/, "");
}).sort();
assert.ok(want.includes("agent-kg-extract"), `the package installed no agent-kg-extract: ${want}`);

process.env.TAURI_DRIVER = path.resolve("tests/e2e/in-root");
const driver = await startDriver({ port: 0, timeout: 120000 });
let browser;
let status = 0;
try {
  browser = await remote({
    hostname: "127.0.0.1", port: driver.port, logLevel: "warn", waitforTimeout: 60000, connectionRetryTimeout: 240000,
    capabilities: { browserName: "wry", "wdio:enforceWebDriverClassic": true, "tauri:options": { application: app } },
  });
  await browser.waitUntil(async () => (await browser.execute(() => document.body.dataset.ready)) === "true",
    { timeout: 120000, timeoutMsg: "the installed window did not become ready" });
  await (await browser.$('[data-testid="nav-prompts"]')).click();
  await (await browser.$('[data-testid="prompt-agent-kg-extract"]')).waitForExist({ timeout: 60000, timeoutMsg: "the window lists no agent-kg-extract" });
  const listed = await browser.execute(() => [...document.querySelectorAll('[data-testid^="prompt-"][data-folder]')]
    .map((b) => ({ id: b.dataset.testid.slice("prompt-".length), folder: b.dataset.folder, path: b.dataset.path })));
  const shipped = listed.filter((p) => p.folder === "shipped");
  assert.deepEqual(shipped.map((p) => p.id).sort(), want, "the window's shipped prompts are the package's");
  assert.ok(shipped.every((p) => p.path.startsWith("/usr/share/kerf/prompts/")), `shipped prompts read from elsewhere: ${JSON.stringify(shipped)}`);
  await (await browser.$('[data-testid="prompt-agent-kg-extract"]')).click();
  await browser.waitUntil(async () => (await (await browser.$('[data-testid="prompt-title"]')).getText()) === "agent-kg-extract",
    { timeout: 60000, timeoutMsg: "the shipped prompt did not open" });
  fs.writeFileSync(path.join(artifacts, "installed-prompts.png"), await browser.takeScreenshot(), "base64");
  console.log(`fresh Debian 12, the installed window: ${shipped.length} shipped prompts listed from /usr/share/kerf/prompts, agent-kg-extract opened`);
} catch (e) {
  console.log(`FAIL the installed window on a fresh Debian 12: ${e.stack ?? e}`);
  if (browser) console.log("page error:", await browser.execute(() => document.body.dataset.error ?? "none").catch(() => "unreadable"));
  status = 1;
} finally {
  await browser?.deleteSession().catch(() => {});
  await stopAll();
}
process.exit(status);
