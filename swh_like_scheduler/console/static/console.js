// swh_like_scheduler console: the live parts (the pages work without it).
"use strict";
(function () {
  // a one-time login link's page posts its code by itself (opening the
  // page does not use the link: a link preview logs no one in)
  const link = document.getElementById("login-link");
  if (link) link.submit();

  const url = document.body.dataset.liveUrl;
  if (!url) return;
  const state = document.getElementById("live-state");
  const every = 3000;
  let updated = null;

  function show(text) { if (state) state.textContent = text; }

  function apply(data) {
    for (const [key, text] of Object.entries(data.text || {})) {
      for (const el of document.querySelectorAll(`[data-live="${CSS.escape(key)}"]`)) {
        if (el.textContent !== text) el.textContent = text;
        if (el.classList.contains("level")) el.classList.toggle("zero", text === "0");
      }
    }
    // markup made by the server from numbers and escaped text only
    for (const [key, html] of Object.entries(data.html || {})) {
      for (const el of document.querySelectorAll(`[data-live-html="${CSS.escape(key)}"]`)) {
        if (el.innerHTML !== html) el.innerHTML = html;
      }
    }
    const health = document.querySelector("section.health");
    if (health && (data.look || data.status)) health.className = `health ${data.look || data.status}`;
  }

  async function poll() {
    if (document.hidden) return;
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.status === 401) { show("Session ended: log in again."); return; }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      apply(await response.json());
      updated = Date.now();
      show("Live: updated just now.");
    } catch (error) {
      show(`Live update failed (${error.message}); retrying.`);
    }
  }

  setInterval(() => {
    if (updated !== null && Date.now() - updated > every * 2) {
      show(`Live: last update ${Math.round((Date.now() - updated) / 1000)} s ago.`);
    }
  }, 1000);
  setInterval(poll, every);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  poll();
})();
