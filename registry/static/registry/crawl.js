// Follows a crawl: polls its JSON every 3 s, updates the counts and reloads the page once it has finished.
(function () {
  const url = document.getElementById("crawl-poller").dataset.url;
  async function poll() {
    try {
      const s = await (await fetch(url, { headers: { Accept: "application/json" } })).json();
      document.getElementById("crawl-status").textContent = s.status;
      const left = s.eta_seconds ? `, about ${Math.round(s.eta_seconds)} s left` : "";
      document.getElementById("crawl-line").textContent = `${s.finished_repos} of ${s.found} repositories${left}`;
      const bar = document.getElementById("crawl-progress");
      bar.max = Math.max(1, s.found);
      bar.value = s.done + s.failed;
      if (s.finished) { window.location.reload(); return; }
    } catch (e) { /* a missed poll is retried */ }
    setTimeout(poll, 3000);
  }
  setTimeout(poll, 1500);
})();
