// tauri-driver for the E2E run and the desktop bench.
//
// Ports: the E2E asks for free ones (`port: 0`), so a tauri-driver left on 4444 by another run,
// or a second run at the same time, is never driven instead of ours. tauri-driver exits 0 when it
// cannot bind its port, and its WebKitWebDriver exits when it cannot bind the native one: both
// are checked while it starts (the child still running, GET /status answering through it, our
// WebKitWebDriver still running), and a start that loses a port to someone else is tried again
// on new ports.
//
// Stopping: only what this driver started. `stop()` notes the processes below tauri-driver (its
// WebKitWebDriver and the app that one launched) and the WebKitWebDriver it started on its
// native port even if orphaned (tauri-driver leaves it behind when it exits on a port it could
// not bind), sends tauri-driver SIGTERM (it kills its WebKitWebDriver), waits for it to exit,
// then ends whatever it noted that is still running. On the process's exit (which cannot wait)
// the same is done without the waiting.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every tauri-driver this process started and has not seen exit.
const live = new Set();
// The process exits without waiting: what stop() does, without the waits.
process.on("exit", () => {
  for (const driver of live) {
    const below = descendants(driver.pid);
    driver.kill("SIGTERM");
    for (const p of [...below, ...driver.natives()]) signalNoted(p, "SIGTERM");
  }
});

/** Stop every tauri-driver this process started (and what each started); resolves once all have. */
export function stopAll() {
  return Promise.all([...live].map((d) => d.stop()));
}

/** A loopback port free now (the OS's pick). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** A process's parent and start time (/proc/PID/stat), or null once it is gone. */
function stat(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is in parentheses and may hold spaces: the fields start after its ')'.
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(f[1]), start: f[19], comm: s.slice(s.indexOf("(") + 1, s.lastIndexOf(")")) };
  } catch {
    return null;
  }
}

/** Every process below `root` now, deepest first: {pid, start, comm}. */
export function descendants(root) {
  const children = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(name);
    if (!s) continue;
    if (!children.has(s.ppid)) children.set(s.ppid, []);
    children.get(s.ppid).push({ pid: Number(name), start: s.start, comm: s.comm });
  }
  const out = [];
  const walk = (pid) => { for (const c of children.get(pid) ?? []) { walk(c.pid); out.push(c); } };
  walk(root);
  return out;
}

/** Clock ticks since boot now (/proc/stat's unit for a process's start; USER_HZ is 100 on Linux). */
function ticksNow() {
  return Math.floor(Number(fs.readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 100);
}

/**
 * The WebKitWebDriver a tauri-driver started on `nativePort` since `since` (ticks), even once
 * that tauri-driver has exited: it does not stop its WebKitWebDriver when it exits for a port it
 * could not bind, and an orphan is no longer below it. One started before ours (someone else's,
 * holding the port) does not match.
 */
function nativeDrivers(nativePort, since) {
  const out = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (!/WebKitWebDriver$/.test(argv[0]) || !argv.includes(`--port=${nativePort}`)) continue;
      const s = stat(name);
      if (s && Number(s.start) >= since - 1) out.push({ pid: Number(name), start: s.start, comm: s.comm });
    } catch {}
  }
  return out;
}

/** Signal a noted process only if it is still that process (same start time: not a reused PID). */
function signalNoted(p, signal) {
  const s = stat(p.pid);
  if (s && s.start === p.start) {
    try { process.kill(p.pid, signal); } catch {}
  }
}

function exited(child) {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitExit(child, ms) {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    child.once("exit", () => { clearTimeout(t); resolve(true); });
  });
}

/** Whether something accepts connections on a loopback port. */
function listening(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => { s.destroy(); resolve(true); });
    s.on("error", () => resolve(false));
  });
}

/** GET /status through tauri-driver: true once it and the WebKitWebDriver behind it answer ready. */
async function ready(port) {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/status`, { signal: AbortSignal.timeout(5000) });
    if (!r.ok) return false;
    const body = await r.json();
    return body?.value?.ready === true;
  } catch {
    return false;
  }
}

/**
 * Start tauri-driver (TAURI_DRIVER overrides the binary) and wait until it answers.
 * - port: its port; 0 picks free ones for it and its WebKitWebDriver (the E2E's choice); unset
 *   keeps tauri-driver's own 4444 and 4445 (the desktop bench connects to 4444).
 * - timeout: how long one start may take before it is given up (ms).
 * Resolves to the child process, with `port` (to pass to WebDriver) and `stop()` (resolves once
 * tauri-driver and what it started have exited).
 */
export async function startDriver({ quiet = false, port, timeout = 60000, attempts = 5 } = {}) {
  let last = "";
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const ports = port === 0 ? [await freePort(), await freePort()] : [port ?? 4444, port == null ? 4445 : port + 1];
    if (ports[0] === ports[1]) { attempt--; continue; }
    const since = ticksNow();
    const driver = spawn(process.env.TAURI_DRIVER ?? "tauri-driver", ["--port", String(ports[0]), "--native-port", String(ports[1])],
      { stdio: ["ignore", quiet ? "ignore" : "inherit", "inherit"] });
    driver.on("error", (e) => { last = String(e); });
    live.add(driver);
    driver.once("exit", () => live.delete(driver));
    let stopping = null;
    driver.natives = () => nativeDrivers(ports[1], since);
    driver.stop = () => (stopping ??= stopDriver(driver, driver.natives));
    const problem = await started(driver, ports, timeout);
    if (!problem) { driver.port = ports[0]; return driver; }
    last = `tauri-driver on ports ${ports.join("/")}: ${problem}`;
    await driver.stop();
    // A fixed port that is taken stays taken: only free ports are worth another try.
    if (port !== 0) break;
    console.error(`${last}; trying again on other ports`);
  }
  throw new Error(`tauri-driver did not start: ${last}`);
}

/** Why the start failed, or "" once tauri-driver and our WebKitWebDriver answer. */
async function started(driver, [port, nativePort], timeout) {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    if (driver.pid === undefined && last) return last;
    if (exited(driver)) return `it exited (${driver.exitCode ?? driver.signalCode}) while starting (a port in use?)`;
    // (Asked before WebKitWebDriver listens, tauri-driver logs a connection error with a backtrace.)
    if (await listening(nativePort) && await ready(port)) {
      // /status could have been answered by someone else's WebKitWebDriver on the native port,
      // if ours could not bind it: ours must still be running.
      await sleep(200);
      if (exited(driver)) return "it exited after answering";
      const native = descendants(driver.pid).filter((p) => p.comm.startsWith("WebKitWebDriver"));
      if (native.length === 0) return "its WebKitWebDriver is not running (the native port in use?)";
      return "";
    }
    await sleep(100);
  }
  return `no answer to GET /status within ${timeout / 1000} s`;
}

/** Stop tauri-driver, then what was below it (noted before: it forgets them on exit) and its
 * WebKitWebDriver wherever that is now. */
async function stopDriver(driver, natives) {
  const below = exited(driver) ? [] : descendants(driver.pid);
  if (!exited(driver)) driver.kill("SIGTERM");
  if (!(await waitExit(driver, 10000))) {
    driver.kill("SIGKILL");
    await waitExit(driver, 5000);
  }
  const noted = [...below, ...natives().filter((n) => !below.some((b) => b.pid === n.pid))];
  for (const p of noted) signalNoted(p, "SIGTERM");
  for (let i = 0; i < 50 && noted.some((p) => stat(p.pid)?.start === p.start); i++) await sleep(100);
  for (const p of noted) signalNoted(p, "SIGKILL");
}
