import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on loopback in front of a server, for tests of what the network does to a stream:
/// `stop()` is a network cut (the listener and every connection close, new ones are refused) and
/// `start()` brings it back on the same port; `bytesPerSecond` throttles what goes to the server
/// (a slow uplink). A small Python program with real sockets, started as a `BackgroundProcess`.
public final class TCPProxy: Sendable {
    public let targetPort: Int
    /// The port clients connect to (the same after each `start`).
    public let port: Int
    public let bytesPerSecond: Int?
    private let script: URL
    private let process: Mutex<BackgroundProcess?>

    static let program = #"""
    import socket, sys, threading, time
    target, port, rate = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rate > 0:
        # A slow link has small buffers (accepted sockets inherit them): what it cannot carry
        # backs up at the sender.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    def pump(a, b, limited):
        try:
            while True:
                data = a.recv(4096 if limited else 65536)
                if not data: break
                b.sendall(data)
                if limited: time.sleep(len(data) / rate)
        except OSError: pass
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
    def serve(client):
        try: upstream = socket.create_connection(("127.0.0.1", target))
        except OSError: client.close(); return
        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
        pump(client, upstream, rate > 0)
    print(listener.getsockname()[1], flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection,), daemon=True).start()
    """#

    /// Starts a proxy to `targetPort` on a free port (throttled to `bytesPerSecond` towards the server, if given).
    public init(to targetPort: Int, bytesPerSecond: Int? = nil) async throws {
        self.targetPort = targetPort
        self.bytesPerSecond = bytesPerSecond
        let directory = try makeTemporaryDirectory(prefix: "ork-proxy")
        script = directory.appendingPathComponent("proxy.py")
        try Self.program.write(to: script, atomically: true, encoding: .utf8)
        let slot = Mutex<BackgroundProcess?>(nil)
        port = try await Self.launch(script: script, target: targetPort, port: 0, rate: bytesPerSecond, into: slot)
        process = slot
    }

    deinit {
        process.withLock { $0?.signal(SIGKILL) }
        try? FileManager.default.removeItem(at: script.deletingLastPathComponent())
    }

    private static func launch(script: URL, target: Int, port: Int, rate: Int?, into slot: borrowing Mutex<BackgroundProcess?>) async throws -> Int {
        let child = try BackgroundProcess("python3", arguments: [script.path, String(target), String(port), String(rate ?? 0)])
        slot.withLock { $0 = child }
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, child.isRunning {
            if let listening = Int(child.currentOutput.trimmingCharacters(in: .whitespacesAndNewlines)) { return listening }
            try await Task.sleep(for: .milliseconds(20))
        }
        await child.terminate(grace: .milliseconds(100))
        throw HarnessError("the TCP proxy did not start: \(child.currentError.suffix(500))")
    }

    /// The network comes back: listens again on `port`.
    public func start() async throws {
        guard process.withLock({ $0 == nil }) else { return }
        // The port was just closed; binding it again may take a moment under load.
        var lastError: (any Error)?
        for _ in 0..<20 {
            do {
                _ = try await Self.launch(script: script, target: targetPort, port: port, rate: bytesPerSecond, into: process)
                return
            } catch {
                lastError = error
                process.withLock { $0 = nil }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        throw lastError ?? HarnessError("the TCP proxy did not start again on port \(port)")
    }

    /// A network cut: the proxy ends, closing its listener and every connection through it.
    public func stop() async {
        guard let child = process.withLock({ slot -> BackgroundProcess? in defer { slot = nil }; return slot }) else { return }
        await child.terminate(grace: .zero)
    }
}
