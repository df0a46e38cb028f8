// The broadcast page's player, hand-written, no build step. The fMP4 fragments from the WebSocket are
// decoded with WebCodecs where the browser has it (`VideoDecoder` for H.264 drawn on a canvas as soon as
// each frame is decoded, `AudioDecoder` for AAC played through WebAudio: lowest latency), and played with
// Media Source Extensions otherwise (or with `?player=mse`). Also the live viewer count, likes and chat;
// when the server drops the socket (a viewer too far behind), it reconnects and starts again at the
// latest keyframe. The controls over the picture: volume and mute, fullscreen, a LIVE badge that says how
// far behind live the picture is (click: catch up), and a message when the broadcast ends or the
// connection drops (it reconnects, waiting longer after each failed attempt).
"use strict";
(() => {
  const root = document.getElementById("broadcast");
  const id = root.dataset.id, csrf = root.dataset.csrf;
  const video = document.getElementById("video"), screen = document.getElementById("screen");
  const sound = document.getElementById("sound");
  const viewers = document.getElementById("viewers"), likes = document.getElementById("likes");
  const chat = document.getElementById("chat"), status = document.getElementById("status");
  const forceMSE = new URLSearchParams(location.search).get("player") === "mse";
  const stats = window.orkPlayer = { fragments: 0, bytes: 0, events: [], error: null, mime: null, mode: null,
                                     framesDecoded: 0, framesDrawn: 0, inPage: null, decodeMs: null, drawnAt: null, audioDecoded: 0, reconnects: 0, players: 0,
                                     behind: null, message: "", messages: [], volume: 1, muted: false, fullscreen: false };
  let player = null, pending = [], mime = null, ended = false, socket = null;
  // Counts the players made on this page: a player still starting when a newer one is asked for is dropped.
  let generation = 0;

  // ---- Controls over the picture, made here so the page's markup stays the server's.
  function element(tag, properties, ...children) {
    const e = Object.assign(document.createElement(tag), properties);
    e.append(...children);
    return e;
  }
  const icons = {
    sound: '<svg viewBox="0 0 24 24" width="22" height="22"><path fill="currentColor" d="M3 9v6h4l5 5V4L7 9H3zm13.5 3A4.5 4.5 0 0 0 14 8v8a4.5 4.5 0 0 0 2.5-4zM14 3.2v2.1a7 7 0 0 1 0 13.4v2.1a9 9 0 0 0 0-17.6z"/></svg>',
    muted: '<svg viewBox="0 0 24 24" width="22" height="22"><path fill="currentColor" d="M3 9v6h4l5 5V4L7 9H3zm13.6 3 2.7-2.7-1.4-1.4-2.7 2.7-2.7-2.7-1.4 1.4 2.7 2.7-2.7 2.7 1.4 1.4 2.7-2.7 2.7 2.7 1.4-1.4z"/></svg>',
    fullscreen: '<svg viewBox="0 0 24 24" width="22" height="22"><path fill="currentColor" d="M4 4h6v2H6v4H4V4zm10 0h6v6h-2V6h-4V4zM4 14h2v4h4v2H4v-6zm14 0h2v6h-6v-2h4v-4z"/></svg>',
  };
  const stage = video.parentElement;
  stage.classList.add("stage");
  video.controls = false;
  const overlay = element("div", { id: "overlay", hidden: true });
  const muteButton = element("button", { id: "mute", type: "button", title: "Mute (M)" });
  const volumeSlider = element("input", { id: "volume", type: "range", min: "0", max: "1", step: "0.05", title: "Volume" });
  const liveBadge = element("button", { id: "live-badge", type: "button", className: "waiting", title: "How far behind live (click to catch up)",
                                        textContent: "LIVE" });
  const fullscreenButton = element("button", { id: "fullscreen", type: "button", title: "Fullscreen (F)", innerHTML: icons.fullscreen });
  stage.append(overlay, element("div", { className: "controls" }, muteButton, volumeSlider, liveBadge,
                                element("span", { className: "spacer" }), fullscreenButton));

  // Volume and mute: the WebAudio gain (WebCodecs) or the video element (MSE, which starts muted: a
  // browser lets only muted video play by itself).
  let volume = 1, muted = false, gain = null, resumeAudio = null;
  try { const saved = JSON.parse(localStorage.getItem("orkVolume") || "{}"); if (typeof saved.volume === "number") volume = saved.volume; muted = !!saved.muted; } catch (e) {}
  function applyVolume(save) {
    if (gain) gain.gain.value = muted ? 0 : volume;
    if (stats.mode === "mse") { video.muted = muted; video.volume = volume; }
    muteButton.innerHTML = muted || volume === 0 ? icons.muted : icons.sound;
    muteButton.setAttribute("aria-label", muted ? "Unmute" : "Mute");
    volumeSlider.value = String(muted ? 0 : volume);
    stats.volume = volume;
    stats.muted = muted;
    if (save) try { localStorage.setItem("orkVolume", JSON.stringify({ volume, muted })); } catch (e) {}
  }
  function toggleMute() {
    muted = !muted;
    if (!muted && volume === 0) volume = 1;
    applyVolume(true);
    if (!muted && resumeAudio) resumeAudio();
  }
  muteButton.addEventListener("click", toggleMute);
  volumeSlider.addEventListener("input", () => {
    volume = Number(volumeSlider.value);
    muted = volume === 0;
    applyVolume(true);
    if (!muted && resumeAudio) resumeAudio();
  });
  applyVolume(false);

  function toggleFullscreen() {
    if (document.fullscreenElement) document.exitFullscreen();
    else stage.requestFullscreen().catch((e) => { stats.error = String(e); });
  }
  fullscreenButton.addEventListener("click", toggleFullscreen);
  stage.addEventListener("dblclick", (e) => { if (e.target === video || e.target === screen) toggleFullscreen(); });
  document.addEventListener("fullscreenchange", () => { stats.fullscreen = document.fullscreenElement === stage; });
  addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, textarea")) return;
    if (e.key === "m" || e.key === "M") toggleMute();
    else if (e.key === "f" || e.key === "F") toggleFullscreen();
  });

  // How far behind live: media received but not yet shown, plus the time since media last arrived
  // (when it stops coming, the picture falls behind by that much).
  let lastArrival = performance.now(), newest = 0, shown = 0;
  liveBadge.addEventListener("click", () => { if (player && player.catchUp) player.catchUp(); });
  function behindLive() {
    let buffered;
    if (stats.mode === "mse") {
      const ranges = video.buffered;
      if (!ranges.length || video.currentTime === 0) return null;
      buffered = ranges.end(ranges.length - 1) - video.currentTime;
    } else {
      if (!stats.framesDrawn) return null;
      buffered = newest - shown;
    }
    const gap = (performance.now() - lastArrival) / 1000;
    return Math.max(0, buffered) + (gap > 0.5 ? gap : 0);
  }

  /// The message over the picture ("" hides it).
  function show(message, kind) {
    overlay.hidden = !message;
    overlay.textContent = message;
    overlay.dataset.kind = kind || "";
    stats.message = message;
    if (message) stats.messages = stats.messages.slice(-19).concat(message);
  }
  setInterval(() => {
    if (ended) return;
    const behind = player ? behindLive() : null;
    stats.behind = behind;
    liveBadge.className = behind === null ? "waiting" : behind < 1 ? "" : "behind";
    liveBadge.textContent = behind === null || behind < 1 ? "LIVE" : "LIVE \u2212" + behind.toFixed(1) + " s";
    const silent = (performance.now() - lastArrival) / 1000;
    if (player && socket && socket.readyState === WebSocket.OPEN) {
      if (silent > 10) socket.close();  // nothing for 10 s: a connection that died without closing; start again
      else if (silent > 3) show("No video is arriving. Waiting\u2026", "stalled");
      else if (overlay.dataset.kind === "stalled") show("");
    }
  }, 250);

  // ---- fMP4 boxes (ISO BMFF), just what the two players need.
  function* boxes(view, start, end) {
    let pos = start;
    while (pos + 8 <= end) {
      let size = view.getUint32(pos);
      const type = String.fromCharCode(view.getUint8(pos + 4), view.getUint8(pos + 5), view.getUint8(pos + 6), view.getUint8(pos + 7));
      let header = 8;
      if (size === 1) { size = Number(view.getBigUint64(pos + 8)); header = 16; } else if (size === 0) size = end - pos;
      if (size < header) return;
      yield { type, start: pos + header, end: Math.min(pos + size, end), box: pos };
      pos += size;
    }
  }
  function child(view, parent, type) {
    for (const b of boxes(view, parent.start, parent.end)) if (b.type === type) return b;
    return null;
  }
  function hex(n) { return n.toString(16).padStart(2, "0"); }
  /// The tracks of an init segment: id, kind, timescale, decoder configuration.
  function parseInit(buffer) {
    const view = new DataView(buffer), tracks = {}, defaults = {};
    const moov = child(view, { start: 0, end: buffer.byteLength }, "moov");
    if (!moov) throw new Error("no moov");
    for (const trak of boxes(view, moov.start, moov.end)) {
      if (trak.type === "mvex") {
        for (const trex of boxes(view, trak.start, trak.end)) if (trex.type === "trex") {
          defaults[view.getUint32(trex.start + 4)] = { duration: view.getUint32(trex.start + 12), size: view.getUint32(trex.start + 16),
                                                       flags: view.getUint32(trex.start + 20) };
        }
      }
      if (trak.type !== "trak") continue;
      const tkhd = child(view, trak, "tkhd"), mdia = child(view, trak, "mdia");
      const track = { id: view.getUint32(tkhd.start + (view.getUint8(tkhd.start) === 1 ? 20 : 12)) };
      const mdhd = child(view, mdia, "mdhd"), hdlr = child(view, mdia, "hdlr");
      track.timescale = view.getUint32(mdhd.start + (view.getUint8(mdhd.start) === 1 ? 20 : 12));
      const handler = String.fromCharCode(...new Uint8Array(buffer, hdlr.start + 8, 4));
      const stsd = child(view, child(view, child(view, mdia, "minf"), "stbl"), "stsd");
      const entry = boxes(view, stsd.start + 8, stsd.end).next().value;
      if (handler === "vide" && entry.type === "avc1") {
        const avcC = child(view, { start: entry.start + 78, end: entry.end }, "avcC");
        const description = new Uint8Array(buffer.slice(avcC.start, avcC.end));
        track.kind = "video";
        track.config = { codec: "avc1." + hex(description[1]) + hex(description[2]) + hex(description[3]),
                         description, codedWidth: view.getUint16(entry.start + 24), codedHeight: view.getUint16(entry.start + 26),
                         optimizeForLatency: true };
      } else if (handler === "soun" && entry.type === "mp4a") {
        const esds = child(view, { start: entry.start + 28, end: entry.end }, "esds");
        // ES_Descriptor → DecoderConfigDescriptor → DecoderSpecificInfo (tag 5): the AudioSpecificConfig.
        const bytes = new Uint8Array(buffer, esds.start + 4, esds.end - esds.start - 4);
        let asc = null;
        for (let i = 0; i < bytes.length && !asc; ) {
          const tag = bytes[i++];
          let length = 0, b;
          do { b = bytes[i++]; length = (length << 7) | (b & 0x7f); } while (b & 0x80);
          if (tag === 3) i += 3; else if (tag === 4) i += 13; else if (tag === 5) asc = bytes.slice(i, i + length); else i += length;
        }
        track.kind = "audio";
        track.config = { codec: "mp4a.40." + (asc ? asc[0] >> 3 : 2), description: asc,
                         numberOfChannels: view.getUint16(entry.start + 16), sampleRate: view.getUint32(entry.start + 24) >>> 16 };
      }
      tracks[track.id] = track;
    }
    for (const t of Object.values(tracks)) t.defaults = defaults[t.id] || { duration: 0, size: 0, flags: 0 };
    return tracks;
  }
  /// The samples of a message (one or more moof+mdat): track, decode and presentation time, key, bytes.
  function parseFragment(buffer, tracks) {
    const view = new DataView(buffer), samples = [];
    for (const moof of boxes(view, 0, buffer.byteLength)) {
      if (moof.type !== "moof") continue;
      for (const traf of boxes(view, moof.start, moof.end)) {
        if (traf.type !== "traf") continue;
        let track = null, base = moof.box, time = 0, duration = 0, size = 0, flags = 0;
        for (const b of boxes(view, traf.start, traf.end)) {
          const f = view.getUint32(b.start) & 0xffffff;
          if (b.type === "tfhd") {
            track = tracks[view.getUint32(b.start + 4)];
            if (!track) break;
            ({ duration, size, flags } = track.defaults);
            let p = b.start + 8;
            if (f & 1) { base = Number(view.getBigUint64(p)); p += 8; }
            if (f & 2) p += 4;
            if (f & 8) { duration = view.getUint32(p); p += 4; }
            if (f & 0x10) { size = view.getUint32(p); p += 4; }
            if (f & 0x20) { flags = view.getUint32(p); p += 4; }
          } else if (b.type === "tfdt" && track) {
            time = view.getUint8(b.start) === 1 ? Number(view.getBigUint64(b.start + 4)) : view.getUint32(b.start + 4);
          } else if (b.type === "trun" && track) {
            const version = view.getUint8(b.start), count = view.getUint32(b.start + 4);
            let p = b.start + 8, offset = base;
            if (f & 1) { offset = base + view.getInt32(p); p += 4; }
            let firstFlags = null;
            if (f & 4) { firstFlags = view.getUint32(p); p += 4; }
            for (let i = 0; i < count; i++) {
              let d = duration, s = size, fl = i === 0 && firstFlags !== null ? firstFlags : flags, cto = 0;
              if (f & 0x100) { d = view.getUint32(p); p += 4; }
              if (f & 0x200) { s = view.getUint32(p); p += 4; }
              if (f & 0x400) { fl = view.getUint32(p); p += 4; }
              if (f & 0x800) { cto = version === 0 ? view.getUint32(p) : view.getInt32(p); p += 4; }
              samples.push({ track, dts: time, pts: time + cto, duration: d, key: !((fl >> 16) & 1),
                             data: new Uint8Array(buffer, offset, s) });
              time += d;
              offset += s;
            }
          }
        }
      }
    }
    return samples;
  }

  // ---- WebCodecs: decode each frame as it arrives and draw it on the canvas; sound through WebAudio.
  async function webCodecsPlayer(initSegment) {
    if (forceMSE || !window.VideoDecoder || !window.EncodedVideoChunk) return null;
    const tracks = parseInit(initSegment);
    const videoTrack = Object.values(tracks).find(t => t.kind === "video");
    const audioTrack = Object.values(tracks).find(t => t.kind === "audio");
    if (!videoTrack || !(await VideoDecoder.isConfigSupported(videoTrack.config)).supported) return null;
    // The sound must play: without an AAC decoder, the whole stream goes to MSE.
    if (audioTrack && !(window.AudioDecoder && window.AudioContext && audioTrack.config.description &&
                        (await AudioDecoder.isConfigSupported(audioTrack.config)).supported)) return null;
    const context2d = screen.getContext("2d");
    let waitingForKey = true, queue = [], lastDraw = 0;
    // When each frame's fragment arrived (by its timestamp): stats.inPage is the last drawn frame's
    // time from its arrival to its draw, in ms (the page's part of the latency; benchmarks read it).
    const arrivals = new Map();
    function draw(frame) {
      if (screen.width !== frame.displayWidth || screen.height !== frame.displayHeight) {
        screen.width = frame.displayWidth; screen.height = frame.displayHeight;
      }
      context2d.drawImage(frame, 0, 0, screen.width, screen.height);
      shown = (frame.timestamp + (frame.duration || 0)) / 1e6;
      lastDraw = performance.now();
      const arrived = arrivals.get(frame.timestamp);
      if (arrived !== undefined) { stats.inPage = lastDraw - arrived; stats.decodeMs = frame.__decodedAt - arrived; arrivals.delete(frame.timestamp); }
      if (arrivals.size > 120) arrivals.clear();
      frame.close();
      stats.framesDrawn += 1;
      stats.drawnAt = lastDraw;
    }
    // Frames are drawn as soon as they are decoded. When several come at once (a fragment of several
    // frames, or a network hiccup) they are spread out, one at most every half frame: the queue drains
    // at twice the frame rate, so a burst leaves no standing delay behind it (paced at the frame rate,
    // as it was, a queue of two or three frames could stay for seconds: 70 ms more glass-to-glass).
    let timer = null;
    function tick() {
      timer = null;
      if (queue.length > 4) while (queue.length > 1) queue.shift().close();
      if (!queue.length) return;
      const spacing = 0.5 * (queue[0].duration ? queue[0].duration / 1000 : 33);
      const wait = spacing - (performance.now() - lastDraw);
      if (wait <= 0) draw(queue.shift());
      if (queue.length) timer = setTimeout(tick, wait > 0 ? wait : spacing);
    }
    const decoder = new VideoDecoder({
      output: (frame) => { frame.__decodedAt = performance.now(); stats.framesDecoded += 1; queue.push(frame); if (timer === null) tick(); },
      error: (e) => { stats.error = String(e); },
    });
    decoder.configure(videoTrack.config);
    let audio = null;
    if (audioTrack) {
      const context = new AudioContext({ latencyHint: "interactive" });
      gain = context.createGain();
      gain.connect(context.destination);
      applyVolume(false);
      let next = 0;
      const audioDecoder = new AudioDecoder({
        output: (data) => {
          stats.audioDecoded += 1;
          const buffer = context.createBuffer(data.numberOfChannels, data.numberOfFrames, data.sampleRate);
          for (let c = 0; c < data.numberOfChannels; c++) {
            const plane = new Float32Array(data.numberOfFrames);
            data.copyTo(plane, { planeIndex: c, format: "f32-planar" });
            buffer.copyToChannel(plane, c);
          }
          data.close();
          const now = context.currentTime;
          // Stay live: restart the schedule when it ran dry or drifted over 0.3 s ahead.
          if (next < now + 0.02 || next > now + 0.3) next = now + 0.05;
          const source = context.createBufferSource();
          source.buffer = buffer;
          source.connect(gain);
          source.start(next);
          next += buffer.duration;
        },
        error: (e) => { stats.error = String(e); },
      });
      audioDecoder.configure(audioTrack.config);
      const resume = () => context.resume().then(() => { sound.hidden = context.state === "running"; });
      sound.onclick = resume;
      resumeAudio = resume;
      resume();
      setTimeout(() => { sound.hidden = context.state === "running"; }, 500);
      audio = { context, decoder: audioDecoder };
    }
    video.hidden = true;
    screen.hidden = false;
    stats.mode = "webcodecs";
    return {
      append(buffer) {
        for (const s of parseFragment(buffer, tracks)) {
          const microseconds = (t) => Math.round(t * 1e6 / s.track.timescale);
          if (s.track === videoTrack) {
            newest = Math.max(newest, (s.pts + s.duration) / s.track.timescale);
            if (waitingForKey && !s.key) continue;
            waitingForKey = false;
            arrivals.set(microseconds(s.pts), lastArrival);
            decoder.decode(new EncodedVideoChunk({ type: s.key ? "key" : "delta", timestamp: microseconds(s.pts),
                                                   duration: microseconds(s.duration), data: s.data }));
          } else if (audio && s.track === audioTrack && !waitingForKey) {
            audio.decoder.decode(new EncodedAudioChunk({ type: "key", timestamp: microseconds(s.pts), data: s.data }));
          }
        }
      },
      catchUp() { while (queue.length > 1) queue.shift().close(); },
      close() {
        clearTimeout(timer);
        gain = null;
        resumeAudio = null;
        for (const f of queue) f.close();
        queue = [];
        if (decoder.state !== "closed") decoder.close();
        if (audio) { if (audio.decoder.state !== "closed") audio.decoder.close(); audio.context.close(); }
      },
    };
  }

  // ---- Media Source Extensions: the fallback (and `?player=mse`).
  function msePlayer(type) {
    if (!window.MediaSource || !MediaSource.isTypeSupported(type)) { status.textContent = "This browser cannot play " + type; return null; }
    const mediaSource = new MediaSource();
    let buffer = null, queue = [];
    video.hidden = false;
    screen.hidden = true;
    sound.hidden = true;
    video.src = URL.createObjectURL(mediaSource);
    stats.mode = "mse";
    // Only muted video may start by itself: unmute with the button.
    muted = true;
    applyVolume(false);
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
    mediaSource.addEventListener("sourceopen", () => {
      buffer = mediaSource.addSourceBuffer(type);
      buffer.mode = "segments";
      buffer.addEventListener("updateend", () => { keepLive(); pump(); });
      pump();
    }, { once: true });
    return {
      append(data) { queue.push(data); pump(); },
      catchUp() {
        const ranges = video.buffered;
        if (ranges.length) video.currentTime = Math.max(ranges.start(ranges.length - 1), ranges.end(ranges.length - 1) - 0.15);
      },
      close() { queue = []; video.removeAttribute("src"); video.load(); },
    };
  }

  /// The first media message is the init segment: pick the player, then feed it what came meanwhile.
  async function start(initSegment) {
    const mine = generation;
    let chosen = null;
    try { chosen = await webCodecsPlayer(initSegment); } catch (e) { stats.error = String(e); }
    if (!chosen) chosen = msePlayer(mime);
    if (!chosen) return;
    if (mine !== generation) { chosen.close(); return; }
    stats.players += 1;
    if (stats.mode === "mse") chosen.append(initSegment);
    player = chosen;
    for (const data of pending) player.append(data);
    pending = [];
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
    if (event.type === "stream") mime = event.mime;
    else if (event.type === "viewers") viewers.textContent = event.viewerCount;
    else if (event.type === "like") likes.textContent = event.likes;
    else if (event.type === "comment") addComment(event.user, event.text);
    else if (event.type === "application") document.getElementById("application").textContent = event.application.name;
    else if (event.type === "ended") broadcastEnded();
  }
  function broadcastEnded() {
    ended = true;
    show("The broadcast has ended.", "ended");
    liveBadge.className = "ended";
    liveBadge.textContent = "ENDED";
    stats.behind = null;
  }

  // Reconnecting: at once after a drop, then waiting 1, 2, 4 … up to 10 s between failed attempts; a
  // broadcast no longer in /api/live has ended (the server refuses to play it).
  let attempts = 0, countdown = null;
  function reconnect(reason) {
    attempts += 1;
    stats.reconnects += 1;
    const wait = attempts === 1 ? 0 : Math.min(10, 2 ** (attempts - 2));
    let left = wait;
    const tick = () => {
      if (ended || hidden) return;
      if (left <= 0) { show(reason + " Reconnecting\u2026", "reconnecting"); connect(); return; }
      show(reason + " Reconnecting in " + left + " s\u2026", "reconnecting");
      left -= 1;
      countdown = setTimeout(tick, 1000);
    };
    tick();
  }
  async function stillLive() {
    try {
      const response = await fetch("/api/live", { cache: "no-store" });
      if (!response.ok) return null;
      return (await response.json()).broadcasts.some((b) => b.id === id);
    } catch (e) {
      return null;  // the server did not answer: unknown
    }
  }
  function stopPlayer() {
    generation += 1;
    if (player) { player.close(); player = null; }
    pending = [];
    newest = shown = 0;
  }
  function connect() {
    let starting = false, opened = false;
    socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/b/" + id + "/ws");
    socket.binaryType = "arraybuffer";
    socket.onopen = () => { opened = true; lastArrival = performance.now(); };
    socket.onmessage = (message) => {
      lastArrival = performance.now();
      if (typeof message.data === "string") {
        const event = JSON.parse(message.data);
        // A new type and init segment mid-stream (the broadcaster's picture changed size): the next
        // binary message is the new init segment, for a new player.
        if (event.type === "stream" && (player || starting)) { stopPlayer(); starting = false; }
        onEvent(event);
        return;
      }
      if (attempts > 0 || overlay.dataset.kind === "stalled") { attempts = 0; show(""); }
      stats.fragments += 1;
      stats.bytes += message.data.byteLength;
      if (player) player.append(message.data);
      else if (starting) pending.push(message.data);
      else { starting = true; start(message.data); }
    };
    // Dropped (fell behind) or the network failed: start again at the latest keyframe.
    socket.onclose = async () => {
      stopPlayer();
      if (ended || hidden) return;
      if (opened) { reconnect("The connection dropped."); return; }
      const live = await stillLive();
      if (live === false) broadcastEnded();
      else reconnect(live === null ? "The server cannot be reached." : "The connection failed.");
    };
  }
  // Leaving the page (or the back/forward cache keeping it): stop watching; back again: start again.
  let hidden = false;
  addEventListener("pagehide", () => { hidden = true; clearTimeout(countdown); socket.close(); });
  addEventListener("pageshow", (event) => { if (event.persisted) { hidden = false; connect(); } });
  connect();

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
