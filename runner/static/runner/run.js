// Follows a running benchmark: polls its JSON every 2 s, updates the progress bar and log,
// and reloads the page once it has finished so the results table appears.
(function () {
  const url = document.getElementById("run-poller").dataset.url;
  const set = (id, text) => { const el = document.getElementById(id); if (el) el.textContent = text; };
  async function poll() {
    try {
      const state = await (await fetch(url, { headers: { Accept: "application/json" } })).json();
      document.getElementById("run-progress").value = state.progress;
      set("run-status", state.status);
      set("run-message", state.message);
      set("run-log", state.log);
      if (state.finished) { window.location.reload(); return; }
    } catch (e) { /* a missed poll is retried */ }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
  // A soak draws its plot on the server: reload at every interval so it grows while the soak runs.
  const every = Number(document.getElementById("run-poller").dataset.reloadEvery || 0);
  if (every > 0) setTimeout(() => window.location.reload(), Math.max(5, every) * 1000 + 1000);
})();
