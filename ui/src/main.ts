import { mount } from "svelte";
import App from "./App.svelte";
import "./app.css";

// A startup failure shows on screen (and to the E2E tests) instead of a blank window.
function fatal(what: string) {
  document.body.dataset.error = what;
  const box = document.createElement("pre");
  box.className = "fatal";
  box.textContent = `Kerf could not start its window:\n${what}`;
  document.body.prepend(box);
}
window.addEventListener("error", (e) => {
  // A ResizeObserver whose callback changed the layout again reports its deferred notifications
  // as an error event with no error: the browser's notice, not a failure of the window.
  if (e.error == null && /^ResizeObserver loop/.test(e.message)) return;
  fatal(String(e.error?.stack ?? e.message));
});
window.addEventListener("unhandledrejection", (e) => fatal(String(e.reason?.stack ?? e.reason)));

let app;
try {
  app = mount(App, { target: document.getElementById("app")! });
  // The frame after the one that drew the mounted shell: the first paint of the app (what
  // bench/desktop/run measures from the process's start).
  requestAnimationFrame(() => requestAnimationFrame(() => performance.mark("kerf-first-paint")));
} catch (e) {
  fatal(String((e as Error)?.stack ?? e));
}
export default app;
