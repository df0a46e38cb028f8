"""make bench, issue 16: a system broadcast through our own reference-service upload extension, seen
in headless Chromium, in one run:

1. broadcast start -> playing in the browser: from launching `replay broadcast --service
   org.openreplaykit.reference` until the viewer page, opened as soon as `replay` prints its URL,
   has drawn its first picture (target <= 1.5 s); and -> live at the ingest (the service's broadcast
   object says live; target <= 1 s). The browser is started beforehand, as a viewer's is.
2. glass-to-glass: `replay-testcontent --clock-barcode` draws the wall clock into every frame of the
   display (Benchmarks/service/barcode.py's layout at the screen's size); the picture goes X server ->
   replayd's capture -> frame ring -> the extension (libx264, RTMP) -> broadcast-service -> WebSocket
   -> the page's player; latency.js (Benchmarks/service) reads the clock back from every picture the
   page shows and compares it with Date.now(). p50 / p95 (target p50 <= 200 ms).

    python3 Benchmarks/glass.py      (release builds; `make bench` runs it)

Knobs: BENCH_GLASS_SIZE (default 1920x1080), BENCH_GLASS_RUNS (start-up runs, default 3),
BENCH_GLASS_SECONDS (latency window, default 20), BENCH_GLASS_MEMORY_MB (replayd's
--extension-memory-mb, default: replayd's own), BENCH_GLASS_FRAGMENT_MS (broadcast-service's
--fragment-ms, default: the service's own), BENCH_GLASS_VERBOSE=1 (replayd at debug level, every
process's log line stamped with the wall clock in ms, and the work folder kept).
Everything runs on 127.0.0.1 with free ports, its own display, sound server and replayd, in a
temporary folder; every process it started is stopped at the end.
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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "service"))
from minws import DevTools  # noqa: E402
from waits import http_get, wait_for  # noqa: E402

BIN = os.environ.get("ORK_BIN_DIR") or os.path.join(HERE, "..", ".build", "release")
SIZE = os.environ.get("BENCH_GLASS_SIZE", "1920x1080")
RUNS = int(os.environ.get("BENCH_GLASS_RUNS", "3"))
SECONDS = float(os.environ.get("BENCH_GLASS_SECONDS", "20"))
MEMORY_MB = os.environ.get("BENCH_GLASS_MEMORY_MB")
VERBOSE = os.environ.get("BENCH_GLASS_VERBOSE") == "1"
WORK = tempfile.mkdtemp(prefix="ork-glassbench.")
PROCS = []
PASSWORD = "bench-password-1"


def log(*a):
    if VERBOSE:
        print("  ..", *a, file=sys.stderr, flush=True)


def spawn(cmd, name, env=None, stdout=None):
    out = open(os.path.join(WORK, name + ".log"), "ab")
    stamped = VERBOSE and stdout is None
    p = subprocess.Popen(cmd, stdout=stdout or (subprocess.PIPE if stamped else out),
                         stderr=subprocess.STDOUT if stamped else out, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)
    if stamped:
        # Verbose: every line of the log gets the wall clock in milliseconds (the programs' own
        # timestamps have whole seconds), to lay the processes' logs side by side.
        def stamp():
            for line in p.stdout:
                out.write(b"%.3f " % time.time() + line)
                out.flush()
        threading.Thread(target=stamp, daemon=True).start()
    PROCS.append(p)
    return p


def stop(p, sig=signal.SIGTERM, timeout=10):
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if p in PROCS:
        PROCS.remove(p)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def free_display():
    for n in range(320, 360):
        if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock"):
            return f":{n}"
    raise RuntimeError("no free display number in :320-:359")


def desktop():
    """A display, a private sound server and replayd; returns the environment their clients use."""
    env = dict(os.environ)
    display = free_display()
    spawn(["Xvfb", display, "-screen", "0", f"{SIZE}x24", "-nolisten", "tcp", "-noreset"], "xvfb")
    env["DISPLAY"] = display
    wait_for(lambda: subprocess.run(["xdpyinfo"], env=env, capture_output=True).returncode == 0, 10, "Xvfb")
    pulse = os.path.join(WORK, "pulse")
    home = os.path.join(WORK, "home")
    runtime = os.path.join(WORK, "runtime")
    for d in (pulse, os.path.join(home, "Videos"), os.path.join(home, "data"), runtime):
        os.makedirs(d, exist_ok=True)
    os.chmod(runtime, 0o700)
    sound_env = {k: v for k, v in env.items() if k != "DISPLAY"}
    sound_env.update(HOME=pulse, PULSE_RUNTIME_PATH=pulse)
    spawn(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--system=no", "--use-pid-file=no",
           "--disable-shm=yes", "-L", f"module-native-protocol-unix auth-anonymous=1 socket={pulse}/native",
           "-L", "module-null-sink sink_name=main rate=48000"], "pulseaudio", env=sound_env)
    env.update(PULSE_SERVER=f"unix:{pulse}/native", PULSE_COOKIE=f"{pulse}/cookie", HOME=home,
               XDG_RUNTIME_DIR=runtime, XDG_DATA_HOME=os.path.join(home, "data"))
    wait_for(lambda: subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0, 10, "PulseAudio")
    replayd = [os.path.join(BIN, "replayd"), "--idle-exit", "0"]
    if MEMORY_MB:
        replayd += ["--extension-memory-mb", MEMORY_MB]
    if VERBOSE:
        replayd += ["--log-level", "debug"]
    spawn(replayd, "replayd", env=env)
    wait_for(lambda: os.path.exists(os.path.join(runtime, "openreplaykit", "replayd.sock")), 10, "replayd")
    return env


def service(env):
    """broadcast-service on loopback with an account; returns its HTTP port."""
    d = os.path.join(WORK, "service")
    os.makedirs(d)
    db = os.path.join(d, "service.sqlite")
    senv = dict(env, XDG_DATA_HOME=d)
    subprocess.run([os.path.join(BIN, "broadcast-service"), "user", "create", "bench", "--database", db],
                   input=(PASSWORD + "\n").encode(), env=senv, check=True, stdout=subprocess.DEVNULL)
    ready = os.path.join(d, "stdout.log")
    spawn([os.path.join(BIN, "broadcast-service"), "--host", "127.0.0.1", "--port", "0", "--rtmp-port", "0",
           "--database", db] + (["--fragment-ms", os.environ["BENCH_GLASS_FRAGMENT_MS"]] if os.environ.get("BENCH_GLASS_FRAGMENT_MS") else []),
          "service", env=senv, stdout=open(ready, "ab"))
    line = wait_for(lambda: next((l for l in open(ready).read().splitlines() if l.startswith("ready ")), None), 20,
                    "broadcast-service")
    return int(line.split("http=")[1].split()[0])


def chromium():
    profile = os.path.join(WORK, "chromium")
    # Its temporary files (the singleton socket's directory, left behind even on SIGTERM) go with it.
    os.makedirs(os.path.join(profile, "tmp"))
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env["TMPDIR"] = os.path.join(profile, "tmp")
    spawn(["chromium", "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--remote-allow-origins=*",
           "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-gpu", "--mute-audio",
           "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
           "--disable-backgrounding-occluded-windows", "--window-size=1280,800", "about:blank"], "chromium", env=env)
    port_file = os.path.join(profile, "DevToolsActivePort")
    port = int(wait_for(lambda: os.path.exists(port_file) and open(port_file).read().split("\n")[0], 30, "Chromium"))
    version = json.loads(http_get(f"http://127.0.0.1:{port}/json/version"))
    return port, DevTools(version["webSocketDebuggerUrl"])


# Runs in the page from its first script on: the wall-clock time of the first picture the viewer sees
# (our player's canvas when it decodes with WebCodecs, else the <video> with a picture).
FIRST_PICTURE = """(() => { const t = setInterval(() => {
  const p = window.orkPlayer, v = document.querySelector('video');
  if ((p && p.framesDrawn > 0) || (v && v.readyState >= 2 && v.currentTime > 0)) { window.__orkFirstPicture = Date.now(); clearInterval(t); }
}, 2); })();"""


def broadcast(env, http, title):
    """Starts `replay broadcast` through the reference extension; returns (process, start time, stdout path)."""
    out = os.path.join(WORK, f"broadcast-{title}.out")
    start = time.time()
    p = spawn([os.path.join(BIN, "replay"), "broadcast", "--service", "org.openreplaykit.reference",
               "--setup", f"server=http://127.0.0.1:{http}", "--setup", "user=bench",
               "--setup", f"password={PASSWORD}", "--setup", f"title={title}"], f"broadcast-{title}", env=env,
              stdout=open(out, "ab"))
    return p, start, out


def end_broadcast(env, p):
    subprocess.run([os.path.join(BIN, "replay"), "stop"], env=env, capture_output=True, timeout=30)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        pass
    stop(p, signal.SIGINT)


def processes():
    """(command name, CPU seconds so far, resident MB) of every process now, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        yield stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / ticks, rss / 1024


