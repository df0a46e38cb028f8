/// The broadcast page's JavaScript: Media Source Extensions fed with fMP4 fragments from the
/// WebSocket, live viewer count, likes and chat. Hand-written, no build step.
enum PlayerScript {
    static let source = #"""
    "use strict";
    (() => {
      const root = document.getElementById("broadcast");
      const id = root.dataset.id, csrf = root.dataset.csrf;
      const video = document.getElementById("video");
      const viewers = document.getElementById("viewers"), likes = document.getElementById("likes");
      const chat = document.getElementById("chat"), status = document.getElementById("status");
      const stats = window.orkPlayer = { fragments: 0, bytes: 0, events: [], error: null, mime: null };
      let mediaSource = null, buffer = null, queue = [];

      function pump() {
        if (!buffer || buffer.updating || queue.length === 0) return;
        try { buffer.appendBuffer(queue.shift()); } catch (e) { stats.error = String(e); }
      }
      function keepLive() {
        const ranges = video.buffered;
        if (ranges.length === 0) return;
        const start = ranges.start(ranges.length - 1), end = ranges.end(ranges.length - 1);
        // Stay at the live edge: jump when over 0.5 s behind (a viewer joins at the start of a keyframe
        // group), else play 15 % faster until within 0.15 s, which is smoother than seeking.
        const behind = end - video.currentTime;
        if (video.currentTime < start || behind > 0.5) video.currentTime = Math.max(start, end - 0.15);
        else if (behind > 0.25) video.playbackRate = 1.15;
        else if (behind < 0.15) video.playbackRate = 1.0;
        if (video.paused) video.play().catch(() => {});
        if (!buffer.updating && video.currentTime - ranges.start(0) > 30) buffer.remove(ranges.start(0), video.currentTime - 10);
      }
      function startMedia(mime) {
        stats.mime = mime;
        if (!window.MediaSource || !MediaSource.isTypeSupported(mime)) { status.textContent = "This browser cannot play " + mime; return; }
        mediaSource = new MediaSource();
        video.src = URL.createObjectURL(mediaSource);
        mediaSource.addEventListener("sourceopen", () => {
          buffer = mediaSource.addSourceBuffer(mime);
          buffer.mode = "segments";
          buffer.addEventListener("updateend", () => { keepLive(); pump(); });
          pump();
        }, { once: true });
      }
      function addComment(user, text) {
        const item = document.createElement("li");
        const who = document.createElement("b");
        who.textContent = user;
        item.append(who, document.createTextNode(text));
        chat.append(item);
        chat.scrollTop = chat.scrollHeight;
      }
      function onEvent(event) {
        stats.events.push(event);
        if (event.type === "stream") startMedia(event.mime);
        else if (event.type === "viewers") viewers.textContent = event.viewerCount;
        else if (event.type === "like") likes.textContent = event.likes;
        else if (event.type === "comment") addComment(event.user, event.text);
        else if (event.type === "application") document.getElementById("application").textContent = event.application.name;
        else if (event.type === "ended") status.textContent = "The broadcast has ended.";
      }
      const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/b/" + id + "/ws");
      socket.binaryType = "arraybuffer";
      socket.onmessage = (message) => {
        if (typeof message.data === "string") { onEvent(JSON.parse(message.data)); return; }
        stats.fragments += 1;
        stats.bytes += message.data.byteLength;
        queue.push(message.data);
        pump();
      };
      socket.onclose = () => { status.textContent = status.textContent || "Disconnected."; };

      async function post(path, body) {
        const response = await fetch(path, { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: JSON.stringify(body) });
        if (!response.ok) status.textContent = (await response.text()) || response.statusText;
        return response.ok;
      }
      const form = document.getElementById("chat-form");
      if (form) form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const input = form.querySelector("input[name=text]");
        if (input.value.trim() && await post("/b/" + id + "/chat", { text: input.value })) input.value = "";
      });
      const like = document.getElementById("like");
      if (like) like.addEventListener("click", () => post("/b/" + id + "/like", {}));
    })();
    """#
}
