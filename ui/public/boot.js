// Runs before the app's module.
// 1. Under a C/POSIX locale WebKitGTK reports navigator.language as "c", which Intl rejects, and
//    uPlot formats numbers with it at load time: the whole app would fail to start. Fall back to
//    "en-US" when the reported language is not a valid tag.
try {
  new Intl.NumberFormat(navigator.language);
} catch (_) {
  Object.defineProperty(Navigator.prototype, "language", { get: function () { return "en-US"; } });
  Object.defineProperty(Navigator.prototype, "languages", { get: function () { return ["en-US"]; } });
}
// 2. A module that fails to load or parse shows on screen (and to the E2E tests) instead of
//    leaving a blank window.
window.addEventListener("error", function (e) {
  var what = String((e.error && e.error.stack) || e.message || e);
  document.documentElement.dataset.bootError = what;
  if (!document.getElementById("app") || document.getElementById("app").childElementCount === 0) {
    var pre = document.createElement("pre");
    pre.textContent = "Kerf could not start its window:\n" + what;
    (document.body || document.documentElement).appendChild(pre);
  }
});
document.documentElement.dataset.boot = "ok";
