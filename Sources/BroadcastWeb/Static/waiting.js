// The page of a broadcast that has not started yet (its link is shared as soon as the broadcast is
// created, before its first picture reaches the service): asks the service ten times a second and loads
// the player as soon as the broadcast is live; says so if it ends without having started.
(() => {
  const waiting = document.getElementById("waiting");
  if (!waiting) return;
  const status = document.getElementById("status");
  const id = waiting.dataset.id;
  let tries = 0;
  async function check() {
    tries += 1;
    try {
      const response = await fetch("/api/v1/broadcasts/" + encodeURIComponent(id), { cache: "no-store" });
      if (response.ok) {
        const broadcast = await response.json();
        if (broadcast.live) { location.reload(); return; }
        if (broadcast.endedAt) { status.textContent = "This broadcast has ended."; return; }
      }
    } catch (e) { /* the service is unreachable for a moment: ask again */ }
    // Ten times a second for the first half minute (a broadcast goes live within a second or two of
    // its address), then every 5 s.
    setTimeout(check, tries < 300 ? 100 : 5000);
  }
  check();
})();
