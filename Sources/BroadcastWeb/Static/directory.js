// The front page and an application's page: each live broadcast's card gets a fresh thumbnail every
// 10 s (the server makes at most one per broadcast per 10 s however many look), its viewer count from
// /api/live, and how long it has been live, counting. When a broadcast starts or ends, the page reloads.
"use strict";
(() => {
  const live = document.getElementById("live");
  const application = live ? live.dataset.app : undefined;
  const stats = window.orkDirectory = { thumbnailsLoaded: 0, thumbnailErrors: 0, refreshes: 0 };
  const cards = () => Array.from(document.querySelectorAll(".live-card"));

  /// Like the server's LiveDuration: 0:42, 12:03, 1:02:03.
  function duration(milliseconds) {
    const total = Math.max(0, Math.floor(milliseconds / 1000));
    const two = (n) => (n < 10 ? "0" : "") + n;
    const hours = Math.floor(total / 3600), minutes = Math.floor(total / 60) % 60, seconds = total % 60;
    return hours > 0 ? hours + ":" + two(minutes) + ":" + two(seconds) : minutes + ":" + two(seconds);
  }
  function tick() {
    const now = Date.now();
    for (const card of cards()) card.querySelector(".uptime").textContent = duration(now - Number(card.dataset.started));
  }

  // A thumbnail not made yet (the broadcast just started): a placeholder until the next refresh.
  function loaded(image) {
    image.closest(".thumb").classList.remove("waiting");
    // From the memory cache, a picture can be complete before this script and still fire "load" after.
    if (image.dataset.counted === image.src) return;
    image.dataset.counted = image.src;
    stats.thumbnailsLoaded += 1;
  }
  function failed(image) { stats.thumbnailErrors += 1; image.closest(".thumb").classList.add("waiting"); }
  for (const image of document.querySelectorAll("img.thumbnail")) {
    image.addEventListener("load", () => loaded(image));
    image.addEventListener("error", () => failed(image));
    if (image.complete) (image.naturalWidth > 0 ? loaded : failed)(image);
  }

  async function refresh() {
    stats.refreshes += 1;
    // A new address every 10 s: within one, the browser's cache (max-age) answers.
    const period = Math.floor(Date.now() / 10000);
    for (const image of document.querySelectorAll("img.thumbnail")) image.src = image.src.split("?")[0] + "?t=" + period;
    try {
      const response = await fetch("/api/live", { cache: "no-store" });
      if (!response.ok) return;
      const broadcasts = (await response.json()).broadcasts.filter((b) => !application || b.application.id === application);
      const shown = new Set(cards().map((card) => card.dataset.id));
      if (broadcasts.length !== shown.size || broadcasts.some((b) => !shown.has(b.id))) { location.reload(); return; }
      for (const b of broadcasts) {
        const card = document.querySelector('.live-card[data-id="' + CSS.escape(b.id) + '"]');
        card.querySelector(".viewers").textContent = b.viewerCount;
      }
    } catch (e) {
      // The server did not answer: try again at the next refresh.
    }
  }
  tick();
  setInterval(tick, 1000);
  setInterval(refresh, 10000);
})();
