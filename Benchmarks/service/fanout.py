"""Fan-out load client: many viewers of one live stream on 127.0.0.1, added in steps, until one falls behind.

    python3 fanout.py ws   --url ws://127.0.0.1:P/b/ID/ws          --steps 50,100,... [--server-pids 1,2]
    python3 fanout.py rtmp --url rtmp://127.0.0.1:P/live/NAME      --steps 50,100,...

A viewer is a real client of the protocol (a WebSocket client reading the fMP4 messages; an RTMP client
that handshakes, connects, plays and acknowledges), parsing just enough to count video frames and follow
the media clock. Once every viewer has its stream (at most 15 s after joining) and 1 s more, every viewer is watched for --window seconds; a viewer has
fallen behind if it was disconnected, received fewer than 90 % of the frames the wall clock says were
due (fps x window), or its media clock advanced 0.75 s less than the wall clock. Prints one JSON line per
step; stops at the first step where any viewer fell behind. Standard library only (asyncio protocols).
"""
import argparse
import base64
import asyncio
import json
import os
import socket
import struct
import sys
import time
import urllib.parse

from minws import mask_frame
from procstat import children_of, cpu_seconds


class Viewer(asyncio.Protocol):
    def __init__(self):
        self.transport = None
        self.closed = False
        self.frames = 0
        self.media = None  # media clock (seconds) of the newest video frame
        self.bytes = 0
        self.error = None

    def connection_lost(self, exc):
        self.closed = True

    def snapshot(self):
        return (self.frames, self.media, self.closed)

    def batch_reads(self):
        """Once media flows: wake up for 128 KiB at a time rather than for every message the server writes
        (SO_RCVLOWAT; at most ~0.35 s of delay at 3 Mb/s), so the one-core client keeps up with
        thousands of viewers. Same for both protocols."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 131072)
            except OSError:
                pass


# ---------------------------------------------------------------- WebSocket + fMP4

def boxes(data, start, end):
    """(type, payload_start, box_end) of the ISO-BMFF boxes in data[start:end]."""
    pos = start
    while pos + 8 <= end:
        size = int.from_bytes(data[pos:pos + 4], "big")
        kind = bytes(data[pos + 4:pos + 8])
        header = 8
        if size == 1:
            size = int.from_bytes(data[pos + 8:pos + 16], "big")
            header = 16
        if size < header:
            return
        yield kind, pos + header, min(pos + size, end)
        pos += size


class WSViewer(Viewer):
    def __init__(self, host, port, path):
        super().__init__()
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
        self.upgraded = False
        self.buf = b""
        self.skip = 0
        self.timescales = {}  # track id -> timescale
        self.video_track = None

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data):
        self.bytes += len(data)
        if not self.upgraded:
            self.buf += data
            if b"\r\n\r\n" not in self.buf:
                return
            head, data = self.buf.split(b"\r\n\r\n", 1)
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                self.error = head.split(b"\r\n", 1)[0].decode(errors="replace")
                self.transport.close()
                return
            self.upgraded, self.buf = True, b""
            self.batch_reads()
        if self.skip:
            if len(data) <= self.skip:
                self.skip -= len(data)
                return
            data = data[self.skip:]
            self.skip = 0
        buf = self.buf + data if self.buf else data
        pos, end = 0, len(buf)
        while end - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            n, off = b1 & 0x7F, 2
            if n == 126:
                if end - pos < 4:
                    break
                n, off = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif n == 127:
                if end - pos < 10:
                    break
                n, off = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            opcode = b0 & 0x0F
            # The init segment is read whole; of a fragment, the head (moof) is enough.
            if opcode == 2:
                want = n if self.video_track is None else min(n, 4096)
            else:
                want = n if opcode == 9 else 0  # a ping is answered (the server's auto-ping closes silent peers)
            if end - pos - off < want:
                break
            if opcode == 2:
                self.binary(buf[pos + off:pos + off + want])
            elif opcode == 9:
                self.transport.write(mask_frame(10, bytes(buf[pos + off:pos + off + n])))
            elif opcode == 8:
                self.transport.close()
                return
            stop = pos + off + n
            if stop > end:
                self.skip = stop - end
                pos = end
                break
            pos = stop
        self.buf = buf[pos:]

    def binary(self, data):
        if self.video_track is None:
            for kind, s, e in boxes(data, 0, len(data)):
                if kind == b"moov":
                    for k2, s2, e2 in boxes(data, s, e):
                        if k2 == b"trak":
                            self.track(data, s2, e2)
            return
        for kind, s, e in boxes(data, 0, len(data)):
            if kind != b"moof":
                continue
            for k2, s2, e2 in boxes(data, s, e):
                if k2 != b"traf":
                    continue
                track, decode_time, samples = None, None, 0
                for k3, s3, e3 in boxes(data, s2, e2):
                    if k3 == b"tfhd":
                        track = int.from_bytes(data[s3 + 4:s3 + 8], "big")
                    elif k3 == b"tfdt":
                        size = 8 if data[s3] == 1 else 4
                        decode_time = int.from_bytes(data[s3 + 4:s3 + 4 + size], "big")
                    elif k3 == b"trun":
                        samples = int.from_bytes(data[s3 + 4:s3 + 8], "big")
                if track == self.video_track and decode_time is not None:
                    self.frames += samples
                    self.media = decode_time / self.timescales[track]

    def track(self, data, s, e):
        track_id, timescale, handler = None, None, None
        for kind, s2, e2 in boxes(data, s, e):
            if kind == b"tkhd":
                track_id = int.from_bytes(data[s2 + 12:s2 + 16] if data[s2] == 0 else data[s2 + 20:s2 + 24], "big")
            elif kind == b"mdia":
                for k3, s3, e3 in boxes(data, s2, e2):
                    if k3 == b"mdhd":
                        timescale = int.from_bytes(data[s3 + 12:s3 + 16] if data[s3] == 0 else data[s3 + 20:s3 + 24], "big")
                    elif k3 == b"hdlr":
                        handler = bytes(data[s3 + 8:s3 + 12])
        if track_id is not None and timescale:
            self.timescales[track_id] = timescale
            if handler == b"vide":
                self.video_track = track_id


# ---------------------------------------------------------------- RTMP

def amf_string(s):
    b = s.encode()
    return b"\x02" + struct.pack(">H", len(b)) + b


def amf_number(x):
    return b"\x00" + struct.pack(">d", x)


def amf_object(d):
    out = b"\x03"
    for k, v in d.items():
        kb = k.encode()
        out += struct.pack(">H", len(kb)) + kb
        out += amf_string(v) if isinstance(v, str) else (b"\x01" + bytes([v]) if isinstance(v, bool) else amf_number(v))
    return out + b"\x00\x00\x09"


def rtmp_message(csid, type_id, stream_id, payload):
    # One chunk: we announce a 64 KiB chunk size before anything else.
    return (bytes([csid]) + b"\x00\x00\x00" + len(payload).to_bytes(3, "big") + bytes([type_id])
            + struct.pack("<I", stream_id) + payload)


class RTMPViewer(Viewer):
    def __init__(self, host, port, app, name):
        super().__init__()
        self.app, self.name, self.tc_url = app, name, f"rtmp://{host}:{port}/{app}"
        self.handshaken = False
        self.buf = bytearray()
        self.chunk = 128
        self.streams = {}  # csid -> [timestamp, delta, length, type, remaining, extended]
        self.window = 2500000
        self.acked = 0

    def connection_made(self, transport):
        self.transport = transport
        transport.write(b"\x03" + b"\x00" * 8 + os.urandom(1528))

    def data_received(self, data):
        self.bytes += len(data)
        self.buf += data
        if not self.handshaken:
            if len(self.buf) < 1 + 1536 * 2:
                return
            s1 = bytes(self.buf[1:1537])
            del self.buf[:1 + 1536 * 2]
            self.handshaken = True
            self.batch_reads()
            connect = amf_string("connect") + amf_number(1) + amf_object({
                "app": self.app, "flashVer": "LNX 9,0,124,2", "tcUrl": self.tc_url, "fpad": False,
                "capabilities": 15, "audioCodecs": 4071, "videoCodecs": 252, "videoFunction": 1})
            self.transport.write(s1 + rtmp_message(2, 1, 0, struct.pack(">I", 65536))
                                 + rtmp_message(3, 20, 0, connect)
                                 + rtmp_message(3, 20, 0, amf_string("createStream") + amf_number(2) + b"\x05")
                                 + rtmp_message(8, 20, 1, amf_string("play") + amf_number(0) + b"\x05"
                                                + amf_string(self.name) + amf_number(-1000))
                                 + rtmp_message(2, 4, 0, struct.pack(">HII", 3, 1, 1000)))
        if self.bytes - self.acked >= self.window // 2:
            self.acked = self.bytes
            self.transport.write(rtmp_message(2, 3, 0, struct.pack(">I", self.bytes & 0xFFFFFFFF)))
        self.parse()

    def parse(self):
        buf = self.buf
        pos, end = 0, len(buf)
        streams = self.streams
        while pos < end:
            start = pos
            b = buf[pos]
            fmt, csid = b >> 6, b & 0x3F
            pos += 1
            if csid == 0:
                if pos + 1 > end:
                    pos = start
                    break
                csid = 64 + buf[pos]
                pos += 1
            elif csid == 1:
                if pos + 2 > end:
                    pos = start
                    break
                csid = 64 + buf[pos] + 256 * buf[pos + 1]
                pos += 2
            st = streams.get(csid)
            if st is None:
                st = streams[csid] = [0, 0, 0, 0, 0, False]
            saved = st[:]
            if fmt < 3:
                hl = (11, 7, 3)[fmt]
                if pos + hl > end:
                    pos = start
                    break
                t = int.from_bytes(buf[pos:pos + 3], "big")
                if fmt < 2:
                    st[2] = int.from_bytes(buf[pos + 3:pos + 6], "big")
                    st[3] = buf[pos + 6]
                pos += hl
                st[5] = t == 0xFFFFFF
                if st[5]:
                    if pos + 4 > end:
                        st[:] = saved
                        pos = start
                        break
                    t = int.from_bytes(buf[pos:pos + 4], "big")
                    pos += 4
                if fmt == 0:
                    st[0], st[1] = t, 0
                else:
                    st[0], st[1] = st[0] + t, t
                st[4] = st[2]
            else:
                if st[5]:
                    if pos + 4 > end:
                        pos = start
                        break
                    pos += 4
                if st[4] == 0:
                    st[0] += st[1]
                    st[4] = st[2]
            n = min(self.chunk, st[4])
            if pos + n > end:
                st[:] = saved  # parsed again, whole, when the rest arrives
                pos = start
                break
            first = st[4] == st[2]
            st[4] -= n
            if st[4] == 0:
                kind = st[3]
                if kind == 9:
                    self.frames += 1
                    self.media = st[0] / 1000
                elif kind == 1 and first:
                    self.chunk = int.from_bytes(buf[pos:pos + 4], "big") & 0x7FFFFFFF
                elif kind == 5 and first:
                    self.window = int.from_bytes(buf[pos:pos + 4], "big")
                elif kind == 4 and first and int.from_bytes(buf[pos:pos + 2], "big") == 6:
                    self.transport.write(rtmp_message(2, 4, 0, b"\x00\x07" + bytes(buf[pos + 2:pos + 6])))
            pos += n
        del buf[:pos]


# ---------------------------------------------------------------- the ramp

async def run(args):
    loop = asyncio.get_running_loop()
    u = urllib.parse.urlparse(args.url)
    host, port = u.hostname, u.port
    if args.mode == "ws":
        make = lambda: WSViewer(host, port, u.path)
    else:
        app, name = u.path.strip("/").split("/", 1)
        make = lambda: RTMPViewer(host, port, app, name)
    server_pids = [int(p) for p in args.server_pids.split(",") if p] if args.server_pids else []
    server_pids = sorted(set(server_pids + [c for p in server_pids for c in children_of(p)]))
    viewers = []
    best = 0
    for target in [int(s) for s in args.steps.split(",")]:
        failed_connect = 0
        while len(viewers) < target:
            batch = min(50, target - len(viewers))
            results = await asyncio.gather(*[loop.create_connection(make, host, port) for _ in range(batch)],
                                           return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    failed_connect += 1
                else:
                    viewers.append(r[1])
            if failed_connect:
                break
            await asyncio.sleep(0.05)
        # Every viewer first gets its stream (up to --join-timeout); then the step settles, then the window.
        join0 = time.monotonic()
        while time.monotonic() - join0 < args.join_timeout and any(v.media is None and not v.closed for v in viewers):
            await asyncio.sleep(0.1)
        join_seconds = time.monotonic() - join0
        await asyncio.sleep(args.settle)
        before = [v.snapshot() for v in viewers]
        wall0, client0 = time.monotonic(), time.process_time()
        server0 = sum(cpu_seconds(p) for p in server_pids)
        bytes0 = sum(v.bytes for v in viewers)
        await asyncio.sleep(args.window)
        wall = time.monotonic() - wall0
        client_cpu = (time.process_time() - client0) / wall
        server_cpu = (sum(cpu_seconds(p) for p in server_pids) - server0) / wall
        received = sum(v.bytes for v in viewers) - bytes0
        behind, reasons = 0, {}
        for v, (f0, m0, c0) in zip(viewers, before):
            reason = None
            if v.error:
                reason = "refused: " + v.error
            elif v.closed:
                reason = "disconnected"
            elif v.frames - f0 < 0.9 * args.fps * wall:
                reason = "frames"
            elif m0 is None or v.media is None:
                reason = "no media within %g s of joining" % args.join_timeout
            elif wall - (v.media - m0) > 0.75:
                reason = "media clock"
            if reason:
                behind += 1
                reasons[reason] = reasons.get(reason, 0) + 1
        ok = behind == 0 and failed_connect == 0
        step = {"viewers": len(viewers), "behind": behind, "reasons": reasons, "connect_failures": failed_connect,
                "join_s": round(join_seconds, 1),
                "client_cpu": round(client_cpu, 3), "server_cpu": round(server_cpu, 3),
                "mbit_per_s": round(received * 8 / wall / 1e6, 1), "ok": ok}
        print(json.dumps(step), flush=True)
        if not ok:
            break
        best = len(viewers)
    print(json.dumps({"held": best, "reached_last_step": best == int(args.steps.split(",")[-1])}), flush=True)
    for v in viewers:
        if v.transport:
            v.transport.abort()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["ws", "rtmp"])
    p.add_argument("--url", required=True)
    p.add_argument("--steps", default="100,300,600,1000,1500,2000,2500,3000,4000,5000,6000,7000,8000")
    p.add_argument("--settle", type=float, default=1.0)
    p.add_argument("--join-timeout", type=float, default=15.0)
    p.add_argument("--window", type=float, default=8.0)
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--server-pids", default="")
    args = p.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