def cpu_by_command():
    """CPU seconds (user + system) of every process now, summed by command name, with the machine's
    steal time: what the verbose bench prints for its latency window (who had the two cores)."""
    used = {}
    for name, seconds, _ in processes():
        used[name] = used.get(name, 0) + seconds
    cpu = open("/proc/stat").readline().split()
    used["(steal)"] = int(cpu[8]) / os.sysconf("SC_CLK_TCK") if len(cpu) > 8 else 0
    return used


def cpu_used(before, after, seconds):
    spent = {name: (after[name] - before.get(name, 0)) / seconds for name in after}
    return ", ".join(f"{name} {cores:.2f}" for name, cores in sorted(spent.items(), key=lambda kv: -kv[1]) if cores >= 0.01)


def resident_mb(commands):
    """The resident memory of the processes with these command names, in MB (the verbose bench's memory line)."""
    return ", ".join(sorted(f"{name} {mb:.1f}" for name, _, mb in processes() if name in commands))


def page_url(p, out):
    def found():
        if p.poll() is not None:
            raise RuntimeError("replay broadcast ended: " + open(os.path.join(WORK, os.path.basename(out)[:-4] + ".log")).read()[-2000:])
        return next((l.strip() for l in open(out).read().splitlines() if l.startswith("http")), None)
    return wait_for(found, 30, "the broadcast's page URL", step=0.005)


