"""broadcast-service benchmarks beside nginx-rtmp, in one run (issue 3, "Benchmarks").

    python3 servicebench.py            (run.sh sets ORK_BIN_DIR; see run.sh for the knobs)

1. glass-to-glass latency: barcode.py draws the wall clock into every frame; two identical ffmpeg
   encoders publish it, one to broadcast-service, one to nginx-rtmp; headless Chromium plays our
   /b/{id} page and an HLS page served by nginx side by side; latency.js reads the clock back from
   each presented frame. p50 / p95.
2. ingest CPU: a pre-encoded 1080p30 6 Mb/s file published with `ffmpeg -re -c copy` to both servers
   at once; CPU of each server process(es) from /proc/PID/stat over the run.
2b. thumbnails: what live thumbnails cost the ingest of one 1080p30 publish (thumbbench.py).
3. fan-out: the server pinned to CPU 1, the load client (fanout.py) and the publisher to CPU 0; viewers
   of one 3 Mb/s stream added in steps until one falls behind; WebSocket viewers of ours vs RTMP
   players of nginx-rtmp.
Everything runs on 127.0.0.1 with free ports and a temporary folder, and is stopped at the end.
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile

from procstat import children_of, cpu_seconds
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from minws import DevTools  # noqa: E402
from waits import http_get, wait_for  # noqa: E402

BIN = os.environ.get("ORK_BIN_DIR") or os.path.join(HERE, "..", "..", ".build", "release")
SERVICE = os.path.join(BIN, "broadcast-service")
LATENCY_SECONDS = float(os.environ.get("BENCH_SERVICE_LATENCY_SECONDS", "30"))
DIAGNOSTIC_SECONDS = float(os.environ.get("BENCH_SERVICE_DIAGNOSTIC_SECONDS", "10"))
INGEST_SECONDS = float(os.environ.get("BENCH_SERVICE_INGEST_SECONDS", "30"))
FANOUT_STEPS = os.environ.get("BENCH_SERVICE_FANOUT_STEPS", "100,300,600,1000,1500,2000,2500,3000,4000,5000,6000,7000,8000")
ONLY = set(filter(None, os.environ.get("BENCH_SERVICE_ONLY", "latency,ingest,thumbnails,fanout").split(",")))
VERBOSE = os.environ.get("BENCH_SERVICE_VERBOSE") == "1"
WORK = tempfile.mkdtemp(prefix="ork-service-bench.")
PROCS = []


def log(*a):
    if VERBOSE:
        print("  ..", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(cmd, name, **kw):
    out = open(os.path.join(WORK, name + ".log"), "ab")
    p = subprocess.Popen(cmd, stdout=kw.pop("stdout", out), stderr=out, stdin=kw.pop("stdin", subprocess.DEVNULL),
                         start_new_session=True, **kw)
    p.bench_name = name
    PROCS.append(p)
    return p


def stop(p, timeout=5):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)  # the group we started (ffmpeg under barcode.py, nginx's worker)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in PROCS:
        PROCS.remove(p)


def cleanup():
    for p in reversed(list(PROCS)):
        stop(p)
    shutil.rmtree(WORK, ignore_errors=True)


def family(pid):
    """pid and its children (nginx's worker)."""
    return [pid] + children_of(pid)


def pin(pid, cpu):
    for p in family(pid):
        subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(p)], stdout=subprocess.DEVNULL, check=False)


# ---------------------------------------------------------------- the two servers

