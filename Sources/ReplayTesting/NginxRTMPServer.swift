public import Foundation
public import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A private nginx with its RTMP module (Debian's `nginx-light` + `libnginx-mod-rtmp`), as any
/// broadcast ingest: `rtmp://127.0.0.1:PORT/live/KEY` takes a publish, and `ffprobe` reads it back
/// from the same address. Runs as root without touching the system's nginx: its own prefix, config,
/// logs and pid under a temporary folder, in the foreground (`daemon off`), stopped with the handle.
public final class NginxRTMPServer: Sendable {
    public let port: Int
    public let directory: URL
    private let process: BackgroundProcess

    /// `rtmp://127.0.0.1:PORT/live`: append `/KEY`. A player that joins a running stream there gets
    /// its first picture at the next keyframe and no sound before it (`wait_key`, `wait_video`), as a
    /// live player expects: without them nginx sent a late joiner sound first, and ffprobe's short
    /// analysis saw a stream of sound alone.
    public var base: String { "rtmp://127.0.0.1:\(port)/live" }

    /// `rtmp://127.0.0.1:PORT/rec`: append `/KEY`. Live too, and what is published there is also
    /// written from its first packet to `recording(of: KEY)`: the stream exactly as the publisher sent
    /// it. (A player joining `live` mid-stream is no judge of A/V alignment: nginx-rtmp starts each of
    /// its channels, sound and video, at a time zero of its own for a late joiner.)
    public var recordingBase: String { "rtmp://127.0.0.1:\(port)/rec" }

    /// The FLV file nginx writes for a publish to `recordingBase/KEY` (complete once the publish ends).
    public func recording(of key: String) -> URL {
        directory.appendingPathComponent("rec/\(key).flv")
    }

    /// nginx's own log (its error log, at level info: each connection, publish and play), for a
    /// test's failure message.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
    }

    /// Waits until nginx has written the publish to `recordingBase/KEY` (more than 10 KB, then a
    /// second for it to close the file as the publisher leaves) and gives the file's path.
    public func finishedRecording(of key: String, timeout: Duration = .seconds(20)) async throws -> String {
        let path = recording(of: key).path
        let deadline = ContinuousClock.now + timeout
        while ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) <= 10_000 {
            guard ContinuousClock.now < deadline else { throw HarnessError("nginx wrote no recording of \(key) in \(timeout)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        return path
    }

    private init(port: Int, directory: URL, process: BackgroundProcess) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// Starts nginx on a free port and waits until it accepts connections.
    public static func start(logger: Logger = .harness) async throws -> NginxRTMPServer {
        let module = "/usr/lib/nginx/modules/ngx_rtmp_module.so"
        guard FileManager.default.fileExists(atPath: module) else {
            throw HarnessError("no \(module): install nginx-light and libnginx-mod-rtmp (scripts/bootstrap.sh does)")
        }
        var failures: [String] = []
        for _ in 0..<5 {
            let port = Int.random(in: 20_000..<40_000)
            let directory = try makeTemporaryDirectory(prefix: "ork-nginx")
            for folder in ["logs", "temp", "rec"] {
                try FileManager.default.createDirectory(at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            let prefix = directory.path
            let configuration = """
                load_module \(module);
                daemon off;
                user root;
                worker_processes 1;
                pid \(prefix)/nginx.pid;
                error_log \(prefix)/logs/error.log info;
                events { worker_connections 64; }
                rtmp {
                    server {
                        listen 127.0.0.1:\(port);
                        chunk_size 4096;
                        application live { live on; record off; wait_key on; wait_video on; }
                        application rec { live on; record all; record_path \(prefix)/rec; record_unique off; }
                    }
                }
                http {
                    access_log off;
                    client_body_temp_path \(prefix)/temp/body;
                    proxy_temp_path \(prefix)/temp/proxy;
                    fastcgi_temp_path \(prefix)/temp/fastcgi;
                    uwsgi_temp_path \(prefix)/temp/uwsgi;
                    scgi_temp_path \(prefix)/temp/scgi;
                }
                """
            try configuration.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            let process = try BackgroundProcess("nginx", arguments: ["-p", prefix, "-c", "\(prefix)/nginx.conf", "-e", "\(prefix)/logs/early.log"])
            let server = NginxRTMPServer(port: port, directory: directory, process: process)
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline, process.isRunning {
                if Self.accepts(port: port) {
                    logger.debug("nginx-rtmp ready", metadata: ["port": "\(port)", "pid": "\(process.pid)"])
                    return server
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let early = (try? String(contentsOf: directory.appendingPathComponent("logs/early.log"), encoding: .utf8)) ?? ""
            failures.append("port \(port): \(process.currentError.suffix(300)) \(early.suffix(300))")
            await server.stop()
        }
        throw HarnessError("nginx-rtmp did not start:\n" + failures.joined(separator: "\n"))
    }

    /// Runs `body` with a started nginx-rtmp, stopped afterwards whether `body` threw or not.
    public static func with<Result: Sendable>(_ body: (NginxRTMPServer) async throws -> Result) async throws -> Result {
        let nginx = try await start()
        do {
            let result = try await body(nginx)
            await nginx.stop()
            return result
        } catch {
            await nginx.stop()
            throw error
        }
    }

    /// Stops nginx and removes its folder.
    public func stop() async {
        _ = await process.terminate(grace: .seconds(2))
        try? FileManager.default.removeItem(at: directory)
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
