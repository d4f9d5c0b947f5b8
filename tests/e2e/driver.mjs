// tauri-driver for the E2E run and the desktop bench: started once, stopped with SIGTERM when the
// process exits (SIGKILL would leave WebKitWebDriver on its port), and waited for on its port.
import { spawn } from "node:child_process";
import net from "node:net";

/** Start tauri-driver (TAURI_DRIVER overrides the binary); resolves once it listens on 4444. */
export async function startDriver({ quiet = false } = {}) {
  const driver = spawn(process.env.TAURI_DRIVER ?? "tauri-driver", [],
    { stdio: ["ignore", quiet ? "ignore" : "inherit", "inherit"] });
  process.on("exit", () => { if (driver.exitCode === null) driver.kill("SIGTERM"); });
  await waitForPort(4444, 15000);
  return driver;
}

async function waitForPort(port, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const ok = await new Promise((res) => {
      const s = net.connect(port, "127.0.0.1", () => { s.end(); res(true); });
      s.on("error", () => res(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`tauri-driver did not listen on ${port}`);
}
