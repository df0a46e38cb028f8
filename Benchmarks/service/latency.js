// Injected into a player page through the DevTools protocol (Runtime.evaluate): on every video frame
// the page presents, draw what the viewer sees (the <video>, or our page's #screen canvas when its
// player decodes with WebCodecs) into a canvas, read the capture time that barcode.py drew
// (32 blocks, then the same bits inverted), and compare it with Date.now(). The first sighting of
// each capture time is one sample of glass-to-glass latency. Results in window.__orkLatency.
(() => {
  if (window.__orkLatency) return "already";
  const BITS = 32, W = 640, H = 360, BAND = 60;
  const r = window.__orkLatency = { samples: [], inPage: [], decode: [], check: [], bad: 0, frames: 0, seen: new Set(), error: null, mode: null };
  const canvas = document.createElement("canvas");
  canvas.width = W; canvas.height = H;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  function bitsAt(data, y) {
    const out = [];
    const block = W / BITS;
    for (let i = 0; i < BITS; i++) {
      let sum = 0;
      const x0 = Math.floor(i * block + block / 2) - 3;
      for (let dx = 0; dx < 6; dx++) sum += data[(y * W + x0 + dx) * 4];
      out.push(sum / 6);
    }
    return out;
  }
  // What is on screen: our page's canvas when its player draws there, else the <video>.
  function shown() {
    const player = window.orkPlayer;
    if (player && player.mode === "webcodecs") {
      const screen = document.getElementById("screen");
      return screen && screen.width > 0 && player.framesDrawn > 0 ? screen : null;
    }
    const video = document.querySelector("video");
    return video && video.readyState >= 2 && video.videoWidth > 0 ? video : null;
  }
  // Our page's canvas: read once per picture the player drew (its count says), not at every poll:
  // scaling a 1080p canvas down and reading it back a hundred times a second took the CPU the
  // page's own decoding needed on a 2-core machine, and the latency measured grew with it.
  let lastDrawn = -1;
  function check() {
    const source = shown();
    if (!source) return;
    if (source.tagName === "CANVAS") {
      const drawn = window.orkPlayer.framesDrawn;
      if (drawn === lastDrawn) return;
      lastDrawn = drawn;
    }
    try {
      ctx.drawImage(source, 0, 0, W, H);
      const data = ctx.getImageData(0, 0, W, 2 * BAND).data;
      const a = bitsAt(data, BAND / 2), b = bitsAt(data, BAND + BAND / 2);
      let value = 0;
      for (let i = 0; i < BITS; i++) {
        const bit = a[i] > 128 ? 1 : 0, inverse = b[i] > 128 ? 1 : 0;
        if (bit === inverse || Math.abs(a[i] - 128) < 40 || Math.abs(b[i] - 128) < 40) { r.bad += 1; return; }
        value = value * 2 + bit;
      }
      r.frames += 1;
      if (r.seen.has(value)) return;
      r.seen.add(value);
      const now = Date.now() % 4294967296;
      let latency = (now - value + 4294967296) % 4294967296;
      if (latency > 2147483648) latency -= 4294967296;
      r.samples.push(latency);
      // Our player's own part of this sample: from its fragment's arrival to now (its draw, then this
      // check), and of that the decoding and this check's delay after the draw.
      const player = window.orkPlayer;
      if (source.tagName === "CANVAS" && player.inPage !== null) {
        const check = performance.now() - player.drawnAt;
        r.inPage.push(player.inPage + check);
        r.decode.push(player.decodeMs);
        r.check.push(check);
      }
    } catch (e) { r.error = String(e); }
  }
  function onFrame() {
    check();
    const video = document.querySelector("video");
    if (video && video.requestVideoFrameCallback) video.requestVideoFrameCallback(onFrame);
    else setTimeout(onFrame, 100);
  }
  const video = document.querySelector("video");
  if (video && video.requestVideoFrameCallback) { r.mode = "requestVideoFrameCallback"; video.requestVideoFrameCallback(onFrame); }
  else { r.mode = "poll"; }
  // Also poll (cheap when nothing changed): catches a <video> that appears or is replaced later,
  // browsers where requestVideoFrameCallback does not fire, and a canvas (checked before each paint too).
  setInterval(check, 10);
  const onPaint = () => { check(); requestAnimationFrame(onPaint); };
  requestAnimationFrame(onPaint);
  return r.mode;
})()
