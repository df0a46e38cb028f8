"""What live thumbnails cost the ingest (issue 14, point 3: at most 0.01 core per broadcast).

    python3 thumbbench.py        (or servicebench.py with "thumbnails" in BENCH_SERVICE_ONLY; make bench runs it)

One 1080p30 6 Mb/s publish (a pre-encoded file, `ffmpeg -re -c copy`, a keyframe every second) to
broadcast-service; CPU of the service process from /proc/PID/stat, in alternating periods:
  without: nobody asks for a thumbnail (the ingest only keeps a reference to the latest keyframe);
  with:    a directory page's worth of asking, /b/{id}/thumbnail.jpg every second (the server decodes
           at most one keyframe per 10 s per broadcast, whoever asks).
The figure is the difference of the medians, per broadcast; beside it, the exact CPU of each picture the
worker thread made (its Server-Timing header) spread over 10 s.
    BENCH_THUMBNAIL_SECONDS  seconds per period (default 20)
    BENCH_THUMBNAIL_PAIRS    without/with pairs (default 3)
"""
import os
import statistics
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from procstat import cpu_seconds  # noqa: E402

# servicebench (its helpers, temporary folder and processes): the running one when it calls us, else
# imported by main().
sb = None

SECONDS = float(os.environ.get("BENCH_THUMBNAIL_SECONDS", "20"))
PAIRS = int(os.environ.get("BENCH_THUMBNAIL_PAIRS", "3"))
TARGET = 0.01


class Poller(threading.Thread):
    """Asks for the thumbnail every second; keeps the Server-Timing of each new picture."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.stop_event = url, threading.Event()
        self.renders, self.requests, self.failures, self.last_etag = {}, 0, 0, None

    def run(self):
        while not self.stop_event.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    r.read()
                    etag, timing = r.headers.get("ETag"), r.headers.get("Server-Timing", "")
                    made = r.headers.get("Last-Modified")
                    self.requests += 1
                    if (etag, made) not in self.renders and "dur=" in timing:
                        self.renders[(etag, made)] = float(timing.split("dur=")[1].split(";")[0])
            except OSError:
                self.failures += 1
            self.stop_event.wait(1.0)

    def stop(self):
        self.stop_event.set()
        self.join()


def measure(pid, seconds):
    c0, w0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - w0)


def thumbnails(service):
    source = os.path.join(sb.WORK, "thumb-1080p30-6M.flv")
    sb.encode_file(source, "1920x1080", "6M", 10, audio=True)
    publisher = sb.publish_file(source, service.publish_url, "publish-thumbnails")
    broadcast = service.live_id()
    url = f"http://127.0.0.1:{service.http}/b/{broadcast}/thumbnail.jpg"
    time.sleep(4)
    without, with_thumbnails, renders = [], [], []
    for i in range(PAIRS):
        without.append(measure(service.proc.pid, SECONDS))
        poller = Poller(url)
        poller.start()
        with_thumbnails.append(measure(service.proc.pid, SECONDS))
        poller.stop()
        renders += list(poller.renders.values())
        sb.log(f"pair {i + 1}: without {without[-1]:.4f} core, with {with_thumbnails[-1]:.4f} core, "
               f"{len(poller.renders)} pictures made for {poller.requests} requests ({poller.failures} failed)")
    alive = publisher.poll() is None
    sb.stop(publisher)
    a, b = statistics.median(without), statistics.median(with_thumbnails)
    difference = b - a
    render_ms = statistics.median(renders) if renders else float("nan")
    per_ten_seconds = render_ms / 1000 / 10
    ok = alive and bool(renders) and difference <= TARGET and per_ten_seconds <= TARGET
    print(f"{'thumbnails 1080p30':<30} ingest alone {a:.4f} core, with thumbnails asked every 1 s {b:.4f} core: "
          f"{difference:+.4f} core per broadcast (target <= {TARGET}); one picture {render_ms:.1f} ms CPU every 10 s = "
          f"{per_ten_seconds:.4f} core ({len(renders)} pictures, {PAIRS} x {SECONDS:.0f} s pairs"
          + ("" if alive else "; the publisher died") + f") {'OK' if ok else 'MISSED'}", flush=True)
    service.wait_ended()


def main():
    global sb
    import servicebench as sb
    if not os.access(sb.SERVICE, os.X_OK):
        print(f"thumbnail benchmark: no {sb.SERVICE} (swift build -c release --product broadcast-service) MISSED")
        return 1
    try:
        thumbnails(sb.Service())
    finally:
        sb.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
