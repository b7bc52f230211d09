// Follows a Hub job: polls its JSON every 2 s and reloads the page once it has finished.
(function () {
  const url = document.getElementById("job-poller").dataset.url;
  async function poll() {
    try {
      const state = await (await fetch(url, { headers: { Accept: "application/json" } })).json();
      document.getElementById("job-status").textContent = state.status;
      document.getElementById("job-message").textContent = state.message;
      if (state.finished) { window.location.reload(); return; }
    } catch (e) { /* a missed poll is retried */ }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 1000);
})();