class Service:
    def __init__(self):
        self.dir = os.path.join(WORK, "service")
        os.makedirs(self.dir)
        self.db = os.path.join(self.dir, "service.sqlite")
        env = dict(os.environ, XDG_DATA_HOME=self.dir)
        subprocess.run([SERVICE, "user", "create", "bench", "--database", self.db], input=b"bench-password-123\n",
                       env=env, check=True, stdout=subprocess.DEVNULL)
        self.key = subprocess.run([SERVICE, "key", "create", "bench", "--database", self.db], env=env, check=True,
                                  capture_output=True).stdout.decode().strip()
        self.stdout = os.path.join(self.dir, "stdout")
        self.proc = spawn([SERVICE, "--host", "127.0.0.1", "--port", "0", "--rtmp-port", "0", "--database", self.db,
                           "--log-level", "warning"], "service", stdout=open(self.stdout, "wb"), env=env)
        line = wait_for(lambda: next((l for l in open(self.stdout).read().splitlines() if l.startswith("ready ")), None),
                        30, "broadcast-service to be ready")
        parts = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
        self.http, self.rtmp = int(parts["http"]), int(parts["rtmp"])
        self.publish_url = f"rtmp://127.0.0.1:{self.rtmp}/live/{self.key}"
        log("service", line)

    def live_id(self, timeout=20):
        def find():
            data = http_get(f"http://127.0.0.1:{self.http}/api/live")
            live = json.loads(data)["broadcasts"] if data else []
            return live[0]["id"] if live else None
        return wait_for(find, timeout, "the broadcast to be live on broadcast-service")

    def wait_ended(self):
        wait_for(lambda: json.loads(http_get(f"http://127.0.0.1:{self.http}/api/live") or b'{"broadcasts":[1]}')["broadcasts"] == [],
                 20, "the broadcast to end")

    def pids(self):
        return [self.proc.pid]


class Nginx:
    def __init__(self):
        self.dir = os.path.join(WORK, "nginx")
        for d in ("hls", "www", "tmp"):
            os.makedirs(os.path.join(self.dir, d))
        self.rtmp, self.http = free_port(), free_port()
        p = self.dir
        conf = f"""
load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;
daemon off;
user root;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 30000; }}
rtmp {{
  server {{
    listen 127.0.0.1:{self.rtmp};
    chunk_size 65536;
    application live {{
      live on;
      record off;
      hls on;
      hls_path {p}/hls;
      hls_fragment 1s;
      hls_playlist_length 4s;
    }}
  }}
}}
http {{
  access_log off;
  client_body_temp_path {p}/tmp/body;
  proxy_temp_path {p}/tmp/proxy;
  fastcgi_temp_path {p}/tmp/fastcgi;
  uwsgi_temp_path {p}/tmp/uwsgi;
  scgi_temp_path {p}/tmp/scgi;
  types {{ text/html html; application/vnd.apple.mpegurl m3u8; video/mp2t ts; }}
  server {{
    listen 127.0.0.1:{self.http};
    root {p}/www;
    location /hls/ {{ alias {p}/hls/; add_header Cache-Control no-cache; }}
  }}
}}
"""
        with open(os.path.join(p, "nginx.conf"), "w") as f:
            f.write(conf)
        with open(os.path.join(p, "www", "player.html"), "w") as f:
            f.write('<!doctype html><title>nginx-rtmp HLS</title>'
                    '<video id="video" src="/hls/bench.m3u8" autoplay playsinline></video>')
        self.proc = spawn(["nginx", "-p", p, "-c", os.path.join(p, "nginx.conf"), "-e", os.path.join(p, "early.log")], "nginx")
        wait_for(lambda: http_get(f"http://127.0.0.1:{self.http}/player.html"), 10, "nginx to answer")
        self.publish_url = f"rtmp://127.0.0.1:{self.rtmp}/live/bench"
        self.page = f"http://127.0.0.1:{self.http}/player.html"

    def pids(self):
        return family(self.proc.pid)


# ---------------------------------------------------------------- media

