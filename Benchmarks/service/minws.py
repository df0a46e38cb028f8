"""A minimal WebSocket client (RFC 6455, client side) and a DevTools-protocol session on top of it.

Standard library only. Blocking sockets: enough for driving Chromium; the fan-out load client
(fanout.py) has its own non-blocking frame parser.
"""
import base64
import json
import os
import socket
import struct
import urllib.parse


def handshake_request(host, port, path):
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


def mask_frame(opcode, payload):
    """A client frame (always masked), FIN set."""
    header = bytearray([0x80 | opcode])
    n = len(payload)
    if n < 126:
        header.append(0x80 | n)
    elif n < 65536:
        header.append(0x80 | 126)
        header += struct.pack(">H", n)
    else:
        header.append(0x80 | 127)
        header += struct.pack(">Q", n)
    mask = os.urandom(4)
    header += mask
    if n:
        # XOR with the repeated mask through big integers: fast enough for control messages.
        m = (mask * (n // 4 + 1))[:n]
        payload = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
    return bytes(header) + payload


class WebSocket:
    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        path = u.path + ("?" + u.query if u.query else "")
        self.sock.sendall(handshake_request(u.hostname, u.port or 80, path or "/"))
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("WebSocket handshake: connection closed")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError("WebSocket handshake refused: " + head.split(b"\r\n", 1)[0].decode(errors="replace"))

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("WebSocket closed")
            self.buf += chunk

    def recv(self):
        """One whole message: (opcode, bytes). Answers pings."""
        parts, first_opcode = [], None
        while True:
            self._need(2)
            b0, b1 = self.buf[0], self.buf[1]
            n, off = b1 & 0x7F, 2
            if n == 126:
                self._need(4)
                n, off = struct.unpack(">H", self.buf[2:4])[0], 4
            elif n == 127:
                self._need(10)
                n, off = struct.unpack(">Q", self.buf[2:10])[0], 10
            self._need(off + n)
            payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
            opcode = b0 & 0x0F
            if opcode == 9:
                self.sock.sendall(mask_frame(10, payload))
                continue
            if opcode == 8:
                raise ConnectionError("WebSocket closed by peer")
            if opcode in (1, 2):
                first_opcode = opcode
            parts.append(payload)
            if b0 & 0x80:
                return first_opcode, b"".join(parts)

    def send_text(self, text):
        self.sock.sendall(mask_frame(1, text.encode()))

    def close(self):
        try:
            self.sock.sendall(mask_frame(8, b""))
        except OSError:
            pass
        self.sock.close()


class DevTools:
    """One DevTools-protocol session (a page or the browser)."""

    def __init__(self, url):
        self.ws = WebSocket(url)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send_text(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            _, data = self.ws.recv()
            message = json.loads(data)
            if message.get("id") == my_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError("page script failed: " + json.dumps(result["exceptionDetails"])[:500])
        return result.get("result", {}).get("value")

    def close(self):
        self.ws.close()