def main():
    env = desktop()
    http = service(env)
    content = spawn([os.path.join(BIN, "replay-testcontent"), "--clock-barcode"], "content", env=env)
    time.sleep(1)
    port, browser = chromium()
    # A viewer's browser is already running: its own start-up (a renderer, a first page) is over
    # before the clock starts, as it is for a person who opens the link.
    warm = browser.call("Target.createTarget", url=f"http://127.0.0.1:{http}/", newWindow=True)["targetId"]
    time.sleep(3)
    browser.call("Target.closeTarget", targetId=warm)
    print(f"== Glass-to-glass through the reference-service extension (issue 16): {SIZE}@30, display {env['DISPLAY']}, "
          f"{RUNS} start-up runs, a {SECONDS:.0f} s latency window", flush=True)
    starts_live, starts_playing, samples, bad = [], [], [], 0
    for run in range(1, RUNS + 1):
        target = browser.call("Target.createTarget", url="about:blank", newWindow=True)["targetId"]
        page = DevTools(f"ws://127.0.0.1:{port}/devtools/page/{target}")
        page.call("Page.enable")
        page.call("Page.addScriptToEvaluateOnNewDocument", source=FIRST_PICTURE)
        p, start, out = broadcast(env, http, f"glass{run}")
        log(f"run {run}: started at {start:.3f}")
        url = page_url(p, out)
        url_after = int((time.time() - start) * 1000)
        page.call("Page.navigate", url=url)
        bid = url.rstrip("/").split("/")[-1]
        live = wait_for(lambda: b'"live":true' in (http_get(f"http://127.0.0.1:{http}/api/v1/broadcasts/{bid}") or b"")
                        and time.time(), 30, "the broadcast to be live", step=0.01)
        try:
            first = wait_for(lambda: page.evaluate("window.__orkFirstPicture || 0"), 30, "the page's first picture", step=0.02)
        except RuntimeError:
            state = page.evaluate("JSON.stringify({url: location.href, player: window.orkPlayer || null, "
                                  "video: (v => v && [v.readyState, v.currentTime, v.error && v.error.message])(document.querySelector('video'))})")
            raise RuntimeError(f"the viewer page showed no picture in 30 s: {state}")
        starts_live.append(int((live - start) * 1000))
        starts_playing.append(int(first - start * 1000))
        log(f"run {run}: URL after {url_after} ms; live {starts_live[-1]} ms, playing {starts_playing[-1]} ms")
        if run == RUNS:
            # The last run stays on for glass-to-glass: latency.js reads the clock from every picture shown.
            page.evaluate(open(os.path.join(HERE, "service", "latency.js")).read())
            wait_for(lambda: page.evaluate("window.__orkLatency.samples.length") >= 60, 30, "60 pictures read back")
            time.sleep(3)
            # The window starts now: what was read before it goes (its parts too, which were kept with it).
            page.evaluate("for (const k of ['samples', 'inPage', 'decode', 'check']) window.__orkLatency[k] = []; window.__orkLatency.bad = 0; 1")
            before = cpu_by_command()
            time.sleep(SECONDS)
            log("CPU over the window, cores by command:", cpu_used(before, cpu_by_command(), SECONDS))
            log("resident memory at its end, MB:", resident_mb(["replayd", "replay-extensio", "broadcast-servi"]))
            r = page.evaluate("({samples: window.__orkLatency.samples, inPage: window.__orkLatency.inPage, decode: window.__orkLatency.decode, check: window.__orkLatency.check, bad: window.__orkLatency.bad, "
                              "mode: window.orkPlayer && window.orkPlayer.mode, status: null, "
                              "player: window.orkPlayer && [window.orkPlayer.fragments, window.orkPlayer.framesDecoded, "
                              "window.orkPlayer.framesDrawn, window.orkPlayer.audioDecoded, window.orkPlayer.behind]})")
            samples, bad = r["samples"], r["bad"]
            if len(r["inPage"]) == len(samples) and samples:
                # Where the time goes: up to the page (capture, encoding, the service, the socket) and in it
                # (decoding, the draw queue, latency.js's check).
                upstream = [s - p for s, p in zip(samples, r["inPage"])]
                log(f"glass-to-glass split, p50 / p95 ms: up to the page {percentile(upstream, 50):.0f} / {percentile(upstream, 95):.0f}, "
                    f"in the page {percentile(r['inPage'], 50):.0f} / {percentile(r['inPage'], 95):.0f}, decode {percentile(r['decode'], 50):.0f} / {percentile(r['decode'], 95):.0f}, check {percentile(r['check'], 50):.0f} / {percentile(r['check'], 95):.0f}")
            log("the page's player: fragments, frames decoded, frames drawn, sound decoded, behind:", r["player"])
            mode = r["mode"]
            status = subprocess.run([os.path.join(BIN, "replay"), "status"], env=env, capture_output=True, text=True).stdout
            log("replay status:", status)
        page.close()
        browser.call("Target.closeTarget", targetId=target)
        end_broadcast(env, p)
        if VERBOSE:
            said = open(os.path.join(WORK, f"broadcast-glass{run}.log"), errors="replace").read().splitlines()
            log(f"run {run}: replay broadcast said:", " | ".join(line for line in said if "dropped" in line or "error" in line.lower()) or "nothing dropped")
            extension_log = os.path.join(WORK, "runtime", "openreplaykit", "extension-org.openreplaykit.reference.log")
            if os.path.exists(extension_log):
                ended = [line for line in open(extension_log, errors="replace").read().splitlines() if "stream ended" in line]
                log(f"run {run}: the extension:", ended[-1].split(": ", 1)[-1] if ended else "no end of stream logged")
            published = [line for line in open(os.path.join(WORK, "service.log"), errors="replace").read().splitlines()
                         if "RTMP publish ended" in line]
            log(f"run {run}: the service:", published[-1].split("openreplaykit.service: ", 1)[-1] if published else "no end of publish logged")
        time.sleep(1)
    stop(content)

    def row(name, values, target):
        worst = max(values)
        print(f"{name:<44} worst {worst} ms, median {int(statistics.median(values))} ms {values} "
              f"(target <= {target}) {'OK' if worst <= target else 'MISSED'}", flush=True)
    row("broadcast start -> live at the ingest", starts_live, 1000)
    row("broadcast start -> playing in Chromium", starts_playing, 1500)
    if samples:
        p50, p95 = percentile(samples, 50), percentile(samples, 95)
        print(f"{'glass-to-glass (extension + service)':<44} p50 {p50} ms, p95 {p95} ms, min {min(samples)} ms "
              f"({len(samples)} pictures, {bad} unreadable; the page's player: {mode}) (target p50 <= 200) "
              f"{'OK' if p50 <= 200 else 'MISSED'}", flush=True)
    else:
        print(f"glass-to-glass: no picture read back ({bad} unreadable) MISSED", flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in reversed(list(PROCS)):
            stop(p)
        if VERBOSE:
            print("  .. work folder kept:", WORK, file=sys.stderr)
        else:
            shutil.rmtree(WORK, ignore_errors=True)