def encode_file(path, size, rate, seconds, audio):
    """A pre-encoded H.264 (CBR with filler, so the bitrate is real) [+ AAC] FLV file, keyframe every second."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate=30"]
    if audio:
        cmd += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
    cmd += ["-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-pix_fmt", "yuv420p",
            "-b:v", rate, "-minrate", rate, "-maxrate", rate, "-bufsize", rate, "-x264-params", "nal-hrd=cbr:force-cfr=1"]
    cmd += (["-c:a", "aac", "-b:a", "128k"] if audio else ["-an"]) + ["-f", "flv", "-y", path]
    subprocess.run(cmd, check=True)


def publish_file(path, url, name, cpu=None):
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i", path, "-c", "copy", "-f", "flv", url]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    return spawn(cmd, name)


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


def line(name, ours, theirs, ratio_text, ok):
    print(f"{name:<30} ours {ours:<16} nginx-rtmp {theirs:<18} {ratio_text} {'OK' if ok else 'MISSED'}", flush=True)


# ---------------------------------------------------------------- 1. glass-to-glass

def chromium():
    profile = os.path.join(WORK, "chromium")
    # Its temporary files (the singleton socket's directory, left behind even on SIGTERM) go with it.
    os.makedirs(os.path.join(profile, "tmp"))
    p = spawn(["chromium", "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
               "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--remote-allow-origins=*",
               "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-gpu", "--mute-audio",
               "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows", "--window-size=800,600", "about:blank"], "chromium",
              env=dict(os.environ, TMPDIR=os.path.join(profile, "tmp")))
    port_file = os.path.join(profile, "DevToolsActivePort")
    port = int(wait_for(lambda: os.path.exists(port_file) and open(port_file).read().split("\n")[0], 30, "Chromium"))
    return p, port


def latency(service, nginx):
    # The sound comes from barcode.py too, paced with the frames: a separately clocked source (a lavfi tone
    # with -re) starts later than the piped frames and the muxer would hold every frame back by the difference.
    encoder = ("ffmpeg -nostdin -v error -probesize 32 -analyzeduration 0 -f rawvideo -pix_fmt gray -s 640x360 -r 30 -i - "
               "-probesize 32 -analyzeduration 0 -f s16le -ar 48000 -ac 1 -i {audio} "
               "-c:v libx264 -preset veryfast -tune zerolatency -g 30 -b:v 1500k -maxrate 1500k -bufsize 750k "
               "-pix_fmt yuv420p -c:a aac -b:a 96k -flush_packets 1 -f flv ")
    gen = spawn([sys.executable, os.path.join(HERE, "barcode.py"), "--size", "640x360", "--fps", "30",
                 "--cmd", encoder + service.publish_url, "--cmd", encoder + nginx.publish_url], "barcode")
    bid = service.live_id()
    wait_for(lambda: os.path.exists(os.path.join(nginx.dir, "hls", "bench.m3u8")), 20, "nginx-rtmp's HLS playlist")
    time.sleep(2)  # a few HLS segments
    browser, port = chromium()
    version = json.loads(http_get(f"http://127.0.0.1:{port}/json/version"))
    b = DevTools(version["webSocketDebuggerUrl"])
    pages = {}
    for name, url in (("ours", f"http://127.0.0.1:{service.http}/b/{bid}"), ("nginx", nginx.page)):
        target = b.call("Target.createTarget", url=url, newWindow=True)["targetId"]
        pages[name] = DevTools(f"ws://127.0.0.1:{port}/devtools/page/{target}")
    script = open(os.path.join(HERE, "latency.js")).read()
    for name, page in pages.items():
        wait_for(lambda: page.evaluate("!!document.querySelector('video')"), 20,
                 f"the {name} page")
        log(name, "inject:", page.evaluate(script))
    # Warm up: both players playing and past their start-up.
    deadline = time.time() + 30
    while time.time() < deadline:
        counts = {n: p.evaluate("window.__orkLatency.samples.length") for n, p in pages.items()}
        if all(c >= 60 for c in counts.values()):
            break
        log("warm-up", counts, {n: p.evaluate("(v => v && [v.readyState, v.networkState, v.error && v.error.message, v.currentTime])(document.querySelector('video'))") for n, p in pages.items()})
        time.sleep(0.5)
    time.sleep(3)
    for p in pages.values():
        p.evaluate("window.__orkLatency.samples = []; window.__orkLatency.bad = 0; 1")
    time.sleep(LATENCY_SECONDS)
    results = {}
    for name, p in pages.items():
        r = p.evaluate("({samples: window.__orkLatency.samples, bad: window.__orkLatency.bad, "
                       "frames: window.__orkLatency.frames, error: window.__orkLatency.error, mode: window.__orkLatency.mode, "
                       "player: window.orkPlayer ? {fragments: window.orkPlayer.fragments, error: window.orkPlayer.error, "
                       "mode: window.orkPlayer.mode, drawn: window.orkPlayer.framesDrawn, reconnects: window.orkPlayer.reconnects} : null})")
        r["mode_player"] = (r.get("player") or {}).get("mode")
        results[name] = r
        s = r["samples"]
        log(name, f"{len(s)} samples, bad {r['bad']}, mode {r['mode']}, error {r['error']}, player {r['player']}",
            (f"min {min(s)} p50 {percentile(s, 50)} p95 {percentile(s, 95)} max {max(s)}" if s else ""))
    # Diagnostic, not a figure: the same page with its player kept at the live edge (seek when more than
    # 0.3 s is buffered ahead), to tell the delivery's latency from the page player's catch-up policy.
    diagnostic = None
    if DIAGNOSTIC_SECONDS > 0 and results["ours"].get("mode_player") == "mse":
        pages["ours"].evaluate("""(() => { const v = document.querySelector('video');
            setInterval(() => { const b = v.buffered; if (!b.length) return; const end = b.end(b.length - 1);
              if (end - v.currentTime > 0.3) v.currentTime = end - 0.1; }, 100); return 1; })()""")
        time.sleep(3)
        pages["ours"].evaluate("window.__orkLatency.samples = []; 1")
        time.sleep(DIAGNOSTIC_SECONDS)
        diagnostic = pages["ours"].evaluate("window.__orkLatency.samples")
    for p in pages.values():
        p.close()
    b.close()
    stop(browser)
    stop(gen)
    ours, theirs = results["ours"]["samples"], results["nginx"]["samples"]
    for q, target in ((50, 250), (95, 400)):
        if not ours:
            print(f"{'glass-to-glass p%d' % q:<30} ours: no frames read back (bad frames {results['ours']['bad']}) MISSED")
            continue
        o = percentile(ours, q)
        t = percentile(theirs, q) if theirs else None
        line(f"glass-to-glass p{q} (loopback)", f"{o} ms", f"{t} ms (HLS)" if t is not None else "no frames",
             (f"ratio {o / t:.2f} " if t else "") + f"(target <= {target} ms; {len(ours)}/{len(theirs)} frames; "
             f"our page's player: {results['ours'].get('mode_player')})",
             o <= target)
    if diagnostic:
        print(f"  diagnostic: our page's player kept at the live edge (seek when > 0.3 s buffered): "
              f"p50 {percentile(diagnostic, 50)} ms, p95 {percentile(diagnostic, 95)} ms ({len(diagnostic)} frames)")


# ---------------------------------------------------------------- 2. ingest CPU

def ingest(service, nginx):
    source = os.path.join(WORK, "1080p30-6M.flv")
    encode_file(source, "1920x1080", "6M", 10, audio=True)
    size_mbit = os.path.getsize(source) * 8 / 1e6 / 10
    pubs = [publish_file(source, service.publish_url, "publish-ours"), publish_file(source, nginx.publish_url, "publish-nginx")]
    service.live_id()
    time.sleep(4)
    sp, npids = service.pids(), nginx.pids()
    s0, n0, w0 = sum(map(cpu_seconds, sp)), sum(map(cpu_seconds, npids)), time.monotonic()
    time.sleep(INGEST_SECONDS)
    wall = time.monotonic() - w0
    s1, n1 = sum(map(cpu_seconds, sp)), sum(map(cpu_seconds, npids))
    alive = all(p.poll() is None for p in pubs)
    for p in pubs:
        stop(p)
    ours, theirs = (s1 - s0) / wall, (n1 - n0) / wall
    line("ingest CPU 1080p30 6 Mb/s", f"{ours:.3f} core", f"{theirs:.3f} core (HLS on)",
         f"ours/nginx {ours / theirs:.2f} (target <= 0.05 core; file {size_mbit:.1f} Mb/s, {wall:.0f} s"
         + ("" if alive else "; a publisher died") + ")", ours <= 0.05 and alive)
    service.wait_ended()


# ---------------------------------------------------------------- 3. fan-out

def fanout_run(mode, url, pids):
    cmd = ["taskset", "-c", "0", sys.executable, os.path.join(HERE, "fanout.py"), mode, "--url", url,
           "--steps", FANOUT_STEPS, "--server-pids", ",".join(map(str, pids))]
    p = spawn(cmd, "fanout-" + mode, stdout=subprocess.PIPE)
    steps, held = [], None
    for raw in p.stdout:
        record = json.loads(raw)
        if "held" in record:
            held = record
        else:
            steps.append(record)
            log(mode, raw.decode().strip())
    p.wait()
    PROCS.remove(p)
    return held, steps


def fanout(service, nginx):
    if (os.cpu_count() or 1) < 2:
        print("fan-out: needs 2 CPUs (server on one, load client on the other) MISSED")
        return
    source = os.path.join(WORK, "720p30-3M.flv")
    encode_file(source, "1280x720", "3M", 10, audio=False)
    mbit = os.path.getsize(source) * 8 / 1e6 / 10
    pin(service.proc.pid, 1)
    pin(nginx.proc.pid, 1)
    pub = publish_file(source, service.publish_url, "publish-fanout-ours", cpu=0)
    bid = service.live_id()
    time.sleep(2)
    ours, ours_steps = fanout_run("ws", f"ws://127.0.0.1:{service.http}/b/{bid}/ws", service.pids())
    stop(pub)
    pub = publish_file(source, nginx.publish_url, "publish-fanout-nginx", cpu=0)
    time.sleep(3)
    theirs, theirs_steps = fanout_run("rtmp", nginx.publish_url, nginx.pids())
    stop(pub)

    def describe(held, steps):
        if held is None:
            return "failed", 0
        text = f"{held['held']}{'+' if held['reached_last_step'] else ''} viewers"
        last = steps[-1] if steps else None
        if last and not last["ok"] and last["client_cpu"] > 0.9:
            text += " (client-bound)"
        return text, held["held"]

    o_text, o = describe(ours, ours_steps)
    t_text, t = describe(theirs, theirs_steps)
    ratio = o / t if t else float("inf")
    # A side that held the last step is a lower bound: the ratio is then a bound too.
    bound = {(False, False): "", (True, False): ">= ", (False, True): "<= ", (True, True): "~ "}[
        (bool(ours and ours["reached_last_step"]), bool(theirs and theirs["reached_last_step"]))]
    line(f"fan-out {mbit:.1f} Mb/s, 1 core", o_text + " WS", t_text + " RTMP", f"ratio {bound}{ratio:.2f} (target >= 1.5)",
         ratio >= 1.5 and bound != "<= ")
    for name, steps in (("ours", ours_steps), ("nginx-rtmp", theirs_steps)):
        if steps:
            last = steps[-1]
            per = last["server_cpu"] / last["viewers"] * 1000
            print(f"  {name}: last step {last['viewers']} viewers, {last['behind']} behind {last['reasons'] or ''}, "
                  f"server {per:.2f} core per 1000 viewers, "
                  f"server {last['server_cpu']:.2f} core in all, client {last['client_cpu']:.2f} core, {last['mbit_per_s']} Mb/s delivered")


def main():
    for tool in ("ffmpeg", "nginx", "chromium", "taskset"):
        if not shutil.which(tool):
            print(f"service benchmarks: {tool} is not installed (make bootstrap) MISSED")
            return 1
    if not os.access(SERVICE, os.X_OK):
        print(f"service benchmarks: no {SERVICE} (swift build -c release --product broadcast-service) MISSED")
        return 1
    print(f"== broadcast-service beside nginx-rtmp, loopback, {os.cpu_count()} CPUs")
    try:
        service, nginx = Service(), Nginx()
        if "latency" in ONLY:
            latency(service, nginx)
            service.wait_ended()
        if "ingest" in ONLY:
            ingest(service, nginx)
        if "thumbnails" in ONLY:
            import thumbbench  # noqa: E402
            thumbbench.sb = sys.modules[__name__]  # our helpers, folder and processes
            thumbbench.thumbnails(service)
        if "fanout" in ONLY:
            fanout(service, nginx)
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
