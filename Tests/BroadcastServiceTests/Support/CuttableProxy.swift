import Foundation
import ReplayTesting

/// A TCP proxy on loopback in front of a server, whose connections a test can cut (as a network drop
/// would: the browser's sockets close) while it keeps accepting new ones. A small Python program with
/// real sockets; SIGUSR1 cuts every open connection.
final class CuttableProxy {
    let process: BackgroundProcess
    private(set) var port = 0

    static let program = #"""
    import os, signal, socket, sys, threading
    target = int(sys.argv[1])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[2])))
    listener.listen(64)
    open_sockets, lock = set(), threading.Lock()
    def cut(*_):
        with lock:
            for s in list(open_sockets):
                try: s.shutdown(socket.SHUT_RDWR)
                except OSError: pass
    signal.signal(signal.SIGUSR1, cut)
    def pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data: break
                b.sendall(data)
        except OSError: pass
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
    def serve(client):
        try: upstream = socket.create_connection(("127.0.0.1", target))
        except OSError: client.close(); return
        with lock: open_sockets.update((client, upstream))
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)
    print(listener.getsockname()[1], flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection,), daemon=True).start()
    """#

    /// A proxy to `port` on loopback, listening on `listen` (0: a free port).
    init(to port: Int, listen: Int = 0, directory: URL) throws {
        let script = directory.appendingPathComponent("proxy-\(UUID().uuidString).py")
        try Self.program.write(to: script, atomically: true, encoding: .utf8)
        process = try BackgroundProcess("/usr/bin/python3", arguments: [script.path, String(port), String(listen)])
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let p = Int(process.currentOutput.trimmingCharacters(in: .whitespacesAndNewlines)) {
                self.port = p
                return
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        stop()
        throw TestFailure("the proxy did not start")
    }

    /// Cuts every connection open now.
    func cut() { process.signal(SIGUSR1) }

    func stop() { process.blockingTerminate(signal: SIGKILL) }
}
